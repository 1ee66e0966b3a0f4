//! Turning rows into text: `mysql --batch` TSV, CSV, JSON lines, aligned
//! tables, `mysql -E` vertical rows; and grouping identical results for
//! `--collapse` and `--diff`.

use std::collections::BTreeMap;
use std::io::Write;

pub use sqlfleet_dump::lex::Multibyte;

/// One value: `None` is NULL.
pub type Value = Option<Vec<u8>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Tsv,
    Jsonl,
    Csv,
    Table,
    /// One `name: value` line per column, as `mysql -E` (or a statement
    /// ended by `\G`) prints rows.
    Vertical,
}

impl Format {
    pub const ALL: [Format; 5] = [
        Format::Tsv,
        Format::Jsonl,
        Format::Csv,
        Format::Table,
        Format::Vertical,
    ];

    /// The name `--format` takes.
    pub fn name(self) -> &'static str {
        match self {
            Format::Tsv => "tsv",
            Format::Jsonl => "jsonl",
            Format::Csv => "csv",
            Format::Table => "table",
            Format::Vertical => "vertical",
        }
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| format!("format '{s}' is not tsv, jsonl, csv, table or vertical"))
    }
}

/// A field as `mysql --batch` writes it: `\N` for NULL; tab, newline,
/// backslash and NUL escaped. In big5, gbk, gb18030, sjis and cp932
/// (`mb`) a character's second byte may be 0x5C: the client copies a
/// whole multi-byte character as it is, and so does this.
pub fn tsv_field(out: &mut Vec<u8>, v: &Value, mb: Multibyte) {
    match v {
        None => out.extend_from_slice(b"\\N"),
        Some(b) => {
            let mut i = 0;
            while i < b.len() {
                let c = b[i];
                if c >= 0x80 && mb != Multibyte::AsciiSafe {
                    let n = mb.char_len(b, i);
                    if n > 1 {
                        out.extend_from_slice(&b[i..i + n]);
                        i += n;
                        continue;
                    }
                }
                i += 1;
                match c {
                    b'\t' => out.extend_from_slice(b"\\t"),
                    b'\n' => out.extend_from_slice(b"\\n"),
                    b'\\' => out.extend_from_slice(b"\\\\"),
                    0 => out.extend_from_slice(b"\\0"),
                    c => out.push(c),
                }
            }
        }
    }
}

/// RFC 4180 field; NULL is an empty unquoted field, "" an empty quoted one.
pub fn csv_field(out: &mut Vec<u8>, v: &Value) {
    match v {
        None => {}
        Some(b) => {
            out.push(b'"');
            for &c in b {
                if c == b'"' {
                    out.push(b'"');
                }
                out.push(c);
            }
            out.push(b'"');
        }
    }
}

fn json_value(v: &Value) -> serde_json::Value {
    match v {
        None => serde_json::Value::Null,
        Some(b) => serde_json::Value::String(String::from_utf8_lossy(b).into_owned()),
    }
}

fn json_str(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// Column names made distinct for JSON keys, in order: a repeated name
/// gets `_2`, `_3`, ... (`SELECT 1 a, 2 a` gives `a` and `a_2`).
pub fn distinct_names(columns: &[String]) -> Vec<String> {
    let mut taken: std::collections::HashSet<String> = columns.iter().cloned().collect();
    let mut seen = std::collections::HashSet::new();
    columns
        .iter()
        .map(|c| {
            if seen.insert(c.clone()) {
                return c.clone();
            }
            let mut i = 2;
            loop {
                let n = format!("{c}_{i}");
                if taken.insert(n.clone()) {
                    seen.insert(n.clone());
                    return n;
                }
                i += 1;
            }
        })
        .collect()
}

/// A row as a JSON object whose keys keep the columns' order.
fn json_row(names: &[String], row: &[Value]) -> String {
    let fields: Vec<String> = names
        .iter()
        .zip(row)
        .map(|(k, v)| format!("{}:{}", json_str(k), json_value(v)))
        .collect();
    format!("{{{}}}", fields.join(","))
}

/// Where a block of rows comes from and what its columns are.
pub struct Block<'a> {
    pub host: &'a str,
    /// Host tags shown as columns: (names, this host's values).
    pub tags: (&'a [String], &'a [String]),
    pub db: Option<&'a str>,
    pub columns: &'a [String],
    /// How each column's values are written in jsonl.
    pub kinds: &'a [crate::json::Kind],
    /// Which result set of the host's output (jsonl's `set`).
    pub set: usize,
    /// The connection's character set, as TSV escaping needs it.
    pub charset: Multibyte,
    /// Rows of this result set written before these (vertical rows are
    /// numbered).
    pub row: usize,
}

