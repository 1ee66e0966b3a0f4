# Sourced by bench/query.sh and bench/watch.sh: a fleet of loopback
# endpoints of one sandbox server, inside a private network namespace (so
# nothing listens outside it). Needs root (ip netns).
#
# Before sourcing, set SQLFLEET (the binary) and NAME (the sandbox);
# FLEET_OPTIONS (e.g. "performance_schema=ON") adds server options; call
# `netns_fleet_up` once. It sets NS, IN (the command prefix that runs in
# the namespace), WORK (a scratch directory), CNF (the sandbox's client
# option file), PORT, PW and SPID (the server's pid), and `fleet_hosts N`
# prints N endpoints (127.a.b.c:PORT), one per line. PIDS collects
# background processes; `netns_fleet_down` (trapped on EXIT) stops them,
# destroys the sandbox and the namespace, and removes WORK.

PIDS=()
NS="sqlfleet-${NAME}-$$"
IN=(ip netns exec "$NS")
WORK="$(mktemp -d)"

netns_fleet_down() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  ip netns exec "$NS" "$SQLFLEET" sandbox destroy --name "$NAME" --yes >/dev/null 2>&1 || true
  ip netns del "$NS" 2>/dev/null || true
  rm -rf "$WORK"
}

netns_fleet_up() {
  trap netns_fleet_down EXIT
  ip netns add "$NS"
  ip netns exec "$NS" ip link set lo up
  "${IN[@]}" "$SQLFLEET" sandbox destroy --name "$NAME" --yes >/dev/null 2>&1 || true
  local extra=()
  for o in ${FLEET_OPTIONS:-}; do extra+=(--option "$o"); done
  "${IN[@]}" "$SQLFLEET" sandbox up --name "$NAME" --option bind-address=0.0.0.0 \
    --option max_connections=4000 --option thread_cache_size=1000 --option back_log=2000 \
    "${extra[@]}" >/dev/null
  CNF="$("$SQLFLEET" sandbox env --name "$NAME" --defaults-file)"
  PORT=$(awk -F' = ' '/^port/ {print $2}' "$CNF")
  PW=$(awk -F' = ' '/^password/ {print $2}' "$CNF" | tr -d '"')
  SPID=$(pgrep -f "sandboxes/$NAME/node1/my.cnf" | head -1)
}

fleet_hosts() {
  python3 -c "
for i in range($1):
    print(f'127.{(i // 250) % 250}.{i % 250 + 1}.{i // 62500 + 1}:$PORT')"
}
