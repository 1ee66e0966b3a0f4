#!/usr/bin/env bash
# Installs what sqlfleet needs on Debian/Ubuntu, only what is absent.
#
#   scripts/deps.sh --core   what the demo and an install need: mariadb-server
#                            and mariadb-client (sandboxes, the stock client
#                            load is compared with), a C compiler and make
#                            (the crypto crate), curl, and Rust via the
#                            system's rustup package when cargo is missing.
#   scripts/deps.sh          the core set plus everything the tests drive:
#                            the server's mysql-test suite, promtool,
#                            headless Chromium, sshd/ssh, tmux, sysbench,
#                            Go, a JDK, Node/npm (mysql2), PHP, Python
#                            drivers, fonts for PNG charts, Connector/C's
#                            unit tests (scripts/connector_c.sh), MySQLdb's
#                            test suite (scripts/mysqldb_suite.sh), mydumper
#                            (its directories, with myloader as the oracle),
#                            MariaDB 11.4 beside Debian's 10.11
#                            (scripts/mariadb_next.sh, Maven) and mdbook
#                            (cargo install).
#   scripts/deps.sh PKG...   the full set plus these Debian packages.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/apt.sh"
CORE=""
if [ "${1:-}" = "--core" ]; then CORE=1; shift; fi

need=()
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }
have mariadbd || need+=(mariadb-server)
# Galera sandboxes: the provider and rsync state transfers (Debian's
# mariadb-server depends on both; a server from elsewhere may lack them).
[ -f /usr/lib/galera/libgalera_smm.so ] || need+=(galera-4)
have rsync || need+=(rsync)
have mariadb || need+=(mariadb-client)
have mariadb-dump || need+=(mariadb-client)
have cc || need+=(gcc libc6-dev)
have make || need+=(make)
have curl || need+=(curl ca-certificates)
if [ -z "$CORE" ]; then
have python3 || need+=(python3)
have openssl || need+=(openssl)             # relay TLS test certificates
[ -f /usr/share/mysql/mysql-test/mariadb-test-run.pl ] || need+=(mariadb-test)   # the server's own suite, run through the relay
have perl || need+=(perl)
have promtool || need+=(prometheus)         # promtool checks the relay's and watch's /metrics
have prometheus-alertmanager || need+=(prometheus-alertmanager)   # watch's Alertmanager channel, two watchers deduplicated
have chromium || need+=(chromium)           # watch's pages, loaded in a real (headless) browser
have sshd || need+=(openssh-server)         # watch's host metrics over a real SSH session
have ssh || need+=(openssh-client)
have tmux || need+=(tmux)                   # watch's terminal screen, driven in a pane
[ -d /usr/share/fonts/truetype/dejavu ] || need+=(fonts-dejavu-core)   # text in bench's PNG charts
# Real clients the relay tests drive: sysbench, PyMySQL, MySQLdb, PHP mysqli, go-sql-driver,
# MariaDB Connector/J (Debian packages), mysql2 (npm, below).
have sysbench || need+=(sysbench)
have mydumper || need+=(mydumper)   # mydumper directories, loaded by myloader as the oracle
have go || need+=(golang-go)
have javac || need+=(default-jdk-headless)
have node || need+=(nodejs)
have npm || need+=(npm)
# Python MySQLdb (mysqlclient, on libmariadb) and PHP mysqli (mysqlnd) for
# the relay's client x configuration matrix.
have php || need+=(php-cli)
# MySQLdb's own test suite (scripts/mysqldb_suite.sh) runs under pytest and
# imports mock.
for pkg in python3-pymysql python3-mysqldb python3-pytest python3-mock php-mysql golang-github-go-sql-driver-mysql-dev libmariadb-java; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
fi
# Extra Debian packages asked for by name (benchmarks), if not installed.
for extra in "$@"; do
  dpkg -s "$extra" >/dev/null 2>&1 || need+=("$extra")
done

apt_install deps ${need[@]+"${need[@]}"}

NODE_DIR="$HOME/.cache/sqlfleet/node"
if [ -z "$CORE" ] && [ ! -d "$NODE_DIR/node_modules/mysql2" ]; then
  echo "deps: installing mysql2 (npm) into $NODE_DIR" >&2
  mkdir -p "$NODE_DIR"
  (cd "$NODE_DIR" && npm install --silent --no-audit --no-fund mysql2 >/dev/null)
fi

# MariaDB Connector/C's own unit tests, run directly and through the relay
# (crates/relay/tests/connector_c.rs): built once from Debian's source.
if [ -z "$CORE" ]; then
  "$(dirname "$0")/connector_c.sh" >/dev/null
  # MySQLdb's own tests, run directly and through the relay
  # (crates/relay/tests/peer_suite.rs): fetched once from Debian's source.
  "$(dirname "$0")/mysqldb_suite.sh" >/dev/null
  # A newer server than Debian's (MariaDB 11.4, through Maven): what a
  # newer source writes into its binlog, read by replicate's tests.
  "$(dirname "$0")/mariadb_next.sh" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
  # Through the package manager as configured: Debian 13+ packages rustup,
  # which then fetches the toolchain from its own configured channel.
  if apt-cache show rustup >/dev/null 2>&1; then
    apt_install "deps (Rust, with Debian's rustup)" rustup
    rustup default stable >/dev/null
    rustup component add clippy rustfmt >/dev/null
  else
    echo "deps: cargo is missing and this system's packages have no rustup: install Rust (rustup, or your distribution's cargo) and run this again" >&2
    exit 1
  fi
fi

# The guide's book builder (tests build docs/ with it), once cargo is here.
if [ -z "$CORE" ] && ! [ -x "$HOME/.cargo/bin/mdbook" ] && ! command -v mdbook >/dev/null 2>&1; then
  echo "deps: installing mdbook (cargo install)" >&2
  export PATH="$HOME/.cargo/bin:$PATH"
  cargo install --quiet --locked --no-default-features mdbook
fi
