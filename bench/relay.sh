#!/usr/bin/env bash
# Relay benchmark: on one sandbox, the same workloads direct and through
# `sqlfleet relay` in transaction and in session pooling mode, in one run:
#   1. sqlr-bench's curve: connect, q SELECTs of 256 rows x 16 x CHAR(32),
#      disconnect, q = 1..30, 8 clients  (sqlfleet bench pool --via)
#   2. sysbench oltp_point_select and oltp_read_only, persistent
#      connections, 4 and 64 threads
#   3. connect-per-query: mariadb-slap --detach=1 (a new connection for
#      every SELECT 1), 8 and 64 clients
# Passwords travel in 0600 files, never on command lines.
#
# Usage: bench/relay.sh [SECONDS_PER_SYSBENCH_RUN]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-10}"
NAME=bench-relay
source bench/relay_common.sh
declare -A RPORT
for mode in transaction session; do
  RPORT[$mode]=$(free_port)
  start_relay "${RPORT[$mode]}" --backend "127.0.0.1:$PORT" --pool-max 100 --mode "$mode"
done
port_of() { case "$1" in direct) echo "$PORT";; *) echo "${RPORT[$1]}";; esac; }
TARGETS=(direct transaction session)

echo "== queries per connection, direct vs relay (transaction mode)"
"$SQLFLEET" bench pool --sandbox "$NAME" --via "127.0.0.1:${RPORT[transaction]}" --queries-per-connection 1,2,3,5,10,20,30 \
  --clients 8 --samples 4 --out "$WORK/pool" | tee "$WORK/pool.txt"

echo "== sysbench, persistent connections"
mariadb --defaults-file="$CNF" -e "DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest"
sysbench --config-file="$(mk_sb "$PORT")" oltp_read_only --tables=4 --table-size=100000 prepare >/dev/null
declare -A QPS
for test in oltp_point_select oltp_read_only; do
  for threads in 4 64; do
    for target in "${TARGETS[@]}"; do
      QPS[$test,$target,$threads]=$(sysbench --config-file="$(mk_sb "$(port_of "$target")")" "$test" --tables=4 \
        --table-size=100000 --threads="$threads" --time="$SECS" --report-interval=0 run \
        | awk '/queries:/ {gsub(/[(]/,"",$3); print $3; exit}')
    done
  done
done

echo "== connect per query: mariadb-slap --detach=1"
declare -A SLAP
for conc in 8 64; do
  for target in "${TARGETS[@]}"; do
    printf '[client]\nuser=root\npassword=%s\nhost=127.0.0.1\nport=%s\n' "$(cat "$PWFILE")" "$(port_of "$target")" > "$WORK/my.cnf"
    chmod 600 "$WORK/my.cnf"
    n=$((conc * 250))
    t=$(mariadb-slap --defaults-file="$WORK/my.cnf" --create-schema=sbtest --concurrency="$conc" \
      --number-of-queries="$n" --detach=1 --query="SELECT 1" --iterations=3 2>&1 \
      | awk '/Average number of seconds/ {print $(NF-1)}')
    SLAP[$target,$conc]=$(python3 -c "print(f'{$n / $t:.0f}')")
  done
done

echo
echo "| workload | threads | direct | relay, transaction | ratio | relay, session | ratio |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for test in oltp_point_select oltp_read_only; do
  for threads in 4 64; do
    python3 -c "
d=${QPS[$test,direct,$threads]}; t=${QPS[$test,transaction,$threads]}; s=${QPS[$test,session,$threads]}
print(f'| sysbench $test, {$SECS} s, queries/s | $threads | {d:,.0f} | {t:,.0f} | {t/d:.2f} | {s:,.0f} | {s/d:.2f} |')"
  done
done
for conc in 8 64; do
  python3 -c "
d=${SLAP[direct,$conc]}; t=${SLAP[transaction,$conc]}; s=${SLAP[session,$conc]}
print(f'| mariadb-slap --detach=1, connections+queries/s | $conc | {d:,.0f} | {t:,.0f} | {t/d:.2f} | {s:,.0f} | {s/d:.2f} |')"
done
