#!/usr/bin/env python3
"""test_probes.py -- deadlocks across shards of ordod, found by probes
(docs/distributed.md), against real ordod processes linked by --peers.

Usage: test_probes.py ORDOD_BINARY ORDO_CLI

Each case drives txns the way the sharded ordod:// client does: one session
per shard a txn touches, each told the txn's global id (SESSION GID), and
each LOCK sent while the txn holds keys on other shards naming them
(HELDAT). ORDO_TEST_TIMEOUT_MULT scales the bounds.
"""

import os
import signal
import socket
import struct
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ordod_proc import Ordod  # noqa: E402

ORDOD = sys.argv[1]
ORDO_CLI = sys.argv[2] if len(sys.argv) > 2 else None
MULT = float(os.environ.get("ORDO_TEST_TIMEOUT_MULT", "1"))
# Linux's SO_TIMESTAMPNS (socket(7)); Python does not name it.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


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
        # The kernel's arrival time of each segment: which of two replies
        # on two connections came first, whatever order they are read in.
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.buf = b""
        self.buf_ts = None  # arrival of the segment buf[0] came in
        self.reply_ts = None  # arrival of the last reply read

    def _recv(self):
        d, anc, _, _ = self.sock.recvmsg(65536, 64)
        if not d:
            raise EOFError("closed")
        ts = time.time()
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", data[:16])
                ts = sec + nsec / 1e9
        if not self.buf:
            self.buf_ts = ts
        self.buf += d

    def _line(self):
        while b"\r\n" not in self.buf:
            self._recv()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def reply(self):
        if not self.buf:
            self._recv()
        self.reply_ts = self.buf_ts
        return self._reply()

    def _reply(self):
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
                self._recv()
            d, self.buf = self.buf[:n], self.buf[n + 2:]
            return d
        if k == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise AssertionError("not RESP: %r" % line)

    def send(self, *a):
        self.sock.sendall(encode(*a))

    def cmd(self, *a):
        self.send(*a)
        return self.reply()


def granted(r, key=None):
    """Whether r is a LOCK's grant (docs/protocol.md): [lease ms left, [key,
    token, ...]] with a positive token per key (of key, if given)."""
    if not (isinstance(r, list) and len(r) == 2 and isinstance(r[0], int)
            and r[0] >= 0 and isinstance(r[1], list) and r[1]
            and len(r[1]) % 2 == 0):
        return False
    keys, toks = r[1][0::2], r[1][1::2]
    if not all(isinstance(k, bytes) for k in keys) or \
            not all(isinstance(x, int) and x > 0 for x in toks):
        return False
    return key is None or keys == [key if isinstance(key, bytes)
                                   else key.encode()]


def is_error(r, code):
    """Whether r is the error reply -CODE ..."""
    return isinstance(r, tuple) and r[0] and r[1].split(" ", 1)[0] == code


