//! Choosing and checking TCP ports on 127.0.0.1, and reserving them
//! machine-wide.
//!
//! A port is free when nothing listens on it *and* no sandbox reserved
//! it: a Galera node's IST and SST ports are bound only during a state
//! transfer, so a bind check alone hands them to a second cluster. Each
//! port a sandbox uses (SQL, gcomm, IST, SST) is reserved in a registry
//! directory shared by every SQLFLEET_HOME of the user (one file per
//! port, created exclusively — two sandboxes starting at once cannot
//! both take a port — naming the sandbox's directory); `destroy` releases
//! them, and a reservation whose sandbox is gone is taken back.

use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// `count` consecutive free ports from `start` up, skipping `taken`,
/// reserved for the sandbox at `owner`.
pub fn find_block(start: u16, count: usize, taken: &[u16], owner: &Path) -> Option<u16> {
    let mut base = start;
    'outer: while (base as usize) + count < u16::MAX as usize {
        for i in 0..count as u16 {
            let p = base + i;
            if taken.contains(&p) || !is_free(p) || !reserve(p, owner) {
                for q in base..p {
                    release(q, owner);
                }
                base = p + 1;
                continue 'outer;
            }
        }
        return Some(base);
    }
    None
}

/// The registry of reserved ports (`SQLFLEET_PORT_REGISTRY`, else one per
/// user in the system's temporary directory).
pub fn registry() -> PathBuf {
    if let Some(d) = std::env::var_os("SQLFLEET_PORT_REGISTRY") {
        return PathBuf::from(d);
    }
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    std::env::temp_dir().join(format!("sqlfleet-ports-{uid}"))
}

/// How long a reservation without its sandbox's file stands (the sandbox
/// may still be being created).
const UNCLAIMED: Duration = Duration::from_secs(600);

/// Reserves `port` for the sandbox at `owner` (its directory): true when
/// it is now `owner`'s, whether just reserved or already; false when
/// another live sandbox holds it. A reservation whose sandbox is gone (no
/// `sandbox.toml`, older than [`UNCLAIMED`]) is taken over.
pub fn reserve(port: u16, owner: &Path) -> bool {
    let dir = registry();
    if std::fs::create_dir_all(&dir).is_err() {
        return true; // no registry: the bind check alone, as before
    }
    let file = dir.join(port.to_string());
    // The reservation appears whole or not at all: written under a name of
    // this process's own, then linked into place (a link, like
    // `create_new`, fails when the name exists). A file created empty and
    // written after would let another `up` read it empty in between, call
    // it abandoned and take the port over.
    let tmp = dir.join(format!(
        ".{port}.{}.{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    if std::fs::write(&tmp, owner.as_os_str().as_encoded_bytes()).is_err() {
        return true; // no registry: the bind check alone, as before
    }
    let r = (|| {
        for _ in 0..2 {
            match std::fs::hard_link(&tmp, &file) {
                Ok(()) => return true,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let holder = std::fs::read(&file).unwrap_or_default();
                    if holder == owner.as_os_str().as_encoded_bytes() {
                        return true;
                    }
                    if !abandoned(&file, &holder) {
                        return false;
                    }
                    let _ = std::fs::remove_file(&file);
                }
                Err(_) => return true,
            }
        }
        false
    })();
    let _ = std::fs::remove_file(&tmp);
    r
}

/// Distinguishes one process's temporary reservation files.
static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A reservation whose sandbox no longer exists: its directory is gone
/// (a sandbox's directory is made before its ports are reserved), or it
/// never got its `sandbox.toml` within [`UNCLAIMED`].
fn abandoned(file: &Path, holder: &[u8]) -> bool {
    let unnamed = holder.is_empty();
    let holder = Path::new(std::ffi::OsStr::from_bytes(holder));
    if holder.join("sandbox.toml").is_file() {
        return false;
    }
    std::fs::metadata(file)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age >= UNCLAIMED)
        || (!unnamed && !holder.is_dir())
}

