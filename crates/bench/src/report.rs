//! Results on disk: CSV of every sample, JSON of every cell, SVG charts and
//! one self-contained HTML report; and comparing two result directories.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::insert::InsertCell;
use crate::pool::PoolCell;
use crate::stats::{Spread, Verdict};
use sqlfleet_chart::{line_chart, Chart, Series};

/// Everything one `bench` run produced.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    pub command: String,
    /// Typed: numbers as numbers, lists as arrays.
    pub parameters: BTreeMap<String, serde_json::Value>,
    /// The server's settings; numbers as numbers.
    pub server: BTreeMap<String, serde_json::Value>,
    pub started: String,
    #[serde(default)]
    pub insert: Vec<InsertCell>,
    #[serde(default)]
    pub pool: Vec<PoolCell>,
}

impl Results {
    /// (key, throughput) of every cell, for comparisons.
    pub fn throughputs(&self) -> Vec<(String, Spread)> {
        let mut v: Vec<(String, Spread)> = self.insert.iter().map(|c| (c.key(), c.rate)).collect();
        v.extend(self.pool.iter().map(|c| (c.key(), c.qps)));
        v
    }
}

/// A JSON value as a person reads it: strings without quotes.
pub fn text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// (x, mean, sd) points of one line.
type Points = Vec<(f64, f64, f64)>;

/// A categorical x axis for swept values: each distinct value gets the
/// next position, labelled with the value.
struct Categories(Vec<f64>);

impl Categories {
    fn of(values: impl Iterator<Item = f64>) -> Categories {
        let mut v: Vec<f64> = values.collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        Categories(v)
    }
    fn pos(&self, x: f64) -> f64 {
        self.0.iter().position(|v| *v == x).unwrap_or(0) as f64
    }
    fn ticks(&self) -> Vec<(f64, String)> {
        self.0
            .iter()
            .enumerate()
            .map(|(i, v)| (i as f64, format!("{v}")))
            .collect()
    }
}

/// How an insert cell is named for people: "2 processes, 1000000 rows
/// before, index on (fname, version)".
pub fn insert_label(processes: Option<usize>, size: u64, index: bool) -> String {
    let mut parts = Vec::new();
    if let Some(p) = processes {
        parts.push(format!("{p} process{}", if p == 1 { "" } else { "es" }));
    }
    parts.push(if size == 0 {
        "empty table".to_string()
    } else {
        format!("{size} rows before")
    });
    parts.push(if index {
        "index on (fname, version)".to_string()
    } else {
        "no index".to_string()
    });
    parts.join(", ")
}

/// The charts for these results: (file stem, title, svg).
pub fn charts(r: &Results) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    if !r.insert.is_empty() {
        insert_charts(r, &mut out);
    }
    if !r.pool.is_empty() {
        pool_charts(r, &mut out);
    }
    out
}

/// The insert sweep's: the rate by inserters, and each cell over time.
fn insert_charts(r: &Results, out: &mut Vec<(String, String, String)>) {
    let cats = Categories::of(r.insert.iter().map(|c| c.processes as f64));
    let mut by: BTreeMap<(u64, bool), Points> = BTreeMap::new();
    for c in &r.insert {
        by.entry((c.table_size, c.index)).or_default().push((
            cats.pos(c.processes as f64),
            c.rate.mean,
            c.rate.stddev,
        ));
    }
    let series: Vec<Series> = by
        .into_iter()
        .map(|((size, idx), mut pts)| {
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series {
                errors: pts.iter().map(|p| p.2).collect(),
                ..Series::new(
                    insert_label(None, size, idx),
                    pts.iter().map(|p| (p.0, p.1)).collect(),
                )
            }
        })
        .collect();
    let t = "Insert rate vs concurrent inserters (mean ± sd)";
    out.push((
        "insert_rate_vs_processes".into(),
        t.into(),
        line_chart(&Chart {
            title: t,
            x_label: "concurrent inserters (--threads)",
            y_label: "inserts/s",
            x_integer: true,
            bands: &[],
            band_fill: "#eee",
            x_range: None,
            x_ticks: Some(&cats.ticks()),
            series: &series,
        }),
    ));
    let series: Vec<Series> = r
        .insert
        .iter()
        .take(8)
        .map(|c| {
            Series::new(
                insert_label(Some(c.processes), c.table_size, c.index),
                c.series
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| (i as f64 + 1.0, v as f64))
                    .collect(),
            )
        })
        .collect();
    let warmup = r.insert.first().map_or(1, |c| c.warmup_seconds) as f64;
    // The title says what the chart holds: every cell, or the first 8.
    let t = chart_title(series.len(), r.insert.len());
    out.push((
        "insert_rate_over_time".into(),
        t.clone(),
        line_chart(&Chart {
            title: &t,
            x_label: "second of the cell",
            y_label: "inserts/s",
            x_integer: true,
            bands: &[(0.5, warmup + 0.5, "warm-up (not in the means)")],
            band_fill: "#eee",
            x_range: None,
            x_ticks: None,
            series: &series,
        }),
    ));
}

