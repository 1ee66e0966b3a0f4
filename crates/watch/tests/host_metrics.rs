//! Host metrics over a real SSH session: an OpenSSH server on a loopback
//! port with a host key and a client key made by the test; the monitor
//! reads CPU, memory and disk through it, and the CPU rule fires only after
//! its hold time once the host is busy.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use sqlfleet_fanout::hosts::Host;
use sqlfleet_watch::config::NotifyConfig;
use sqlfleet_watch::monitor::{self, Event, MonitorConfig, Watched};
use sqlfleet_watch::rules::{self, Phase, RuleKind};
use sqlfleet_watch::ssh::SshTarget;

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
    let sshd = sqlfleet_testkit::sshd::start(dir.path(), false);
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
                password: None,
                options: vec![
                    "-i".into(),
                    sshd.client_key.display().to_string(),
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
        statements: true,
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

    // The hold counts from the last check that saw CPU below the line: wait
    // for one (the machine may be busy with other work), then burn.
    let quiet = Instant::now();
    let started = loop {
        let (cpu, at) = {
            let f = fleet.lock().expect("fleet");
            let s = &f.servers[0];
            (s.host.as_ref().and_then(|h| h.cpu_percent), s.checked_at)
        };
        if let (Some(c), Some(at)) = (cpu, at) {
            if c < 80.0 {
                break at;
            }
        }
        assert!(
            quiet.elapsed() < Duration::from_secs(60),
            "the host stayed above 80% CPU for a minute before the burn; cannot judge the hold time"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let _burn = burn();
    let opened = loop {
        let left = Duration::from_secs(40).saturating_sub(quiet.elapsed());
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
        "fired {:.1}s after the last quiet check, before its {hold}s hold",
        opened.opened_at - started
    );
    assert!(opened.detail.starts_with("CPU "), "{}", opened.detail);
}
