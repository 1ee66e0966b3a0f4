#!/usr/bin/env bash
# Where a relayed query's time goes: sysbench oltp_point_select (4 threads,
# persistent connections) direct and through `sqlfleet relay` variants —
# one event loop per core (default), one event loop (--threads 1), and a
# backend on the server's Unix socket — with the host's idle CPU and context switches
# (vmstat), the relay's own CPU time, and its system calls per query
# (strace -c) and kernel/user split (perf, when present) in a last run.
#
# Usage: bench/relay_profile.sh [SECONDS_PER_RUN]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-5}"
NAME=bench-relay
source bench/relay_common.sh
bash scripts/deps.sh strace procps
SOCK=$(awk -F' = ' '/^socket/ {print $2}' "$CNF")
mariadb --defaults-file="$CNF" -e "DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest"
sysbench --config-file="$(mk_sb "$PORT")" oltp_point_select --tables=4 --table-size=100000 prepare >/dev/null

# run LABEL PORT [RELAY_PID]: prints a table row.
run() {
  local label=$1 port=$2 pid=${3:-} cpu0=0 cpu1=0
  [ -n "$pid" ] && cpu0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  vmstat 1 "$SECS" > "$WORK/vmstat" &
  local vm=$!
  local qps
  qps=$(sysbench --config-file="$(mk_sb "$port")" oltp_point_select --tables=4 --table-size=100000 \
    --threads=4 --time="$SECS" --report-interval=0 run | awk '/queries:/ {gsub(/[(]/,"",$3); print $3; exit}')
  wait "$vm" || true
  [ -n "$pid" ] && cpu1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  python3 - "$label" "$qps" "$SECS" "$((cpu1 - cpu0))" "$(getconf CLK_TCK)" "$WORK/vmstat" <<'PY'
import sys
label, qps, secs, ticks, hz, vm = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
rows = [l.split() for l in open(vm) if l.strip() and l.split()[0].isdigit()][1:] or [[0] * 17]
idle = sum(int(r[14]) for r in rows) / len(rows)
cs = sum(int(r[11]) for r in rows) / len(rows)
relay = f"{ticks / hz / secs * 100:.0f}% of a core, {ticks / hz / (qps * secs) * 1e6:.1f} µs/query" if ticks else "-"
print(f"| {label} | {qps:,.0f} | {idle:.0f}% | {cs / qps:.1f} | {relay} |")
PY
}

echo "| target | queries/s | host idle | context switches per query | relay CPU |"
echo "|---|---:|---:|---:|---:|"
run "direct" "$PORT"
R1=$(free_port); start_relay "$R1" --backend "127.0.0.1:$PORT"
run "relay, one event loop per core (default)" "$R1" "${PIDS[-1]}"
R2=$(free_port); start_relay "$R2" --backend "127.0.0.1:$PORT" --threads 1
run "relay, --threads 1" "$R2" "${PIDS[-1]}"
R3=$(free_port); start_relay "$R3" --backend "unix:$SOCK"
run "relay, backend on the Unix socket" "$R3" "${PIDS[-1]}"

echo
echo "== system calls of the relay (default) during $SECS s of the same load"
( sleep 1; timeout "$((SECS - 2))" strace -c -f -p "${PIDS[0]}" -o "$WORK/strace" ) &
ST=$!
sysbench --config-file="$(mk_sb "$R1")" oltp_point_select --tables=4 --table-size=100000 \
  --threads=4 --time="$SECS" --report-interval=0 run | awk '/queries:/ {print "sysbench", $2, "queries (slowed by strace)"}'
wait "$ST" || true
awk '/sendto|recvfrom|epoll_wait|writev|readv|total/' "$WORK/strace"
if command -v perf >/dev/null 2>&1; then
  echo
  echo "== perf: where the relay's CPU goes ($((SECS - 2)) s)"
  ( sleep 1; perf record -q -p "${PIDS[0]}" -o "$WORK/perf.data" -- sleep "$((SECS - 2))" >/dev/null 2>&1 ) &
  PF=$!
  sysbench --config-file="$(mk_sb "$R1")" oltp_point_select --tables=4 --table-size=100000 \
    --threads=4 --time="$SECS" --report-interval=0 run >/dev/null
  wait "$PF" || true
  perf report -i "$WORK/perf.data" --no-children --sort dso 2>/dev/null | awk '/%/ && !/^#/' | head -5
fi