class Txn:
    """A txn over shards: sessions opened lazily, one gid for all. It keeps
    what it was told it holds: keys[shard] = {key: (mode, token)} (grants
    add, a cross-shard victim's -DEADLOCK empties every shard, a local one
    its waiting shard), which assert_holds checks against the servers."""
    seq = 0

    def __init__(self, cluster, prio=0):
        Txn.seq += 1
        # Begin time then random: later txns are younger (larger).
        self.gid = "%016x%016x" % (time.time_ns() + Txn.seq,
                                   int.from_bytes(os.urandom(8), "big"))
        self.c = cluster
        self.prio = prio
        self.sess = {}
        self.holds = set()  # shards where it has taken keys
        self.keys = {}
        self.pending = {}  # shard: (key, mode) of the LOCK in flight there

    def on(self, i):
        if i not in self.sess:
            s = Sess(self.c.ports[i])
            assert s.cmd("SESSION", "GID", self.gid) == (False, "OK")
            self.sess[i] = s
        return self.sess[i]

    def lock_send(self, i, key, wait=None, mode="X", heldat=None):
        args = ["LOCK", 1, key, mode]
        if wait is not None:
            args += ["WAIT", wait]
        if self.prio:
            args += ["PRIORITY", self.prio]
        others = heldat if heldat is not None else sorted(
            self.c.names[j] for j in self.holds if j != i)
        if others:
            args += ["HELDAT", ",".join(others)]
        self.on(i).send(*args)
        self.pending[i] = (key, mode)

    def lock_reply(self, i):
        r = self.sess[i].reply()
        key, mode = self.pending.pop(i)
        if isinstance(r, list):
            assert granted(r, key), "a malformed grant of %s: %r" % (key, r)
            self.holds.add(i)
            self.keys.setdefault(i, {})[key] = (mode, r[1][1])
        elif is_error(r, "DEADLOCK"):
            # A cross-shard victim's keys go on every shard before it is
            # told; the engine's own victim lets go of those of this shard.
            for j in list(self.keys):
                if j == i or "cross-shard" in r[1]:
                    self.keys[j] = {}
        return r

    def lock(self, i, key, wait=None, mode="X"):
        self.lock_send(i, key, wait, mode)
        return self.lock_reply(i)

    def lock_ok(self, i, key, mode="X"):
        """Takes key on shard i, which must be granted at once."""
        r = self.lock(i, key, None, mode)
        assert granted(r, key), "%s on shard %d: %r" % (key, i, r)
        return r

    def release_all(self):
        """UNLOCK on every shard where it took keys: each answers the
        number of keys the txn still held there, which must be what it was
        told it holds (0 for a victim's)."""
        for i in sorted(self.holds):
            r = self.sess[i].cmd("UNLOCK")
            want = len(self.keys.get(i, {}))
            assert r == want, "UNLOCK on shard %d released %r keys of txn " \
                "%s, which was told it holds %d" % (i, r, self.gid, want)
        self.holds.clear()
        self.keys.clear()

    def end(self):
        for s in self.sess.values():
            s.sock.close()


def assert_holds(t, where=""):
    """Txn t holds on every shard exactly the keys it was told it holds,
    with the tokens of their grants (LOCKS of each of its sessions; none
    may have a LOCK in flight)."""
    assert not t.pending, "txn %s still waits at %s" % (t.gid, t.pending)
    for s in t.sess.values():
        s.send("LOCKS")  # all at once, then the replies
    for i, s in sorted(t.sess.items()):
        got = {}
        for e in s.reply():
            got[e[0].decode()] = (e[1].decode(), e[2])
        want = t.keys.get(i, {})
        assert got == want, "%stxn %s on shard %d holds %s, but was told " \
            "it holds %s" % (where and where + ": ", t.gid, i, got, want)


