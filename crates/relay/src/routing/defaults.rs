//! What a new session on a server reads with, and whether a replica's is
//! the primary's. A session takes the settings its client does not set
//! from the server it runs on, so a replica whose globals differ answers
//! the same read otherwise: with `time_zone` +05:00 there,
//! `FROM_UNIXTIME(0)` reads `05:00:00` through the split where the primary
//! (and every read in a transaction) says `00:00:00`; with
//! `div_precision_increment` 8, `1/3` has eight decimals. Such a replica
//! gets no reads until its settings match again (said in the log and on
//! `/status`): the relay cannot know which of the two the client meant.
//!
//! [`READ_DEFAULTS`] are the settings that change the value a read
//! returns, rather than its plan, its cost, a limit that fails it loudly,
//! or what a write does; `crates/relay/tests/relay_routing.rs` holds every
//! session variable the server lists against this list and the one of
//! those that do not (a variable a new server adds fails it until it is
//! placed). The client's own handshake sets its character sets.

/// Globals a new session reads with that change what a read returns,
/// lower-case; `system_time_zone` stands behind `time_zone = SYSTEM`,
/// `init_connect` may set any of them for a login without CONNECTION
/// ADMIN, and
/// a replica's READ UNCOMMITTED reads its applier's unfinished
/// transactions (`tx_isolation`, `transaction_isolation` on 11.x).
/// (`character_set_collations` is MariaDB 11.2's and
/// `block_encryption_mode`, AES_ENCRYPT's mode, 11.4's; a server without
/// a variable reads it as absent, which matches only absent.)
pub const READ_DEFAULTS: &[&str] = &[
    "block_encryption_mode",
    "character_set_collations",
    "default_regex_flags",
    "default_week_format",
    "div_precision_increment",
    "group_concat_max_len",
    "init_connect",
    "lc_time_names",
    "max_recursive_iterations",
    "max_sort_length",
    "old",
    "old_mode",
    "sql_auto_is_null",
    "sql_mode",
    "sql_select_limit",
    "standard_compliant_cte",
    "system_time_zone",
    "system_versioning_asof",
    "time_zone",
    "transaction_isolation",
    "tx_isolation",
];

/// A server's values of [`READ_DEFAULTS`] (name, value), as read; a name
/// the server does not have is absent.
pub type Defaults = Vec<(String, String)>;

/// sql_mode flags that change only what a write or DDL does (or fail a
/// read loudly: ONLY_FULL_GROUP_BY): a replica whose mode differs from
/// the primary's only in these answers reads alike (replicas often drop
/// strictness; replication applies the primary's mode with each event).
const WRITE_MODES: &[&str] = &[
    "ALLOW_INVALID_DATES",
    "ERROR_FOR_DIVISION_BY_ZERO",
    "NO_AUTO_CREATE_USER",
    "NO_AUTO_VALUE_ON_ZERO",
    "NO_DIR_IN_CREATE",
    "NO_ENGINE_SUBSTITUTION",
    "NO_FIELD_OPTIONS",
    "NO_KEY_OPTIONS",
    "NO_TABLE_OPTIONS",
    "NO_ZERO_DATE",
    "NO_ZERO_IN_DATE",
    "ONLY_FULL_GROUP_BY",
    "SIMULTANEOUS_ASSIGNMENT",
    "STRICT_ALL_TABLES",
    "STRICT_TRANS_TABLES",
    "TRADITIONAL",
];

/// What of a setting's value a read sees: sql_mode without its
/// write-only flags, an isolation level as dirty (READ UNCOMMITTED) or
/// not — one autocommit read is one consistent snapshot under every other
/// level —, anything else as it is.
fn as_read(name: &str, value: &str) -> String {
    match name {
        "sql_mode" => {
            let mut flags: Vec<String> = value
                .split(',')
                .map(|f| f.trim().to_ascii_uppercase())
                .filter(|f| !f.is_empty() && !WRITE_MODES.contains(&f.as_str()))
                .collect();
            flags.sort();
            flags.join(",")
        }
        "tx_isolation" | "transaction_isolation" => {
            if value.eq_ignore_ascii_case("READ-UNCOMMITTED") {
                "dirty".into()
            } else {
                "consistent".into()
            }
        }
        _ => value.to_string(),
    }
}

