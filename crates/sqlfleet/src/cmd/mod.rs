//! One module per subcommand: flags in, library call, exit code out.

pub mod bench;
pub mod bench_args;
pub mod inventory;
pub mod load;
pub mod man;
pub mod query;
pub mod relay;
pub mod replicate;
pub mod replicate_seed;
pub mod sandbox;
pub mod vocab;
pub mod watch;
pub mod watch_creds;
