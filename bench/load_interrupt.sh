#!/usr/bin/env bash
# The newcomer's interrupt, measured: a ~160 MB mariadb-dump of 3 tables
# (300,000 rows each, extended INSERTs), `sqlfleet load --threads 2` into
# a sandbox, SIGINT (what Ctrl-C sends) or SIGTERM DELAY seconds in, TRIES
# times. Each try reports the exit code and how long after the signal the
# process was gone; then `--resume` runs and every table's CHECKSUM must
# equal the stock client's load of the same file.
# Prints one line per try and a summary line to paste into
# docs/benchmarks.md.
#
# Usage: bench/load_interrupt.sh [TRIES] [DELAY] [INT|TERM]
set -euo pipefail
cd "$(dirname "$0")/.."
TRIES="${1:-10}"
DELAY="${2:-2.5}"
SIG="${3:-INT}"
source bench/load_common.sh
load_bench_setup load-interrupt

# The source: three tables the stock client then loads as the oracle.
"${SQL[@]}" -e "CREATE DATABASE src"
for t in 1 2 3; do
  "${SQL[@]}" -D src -e "CREATE TABLE t$t (id INT PRIMARY KEY, k INT NOT NULL, c CHAR(120) NOT NULL, pad CHAR(40) NOT NULL, KEY (k));
    INSERT INTO t$t SELECT seq, seq * 7919 % 300000, REPEAT(CHAR(97 + seq % 26), 120), LPAD(seq, 40, '0') FROM seq_1_to_300000"
done
mariadb-dump --defaults-file="$CNF" src > "$WORK/big.sql"
echo "dump: $(du -h "$WORK/big.sql" | cut -f1), $(grep -c '^INSERT' "$WORK/big.sql") INSERTs" >&2
"${SQL[@]}" -e "CREATE DATABASE stock"
mariadb --defaults-file="$CNF" -D stock < "$WORK/big.sql"
sums() { "${SQL[@]}" -e "CHECKSUM TABLE $1.t1, $1.t2, $1.t3" | cut -f2 | tr '\n' ' '; }
want="$(sums stock)"

nonzero=0
equal=0
slowest=0
for i in $(seq 1 "$TRIES"); do
  "${SQL[@]}" -e "DROP DATABASE IF EXISTS ours; CREATE DATABASE ours"
  "$SQLFLEET" load --defaults-file="$CNF" -D ours --threads 2 --progress none --restart "$WORK/big.sql" >/dev/null 2>"$WORK/err" &
  pid=$!
  sleep "$DELAY"
  t0=$(now)
  kill "-$SIG" "$pid"
  code=0
  wait "$pid" || code=$?
  took=$(awk -v a="$t0" -v b="$(now)" 'BEGIN {printf "%.3f", b - a}')
  [ "$code" -ne 0 ] && nonzero=$((nonzero + 1))
  slowest=$(awk -v a="$took" -v b="$slowest" 'BEGIN {print (a > b) ? a : b}')
  "$SQLFLEET" load --defaults-file="$CNF" -D ours --threads 2 --progress none --resume "$WORK/big.sql" >/dev/null 2>"$WORK/err2" || {
    echo "try $i: the resume failed: $(cat "$WORK/err2")" >&2
  }
  got="$(sums ours)"
  # (VERBOSE=1: each try's checksums and messages)
  [ -n "${VERBOSE:-}" ] && { echo "want $want got $got"; cat "$WORK/err" "$WORK/err2"; } >&2
  same=no
  [ "$got" = "$want" ] && { same=yes; equal=$((equal + 1)); }
  printf 'try %d: SIG%s %ss in: exit %d, gone %.3f s after the signal; --resume equal to the stock client: %s\n' \
    "$i" "$SIG" "$DELAY" "$code" "$took" "$same"
done
printf 'summary: %d of %d tries exited non-zero, slowest %.3f s after SIG%s; %d of %d resumed equal to the stock client (%s)\n' \
  "$nonzero" "$TRIES" "$slowest" "$SIG" "$equal" "$TRIES" "$(date -u +%Y-%m-%d)"
