//! Choosing and checking TCP ports on 127.0.0.1.

use std::net::{Ipv4Addr, TcpListener};

use crate::error::{Result, SandboxError};

/// Fails with [`SandboxError::PortInUse`] if something listens on `port`.
pub fn ensure_free(port: u16) -> Result<()> {
    if is_free(port) {
        Ok(())
    } else {
        Err(SandboxError::PortInUse { port })
    }
}

pub fn is_free(port: u16) -> bool {
    TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok()
}

/// `count` consecutive free ports from `start` up, skipping `taken`.
pub fn find_block(start: u16, count: usize, taken: &[u16]) -> Option<u16> {
    let mut base = start;
    'outer: while (base as usize) + count < u16::MAX as usize {
        for i in 0..count as u16 {
            let p = base + i;
            if taken.contains(&p) || !is_free(p) {
                base = p + 1;
                continue 'outer;
            }
        }
        return Some(base);
    }
    None
}

/// `count` ports the kernel says are free now (not necessarily adjacent);
/// for tests that must not collide with each other.
pub fn ephemeral(count: usize) -> Result<Vec<u16>> {
    let listeners: Vec<TcpListener> = (0..count)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
        .collect::<std::io::Result<_>>()
        .map_err(SandboxError::io("127.0.0.1:0"))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<std::io::Result<_>>()
        .map_err(SandboxError::io("127.0.0.1:0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_port_is_reported() {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
        let port = l.local_addr().expect("addr").port();
        let e = ensure_free(port).expect_err("busy").to_string();
        assert_eq!(
            e,
            format!("port {port} is in use on 127.0.0.1: pick another with --port")
        );
        let b = find_block(port, 2, &[]).expect("some block");
        assert!(b > port);
        let e = ephemeral(3).expect("ports");
        assert_eq!(e.len(), 3);
    }
}
