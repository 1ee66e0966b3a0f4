//! The MySQL wire protocol pieces the relay and query need: [`packet`]
//! framing and ERR/OK payloads, the [`compress`]ed protocol's frames, the [`handshake`] on both sides, and a small
//! text-protocol [`client`].

pub mod client;
pub mod command;
pub mod compress;
pub mod handshake;
pub mod packet;

pub use packet::{Packet, WireError};
