#!/usr/bin/env bash
# From a fresh machine to sqlfleet's main job on a real server: installs
# only what the demo needs (scripts/deps.sh --core: mariadb-server,
# mariadb-client, a C compiler, make, curl, Rust), builds the release
# binary, starts a sandbox (a primary and two GTID replicas), makes a
# mariadb-dump of a generated schema, restores it with `sqlfleet load`, and
# checks the result on the primary and a replica.
#
# Usage: scripts/demo.sh [--cleanup]   (--cleanup: remove the sandbox at the end)
set -euo pipefail
cd "$(dirname "$0")/.."
CLEANUP=""
if [ "${1:-}" = "--cleanup" ]; then CLEANUP=1; fi
bash scripts/deps.sh --core
source scripts/env.sh
cargo build --release --quiet
SQLFLEET="$SQLFLEET_TARGET/release/sqlfleet"

"$SQLFLEET" sandbox up --name demo --replicas 2
CNF="$("$SQLFLEET" sandbox env --name demo --defaults-file)"
SQL=(mariadb --defaults-file="$CNF")
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

echo
echo "== a source schema: 4 tables x 100,000 rows, a view, a trigger, a procedure"
"${SQL[@]}" -e "DROP DATABASE IF EXISTS demo_src; CREATE DATABASE demo_src"
for t in 1 2 3 4; do
  "${SQL[@]}" -D demo_src -e "CREATE TABLE orders$t (id INT AUTO_INCREMENT PRIMARY KEY, customer INT NOT NULL,
      note VARCHAR(100), amount DECIMAL(10,2), created DATETIME, KEY (customer)) ENGINE=InnoDB;
    INSERT INTO orders$t (customer, note, amount, created)
      SELECT seq % 997, CONCAT('order ', seq, IF(seq % 7 = 0, ' with ''quotes'' and \\\\ backslash', '')),
             seq / 100, '2026-01-01' + INTERVAL seq MINUTE FROM seq_1_to_100000"
done
"${SQL[@]}" -D demo_src -e "CREATE VIEW big_customers AS SELECT customer, SUM(amount) total FROM orders1 GROUP BY customer HAVING total > 1000;
  CREATE TRIGGER orders1_bi BEFORE INSERT ON orders1 FOR EACH ROW SET NEW.note = UPPER(NEW.note);
  CREATE PROCEDURE order_count(OUT n INT) SELECT COUNT(*) INTO n FROM orders1;"
mariadb-dump --defaults-file="$CNF" --routines --triggers demo_src | gzip > "$WORK/demo.sql.gz"
ls -lh "$WORK/demo.sql.gz" | awk '{print "dump: " $5 " gzip"}'

echo
echo "== sqlfleet load (4 connections)"
"${SQL[@]}" -e "DROP DATABASE IF EXISTS demo_restored; CREATE DATABASE demo_restored"
"$SQLFLEET" load --sandbox demo -D demo_restored --threads 4 "$WORK/demo.sql.gz"

echo
echo "== checksums: source vs restored (primary) vs restored (replica node3)"
R2="$("$SQLFLEET" sandbox env --name demo --node node3 --defaults-file)"
for t in 1 2 3 4; do
  a=$("${SQL[@]}" -N -e "CHECKSUM TABLE demo_src.orders$t" | cut -f2)
  b=$("${SQL[@]}" -N -e "CHECKSUM TABLE demo_restored.orders$t" | cut -f2)
  for _ in $(seq 1 200); do
    c=$(mariadb --defaults-file="$R2" -N -e "CHECKSUM TABLE demo_restored.orders$t" 2>/dev/null | cut -f2)
    [ "$c" = "$a" ] && break; sleep 0.05
  done
  printf 'orders%s  %s  %s  %s  %s\n' "$t" "$a" "$b" "$c" "$([ "$a" = "$b" ] && [ "$b" = "$c" ] && echo same || echo DIFFERENT)"
done
"${SQL[@]}" -N -e "CALL demo_restored.order_count(@n); SELECT CONCAT('procedure works: ', @n, ' orders')"
echo
"$SQLFLEET" sandbox list
echo
if [ -n "$CLEANUP" ]; then
  "$SQLFLEET" sandbox destroy --name demo --yes
  echo "the demo sandbox is removed (--cleanup)"
else
  cat <<EOT
The sandbox 'demo' keeps running (three MariaDB servers on 127.0.0.1, data
under ${SQLFLEET_HOME:-$HOME/.local/share/sqlfleet}/sandboxes/demo) so you can try the other commands:
  $SQLFLEET query --sandbox demo -e 'SELECT @@hostname, @@port, @@read_only'
  $SQLFLEET watch --sandbox demo
  $SQLFLEET bench pool --sandbox demo --queries-per-connection 1,10 --threads 4
Stop it:   $SQLFLEET sandbox down --name demo
Remove it: $SQLFLEET sandbox destroy --name demo --yes   (or run the demo with --cleanup)
EOT
fi
