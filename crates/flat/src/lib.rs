//! Flat files (CSV, TSV) for `sqlfleet load --into`: [`format::Format`]
//! (LOAD DATA's field and line syntax), [`chunk::Chunker`] (records →
//! chunks at record boundaries, with checks) and [`fields`] (a chunk's
//! fields, for the INSERT fallback). Pure: no network.

pub mod chunk;
pub mod fields;
pub mod format;

pub use chunk::{Checks, Chunk, Chunker, FlatError};
pub use format::Format;
