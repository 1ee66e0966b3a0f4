//! The admin status page: backends with their health and pools, clients,
//! pins by reason, rule hits and the most frequent query digests.

use std::sync::atomic::Ordering;

use crate::frontend::ctx::Ctx;
use crate::protocol::sql;

/// The status as pretty-printed JSON.
pub fn render(ctx: &Ctx) -> String {
    let health = ctx.pool.health.all();
    let backends: Vec<serde_json::Value> = ctx
        .pool
        .gauges()
        .into_iter()
        .zip(health)
        .enumerate()
        .map(|(i, (g, h))| {
            let c = ctx.metrics.backend(i);
            let down = h.down_since.map(|t| down_note(t, h.error.as_deref()));
            let n = |f: fn(&crate::admin::metrics::BackendCounters) -> u64| c.map_or(0, f);
            serde_json::json!({
                "address": g.addr, "socket": g.socket, "role": g.role, "up": h.up, "read_only": h.read_only,
                "galera": h.galera,
                "replicating": h.replicating, "replication_unread": h.replication_unread,
                "reads_unlike_primary": h.reads_unlike_primary,
                "replication_filters": h.replication_filters,
                "lag_seconds": h.lag, "gtid": h.gtid,
                "error": h.error, "down": down,
                "connections_open": g.open, "connections_idle": g.idle,
                "clients_waiting": g.waiting, "clients_busy": g.busy,
                "commands": n(|c| c.commands.load(Ordering::Relaxed)),
                "errors": n(|c| c.errors.load(Ordering::Relaxed)),
                "bytes_to_client": n(|c| c.bytes_to_client.load(Ordering::Relaxed)),
                "connections_created": n(|c| c.connects.load(Ordering::Relaxed)),
                "connections_reused": n(|c| c.reuses.load(Ordering::Relaxed)),
            })
        })
        .collect();
    let m = &ctx.metrics;
    let pins: serde_json::Map<String, serde_json::Value> = sql::Pin::ALL
        .iter()
        .map(|p| (p.name().to_string(), m.pins(*p).into()))
        .collect();
    let rules = ctx.rules();
    let rule_hits: Vec<serde_json::Value> = rules
        .rules
        .iter()
        .zip(&rules.hits)
        .map(|(r, h)| serde_json::json!({"name": r.name, "hits": h.load(Ordering::Relaxed)}))
        .collect();
    let (top, other) = ctx.digests.top(50);
    let v = serde_json::json!({
        "relay": concat!("sqlfleet-relay ", env!("CARGO_PKG_VERSION")),
        "server_version": ctx.greeting().version,
        "backends": backends,
        "clients_connected": m.clients_connected.load(Ordering::Relaxed),
        "commands": m.commands.load(Ordering::Relaxed),
        "internal_errors": m.internal_errors.load(Ordering::Relaxed),
        "pins": pins,
        "rules": rule_hits,
        "cache": ctx.cache.status(),
        "digests": top,
        "digests_other": other,
    });
    serde_json::to_string_pretty(&v).unwrap_or_default()
}

/// `down since 06:01:02 UTC (12 s): <last error>` for a backend found
/// down at `since` — when, for how long and why, not only the last
/// socket error.
fn down_note(since: std::time::SystemTime, error: Option<&str>) -> String {
    let unix = since
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let secs = since.elapsed().map_or(0, |d| d.as_secs());
    let day = unix % 86_400;
    format!(
        "down since {:02}:{:02}:{:02} UTC ({secs} s ago){}",
        day / 3600,
        day % 3600 / 60,
        day % 60,
        error
            .map(|e| format!("; last error: {e}"))
            .unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_down_backend_says_since_when_and_why() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_795_418_401);
        let n = super::down_note(t, Some("health check timed out"));
        assert!(n.starts_with("down since 07:20:01 UTC ("), "{n}");
        assert!(
            n.ends_with("s ago); last error: health check timed out"),
            "{n}"
        );
        assert!(!super::down_note(t, None).contains("last error"));
    }
}
