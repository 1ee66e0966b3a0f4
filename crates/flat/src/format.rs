//! How a flat file is laid out, in `LOAD DATA`'s own terms.

/// Field and line syntax, as `LOAD DATA ... FIELDS ... LINES ...` takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format {
    pub fields_terminated_by: Vec<u8>,
    /// `OPTIONALLY ENCLOSED BY`: a field may be wrapped in this byte.
    pub enclosed_by: Option<u8>,
    pub escaped_by: Option<u8>,
    pub lines_terminated_by: Vec<u8>,
}

impl Format {
    /// Whether the escape byte, outside quotes and followed by `next`, is
    /// an escape: with the escape byte also the enclosure (`ESCAPED BY '"'`
    /// with `ENCLOSED BY '"'`), LOAD DATA reads it as one only before
    /// itself (`""`); before anything else it is a plain byte. (The one
    /// rule the chunker and the field reader share.)
    pub(crate) fn escapes_before(&self, next: u8) -> bool {
        self.escaped_by.is_none()
            || self.escaped_by != self.enclosed_by
            || Some(next) == self.escaped_by
    }

    /// `LOAD DATA`'s defaults: tab, no enclosure, backslash, newline.
    pub fn tsv() -> Format {
        Format {
            fields_terminated_by: b"\t".to_vec(),
            enclosed_by: None,
            escaped_by: Some(b'\\'),
            lines_terminated_by: b"\n".to_vec(),
        }
    }

    /// Comma-separated, optionally enclosed by `"` (a doubled `""` inside
    /// is a quote), backslash escapes and `\N` for NULL as MySQL writes
    /// CSV with `SELECT ... INTO OUTFILE`.
    pub fn csv() -> Format {
        Format {
            fields_terminated_by: b",".to_vec(),
            enclosed_by: Some(b'"'),
            escaped_by: Some(b'\\'),
            lines_terminated_by: b"\n".to_vec(),
        }
    }

    /// The `FIELDS ... LINES ...` clause for these settings.
    pub fn clause(&self) -> String {
        let mut s = format!(
            "FIELDS TERMINATED BY {}",
            sql_bytes(&self.fields_terminated_by)
        );
        if let Some(e) = self.enclosed_by {
            s.push_str(&format!(" OPTIONALLY ENCLOSED BY {}", sql_bytes(&[e])));
        }
        s.push_str(&format!(
            " ESCAPED BY {} LINES TERMINATED BY {}",
            sql_bytes(self.escaped_by.as_slice()),
            sql_bytes(&self.lines_terminated_by)
        ));
        s
    }

    pub fn check(&self) -> Result<(), FormatError> {
        if self.fields_terminated_by.is_empty() {
            return Err(FormatError::EmptyFieldTerminator);
        }
        if self.lines_terminated_by.is_empty() {
            return Err(FormatError::EmptyLineTerminator);
        }
        if self.fields_terminated_by == self.lines_terminated_by {
            return Err(FormatError::SameTerminators);
        }
        Ok(())
    }
}

/// A format that cannot be read, or an option that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("the field terminator must not be empty")]
    EmptyFieldTerminator,
    #[error("the line terminator must not be empty")]
    EmptyLineTerminator,
    #[error("fields and lines cannot end with the same terminator")]
    SameTerminators,
    /// `\x` without two hex digits after it.
    #[error("'{0}': \\x needs two hex digits")]
    Hex(String),
    /// A single-byte option given more.
    #[error("{what} must be one character, not '{given}'")]
    NotOneByte { what: String, given: String },
}

/// A hex literal (`0x...`, or `''` when empty): safe for any bytes.
fn sql_bytes(b: &[u8]) -> String {
    if b.is_empty() {
        return "''".into();
    }
    let hex: String = b.iter().map(|x| format!("{x:02X}")).collect();
    format!("0x{hex}")
}

/// Parses a separator given on the command line: `\t`, `\n`, `\r\n`,
/// `\\`, `\0`, `\x1f`, or literal bytes, as mysqlimport's options accept.
pub fn parse_sep(s: &str) -> Result<Vec<u8>, FormatError> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            let e = b[i + 1];
            i += 2;
            out.push(match e {
                b't' => b'\t',
                b'n' => b'\n',
                b'r' => b'\r',
                b'0' => 0,
                b'\\' => b'\\',
                b'x' => {
                    let hex = s
                        .get(i..i + 2)
                        .ok_or_else(|| FormatError::Hex(s.to_string()))?;
                    i += 2;
                    u8::from_str_radix(hex, 16).map_err(|_| FormatError::Hex(s.to_string()))?
                }
                other => other,
            });
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// A single-byte option (`--enclosed-by`, `--escaped-by`); empty means none.
pub fn parse_byte(s: &str, what: &str) -> Result<Option<u8>, FormatError> {
    let v = parse_sep(s)?;
    match v.len() {
        0 => Ok(None),
        1 => Ok(Some(v[0])),
        _ => Err(FormatError::NotOneByte {
            what: what.to_string(),
            given: s.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators_and_clause() {
        assert_eq!(parse_sep("\\t").expect("ok"), b"\t");
        assert_eq!(parse_sep("\\r\\n").expect("ok"), b"\r\n");
        assert_eq!(parse_sep("\\x1f").expect("ok"), vec![0x1f]);
        assert_eq!(parse_sep("||").expect("ok"), b"||");
        assert!(parse_sep("\\x1").is_err());
        assert_eq!(parse_byte("", "x").expect("ok"), None);
        assert!(parse_byte("ab", "x").is_err());
        assert_eq!(
            Format::csv().clause(),
            "FIELDS TERMINATED BY 0x2C OPTIONALLY ENCLOSED BY 0x22 ESCAPED BY 0x5C LINES TERMINATED BY 0x0A"
        );
        assert_eq!(
            Format {
                escaped_by: None,
                ..Format::tsv()
            }
            .clause(),
            "FIELDS TERMINATED BY 0x09 ESCAPED BY '' LINES TERMINATED BY 0x0A"
        );
    }
}
