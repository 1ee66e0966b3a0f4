#!/usr/bin/env bash
# What watch's statement figures cost a monitored server: one server with
# performance_schema on, a steady mix of point selects (and one scan in a
# loop), watched every second for SECONDS with statements on, then with
# `statements = false`; the server's own CPU time (user+system of its
# mariadbd, from /proc) and watch's over each run, and the share of the
# server's CPU the statement reads add. No timing is asserted anywhere:
# this prints figures for docs/benchmarks.md.
#
# Usage: bench/watch_statements.sh [SECONDS]
#   LOAD=0: no client load (the server's CPU is then the watcher's queries
#   themselves, which a loaded run's variance hides).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_RUN="${1:-60}"
bash scripts/deps.sh --core
source scripts/env.sh
cargo build --release --quiet
SQLFLEET="$SQLFLEET_TARGET/release/sqlfleet"
WORK=$(mktemp -d)
export SQLFLEET_HOME="$WORK/home"
trap '"$SQLFLEET" sandbox destroy --name wst --yes >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
"$SQLFLEET" sandbox up --name wst --option performance-schema=ON >/dev/null
D="$("$SQLFLEET" sandbox env --name wst --defaults-file)"
PORT=$(mariadb --defaults-file="$D" -N -e 'SELECT @@port')
SPID=$(pgrep -f "mariadbd.*$SQLFLEET_HOME" | head -1)
mariadb --defaults-file="$D" -e "CREATE DATABASE b; USE b; CREATE TABLE t (id INT PRIMARY KEY, v INT, pad CHAR(50) DEFAULT ''); INSERT INTO t (id, v) SELECT seq, seq % 1000 FROM seq_1_to_100000"
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
load() { # a steady mix while the watcher runs
  [ "${LOAD:-1}" = 0 ] && return 0
  for i in 1 2; do
    ( while :; do mariadb --defaults-file="$D" -N -e "SELECT pad FROM b.t WHERE id = $((RANDOM % 100000 + 1))" >/dev/null; done ) &
  done
  ( while :; do mariadb --defaults-file="$D" -N -e "SELECT COUNT(*) FROM b.t WHERE v = $((RANDOM % 1000))" >/dev/null; done ) &
}
run() { # $1: on|off
  local cfg="$WORK/watch-$1.toml"
  if [ "$1" = off ]; then echo "statements = false" > "$cfg"; else : > "$cfg"; fi
  load
  sleep 2
  local s0; s0=$(cpu "$SPID")
  "$SQLFLEET" watch --defaults-file="$D" --hosts "127.0.0.1:$PORT" --interval 1 --ui none --json --config "$cfg" >/dev/null 2>&1 &
  local w=$!
  sleep 1
  local w0; w0=$(cpu "$w")
  sleep "$SECONDS_RUN"
  local s1 w1; s1=$(cpu "$SPID"); w1=$(cpu "$w")
  kill "$w"; wait "$w" 2>/dev/null || true
  if [ -n "$(jobs -p)" ]; then kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; fi
  python3 -c "print('statements $1: server CPU %.2f s, watch CPU %.3f s over $SECONDS_RUN s' % (($s1 - $s0) / $ticks, ($w1 - $w0) / $ticks))"
  echo "$(( s1 - s0 ))" > "$WORK/server-$1"
}
run on
run off
on=$(cat "$WORK/server-on"); off=$(cat "$WORK/server-off")
python3 -c "print('statement reads add %.2f%% to the server CPU of this run (%d vs %d ticks; the load itself varies by a few %%)' % (100.0 * ($on - $off) / max($off, 1), $on, $off))"
