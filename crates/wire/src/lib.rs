//! The MySQL wire protocol pieces the relay, query and replicate need: [`packet`]
//! framing and ERR/OK payloads, the [`compress`]ed protocol's frames, MariaDB's
//! [`binlog_compressed`] events read as plain ones, the [`handshake`] on both sides, and a small
//! text-protocol [`client`].

pub mod binlog_compressed;
pub mod client;
pub mod command;
pub mod compress;
pub mod handshake;
pub mod packet;

pub use packet::{Packet, WireError};
