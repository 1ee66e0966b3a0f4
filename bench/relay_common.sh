# Shared by the relay benchmarks (source it from the repository root):
# builds sqlfleet, starts sandbox $NAME (extra `sandbox up` arguments in
# $UP_ARGS), keeps passwords in 0600 files under $WORK, and offers
#   free_port, wait_port PORT, start_relay PORT ARGS... (backgrounded, pid
#   added to PIDS; start_relay_of BIN PORT ARGS... with another binary), start_haproxy PORT [NBTHREAD] (haproxy in TCP mode in
#   front of the sandbox: the byte-pipe peer), mk_sb PORT (a sysbench
#   config file), binary_of REV (the sqlfleet binary of an earlier
#   revision, built once per revision beside the target directory).
set -euo pipefail
bash scripts/deps.sh sysbench
source scripts/env.sh
cargo build --release --quiet
SQLFLEET="$SQLFLEET_TARGET/release/sqlfleet"
export SQLFLEET_HOME="${SQLFLEET_HOME:-$HOME/.local/share/sqlfleet}"
"$SQLFLEET" sandbox destroy --name "$NAME" --yes >/dev/null 2>&1 || true
# shellcheck disable=SC2086
"$SQLFLEET" sandbox up --name "$NAME" ${UP_ARGS:-} --option max_connections=500 >/dev/null
CNF="$("$SQLFLEET" sandbox env --name "$NAME" --defaults-file)"
PORT=$(awk -F' = ' '/^port/ {print $2}' "$CNF")
PWFILE="$SQLFLEET_HOME/sandboxes/$NAME/root.pw"
WORK="$(mktemp -d)"; chmod 700 "$WORK"
printf 'root:%s\n' "$(cat "$PWFILE")" > "$WORK/users"; chmod 600 "$WORK/users"
PIDS=()
# The sandbox goes too (KEEP=1 keeps it): an idle server left behind
# still takes memory and wakes up on the next bench's cores.
cleanup() {
  kill "${PIDS[@]}" 2>/dev/null || true
  rm -rf "$WORK"
  [ -n "${KEEP:-}" ] || "$SQLFLEET" sandbox destroy --name "$NAME" --yes >/dev/null 2>&1 || true
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (echo > "/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.05; done; }
start_relay() {  # $1 listen port, then relay flags
  start_relay_of "$SQLFLEET" "$@"
}
start_relay_of() {  # $1 sqlfleet binary, $2 listen port, then relay flags
  local bin=$1 port=$2; shift 2
  MYSQL_PWD="$(cat "$PWFILE")" "$bin" relay --listen "127.0.0.1:$port" \
    --no-defaults -u root --ssl-mode DISABLED --shared-account --client-users-file "$WORK/users" "$@" 2>"$WORK/relay-$port.log" &
  PIDS+=($!)
  wait_port "$port"
}
start_haproxy() {  # $1 listen port, $2 threads (haproxy's default: one per core)
  {
    printf 'global\n  maxconn 4000\n'
    if [ -n "${2:-}" ]; then printf '  nbthread %s\n' "$2"; fi
    printf 'defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 1h\n  timeout server 1h\n'
    printf 'listen mysql\n  bind 127.0.0.1:%s\n  server s1 127.0.0.1:%s\n' "$1" "$PORT"
  } > "$WORK/haproxy-$1.cfg"
  haproxy -f "$WORK/haproxy-$1.cfg" -db >"$WORK/haproxy-$1.log" 2>&1 &
  PIDS+=($!)
  wait_port "$1"
}
mk_sb() {  # $1 port -> config file
  printf 'mysql-host=127.0.0.1\nmysql-port=%s\nmysql-user=root\nmysql-password=%s\nmysql-db=sbtest\nmysql-ssl=off\n' "$1" "$(cat "$PWFILE")" > "$WORK/sb$1"
  chmod 600 "$WORK/sb$1"; echo "$WORK/sb$1"
}
source bench/binary_of.sh

# cache_relay_toml FILE RELAY_PORT METRICS_PORT MAX_BYTES RULE REGEX: a
# relay config in front of the sandbox (transaction mode, the shared root
# account) with a result cache of MAX_BYTES and one rule caching the
# SELECTs that REGEX matches.
cache_relay_toml() {
  local file=$1 rp=$2 mp=$3 max=$4 rule=$5 regex=$6
  {
    printf '[relay]\nlisten = ["127.0.0.1:%s"]\nmetrics = "127.0.0.1:%s"\nmode = "transaction"\n\n' "$rp" "$mp"
    printf '[backend]\nservers = ["127.0.0.1:%s"]\nuser = "root"\npassword_file = "%s"\naccounts = "shared"\n\n' "$PORT" "$PWFILE"
    printf '[pool]\nmax = 100\n\n[cache]\nmax_bytes = %s\n\n' "$max"
    printf '[[cache_rules]]\nname = "%s"\nmatch_regex = "%s"\nttl = 600\n\n' "$rule" "$regex"
    printf '[[users]]\nname = "root"\n'
    "$SQLFLEET" relay --hash-password < "$PWFILE"
  } > "$file"
}
