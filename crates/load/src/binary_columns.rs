//! Which columns the server reads in the binary set: LOAD DATA reads
//! their fields byte by byte whatever the file's character set (the
//! others a character at a time), asked of the server itself, one query
//! per table: `SELECT cols FROM t LIMIT 0`, whose result metadata gives
//! each column's set (63, binary, for numbers, dates, BINARY, BLOB...).
//! Used by the CSV/TSV loader (`flat/table.rs`) and the INSERT fast path
//! (`fast_path.rs`) alike.

use mysql_async::prelude::Queryable;

/// The character set id a result's metadata gives a binary column.
const BINARY_SET: u16 = 63;

/// For each of `columns` (a select list: names joined by commas, or `*`)
/// of `table`, whether the server describes it in the binary set.
pub async fn binary_columns(
    conn: &mut mysql_async::Conn,
    table: &str,
    columns: &str,
) -> Result<Vec<bool>, mysql_async::Error> {
    let result = conn
        .query_iter(format!("SELECT {columns} FROM {table} LIMIT 0"))
        .await?;
    let binary = result
        .columns()
        .map(|cols| {
            cols.iter()
                .map(|c| c.character_set() == BINARY_SET)
                .collect()
        })
        .unwrap_or_default();
    result.drop_result().await?;
    Ok(binary)
}
