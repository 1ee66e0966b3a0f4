#!/usr/bin/env bash
# How many statements the server runs per statement a client sends through
# the relay: the server's global `Questions` before and after sysbench sends
# a fixed number of transactions (transaction pooling, 8 clients, a pool of
# 4), divided by the statements sysbench counted. What the relay adds (its
# settings replays, diagnostics clearing, FOUND_ROWS() questions and
# restores) shows as the part above 1.00, whatever the machine's load: a
# count, not a timing, so two builds compare exactly.
#
# Usage: bench/relay_questions.sh [EVENTS] [REV...]
#   EVENTS sysbench transactions per workload (default 2000); each REV is
#   an earlier revision counted too (built once, beside the target dir).
set -euo pipefail
cd "$(dirname "$0")/.."
EVENTS="${1:-2000}"
shift || true
NAME=bench-relay-questions
source bench/relay_common.sh
mariadb --defaults-file="$CNF" -e "DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest"
sysbench --config-file="$(mk_sb "$PORT")" oltp_read_only --tables=4 --table-size=10000 prepare >/dev/null
builds_of "$@"

questions() {
  mariadb --defaults-file="$CNF" -N -e "SHOW GLOBAL STATUS LIKE 'Questions'" | awk '{print $2}'
}

printf '| workload | build | client statements | server statements | per client statement |\n|---|---|---|---|---|\n'
for wl in oltp_read_only oltp_point_select "oltp_read_only --db-ps-mode=disable" oltp_read_write; do
  for i in "${!BINS[@]}"; do
    port=$(free_port)
    start_relay_of "${BINS[$i]}" "$port" --backend "127.0.0.1:$PORT" --mode transaction --pool-max 4 --health-interval 60
    sb=$(mk_sb "$port")
    # shellcheck disable=SC2086
    sysbench --config-file="$sb" $wl --tables=4 --table-size=10000 --threads=8 --events=200 --time=0 run > "$WORK/warm.log" || { cat "$WORK/warm.log" "$WORK/relay-$port.log" >&2; exit 1; }
    q0=$(questions)
    # shellcheck disable=SC2086
    out=$(sysbench --config-file="$sb" $wl --tables=4 --table-size=10000 --threads=8 --events="$EVENTS" --time=0 run)
    q1=$(questions)
    kill "${PIDS[-1]}" 2>/dev/null || true
    wait "${PIDS[-1]}" 2>/dev/null || true
    sent=$(awk '/total:/ && !done {print $2; done=1}' <<<"$out")
    # (The `questions` read itself is one statement.)
    server=$((q1 - q0 - 1))
    printf '| %s | %s | %s | %s | %s |\n' "$wl" "${LABELS[$i]}" "$sent" "$server" \
      "$(awk -v s="$server" -v c="$sent" 'BEGIN {printf "%.3f", s / c}')"
  done
done
