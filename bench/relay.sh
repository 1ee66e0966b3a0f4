#!/usr/bin/env bash
# Relay benchmark: on one sandbox, the same workloads direct, through
# `sqlfleet relay` (transaction and session pooling) and through haproxy in
# TCP mode (a pure byte forwarder: the cheapest possible proxy hop), in one
# run:
#   1. sqlr-bench's curve: connect, q SELECTs, disconnect, q = 1..30, 4
#      clients (sqlfleet bench pool --via), with light queries (1 row x 1
#      column) and with 256 rows x 16 x CHAR(32)
#   2. the same light curve with TLS to the server: direct clients pay the
#      TLS handshake, relay clients connect in plain over loopback and the
#      relay's pooled backend connections are TLS (a second, TLS-enabled
#      sandbox)
#   3. sysbench oltp_point_select and oltp_read_only, persistent
#      connections, 4 and 64 threads
#   4. connect-per-query: mariadb-slap --detach=1 (a new connection for
#      every SELECT 1), 8 and 64 clients
# Passwords travel in 0600 files, never on command lines.
#
# Usage: bench/relay.sh [SECONDS_PER_SYSBENCH_RUN]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-10}"
NAME=bench-relay
bash scripts/deps.sh haproxy openssl
source bench/relay_common.sh
declare -A RPORT
for mode in transaction session; do
  RPORT[$mode]=$(free_port)
  start_relay "${RPORT[$mode]}" --backend "127.0.0.1:$PORT" --pool-max 100 --mode "$mode"
done
# haproxy, TCP mode, one server: the byte-pipe peer.
HPORT=$(free_port); start_haproxy "$HPORT"
port_of() { case "$1" in direct) echo "$PORT";; haproxy) echo "$HPORT";; *) echo "${RPORT[$1]}";; esac; }
TARGETS=(direct transaction session haproxy)
VIA=(--via "127.0.0.1:${RPORT[transaction]}" --via "127.0.0.1:$HPORT")
QS=1,2,3,5,10,20,30

echo "== light queries (1 row x 1 column) per connection: direct, relay, haproxy"
"$SQLFLEET" bench pool --sandbox "$NAME" "${VIA[@]}" --queries-per-connection "$QS" \
  --rows 1 --columns 1 --threads 4 --samples 4 --out "$WORK/pool-light" | tee "$WORK/pool-light.txt"
echo "== 256 rows x 16 x CHAR(32) per query: direct, relay, haproxy"
"$SQLFLEET" bench pool --sandbox "$NAME" "${VIA[@]}" --queries-per-connection "$QS" \
  --threads 4 --samples 4 --out "$WORK/pool-heavy" | tee "$WORK/pool-heavy.txt"

echo "== TLS to the server: direct clients with TLS, relay clients plain and the relay's backends TLS"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=127.0.0.1" \
  -keyout "$WORK/tls.key" -out "$WORK/tls.pem" >/dev/null 2>&1
chmod 644 "$WORK/tls.key" "$WORK/tls.pem"
chmod 755 "$WORK"
"$SQLFLEET" sandbox destroy --name "$NAME-tls" --yes >/dev/null 2>&1 || true
"$SQLFLEET" sandbox up --name "$NAME-tls" --option max_connections=500 \
  --option "ssl_cert=$WORK/tls.pem" --option "ssl_key=$WORK/tls.key" >/dev/null
TLS_CNF="$("$SQLFLEET" sandbox env --name "$NAME-tls" --defaults-file)"
TLS_PORT=$(awk -F' = ' '/^port/ {print $2}' "$TLS_CNF")
TLS_PW="$SQLFLEET_HOME/sandboxes/$NAME-tls/root.pw"
printf 'root:%s\n' "$(cat "$TLS_PW")" > "$WORK/users-tls"; chmod 600 "$WORK/users-tls"
RTLS=$(free_port)
MYSQL_PWD="$(cat "$TLS_PW")" "$SQLFLEET" relay --listen "127.0.0.1:$RTLS" --no-defaults -u root \
  --ssl-mode REQUIRED --backend "127.0.0.1:$TLS_PORT" --shared-account --client-users-file "$WORK/users-tls" \
  --pool-max 100 2>"$WORK/relay-tls.log" &
PIDS+=($!)
wait_port "$RTLS"
"$SQLFLEET" bench pool --defaults-file "$TLS_CNF" --ssl-mode REQUIRED \
  --via "mysql://root:$(python3 -c 'import sys,urllib.parse; print(urllib.parse.quote(open(sys.argv[1]).read().strip(), safe=""))' "$TLS_PW")@127.0.0.1:$RTLS/?ssl-mode=DISABLED" \
  --queries-per-connection "$QS" --rows 1 --columns 1 --threads 4 --samples 4 \
  --out "$WORK/pool-tls" | tee "$WORK/pool-tls.txt"
"$SQLFLEET" sandbox destroy --name "$NAME-tls" --yes >/dev/null 2>&1 || true

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
echo "| workload | threads | direct | haproxy (TCP) | relay, transaction | vs direct | vs haproxy | relay, session | vs direct |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for test in oltp_point_select oltp_read_only; do
  for threads in 4 64; do
    python3 -c "
d=${QPS[$test,direct,$threads]}; h=${QPS[$test,haproxy,$threads]}; t=${QPS[$test,transaction,$threads]}; s=${QPS[$test,session,$threads]}
print(f'| sysbench $test, {$SECS} s, queries/s | $threads | {d:,.0f} | {h:,.0f} | {t:,.0f} | {t/d:.2f} | {t/h:.2f} | {s:,.0f} | {s/d:.2f} |')"
  done
done
for conc in 8 64; do
  python3 -c "
d=${SLAP[direct,$conc]}; h=${SLAP[haproxy,$conc]}; t=${SLAP[transaction,$conc]}; s=${SLAP[session,$conc]}
print(f'| mariadb-slap --detach=1, connections+queries/s | $conc | {d:,.0f} | {h:,.0f} | {t:,.0f} | {t/d:.2f} | {t/h:.2f} | {s:,.0f} | {s/d:.2f} |')"
done
echo
for curve in light heavy tls; do
  echo "curve $curve (queries/s; relay / direct and relay / haproxy):"
  rp=${RPORT[transaction]}; [ "$curve" = tls ] && rp=$RTLS
  python3 - "$WORK/pool-$curve/results.json" "$rp" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
cells = {}
for c in r["pool"]:
    cells.setdefault(c["target"], {})[c["queries_per_connection"]] = c["qps"]["mean"]
targets = list(cells)
qs = sorted(next(iter(cells.values())))
print("| q/conn | " + " | ".join(targets) + " | relay/direct | relay/haproxy |")
print("|---:|" + "---:|" * (len(targets) + 2))
relay = [t for t in targets if t.endswith(":" + sys.argv[2])][0]
hap = [t for t in targets if t not in ("direct", relay)]
for q in qs:
    row = [f"{cells[t].get(q, 0):,.0f}" for t in targets]
    d = cells["direct"].get(q, 0) or 1
    rv = cells[relay].get(q, 0)
    hv = cells[hap[0]].get(q, 0) if hap else 0
    print(f"| {q} | " + " | ".join(row) + f" | {rv/d:.2f} | " + (f"{rv/hv:.2f}" if hv else "-") + " |")
PY
done
