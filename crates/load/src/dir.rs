//! A mydumper directory as the loader's input: its listing planned in
//! myloader's order (`sqlfleet_dump::mydumper`), named by its content
//! and sized for progress.
//!
//! The files are read one after another as one stream (each file's
//! statements at their place in it), so a directory loads, journals and
//! resumes as one dump does: tables in parallel, each statement exactly
//! once. Its identity covers the metadata file (the dump's start time
//! and source position), every file's name and size, and the database it
//! loads into; the statement chain then checks every byte on a resume.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use sqlfleet_dump::mydumper::{self, Position, Step};

/// A step of the stream: a statement of the plan's own, or a file.
#[derive(Debug, Clone)]
pub enum Part {
    Sql(String),
    File(PathBuf),
}

/// A planned directory.
#[derive(Debug, Clone)]
pub struct DirInput {
    /// The directory (statements of the load's own are placed there).
    pub dir: PathBuf,
    pub parts: Vec<Part>,
    /// The input's identity (before binding to a database).
    pub id: String,
    /// The files' sizes on disk.
    pub size: u64,
    /// Some file is gzip or zstd (progress then counts bytes on disk).
    pub compressed: bool,
    /// Where the dumped server's binary log stood.
    pub position: Option<Position>,
}

/// Why a directory is not loaded: the file, and the cause.
#[derive(Debug)]
pub struct DirError {
    pub path: PathBuf,
    pub what: String,
}

/// Lists, plans and names `dir`. `into` loads its one database under
/// another name.
pub fn open(dir: &Path, into: Option<&str>) -> Result<DirInput, DirError> {
    let fail = |path: &Path, what: String| DirError {
        path: path.to_path_buf(),
        what,
    };
    let mut names = Vec::new();
    let listing = std::fs::read_dir(dir).map_err(|e| fail(dir, e.to_string()))?;
    for entry in listing {
        let entry = entry.map_err(|e| fail(dir, e.to_string()))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            return Err(fail(
                &entry.path(),
                "a file name that is not UTF-8: not a file of a mydumper dump".into(),
            ));
        };
        // (a symbolic link to a file is a file)
        if !entry.path().is_file() {
            return Err(fail(
                &entry.path(),
                "not a regular file: a mydumper dump directory holds only its files".into(),
            ));
        }
        names.push(name.to_owned());
    }
    names.sort();
    let plan = mydumper::plan(&names, into).map_err(|e| fail(dir, e.0))?;
    let meta_path = dir.join(mydumper::METADATA);
    let meta = std::fs::read(&meta_path).map_err(|e| fail(&meta_path, e.to_string()))?;
    let position =
        mydumper::metadata(&String::from_utf8_lossy(&meta)).map_err(|e| fail(&meta_path, e.0))?;
    let mut id = Sha256::new();
    id.update(b"mydumper directory\0");
    id.update((meta.len() as u64).to_le_bytes());
    id.update(&meta);
    id.update(into.unwrap_or("").as_bytes());
    id.update(b"\0");
    let mut parts = Vec::with_capacity(plan.steps.len());
    let mut size = 0u64;
    let mut compressed = false;
    for step in plan.steps {
        match step {
            Step::Sql(q) => {
                id.update(b"sql\0");
                id.update(q.as_bytes());
                id.update(b"\0");
                parts.push(Part::Sql(q));
            }
            Step::File(name) => {
                let path = dir.join(&name);
                let len = std::fs::metadata(&path)
                    .map_err(|e| fail(&path, e.to_string()))?
                    .len();
                compressed |= name.ends_with(".gz") || name.ends_with(".zst");
                size += len;
                id.update(b"file\0");
                id.update(name.as_bytes());
                id.update(len.to_le_bytes());
                parts.push(Part::File(path));
            }
        }
    }
    Ok(DirInput {
        dir: dir.to_path_buf(),
        parts,
        id: crate::identity::hex(&id.finalize()[..16]),
        size,
        compressed,
        position,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::write(dir.join(name), text).expect("write");
    }

    #[test]
    fn the_identity_follows_the_metadata_the_files_and_the_target() {
        let d = tempfile::tempdir().expect("tmp");
        write(
            d.path(),
            "metadata",
            "Started dump at: 1\nSHOW MASTER STATUS:\n\tLog: b.1\n\tPos: 4\n\tGTID:0-1-1\n",
        );
        write(d.path(), "s-schema-create.sql", "CREATE DATABASE `s`;\n");
        write(d.path(), "s.t-schema.sql", "CREATE TABLE t (a int);\n");
        write(d.path(), "s.t.sql", "INSERT INTO t VALUES (1);\n");
        let a = open(d.path(), None).expect("open");
        assert_eq!(
            a.position.as_ref().map(|p| p.to_string()).as_deref(),
            Some("b.1:4, GTID 0-1-1")
        );
        assert_eq!(a.parts.len(), sqlfleet_dump::mydumper::SESSION.len() + 4);
        assert!(!a.compressed);
        assert_ne!(a.id, open(d.path(), Some("x")).expect("into").id);
        write(d.path(), "s.t.sql", "INSERT INTO t VALUES (22);\n");
        let grown = open(d.path(), None).expect("open");
        assert_ne!(a.id, grown.id, "a file of another size is another dump");
        write(d.path(), "metadata", "Started dump at: 2\n");
        assert_ne!(
            grown.id,
            open(d.path(), None).expect("open").id,
            "another dump run"
        );
        std::fs::create_dir(d.path().join("sub")).expect("mkdir");
        let e = open(d.path(), None).expect_err("a subdirectory");
        assert!(e.what.contains("not a regular file"), "{}", e.what);
    }
}
