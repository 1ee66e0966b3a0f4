#!/usr/bin/env bash
# Read-your-writes through the relay, counted (run from the repository root):
#
#   bash bench/causal.sh [PAIRS]      # default 20000 per topology
#
# Four clients each insert a row (autocommit, text protocol) and read it
# straight back through the relay (read/write split, consistency =
# "session"), PAIRS pairs in all, first on the tests' primary + 2 replicas
# sandbox (replicas wait with MASTER_GTID_WAIT), then on their 3-node
# Galera cluster (the read carries SET STATEMENT wsrep_sync_wait = 1).
# Prints, per topology, the pairs, the reads that missed their own row
# (must be 0) and where reads ran. CI runs the same tests with 2000.
set -euo pipefail
PAIRS=${1:-20000}
bash scripts/deps.sh
source scripts/env.sh
export SQLFLEET_CAUSAL_PAIRS=$PAIRS
cargo test -q -p sqlfleet-relay --test relay_routing -- --nocapture \
  read_your_writes_holds_over_many_pairs 2>&1 | grep -E "read-your-writes|test result|panicked"
cargo test -q -p sqlfleet-relay --test relay_galera -- --nocapture 2>&1 \
  | grep -E "read-your-writes|test result|panicked"
