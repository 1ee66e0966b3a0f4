//! Everything on the client side of the relay: logging clients in
//! ([`auth`], with the RSA key of [`rsa`]) and serving their commands
//! ([`session`]), and the replies it gives without a server round trip
//! ([`answers`]); [`ctx`] is what every session shares.

pub mod answers;
pub mod auth;
pub mod clients;
pub mod ctx;
pub mod replays;
pub mod rsa;
pub mod session;
pub mod throttle;
pub mod trace;
