//! Everything on the server side of the relay: the one way to dial and
//! log in to a backend ([`dial`]), the commands the relay sends on its own
//! behalf ([`command`]), the pool of logged-in connections ([`pool`]) and
//! health checks over the same dial path ([`health`]), each account's
//! share of the pool ([`share`]), the relay's own
//! connection for lookups ([`side`]): per-user, accounts looked up on the
//! server ([`accounts`]), which tables' writes do what no tracker
//! reports ([`write_effects`]) and which views' reads do ([`view_calls`]),
//! and when a connection's session tracker stopped telling the truth
//! ([`tracker`]).

pub mod accounts;
pub mod command;
pub mod conn_state;
pub mod dial;
pub mod health;
pub mod pool;
pub mod share;
pub mod side;
pub mod tracker;
pub mod view_calls;
pub mod write_effects;
pub mod write_scope;
