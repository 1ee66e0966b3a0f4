#!/usr/bin/env python3
"""The server's own connection-accept rate, as a yardstick for `query`.

Opens a TCP connection to every endpoint of a hosts file (at most PARALLEL
at once, as `query --parallel`), reads the server's greeting packet and
closes: the least work a client can make a server do per connection (no
login, no query). Prints the best wall time of ROUNDS runs in seconds.
Python's asyncio adds its own cost, so this over-states the server's time
a little; it is a yardstick, not a limit to the nanosecond.

Usage: greet_rate.py HOSTS_FILE [PARALLEL] [ROUNDS]
"""
import asyncio
import sys
import time


async def greet(host, port, sem, failures):
    async with sem:
        try:
            r, w = await asyncio.wait_for(asyncio.open_connection(host, port), 10)
            head = await asyncio.wait_for(r.readexactly(4), 10)
            await asyncio.wait_for(r.readexactly(int.from_bytes(head[:3], "little")), 10)
            w.close()
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as e:
            failures.append(f"{host}:{port}: {e!r}")


async def once(endpoints, parallel):
    sem = asyncio.Semaphore(parallel)
    failures = []
    t0 = time.perf_counter()
    await asyncio.gather(*(greet(h, p, sem, failures) for h, p in endpoints))
    return time.perf_counter() - t0, failures


def main():
    path = sys.argv[1]
    parallel = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    endpoints = []
    for line in open(path):
        line = line.split("#")[0].split()
        if line:
            host, _, port = line[0].rpartition(":")
            endpoints.append((host, int(port)))
    best, failed = None, []
    for _ in range(rounds):
        t, failed = asyncio.run(once(endpoints, parallel))
        best = t if best is None else min(best, t)
    if failed:
        print(f"{len(failed)} of {len(endpoints)} failed, e.g. {failed[0]}", file=sys.stderr)
        sys.exit(1)
    print(f"{best:.3f}")


if __name__ == "__main__":
    main()
