#!/usr/bin/env bash
# The loader's differential oracles with a bigger budget than CI's:
# - N generated .sql files (mixed engines, user variables, temporary
#   tables, transactions, triggers, client commands, BOM/CRLF; some runs
#   killed and resumed, some run twice at once) loaded by the stock client
#   and by sqlfleet load, compared table by table;
# - N generated flat files (CSV, TSV and other separators, quoting,
#   escapes, NULLs, ragged rows, raw bytes) loaded by one stock LOAD DATA
#   LOCAL and by sqlfleet load --into, by LOAD DATA and by INSERTs,
#   compared row by row.
# Prints the seeds of any difference; SQLFLEET_DIFF_SEED=<seed>
# SQLFLEET_DIFF_FILES=1 (SQLFLEET_FLAT_DIFF_... for flat files) replays one.
#
# Usage: bench/load_differential.sh [FILES] [FIRST_SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
source scripts/env.sh
rc=0
SQLFLEET_DIFF_FILES="${1:-2000}" SQLFLEET_DIFF_SEED="${2:-1}" \
  cargo test -p sqlfleet-load --test differential -- --nocapture 2>&1 \
  | grep -E "^differential:|^seed|stock:|ours:|test result" || rc=1
SQLFLEET_FLAT_DIFF_FILES="${1:-2000}" SQLFLEET_FLAT_DIFF_SEED="${2:-1}" \
  cargo test -p sqlfleet-load --test flat_differential -- --nocapture 2>&1 \
  | grep -E "^flat differential:|^seed|test result" || rc=1
exit "$rc"
