//! `watch.toml`: hosts, timing, rules, notification channels. Unknown keys
//! are errors (a typo must not silently turn an alert off); every rule has
//! a default, so an empty file is a working monitor.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use sqlfleet_conn::FileError;

use crate::rules::{self, Rule, RuleKind};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Seconds between checks of a server.
    pub interval: Option<f64>,
    /// Seconds a check may take before the server counts as stalled.
    pub timeout: Option<f64>,
    /// Checks in flight at once (`parallel` is its old name).
    #[serde(alias = "parallel")]
    pub threads: Option<usize>,
    /// Read which statements cost each server (performance_schema's
    /// digests, or the processlist) — default true; false: one query
    /// less per check.
    pub statements: Option<bool>,
    pub hosts: Option<Vec<String>>,
    pub hosts_file: Option<PathBuf>,
    pub creds: Option<PathBuf>,
    #[serde(default)]
    pub ssh: SshConfig,
    #[serde(default)]
    pub rules: BTreeMap<RuleKind, RuleConfig>,
    #[serde(default)]
    pub notify: NotifyConfig,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SshConfig {
    /// Extra ssh arguments for every host, e.g. ["-i", "~/.ssh/monitor"].
    #[serde(default)]
    pub options: Vec<String>,
    /// server (`host:port` as listed) → `user@host` (or `user@host:port`).
    #[serde(default)]
    pub hosts: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    pub enabled: Option<bool>,
    pub above: Option<f64>,
    pub checks: Option<u32>,
    pub hold: Option<f64>,
    pub clear: Option<f64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// Seconds to gather events into one message (many servers failing in
    /// one interval give one message).
    pub batch: Option<f64>,
    pub webhook: Option<WebhookConfig>,
    pub smtp: Option<SmtpConfig>,
    pub alertmanager: Option<AlertmanagerConfig>,
}

