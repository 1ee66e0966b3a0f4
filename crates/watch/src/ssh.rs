//! Host metrics without an agent: one long-lived OpenSSH session per host
//! runs a small shell loop that prints /proc/stat's cpu line, MemTotal and
//! MemAvailable, /proc/loadavg and `df` of the data directory every
//! interval; we parse the blocks as they stream. One process and one TCP
//! connection per host for the life of the monitor, instead of a login per
//! sample. Key authentication (BatchMode: never a password prompt, never a
//! password on a command line); a session that ends is restarted with a
//! back-off. CPU is user+nice+system over the interval, as sar reports it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::io::AsyncBufReadExt;

/// What one block says, already turned into figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HostMetrics {
    /// `None` on the first block (a rate needs two).
    pub cpu_percent: Option<f64>,
    pub mem_total_kb: u64,
    pub mem_available_kb: u64,
    pub load1: f64,
    pub disk_percent: Option<f64>,
}

impl HostMetrics {
    pub fn mem_used_percent(&self) -> Option<f64> {
        (self.mem_total_kb > 0).then(|| {
            100.0 * (self.mem_total_kb.saturating_sub(self.mem_available_kb)) as f64
                / self.mem_total_kb as f64
        })
    }
}

/// One block's raw numbers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Raw {
    /// busy (user+nice+system) and total jiffies from the `cpu` line.
    pub cpu: Option<(u64, u64)>,
    pub mem_total_kb: u64,
    pub mem_available_kb: u64,
    pub load1: f64,
    pub disk_percent: Option<f64>,
}

/// Parses one block (the lines between markers). Unknown lines are
/// ignored; nothing panics on any input.
pub fn parse_block(lines: &[String]) -> Raw {
    let mut r = Raw::default();
    for l in lines {
        let mut w = l.split_whitespace();
        match w.next() {
            Some("cpu") => {
                let v: Vec<u64> = w.filter_map(|x| x.parse().ok()).collect();
                if v.len() >= 4 {
                    let busy = v[0].saturating_add(v[1]).saturating_add(v[2]);
                    let total = v.iter().fold(0u64, |a, b| a.saturating_add(*b));
                    r.cpu = Some((busy, total));
                }
            }
            Some("MemTotal:") => {
                r.mem_total_kb = w.next().and_then(|x| x.parse().ok()).unwrap_or(0)
            }
            Some("MemAvailable:") => {
                r.mem_available_kb = w.next().and_then(|x| x.parse().ok()).unwrap_or(0)
            }
            Some("load") => r.load1 = w.next().and_then(|x| x.parse().ok()).unwrap_or(0.0),
            Some("df") => {
                // `df -Pk` data line after our "df" tag: fs blocks used avail capacity mount
                let cap = l.split_whitespace().nth(5).unwrap_or("");
                r.disk_percent = cap.trim_end_matches('%').parse().ok();
            }
            _ => {}
        }
    }
    r
}

/// Figures from the previous block and this one.
pub fn metrics(prev: Option<&Raw>, cur: &Raw) -> HostMetrics {
    let cpu_percent = match (prev.and_then(|p| p.cpu), cur.cpu) {
        (Some((b0, t0)), Some((b1, t1))) if t1 > t0 && b1 >= b0 => {
            Some(100.0 * (b1 - b0) as f64 / (t1 - t0) as f64)
        }
        _ => None,
    };
    HostMetrics {
        cpu_percent,
        mem_total_kb: cur.mem_total_kb,
        mem_available_kb: cur.mem_available_kb,
        load1: cur.load1,
        disk_percent: cur.disk_percent,
    }
}

/// How to reach one host over SSH.
#[derive(Debug, Clone)]
pub struct SshTarget {
    /// `user@host` or `host`, as ssh takes it.
    pub destination: String,
    pub port: Option<u16>,
    /// Extra ssh options (`-o Name=value`, `-i key`), from the config.
    pub options: Vec<String>,
    /// A password from the credential store, given through our askpass
    /// (`crate::askpass`); keys only when `None`.
    pub password: Option<sqlfleet_conn::Secret>,
}

impl SshTarget {
    /// `[user@]host[:port]` or `[user@][v6]:port` as ssh's destination and `-p`.
    pub fn parse(dest: &str, options: &[String]) -> SshTarget {
        let (user, host) = match dest.rsplit_once('@') {
            Some((u, h)) => (format!("{u}@"), h),
            None => (String::new(), dest),
        };
        let (host, port) = match host.strip_prefix('[').and_then(|h| h.split_once(']')) {
            // [v6] or [v6]:port
            Some((v6, rest)) => (
                v6.to_string(),
                rest.strip_prefix(':').and_then(|p| p.parse().ok()),
            ),
            // host:port (one colon); a bare IPv6 address has several
            None => match host.split_once(':') {
                Some((h, p)) if !p.contains(':') => match p.parse::<u16>() {
                    Ok(p) => (h.to_string(), Some(p)),
                    Err(_) => (host.to_string(), None),
                },
                _ => (host.to_string(), None),
            },
        };
        SshTarget {
            destination: format!("{user}{host}"),
            port,
            options: options.to_vec(),
            password: None,
        }
    }
}

/// The latest host metrics of one host, shared with the poller.
#[derive(Debug, Default)]
pub struct Latest {
    pub metrics: Option<HostMetrics>,
    pub at: Option<Instant>,
    pub error: Option<String>,
}

const MARK: &str = "@@sqlfleet-block";

