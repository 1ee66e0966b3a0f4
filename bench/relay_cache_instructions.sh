#!/usr/bin/env bash
# What one cache hit costs the relay in user space, counted rather than
# timed: a relay with one cache rule taking every sbtest SELECT runs
# under valgrind's callgrind (one event loop), sysbench point selects
# (text protocol) warm the cache over every key first, then EVENTS
# transactions are counted; the instructions executed in that span are
# divided by the queries, beside the hit ratio the relay's metrics give
# for the span. The kernel's share is not in it (relay_cache.sh measures
# the CPU). TOP=N prints the N costliest functions per query, own code
# only (bench/callgrind_self.py).
#
# Usage: [TOP=N] bench/relay_cache_instructions.sh [EVENTS] [REV...]
#   EVENTS point selects counted (default 10000);
#   each REV is an earlier revision counted too (built once).
set -euo pipefail
cd "$(dirname "$0")/.."
EVENTS="${1:-10000}"
shift || true
NAME=bench-relay-cache-instructions
source bench/relay_common.sh
bash scripts/deps.sh valgrind
ROWS=1000
mariadb --defaults-file="$CNF" -e "DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest"
SB=(--tables=4 --table-size="$ROWS" --db-ps-mode=disable --threads=8 --time=0 --report-interval=0)
sysbench --config-file="$(mk_sb "$PORT")" oltp_point_select "${SB[@]}" prepare >/dev/null

# count BIN: "instructions_per_query hit_ratio" of the counted span.
count() {
  local bin=$1 port mp pid out q h0 m0 h1 m1 total
  port=$(free_port); mp=$(free_port)
  out="$WORK/cg-$port"
  cache_relay_toml "$WORK/relay-$port.toml" "$port" "$mp" 268435456 sbtest "(?i)FROM sbtest"
  # One event loop: the count is one thread's.
  sed -i 's/^\[relay\]$/[relay]\nthreads = 1/' "$WORK/relay-$port.toml"
  valgrind --tool=callgrind --callgrind-out-file="$out.%p" \
    "$bin" relay --config "$WORK/relay-$port.toml" 2>"$out.log" &
  pid=$!
  for _ in $(seq 300); do (echo > "/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  metric() { curl -s "http://127.0.0.1:$mp/metrics" | awk -v m="$1" '$1 == m {s += $2} END {print s + 0}'; }
  sb() { sysbench --config-file="$(mk_sb "$port")" oltp_point_select "${SB[@]}" --events="$1" run | awk '/queries:/ {print $2; exit}'; }
  # Every key read (4 x ROWS keys, one read an event; ten reads a key
  # leave about one in 20,000 unread).
  sb $((ROWS * 40)) >/dev/null
  callgrind_control -z "$pid" >/dev/null 2>&1
  h0=$(metric 'sqlfleet_relay_cache_hits_total{rule="sbtest"}'); m0=$(metric 'sqlfleet_relay_cache_misses_total{rule="sbtest"}')
  q=$(sb "$EVENTS")
  h1=$(metric 'sqlfleet_relay_cache_hits_total{rule="sbtest"}'); m1=$(metric 'sqlfleet_relay_cache_misses_total{rule="sbtest"}')
  callgrind_control -d "$pid" >/dev/null 2>&1
  sleep 1
  kill "$pid"; wait "$pid" 2>/dev/null || true
  total=$(callgrind_annotate "$(ls -S "$out".*.* | head -1)" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  if [ -n "${TOP:-}" ] && [ "$bin" = "$SQLFLEET" ]; then
    cp "$(ls -S "$out".*.* | head -1)" "$WORK/top.cg"
    echo "$q" > "$WORK/top.units"
  fi
  python3 -c "import sys; t,q,h,m=map(float,sys.argv[1:]); print(f'{t/q:.0f} {h/max(h+m,1):.3f}')" \
    "$total" "$q" "$((h1 - h0))" "$((m1 - m0))"
}

builds_of "$@"
printf '| oltp_point_select through the cache (8 clients, %s point selects counted) | instructions per query | hit ratio |\n|---|---:|---:|\n' "$EVENTS"
for i in "${!BINS[@]}"; do
  read -r ipq ratio < <(count "${BINS[$i]}")
  printf '| %s | %s | %s |\n' "${LABELS[$i]}" "$ipq" "$ratio"
done
if [ -n "${TOP:-}" ] && [ -f "$WORK/top.cg" ]; then
  echo
  echo "== this build: where the user-space instructions go, per query"
  python3 bench/callgrind_self.py "$WORK/top.cg" "$(cat "$WORK/top.units")" "$TOP"
fi
