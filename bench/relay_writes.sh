#!/usr/bin/env bash
# What following a write's table costs the relay: sysbench oltp_write_only
# and oltp_insert (persistent clients, transaction mode) through this
# build's relay and through the relay of an earlier revision (BASE, built
# in a worktree beside the clone), with haproxy (TCP mode) as the
# byte-pipe yardstick, in alternating rounds so that all three see the same
# moments of a noisy machine. Prints median q/s, the medians of the
# per-round ratios, and each relay's own CPU (utime + stime from /proc)
# per query.
#
# SPLIT=1: both relays with --read-write-split (read-your-writes after each
# write, consistency = session) and every statement its own autocommit
# transaction (sysbench --skip_trx=on): what remembering each write's GTID
# costs.
#
# Usage: [SPLIT=1] bench/relay_writes.sh BASE [ROUNDS] [SECONDS] [CLIENTS...]
set -euo pipefail
cd "$(dirname "$0")/.."
BASE="${1:?usage: bench/relay_writes.sh BASE [ROUNDS] [SECONDS] [CLIENTS...]}"
ROUNDS="${2:-3}"
SECS="${3:-4}"
shift 3 || shift $#
CLIENTS=("${@:-4 64}")
# shellcheck disable=SC2206
CLIENTS=(${CLIENTS[*]})
NAME=bench-relay-writes
bash scripts/deps.sh haproxy
source bench/relay_common.sh
# The earlier revision's binary, built once per revision.
REV=$(git rev-parse --short "$BASE")
OLD_BIN=$(binary_of "$BASE")
SPLIT_ARGS=(); SKIP_TRX=off; IGNORE=none
# (Autocommit writes: two clients may delete and insert the same id; the
# duplicate key is the workload's, as with any client.)
if [ "${SPLIT:-0}" = 1 ]; then SPLIT_ARGS=(--read-write-split); SKIP_TRX=on; IGNORE=1062; fi
RN=$(free_port); start_relay "$RN" --backend "127.0.0.1:$PORT" --pool-max 100 "${SPLIT_ARGS[@]}"
PN=${PIDS[-1]}
RO=$(free_port); start_relay_of "$OLD_BIN" "$RO" --backend "127.0.0.1:$PORT" --pool-max 100 "${SPLIT_ARGS[@]}"
PO=${PIDS[-1]}
HZ=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HPORT=$(free_port); start_haproxy "$HPORT"
mariadb --defaults-file="$CNF" -e "DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest"
sysbench --config-file="$(mk_sb "$PORT")" oltp_write_only --tables=4 --table-size=10000 prepare >/dev/null
qps() {  # TEST PORT THREADS [RELAY_PID]: q/s, or "q/s:relay CPU us per query"
  local t0 t1 out
  [ -n "${4:-}" ] && t0=$(ticks "$4")
  out=$(sysbench --config-file="$(mk_sb "$2")" "$1" --tables=4 --table-size=10000 \
    --threads="$3" --time="$SECS" --skip_trx="$SKIP_TRX" --mysql-ignore-errors="$IGNORE" --report-interval=0 run | awk '/queries:/ {gsub(/[(]/,"",$3); print $2, $3; exit}')
  if [ -n "${4:-}" ]; then
    t1=$(ticks "$4")
    python3 -c "import sys; n, r = sys.argv[1].split(); print(f'{r}:{(int(sys.argv[3]) - int(sys.argv[2])) / int(sys.argv[4]) * 1e6 / float(n):.1f}')" "$out" "$t0" "$t1" "$HZ"
  else
    echo "$out" | awk '{print $2}'
  fi
}
echo "| workload | clients | rounds | haproxy q/s | relay $REV q/s | relay now q/s | $REV/haproxy | now/haproxy | now/$REV | relay $REV CPU/query | relay now CPU/query |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for t in oltp_write_only oltp_insert; do
  for c in "${CLIENTS[@]}"; do
    H=(); O=(); N=()
    for i in $(seq "$ROUNDS"); do
      if [ $((i % 2)) -eq 1 ]; then
        N+=("$(qps "$t" "$RN" "$c" "$PN")"); O+=("$(qps "$t" "$RO" "$c" "$PO")"); H+=("$(qps "$t" "$HPORT" "$c")")
      else
        H+=("$(qps "$t" "$HPORT" "$c")"); O+=("$(qps "$t" "$RO" "$c" "$PO")"); N+=("$(qps "$t" "$RN" "$c" "$PN")")
      fi
    done
    python3 - "$t" "$c" "${H[*]}" "${O[*]}" "${N[*]}" <<'PY'
import statistics as st, sys
t, c = sys.argv[1:3]
h = [float(x) for x in sys.argv[3].split()]
o, oc = zip(*([float(v) for v in x.split(":")] for x in sys.argv[4].split()))
n, nc = zip(*([float(v) for v in x.split(":")] for x in sys.argv[5].split()))
ratio = lambda xs, ys: st.median(x / y for x, y in zip(xs, ys))
print(f"| {t} | {c} | {len(h)} | {st.median(h):,.0f} | {st.median(o):,.0f} | {st.median(n):,.0f} | {ratio(o, h):.2f} | {ratio(n, h):.2f} | {ratio(n, o):.2f} | {st.median(oc):.1f} us | {st.median(nc):.1f} us |")
PY
  done
done