/// Rows as `mysql -E` prints them: a numbered banner, then each name
/// right-aligned to the longest and its value as the server sent it
/// (`NULL` for NULL, a NUL byte as a space, as the client writes them).
/// `first`: the number of the first row, from 1.
pub fn vertical(out: &mut Vec<u8>, names: &[&str], rows: &[Vec<Value>], first: usize) {
    let w = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    for (i, r) in rows.iter().enumerate() {
        out.extend_from_slice(
            format!(
                "*************************** {}. row ***************************\n",
                first + i
            )
            .as_bytes(),
        );
        for (n, v) in names.iter().zip(r) {
            let pad = w - n.chars().count();
            out.extend_from_slice(format!("{}{n}: ", " ".repeat(pad)).as_bytes());
            match v {
                None => out.extend_from_slice(b"NULL"),
                // The client writes a NUL byte as a space here.
                Some(b) => out.extend(b.iter().map(|&c| if c == 0 { b' ' } else { c })),
            }
            out.push(b'\n');
        }
    }
}

/// A row as a JSON object whose keys keep the columns' order, each value
/// as its column's type says (`json.rs`).
fn json_row_typed(names: &[String], kinds: &[crate::json::Kind], row: &[Value]) -> String {
    let fields: Vec<String> = names
        .iter()
        .zip(row)
        .enumerate()
        .map(|(i, (k, v))| {
            let kind = kinds.get(i).copied().unwrap_or(crate::json::Kind::Text);
            format!("{}:{}", json_str(k), crate::json::value(v.as_deref(), kind))
        })
        .collect();
    format!("{{{}}}", fields.join(","))
}