/// The pool sweep's: queries/s and latencies by queries per connection.
fn pool_charts(r: &Results, out: &mut Vec<(String, String, String)>) {
    let ok: Vec<&PoolCell> = r.pool.iter().filter(|c| !c.failed).collect();
    let cats = Categories::of(r.pool.iter().map(|c| c.queries_per_connection as f64));
    let group = |f: &dyn Fn(&PoolCell) -> (f64, f64)| {
        let mut by: BTreeMap<(String, usize), Points> = BTreeMap::new();
        for c in &ok {
            let (y, e) = f(c);
            by.entry((c.target.clone(), c.clients)).or_default().push((
                cats.pos(c.queries_per_connection as f64),
                y,
                e,
            ));
        }
        by
    };
    // One colour per (target, clients); on the latency chart one dash
    // pattern per measure.
    let to_series =
        |by: BTreeMap<(String, usize), Points>, what: &str, dash: Option<&'static str>| {
            by.into_iter()
                .enumerate()
                .map(|(i, ((t, cl), mut pts))| {
                    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                    Series {
                        label: format!("{t}, {cl} client{}{what}", if cl == 1 { "" } else { "s" }),
                        points: pts.iter().map(|p| (p.0, p.1)).collect(),
                        errors: pts.iter().map(|p| p.2).collect(),
                        color: Some(i),
                        dash,
                    }
                })
                .collect::<Vec<_>>()
        };
    let series = to_series(group(&|c| (c.qps.mean, c.qps.stddev)), "", None);
    let t = "Queries/s vs queries per connection (mean ± sd)";
    out.push((
        "pool_qps_vs_queries_per_connection".into(),
        t.into(),
        line_chart(&Chart {
            title: t,
            x_label: "queries per connection",
            y_label: "queries/s",
            x_integer: true,
            bands: &[],
            band_fill: "#eee",
            x_range: None,
            x_ticks: Some(&cats.ticks()),
            series: &series,
        }),
    ));
    let ms = |us: u64| us as f64 / 1000.0;
    let mut series = to_series(
        group(&|c| (ms(c.connect.p50_us), 0.0)),
        ": connect p50",
        None,
    );
    series.extend(to_series(
        group(&|c| (ms(c.connect.p99_us), 0.0)),
        ": connect p99",
        Some("12 3 2 3"),
    ));
    series.extend(to_series(
        group(&|c| (ms(c.query.p50_us), 0.0)),
        ": query p50",
        Some("8 4"),
    ));
    series.extend(to_series(
        group(&|c| (ms(c.query.p99_us), 0.0)),
        ": query p99",
        Some("2 3"),
    ));
    let t = "Connect and query latency vs queries per connection";
    out.push((
        "pool_latency".into(),
        t.into(),
        line_chart(&Chart {
            title: t,
            x_label: "queries per connection",
            y_label: "latency (ms)",
            x_integer: true,
            bands: &[],
            band_fill: "#eee",
            x_range: None,
            x_ticks: Some(&cats.ticks()),
            series: &series,
        }),
    ));
}

/// What [`write`] put on disk, and what the user should know about it.
pub struct Written {
    pub files: Vec<String>,
    /// E.g. that PNG charts have no text on a machine without fonts.
    pub notes: Vec<String>,
}

