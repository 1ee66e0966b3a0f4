//! The monitor against real servers (a sandbox primary with two replicas),
//! with a webhook receiver and an SMTP server recording what arrives:
//! kill -9 is "down", SIGSTOP is "stalled" (never "down"), a replication
//! error opens its incident with the error, each incident gives one
//! message when it opens and one when it resolves, and twenty servers
//! failing at once give one message listing them.

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use sqlfleet_fanout::hosts::Host;
use sqlfleet_sandbox::{node, Sandbox, UpOptions};
use sqlfleet_testkit::sinks::{self, Received};
use sqlfleet_watch::config::{NotifyConfig, SmtpConfig, SmtpTls, WebhookConfig};
use sqlfleet_watch::monitor::{self, Event, MonitorConfig, State, Watched};
use sqlfleet_watch::rules::{self, RuleKind};
use tokio::sync::mpsc::UnboundedReceiver;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn notify(url: String, smtp_port: u16) -> NotifyConfig {
    NotifyConfig {
        batch: Some(0.5),
        webhook: Some(WebhookConfig {
            url,
            attempts: Some(4),
        }),
        alertmanager: None,
        smtp: Some(SmtpConfig {
            server: "127.0.0.1".into(),
            port: Some(smtp_port),
            tls: Some(SmtpTls::None),
            user: None,
            password_env: None,
            from: "watch@example.com".into(),
            to: vec!["dba@example.com".into()],
        }),
    }
}

fn quick_rules() -> Vec<rules::Rule> {
    rules::defaults()
        .into_iter()
        .map(|mut r| {
            match r.kind {
                RuleKind::Unreachable => {
                    r.checks = 2;
                    r.clear = 1.0;
                }
                RuleKind::Replication => {
                    r.hold = 1.0;
                    r.clear = 1.0;
                }
                _ => {}
            }
            r
        })
        .collect()
}

fn pid(sb: &Sandbox, name: &str) -> i32 {
    let n = sb.meta.nodes.iter().find(|n| n.name == name).expect("node");
    node::running_pid(&sb.layout.node(n)).expect("running")
}

fn signal(pid: i32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill");
    assert!(ok.success());
}

/// Waits for `server` to reach `to`; returns the states it went through.
fn wait_state(
    rt: &tokio::runtime::Runtime,
    events: &mut UnboundedReceiver<Event>,
    server: &str,
    to: State,
    within: Duration,
) -> Vec<State> {
    let until = Instant::now() + within;
    let mut seen = Vec::new();
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let e = rt
            .block_on(tokio::time::timeout(left, events.recv()))
            .unwrap_or_else(|_| {
                panic!("{server} did not become {to:?} within {within:?}; saw {seen:?}")
            })
            .expect("event stream");
        if let Event::State {
            server: s, to: t, ..
        } = e
        {
            if s == server {
                seen.push(t);
                if t == to {
                    return seen;
                }
            }
        }
    }
}

fn opened(hook: &Received, server: &str, rule: &str) -> usize {
    hook.all()
        .iter()
        .flat_map(|m| {
            let v: serde_json::Value = serde_json::from_str(m).expect("webhook JSON");
            v["events"].as_array().cloned().unwrap_or_default()
        })
        .filter(|e| e["server"] == server && e["rule"] == rule && e["phase"] == "opened")
        .count()
}

