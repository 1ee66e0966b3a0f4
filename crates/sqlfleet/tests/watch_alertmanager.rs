//! Two `sqlfleet watch` processes with the same config, both posting to a
//! real Alertmanager (Debian's prometheus-alertmanager), which notifies a
//! webhook sink: a server cut off (a fault link in front of it) is one
//! firing notification, and its return one resolved notification — the
//! watchers' duplicates are Alertmanager's to fold, and it does.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::sqlfleet;
use sqlfleet_testkit::netfault::Link;
use sqlfleet_testkit::proxy::free_port;

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Alertmanager on a free port, notifying `hook` at once for each change
/// of a group (one group per alert name and server).
fn alertmanager(dir: &std::path::Path, hook: &str) -> (Killed, u16) {
    let port = free_port();
    let cfg = dir.join("alertmanager.yml");
    std::fs::write(
        &cfg,
        format!(
            "route:\n  receiver: hook\n  group_by: ['alertname', 'server']\n  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\n\
             receivers:\n  - name: hook\n    webhook_configs:\n      - url: '{hook}'\n        send_resolved: true\n"
        ),
    )
    .expect("config");
    let child = Command::new("prometheus-alertmanager")
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!("--storage.path={}", dir.join("am-data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--cluster.listen-address=")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus-alertmanager (apt-get install prometheus-alertmanager)");
    sqlfleet_testkit::proxy::wait_listening(port);
    (Killed(child), port)
}

fn watcher(
    dir: &std::path::Path,
    srv: &sqlfleet_testkit::TestServer,
    port: u16,
    config: &std::path::Path,
) -> Killed {
    Killed(
        sqlfleet()
            .args([
                "watch",
                &format!("--defaults-file={}", srv.defaults_file().display()),
                "--hosts",
                &format!("127.0.0.1:{port}"),
                "--interval",
                "0.5",
                "--timeout",
                "1",
                "--ui",
                "none",
                "--json",
                "--config",
            ])
            .arg(config)
            .env("SQLFLEET_HOME", dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("watch"),
    )
}

/// Alertmanager's notifications so far with this status for the alert.
fn count(got: &sqlfleet_testkit::sinks::Received, status: &str) -> usize {
    got.all()
        .iter()
        .filter_map(|b| serde_json::from_str::<serde_json::Value>(b).ok())
        .filter(|v| {
            v["status"] == status
                && v["alerts"].as_array().is_some_and(|a| {
                    a.iter()
                        .any(|x| x["labels"]["alertname"] == "sqlfleet_unreachable")
                })
        })
        .count()
}

#[test]
fn two_watchers_make_one_notification_each_way_through_alertmanager() {
    let srv = sqlfleet_testkit::server();
    let dir = tempfile::tempdir().expect("tmp");
    let (hook, got) = sqlfleet_testkit::sinks::webhook(0);
    let (_am, am_port) = alertmanager(dir.path(), &hook);
    let link = Link::to(srv.sandbox.meta.primary().port);
    let config = dir.path().join("watch.toml");
    std::fs::write(
        &config,
        format!(
            "[rules.unreachable]\nchecks = 1\nclear = 1\n\n[notify]\nbatch = 0.5\n\n\
             [notify.alertmanager]\nurls = [\"http://127.0.0.1:{am_port}\"]\n"
        ),
    )
    .expect("watch config");
    let _a = watcher(&dir.path().join("a"), srv, link.port, &config);
    let _b = watcher(&dir.path().join("b"), srv, link.port, &config);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        count(&got, "firing"),
        0,
        "nothing before the fault: {:?}",
        got.all()
    );

    link.cut();
    let t0 = Instant::now();
    while count(&got, "firing") == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no firing notification: {:?}",
            got.all()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Both watchers have posted (each within a second or two); give
    // Alertmanager several group intervals to notify again if it would.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(
        count(&got, "firing"),
        1,
        "two watchers, one notification: {:#?}",
        got.all()
    );
    let firing: serde_json::Value = got
        .all()
        .iter()
        .filter_map(|b| serde_json::from_str(b).ok())
        .find(|v: &serde_json::Value| v["status"] == "firing")
        .expect("the firing notification");
    let alert = &firing["alerts"][0];
    assert_eq!(
        alert["labels"]["server"],
        format!("127.0.0.1:{}", link.port),
        "{alert}"
    );
    assert_eq!(alert["labels"]["severity"], "critical", "{alert}");

    link.heal();
    let t0 = Instant::now();
    while count(&got, "resolved") == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no resolved notification: {:?}",
            got.all()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(
        count(&got, "resolved"),
        1,
        "resolved once: {:#?}",
        got.all()
    );
    assert_eq!(
        count(&got, "firing"),
        1,
        "and not fired again: {:#?}",
        got.all()
    );
}
