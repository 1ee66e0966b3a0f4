#!/usr/bin/env bash
# Why one event loop per core: sysbench oltp_point_select (persistent
# connections) through haproxy with its default threads and with
# `nbthread 1`, and through the relay with `--threads 1` and its default
# (one loop per core), for several client counts: queries/s, the host's
# idle CPU (/proc/stat) and the proxy's own CPU per query (/proc/PID/stat).
#
# Usage: bench/relay_threads.sh [SECONDS] [CLIENTS...]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-4}"
shift || true
CLIENTS=("$@")
[ "${#CLIENTS[@]}" -gt 0 ] || CLIENTS=(1 2 4 16 64)
NAME=bench-relay-threads
bash scripts/deps.sh haproxy
source bench/relay_common.sh
H2=$(free_port); start_haproxy "$H2"; H2PID=${PIDS[-1]}
H1=$(free_port); start_haproxy "$H1" 1; H1PID=${PIDS[-1]}
R1=$(free_port); start_relay "$R1" --backend "127.0.0.1:$PORT" --threads 1; R1PID=${PIDS[-1]}
RN=$(free_port); start_relay "$RN" --backend "127.0.0.1:$PORT"; RNPID=${PIDS[-1]}
mariadb --defaults-file="$CNF" -e "DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest"
sysbench --config-file="$(mk_sb "$PORT")" oltp_point_select --tables=4 --table-size=10000 prepare >/dev/null
cell() {  # PORT PID CLIENTS -> "q/s (idle%, µs/query)"
  local port=$1 pid=$2 c=$3 cpu0 cpu1 stat0 stat1 q
  cpu0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  stat0=$(head -1 /proc/stat)
  q=$(sysbench --config-file="$(mk_sb "$port")" oltp_point_select --tables=4 --table-size=10000 \
    --threads="$c" --time="$SECS" --report-interval=0 run | awk '/queries:/ {print $2; exit}')
  stat1=$(head -1 /proc/stat)
  cpu1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  python3 - "$q" "$SECS" "$((cpu1 - cpu0))" "$(getconf CLK_TCK)" "$stat0" "$stat1" <<'PY'
import sys
q, secs, ticks, hz = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
a = [int(x) for x in sys.argv[5].split()[1:9]]
b = [int(x) for x in sys.argv[6].split()[1:9]]
d = [y - x for x, y in zip(a, b)]
idle = (d[3] + d[4]) / max(sum(d), 1) * 100
print(f"{q / secs:,.0f} ({idle:.0f}% idle, {ticks / hz / max(q, 1) * 1e6:.1f} µs/q)")
PY
}
echo "| clients | haproxy (default threads) | haproxy nbthread 1 | relay --threads 1 | relay (one loop per core) |"
echo "|---:|---:|---:|---:|---:|"
for c in "${CLIENTS[@]}"; do
  echo "| $c | $(cell "$H2" "$H2PID" "$c") | $(cell "$H1" "$H1PID" "$c") | $(cell "$R1" "$R1PID" "$c") | $(cell "$RN" "$RNPID" "$c") |"
done
