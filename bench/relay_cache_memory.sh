#!/usr/bin/env bash
# The result cache's memory is bounded by its max_bytes: KEYS distinct
# cacheable SELECTs (each its own text, so its own entry) through a relay
# whose cache holds at most MAX_MB MiB, 16 sysbench clients; the relay's
# RSS is sampled every 0.2 s, and its metrics give the entries, the bytes
# and the evictions the cache counted. Prints the peak RSS beside the
# bound; nothing is asserted (the figure goes to docs/benchmarks.md).
#
# Usage: bench/relay_cache_memory.sh [KEYS] [MAX_MB]
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS="${1:-1000000}"
MAX_MB="${2:-64}"
NAME=bench-relay-cache-mem
source bench/relay_common.sh
mariadb --defaults-file="$CNF" -e "DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest; CREATE TABLE sbtest.kv (id INT PRIMARY KEY, v CHAR(100) NOT NULL); INSERT INTO sbtest.kv SELECT seq, REPEAT('v', 100) FROM sbtest.seq_1_to_10000"
THREADS=16
PER=$(( KEYS / THREADS ))
cat > "$WORK/keys.lua" <<LUA
function thread_init()
  drv = sysbench.sql.driver()
  con = drv:connect()
  n = 0
end
function event()
  -- a text of its own per event: thread, then a counter
  local k = sysbench.tid * $PER + n
  n = n + 1
  con:query(string.format("SELECT id, v, %d AS k FROM kv WHERE id = %d", k, k % 10000 + 1))
end
function thread_done()
  con:disconnect()
end
LUA
RP=$(free_port); MP=$(free_port)
cache_relay_toml "$WORK/relay.toml" "$RP" "$MP" "$(( MAX_MB * 1024 * 1024 ))" kv "(?i)FROM kv"
"$SQLFLEET" relay --config "$WORK/relay.toml" 2>"$WORK/relay.log" &
RPID=$!
PIDS+=($RPID)
wait_port "$RP"
rss() { awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$RPID/status"; }
start_rss=$(rss)
( while kill -0 "$RPID" 2>/dev/null; do rss; sleep 0.2; done ) > "$WORK/rss" &
sampler=$!
t0=$(date +%s.%N)
sysbench --config-file="$(mk_sb "$RP")" "$WORK/keys.lua" --db-ps-mode=disable --threads="$THREADS" \
  --events="$KEYS" --time=0 --report-interval=0 run > "$WORK/sb.out"
t1=$(date +%s.%N)
sleep 0.5
kill "$sampler" 2>/dev/null || true
peak=$(sort -n "$WORK/rss" | tail -1)
m() { curl -s "http://127.0.0.1:$MP/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
echo "keys: $KEYS distinct SELECTs in $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s ($(awk '/queries:/ {gsub(/[(]/,"",$3); print $3; exit}' "$WORK/sb.out") q/s), cache max_bytes $MAX_MB MiB"
echo "relay RSS: $start_rss MiB at start, peak $peak MiB, at the end $(rss) MiB"
curl -s "http://127.0.0.1:$MP/metrics" | grep -E '^sqlfleet_relay_cache_(entries|bytes|evictions|stores|hits|misses)' | sed 's/^/  /'
echo "($(date -u +%Y-%m-%d))"
