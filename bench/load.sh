#!/usr/bin/env bash
# Restore benchmark: the same sysbench-style tables loaded, in one run on
# one sandbox server, by
#   1. the stock client:  mariadb < dump.sql         (plain mariadb-dump)
#   2. myloader           on a mydumper dump of the same tables
#   3. the ceiling:       server-side LOAD DATA INFILE, one per table, in parallel
#   4. sqlfleet load      on the plain mariadb-dump file
# Each result is checked (CHECKSUM TABLE of every table equals the source).
# Prints seconds, rows/s and ratios; append the table to docs/benchmarks.md.
#
# Usage: bench/load.sh [TABLES] [ROWS_PER_TABLE] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
TABLES="${1:-8}"
ROWS="${2:-150000}"
THREADS="${3:-4}"

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

echo "== 1. mariadb < dump.sql"
fresh b_client; t0=$(now)
mariadb --defaults-file="$CNF" -D b_client < "$WORK/dump.sql"
T_CLIENT=$(secs "$t0" "$(now)"); check b_client

echo "== 2. myloader -t $THREADS"
fresh b_myloader; t0=$(now)
myloader --defaults-file="$CNF" -d "$WORK/mydumper" -s sbsrc -B b_myloader -o -t "$THREADS" >/dev/null 2>&1
T_MYLOADER=$(secs "$t0" "$(now)"); check b_myloader

echo "== 3. LOAD DATA INFILE, $TABLES in parallel (ceiling)"
fresh b_ceiling
for t in $(seq 1 "$TABLES"); do "${SQL[@]}" -D b_ceiling -e "CREATE TABLE sbtest$t LIKE sbsrc.sbtest$t"; done
t0=$(now)
for t in $(seq 1 "$TABLES"); do
  "${SQL[@]}" -D b_ceiling -e "SET unique_checks=0, foreign_key_checks=0; LOAD DATA INFILE '$WORK/sbtest$t.tsv' INTO TABLE sbtest$t" &
done
wait
T_CEILING=$(secs "$t0" "$(now)"); check b_ceiling

echo "== 4. sqlfleet load --threads $THREADS"
fresh b_sqlfleet; t0=$(now)
"$SQLFLEET" load --sandbox "$NAME" -D b_sqlfleet --threads "$THREADS" --progress none ${LOAD_ARGS:-} "$WORK/dump.sql"
T_SQLFLEET=$(secs "$t0" "$(now)"); check b_sqlfleet

"${SQL[@]}" -e "DROP DATABASE b_client; DROP DATABASE b_myloader; DROP DATABASE b_ceiling; DROP DATABASE b_sqlfleet; DROP DATABASE sbsrc"
python3 - "$TOTAL" "$DUMP_MB" "$T_CLIENT" "$T_MYLOADER" "$T_CEILING" "$T_SQLFLEET" "$THREADS" "$TABLES" "$ROWS" <<'PY'
import sys, platform, os
total, mb = int(sys.argv[1]), sys.argv[2]
t = dict(zip(["mariadb < dump.sql", "myloader", "LOAD DATA INFILE (ceiling)", "sqlfleet load"], map(float, sys.argv[3:7])))
threads, tables, rows = sys.argv[7:10]
print(f"\n{tables} tables x {rows} rows = {total} rows, plain dump {mb} MB, {threads} threads, {os.cpu_count()} CPUs; all results checksum-identical to the source\n")
print("| method | seconds | rows/s | sqlfleet speed-up |")
print("|---|---:|---:|---:|")
s = t["sqlfleet load"]
for k, v in t.items():
    print(f"| {k} | {v:.2f} | {total / v:,.0f} | {v / s:.2f}x |")
print(f"\nsqlfleet time / myloader time = {s / t['myloader']:.2f} (target <= 0.90)")
print(f"sqlfleet time / ceiling time  = {s / t['LOAD DATA INFILE (ceiling)']:.2f} (target <= 1.15)")
PY
