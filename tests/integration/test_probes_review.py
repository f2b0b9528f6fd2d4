#!/usr/bin/env python3
"""test_probes_review.py -- a hostile review of the probe protocol of issue
30 (docs/distributed.md, "The servers' side"): each case is one finding,
reproduced with real ordod processes, raw RESP sockets (a txn driven as
src/backend/shards.c drives it), a message-aware TCP proxy on peer links,
SIGSTOP/SIGKILL, and hostile connections. Each case failed on the server
the review was run against (its first draft of the new protocol) and
passes on the fixed one; where a fix changed what a case can observe (an
answer that now names a shard, a message now refused), the case asserts
the property on both paths. In ctest as integration_probes_review.

Usage: test_probes_review.py ORDOD_BINARY [CASE ...]   (default: all)

Cases, by severity (see each docstring):
  high    case_slow_release, case_late_release: a RELEASE that reaches a
          shard after the victim's client gave up (ELEASE) and retried on
          the same txn takes the retry's key: two holders.
  medium  case_kill_phantom, case_reorder_phantom, case_gid_impostor:
          phantom aborts; case_release_refused: a victim told its keys
          went while one is held; case_pins_lapse_before_answer: a
          member's timeout told before the victim's -DEADLOCK;
          case_hot_key_stall, case_stopped_peer_memory,
          case_victim_held_forever: liveness and bounds.
  hostile case_hello_hijack, case_forged_abort_chain, case_forged_release,
          case_pin_forever: what a connection with PEER's rights can do.

Every wait is bounded (scaled by ORDO_TEST_TIMEOUT_MULT); a watchdog dumps
the running shards' GRAPHs if a case hangs.
"""

import os
import select
import socket
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_probes import (Cluster, Sess, T, Txn, assert_holds,  # noqa: E402
                         free_ports, granted, is_error, watchdog)
from test_probes_faults import (FLAGS, first_reply, info, short,  # noqa
                                wait_until)

ORDOD = sys.argv[1]


def parse_msgs(buf):
    """The complete RESP arrays of bulks at the head of buf: a list of
    (message as a list of bytes, its length in buf)."""
    out, off = [], 0
    while True:
        e = buf.find(b"\r\n", off)
        if e < 0 or buf[off:off + 1] != b"*":
            return out
        n, p, msg = int(buf[off + 1:e]), e + 2, []
        for _ in range(n):
            e = buf.find(b"\r\n", p)
            if e < 0 or buf[p:p + 1] != b"$":
                return out
            k = int(buf[p + 1:e])
            if len(buf) < e + 2 + k + 2:
                return out
            msg.append(bytes(buf[e + 2:e + 2 + k]))
            p = e + 2 + k + 2
        out.append((msg, p - off))
        off = p


def verb(m):
    return m[1].upper() if len(m) > 1 and m[0].upper() == b"PEER" else b""


class MsgProxy:
    """A TCP proxy on one peer link (sender dials it, it dials the
    receiver) that reads the sender's messages one by one. cut_on(V): the
    first message of verb V is not passed on; the link is cut before it
    (both sides closed) and new connections are refused until heal().
    hold_on(V): from the first message of verb V on, what the sender sends
    is kept until release(). triggered is set when the rule fired; sent()
    lists the messages passed on. hold_back_after(V): the first message of
    verb V goes on, and its answer is kept until release()."""

    def __init__(self, up_port):
        self.up_port = up_port
        self.mu = threading.Lock()
        self.rule = None
        self.triggered = threading.Event()
        self.holding = False
        self.holding_back = False
        self.back = bytearray()  # receiver -> sender, kept
        self.refusing = False
        self.pairs = []  # [down, up, inbuf, held]
        self.fwd = []
        self.closed = False
        self.wake_r, self.wake_w = socket.socketpair()
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.port = self.lsock.getsockname()[1]
        threading.Thread(target=self._run, daemon=True).start()

    def _drop(self, pair):
        if pair in self.pairs:
            self.pairs.remove(pair)
        for s in pair[:2]:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _from_sender(self, pair, data):
        pair[2] += data
        msgs = parse_msgs(bytes(pair[2]))
        used = 0
        for m, n in msgs:
            raw = bytes(pair[2][used:used + n])
            used += n
            with self.mu:
                rule = self.rule
                if not self.holding and rule and verb(m) == rule[0]:
                    self.triggered.set()
                    self.rule = None
                    if rule[1] == "cut":
                        self.refusing = True
                        for p in list(self.pairs):
                            self._drop(p)
                        return
                    if rule[1] == "hold_back":
                        # This one goes on; its answer (and all the
                        # receiver says after it) is kept.
                        self.holding_back = True
                    else:
                        self.holding = True
                if self.holding:
                    pair[3] += raw
                    continue
                self.fwd.append(m)
            pair[1].sendall(raw)
        del pair[2][:used]

    def _run(self):
        while not self.closed:
            socks = [self.wake_r, self.lsock]
            socks += [s for p in self.pairs for s in p[:2]]
            try:
                ready, _, _ = select.select(socks, [], [], 0.5)
            except (OSError, ValueError):
                continue
            for s in ready:
                if s is self.wake_r:
                    self.wake_r.recv(4096)
                    with self.mu:
                        if not self.holding:
                            for p in self.pairs:
                                if p[3]:
                                    p[1].sendall(bytes(p[3]))
                                    p[3].clear()
                        if not self.holding_back and self.back:
                            for p in self.pairs:
                                p[0].sendall(bytes(self.back))
                            self.back.clear()
                elif s is self.lsock:
                    try:
                        down, _ = s.accept()
                    except OSError:
                        continue
                    if self.refusing:
                        down.close()
                        continue
                    try:
                        up = socket.create_connection(
                            ("127.0.0.1", self.up_port), timeout=T(2))
                    except OSError:
                        down.close()
                        continue
                    self.pairs.append([down, up, bytearray(), bytearray()])
                else:
                    pair = next((p for p in self.pairs if s in p[:2]), None)
                    if pair is None:
                        continue
                    try:
                        data = s.recv(65536)
                    except OSError:
                        data = b""
                    if not data:
                        self._drop(pair)
                        continue
                    if s is pair[0]:
                        self._from_sender(pair, data)
                    else:
                        with self.mu:
                            if self.holding_back:
                                self.back += data
                                continue
                        try:
                            pair[0].sendall(data)
                        except OSError:
                            self._drop(pair)

    def cut_on(self, v):
        with self.mu:
            self.rule = (v, "cut")

    def hold_on(self, v):
        with self.mu:
            self.rule = (v, "hold")

    def hold_back_after(self, v):
        """The first message of verb v goes on; what the receiver says
        from then on (its answer first) is kept until release()."""
        with self.mu:
            self.rule = (v, "hold_back")

    def cut(self):
        """Closes the link's connections now (what was held is lost) and
        refuses new ones until heal()."""
        with self.mu:
            self.refusing = True
            self.holding = self.holding_back = False
            self.back.clear()
            for p in list(self.pairs):
                self._drop(p)

    def heal(self):
        with self.mu:
            self.refusing = False

    def release(self):
        with self.mu:
            self.holding = False
            self.holding_back = False
        self.wake_w.send(b"x")

    def sent(self):
        with self.mu:
            return list(self.fwd)

    def close(self):
        self.closed = True
        self.refusing = True
        for p in list(self.pairs):
            self._drop(p)
        self.lsock.close()
        self.wake_w.send(b"x")


