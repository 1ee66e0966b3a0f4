//! Column types as the server defines them (MariaDB 10.11's data types:
//! every integer width signed and unsigned, DECIMAL at several precisions,
//! FLOAT and DOUBLE, BIT, the temporal types with fractional seconds,
//! CHAR/VARCHAR/TEXT in utf8mb4 and latin1, BINARY/VARBINARY and the
//! BLOBs (one past 64 KiB), ENUM, SET, JSON, geometry, INET4, INET6 and
//! UUID), each with a literal of one of its values drawn over its whole
//! range: extremes, zero, NULL, fractions, multi-byte text (and only
//! values the server takes for the type: a refused row tests nothing). A seed's
//! `typed` table takes some of them; its steps insert, update and delete
//! rows of it and pass values through user variables (which a statement
//! binlog carries as User_var events of each result type).

use rand::rngs::StdRng;
use rand::Rng;

/// How a type's values are drawn.
#[derive(Clone, Copy)]
enum Kind {
    /// An integer between the bounds.
    Int(i128, i128),
    /// DECIMAL(p, s).
    Decimal(u32, u32),
    Float,
    Double,
    /// BIT(n).
    Bit(u32),
    Date,
    /// TIME(fsp).
    Time(u32),
    /// DATETIME(fsp) or TIMESTAMP(fsp) (which stays within its range).
    DateTime(u32, bool),
    Year,
    /// Text up to this many characters.
    Text(usize),
    /// Bytes up to this many.
    Bytes(usize),
    Enum,
    Set,
    Json,
    Point,
    Inet4,
    Inet6,
    Uuid,
}

/// The types a `typed` table's columns are drawn from: (declaration, kind).
const TYPES: &[(&str, Kind)] = &[
    ("TINYINT", Kind::Int(-128, 127)),
    ("TINYINT UNSIGNED", Kind::Int(0, 255)),
    ("SMALLINT", Kind::Int(-32768, 32767)),
    ("MEDIUMINT UNSIGNED", Kind::Int(0, 16_777_215)),
    ("INT", Kind::Int(-2_147_483_648, 2_147_483_647)),
    ("BIGINT", Kind::Int(i64::MIN as i128, i64::MAX as i128)),
    ("BIGINT UNSIGNED", Kind::Int(0, u64::MAX as i128)),
    ("DECIMAL(5,0)", Kind::Decimal(5, 0)),
    ("DECIMAL(20,6)", Kind::Decimal(20, 6)),
    ("DECIMAL(65,30)", Kind::Decimal(65, 30)),
    ("FLOAT", Kind::Float),
    ("DOUBLE", Kind::Double),
    ("BIT(1)", Kind::Bit(1)),
    ("BIT(17)", Kind::Bit(17)),
    ("BIT(64)", Kind::Bit(64)),
    ("DATE", Kind::Date),
    ("TIME(3)", Kind::Time(3)),
    ("DATETIME(6)", Kind::DateTime(6, false)),
    ("DATETIME", Kind::DateTime(0, false)),
    ("TIMESTAMP(6) NULL", Kind::DateTime(6, true)),
    ("YEAR", Kind::Year),
    ("CHAR(10)", Kind::Text(10)),
    ("VARCHAR(300)", Kind::Text(300)),
    ("VARCHAR(20) CHARACTER SET latin1", Kind::Text(20)),
    ("TINYTEXT", Kind::Text(60)),
    ("MEDIUMTEXT", Kind::Text(3000)),
    ("BINARY(8)", Kind::Bytes(8)),
    ("VARBINARY(40)", Kind::Bytes(40)),
    ("BLOB", Kind::Bytes(2000)),
    ("LONGBLOB", Kind::Bytes(70_000)),
    ("ENUM('a','b','ç','long value')", Kind::Enum),
    ("SET('x','y','z','ü')", Kind::Set),
    ("JSON", Kind::Json),
    ("POINT", Kind::Point),
    ("INET4", Kind::Inet4),
    ("INET6", Kind::Inet6),
    ("UUID", Kind::Uuid),
];

/// A seed's typed table: its columns' types (indexes into TYPES).
pub struct Typed {
    cols: Vec<usize>,
}

impl Typed {
    /// Six to ten types drawn for this seed.
    pub fn draw(rng: &mut StdRng) -> Typed {
        let n = rng.gen_range(6..=10);
        let cols = (0..n).map(|_| rng.gen_range(0..TYPES.len())).collect();
        Typed { cols }
    }

