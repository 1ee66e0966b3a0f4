#!/usr/bin/env bash
# sqlfleet replicate vs MariaDB's own multi-source replication, on the same
# backlog, in one run (run from the repository root):
#
#   bash bench/replicate.sh [EVENTS_PER_SOURCE] [THREADS]
#   SOURCES_N=1 bash bench/replicate.sh 20000 4   # one source, one hot database
#   TABLE_SIZE=100000 ...                        # rows per table (default 5000)
#   BESIDE=1 ...                                 # [apply] beside = true
#
# SOURCES_N (default 3) source sandboxes (GTID domains 1, 2, 3...), each with its own
# database written by sysbench (prepare + oltp_write_only, EVENTS
# transactions, a few ALTER TABLEs in between), and one target sandbox.
# The backlog is built first; then the target catches up from the same
# starting GTIDs twice:
#   (a) native: one named connection per source (CHANGE MASTER 'sN',
#       MASTER_USE_GTID=slave_pos), slave_parallel_threads=THREADS,
#       slave_parallel_mode=optimistic; timed until every source's
#       position is applied (MASTER_GTID_WAIT);
#   (b) sqlfleet replicate --threads THREADS --until-caught-up.
# After each, CHECKSUM TABLE of every table on the target must equal the
# source's (else the run fails). Prints transactions, seconds, tx/s and
# the ratio; record them in docs/benchmarks.md.
set -euo pipefail
EVENTS=${1:-20000}
THREADS=${2:-4}
bash scripts/deps.sh sysbench
source scripts/env.sh
# SQLFLEET_BIN=path measures another build on the same bench.
if [ -z "${SQLFLEET_BIN:-}" ]; then cargo build --release --quiet -p sqlfleet; fi
SQLFLEET="${SQLFLEET_BIN:-$SQLFLEET_TARGET/release/sqlfleet}"
export SQLFLEET_HOME="${SQLFLEET_HOME:-$HOME/.local/share/sqlfleet}"
WORK="$(mktemp -d)"; chmod 700 "$WORK"
SOURCES=(); for i in $(seq 1 "${SOURCES_N:-3}"); do SOURCES+=("rsrc$i"); done
cleanup() {
  [ -n "${KEEP:-}" ] && { echo "kept: sandboxes ${SOURCES[*]} rtgt, config $WORK/replicate.toml"; return; }
  for n in "${SOURCES[@]}" rtgt; do "$SQLFLEET" sandbox destroy --name "$n" --yes >/dev/null 2>&1 || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
KEEP_SAVED=${KEEP:-}; KEEP=; cleanup; KEEP=$KEEP_SAVED; mkdir -p "$WORK"; chmod 700 "$WORK"

cnf() { "$SQLFLEET" sandbox env --name "$1" --defaults-file; }
port() { awk -F' = ' '/^port/ {print $2}' "$(cnf "$1")"; }
pw() { cat "$SQLFLEET_HOME/sandboxes/$1/root.pw"; }
sql() { local n=$1; shift; mariadb --defaults-file="$(cnf "$n")" -N -B -e "$*"; }

i=0
for n in "${SOURCES[@]}"; do
  i=$((i + 1))
  "$SQLFLEET" sandbox up --name "$n" --domain "$i" --option max_connections=500 >/dev/null
done
"$SQLFLEET" sandbox up --name rtgt --domain 9 --option max_connections=500 \
  --option slave_parallel_threads="$THREADS" --option slave_parallel_mode=optimistic >/dev/null

# Where both appliers start: before any of the benchmark's writes.
declare -A START
for n in "${SOURCES[@]}"; do START[$n]=$(sql "$n" "SELECT @@gtid_binlog_pos"); done

echo "== building the backlog: $EVENTS sysbench write transactions per source (+ prepare, ALTERs)"
t0=$(date +%s.%N)
for n in "${SOURCES[@]}"; do
  db="sb_$n"
  sql "$n" "CREATE DATABASE $db"
  sb=(sysbench oltp_write_only --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$(port "$n")"
      --mysql-user=root --mysql-password="$(pw "$n")" --mysql-db="$db" --mysql-ssl=off
      --tables=4 --table-size="${TABLE_SIZE:-5000}" --threads=4 --rand-seed=7)
  "${sb[@]}" prepare >/dev/null
  "${sb[@]}" --events=$((EVENTS / 2)) --time=0 run >/dev/null
  sql "$n" "ALTER TABLE $db.sbtest1 ADD COLUMN extra INT NOT NULL DEFAULT 7; ALTER TABLE $db.sbtest2 ADD INDEX kc (k, c)"
  "${sb[@]}" --events=$((EVENTS - EVENTS / 2)) --time=0 run >/dev/null
done
echo "   built in $(python3 -c "import time; print(round(time.time() - $t0, 1))") s"

TOTAL=0
declare -A END
for n in "${SOURCES[@]}"; do
  END[$n]=$(sql "$n" "SELECT @@gtid_binlog_pos")
  s=${START[$n]##*-}; e=${END[$n]##*-}
  TOTAL=$((TOTAL + e - ${s:-0}))
done
echo "   backlog: $TOTAL transactions over ${#SOURCES[@]} sources"

check() {  # the target's copy equals every source's
  local bad=0
  for n in "${SOURCES[@]}"; do
    db="sb_$n"
    for t in sbtest1 sbtest2 sbtest3 sbtest4; do
      a=$(sql "$n" "CHECKSUM TABLE $db.$t" | cut -f2)
      b=$(sql rtgt "CHECKSUM TABLE $db.$t" | cut -f2)
      if [ "$a" != "$b" ]; then echo "   MISMATCH $db.$t: source $a target $b"; bad=1; fi
    done
  done
  [ $bad = 0 ] && echo "   checksums: all $((4 * ${#SOURCES[@]})) tables equal"
  return $bad
}

reset_target() {
  sql rtgt "STOP ALL SLAVES; RESET SLAVE ALL" >/dev/null 2>&1 || true
  for n in "${SOURCES[@]}"; do sql rtgt "DROP DATABASE IF EXISTS sb_$n"; done
  sql rtgt "DROP DATABASE IF EXISTS sqlfleet"
}

echo "== (a) native multi-source replication, slave_parallel_threads=$THREADS, optimistic"
reset_target
# The target's own domain (its DDL above) must be in the position too
# (gtid_strict_mode); no source writes it.
slave_pos=$(IFS=,; echo "$(sql rtgt "SELECT @@gtid_binlog_pos"),${START[*]}" | sed 's/^,*//; s/,,*/,/g; s/,$//')
sql rtgt "SET GLOBAL gtid_slave_pos = '$slave_pos'"
for n in "${SOURCES[@]}"; do
  sql rtgt "CHANGE MASTER '$n' TO MASTER_HOST='127.0.0.1', MASTER_PORT=$(port "$n"), MASTER_USER='root', MASTER_PASSWORD='$(pw "$n")', MASTER_USE_GTID=slave_pos"
done
t0=$(date +%s.%N)
sql rtgt "START ALL SLAVES" >/dev/null
for n in "${SOURCES[@]}"; do
  r=$(sql rtgt "SELECT MASTER_GTID_WAIT('${END[$n]}', 3600)")
  [ "$r" = 0 ] || { echo "native: $n did not catch up ($r)"; sql rtgt "SHOW ALL SLAVES STATUS\G" | grep -E "Connection_name|Last_.*Error"; exit 1; }
done
NATIVE=$(python3 -c "import time; print(time.time() - $t0)")
sql rtgt "STOP ALL SLAVES" >/dev/null
printf '   caught up in %.2f s (%.0f tx/s)\n' "$NATIVE" "$(python3 -c "print($TOTAL / $NATIVE)")"
check

echo "== (b) sqlfleet replicate --threads $THREADS"
reset_target
{
  printf '[target]\ndsn = "mysql://root:%s@127.0.0.1:%s/?ssl-mode=DISABLED"\n' "$(pw rtgt)" "$(port rtgt)"
  [ -n "${BESIDE:-}" ] && printf '[apply]\nbeside = true\n'
  for n in "${SOURCES[@]}"; do
    printf '[[source]]\nname = "%s"\ndsn = "mysql://root:%s@127.0.0.1:%s/?ssl-mode=DISABLED"\nstart = "gtid:%s"\n' \
      "$n" "$(pw "$n")" "$(port "$n")" "${START[$n]}"
  done
} > "$WORK/replicate.toml"
chmod 600 "$WORK/replicate.toml"
t0=$(date +%s.%N)
"$SQLFLEET" replicate --config "$WORK/replicate.toml" --threads "$THREADS" --until-caught-up --json --progress none > "$WORK/summary.json"
OURS=$(python3 -c "import time; print(time.time() - $t0)")
printf '   caught up in %.2f s (%.0f tx/s); stopped streams: %s\n' "$OURS" "$(python3 -c "print($TOTAL / $OURS)")" \
  "$(python3 -c "import json; print(json.load(open('$WORK/summary.json'))['stopped_streams'])")"
python3 -c "import json; p = json.load(open('$WORK/summary.json'))['parallel']; print(f\"   {p['chunks']} target transactions, {p['ahead']} beside an earlier one, {p['conflicts']} conflicts, {p['yields']} yields\")"
check

printf '== %s transactions: native %.2f s, sqlfleet %.2f s: sqlfleet takes %.2fx the native time\n' \
  "$TOTAL" "$NATIVE" "$OURS" "$(python3 -c "print($OURS / $NATIVE)")"
