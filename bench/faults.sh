#!/usr/bin/env bash
# Long fault campaigns (the CI runs one seeded slice of each):
#
#   bash bench/faults.sh [ROUNDS] [SEED] [CAMPAIGNS]
#
# ROUNDS faults per campaign (default 200), starting at SEED (default: the
# date), CAMPAIGNS how many seeds in a row (default 1). Each campaign is a
# test run with SQLFLEET_FAULT_SEED / SQLFLEET_FAULT_ROUNDS; it prints one
# `faults-survived:` line (faults injected, invariant violations), and a
# failing one prints its schedule and the line that replays it. The
# totals at the end go into docs/benchmarks.md's faults-survived table.
#
# Campaigns:
#   replicate  kill -9 of sqlfleet replicate at every failpoint and at
#              random instants, ROW/MIXED/STATEMENT sources, non-idempotent
#              writes; oracle: the source itself, table by table.
#   bank       bank transfers and total-readers through the relay over a
#              primary + 2 replicas; a seeded fault per round (SIGSTOP,
#              the network stalled or cut, kill -9 of a replica and its
#              restart) on a seeded server; invariants: the total on every
#              server, every acknowledged transfer exactly once everywhere.
#              It runs ROUNDS / 10 rounds (each takes a few seconds).
#              The same binary runs the writer campaigns: a 3-node Galera
#              cluster whose writer is killed (-9) and restarted every
#              round, and a primary killed with a replica promoted; there
#              transactions are replayed (relay [replay]) and the only
#              client errors allowed are COMMITs of unknown outcome.
#              SQLFLEET_BANK_REPLAY=off runs them with replay off (the
#              figures to compare: errors before COMMIT per fault).
#   load       SIGINT/SIGTERM of sqlfleet load at seeded instants over
#              seeded dump shapes and --threads; invariants: exit 130/143
#              (0 only when everything had committed), journal state,
#              batches committed after the signal, --resume equal to the
#              stock client. ROUNDS signals from SEED.
#   BANK_ONLY=1 / REPLICATE_ONLY=1 / LOAD_ONLY=1 run one of them.
set -euo pipefail
ROUNDS=${1:-200}
SEED=${2:-$(date +%Y%m%d)}
CAMPAIGNS=${3:-1}
cd "$(dirname "$0")/.."
bash scripts/deps.sh --core
source scripts/env.sh
out=${FAULTS_LOG:-/tmp/sqlfleet-faults.log}
: > "$out"
echo "full output: $out" >&2
status=0
for ((i = 0; i < CAMPAIGNS; i++)); do
  seed=$((SEED + i))
  if [ -z "${BANK_ONLY:-}${REPLICATE_ONLY:-}" ]; then
    echo "== load interrupt campaign: seed $seed, $ROUNDS signals" >&2
    if ! SQLFLEET_INTERRUPT_FIRST_SEED=$seed SQLFLEET_INTERRUPT_SEEDS=$ROUNDS \
        cargo test -q -p sqlfleet --test load -- --exact \
        signals_at_seeded_instants_stop_the_load_and_resume_exactly --nocapture 2>&1 \
        | tee -a "$out" | grep -E 'faults-survived|slowest|panicked|error' >&2; then
      status=1
    fi
  fi
  if [ -z "${BANK_ONLY:-}${LOAD_ONLY:-}" ]; then
    echo "== replicate kill -9 campaign: seed $seed, $ROUNDS faults" >&2
    if ! SQLFLEET_FAULT_SEED=$seed SQLFLEET_FAULT_ROUNDS=$ROUNDS \
        cargo test -q -p sqlfleet-replicate --test kill9 -- --exact \
        kill9_campaign_leaves_every_format_identical_to_its_source --nocapture 2>&1 \
        | tee -a "$out" | grep -E 'faults-survived|violation|replay:|transactions written|panicked|error' >&2; then
      status=1
    fi
  fi
  if [ -z "${REPLICATE_ONLY:-}${LOAD_ONLY:-}" ]; then
    bank_rounds=$(( ROUNDS / 10 > 0 ? ROUNDS / 10 : 1 ))
    echo "== bank campaign through the relay: seed $seed, $bank_rounds faults" >&2
    if ! SQLFLEET_FAULT_SEED=$seed SQLFLEET_FAULT_ROUNDS=$bank_rounds \
        cargo test -q -p sqlfleet-relay --test relay_bank -- --nocapture 2>&1 \
        | tee -a "$out" | grep -E 'faults-survived|violation|replay:|transfers acknowledged|relay: replays|panicked|error' >&2; then
      status=1
    fi
  fi
done
echo "== totals" >&2
awk '/^faults-survived:/ {
  for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] += kv[2] }
  n++
} END {
  printf "campaigns=%d faults=%d violations=%d\n", n, v["faults"], v["violations"]
}' "$out"
grep -q 'violations=[1-9]' "$out" && status=1
exit $status