/// Writes a block of rows of one host in a streaming format.
pub fn write_rows(
    out: &mut dyn Write,
    fmt: Format,
    b: Block<'_>,
    rows: &[Vec<Value>],
) -> std::io::Result<()> {
    let (host, db, columns) = (b.host, b.db, b.columns);
    let mut line = Vec::with_capacity(256);
    if fmt == Format::Vertical {
        // The host, its tags and database as the first fields of each row.
        let mut names: Vec<&str> = vec!["host"];
        names.extend(b.tags.0.iter().map(String::as_str));
        if db.is_some() {
            names.push("database");
        }
        names.extend(columns.iter().map(String::as_str));
        let mut lead: Vec<Value> = vec![Some(host.as_bytes().to_vec())];
        lead.extend(b.tags.1.iter().map(|t| Some(t.as_bytes().to_vec())));
        if let Some(d) = db {
            lead.push(Some(d.as_bytes().to_vec()));
        }
        let rows: Vec<Vec<Value>> = rows
            .iter()
            .map(|r| lead.iter().chain(r).cloned().collect())
            .collect();
        vertical(&mut line, &names, &rows, b.row + 1);
        return out.write_all(&line);
    }
    let names = if fmt == Format::Jsonl {
        distinct_names(columns)
    } else {
        Vec::new()
    };
    for r in rows {
        line.clear();
        match fmt {
            Format::Tsv | Format::Table | Format::Vertical => {
                line.extend_from_slice(host.as_bytes());
                for t in b.tags.1 {
                    line.push(b'\t');
                    tsv_field(
                        &mut line,
                        &Some(t.as_bytes().to_vec()),
                        Multibyte::AsciiSafe,
                    );
                }
                if let Some(d) = db {
                    line.push(b'\t');
                    line.extend_from_slice(d.as_bytes());
                }
                for v in r {
                    line.push(b'\t');
                    tsv_field(&mut line, v, b.charset);
                }
            }
            Format::Csv => {
                csv_field(&mut line, &Some(host.as_bytes().to_vec()));
                for t in b.tags.1 {
                    line.push(b',');
                    csv_field(&mut line, &Some(t.as_bytes().to_vec()));
                }
                if let Some(d) = db {
                    line.push(b',');
                    csv_field(&mut line, &Some(d.as_bytes().to_vec()));
                }
                for v in r {
                    line.push(b',');
                    csv_field(&mut line, v);
                }
            }
            Format::Jsonl => {
                let mut text = format!("{{\"host\":{}", json_str(host));
                if !b.tags.0.is_empty() {
                    let fields: Vec<String> = b
                        .tags
                        .0
                        .iter()
                        .zip(b.tags.1)
                        .map(|(k, v)| format!("{}:{}", json_str(k), json_str(v)))
                        .collect();
                    text.push_str(&format!(",\"tags\":{{{}}}", fields.join(",")));
                }
                if let Some(d) = db {
                    text.push_str(&format!(",\"database\":{}", json_str(d)));
                }
                text.push_str(&format!(
                    ",\"set\":{},\"row\":{}}}",
                    b.set,
                    json_row_typed(&names, b.kinds, r)
                ));
                line.extend_from_slice(text.as_bytes());
            }
        }
        line.push(b'\n');
        out.write_all(&line)?;
    }
    Ok(())
}

/// The header line for streaming formats.
pub fn header(fmt: Format, with_db: bool, tags: &[String], columns: &[String]) -> Option<String> {
    let mut names = vec!["host".to_string()];
    names.extend(tags.iter().cloned());
    if with_db {
        names.push("database".into());
    }
    names.extend(columns.iter().cloned());
    match fmt {
        Format::Tsv | Format::Table => {
            let mut line = Vec::new();
            for (i, n) in names.iter().enumerate() {
                if i > 0 {
                    line.push(b'\t');
                }
                tsv_field(
                    &mut line,
                    &Some(n.as_bytes().to_vec()),
                    Multibyte::AsciiSafe,
                );
            }
            Some(String::from_utf8_lossy(&line).into_owned())
        }
        Format::Csv => Some(
            names
                .iter()
                .map(|n| format!("\"{}\"", n.replace('"', "\"\"")))
                .collect::<Vec<_>>()
                .join(","),
        ),
        Format::Jsonl | Format::Vertical => None,
    }
}

/// An aligned table, as the mysql client prints for people.
/// `right[i]`: column i holds numbers (right-aligned, as the mysql client
/// aligns them).
pub fn table(columns: &[String], right: &[bool], rows: &[Vec<String>]) -> String {
    let mut w: Vec<usize> = columns.iter().map(|c| c.chars().count()).collect();
    for r in rows {
        for (i, v) in r.iter().enumerate() {
            if i < w.len() {
                w[i] = w[i].max(v.chars().count());
            }
        }
    }
    let sep: String = format!(
        "+{}+\n",
        w.iter()
            .map(|n| "-".repeat(n + 2))
            .collect::<Vec<_>>()
            .join("+")
    );
    let line = |cells: &[String], align: bool| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&w)
            .enumerate()
            .map(|(i, (c, n))| {
                let pad = " ".repeat(n - c.chars().count());
                if align && right.get(i).copied().unwrap_or(false) {
                    format!(" {pad}{c} ")
                } else {
                    format!(" {c}{pad} ")
                }
            })
            .collect();
        format!("|{}|\n", parts.join("|"))
    };
    let mut s = sep.clone();
    s.push_str(&line(columns, false));
    s.push_str(&sep);
    for r in rows {
        s.push_str(&line(r, true));
    }
    s.push_str(&sep);
    s
}

