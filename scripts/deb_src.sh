#!/usr/bin/env bash
# Fetches a Debian source package's files with `apt-get source
# --download-only` (apt checks each file against the archive's signed
# index) into the current directory: each version the indexes list,
# newest first, until one downloads (an archive may index a source it does
# not serve, as a security mirror can). Where apt has no deb-src entries,
# they are added first for the archives apt already uses (only the type
# changed), in /etc/apt/sources.list.d/sqlfleet-deb-src.{sources,list}.
#
#   scripts/deb_src.sh PACKAGE      prints the version fetched
set -euo pipefail
pkg="$1"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

if ! apt-get source --print-uris "$pkg" >/dev/null 2>&1; then
  echo "deb_src: adding deb-src entries for the configured Debian archives" >&2
  shopt -s nullglob
  for f in /etc/apt/sources.list.d/*.sources; do
    case "$f" in */sqlfleet-deb-src.sources) continue ;; esac
    # Each enabled deb822 stanza of type deb, again as deb-src.
    awk 'BEGIN { RS = ""; ORS = "\n\n" }
      /(^|\n)Types:[^\n]*(^|[ \t])deb([ \t]|\n|$)/ && !/(^|\n)Enabled: *no/ {
        sub(/(^|\n)Types:[^\n]*/, "\nTypes: deb-src"); sub(/^\n/, ""); print }' "$f"
  done | $SUDO tee /etc/apt/sources.list.d/sqlfleet-deb-src.sources >/dev/null
  # One-line entries, where there are any (a machine may have only
  # deb822 files and no /etc/apt/sources.list at all).
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    case "$f" in */sqlfleet-deb-src.list) continue ;; esac
    if [ -f "$f" ]; then cat "$f"; fi
  done \
    | sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' \
    | $SUDO tee /etc/apt/sources.list.d/sqlfleet-deb-src.list >/dev/null
  shopt -u nullglob
  $SUDO apt-get update -qq
fi

for v in $(apt-cache showsrc "$pkg" | sed -n 's/^Version: //p' | sort -urV); do
  echo "deb_src: apt-get source --download-only $pkg=$v" >&2
  if apt-get source --download-only -qq "$pkg=$v" >apt-source.log 2>&1; then
    rm -f apt-source.log
    echo "$v"
    exit 0
  fi
  tail -2 apt-source.log >&2
  rm -f "${pkg}"_*
done
echo "deb_src: no version of the $pkg source package could be fetched by apt-get source" >&2
exit 1
