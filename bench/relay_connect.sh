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
# CPU per client connection of every process, each target measured alone:
# the client (bench pool, getrusage), the server and the relay (/proc).
SPID=$(cat "$SQLFLEET_HOME/sandboxes/$NAME/node1/mariadbd.pid")
RPID=${PIDS[-1]}
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
alone() {  # DSN -> "client server relay" µs of CPU per client connection
  local s0 s1 r0 r1
  s0=$(ticks "$SPID"); r0=$(ticks "$RPID")
  /usr/bin/time -f "%U %S" -o "$WORK/client-cpu" "$SQLFLEET" bench pool --dsn "$1" \
    --queries-per-connection 1 --rows 1 --columns 1 \
    --threads "$CLIENTS" --samples 3 --out "$WORK/alone" >/dev/null 2>&1
  s1=$(ticks "$SPID"); r1=$(ticks "$RPID")
  python3 - "$WORK/alone/results.json" "$((s1 - s0))" "$((r1 - r0))" "$(getconf CLK_TCK)" "$WORK/client-cpu" <<'PY'
import json, sys
cell = json.load(open(sys.argv[1]))["pool"][0]
hz, n = int(sys.argv[4]), cell["connections"]
client = sum(float(x) for x in open(sys.argv[5]).read().split()[-2:])
print(f"{client / n * 1e6:.0f} {int(sys.argv[2]) / hz / n * 1e6:.0f} {int(sys.argv[3]) / hz / n * 1e6:.0f}")
PY
}
PW_ENC=$(python3 -c 'import sys,urllib.parse; print(urllib.parse.quote(open(sys.argv[1]).read().strip(), safe=""))' "$PWFILE")
read -r DC DS _ < <(alone "mysql://root:$PW_ENC@127.0.0.1:$PORT/?ssl-mode=DISABLED")
read -r VC VS VR < <(alone "mysql://root:$PW_ENC@127.0.0.1:$RP/?ssl-mode=DISABLED")
echo "| server: its CPU per client connection, target alone (/proc) | $DS | $VS |"
echo "| client (bench pool): its CPU per connection, target alone (getrusage) | $DC | $VC |"
echo "| relay: its CPU per client connection, target alone (/proc) | - | $VR |"
echo "| every process: CPU per connection | $((DC + DS)) | $((VC + VS + VR)) |"
# On a machine where the CPU is what limits (these 2 cores, all three
# processes on them), the rate through the relay can be at most the ratio
# of the CPU each connection costs; what the relay's user space could give
# back is its share outside the kernel (perf, below).
echo "ceiling of relay/direct with the CPU as the limit: $(python3 -c "print(f'{($DC + $DS) / ($VC + $VS + $VR):.2f}')")x"
if command -v perf >/dev/null 2>&1; then
  ( "$SQLFLEET" bench pool --dsn "mysql://root:$PW_ENC@127.0.0.1:$RP/?ssl-mode=DISABLED" \
      --queries-per-connection 1 --rows 1 --columns 1 --threads "$CLIENTS" --samples 3 \
      --out "$WORK/perf-run" >/dev/null 2>&1 ) &
  LOAD=$!
  sleep 2
  perf record -q -g -p "$RPID" -o "$WORK/perf.data" -- sleep 3 >/dev/null 2>&1 || true
  wait "$LOAD"
  KSHARE=$(perf report -i "$WORK/perf.data" --no-children --sort dso --stdio 2>/dev/null \
    | awk '/kernel/ {gsub("%", "", $1); print $1}')
  echo "relay's CPU in the kernel (perf): ${KSHARE}%; the relay's system calls by share:"
  perf report -i "$WORK/perf.data" --children --sort sym --stdio -g none 2>/dev/null \
    | grep -E '^ +[0-9]' | grep -E '\[k\] __x64_sys_[a-z_0-9]+$' | head -8
  echo "ceiling with the relay's user space at zero: $(python3 -c "print(f'{($DC + $DS) / ($VC + $VS + $VR * ${KSHARE:-100} / 100):.2f}')")x"
fi