/// A host's whole result (or its error), comparable across hosts.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Outcome {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
    pub error: Option<String>,
}

/// Groups hosts with identical outcomes; largest group first, then by
/// first host.
pub fn group(results: &[(String, Outcome)]) -> Vec<(Outcome, Vec<String>)> {
    let mut by: BTreeMap<&Outcome, Vec<String>> = BTreeMap::new();
    for (h, o) in results {
        by.entry(o).or_default().push(h.clone());
    }
    let mut groups: Vec<(Outcome, Vec<String>)> =
        by.into_iter().map(|(o, hs)| (o.clone(), hs)).collect();
    groups.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.1[0].cmp(&b.1[0])));
    groups
}

/// A result's rows as TSV lines (no host column), in the connection's
/// character set `mb`, as `mysql --batch` writes them.
pub fn outcome_lines(o: &Outcome, mb: Multibyte) -> Vec<Vec<u8>> {
    if let Some(e) = &o.error {
        return vec![format!("ERROR: {e}").into_bytes()];
    }
    o.rows
        .iter()
        .map(|r| {
            let mut line = Vec::new();
            for (i, v) in r.iter().enumerate() {
                if i > 0 {
                    line.push(b'\t');
                }
                tsv_field(&mut line, v, mb);
            }
            line
        })
        .collect()
}

/// A group's rows as JSON objects.
fn json_rows(o: &Outcome, rows: &[&Vec<Value>]) -> String {
    let names = distinct_names(&o.columns);
    let rows: Vec<String> = rows.iter().map(|r| json_row(&names, r)).collect();
    format!("[{}]", rows.join(","))
}

fn json_list(items: &[String]) -> String {
    let v: Vec<String> = items.iter().map(|s| json_str(s)).collect();
    format!("[{}]", v.join(","))
}

/// `--collapse` in `fmt`: each distinct result once, under the hosts that
/// gave it (tsv: `==>` lines; jsonl: one object per group; csv: the hosts
/// as the first field of each row; table: a table per group).
pub fn collapse_as(results: &[(String, Outcome)], fmt: Format, mb: Multibyte) -> Vec<u8> {
    let mut s = String::new();
    match fmt {
        Format::Tsv => return collapse(results, mb),
        Format::Jsonl => {
            for (o, hosts) in group(results) {
                let rows: Vec<&Vec<Value>> = o.rows.iter().collect();
                s.push_str(&format!(
                    "{{\"hosts\":{},\"columns\":{},\"rows\":{},\"error\":{}}}\n",
                    json_list(&hosts),
                    json_list(&o.columns),
                    json_rows(&o, &rows),
                    o.error.as_deref().map_or("null".to_string(), json_str)
                ));
            }
        }
        Format::Csv => {
            // Bytes as the server sent them, as in streamed CSV.
            let mut out = Vec::new();
            for (o, hosts) in group(results) {
                let who = Some(hosts.join(" ").into_bytes());
                let mut line = Vec::new();
                let rows: Vec<Vec<Value>> = match &o.error {
                    Some(e) => vec![vec![Some(format!("ERROR: {e}").into_bytes())]],
                    None => o.rows.clone(),
                };
                for r in rows {
                    line.clear();
                    csv_field(&mut line, &who);
                    for v in &r {
                        line.push(b',');
                        csv_field(&mut line, v);
                    }
                    out.extend_from_slice(&line);
                    out.push(b'\n');
                }
            }
            return out;
        }
        Format::Vertical => {
            let mut out = Vec::new();
            for (o, hosts) in group(results) {
                out.extend_from_slice(group_header(&hosts).as_bytes());
                match &o.error {
                    Some(e) => out.extend_from_slice(format!("ERROR: {e}\n").as_bytes()),
                    None => {
                        let names: Vec<&str> = o.columns.iter().map(String::as_str).collect();
                        vertical(&mut out, &names, &o.rows, 1);
                    }
                }
            }
            return out;
        }
        Format::Table => {
            for (o, hosts) in group(results) {
                s.push_str(&group_header(&hosts));
                match &o.error {
                    Some(e) => s.push_str(&format!("ERROR: {e}\n")),
                    None if o.columns.is_empty() => {}
                    None => {
                        let rows: Vec<Vec<String>> = o
                            .rows
                            .iter()
                            .map(|r| r.iter().map(display).collect())
                            .collect();
                        s.push_str(&table(&o.columns, &[], &rows));
                    }
                }
            }
        }
    }
    s.into_bytes()
}

