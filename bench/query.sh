#!/usr/bin/env bash
# Fan-out benchmark: one query on N distinct endpoints, sqlfleet query vs
# `xargs -P 64` with the stock mariadb client, in one run on one machine.
#
# The endpoints are N loopback addresses (127.0.x.y) of one sandbox server
# that listens on 0.0.0.0 inside a private network namespace (so nothing is
# exposed outside it); both tools run inside that namespace. Needs root
# (ip netns). Also measures sqlfleet's peak memory for 10x the endpoints.
#
# Usage: sudo bench/query.sh [ENDPOINTS]
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-1000}"
bash scripts/deps.sh iproute2 time
source scripts/env.sh
cargo build --release --quiet
SQLFLEET="$SQLFLEET_TARGET/release/sqlfleet"
export SQLFLEET_HOME="${SQLFLEET_HOME:-$HOME/.local/share/sqlfleet}"
NAME=bench-query
source bench/netns_fleet.sh
netns_fleet_up
fleet_hosts "$N" > "$WORK/hosts.txt"
fleet_hosts $((N * 10)) > "$WORK/hosts10.txt"
Q="SELECT @@server_id, @@version, NOW()"
secs() { python3 -c "print(f'{$2 - $1:.3f}')"; }
now() { date +%s.%N; }

# Warm the server's thread cache the same way for both tools.
"${IN[@]}" "$SQLFLEET" query --defaults-file="$CNF" --hosts-file "$WORK/hosts.txt" -e "$Q" >/dev/null 2>&1 || true

RUNS="${RUNS:-10}"
# The server's own CPU so far (every login and query of the runs).
srv_cpu() { awk -v t="$(getconf CLK_TCK)" '{print ($14 + $15) / t}' "/proc/$SPID/stat"; }
# median_of ARGS...: "median min max" of the process's wall time over $RUNS
# runs (each from start to exit), then the medians of sqlfleet's CPU
# (user + system, from getrusage) and of the server's CPU per run; rows in
# $WORK/sf.out.
median_of() {
  local t t0 s0 all="" cli="" srv=""
  for _ in $(seq "$RUNS"); do
    s0=$(srv_cpu)
    t0=$(now)
    /usr/bin/time -f "%U %S" -o "$WORK/cpu1" "${IN[@]}" "$SQLFLEET" query --defaults-file="$CNF" --hosts-file "$WORK/hosts.txt" "$@" -e "$Q" > "$WORK/sf.out" 2>"$WORK/sf.err"
    t=$(secs "$t0" "$(now)")
    all="$all $t"
    cli="$cli $(awk '{print $(NF-1) + $NF}' "$WORK/cpu1")"
    srv="$srv $(secs "$s0" "$(srv_cpu)")"
  done
  python3 -c "
import statistics as s
v=[float(x) for x in '$all'.split()]
c=[float(x) for x in '$cli'.split()]
r=[float(x) for x in '$srv'.split()]
print(f'{s.median(v):.3f} {min(v):.3f} {max(v):.3f} {s.median(c):.3f} {s.median(r):.3f}')"
}
echo "== sqlfleet query on $N endpoints, defaults (ssl-mode PREFERRED, --threads 256), $RUNS runs"
read -r T_DEF T_DEF_MIN T_DEF_MAX CLI_MED SRV_MED < <(median_of)
ROWS_DEF=$(wc -l < "$WORK/sf.out")
echo "== sqlfleet query --ssl-mode DISABLED --threads 64, $RUNS runs"
read -r T_TUNED T_TUNED_MIN T_TUNED_MAX CLI_TUNED SRV_TUNED < <(median_of --ssl-mode DISABLED --threads 64)
ROWS_TUNED=$(wc -l < "$WORK/sf.out")

echo "== xargs -P 64 mariadb on $N endpoints"
t0=$(now)
"${IN[@]}" sh -c "xargs -P 64 -I{} sh -c 'h=\${1%:*}; mariadb --defaults-file=$CNF -h \$h -P $PORT -N -B -e \"$Q\" | sed \"s/^/\$1\t/\"' _ {} < $WORK/hosts.txt > $WORK/xargs.out"
T_X=$(secs "$t0" "$(now)")
ROWS_X=$(wc -l < "$WORK/xargs.out")

