//! Local MariaDB servers for users, tests and benchmarks.
//!
//! A sandbox is a directory under `$SQLFLEET_HOME/sandboxes/NAME` holding
//! one primary and optional GTID replicas, each a `mariadbd` from this
//! machine bound to 127.0.0.1, with a generated root password in a 0600
//! file and client option files other tools can use. Starting is polled
//! for readiness, never slept for.

mod cluster;
pub mod converge;
mod error;
mod galera;
mod handle;
mod interrupt;
mod lock;
pub mod meta;
pub mod node;
pub mod ports;
mod promote;
pub mod setup;
mod status;
mod up;

pub use error::{Result, SandboxError};
pub use handle::{names, Sandbox, DEFAULT_NAME, FIRST_PORT};
pub use interrupt::Interrupt;
pub use lock::{lock, SandboxLock};
pub use meta::{Layout, Meta, NodeMeta, Role};
pub use node::Binaries;
pub use promote::PromoteReport;
pub use setup::ReplHealth;
pub use status::{gtid_behind, NodeStatus};
pub use up::{up, UpOptions, UpReport};
