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
  # The sandbox goes too: a server still purging a big load steals the
  # CPU of whatever is measured next.
  [ -n "${KEEP:-}" ] || trap 'rm -rf "$WORK"; "$SQLFLEET" sandbox destroy --name "$NAME" --yes >/dev/null 2>&1 || true' EXIT
}
now() { date +%s.%N; }

# fresh DB [SQL]: an empty database DB (then SQL, e.g. its CREATE TABLEs),
# an empty binary log and a quiet server, before each method: every method
# starts from the same server state. (In one run the methods write over
# 1 GiB of binlog together, so the rotation, and the previous method's
# background work, would otherwise land on whichever method came next.)
fresh() {
  "${SQL[@]}" -e "DROP DATABASE IF EXISTS $1; CREATE DATABASE $1; ${2:-} RESET MASTER"
  local pid; pid="$("${SQL[@]}" -e 'SELECT @@pid_file' | xargs cat)"
  python3 - "$pid" <<'PY'
import os, sys, time
tick = os.sysconf("SC_CLK_TCK")
def cpu():
    f = open(f"/proc/{sys.argv[1]}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / tick
# Quiet: under 5% of a core for half a second (at most 60 s of waiting).
for _ in range(120):
    a = cpu(); time.sleep(0.5)
    if cpu() - a < 0.025:
        break
PY
}
secs() { python3 -c "print(f'{$2 - $1:.2f}')"; }

# gen_sbtest DB TABLES ROWS: sysbench-style tables sbtest1..N in DB (AUTO_INCREMENT
# id, a secondary index on k, c CHAR(120), pad CHAR(60)), the same rows every run.
gen_sbtest() {
  local db="$1" tables="$2" rows="$3" t
  echo "== generating $tables sysbench-style tables x $rows rows"
  "${SQL[@]}" -e "DROP DATABASE IF EXISTS $db; CREATE DATABASE $db"
  for t in $(seq 1 "$tables"); do
    "${SQL[@]}" -D "$db" -e "
      CREATE TABLE sbtest$t (
        id INT NOT NULL AUTO_INCREMENT, k INT NOT NULL DEFAULT 0,
        c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '',
        PRIMARY KEY (id), KEY k_$t (k)) ENGINE=InnoDB;
      INSERT INTO sbtest$t (k, c, pad)
        SELECT FLOOR(RAND($t * seq) * $rows),
          CONCAT_WS('-', LPAD(FLOOR(RAND(seq) * 1e11), 11, '0'), LPAD(FLOOR(RAND(seq + 1) * 1e11), 11, '0'),
                         LPAD(FLOOR(RAND(seq + 2) * 1e11), 11, '0'), LPAD(FLOOR(RAND(seq + 3) * 1e11), 11, '0'),
                         LPAD(FLOOR(RAND(seq + 4) * 1e11), 11, '0'), LPAD(FLOOR(RAND(seq + 5) * 1e11), 11, '0'),
                         LPAD(FLOOR(RAND(seq + 6) * 1e11), 11, '0'), LPAD(FLOOR(RAND(seq + 7) * 1e11), 11, '0'),
                         LPAD(FLOOR(RAND(seq + 8) * 1e11), 11, '0'), LPAD(FLOOR(RAND(seq + 9) * 1e11), 11, '0')),
          CONCAT_WS('-', LPAD(FLOOR(RAND(seq * 3) * 1e11), 11, '0'), LPAD(FLOOR(RAND(seq * 5) * 1e11), 11, '0'),
                         LPAD(FLOOR(RAND(seq * 7) * 1e11), 11, '0'), LPAD(FLOOR(RAND(seq * 11) * 1e11), 11, '0'),
                         LPAD(FLOOR(RAND(seq * 13) * 1e11), 11, '0'))
        FROM seq_1_to_$rows;"
  done
}