class Cluster:
    """n ordod shards linked by --peers. peers(i), if given, is shard i's
    --peers (default: every other shard's name), and linked(i) how many
    links shard i must have up before the cluster is ready (default n-1)."""

    def __init__(self, n, *flags, peers=None, linked=None, ports=None):
        self.ports = ports or free_ports(n)
        self.names = ["127.0.0.1:%d" % p for p in self.ports]
        self.stopped = set()
        self.srv = []
        for i in range(n):
            pl = peers(i) if peers else ",".join(
                x for j, x in enumerate(self.names) if j != i)
            self.srv.append(Ordod(ORDOD, "--port", self.ports[i],
                                  "--lease-ms", "1000", "--peers", pl,
                                  *flags))
        # Every link up before a case counts on it.
        end = time.monotonic() + T(10)
        while not all(self.info(i)["peers_linked"] ==
                      str(linked(i) if linked else n - 1) for i in range(n)):
            assert time.monotonic() < end, "the peers never linked"
            time.sleep(0.01)

    def stop_shard(self, i):
        """SIGSTOPs shard i: its kernel still takes connections and bytes,
        the process answers nothing until cont_shard(i)."""
        os.kill(self.srv[i].pid, signal.SIGSTOP)
        self.stopped.add(i)

    def cont_shard(self, i):
        if i in self.stopped:
            os.kill(self.srv[i].pid, signal.SIGCONT)
            self.stopped.discard(i)

    def info(self, i):
        s = Sess(self.ports[i])
        text = s.cmd("INFO", "probes").decode()
        s.sock.close()
        return dict(l.split(":", 1) for l in text.splitlines() if ":" in l
                    and not l.startswith("#"))

    def deadlocks(self, i, count=1):
        """Shard i's DEADLOCKS count, as dicts, newest first."""
        s = Sess(self.ports[i])
        recs = s.cmd("DEADLOCKS", count)
        s.sock.close()
        out = []
        for e in recs:
            out.append({k.decode(): v.decode() if isinstance(v, bytes) else v
                        for k, v in zip(e[0::2], e[1::2])})
        return out

    def total(self, field):
        return sum(int(self.info(i)[field]) for i in range(len(self.ports)))

    def holders(self, i, key):
        """HOLDERS key on shard i: ([(session, mode, token)], waiters)."""
        s = Sess(self.ports[i])
        h, w = s.cmd("HOLDERS", key)
        s.sock.close()
        return [(x[0], x[1].decode(), x[2]) for x in h], w

    def graphs(self):
        out = []
        for i, p in enumerate(self.ports):
            if i in self.stopped:
                out.append("shard %s: stopped (SIGSTOP)" % self.names[i])
                continue
            s = Sess(p)
            out.append("shard %s:\n%s" % (self.names[i],
                                          s.cmd("GRAPH", "DOT").decode()))
            s.sock.close()
        return "\n".join(out)

    def stop(self):
        for i in list(self.stopped):
            self.cont_shard(i)
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


def settle(pending, bound=20.0):
    """Reads the replies of waiting LOCKs as they come: pending maps a txn
    to the shard it waits at. A txn whose LOCK is over must hold, on every
    shard, what it was told it holds (assert_holds: a victim nothing), and
    then lets all its keys go at once (the next in its chain can then go
    on). Returns {txn: (reply, time)}, the time the reply's first segment
    arrived (SO_TIMESTAMPNS)."""
    import select
    out = {}
    end = time.monotonic() + T(bound)
    while pending:
        socks = {t.sess[i].sock: (t, i) for t, i in pending.items()}
        ready = [k for k, (t, i) in socks.items() if t.sess[i].buf]
        if not ready:
            left = end - time.monotonic()
            assert left > 0, "replies still missing: %d" % len(pending)
            ready, _, _ = select.select(list(socks), [], [], left)
        for k in ready:
            t, i = socks[k]
            r = t.lock_reply(i)
            out[t] = (r, t.sess[i].reply_ts)
            del pending[t]
            assert_holds(t, "after its LOCK's reply %r" % (r,))
            # Granted or not, the txn then lets go of all it holds, as a
            # client that retries does (a victim's keys are gone already).
            t.release_all()
    return out


def ring(cluster, shards, wait=None):
    """A cycle of len(shards) txns: txn i holds key i on shards[i], then
    waits for key i+1 on shards[i+1] (wait: {i: WAIT ms} for some).
    Returns the txns and {txn: (reply, time)} once every LOCK is over."""
    n = len(shards)
    txns = [Txn(cluster) for _ in range(n)]
    for i, t in enumerate(txns):
        t.lock_ok(shards[i], "ring:%s:%d" % (t.gid, i))
    pending = {}
    for i, t in enumerate(txns):
        nxt = txns[(i + 1) % n]
        t.lock_send(shards[(i + 1) % n], "ring:%s:%d" % (nxt.gid, (i + 1) % n),
                    (wait or {}).get(i))
        pending[t] = shards[(i + 1) % n]
    return txns, settle(pending)


def victims_of(out):
    return [t for t, (r, _) in out.items()
            if isinstance(r, tuple) and r[0] and r[1].startswith("DEADLOCK")]


