//! The credential store: server logins (and SSH destinations) encrypted at
//! rest with a passphrase (age's scrypt recipient), file mode 0600, written
//! atomically (a temporary file in the same directory, synced, renamed over
//! the old one, the directory synced), so a crash mid-write leaves either
//! the old store or the new one. Secrets never leave this module except to
//! open a connection; `Entry`'s Debug hides the password.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use age::secrecy::SecretString;
use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
pub enum CredsError {
    #[error("{path}: wrong passphrase, or not a sqlfleet credential store")]
    Passphrase { path: String },
    #[error("{path}: the credential store is damaged ({what})")]
    Corrupt { path: String, what: String },
    #[error("{path}: no credential store here (create one with `sqlfleet watch creds init`)")]
    Missing { path: String },
    #[error("{path}: a credential store exists already")]
    Exists { path: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The entry holding the web page's login (basic auth), not a server's.
pub const WEB_LOGIN: &str = "@web";

/// One server's login.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Entry {
    /// `host:port` (or `unix:/path`), as the host list names it.
    pub server: String,
    pub user: Option<String>,
    pub password: Option<String>,
    /// `user@host` for host metrics over SSH.
    pub ssh: Option<String>,
    /// The SSH login's password, when the host takes no key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_password: Option<String>,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("server", &self.server)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("ssh", &self.ssh)
            .field("ssh_password", &self.ssh_password.as_ref().map(|_| "***"))
            .finish()
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Store {
    /// Format version of the decrypted document.
    pub version: u32,
    pub entries: Vec<Entry>,
}

impl Store {
    pub fn get(&self, server: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.server == server)
    }

    /// Adds or replaces the entry for its server.
    pub fn put(&mut self, e: Entry) {
        self.entries.retain(|x| x.server != e.server);
        self.entries.push(e);
        self.entries.sort_by(|a, b| a.server.cmp(&b.server));
    }

    pub fn remove(&mut self, server: &str) -> bool {
        let n = self.entries.len();
        self.entries.retain(|x| x.server != server);
        n != self.entries.len()
    }
}

/// Where the store lives by default.
pub fn default_path(home: &Path) -> PathBuf {
    home.join("watch").join("creds.age")
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CredsError + '_ {
    move |source| CredsError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The largest scrypt work factor (log2 N) a store may ask for.
const MAX_WORK_FACTOR: u8 = 22;

/// Reads and decrypts the store.
pub fn load(path: &Path, passphrase: &str) -> Result<Store, CredsError> {
    let p = path.display().to_string();
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(CredsError::Missing { path: p })
        }
        Err(e) => return Err(io(path)(e)),
    };
    let corrupt = |what: String| CredsError::Corrupt {
        path: p.clone(),
        what,
    };
    let decryptor = age::Decryptor::new(&bytes[..]).map_err(|e| corrupt(e.to_string()))?;
    let mut identity = age::scrypt::Identity::new(SecretString::from(passphrase.to_string()));
    // age refuses a work factor more than 16 times what this machine does in
    // a second *now*; a store written by us on a quiet moment is then refused
    // on a busy one. The store is our own 0600 file, so accept what we may
    // have written: up to 2^22 (4 GiB of scrypt memory, the bound that stops
    // a damaged header from asking for more).
    identity.set_max_work_factor(MAX_WORK_FACTOR);
    let mut reader = match decryptor.decrypt(std::iter::once(&identity as &dyn age::Identity)) {
        Ok(r) => r,
        Err(age::DecryptError::DecryptionFailed | age::DecryptError::NoMatchingKeys) => {
            return Err(CredsError::Passphrase { path: p })
        }
        Err(e) => return Err(corrupt(e.to_string())),
    };
    let mut plain = Vec::new();
    reader
        .read_to_end(&mut plain)
        .map_err(|e| corrupt(e.to_string()))?;
    serde_json::from_slice(&plain).map_err(|e| corrupt(e.to_string()))
}

