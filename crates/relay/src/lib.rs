//! `sqlfleet relay`: a MySQL-protocol connection pool and proxy.
//!
//! By concept: [`frontend`] logs clients in and serves their commands;
//! [`backend`] dials and logs in to servers, pools the connections and
//! checks their health; `routing` holds what decides where a statement
//! goes; [`protocol`] reads the wire (packets, replies, statement text,
//! prepared statement ids); `admin` serves metrics and status; [`config`]
//! is the one validated configuration, from flags or a file; `listen`
//! accepts clients; [`tls`] holds both TLS directions; [`run`] starts a
//! relay from its configuration (the binary and the tests alike);
//! `supervise` keeps the relay's own tasks through a panic in them.
//!
//! In transaction mode a backend connection serves many clients, one
//! transaction at a time; a client's session state is replayed on the
//! connection it gets next, and anything that cannot be replayed exactly
//! pins the client to its connection.

mod admin;
pub mod backend;
pub mod cache;
pub mod config;
pub mod event_loops;
pub mod frontend;
mod listen;
pub mod protocol;
mod relay;
mod routing;
pub mod run;
mod start_error;
mod status;
mod supervise;
pub mod tls;

pub use config::RelayConfig;
pub use frontend::ctx::Ctx;
pub use listen::{accept_loop, Accepted, Listener};
pub use relay::{AccountsNote, Relay};
/// The settings a new session reads with that change a read's value
/// (`routing/defaults.rs`), for the test that holds the server's list
/// against them.
pub use routing::defaults::READ_DEFAULTS;
