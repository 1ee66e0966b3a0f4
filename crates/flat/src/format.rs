//! How a flat file is laid out, in `LOAD DATA`'s own terms.

pub use sqlfleet_dump::lex::Multibyte;

/// Field and line syntax, as `LOAD DATA ... FIELDS ... LINES ...` takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format {
    pub fields_terminated_by: Vec<u8>,
    /// `OPTIONALLY ENCLOSED BY`: a field may be wrapped in this byte.
    pub enclosed_by: Option<u8>,
    pub escaped_by: Option<u8>,
    pub lines_terminated_by: Vec<u8>,
    /// The file's character set, as far as reading it cares: in big5,
    /// gbk, gb18030, sjis and cp932 a character's second byte may be `\`
    /// or another ASCII byte, which LOAD DATA takes as part of the
    /// character (it reads a character's tail after its first byte),
    /// never as an escape or a terminator.
    pub charset: Multibyte,
    /// The fields (by position) LOAD DATA reads byte by byte whatever the
    /// file's set: those whose column's set is binary (numbers, dates,
    /// BINARY, VARBINARY, BLOB), as a server reports them in a result's
    /// metadata. (Checked against MariaDB: `\x95\x5C` then a tab is one
    /// sjis character in a VARCHAR's field, but 0x95 and an escaped tab
    /// in a VARBINARY's, and the next field is read in sjis again.)
    pub binary_fields: Vec<bool>,
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

    /// The set field `field` (0-based; `None`: outside any field, as
    /// when a line is skipped) is read in: the file's, or bytes alone
    /// for a binary column's field.
    #[inline]
    pub(crate) fn reading(&self, field: Option<usize>) -> Multibyte {
        match field {
            _ if self.charset == Multibyte::AsciiSafe => Multibyte::AsciiSafe,
            Some(k) if self.binary_fields.get(k).copied().unwrap_or(false) => Multibyte::AsciiSafe,
            _ => self.charset,
        }
    }

    /// `LOAD DATA`'s defaults: tab, no enclosure, backslash, newline.
    pub fn tsv() -> Format {
        Format {
            fields_terminated_by: b"\t".to_vec(),
            enclosed_by: None,
            escaped_by: Some(b'\\'),
            lines_terminated_by: b"\n".to_vec(),
            charset: Multibyte::AsciiSafe,
            binary_fields: Vec::new(),
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
            charset: Multibyte::AsciiSafe,
            binary_fields: Vec::new(),
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
        // In a set whose characters hold ASCII bytes, a syntax byte from
        // 0x80 could be part of a character (the server only warns that
        // such separators are not implemented).
        if self.charset != Multibyte::AsciiSafe {
            let bytes = self
                .fields_terminated_by
                .iter()
                .chain(&self.lines_terminated_by)
                .chain(self.escaped_by.as_slice())
                .chain(self.enclosed_by.as_slice());
            if let Some(&byte) = bytes.into_iter().find(|b| !b.is_ascii()) {
                let charset = match self.charset {
                    Multibyte::Big5 => "big5",
                    Multibyte::Gbk => "gbk",
                    Multibyte::Gb18030 => "gb18030",
                    Multibyte::Sjis => "sjis or cp932",
                    Multibyte::AsciiSafe => "",
                };
                return Err(FormatError::NotAsciiInMultibyte { byte, charset });
            }
        }
        // An escape or enclosure byte that starts a terminator: where the
        // terminator should end a field or a line, LOAD DATA may read an
        // escape or a quote (and a file read so cannot be cut into chunks
        // that mean what the whole file means). Refused, not guessed.
        for (what, byte) in [("escape", self.escaped_by), ("enclosure", self.enclosed_by)] {
            for (terminator, t) in [
                ("field", &self.fields_terminated_by),
                ("line", &self.lines_terminated_by),
            ] {
                if byte.is_some() && t.first().copied() == byte {
                    return Err(FormatError::StartsTerminator {
                        what,
                        terminator,
                        byte: byte.unwrap_or_default(),
                    });
                }
            }
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
    /// The escape or enclosure byte is the first byte of a terminator.
    #[error("the {what} byte {} cannot also start the {terminator} terminator: which one a byte is would be a guess", std::ascii::escape_default(*byte))]
    StartsTerminator {
        what: &'static str,
        terminator: &'static str,
        byte: u8,
    },
    /// A terminator, escape or enclosure byte from 0x80 in a character
    /// set whose characters may contain it.
    #[error("the byte 0x{byte:02X} of a terminator, escape or enclosure could be part of a {charset} character: which one it is would be a guess (use ASCII bytes)")]
    NotAsciiInMultibyte { byte: u8, charset: &'static str },
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

    #[test]
    fn formats_whose_bytes_would_be_a_guess_are_refused() {
        let f = |sep: &[u8], enc: Option<u8>, esc: Option<u8>, eol: &[u8]| Format {
            fields_terminated_by: sep.to_vec(),
            enclosed_by: enc,
            escaped_by: esc,
            lines_terminated_by: eol.to_vec(),
            charset: Multibyte::AsciiSafe,
            binary_fields: Vec::new(),
        };
        let cases = [
            (Format::csv(), None),
            (Format::tsv(), None),
            // The enclosure as the escape: CSV's doubled quotes.
            (f(b",", Some(b'"'), Some(b'"'), b"\n"), None),
            // Inside a terminator but not its first byte: fine.
            (f(b"a\\", None, Some(b'\\'), b"\n"), None),
            (f(b"", None, None, b"\n"), Some("the field terminator must not be empty")),
            (f(b",", None, None, b""), Some("the line terminator must not be empty")),
            (f(b";", None, None, b";"), Some("fields and lines cannot end with the same terminator")),
            (f(b"8", Some(b'5'), Some(b'2'), b"2"), Some("the escape byte 2 cannot also start the line terminator: which one a byte is would be a guess")),
            (f(b"\t", None, Some(b'\t'), b"\n"), Some("the escape byte \\t cannot also start the field terminator: which one a byte is would be a guess")),
            (f(b"|x", Some(b'|'), None, b"\n"), Some("the enclosure byte | cannot also start the field terminator: which one a byte is would be a guess")),
            (f(b",", Some(b'\r'), None, b"\r\n"), Some("the enclosure byte \\r cannot also start the line terminator: which one a byte is would be a guess")),
        ];
        for (format, want) in cases {
            let got = format.check().err().map(|e| e.to_string());
            assert_eq!(got.as_deref(), want, "{format:?}");
        }
    }
}
