#!/usr/bin/env bash
# From a fresh machine to sqlfleet running on a real server: installs what
# is needed, builds the release binary, starts a sandbox (primary and two
# replicas) and runs the main job against it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
source scripts/env.sh
cargo build --release --quiet
SQLFLEET="$SQLFLEET_TARGET/release/sqlfleet"

"$SQLFLEET" sandbox up --name demo --replicas 2
CNF="$("$SQLFLEET" sandbox env --name demo --defaults-file)"
echo
echo "== a write on the primary, read back on a replica"
mariadb --defaults-file="$CNF" -e "CREATE DATABASE IF NOT EXISTS demo; CREATE TABLE IF NOT EXISTS demo.hello (id INT PRIMARY KEY, msg VARCHAR(40)); REPLACE INTO demo.hello VALUES (1, CONCAT('hello from ', @@hostname, ' at ', NOW()))"
R1="$("$SQLFLEET" sandbox env --name demo --node replica1 --defaults-file)"
for _ in $(seq 1 100); do
  if mariadb --defaults-file="$R1" -N -e "SELECT msg FROM demo.hello" 2>/dev/null | grep -q hello; then break; fi
  sleep 0.05
done
mariadb --defaults-file="$R1" -e "SELECT @@port AS replica_port, msg FROM demo.hello"
echo
"$SQLFLEET" sandbox list
echo
echo "Stop it with: $SQLFLEET sandbox down --name demo"