def proxied_cluster(n, proxied, *flags):
    """n shards; proxied: the links (sender, receiver) that go through a
    MsgProxy. Returns the cluster and {(sender, receiver): proxy}."""
    ports = free_ports(n)
    names = ["127.0.0.1:%d" % p for p in ports]
    px = {k: MsgProxy(ports[k[1]]) for k in proxied}

    def peers(i):
        return ",".join("%s=127.0.0.1:%d" % (names[j], px[(i, j)].port)
                        if (i, j) in px else names[j]
                        for j in range(n) if j != i)
    return Cluster(n, *flags, ports=ports, peers=peers), px


def reply_within(sess, bound):
    """The next reply on sess within bound seconds (scaled), or None."""
    if not sess.buf:
        r, _, _ = select.select([sess.sock], [], [], T(bound))
        if not r:
            return None
    return sess.reply()


# ---- The cases --------------------------------------------------------------

def case_late_release():
    """HIGH. A RELEASE that is lost with its link is sent again on the next
    link, however late, and R lets go of whatever the victim's gid holds
    THEN. Shards s0, s1; the link s0->s1 is cut as the RELEASE goes out
    (and stays down 2 s). T (younger) holds x on s1 and waits on s0 for y
    (WAIT 1900, as the sharded client sends for a 2 s deadline); A holds y
    and waits on s1 for x. T is the victim at s0; its -DEADLOCK waits for
    the RELEASE's answer, so T's client, as src/backend/shards.c does,
    gives up at its 2 s bound (ORDO_ELEASE), gives back every key (UNLOCK
    on s1), and ordo_retry runs the body again on the same txn (same gid,
    same session on s1): T takes z on s1, granted. The link comes back; s0
    sends the old RELEASE again; s1 lets z go, silently. Another txn O is
    then granted z: two holders of z, T never told."""
    c, px = proxied_cluster(2, [(0, 1)], *FLAGS)
    p01 = px[(0, 1)]
    done = watchdog(c, 60)
    o = None
    try:
        a, t = Txn(c), Txn(c)  # t younger: the victim
        t.lock_ok(1, "lr:x")
        a.lock_ok(0, "lr:y")
        p01.cut_on(b"RELEASE")
        sent = time.monotonic()
        t.lock_send(0, "lr:y", 1900)  # HELDAT s1
        a.lock_send(1, "lr:x")  # HELDAT s0: the cycle closes
        assert p01.triggered.wait(T(5)), "no RELEASE went to s1 within 5 s: " \
            "the cycle {T,A} was not resolved"
        # T's client: its LOCK at s0 unanswered at its 2 s bound, or
        # answered -DEADLOCK naming s1, whose release went unconfirmed (the
        # link stayed down): either way its client gives back every key
        # itself and retries.
        r = reply_within(t.sess[0], max(0.0, 2.0 - (time.monotonic() - sent)))
        if r is None:
            t.sess.pop(0).sock.close()
        else:
            assert is_error(r, "DEADLOCK") and ("not confirmed released on %s"
                                                % c.names[1]) in r[1], \
                "T's LOCK was answered before the RELEASE was, without " \
                "naming s1: %s" % short(r)
        t.pending.pop(0)
        t.keys.pop(0, None)
        # ELEASE: every key goes (UNLOCK on s1; T's session there is
        # frozen until the abort's freeze runs out, then it runs).
        assert t.sess[1].cmd("UNLOCK") == 1
        t.keys[1] = {}
        got = first_reply({a: 1}, 5)
        assert got is not None and granted(got[1], "lr:x"), got
        # ordo_retry: unlock_all again, then the body again, same txn.
        assert t.sess[1].cmd("UNLOCK") == 0
        t.lock_ok(1, "lr:z")
        relbefore = int(info(c, 1, "probes", "releases_done"))
        p01.heal()
        # s0 dials s1 again (backoff at most 1 s) and says the old RELEASE
        # again right after its HELLO; a server that gives it up sends
        # none (then this waits its bound, 3 s after the new link).
        wait_until(lambda: any(verb(m) == b"HELLO" for m in p01.sent()[1:]),
                   5, "s0 never linked to s1 again")
        try:
            wait_until(lambda: int(info(c, 1, "probes", "releases_done")) >
                       relbefore, 3, "")
        except AssertionError:
            pass
        rel = int(info(c, 1, "probes", "releases_done")) - relbefore
        o = Sess(c.ports[1])
        ro = o.cmd("LOCK", 1, "lr:z", "X", "WAIT", 0)
        hz = [h[0] for h in c.holders(1, "lr:z")[0]]
        assert not granted(ro), "two holders of z: T was granted z on s1 " \
            "(retry of the same txn after ELEASE) and never told it lost " \
            "it; %d RELEASE of the old abort applied %.1f s after it went " \
            "out let z go; O was then granted z (HOLDERS z: %s, T's " \
            "session %s)" % (rel, time.monotonic() - sent, hz,
                             t.sess[1].cmd("SESSION", "ID"))
        assert_holds(t, "T after its retry")
        assert_holds(a, "A")
        for x in (a, t):
            x.end()
    finally:
        if o:
            o.sock.close()
        done.set()
        c.stop()
        for p in px.values():
            p.close()


