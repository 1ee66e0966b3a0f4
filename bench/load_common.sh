# Sourced by the loader benchmarks (load.sh, load_shapes.sh, load_flat.sh):
# installs what they need, builds the release binary, starts a fresh
# sandbox sized so the data fits in memory, and sets
#   SQLFLEET  the binary        CNF   the sandbox's client option file
#   SQL       the stock client  WORK  a scratch directory (removed at exit unless KEEP=1)
# plus now/secs for wall-clock timing, and fresh (a method's clean start).
#
# Usage: load_bench_setup NAME [extra Debian packages...]
load_bench_setup() {
  local name="$1"
  shift
  bash scripts/deps.sh "$@"
  source scripts/env.sh
  # SQLFLEET_BIN=path measures that binary instead (another commit's
  # build, for a before/after on the same bench).
  if [ -n "${SQLFLEET_BIN:-}" ]; then
    SQLFLEET="$SQLFLEET_BIN"
  else
    cargo build --release --quiet
    SQLFLEET="$SQLFLEET_TARGET/release/sqlfleet"
  fi
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
# an empty binary log, no dirty pages and a quiet server, before each
# method: every method starts from the same server state. Without it the
# earlier methods' work lands on the later ones: in one run the methods
# write over 1 GiB of binlog together (a rotation), and their dirty pages
# pile up (the sandbox flushes 200 pages/s in the background) until the
# redo log's age starts adaptive flushing during whichever method runs then.
fresh() {
  "${SQL[@]}" -e "DROP DATABASE IF EXISTS $1; CREATE DATABASE $1; ${2:-} RESET MASTER"
  # Flush every dirty page now, fast, then put the settings back.
  local was; was="$("${SQL[@]}" -e 'SELECT @@innodb_max_dirty_pages_pct, @@innodb_io_capacity, @@innodb_io_capacity_max')"
  local pct cap capmax; read -r pct cap capmax <<< "$was"
  "${SQL[@]}" -e "SET GLOBAL innodb_io_capacity_max = 100000, innodb_io_capacity = 50000, innodb_max_dirty_pages_pct = 0"
  local i dirty
  for i in $(seq 1 600); do
    dirty="$("${SQL[@]}" -e "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_BUFFER_POOL_PAGES_DIRTY'")"
    [ "$dirty" -le 100 ] && break
    sleep 0.2
  done
  "${SQL[@]}" -e "SET GLOBAL innodb_max_dirty_pages_pct = $pct, innodb_io_capacity = $cap, innodb_io_capacity_max = $capmax"
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
