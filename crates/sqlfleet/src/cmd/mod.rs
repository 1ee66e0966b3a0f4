//! One module per subcommand: flags in, library call, exit code out.

pub mod bench;
pub mod load;
pub mod pending;
pub mod query;
pub mod sandbox;
