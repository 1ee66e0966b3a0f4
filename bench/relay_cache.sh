#!/usr/bin/env bash
# The relay's result cache on sysbench: oltp_point_select (text protocol,
# --db-ps-mode=disable, and prepared, auto) and oltp_read_only (text; read_only with --skip_trx=on, since
# reads inside a transaction are never served from the cache), 16 clients,
# directly and through a relay whose one cache rule takes every sbtest
# SELECT; then point selects again with a 1% write mix through the relay
# at a rate of 1% of the reads (against the same reads and writes made
# directly): index updates of the tables read
# (oltp_update_index), then updates of another table (an application's
# session or log table beside its catalog: only what reads that table
# goes stale); and the index updates made directly on the primary, which
# the relay reads from the binary log; last, read-only transactions' reads
# beside 1% index updates through the relay. Prints q/s, the ratio to direct, the hit ratio from the
# relay's metrics and the server's Com_select per client query.
# The server logs row events with their column names
# (binlog_row_metadata = FULL, ROW_METADATA to change it): a point select's
# entry then goes stale only when its own row changes (through the relay
# or in the binary log); with NO_LOG, at any change of its table.
#
# Usage: [ROW_METADATA=FULL|NO_LOG] bench/relay_cache.sh [SECONDS] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-20}"
THREADS="${2:-16}"
NAME=bench-relay-cache
source bench/relay_common.sh
mariadb --defaults-file="$CNF" -e "DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest"
SB=(--tables=4 --table-size=10000 --db-ps-mode=disable)
sysbench --config-file="$(mk_sb "$PORT")" oltp_point_select "${SB[@]}" prepare >/dev/null
mariadb --defaults-file="$CNF" -e "CREATE TABLE sbtest.visits (id INT PRIMARY KEY, n BIGINT NOT NULL DEFAULT 0); INSERT INTO sbtest.visits (id) SELECT seq FROM sbtest.seq_1_to_100"
# One autocommit UPDATE of that other table per event.
cat > "$WORK/visits.lua" <<'LUA'
function thread_init()
  drv = sysbench.sql.driver()
  con = drv:connect()
end
function event()
  con:query(string.format("UPDATE visits SET n = n + 1 WHERE id = %d", sysbench.rand.uniform(1, 100)))
end
function thread_done()
  con:disconnect()
