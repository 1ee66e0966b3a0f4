#!/usr/bin/env bash
# Fetches the test suite of mysqlclient (Python's MySQLdb, on Connector/C)
# for the relay's oracle test crates/relay/tests/peer_suite.rs: the tests/
# directory of the `python-mysqldb` source package of the Debian archives
# apt is configured with (scripts/deb_src.sh), the same version as the
# python3-mysqldb package the tests import. It lands in
# $HOME/.cache/sqlfleet/mysqldb-suite/tests and is reused while there.
#
#   scripts/mysqldb_suite.sh        fetch if absent; print the tests directory
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$HOME/.cache/sqlfleet/mysqldb-suite"
if [ -f "$ROOT/tests/.fetched" ]; then
  echo "$ROOT/tests"
  exit 0
fi
mkdir -p "$ROOT"
cd "$ROOT"
rm -rf python-mysqldb_* tests src
"$HERE/deb_src.sh" python-mysqldb >/dev/null
FILES=(python-mysqldb_*.orig.tar.*)
if [ ! -f "${FILES[0]}" ]; then
  echo "mysqldb_suite: apt-get source python-mysqldb brought no orig tarball" >&2
  exit 1
fi
mkdir src
tar xf "${FILES[0]}" -C src --strip-components=1
# Only the tests: the package's own MySQLdb/ (unbuilt) must not shadow the
# installed one.
mv src/tests tests
rm -rf src python-mysqldb_*
echo "${FILES[0]}" > tests/.fetched
echo "$ROOT/tests"
