//! The MySQL protocol as the relay reads it: packet I/O and forwarding
//! ([`io`]), following a reply without decoding rows ([`reply`]), what a
//! statement's text does to session state ([`sql`]), prepared statement
//! ids and their rewriting ([`stmt`]), and the session-state tracker data
//! a server puts in its OK packets ([`track`]), and a reply's digest for
//! comparing it with the same statement's reply elsewhere ([`digest`]).

pub mod digest;
pub mod io;
pub mod reply;
pub mod sql;
pub mod stmt;
pub mod track;