/// Why a session on `other` would read otherwise than one on the primary
/// (`primary`): each setting that differs as a read sees it ([`as_read`]),
/// with both values; `None` when none does. Values are compared as the
/// server reports them (its canonical form for each variable). The
/// settings in `may_differ` (`[routing] settings_may_differ`: the
/// operator's word that a difference is meant) are not compared.
pub fn unlike(primary: &Defaults, other: &Defaults, may_differ: &[String]) -> Option<String> {
    let value = |d: &Defaults, name: &str| {
        d.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let show = |v: Option<String>| match v {
        Some(v) => format!("'{}'", v.escape_debug()),
        None => "(none)".to_string(),
    };
    let differ: Vec<String> = READ_DEFAULTS
        .iter()
        .filter(|name| !may_differ.iter().any(|m| m.eq_ignore_ascii_case(name)))
        .filter_map(|name| {
            let (p, o) = (value(primary, name), value(other, name));
            let read = |v: &Option<String>| v.as_deref().map(|v| as_read(name, v));
            (read(&p) != read(&o))
                .then(|| format!("{name} {} (the primary's {})", show(o), show(p)))
        })
        .collect();
    (!differ.is_empty()).then(|| {
        format!(
            "its new sessions read with {}: a read there would answer otherwise than on the \
             primary, so reads do not go to it until the settings match (or [routing] \
             settings_may_differ names them)",
            differ.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(pairs: &[(&str, &str)]) -> Defaults {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_replica_reads_as_the_primary_only_with_the_same_settings() {
        let primary = d(&[
            ("time_zone", "SYSTEM"),
            ("system_time_zone", "UTC"),
            ("div_precision_increment", "4"),
        ]);
        // (name, the other's settings, whether it differs, words it names)
        let rows: &[(&str, Defaults, bool, &[&str])] = &[
            ("the same", primary.clone(), false, &[]),
            (
                "the same, other order and case",
                d(&[
                    ("DIV_PRECISION_INCREMENT", "4"),
                    ("time_zone", "SYSTEM"),
                    ("system_time_zone", "UTC"),
                ]),
                false,
                &[],
            ),
            (
                "another time zone",
                d(&[
                    ("time_zone", "+05:00"),
                    ("system_time_zone", "UTC"),
                    ("div_precision_increment", "4"),
                ]),
                true,
                &["time_zone '+05:00' (the primary's 'SYSTEM')"],
            ),
            (
                "the host's zone behind SYSTEM",
                d(&[
                    ("time_zone", "SYSTEM"),
                    ("system_time_zone", "CET"),
                    ("div_precision_increment", "4"),
                ]),
                true,
                &["system_time_zone 'CET'"],
            ),
            (
                "two settings",
                d(&[
                    ("time_zone", "+05:00"),
                    ("system_time_zone", "UTC"),
                    ("div_precision_increment", "8"),
                ]),
                true,
                &[
                    "time_zone",
                    "div_precision_increment '8' (the primary's '4')",
                ],
            ),
            (
                "a variable the primary has and it lacks",
                d(&[("time_zone", "SYSTEM"), ("system_time_zone", "UTC")]),
                true,
                &["div_precision_increment (none) (the primary's '4')"],
            ),
            (
                "a name outside the list differs: no matter",
                d(&[
                    ("time_zone", "SYSTEM"),
                    ("system_time_zone", "UTC"),
                    ("div_precision_increment", "4"),
                    ("sort_buffer_size", "1"),
                ]),
                false,
                &[],
            ),
        ];
        for (name, other, differs, words) in rows {
            let why = unlike(&primary, other, &[]);
            assert_eq!(why.is_some(), *differs, "{name}: {why:?}");
            for w in *words {
                assert!(
                    why.as_deref().unwrap_or("").contains(w),
                    "{name}: {why:?} lacks {w}"
                );
            }
        }
        assert!(
            unlike(&primary, &d(&[("time_zone", "'\n")]), &[])
                .is_some_and(|w| w.contains("'\\'\\n'")),
            "a value is escaped for a terminal"
        );
    }

    #[test]
    fn a_mode_or_isolation_a_read_does_not_see_and_a_named_setting_may_differ() {
        let p = d(&[
            (
                "sql_mode",
                "STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION",
            ),
            ("tx_isolation", "REPEATABLE-READ"),
            ("group_concat_max_len", "1024"),
        ]);
        let with = |mode: &str, iso: &str, gc: &str| {
            d(&[
                ("sql_mode", mode),
                ("tx_isolation", iso),
                ("group_concat_max_len", gc),
            ])
        };
        // (other's mode, isolation, group_concat_max_len, may differ, differs)
        let rows: &[(&str, &str, &str, &[&str], bool)] = &[
            ("", "READ-COMMITTED", "1024", &[], false),
            ("NO_ENGINE_SUBSTITUTION", "SERIALIZABLE", "1024", &[], false),
            (
                "ONLY_FULL_GROUP_BY,STRICT_ALL_TABLES",
                "REPEATABLE-READ",
                "1024",
                &[],
                false,
            ),
            ("PIPES_AS_CONCAT", "REPEATABLE-READ", "1024", &[], true),
            (
                "ANSI_QUOTES,STRICT_TRANS_TABLES",
                "REPEATABLE-READ",
                "1024",
                &[],
                true,
            ),
            ("", "READ-UNCOMMITTED", "1024", &[], true),
            ("", "READ-COMMITTED", "1048576", &[], true),
            (
                "",
                "READ-COMMITTED",
                "1048576",
                &["group_concat_max_len"],
                false,
            ),
            (
                "",
                "READ-COMMITTED",
                "1048576",
                &["GROUP_CONCAT_MAX_LEN"],
                false,
            ),
            (
                "PIPES_AS_CONCAT",
                "REPEATABLE-READ",
                "1048576",
                &["group_concat_max_len"],
                true,
            ),
        ];
        for (mode, iso, gc, may, differs) in rows {
            let may: Vec<String> = may.iter().map(|m| m.to_string()).collect();
            let why = unlike(&p, &with(mode, iso, gc), &may);
            assert_eq!(
                why.is_some(),
                *differs,
                "{mode} {iso} {gc} {may:?}: {why:?}"
            );
        }
    }

    #[test]
    fn the_list_is_sorted_lower_case_and_without_repeats() {
        let mut sorted = READ_DEFAULTS.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted, READ_DEFAULTS);
        assert!(READ_DEFAULTS.iter().all(|n| *n == n.to_ascii_lowercase()));
    }
}
