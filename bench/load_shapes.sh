#!/usr/bin/env bash
# Dump shapes where per-table overhead shows: many tiny tables and one big
# one (the shape of an application schema with a log table). Loaded in
# one run on one sandbox by
#   1. the stock client:  mariadb < dump.sql
#   2. myloader           on a mydumper dump of the same database
#   3. sqlfleet load      on the plain mariadb-dump file
# Each result is checked (CHECKSUM TABLE of every table equals the source).
#
# Usage: bench/load_shapes.sh [SMALL_TABLES] [BIG_TABLE_ROWS] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
SMALL="${1:-2000}"
BIG="${2:-1000000}"
THREADS="${3:-4}"

source bench/load_common.sh
load_bench_setup bench-shapes mydumper

echo "== generating $SMALL small tables and one of $BIG rows"
"${SQL[@]}" -e "DROP DATABASE IF EXISTS shsrc; CREATE DATABASE shsrc"
python3 - "$SMALL" > "$WORK/small.sql" <<'PY'
import sys
for i in range(int(sys.argv[1])):
    print(f"CREATE TABLE s{i} (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, name VARCHAR(40), created DATETIME, KEY (name)) ENGINE=InnoDB;")
    rows = ",".join(f"({j}, 'name {i}-{j}', '2024-01-{1 + j % 28:02d} 10:00:00')" for j in range(1, 1 + i % 7))
    if rows:
        print(f"INSERT INTO s{i} VALUES {rows};")
PY
"${SQL[@]}" -D shsrc < "$WORK/small.sql"
"${SQL[@]}" -D shsrc -e "CREATE TABLE big (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, k INT NOT NULL, c CHAR(100) NOT NULL, KEY (k)) ENGINE=InnoDB;
  INSERT INTO big (k, c) SELECT FLOOR(RAND(seq) * $BIG), LPAD(seq, 100, 'x') FROM seq_1_to_$BIG;"
checksums() { "${SQL[@]}" -e "SELECT table_name FROM information_schema.tables WHERE table_schema = 'shsrc' ORDER BY 1" \
  | awk -v db="$1" '{printf "%s%s.%s", (NR>1?",":""), db, $1}' | xargs -I{} "${SQL[@]}" -e "CHECKSUM TABLE {}" | awk '{print $2}' | md5sum; }
WANT="$(checksums shsrc)"
check() { if [ "$(checksums "$1")" != "$WANT" ]; then echo "!! $1: data differs from the source" >&2; exit 1; fi; }

echo "== dumping"
mariadb-dump --defaults-file="$CNF" shsrc > "$WORK/dump.sql"
mydumper --defaults-file="$CNF" -B shsrc -o "$WORK/mydumper" -t "$THREADS" >/dev/null 2>&1
DUMP_MB=$(python3 -c "import os; print(f'{os.path.getsize(\"$WORK/dump.sql\")/1e6:.0f}')")

echo "== 1. mariadb < dump.sql"
fresh x_client; t0=$(now)
mariadb --defaults-file="$CNF" -D x_client < "$WORK/dump.sql"
T_CLIENT=$(secs "$t0" "$(now)"); check x_client

echo "== 2. myloader -t $THREADS"
fresh x_myloader; t0=$(now)
myloader --defaults-file="$CNF" -d "$WORK/mydumper" -s shsrc -B x_myloader -o -t "$THREADS" >/dev/null 2>&1
T_MYLOADER=$(secs "$t0" "$(now)"); check x_myloader

echo "== 3. sqlfleet load --threads $THREADS"
fresh x_sqlfleet; t0=$(now)
"$SQLFLEET" load --sandbox "$NAME" -D x_sqlfleet --threads "$THREADS" --progress none ${LOAD_ARGS:-} "$WORK/dump.sql"
T_SQLFLEET=$(secs "$t0" "$(now)"); check x_sqlfleet

"${SQL[@]}" -e "DROP DATABASE x_client; DROP DATABASE x_myloader; DROP DATABASE x_sqlfleet; DROP DATABASE shsrc"
python3 - "$SMALL" "$BIG" "$DUMP_MB" "$T_CLIENT" "$T_MYLOADER" "$T_SQLFLEET" "$THREADS" <<'PY'
import sys, os
small, big, mb = sys.argv[1:4]
t = dict(zip(["mariadb < dump.sql", "myloader", "sqlfleet load"], map(float, sys.argv[4:7])))
print(f"\n{small} small tables + 1 table of {big} rows, plain dump {mb} MB, {sys.argv[7]} threads, {os.cpu_count()} CPUs; all results checksum-identical to the source\n")
print("| method | seconds | sqlfleet speed-up |")
print("|---|---:|---:|")
s = t["sqlfleet load"]
for k, v in t.items():
    print(f"| {k} | {v:.2f} | {v / s:.2f}x |")
print(f"\nsqlfleet time / stock client time = {s / t['mariadb < dump.sql']:.2f} (target <= 1.00)")
print(f"sqlfleet time / myloader time     = {s / t['myloader']:.2f}")
PY
