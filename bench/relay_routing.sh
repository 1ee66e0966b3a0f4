#!/usr/bin/env bash
# Relay routing benchmark, on a sandbox primary with two replicas, in one run:
#   1. sysbench oltp_read_only (autocommit reads: --skip_trx=on) and
#      oltp_point_select, direct to the primary vs through `sqlfleet relay
#      --read-write-split` over all three servers, 4 and 64 threads;
#   2. failover: the primary is killed (SIGKILL), node2 (a replica) is promoted with
#      `sqlfleet sandbox promote`, and a writer retrying through the relay
#      reports the time from the kill to its first successful write.
# Passwords travel in 0600 files, never on command lines.
#
# Usage: bench/relay_routing.sh [SECONDS_PER_SYSBENCH_RUN]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-10}"
NAME=bench-routing
UP_ARGS="--replicas 2"
source bench/relay_common.sh
PORTS=($(awk -F' = ' '/^port/ {print $2}' "$SQLFLEET_HOME/sandboxes/$NAME/sandbox.toml"))
RPORT=$(free_port)
BACKENDS=()
for p in "${PORTS[@]}"; do BACKENDS+=(--backend "127.0.0.1:$p"); done
start_relay "$RPORT" "${BACKENDS[@]}" --pool-max 100 --wait-timeout 30 --read-write-split --health-interval 0.2
sleep 1

mariadb --defaults-file="$CNF" -e "DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest"
sysbench --config-file="$(mk_sb "$PORT")" oltp_read_only --tables=4 --table-size=100000 prepare >/dev/null
sleep 2  # let the replicas apply the prepared tables
declare -A QPS
for test in oltp_read_only oltp_point_select; do
  for threads in 4 64; do
    for target in direct relay; do
      p=$PORT; [ "$target" = relay ] && p=$RPORT
      QPS[$test,$target,$threads]=$(sysbench --config-file="$(mk_sb "$p")" "$test" --tables=4 --table-size=100000 \
        --skip_trx=on --threads="$threads" --time="$SECS" --report-interval=0 run \
        | awk '/queries:/ {gsub(/[(]/,"",$3); print $3; exit}')
    done
  done
done

echo "== failover"
printf '[client]\nuser=root\npassword=%s\nhost=127.0.0.1\nport=%s\n' "$(cat "$PWFILE")" "$RPORT" > "$WORK/relay.cnf"
chmod 600 "$WORK/relay.cnf"
mariadb --defaults-file="$WORK/relay.cnf" -e "CREATE TABLE IF NOT EXISTS sbtest.fo (id INT AUTO_INCREMENT PRIMARY KEY, at DOUBLE)"
PID=$(cat "$SQLFLEET_HOME/sandboxes/$NAME/node1/mariadbd.pid")
T0=$(date +%s.%N)
kill -9 "$PID"
"$SQLFLEET" sandbox promote --name "$NAME" --node node2 > "$WORK/promote.txt"
TP=$(date +%s.%N)
ATTEMPTS=0
until mariadb --defaults-file="$WORK/relay.cnf" -e "INSERT INTO sbtest.fo (at) VALUES (UNIX_TIMESTAMP(NOW(6)))" 2>/dev/null; do
  ATTEMPTS=$((ATTEMPTS + 1))
  [ "$ATTEMPTS" -gt 3000 ] && { echo "writes never resumed" >&2; exit 1; }
  sleep 0.01
done
T1=$(date +%s.%N)
cat "$WORK/promote.txt"

echo
echo "| workload (autocommit reads) | threads | direct to primary | relay, read/write split | ratio |"
echo "|---|---:|---:|---:|---:|"
for test in oltp_read_only oltp_point_select; do
  for threads in 4 64; do
    python3 -c "
d=${QPS[$test,direct,$threads]}; r=${QPS[$test,relay,$threads]}
print(f'| sysbench $test --skip_trx=on, {$SECS} s, queries/s | $threads | {d:,.0f} | {r:,.0f} | {r/d:.2f} |')"
  done
done
python3 -c "
t0=$T0; tp=$TP; t1=$T1
print(f'| failover: primary killed -> promote done -> first write through the relay | | {(tp-t0)*1000:.0f} ms | {(t1-t0)*1000:.0f} ms | retries: $ATTEMPTS |')"
