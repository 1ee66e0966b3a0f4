//! MariaDB's compressed binlog events (`log_bin_compress=ON`), made into
//! the plain events they stand for before anything else reads them.
//!
//! A compressed Query event keeps its post-header, status variables and
//! database as they are and compresses the statement; a compressed rows
//! event keeps its post-header (and a V2 event's extra data), column count
//! and column bitmaps, and compresses the rows. The compressed part starts
//! with one byte — `0x80`, the algorithm in bits 4..6 (0: zlib, the only
//! one the server writes), how many length bytes follow in bits 0..2 —
//! then the uncompressed length, high byte first, then a zlib stream.
//! A native replica's I/O thread undoes this before its relay log; the
//! binlog readers (replicate's applier, the relay's cache follower) do it
//! on reading, so every later step (reading the statement, renaming, the
//! `BINLOG` the target decodes, what a commit made stale) sees the events
//! native replication would. Written by hand because no library reads
//! these events; the length prefix, the zlib framing and the post-header
//! the source's format description gives are checked (an event whose
//! bytes disagree with what they claim is refused, never guessed at).
//! Property-tested here and fuzzed (`replicate_event`).

use std::io::Read;

/// Binlog event header length (v4).
const HEADER_LEN: usize = 19;
/// CRC32 checksum length.
const CRC_LEN: usize = 4;

/// Why a compressed event was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} ({len})")]
pub struct DecodeError {
    pub what: String,
    pub len: usize,
}

fn fix_crc(raw: &mut [u8], crc: bool) {
    if crc && raw.len() >= HEADER_LEN + CRC_LEN {
        let n = raw.len() - CRC_LEN;
        let c = crc32fast::hash(&raw[..n]);
        raw[n..].copy_from_slice(&c.to_le_bytes());
    }
}

/// The plain event type a compressed one stands for.
pub fn plain_type(ty: u8) -> Option<u8> {
    match ty {
        165 => Some(2),                   // Query
        166..=168 => Some(ty - 166 + 23), // Write/Update/Delete rows V1
        169..=171 => Some(ty - 169 + 30), // Write/Update/Delete rows V2
        _ => None,
    }
}

fn err(what: &str, len: usize) -> DecodeError {
    DecodeError {
        what: what.to_string(),
        len,
    }
}

/// Where a compressed event's compressed part starts.
fn compressed_at(raw: &[u8], ty: u8, end: usize, ph: usize) -> Result<usize, DecodeError> {
    let body = HEADER_LEN + ph;
    let byte = |i: usize| {
        raw.get(i)
            .copied()
            .filter(|_| i < end)
            .ok_or_else(|| err("compressed event shorter than its header says", raw.len()))
    };
    if ty == 165 {
        // thread id 4, exec time 4, database length 1, error code 2,
        // status variables' length 2; then those, the database, a NUL.
        if ph < 13 {
            return Err(err("compressed Query event with a short post-header", ph));
        }
        let db_len = byte(HEADER_LEN + 8)? as usize;
        let sv_len = u16::from_le_bytes([byte(HEADER_LEN + 11)?, byte(HEADER_LEN + 12)?]) as usize;
        let nul = body + sv_len + db_len;
        if byte(nul)? != 0 {
            return Err(err(
                "compressed Query event without the NUL after its database",
                raw.len(),
            ));
        }
        return Ok(nul + 1);
    }
    let mut at = body;
    if ph == 10 {
        // A V2 rows event: its extra data's length counts its own 2 bytes.
        let extra = u16::from_le_bytes([byte(HEADER_LEN + 8)?, byte(HEADER_LEN + 9)?]) as usize;
        if extra < 2 {
            return Err(err("rows event with an extra-data length under 2", extra));
        }
        at += extra - 2;
    } else if ph != 6 && ph != 8 {
        return Err(err("compressed rows event with an unknown post-header", ph));
    }
    // The column count (a length-encoded integer), then one bitmap (two
    // for an update: before and after image).
    let (width, n) = match byte(at)? {
        w @ 0..=250 => (u64::from(w), 1),
        252 => (
            u64::from(u16::from_le_bytes([byte(at + 1)?, byte(at + 2)?])),
            3,
        ),
        253 => (
            u64::from_le_bytes([byte(at + 1)?, byte(at + 2)?, byte(at + 3)?, 0, 0, 0, 0, 0]),
            4,
        ),
        _ => return Err(err("rows event with an unreadable column count", raw.len())),
    };
    let bitmaps = if ty == 167 || ty == 170 { 2 } else { 1 };
    let bits = usize::try_from(width.div_ceil(8))
        .map_err(|_| err("rows event with too many columns", raw.len()))?;
    Ok(at + n + bitmaps * bits)
}