/// Gives `port` back if `owner` holds it.
pub fn release(port: u16, owner: &Path) {
    let file = registry().join(port.to_string());
    if std::fs::read(&file).is_ok_and(|h| h == owner.as_os_str().as_encoded_bytes()) {
        let _ = std::fs::remove_file(file);
    }
}

/// Reserves each of `ports` for `owner`, or fails naming the first one
/// another sandbox holds (releasing what it reserved).
pub fn reserve_all(ports: &[u16], owner: &Path) -> Result<()> {
    for (i, &p) in ports.iter().enumerate() {
        if !reserve(p, owner) {
            for &q in &ports[..i] {
                release(q, owner);
            }
            return Err(SandboxError::PortInUse { port: p });
        }
    }
    Ok(())
}

/// `count` distinct ports free now, drawn at random below the kernel's
/// ephemeral range (`ip_local_port_range`), for tests that must not
/// collide with each other: a port the kernel hands out itself may become
/// an outgoing connection's source port before its server binds it (a
/// Galera node's SST port was taken so: rsync refused with EBUSY).
pub fn ephemeral(count: usize) -> Result<Vec<u16>> {
    use rand::Rng;
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    let range = 20_000..low.max(20_000 + 4 * count as u16 + 64);
    let mut rng = rand::thread_rng();
    let mut out: Vec<u16> = Vec::with_capacity(count);
    for _ in 0..count * 1000 {
        if out.len() == count {
            break;
        }
        let p = rng.gen_range(range.clone());
        if !out.contains(&p) && TcpListener::bind((Ipv4Addr::LOCALHOST, p)).is_ok() {
            out.push(p);
        }
    }
    if out.len() < count {
        return Err(SandboxError::PortInUse { port: range.start });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two sandboxes cannot both reserve a port; a reservation whose
    /// sandbox is gone is taken back; released ports are free again.
    #[test]
    fn reservations_are_exclusive_and_stale_ones_return() {
        let reg = tempfile::tempdir().expect("tmp");
        std::env::set_var("SQLFLEET_PORT_REGISTRY", reg.path());
        let homes = tempfile::tempdir().expect("tmp");
        let (a, b) = (homes.path().join("a"), homes.path().join("b"));
        for d in [&a, &b] {
            std::fs::create_dir_all(d).expect("dir");
            std::fs::write(d.join("sandbox.toml"), "").expect("meta");
        }
        assert!(reserve(45001, &a));
        assert!(reserve(45001, &a), "again for its holder");
        assert!(!reserve(45001, &b), "another live sandbox's");
        assert!(reserve_all(&[45002, 45001], &b).is_err());
        assert!(
            reserve(45002, &a),
            "a failed reserve_all gave back what it took"
        );
        release(45001, &b);
        assert!(!reserve(45001, &b), "only its holder releases it");
        release(45001, &a);
        assert!(reserve(45001, &b));
        // a's sandbox is destroyed: its reservations are b's for the asking.
        std::fs::remove_dir_all(&a).expect("rm");
        assert!(reserve(45002, &b));
        // Blocks skip reserved ports.
        let c = homes.path().join("c");
        std::fs::create_dir_all(&c).expect("dir");
        std::fs::write(c.join("sandbox.toml"), "").expect("meta");
        let base = find_block(45001, 2, &[], &c).expect("block");
        assert!(base >= 45003, "{base}");
        std::env::remove_var("SQLFLEET_PORT_REGISTRY");
    }

    #[test]
    fn busy_port_is_reported() {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
        let port = l.local_addr().expect("addr").port();
        let e = ensure_free(port).expect_err("busy").to_string();
        assert_eq!(
            e,
            format!("port {port} is in use on 127.0.0.1: pick another with --port")
        );
        let owner = tempfile::tempdir().expect("tmp");
        let b = find_block(port, 2, &[], owner.path()).expect("some block");
        assert!(b > port);
        let e = ephemeral(3).expect("ports");
        assert_eq!(e.len(), 3);
    }
}
