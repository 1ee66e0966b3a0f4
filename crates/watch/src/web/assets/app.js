// sqlfleet watch pages: the live fleet table, a server's page, incidents.
// Plain DOM code, no framework; every value goes in as text, never HTML.
"use strict";

const RANK = { down: 0, stalled: 1, denied: 2, degraded: 3, unknown: 4, ok: 5 };
const $ = (sel) => document.querySelector(sel);

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}
function num(v, digits) {
  if (v === null || v === undefined) return "";
  return Number(v).toFixed(digits === undefined ? 0 : digits);
}
function pct(v) { return v === null || v === undefined ? "" : num(v) + "%"; }
// Times come as ISO 8601 UTC strings and are shown the same way, to the second.
function when(t) {
  if (!t) return "";
  const d = typeof t === "number" ? new Date(t * 1000) : new Date(t);
  return isNaN(d) ? String(t) : d.toISOString().replace(/\.\d+Z$/, "Z");
}
function setText(td, text) { if (td.textContent !== text) td.textContent = text; }

// ---- fleet page -----------------------------------------------------------
const rows = new Map();
let lastOrder = "";
let latest = null;

// The fleet table's columns: index 4 holds the sparkline, drawn apart.
const TREND = 4, WHY = 14;
function cellsOf(s) {
  const conns = s.connected === null || s.connected === undefined ? "" :
    num(s.connected) + (s.max_connections ? " / " + s.max_connections : "");
  return [s.name, s.state, num(s.qps), num(s.running), null, conns,
          s.slow === null || s.slow === undefined ? "" : num(s.slow, 1),
          s.bp_hit === null || s.bp_hit === undefined ? "" : num(s.bp_hit, 1) + "%",
          s.replication || "",
          s.lag === null || s.lag === undefined ? "" : num(s.lag) + "s",
          pct(s.cpu), pct(s.mem), pct(s.disk), s.version || "", s.reason || ""];
}
const NUMERIC = new Set([2, 3, 5, 6, 7, 9, 10, 11, 12]);

// A sparkline of the last ten minutes: qps and threads running, each
// scaled to its own highest value, starting at the first bucket with a
// check (gaps where the server was not answering).
const SVGNS = "http://www.w3.org/2000/svg";
function sparkline(t) {
  const W = 120, H = 24;
  const svg = document.createElementNS(SVGNS, "svg");
  svg.setAttribute("width", W); svg.setAttribute("height", H);
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  svg.setAttribute("class", "spark");
  if (!t) return svg;
  const n = t.qps.length;
  // From the first bucket with a check to now, across the whole width.
  let first = t.qps.findIndex((v, i) => v !== null || t.running[i] !== null);
  if (first < 0) return svg;
  const span = Math.max(1, n - 1 - first);
  const title = [];
  [["qps", "#1565c0"], ["running", "#ef6c00"]].forEach(([k, color]) => {
    const vals = t[k];
    const max = Math.max(0, ...vals.filter((v) => v !== null));
    title.push(k + " max " + num(max, max < 10 ? 1 : 0));
    let d = "", pen = false;
    vals.forEach((v, i) => {
      if (v === null || i < first) { pen = false; return; }
      const x = 2 + (i - first) / span * (W - 4);
      // Headroom above the highest value: a steady line sits below the top.
      const y = H - 2 - (max > 0 ? v / (max * 1.15) : 0) * (H - 4);
      // A lone point is a short dash, so it shows.
      d += (pen ? "L" : "M") + x.toFixed(1) + " " + y.toFixed(1) + (pen ? "" : "h0.01");
      pen = true;
    });
    const p = document.createElementNS(SVGNS, "path");
    p.setAttribute("d", d); p.setAttribute("fill", "none");
    p.setAttribute("stroke", color); p.setAttribute("stroke-width", "1.5");
    p.setAttribute("stroke-linecap", "round");
    p.setAttribute("data-series", k);
    svg.appendChild(p);
  });
  const tt = document.createElementNS(SVGNS, "title");
  tt.textContent = "last 10 minutes: " + title.join(", ");
  svg.appendChild(tt);
  return svg;
}
let trends = {};
async function loadTrends() {
  try {
    const r = await fetch("/api/trends");
    if (!r.ok) return;
    trends = (await r.json()).servers || {};
    for (const [name, tr] of rows) {
      if (!tr.dataset.server) continue;
      tr.children[TREND].replaceChildren(sparkline(trends[name]));
    }
  } catch (e) { /* the next round tries again */ }
}

