#!/usr/bin/env bash
# Builds MariaDB Connector/C's own unit tests (the library under the mariadb
# client, MySQLdb and PHP's mysqlnd-less builds) for the relay's oracle test
# crates/relay/tests/connector_c.rs.
#
# The source is the libmariadb/ tree of Debian bookworm's `mariadb` source
# package (the orig tarball named by the archive's Sources index, its
# SHA-256 checked against that index); only that tree is unpacked and
# built (cmake, a C compiler, zlib and OpenSSL headers). The build lands
# in $HOME/.cache/sqlfleet/connector-c/ and is reused while it is there.
#
#   scripts/connector_c.sh          build if absent; print the test directory
#   SQLFLEET_DEBIAN_MIRROR=URL ...  another Debian mirror
set -euo pipefail

MIRROR="${SQLFLEET_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
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
command -v xz >/dev/null 2>&1 || need+=(xz-utils)
dpkg -s zlib1g-dev >/dev/null 2>&1 || need+=(zlib1g-dev)
dpkg -s libssl-dev >/dev/null 2>&1 || need+=(libssl-dev)
if [ "${#need[@]}" -gt 0 ]; then
  echo "connector_c: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

mkdir -p "$ROOT"
cd "$ROOT"
# The orig tarball of the `mariadb` source package and its SHA-256, from the
# archive's own index.
curl -fsS --retry 3 "$MIRROR/dists/bookworm/main/source/Sources.xz" | xz -d > Sources
read -r DIR SHA FILE < <(awk '
  /^Package: / { pkg = $2; dir = ""; insha = 0 }
  pkg == "mariadb" && /^Directory: / { dir = $2 }
  pkg == "mariadb" && /^Checksums-Sha256:/ { insha = 1; next }
  pkg == "mariadb" && insha && /^ / { if ($3 ~ /\.orig\.tar\.gz$/) { sha = $1; file = $3 } ; next }
  { insha = 0 }
  /^$/ && pkg == "mariadb" && file != "" { print dir, sha, file; exit }
' Sources)
if [ -z "${FILE:-}" ]; then
  echo "connector_c: no mariadb orig tarball in $MIRROR's bookworm Sources index" >&2
  exit 1
fi
if [ ! -f "$FILE" ] || ! echo "$SHA  $FILE" | sha256sum -c --quiet - 2>/dev/null; then
  echo "connector_c: fetching $MIRROR/$DIR/$FILE" >&2
  curl -fsS --retry 3 -o "$FILE.part" "$MIRROR/$DIR/$FILE"
  mv "$FILE.part" "$FILE"
fi
if ! echo "$SHA  $FILE" | sha256sum -c --quiet -; then
  echo "connector_c: $FILE does not match the index's SHA-256" >&2
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
rm -f "../$FILE"
dirname "$DONE"