/// Alertmanager's v2 API: incidents as alerts, deduplicated there (two
/// watchers, one notification).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertmanagerConfig {
    /// Every Alertmanager of the cluster (`http://host:9093`).
    pub urls: Vec<String>,
    /// Attempts per Alertmanager before a message is given up, with back-off.
    pub attempts: Option<u32>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    pub url: String,
    /// Attempts before a message is given up (logged), with back-off.
    pub attempts: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SmtpTls {
    /// Plain connection upgraded with STARTTLS (required).
    Starttls,
    /// TLS from the first byte (port 465).
    Tls,
    /// No TLS: only for a relay on localhost.
    None,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmtpConfig {
    pub server: String,
    pub port: Option<u16>,
    pub tls: Option<SmtpTls>,
    pub user: Option<String>,
    /// The environment variable holding the SMTP password (never in the file).
    pub password_env: Option<String>,
    pub from: String,
    pub to: Vec<String>,
}

/// Reads and checks a config file.
pub fn read(path: &Path) -> Result<FileConfig, FileError> {
    let text = std::fs::read_to_string(path).map_err(|e| FileError::read(path, e))?;
    let mut c: FileConfig = toml::from_str(&text).map_err(|e| {
        FileError::invalid(path, sqlfleet_conn::at_line(&text, e.span(), e.message()))
    })?;
    c.check().map_err(|e| FileError::invalid(path, e))?;
    // Relative paths are the file's: from its folder, not from wherever
    // the command runs; a hosts file that is not there is named by its key.
    let folder = path.parent().unwrap_or(Path::new("."));
    for p in [&mut c.hosts_file, &mut c.creds] {
        if let Some(p) = p.as_mut().filter(|p| p.is_relative()) {
            *p = folder.join(&*p);
        }
    }
    if let Some(p) = c.hosts_file.as_ref().filter(|p| !p.exists()) {
        return Err(FileError::invalid(
            path,
            format!(
                "hosts_file = {:?}: no such file (a relative path is from this file's folder)",
                p.display().to_string()
            ),
        ));
    }
    Ok(c)
}

impl FileConfig {
    fn check(&self) -> Result<(), String> {
        for (what, v) in [
            ("interval", self.interval),
            ("timeout", self.timeout),
            ("notify.batch", self.notify.batch),
        ] {
            if let Some(v) = v {
                if !(v.is_finite() && v > 0.0) {
                    return Err(format!("{what} must be a positive number of seconds"));
                }
            }
        }
        if let Some(a) = &self.notify.alertmanager {
            if a.urls.is_empty() {
                return Err(
                    "notify.alertmanager.urls: give every Alertmanager (http://host:9093)".into(),
                );
            }
            for u in &a.urls {
                if !(u.starts_with("http://") || u.starts_with("https://")) {
                    return Err(format!(
                        "notify.alertmanager.urls: {u:?} is not an http:// or https:// address"
                    ));
                }
            }
        }
        for (k, r) in &self.rules {
            for (what, v) in [("hold", r.hold), ("clear", r.clear)] {
                if v.is_some_and(|v| !(v.is_finite() && v >= 0.0)) {
                    return Err(format!("rules.{}.{what} must be seconds >= 0", k.name()));
                }
            }
        }
        if let Some(s) = &self.notify.smtp {
            if s.to.is_empty() {
                return Err("notify.smtp.to names no recipient".into());
            }
        }
        Ok(())
    }

    /// The rules: defaults with this file's overrides, disabled ones left out.
    pub fn rules(&self) -> Vec<Rule> {
        rules::defaults()
            .into_iter()
            .filter_map(|mut r| {
                if let Some(c) = self.rules.get(&r.kind) {
                    if c.enabled == Some(false) {
                        return None;
                    }
                    r.above = c.above.unwrap_or(r.above);
                    r.checks = c.checks.unwrap_or(r.checks);
                    r.hold = c.hold.unwrap_or(r.hold);
                    r.clear = c.clear.unwrap_or(r.clear);
                }
                Some(r)
            })
            .collect()
    }

    pub fn batch(&self) -> Duration {
        Duration::from_secs_f64(self.notify.batch.unwrap_or(2.0))
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn relative_paths_are_the_files_and_a_missing_hosts_file_names_its_key() {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::write(dir.path().join("hosts.txt"), "127.0.0.1:3306\n").expect("hosts");
        let cfg = dir.path().join("watch.toml");
        std::fs::write(&cfg, "hosts_file = \"hosts.txt\"\ncreds = \"c.db\"\n").expect("cfg");
        let c = read(&cfg).expect("reads");
        assert_eq!(c.hosts_file, Some(dir.path().join("hosts.txt")));
        assert_eq!(c.creds, Some(dir.path().join("c.db")));
        std::fs::write(&cfg, "hosts_file = \"nosuch.txt\"\n").expect("cfg");
        let e = read(&cfg).expect_err("missing").to_string();
        assert!(
            e.contains("hosts_file = ") && e.contains("nosuch.txt") && e.contains("folder"),
            "{e}"
        );
        // A typo is one line with its line number.
        std::fs::write(&cfg, "interval = 5\nhostsfile = \"x\"\n").expect("cfg");
        let e = read(&cfg).expect_err("typo").to_string();
        assert!(
            e.contains("line 2: unknown field `hostsfile`") && !e.contains('\n'),
            "{e}"
        );
    }

    use super::*;

    #[test]
    fn an_empty_file_is_every_default_rule_and_typos_are_refused() {
        let c: FileConfig = toml::from_str("").expect("empty");
        assert_eq!(c.rules(), rules::defaults());
        let e =
            toml::from_str::<FileConfig>("[rules.cpu]\nabove = 80\nhodl = 5\n").expect_err("typo");
        assert!(e.to_string().contains("hodl"), "{e}");
        assert!(toml::from_str::<FileConfig>("[rules.cpuu]\n").is_err());
        let c: FileConfig =
            toml::from_str("[rules.cpu]\nabove = 80\nhold = 5\n[rules.disk]\nenabled = false\n")
                .expect("rules");
        let r = c.rules();
        let cpu = r.iter().find(|r| r.kind == RuleKind::Cpu).expect("cpu");
        assert_eq!((cpu.above, cpu.hold), (80.0, 5.0));
        assert!(!r.iter().any(|r| r.kind == RuleKind::Disk));
        let bad: FileConfig = toml::from_str("interval = -1").expect("parses");
        assert!(bad.check().is_err());
    }
}
