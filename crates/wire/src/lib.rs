//! The MySQL wire protocol pieces the relay needs: [`packet`] framing and
//! ERR/OK payloads, and the [`handshake`] on both sides.

pub mod command;
pub mod handshake;
pub mod packet;

pub use packet::{Packet, WireError};
