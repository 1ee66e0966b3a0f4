//! Splits (and optionally converts) a dump and reports the throughput:
//! `cargo run --release --example split_speed -- dump.sql [convert]`.
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: split_speed FILE [convert]")?;
    let convert = std::env::args().nth(2).is_some();
    let t = Instant::now();
    let opened = sqlfleet_dump::reader::open(std::path::Path::new(&path))?;
    let (mut n, mut bytes, mut rows) = (0u64, 0u64, 0u64);
    for st in sqlfleet_dump::Splitter::new(opened.reader) {
        let st = st?;
        n += 1;
        bytes += st.text.len() as u64;
        if convert {
            if let Some(r) = sqlfleet_dump::values::insert_to_rows(
                &st.text,
                sqlfleet_dump::values::Quoting::DEFAULT,
            ) {
                rows += r.rows;
            }
        }
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "{n} statements, {rows} rows converted, {:.1} MB in {s:.2}s = {:.0} MB/s",
        bytes as f64 / 1e6,
        bytes as f64 / 1e6 / s
    );
    Ok(())
}