/// The plain event a compressed one (`raw`: header, body and, when `crc`,
/// its CRC32) stands for, with its length and CRC32 made anew and the
/// position in the source's binlog kept. `post_header_lens`: the source's
/// format description's post-header length of each event type (type 1
/// first); the compressed type's and its plain type's must agree.
pub fn plain_event(raw: &[u8], crc: bool, post_header_lens: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let ty = *raw
        .get(4)
        .ok_or_else(|| err("event shorter than its header", raw.len()))?;
    let plain = plain_type(ty).ok_or_else(|| err("not a compressed event type", ty.into()))?;
    let ph = |t: u8| post_header_lens.get(usize::from(t) - 1).copied();
    match (ph(ty), ph(plain)) {
        (Some(c), Some(p)) if c == p => uncompress(raw, crc, c),
        (c, p) => Err(err(
            &format!(
                "the format description gives compressed type {ty} a post-header of {c:?} bytes and its plain type {plain} {p:?}"
            ),
            raw.len(),
        )),
    }
}

/// The largest event a server writes (max_allowed_packet's ceiling).
const MAX_EVENT: usize = 1 << 30;
/// What is reserved for an event's uncompressed part before it is read.
const PREALLOCATED: usize = 1 << 20;

fn uncompress(raw: &[u8], crc: bool, ph: u8) -> Result<Vec<u8>, DecodeError> {
    let end = raw
        .len()
        .checked_sub(if crc { CRC_LEN } else { 0 })
        .filter(|e| *e >= HEADER_LEN)
        .ok_or_else(|| err("event shorter than its header", raw.len()))?;
    let ty = raw[4];
    let plain = plain_type(ty).ok_or_else(|| err("not a compressed event type", ty.into()))?;
    let at = compressed_at(raw, ty, end, ph.into())?;
    let head = *raw
        .get(at)
        .filter(|_| at < end)
        .ok_or_else(|| err("compressed event without its compressed part", raw.len()))?;
    let lenlen = usize::from(head & 0x07);
    if head & 0x80 == 0 || (head & 0x70) != 0 || !(1..=4).contains(&lenlen) {
        return Err(err(
            "compressed part with an unknown header byte (not zlib, or no length)",
            head.into(),
        ));
    }
    let len_bytes = raw
        .get(at + 1..at + 1 + lenlen)
        .filter(|_| at + 1 + lenlen <= end)
        .ok_or_else(|| err("compressed part cut inside its length", raw.len()))?;
    let len = len_bytes
        .iter()
        .fold(0usize, |n, b| (n << 8) | usize::from(*b));
    if len > MAX_EVENT {
        return Err(err(
            &format!("compressed part claiming {len} bytes, over the 1 GiB an event can hold"),
            raw.len(),
        ));
    }
    // Room for what the bytes at hand could be, not for what they claim:
    // a few corrupt bytes must not reserve a gigabyte.
    let mut out = Vec::with_capacity(at + len.min(PREALLOCATED) + CRC_LEN);
    out.extend_from_slice(&raw[..at]);
    out[4] = plain;
    // At most one byte past what it claims, to tell a longer stream.
    let got = flate2::read::ZlibDecoder::new(&raw[at + 1 + lenlen..end])
        .take(len as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| {
            err(
                &format!("compressed part that zlib cannot read ({e})"),
                raw.len(),
            )
        })?;
    if got != len {
        return Err(err(
            &format!("compressed part of {got} bytes where it claims {len}"),
            raw.len(),
        ));
    }
    if crc {
        out.extend_from_slice(&[0; CRC_LEN]);
    }
    let size = u32::try_from(out.len()).map_err(|_| err("event over 4 GiB", out.len()))?;
    out[9..13].copy_from_slice(&size.to_le_bytes());
    fix_crc(&mut out, crc);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn crc_ok(raw: &[u8]) -> bool {
        let mut c = raw.to_vec();
        fix_crc(&mut c, true);
        c == raw
    }

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(data).expect("compress");
        z.finish().expect("compress")
    }

    /// The compressed part as the server writes it: the header byte, the
    /// length in as few bytes as it takes, high byte first, the stream.
    fn part(data: &[u8]) -> Vec<u8> {
        let n = data.len() as u32;
        let lenlen = (4 - n.leading_zeros() as usize / 8).max(1);
        let mut p = vec![0x80 | lenlen as u8];
        p.extend_from_slice(&n.to_be_bytes()[4 - lenlen..]);
        p.extend_from_slice(&zlib(data));
        p
    }

    fn event(ty: u8, body: &[u8], crc: bool) -> Vec<u8> {
        let mut e = vec![0u8; HEADER_LEN];
        e[4] = ty;
        e[13..17].copy_from_slice(&1234u32.to_le_bytes());
        e.extend_from_slice(body);
        if crc {
            e.extend_from_slice(&[0; CRC_LEN]);
        }
        let n = e.len() as u32;
        e[9..13].copy_from_slice(&n.to_le_bytes());
        fix_crc(&mut e, crc);
        e
    }

    fn query_head(db: &[u8], sv: &[u8]) -> Vec<u8> {
        let mut b = vec![8, 0, 0, 0, 0, 0, 0, 0, db.len() as u8, 0, 0];
        b.extend_from_slice(&(sv.len() as u16).to_le_bytes());
        b.extend_from_slice(sv);
        b.extend_from_slice(db);
        b.push(0);
        b
    }

    /// Bytes read from a real MariaDB 10.11.19 binlog (`log_bin_compress=ON`,
    /// `log_bin_compress_min_len=10`), each with its CRC32: a compressed
    /// Query event (`CREATE TABLE z.t (id INT PRIMARY KEY, v TEXT)`) and a
    /// compressed Write_rows V1 event (rows `(1, REPEAT('a', 500))` and
    /// `(2, 'bbbb…')`); the source's format description gives them 13 and 8.
    const REAL_QUERY: &str = "94ea126ba5010000007f0000006e02000000000800000000000000000000230000000000010100002054000000000603737464042d002d002d0081160000000000000000812d789c730e72750c7155087174f27155a8d22b51d0c84c51f0f40b510808f2f4750c8a54f0768dd451285308718d08d1040019bf0c365c71b2a0";
    const REAL_ROWS: &str = "94ea126ba6010000004100000073030000000016000000000001000203820228789cfbc3c8c0c0f0853171148c38f0870918f56a0c4944010039f1cf171e627036";

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    }

    #[test]
    fn real_compressed_events_read_as_the_plain_events_they_stand_for() {
        for (text, ph, plain, has) in [
            (
                REAL_QUERY,
                13,
                2,
                b"CREATE TABLE z.t (id INT PRIMARY KEY, v TEXT)".to_vec(),
            ),
            (REAL_ROWS, 8, 23, b"a".repeat(500)),
        ] {
            let raw = hex(text);
            assert!(crc_ok(&raw), "the sample's own CRC32");
            let out = uncompress(&raw, true, ph).expect("uncompresses");
            assert_eq!(out[4], plain);
            assert!(crc_ok(&out));
            let size = u32::from_le_bytes(out[9..13].try_into().expect("4"));
            assert_eq!(size as usize, out.len());
            assert!(out.windows(has.len()).any(|w| w == has.as_slice()));
            // Everything before the compressed part, and the position in
            // the source's binlog, are kept.
            assert_eq!(out[13..17], raw[13..17]);
            assert_eq!(out[..4], raw[..4]);
        }
        // 552 bytes of rows: 2 rows of a null bitmap, an INT and a TEXT.
        let rows = uncompress(&hex(REAL_ROWS), true, 8).expect("uncompresses");
        assert_eq!(rows.len(), 19 + 8 + 2 + 552 + 4);
    }

    /// One row per kind of event and framing: what comes out is the plain
    /// event with the same bytes before the compressed part.
    #[test]
    fn each_compressed_type_becomes_its_plain_type() {
        let stmt = b"INSERT INTO t VALUES ('x')".repeat(20);
        let rows = vec![7u8; 300];
        let cases: &[(u8, u8, Vec<u8>, &[u8])] = &[
            (165, 13, query_head(b"db", &[0, 1, 2]), &stmt),
            (165, 13, query_head(b"", &[]), b""),
            // table id 6, flags 2 (STMT_END_F), width 3, bitmap
            (166, 8, vec![22, 0, 0, 0, 0, 0, 1, 0, 3, 7], &rows),
            // update: two bitmaps
            (167, 8, vec![22, 0, 0, 0, 0, 0, 1, 0, 3, 7, 7], &rows),
            (168, 8, vec![22, 0, 0, 0, 0, 0, 0, 0, 3, 7], &rows),
            // a 4-byte table id
            (166, 6, vec![22, 0, 0, 0, 1, 0, 3, 7], &rows),
            // V2 with 3 bytes of extra data, 300 columns (252 prefix)
            (
                169,
                10,
                {
                    let mut v = vec![22, 0, 0, 0, 0, 0, 1, 0, 5, 0, 9, 9, 9, 252, 44, 1];
                    v.extend_from_slice(&[0xff; 38]);
                    v
                },
                &rows,
            ),
            (
                170,
                10,
                {
                    let mut v = vec![22, 0, 0, 0, 0, 0, 1, 0, 2, 0, 2];
                    v.extend_from_slice(&[3, 3]);
                    v
                },
                &rows,
            ),
            (171, 10, vec![22, 0, 0, 0, 0, 0, 1, 0, 2, 0, 1, 1], &rows),
        ];
        for (ty, ph, head, data) in cases {
            for crc in [false, true] {
                let mut body = head.clone();
                body.extend_from_slice(&part(data));
                let e = event(*ty, &body, crc);
                let out = uncompress(&e, crc, *ph).unwrap_or_else(|x| panic!("{ty}/{ph}: {x}"));
                let mut plain_body = head.clone();
                plain_body.extend_from_slice(data);
                let want = event(plain_type(*ty).expect("compressed"), &plain_body, crc);
                assert_eq!(out, want, "{ty}/{ph} crc {crc}");
            }
        }
    }

    /// Bytes that disagree with what they claim are refused, each with
    /// its reason.
    #[test]
    fn a_compressed_part_that_lies_is_refused() {
        let stmt = b"SELECT 1 FROM dual WHERE 1 = 1".to_vec();
        let good = {
            let mut b = query_head(b"db", &[]);
            b.extend_from_slice(&part(&stmt));
            b
        };
        let at = query_head(b"db", &[]).len();
        let mut cases: Vec<(Vec<u8>, &str)> = Vec::new();
        let mut longer = good.clone();
        longer[at + 1] += 1;
        cases.push((longer, "where it claims"));
        let mut shorter = good.clone();
        shorter[at + 1] -= 1;
        cases.push((shorter, "where it claims"));
        let mut other_alg = good.clone();
        other_alg[at] |= 0x10;
        cases.push((other_alg, "unknown header byte"));
        let mut no_len = good.clone();
        no_len[at] = 0x80;
        cases.push((no_len, "unknown header byte"));
        let mut not_compressed = good.clone();
        not_compressed[at] = 0x01;
        cases.push((not_compressed, "unknown header byte"));
        let mut garbage = good.clone();
        let n = garbage.len();
        garbage[n - 6] ^= 0xff;
        cases.push((garbage, "zlib"));
        cases.push((good[..at + 1].to_vec(), "cut inside its length"));
        cases.push((good[..at].to_vec(), "without its compressed part"));
        let mut no_nul = good.clone();
        no_nul[at - 1] = b'x';
        cases.push((no_nul, "NUL"));
        // A few bytes claiming 2 GiB (fuzzed): refused before anything is
        // reserved for them.
        let mut huge = good[..at].to_vec();
        huge.extend_from_slice(&[0x84, 0x84, 0x84, 0x84, 0x84, 0x78, 0x9c]);
        cases.push((huge, "over the 1 GiB"));
        for (body, why) in cases {
            let e = event(165, &body, true);
            let got = uncompress(&e, true, 13);
            assert!(
                got.as_ref().is_err_and(|e| e.what.contains(why)),
                "{why}: {got:?}"
            );
        }
        assert!(uncompress(&event(2, &good, true), true, 13).is_err());
        assert!(uncompress(&event(166, &[22, 0, 0, 0, 0, 0, 0, 0, 254], true), true, 8).is_err());
        assert!(uncompress(&event(166, &[22, 0, 0, 0, 0, 0, 0, 0, 3, 7], true), true, 9).is_err());
    }

    proptest::proptest! {
        /// Any bytes: no panic, and what comes out is a whole event whose
        /// length field is its length and whose CRC32 holds.
        #[test]
        fn any_bytes_uncompress_or_are_refused(
            ty in 160u8..175,
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
            crc in proptest::prelude::any::<bool>(),
            ph in proptest::prop_oneof![proptest::strategy::Just(6u8), proptest::strategy::Just(8), proptest::strategy::Just(10), proptest::strategy::Just(13), 0u8..40],
        ) {
            let e = event(ty, &body, crc);
            if let Ok(out) = uncompress(&e, crc, ph) {
                proptest::prop_assert_eq!(u32::from_le_bytes(out[9..13].try_into().expect("4")) as usize, out.len());
                proptest::prop_assert!(!crc || crc_ok(&out));
                proptest::prop_assert_eq!(Some(out[4]), plain_type(ty));
            }
        }

        /// Any statement or rows, compressed as the server does, come back
        /// byte for byte.
        #[test]
        fn what_the_server_compresses_comes_back_whole(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..3000),
            crc in proptest::prelude::any::<bool>(),
        ) {
            let mut body = query_head(b"d", &[1, 2]);
            let keep = body.clone();
            body.extend_from_slice(&part(&data));
            let out = uncompress(&event(165, &body, crc), crc, 13).expect("uncompresses");
            let mut plain = keep;
            plain.extend_from_slice(&data);
            proptest::prop_assert_eq!(out, event(2, &plain, crc));
        }
    }
}
