#!/usr/bin/env bash
# Where a relayed query's time goes: sysbench oltp_point_select (persistent
# connections, 4 threads or CLIENTS) direct, through haproxy in TCP mode (the
# byte pipe) and through `sqlfleet relay` variants — one event loop per core
# (default), one event loop (--threads 1), a backend on the server's Unix
# socket, and session pooling (a server connection per client) — with the
# host's idle CPU and context switches (vmstat), the proxy's own CPU time,
# and for the relay and haproxy side by side their system calls per query
# (strace -c) and kernel/user split (perf, when present) in last runs.
#
# Usage: bench/relay_profile.sh [SECONDS_PER_RUN] [CLIENTS]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-5}"
CLIENTS="${2:-4}"
NAME=bench-relay
bash scripts/deps.sh haproxy strace procps
source bench/relay_common.sh
SOCK=$(awk -F' = ' '/^socket/ {print $2}' "$CNF")
mariadb --defaults-file="$CNF" -e "DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest"
sysbench --config-file="$(mk_sb "$PORT")" oltp_point_select --tables=4 --table-size=100000 prepare >/dev/null

SPID=$(cat "$SQLFLEET_HOME/sandboxes/$NAME/node1/mariadbd.pid")
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# run LABEL PORT [PROXY_PID]: prints a table row; CPU per query of the
# server, sysbench and the proxy go to $WORK/cpu (LABEL<TAB>server sb proxy).
run() {
  local label=$1 port=$2 pid=${3:-} cpu0=0 cpu1=0 s0 s1
  [ -n "$pid" ] && cpu0=$(ticks "$pid")
  s0=$(ticks "$SPID")
  vmstat 1 "$SECS" > "$WORK/vmstat" &
  local vm=$!
  local qps
  qps=$(/usr/bin/time -f "%U %S" -o "$WORK/sb-cpu" sysbench --config-file="$(mk_sb "$port")" oltp_point_select --tables=4 --table-size=100000 \
    --threads="$CLIENTS" --time="$SECS" --report-interval=0 run | awk '/queries:/ {gsub(/[(]/,"",$3); print $3; exit}')
  wait "$vm" || true
  [ -n "$pid" ] && cpu1=$(ticks "$pid")
  s1=$(ticks "$SPID")
  python3 - "$label" "$qps" "$SECS" "$((cpu1 - cpu0))" "$(getconf CLK_TCK)" "$WORK/vmstat" "$((s1 - s0))" "$WORK/sb-cpu" "$WORK/cpu" <<'PY'
import sys
label, qps, secs, ticks, hz, vm = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
rows = [l.split() for l in open(vm) if l.strip() and l.split()[0].isdigit()][1:] or [[0] * 17]
idle = sum(int(r[14]) for r in rows) / len(rows)
cs = sum(int(r[11]) for r in rows) / len(rows)
n = qps * secs
per = lambda seconds: seconds / n * 1e6
proxy_us = per(ticks / hz)
srv_us = per(int(sys.argv[7]) / hz)
sb_us = per(sum(float(x) for x in open(sys.argv[8]).read().split()[-2:]))
proxy = f"{ticks / hz / secs * 100:.0f}% of a core, {proxy_us:.1f} µs/query" if ticks else "-"
print(f"| {label} | {qps:,.0f} | {idle:.0f}% | {cs / qps:.1f} | {proxy} | {srv_us:.1f} | {sb_us:.1f} |")
with open(sys.argv[9], "a") as f:
    f.write(f"{label}\t{srv_us} {sb_us} {proxy_us}\n")
PY
}

