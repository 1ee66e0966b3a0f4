#!/usr/bin/env bash
# The relay against haproxy (TCP mode, the cheapest proxy hop) on
# persistent sysbench oltp_point_select, in alternating pairs so that both
# see the same moments of a noisy machine: for each client count, ROUNDS
# pairs of SECONDS each (relay then haproxy, then the other order), and the
# median of the per-pair ratios. A second relay reaches the server over its
# Unix socket (`--backend unix:...`), as a relay on the database host can.
#
# Usage: bench/relay_pairs.sh [ROUNDS] [SECONDS] [CLIENTS...]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-5}"
SECS="${2:-4}"
shift 2 || true
CLIENTS=("${@:-4 64}")
# shellcheck disable=SC2206
CLIENTS=(${CLIENTS[*]})
NAME=bench-relay-pairs
bash scripts/deps.sh haproxy
source bench/relay_common.sh
SOCK=$(awk -F' = ' '/^socket/ {print $2}' "$CNF")
RT=$(free_port); start_relay "$RT" --backend "127.0.0.1:$PORT" --pool-max 100
RU=$(free_port); start_relay "$RU" --backend "unix:$SOCK" --pool-max 100
HPORT=$(free_port); start_haproxy "$HPORT"
mariadb --defaults-file="$CNF" -e "DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest"
sysbench --config-file="$(mk_sb "$PORT")" oltp_point_select --tables=4 --table-size=10000 prepare >/dev/null
qps() {  # PORT THREADS
  sysbench --config-file="$(mk_sb "$1")" oltp_point_select --tables=4 --table-size=10000 \
    --threads="$2" --time="$SECS" --report-interval=0 run | awk '/queries:/ {gsub(/[(]/,"",$3); print $3; exit}'
}
echo "| clients | pairs | haproxy median q/s | relay (TCP backend) median | relay/haproxy median of pairs | relay (Unix-socket backend) median | relay(unix)/haproxy median |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
for c in "${CLIENTS[@]}"; do
  H=(); R=(); U=()
  for i in $(seq "$ROUNDS"); do
    if [ $((i % 2)) -eq 1 ]; then
      R+=("$(qps "$RT" "$c")"); U+=("$(qps "$RU" "$c")"); H+=("$(qps "$HPORT" "$c")")
    else
      H+=("$(qps "$HPORT" "$c")"); U+=("$(qps "$RU" "$c")"); R+=("$(qps "$RT" "$c")")
    fi
  done
  python3 - "$c" "${H[*]}" "${R[*]}" "${U[*]}" <<'PY'
import statistics as st, sys
c = sys.argv[1]
h, r, u = ([float(x) for x in a.split()] for a in sys.argv[2:5])
ratio = lambda xs: st.median(x / y for x, y in zip(xs, h))
print(f"| {c} | {len(h)} | {st.median(h):,.0f} | {st.median(r):,.0f} | {ratio(r):.2f} | {st.median(u):,.0f} | {ratio(u):.2f} |")
PY
done
