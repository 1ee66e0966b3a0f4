//! A text query's analysis — its tokens, effects and digest — had once
//! per statement: from the result cache when it holds entries of that
//! very text (`Cache::analysis`: a pure function of the bytes, the same in
//! every session), else read now (`read_statement`).

use std::sync::Arc;

use super::{read_statement, Session};
use crate::cache::decide;
use crate::config::Mode;
use crate::protocol::sql::{Analysis, Effects, Query};

type Token = (sqlfleet_dump::lex::Tok, std::ops::Range<usize>);

pub(super) struct Analysed<'t> {
    kept: Option<Arc<Analysis>>,
    read: Option<Query<'t>>,
    /// Taken by the caller (`Session::query`), as is `digest`.
    pub(super) fx: Effects,
    /// Worked out when wanted (digests, rules or the cache).
    pub(super) digest: Option<String>,
}

impl Analysed<'_> {
    pub(super) fn tokens(&self) -> &[Token] {
        match (&self.kept, &self.read) {
            (Some(a), _) => &a.toks,
            (None, Some(q)) => q.tokens(),
            (None, None) => &[],
        }
    }

    /// What the cache keeps beside an entry of this text: the analysis it
    /// gave, or this one (`fx` and `digest` as they were taken).
    pub(super) fn to_keep(&self, fx: &Effects, digest: Option<&str>) -> Arc<Analysis> {
        self.kept.clone().unwrap_or_else(|| {
            Arc::new(Analysis {
                toks: self.tokens().to_vec(),
                fx: fx.clone(),
                digest: digest.unwrap_or_default().to_string(),
            })
        })
    }
}

impl Session {
    /// How the server reads this session's text (`dialect::of_session`).
    pub(super) fn dialect(&mut self) -> Option<sqlfleet_dump::lex::Dialect> {
        let (gen, collation) = (self.st.settings_gen(), self.shape.collation);
        if let Some((g, c, d)) = self.dialect_memo {
            if g == gen && c == collation && self.login_sql_mode.is_some() {
                return Some(d);
            }
        }
        // A session that began before the first health check read the
        // global takes it once one has (the same global, a moment later).
        let read_now;
        let login_mode = match &self.login_sql_mode {
            Some(m) => Some(m.as_str()),
            None => {
                read_now = self.ctx.pool.health.sql_mode();
                read_now.as_deref()
            }
        };
        let d = super::dialect::of_session(self.st.settings(), login_mode, collation);
        if let (Some(d), true) = (d, self.login_sql_mode.is_some()) {
            self.dialect_memo = Some((gen, collation, d));
        }
        d
    }

    /// `text`'s analysis (see the module doc).
    pub(super) fn analyse<'t>(
        &mut self,
        text: &'t [u8],
        caching: bool,
        want_digest: bool,
    ) -> Analysed<'t> {
        let dialect = self.dialect();
        // (The kept analyses are the default dialect's.)
        let kept = (caching
            && dialect == Some(sqlfleet_dump::lex::Dialect::default())
            && self.st.mode() == Mode::Transaction
            && self.streamed.is_none()
            && decide::may_select(text))
        .then(|| self.ctx.cache.analysis(text))
        .flatten();
        match kept {
            Some(a) => Analysed {
                fx: a.fx.clone(),
                digest: Some(a.digest.clone()),
                kept: Some(a),
                read: None,
            },
            None => {
                let (q, fx) = read_statement(
                    text,
                    self.st.mode(),
                    want_digest,
                    dialect,
                    self.account.is_none(),
                );
                let digest = q.as_ref().filter(|_| want_digest).map(|q| q.digest());
                Analysed {
                    kept: None,
                    read: q,
                    fx,
                    digest,
                }
            }
        }
    }
}
