#!/usr/bin/env bash
# Monitoring cost: sqlfleet watch polling N endpoints every second, against
# mysqld_exporter (Debian's prometheus-mysqld-exporter, one process per
# target, as it is deployed) scraped every second for K targets.
#
# Endpoints: N loopback addresses of one sandbox server in a private
# network namespace (the set-up of bench/query.sh). Reports CPU time per
# server-check (µs, user+system of the monitor's processes) and peak RSS.
# Needs root (ip netns). No timing is asserted anywhere; this prints figures
# for docs/benchmarks.md.
#
# Usage: sudo [STATEMENTS=off] [FLEET_OPTIONS=performance_schema=ON] [PAGE=0] bench/watch.sh [ENDPOINTS] [SECONDS] [EXPORTER_TARGETS]
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-1000}"
DURATION="${2:-60}"
K="${3:-50}"
bash scripts/deps.sh iproute2 time prometheus-mysqld-exporter curl
source scripts/env.sh
cargo build --release --quiet
SQLFLEET="$SQLFLEET_TARGET/release/sqlfleet"
EXPORTER=/usr/bin/prometheus-mysqld-exporter
export SQLFLEET_HOME="${SQLFLEET_HOME:-$HOME/.local/share/sqlfleet}"
NAME=bench-watch
source bench/netns_fleet.sh
netns_fleet_up
fleet_hosts "$N" > "$WORK/hosts.txt"
ticks=$(getconf CLK_TCK)
# SPID (from netns_fleet_up): the server's own process, what each
# monitor's checks cost it.
# cpu_of PID...: user+system seconds of these processes (from /proc/PID/stat).
cpu_of() {
  local total=0
  for p in "$@"; do
    read -r ut st < <(awk '{print $14, $15}' "/proc/$p/stat")
    total=$((total + ut + st))
  done
  python3 -c "print($total / $ticks)"
}
rss_of() { # peak RSS (KiB), summed over processes
  local total=0
  for p in "$@"; do total=$((total + $(awk '/VmHWM/ {print $2}' "/proc/$p/status"))); done
  echo "$total"
}

# STATEMENTS=off: without the statement reads (the yardstick for what
# they cost); FLEET_OPTIONS=performance_schema=ON: its digest method.
echo "statements = ${STATEMENTS:-on}" | sed 's/on$/true/; s/off$/false/' > "$WORK/watch.toml"
echo "== sqlfleet watch: $N endpoints, interval 1 s, ${DURATION} s, statements ${STATEMENTS:-on}, server options: ${FLEET_OPTIONS:-none}"
"${IN[@]}" "$SQLFLEET" watch --defaults-file="$CNF" --hosts-file "$WORK/hosts.txt" \
  --config "$WORK/watch.toml" --ui none --json --interval 1 > "$WORK/watch.out" 2>"$WORK/watch.err" &
WPID=$!
PIDS+=("$WPID")
sleep 5   # logins done; measure the steady state
c0=$(cpu_of "$WPID"); s0=$(cpu_of "$SPID")
sleep "$DURATION"
c1=$(cpu_of "$WPID"); s1=$(cpu_of "$SPID")
W_RSS=$(rss_of "$WPID")
OKS=$(grep -c '"to":"ok"' "$WORK/watch.out" || true)
# Each server's last state at the end, counted with its reason: a server
# that never turned ok says why.
last_states() {
  python3 - "$1" <<'PY'
import json, sys, collections, re
last = {}
for line in open(sys.argv[1]):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if "to" in e and "server" in e:
        why = re.sub(r"'[^']*:[0-9]+'", "'HOST:PORT'", e.get("reason") or "")
        last[e["server"]] = (e["to"], why)
c = collections.Counter(last.values())
print("last states:", ", ".join(f"{n} {st}" + (f" ({why})" if why else "") for (st, why), n in c.most_common(8)))
PY
}
last_states "$WORK/watch.out"
# The server's own view of the connection storm (who refused what).
"${IN[@]}" mariadb --defaults-file="$CNF" -N -e "SHOW GLOBAL STATUS WHERE Variable_name IN
  ('Threads_connected','Aborted_connects','Connection_errors_accept','Connection_errors_internal',
   'Connection_errors_max_connections','Connection_errors_peer_address','Connection_errors_select',
   'Max_used_connections')" | tr '\t' '=' | tr '\n' ' '; echo
kill "$WPID"
W_US=$(python3 -c "print(f'{($c1 - $c0) * 1e6 / ($N * $DURATION):.1f}')")
W_CORE=$(python3 -c "print(f'{($c1 - $c0) / $DURATION:.3f}')")
W_SRV=$(python3 -c "print(f'{($s1 - $s0) * 1e6 / ($N * $DURATION):.1f}')")
echo "sqlfleet watch: $N servers, 1 s interval: $W_US µs CPU per server-check, $W_CORE cores, peak RSS $(python3 -c "print(f'{$W_RSS / 1024:.1f}')") MiB, $OKS servers reported ok; the server spent $W_SRV µs CPU per check"

if [ "${PAGE:-1}" = 0 ]; then exit 0; fi   # PAGE=0: the monitor's cost only