/// Writes results.json, samples.csv, charts (SVG and PNG) and report.html
/// into `dir`.
pub fn write(dir: &Path, r: &Results) -> std::io::Result<Written> {
    std::fs::create_dir_all(dir)?;
    let mut files = Vec::new();
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string_pretty(r).map_err(std::io::Error::other)?,
    )?;
    files.push("results.json".to_string());
    let mut csv = String::new();
    if !r.insert.is_empty() {
        csv.push_str("processes,table_size,index,connect,second,inserts,warmup\n");
        for c in &r.insert {
            for (i, v) in c.series.iter().enumerate() {
                let _ = writeln!(
                    csv,
                    "{},{},{},{},{},{},{}",
                    c.processes,
                    c.table_size,
                    c.index,
                    c.connect,
                    i + 1,
                    v,
                    i < c.warmup_seconds
                );
            }
        }
    } else {
        csv.push_str("target,queries_per_connection,clients,window,queries_per_sec,warmup\n");
        for c in &r.pool {
            for (i, v) in c.windows.iter().enumerate() {
                let _ = writeln!(
                    csv,
                    "{},{},{},{},{:.1},{}",
                    c.target,
                    c.queries_per_connection,
                    c.clients,
                    i + 1,
                    v,
                    i < c.warmup_windows
                );
            }
        }
    }
    std::fs::write(dir.join("samples.csv"), csv)?;
    files.push("samples.csv".into());
    let charts = charts(r);
    let mut notes = Vec::new();
    let renderer = (!charts.is_empty()).then(sqlfleet_chart::png::Renderer::default);
    if let Some(w) = renderer.as_ref().and_then(|r| r.font_warning.clone()) {
        notes.push(w);
    }
    for (stem, _, svg) in &charts {
        let f = format!("{stem}.svg");
        std::fs::write(dir.join(&f), svg)?;
        files.push(f);
        if let Some(rd) = &renderer {
            // Twice the SVG's size: sharp in documents and slides.
            let png = rd.png(svg, 2.0).map_err(std::io::Error::other)?;
            let f = format!("{stem}.png");
            std::fs::write(dir.join(&f), png)?;
            files.push(f);
        }
    }
    std::fs::write(dir.join("report.html"), html(r, &charts))?;
    files.push("report.html".into());
    Ok(Written { files, notes })
}

/// One line per relay or proxy measured against the direct target: how
/// its queries/s compare at each swept value, e.g. "via 127.0.0.1:3310,
/// 8 clients: +14% qps at q/conn=1, -3% at 30". Failed cells are named,
/// not compared.
pub fn verdicts(r: &Results) -> Vec<String> {
    let direct: BTreeMap<(usize, u32), &PoolCell> = r
        .pool
        .iter()
        .filter(|c| c.target == "direct")
        .map(|c| ((c.clients, c.queries_per_connection), c))
        .collect();
    let mut by: BTreeMap<(String, usize), Vec<String>> = BTreeMap::new();
    for c in r.pool.iter().filter(|c| c.target != "direct") {
        let Some(d) = direct.get(&(c.clients, c.queries_per_connection)) else {
            continue;
        };
        let q = c.queries_per_connection;
        let part = if c.failed || d.failed {
            format!("failed at q/conn={q}")
        } else if d.qps.mean > 0.0 {
            format!(
                "{:+.0}% qps at q/conn={q}",
                100.0 * (c.qps.mean - d.qps.mean) / d.qps.mean
            )
        } else {
            continue;
        };
        by.entry((c.target.clone(), c.clients))
            .or_default()
            .push(part);
    }
    by.into_iter()
        .map(|((t, clients), parts)| {
            // "at q/conn=" once: "+14% qps at q/conn=1, -3% at 30".
            let mut text = Vec::new();
            for (i, p) in parts.iter().enumerate() {
                text.push(if i == 0 {
                    p.clone()
                } else {
                    p.replace(" qps at q/conn=", " at ")
                });
            }
            format!(
                "{t}, {}: {} (direct = 0%)",
                sqlfleet_conn::text::count(clients as u64, "client"),
                text.join(", ")
            )
        })
        .collect()
}

