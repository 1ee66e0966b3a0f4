//! What a flat file's name says: its format and, as mysqlimport reads it,
//! its table.
//!
//! A file named `orders.csv` is CSV to whoever wrote it; read as TSV (LOAD
//! DATA's default) its quoted fields keep their quotes, and a one-column
//! table takes every line whole. So without `--format` the name decides,
//! and files whose names disagree are refused rather than guessed. Without
//! `--into`, a `.csv`/`.tsv` file goes into the table its name gives, the
//! part before the first dot (mysqlimport's rule: `orders.2024.tsv.gz` is
//! `orders`); anything else is not taken for a flat file at all.

use std::path::Path;

/// The formats a name can say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Csv,
    Tsv,
}

/// Compression suffixes the readers take off before the format's.
const COMPRESSED: &[&str] = &["gz", "zst", "zstd"];

/// The format a file's name says (`.csv`, `.tsv`, each maybe compressed).
pub fn kind_of(path: &Path) -> Option<Kind> {
    let name = path.file_name()?.to_str()?.to_ascii_lowercase();
    let mut parts: Vec<&str> = name.split('.').skip(1).collect();
    if parts.last().is_some_and(|e| COMPRESSED.contains(e)) {
        parts.pop();
    }
    match parts.last().copied() {
        Some("csv") => Some(Kind::Csv),
        Some("tsv") => Some(Kind::Tsv),
        _ => None,
    }
}

/// The format the files' names agree on: `Ok(None)` when no name says
/// one, an error naming two files whose names disagree.
pub fn agreed_kind(paths: &[&Path]) -> Result<Option<Kind>, String> {
    let mut seen: Option<(Kind, &Path)> = None;
    for p in paths {
        if let Some(k) = kind_of(p) {
            match seen {
                Some((s, first)) if s != k => {
                    return Err(format!(
                        "{} and {} are named as different formats: give --format",
                        first.display(),
                        p.display()
                    ))
                }
                None => seen = Some((k, p)),
                _ => {}
            }
        }
    }
    Ok(seen.map(|(k, _)| k))
}

/// The table a flat file's name gives: its name up to the first dot.
pub fn table_of(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    let table = name.split('.').next()?;
    (!table.is_empty()).then(|| table.to_string())
}

/// The one table files named as flat files go into without `--into`:
/// `Ok(None)` when not every file is named `.csv`/`.tsv` (then they are
/// not taken for flat files), an error when they name different tables.
pub fn implied_table(paths: &[&Path]) -> Result<Option<String>, String> {
    if paths.is_empty() || !paths.iter().all(|p| kind_of(p).is_some()) {
        return Ok(None);
    }
    let mut tables = std::collections::BTreeSet::new();
    for p in paths {
        let t = table_of(p).ok_or_else(|| {
            format!(
                "{}: its name gives no table: give --into DB.TABLE",
                p.display()
            )
        })?;
        tables.insert(t);
    }
    let mut names = tables.into_iter();
    match (names.next(), names.len()) {
        (Some(one), 0) => Ok(Some(one)),
        (first, more) => Err(format!(
            "these files name {} tables ({}): a load fills one table; load each table's files \
             on their own, or give --into DB.TABLE",
            more + 1,
            first
                .into_iter()
                .chain(names)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> &Path {
        Path::new(s)
    }

    #[test]
    fn a_name_says_its_format() {
        let table: &[(&str, Option<Kind>)] = &[
            ("orders.csv", Some(Kind::Csv)),
            ("dir/ORDERS.CSV", Some(Kind::Csv)),
            ("orders.csv.gz", Some(Kind::Csv)),
            ("orders.tsv.zst", Some(Kind::Tsv)),
            ("orders.2024.tsv", Some(Kind::Tsv)),
            ("orders.sql", None),
            ("orders.sql.gz", None),
            ("orders.txt", None),
            ("csv", None),
            ("orders.gz", None),
            (".csv", Some(Kind::Csv)),
            ("-", None),
        ];
        for (name, kind) in table {
            assert_eq!(kind_of(p(name)), *kind, "{name}");
        }
    }

    #[test]
    fn names_that_disagree_are_refused() {
        assert_eq!(
            agreed_kind(&[p("a.csv"), p("b.csv.gz")]),
            Ok(Some(Kind::Csv))
        );
        assert_eq!(agreed_kind(&[p("a.txt"), p("b.tsv")]), Ok(Some(Kind::Tsv)));
        assert_eq!(agreed_kind(&[p("a.txt")]), Ok(None));
        let e = agreed_kind(&[p("a.csv"), p("b.tsv")]).expect_err("two formats");
        assert!(
            e.contains("a.csv") && e.contains("b.tsv") && e.contains("--format"),
            "{e}"
        );
    }

    #[test]
    fn the_table_is_the_name_up_to_its_first_dot() {
        // The files, and the table they go into (Err: refused).
        type Case<'a> = (&'a [&'a str], Result<Option<&'a str>, ()>);
        let table: &[Case] = &[
            (&["orders.tsv"], Ok(Some("orders"))),
            (
                &["d/orders.00001.csv.gz", "orders.00002.csv"],
                Ok(Some("orders")),
            ),
            (&["orders.sql"], Ok(None)),
            (&["orders.tsv", "dump.sql"], Ok(None)),
            (&["orders.tsv", "items.tsv"], Err(())),
            (&[".csv"], Err(())),
            (&[], Ok(None)),
        ];
        for (paths, want) in table {
            let paths: Vec<&Path> = paths.iter().map(|s| p(s)).collect();
            let got = implied_table(&paths);
            match want {
                Ok(w) => assert_eq!(got, Ok(w.map(str::to_string)), "{paths:?}"),
                Err(()) => assert!(got.is_err(), "{paths:?}: {got:?}"),
            }
        }
    }
}
