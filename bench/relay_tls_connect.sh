#!/usr/bin/env bash
# Connect per query against a MariaDB that requires TLS: mariadb-slap
# --detach=1 (a new connection for every SELECT 1, on the stock client's own
# library) directly with TLS, and through `sqlfleet relay` whose pooled
# backend connections are TLS (--ssl-mode REQUIRED) while its clients
# connect in plain over loopback — in both account modes (per-user, the
# default, and --shared-account). Prints connections+queries per second and
# the ratio to direct.
#
# Usage: bench/relay_tls_connect.sh [CONCURRENCY...]   (default: 8; direct TLS
# connects run at ~40/s on this machine, so 64 clients x 250 connections
# take many minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=bench-relay-tls
UP_ARGS=""
bash scripts/deps.sh openssl
TMPC="$(mktemp -d)"; chmod 755 "$TMPC"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=127.0.0.1" \
  -keyout "$TMPC/tls.key" -out "$TMPC/tls.pem" >/dev/null 2>&1
chmod 644 "$TMPC/tls.key" "$TMPC/tls.pem"
UP_ARGS="--option ssl_cert=$TMPC/tls.pem --option ssl_key=$TMPC/tls.key"
source bench/relay_common.sh
CONCS=("${@:-8}")
[ $# -eq 0 ] && CONCS=(8)
R_PER_USER=$(free_port)
MYSQL_PWD="$(cat "$PWFILE")" "$SQLFLEET" relay --listen "127.0.0.1:$R_PER_USER" --no-defaults -u root \
  --ssl-mode REQUIRED --backend "127.0.0.1:$PORT" --pool-max 100 2>"$WORK/relay-per-user.log" &
PIDS+=($!); wait_port "$R_PER_USER"
R_SHARED=$(free_port)
MYSQL_PWD="$(cat "$PWFILE")" "$SQLFLEET" relay --listen "127.0.0.1:$R_SHARED" --no-defaults -u root \
  --ssl-mode REQUIRED --backend "127.0.0.1:$PORT" --pool-max 100 --shared-account \
  --client-users-file "$WORK/users" 2>"$WORK/relay-shared.log" &
PIDS+=($!); wait_port "$R_SHARED"
slap() {  # $1 port, $2 concurrency, $3 ssl flag -> connections+queries/s
  printf '[client]\nuser=root\npassword=%s\nhost=127.0.0.1\nport=%s\n' "$(cat "$PWFILE")" "$1" > "$WORK/my.cnf"
  chmod 600 "$WORK/my.cnf"
  local n=$(($2 * 250)) t
  t=$(mariadb-slap --defaults-file="$WORK/my.cnf" "$3" --create-schema=mysql --concurrency="$2" \
    --number-of-queries="$n" --detach=1 --query="SELECT 1" --iterations=3 2>&1 \
    | awk '/Average number of seconds/ {print $(NF-1)}')
  python3 -c "print(f'{$n / $t:.0f}')"
}
echo "| clients | direct, TLS | relay per-user (TLS backends) | vs direct | relay shared (TLS backends) | vs direct |"
echo "|---:|---:|---:|---:|---:|---:|"
for c in "${CONCS[@]}"; do
  d=$(slap "$PORT" "$c" --ssl)
  p=$(slap "$R_PER_USER" "$c" --skip-ssl)
  s=$(slap "$R_SHARED" "$c" --skip-ssl)
  python3 -c "print(f'| $c | {$d:,} | {$p:,} | {$p/$d:.1f}x | {$s:,} | {$s/$d:.1f}x |')"
done
rm -rf "$TMPC"