function rowFor(s) {
  let tr = rows.get(s.name);
  if (!tr) {
    tr = el("tr", { "data-server": s.name });
    cellsOf(s).forEach((_, i) => {
      const td = el("td", i === WHY ? { class: "why" } : NUMERIC.has(i) ? { class: "num" } :
        i === TREND ? { class: "trend" } : {});
      if (i === 0) {
        const a = el("a", { href: "/server?name=" + encodeURIComponent(s.name) });
        td.appendChild(a);
      }
      if (i === TREND) td.appendChild(sparkline(trends[s.name]));
      tr.appendChild(td);
    });
    rows.set(s.name, tr);
  }
  const c = cellsOf(s);
  const tds = tr.children;
  setText(tds[0].firstChild, c[0]);
  for (let i = 1; i < c.length; i++) if (i !== TREND) setText(tds[i], c[i]);
  tds[1].className = "state " + s.state;
  if (tr.dataset.state !== s.state) tr.dataset.state = s.state;
  tr.dataset.search = (s.name + " " + s.state + " " + (s.reason || "") + " " +
    Object.entries(s.tags || {}).map(([k, v]) => k + "=" + v).join(" ")).toLowerCase();
  return tr;
}

function renderFleet(data) {
  const t0 = performance.now();
  latest = data;
  const servers = data.servers || [];
  const group = $("#group").value;
  const filter = $("#filter").value.trim().toLowerCase();
  // Tag keys for grouping.
  const keys = new Set();
  servers.forEach((s) => Object.keys(s.tags || {}).forEach((k) => keys.add(k)));
  const sel = $("#group");
  const have = new Set([...sel.options].map((o) => o.value));
  [...keys].sort().forEach((k) => { if (!have.has(k)) sel.appendChild(el("option", { value: k }, k)); });

  const sorted = servers.slice().sort((a, b) => {
    if (group) {
      const ga = (a.tags || {})[group] || "", gb = (b.tags || {})[group] || "";
      if (ga !== gb) return ga < gb ? -1 : 1;
    }
    return (RANK[a.state] - RANK[b.state]) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  });
  const tbody = $("#fleet tbody");
  const order = [];
  let lastGroup = null;
  const wanted = [];
  for (const s of sorted) {
    const tr = rowFor(s);
    tr.hidden = filter !== "" && !tr.dataset.search.includes(filter);
    if (group) {
      const g = (s.tags || {})[group] || "(none)";
      if (g !== lastGroup) {
        const gid = "group:" + g;
        let gr = rows.get(gid);
        if (!gr) {
          gr = el("tr", { class: "group" });
          gr.appendChild(el("td", { colspan: String(WHY + 1) }));
          rows.set(gid, gr);
        }
        const n = sorted.filter((x) => ((x.tags || {})[group] || "(none)") === g);
        const bad = n.filter((x) => x.state !== "ok").length;
        setText(gr.firstChild, group + "=" + g + " — " + n.length + " servers" + (bad ? ", " + bad + " not ok" : ""));
        wanted.push(gr);
        order.push(gid);
        lastGroup = g;
      }
    }
    wanted.push(tr);
    order.push(s.name);
  }
  // Move rows only when the order changed: no flicker on a quiet fleet.
  const key = order.join("\n");
  if (key !== lastOrder) {
    tbody.replaceChildren(...wanted);
    lastOrder = key;
  }
  const counts = {};
  servers.forEach((s) => { counts[s.state] = (counts[s.state] || 0) + 1; });
  const sum = $("#summary");
  sum.replaceChildren(...["down", "stalled", "denied", "degraded", "ok", "unknown"]
    .filter((k) => counts[k])
    .map((k) => el("span", { class: "state " + k, "data-count": k }, counts[k] + " " + k)));
  // How long the last update took to draw, for anyone measuring a big fleet.
  document.body.dataset.renderMs = (performance.now() - t0).toFixed(1);
  document.body.dataset.rows = String(servers.length);
}

