//! MariaDB/MySQL server error codes the commands decide on, named once:
//! what is worth another attempt, and what says a re-run DDL statement had
//! already been applied. The loader and the replicator both ask here.

/// Lock wait timeout and deadlock: the transaction rolled back, the
/// connection is fine; run it again.
pub const TRANSIENT: &[u16] = &[1205, 1213];

/// The connection or the server went away (also as server-range codes some
/// drivers report): server shutting down, connection killed, gone, lost.
pub const CONNECTION_LOST: &[u16] = &[1053, 1927, 2006, 2013];

/// The statement was interrupted (KILL QUERY, max_statement_time); the
/// connection is still there.
pub const INTERRUPTED: u16 = 1317;

/// A statement stopped part-way for a reason of its moment, not of its
/// text or data: killed (1317, 1927), the server shutting down (1053), a
/// lock wait timeout or deadlock (1205, 1213, 1614), max_statement_time
/// (1969). A binlog event that carries one of these as the source's error
/// cannot be replayed to the same end (a native replica stops there too:
/// "Query partially completed on the master").
pub const STOPPED_PART_WAY: &[u16] = &[1053, 1205, 1213, 1317, 1614, 1927, 1969];

/// ER_DUP_ENTRY: a duplicate key.
pub const DUPLICATE_KEY: u16 = 1062;

/// A creating DDL statement that had already run: database (1007), table
/// (1050), column (1060), key (1061), routine (1304), trigger (1359), event
/// (1537), foreign key name (1826) exists.
pub const EXISTS: &[u16] = &[1007, 1050, 1060, 1061, 1304, 1359, 1537, 1826];

/// ER_TABLE_EXISTS_ERROR: the table a CREATE makes is there (one of
/// [`EXISTS`], decided on alone where a half-made table may be the cause).
pub const TABLE_EXISTS: u16 = 1050;

/// ER_DUP_KEYNAME: the index an ALTER adds is there (one of [`EXISTS`]:
/// a resumed load's index step that had already run).
pub const KEY_EXISTS: u16 = 1061;

/// A dropping DDL statement that had already run: database (1008), table
/// (1051, 1146), column or key (1091), routine (1305), trigger (1360),
/// event (1539), sequence (4091), view (4092) is gone.
pub const GONE: &[u16] = &[1008, 1051, 1091, 1146, 1305, 1360, 1539, 4091, 4092];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sets_do_not_overlap() {
        for c in EXISTS {
            assert!(!GONE.contains(c) && !TRANSIENT.contains(c) && !CONNECTION_LOST.contains(c));
            assert_ne!(*c, INTERRUPTED);
        }
        for c in GONE {
            assert!(!TRANSIENT.contains(c) && !CONNECTION_LOST.contains(c));
        }
    }
}
