#!/usr/bin/env bash
# Galera benchmark, on one 3-node sandbox cluster, in one run:
#   1. `sqlfleet bench pool` (connect, q SELECTs, disconnect) direct to
#      node1, through `sqlfleet relay` in front of the cluster (transaction
#      pooling, read/write split: one writer, reads on the others) and
#      through haproxy in TCP mode in front of the same cluster (node1
#      active, node2 and node3 backups: the usual Galera haproxy setup)
#   2. sysbench oltp_read_write, persistent connections, 8 threads: the
#      same three ways
#   3. insert scaling: sysbench oltp_insert with 6 threads on node1 alone,
#      against 2 threads on each of the three nodes at once; certification
#      conflicts counted (wsrep_local_cert_failures + wsrep_local_bf_aborts
#      summed over the nodes, and sysbench's ignored errors)
# Passwords travel in 0600 files, never on command lines.
#
# Usage: bench/galera.sh [SECONDS_PER_RUN]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-10}"
NAME=bench-galera
UP_ARGS="--galera 3"
bash scripts/deps.sh haproxy
source bench/relay_common.sh
node_port() { awk -F' = ' '/^port/ {print $2}' "$("$SQLFLEET" sandbox env --name "$NAME" --node "node$1" --defaults-file)"; }
P1=$(node_port 1); P2=$(node_port 2); P3=$(node_port 3)
RPORT=$(free_port)
start_relay "$RPORT" --backend "127.0.0.1:$P1" --backend "127.0.0.1:$P2" --backend "127.0.0.1:$P3" \
  --pool-max 100 --read-write-split
HPORT=$(free_port)
{
  printf 'global\n  maxconn 4000\n'
  printf 'defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 1h\n  timeout server 1h\n'
  printf 'listen galera\n  bind 127.0.0.1:%s\n' "$HPORT"
  printf '  server n1 127.0.0.1:%s check\n  server n2 127.0.0.1:%s check backup\n  server n3 127.0.0.1:%s check backup\n' "$P1" "$P2" "$P3"
} > "$WORK/haproxy-galera.cfg"
haproxy -f "$WORK/haproxy-galera.cfg" -db >"$WORK/haproxy-galera.log" 2>&1 &
PIDS+=($!)
wait_port "$HPORT"
# The relay has chosen its writer once every node answered a check.
sleep 2

echo "== bench pool: direct to node1, relay, haproxy"
"$SQLFLEET" bench pool --sandbox "$NAME" --via "127.0.0.1:$RPORT" --via "127.0.0.1:$HPORT" \
  --queries-per-connection 1,5,30 --rows 1 --columns 1 --threads 4 --samples 3 --out "$WORK/pool" \
  | tee "$WORK/pool.txt"

echo "== sysbench oltp_read_write, 8 threads"
mariadb --defaults-file="$CNF" -e "DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest"
sysbench --config-file="$(mk_sb "$P1")" oltp_read_write --tables=4 --table-size=50000 prepare >/dev/null
declare -A QPS
for target in direct relay haproxy; do
  case $target in direct) p=$P1;; relay) p=$RPORT;; haproxy) p=$HPORT;; esac
  QPS[$target]=$(sysbench --config-file="$(mk_sb "$p")" oltp_read_write --tables=4 --table-size=50000 \
    --threads=8 --time="$SECS" --report-interval=0 --mysql-ignore-errors=1213,1205 run \
    | awk '/queries:/ {gsub(/[(]/,"",$3); print $3; exit}')
done

conflicts() {  # the nodes' certification failures and brute-force aborts, summed
  local sum=0 p v
  for p in "$P1" "$P2" "$P3"; do
    v=$(MYSQL_PWD="$(cat "$PWFILE")" mariadb -h 127.0.0.1 -P "$p" -u root -N -B -e \
      "SELECT SUM(VARIABLE_VALUE) FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN ('WSREP_LOCAL_CERT_FAILURES','WSREP_LOCAL_BF_ABORTS')")
    sum=$((sum + ${v%.*}))
  done
  echo "$sum"
}
insert_run() {  # $1 port, $2 threads -> "inserts/s ignored_errors"
  sysbench --config-file="$(mk_sb "$1")" oltp_insert --tables=4 --table-size=50000 \
    --threads="$2" --time="$SECS" --report-interval=0 --mysql-ignore-errors=1213,1205 run \
    | awk '/queries:/ {gsub(/[(]/,"",$3); q=$3} /ignored errors:/ {e=$3} END {print q, e+0}'
}
echo "== insert scaling: one node vs all three"
c0=$(conflicts)
read -r ONE_QPS ONE_ERR < <(insert_run "$P1" 6)
c1=$(conflicts)
INS=()
for p in "$P1" "$P2" "$P3"; do insert_run "$p" 2 > "$WORK/ins-$p" & INS+=($!); done
wait "${INS[@]}"
c2=$(conflicts)
ALL_QPS=0; ALL_ERR=0
for p in "$P1" "$P2" "$P3"; do
  read -r q e < "$WORK/ins-$p"
  ALL_QPS=$(python3 -c "print($ALL_QPS + $q)"); ALL_ERR=$((ALL_ERR + e))
done

echo
echo "| workload | direct node1 | haproxy (TCP, node1 + 2 backups) | relay (one writer, reads elsewhere) | relay vs direct | relay vs haproxy |"
echo "|---|---:|---:|---:|---:|---:|"
python3 -c "
d=${QPS[direct]}; h=${QPS[haproxy]}; r=${QPS[relay]}
print(f'| sysbench oltp_read_write, 8 threads, {$SECS} s, queries/s | {d:,.0f} | {h:,.0f} | {r:,.0f} | {r/d:.2f} | {r/h:.2f} |')"
echo
echo "| insert scaling, sysbench oltp_insert, $SECS s | inserts/s | ignored errors (1213/1205) | certification failures + BF aborts on the nodes |"
echo "|---|---:|---:|---:|"
python3 -c "print(f'| 6 threads on node1 | {$ONE_QPS:,.0f} | $ONE_ERR | $((c1 - c0)) |')"
python3 -c "print(f'| 2 threads on each of 3 nodes | {$ALL_QPS:,.0f} | $ALL_ERR | $((c2 - c1)) |')"
echo
echo "bench pool (see above): $WORK/pool.txt"
"$SQLFLEET" sandbox destroy --name "$NAME" --yes >/dev/null 2>&1 || true
