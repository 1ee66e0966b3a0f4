//! A real browser for page tests: headless Chromium driven over the
//! DevTools protocol (a WebSocket, tungstenite). Enough to open a page,
//! evaluate JavaScript in it, wait for a condition and save a screenshot.

use std::io::ErrorKind;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

pub struct Browser {
    child: Child,
    ws: WebSocket<MaybeTlsStream<TcpStream>>,
    session: String,
    next: u64,
    _profile: tempfile::TempDir,
}

fn binary() -> String {
    std::env::var("CHROMIUM").unwrap_or_else(|_| {
        ["chromium", "chromium-browser", "google-chrome"]
            .into_iter()
            .find(|b| {
                Command::new("sh")
                    .args(["-c", &format!("command -v {b}")])
                    .stdout(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            })
            .unwrap_or("chromium")
            .to_string()
    })
}

impl Browser {
    /// Starts a headless Chromium with an empty profile (panics, naming
    /// the cause, when it cannot: page tests need a real browser).
    pub fn launch() -> Browser {
        let profile = tempfile::tempdir().expect("profile dir");
        let child = Command::new(binary())
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--hide-scrollbars",
                "--window-size=1400,1000",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromium (scripts/deps.sh installs it)");
        let port_file = profile.path().join("DevToolsActivePort");
        let deadline = Instant::now() + Duration::from_secs(30);
        let text = loop {
            match std::fs::read_to_string(&port_file) {
                Ok(t) if t.lines().count() >= 2 => break t,
                _ if Instant::now() > deadline => panic!("chromium did not open its DevTools port"),
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        let mut lines = text.lines();
        let port = lines.next().unwrap_or_default().trim().to_string();
        let path = lines.next().unwrap_or_default().trim().to_string();
        let (ws, _) =
            tungstenite::connect(format!("ws://127.0.0.1:{port}{path}")).expect("DevTools socket");
        let mut b = Browser {
            child,
            ws,
            session: String::new(),
            next: 0,
            _profile: profile,
        };
        let t = b.call("Target.createTarget", json!({"url": "about:blank"}));
        let target = t["targetId"].as_str().expect("targetId").to_string();
        let s = b.call(
            "Target.attachToTarget",
            json!({"targetId": target, "flatten": true}),
        );
        b.session = s["sessionId"].as_str().expect("sessionId").to_string();
        b.call("Page.enable", json!({}));
        b.call("Runtime.enable", json!({}));
        b
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            msg["sessionId"] = json!(self.session);
        }
        self.ws
            .send(Message::text(msg.to_string()))
            .expect("send to chromium");
        loop {
            let m = match self.ws.read() {
                Ok(m) => m,
                Err(tungstenite::Error::Io(e)) if e.kind() == ErrorKind::WouldBlock => continue,
                Err(e) => panic!("chromium's socket: {e}"),
            };
            let Message::Text(t) = m else { continue };
            let v: Value = serde_json::from_str(t.as_str()).expect("DevTools JSON");
            if v["id"].as_u64() == Some(id) {
                if let Some(e) = v.get("error") {
                    panic!("{method}: {e}");
                }
                return v["result"].clone();
            }
        }
    }

    /// Opens `url` and waits for the document to finish loading.
    pub fn goto(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url}));
        self.wait_for(
            "document.readyState === 'complete'",
            Duration::from_secs(20),
        );
    }

    /// The value of a JavaScript expression in the page (promises awaited).
    pub fn eval(&mut self, expr: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
        );
        if let Some(ex) = r.get("exceptionDetails") {
            panic!("{expr}: {ex}");
        }
        r["result"]["value"].clone()
    }

    /// Waits until `expr` is truthy; returns its value. Panics with the
    /// expression after `limit`.
    pub fn wait_for(&mut self, expr: &str, limit: Duration) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let v = self.eval(expr);
            let truthy = match &v {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "not true within {limit:?}: {expr} (last: {v})"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Saves a PNG of the page as it is now.
    pub fn screenshot(&mut self, file: &Path) {
        let r = self.call(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true}),
        );
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap_or_default())
            .expect("base64 PNG");
        if let Some(d) = file.parent() {
            std::fs::create_dir_all(d).expect("artifact dir");
        }
        std::fs::write(file, png).expect("write screenshot");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where tests leave what a person may want to look at afterwards
/// (screenshots): `target/test-artifacts/NAME`.
pub fn artifacts(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("test-artifacts").join(name)
}