def case_kill_phantom():
    """MEDIUM. SESSION KILL ends a pinned wait in the middle of a
    confirmation (srv_sess_kill -> srv_sess_drop, past the pins that hold
    back a disconnect and a lease's end). Shards s0, s1. A (older) holds y
    on s0 and waits on s1 for x; B (younger) holds x on s1 and waits on s0
    for y: B is the victim at s0. s1 confirms (pins A's wait, freezes B
    there); its :1 is held on the link for a moment, during which A's own
    client kills A's session on s1 (a user may kill its own sessions). The
    cycle is gone (A waits nowhere), yet B is then told -DEADLOCK: a
    phantom, by the kernel's arrival times of the two replies."""
    c, px = proxied_cluster(2, [(0, 1)], *FLAGS)
    p01 = px[(0, 1)]
    done = watchdog(c, 60)
    killer = None
    try:
        a, b = Txn(c), Txn(c)  # b younger: the victim
        a.lock_ok(0, "kp:y")
        b.lock_ok(1, "kp:x")
        a_s1 = a.on(1).cmd("SESSION", "ID")
        p01.hold_back_after(b"CONFIRM")
        b.lock_send(0, "kp:y")  # HELDAT s1
        a.lock_send(1, "kp:x")  # HELDAT s0: the cycle closes
        assert p01.triggered.wait(T(5)), "no CONFIRM went to s1 in 5 s"
        wait_until(lambda: int(info(c, 1, "probes", "sessions_pinned")) >= 2,
                   2, "s1 did not pin A's wait and freeze B")
        killer = Sess(c.ports[1])
        assert killer.cmd("SESSION", "KILL", a_s1) == 1
        killed_at = killer.reply_ts
        ra = reply_within(a.sess[1], 2)
        assert is_error(ra, "KILLED"), ra
        a.sess.pop(1)
        a.pending.pop(1)
        # The cycle is broken: A waits nowhere. Now s0 hears s1's :1.
        p01.release()
        rb = reply_within(b.sess[0], 2)
        if rb is not None:
            b.pending.pop(0)
            assert not is_error(rb, "DEADLOCK"), "phantom: B was told " \
                "-DEADLOCK %.3f s after A's session on s1 was killed (A " \
                "waited nowhere: the cycle was already broken): %s" % (
                    b.sess[0].reply_ts - killed_at, short(rb))
        # Not a victim: B waits for y until A lets it go.
        assert a.sess[0].cmd("UNLOCK") == 1
        a.keys[0] = {}
        if rb is None:
            rb = b.lock_reply(0)
        assert granted(rb, "kp:y"), rb
        assert_holds(b, "B")
        for x in (a, b):
            x.end()
    finally:
        if killer:
            killer.sock.close()
        done.set()
        c.stop()
        for p in px.values():
            p.close()


def case_release_refused():
    """MEDIUM. A RELEASE answered with an error counts as done (probe.c
    answer(), ASK_RELEASE): the victim hears "-DEADLOCK ... every lock of
    this session was released" while a key of it is still held. Three
    shards in the middle of adding s2 (started first, it lists s0 and s1;
    s0 was restarted with s2 in its --peers, s1 not yet): s1 refuses s2's
    PEER HELLO, and so every message of s2's link. V (younger) holds x on
    s0 and z on s1 and waits on s2 for k; A holds k and waits on s0 for x.
    V is the victim at s2; its RELEASE to s1 is answered -ERR; V is told
    -DEADLOCK and z on s1 is still V's."""
    ports = free_ports(3)
    names = ["127.0.0.1:%d" % p for p in ports]
    peers = {0: "%s,%s" % (names[1], names[2]), 1: names[0],
             2: "%s,%s" % (names[0], names[1])}
    c = Cluster(3, *FLAGS, ports=ports, peers=peers.get,
                linked={0: 2, 1: 1, 2: 2}.get)
    done = watchdog(c, 60)
    try:
        a, v = Txn(c), Txn(c)  # v younger: the victim
        v.lock_ok(0, "rr:x")
        v.lock_ok(1, "rr:z")
        a.lock_ok(2, "rr:k")
        v.lock_send(2, "rr:k")  # HELDAT s0,s1
        a.lock_send(0, "rr:x")  # HELDAT s2: the cycle closes
        got = first_reply({v: 2}, 5)
        assert got is not None, "the cycle {V,A} was not resolved in 5 s"
        rv = got[1]
        hz = c.holders(1, "rr:z")[0]
        # An answer that says every key went must be true; one that names
        # s1 as not confirmed leaves z to V's own client.
        assert not (is_error(rv, "DEADLOCK") and hz and
                    ("not confirmed released on %s" % c.names[1]) not in
                    rv[1]), "V was told %r, yet s1 still has z held by V's " \
            "session (HOLDERS z: %s): s1 answered s2's RELEASE with an " \
            "error, counted as done" % (rv[1], hz)
        a.end()
        v.end()
    finally:
        done.set()
        c.stop()


