#!/usr/bin/env bash
# Client libraries' own test suites directly and through the relay in
# every mode their tests list: MariaDB Connector/C's unit tests
# (transaction and session with per-user accounts, transaction with the
# shared account) and go-sql-driver's (transaction per-user and session
# shared, over a read/write split). CI runs a seeded slice of the modes
# (crates/relay/tests/common/relay.rs, seeded_modes). Prints each mode's
# pass count against the direct run's.
#
# Usage: bench/client_suites.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
source scripts/env.sh
SQLFLEET_CONNECTOR_C_MODES=all SQLFLEET_GO_SUITE_MODES=all \
  cargo test -p sqlfleet-relay --test connector_c --test peer_suite \
  -- --nocapture --test-threads 1 2>&1 |
  grep -E "^(direct|transaction|session)|test result|panicked"