def case_two_shards(c):
    """A waits for B on one shard, B for A on another: no shard sees the
    cycle; the probes find it, exactly one victim (the youngest) hears
    -DEADLOCK naming a cross-shard cycle after its locks are gone on both
    shards (the other is granted, which needs the victim's key)."""
    before = c.total("deadlocks_cross_shard")
    t0 = time.monotonic()
    txns, out = ring(c, [0, 1])
    took = time.monotonic() - t0
    v = victims_of(out)
    assert len(v) == 1, out
    assert out[v[0]][0][1].startswith("DEADLOCK chosen as the victim of a "
                                      "cross-shard deadlock"), out
    assert v[0].gid == max(t.gid for t in txns), "not the youngest"
    assert all(granted(out[t][0]) for t in txns if t is not v[0]), out
    assert c.total("deadlocks_cross_shard") == before + 1
    # The victim's shard (where it waited) records it by session and gid.
    vi = txns.index(v[0])
    at = [0, 1][(vi + 1) % 2]
    rec = c.deadlocks(at)[0]
    assert rec["kind"] == "cross-shard", rec
    assert rec["victim_gid"] == v[0].gid, rec
    assert rec["victim"] == v[0].sess[at].cmd("SESSION", "ID"), rec
    assert all(t.gid in rec["cycle"] for t in txns), rec
    print("  cycle of 2 over 2 shards resolved in %.1f ms" % (took * 1000))
    for t in txns:
        t.end()


def case_priority(c):
    """PRIORITY says first: the youngest is spared when it has the higher
    priority, and the older one with the lower priority is the victim."""
    a = Txn(c, prio=5)
    b = Txn(c, prio=1)  # younger, but lower: the victim
    a.lock_ok(0, "pr:a")
    b.lock_ok(1, "pr:b")
    a.lock_send(1, "pr:b")
    b.lock_send(0, "pr:a")
    out = settle({a: 1, b: 0})
    assert victims_of(out) == [b], out
    a.end()
    b.end()


def case_three_shards(c):
    """A cycle of three txns over three shards: one victim, the rest go."""
    txns, out = ring(c, [0, 1, 2])
    v = victims_of(out)
    assert len(v) == 1 and v[0].gid == max(t.gid for t in txns), out
    for t in txns:
        t.end()


def case_local_cycle(c):
    """A cycle inside one shard is the engine's: found at once, no probe
    sent and no cross-shard deadlock counted."""
    sent, xd = c.total("probes_sent"), c.total("deadlocks_cross_shard")
    txns, out = ring(c, [2, 2])
    v = victims_of(out)
    assert len(v) == 1, out
    # The engine's own -DEADLOCK names the sharded txns by gid too.
    text = out[v[0]][0][1]
    assert all(("gid %s" % t.gid) in text for t in txns), text
    rec = c.deadlocks(2)[0]
    assert rec["kind"] == "local" and rec["victim_gid"] == v[0].gid, rec
    assert all(("gid %s" % t.gid) in rec["cycle"] for t in txns), rec
    assert c.total("probes_sent") == sent
    assert c.total("deadlocks_cross_shard") == xd
    for t in txns:
        t.end()


def case_shared_txn(c):
    """Two cycles that share a txn: T0 waits for k (held in S by T1 and
    T2, on shard 0); T1 waits for x and T2 for y, both T0's (shards 1, 2).
    Each cycle gets its victim (T1 and T2 are younger than T0), and then
    everyone goes on."""
    t0, t1, t2 = Txn(c), Txn(c), Txn(c)
    t0.lock_ok(1, "sh:x")
    t0.lock_ok(2, "sh:y")
    for t in (t1, t2):
        t.lock_ok(0, "sh:k", "S")
    t0.lock_send(0, "sh:k")
    t1.lock_send(1, "sh:x")
    t2.lock_send(2, "sh:y")
    out = settle({t0: 0, t1: 1, t2: 2})
    assert sorted(x.gid for x in victims_of(out)) == sorted([t1.gid, t2.gid]), out
    assert granted(out[t0][0], "sh:k"), out
    for t in (t0, t1, t2):
        t.end()


