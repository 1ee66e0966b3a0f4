# Sourced by the loader benchmarks (load.sh, load_shapes.sh, load_flat.sh):
# installs what they need, builds the release binary, starts a fresh
# sandbox sized so the data fits in memory, and sets
#   SQLFLEET  the binary        CNF   the sandbox's client option file
#   SQL       the stock client  WORK  a scratch directory (removed at exit unless KEEP=1)
# plus now/secs for wall-clock timing.
#
# Usage: load_bench_setup NAME [extra Debian packages...]
load_bench_setup() {
  local name="$1"
  shift
  bash scripts/deps.sh "$@"
  source scripts/env.sh
  cargo build --release --quiet
  SQLFLEET="$SQLFLEET_TARGET/release/sqlfleet"
  export SQLFLEET_HOME="${SQLFLEET_HOME:-$HOME/.local/share/sqlfleet}"
  NAME="$name"
  "$SQLFLEET" sandbox destroy --name "$NAME" --yes >/dev/null 2>&1 || true
  "$SQLFLEET" sandbox up --name "$NAME" --option innodb_buffer_pool_size=2G --option innodb_log_file_size=1G >/dev/null
  CNF="$("$SQLFLEET" sandbox env --name "$NAME" --defaults-file)"
  SQL=(mariadb --defaults-file="$CNF" --local-infile=1 -N -B)
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/sqlfleet-$NAME.XXXXXX")"
  chmod 755 "$WORK"
  [ -n "${KEEP:-}" ] || trap 'rm -rf "$WORK"' EXIT
}
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.2f}')"; }