# The fleet page's draw time is read by a real browser (a test binary that
# drives headless Chromium), built here, run inside the namespace.
PAGE_TEST=$(cd "$(dirname "$0")/.." && cargo test --release -p sqlfleet --test watch_web --no-run --message-format=json 2>/dev/null \
  | python3 -c "import sys, json; print([m['executable'] for m in map(json.loads, sys.stdin) if m.get('executable') and 'watch_web' in m['executable']][0])")
echo "== sqlfleet watch with its web page and history: $N endpoints, interval 1 s, ${DURATION} s"
"${IN[@]}" "$SQLFLEET" watch --defaults-file="$CNF" --hosts-file "$WORK/hosts.txt" \
  --ui none --json --interval 1 --listen 127.0.0.1:18080 --history "$WORK/history.db" \
  > "$WORK/watch-web.out" 2>"$WORK/watch-web.err" &
WPID=$!
PIDS+=("$WPID")
sleep 5
c0=$(cpu_of "$WPID")
sleep "$DURATION"
c1=$(cpu_of "$WPID")
WW_RSS=$(rss_of "$WPID")
# The states at the end of the measured window (before the browser runs:
# on 2 cores a browser drawing 1,000 rows starves the server).
head -n "$(wc -l < "$WORK/watch-web.out")" "$WORK/watch-web.out" > "$WORK/watch-web.window"
echo -n "at the end of the window: "; last_states "$WORK/watch-web.window"
WW_US=$(python3 -c "print(f'{($c1 - $c0) * 1e6 / ($N * $DURATION):.1f}')")
# The live stream's size per update, and the fleet page drawn by a real browser.
SSE_BYTES=$("${IN[@]}" curl -s --max-time 3 http://127.0.0.1:18080/api/fleet | wc -c)
PAGE=$("${IN[@]}" env WATCH_PAGE=http://127.0.0.1:18080/ "$PAGE_TEST" --ignored --exact fleet_page_draw_time --nocapture 2>/dev/null | grep '^PAGE' || echo "PAGE (the browser run failed)")
HIST=$(du -k "$WORK/history.db" | cut -f1)
echo -n "after the browser's visit: "; last_states "$WORK/watch-web.out"
kill "$WPID"
echo "sqlfleet watch --listen --history: $WW_US µs CPU per server-check, peak RSS $(python3 -c "print(f'{$WW_RSS / 1024:.1f}')") MiB, history $HIST KiB after ${DURATION} s, one fleet update $SSE_BYTES bytes, page: $PAGE"
if [ "$K" -eq 0 ]; then exit 0; fi

echo "== mysqld_exporter: $K targets (one process each), scraped every 1 s, ${DURATION} s"
EPIDS=()
for i in $(seq 1 "$K"); do
  host=$(sed -n "${i}p" "$WORK/hosts.txt")
  "${IN[@]}" env DATA_SOURCE_NAME="root:$PW@tcp($host)/" "$EXPORTER" \
    --web.listen-address="127.0.0.1:$((19100 + i))" > /dev/null 2>&1 &
  EPIDS+=($!)
  PIDS+=($!)
done
sleep 2
# Waits for its own curls only (a bare `wait` would wait for the exporters).
scrape() {
  local cpids=()
  for i in $(seq 1 "$K"); do
    "${IN[@]}" curl -s --max-time 5 -o /dev/null "http://127.0.0.1:$((19100 + i))/metrics" &
    cpids+=($!)
  done
  wait "${cpids[@]}"
}
scrape; sleep 3
e0=$(cpu_of "${EPIDS[@]}"); s0=$(cpu_of "$SPID")
end=$((SECONDS + DURATION))
ROUNDS=0
while [ "$SECONDS" -lt "$end" ]; do
  t=$SECONDS; scrape; ROUNDS=$((ROUNDS + 1))
  while [ "$SECONDS" -eq "$t" ]; do sleep 0.05; done
done
e1=$(cpu_of "${EPIDS[@]}"); s1=$(cpu_of "$SPID")
E_RSS=$(rss_of "${EPIDS[@]}")
# Per scrape actually made (a scrape slower than a second makes fewer).
E_US=$(python3 -c "print(f'{($e1 - $e0) * 1e6 / ($K * $ROUNDS):.1f}')")
E_SRV=$(python3 -c "print(f'{($s1 - $s0) * 1e6 / ($K * $ROUNDS):.1f}')")

echo
echo "| monitor | servers | interval | CPU per server-check (µs) | cores used | peak RSS (MiB) | server CPU per check (µs) |"
echo "|---|---:|---:|---:|---:|---:|---:|"
echo "| sqlfleet watch (one process, kept connections) | $N | 1 s | $W_US | $W_CORE | $(python3 -c "print(f'{$W_RSS / 1024:.1f}')") | $W_SRV |"
echo "| mysqld_exporter (one process per target; curl not counted; $ROUNDS scrape rounds in ${DURATION} s) | $K | 1 s | $E_US | $(python3 -c "print(f'{($e1 - $e0) / $DURATION:.3f}')") | $(python3 -c "print(f'{$E_RSS / 1024:.1f}')") | $E_SRV |"
echo
echo "state lines 'to ok' from sqlfleet watch: $OKS of $N servers"
