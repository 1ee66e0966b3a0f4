#!/usr/bin/env python3
"""Self cost per function in a callgrind dump, per unit of work.

Usage: callgrind_self.py FILE UNITS [TOP]

Prints the TOP functions (default 25) by instructions executed in their own
code (not in what they call), divided by UNITS (queries, connections), and
for memcpy the callers it was called from. callgrind counts each byte a
`rep movsb` copies as one instruction: memcpy's figure is bytes more than
cycles. (callgrind_annotate of valgrind 3.19 folds a dump made with
`callgrind_control -d` into one line; this reads the file itself.)
"""
import collections
import re
import sys

path, units = sys.argv[1], float(sys.argv[2])
top = int(sys.argv[3]) if len(sys.argv) > 3 else 25
names = {}
own = collections.Counter()
copied_by = collections.Counter()
cur = callee = None
pending = False
for line in open(path, errors="replace"):
    line = line.rstrip("\n")
    m = re.match(r"^(c?)fn=\((\d+)\)(?: (.*))?$", line)
    if m:
        if m.group(3):
            names[m.group(2)] = m.group(3)
        if m.group(1):
            callee = m.group(2)
        else:
            cur = m.group(2)
        continue
    if line.startswith("calls="):
        pending = True
        continue
    if line and (line[0].isdigit() or line[0] in "+-*"):
        parts = line.split()
        if len(parts) < 2 or cur is None:
            pending = False
            continue
        if pending:
            if "memcpy" in names.get(callee, ""):
                copied_by[cur] += int(parts[1])
            pending = False
        else:
            own[cur] += int(parts[1])
total = sum(own.values())
print(f"instructions per unit: {total / units:,.0f}; by function, own code only:")
for fid, n in own.most_common(top):
    print(f"  {n / units:8,.0f}  {n * 100 / total:5.1f}%  {names.get(fid, fid)[:140]}")
if copied_by:
    print("memcpy by caller (bytes copied, roughly):")
    for fid, n in copied_by.most_common(8):
        print(f"  {n / units:8,.0f}  {names.get(fid, fid)[:140]}")