echo "| target ($CLIENTS clients) | queries/s | host idle | context switches per query | proxy CPU | server µs/query | sysbench µs/query |"
echo "|---|---:|---:|---:|---:|---:|---:|"
run "direct" "$PORT"
HP=$(free_port); start_haproxy "$HP"; HPID=${PIDS[-1]}
run "haproxy, TCP mode" "$HP" "$HPID"
R1=$(free_port); start_relay "$R1" --backend "127.0.0.1:$PORT"; R1PID=${PIDS[-1]}
run "relay, one event loop per core (default)" "$R1" "$R1PID"
R2=$(free_port); start_relay "$R2" --backend "127.0.0.1:$PORT" --threads 1
run "relay, --threads 1" "$R2" "${PIDS[-1]}"
R3=$(free_port); start_relay "$R3" --backend "unix:$SOCK"
run "relay, backend on the Unix socket" "$R3" "${PIDS[-1]}"
# Each client on one server connection for its whole session, as through
# haproxy: what the server spends per query when a statement never lands
# on a connection another client used last.
R4=$(free_port); start_relay "$R4" --backend "127.0.0.1:$PORT" --mode session
run "relay, session pooling (one server connection per client)" "$R4" "${PIDS[-1]}"

for who in relay haproxy; do
  if [ "$who" = relay ]; then P=$R1; PID=$R1PID; else P=$HP; PID=$HPID; fi
  echo
  echo "== system calls of $who during $SECS s of the same load"
  ( sleep 1; timeout -s INT "$((SECS - 2))" strace -c -f -p "$PID" -o "$WORK/strace" ) &
  ST=$!
  sysbench --config-file="$(mk_sb "$P")" oltp_point_select --tables=4 --table-size=100000 \
    --threads="$CLIENTS" --time="$SECS" --report-interval=0 run | awk '/queries:/ {print "sysbench", $2, "queries (slowed by strace)"}'
  wait "$ST" || true
  awk '/sendto|recvfrom|epoll_wait|writev|readv|total/' "$WORK/strace"
  if command -v perf >/dev/null 2>&1; then
    echo
    echo "== perf: where $who's CPU goes ($((SECS - 2)) s): kernel and user, context switches"
    ( sleep 1; perf record -q -p "$PID" -o "$WORK/perf.data" -- sleep "$((SECS - 2))" >/dev/null 2>&1 ) &
    PF=$!
    ( sleep 1; perf stat -e task-clock,context-switches -p "$PID" -o "$WORK/stat" -- sleep "$((SECS - 2))" >/dev/null 2>&1 ) &
    PS=$!
    sysbench --config-file="$(mk_sb "$P")" oltp_point_select --tables=4 --table-size=100000 \
      --threads="$CLIENTS" --time="$SECS" --report-interval=0 run | awk '/queries:/ {print "sysbench", $2, "queries"}'
    wait "$PF" "$PS" || true
    perf report -i "$WORK/perf.data" --no-children --sort dso 2>/dev/null | awk '/%/ && !/^#/' | head -4
    awk '/task-clock|context-switches/ {print $1, $2}' "$WORK/stat"
    if [ "$who" = relay ]; then
      KSHARE=$(perf report -i "$WORK/perf.data" --no-children --sort dso 2>/dev/null | awk '/kernel/ {gsub("%", "", $1); print $1}')
    fi
  fi
done

# With the CPU as the limit (these cores shared by server, sysbench and the
# proxy), q/s through a proxy goes as 1 / (server + sysbench + proxy) per
# query: the ceiling of relay/haproxy from the table's own figures, and the
# same with the relay's user space at zero (its kernel share from perf).
python3 - "$WORK/cpu" "${KSHARE:-100}" <<'PY'
import sys
cpu = {l.split("\t")[0]: [float(x) for x in l.split("\t")[1].split()] for l in open(sys.argv[1])}
h = cpu["haproxy, TCP mode"]
r = cpu["relay, one event loop per core (default)"]
k = float(sys.argv[2]) / 100
print(f"\nCPU per query, every process: haproxy {sum(h):.1f} µs, relay {sum(r):.1f} µs; "
      f"ceiling of relay/haproxy {sum(h) / sum(r):.2f}x; "
      f"with the relay's user space at zero ({k * 100:.0f}% of it in the kernel) {sum(h) / (r[0] + r[1] + r[2] * k):.2f}x")
PY
