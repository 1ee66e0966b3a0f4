#!/usr/bin/env bash
# Longer Galera fault runs than CI's budget: the cluster tests (kill -9 of
# one node, of every node, of two of three; the relay's writer killed under
# write loops; desync; a non-Primary survivor; load and replicate into a
# node), each on a fresh 3-node cluster, ROUNDS times. Prints one line per
# round and the failures with their output kept under $KEEP.
#
# Usage: bench/galera_faults.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-10}"
source scripts/env.sh
KEEP="$(mktemp -d /tmp/sqlfleet-galera-faults.XXXXXX)"
TESTS=(
  "-p sqlfleet --test sandbox galera"
  "-p sqlfleet-relay --test relay_galera"
  "-p sqlfleet-load --test galera"
  "-p sqlfleet --test replicate galera"
  "-p sqlfleet --test watch galera"
  "-p sqlfleet --test query discover_finds_every_galera_member"
)
cargo test --no-run -p sqlfleet -p sqlfleet-relay -p sqlfleet-load --quiet
failed=0
for round in $(seq "$ROUNDS"); do
  line="round $round:"
  for t in "${TESTS[@]}"; do
    out="$KEEP/round$round-$(echo "$t" | tr ' ' '_').log"
    # shellcheck disable=SC2086
    if cargo test $t >"$out" 2>&1; then
      line+=" ok"
      rm -f "$out"
    else
      line+=" FAILED($t)"
      failed=$((failed + 1))
    fi
  done
  echo "$line"
done
echo "$failed failed runs of $((ROUNDS * ${#TESTS[@]})); outputs of failures in $KEEP"
[ "$failed" -eq 0 ]
