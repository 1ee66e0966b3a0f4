#!/usr/bin/env python3
"""What a MariaDB server's session tracker reports, variable by variable.

The relay learns every session change from the tracker
(`crates/relay/src/backend/tracker.rs`); this asks the server directly,
over the raw protocol with the relay's own tracking settings, so a new
server version can be compared with the old before the relay meets it.

For every session variable the server lists (its own session value, so
nothing changes), on a fresh connection each:
  1. `SET v = <value>`: is `v` named in the OK's session state?
  2. `SET STATEMENT v = <value> FOR SELECT 1`, then two INSERTs: does
     the second INSERT's OK still carry `last_gtid`?

  bench/tracker_sweep.py PORT PASSWORD_FILE [USER]

It writes rows into `sqlfleet_tracker_sweep.t` (made if absent). Measured
2026-12-07: MariaDB 11.4.5 leaves 13 of 177 unnamed (the aria_*, innodb_*
and myisam_* ones) and loses last_gtid after the same 13; 10.11.19 names
all 176 and loses none.
"""
import hashlib
import socket
import struct
import subprocess
import sys

CAPS = (0x1 | 0x4 | 0x200 | 0x2000 | 0x8000 | 0x10000 | 0x80000 | 0x800000
        | (1 << 23) | (1 << 24))  # ... SESSION_TRACK, DEPRECATE_EOF
TRACKING = ("SET session_track_schema = ON, session_track_state_change = ON, "
            "session_track_system_variables = '*'")


def lenenc(b, p):
    c = b[p]
    if c < 251:
        return c, p + 1
    if c == 0xFC:
        return b[p + 1] | b[p + 2] << 8, p + 3
    if c == 0xFD:
        return int.from_bytes(b[p + 1:p + 4], "little"), p + 4
    return int.from_bytes(b[p + 1:p + 9], "little"), p + 9


class Session:
    """One connection; `query` returns ('ok', [changes]) or ('err', text)."""

    def __init__(self, port, user, password):
        self.s = socket.create_connection(("127.0.0.1", port))
        _, hello = self.read()
        p = hello.index(b"\0", 1) + 1 + 4
        salt = hello[p:p + 8]
        p += 9 + 2 + 1 + 2 + 2 + 1 + 10
        salt += hello[p:p + 12]
        a = hashlib.sha1(password.encode()).digest()
        c = hashlib.sha1(salt + hashlib.sha1(a).digest()).digest()
        auth = bytes(x ^ y for x, y in zip(a, c))
        login = (struct.pack("<IIB", CAPS, 1 << 24, 45) + b"\0" * 23 + user.encode() + b"\0"
                 + bytes([len(auth)]) + auth + b"mysql_native_password\0")
        self.write(login, 1)
        _, r = self.read()
        if r[0] != 0:
            sys.exit(f"login refused: {r[3:].decode(errors='replace')}")
        self.query(TRACKING)

    def read(self):
        h = b""
        while len(h) < 4:
            h += self.s.recv(4 - len(h))
        n = h[0] | h[1] << 8 | h[2] << 16
        d = b""
        while len(d) < n:
            d += self.s.recv(n - len(d))
        return h[3], d

    def write(self, d, seq):
        self.s.sendall(struct.pack("<I", len(d))[:3] + bytes([seq]) + d)

    def close(self):
        self.write(b"\x01", 0)
        self.s.close()

    @staticmethod
    def changes(ok):
        p = 1
        _, p = lenenc(ok, p)
        _, p = lenenc(ok, p)
        status = struct.unpack("<H", ok[p:p + 2])[0]
        p += 4
        out = []
        if p < len(ok):
            n, p = lenenc(ok, p)
            p += n
            if status & 0x4000 and p < len(ok):
                n, p = lenenc(ok, p)
                state, q = ok[p:p + n], 0
                while q < len(state):
                    kind = state[q]
                    n, q = lenenc(state, q + 1)
                    entry, q = state[q:q + n], q + n
                    if kind == 0:
                        k, e = lenenc(entry, 0)
                        name = entry[e:e + k].decode()
                        e += k
                        k, e = lenenc(entry, e)
                        out.append((name, entry[e:e + k].decode(errors="replace")))
                    elif kind == 2:
                        out.append(("(state)", ""))
        return out

    def query(self, sql):
        self.write(b"\x03" + sql.encode(), 0)
        _, r = self.read()
        if r[0] == 0xFF:
            return "err", r[3:].decode(errors="replace")
        if r[0] == 0:
            return "ok", self.changes(r)
        ncols, _ = lenenc(r, 0)
        for _ in range(ncols):
            self.read()
        while True:
            _, r = self.read()
            if r[0] == 0xFF:
                return "err", r[3:].decode(errors="replace")
            if r[0] == 0xFE and len(r) < 0xFFFFFF:
                return "ok", self.changes(r)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    port, password = int(sys.argv[1]), open(sys.argv[2]).read().strip()
    user = sys.argv[3] if len(sys.argv) > 3 else "root"
    admin = Session(port, user, password)
    for sql in ("CREATE DATABASE IF NOT EXISTS sqlfleet_tracker_sweep",
                "CREATE TABLE IF NOT EXISTS sqlfleet_tracker_sweep.t "
                "(id INT AUTO_INCREMENT PRIMARY KEY, v TEXT)"):
        kind, what = admin.query(sql)
        if kind == "err":
            sys.exit(f"{sql}: {what}")
    admin.close()
    listed = subprocess.run(
        ["mariadb", "-h127.0.0.1", f"-P{port}", f"-u{user}", "-N", "-B", "-e",
         "SELECT LOWER(VARIABLE_NAME), SESSION_VALUE, VARIABLE_TYPE "
         "FROM information_schema.SYSTEM_VARIABLES "
         "WHERE VARIABLE_SCOPE = 'SESSION' AND SESSION_VALUE IS NOT NULL ORDER BY 1"],
        env={"MYSQL_PWD": password, "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=True).stdout
    numeric = {"INT", "BIGINT", "DOUBLE", "INT UNSIGNED", "BIGINT UNSIGNED"}
    ran, unnamed, lost = 0, [], []
    insert = "INSERT INTO sqlfleet_tracker_sweep.t (v) VALUES ('sweep')"
    for line in listed.splitlines():
        name, value, kind = line.split("\t")
        if name.startswith("session_track"):
            continue
        lit = value if kind in numeric else "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"
        c = Session(port, user, password)
        kind_, said = c.query(f"SET {name} = {lit}")
        c.close()
        if kind_ == "err":
            continue
        ran += 1
        if name not in [n.lower() for n, _ in said if n != "(state)"]:
            unnamed.append(name)
        c = Session(port, user, password)
        if c.query(f"SET STATEMENT {name} = {lit} FOR SELECT 1")[0] == "ok":
            c.query(insert)
            kind_, said = c.query(insert)
            if kind_ == "ok" and not any(n == "last_gtid" for n, _ in said):
                lost.append(name)
        c.close()
    print(f"{ran} session variables set: {len(unnamed)} not named by their SET's reply: {unnamed}")
    print(f"last_gtid no longer reported after SET STATEMENT of {len(lost)}: {lost}")


if __name__ == "__main__":
    main()