/// What the run leaves on the target and how to remove it.
pub fn leftover_note() -> String {
    format!(
        "the tables stay in the `{}` database on the target for the next run; drop them with DROP DATABASE {} (or run again with --cleanup)",
        crate::server::DB,
        crate::server::DB
    )
}

/// An insert cell's loss check for the page: `0`, or what is lost and
/// what is there twice, named.
fn lost_text(c: &crate::insert::InsertCell) -> String {
    let mut parts = Vec::new();
    if c.lost > 0 {
        parts.push(format!(
            "{} lost ({})",
            c.lost,
            esc(&c.lost_rows.join(", "))
        ));
    }
    if c.duplicated > 0 {
        parts.push(format!(
            "{} duplicated ({})",
            c.duplicated,
            esc(&c.duplicated_rows.join(", "))
        ));
    }
    if parts.is_empty() {
        "0".into()
    } else {
        parts.join("; ")
    }
}

/// `Com_select=12 Connections=3`: status deltas in one cell.
fn deltas_text(d: &BTreeMap<String, i64>) -> String {
    d.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

pub use sqlfleet_conn::text::utc_date;

/// Why these numbers may not be production figures: relaxed durability
/// on the server, a saturated host CPU (the clients and the server share
/// it), failed cells.
pub fn warnings(r: &Results) -> Vec<String> {
    let mut w = Vec::new();
    let server: BTreeMap<&str, String> = r
        .server
        .iter()
        .map(|(k, v)| (k.as_str(), text(v)))
        .collect();
    let get = |k: &str| server.get(k).map(String::as_str);
    let mut relaxed = Vec::new();
    if let Some(v) = get("innodb_flush_log_at_trx_commit").filter(|v| *v != "1") {
        relaxed.push(format!("innodb_flush_log_at_trx_commit={v}"));
    }
    if get("log_bin") == Some("ON") {
        if let Some(v) = get("sync_binlog").filter(|v| *v != "1") {
            relaxed.push(format!("sync_binlog={v}"));
        }
    }
    if !relaxed.is_empty() {
        w.push(format!(
            "The server runs with relaxed durability ({}): commits are not flushed to disk each time, so these rates are higher than a durable server's. Do not quote them as production figures.",
            relaxed.join(", ")
        ));
    }
    let cpu = |g: &crate::server::Gauges| mean(&g.host_cpu_percent);
    let busiest = r
        .insert
        .iter()
        .map(|c| cpu(&c.gauges))
        .chain(r.pool.iter().map(|c| cpu(&c.gauges)))
        .fold(0.0f64, f64::max);
    if busiest >= 90.0 {
        w.push(format!(
            "The host CPU was saturated ({busiest:.0}% in the busiest cell): the clients and the server competed for it, so higher concurrency measures the host, not the server."
        ));
    }
    let failed = r.pool.iter().filter(|c| c.failed).count();
    if failed > 0 {
        w.push(format!(
            "{failed} cell{} failed (more errors than allowed); {} not charted.",
            if failed == 1 { "" } else { "s" },
            if failed == 1 { "it is" } else { "they are" }
        ));
    }
    w
}

/// One self-contained page: parameters, server, tables, charts inline.
pub fn html(r: &Results, charts: &[(String, String, String)]) -> String {
    let mut h = String::from("<!doctype html><html><head><meta charset=\"utf-8\"><title>sqlfleet bench</title><style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}.warn{color:#b00}</style></head><body>");
    let _ = write!(
        h,
        "<h1>sqlfleet {}</h1><p>started {}</p>",
        esc(&r.command),
        esc(&r.started)
    );
    for v in verdicts(r) {
        let _ = write!(h, "<p class=\"verdict\"><b>{}</b></p>", esc(&v));
    }
    for w in warnings(r) {
        let _ = write!(h, "<p class=\"warn\"><b>Warning:</b> {}</p>", esc(&w));
    }
    h.push_str("<h2>Parameters</h2><table>");
    for (k, v) in &r.parameters {
        let _ = write!(h, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(&text(v)));
    }
    h.push_str("</table><h2>Server</h2><table>");
    for (k, v) in &r.server {
        let _ = write!(h, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(&text(v)));
    }
    h.push_str("</table><h2>Results</h2>");
    if !r.insert.is_empty() {
        h.push_str("<table><tr><th>threads</th><th>table size</th><th>index</th><th>connect</th><th>inserts/s mean ± sd (n)</th><th>stalls</th><th>acknowledged</th><th>lost / duplicated</th><th>errors</th><th>Threads_running avg</th><th>host CPU %</th><th>status deltas</th></tr>");
        for c in &r.insert {
            let errs: Vec<String> = c.errors.iter().map(|(k, v)| format!("{v}× {k}")).collect();
            let deltas = deltas_text(&c.status_deltas);
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td>{:.1}</td><td>{:.0}</td><td>{}</td></tr>",
                c.processes,
                c.table_size,
                if c.index { "on" } else { "off" },
                c.connect,
                c.rate.show(),
                if c.too_short { " <span class=\"warn\">(too short to be meaningful)</span>" } else { "" },
                c.stalls,
                c.acknowledged,
                if c.lost + c.duplicated > 0 { "warn" } else { "" },
                lost_text(c),
                esc(&errs.join("; ")),
                mean(&c.gauges.threads_running),
                mean(&c.gauges.host_cpu_percent),
                esc(&deltas),
            );
        }
        h.push_str("</table>");
    }
    if !r.pool.is_empty() {
        h.push_str("<table><tr><th>target</th><th>q/conn</th><th>clients</th><th>queries/s mean ± sd (n)</th><th>connect p50/p99 µs</th><th>query p50/p99 µs</th><th>connections</th><th>errors</th><th>host CPU %</th></tr>");
        for c in &r.pool {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}{}</td><td>{}/{}</td><td>{}/{}</td><td>{}</td><td>{}</td><td>{:.0}</td></tr>",
                esc(&c.target),
                c.queries_per_connection,
                c.clients,
                c.qps.show(),
                if c.failed {
                    format!(
                        " <span class=\"warn\">FAILED: {}</span>",
                        esc(c.first_error.as_deref().unwrap_or("too many errors"))
                    )
                } else if c.too_short {
                    " <span class=\"warn\">(too short)</span>".to_string()
                } else {
                    String::new()
                },
                c.connect.p50_us,
                c.connect.p99_us,
                c.query.p50_us,
                c.query.p99_us,
                c.connections,
                c.errors,
                mean(&c.gauges.host_cpu_percent),
            );
        }
        h.push_str("</table><h3>Latency percentiles (µs, HDR histograms) and server status deltas</h3><table><tr><th>target</th><th>q/conn</th><th>clients</th><th>connects</th><th>connect p50 / p90 / p99 / p99.9 / max</th><th>queries</th><th>query p50 / p90 / p99 / p99.9 / max</th><th>status deltas</th></tr>");
        for c in &r.pool {
            let p = |l: &crate::stats::Latency| {
                format!(
                    "{} / {} / {} / {} / {}",
                    l.p50_us, l.p90_us, l.p99_us, l.p999_us, l.max_us
                )
            };
            let deltas = deltas_text(&c.status_deltas);
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&c.target),
                c.queries_per_connection,
                c.clients,
                c.connect.count,
                p(&c.connect),
                c.query.count,
                p(&c.query),
                esc(&deltas),
            );
        }
        h.push_str("</table>");
    }
    h.push_str("<p>Warm-up excluded from means: the first second (insert) or window (pool) of each cell. Errors are counted, never dropped.</p>");
    for (_, title, svg) in charts {
        let _ = write!(h, "<h2>{}</h2>{svg}", esc(title));
    }
    h.push_str("</body></html>\n");
    h
}

