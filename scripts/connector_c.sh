#!/usr/bin/env bash
# Builds MariaDB Connector/C's own unit tests (the library under the mariadb
# client, MySQLdb and PHP's mysqlnd-less builds) for the relay's oracle test
# crates/relay/tests/connector_c.rs.
#
# The source is the libmariadb/ tree of the `mariadb` source package of the
# Debian archives apt is configured with, fetched by `apt-get source` (which
# checks each file against the archive's signed index). Where apt has no
# deb-src entries, they are added for the same archives (only the type
# changed) in /etc/apt/sources.list.d/sqlfleet-deb-src.{sources,list}. Only
# the libmariadb/ tree is unpacked and built (cmake, a C compiler, zlib and
# OpenSSL headers). The build lands in $HOME/.cache/sqlfleet/connector-c/
# and is reused while it is there.
#
#   scripts/connector_c.sh          build if absent; print the test directory
set -euo pipefail

ROOT="$HOME/.cache/sqlfleet/connector-c"
DONE="$ROOT/build/unittest/libmariadb/.built"
if [ -f "$DONE" ]; then
  dirname "$DONE"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v make >/dev/null 2>&1 || need+=(make)
dpkg -s zlib1g-dev >/dev/null 2>&1 || need+=(zlib1g-dev)
dpkg -s libssl-dev >/dev/null 2>&1 || need+=(libssl-dev)
if [ "${#need[@]}" -gt 0 ]; then
  echo "connector_c: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# deb-src entries for the archives apt already uses, when it has none.
if ! apt-get source --print-uris mariadb >/dev/null 2>&1; then
  echo "connector_c: adding deb-src entries for the configured Debian archives" >&2
  shopt -s nullglob
  for f in /etc/apt/sources.list.d/*.sources; do
    case "$f" in */sqlfleet-deb-src.sources) continue ;; esac
    # Each enabled deb822 stanza of type deb, again as deb-src.
    awk 'BEGIN { RS = ""; ORS = "\n\n" }
      /(^|\n)Types:[^\n]*(^|[ \t])deb([ \t]|\n|$)/ && !/(^|\n)Enabled: *no/ {
        sub(/(^|\n)Types:[^\n]*/, "\nTypes: deb-src"); sub(/^\n/, ""); print }' "$f"
  done | $SUDO tee /etc/apt/sources.list.d/sqlfleet-deb-src.sources >/dev/null
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
    | sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' \
    | $SUDO tee /etc/apt/sources.list.d/sqlfleet-deb-src.list >/dev/null
  shopt -u nullglob
  $SUDO apt-get update -qq
fi

mkdir -p "$ROOT"
cd "$ROOT"
rm -f mariadb_*
# Each version the indexes list, newest first, until one downloads (an
# archive may index a source it does not serve, as a security mirror can).
got=""
for v in $(apt-cache showsrc mariadb | sed -n 's/^Version: //p' | sort -urV); do
  echo "connector_c: apt-get source --download-only mariadb=$v" >&2
  if apt-get source --download-only -qq "mariadb=$v" >apt-source.log 2>&1; then
    got="$v"
    break
  fi
  tail -2 apt-source.log >&2
  rm -f mariadb_*
done
if [ -z "$got" ]; then
  echo "connector_c: no version of the mariadb source package could be fetched by apt-get source" >&2
  exit 1
fi
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