def case_hello_hijack():
    """MEDIUM (needs a client with PEER's rights: with --requirepass and no
    ACL file, every client). A connection that says PEER HELLO with a real
    peer's name and leaves takes that peer's link over for good: the real
    link's BLOCKEDs are answered +OK and dropped as "stale" (probe.c,
    srv_probe_cmd: current = pe->in_conn == c->id; the hijacker's close sets
    in_conn to 0), so the real peer never says them again, and no cycle
    through it is found. Shards s0, s1; one such connection to each, closed
    at once; then a cycle {A,B} forms and is never resolved."""
    c = Cluster(2, *FLAGS)
    done = watchdog(c, 60)
    try:
        for i in (0, 1):
            h = Sess(c.ports[i])
            assert h.cmd("PEER", "HELLO", c.names[1 - i]) == (False, "OK")
            h.sock.close()
        wait_until(lambda: all(Sess(c.ports[i]).cmd("CLIENT", "LIST")
                               .count(b"\n") == 2 for i in (0, 1)), 5,
                   "the hijackers' connections never closed")
        a, b = Txn(c), Txn(c)
        a.lock_ok(0, "hh:x")
        b.lock_ok(1, "hh:y")
        a.lock_send(1, "hh:y", int(T(8000)))  # HELDAT s0
        b.lock_send(0, "hh:x", int(T(8000)))  # HELDAT s1
        pending = {a: 1, b: 0}
        got = first_reply(pending, 5)
        assert got is not None, "the cycle {A,B} over s0,s1 was not " \
            "resolved in 5 s after a PEER HELLO from a client that left " \
            "(blocked_entries: s0 %s, s1 %s; the real links are up: %s, %s)" \
            % (info(c, 0, "probes", "blocked_entries"),
               info(c, 1, "probes", "blocked_entries"),
               info(c, 0, "probes", "peers_linked"),
               info(c, 1, "probes", "peers_linked"))
        assert is_error(got[1], "DEADLOCK") or granted(got[1]), \
            "the cycle {A,B} was not found: %s" % short(got[1])
        for t in (a, b):
            t.end()
    finally:
        done.set()
        c.stop()


def case_forged_abort_chain():
    """MEDIUM/hostile. An ABORT is confirmed hop by hop, but nothing checks
    that its hops make a cycle (hop i's "next" is hop i+1's txn, the last
    one's is the first's): a path of one standing edge passes. Shards s0,
    s1. V waits on s0 for k, which W holds; nothing else waits anywhere.
    A connection says PEER HELLO s1 and then ABORT V wseq 1 [s0 V wseq 0
    W] (wseq guessed: a counter): V hears -DEADLOCK "cross-shard", a
    phantom. The same with hops on other shards: each shard confirms its
    own hops, and no one the chain."""
    c = Cluster(2, *FLAGS)
    done = watchdog(c, 60)
    h = None
    try:
        w, v = Txn(c), Txn(c)
        w.lock_ok(0, "fa:k")
        v.lock_send(0, "fa:k", int(T(5000)))
        wait_until(lambda: info(c, 0, "locks", "lock_waiting") == "1", 5,
                   "V never waited")
        h = Sess(c.ports[0])
        assert h.cmd("PEER", "HELLO", c.names[1]) == (False, "OK")
        for wseq in range(1, 64):
            h.send("PEER", "ABORT", v.gid, wseq, 1,
                   c.names[0], v.gid, wseq, 0, w.gid)
        answers = [h.reply() for _ in range(1, 64)]
        # Refused as a path that closes no cycle, or taken and not acted on.
        assert all(x == (False, "OK") or (is_error(x, "ERR") and
                                          "bad PEER message" in x[1])
                   for x in answers), answers
        r = reply_within(v.sess[0], 1)
        assert r is None, "phantom: V, which waits for W on s0 and is on no " \
            "cycle, was aborted by a forged ABORT whose one hop (V waits " \
            "for W) closes nothing: %s" % short(r)
        assert w.sess[0].cmd("UNLOCK") == 1
        w.keys[0] = {}
        assert granted(v.lock_reply(0), "fa:k")
        for t in (w, v):
            t.end()
    finally:
        if h:
            h.sock.close()
        done.set()
        c.stop()


