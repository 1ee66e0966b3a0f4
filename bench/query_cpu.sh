#!/usr/bin/env bash
# What one `sqlfleet query` run on N endpoints costs, this build against an
# earlier revision, in alternating runs on the same fleet: the medians of
# sqlfleet's CPU (user + system, getrusage), the server's CPU (/proc) and
# the wall time, then this build's system calls per endpoint (strace -c)
# and where its CPU goes (perf: kernel, the system calls every client of
# the protocol makes, page faults, user space).
#
# The fleet is bench/query.sh's: N loopback addresses of one sandbox server
# inside a private network namespace (needs root).
#
# Usage: sudo bench/query_cpu.sh [ENDPOINTS [ROUNDS [BASE_REV]]]
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-1000}"
ROUNDS="${2:-15}"
BASE="${3:-36b410a}"
bash scripts/deps.sh iproute2 time strace linux-perf
source scripts/env.sh
cargo build --release --quiet
SQLFLEET="$SQLFLEET_TARGET/release/sqlfleet"
source bench/binary_of.sh
OLD=$(binary_of "$BASE")
export SQLFLEET_HOME="${SQLFLEET_HOME:-$HOME/.local/share/sqlfleet}"
NAME=bench-query-cpu
source bench/netns_fleet.sh
netns_fleet_up
fleet_hosts "$N" > "$WORK/hosts.txt"
Q="SELECT @@server_id, @@version, NOW()"
srv_cpu() { awk -v t="$(getconf CLK_TCK)" '{print ($14 + $15) / t}' "/proc/$SPID/stat"; }
one() {  # BIN -> "client_cpu server_cpu wall"
  local s0 t0 t1
  s0=$(srv_cpu); t0=$(date +%s.%N)
  /usr/bin/time -f "%U %S" -o "$WORK/cpu" "${IN[@]}" "$1" query --defaults-file="$CNF" \
    --hosts-file "$WORK/hosts.txt" -e "$Q" > "$WORK/out" 2>/dev/null
  t1=$(date +%s.%N)
  [ "$(wc -l < "$WORK/out")" = "$N" ] || { echo "a run of $1 did not answer for every host" >&2; exit 1; }
  echo "$(awk '{print $(NF-1) + $NF}' "$WORK/cpu") $(python3 -c "print(f'{$(srv_cpu) - $s0:.3f} {$t1 - $t0:.3f}')")"
}
"${IN[@]}" "$SQLFLEET" query --defaults-file="$CNF" --hosts-file "$WORK/hosts.txt" -e "$Q" >/dev/null 2>&1 || true
for _ in $(seq "$ROUNDS"); do
  echo "base $(one "$OLD")"
  echo "this $(one "$SQLFLEET")"
done > "$WORK/runs"
echo "== $N endpoints, $ROUNDS alternating runs each (medians; CPU in 10 ms ticks)"
python3 - "$WORK/runs" "$BASE" <<'PY'
import sys, statistics as st
rows = {}
for line in open(sys.argv[1]):
    k, *v = line.split()
    rows.setdefault(k, []).append([float(x) for x in v])
print("| build | sqlfleet CPU (s) | server CPU (s) | wall (s) |")
print("|---|---:|---:|---:|")
for k, name in (("base", sys.argv[2]), ("this", "this build")):
    c, s, w = (st.median(col) for col in zip(*rows[k]))
    print(f"| {name} | {c:.3f} | {s:.3f} | {w:.3f} |")
PY
echo "== this build: system calls per endpoint (strace -c, one run)"
"${IN[@]}" strace -f -c -o "$WORK/strace" "$SQLFLEET" query --defaults-file="$CNF" \
  --hosts-file "$WORK/hosts.txt" -e "$Q" >/dev/null 2>&1
awk -v n="$N" '$NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ && $4 >= n / 2 {printf "%s %.2f\n", $NF, $4 / n}' "$WORK/strace"
echo "== this build: where its CPU goes (perf, one run)"
"${IN[@]}" perf record -q -F 20000 -g -o "$WORK/perf.data" -- "$SQLFLEET" query --defaults-file="$CNF" \
  --hosts-file "$WORK/hosts.txt" -e "$Q" >/dev/null 2>&1
perf report -i "$WORK/perf.data" --no-children --sort dso --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -3
perf report -i "$WORK/perf.data" --children --sort sym --stdio -g none 2>/dev/null \
  | grep -E '^ +[0-9]' | grep -E '\[k\] (__x64_sys_[a-z_0-9]+|asm_exc_page_fault)$' | head -12
