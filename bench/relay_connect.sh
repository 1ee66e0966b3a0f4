#!/usr/bin/env bash
# Where a connect-per-query client's time goes through the relay: one
# `bench pool` run at q/conn = 1 with light queries (1 row x 1 column),
# direct and through the relay, then the relay's own histograms (login from
# accept to OK, pool lease wait, command latency at the relay) next to what
# the clients measured (connect and query latency, HDR p50); then the
# server's own CPU per client connection (/proc), with each target alone:
# a direct connection pays the server's login, one through the relay only
# its query.
#
# Usage: bench/relay_connect.sh [CLIENTS [BENCH POOL FLAGS...]]
#   e.g. a driver's connect-time reads, timed in the connect:
#   bench/relay_connect.sh 4 --connect-query 'SELECT @@max_allowed_packet,@@system_time_zone,@@time_zone,@@auto_increment_increment'
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS="${1:-4}"
shift || true
NAME=bench-relay-connect
source bench/relay_common.sh
RP=$(free_port)
MP=$(free_port)
start_relay "$RP" --backend "127.0.0.1:$PORT" --pool-max 100 --metrics "127.0.0.1:$MP"
CPU0=$(awk '{print $14 + $15}' "/proc/${PIDS[-1]}/stat")
"$SQLFLEET" bench pool --sandbox "$NAME" --via "127.0.0.1:$RP" --queries-per-connection 1 \
  --rows 1 --columns 1 --threads "$CLIENTS" --samples 5 --out "$WORK/pool" "$@" > "$WORK/pool.txt"
CPU1=$(awk '{print $14 + $15}' "/proc/${PIDS[-1]}/stat")
curl -s "http://127.0.0.1:$MP/metrics" > "$WORK/metrics.txt"
python3 - "$WORK/pool/results.json" "$WORK/metrics.txt" "$((CPU1 - CPU0))" "$(getconf CLK_TCK)" <<'PY'
import json, sys, re
r = json.load(open(sys.argv[1]))
m = open(sys.argv[2]).read()
relay_cpu = int(sys.argv[3]) / int(sys.argv[4])
def mean(name, labels=""):
    lab = re.escape(labels)
    s = re.search(rf"^{name}_sum{lab} (\S+)$", m, re.M)
    c = re.search(rf"^{name}_count{lab} (\S+)$", m, re.M)
    if not s or not c or float(c.group(1)) == 0:
        return float("nan")
    return float(s.group(1)) / float(c.group(1)) * 1e6
cells = {c["target"]: c for c in r["pool"]}
d = cells["direct"]
v = [c for t, c in cells.items() if t != "direct"][0]
print(f"| measure (µs) | direct | through the relay |")
print(f"|---|---:|---:|")
print(f"| client: connect p50 | {d['connect']['p50_us']} | {v['connect']['p50_us']} |")
print(f"| client: first query p50 | {d['query']['p50_us']} | {v['query']['p50_us']} |")
print(f"| relay: login, accept to OK (mean) | - | {mean('sqlfleet_relay_login_seconds'):.0f} |")
print(f"| relay: pool lease wait (mean) | - | {mean('sqlfleet_relay_pool_wait_seconds'):.0f} |")
local = re.search(r"^sqlfleet_relay_answered_locally_total (\S+)$", m, re.M)
if local:
    print(f"| relay: reads answered locally (count) | - | {float(local.group(1)):.0f} |")
lat = re.search(r'^sqlfleet_relay_backend_command_seconds_sum\{backend="([^"]+)"\}', m, re.M)
if lat:
    labels = '{backend="' + lat.group(1) + '"}'
    cmd = mean("sqlfleet_relay_backend_command_seconds", labels)
    print(f"| relay: command, read to reply forwarded (mean) | - | {cmd:.0f} |")
clients = re.search(r"^sqlfleet_relay_clients_total (\S+)$", m, re.M)
if clients and float(clients.group(1)) > 0:
    print(f"| relay: its CPU per client connection (login + queries, /proc) | - | {relay_cpu / float(clients.group(1)) * 1e6:.0f} |")
print(f"| queries/s | {d['qps']['mean']:.0f} | {v['qps']['mean']:.0f} |")
PY
# The server's CPU per client connection, each target measured alone.
SPID=$(cat "$SQLFLEET_HOME/sandboxes/$NAME/node1/mariadbd.pid")
server_cpu() {  # DSN -> µs of server CPU per client connection
  local c0 c1
  c0=$(awk '{print $14 + $15}' "/proc/$SPID/stat")
  "$SQLFLEET" bench pool --dsn "$1" --queries-per-connection 1 --rows 1 --columns 1 \
    --threads "$CLIENTS" --samples 3 --out "$WORK/alone" >/dev/null 2>&1
  c1=$(awk '{print $14 + $15}' "/proc/$SPID/stat")
  python3 - "$WORK/alone/results.json" "$((c1 - c0))" "$(getconf CLK_TCK)" <<'PY'
import json, sys
cell = json.load(open(sys.argv[1]))["pool"][0]
print(f"{int(sys.argv[2]) / int(sys.argv[3]) / cell['connections'] * 1e6:.0f}")
PY
}
PW_ENC=$(python3 -c 'import sys,urllib.parse; print(urllib.parse.quote(open(sys.argv[1]).read().strip(), safe=""))' "$PWFILE")
echo "| server: its CPU per client connection, target alone (/proc) | $(server_cpu "mysql://root:$PW_ENC@127.0.0.1:$PORT/?ssl-mode=DISABLED") | $(server_cpu "mysql://root:$PW_ENC@127.0.0.1:$RP/?ssl-mode=DISABLED") |"
