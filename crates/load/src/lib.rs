//! The parallel, crash-safe loader for SQL dumps.
//!
//! Data flow: `source` (reader thread: decompress, split, classify) →
//! `schedule` (order and overlap) → `worker`s (one connection each,
//! batches in transactions with their [`journal`] record) and
//! [`progress`]. Session settings travel as a `session::Prelude`.

mod binary_columns;
mod chunk_job;
mod counts;
mod defer;
mod dir;
mod earlier;
mod engine;
mod error;
mod fast_path;
pub mod flat;
pub mod galera;
mod identity;
mod infile;
mod job;
pub mod journal;
mod placement;
pub mod progress;
mod queue;
mod retry;
mod run;
mod schedule;
mod session;
mod source;
mod state;
mod summary;
mod worker;

pub use error::{LoadError, StatementFailure};
pub use run::{load, LoadOptions};
pub use session::Binlog;
pub use source::has_trailer;
pub use summary::{SourcePosition, Summary};
