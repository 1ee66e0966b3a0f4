//! What a running node must change to be what `sandbox.toml` says it is:
//! the primary takes writes, a replica is read-only and replicates from
//! the primary. A promotion stopped part way (Ctrl-C twice, a kill, a
//! crash) can leave the old primary read-only, a promoted replica writable
//! under its old role, or a replica following a node that is no longer the
//! primary; `up` repairs each with these fixes and `list` names them.
//! Pure: `fixes` decides from what the node reports, a table test holds
//! every case.

use crate::meta::Role;

/// What a running node reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// `@@read_only`.
    pub read_only: bool,
    /// The host and port it replicates from (SHOW SLAVE STATUS), if any.
    pub source: Option<(String, u16)>,
}

/// One change that brings a node to its role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fix {
    /// The primary is read-only: `SET GLOBAL read_only = 0`.
    Writable,
    /// A replica takes writes: `SET GLOBAL read_only = 1`.
    ReadOnly,
    /// A replica replicates from nothing or from another server: point it
    /// at the primary with GTID.
    Replicate,
}

impl Fix {
    /// What was wrong, for `list` and `up`'s report.
    pub fn what(self) -> &'static str {
        match self {
            Fix::Writable => "the primary is read-only",
            Fix::ReadOnly => "a replica takes writes (read_only is off)",
            Fix::Replicate => "it does not replicate from the primary",
        }
    }
}

/// The changes a node in `role` needs, given what it reports, where the
/// primary listens and the sandbox's own server options (`--option`). A
/// primary's own replication is left alone (a promotion never leaves one;
/// a user may have set it up), and so is any node's read_only that the
/// options set; a Galera member has no role to restore.
pub fn fixes(role: Role, primary_port: u16, seen: &Seen, options: &[String]) -> Vec<Fix> {
    let mut out = Vec::new();
    match role {
        Role::Primary => {
            if seen.read_only && read_only_option(options) != Some(true) {
                out.push(Fix::Writable);
            }
        }
        Role::Replica => {
            if !seen.read_only && read_only_option(options) != Some(false) {
                out.push(Fix::ReadOnly);
            }
            let follows = matches!(&seen.source,
                Some((host, port)) if *port == primary_port && is_loopback(host));
            if !follows {
                out.push(Fix::Replicate);
            }
        }
        Role::Member => {}
    }
    out
}

/// The read_only the sandbox's server options (`key=value`, as `--option`
/// takes them; the last one counts, as in an option file) set, if any.
fn read_only_option(options: &[String]) -> Option<bool> {
    options
        .iter()
        .filter_map(|o| {
            let (k, v) = o.split_once('=').unwrap_or((o, "1"));
            k.trim()
                .replace('-', "_")
                .eq_ignore_ascii_case("read_only")
                .then(|| {
                    !matches!(
                        v.trim().to_ascii_lowercase().as_str(),
                        "0" | "off" | "false"
                    )
                })
        })
        .next_back()
}

/// The address a sandbox replica is pointed at (`setup::start_replication`
/// writes 127.0.0.1; `localhost` means the same server).
fn is_loopback(host: &str) -> bool {
    matches!(host, "127.0.0.1" | "localhost" | "::1")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(read_only: bool, source: Option<(&str, u16)>) -> Seen {
        Seen {
            read_only,
            source: source.map(|(h, p)| (h.to_string(), p)),
        }
    }

    #[test]
    fn each_role_and_what_its_node_reports() {
        use Fix::*;
        let p = 3307;
        let table: &[(Role, Seen, &[Fix], &str)] = &[
            (
                Role::Primary,
                seen(false, None),
                &[],
                "a primary as it should be",
            ),
            (
                Role::Primary,
                seen(true, None),
                &[Writable],
                "fenced by a promotion that stopped",
            ),
            (
                Role::Primary,
                seen(false, Some(("10.0.0.9", 3306))),
                &[],
                "its own replication is the user's",
            ),
            (
                Role::Primary,
                seen(true, Some(("127.0.0.1", 3309))),
                &[Writable],
                "only writes",
            ),
            (
                Role::Replica,
                seen(true, Some(("127.0.0.1", p))),
                &[],
                "a replica as it should be",
            ),
            (
                Role::Replica,
                seen(true, Some(("localhost", p))),
                &[],
                "localhost is loopback",
            ),
            (
                Role::Replica,
                seen(false, None),
                &[ReadOnly, Replicate],
                "promoted, then the promotion stopped before sandbox.toml changed",
            ),
            (
                Role::Replica,
                seen(true, Some(("127.0.0.1", 3308))),
                &[Replicate],
                "follows the old primary after sandbox.toml changed",
            ),
            (
                Role::Replica,
                seen(true, None),
                &[Replicate],
                "demoted while it was down",
            ),
            (
                Role::Replica,
                seen(true, Some(("10.0.0.9", p))),
                &[Replicate],
                "the primary's port on another host is another server",
            ),
            (
                Role::Replica,
                seen(false, Some(("127.0.0.1", p))),
                &[ReadOnly],
                "writable",
            ),
            (
                Role::Member,
                seen(false, None),
                &[],
                "a Galera member has no role to restore",
            ),
            (
                Role::Member,
                seen(true, Some(("127.0.0.1", p))),
                &[],
                "nor any replication",
            ),
        ];
        for (role, s, want, why) in table {
            assert_eq!(fixes(*role, p, s, &[]), *want, "{why}: {role:?} {s:?}");
        }
    }

    #[test]
    fn read_only_the_sandboxs_options_set_is_left_as_they_set_it() {
        let ro = seen(true, None);
        for (options, want, why) in [
            (vec!["read_only=1"], vec![], "--option read_only=1"),
            (vec!["read-only=ON"], vec![], "dashes, ON"),
            (vec!["READ_ONLY"], vec![], "a bare flag"),
            (vec!["read_only=0"], vec![Fix::Writable], "turned off"),
            (vec!["read_only=off"], vec![Fix::Writable], "OFF"),
            (
                vec!["read_only_compressed=1"],
                vec![Fix::Writable],
                "another option",
            ),
            (vec![], vec![Fix::Writable], "none"),
            (
                vec!["read_only=1", "read_only=0"],
                vec![Fix::Writable],
                "the last counts",
            ),
        ] {
            let options: Vec<String> = options.into_iter().map(String::from).collect();
            assert_eq!(fixes(Role::Primary, 3307, &ro, &options), want, "{why}");
        }
        // And a replica the options make writable stays so.
        let rw = seen(false, Some(("127.0.0.1", 3307)));
        let off = vec!["read-only=0".to_string()];
        assert_eq!(fixes(Role::Replica, 3307, &rw, &off), vec![]);
        assert_eq!(fixes(Role::Replica, 3307, &rw, &[]), vec![Fix::ReadOnly]);
    }
}
