#!/usr/bin/env bash
# Restore benchmark: the same sysbench-style tables loaded, in one run on
# one sandbox server, by
#   1. the stock client:  mariadb < dump.sql         (plain mariadb-dump)
#   2. myloader           on a mydumper dump of the same tables
#   3. the ceiling:       server-side LOAD DATA INFILE, one per table, in parallel
#   4. sqlfleet load      on the plain mariadb-dump file
#   5. sqlfleet load      on the mydumper directory myloader loads
# Each result is checked (CHECKSUM TABLE of every table equals the source).
# ROUNDS=N (default 1) repeats the four methods N times on the same dump,
# each from an empty binlog, flushed dirty pages and an idle server
# (`fresh` in load_common.sh); the table gives each
# method's median and the ratios' per-round values and median.
# BINLOG=on (default) or off: whether every method writes the server's
# binary log. myloader 0.10 turns it off for its sessions unless
# --enable-binlog, sqlfleet keeps it on unless --skip-binlog; so on runs
# myloader with --enable-binlog, off runs sqlfleet with --skip-binlog, the
# stock client with SET sql_log_bin = 0 as its init command and the
# ceiling's statements after the same SET: each method does the same work
# as the others, as its users would set it to.
# Prints seconds, rows/s and ratios; append the table to docs/benchmarks.md.
#
# Usage: [ROUNDS=N] [BINLOG=on|off] bench/load.sh [TABLES] [ROWS_PER_TABLE] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
TABLES="${1:-8}"
ROWS="${2:-150000}"
THREADS="${3:-4}"
BINLOG="${BINLOG:-on}"
case "$BINLOG" in
  on) CLIENT_BINLOG=(); MYLOADER_BINLOG=(--enable-binlog); CEILING_BINLOG=""; SQLFLEET_BINLOG=() ;;
  off) CLIENT_BINLOG=(--init-command="SET sql_log_bin = 0"); MYLOADER_BINLOG=(); CEILING_BINLOG="SET sql_log_bin = 0;"; SQLFLEET_BINLOG=(--skip-binlog) ;;
  *) echo "BINLOG must be on or off" >&2; exit 2 ;;
esac

source bench/load_common.sh
load_bench_setup bench-load mydumper

gen_sbtest sbsrc "$TABLES" "$ROWS"
TOTAL=$((TABLES * ROWS))
checksums() { "${SQL[@]}" -e "CHECKSUM TABLE $(for t in $(seq 1 "$TABLES"); do printf '%s.sbtest%s,' "$1" "$t"; done | sed 's/,$//')" | awk '{print $2}'; }
WANT="$(checksums sbsrc)"
check() {
  if [ "$(checksums "$1")" != "$WANT" ]; then echo "!! $1: data differs from the source" >&2; exit 1; fi
}

echo "== dumping (mariadb-dump, mydumper)"
mariadb-dump --defaults-file="$CNF" sbsrc > "$WORK/dump.sql"
mydumper --defaults-file="$CNF" -B sbsrc -o "$WORK/mydumper" -t "$THREADS" >/dev/null 2>&1
DUMP_MB=$(python3 -c "import os; print(f'{os.path.getsize(\"$WORK/dump.sql\")/1e6:.0f}')")
for t in $(seq 1 "$TABLES"); do
  "${SQL[@]}" -e "SELECT * FROM sbsrc.sbtest$t INTO OUTFILE '$WORK/sbtest$t.tsv'"
done

ROUNDS="${ROUNDS:-1}"
RESULTS="$WORK/results"
: > "$RESULTS"
for round in $(seq 1 "$ROUNDS"); do
echo "== round $round of $ROUNDS: 1. mariadb < dump.sql"
fresh b_client; t0=$(now)
mariadb --defaults-file="$CNF" "${CLIENT_BINLOG[@]}" -D b_client < "$WORK/dump.sql"
T_CLIENT=$(secs "$t0" "$(now)"); check b_client

echo "== 2. myloader -t $THREADS"
fresh b_myloader; t0=$(now)
myloader --defaults-file="$CNF" "${MYLOADER_BINLOG[@]}" -d "$WORK/mydumper" -s sbsrc -B b_myloader -o -t "$THREADS" >/dev/null 2>&1
T_MYLOADER=$(secs "$t0" "$(now)"); check b_myloader

