//! XA transactions a seed's snapshot cannot hold.
//!
//! A branch prepared on the source (`XA PREPARE`) is not committed: a
//! consistent snapshot does not see its changes, and its XA PREPARE group
//! is logged before the snapshot's GTID, where replication of the source
//! starts. Its `XA COMMIT`, later, then ends a prepare that replication
//! never read: the source stops there (source/xa.rs, named), and the copy
//! lacks the branch's changes until the operator acts. So a seed waits
//! for the prepared branches it finds before its dump to end (`XA
//! RECOVER`), and refuses if they do not; after the dump, a branch still
//! prepared whose XA PREPARE is not in the binlog after the snapshot was
//! prepared before it: the seed refuses that dump (its next run dumps
//! again). A branch prepared in the instant between the last check and
//! the snapshot and ended before the check after the dump is left to the
//! stop above.
//!
//! Pure but for [`recovered`] and [`prepared_after`]; replicate_seed.rs in the binary asks and
//! carries the answers out.

use std::collections::HashSet;

use crate::gtid::XaId;
use crate::seed::SeedError;

/// The source's prepared XA branches (`XA RECOVER`).
pub async fn recovered(source: &sqlfleet_conn::Target) -> Result<Vec<XaId>, SeedError> {
    use mysql_async::prelude::Queryable;
    let mut c = crate::seed::connect(source, "source").await?;
    let rows: Vec<mysql_async::Row> = c
        .query("XA RECOVER")
        .await
        .map_err(crate::seed::server("source: XA RECOVER"))?;
    let _ = c.disconnect().await;
    // A row that does not read as a branch refuses the seed rather than
    // be passed over as none.
    rows.into_iter()
        .map(|r| {
            let read = mysql_async::from_row_opt::<(i64, u32, u32, Vec<u8>)>(r.clone())
                .ok()
                .and_then(|(format, g, b, data)| branch(format, g, b, &data));
            read.ok_or_else(|| {
                SeedError::Unreadable(format!(
                    "XA RECOVER row {r:?} does not read as an XA transaction id"
                ))
            })
        })
        .collect()
}

/// Of `wanted`, the XA transactions prepared in the source's binlog
/// after `from` (the snapshot), up to its position now.
pub async fn prepared_after(
    source: &sqlfleet_conn::Target,
    name: &str,
    from: &crate::gtid::GtidPos,
    wanted: &[XaId],
) -> Result<HashSet<XaId>, String> {
    crate::source::xa_prepared_after(source, name, from, wanted).await
}

/// An `XA RECOVER` row as an id (`None` when its lengths do not fit its
/// data).
pub fn branch(format: i64, gtrid_len: u32, bqual_len: u32, data: &[u8]) -> Option<XaId> {
    let (g, b) = (gtrid_len as usize, bqual_len as usize);
    let gtrid = data.get(..g)?;
    let bqual = data.get(g..g.checked_add(b)?)?;
    XaId::new(u32::try_from(format).ok()?, gtrid, bqual)
}

/// Of the branches `recovered` still prepared after a dump, those the
/// snapshot lacks: no XA PREPARE of theirs is in the binlog after it
/// (`prepared_after`).
pub fn before_the_snapshot(recovered: &[XaId], prepared_after: &HashSet<XaId>) -> Vec<XaId> {
    recovered
        .iter()
        .filter(|x| !prepared_after.contains(x))
        .copied()
        .collect()
}

/// The branches as a list for a message (`X'..',X'..',format`, as `XA
/// RECOVER FORMAT='SQL'` prints them).
pub fn list(xids: &[XaId]) -> String {
    xids.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_xa_recover_row_is_its_id_when_its_lengths_fit() {
        let x = branch(1, 2, 1, b"abc").expect("fits");
        assert_eq!((x.gtrid(), x.bqual(), x.format), (&b"ab"[..], &b"c"[..], 1));
        assert_eq!(x.to_string(), "X'6162',X'63',1");
        assert!(branch(1, 3, 1, b"abc").is_none());
        assert!(branch(1, u32::MAX, u32::MAX, b"abc").is_none());
        assert!(branch(-1, 1, 0, b"a").is_none());
        assert!(branch(0, 65, 0, &[b'a'; 65]).is_none());
        assert_eq!(
            branch(0, 0, 0, b"").map(|x| x.to_string()),
            Some("X'',X'',0".into())
        );
    }

    #[test]
    fn a_branch_prepared_after_the_snapshot_is_read_there_and_not_lacking() {
        let a = branch(1, 1, 0, b"a").expect("a");
        let b = branch(1, 1, 0, b"b").expect("b");
        let c = branch(2, 1, 0, b"a").expect("c");
        // (still prepared, prepared after the snapshot, lacking)
        for (recovered, after, want) in [
            (vec![], vec![], vec![]),
            (vec![a], vec![a], vec![]),
            (vec![a, b], vec![a], vec![b]),
            // The same transaction id with another format is another branch.
            (vec![c], vec![a], vec![c]),
            (vec![a, b], vec![], vec![a, b]),
        ] {
            let after: HashSet<XaId> = after.into_iter().collect();
            assert_eq!(before_the_snapshot(&recovered, &after), want);
        }
        assert_eq!(list(&[a, b]), "X'61',X'',1; X'62',X'',1");
    }
}