/// A value as the mysql client's table shows it.
pub fn display(v: &Value) -> String {
    match v {
        None => "NULL".to_string(),
        Some(b) => String::from_utf8_lossy(b).into_owned(),
    }
}

/// `--diff` in `fmt` (tsv or jsonl; the caller refuses the others): jsonl
/// gives one object per differing group with the majority's hosts and the
/// rows missing and extra.
pub fn diff_as(results: &[(String, Outcome)], fmt: Format, mb: Multibyte) -> Vec<u8> {
    if fmt != Format::Jsonl {
        return diff(results, mb);
    }
    let groups = group(results);
    let Some((majority, mhosts)) = groups.first() else {
        return Vec::new();
    };
    if groups.len() == 1 {
        return format!("{{\"agree\":true,\"hosts\":{}}}\n", json_list(mhosts)).into_bytes();
    }
    let mut s = String::new();
    for (o, hosts) in &groups[1..] {
        let missing: Vec<&Vec<Value>> = majority
            .rows
            .iter()
            .filter(|r| !o.rows.contains(r))
            .collect();
        let extra: Vec<&Vec<Value>> = o
            .rows
            .iter()
            .filter(|r| !majority.rows.contains(r))
            .collect();
        s.push_str(&format!(
            "{{\"hosts\":{},\"majority\":{},\"columns\":{},\"missing\":{},\"extra\":{},\"error\":{}}}\n",
            json_list(hosts),
            json_list(mhosts),
            json_list(&o.columns),
            json_rows(majority, &missing),
            json_rows(o, &extra),
            o.error.as_deref().map_or("null".to_string(), json_str)
        ));
    }
    s.into_bytes()
}

/// `==> h1, h2 (2 hosts)`: the line above a group's result.
fn group_header(hosts: &[String]) -> String {
    format!(
        "==> {} ({})\n",
        hosts.join(", "),
        sqlfleet_conn::text::count(hosts.len() as u64, "host")
    )
}

/// `--collapse`: each distinct result once, under the hosts that gave it.
pub fn collapse(results: &[(String, Outcome)], mb: Multibyte) -> Vec<u8> {
    let mut s = Vec::new();
    for (o, hosts) in group(results) {
        s.extend_from_slice(group_header(&hosts).as_bytes());
        if o.error.is_none() && !o.columns.is_empty() {
            s.extend_from_slice(o.columns.join("\t").as_bytes());
            s.push(b'\n');
        }
        for l in outcome_lines(&o, mb) {
            s.extend_from_slice(&l);
            s.push(b'\n');
        }
    }
    s
}

