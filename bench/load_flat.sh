#!/usr/bin/env bash
# CSV/TSV benchmark: the same rows, as TSV and as CSV, loaded in one run on
# one sandbox server into one sysbench-style table by
#   1. the ceiling:  server-side LOAD DATA INFILE, one per file, all in parallel
#   2. mysqlimport --use-threads=THREADS --local   (one connection per file)
#   3. sqlfleet load --into --threads THREADS       (files cut into chunks)
# plus the one-big-file case: a single LOAD DATA INFILE of the whole file vs
# sqlfleet on that one file. Every result is checked with CHECKSUM TABLE.
# For each method the server's CPU seconds (its /proc counters) and the
# client's own (getrusage) are printed beside the time: where a method's
# time goes, and what the server does more for one than for another.
#
# Usage: bench/load_flat.sh [FILES] [ROWS_PER_FILE] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
FILES="${1:-8}"
ROWS="${2:-150000}"
THREADS="${3:-4}"

source bench/load_common.sh
load_bench_setup bench-flat
TOTAL=$((FILES * ROWS))

DDL="CREATE TABLE sbtest (id INT NOT NULL AUTO_INCREMENT, k INT NOT NULL DEFAULT 0,
  c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', PRIMARY KEY (id), KEY k_1 (k)) ENGINE=InnoDB"
echo "== generating $TOTAL rows, writing $FILES TSV and $FILES CSV files"
"${SQL[@]}" -e "DROP DATABASE IF EXISTS src; CREATE DATABASE src"
"${SQL[@]}" -D src -e "$DDL; INSERT INTO sbtest (k, c, pad)
  SELECT FLOOR(RAND(seq) * $TOTAL),
    CONCAT_WS('-', LPAD(FLOOR(RAND(seq) * 1e11), 11, '0'), LPAD(FLOOR(RAND(seq + 1) * 1e11), 11, '0'), 'x,\"y\"',
                   LPAD(FLOOR(RAND(seq + 2) * 1e11), 11, '0'), LPAD(FLOOR(RAND(seq + 3) * 1e11), 11, '0')),
    CONCAT_WS('-', LPAD(FLOOR(RAND(seq * 3) * 1e11), 11, '0'), LPAD(FLOOR(RAND(seq * 5) * 1e11), 11, '0'))
  FROM seq_1_to_$TOTAL"
WANT="$("${SQL[@]}" -e "CHECKSUM TABLE src.sbtest" | cut -f2)"
for i in $(seq 1 "$FILES"); do
  mkdir -p "$WORK/tsv$i" "$WORK/csv$i"
  lo=$(( (i - 1) * ROWS + 1 )); hi=$(( i * ROWS ))
  "${SQL[@]}" -e "SELECT * FROM src.sbtest WHERE id BETWEEN $lo AND $hi INTO OUTFILE '$WORK/tsv$i/sbtest.tsv'"
  "${SQL[@]}" -e "SELECT * FROM src.sbtest WHERE id BETWEEN $lo AND $hi INTO OUTFILE '$WORK/csv$i/sbtest.csv'
    FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"'"
