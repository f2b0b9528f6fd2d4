#!/usr/bin/env python3
"""test_probes.py -- deadlocks across shards of ordod, found by probes
(docs/distributed.md), against real ordod processes linked by --peers.

Usage: test_probes.py ORDOD_BINARY

Each case drives txns the way the sharded ordod:// client does: one session
per shard a txn touches, each told the txn's global id (SESSION GID), and
each LOCK sent while the txn holds keys on other shards naming them
(HELDAT). ORDO_TEST_TIMEOUT_MULT scales the bounds.
"""

import os
import socket
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ordod_proc import Ordod  # noqa: E402

ORDOD = sys.argv[1]
MULT = float(os.environ.get("ORDO_TEST_TIMEOUT_MULT", "1"))


def T(s):
    return s * MULT


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def encode(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class Sess:
    """One session: a connection that sends a command and reads one reply
    (simple, error, integer, bulk or a flat array of those)."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.settimeout(T(20))
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            d = self.sock.recv(65536)
            if not d:
                raise EOFError("closed")
            self.buf += d
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def reply(self):
        line = self._line()
        k, rest = line[:1], line[1:]
        if k in (b"+", b"-"):
            return (k == b"-", rest.decode())
        if k == b":":
            return int(rest)
        if k == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.sock.recv(65536)
            d, self.buf = self.buf[:n], self.buf[n + 2:]
            return d
        if k == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise AssertionError("not RESP: %r" % line)

    def send(self, *a):
        self.sock.sendall(encode(*a))

    def cmd(self, *a):
        self.send(*a)
        return self.reply()


class Txn:
    """A txn over shards: sessions opened lazily, one gid for all."""
    seq = 0

    def __init__(self, cluster, prio=0):
        Txn.seq += 1
        # Begin time then random: later txns are younger (larger).
        self.gid = "%016x%016x" % (time.time_ns() + Txn.seq,
                                   int.from_bytes(os.urandom(8), "big"))
        self.c = cluster
        self.prio = prio
        self.sess = {}
        self.holds = set()

    def on(self, i):
        if i not in self.sess:
            s = Sess(self.c.ports[i])
            assert s.cmd("SESSION", "GID", self.gid) == (False, "OK")
            self.sess[i] = s
        return self.sess[i]

    def lock_send(self, i, key, wait=None):
        args = ["LOCK", 1, key, "X"]
        if wait is not None:
            args += ["WAIT", wait]
        if self.prio:
            args += ["PRIORITY", self.prio]
        others = sorted(self.c.names[j] for j in self.holds if j != i)
        if others:
            args += ["HELDAT", ",".join(others)]
        self.on(i).send(*args)

    def lock_reply(self, i):
        r = self.sess[i].reply()
        if isinstance(r, list):
            self.holds.add(i)
        return r

    def lock(self, i, key, wait=None):
        self.lock_send(i, key, wait)
        return self.lock_reply(i)

    def end(self):
        for s in self.sess.values():
            s.sock.close()


class Cluster:
    def __init__(self, n, *flags):
        self.ports = free_ports(n)
        self.names = ["127.0.0.1:%d" % p for p in self.ports]
        self.srv = []
        for i in range(n):
            peers = ",".join(x for j, x in enumerate(self.names) if j != i)
            self.srv.append(Ordod(ORDOD, "--port", self.ports[i],
                                  "--lease-ms", "1000", "--peers", peers,
                                  *flags))
        # Every link up before a case counts on it.
        end = time.monotonic() + T(10)
        while not all(self.info(i)["peers_linked"] == str(n - 1)
                      for i in range(n)):
            assert time.monotonic() < end, "the peers never linked"
            time.sleep(0.01)

    def info(self, i):
        s = Sess(self.ports[i])
        text = s.cmd("INFO", "probes").decode()
        s.sock.close()
        return dict(l.split(":", 1) for l in text.splitlines() if ":" in l
                    and not l.startswith("#"))

    def total(self, field):
        return sum(int(self.info(i)[field]) for i in range(len(self.ports)))

    def graphs(self):
        out = []
        for i, p in enumerate(self.ports):
            s = Sess(p)
            out.append("shard %s:\n%s" % (self.names[i],
                                          s.cmd("GRAPH", "DOT").decode()))
            s.sock.close()
        return "\n".join(out)

    def stop(self):
        for s in self.srv:
            s.stop()


def watchdog(cluster, seconds):
    """Fails the suite with every shard's wait-for graph if a case hangs."""
    done = threading.Event()

    def run():
        if not done.wait(T(seconds)):
            print("WATCHDOG: a case hung; the shards' graphs:\n" +
                  cluster.graphs(), flush=True)
            os._exit(1)
    threading.Thread(target=run, daemon=True).start()
    return done


def ring(cluster, shards):
    """A cycle of len(shards) txns: txn i holds key i on shards[i], then
    waits for key i+1 on shards[i+1]. Returns the txns and their replies to
    the closing LOCKs, in order."""
    n = len(shards)
    txns = [Txn(cluster) for _ in range(n)]
    for i, t in enumerate(txns):
        assert isinstance(t.lock(shards[i], "ring:%d" % i), list)
    for i, t in enumerate(txns):
        t.lock_send(shards[(i + 1) % n], "ring:%d" % ((i + 1) % n))
    replies = [t.lock_reply(shards[(i + 1) % n]) for i, t in enumerate(txns)]
    return txns, replies


def case_two_shards(c):
    """A waits for B on one shard, B for A on another: no shard sees the
    cycle; the probes find it, exactly one victim (the youngest) hears
    -DEADLOCK naming a cross-shard cycle after its locks are gone on both
    shards, and the other is granted."""
    before = c.total("deadlocks_cross_shard")
    t0 = time.monotonic()
    txns, replies = ring(c, [0, 1])
    took = time.monotonic() - t0
    victims = [i for i, r in enumerate(replies) if not isinstance(r, list)]
    assert len(victims) == 1, replies
    v = victims[0]
    err, text = replies[v]
    assert err and text.startswith("DEADLOCK chosen as the victim of a "
                                   "cross-shard deadlock"), text
    assert txns[v].gid == max(t.gid for t in txns), "not the youngest"
    assert isinstance(replies[1 - v], list)
    assert c.total("deadlocks_cross_shard") == before + 1
    print("  cycle of 2 over 2 shards resolved in %.1f ms" % (took * 1000))
    for t in txns:
        t.end()


def case_three_shards(c):
    """A cycle of three txns over three shards."""
    txns, replies = ring(c, [0, 1, 2])
    victims = [i for i, r in enumerate(replies) if not isinstance(r, list)]
    assert len(victims) == 1, replies
    assert txns[victims[0]].gid == max(t.gid for t in txns)
    for t in txns:
        t.end()


CASES = [case_two_shards, case_three_shards]


def main():
    c = Cluster(3, "--probe-delay", "1")
    done = watchdog(c, 120)
    failed = 0
    for case in CASES:
        try:
            case(c)
            print("ok   %s" % case.__name__)
        except Exception:
            failed += 1
            print("FAIL %s" % case.__name__)
            traceback.print_exc()
            print(c.graphs())
        sys.stdout.flush()
    done.set()
    c.stop()
    print("%d passed, %d failed" % (len(CASES) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
