//! Reading SQL dumps: [`reader::open`] (file or stdin, gzip/zstd by magic
//! bytes), [`split::Splitter`] (bytes → statements with offsets and lines)
//! and [`classify::classify`] (what each statement is). Pure: no network.

pub mod classify;
pub mod comments;
pub mod digest;
pub mod inspect;
pub mod lex;
pub mod mydumper;
pub mod printable;
pub mod reader;
pub mod split;
pub mod values;

pub use classify::{classify, Kind, TableRef};
pub use split::{SplitError, Splitter, Statement};
