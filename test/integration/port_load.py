#!/usr/bin/env python3
"""port_load.py - load and measurement for controller_port_hangs.sh (not a
test by itself): each mode writes one line per request to OUT.

  probe BASE SECONDS INTERVAL OUT      GET /healthz every INTERVAL s (and
                                       /readyz, /metrics every 10th), a new
                                       connection each: "path ms status"
  attack BASE SECONDS RATE OUT [TOK]   POST /v1/signals with made-up tokens,
                                       RATE a second from 8 threads; with TOK,
                                       every other token's SHA-256 falls in
                                       TOK's slot of a 4096-slot table indexed
                                       by its first 4 bytes: "ms status"
  agent BASE TOKEN NODE SECONDS INTERVAL PREFIX OUT
                                       one XID line (id PREFIX-i) every
                                       INTERVAL s: "i ms status"
  resend BASE TOKEN NODE PREFIX OUT SECONDS
                                       each id of OUT not answered 200 sent
                                       again until 200: "i ms status" appended
"""
import hashlib
import http.client
import os
import sys
import threading
import time
import urllib.parse


def conn(base):
    u = urllib.parse.urlparse(base)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=60)


def request(base, method, path, body=None, token=None):
    t0 = time.monotonic()
    status = 0
    try:
        c = conn(base)
        h = {"Content-Type": "application/x-ndjson"}
        if token:
            h["Authorization"] = "Bearer " + token
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        r.read()
        status = r.status
        c.close()
    except Exception:  # a reset or a timeout: status 0
        status = 0
    return (time.monotonic() - t0) * 1000.0, status


def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + ".000000Z"


def xid(node, ident):
    return ('{"ts":"%s","node":"%s","gpu":0,"source":"kmsg","kind":"xid","code":31,'
            '"msg":"NVRM: Xid (PCI:0000:3b:00): 31, pid=1","id":"%s"}\n' % (now_rfc3339(), node, ident))


def slot(tok):
    return int.from_bytes(hashlib.sha256(tok.encode()).digest()[:4], "little") % 4096


def probe(base, seconds, interval, out):
    end = time.monotonic() + seconds
    i = 0
    with open(out, "w") as f:
        while time.monotonic() < end:
            paths = ["/healthz"] + (["/readyz", "/metrics"] if i % 10 == 0 else [])
            for p in paths:
                ms, st = request(base, "GET", p)
                f.write("%s %.1f %d\n" % (p, ms, st))
            f.flush()
            i += 1
            time.sleep(interval)


def attack(base, seconds, rate, out, target=None):
    want = slot(target) if target else None
    lock = threading.Lock()
    lines = []
    end = time.monotonic() + seconds
    per_thread = rate / 8.0
    body = xid("n-any", "attack")

    def worker(k):
        n = 0
        rnd = os.urandom(8).hex()
        t_next = time.monotonic()
        while time.monotonic() < end:
            n += 1
            tok = "made-up-%s-%d-%d" % (rnd, k, n)
            if want is not None and n % 2 == 0:
                j = 0
                while slot("%s-%d" % (tok, j)) != want:
                    j += 1
                tok = "%s-%d" % (tok, j)
            ms, st = request(base, "POST", "/v1/signals", body, tok)
            with lock:
                lines.append("%.1f %d\n" % (ms, st))
            t_next += 1.0 / per_thread
            d = t_next - time.monotonic()
            if d > 0:
                time.sleep(d)

    th = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    with open(out, "w") as f:
        f.writelines(lines)


def agent(base, token, node, seconds, interval, prefix, out):
    end = time.monotonic() + seconds
    i = 0
    with open(out, "w") as f:
        while time.monotonic() < end:
            i += 1
            t0 = time.monotonic()
            ms, st = request(base, "POST", "/v1/signals", xid(node, "%s-%d" % (prefix, i)), token)
            f.write("%d %.1f %d\n" % (i, ms, st))
            f.flush()
            d = interval - (time.monotonic() - t0)
            if d > 0:
                time.sleep(d)


def resend(base, token, node, prefix, out, seconds):
    got = {}
    with open(out) as f:
        for line in f:
            i, _, st = line.split()
            got[int(i)] = got.get(int(i)) == 200 or st == "200"
    end = time.monotonic() + seconds
    with open(out, "a") as f:
        for i in sorted(got):
            while not got[i] and time.monotonic() < end:
                ms, st = request(base, "POST", "/v1/signals", xid(node, "%s-%d" % (prefix, i)), token)
                f.write("%d %.1f %d\n" % (i, ms, st))
                if st == 200:
                    got[i] = True
                else:
                    time.sleep(1)
    return 0 if all(got.values()) else 1


def main(a):
    if a[0] == "probe":
        probe(a[1], float(a[2]), float(a[3]), a[4])
    elif a[0] == "attack":
        attack(a[1], float(a[2]), float(a[3]), a[4], a[5] if len(a) > 5 else None)
    elif a[0] == "agent":
        agent(a[1], a[2], a[3], float(a[4]), float(a[5]), a[6], a[7])
    elif a[0] == "resend":
        return resend(a[1], a[2], a[3], a[4], a[5], float(a[6]))
    else:
        print("unknown mode " + a[0], file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