#[test]
fn down_stalled_and_replication_each_give_one_message_each_way() {
    let srv = sqlfleet_testkit::replicated();
    let sb = &srv.sandbox;
    let rt = rt();
    let (url, hook) = sinks::webhook(1); // the first delivery fails: retried
    let (smtp_port, mail) = sinks::smtp();
    let servers: Vec<Watched> = sb
        .meta
        .nodes
        .iter()
        .map(|n| Watched {
            host: Host::tcp("127.0.0.1", n.port),
            target: sb.target(n).expect("target"),
            ssh: None,
        })
        .collect();
    let name = |i: usize| format!("127.0.0.1:{}", sb.meta.nodes[i].port);
    let cfg = MonitorConfig {
        servers,
        interval: Duration::from_millis(400),
        timeout: Duration::from_secs(1),
        parallel: 16,
        rules: quick_rules(),
        notify: notify(url, smtp_port),
        batch: Duration::from_millis(500),
        statements: true,
    };
    let _guard = rt.enter();
    let (fleet, mut events) = monitor::start(cfg);
    for i in 0..3 {
        wait_state(
            &rt,
            &mut events,
            &name(i),
            State::Ok,
            Duration::from_secs(10),
        );
    }

    // SIGSTOP: the server accepts connections but answers nothing.
    let r2 = pid(sb, "node3");
    signal(r2, "-STOP");
    let seen = wait_state(
        &rt,
        &mut events,
        &name(2),
        State::Stalled,
        Duration::from_secs(10),
    );
    assert!(
        !seen.contains(&State::Down),
        "a stopped server is stalled, not down: {seen:?}"
    );
    let m = hook.wait_for(
        &[&name(2), "\"opened\"", "stalled"],
        Duration::from_secs(15),
    );
    assert!(m.contains("unreachable"), "{m}");
    signal(r2, "-CONT");
    wait_state(
        &rt,
        &mut events,
        &name(2),
        State::Ok,
        Duration::from_secs(15),
    );
    hook.wait_for(&[&name(2), "\"resolved\""], Duration::from_secs(15));
    assert_eq!(
        opened(&hook, &name(2), "unreachable"),
        1,
        "one message when it opened"
    );

    // kill -9: refused, down.
    let r1 = pid(sb, "node2");
    signal(r1, "-9");
    let seen = wait_state(
        &rt,
        &mut events,
        &name(1),
        State::Down,
        Duration::from_secs(10),
    );
    assert!(!seen.contains(&State::Stalled), "{seen:?}");
    let m = hook.wait_for(&[&name(1), "\"opened\"", "down"], Duration::from_secs(15));
    assert!(m.contains("Can't connect"), "{m}");
    // Down stays one incident over many failed checks.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(opened(&hook, &name(1), "unreachable"), 1);
    while node::running_pid(&sb.layout.node(&sb.meta.nodes[1])).is_some() {
        std::thread::sleep(Duration::from_millis(20));
    }
    rt.block_on(sqlfleet_sandbox::up(
        &sb.home,
        &UpOptions {
            name: sb.meta.name.clone(),
            die_with_parent: true,
            ..UpOptions::default()
        },
    ))
    .expect("restart replica1");
    wait_state(
        &rt,
        &mut events,
        &name(1),
        State::Ok,
        Duration::from_secs(60),
    );
    hook.wait_for(&[&name(1), "\"resolved\""], Duration::from_secs(15));
    let mail_msg = mail.wait_for(
        &["Subject: [sqlfleet watch]", &name(1), "RESOLVED"],
        Duration::from_secs(15),
    );
    assert!(mail_msg.contains("RCPT TO:<dba@example.com>"), "{mail_msg}");

    // A replication error: a row the replica has and the primary then writes.
    rt.block_on(async {
        let mut p = srv
            .target()
            .connect(Duration::from_secs(5))
            .await
            .expect("primary");
        p.query_drop("CREATE DATABASE IF NOT EXISTS watch_t")
            .await
            .expect("db");
        p.query_drop("CREATE TABLE IF NOT EXISTS watch_t.t (id INT PRIMARY KEY)")
            .await
            .expect("table");
        let mut r = srv
            .replica_target(2)
            .connect(Duration::from_secs(5))
            .await
            .expect("replica");
        for _ in 0..100 {
            let n: Option<u64> = r
                .query_first(
                    "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA='watch_t'",
                )
                .await
                .expect("count");
            if n == Some(1) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        r.query_drop("SET sql_log_bin=0")
            .await
            .expect("sql_log_bin");
        r.query_drop("INSERT INTO watch_t.t VALUES (1)")
            .await
            .expect("replica row");
        p.query_drop("INSERT INTO watch_t.t VALUES (1)")
            .await
            .expect("primary row");
    });
    let m = hook.wait_for(
        &[&name(2), "\"opened\"", "replication", "1062"],
        Duration::from_secs(20),
    );
    assert!(m.contains("SQL=No"), "{m}");
    {
        let f = fleet.lock().expect("fleet");
        let s = &f.servers[2];
        assert_eq!(s.state, State::Degraded, "{s:?}");
    }
    rt.block_on(async {
        let mut r = srv
            .replica_target(2)
            .connect(Duration::from_secs(5))
            .await
            .expect("replica");
        r.query_drop("SET GLOBAL sql_slave_skip_counter = 1")
            .await
            .expect("skip");
        r.query_drop("START SLAVE").await.expect("start");
    });
    hook.wait_for(
        &[&name(2), "\"resolved\"", "replication"],
        Duration::from_secs(20),
    );
    assert_eq!(opened(&hook, &name(2), "replication"), 1);
    wait_state(
        &rt,
        &mut events,
        &name(2),
        State::Ok,
        Duration::from_secs(10),
    );
}

#[test]
fn twenty_servers_down_at_once_are_one_message_listing_them() {
    // The sinks first, so no port below is theirs.
    let (url, hook) = sinks::webhook(0);
    let (smtp_port, mail) = sinks::smtp();
    // Ports that refuse: bound, then closed.
    let ports: Vec<u16> = (0..20)
        .map(|_| sqlfleet_testkit::proxy::free_port())
        .collect();
    let rt = rt();
    let base = sqlfleet_conn::resolve(
        &sqlfleet_conn::ConnArgs::default(),
        &sqlfleet_conn::Env::default(),
    )
    .expect("a default target");
    let cfg = MonitorConfig {
        servers: ports
            .iter()
            .map(|p| {
                let host = Host::tcp("127.0.0.1", *p);
                Watched {
                    target: host.target(&base),
                    host,
                    ssh: None,
                }
            })
            .collect(),
        interval: Duration::from_millis(300),
        timeout: Duration::from_secs(1),
        parallel: 64,
        rules: quick_rules(),
        notify: notify(url, smtp_port),
        batch: Duration::from_secs(2),
        statements: true,
    };
    let _guard = rt.enter();
    let (_fleet, _events) = monitor::start(cfg);
    let m = hook.wait_for(&["20 incidents opened"], Duration::from_secs(15));
    for p in &ports {
        assert!(
            m.contains(&format!("127.0.0.1:{p}")),
            "{p} missing from {m}"
        );
    }
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        hook.all().len(),
        1,
        "one message, not one per server: {:#?}",
        hook.all()
    );
    let mail_msg = mail.wait_for(&["20 incidents opened"], Duration::from_secs(10));
    assert_eq!(mail_msg.matches("OPENED").count(), 20, "{mail_msg}");
}
