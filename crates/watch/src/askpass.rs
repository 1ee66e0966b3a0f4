//! An SSH password from the credential store, given to OpenSSH without a
//! command line, an environment value or a file holding it: ssh runs our
//! own binary as its `SSH_ASKPASS` program (`SSH_ASKPASS_REQUIRE=force`),
//! which fetches the password over a Unix socket that the watcher serves
//! from a fresh mode-0700 directory, to processes of the same user only
//! (checked with the socket's peer credentials), for as long as that ssh
//! session runs. Never `sshpass`, never argv.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sqlfleet_conn::Secret;
use tokio::io::AsyncWriteExt;

/// The variable naming the socket, set only in ssh's environment; the
/// binary answers as an askpass program when it finds it.
pub const ENV: &str = "SQLFLEET_ASKPASS_SOCKET";

/// A served password; the socket and its directory go with it.
pub struct Served {
    path: PathBuf,
    _dir: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
}

impl Served {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `password` to same-user processes that connect to the socket.
pub fn serve(password: Secret) -> std::io::Result<Served> {
    use std::os::unix::fs::PermissionsExt;
    // Made 0700 from the start: only this user can reach the socket.
    let dir = tempfile::Builder::new()
        .prefix("sqlfleet-askpass")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()?;
    let path = dir.path().join("s");
    let listener = tokio::net::UnixListener::bind(&path)?;
    let uid = unsafe { libc::geteuid() };
    let task = tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let same_user = s.peer_cred().map(|c| c.uid() == uid).unwrap_or(false);
            if same_user {
                let _ = s.write_all(password.expose().as_bytes()).await;
            }
            let _ = s.shutdown().await;
        }
    });
    Ok(Served {
        path,
        _dir: dir,
        task,
    })
}

/// The askpass side, run by the binary when ssh starts it: prints the
/// password on stdout (as ssh expects) and returns the exit code.
pub fn answer(socket: &Path) -> i32 {
    let mut s = match std::os::unix::net::UnixStream::connect(socket) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sqlfleet askpass: {}: {e}", socket.display());
            return 1;
        }
    };
    let mut pw = Vec::new();
    if let Err(e) = s.read_to_end(&mut pw) {
        eprintln!("sqlfleet askpass: {e}");
        return 1;
    }
    if pw.is_empty() {
        eprintln!("sqlfleet askpass: no password was given");
        return 1;
    }
    let mut out = std::io::stdout().lock();
    if out
        .write_all(&pw)
        .and_then(|_| out.write_all(b"\n"))
        .is_err()
    {
        return 1;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_socket_gives_the_password_and_lives_in_a_private_directory() {
        use std::os::unix::fs::PermissionsExt;
        let served = serve(Secret::new("pa ss\u{e9}")).expect("serve");
        let mode = std::fs::metadata(served.path().parent().expect("dir"))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        let p = served.path().to_path_buf();
        let got = tokio::task::spawn_blocking(move || {
            let mut s = std::os::unix::net::UnixStream::connect(&p).expect("connect");
            let mut b = String::new();
            s.read_to_string(&mut b).expect("read");
            b
        })
        .await
        .expect("join");
        assert_eq!(got, "pa ss\u{e9}");
        let p = served.path().to_path_buf();
        drop(served);
        assert!(!p.exists());
    }
}
