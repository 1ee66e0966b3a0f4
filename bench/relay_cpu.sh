#!/usr/bin/env bash
# CPU per connection, connect-per-query (q/conn = 1, light queries): where a
# 2-core machine's cycles go when each query opens its own connection,
# directly to the server and through the relay. `bench pool` runs once
# against the server and once against the relay (as its target), and the
# server's and the relay's CPU time (utime + stime from /proc) are read
# around each run and divided by the connections made (the whole run,
# warm-up included, as `bench pool` counts them).
#
# Usage: bench/relay_cpu.sh [CLIENTS] [SAMPLES]
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS="${1:-4}"
SAMPLES="${2:-5}"
NAME=bench-relay-cpu
source bench/relay_common.sh
RP=$(free_port)
start_relay "$RP" --backend "127.0.0.1:$PORT" --pool-max 100
RELAY_PID=${PIDS[-1]}
SERVER_PID=$(pgrep -f "mariadbd.*/sandboxes/$NAME/" | head -1)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
run() {  # $1 label, $2 port
  local s0 r0 s1 r1
  s0=$(ticks "$SERVER_PID"); r0=$(ticks "$RELAY_PID")
  MYSQL_PWD="$(cat "$PWFILE")" "$SQLFLEET" bench pool --no-defaults -h 127.0.0.1 -P "$2" -u root \
    --ssl-mode DISABLED --queries-per-connection 1 --rows 1 --columns 1 \
    --threads "$CLIENTS" --samples "$SAMPLES" --out "$WORK/$1" > "$WORK/$1.txt"
  s1=$(ticks "$SERVER_PID"); r1=$(ticks "$RELAY_PID")
  python3 - "$1" "$WORK/$1/results.json" "$((s1 - s0))" "$((r1 - r0))" "$HZ" <<'PY'
import json, sys
label, path, s, r, hz = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
cell = json.load(open(path))["pool"][0]
n = cell["connections"]
us = lambda t: t / hz / n * 1e6
print(f"| {label} | {cell['qps']['mean']:.0f} | {n} | {us(s):.0f} | {us(r):.0f} | {us(s + r):.0f} |")
PY
}
echo "| target | connections/s | connections | server CPU µs/conn | relay CPU µs/conn | both |"
echo "|---|---:|---:|---:|---:|---:|"
run direct "$PORT"
run relay "$RP"
