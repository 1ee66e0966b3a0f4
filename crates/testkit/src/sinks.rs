//! Recording sinks for notifications: a webhook receiver (HTTP POST) and
//! an SMTP server that accepts every message. Both run on their own
//! threads and keep what arrived for the test to read.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a sink received, in order.
#[derive(Clone, Default)]
pub struct Received(Arc<Mutex<Vec<String>>>);

impl Received {
    pub fn all(&self) -> Vec<String> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }

    fn push(&self, s: String) {
        if let Ok(mut v) = self.0.lock() {
            v.push(s);
        }
    }

    /// Waits until a received item contains every one of `needles`;
    /// returns it, or panics with what did arrive.
    pub fn wait_for(&self, needles: &[&str], within: Duration) -> String {
        let until = Instant::now() + within;
        loop {
            if let Some(m) = self
                .all()
                .into_iter()
                .find(|m| needles.iter().all(|n| m.contains(n)))
            {
                return m;
            }
            assert!(
                Instant::now() < until,
                "nothing with {needles:?} arrived within {within:?}; got {:#?}",
                self.all()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// An HTTP server recording each POST body; answers 500 to the first
/// `fail_first` requests (to exercise retries), 200 after.
pub fn webhook(fail_first: usize) -> (String, Received) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind webhook sink");
    let url = format!("http://{}/hook", l.local_addr().expect("addr"));
    let got = Received::default();
    let seen = Arc::new(AtomicUsize::new(0));
    let g = got.clone();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let mut r = BufReader::new(s);
            let mut len = 0usize;
            let mut line = String::new();
            // Only a whole request counts: a connection closed before its
            // headers ended (a client's idle or abandoned connection) is
            // no message.
            let mut whole = false;
            let mut chunked = false;
            loop {
                line.clear();
                if r.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                if line == "\r\n" {
                    whole = true;
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
                if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
                    chunked = true;
                }
            }
            if !whole {
                continue;
            }
            let body = if chunked {
                match read_chunked(&mut r) {
                    Some(b) => b,
                    None => continue,
                }
            } else {
                let mut body = vec![0u8; len];
                if r.read_exact(&mut body).is_err() {
                    continue;
                }
                body
            };
            let n = seen.fetch_add(1, Ordering::SeqCst);
            let status = if n < fail_first {
                "500 Internal Server Error"
            } else {
                g.push(String::from_utf8_lossy(&body).into_owned());
                "200 OK"
            };
            let mut s = r.into_inner();
            let _ = write!(
                s,
                "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    });
    (url, got)
}

/// A chunked request body (RFC 9112 7.1), without trailers.
fn read_chunked(r: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        r.read_line(&mut line).ok()?;
        let size = usize::from_str_radix(line.trim().split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            // The empty line ending the (absent) trailers.
            line.clear();
            r.read_line(&mut line).ok()?;
            return Some(body);
        }
        let at = body.len();
        body.resize(at + size, 0);
        r.read_exact(&mut body[at..]).ok()?;
        let mut crlf = [0u8; 2];
        r.read_exact(&mut crlf).ok()?;
    }
}

/// An SMTP server (no TLS) recording each message's envelope and data.
pub fn smtp() -> (u16, Received) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind smtp sink");
    let port = l.local_addr().expect("addr").port();
    let got = Received::default();
    let g = got.clone();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let g = g.clone();
            std::thread::spawn(move || {
                let mut w = match s.try_clone() {
                    Ok(w) => w,
                    Err(_) => return,
                };
                let mut r = BufReader::new(s);
                let _ = w.write_all(b"220 sink ESMTP\r\n");
                let mut msg = String::new();
                let mut line = String::new();
                loop {
                    line.clear();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let cmd = line.to_ascii_uppercase();
                    let reply: &[u8] = if cmd.starts_with("EHLO") {
                        b"250-sink\r\n250 AUTH PLAIN LOGIN\r\n"
                    } else if cmd.starts_with("HELO")
                        || cmd.starts_with("RSET")
                        || cmd.starts_with("NOOP")
                    {
                        b"250 OK\r\n"
                    } else if cmd.starts_with("AUTH") {
                        b"235 ok\r\n"
                    } else if cmd.starts_with("MAIL") || cmd.starts_with("RCPT") {
                        msg.push_str(&line);
                        b"250 OK\r\n"
                    } else if cmd.starts_with("DATA") {
                        let _ = w.write_all(b"354 go on\r\n");
                        loop {
                            line.clear();
                            if r.read_line(&mut line).unwrap_or(0) == 0 {
                                return;
                            }
                            if line == ".\r\n" || line == ".\n" {
                                break;
                            }
                            msg.push_str(&line);
                        }
                        g.push(std::mem::take(&mut msg));
                        b"250 queued\r\n"
                    } else if cmd.starts_with("QUIT") {
                        let _ = w.write_all(b"221 bye\r\n");
                        return;
                    } else {
                        b"502 not here\r\n"
                    };
                    if w.write_all(reply).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, got)
}