def case_phantoms(c, cycles=None):
    """Many cycles of 2 to 4 txns over the 3 shards, some broken at random
    by a member's timeout or by a member letting go of the key the next one
    waits for (from its session on that shard, while it waits elsewhere),
    racing the probes. A victim's abort must come before anything that
    broke its cycle (a pinned wait cannot time out, and a release waits,
    until the abort): otherwise it was not on a live cycle. Unbroken cycles
    get exactly one victim, the youngest."""
    import random
    rng = random.Random(int(os.environ.get("PROBE_SEED", "20")))
    cycles = cycles or int(int(os.environ.get("PROBE_CYCLES", "10000")) *
                           float(os.environ.get("ORDO_TEST_SCALE", "1")))
    stats = {"cycles": 0, "victims": 0, "broken": 0, "phantoms": 0}
    lock = threading.Lock()
    errors = []

    def one(r):
        n = r.randint(2, 4)
        shards = [r.randrange(3) for _ in range(n)]
        if len(set(shards)) == 1:
            shards[0] = (shards[0] + 1) % 3
        kind = r.choice(["none", "timeout", "release"])
        who = r.randrange(n)
        if kind == "release" and shards[who] == shards[(who + 1) % n]:
            kind = "none"  # its session there is the waiting one
        txns = [Txn(c) for _ in range(n)]
        keys = ["ph:%s" % t.gid for t in txns]
        for i, t in enumerate(txns):
            t.lock_ok(shards[i], keys[i])
        pending = {}
        for i, t in enumerate(txns):
            j = (i + 1) % n
            w = r.randint(0, 8) if kind == "timeout" and i == who else None
            t.lock_send(shards[j], keys[j], w)
            pending[t] = shards[j]
        broke_at = None
        if kind == "release":
            time.sleep(r.random() * 0.008)
            s = txns[who].sess[shards[who]]
            got = s.cmd("UNLOCK", keys[who])
            assert got in (0, 1), got  # 0: it was the victim, released
            if got == 1:
                broke_at = s.reply_ts
                del txns[who].keys[shards[who]][keys[who]]
        c0 = time.monotonic()
        out = settle(pending)
        took = time.monotonic() - c0
        v = victims_of(out)
        if kind == "timeout":
            rr, at = out[txns[who]]
            if isinstance(rr, tuple) and rr[1].startswith("TIMEOUT"):
                broke_at = at
        with lock:
            if took > stats.get("slowest", (0, ""))[0]:
                stats["slowest"] = (took, "%s n=%d shards=%s victims=%d %s" % (
                    kind, n, shards, len(v),
                    [out[t][0] if not isinstance(out[t][0], list) else "ok"
                     for t in txns]))
            stats["cycles"] += 1
            stats["victims"] += len(v)
            if broke_at is not None:
                stats["broken"] += 1
            if len(v) > 1:
                errors.append("%d victims in one cycle" % len(v))
            if kind == "none" and (len(v) != 1 or
                                   v[0].gid != max(t.gid for t in txns)):
                errors.append("unbroken cycle: victims %s" % v)
            if v and broke_at is not None and broke_at < out[v[0]][1]:
                stats["phantoms"] += 1
                if stats["phantoms"] <= 3:
                    print("  phantom: %s who=%d n=%d shards=%s broke %.4f "
                          "before the abort; %s" % (
                              kind, who, n, shards, out[v[0]][1] - broke_at,
                              [out[t][0] if not isinstance(out[t][0], list)
                               else "ok" for t in txns]))
        for t in txns:
            t.end()

    def worker(seed, k):
        r = random.Random(seed)
        try:
            for _ in range(k):
                one(r)
        except Exception:
            with lock:
                errors.append(traceback.format_exc())

    nthreads = 8
    ts = [threading.Thread(target=worker,
                           args=(rng.random(), cycles // nthreads))
          for _ in range(nthreads)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print("  %(cycles)d cycles, %(broken)d broken at random, %(victims)d "
          "victims, %(phantoms)d phantom aborts" % stats +
          " in %.1f s; confirms failed %s, stale probes %s" % (
              time.monotonic() - t0, c.total("confirms_failed"),
              c.total("probes_stale")))
    print("  slowest cycle: %.3f s: %s" % stats.get("slowest", (0, "")))
    assert not errors, errors[:5]
    assert stats["cycles"] == nthreads * (cycles // nthreads)
    assert stats["phantoms"] == 0, stats


def case_long_cycles(c8):
    """Cycles of 2, 4, 8 and 16 txns over 2, 4, 8 and 8 shards (round
    robin): each found, one victim, the youngest; prints how long each
    took from the LOCK that closed it to the last reply."""
    for n, k in [(2, 2), (4, 4), (8, 8), (16, 8)]:
        t0 = time.monotonic()
        txns, out = ring(c8, [i % k for i in range(n)])
        v = victims_of(out)
        assert len(v) == 1 and v[0].gid == max(t.gid for t in txns), (n, out)
        print("  cycle of %d over %d shards: %.1f ms" % (
            n, k, (time.monotonic() - t0) * 1000))
        for t in txns:
            t.end()


def case_graph_gids(c):
    """GRAPH names a sharded txn by its global id too: a DOT label and a
    JSON "gids" member for each session with one that the graph names."""
    import json
    a, b = Txn(c), Txn(c)
    a.lock_ok(0, "gg:k")
    b.lock_send(0, "gg:k", 5000)
    probe = Sess(c.ports[0])
    end = time.monotonic() + T(5)
    while b"->" not in probe.cmd("GRAPH", "DOT"):
        assert time.monotonic() < end, "b never waited"
        time.sleep(0.002)
    dot = probe.cmd("GRAPH", "DOT").decode()
    for t in (a, b):
        assert ("gid %s" % t.gid) in dot, dot
    assert dot.rstrip().endswith("}"), dot
    j = json.loads(probe.cmd("GRAPH", "JSON"))
    assert sorted(j["gids"].values()) == sorted([a.gid, b.gid]), j
    assert j["edges"] and "waiting" in j, j
    a.release_all()
    assert granted(b.lock_reply(0), "gg:k")
    assert_holds(b)
    b.release_all()
    probe.sock.close()
    a.end()
    b.end()


def case_bank(c):
    """ordo bank over the 3 shards, both ways: ordered, 0 deadlocks; naive,
    deadlocks across shards found and retried, and nothing lost (the
    balance and every transfer checked by the bank itself)."""
    if not ORDO_CLI:
        raise AssertionError("usage: test_probes.py ORDOD ORDO_CLI")
    import json
    import subprocess
    url = "ordod://" + ",".join(c.names)
    xd = c.total("deadlocks_cross_shard")
    for mode in ([], ["--naive"]):
        r = subprocess.run([ORDO_CLI, "bank", "--backend", url, "--accounts",
                            "8", "--json", *mode], capture_output=True,
                           text=True, timeout=T(120))
        assert r.returncode == 0, (mode, r.stdout[-2000:], r.stderr[-2000:])
        j = json.loads(r.stdout)
        assert j["ok"] and j["violations"] == 0, j
        assert j["total_before"] == j["total_after"], j
        assert j["transfers"] == j["transfers_expected"], j
        if mode:
            assert j["deadlocks"] > 0 and j["victims"] > 0, j
        else:
            assert j["deadlocks"] == 0 and j["victims"] == 0, j
        print("  bank %s: %d transfers in %.2f s, %d deadlocks" % (
            j["mode"], j["transfers"], j["seconds"], j["deadlocks"]))
    assert c.total("deadlocks_cross_shard") > xd, "none across shards"


CASES = [case_two_shards, case_priority, case_three_shards, case_local_cycle,
         case_shared_txn, case_graph_gids, case_phantoms, case_bank]


def main():
    c = Cluster(3, "--probe-delay", "1")
    done = watchdog(c, 240)
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
    c.stop()
    c8 = Cluster(8, "--probe-delay", "1")
    try:
        case_long_cycles(c8)
        print("ok   case_long_cycles")
    except Exception:
        failed += 1
        print("FAIL case_long_cycles")
        traceback.print_exc()
        print(c8.graphs())
    done.set()
    c8.stop()
    print("%d passed, %d failed" % (len(CASES) + 1 - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
