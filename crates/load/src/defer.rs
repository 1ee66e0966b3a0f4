//! `--defer-indexes`: create tables without their secondary indexes and
//! add them back, in one ALTER per table, after the table's data.

/// Splits a mysqldump-style `CREATE TABLE` (one definition per line) into
/// the statement without secondary indexes and the index definitions.
/// `None` when there is nothing to defer or deferring is unsafe (foreign
/// keys need their indexes; an AUTO_INCREMENT column needs a key).
pub fn strip_secondary_indexes(create: &[u8]) -> Option<(Vec<u8>, Vec<String>)> {
    let text = std::str::from_utf8(create).ok()?;
    let open = text.find("(\n")? + 2;
    let close = text.rfind("\n)")?;
    if close <= open {
        return None;
    }
    let body = &text[open..close];
    let lines: Vec<&str> = body
        .split('\n')
        .map(|l| l.trim_end().trim_end_matches(','))
        .collect();
    let upper: Vec<String> = lines
        .iter()
        .map(|l| l.trim_start().to_ascii_uppercase())
        .collect();
    if upper
        .iter()
        .any(|l| l.starts_with("CONSTRAINT") || l.contains("FOREIGN KEY"))
    {
        return None;
    }
    let has_pk = upper.iter().any(|l| l.starts_with("PRIMARY KEY"));
    if !has_pk && upper.iter().any(|l| l.contains("AUTO_INCREMENT")) {
        return None;
    }
    let secondary = |u: &str| {
        [
            "KEY ",
            "INDEX ",
            "UNIQUE KEY ",
            "UNIQUE INDEX ",
            "UNIQUE ",
            "FULLTEXT ",
            "SPATIAL ",
        ]
        .iter()
        .any(|p| u.starts_with(p))
    };
    let mut kept = Vec::new();
    let mut keys = Vec::new();
    for (l, u) in lines.iter().zip(&upper) {
        if secondary(u) {
            keys.push(l.trim().to_string());
        } else {
            kept.push(*l);
        }
    }
    if keys.is_empty() || kept.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    out.push_str(&text[..open]);
    out.push_str(&kept.join(",\n"));
    out.push_str(&text[close..]);
    Some((out.into_bytes(), keys))
}

/// `ALTER TABLE t ADD KEY ..., ADD UNIQUE KEY ...`.
pub fn add_indexes_sql(table: &str, keys: &[String]) -> String {
    let adds: Vec<String> = keys.iter().map(|k| format!("ADD {k}")).collect();
    format!("ALTER TABLE {table} {}", adds.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "CREATE TABLE `t` (\n  `id` int(11) NOT NULL AUTO_INCREMENT,\n  `k` int(11) NOT NULL DEFAULT 0,\n  `c` char(120) NOT NULL,\n  PRIMARY KEY (`id`),\n  KEY `k_1` (`k`),\n  UNIQUE KEY `c_u` (`c`)\n) ENGINE=InnoDB";

    #[test]
    fn strips_and_rebuilds() {
        let (create, keys) = strip_secondary_indexes(T.as_bytes()).expect("deferrable");
        let create = String::from_utf8(create).expect("utf8");
        assert_eq!(
            create,
            "CREATE TABLE `t` (\n  `id` int(11) NOT NULL AUTO_INCREMENT,\n  `k` int(11) NOT NULL DEFAULT 0,\n  `c` char(120) NOT NULL,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB"
        );
        assert_eq!(keys, vec!["KEY `k_1` (`k`)", "UNIQUE KEY `c_u` (`c`)"]);
        assert_eq!(
            add_indexes_sql("`d`.`t`", &keys),
            "ALTER TABLE `d`.`t` ADD KEY `k_1` (`k`), ADD UNIQUE KEY `c_u` (`c`)"
        );
    }

    #[test]
    fn leaves_unsafe_tables_alone() {
        let fk = T.replace(
            "UNIQUE KEY `c_u` (`c`)",
            "CONSTRAINT `f` FOREIGN KEY (`k`) REFERENCES `p` (`id`)",
        );
        assert!(strip_secondary_indexes(fk.as_bytes()).is_none());
        let no_pk = "CREATE TABLE `t` (\n  `id` int NOT NULL AUTO_INCREMENT,\n  KEY `id` (`id`)\n) ENGINE=InnoDB";
        assert!(strip_secondary_indexes(no_pk.as_bytes()).is_none());
        let pk_only = "CREATE TABLE `t` (\n  `id` int NOT NULL,\n  PRIMARY KEY (`id`)\n)";
        assert!(strip_secondary_indexes(pk_only.as_bytes()).is_none());
    }
}
