# Sourced by benchmarks that set this build against an earlier one:
# `binary_of REV` prints the path of REV's release binary, built once per
# revision in a worktree beside the target directory (kept for later runs).
# Needs $SQLFLEET_TARGET (scripts/env.sh).
binary_of() {  # $1 revision -> path of its release binary
  local rev dir
  rev=$(git rev-parse --short "$1")
  dir="$SQLFLEET_TARGET/sqlfleet-base-$rev"
  if [ ! -x "$dir/target/release/sqlfleet" ]; then
    rm -rf "$dir"
    git worktree add --detach "$dir/src" "$rev" >/dev/null 2>&1 || git worktree add --force --detach "$dir/src" "$rev" >/dev/null
    (cd "$dir/src" && CARGO_TARGET_DIR="$dir/target" cargo build --release --quiet)
    git worktree remove --force "$dir/src" >/dev/null 2>&1 || true
  fi
  echo "$dir/target/release/sqlfleet"
}

# builds_of REV...: BINS (this build's $SQLFLEET, then each REV's) and
# LABELS ("this build", then each REV's short hash), in that order.
builds_of() {
  BINS=("$SQLFLEET")
  LABELS=("this build")
  local rev
  for rev in "$@"; do
    BINS+=("$(binary_of "$rev")")
    LABELS+=("$(git rev-parse --short "$rev")")
  done
}
