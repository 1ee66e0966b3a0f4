"""PyMySQL: the connect-time variable reads in RELAY_VARS_FILE, on two
connections one after the other, each column's metadata and value
printed (the relay answers the second connection's reads itself; the
output must be the same as directly)."""
import os

import pymysql

stmts = [l for l in open(os.environ["RELAY_VARS_FILE"]).read().splitlines() if l]
for n in range(2):
    c = pymysql.connect(
        host=os.environ["RELAY_HOST"],
        port=int(os.environ["RELAY_PORT"]),
        user=os.environ["RELAY_USER"],
        password=os.environ["RELAY_PASSWORD"],
        # PyMySQL's default (autocommit off) makes every read open a
        # transaction, which the relay never answers for.
        autocommit=True,
    )
    cur = c.cursor()
    for s in stmts:
        cur.execute(s)
        print(n, s[:40], cur.description, cur.fetchall())
    c.close()
