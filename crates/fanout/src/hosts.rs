//! Host lists: `host`, `host:port`, `[v6]:port` or `unix:/path`, then
//! optional `name=value` tags (`user=` and `password=` override the
//! credentials for that host); `#` starts a comment; duplicates are dropped
//! with a warning. As in the mysql client, `localhost` without a port means
//! the Unix socket when one is given (`-S`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sqlfleet_conn::addr::{parse_address, split_host_port, Address};
use sqlfleet_conn::{Endpoint, PasswordSpec, Secret, Target};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    pub host: String,
    pub port: u16,
    /// The server's Unix socket instead of TCP.
    pub socket: Option<PathBuf>,
    pub tags: BTreeMap<String, String>,
}

impl Host {
    /// A TCP host without tags.
    pub fn tcp(host: impl Into<String>, port: u16) -> Host {
        Host {
            host: host.into(),
            port,
            socket: None,
            tags: BTreeMap::new(),
        }
    }

    /// Where and as whom to connect: `base` (the shared connection options)
    /// with this host's address and its `user=` / `password=` tags.
    pub fn target(&self, base: &Target) -> Target {
        let mut t = base.with_endpoint(match &self.socket {
            Some(p) => Endpoint::Socket(p.clone()),
            None => Endpoint::Tcp {
                host: self.host.clone(),
                port: self.port,
            },
        });
        if let Some(u) = self.tags.get("user") {
            t.user = u.clone();
        }
        if let Some(p) = self.tags.get("password") {
            t.password = Some(PasswordSpec::Given(Secret::new(p.clone())));
        }
        t
    }

    /// `host:port`, `[v6]:port` or `unix:/path`: how a host is named in output.
    pub fn addr(&self) -> String {
        if let Some(p) = &self.socket {
            format!("unix:{}", p.display())
        } else if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{source_name}:{line}: {what}")]
pub struct HostError {
    pub source_name: String,
    pub line: usize,
    pub what: String,
}

pub use sqlfleet_conn::addr::parse_addr;

/// Parses a host list. Returns the hosts (first occurrence kept, in order)
/// and warnings about duplicates. `local_socket` is where `localhost`
/// without a port goes (the `-S` flag).
pub fn parse_list(
    text: &str,
    source_name: &str,
    default_port: u16,
    local_socket: Option<&Path>,
) -> Result<(Vec<Host>, Vec<String>), HostError> {
    let mut hosts: Vec<Host> = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut warnings = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let err = |what: String| HostError {
            source_name: source_name.to_string(),
            line: line_no,
            what,
        };
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let addr = words.next().unwrap_or_default();
        let (host, port, socket) =
            match parse_address(addr, default_port).map_err(|e| err(e.to_string()))? {
                Address::Unix(p) => ("localhost".to_string(), 0, Some(p)),
                Address::Tcp(h, p) => {
                    let port_written = split_host_port(addr).map_or(true, |(_, p)| p.is_some());
                    let socket = local_socket
                        .filter(|_| h == "localhost" && !port_written)
                        .map(Path::to_path_buf);
                    (h, p, socket)
                }
            };
        let mut tags = BTreeMap::new();
        for w in words {
            let (k, v) = w
                .split_once('=')
                .ok_or_else(|| err(format!("'{w}' is not a name=value tag")))?;
            if k.is_empty() {
                return Err(err(format!("'{w}' has an empty tag name")));
            }
            tags.insert(k.to_string(), v.to_string());
        }
        if let Some(p) = tags.get("port") {
            return Err(err(format!(
                "give the port in the address ({host}:{p}), not as a tag"
            )));
        }
        let h = Host {
            host,
            port,
            socket,
            tags,
        };
        let key = h.addr();
        if let Some(first) = seen.get(&key) {
            warnings.push(format!(
                "{source_name}:{line_no}: {key} repeats line {first}; ignored"
            ));
            continue;
        }
        seen.insert(key, line_no);
        hosts.push(h);
    }
    Ok((hosts, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_all_forms() {
        let text = "# fleet\ndb1\ndb2:3307 dc=eu role=replica\n[::1]:3308\n[fe80::1]\n\n10.0.0.1 user=ro password=s3cret # trailing\ndb1:3306\n";
        let (hosts, warnings) = parse_list(text, "hosts.txt", 3306, None).expect("parses");
        let addrs: Vec<String> = hosts.iter().map(Host::addr).collect();
        assert_eq!(
            addrs,
            vec![
                "db1:3306",
                "db2:3307",
                "[::1]:3308",
                "[fe80::1]:3306",
                "10.0.0.1:3306"
            ]
        );
        assert_eq!(hosts[1].tags["role"], "replica");
        assert_eq!(hosts[4].tags["user"], "ro");
        assert_eq!(
            warnings,
            vec!["hosts.txt:8: db1:3306 repeats line 2; ignored"]
        );
    }

    #[test]
    fn localhost_is_the_socket_when_one_is_given() {
        let text = "localhost\nlocalhost:3307\nunix:/run/b.sock\n";
        let sock = Path::new("/run/a.sock");
        let (hosts, _) = parse_list(text, "l", 3306, Some(sock)).expect("parses");
        let addrs: Vec<String> = hosts.iter().map(Host::addr).collect();
        assert_eq!(
            addrs,
            vec!["unix:/run/a.sock", "localhost:3307", "unix:/run/b.sock"]
        );
        let (hosts, _) = parse_list("localhost\n", "l", 3306, None).expect("parses");
        assert_eq!(hosts[0].addr(), "localhost:3306");
    }

    #[test]
    fn errors_name_file_and_line() {
        let cases = [
            ("db1\ndb2:99999\n", "hosts.txt:2: port '99999'"),
            ("db1:x\n", "hosts.txt:1: port 'x'"),
            ("::1\n", "hosts.txt:1: '::1': write IPv6"),
            ("[::1\n", "hosts.txt:1: IPv6 address without"),
            ("db1 role\n", "hosts.txt:1: 'role' is not a name=value tag"),
            ("db;1\n", "hosts.txt:1: 'db;1' is not a host"),
            (
                "db1 port=3307\n",
                "hosts.txt:1: give the port in the address",
            ),
        ];
        for (text, want) in cases {
            let e = parse_list(text, "hosts.txt", 3306, None)
                .expect_err(text)
                .to_string();
            assert!(e.starts_with(want), "{text:?}: {e}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,120}") {
            let _ = parse_list(&s, "x", 3306, Some(Path::new("/s")));
        }
    }
}
