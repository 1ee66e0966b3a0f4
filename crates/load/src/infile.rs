//! How the rows of a `LOAD DATA LOCAL` reach the driver: as pieces of
//! one buffer, never as one table-sized piece.
//!
//! The driver copies each piece it is given into a pooled packet buffer
//! and keeps pooled buffers only up to 4 MiB; a piece of tens of MiB was
//! copied into fresh memory (a page fault per 4 KiB) twice per batch.
//! Pieces of 1 MiB are slices of the one buffer (no copy here) and land
//! in pooled buffers the driver reuses.

use std::ops::Range;

use bytes::Bytes;
use futures_util::StreamExt;
use mysql_async::Conn;

/// Bytes per piece.
pub const PIECE: usize = 1 << 20;

/// `range` of `all` in pieces of at most [`PIECE`] bytes.
pub fn pieces(all: &Bytes, range: Range<usize>) -> Vec<Bytes> {
    (range.start..range.end)
        .step_by(PIECE)
        .map(|a| all.slice(a..(a + PIECE).min(range.end)))
        .collect()
}

/// The next `LOAD DATA LOCAL` on `conn` reads `range` of `all`. `each`
/// is told each piece's length as the driver takes it, and says whether
/// to go on: once it says no (an interrupt), the piece is an error
/// instead, the statement fails, and the caller rolls back the rows it
/// took (a file that merely ended early would load part of the batch as
/// if whole).
pub fn send(
    conn: &mut Conn,
    all: &Bytes,
    range: Range<usize>,
    each: impl Fn(usize) -> bool + Send + Sync + 'static,
) {
    let data = pieces(all, range);
    conn.set_infile_handler(async move {
        Ok(
            futures_util::stream::iter(data.into_iter().map(move |piece| {
                if !each(piece.len()) {
                    Err(std::io::Error::new(
                        std::io::ErrorKind::Interrupted,
                        "sqlfleet load: interrupted",
                    ))
                } else {
                    Ok(piece)
                }
            }))
            .boxed(),
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_the_range_exactly_in_order() {
        let all = Bytes::from((0..(3 * PIECE + 10)).map(|i| i as u8).collect::<Vec<u8>>());
        for range in [0..0, 0..1, 5..PIECE + 5, 0..all.len(), PIECE..2 * PIECE] {
            let p = pieces(&all, range.clone());
            assert!(p.iter().all(|b| !b.is_empty() && b.len() <= PIECE));
            assert_eq!(p.concat(), &all[range.clone()], "{range:?}");
        }
        assert_eq!(pieces(&all, 0..all.len()).len(), 4);
    }
}
