<?php
// The configuration matrix's program for PHP mysqli (mysqlnd): the same
// statements directly and through the relay, every result printed; the
// two outputs must be equal line for line.
mysqli_report(MYSQLI_REPORT_OFF);
$c = mysqli_init();
$c->options(MYSQLI_OPT_LOCAL_INFILE, true);
if (!$c->real_connect(getenv("RELAY_HOST"), getenv("RELAY_USER"), getenv("RELAY_PASSWORD"),
        getenv("RELAY_DB"), (int)getenv("RELAY_PORT"))) {
    fwrite(STDERR, "connect: " . mysqli_connect_error() . "\n");
    exit(1);
}
function row_text($row) {
    return implode("|", array_map(fn($v) => $v === null ? "NULL" : (string)$v, $row));
}
function must($c, $ok, $what) {
    if (!$ok) { fwrite(STDERR, "$what: {$c->errno} {$c->error}\n"); exit(1); }
}
function show_multi($c, $label, $sql) {
    must($c, $c->multi_query($sql), $label);
    $n = 0;
    do {
        if ($r = $c->store_result()) {
            $names = array_map(fn($f) => $f->name, $r->fetch_fields());
            echo "$label $n columns " . implode(",", $names) . "\n";
            while ($row = $r->fetch_row()) echo "$label $n " . row_text($row) . "\n";
            $r->free();
        } else {
            echo "$label $n affected {$c->affected_rows}\n";
        }
        $n++;
    } while ($c->more_results() && $c->next_result());
    must($c, $c->errno == 0, $label);
}
must($c, $c->query("CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(20), d DECIMAL(10,2), b VARBINARY(8), j JSON, ts DATETIME(3))"), "create");
$ins = $c->prepare("INSERT INTO t (v, d, b, j, ts) VALUES (?, ?, ?, ?, ?)");
must($c, $ins, "prepare insert");
foreach ([["a", "1.50", "\x00\xff", '{"k": 1}', "2026-11-26 10:00:00.123"],
          ["é", null, null, null, null],
          ["c", "-2.25", "", "[1, 2]", "2026-01-01 00:00:00"]] as $r) {
    [$v, $d, $b, $j, $ts] = $r;
    $ins->bind_param("sssss", $v, $d, $b, $j, $ts);
    must($c, $ins->execute(), "insert");
    echo "insert id {$ins->insert_id}\n";
}
$ins->close();
$r = $c->query("SELECT id, v, d, HEX(b), j, ts FROM t ORDER BY id");
while ($row = $r->fetch_row()) echo "select " . row_text($row) . "\n";
$s = $c->prepare("SELECT id, v, d, ts FROM t WHERE id > ? ORDER BY id");
$one = 1;
$s->bind_param("i", $one);
must($c, $s->execute(), "param select");
$res = $s->get_result();
while ($row = $res->fetch_row()) echo "param select " . row_text($row) . "\n";
$s->close();
// An OK with an info text: mysqlnd reads it length-prefixed, as the
// server writes it (a relay that cut the length failed the statement).
must($c, $c->query("UPDATE t SET v = v WHERE id = 1"), "update changing nothing");
echo "update {$c->affected_rows} [{$c->info}]\n";
must($c, $c->query("INSERT INTO t (v) VALUES ('m1'), ('m2')"), "insert rows");
echo "insert rows {$c->affected_rows} [{$c->info}]\n";
must($c, $c->query("DELETE FROM t WHERE v IN ('m1', 'm2')"), "delete rows");
must($c, $c->query("CREATE PROCEDURE p() BEGIN SELECT COUNT(*) AS n FROM t; SELECT v FROM t ORDER BY id; END"), "create procedure");
show_multi($c, "call", "CALL p()");
show_multi($c, "multi", "SELECT 1 AS one; SELECT 2 AS two");
$c->query("BEGIN");
$c->query("INSERT INTO t (v) VALUES ('gone')");
$c->query("ROLLBACK");
echo "after rollback " . row_text($c->query("SELECT COUNT(*) FROM t")->fetch_row()) . "\n";
if ($c->query("INSERT INTO t (id, v) VALUES (1, 'dup')")) echo "duplicate accepted\n"; else echo "error {$c->errno}\n";
echo "cast " . row_text($c->query("SELECT CAST('12abc' AS INT)")->fetch_row()) . " warnings {$c->warning_count}\n";
$r = $c->query("SHOW WARNINGS");
while ($row = $r->fetch_row()) echo "warnings " . row_text($row) . "\n";
must($c, $c->query("LOAD DATA LOCAL INFILE '" . $c->real_escape_string(getenv("MATRIX_CSV")) . "' INTO TABLE t FIELDS TERMINATED BY ',' (v, d)"), "load data");
echo "loaded {$c->affected_rows} [{$c->info}]\n";
echo "after load " . row_text($c->query("SELECT COUNT(*), SUM(d) FROM t")->fetch_row()) . "\n";
echo "empty " . $c->query("SELECT v FROM t WHERE 0")->num_rows . "\n";
$c->close();
echo "done\n";
