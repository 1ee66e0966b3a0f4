#!/usr/bin/env bash
# The relay's differential protocol fuzzer with a bigger budget than CI's:
# SEEDS seeded packet sequences (every command byte, random and shaped
# bodies, wrong sequence ids, empty packets, frames whose length lies),
# each sent to the server directly and through a relay (transaction mode,
# per-user accounts, the same unprivileged account); every step's reply
# kind, error code and sequence id compared; a fresh client served after
# each sequence. Prints the totals and every difference with its seed;
# SQLFLEET_PROTO_FUZZ_FIRST=<seed> SQLFLEET_PROTO_FUZZ_SEEDS=1 replays one.
# LANES (default 32) sequences run side by side, each lane as an account
# of its own in databases of its own (most of a sequence's time is the
# wait for quiet after a step): 100,000 take about 23 minutes here.
#
# Usage: bench/relay_protocol_fuzz.sh [SEEDS] [FIRST_SEED] [STEPS] [LANES]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
source scripts/env.sh
log="${SQLFLEET_TARGET:-target}/relay-protocol-fuzz.log"
rc=0
SQLFLEET_PROTO_FUZZ_SEEDS="${1:-100000}" SQLFLEET_PROTO_FUZZ_FIRST="${2:-0}" SQLFLEET_PROTO_FUZZ_STEPS="${3:-12}" \
  SQLFLEET_PROTO_FUZZ_LANES="${4:-32}" \
  cargo test -p sqlfleet-relay --test protocol_differential -- --nocapture >"$log" 2>&1 || rc=1
grep -E -A2 "^protocol differential:|^seed |panicked|test result" "$log" || true
echo "(the whole output: $log)"
exit "$rc"
