//! A relay running inside the test process on its own thread and runtime,
//! from a config file's text, for tests written in blocking style (each
//! drives its clients on its own runtime, as against a separate process).

use std::time::Duration;

#[allow(unused_imports)]
pub use sqlfleet_testkit::proxy::{app, cli, free_port, wait_listening};
use sqlfleet_testkit::proxy::{http_get, metric_in};
use sqlfleet_testkit::TestServer;

pub struct Relay {
    pub port: u16,
    pub metrics_port: u16,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts a relay from `toml` (which must listen on `port` and serve
/// metrics on `metrics_port`); returns once it accepts clients.
pub fn start_config(toml: &str, port: u16, metrics_port: u16) -> Relay {
    let f = tempfile::NamedTempFile::new().expect("tmp");
    std::fs::write(f.path(), toml).expect("write config");
    let cfg = sqlfleet_relay::config::load(f.path()).expect("config");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (ready, is_ready) = std::sync::mpsc::channel::<Result<(), String>>();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            match sqlfleet_relay::run::start(cfg).await {
                Ok(started) => {
                    let _ = ready.send(Ok(()));
                    started
                        .serve(
                            async {
                                let _ = stopped.await;
                            },
                            Duration::from_secs(1),
                        )
                        .await;
                }
                Err(e) => {
                    let _ = ready.send(Err(e.to_string()));
                }
            }
        });
    });
    is_ready
        .recv_timeout(Duration::from_secs(20))
        .expect("relay start")
        .expect("relay starts");
    wait_listening(port);
    Relay {
        port,
        metrics_port,
        stop: Some(stop),
        thread: Some(thread),
    }
}

/// TOML string quoting.
pub fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A relay for a client library's suite: in front of `backends` as root
/// (password `pw`) in `mode` with `accounts` ("per-user", or "shared" with
/// root in the relay's own list), `routing` as its [routing] section,
/// offering TLS with `tls` (certificate, key) when given.
#[allow(dead_code)]
pub fn start_suite_relay(
    backends: &[&str],
    routing: &str,
    pw: &str,
    mode: &str,
    accounts: &str,
    tls: Option<(&std::path::Path, &std::path::Path)>,
) -> Relay {
    let port = free_port();
    let metrics_port = free_port();
    let users = if accounts == "shared" {
        format!(
            "[[users]]\nname = \"root\"\n{}\n",
            sqlfleet_relay::config::hash_lines(pw)
        )
    } else {
        String::new()
    };
    let tls = tls.map_or_else(String::new, |(cert, key)| {
        format!(
            "[tls]\ncert = {}\nkey = {}\n\n",
            quoted(&cert.display().to_string()),
            quoted(&key.display().to_string())
        )
    });
    let toml = format!(
        "[relay]\nlisten = [\"127.0.0.1:{port}\"]\nmetrics = \"127.0.0.1:{metrics_port}\"\nmode = \"{mode}\"\n\n\
         [backend]\nservers = [{}]\nuser = \"root\"\npassword = {}\naccounts = \"{accounts}\"\n\n\
         [routing]\n{routing}\n\n{tls}{users}",
        backends
            .iter()
            .map(|b| quoted(b))
            .collect::<Vec<_>>()
            .join(", "),
        quoted(pw),
    );
    start_config(&toml, port, metrics_port)
}