fn remote_script(datadir: &str, interval: Duration) -> String {
    let secs = interval.as_secs().max(1);
    // Single quotes inside: the data directory is quoted for the shell.
    let dir = datadir.replace('\'', "'\\''");
    format!(
        "while :; do echo {MARK}; head -1 /proc/stat; grep -E '^(MemTotal|MemAvailable):' /proc/meminfo; \
         echo load $(cat /proc/loadavg); echo df $(df -Pk '{dir}' 2>/dev/null | tail -1); echo {MARK}-end; sleep {secs}; done"
    )
}

/// Runs the session for one host until the returned handle is dropped
/// (the child is killed with it): restarts with a back-off when it ends.
pub fn spawn(
    target: SshTarget,
    datadir: String,
    interval: Duration,
    latest: Arc<Mutex<Latest>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut backoff = Duration::from_secs(1);
        loop {
            let started = Instant::now();
            let err = session(&target, &datadir, interval, &latest).await;
            if let Ok(mut l) = latest.lock() {
                l.error = Some(err);
                l.metrics = None;
            }
            if started.elapsed() > Duration::from_secs(60) {
                backoff = Duration::from_secs(1);
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(60));
        }
    })
}

async fn session(
    t: &SshTarget,
    datadir: &str,
    interval: Duration,
    latest: &Arc<Mutex<Latest>>,
) -> String {
    let mut cmd = tokio::process::Command::new("ssh");
    // The served password lives as long as this session.
    let _served = match &t.password {
        Some(pw) => {
            let served = match crate::askpass::serve(pw.clone()) {
                Ok(s) => s,
                Err(e) => return format!("ssh: the password socket: {e}"),
            };
            let me = match std::env::current_exe() {
                Ok(p) => p,
                Err(e) => return format!("ssh: {e}"),
            };
            cmd.env("SSH_ASKPASS", me)
                .env("SSH_ASKPASS_REQUIRE", "force")
                .env(crate::askpass::ENV, served.path())
                .args(["-o", "BatchMode=no", "-o", "NumberOfPasswordPrompts=1"]);
            Some(served)
        }
        None => {
            cmd.args(["-o", "BatchMode=yes"]);
            None
        }
    };
    cmd.args([
        "-T",
        "-o",
        "ConnectTimeout=5",
        "-o",
        "ServerAliveInterval=5",
        "-o",
        "ServerAliveCountMax=2",
    ]);
    if let Some(p) = t.port {
        cmd.arg("-p").arg(p.to_string());
    }
    cmd.args(&t.options)
        .arg(&t.destination)
        .arg(remote_script(datadir, interval))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return format!("ssh: {e}"),
    };
    let Some(out) = child.stdout.take() else {
        return "ssh: no output pipe".into();
    };
    let stderr = child.stderr.take();
    let mut lines = tokio::io::BufReader::new(out).lines();
    let mut block: Option<Vec<String>> = None;
    let mut prev: Option<Raw> = None;
    while let Ok(Some(line)) = lines.next_line().await {
        if line == MARK {
            block = Some(Vec::new());
        } else if line == format!("{MARK}-end") {
            if let Some(b) = block.take() {
                let raw = parse_block(&b);
                let m = metrics(prev.as_ref(), &raw);
                prev = Some(raw);
                if let Ok(mut l) = latest.lock() {
                    l.metrics = Some(m);
                    l.at = Some(Instant::now());
                    l.error = None;
                }
            }
        } else if let Some(b) = block.as_mut() {
            if b.len() < 64 {
                b.push(line);
            }
        }
    }
    let mut why = String::new();
    if let Some(e) = stderr {
        let mut l = tokio::io::BufReader::new(e).lines();
        while let Ok(Some(x)) = l.next_line().await {
            why = x;
        }
    }
    let _ = child.kill().await;
    format!(
        "ssh {}: session ended{}",
        t.destination,
        if why.is_empty() {
            String::new()
        } else {
            format!(": {why}")
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_destinations_with_and_without_ports() {
        let t = |d: &str| {
            let s = SshTarget::parse(d, &[]);
            (s.destination, s.port)
        };
        assert_eq!(t("ops@db1"), ("ops@db1".into(), None));
        assert_eq!(t("ops@db1:2222"), ("ops@db1".into(), Some(2222)));
        assert_eq!(t("ops@[::1]:22"), ("ops@::1".into(), Some(22)));
        assert_eq!(t("ops@::1"), ("ops@::1".into(), None));
        assert_eq!(t("db1"), ("db1".into(), None));
    }
    use proptest::prelude::*;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(str::to_string).collect()
    }

    #[test]
    fn cpu_memory_load_and_disk_from_two_blocks() {
        let a = parse_block(&lines(
            "cpu  100 0 100 800 0 0 0 0 0 0\nMemTotal:       1000 kB\nMemAvailable:    250 kB\nload 0.50 0.40 0.30 1/100 42\ndf /dev/sda1 1000 910 90 91% /",
        ));
        let b = parse_block(&lines("cpu  190 0 110 900 0 0 0 0 0 0"));
        assert_eq!(a.disk_percent, Some(91.0));
        assert_eq!(a.load1, 0.5);
        let m0 = metrics(None, &a);
        assert_eq!(m0.cpu_percent, None);
        assert_eq!(m0.mem_used_percent(), Some(75.0));
        let m = metrics(Some(&a), &b);
        assert_eq!(m.cpu_percent, Some(50.0));
    }

    proptest! {
        #[test]
        fn any_block_parses_without_panic(text in "(?s).{0,400}") {
            let a = parse_block(&lines(&text));
            let _ = metrics(Some(&a), &a);
        }
    }
}
