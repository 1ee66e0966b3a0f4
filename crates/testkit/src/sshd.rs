//! A real OpenSSH server on a loopback port for host-metrics tests: host
//! and client keys made by the test, and optionally password logins for
//! a dedicated local account (made once, with a fresh password per test).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Sshd {
    child: Child,
    pub port: u16,
    /// The client key authorised for every user.
    pub client_key: PathBuf,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn keygen(path: &Path) {
    let ok = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .expect("ssh-keygen (scripts/deps.sh installs openssh-client)");
    assert!(ok.success());
}

/// The account password logins use; (re)created with `password` (needs root).
pub const PASSWORD_USER: &str = "sqlfleet-sshtest";

/// Gives [`PASSWORD_USER`] this password, creating the account (no home,
/// /bin/sh) when missing. Panics unless run as root.
pub fn password_user(password: &str) -> String {
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "password SSH logins need a local account: run the tests as root (CI does)"
    );
    let exists = Command::new("id")
        .arg(PASSWORD_USER)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !exists {
        let ok = Command::new("useradd")
            .args(["-M", "-s", "/bin/sh", PASSWORD_USER])
            .status()
            .expect("useradd");
        assert!(ok.success(), "useradd {PASSWORD_USER}");
    }
    let mut c = Command::new("chpasswd")
        .stdin(Stdio::piped())
        .spawn()
        .expect("chpasswd");
    use std::io::Write;
    c.stdin
        .take()
        .expect("stdin")
        .write_all(format!("{PASSWORD_USER}:{password}\n").as_bytes())
        .expect("write");
    assert!(c.wait().expect("chpasswd").success());
    PASSWORD_USER.to_string()
}

/// Starts sshd in `dir`; `passwords` allows password logins too.
pub fn start(dir: &Path, passwords: bool) -> Sshd {
    keygen(&dir.join("host_key"));
    keygen(&dir.join("client_key"));
    std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys")).expect("keys");
    let port = crate::proxy::free_port();
    let cfg = dir.join("sshd_config");
    let pw = if passwords { "yes" } else { "no" };
    std::fs::write(
        &cfg,
        format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}\nPidFile {}\n\
             PasswordAuthentication {pw}\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\n",
            dir.join("host_key").display(),
            dir.join("authorized_keys").display(),
            dir.join("sshd.pid").display(),
        ),
    )
    .expect("sshd_config");
    // sshd wants its privilege separation directory.
    let _ = std::fs::create_dir_all("/run/sshd");
    let child = Command::new("/usr/sbin/sshd")
        .args(["-D", "-e", "-f"])
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sshd (scripts/deps.sh installs openssh-server)");
    let t0 = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(10), "sshd did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    Sshd {
        child,
        port,
        client_key: dir.join("client_key"),
    }
}