/// A relay in front of `srv`'s primary with accounts app:app-pw and root
/// (the server's password), metrics on a free port. `flags` are the
/// quick-mode spellings of the settings a test changes: `--pool-max N`,
/// `--pool-min N`, `--wait-timeout S`, `--idle-timeout S`, `--mode M`,
/// `--threads N`, `--shared-dynamic-sql refuse|run`; `--toml TEXT`
/// appends sections as they are.
pub fn start_relay(srv: &TestServer, flags: &[&str]) -> Relay {
    let port = free_port();
    let metrics_port = free_port();
    let pw = srv.sandbox.password().expect("pw");
    let mut pool = String::new();
    let mut mode = "transaction".to_string();
    let mut relay_extra = String::new();
    let mut backend_extra = String::new();
    let mut sections = String::new();
    let mut backend_port = srv.sandbox.meta.primary().port;
    for pair in flags.chunks(2) {
        let [flag, value] = pair else {
            panic!("flags come in pairs: {flags:?}")
        };
        match *flag {
            "--pool-max" => pool += &format!("max = {value}\n"),
            "--pool-min" => pool += &format!("min = {value}\n"),
            "--wait-timeout" => pool += &format!("wait_timeout = {value}\n"),
            "--idle-timeout" => pool += &format!("idle_timeout = {value}\n"),
            "--mode" => mode = value.to_string(),
            "--threads" => relay_extra += &format!("threads = {value}\n"),
            "--shared-dynamic-sql" => {
                backend_extra += &format!("shared_dynamic_sql = \"{value}\"\n")
            }
            // Sections of the config file as they are (appended).
            "--toml" => sections += &format!("{value}\n"),
            // The backend reached on another port (a test kit link to it).
            "--backend-port" => backend_port = value.parse().expect("port"),
            other => panic!("start_relay does not know {other}"),
        }
    }
    let hash = sqlfleet_relay::config::hash_lines;
    let toml = format!(
        "[relay]\nlisten = [\"127.0.0.1:{port}\"]\nmetrics = \"127.0.0.1:{metrics_port}\"\nmode = \"{mode}\"\n{relay_extra}\n\
         [backend]\nservers = [\"127.0.0.1:{}\"]\nuser = \"root\"\npassword = {}\naccounts = \"shared\"\n{backend_extra}\n\
         [pool]\n{pool}\n\
         [[users]]\nname = \"app\"\n{}\n[[users]]\nname = \"root\"\n{}\n{sections}",
        backend_port,
        quoted(pw.expose()),
        hash("app-pw"),
        hash(pw.expose()),
    );
    start_config(&toml, port, metrics_port)
}

impl Relay {
    /// An admin page's whole response.
    pub fn page(&self, path: &str) -> String {
        http_get(self.metrics_port, path)
    }

    /// The metrics page.
    pub fn metrics(&self) -> String {
        self.page("/metrics")
    }

    /// Waits (at most `within`) until the result cache's binlog follower
    /// is caught up: until then every cacheable statement bypasses the
    /// cache.
    pub fn wait_cache_following(&self, within: std::time::Duration) {
        let t0 = std::time::Instant::now();
        let open = || {
            self.page("/status")
                .replace([' ', '\n'], "")
                .contains("\"open\":true")
        };
        while !open() {
            assert!(
                t0.elapsed() < within,
                "the cache's binlog follower never caught up: {}",
                self.page("/status")
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// One sample's value from the metrics page.
    pub fn metric(&self, series: &str) -> f64 {
        metric_in(&self.metrics(), series)
    }
}

pub fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A relay mode a client suite runs through: (pool mode, accounts).
pub type Mode = (&'static str, &'static str);

/// The relay modes a client library's suite goes through in a run (each
/// run of such a suite takes a minute or more, so CI takes a seeded
/// slice): `always`, then one of `others` by `{name}_SEED` (default: the
/// day's number, printed so a failing run can be repeated); `{name}_MODES=all`
/// takes every one.
pub fn seeded_modes(name: &str, always: &[Mode], others: &[Mode]) -> Vec<Mode> {
    let mut modes = always.to_vec();
    if std::env::var(format!("{name}_MODES")).as_deref() == Ok("all") {
        modes.extend_from_slice(others);
        return modes;
    }
    let seed: u64 = std::env::var(format!("{name}_SEED"))
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() / 86_400)
        });
    eprintln!("\n{name}_SEED={seed} ({name}_MODES=all runs every mode)");
    if !others.is_empty() {
        modes.push(others[(seed % others.len() as u64) as usize]);
    }
    modes
}
