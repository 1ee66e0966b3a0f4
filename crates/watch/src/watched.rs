//! Which login and which SSH pipe each watched server gets, in one place:
//! the credential store's entry for the server's address wins over the
//! connection options for the user and the password; the SSH destination
//! comes from the store, else the config's `[ssh.hosts]`, else the host's
//! `ssh=` tag; an SSH password only ever from the store. Pure: the store,
//! the config and the hosts in, the servers to watch out.

use sqlfleet_conn::{PasswordSpec, Secret, Target};
use sqlfleet_fanout::hosts::Host;

use crate::config::SshConfig;
use crate::creds::Store;
use crate::monitor::Watched;
use crate::ssh::SshTarget;

/// The servers to watch: each host with its target (from `base`) and SSH.
pub fn watched(
    hosts: &[Host],
    base: &Target,
    store: Option<&Store>,
    ssh: &SshConfig,
) -> Vec<Watched> {
    hosts
        .iter()
        .map(|h| {
            let addr = h.addr();
            let mut target = h.target(base);
            let entry = store.and_then(|s| s.get(&addr));
            if let Some(e) = entry {
                if let Some(u) = &e.user {
                    target.user = u.clone();
                }
                if let Some(p) = &e.password {
                    target.password = Some(PasswordSpec::Given(Secret::new(p.clone())));
                }
            }
            let ssh = entry
                .and_then(|e| e.ssh.clone())
                .or_else(|| ssh.hosts.get(&addr).cloned())
                .or_else(|| h.tags.get("ssh").cloned())
                .map(|d| SshTarget {
                    password: entry.and_then(|e| e.ssh_password.clone()).map(Secret::new),
                    ..SshTarget::parse(&d, &ssh.options)
                });
            Watched {
                host: h.clone(),
                target,
                ssh,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::creds::Entry;

    fn base() -> Target {
        Target {
            endpoint: sqlfleet_conn::Endpoint::Tcp {
                host: "127.0.0.1".into(),
                port: 3306,
            },
            user: "monitor".into(),
            password: Some(PasswordSpec::Given(Secret::new("flag-pw"))),
            database: None,
            ssl_mode: sqlfleet_conn::SslMode::Disabled,
            ssl_ca: None,
            ssl_cert: None,
            ssl_key: None,
            tls: Default::default(),
            charset: None,
        }
    }

    #[test]
    fn who_logs_in_where_and_through_which_ssh() {
        let mut store = Store::default();
        store.put(Entry {
            server: "db1:3306".into(),
            user: Some("alice".into()),
            password: Some("store-pw".into()),
            ssh: Some("ops@db1".into()),
            ssh_password: Some("ssh-pw".into()),
        });
        store.put(Entry {
            server: "db2:3306".into(),
            user: None,
            password: None,
            ssh: None,
            ssh_password: None,
        });
        let mut cfg = SshConfig::default();
        cfg.hosts.insert("db2:3306".into(), "root@db2".into());
        cfg.hosts.insert("db1:3306".into(), "never@db1".into());
        let mut tagged = Host::tcp("db3", 3306);
        tagged.tags.insert("ssh".into(), "tag@db3".into());
        let hosts = [
            Host::tcp("db1", 3306),
            Host::tcp("db2", 3306),
            tagged,
            Host::tcp("db4", 3306),
        ];
        let w = watched(&hosts, &base(), Some(&store), &cfg);
        let pw = |t: &Target| match &t.password {
            Some(PasswordSpec::Given(s)) => s.expose().to_string(),
            _ => String::new(),
        };
        // (server, user, password, ssh destination, ssh password)
        let rows = [
            ("db1:3306", "alice", "store-pw", Some("ops@db1"), true),
            ("db2:3306", "monitor", "flag-pw", Some("root@db2"), false),
            ("db3:3306", "monitor", "flag-pw", Some("tag@db3"), false),
            ("db4:3306", "monitor", "flag-pw", None, false),
        ];
        for (x, (server, user, password, dest, ssh_pw)) in w.iter().zip(rows) {
            assert_eq!(x.host.addr(), server);
            assert_eq!(x.target.user, user, "{server}");
            assert_eq!(pw(&x.target), password, "{server}");
            assert_eq!(
                x.ssh.as_ref().map(|s| s.destination.as_str()),
                dest,
                "{server}"
            );
            assert_eq!(
                x.ssh.as_ref().is_some_and(|s| s.password.is_some()),
                ssh_pw,
                "{server}"
            );
        }
        // Without a store: the options for everyone.
        let w = watched(&hosts[..1], &base(), None, &SshConfig::default());
        assert_eq!(
            (w[0].target.user.as_str(), pw(&w[0].target).as_str()),
            ("monitor", "flag-pw")
        );
        assert!(w[0].ssh.is_none());
    }
}