/// Encrypts and writes the store atomically with mode 0600.
pub fn save(path: &Path, passphrase: &str, store: &Store) -> Result<(), CredsError> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let plain = serde_json::to_vec(store).map_err(|e| io(path)(std::io::Error::other(e)))?;
    let encryptor =
        age::Encryptor::with_user_passphrase(SecretString::from(passphrase.to_string()));
    let mut sealed = Vec::new();
    let mut w = encryptor.wrap_output(&mut sealed).map_err(io(path))?;
    w.write_all(&plain).map_err(io(path))?;
    w.finish().map_err(io(path))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".creds-")
        .tempfile_in(dir)
        .map_err(io(dir))?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o600))
            .map_err(io(path))?;
    }
    tmp.write_all(&sealed).map_err(io(path))?;
    tmp.as_file().sync_all().map_err(io(path))?;
    tmp.persist(path).map_err(|e| io(path)(e.error))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Held while one command reads, changes and writes the store.
#[derive(Debug)]
pub struct StoreLock {
    _file: std::fs::File,
}

/// Waits until this process may change the store at `path`: an exclusive
/// flock(2) on `path` + `.lock` beside it (the store itself is replaced by
/// a rename, so it cannot carry the lock). Two `creds add` at once each
/// read the store, added their entry and wrote it: the last write lost the
/// others' entries, and each said "saved". The kernel lets go of the lock
/// when the holder exits, killed or not; the file stays (a removed lock
/// file would let two holders in).
pub fn lock(path: &Path) -> Result<StoreLock, CredsError> {
    use std::os::fd::AsRawFd;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    let lock_path = dir.join(name);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io(&lock_path))?;
    loop {
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(StoreLock { _file: file });
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(io(&lock_path)(e));
        }
    }
}

/// Creates an empty store; refuses to overwrite one.
pub fn init(path: &Path, passphrase: &str) -> Result<(), CredsError> {
    if path.exists() {
        return Err(CredsError::Exists {
            path: path.display().to_string(),
        });
    }
    save(
        path,
        passphrase,
        &Store {
            version: 1,
            entries: Vec::new(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn entry(server: &str) -> Entry {
        Entry {
            server: server.into(),
            user: Some("monitor".into()),
            password: Some("s3cret pass".into()),
            ssh: Some("ops@db1".into()),
            ssh_password: Some("ssh pass".into()),
        }
    }

    #[test]
    fn round_trip_mode_and_no_plain_text_on_disk() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("watch/creds.age");
        init(&p, "pw").expect("init");
        assert!(matches!(init(&p, "pw"), Err(CredsError::Exists { .. })));
        let mut s = load(&p, "pw").expect("load");
        s.put(entry("db1:3306"));
        s.put(entry("db2:3306"));
        save(&p, "pw", &s).expect("save");
        let back = load(&p, "pw").expect("load");
        assert_eq!(back, s);
        let raw = std::fs::read(&p).expect("read");
        assert!(!raw.windows(6).any(|w| w == b"s3cret"), "password on disk");
        let mode = std::fs::metadata(&p).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!format!("{:?}", back).contains("s3cret"));
        // nothing left behind by the atomic write
        let names: Vec<_> = std::fs::read_dir(p.parent().expect("dir"))
            .expect("ls")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn wrong_passphrase_corrupt_and_missing_are_one_line_errors() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("creds.age");
        init(&p, "right").expect("init");
        let e = load(&p, "wrong").expect_err("wrong passphrase");
        assert!(matches!(e, CredsError::Passphrase { .. }), "{e}");
        let mut raw = std::fs::read(&p).expect("read");
        let n = raw.len();
        raw[n - 5] ^= 0x55;
        std::fs::write(&p, &raw).expect("write");
        let e = load(&p, "right").expect_err("corrupt");
        assert!(
            matches!(
                e,
                CredsError::Corrupt { .. } | CredsError::Passphrase { .. }
            ),
            "{e}"
        );
        std::fs::write(&p, b"garbage").expect("write");
        let e = load(&p, "right").expect_err("garbage");
        assert!(matches!(e, CredsError::Corrupt { .. }), "{e}");
        assert!(!e.to_string().contains('\n'));
        let e = load(&d.path().join("none"), "x").expect_err("missing");
        assert!(matches!(e, CredsError::Missing { .. }));
    }
}
