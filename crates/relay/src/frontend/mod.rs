//! Everything on the client side of the relay: logging clients in
//! ([`auth`], with the RSA key of [`rsa`]) and serving their commands
//! ([`session`]).

pub mod auth;
pub mod clients;
pub mod rsa;
pub mod session;
