#!/usr/bin/env bash
# Runs every test: unit and property tests, and integration tests against
# real MariaDB servers that the tests start themselves (sandboxes).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
source scripts/env.sh
cargo test --workspace --all-targets "$@"
