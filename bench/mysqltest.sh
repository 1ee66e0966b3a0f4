#!/usr/bin/env bash
# MariaDB's own test suite through the relay: the full curated list of
# `main` tests (crates/relay/tests/mysqltest/full.list) runs with
# mariadb-test-run --extern directly, then through the relay in transaction
# and in session mode, each on a fresh server started with the suite's own
# options, with shared and with per-user backend accounts. Prints the pass
# counts (recorded in docs/benchmarks.md).
#
# How the list is chosen: every main/*.test that has no .opt/.cnf file of
# its own (those need a server started with other options) and does not
# restart, kill or shut down the server, need debug builds, binary logs,
# replication, SSL, files in the suite's var directory or exec of other
# programs, or empty the privilege tables (2026-11-26: 587 candidates; the
# partition, sequence and big tests are in since then); of those, the tests
# that pass when run directly against such a server. `--list` rebuilds the candidates (the passing ones are then
# taken from a direct run's output).
#
# Usage: [ACCOUNTS="per-user shared"] [SQLFLEET_MYSQLTEST_REPEAT=N] bench/mysqltest.sh [--list]
# (N: each test run N times in a row, a hunt for a failure that comes now
# and then; a test keeps its first failure.)
set -euo pipefail
cd "$(dirname "$0")/.."
suite=/usr/share/mysql/mysql-test
if [ "${1:-}" = "--list" ]; then
  cd "$suite/main"
  # A test's text with every file it sources, followed down (a test that
  # shuts the server down from an included file, as xa_prepared_binlog_off
  # does through suite/binlog, would end the run for every test after it).
  declare -A seen
  with_sources() {
    local f=$1 inc
    [ -f "$f" ] || return 0
    [ -n "${seen[$f]:-}" ] && return 0
    seen[$f]=1
    tr -d '\000' <"$f"
    for inc in $(grep -aoiE '^[[:space:]]*-*source[[:space:]]+[^;[:space:]]+' "$f" | awk '{print $NF}'); do
      case $inc in
        /*) with_sources "$inc" ;;
        *) with_sources "$suite/$inc"; with_sources "$suite/main/$inc" ;;
      esac
    done
  }
  for f in *.test; do
    t=${f%.test}
    ls "$t.opt" "$t-master.opt" "$t.cnf" "$t-slave.opt" 2>/dev/null | grep -q . && continue
    seen=()
    text=$(with_sources "$f")
    grep -qiE 'shutdown|restart_mysqld|kill_mysqld|crash|have_debug|not_embedded_server|wait_until_disconnected|have_binlog|have_log_bin|master-slave|rpl_|\$MYSQLD|exec |--exec|have_ssl|have_openssl|have_perfschema|mysqld\.1|\$MYSQL_TMP_DIR|\$MYSQLTEST_VARDIR|remove_file|write_file|long_test' <<<"$text" && continue
    # Tests that empty the privilege tables through --extern (they need
    # the suite's own socket variables) lock every later test out.
    grep -qE '\$MASTER_MY|truncate table mysql|global_priv' <<<"$text" && continue
    echo "main.$t"
  done
  exit 0
fi
# Once with the relay's one shared backend account, once with per-user
# accounts (the recommended mode, where tests that log in as accounts they
# create run too: known.list tags them [shared]).
for accounts in ${ACCOUNTS:-per-user shared}; do
  report=$(mktemp)
  SQLFLEET_MYSQLTEST_LIST="$PWD/crates/relay/tests/mysqltest/full.list" \
  SQLFLEET_MYSQLTEST_ACCOUNTS="$accounts" \
  SQLFLEET_MYSQLTEST_REPORT="$report" \
    cargo test --release -p sqlfleet-relay --test mysql_test the_servers_own -- --nocapture || true
  echo "== mariadb-test-run main, full curated list, $accounts accounts =="
  cat "$report"
done