def case_pin_forever():
    """MEDIUM/hostile. A PEER PIN renewed a pin and a freeze for as long as
    it kept coming: the receiver had no bound of its own. Shard s0 (lease
    1.5 s): W holds k, V waits for k with WAIT 300. A connection says PEER
    HELLO s1, CONFIRM id with a forged two-hop cycle [s0: V waits for W;
    s1: W waits for V] (:1: V's wait pinned, W frozen), then PIN id every
    0.5 s. The receiver's bound (a lease and a pin's bound from the
    CONFIRM) must end the freeze: W's UNLOCK is answered within it."""
    c = Cluster(2, "--probe-delay", "1", "--lease-ms", "1500")
    done = watchdog(c, 60)
    h = None
    try:
        w, v = Txn(c), Txn(c)
        w.lock_ok(0, "pf:k")
        v.lock_send(0, "pf:k", 300)
        wait_until(lambda: info(c, 0, "locks", "lock_waiting") == "1", 5,
                   "V never waited")
        h = Sess(c.ports[0])
        assert h.cmd("PEER", "HELLO", c.names[1]) == (False, "OK")
        for wseq in range(1, 64):  # the wait number guessed: a counter
            h.send("PEER", "CONFIRM", 1000 + wseq, 2, c.names[0], v.gid,
                   wseq, 0, w.gid, c.names[1], w.gid, 1, 0, v.gid)
        ans = [h.reply() for _ in range(1, 64)]
        assert 1 in ans, "no CONFIRM stood: %s" % ans
        pid = 1001 + ans.index(1)
        t0 = time.monotonic()
        w.sess[0].send("UNLOCK")
        w.sess[0].send("PING")
        r = None
        bound = 1.5 + 2.0 + 1.0  # the lease, a pin's bound, and slack
        while time.monotonic() - t0 < T(bound + 2):
            assert h.cmd("PEER", "PIN", pid) == (False, "OK")
            r = reply_within(w.sess[0], 0.5 / T(1))  # a PIN every 0.5 s
            if r is not None:
                break
        took = time.monotonic() - t0
        assert r is not None and took < T(bound), "W's UNLOCK of its own " \
            "key was not answered in %.1f s: W stays frozen while a hostile " \
            "connection sends PEER PIN (sessions_pinned %s)" % (
                took, info(c, 0, "probes", "sessions_pinned"))
        print("  the forged freeze ended after %.1f s of PINs" % took)
        for t in (w, v):
            t.end()
    finally:
        if h:
            h.sock.close()
        done.set()
        c.stop()


def case_hot_key_stall():
    """MEDIUM (liveness). A probe walk goes through every waiter queued
    ahead (waits_for over the whole key, for each), and every waiter walks
    every 500 ms: O(n^2) per walk, O(n^3) per round for n sharded txns on
    one key. Shards s0, s1; H holds a key on s0 and 300 txns of a sharded
    place (SESSION GID, no HELDAT) queue for it, the commonest hot-row
    pattern: taking their LOCKs and then PINGs stall for long. The same
    300 LOCKs from plain sessions (no gid) take milliseconds."""
    n = 300 if T(1) == 1 else 150  # sanitizer builds: smaller, still slow
    c = Cluster(2, *FLAGS)
    done = watchdog(c, 120)
    p = None
    ws = []
    try:
        plain = []
        t0 = time.monotonic()
        for _ in range(n):
            s = Sess(c.ports[0])
            s.send("LOCK", 1, "hk:plain", "X", "WAIT", 600000)
            plain.append(s)
        p = Sess(c.ports[0])
        assert p.cmd("PING") == (False, "PONG")
        plain_s = time.monotonic() - t0
        for s in plain:
            s.sock.close()
        h = Txn(c)
        h.lock_ok(0, "hk:hot")
        t0 = time.monotonic()
        for _ in range(n):
            t = Txn(c)
            t.lock_send(0, "hk:hot", 600000)
            ws.append(t)
        queued_s = time.monotonic() - t0
        worst = 0.0
        end = time.monotonic() + 5
        while time.monotonic() < end:
            a = time.monotonic()
            assert p.cmd("PING") == (False, "PONG")
            worst = max(worst, time.monotonic() - a)
            time.sleep(0.01)
        print("  %d plain LOCKs queued in %.2f s; %d sharded ones in %.2f s; "
              "then the slowest PING in 5 s: %.0f ms" % (
                  n, plain_s, n, queued_s, worst * 1000))
        assert queued_s < T(2) and worst < T(0.25), "a hot key with %d " \
            "sharded txns queued stalls the shard: their %d LOCKs (each a " \
            "SESSION GID and a LOCK round trip) took %.1f s to send (plain: " \
            "%.2f s), and a PING then took up to %.0f ms" % (
                n, n, queued_s, plain_s, worst * 1000)
        h.end()
    finally:
        for t in ws:
            t.end()
        if p:
            p.sock.close()
        done.set()
        c.stop()


def case_stopped_peer_memory():
    """MEDIUM (robustness). Nothing bounds what a shard queues on a link
    whose peer does not read (SIGSTOP: a paused VM), and a walk sends one
    PROBE per path, not per blocked txn: 60 sharded txns wait on s0 for
    a key of B, which waits on s1 (stopped); s0's memory grows by MBs a
    second for as long as s1 stays stopped (the probes go into libuv's
    write queue and the ask ring, unbounded)."""
    c = Cluster(2, "--probe-delay", "1", "--lease-ms", "600000")
    done = watchdog(c, 120)
    ws = []
    try:
        b, o = Txn(c), Txn(c)
        b.lock_ok(0, "sp:k")
        o.lock_ok(1, "sp:j")
        b.lock_send(1, "sp:j", 600000)  # HELDAT s0: s0 learns B waits at s1
        wait_until(lambda: info(c, 0, "probes", "blocked_entries") == "1", 5,
                   "s0 never heard that B waits at s1")

        def rss():
            with open("/proc/%d/status" % c.srv[0].pid) as f:
                for line in f:
                    if line.startswith("VmRSS"):
                        return int(line.split()[1])
        for i in range(60):
            t = Txn(c)
            ws.append(t)
            t.lock_ok(1, "sp:h%d" % i)  # a key on s1: its waits probe
        c.stop_shard(1)
        for t in ws:
            t.lock_send(0, "sp:k", 600000)  # HELDAT s1
        wait_until(lambda: info(c, 0, "locks", "lock_waiting") == "60", 5,
                   "the 60 LOCKs never waited")
        r0, t0 = rss(), time.monotonic()
        sent0 = int(info(c, 0, "probes", "probes_sent"))
        grown = 0
        while time.monotonic() - t0 < 6 and grown < 64 * 1024:
            time.sleep(0.5)
            grown = rss() - r0
        took = time.monotonic() - t0
        sent = int(info(c, 0, "probes", "probes_sent")) - sent0
        assert grown < 8 * 1024, "s0's RSS grew by %d kB in %.1f s while " \
            "its peer s1 was stopped (%d PROBEs queued for s1 meanwhile, %.0f " \
            "a second, for 1 txn blocked there): unbounded" % (
                grown, took, sent, sent / took)
    finally:
        for t in ws:
            t.end()
        done.set()
        c.stop()


