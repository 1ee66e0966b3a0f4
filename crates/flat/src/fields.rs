//! A chunk's records as field values, read with `LOAD DATA`'s rules: for
//! the fallback that loads with INSERT statements when the server refuses
//! `LOAD DATA LOCAL`.

use crate::format::Format;

/// One field: `None` is SQL NULL.
pub type Field = Option<Vec<u8>>;

fn starts(buf: &[u8], i: usize, pat: &[u8]) -> bool {
    buf.len() >= i + pat.len() && &buf[i..i + pat.len()] == pat
}

fn unescape(e: u8) -> u8 {
    match e {
        b'0' => 0,
        b'b' => 8,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'Z' => 26,
        other => other,
    }
}

/// Every record of `data` (whole records, as the chunker cuts them). A
/// record may have fewer fields than the chunker counted: the server
/// takes a last field that would start at the end of the data as missing.
pub fn records(data: &[u8], f: &Format) -> Vec<Vec<Field>> {
    let ft = &f.fields_terminated_by[..];
    let lt = &f.lines_terminated_by[..];
    let mut out = Vec::new();
    let mut i = 0;
    while i < data.len() {
        let mut row = Vec::new();
        loop {
            // One field.
            let mut v = Vec::new();
            let mut enclosed = false;
            let mut null_escape = false;
            if f.enclosed_by.is_some() && data.get(i) == f.enclosed_by.as_ref() {
                let q = data[i];
                enclosed = true;
                i += 1;
                let mut closed = false;
                while i < data.len() {
                    let c = data[i];
                    if Some(c) == f.escaped_by && f.escaped_by != Some(q) && i + 1 < data.len() {
                        v.push(unescape(data[i + 1]));
                        i += 2;
                        continue;
                    }
                    // With the enclosure as the escape, a quote that ends
                    // the data is an escape with nothing after it: the
                    // server keeps it as a byte, and the field is never
                    // closed (below).
                    if c == q && f.escaped_by == Some(q) && i + 1 == data.len() {
                        v.push(q);
                        i += 1;
                        break;
                    }
                    if c == q {
                        if data.get(i + 1) == Some(&q) {
                            v.push(q);
                            i += 2;
                            continue;
                        }
                        let after = i + 1;
                        if after >= data.len() || starts(data, after, ft) || starts(data, after, lt)
                        {
                            i = after;
                            closed = true;
                            break;
                        }
                    }
                    let n = f.reading(Some(row.len())).char_len(data, i);
                    v.extend_from_slice(&data[i..i + n]);
                    i += n;
                }
                // A field the data ends inside, the enclosure being the
                // escape: the server keeps what it read with the opening
                // quote (`"ab"` at the very end of a file is `"ab"`).
                if !closed && f.escaped_by == Some(q) {
                    v.insert(0, q);
                }
            }
            // The data ends right after a field terminator: the server
            // reads no field there (the column gets its default, with
            // warning 1261), not an empty one; only a line terminator
            // after it would make it an empty field.
            if !enclosed && i >= data.len() && !row.is_empty() {
                break;
            }
            let mut end_of_record = i >= data.len();
            while i < data.len() {
                if starts(data, i, lt) {
                    i += lt.len();
                    end_of_record = true;
                    break;
                }
                if starts(data, i, ft) {
                    i += ft.len();
                    break;
                }
                let c = data[i];
                if Some(c) == f.escaped_by && i + 1 < data.len() && f.escapes_before(data[i + 1]) {
                    if data[i + 1] == b'N' && v.is_empty() && !enclosed {
                        null_escape = true;
                    }
                    v.push(unescape(data[i + 1]));
                    i += 2;
                    continue;
                }
                let n = f.reading(Some(row.len())).char_len(data, i);
                v.extend_from_slice(&data[i..i + n]);
                i += n;
                if i >= data.len() {
                    end_of_record = true;
                }
            }
            let is_null = (null_escape && v == b"N")
                || (!enclosed && f.enclosed_by.is_some() && v == b"NULL");
            row.push(if is_null { None } else { Some(v) });
            if end_of_record {
                break;
            }
        }
        out.push(row);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Field {
        Some(v.as_bytes().to_vec())
    }

    #[test]
    fn csv_and_tsv_fields() {
        let r = records(
            b"1,\"a,b\",\\N,NULL,\"NULL\",\"x\"\"y\",\"\"\n2,p\\,q,,\"m\nn\",z\\tz,\\\\N,\"e\"\n",
            &Format::csv(),
        );
        assert_eq!(
            r[0],
            vec![s("1"), s("a,b"), None, None, s("NULL"), s("x\"y"), s("")]
        );
        assert_eq!(
            r[1],
            vec![
                s("2"),
                s("p,q"),
                s(""),
                s("m\nn"),
                s("z\tz"),
                s("\\N"),
                s("e")
            ]
        );
        // At the end of the data, after a field terminator and before any
        // line terminator, there is no field (LOAD DATA's rule), while
        // with a line terminator there is an empty one.
        assert_eq!(
            records(b"a\tb\t", &Format::tsv()),
            vec![vec![s("a"), s("b")]]
        );
        assert_eq!(
            records(b"a\tb\t\n", &Format::tsv()),
            vec![vec![s("a"), s("b"), s("")]]
        );
        assert_eq!(
            records(b"a,\"\"", &Format::csv()),
            vec![vec![s("a"), s("")]]
        );
        // The enclosure as the escape, and the data ending inside a
        // field: the server keeps the field as read, opening quote and
        // all (checked against a server: LOAD DATA of each as a file).
        let doubled = Format {
            escaped_by: Some(b'"'),
            ..Format::csv()
        };
        for (data, want) in [
            (&b"x,\"\""[..], "\"\""),
            (b"x,\"abc\"", "\"abc\""),
            (b"x,\"a\"\"b\"", "\"a\"b\""),
            (b"x,\"ab\"\"", "\"ab\""),
            (b"x,\"\"\"\"", "\"\"\""),
            (b"x,\"abc\"\n", "abc"),
            (b"x,\"\"\n", ""),
        ] {
            assert_eq!(
                records(data, &doubled),
                vec![vec![s("x"), s(want)]],
                "{}",
                String::from_utf8_lossy(data)
            );
        }
        let r = records(b"a\t\\N\t\\0b\nlast\tx\ty", &Format::tsv());
        assert_eq!(
            r,
            vec![
                vec![s("a"), None, Some(vec![0, b'b'])],
                vec![s("last"), s("x"), s("y")]
            ]
        );
    }
}