/// The over-time chart's title for `shown` of `cells` cells.
fn chart_title(shown: usize, cells: usize) -> String {
    if shown < cells {
        format!("Inserts committed each second (the first {shown} of {cells} cells)")
    } else {
        "Inserts committed each second (every cell)".to_string()
    }
}

/// Why two runs do not compare.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompareError {
    #[error("A is a '{a}' run and B a '{b}' run: only runs of the same benchmark compare")]
    OtherBenchmark { a: String, b: String },
    #[error("A and B have no cell in common (different parameters): nothing to compare")]
    NothingInCommon,
}

/// Compares two runs of the same benchmark cell by cell: the text, and
/// whether anything regressed (or failed in B). A cell regressed when
/// Welch's t test says B is lower beyond the noise ([`Verdict`]) and, with
/// `fail_pct`, by at least that many percent; with one sample on a side
/// the noise is unknown and it is said so — then only a drop of at least
/// `fail_pct` (when given) counts. Runs of different benchmarks, or with
/// no cell in common, are refused.
pub fn compare(
    a: &Results,
    b: &Results,
    fail_pct: Option<f64>,
) -> Result<(String, bool), CompareError> {
    if a.command != b.command {
        return Err(CompareError::OtherBenchmark {
            a: a.command.clone(),
            b: b.command.clone(),
        });
    }
    let failed_in = |r: &Results| -> std::collections::BTreeSet<String> {
        r.pool
            .iter()
            .filter(|c| c.failed)
            .map(|c| c.key())
            .collect()
    };
    let (fa, fb) = (failed_in(a), failed_in(b));
    let bmap: BTreeMap<String, Spread> = b.throughputs().into_iter().collect();
    if !a.throughputs().iter().any(|(k, _)| bmap.contains_key(k)) {
        return Err(CompareError::NothingInCommon);
    }
    let mut s = String::new();
    let mut regressed = false;
    for (k, sa) in a.throughputs() {
        let Some(sb) = bmap.get(&k) else {
            let _ = writeln!(s, "{k}: only in A");
            continue;
        };
        if fb.contains(&k) {
            regressed = true;
            let _ = writeln!(s, "{k}: FAILED in B (too many errors)");
            continue;
        }
        if fa.contains(&k) {
            let _ = writeln!(s, "{k}: failed in A (too many errors): not compared");
            continue;
        }
        let change = if sa.mean > 0.0 {
            100.0 * (sb.mean - sa.mean) / sa.mean
        } else {
            0.0
        };
        let over = |pct: f64| -change >= pct;
        let verdict = match (sa.verdict(sb), fail_pct) {
            (Verdict::Lower, Some(pct)) if !over(pct) => {
                format!("lower beyond the noise, within --fail-on-regression {pct}%")
            }
            (Verdict::Lower, _) => {
                regressed = true;
                "REGRESSION".to_string()
            }
            (Verdict::Higher, _) => "improvement".to_string(),
            (Verdict::Noise, _) => "within noise".to_string(),
            (Verdict::Unknown, Some(pct)) if over(pct) => {
                regressed = true;
                format!(
                    "REGRESSION (a drop of {pct}% or more; one sample each: the noise is unknown)"
                )
            }
            (Verdict::Unknown, _) => {
                "one sample each: cannot tell noise from change (run with more samples)".to_string()
            }
        };
        let _ = writeln!(
            s,
            "{k}: {} -> {} ({change:+.1}%) {verdict}",
            sa.show(),
            sb.show()
        );
    }
    Ok((s, regressed))
}

/// Why a result directory could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{}: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Json {
        path: std::path::PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

/// A result directory's results.json, as `write` left it.
pub fn read(dir: &Path) -> Result<Results, ReadError> {
    let path = dir.join("results.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(source) => return Err(ReadError::Io { path, source }),
    };
    serde_json::from_str(&text).map_err(|source| ReadError::Json { path, source })
}

#[cfg(test)]
mod title_tests {
    #[test]
    fn the_title_counts_the_cells_it_shows() {
        assert_eq!(
            super::chart_title(4, 4),
            "Inserts committed each second (every cell)"
        );
        assert_eq!(
            super::chart_title(8, 12),
            "Inserts committed each second (the first 8 of 12 cells)"
        );
    }
}

#[cfg(test)]
mod date_tests {
    #[test]
    fn civil_dates() {
        assert_eq!(super::utc_date(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(super::utc_date(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(super::utc_date(1_795_418_401), "2026-11-23 07:20:01 UTC");
    }
}
