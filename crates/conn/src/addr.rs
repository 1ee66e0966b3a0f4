//! The one parser of server addresses every command uses: `host`,
//! `host:port`, `[v6]`, `[v6]:port`, and (where a socket will do)
//! `unix:/path`.

use std::path::PathBuf;

/// An address that cannot be read, and why (names what was written).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AddrError(String);

/// A server address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    Tcp(String, u16),
    Unix(PathBuf),
}

/// `host[:port]`, `[v6][:port]` or `unix:/path`.
pub fn parse_address(s: &str, default_port: u16) -> Result<Address, AddrError> {
    if let Some(p) = s.strip_prefix("unix:") {
        if p.is_empty() {
            return Err(AddrError("empty socket path".into()));
        }
        return Ok(Address::Unix(PathBuf::from(p)));
    }
    parse_addr(s, default_port).map(|(h, p)| Address::Tcp(h, p))
}

/// Parses one address: `host`, `host:port`, `[v6]`, `[v6]:port`.
pub fn parse_addr(s: &str, default_port: u16) -> Result<(String, u16), AddrError> {
    let (h, port) = split_host_port(s)?;
    if h.is_empty() {
        return Err(AddrError(format!("'{s}': empty host name")));
    }
    if !s.starts_with('[')
        && !h
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_')
    {
        return Err(AddrError(format!("'{h}' is not a host name or address")));
    }
    Ok((h.to_string(), port.unwrap_or(default_port)))
}

/// The host and the port if one is written: `host`, `host:port`, `[v6]`,
/// `[v6]:port`, or an empty host (`:port`, ``) for callers that allow one
/// (a DSN's authority). IPv6 addresses must be in brackets.
pub fn split_host_port(s: &str) -> Result<(&str, Option<u16>), AddrError> {
    let port_of = |p: &str| -> Result<u16, AddrError> {
        match p.parse::<u16>() {
            Ok(0) | Err(_) => Err(AddrError(format!(
                "port '{p}' is not a number from 1 to 65535"
            ))),
            Ok(n) => Ok(n),
        }
    };
    if let Some(rest) = s.strip_prefix('[') {
        let (h, after) = rest
            .split_once(']')
            .ok_or_else(|| AddrError("IPv6 address without a closing ']'".into()))?;
        if h.is_empty() {
            return Err(AddrError("empty IPv6 address".into()));
        }
        let port = match after {
            "" => None,
            p => Some(port_of(p.strip_prefix(':').ok_or_else(|| {
                AddrError(format!("unexpected '{p}' after ']'"))
            })?)?),
        };
        return Ok((h, port));
    }
    if s.matches(':').count() > 1 {
        return Err(AddrError(format!(
            "'{s}': write IPv6 addresses in brackets, as [addr]:port"
        )));
    }
    Ok(match s.split_once(':') {
        Some((h, p)) => (h, Some(port_of(p)?)),
        None => (s, None),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(parse_addr("db1", 3306), Ok(("db1".into(), 3306)));
        assert_eq!(parse_addr("db1:3307", 3306), Ok(("db1".into(), 3307)));
        assert_eq!(parse_addr("[::1]:3307", 3306), Ok(("::1".into(), 3307)));
        assert_eq!(parse_addr("[::1]", 3306), Ok(("::1".into(), 3306)));
        assert!(parse_addr("::1", 3306).is_err());
        assert!(parse_addr("db1:0", 3306).is_err());
        assert!(parse_addr("db1:x", 3306).is_err());
        assert!(parse_addr(":3306", 3306).is_err());
        assert!(parse_addr("[::1", 3306).is_err());
        assert_eq!(
            parse_address("unix:/run/m.sock", 3306),
            Ok(Address::Unix("/run/m.sock".into()))
        );
        assert!(parse_address("unix:", 3306).is_err());
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in ".{0,40}") {
            let _ = parse_address(&s, 3306);
        }
    }
}