done
cat "$WORK"/tsv*/sbtest.tsv > "$WORK/all.tsv"
MB=$(du -m "$WORK/all.tsv" | cut -f1)
fresh_flat() { fresh "$1" "CREATE TABLE $1.sbtest LIKE src.sbtest;"; }
check() { [ "$("${SQL[@]}" -e "CHECKSUM TABLE $1.sbtest" | cut -f2)" = "$WANT" ] || { echo "!! $1 differs from the source" >&2; exit 1; }; }
CSVCLAUSE="FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"'"
declare -A T S C
MYSQLD_PID="$("${SQL[@]}" -e 'SELECT @@pid_file' | xargs cat)"
TICK="$(getconf CLK_TCK)"
srv_cpu() { awk -v t="$TICK" '{printf "%.2f", ($14 + $15) / t}' "/proc/$MYSQLD_PID/stat"; }
# timed KEY CMD...: the command's wall time into T, the server's CPU over
# it into S, the command's own CPU (user + system, its children too) into C.
timed() {
  local key="$1"; shift
  local s0 t0; s0="$(srv_cpu)"; t0="$(now)"
  /usr/bin/time -f '%U %S' -o "$WORK/cpu" "$@"
  T[$key]=$(secs "$t0" "$(now)")
  S[$key]=$(python3 -c "print(f'{$(srv_cpu) - $s0:.2f}')")
  C[$key]=$(awk '{printf "%.2f", $1 + $2}' "$WORK/cpu")
}
# ceiling_script FORMAT CLAUSE: a script that loads the files of FORMAT,
# each by its own server-side LOAD DATA INFILE, all at once.
ceiling_script() {
  local f="$WORK/ceiling-$1.sh" i
  for i in $(seq 1 "$FILES"); do
    printf '%q ' "${SQL[@]}" -e "LOAD DATA INFILE '$WORK/$1$i/sbtest.$1' INTO TABLE ceil.sbtest $2"
    printf '&\n'
  done > "$f"
  echo wait >> "$f"
  echo "$f"
}
for fmt in tsv csv; do
  clause=""; [ "$fmt" = csv ] && clause="$CSVCLAUSE"
  echo "== $fmt: ceiling, $FILES parallel LOAD DATA INFILE"
  fresh_flat ceil
  timed "$fmt,ceiling" bash "$(ceiling_script "$fmt" "$clause")"
  check ceil
  echo "== $fmt: mysqlimport --use-threads=$THREADS --local"
  fresh_flat imp
  extra=(); [ "$fmt" = csv ] && extra=(--fields-terminated-by=, --fields-optionally-enclosed-by='"')
  timed "$fmt,mysqlimport" mariadb-import --defaults-file="$CNF" --local --use-threads="$THREADS" "${extra[@]}" imp \
    $(for i in $(seq 1 "$FILES"); do echo "$WORK/$fmt$i/sbtest.$fmt"; done) >/dev/null
  check imp
  echo "== $fmt: sqlfleet load --into --threads $THREADS"
  fresh_flat sf
  timed "$fmt,sqlfleet" "$SQLFLEET" load --sandbox "$NAME" --into sf.sbtest --format "$fmt" --threads "$THREADS" --progress none \
    $(for i in $(seq 1 "$FILES"); do echo "$WORK/$fmt$i/sbtest.$fmt"; done) >/dev/null
  check sf
done
echo "== one big TSV file: one LOAD DATA INFILE vs sqlfleet"
fresh_flat one
timed "big,ceiling" "${SQL[@]}" -e "LOAD DATA INFILE '$WORK/all.tsv' INTO TABLE one.sbtest"
check one
fresh_flat onesf
timed "big,sqlfleet" "$SQLFLEET" load --sandbox "$NAME" --into onesf.sbtest --threads "$THREADS" --progress none "$WORK/all.tsv" >/dev/null
check onesf
"${SQL[@]}" -e "DROP DATABASE src; DROP DATABASE ceil; DROP DATABASE imp; DROP DATABASE sf; DROP DATABASE one; DROP DATABASE onesf"

echo
echo "$FILES files x $ROWS rows = $TOTAL rows ($MB MB as TSV) into one table with an AUTO_INCREMENT key and a secondary index; $THREADS threads; $(nproc) CPUs; all checksum-identical"
echo
echo "| data | method | seconds | rows/s | sqlfleet / method | server CPU s | client CPU s |"
echo "|---|---|---:|---:|---:|---:|---:|"
row() {  # DATA-LABEL KEY-PREFIX METHOD
  python3 -c "t=${T[$2,$3]}; s=${T[$2,sqlfleet]}; print(f'| $1 | $3 | {t:.2f} | {$TOTAL/t:,.0f} | {s/t:.2f} | ${S[$2,$3]} | ${C[$2,$3]} |')"
}
for fmt in tsv csv; do
  for m in ceiling mysqlimport sqlfleet; do row "$FILES $fmt files" "$fmt" "$m"; done
done
for m in ceiling sqlfleet; do row "one big tsv file" big "$m"; done