def case_pins_lapse_before_answer():
    """MEDIUM. The victim's answer waits for every RELEASE, without bound,
    but the pins it is meant to come before are renewed for 10 s only
    (PR_RENEW_MAX_MS; docs/distributed.md step 6 says "while releases are
    outstanding"). Shards s0..s3, s2 stopped. A cycle of three: V (the
    youngest; holds v on s3 and z on s2) waits on s0 for A's key; A waits
    (WAIT 1000) on s1 for B's key; B waits on s3 for V's v. V is aborted
    at s0; B is granted v; A's wait stays pinned. 12 s later the pins lapse
    and A hears TIMEOUT, while V still has no answer (its RELEASE to s2 is
    outstanding): the member's timeout reaches its client before the
    victim's -DEADLOCK (step 7 says after), which an observer, and the
    fault harness's checker (issue 30: "each victim's cycle still stood
    when it was told"), take for a phantom. Now: the pins last until the
    victim's answer, which comes at most a lease after the abort (here
    4 s), naming the stopped shard; A hears of its WAIT only after."""
    c = Cluster(4, "--probe-delay", "1", "--lease-ms", "4000")
    done = watchdog(c, 90)
    try:
        a, b, v = Txn(c), Txn(c), Txn(c)  # v youngest: the victim
        a.lock_ok(0, "pl:a")
        b.lock_ok(1, "pl:b")
        v.lock_ok(3, "pl:v")
        v.lock_ok(2, "pl:z")
        c.stop_shard(2)
        v.lock_send(0, "pl:a")  # HELDAT s2,s3
        a.lock_send(1, "pl:b", 1000)  # HELDAT s0
        b.lock_send(3, "pl:v")  # HELDAT s1: the cycle closes
        got = first_reply({b: 3}, 5)
        assert got is not None and granted(got[1], "pl:v"), \
            "the cycle was not resolved in 5 s: %r" % (got,)
        t0 = time.monotonic()
        pending = {a: 1, v: 0}
        got = {}
        # Both answers, ordered by the kernel's arrival times (not by which
        # socket select names first).
        while pending:
            r = first_reply(pending, 16)
            if r is None:
                break
            got[r[0]] = r
        c.cont_shard(2)
        assert v in got, "the victim V had no answer in 16 s"
        if a in got:
            assert got[v][2] <= got[a][2], "A was told %s %.3f s before the " \
                "victim V heard anything (V's RELEASE to the stopped s2 is " \
                "outstanding; the pins that held A's WAIT 1000 lapsed)" % (
                    short(got[a][1]), got[v][2] - got[a][2])
        assert ("not confirmed released on %s" % c.names[2]) in got[v][1][1], \
            got[v]
        while pending:
            r = first_reply(pending, 5)
            assert r is not None, "no answer 5 s after s2 went on"
        first = None
        del first
        for t in (a, b, v):
            t.end()
    finally:
        done.set()
        c.stop()


def case_reorder_phantom():
    """MEDIUM. The engine's own answer to a local cycle through a soft edge
    (a queue reorder, src/detect/detect.c reorder()) moves a pinned wait:
    choose_victim passes pinned waits over, the reorder does not look at
    pins, so it breaks an edge that a cross-shard abort has confirmed.
    Shards s0, s1; H (oldest) holds k on s0; A holds a2 on s1 and n on s0;
    a plain session W holds m on s0. Q (youngest) waits on s0 for k and m
    (one LOCK), A then for k (behind Q: A->Q soft, A->H), H on s1 for a2.
    Cycles A->Q->H->A (victim Q) and A->H->A (victim A). Their CONFIRMs'
    answers from s1 are held a moment; meanwhile W waits for n (A's):
    local cycle A->Q->W->A at s0, which the engine breaks by putting A
    ahead of Q on k. Q is now on no cycle; yet it is told -DEADLOCK."""
    c, px = proxied_cluster(2, [(0, 1)], *FLAGS)
    p01 = px[(0, 1)]
    done = watchdog(c, 60)
    w = None
    try:
        h, a, q = Txn(c), Txn(c), Txn(c)  # q youngest
        h.lock_ok(0, "ro:k")
        a.lock_ok(1, "ro:a2")
        a.lock_ok(0, "ro:n")
        w = Sess(c.ports[0])
        assert granted(w.cmd("LOCK", 1, "ro:m", "X"))
        p01.hold_back_after(b"CONFIRM")
        q.on(0).send("LOCK", 2, "ro:k", "X", "ro:m", "X")
        wait_until(lambda: info(c, 0, "locks", "lock_waiting") == "1", 5,
                   "Q never waited")
        a.lock_send(0, "ro:k")  # HELDAT s1: queued behind Q
        wait_until(lambda: info(c, 0, "locks", "lock_waiting") == "2", 5,
                   "A never waited")
        h.lock_send(1, "ro:a2")  # HELDAT s0: both cycles close
        assert p01.triggered.wait(T(5)), "no CONFIRM went to s1"
        wait_until(lambda: int(info(c, 0, "probes", "aborts_in_progress")) >=
                   1, 5, "no abort started")
        qid = c.holders(0, "ro:k")[1][0][0]
        dl0 = int(info(c, 0, "deadlocks", "deadlocks"))
        w.send("LOCK", 1, "ro:n", "X", "WAIT", int(T(20000)))
        # The engine breaks the local cycle A->Q->W->A: not by moving the
        # pinned waits of k's queue (a reorder), but by a victim among the
        # unpinned members (W).
        wait_until(lambda: int(info(c, 0, "deadlocks", "deadlocks")) > dl0 or
                   info(c, 0, "deadlocks", "reorders") != "0", 5,
                   "the engine did not break the local cycle")
        after = c.holders(0, "ro:k")[1]
        assert info(c, 0, "deadlocks", "reorders") == "0", "the engine " \
            "reordered k's queue of pinned waits: %s" % after
        # Its victim is an unpinned member, Q or W (A's wait is pinned by
        # the abort in progress), with a plain -DEADLOCK.
        rw = reply_within(w, 1)
        if rw is None:
            assert all(x[0] != qid for x in after), after
        p01.release()
        rq = reply_within(q.sess[0], 2)
        ra = reply_within(a.sess[0], 0.5)
        assert not is_error(ra, "DEADLOCK") or "cross-shard" in ra[1], \
            "A, whose wait was pinned, was the engine's victim: %s" % short(ra)
        if rw is None:
            assert is_error(rq, "DEADLOCK") and "cross-shard" not in rq[1], \
                "the local cycle's victim was neither W nor Q: %s" % short(rq)
        for t in (h, a, q):
            t.end()
    finally:
        if w:
            w.sock.close()
        done.set()
        c.stop()
        for p in px.values():
            p.close()


