//! Host lists: `host`, `host:port`, `[v6]:port`, then optional
//! `name=value` tags (`user=` and `password=` override the credentials for
//! that host); `#` starts a comment; duplicates are dropped with a warning.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    pub host: String,
    pub port: u16,
    pub tags: BTreeMap<String, String>,
}

impl Host {
    /// `host:port`, `[v6]:port`: how a host is named in output.
    pub fn addr(&self) -> String {
        if self.host.contains(':') {
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
/// and warnings about duplicates.
pub fn parse_list(
    text: &str,
    source_name: &str,
    default_port: u16,
) -> Result<(Vec<Host>, Vec<String>), HostError> {
    let mut hosts: Vec<Host> = Vec::new();
    let mut seen: BTreeMap<(String, u16), usize> = BTreeMap::new();
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
        let (host, port) = parse_addr(addr, default_port).map_err(err)?;
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
        let key = (host.clone(), port);
        if let Some(first) = seen.get(&key) {
            warnings.push(format!(
                "{source_name}:{line_no}: {} repeats line {first}; ignored",
                Host { host, port, tags }.addr()
            ));
            continue;
        }
        seen.insert(key, line_no);
        hosts.push(Host { host, port, tags });
    }
    Ok((hosts, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_all_forms() {
        let text = "# fleet\ndb1\ndb2:3307 dc=eu role=replica\n[::1]:3308\n[fe80::1]\n\n10.0.0.1 user=ro password=s3cret # trailing\ndb1:3306\n";
        let (hosts, warnings) = parse_list(text, "hosts.txt", 3306).expect("parses");
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
            let e = parse_list(text, "hosts.txt", 3306)
                .expect_err(text)
                .to_string();
            assert!(e.starts_with(want), "{text:?}: {e}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,120}") {
            let _ = parse_list(&s, "x", 3306);
        }
    }
}
