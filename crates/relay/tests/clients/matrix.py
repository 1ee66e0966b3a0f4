"""The configuration matrix's program for PyMySQL and MySQLdb (mysqlclient,
on libmariadb): the same statements directly and through the relay, every
result printed; the two outputs must be equal line for line. The driver is
the first argument: pymysql or mysqldb."""
import os
import sys

if sys.argv[1] == "pymysql":
    import pymysql as db
    from pymysql.constants import CLIENT

    conn = db.connect(
        host=os.environ["RELAY_HOST"],
        port=int(os.environ["RELAY_PORT"]),
        user=os.environ["RELAY_USER"],
        password=os.environ["RELAY_PASSWORD"],
        database=os.environ["RELAY_DB"],
        local_infile=True,
        client_flag=CLIENT.MULTI_STATEMENTS,
        autocommit=True,
    )
else:
    import MySQLdb as db
    from MySQLdb.constants import CLIENT

    conn = db.connect(
        host=os.environ["RELAY_HOST"],
        port=int(os.environ["RELAY_PORT"]),
        user=os.environ["RELAY_USER"],
        passwd=os.environ["RELAY_PASSWORD"],
        db=os.environ["RELAY_DB"],
        local_infile=1,
        client_flag=CLIENT.MULTI_STATEMENTS | CLIENT.MULTI_RESULTS,
        autocommit=True,
    )


def show(label, cur):
    """Every result set of the last statement, row by row."""
    n = 0
    while True:
        if cur.description is not None:
            print(label, n, "columns", [d[0] for d in cur.description])
            for row in cur.fetchall():
                print(label, n, "|".join("NULL" if v is None else str(v) for v in row))
        else:
            print(label, n, "affected", cur.rowcount)
        n += 1
        if not cur.nextset():
            break


cur = conn.cursor()
cur.execute(
    "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(20), d DECIMAL(10,2),"
    " b VARBINARY(8), j JSON, ts DATETIME(3))"
)
for v, d, b, j, ts in [
    ("a", "1.50", b"\x00\xff", '{"k": 1}', "2026-11-26 10:00:00.123"),
    ("é", None, None, None, None),
    ("c", "-2.25", b"", "[1, 2]", "2026-01-01 00:00:00"),
]:
    cur.execute("INSERT INTO t (v, d, b, j, ts) VALUES (%s, %s, %s, %s, %s)", (v, d, b, j, ts))
    print("insert id", cur.lastrowid)
cur.execute("SELECT id, v, d, HEX(b), j, ts FROM t ORDER BY id")
show("select", cur)
cur.execute("SELECT id, v FROM t WHERE id > %s ORDER BY id", (1,))
show("param select", cur)
cur.execute("CREATE PROCEDURE p() BEGIN SELECT COUNT(*) AS n FROM t; SELECT v FROM t ORDER BY id; END")
cur.execute("CALL p()")
show("call", cur)
cur.execute("SELECT 1 AS one; SELECT 2 AS two")
show("multi", cur)
cur.execute("BEGIN")
cur.execute("INSERT INTO t (v) VALUES ('gone')")
cur.execute("ROLLBACK")
cur.execute("SELECT COUNT(*) FROM t")
show("after rollback", cur)
try:
    cur.execute("INSERT INTO t (id, v) VALUES (1, 'dup')")
    print("duplicate accepted")
except db.Error as e:
    print("error", e.args[0])
cur.execute("SELECT CAST('12abc' AS INT)")
show("cast", cur)
cur.execute("SHOW WARNINGS")
show("warnings", cur)
cur.execute(
    "LOAD DATA LOCAL INFILE %s INTO TABLE t FIELDS TERMINATED BY ',' (v, d)",
    (os.environ["MATRIX_CSV"],),
)
print("loaded", cur.rowcount)
cur.execute("SELECT COUNT(*), SUM(d) FROM t")
show("after load", cur)
cur.execute("SELECT v FROM t WHERE 0")
show("empty", cur)
conn.close()
print("done")