def case_forged_release():
    """MEDIUM/hostile. PEER RELEASE is acted on for any gid, with no abort
    of the sender in progress and nothing asked back: a connection that
    says PEER HELLO with a peer's name takes every key of any txn,
    silently (the holder hears of it only at its next LOCK there). Shard
    s0: W holds k; a RELEASE 5 W.gid from such a connection; O is then
    granted k while W was told it holds it."""
    c = Cluster(2, *FLAGS)
    done = watchdog(c, 60)
    h = o = None
    try:
        w = Txn(c)
        w.lock_ok(0, "fr:k")
        h = Sess(c.ports[0])
        assert h.cmd("PEER", "HELLO", c.names[1]) == (False, "OK")
        n = h.cmd("PEER", "RELEASE", 5, w.gid)
        o = Sess(c.ports[0])
        ro = o.cmd("LOCK", 1, "fr:k", "X", "WAIT", 0)
        assert not granted(ro), "two holders of k: a forged PEER RELEASE " \
            "(answered %r) let go of W's k, and O was granted it; W was " \
            "never told" % (n,)
        w.end()
    finally:
        for x in (h, o):
            if x:
                x.sock.close()
        done.set()
        c.stop()


def case_victim_held_forever():
    """LOW/MEDIUM (hang). The victim's answer waits for every RELEASE with
    no bound: with a shard of its HELDAT gone for good (kill -9, not
    restarted), its LOCK (WAIT 1000) and every request after it on that
    connection (PING) are never answered, and the abort stays in progress
    forever (aborts_in_progress 1), its RELEASE queued for whenever a
    link to that name comes up again (which is how case_late_release
    takes a key). Shards s0, s1, s2; V holds x on s1 and z on s2; s2 is
    killed; the cycle {V,B} over s0,s1 is resolved (B granted)."""
    import signal
    c = Cluster(3, *FLAGS)
    done = watchdog(c, 60)
    try:
        b, v = Txn(c), Txn(c)  # v younger: the victim
        v.lock_ok(1, "vh:x")
        v.lock_ok(2, "vh:z")
        b.lock_ok(0, "vh:y")
        dead = c.srv.pop(2)
        os.kill(dead.pid, signal.SIGKILL)
        dead.proc.wait()
        try:
            dead.stop()  # its files; it exited with -9, as meant
        except AssertionError:
            pass
        wait_until(lambda: info(c, 0, "probes", "peers_linked") == "1", 5,
                   "s0 never saw s2 go")
        v.lock_send(0, "vh:y", 1000)  # HELDAT s1,s2
        b.lock_send(1, "vh:x")  # HELDAT s0: the cycle closes
        got = first_reply({b: 1}, 5)
        assert got is not None and granted(got[1], "vh:x"), got
        v.sess[0].send("PING")
        t0 = time.monotonic()
        r = reply_within(v.sess[0], 15)
        assert r is not None, "V's LOCK (WAIT 1000) and its PING after it " \
            "had no answer %.0f s after the abort took effect (s2, in V's " \
            "HELDAT, is gone); s0's aborts_in_progress %s" % (
                time.monotonic() - t0,
                info(c, 0, "probes", "aborts_in_progress"))
        for t in (b, v):
            t.end()
    finally:
        done.set()
        c.stop()


def case_gid_impostor():
    """MEDIUM (a plain client, no PEER rights). SESSION GID takes any gid,
    even one another session of this shard has, and the probes and the
    confirmation match txns by gid alone (probe_walk, hop_holder): a
    session that borrows a waiting txn's gid makes a chain look like a
    cycle, and the borrowed txn is aborted. Shards s0, s1. A holds a1 on
    s1; B (younger) holds b0 on s0 and waits on s1 for a1 (HELDAT s0): a
    chain B -> A. A session I says SESSION GID B.gid on s0 and takes k;
    A then waits on s0 for k, i.e. for I, which runs. No cycle: I is not
    B. Yet B is told -DEADLOCK "cross-shard"."""
    c = Cluster(2, *FLAGS)
    done = watchdog(c, 60)
    imp = None
    try:
        a, b = Txn(c), Txn(c)  # b younger
        a.lock_ok(1, "gi:a1")
        b.lock_ok(0, "gi:b0")
        b.lock_send(1, "gi:a1", int(T(5000)))  # HELDAT s0
        wait_until(lambda: info(c, 0, "probes", "blocked_entries") == "1", 5,
                   "s0 never heard that B waits at s1")
        imp = Sess(c.ports[0])
        r = imp.cmd("SESSION", "GID", b.gid)
        # A txn has one session on a shard: the borrowed gid is refused,
        # and I goes on as a plain session (nothing to borrow).
        assert is_error(r, "ERR") and "global id in use" in r[1], r
        assert granted(imp.cmd("LOCK", 1, "gi:k", "X"), "gi:k")
        a.lock_send(0, "gi:k", int(T(5000)))  # HELDAT s1: waits for I
        r = reply_within(b.sess[1], 2)
        assert r is None, "phantom: B, which waits for A, which waits for " \
            "a session I that runs (it only borrowed B's gid), was told " \
            "%s" % short(r)
        assert imp.cmd("UNLOCK") == 1
        got = first_reply({a: 0}, 5)
        assert got is not None and granted(got[1], "gi:k"), got
        for t in (a, b):
            t.end()
    finally:
        if imp:
            imp.sock.close()
        done.set()
        c.stop()


