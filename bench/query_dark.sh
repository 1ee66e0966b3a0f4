#!/usr/bin/env bash
# Hosts gone dark mid-statement, at fleet scale: HOSTS endpoints of one
# server (the server itself and links to it, each its own port), DARK of
# them stalled both ways once every `SELECT SLEEP(2)` runs; `sqlfleet query
# --query-timeout 3 --connect-timeout 2 --threads HOSTS`. Prints how long
# the run took after the statements started and checks every host's
# status (a dark host's never claims a kill it could not send). No root
# needed: the links are the test kit's (crates/testkit/src/netfault.rs).
#
# Usage: bench/query_dark.sh [HOSTS] [DARK]
set -euo pipefail
cd "$(dirname "$0")/.."
HOSTS="${1:-1000}"
DARK="${2:-100}"
bash scripts/deps.sh --core
ulimit -n 65536 2>/dev/null || true
SQLFLEET_DARK_FLEET="$HOSTS,$DARK" cargo test -q -p sqlfleet --test query -- --exact \
  a_host_gone_dark_mid_statement_is_released_at_its_query_timeout --nocapture 2>&1 \
  | grep -E 'dark fleet|panicked|test result' | cut -c1-400
echo "($(date -u +%Y-%m-%d))"
