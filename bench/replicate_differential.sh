#!/usr/bin/env bash
# replicate's oracle with a bigger budget than CI's: SEEDS seeded
# workloads on two sources (ROW, MIXED or STATEMENT binlogs; FULL, MINIMAL
# or NOBLOB row images; per source compressed events, no checksum,
# two-phase ALTERs, table map metadata, annotations, group commit ids;
# some runs stopped half-way, some with the target
# killed -9), each copied by sqlfleet replicate (one database renamed per
# source) and by MariaDB's own multi-source replication; every object of
# the two copies compared. Prints each seed that differs (its workload is
# kept under target/tmp/replicate-differential/) and the totals;
# SQLFLEET_REPL_DIFF_SEED=<seed> SQLFLEET_REPL_DIFF_SEEDS=1 replays one.
# SERVER=next runs every server of it (sources, native replicas, target)
# as MariaDB 11.4 (scripts/mariadb_next.sh) instead of the system's: the
# session variables drawn are then 11.4's.
#
# Usage: [SERVER=next] bench/replicate_differential.sh [SEEDS] [FIRST_SEED] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
source scripts/env.sh
log="${SQLFLEET_TARGET:-target}/replicate-differential.log"
if [ "${SERVER:-}" = "next" ]; then
  SQLFLEET_MARIADBD="$(scripts/mariadb_next.sh)"
  export SQLFLEET_MARIADBD
fi
rc=0
SQLFLEET_REPL_DIFF_SEEDS="${1:-500}" SQLFLEET_REPL_DIFF_SEED="${2:-1}" SQLFLEET_REPL_DIFF_STEPS="${3:-40}" \
  cargo test -p sqlfleet-replicate --test differential -- --nocapture >"$log" 2>&1 || rc=1
grep -E -A2 "^replicate differential:|^seed .*(differences|refused)|^  |panicked|test result" "$log" || true
echo "(the whole output: $log)"
exit "$rc"
