#!/usr/bin/env bash
# The relay's configuration matrix, whole: seven client libraries (the
# mariadb CLI, MySQLdb, PyMySQL, PHP mysqli, go-sql-driver, mysql2,
# Connector/J) x backend TLS {disabled, required} x mode {transaction,
# session} x accounts {shared, per-user} = 56 pairs, each client's program
# run directly and through the relay with the outputs compared line for
# line (crates/relay/tests/relay_matrix.rs; CI runs a 14-pair slice).
#
# Usage: bench/relay_matrix.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SQLFLEET_MATRIX=all cargo test --release -p sqlfleet-relay --test relay_matrix -- --nocapture