def case_slow_release():
    """HIGH. The same as case_late_release with no link cut, only a slow
    one: the victim's client bounds its LOCK by its deadline (WAIT is the
    deadline less 5%, at most 1 s less: src/backend/ordod.h), the victim's
    answer waits for every RELEASE, and a RELEASE to a shard of its HELDAT
    that is not on the cycle (so nothing there is frozen) may come after
    that bound. Shards s0, s1, s2; T (younger) holds x on s1 and z on s2,
    and waits on s0 (WAIT 1900: a 2 s deadline) for y; A holds y and,
    1.5 s later, waits on s1 for x. T is the victim; its RELEASE to s2 is
    slow (held by a proxy on s0->s2 until the end of the case). T's client
    gives up at 2 s (ELEASE), gives back its keys, and ordo_retry takes z
    on s2 again (same txn, same gid); then the RELEASE arrives and s2 lets
    z go. O is granted z: two holders."""
    c, px = proxied_cluster(3, [(0, 2)], *FLAGS)
    p02 = px[(0, 2)]
    done = watchdog(c, 60)
    o = None
    try:
        a, t = Txn(c), Txn(c)  # t younger: the victim
        t.lock_ok(1, "sr:x")
        t.lock_ok(2, "sr:z")
        a.lock_ok(0, "sr:y")
        p02.hold_on(b"RELEASE")
        sent = time.monotonic()
        t.lock_send(0, "sr:y", 1900)  # HELDAT s1,s2: a 2 s deadline
        time.sleep(1.5)  # the cycle closes late in T's wait, as it may
        a.lock_send(1, "sr:x")  # HELDAT s0: the cycle closes
        got = first_reply({a: 1}, 2)
        assert got is not None and granted(got[1], "sr:x"), got
        assert p02.triggered.wait(T(1)), "no RELEASE went to s2"
        effect = time.monotonic() - sent
        r = reply_within(t.sess[0], max(0.0, 2.0 - (time.monotonic() - sent)))
        assert r is None, "T was answered in time: %s" % short(r)
        # T's client at its bound: ELEASE, every key given back.
        t.sess.pop(0).sock.close()
        t.pending.pop(0)
        # (T's session on s1 stays frozen while the abort renews its pins,
        # up to 10 s: its UNLOCK there is sent and answered later.)
        t.sess[1].send("UNLOCK")
        assert t.sess[2].cmd("UNLOCK") == 1
        t.keys = {}
        # ordo_retry: the body again on the same txn.
        t.lock_ok(2, "sr:z")
        retook = time.monotonic() - sent
        def handled():
            return (int(info(c, 2, "probes", "releases_done")) +
                    int(info(c, 2, "probes", "releases_stale")))
        rel0 = handled()
        p02.release()
        wait_until(lambda: handled() > rel0, 5, "the RELEASE never reached s2")
        o = Sess(c.ports[2])
        ro = o.cmd("LOCK", 1, "sr:z", "X", "WAIT", 0)
        assert not granted(ro), "two holders of z: the abort took effect at " \
            "%.2f s, T's client gave up at 2.0 s (no answer: its RELEASE to " \
            "s2 outstanding) and retook z at %.2f s; the RELEASE, %.2f s " \
            "late, then let z go and O was granted it" % (
                effect, retook, time.monotonic() - sent - effect)
        assert t.sess[1].reply() == 0  # x went with the RELEASE to s1
        assert_holds(t, "T after its retry")
        for x in (a, t):
            x.end()
    finally:
        if o:
            o.sock.close()
        done.set()
        c.stop()
        for p in px.values():
            p.close()


# By severity: high (two holders), then phantoms and a victim told falsely,
# then liveness and robustness, then what a hostile PEER connection can do.
CASES = [case_slow_release, case_late_release,
         case_kill_phantom, case_reorder_phantom, case_gid_impostor,
         case_release_refused, case_pins_lapse_before_answer,
         case_hot_key_stall, case_stopped_peer_memory,
         case_victim_held_forever,
         case_hello_hijack, case_forged_abort_chain, case_forged_release,
         case_pin_forever]


def main():
    want = sys.argv[2:]
    cases = [x for x in CASES if not want or x.__name__ in want]
    assert cases, "no case named %s" % want
    failed = 0
    t_all = time.monotonic()
    for case in cases:
        t0 = time.monotonic()
        try:
            case()
            print("ok   %s (%.1f s)" % (case.__name__,
                                        time.monotonic() - t0))
        except Exception:
            failed += 1
            print("FAIL %s (%.1f s)" % (case.__name__,
                                        time.monotonic() - t0))
            traceback.print_exc()
        sys.stdout.flush()
    print("%d passed, %d failed in %.1f s" % (
        len(cases) - failed, failed, time.monotonic() - t_all))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
