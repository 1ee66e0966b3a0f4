//! One command at a time on a sandbox: `up`, `down`, `destroy` and
//! `promote` hold an exclusive lock on `sandboxes/.locks/NAME.lock` while
//! they change it. Two `up`s of one name at once (parallel CI jobs) would
//! each make the sandbox and remove the other's on failing, and a failing
//! `up` stops every node; the second now waits for the first, then finds
//! the sandbox running. The lock file is outside the sandbox's directory
//! (a destroy removes that) and is never removed (a removed lock file
//! would let a waiter and a newcomer hold two locks). flock(2): the kernel
//! lets it go when the holder exits, killed or not.

use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;

use crate::error::{Result, SandboxError};

/// Held until dropped.
#[derive(Debug)]
pub struct SandboxLock {
    _file: std::fs::File,
}

/// Waits until this process holds the sandbox's lock; `waiting` is called
/// once if another process holds it (to say so). An interrupt while
/// waiting stops the wait.
pub async fn lock(
    home: &Path,
    name: &str,
    stop: &crate::Interrupt,
    waiting: impl FnOnce(),
) -> Result<SandboxLock> {
    sqlfleet_conn::resolve::check_sandbox_name(name)?;
    let dir = home.join("sandboxes").join(".locks");
    std::fs::create_dir_all(&dir).map_err(SandboxError::io(&dir))?;
    let path = dir.join(format!("{name}.lock"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(SandboxError::io(&path))?;
    let mut waiting = Some(waiting);
    loop {
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(SandboxLock { _file: file });
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::WouldBlock {
            return Err(SandboxError::io(&path)(e));
        }
        if let Some(w) = waiting.take() {
            w();
        }
        stop.check()?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