echo "== 3. LOAD DATA INFILE, $TABLES in parallel (ceiling)"
fresh b_ceiling "$(for t in $(seq 1 "$TABLES"); do printf 'CREATE TABLE b_ceiling.sbtest%s LIKE sbsrc.sbtest%s; ' "$t" "$t"; done)"
t0=$(now)
for t in $(seq 1 "$TABLES"); do
  "${SQL[@]}" -D b_ceiling -e "$CEILING_BINLOG SET unique_checks=0, foreign_key_checks=0; LOAD DATA INFILE '$WORK/sbtest$t.tsv' INTO TABLE sbtest$t" &
done
wait
T_CEILING=$(secs "$t0" "$(now)"); check b_ceiling

echo "== 4. sqlfleet load --threads $THREADS"
fresh b_sqlfleet; t0=$(now)
"$SQLFLEET" load --sandbox "$NAME" -D b_sqlfleet --threads "$THREADS" --progress none "${SQLFLEET_BINLOG[@]}" ${LOAD_ARGS:-} "$WORK/dump.sql"
T_SQLFLEET=$(secs "$t0" "$(now)"); check b_sqlfleet

echo "== 5. sqlfleet load --threads $THREADS on the mydumper directory"
fresh b_sqlfleet_dir; t0=$(now)
"$SQLFLEET" load --sandbox "$NAME" -D b_sqlfleet_dir --threads "$THREADS" --progress none "${SQLFLEET_BINLOG[@]}" ${LOAD_ARGS:-} "$WORK/mydumper" >/dev/null
T_SQLFLEET_DIR=$(secs "$t0" "$(now)"); check b_sqlfleet_dir
echo "$T_CLIENT $T_MYLOADER $T_CEILING $T_SQLFLEET $T_SQLFLEET_DIR" >> "$RESULTS"
echo "   round $round: client $T_CLIENT s, myloader $T_MYLOADER s, ceiling $T_CEILING s, sqlfleet $T_SQLFLEET s, sqlfleet on mydumper's directory $T_SQLFLEET_DIR s"
"${SQL[@]}" -e "DROP DATABASE b_client; DROP DATABASE b_myloader; DROP DATABASE b_ceiling; DROP DATABASE b_sqlfleet; DROP DATABASE b_sqlfleet_dir"
done

"${SQL[@]}" -e "DROP DATABASE sbsrc"
python3 - "$TOTAL" "$DUMP_MB" "$RESULTS" "$THREADS" "$TABLES" "$ROWS" "$BINLOG" <<'PY'
import sys, os, statistics
total, mb = int(sys.argv[1]), sys.argv[2]
rounds = [list(map(float, l.split())) for l in open(sys.argv[3]) if l.strip()]
threads, tables, rows, binlog = sys.argv[4:8]
names = ["mariadb < dump.sql", "myloader", "LOAD DATA INFILE (ceiling)", "sqlfleet load", "sqlfleet load (mydumper directory)"]
med = {k: statistics.median(r[i] for r in rounds) for i, k in enumerate(names)}
n = len(rounds)
print(f"\n{tables} tables x {rows} rows = {total} rows, plain dump {mb} MB, {threads} threads, {os.cpu_count()} CPUs; "
      f"{n} round{'s' if n > 1 else ''}; binary log {binlog} for every method; all results checksum-identical to the source\n")
print(f"| method | seconds{' (median)' if n > 1 else ''} | rows/s | sqlfleet speed-up |")
print("|---|---:|---:|---:|")
s = med["sqlfleet load"]
for k, v in med.items():
    print(f"| {k} | {v:.2f} | {total / v:,.0f} | {v / s:.2f}x |")
for label, mine, i, target in [("sqlfleet time / myloader time", 3, 1, "0.80"), ("sqlfleet time / ceiling time", 3, 2, "1.00"),
                                ("sqlfleet on the mydumper directory / myloader on it", 4, 1, "0.80")]:
    per = [r[mine] / r[i] for r in rounds]
    each = f" (rounds: {', '.join(f'{x:.2f}' for x in per)})" if n > 1 else ""
    print(f"\n{label} = {statistics.median(per):.2f}{' median' if n > 1 else ''} (target <= {target}){each}")
PY
