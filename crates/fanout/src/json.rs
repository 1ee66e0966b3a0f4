//! A value in `--format jsonl` as its column's type says: integers and
//! floating-point numbers as JSON numbers, DECIMAL and integers beyond
//! ±2^53 as strings (a JSON reader's double would change them), binary
//! values as `{"base64": "..."}` (their bytes, not text with replacement
//! characters), NULL as null, everything else as the text the server sent.

use base64::Engine;
use sqlfleet_wire::client::Column;

/// How a column's values are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Integer,
    Float,
    /// DECIMAL: a number, written as the server's text (exact).
    Decimal,
    /// Dates, times, enums, text: the server's text.
    Text,
    Binary,
}

const BINARY_CHARSET: u16 = 63;

impl Kind {
    /// A number: right-aligned in a table, as the mysql client does.
    pub fn is_number(self) -> bool {
        matches!(self, Kind::Integer | Kind::Float | Kind::Decimal)
    }

    pub fn of(c: &Column) -> Kind {
        match c.type_code {
            // TINY, SHORT, LONG, LONGLONG, INT24, YEAR
            1 | 2 | 3 | 8 | 9 | 13 => Kind::Integer,
            // FLOAT, DOUBLE
            4 | 5 => Kind::Float,
            // DECIMAL, NEWDECIMAL
            0 | 246 => Kind::Decimal,
            // VARCHAR, BIT, TINY/MEDIUM/LONG/BLOB, VAR_STRING, STRING, GEOMETRY
            15 | 16 | 249..=255 if c.charset == BINARY_CHARSET => Kind::Binary,
            _ => Kind::Text,
        }
    }
}

/// Integers a JSON reader's double holds exactly.
const EXACT: i128 = 1 << 53;

/// `v` (NULL as `None`) as JSON, as `kind` says.
pub fn value(v: Option<&[u8]>, kind: Kind) -> serde_json::Value {
    use serde_json::Value as J;
    let Some(b) = v else {
        return J::Null;
    };
    let text = || J::String(String::from_utf8_lossy(b).into_owned());
    match kind {
        Kind::Integer => match std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse::<i128>().ok())
        {
            Some(n) if (-EXACT..=EXACT).contains(&n) => J::from(n as i64),
            _ => text(),
        },
        Kind::Float => match std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .and_then(serde_json::Number::from_f64)
        {
            Some(n) => J::Number(n),
            None => text(),
        },
        Kind::Binary => serde_json::json!({
            "base64": base64::engine::general_purpose::STANDARD.encode(b)
        }),
        Kind::Decimal | Kind::Text => text(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(type_code: u8, charset: u16) -> Column {
        Column {
            name: "c".into(),
            type_code,
            flags: 0,
            charset,
        }
    }

    #[test]
    fn each_type_as_json() {
        let utf8 = 45;
        let rows: &[(Column, Option<&[u8]>, &str)] = &[
            (col(3, BINARY_CHARSET), Some(b"27002"), "27002"),
            (
                col(8, BINARY_CHARSET),
                Some(b"-9007199254740992"),
                "-9007199254740992",
            ),
            (
                col(8, BINARY_CHARSET),
                Some(b"9007199254740993"),
                "\"9007199254740993\"",
            ),
            (
                col(8, BINARY_CHARSET),
                Some(b"18446744073709551615"),
                "\"18446744073709551615\"",
            ),
            (col(5, BINARY_CHARSET), Some(b"1.5"), "1.5"),
            (col(246, BINARY_CHARSET), Some(b"12.50"), "\"12.50\""),
            (
                col(252, BINARY_CHARSET),
                Some(&[0x00, 0xff]),
                "{\"base64\":\"AP8=\"}",
            ),
            (col(253, utf8), Some("é".as_bytes()), "\"é\""),
            (
                col(12, BINARY_CHARSET),
                Some(b"2026-11-26 10:00:00"),
                "\"2026-11-26 10:00:00\"",
            ),
            (col(3, BINARY_CHARSET), None, "null"),
            (
                col(16, BINARY_CHARSET),
                Some(&[0x05]),
                "{\"base64\":\"BQ==\"}",
            ),
        ];
        for (c, v, want) in rows {
            let got = value(*v, Kind::of(c)).to_string();
            assert_eq!(&got, want, "{c:?} {v:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_of_any_type_give_json(t in 0u8..=255, cs in 0u16..300, b in proptest::collection::vec(0u8..=255, 0..40)) {
            let v = value(Some(&b), Kind::of(&col(t, cs)));
            proptest::prop_assert!(serde_json::from_str::<serde_json::Value>(&v.to_string()).is_ok());
        }
    }
}
