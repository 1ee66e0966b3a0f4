#!/usr/bin/env bash
# The result cache's kill -9 campaign, longer than CI's slice: for each
# seed, the primary is killed KILLS times at seeded instants (and started
# again after a seeded while) while a writer writes registers on it
# directly and three readers read them through the relay's cache; each
# seed's line says the reads, hits, reads bypassed while the follower was
# blind, and the reads older than the lag bound (must be 0).
#
# Usage: bench/relay_cache_kills.sh [SEEDS] [KILLS]
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS="${1:-10}"
KILLS="${2:-6}"
source scripts/env.sh
for seed in $(seq 1 "$SEEDS"); do
  SQLFLEET_CACHE_SEED="$seed" SQLFLEET_CACHE_KILLS="$KILLS" \
    cargo test -q -p sqlfleet-relay --test relay_cache \
    a_primary_killed_at_any_instant_leaves_no_read_older_than_the_lag_bound -- --nocapture 2>&1 |
    grep -E "kill -9 campaign|panicked|FAILED" || { echo "seed $seed: failed"; exit 1; }
done
