#!/usr/bin/env bash
# Builds MariaDB Connector/C's own unit tests (the library under the mariadb
# client, MySQLdb and PHP's mysqlnd-less builds) for the relay's oracle test
# crates/relay/tests/connector_c.rs.
#
# The source is the libmariadb/ tree of the `mariadb` source package of the
# Debian archives apt is configured with, fetched by `apt-get source`
# (scripts/deb_src.sh, which adds deb-src entries where apt has none). Only
# the libmariadb/ tree is unpacked and built (cmake, a C compiler, zlib and
# OpenSSL headers). The build lands in $HOME/.cache/sqlfleet/connector-c/
# and is reused while it is there.
#
#   scripts/connector_c.sh          build if absent; print the test directory
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$HOME/.cache/sqlfleet/connector-c"
DONE="$ROOT/build/unittest/libmariadb/.built"
if [ -f "$DONE" ]; then
  dirname "$DONE"
  exit 0
fi

source "$(dirname "${BASH_SOURCE[0]}")/apt.sh"
need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v make >/dev/null 2>&1 || need+=(make)
dpkg -s zlib1g-dev >/dev/null 2>&1 || need+=(zlib1g-dev)
dpkg -s libssl-dev >/dev/null 2>&1 || need+=(libssl-dev)
apt_install connector_c ${need[@]+"${need[@]}"}

mkdir -p "$ROOT"
cd "$ROOT"
rm -f mariadb_*
"$HERE/deb_src.sh" mariadb >/dev/null
FILES=(mariadb_*.orig.tar.gz)
FILE="${FILES[0]}"
if [ ! -f "$FILE" ]; then
  echo "connector_c: apt-get source mariadb brought no orig tarball" >&2
  exit 1
fi
rm -rf src build
mkdir src
tar xzf "$FILE" -C src --strip-components=1 --wildcards '*/libmariadb/*'
mkdir build
cd build
cmake ../src/libmariadb -DWITH_UNIT_TESTS=ON -DWITH_CURL=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >cmake.log 2>&1 \
  || { tail -20 cmake.log >&2; exit 1; }
make -j"$(nproc)" >make.log 2>&1 || { tail -30 make.log >&2; exit 1; }
echo "$FILE" > "$DONE"
rm -f ../mariadb_*
dirname "$DONE"
