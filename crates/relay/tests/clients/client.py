"""PyMySQL through the relay: DDL, parameterised inserts, a rolled-back
and a committed transaction, a read back, an error that leaves the
connection usable. Prints OK and the row count."""
import os

import pymysql

c = pymysql.connect(
    host=os.environ["RELAY_HOST"],
    port=int(os.environ["RELAY_PORT"]),
    user=os.environ["RELAY_USER"],
    password=os.environ["RELAY_PASSWORD"],
    database=os.environ["RELAY_DB"],
    autocommit=True,
)
cur = c.cursor()
cur.execute("CREATE TABLE lang_py (id INT PRIMARY KEY, s VARCHAR(50), n DOUBLE)")
cur.executemany(
    "INSERT INTO lang_py VALUES (%s, %s, %s)",
    [(1, "a", 1.5), (2, None, 2.5), (3, "c'q\u00e9", 3.5)],
)
c.begin()
cur.execute("INSERT INTO lang_py VALUES (4, 'x', 0)")
c.rollback()
c.begin()
cur.execute("INSERT INTO lang_py VALUES (5, 'y', 0)")
c.commit()
cur.execute("SELECT COUNT(*) FROM lang_py")
n = cur.fetchone()[0]
cur.execute("SELECT s, n FROM lang_py WHERE id = %s", (3,))
assert cur.fetchone() == ("c'q\u00e9", 3.5)
try:
    cur.execute("SELECT * FROM missing_table")
    raise SystemExit("no error for a missing table")
except pymysql.err.ProgrammingError as e:
    assert e.args[0] == 1146, e
cur.execute("SELECT 1")
assert cur.fetchone() == (1,)
c.close()
print("OK", n)
