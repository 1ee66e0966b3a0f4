#!/usr/bin/env bash
# MariaDB Connector/C's own unit tests directly and through a relay in all
# three modes (transaction and session with per-user accounts, transaction
# with the shared account); CI runs the default mode and one other by seed
# (crates/relay/tests/connector_c.rs). Prints each mode's pass count
# against the direct run's.
#
# Usage: bench/connector_c.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
source scripts/env.sh
SQLFLEET_CONNECTOR_C_MODES=all cargo test -p sqlfleet-relay --test connector_c \
  connector_cs_own_tests_pass_through_the_relay -- --nocapture 2>&1 |
  grep -E "^(direct|transaction|session)|test result|panicked"
