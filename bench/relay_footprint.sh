#!/usr/bin/env bash
# The relay's own footprint on the server, long: DBS databases of 10 views
# each (a tenth calling a stored function), 64 per-user clients in
# transaction mode for SECONDS; prints client statements, the relay's own
# queries by kind and their ratio, and fails on any catalog-wide query in
# the server's general log or a server crash (the CI runs 200 x 10 s).
#
#   bash bench/relay_footprint.sh [DBS] [SECONDS]      # default 1000 60
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh --core
source scripts/env.sh
FOOTPRINT_DBS=${1:-1000} FOOTPRINT_SECONDS=${2:-60} \
  cargo test -q -p sqlfleet-relay --test relay_footprint -- --nocapture 2>&1 \
  | grep -E '^footprint:|panicked|test result'
