//! One module per subcommand: flags in, library call, exit code out.

pub mod pending;
pub mod sandbox;
