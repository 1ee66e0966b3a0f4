#!/usr/bin/env bash
# The guide's introduction is the README, its links made relative to the
# guide (docs/guide/X.md -> X.md; ../ for the rest of docs/ and the tree),
# so the two cannot drift: crates/sqlfleet/tests/help.rs fails when they
# differ. Run after editing README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
sed -e 's#](docs/guide/#](#g' -e 's#](docs/#](../#g' README.md > docs/guide/introduction.md
