#!/usr/bin/env bash
# Where a restore's time goes: the same mariadb-dump loaded by sqlfleet and
# the server-side LOAD DATA ceiling, with, for each, the wall time, the CPU
# seconds of sqlfleet and of the server, the server's own counters (rows,
# statements, bytes received, binlog and redo written) and, for sqlfleet's
# run, perf's hottest symbols in sqlfleet and in the server.
#
# Usage: bench/load_profile.sh [TABLES] [ROWS_PER_TABLE] [THREADS] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
TABLES="${1:-4}"
ROWS="${2:-250000}"
THREADS="${3:-2}"
RUNS="${4:-1}"
source bench/load_common.sh
load_bench_setup bench-profile
gen_sbtest sbsrc "$TABLES" "$ROWS"
mariadb-dump --defaults-file="$CNF" sbsrc > "$WORK/dump.sql"
for t in $(seq 1 "$TABLES"); do
  "${SQL[@]}" -e "SELECT * FROM sbsrc.sbtest$t INTO OUTFILE '$WORK/sbtest$t.tsv'"
done
MYSQLD_PID="$("${SQL[@]}" -e 'SELECT @@pid_file' | xargs cat)"
TICK="$(getconf CLK_TCK)"
cpu_of() { awk -v t="$TICK" '{printf "%.2f", ($14 + $15) / t}' "/proc/$1/stat"; }
COUNTERS="'Com_insert','Com_load','Questions','Bytes_received','Binlog_bytes_written','Innodb_os_log_written','Innodb_rows_inserted','Innodb_data_written','Handler_commit','Handler_write','Innodb_data_fsyncs','Binlog_commits'"
status() { "${SQL[@]}" -e "SELECT LOWER(VARIABLE_NAME), VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN ($COUNTERS) ORDER BY 1"; }
# measure LABEL CMD...: wall, server CPU, the command's own CPU, counter deltas
measure() {
  local label="$1"; shift
  status > "$WORK/before"; local c0; c0="$(cpu_of "$MYSQLD_PID")"; local t0; t0="$(now)"
  /usr/bin/time -f '%U %S' -o "$WORK/time" "$@"
  local t1; t1="$(now)"; local c1; c1="$(cpu_of "$MYSQLD_PID")"; status > "$WORK/after"
  read -r u s < "$WORK/time"
  printf '%-28s wall %6.2f s   server CPU %6.2f s   own CPU %5.2f s (user %.2f, sys %.2f)\n' \
    "$label" "$(secs "$t0" "$t1")" "$(python3 -c "print($c1 - $c0)")" "$(python3 -c "print($u + $s)")" "$u" "$s"
  join "$WORK/before" "$WORK/after" | awk '{d = $3 - $2; if (d) printf "    %-24s %15d\n", $1, d}'
}
ceiling() {
  for t in $(seq 1 "$TABLES"); do
    "${SQL[@]}" -D b_ceiling -e "SET unique_checks=0, foreign_key_checks=0; LOAD DATA INFILE '$WORK/sbtest$t.tsv' INTO TABLE sbtest$t" &
  done
  wait
}
# The same rows sent by the client (LOAD DATA LOCAL), as sqlfleet sends
# them: what the protocol itself costs the server.
local_ceiling() {
  for t in $(seq 1 "$TABLES"); do
    "${SQL[@]}" -D b_local -e "SET unique_checks=0, foreign_key_checks=0; LOAD DATA LOCAL INFILE '$WORK/sbtest$t.tsv' INTO TABLE sbtest$t" &
  done
  wait
}
for run in $(seq 1 "$RUNS"); do
  echo "== run $run: $TABLES tables x $ROWS rows, $THREADS threads"
  fresh b_ceiling
  for t in $(seq 1 "$TABLES"); do "${SQL[@]}" -D b_ceiling -e "CREATE TABLE sbtest$t LIKE sbsrc.sbtest$t"; done
  measure "LOAD DATA INFILE (ceiling)" bash -c "$(declare -f ceiling); TABLES=$TABLES WORK=$WORK; SQL=(${SQL[*]}); ceiling"
  fresh b_local
  for t in $(seq 1 "$TABLES"); do "${SQL[@]}" -D b_local -e "CREATE TABLE sbtest$t LIKE sbsrc.sbtest$t"; done
  measure "LOAD DATA LOCAL (client)" bash -c "$(declare -f local_ceiling); TABLES=$TABLES WORK=$WORK; SQL=(${SQL[*]}); local_ceiling"
  fresh b_sqlfleet
  measure "sqlfleet load" "$SQLFLEET" load --sandbox "$NAME" -D b_sqlfleet --threads "$THREADS" --progress none ${LOAD_ARGS:-} "$WORK/dump.sql"
done
if command -v perf >/dev/null 2>&1; then
  echo "== perf: sqlfleet load and the server during it"
  fresh b_perf
  perf record -q -F 499 -o "$WORK/server.data" -p "$MYSQLD_PID" >/dev/null 2>&1 &
  SPERF=$!
  perf record -q -F 499 -o "$WORK/sqlfleet.data" -- "$SQLFLEET" load --sandbox "$NAME" -D b_perf --threads "$THREADS" --progress none "$WORK/dump.sql" >/dev/null 2>&1
  kill -INT "$SPERF"; wait "$SPERF" 2>/dev/null || true
  for who in sqlfleet server; do
    echo "-- $who: hottest symbols"
    perf report -i "$WORK/$who.data" --no-children --sort dso,symbol 2>/dev/null > "$WORK/$who.txt" || true
    awk '/%/ && !/^#/' "$WORK/$who.txt" | sed -n 1,30p
  done
fi
"${SQL[@]}" -e "DROP DATABASE IF EXISTS b_ceiling; DROP DATABASE IF EXISTS b_local; DROP DATABASE IF EXISTS b_sqlfleet; DROP DATABASE IF EXISTS b_perf; DROP DATABASE sbsrc"
