//! What a newcomer reads first holds: the README stays short (300 lines
//! at most), every relative link in it and in the guide (docs/guide, an
//! mdBook) leads to a file that exists, the guide's table of contents
//! lists every chapter, and every `Try` block marked ```` ```sh try ````
//! runs as written — in bash, stopping at the first failing line —
//! against a sandbox of the demo's shape (a primary and two replicas; the
//! block's `demo` is that sandbox's name).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Relative link targets (`](x)`, not http, anchors dropped).
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = &rest[..end];
        if !target.starts_with("http") && !target.starts_with('#') && !target.starts_with("mailto:")
        {
            out.push(target.split('#').next().unwrap_or_default().to_string());
        }
    }
    out
}

/// The ```` ```sh try ```` blocks of a markdown text.
fn try_blocks(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<Vec<&str>> = None;
    for l in text.lines() {
        match (&mut cur, l.trim_end()) {
            (None, "```sh try") => cur = Some(Vec::new()),
            (Some(b), "```") => {
                out.push(b.join("\n"));
                cur = None;
            }
            (Some(b), l) => b.push(l),
            _ => {}
        }
    }
    out
}

#[test]
fn the_readme_is_short_and_every_link_of_it_and_the_guide_resolves() {
    let readme = read(&root().join("README.md"));
    let n = readme.lines().count();
    assert!(
        n <= 300,
        "README.md has {n} lines; the reference belongs in docs/guide"
    );
    let guide = root().join("docs/guide");
    let mut texts = vec![(root(), readme.clone())];
    let mut chapters = Vec::new();
    for e in std::fs::read_dir(&guide).expect("docs/guide").flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "md") {
            chapters.push(
                p.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned(),
            );
            texts.push((guide.clone(), read(&p)));
        }
    }
    let mut broken = Vec::new();
    for (dir, text) in &texts {
        for l in links(text) {
            if !dir.join(&l).exists() {
                broken.push(format!("{} -> {l}", dir.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links: {broken:#?}");
    let summary = read(&guide.join("SUMMARY.md"));
    for c in chapters.iter().filter(|c| *c != "SUMMARY.md") {
        assert!(
            summary.contains(&format!("({c})")),
            "SUMMARY.md does not list {c}"
        );
    }
    assert!(
        read(&root().join("docs/book.toml")).contains("src = \"guide\""),
        "docs/book.toml builds docs/guide"
    );
    // The book builds (mdbook, which scripts/deps.sh installs), a page per
    // chapter, and mdbook finds nothing to warn about.
    let out = tempfile::tempdir().expect("tmp");
    let mdbook = std::env::var("HOME")
        .map(|h| PathBuf::from(h).join(".cargo/bin/mdbook"))
        .ok()
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("mdbook"));
    let o = std::process::Command::new(&mdbook)
        .arg("build")
        .arg(root().join("docs"))
        .arg("-d")
        .arg(out.path())
        .output()
        .expect("mdbook (scripts/deps.sh installs it with cargo install)");
    let log = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "mdbook build docs: {log}");
    assert!(
        !log.contains("WARN") && !log.contains("ERROR"),
        "mdbook build docs: {log}"
    );
    for c in chapters.iter().filter(|c| *c != "SUMMARY.md") {
        let page = out.path().join(c.replace(".md", ".html"));
        assert!(page.is_file(), "the book has no page {}", page.display());
    }
    // Each command has its try-first block in the README.
    let blocks = try_blocks(&readme);
    for cmd in ["load", "query", "relay", "bench", "watch"] {
        assert!(
            blocks
                .iter()
                .any(|b| b.contains(&format!("sqlfleet {cmd} "))),
            "no runnable try block for {cmd}"
        );
    }
}

#[test]
fn every_try_block_of_the_readme_runs_as_written_on_a_sandbox() {
    let srv = sqlfleet_testkit::replicated();
    let readme = read(&root().join("README.md"));
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_sqlfleet"));
    let path = format!(
        "{}:{}",
        bin.parent().expect("bin dir").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let blocks = try_blocks(&readme);
    assert!(blocks.len() >= 5, "{} try blocks", blocks.len());
    for b in blocks {
        let script = b
            .replace("--name demo", &format!("--name {}", srv.sandbox.name()))
            .replace(
                "--sandbox demo",
                &format!("--sandbox {}", srv.sandbox.name()),
            );
        let dir = tempfile::tempdir().expect("tmp");
        let o = Command::new("bash")
            .args(["-e", "-c", &script])
            .current_dir(dir.path())
            .env("PATH", &path)
            .env("SQLFLEET_HOME", srv.home())
            .stdin(std::process::Stdio::null())
            .output()
            .expect("bash");
        assert!(
            o.status.success(),
            "this README block failed ({}):\n{b}\n--- stdout\n{}\n--- stderr\n{}",
            o.status,
            common::stdout(&o),
            common::stderr(&o)
        );
    }
}
