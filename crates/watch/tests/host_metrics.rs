//! Host metrics over a real SSH session: an OpenSSH server on a loopback
//! port with a host key and a client key made by the test; the monitor
//! reads CPU, memory and disk through it, and the CPU rule fires only after
//! its hold time once the host is busy.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlfleet_fanout::hosts::Host;
use sqlfleet_watch::config::NotifyConfig;
use sqlfleet_watch::monitor::{self, Event, MonitorConfig, Watched};
use sqlfleet_watch::rules::{self, Phase, RuleKind};
use sqlfleet_watch::ssh::SshTarget;

struct Sshd {
    child: Child,
    port: u16,
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

fn sshd(dir: &Path) -> Sshd {
    keygen(&dir.join("host_key"));
    keygen(&dir.join("client_key"));
    std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys")).expect("keys");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let cfg = dir.join("sshd_config");
    std::fs::write(
        &cfg,
        format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}\nPidFile {}\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\n",
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
    Sshd { child, port }
}

/// Keeps both cores busy until dropped.
struct Burn(Vec<Child>);

impl Drop for Burn {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn burn() -> Burn {
    let n = std::thread::available_parallelism().map_or(2, |n| n.get());
    Burn(
        (0..n)
            .map(|_| {
                Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .spawn()
                    .expect("sh")
            })
            .collect(),
    )
}

#[test]
fn cpu_memory_and_disk_over_ssh_and_the_cpu_rule_waits_its_hold_time() {
    let srv = sqlfleet_testkit::server();
    let dir = tempfile::tempdir().expect("dir");
    let sshd = sshd(dir.path());
    let user = std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "root".into());
    let primary = srv.sandbox.meta.primary();
    let hold = 4.0;
    let rules: Vec<rules::Rule> = rules::defaults()
        .into_iter()
        .map(|mut r| {
            if r.kind == RuleKind::Cpu {
                r.above = 80.0;
                r.hold = hold;
                r.clear = 1.0;
            }
            r
        })
        .collect();
    let cfg = MonitorConfig {
        servers: vec![Watched {
            host: Host::tcp("127.0.0.1", primary.port),
            target: srv.target(),
            ssh: Some(SshTarget {
                destination: format!("{user}@127.0.0.1"),
                port: Some(sshd.port),
                options: vec![
                    "-i".into(),
                    dir.path().join("client_key").display().to_string(),
                    "-o".into(),
                    "UserKnownHostsFile=/dev/null".into(),
                    "-o".into(),
                    "StrictHostKeyChecking=no".into(),
                    "-o".into(),
                    "LogLevel=ERROR".into(),
                ],
            }),
        }],
        interval: Duration::from_millis(500),
        timeout: Duration::from_secs(2),
        parallel: 4,
        rules,
        notify: NotifyConfig::default(),
        batch: Duration::from_millis(100),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let _guard = rt.enter();
    let (fleet, mut events) = monitor::start(cfg);
    // Host figures arrive: CPU needs two blocks.
    let t0 = Instant::now();
    let host = loop {
        let h = fleet.lock().expect("fleet").servers[0]
            .host
            .clone()
            .filter(|h| h.cpu_percent.is_some());
        if let Some(h) = h {
            break h;
        }
        let err = fleet.lock().expect("fleet").servers[0].host_error.clone();
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no host metrics over ssh: {err:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(host.mem_total_kb > 0, "{host:?}");
    assert!(
        host.mem_used_percent()
            .is_some_and(|m| m > 0.0 && m < 100.0),
        "{host:?}"
    );
    assert!(host.disk_percent.is_some_and(|d| d > 0.0), "{host:?}");

    let started = monitor::now_unix();
    let _burn = burn();
    let opened = loop {
        let left = Duration::from_secs(40).saturating_sub(t0.elapsed());
        let e = rt
            .block_on(tokio::time::timeout(left, events.recv()))
            .expect("the cpu rule never fired")
            .expect("events");
        if let Event::Incident(i) = e {
            if i.rule == "cpu" && i.phase == Phase::Opened {
                break i;
            }
        }
    };
    assert!(
        opened.opened_at - started >= hold,
        "fired {:.1}s after the burn began, before its {hold}s hold",
        opened.opened_at - started
    );
    assert!(opened.detail.starts_with("CPU "), "{}", opened.detail);
}