    pub fn create(&self) -> String {
        let cols: Vec<String> = self
            .cols
            .iter()
            .enumerate()
            .map(|(i, t)| format!("c{i} {}", TYPES[*t].0))
            .collect();
        format!(
            "CREATE TABLE typed (id INT PRIMARY KEY, {}) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
            cols.join(", ")
        )
    }

    /// One step on the table: an insert, an update, a delete, or a value
    /// passed through a user variable. `id` is the step's own row.
    pub fn step(&self, rng: &mut StdRng, id: usize) -> Vec<String> {
        let col = rng.gen_range(0..self.cols.len());
        let lit = |rng: &mut StdRng, c: usize| value(rng, TYPES[self.cols[c]].1);
        match rng.gen_range(0..5) {
            0 | 1 => {
                let vals: Vec<String> = (0..self.cols.len()).map(|c| lit(rng, c)).collect();
                let names: Vec<String> = (0..self.cols.len()).map(|c| format!("c{c}")).collect();
                vec![format!(
                    "INSERT INTO typed (id, {}) VALUES ({id}, {})",
                    names.join(", "),
                    vals.join(", ")
                )]
            }
            2 => vec![format!(
                "UPDATE typed SET c{col} = {} WHERE id % 3 = {}",
                lit(rng, col),
                id % 3
            )],
            3 => vec![format!("DELETE FROM typed WHERE id % 7 = {}", id % 7)],
            // (Never NULL: a native replica reads a NULL user variable
            // as a DECIMAL one and stops on a UUID or INET column — the
            // oracle would fail where the copy is right.)
            _ => vec![
                format!("SET @tv = {}", non_null(rng, TYPES[self.cols[col]].1)),
                format!("INSERT INTO typed (id, c{col}) VALUES ({id}, @tv)"),
                "SET @tv = NULL".into(),
            ],
        }
    }
}

/// A literal of one value of `kind`, never NULL.
fn non_null(rng: &mut StdRng, kind: Kind) -> String {
    loop {
        let v = value(rng, kind);
        if v != "NULL" {
            return v;
        }
    }
}

