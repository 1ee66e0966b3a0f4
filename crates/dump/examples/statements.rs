//! Prints each statement the splitter reads from a file, one per block:
//! `cargo run --example statements -- FILE` (for comparing with what the
//! mysql client sends, e.g. `mariadb -vvv`).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: statements FILE")?;
    let opened = sqlfleet_dump::reader::open(std::path::Path::new(&path))?;
    for st in sqlfleet_dump::Splitter::new(opened.reader) {
        match st {
            Ok(st) => println!(
                "[{}] {}",
                st.line,
                sqlfleet_dump::printable::printable(&String::from_utf8_lossy(&st.text))
            ),
            Err(e) => {
                println!("ERROR {e}");
                break;
            }
        }
    }
    Ok(())
}