echo "== where the time goes (defaults): process start, and the run as the command times itself"
T_START=999
for _ in 1 2 3 4 5; do
  t0=$(now); "$SQLFLEET" --version >/dev/null; t=$(secs "$t0" "$(now)")
  T_START=$(python3 -c "print(min($T_START, $t))")
done
"${IN[@]}" "$SQLFLEET" query --defaults-file="$CNF" --hosts-file "$WORK/hosts.txt" -e "$Q" > /dev/null 2>"$WORK/sf.err"
T_RUN=$(grep -o 'in [0-9.]*s' "$WORK/sf.err" | head -1 | tr -dc '0-9.')
# The server's own CPU for one run (every login and query of it): on a
# machine where it had every core to itself, a run could not take less than
# that divided by the cores.
sc0=$(srv_cpu)
/usr/bin/time -f "%U %S" -o "$WORK/cpu" "${IN[@]}" "$SQLFLEET" -v query --defaults-file="$CNF" --hosts-file "$WORK/hosts.txt" -e "$Q" \
  --status-json "$WORK/status.json" > /dev/null 2>"$WORK/sf-v.err"
sc1=$(srv_cpu)
CLI_CPU=$(awk '{printf "%.3f", $1 + $2}' "$WORK/cpu")
SRV_CPU=$(python3 -c "print(f'{$sc1 - $sc0:.3f}')")
CORES=$(nproc)
TIMING=$(python3 -c "
import json; t = json.load(open('$WORK/status.json'))['timing']
print(f\"tasks spawned {t['spawned']:.3f} s, last login done {t['last_login']:.3f} s, last host done {t['last_host']:.3f} s; per host: login p50 {t['login_p50']*1e3:.1f} ms (max {t['login_max']*1e3:.1f}), statements p50 {t['statements_p50']*1e3:.1f} ms (max {t['statements_max']*1e3:.1f})\")")
echo "== sqlfleet query on $((N * 10)) endpoints: peak memory"
/usr/bin/time -f "%M" -o "$WORK/rss" "${IN[@]}" "$SQLFLEET" query --defaults-file="$CNF" --hosts-file "$WORK/hosts10.txt" -e "$Q" > /dev/null 2>"$WORK/sf10.err" || true
RSS=$(tail -1 "$WORK/rss")
OK10=$(grep -o '[0-9]* ok' "$WORK/sf10.err" | head -1)
echo
echo "| tool | endpoints | seconds | rows |"
echo "|---|---:|---:|---:|"
echo "| sqlfleet query (defaults: ssl-mode PREFERRED, --threads 256), median of $RUNS (min–max) | $N | $T_DEF ($T_DEF_MIN–$T_DEF_MAX) | $ROWS_DEF |"
echo "| sqlfleet query --ssl-mode DISABLED --threads 64, median of $RUNS (min–max) | $N | $T_TUNED ($T_TUNED_MIN–$T_TUNED_MAX) | $ROWS_TUNED |"
echo "| xargs -P 64 mariadb (no TLS, its default) | $N | $T_X | $ROWS_X |"
echo
echo "breakdown (defaults): process start and exit $T_START s; connects + queries + output, as timed inside the command: $T_RUN s (the median wall time $T_DEF s)"
echo "inside the command: $TIMING"
echo "server side: one run cost the server $SRV_CPU s of CPU (logins, queries, disconnects of $N hosts): a floor of $(python3 -c "print(f'{$SRV_CPU / $CORES:.3f}')") s with all $CORES cores given to the server; sqlfleet query with defaults is $(python3 -c "print(f'{$T_DEF / ($SRV_CPU / $CORES):.2f}')")x that floor"
echo "client side: the same run cost sqlfleet $CLI_CPU s of CPU; server + client on this machine's $CORES cores: a floor of $(python3 -c "print(f'{($SRV_CPU + $CLI_CPU) / $CORES:.3f}')") s"
echo "CPU per run, medians of $RUNS: defaults: sqlfleet $CLI_MED s, the server $SRV_MED s; --ssl-mode DISABLED --threads 64: sqlfleet $CLI_TUNED s, the server $SRV_TUNED s (getrusage and /proc in 10 ms ticks)"
python3 -c "print(f'\nspeed-up vs xargs: {$T_X / $T_DEF:.1f}x with defaults, {$T_X / $T_TUNED:.1f}x tuned; sqlfleet peak RSS for $((N * 10)) endpoints (defaults): {$RSS / 1024:.1f} MiB ($OK10)')"