/// A literal of one value of `kind` (NULL now and then).
fn value(rng: &mut StdRng, kind: Kind) -> String {
    if rng.gen_bool(0.08) {
        return "NULL".into();
    }
    match kind {
        Kind::Int(lo, hi) => match rng.gen_range(0..4) {
            0 => lo.to_string(),
            1 => hi.to_string(),
            2 => 0.max(lo).to_string(),
            _ => {
                let span = (hi - lo) as u128;
                let off = (rng.gen::<u128>() % (span + 1)) as i128;
                (lo + off).to_string()
            }
        },
        Kind::Decimal(p, s) => {
            let int_digits = (p - s) as usize;
            let digits = |rng: &mut StdRng, n: usize| -> String {
                (0..n)
                    .map(|_| char::from(b'0' + rng.gen_range(0..10u8)))
                    .collect()
            };
            let mut v = String::new();
            if rng.gen_bool(0.4) {
                v.push('-');
            }
            let n = rng.gen_range(0..=int_digits);
            v += &if n == 0 { "0".into() } else { digits(rng, n) };
            if s > 0 {
                v.push('.');
                let n = rng.gen_range(1..=s as usize);
                v += &digits(rng, n);
            }
            v
        }
        Kind::Float => {
            let x = f32::from_bits(rng.gen::<u32>());
            if x.is_finite() {
                format!("{x:e}")
            } else {
                "-0.0e0".into()
            }
        }
        Kind::Double => {
            let x = f64::from_bits(rng.gen::<u64>());
            if x.is_finite() {
                format!("{x:e}")
            } else {
                "1.5e-300".into()
            }
        }
        Kind::Bit(n) => {
            let bits: String = (0..n)
                .map(|_| if rng.gen_bool(0.5) { '1' } else { '0' })
                .collect();
            format!("b'{bits}'")
        }
        Kind::Date => format!(
            "'{:04}-{:02}-{:02}'",
            rng.gen_range(1000..=9999),
            rng.gen_range(1..=12),
            rng.gen_range(1..=28)
        ),
        Kind::Time(fsp) => {
            let sign = if rng.gen_bool(0.3) { "-" } else { "" };
            format!(
                "'{sign}{}:{:02}:{:02}{}'",
                rng.gen_range(0..=838),
                rng.gen_range(0..60),
                rng.gen_range(0..60),
                fraction(rng, fsp)
            )
        }
        Kind::DateTime(fsp, timestamp) => {
            let year = if timestamp {
                rng.gen_range(1971..=2037)
            } else {
                rng.gen_range(1000..=9999)
            };
            format!(
                "'{year:04}-{:02}-{:02} {:02}:{:02}:{:02}{}'",
                rng.gen_range(1..=12),
                rng.gen_range(1..=28),
                rng.gen_range(0..24),
                rng.gen_range(0..60),
                rng.gen_range(0..60),
                fraction(rng, fsp)
            )
        }
        Kind::Year => rng.gen_range(1901..=2155).to_string(),
        Kind::Text(max) => {
            const PIECES: &[&str] = &[
                "a", "Z", " ", "ç", "é", "ß", "x y", "0", "'", "\\\\", "%", "_",
            ];
            const WIDE: &[&str] = &["日本", "😀", "Ω"];
            let latin = max == 20;
            let n = rng.gen_range(0..=max.min(40));
            let mut s = String::new();
            let mut chars = 0;
            while chars < n {
                let p = if !latin && rng.gen_bool(0.1) {
                    WIDE[rng.gen_range(0..WIDE.len())]
                } else {
                    PIECES[rng.gen_range(0..PIECES.len())]
                };
                let len = p.replace("\\\\", "\\").chars().count();
                if chars + len > max {
                    break;
                }
                chars += len;
                s += &p.replace('\'', "''");
            }
            if max >= 3000 && rng.gen_bool(0.3) {
                // A long one (repeated, to stay within the type).
                s = s.repeat(40).chars().take(max).collect::<String>();
                // (A doubled quote or backslash cut in two would open
                // the literal.)
                if s.matches('\'').count() % 2 == 1 {
                    s = s.replace('\'', "");
                }
                if (s.len() - s.trim_end_matches('\\').len()) % 2 == 1 {
                    s.pop();
                }
            }
            format!("'{s}'")
        }
        Kind::Bytes(max) => {
            let n = if max > 60_000 && rng.gen_bool(0.3) {
                rng.gen_range(65_537..=max)
            } else {
                rng.gen_range(0..=max.min(64))
            };
            if n == 0 {
                return "X''".into();
            }
            let seed: u8 = rng.gen();
            let bytes: String = (0..n)
                .map(|i| format!("{:02x}", (i as u8).wrapping_mul(31).wrapping_add(seed)))
                .collect();
            format!("X'{bytes}'")
        }
        Kind::Enum => ["'a'", "'b'", "'ç'", "'long value'"][rng.gen_range(0..4)].into(),
        Kind::Set => ["''", "'x'", "'x,z'", "'y,ü'", "'x,y,z,ü'"][rng.gen_range(0..5)].into(),
        Kind::Json => [
            "'{}'",
            "'[1, 2.5, \"ç\", null, true]'",
            "'{\"k\": {\"n\": -1e10, \"s\": \"日本\"}}'",
            "'\"plain\"'",
        ][rng.gen_range(0..4)]
        .into(),
        Kind::Point => format!(
            "ST_GeomFromText('POINT({} {})')",
            rng.gen_range(-1000..1000),
            rng.gen_range(-1000..1000)
        ),
        Kind::Inet4 => format!(
            "'{}.{}.{}.{}'",
            rng.gen::<u8>(),
            rng.gen::<u8>(),
            rng.gen::<u8>(),
            rng.gen::<u8>()
        ),
        Kind::Inet6 => {
            if rng.gen_bool(0.3) {
                format!(
                    "'::ffff:{}.{}.{}.{}'",
                    rng.gen::<u8>(),
                    rng.gen::<u8>(),
                    0,
                    1
                )
            } else {
                let parts: Vec<String> =
                    (0..8).map(|_| format!("{:x}", rng.gen::<u16>())).collect();
                format!("'{}'", parts.join(":"))
            }
        }
        Kind::Uuid => {
            // (The server takes RFC 4122 ones — a version 1 to 5 with
            // variant 10xx — and the nil one.)
            let mut b: [u8; 16] = if rng.gen_bool(0.1) {
                [0; 16]
            } else {
                rng.gen()
            };
            if b != [0; 16] {
                b[6] = (b[6] & 0x0f) | (rng.gen_range(1..=5u8) << 4);
                b[8] = (b[8] & 0x3f) | 0x80;
            }
            let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
            format!(
                "'{}-{}-{}-{}-{}'",
                &h[0..8],
                &h[8..12],
                &h[12..16],
                &h[16..20],
                &h[20..32]
            )
        }
    }
}

/// `.ffffff` cut to `fsp` digits (none for 0).
fn fraction(rng: &mut StdRng, fsp: u32) -> String {
    if fsp == 0 {
        return String::new();
    }
    let digits: String = (0..fsp)
        .map(|_| char::from(b'0' + rng.gen_range(0..10u8)))
        .collect();
    format!(".{digits}")
}
