#!/usr/bin/env python3
"""ping_wait.py - how long other clients wait on a Redis while something runs.

    scripts/ping_wait.py [--host H] [--port P] [--every-ms 2] -- COMMAND [ARG...]

Runs COMMAND while a second connection sends PING every few milliseconds (one at a
time: the next after the answer) and measures each round trip. When COMMAND ends it
prints the longest wait, the 99.9th percentile and the number of pings, and exits with
COMMAND's status. A transaction (MULTI/EXEC) or a long command blocks every client for as
long as it runs: the longest wait shows it, which SLOWLOG does not (it times commands one
by one, not an EXEC's whole). Uses only the standard library (a raw RESP socket).
"""
import argparse
import socket
import subprocess
import sys
import threading
import time


def pinger(host, port, every_s, stop, waits):
    s = socket.create_connection((host, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while not stop.is_set():
        t0 = time.monotonic()
        s.sendall(b"PING\r\n")
        buf = b""
        while not buf.endswith(b"\r\n"):
            chunk = s.recv(64)
            if not chunk:
                raise SystemExit("ping_wait: the connection closed")
            buf += chunk
        waits.append(time.monotonic() - t0)
        time.sleep(every_s)
    s.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=6379)
    ap.add_argument("--every-ms", type=float, default=2.0)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("no command to run")
    stop, waits = threading.Event(), []
    t = threading.Thread(target=pinger, args=(a.host, a.port, a.every_ms / 1000, stop, waits))
    t.start()
    started = time.monotonic()
    rc = subprocess.call(cmd)
    took = time.monotonic() - started
    stop.set()
    t.join()
    w = sorted(waits)
    if not w:
        print("ping_wait: no ping answered", file=sys.stderr)
        return rc or 1
    p999 = w[min(len(w) - 1, int(len(w) * 0.999))]
    print("ping_wait: %d pings over %.1f s; longest wait %.1f ms, p99.9 %.1f ms"
          % (len(w), took, w[-1] * 1000, p999 * 1000))
    return rc


if __name__ == "__main__":
    sys.exit(main())