function fleetPage() {
  const live = $("#live");
  const es = new EventSource("/api/events");
  es.addEventListener("fleet", (e) => {
    live.textContent = "live";
    live.className = "live on";
    renderFleet(JSON.parse(e.data));
  });
  es.onerror = () => { live.textContent = "reconnecting…"; live.className = "live"; };
  loadTrends();
  setTimeout(loadTrends, 2000);
  setInterval(loadTrends, 10000);
  loadDigests("", "time");
  setInterval(() => loadDigests("", "time"), 5000);
  const again = () => { if (latest) { lastOrder = ""; renderFleet(latest); } };
  $("#filter").addEventListener("input", again);
  $("#group").addEventListener("change", again);
}

// ---- server page ----------------------------------------------------------
const CHARTS = ["qps", "running", "connected", "slow", "bp_hit", "rows", "lag", "cpu", "mem", "disk"];

function fillTable(sel, items, cells, pick) {
  const tbody = $(sel + " tbody");
  tbody.replaceChildren(...items.map((it) => {
    const tr = el("tr");
    cells(it).forEach((c) => tr.appendChild(el("td", { class: "wrap" }, c)));
    if (pick) tr.addEventListener("click", () => pick(it));
    return tr;
  }));
}

// One SVG chart per metric into `box`, each from url(metric); a chart the
// server cannot draw says why in its place.
async function drawCharts(box, metrics, attr, url) {
  const figs = await Promise.all(metrics.map(async (m) => {
    const fig = el("figure", { [attr]: m });
    try {
      const r = await fetch(url(m));
      if (!r.ok) throw new Error((await r.json()).error || r.statusText);
      const doc = new DOMParser().parseFromString(await r.text(), "image/svg+xml");
      fig.appendChild(document.importNode(doc.documentElement, true));
    } catch (err) {
      fig.appendChild(el("div", { class: "empty" }, m + ": " + err.message));
    }
    return fig;
  }));
  box.replaceChildren(...figs);
}

// The server page's range, and the statement picked in its top.
let range = "hour";
let pickedDigest = null;

function loadCharts(name) {
  return drawCharts($("#charts"), CHARTS, "data-metric", (m) =>
    "/api/chart.svg?server=" + encodeURIComponent(name) + "&metric=" + m + "&range=" + range);
}

// One statement's charts from the history: statement seconds per second,
// calls/s and latency (where calls are counted).
function loadDigestCharts(name) {
  const box = $("#digest-charts");
  if (!box || !pickedDigest) return;
  const d = pickedDigest;
  return drawCharts(box, ["time", "calls", "latency"], "data-digest-metric", (m) =>
    "/api/digest_chart.svg?server=" + encodeURIComponent(name) + "&schema=" + encodeURIComponent(d.schema) +
    "&digest=" + encodeURIComponent(d.digest) + "&metric=" + m + "&range=" + range);
}

// ---- top statements (a server's, or the fleet's) ---------------------------------
const METHOD = { performance_schema: "performance_schema", processlist: "processlist sampling: busy time seen, no call counts" };

