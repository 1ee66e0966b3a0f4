//! Flat files (CSV, TSV) for `sqlfleet load --into`: [`format::Format`]
//! (LOAD DATA's field and line syntax), [`chunk::Chunker`] (records →
//! chunks at record boundaries, with checks), [`fields`] (a chunk's
//! fields, for the INSERT fallback) and [`naming`] (what a file's name
//! says: format, table). Pure: no network.

pub mod chunk;
pub mod fields;
pub mod format;
pub mod naming;

pub use chunk::{leaves_id_to_server, Checks, Chunk, Chunker, FlatError, ServerAssigns};
pub use format::Format;
pub use sqlfleet_dump::lex::Multibyte;
