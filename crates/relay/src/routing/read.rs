//! Where a client's statement goes, as pure decisions: the route kind
//! (read/write split, query rules) and what a read sent to a replica must
//! wait for (read-your-writes). The session (`frontend/session/route.rs`)
//! gathers the facts, asks here and carries the answer out (leases, waits,
//! metrics); which backend of a route serves is `pick.rs`'s.

use serde::Deserialize;

use crate::routing::Route;

/// Read-your-writes for reads sent to replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Consistency {
    /// Replicas may lag.
    None,
    /// A client's reads see its own writes: the replica waits for the
    /// client's last write (MASTER_GTID_WAIT, bounded), else the primary.
    Session,
    /// Reads see every write committed before they arrived: the replica
    /// waits for the primary's current binlog position (one small query to
    /// the primary per read), else the primary.
    Global,
}

/// What the route kind of a statement depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// `--read-write-split` is on.
    pub split: bool,
    /// The statement only reads (and names nothing that pins it).
    pub read: bool,
    /// It reads the server itself — a global system variable, one of the
    /// server's own schemas (also as the session's default database), a
    /// user lock's state — which a replica has its own of: the primary
    /// answers, as it answers the SHOW statements of the same facts.
    pub reads_server: bool,
    /// Nothing of the client's session ties it to its connection (no
    /// transaction, temporary table, lock, pin).
    pub may_read_elsewhere: bool,
    /// The client holds a server connection now.
    pub holds_conn: bool,
    /// The route so far (the default, or a rule's).
    pub current: Route,
    /// A query rule fixed the route.
    pub fixed: bool,
}

/// The route kind of a statement: a plain read of data outside a
/// transaction goes to a replica when the split is on; everything else
/// stays where it was (the writable backend by default, a rule's choice).
pub fn route_for(f: Facts) -> Route {
    if f.split
        && f.may_read_elsewhere
        && !f.holds_conn
        && f.read
        && !f.reads_server
        && f.current == Route::Primary
        && !f.fixed
    {
        Route::Replica
    } else {
        f.current
    }
}

/// Whether a statement may run on the connection the client holds;
/// `leased_on_replica`: the server was a replica when the client got the
/// connection. There (a read left something open the relay did not
/// expect: a transaction, where that replica's sessions start with
/// autocommit off): a read, or the one COMMIT or ROLLBACK that ends it;
/// anything else could write there (root's writes pass read_only) and is
/// refused. A connection got on the primary (or the one backend) stays no
/// replica read when its server turns read_only under the session:
/// everything runs, and the server answers (a session holding a temporary
/// table was refused its next statement when a test set read_only).
pub fn runs_on_held(
    leased_on_replica: bool,
    read: bool,
    ends_transaction: bool,
    statements: usize,
) -> bool {
    !leased_on_replica || read || (ends_transaction && statements == 1)
}

/// What a query rule's `route` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleRoute {
    Primary,
    Replica,
    /// A replica of a named group: its index, or None when no backend
    /// has that group (then any replica).
    Group(Option<usize>),
}

/// A matching rule's route, fixed for the statement; None leaves the route
/// as it is. Rules route only when the split is on; a rule's replica is
/// not taken by a client holding a connection or whose session is tied
/// to one (`tied`: a transaction, autocommit off — the read would open
/// one on the replica and the client's writes would follow it there —,
/// session mode, a pin).
pub fn rule_route(split: bool, to: RuleRoute, holds_conn: bool, tied: bool) -> Option<Route> {
    if !split {
        return None;
    }
    match to {
        RuleRoute::Primary => Some(Route::Primary),
        RuleRoute::Replica | RuleRoute::Group(_) if holds_conn || tied => None,
        RuleRoute::Replica | RuleRoute::Group(None) => Some(Route::Replica),
        RuleRoute::Group(Some(g)) => Some(Route::Group(g)),
    }
}

/// What a read on a replica does first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BeforeRead {
    /// Reads as it is.
    Nothing,
    /// A Galera node: the read itself carries the causality wait
    /// (`SET STATEMENT wsrep_sync_wait = 1 FOR ...`).
    CausalRead,
    /// Goes to the primary (the Galera writer) instead.
    OnPrimary,
    /// Waits until the replica has applied this GTID position.
    WaitFor(String),
    /// Asks the primary for its position now, then waits for it.
    WaitForPrimary,
}

/// The read-your-writes step before a read on a replica. `galera`: the
/// replica is a Galera node; `text`: the read is a COM_QUERY (a prepared
/// statement's execute cannot carry a setting); `own_write_unknown`: the
/// client's last write committed and its position could not be read;
/// `last_write`: its position when read.
pub fn before_read(
    consistency: Consistency,
    galera: bool,
    text: bool,
    own_write_unknown: bool,
    last_write: Option<&str>,
) -> BeforeRead {
    if galera {
        let needed = match consistency {
            Consistency::None => false,
            Consistency::Session => last_write.is_some(),
            Consistency::Global => true,
        };
        return match (needed, text) {
            (false, _) => BeforeRead::Nothing,
            (true, true) => BeforeRead::CausalRead,
            (true, false) => BeforeRead::OnPrimary,
        };
    }
    match consistency {
        Consistency::None => BeforeRead::Nothing,
        Consistency::Session if own_write_unknown => BeforeRead::OnPrimary,
        Consistency::Session => match last_write {
            Some(g) => BeforeRead::WaitFor(g.to_string()),
            None => BeforeRead::Nothing,
        },
        Consistency::Global => BeforeRead::WaitForPrimary,
    }
}

/// Whether the replica must wait for `want`: only a read-only server that
/// has not applied it yet (a writable one is the primary).
pub fn must_wait(read_only: bool, applied: &str, want: &str) -> bool {
    read_only && !covers(applied, want)
}

/// After a statement: whether the client's write position is to be read
/// and remembered (consistency = session with the split on, a write that
/// committed on the writable backend outside a transaction).
pub fn remember_write(
    split: bool,
    consistency: Consistency,
    read: bool,
    failed: bool,
    in_trans: bool,
    on_replica: bool,
) -> bool {
    split && consistency == Consistency::Session && !read && !failed && !in_trans && !on_replica
}

/// Whether GTID position `pos` (as `@@gtid_slave_pos` lists it) holds
/// every domain's sequence of `want`.
pub fn covers(pos: &str, want: &str) -> bool {
    want.split(',').all(|g| covers_one(pos, g))
}

fn covers_one(pos: &str, gtid: &str) -> bool {
    let parse = |g: &str| -> Option<(u32, u64)> {
        let mut it = g.trim().split('-');
        let domain = it.next()?.parse().ok()?;
        let _server = it.next()?;
        let seq = it.next()?.parse().ok()?;
        Some((domain, seq))
    };
    let Some((d, want)) = parse(gtid) else {
        return true; // nothing to wait for
    };
    pos.split(',')
        .filter_map(parse)
        .any(|(pd, seq)| pd == d && seq >= want)
}

#[cfg(test)]
mod tests;