end
LUA
mariadb --defaults-file="$CNF" -e "SET GLOBAL binlog_row_metadata = ${ROW_METADATA:-FULL}"
RP=$(free_port); MP=$(free_port)
cache_relay_toml "$WORK/relay.toml" "$RP" "$MP" 268435456 sbtest "(?i)FROM sbtest"
"$SQLFLEET" relay --config "$WORK/relay.toml" 2>"$WORK/relay.log" &
PIDS+=($!)
wait_port "$RP"
metric() { curl -s "http://127.0.0.1:$MP/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
com_select() { mariadb --defaults-file="$CNF" -N -e "SHOW GLOBAL STATUS LIKE 'Com_select'" | awk '{print $2}'; }
run() {  # PORT TEST [extra sysbench args] -> q/s
  local port=$1 test=$2; shift 2
  sysbench --config-file="$(mk_sb "$port")" "$test" "${SB[@]}" --threads="$THREADS" --time="$SECS" --report-interval=0 "$@" run \
    | awk '/queries:/ {gsub(/[(]/,"",$3); print $3; exit}'
}
# Where the CPU goes (utime + stime, from /proc and the shell's children's
# times): the server's, the relay's and sysbench's per query, for point
# selects and read-only transactions directly and through the cache. On a machine this size every
# process shares the same cores, so the best the cache can give is the
# direct run's CPU per query over the cached run's: the ceiling printed.
RELAY_PID=${PIDS[-1]}
SERVER_PID=$(pgrep -f "mariadbd.*/sandboxes/$NAME/" | head -1)
HZ=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
cpu_run() {  # PORT TEST [args] -> "q/s server_ticks relay_ticks sysbench_seconds queries"
  local s0 r0 s1 r1 out sb port=$1
  shift
  s0=$(ticks "$SERVER_PID"); r0=$(ticks "$RELAY_PID")
  out=$( (sysbench --config-file="$(mk_sb "$port")" "$@" "${SB[@]}" --threads="$THREADS" --time="$SECS" --report-interval=0 run; times) )
  s1=$(ticks "$SERVER_PID"); r1=$(ticks "$RELAY_PID")
  sb=$(echo "$out" | tail -1 | awk '{for (i = 1; i <= 2; i++) {split($i, a, "m"); sub("s", "", a[2]); t += a[1] * 60 + a[2]}; print t}')
  echo "$(echo "$out" | awk '/queries:/ {gsub(/[(]/,"",$3); print $3; exit}') $((s1 - s0)) $((r1 - r0)) $sb $(echo "$out" | awk '/queries:/ {print $2; exit}')"
}
ceiling() {  # LABEL TEST [args]: the CPU split directly and through the cache
  local label=$1
  shift
  read -r DQ DS DR DSB DN <<< "$(cpu_run "$PORT" "$@")"
  read -r RQ RS RR RSB RN <<< "$(cpu_run "$RP" "$@")"
  python3 - "$label" "$DQ" "$DS" "$DR" "$DSB" "$DN" "$RQ" "$RS" "$RR" "$RSB" "$RN" "$HZ" <<'PY'
import sys
label = sys.argv[1]
dq, ds, dr, dsb, dn, rq, rs, rr, rsb, rn, hz = map(float, sys.argv[2:])
us = lambda ticks, n: ticks / hz / n * 1e6
d = (us(ds, dn), us(dr, dn), dsb / dn * 1e6)
r = (us(rs, rn), us(rr, rn), rsb / rn * 1e6)
print(f"| {label}, CPU µs per query | server | relay | sysbench | all |")
print("|---|---:|---:|---:|---:|")
print(f"| direct ({dq:.0f} q/s) | {d[0]:.1f} | {d[1]:.1f} | {d[2]:.1f} | {sum(d):.1f} |")
print(f"| relay + cache ({rq:.0f} q/s) | {r[0]:.1f} | {r[1]:.1f} | {r[2]:.1f} | {sum(r):.1f} |")
print(f"ceiling on these cores: direct CPU per query / cached CPU per query = {sum(d) / sum(r):.2f}x (measured {rq / dq:.2f}x); with a relay that cost nothing, sysbench alone caps it at {sum(d) / (r[0] + r[2]):.2f}x")
print()
PY
}
ceiling "point selects" oltp_point_select
ceiling "read-only" oltp_read_only --skip_trx=on
echo "| workload | direct q/s | relay + cache q/s | ratio | hit ratio | server Com_select per query |"
echo "|---|---:|---:|---:|---:|---:|"
for t in oltp_point_select "oltp_point_select --db-ps-mode=auto" "oltp_read_only --skip_trx=on"; do
  # shellcheck disable=SC2086
  D=$(run "$PORT" $t)
  h0=$(metric 'sqlfleet_relay_cache_hits_total{rule="sbtest"}'); m0=$(metric 'sqlfleet_relay_cache_misses_total{rule="sbtest"}'); c0=$(com_select)
  # shellcheck disable=SC2086
  R=$(run "$RP" $t)
  h1=$(metric 'sqlfleet_relay_cache_hits_total{rule="sbtest"}'); m1=$(metric 'sqlfleet_relay_cache_misses_total{rule="sbtest"}'); c1=$(com_select)
  python3 - "$t" "$D" "$R" "$h0" "$h1" "$m0" "$m1" "$c0" "$c1" "$SECS" <<'PY'
import sys
t, d, r, h0, h1, m0, m1, c0, c1, secs = sys.argv[1:]
d, r = float(d), float(r)
hits, misses = float(h1) - float(h0), float(m1) - float(m0)
q = r * float(secs)
print(f"| {t} | {d:.0f} | {r:.0f} | {r / d:.2f}x | {hits / max(hits + misses, 1):.3f} | {(float(c1) - float(c0) - 1) / max(q, 1):.3f} |")
PY
done
# A 1% write mix, at 1% of the point-select rate without writes: the reads
# through the relay beside the writes, against the same reads and the same
# writes both made directly (the direct side pays for the writes too).
# mixed WRITE_PORT READ_PORT WRITER... -> the reads' q/s while WRITER runs.
# (PS=auto: reads and writes as prepared statements; READS: the reads'
# sysbench test, point selects unless told)
# Prints "q/s hit-ratio" (the hit ratio of the rule over the run).
mixed() {
  local wport=$1 rport=$2 w q h0 m0 ps=${PS:-disable}
  shift 2
  sysbench --config-file="$(mk_sb "$wport")" "$@" "${SB[@]}" --db-ps-mode="$ps" --threads=2 --rate="$RATE" --time="$SECS" --report-interval=0 run >/dev/null &
  w=$!
  h0=$(metric 'sqlfleet_relay_cache_hits_total{rule="sbtest"}'); m0=$(metric 'sqlfleet_relay_cache_misses_total{rule="sbtest"}')
  # shellcheck disable=SC2086
  q=$(run "$rport" ${READS:-oltp_point_select} --db-ps-mode="$ps")
  wait "$w" || true
  echo "$q $(python3 -c "h = $(metric 'sqlfleet_relay_cache_hits_total{rule="sbtest"}') - $h0; m = $(metric 'sqlfleet_relay_cache_misses_total{rule="sbtest"}') - $m0; print(f'{h / max(h + m, 1):.3f}')")"
}
D=$(run "$PORT" oltp_point_select)
RATE=$(python3 -c "print(max(1, int($D * 0.01)))")
row() {  # LABEL "DIRECT_Q _" "RELAYED_Q HIT_RATIO"
  local d r hr
  read -r d _ <<< "$2"
  read -r r hr <<< "$3"
  python3 -c "print(f'| ${READS:-oltp_point_select} + {$RATE}/s $1 | {$d:.0f} | {$r:.0f} | {$r / $d:.2f}x (against reads alone: {$r / $D:.2f}x) | $hr | |')"
}
DI=$(mixed "$PORT" "$PORT" oltp_update_index)
row "index updates of the same tables through the relay" "$DI" "$(mixed "$RP" "$RP" oltp_update_index)"
# The same writes made directly on the primary: the relay sees them in its
# binlog (the follower's invalidations), not as they pass.
row "index updates of the same tables directly on the primary (binlog)" "$DI" "$(mixed "$PORT" "$RP" oltp_update_index)"
DP=$(PS=auto mixed "$PORT" "$PORT" oltp_update_index)
row "index updates of the same tables through the relay, both prepared" "$DP" "$(PS=auto mixed "$RP" "$RP" oltp_update_index)"
DV=$(mixed "$PORT" "$PORT" "$WORK/visits.lua")
row "updates of another table through the relay" "$DV" "$(mixed "$RP" "$RP" "$WORK/visits.lua")"
# Read-only transactions' reads (ten point selects and four ranges of 100
# keys each: BETWEEN) beside 1% index updates through the relay: a range's
# entry goes stale only when a row inside it changes.
READS="oltp_read_only --skip_trx=on"
# shellcheck disable=SC2086
D=$(run "$PORT" $READS)
# (the cache warmed by the reads alone first, as for the reads-alone row:
# the point selects' writes above made most ranges stale)
# shellcheck disable=SC2086
run "$RP" $READS >/dev/null
RATE=$(python3 -c "print(max(1, int($D * 0.01)))")
DR=$(mixed "$PORT" "$PORT" oltp_update_index)
row "index updates of the same tables through the relay" "$DR" "$(mixed "$RP" "$RP" oltp_update_index)"
# What the relay's binlog follower read over the whole run: commits, and
# what they made stale (everything, tables whole, rows).
curl -s "http://127.0.0.1:$MP/status" | python3 -c '
import json, sys
def find(d):
    if isinstance(d, dict):
        if "binlog" in d:
            return d["binlog"]
        for v in d.values():
            r = find(v)
            if r is not None:
                return r
b = find(json.load(sys.stdin)) or {}
print("binlog follower:", {k: b.get(k) for k in ("state", "commits", "whole", "tables", "rows", "row_metadata")})'