/// `--diff`: only the hosts whose result differs from the majority, with
/// the lines they lack (`-`) and have extra (`+`).
pub fn diff(results: &[(String, Outcome)], mb: Multibyte) -> Vec<u8> {
    let groups = group(results);
    let Some((majority, mhosts)) = groups.first() else {
        return Vec::new();
    };
    if groups.len() == 1 {
        return match mhosts.len() {
            1 => "the one host agrees with itself\n".to_string(),
            n => format!("all {n} hosts agree\n"),
        }
        .into_bytes();
    }
    let mut s = Vec::new();
    let mlines = outcome_lines(majority, mb);
    for (o, hosts) in &groups[1..] {
        s.extend_from_slice(
            format!(
                "==> {} differ{} from the majority ({} host{}):\n",
                hosts.join(", "),
                if hosts.len() == 1 { "s" } else { "" },
                mhosts.len(),
                if mhosts.len() == 1 { "" } else { "s" }
            )
            .as_bytes(),
        );
        let lines = outcome_lines(o, mb);
        for (sign, l) in mlines
            .iter()
            .filter(|l| !lines.contains(l))
            .map(|l| (b'-', l))
            .chain(
                lines
                    .iter()
                    .filter(|l| !mlines.contains(l))
                    .map(|l| (b'+', l)),
            )
        {
            s.extend_from_slice(&[sign, b' ']);
            s.extend_from_slice(l);
            s.push(b'\n');
        }
        if o.columns != majority.columns && o.error.is_none() && majority.error.is_none() {
            s.extend_from_slice(
                format!(
                    "  columns: {} vs {}\n",
                    o.columns.join(","),
                    majority.columns.join(",")
                )
                .as_bytes(),
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsv_escapes_as_the_client_does_in_each_character_set() {
        use Multibyte::*;
        let table: &[(&[u8], Multibyte, &[u8], &str)] = &[
            (
                b"a\tb\nc\\d\0",
                AsciiSafe,
                b"a\\tb\\nc\\\\d\\0",
                "the four escapes",
            ),
            (
                b"\x95\\",
                Sjis,
                b"\x95\\",
                "sjis: 0x95 0x5C is one character",
            ),
            (
                b"\x95\\",
                AsciiSafe,
                b"\x95\\\\",
                "utf8mb4: 0x5C is a backslash",
            ),
            (b"\x95\\", Gbk, b"\x95\\", "gbk: one character too"),
            (b"\xa4\\", Big5, b"\xa4\\", "big5"),
            (b"\x80\\", Big5, b"\x80\\\\", "big5: 0x80 leads nothing"),
            (
                b"\xa0\\",
                Sjis,
                b"\xa0\\\\",
                "sjis: 0xA0 is a single byte (half-width kana range)",
            ),
            (b"\x95", Sjis, b"\x95", "a lead byte at the end"),
            (b"\x95\t", Sjis, b"\x95\\t", "a tab is never a second byte"),
            (
                b"\x81\x30\x81\x30\\",
                Gb18030,
                b"\x81\x30\x81\x30\\\\",
                "gb18030: four bytes, then a backslash",
            ),
        ];
        for (input, mb, want, why) in table {
            let mut out = Vec::new();
            tsv_field(&mut out, &Some(input.to_vec()), *mb);
            assert_eq!(out, *want, "{why}");
        }
        let mut out = Vec::new();
        tsv_field(&mut out, &None, Sjis);
        assert_eq!(out, b"\\N");
    }

    fn v(s: &str) -> Value {
        Some(s.as_bytes().to_vec())
    }

    #[test]
    fn tsv_like_mysql_batch() {
        let mut out = Vec::new();
        write_rows(
            &mut out,
            Format::Tsv,
            Block {
                host: "h:1",
                tags: (&[], &[]),
                db: None,
                columns: &[],
                kinds: &[],
                set: 0,
                charset: Multibyte::AsciiSafe,
                row: 0,
            },
            &[vec![v("a\tb"), None, v("x\\y\nz"), Some(vec![0])]],
        )
        .expect("w");
        assert_eq!(
            String::from_utf8(out).expect("utf8"),
            "h:1\ta\\tb\t\\N\tx\\\\y\\nz\t\\0\n"
        );
    }

    #[test]
    fn csv_jsonl_and_headers() {
        let cols = vec!["a".to_string(), "b".to_string()];
        let mut out = Vec::new();
        write_rows(
            &mut out,
            Format::Csv,
            Block {
                host: "h:1",
                tags: (&[], &[]),
                db: Some("db"),
                columns: &cols,
                kinds: &[],
                set: 0,
                charset: Multibyte::AsciiSafe,
                row: 0,
            },
            &[vec![v("x,\"y\""), None]],
        )
        .expect("w");
        assert_eq!(
            String::from_utf8(out).expect("utf8"),
            "\"h:1\",\"db\",\"x,\"\"y\"\"\",\n"
        );
        let mut out = Vec::new();
        write_rows(
            &mut out,
            Format::Jsonl,
            Block {
                host: "h:1",
                tags: (&[], &[]),
                db: None,
                columns: &cols,
                kinds: &[],
                set: 0,
                charset: Multibyte::AsciiSafe,
                row: 0,
            },
            &[vec![v("1"), None]],
        )
        .expect("w");
        assert_eq!(
            String::from_utf8(out).expect("utf8"),
            "{\"host\":\"h:1\",\"set\":0,\"row\":{\"a\":\"1\",\"b\":null}}\n"
        );
        // Column order kept, repeated names made distinct.
        let dup = vec![
            "z".to_string(),
            "a".to_string(),
            "a".to_string(),
            "a_2".to_string(),
        ];
        let mut out = Vec::new();
        write_rows(
            &mut out,
            Format::Jsonl,
            Block {
                host: "h:1",
                tags: (&[], &[]),
                db: None,
                columns: &dup,
                kinds: &[],
                set: 0,
                charset: Multibyte::AsciiSafe,
                row: 0,
            },
            &[vec![v("1"), v("2"), v("3"), v("4")]],
        )
        .expect("w");
        assert_eq!(
            String::from_utf8(out).expect("utf8"),
            "{\"host\":\"h:1\",\"set\":0,\"row\":{\"z\":\"1\",\"a\":\"2\",\"a_3\":\"3\",\"a_2\":\"4\"}}\n"
        );
        assert_eq!(
            header(Format::Tsv, true, &[], &cols).as_deref(),
            Some("host\tdatabase\ta\tb")
        );
        assert_eq!(header(Format::Jsonl, false, &[], &cols), None);
    }

    #[test]
    fn aligned_table() {
        let t = table(
            &["n".into(), "name".into()],
            &[false, false],
            &[vec!["1".into(), "ünï".into()]],
        );
        assert_eq!(
            t,
            "+---+------+\n| n | name |\n+---+------+\n| 1 | ünï  |\n+---+------+\n"
        );
        // Numbers right-aligned under their (left-aligned) heading.
        let t = table(
            &["num".into(), "s".into()],
            &[true, false],
            &[
                vec!["7".into(), "x".into()],
                vec!["1234".into(), "yy".into()],
            ],
        );
        assert_eq!(
            t,
            "+------+----+\n| num  | s  |\n+------+----+\n|    7 | x  |\n| 1234 | yy |\n+------+----+\n"
        );
    }

    fn outcome(rows: &[&str]) -> Outcome {
        Outcome {
            columns: vec!["v".into()],
            rows: rows.iter().map(|r| vec![v(r)]).collect(),
            error: None,
        }
    }

    #[test]
    fn collapse_and_diff() {
        let results = vec![
            ("a:1".to_string(), outcome(&["x", "y"])),
            ("b:1".to_string(), outcome(&["x", "y"])),
            ("c:1".to_string(), outcome(&["x", "z"])),
            (
                "d:1".to_string(),
                Outcome {
                    error: Some("ERROR 1045: denied".into()),
                    ..outcome(&[])
                },
            ),
        ];
        assert_eq!(
            String::from_utf8_lossy(&collapse(&results, Multibyte::AsciiSafe)),
            "==> a:1, b:1 (2 hosts)\nv\nx\ny\n==> c:1 (1 host)\nv\nx\nz\n==> d:1 (1 host)\nERROR: ERROR 1045: denied\n"
        );
        assert_eq!(
            String::from_utf8_lossy(&diff(&results, Multibyte::AsciiSafe)),
            "==> c:1 differs from the majority (2 hosts):\n- y\n+ z\n==> d:1 differs from the majority (2 hosts):\n- x\n- y\n+ ERROR: ERROR 1045: denied\n"
        );
        assert_eq!(
            diff(&results[..2], Multibyte::AsciiSafe),
            b"all 2 hosts agree\n"
        );
    }
}
