#!/usr/bin/env bash
# The relay's own user-space work per query, counted rather than timed:
# the relay runs under valgrind's callgrind (one event loop), sysbench
# sends a fixed number of transactions through it after a warm-up, and
# the instructions executed in that span are divided by the queries. The
# count does not depend on how busy the machine is, so two builds can be
# compared to the percent on a noisy host (the wall clock cannot). The
# kernel's share (system calls, wake-ups) is not in it: see
# relay_profile.sh for that. The last row counts a connect-per-query
# client's whole connection instead: login, one query, quit. Note: callgrind counts each byte of a `rep
# movsb` copy as an instruction, which makes memcpy look dearer than it is.
#
# Usage: [TOP=N] bench/relay_instructions.sh [EVENTS] [REV...]
#   EVENTS sysbench transactions per workload (default 1000); each REV is
#   an earlier revision to count too (built once, beside the target dir).
#   TOP=N: after the table, this build's N costliest functions per point
#   select, own code only, and who calls memcpy (bench/callgrind_self.py).
set -euo pipefail
cd "$(dirname "$0")/.."
EVENTS="${1:-1000}"
shift || true
NAME=bench-relay-instructions
source bench/relay_common.sh
bash scripts/deps.sh valgrind
mariadb --defaults-file="$CNF" -e "DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest"
sysbench --config-file="$(mk_sb "$PORT")" oltp_read_only --tables=4 --table-size=10000 prepare >/dev/null

# start_counted BIN [RELAY FLAGS...]: a relay under callgrind on a free
# port; sets port, pid and out.
start_counted() {
  local bin=$1
  shift
  port=$(free_port)
  out="$WORK/cg-$port"
  MYSQL_PWD="$(cat "$PWFILE")" valgrind --tool=callgrind --callgrind-out-file="$out.%p" \
    "$bin" relay --listen "127.0.0.1:$port" --no-defaults -u root --ssl-mode DISABLED \
    --shared-account --client-users-file "$WORK/users" --backend "127.0.0.1:$PORT" --threads 1 "$@" 2>"$out.log" &
  pid=$!
  for _ in $(seq 300); do (echo > "/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
}

# stop_counted: dumps the counts since the last zeroing, stops the relay
# and prints the instructions counted.
stop_counted() {
  callgrind_control -d "$pid" >/dev/null 2>&1
  sleep 1
  kill "$pid"; wait "$pid" 2>/dev/null || true
  callgrind_annotate "$(ls -S "$out".*.* | head -1)" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}

# count BIN WORKLOAD [SYSBENCH FLAGS...]: user-space instructions per query.
count() {
  local bin=$1 workload=$2 port pid out queries total
  shift 2
  start_counted "$bin"
  sb() {  # EVENTS [FLAGS...]
    local n=$1
    shift
    sysbench --config-file="$(mk_sb "$port")" "$workload" --tables=4 --table-size=10000 \
      --threads=8 --events="$n" --time=0 --report-interval=0 "$@" run | awk '/queries:/ {print $2; exit}'
  }
  sb "$((EVENTS / 4 + 1))" "$@" >/dev/null
  callgrind_control -z "$pid" >/dev/null 2>&1
  queries=$(sb "$EVENTS" "$@")
  total=$(stop_counted)
  if [ -n "${TOP:-}" ] && [ "$bin" = "$SQLFLEET" ] && [ "$workload" = oltp_point_select ] && [ $# -eq 0 ]; then
    cp "$(ls -S "$out".*.* | head -1)" "$WORK/top.cg"
    echo "$queries" > "$WORK/top.units"
  fi
  echo $((total / queries))
}

# count_connect BIN: user-space instructions per client connection that
# logs in, runs one light query and quits (`bench pool` at q/conn = 1),
# counted by the relay's own clients_total.
count_connect() {
  local bin=$1 port pid out mp c0 c1 total
  mp=$(free_port)
  start_counted "$bin" --metrics "127.0.0.1:$mp"
  clients() { curl -s "http://127.0.0.1:$mp/metrics" | awk '/^sqlfleet_relay_clients_total / {print $2}'; }
  pool() {
    "$SQLFLEET" bench pool --dsn "mysql://root:$PW_ENC@127.0.0.1:$port/?ssl-mode=DISABLED" \
      --queries-per-connection 1 --rows 1 --columns 1 --threads 2 --samples 1 --out "$WORK/pool" >/dev/null 2>&1
  }
  pool
  callgrind_control -z "$pid" >/dev/null 2>&1
  c0=$(clients)
  pool
  c1=$(clients)
  total=$(stop_counted)
  echo $((total / (c1 - c0)))
}
PW_ENC=$(python3 -c 'import sys,urllib.parse; print(urllib.parse.quote(open(sys.argv[1]).read().strip(), safe=""))' "$PWFILE")

builds_of "$@"
printf '| workload (8 clients, %s transactions) |' "$EVENTS"
for l in "${LABELS[@]}"; do printf ' %s |' "$l"; done
printf '\n|---|'
for _ in "${LABELS[@]}"; do printf -- '---:|'; done
printf '\n'
for w in "oltp_point_select" "oltp_read_only" "oltp_read_only --db-ps-mode=disable"; do
  printf '| %s, instructions per query |' "$w"
  for b in "${BINS[@]}"; do
    # shellcheck disable=SC2086
    printf ' %s |' "$(count "$b" $w)"
  done
  printf '\n'
done
printf '| connect per query (bench pool, q/conn = 1, light query), instructions per connection |'
for b in "${BINS[@]}"; do
  printf ' %s |' "$(count_connect "$b")"
done
printf '\n'
if [ -n "${TOP:-}" ] && [ -f "$WORK/top.cg" ]; then
  echo
  echo "== this build, oltp_point_select: where the user-space instructions go"
  python3 bench/callgrind_self.py "$WORK/top.cg" "$(cat "$WORK/top.units")" "$TOP"
fi
