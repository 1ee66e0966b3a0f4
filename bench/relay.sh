#!/usr/bin/env bash
# Relay benchmark: on one sandbox, the same workloads direct and through
# `sqlfleet relay` (session pooling), in one run:
#   1. sqlr-bench's curve: connect, q SELECTs of 256 rows x 16 x CHAR(32),
#      disconnect, q = 1..30, 8 clients  (sqlfleet bench pool --via)
#   2. sysbench oltp_point_select with persistent connections, 4 and 64 threads
# Passwords travel in 0600 files, never on command lines.
#
# Usage: bench/relay.sh [SECONDS_PER_SYSBENCH_RUN]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-10}"
bash scripts/deps.sh sysbench
source scripts/env.sh
cargo build --release --quiet
SQLFLEET="$SQLFLEET_TARGET/release/sqlfleet"
export SQLFLEET_HOME="${SQLFLEET_HOME:-$HOME/.local/share/sqlfleet}"
NAME=bench-relay
"$SQLFLEET" sandbox destroy --name "$NAME" >/dev/null 2>&1 || true
"$SQLFLEET" sandbox up --name "$NAME" >/dev/null
CNF="$("$SQLFLEET" sandbox env --name "$NAME" --defaults-file)"
PORT=$(awk -F' = ' '/^port/ {print $2}' "$CNF")
PWFILE="$SQLFLEET_HOME/sandboxes/$NAME/root.pw"
WORK="$(mktemp -d)"; chmod 700 "$WORK"
RPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'root:%s\n' "$(cat "$PWFILE")" > "$WORK/users"; chmod 600 "$WORK/users"
SQLFLEET_BACKEND_PASSWORD="$(cat "$PWFILE")" "$SQLFLEET" relay --listen "127.0.0.1:$RPORT" \
  --backend "127.0.0.1:$PORT" --backend-user root --users-file "$WORK/users" --pool-max 100 2>"$WORK/relay.log" &
RELAY=$!
trap 'kill $RELAY 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$RPORT) 2>/dev/null && break; sleep 0.05; done

echo "== queries per connection, direct vs relay"
"$SQLFLEET" bench pool --sandbox "$NAME" --via "127.0.0.1:$RPORT" --queries-per-connection 1,2,3,5,10,20,30 \
  --clients 8 --samples 4 --out "$WORK/pool" | tee "$WORK/pool.txt"

echo "== sysbench oltp_point_select, persistent connections"
"$(dirname "$0")/../scripts/env.sh" >/dev/null 2>&1 || true
mk_sb() {  # $1 port -> config file
  printf 'mysql-host=127.0.0.1\nmysql-port=%s\nmysql-user=root\nmysql-password=%s\nmysql-db=sbtest\nmysql-ssl=off\n' "$1" "$(cat "$PWFILE")" > "$WORK/sb$1"
  chmod 600 "$WORK/sb$1"; echo "$WORK/sb$1"
}
mariadb --defaults-file="$CNF" -e "DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest"
sysbench --config-file="$(mk_sb "$PORT")" oltp_point_select --tables=4 --table-size=100000 prepare >/dev/null
declare -A QPS
for threads in 4 64; do
  for target in direct relay; do
    p=$PORT; [ "$target" = relay ] && p=$RPORT
    QPS[$target,$threads]=$(sysbench --config-file="$(mk_sb "$p")" oltp_point_select --tables=4 --table-size=100000 \
      --threads="$threads" --time="$SECS" --report-interval=0 run | awk '/queries:/ {gsub(/[(]/,"",$3); print $3; exit}')
  done
done
echo
echo "| sysbench oltp_point_select | threads | direct qps | relay qps | relay / direct |"
echo "|---|---:|---:|---:|---:|"
for threads in 4 64; do
  python3 -c "d=${QPS[direct,$threads]}; r=${QPS[relay,$threads]}; print(f'| persistent connections, {$SECS} s | $threads | {d:,.0f} | {r:,.0f} | {r/d:.2f} |')"
done