async function loadDigests(name, sort) {
  const q = (name ? "server=" + encodeURIComponent(name) + "&" : "") + "sort=" + sort;
  const r = await fetch("/api/digests?" + q);
  const d = await r.json();
  if (!r.ok) { $("#digests-how").textContent = d.error; return; }
  const how = name
    ? (d.method ? METHOD[d.method] + ", last " + Math.round(d.seconds) + " s" : "no figures yet")
    : d.servers + " servers (" + d.methods.performance_schema + " performance_schema, " + d.methods.processlist + " processlist sampling)";
  $("#digests-how").textContent = "— " + how;
  const pct = (x) => (x * 100).toFixed(0) + "%";
  fillTable("#digests", d.top || [], (t) => name
    ? [pct(t.share), num(t.seconds, 2), num(t.calls_per_s, 1), t.avg_ms === null ? "" : num(t.avg_ms, 2),
       String(t.rows_examined), String(t.errors), String(t.no_index), t.schema, t.digest]
    : [pct(t.share), num(t.seconds, 2), num(t.calls_per_s, 1), t.avg_ms === null ? "" : num(t.avg_ms, 2),
       String(t.servers), String(t.rows_examined), String(t.errors), t.schema, t.digest],
    name ? (t) => { pickedDigest = t; loadDigestCharts(name); } : null);
}

async function loadServer(name) {
  const r = await fetch("/api/server?server=" + encodeURIComponent(name));
  const d = await r.json();
  if (!r.ok) { $("#why").textContent = d.error; return; }
  const s = d.server;
  $("#state").textContent = s.state;
  $("#state").className = "badge " + s.state;
  document.body.dataset.state = s.state;
  $("#why").textContent = [s.reason, s.version, d.hostname ? "host " + d.hostname : "",
    d.connect_ms ? "login " + num(d.connect_ms, 1) + " ms" : "", d.host_error || ""].filter(Boolean).join(" · ");
  fillTable("#processlist", d.processlist || [], (p) => [String(p.id), p.user, p.db, String(p.seconds), p.command, p.info]);
  fillTable("#channels", d.channels || [], (c) => [c.name || "(default)", c.source, c.io_running, c.sql_running,
    c.lag === null ? "" : c.lag + "s", c.gtid, c.last_error]);
  const inc = d.incidents || (d.open_incidents || []).map((i) => ({ rule: i.rule, opened: i.since, detail: i.detail }));
  fillTable("#incidents", inc, (i) => [i.rule, when(i.opened), i.resolved ? when(i.resolved) : "open",
    i.detail + (i.end_note ? " (" + i.end_note + ")" : ""), i.notified || ""]);
}

function serverPage() {
  const name = new URLSearchParams(location.search).get("name") || "";
  $("#title").textContent = name;
  document.title = name + " — sqlfleet watch";
  document.querySelectorAll("button[data-range]").forEach((b) => b.addEventListener("click", () => {
    range = b.dataset.range;
    document.querySelectorAll("button[data-range]").forEach((x) => x.classList.toggle("on", x === b));
    loadCharts(name);
    loadDigestCharts(name);
  }));
  let sort = "time";
  document.querySelectorAll("button[data-sort]").forEach((b) => b.addEventListener("click", () => {
    sort = b.dataset.sort;
    document.querySelectorAll("button[data-sort]").forEach((x) => x.classList.toggle("on", x === b));
    loadDigests(name, sort);
  }));
  loadServer(name);
  loadDigests(name, sort);
  loadCharts(name);
  setInterval(() => loadServer(name), 2000);
  setInterval(() => loadDigests(name, sort), 2000);
  setInterval(() => loadCharts(name), 10000);
  setInterval(() => loadDigestCharts(name), 10000);
}

// ---- incidents page ---------------------------------------------------------
async function loadIncidents() {
  const r = await fetch("/api/incidents");
  const d = await r.json();
  const list = d.incidents || [];
  const open = list.filter((i) => !i.resolved).length;
  $("#summary").textContent = open + " open, " + (list.length - open) + " resolved" + (d.history ? "" : " (no history kept)");
  fillTable("#incidents", list, (i) => [i.server, i.rule, when(i.opened), i.resolved ? when(i.resolved) : "open",
    i.detail + (i.end_note ? " (" + i.end_note + ")" : ""), i.notified || ""]);
}

function incidentsPage() {
  loadIncidents();
  setInterval(loadIncidents, 3000);
}

const PAGES = { fleet: fleetPage, server: serverPage, incidents: incidentsPage };
(PAGES[document.body.dataset.page] || (() => {}))();
