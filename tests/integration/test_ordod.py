#!/usr/bin/env python3
"""test_ordod.py -- ordod as a real process over TCP, driven by a Redis client
library of another language (Debian's python3-redis) and by raw sockets.

Usage: test_ordod.py ORDOD_BINARY

One server is started for the suite (on a free port, in a temporary folder,
with a 1 s lease); the restart cases start their own. Every wait is bounded;
a case that would hang fails with the server's INFO and GRAPH printed.
Prints 'N passed, N failed' at the end and exits non-zero on any failure.
"""

import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import redis

ORDOD = sys.argv[1]
LEASE_MS = 1000


class Server:
    """An ordod process on a free port in its own folder."""

    def __init__(self, extra=(), folder=None):
        self.dir = folder or tempfile.mkdtemp(prefix="ordod-test-")
        self.proc = subprocess.Popen(
            [ORDOD, "--port", "0", "--dir", self.dir, "--lease-ms",
             str(LEASE_MS), "--verbose", "0", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self._readline(10)
        if not line.startswith("ready port="):
            raise RuntimeError("ordod did not start: %r %s" %
                               (line, self.proc.stderr.read()))
        self.port = int(line.strip().split("=")[1])

    def _readline(self, bound):
        result = []
        t = threading.Thread(target=lambda: result.append(
            self.proc.stdout.readline()))
        t.daemon = True
        t.start()
        t.join(bound)
        return result[0] if result else ""

    def client(self, **kw):
        return redis.Redis(host="127.0.0.1", port=self.port,
                           socket_timeout=10, **kw)

    def raw(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        return s

    def rss_kb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def alive(self):
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def lock(c, *keys, wait=None, mode="X"):
    args = ["LOCK", len(keys)]
    for k in keys:
        args += [k, mode]
    if wait is not None:
        args += ["WAIT", wait]
    return c.execute_command(*args)


def tokens(reply):
    pairs = reply[1]
    return {pairs[i]: pairs[i + 1] for i in range(0, len(pairs), 2)}


def ping_within(srv, ms=500):
    c = srv.client()
    t0 = time.monotonic()
    assert c.ping()
    took = (time.monotonic() - t0) * 1000
    c.close()
    assert took < ms, "PING took %.0f ms" % took


def wait_until(pred, bound=5.0, what="condition"):
    end = time.monotonic() + bound
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.005)
    raise AssertionError("timed out waiting for " + what)


def info(c, field):
    return c.info()[field]


# ---- Cases -------------------------------------------------------------------

def case_lock_release_tokens(srv):
    """A Redis client library takes two keys, sees tokens in canonical order,
    and releases them; another session then gets larger tokens."""
    a, b = srv.client(), srv.client()
    r = lock(a, "acct:2", "acct:1", wait=1000)
    assert 0 < r[0] <= LEASE_MS
    assert r[1][0] == b"acct:1" and r[1][2] == b"acct:2"
    t1 = tokens(r)
    try:
        lock(b, "acct:1", wait=0)
        raise AssertionError("a held key was granted")
    except redis.ResponseError as e:
        assert str(e).startswith("TIMEOUT"), e
    assert a.execute_command("UNLOCK") == 2
    t2 = tokens(lock(b, "acct:1", "acct:2", wait=0))
    assert t2[b"acct:1"] > t1[b"acct:1"] and t2[b"acct:2"] > t1[b"acct:2"]
    assert len(b.execute_command("LOCKS")) == 2
    holders, waiters = b.execute_command("HOLDERS", "acct:1")
    assert len(holders) == 1 and holders[0][1] == b"X" and waiters == []
    b.execute_command("UNLOCK")
    a.close()
    b.close()


def case_many_keys_one_session(srv):
    """One session takes 20,000 keys (pipelined LOCKs, a few reentrant) and
    lets them go in a random order, one by one: the server's index of a
    session's held keys (open addressing, deletions by backward shift) must
    find every key, whatever was removed before it, and LOCKS must shrink
    by one per last hold."""
    import random
    n = 20000
    a = srv.client()
    keys = ["many:%d" % i for i in range(n)]
    p = a.pipeline(transaction=False)
    for k in keys:
        p.execute_command("LOCK", 1, k, "X", "WAIT", 0)
    for k in keys[:100]:
        p.execute_command("LOCK", 1, k, "X", "WAIT", 0)  # a second hold
    assert all(isinstance(r, list) for r in p.execute())
    assert len(a.execute_command("LOCKS")) == n
    rng = random.Random(7)
    order = keys[:]
    rng.shuffle(order)
    p = a.pipeline(transaction=False)
    for k in order:
        p.execute_command("UNLOCK", k)
    got = p.execute()
    assert all(r == 1 for r in got), [r for r in got if r != 1][:5]
    # The 100 keys held twice are held once still; the rest are gone.
    left = a.execute_command("LOCKS")
    assert sorted(e[0] for e in left) == sorted(k.encode() for k in keys[:100])
    b = srv.client()
    assert _try(b, keys[-1])
    assert not _try(b, keys[0])
    assert a.execute_command("UNLOCK") == 100
    assert a.execute_command("LOCKS") == []
    a.close()
    b.close()


def case_disconnect_releases(srv):
    a, b = srv.client(), srv.client()
    lock(a, "d1", wait=0)
    a.connection_pool.disconnect()  # the session ends with its connection
    # At once, not at the end of the lease (1 s).
    wait_until(lambda: _try(b, "d1"), bound=0.5,
               what="d1 released at disconnect")
    b.close()


def _try(c, key):
    try:
        lock(c, key, wait=0)
        c.execute_command("UNLOCK", key)
        return True
    except redis.ResponseError:
        return False


def case_lease_expiry(srv):
    """A session that stops talking loses its locks when the lease ends; the
    next holder's token is larger, and the sleeper hears -LEASE."""
    a, b = srv.client(), srv.client()
    t1 = tokens(lock(a, "l1", wait=0))[b"l1"]
    t0 = time.monotonic()
    t2 = tokens(lock(b, "l1", wait=3000))[b"l1"]
    waited = time.monotonic() - t0
    assert t2 > t1
    assert 0.5 < waited < 2.5, "granted after %.2f s" % waited
    try:
        lock(a, "l2", wait=0)
        raise AssertionError("no -LEASE after the lease ran out")
    except redis.ResponseError as e:
        assert str(e).startswith("LEASE"), e
    b.execute_command("UNLOCK")
    a.close()
    b.close()


def case_resumable(srv):
    a = srv.client()
    tok = a.execute_command("SESSION", "RESUMABLE")
    lock(a, "r1", wait=0)
    sid = a.execute_command("SESSION", "ID")
    a.connection_pool.disconnect()  # drop the TCP connection, not the session
    b = srv.client()
    assert not _try(b, "r1")  # still held by the detached session
    c = srv.client()
    assert c.execute_command("SESSION", "RESUME", tok) == sid
    assert len(c.execute_command("LOCKS")) == 1
    c.execute_command("UNLOCK")
    assert _try(b, "r1")
    # One that does not come back in time loses its locks at lease end.
    d = srv.client()
    tok2 = d.execute_command("SESSION", "RESUMABLE")
    lock(d, "r2", wait=0)
    d.connection_pool.disconnect()
    time.sleep(LEASE_MS / 1000 * 1.6)  # the lease is the thing under test
    assert _try(b, "r2")
    e = srv.client()
    try:
        e.execute_command("SESSION", "RESUME", tok2)
        raise AssertionError("an expired session was resumed")
    except redis.ResponseError:
        pass
    # A session that detaches while its LOCK waits keeps waiting; the grant
    # that comes meanwhile is its own, and LOCKS shows it once resumed.
    f, g = srv.client(), srv.client()
    lock(g, "r3", wait=0)
    tok3 = f.execute_command("SESSION", "RESUMABLE")
    f.connection_pool.get_connection("x").send_command(
        "LOCK", 1, "r3", "X", "WAIT", 5000)
    wait_until(lambda: info(b, "lock_waiting") == 1, what="f waiting")
    f.connection_pool.disconnect()
    g.execute_command("UNLOCK")  # granted to the detached f
    h = srv.client()
    wait_until(lambda: not _try(b, "r3"), what="r3 granted to f")
    h.execute_command("SESSION", "RESUME", tok3)
    assert [x[0] for x in h.execute_command("LOCKS")] == [b"r3"]
    h.execute_command("UNLOCK")
    for x in (b, c, e, g, h):
        x.close()


def case_deadlock_two_and_three(srv):
    for n in (2, 3):
        cs = [srv.client() for _ in range(n)]
        for i, c in enumerate(cs):
            lock(c, "dl%d:%d" % (n, i), wait=0)
        results = [None] * n

        def want(i):
            try:
                lock(cs[i], "dl%d:%d" % (n, (i + 1) % n), wait=10000)
                results[i] = "ok"
            except redis.ResponseError as e:
                results[i] = str(e).split()[0]
            cs[i].execute_command("UNLOCK")

        ts = [threading.Thread(target=want, args=(i,)) for i in range(n)]
        for i, t in enumerate(ts):
            t.start()
            if i < n - 1:
                wait_until(lambda: info(srv.client(), "lock_waiting") == i + 1,
                           what="%d waiting" % (i + 1))
        for t in ts:
            t.join(15)
            assert not t.is_alive(), "a session hung in a %d-cycle" % n
        assert results.count("DEADLOCK") == 1, results
        assert results.count("ok") == n - 1, results
        for c in cs:
            c.close()


def case_one_release_wakes_one(srv):
    """100 sessions wait on one key; each release wakes exactly one."""
    h = srv.client()
    lock(h, "hot", wait=0)
    n = 100
    socks = []
    for i in range(n):
        s = srv.raw()
        s.sendall(b"*4\r\n$4\r\nLOCK\r\n$1\r\n1\r\n$3\r\nhot\r\n$1\r\nX\r\n")
        socks.append(s)
    probe = srv.client()
    wait_until(lambda: info(probe, "lock_waiting") == n, what="100 waiting")
    h.execute_command("UNLOCK")
    woken = 0
    for i in range(n):
        before = info(probe, "lock_wakeups")
        # Exactly one of the waiters has its reply now: find it, release.
        got = None
        end = time.monotonic() + 5
        while got is None and time.monotonic() < end:
            for s in socks:
                s.setblocking(False)
                try:
                    data = s.recv(4096)
                except BlockingIOError:
                    continue
                finally:
                    s.setblocking(True)
                if data:
                    got = s
                    break
        assert got is not None, "no waiter was granted"
        woken += 1
        socks.remove(got)
        got.sendall(b"*1\r\n$6\r\nUNLOCK\r\n")
        got.recv(64)
        got.close()
        if socks:
            wait_until(lambda: info(probe, "lock_wakeups") == before + 1,
                       what="one wake-up")
            assert info(probe, "lock_wakeups") == before + 1
    assert woken == n
    h.close()
    probe.close()


def case_bad_input(srv):
    """Malformed input gets an error and a closed connection; nothing else
    changes, and the server answers PING within 500 ms after each case."""
    holder = srv.client()
    lock(holder, "keep", wait=0)
    cases = [
        b"*2\r\n$4\r\nPING\r\n:5\r\n",          # a non-bulk element
        b"$4\r\nPING\r\n",                       # bulk without array
        b"*1\r\n$-5\r\n",                        # negative length
        b"*1\r\n$4294967296\r\n",                # 4 GB bulk: refused at once
        b"*2147483648\r\n",                      # huge count
        b"*1\r\n$4\r\nPINGxx",                   # missing CRLF
        b"\"unbalanced quote\r\n",               # inline quote
    ]
    for payload in cases:
        s = srv.raw()
        s.sendall(payload)
        data = s.recv(4096)
        assert data.startswith(b"-"), (payload, data)
        s.close()
        ping_within(srv)
    c = srv.client()
    for bad in (["LOCK"], ["LOCK", "1"], ["UNLOCKX"], ["LOCK", "1", "", "X"],
                ["LOCK", "1", "k", "Z"], ["LOCK", "999999", "k", "X"],
                ["HOLDERS"], ["EXTEND", "-1"]):
        try:
            c.execute_command(*bad)
            raise AssertionError("no error for %r" % (bad,))
        except redis.ResponseError:
            pass
    # Binary keys are keys.
    r = lock(c, b"\x00\xff\x00", wait=0)
    assert r[1][0] == b"\x00\xff\x00"
    c.execute_command("UNLOCK")
    # The holder kept its lock through all of it.
    assert len(holder.execute_command("LOCKS")) == 1
    holder.execute_command("UNLOCK")
    holder.close()
    c.close()


def bad_round(srv):
    case_bad_input(srv)
    # Connections opened and dropped.
    for _ in range(10000):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.close()
    ping_within(srv)
    # A client that never reads its replies: it is cut off, others go on.
    s = srv.raw()
    req = b"*2\r\n$4\r\nPING\r\n$65536\r\n" + b"x" * 65536 + b"\r\n"
    try:
        for _ in range(400):
            s.sendall(req)
    except OSError:
        pass
    ping_within(srv)
    s.close()


def sanitizer_build():
    """'tsan', 'asan' or None, read off the server binary."""
    with open(ORDOD, "rb") as f:
        data = f.read()
    if b"__tsan_init" in data:
        return "tsan"
    if b"__asan_init" in data:
        return "asan"
    return None


def case_memory_steady(srv):
    """Another identical round of bad input does not grow the server. The
    first round warms the allocator up; the next two are compared, with
    room for one client's worth of pending output (4 MiB, the cut-off of
    the client that does not read), which the allocator may keep or not.
    A leak of a kilobyte per dropped connection (10,000 a round) shows
    past that."""
    bad_round(srv)
    bad_round(srv)
    rss1 = srv.rss_kb()
    bad_round(srv)
    rss2 = srv.rss_kb()
    assert srv.alive()
    san = sanitizer_build()
    if san:
        # Under a sanitizer RSS says nothing: ThreadSanitizer's shadow and
        # history memory grows with every access, and AddressSanitizer keeps
        # freed memory in quarantine. There, leaks are LeakSanitizer's to
        # find when the server exits, and the suite checks that exit status.
        print("     (RSS %d -> %d kB not judged in a %s build)" %
              (rss1, rss2, san))
        return
    assert rss2 <= rss1 + 4096, "RSS grew %d -> %d kB" % (rss1, rss2)


def case_restart_tokens(srv_unused):
    """After kill -9 and a restart, every new token is larger than every
    token before; the unclean stop makes the server wait one lease unless
    --no-restart-delay."""
    folder = tempfile.mkdtemp(prefix="ordod-restart-")
    a = Server(folder=folder)
    c = a.client()
    before = max(tokens(lock(c, "f%d" % i, wait=0)).popitem()[1]
                 for i in range(50))
    a.stop(signal.SIGKILL)
    b = Server(folder=folder)
    c = b.client()
    assert c.info()["restart_delay_remaining_ms"] > 0
    try:
        lock(c, "f0", wait=0)
        raise AssertionError("granted during the restart delay")
    except redis.ResponseError as e:
        assert str(e).startswith("TIMEOUT"), e
    b.stop(signal.SIGKILL)
    d = Server(extra=("--no-restart-delay",), folder=folder)
    c = d.client()
    after = min(tokens(lock(c, "f%d" % i, wait=0)).popitem()[1]
                for i in range(50))
    assert after > before, (before, after)
    c.close()
    d.stop()
    # A clean stop leaves no delay.
    e = Server(folder=folder)
    assert e.client().info()["restart_delay_remaining_ms"] == 0
    e.stop()


def case_limits_and_auth(srv_unused):
    """maxclients refuses with -LIMIT (readable); requirepass demands AUTH,
    compared right; a non-loopback bind without a password is refused at
    start; a config file is read and flags win over it."""
    a = Server(extra=("--maxclients", "3"))
    held = [a.raw() for _ in range(3)]
    for s in held:
        s.sendall(b"PING\r\n")
        assert s.recv(64) == b"+PONG\r\n"
    extra = a.raw()
    data = extra.recv(256)
    assert data.startswith(b"-LIMIT"), data
    extra.close()
    for s in held:
        s.close()
    a.stop()
    b = Server(extra=("--requirepass", "s3cret"))
    c = b.client()
    # redis-py turns -NOAUTH and -WRONGPASS into AuthenticationError.
    try:
        lock(c, "x", wait=0)
        raise AssertionError("LOCK without AUTH")
    except redis.exceptions.AuthenticationError as e:
        assert "Authentication required" in str(e), e
    try:
        c.execute_command("AUTH", "wrong")
        raise AssertionError("a wrong password was accepted")
    except (redis.exceptions.AuthenticationError, redis.ResponseError) as e:
        assert "invalid" in str(e), e
    assert c.execute_command("AUTH", "s3cret")
    lock(c, "x", wait=0)
    c.close()
    b.stop()
    r = subprocess.run([ORDOD, "--bind", "0.0.0.0", "--port", "0", "--dir",
                        tempfile.mkdtemp()], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 2 and "requirepass" in r.stderr, r
    folder = tempfile.mkdtemp()
    conf = os.path.join(folder, "ordod.conf")
    with open(conf, "w") as f:
        f.write("# a comment\nlease-ms 5000\nport 1\n")
    d = Server(extra=("--config", conf), folder=folder)  # --port 0 wins
    assert d.port != 1
    assert d.client().info()["lease_ms"] == LEASE_MS  # the flag wins too
    d.stop()
    r = subprocess.run([ORDOD, "--help"], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 0 and "--requirepass" in r.stdout
    r = subprocess.run([ORDOD, "--port", "x"], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 2 and "--port" in r.stderr


def case_per_request_limits(srv_unused):
    """Keys per LOCK, key length and locks per session each give -LIMIT,
    and the session keeps what it had."""
    a = Server(extra=("--max-keys", "4", "--max-session-locks", "3"))
    c = a.client()

    def limit(*args):
        try:
            c.execute_command(*args)
        except redis.ResponseError as e:
            assert str(e).startswith("LIMIT"), e
            return
        raise AssertionError("no -LIMIT for %r" % (args[:3],))

    limit("LOCK", 5, *sum((["k%d" % i, "X"] for i in range(5)), []))
    limit("LOCK", 1, "x" * 513, "X")
    lock(c, "a", "b", "c", wait=0)
    limit("LOCK", 1, "d", "X")
    assert len(c.execute_command("LOCKS")) == 3
    assert c.execute_command("UNLOCK") == 3
    lock(c, "d", wait=0)
    c.close()
    a.stop()


def case_unix_socket(srv_unused):
    """The same server on a Unix socket: one lock manager for both."""
    folder = tempfile.mkdtemp(prefix="ordod-unix-")
    path = os.path.join(folder, "ordod.sock")
    a = Server(extra=("--unixsocket", path), folder=folder)
    u = redis.Redis(unix_socket_path=path, socket_timeout=10)
    t = a.client()
    lock(u, "shared", wait=0)
    try:
        lock(t, "shared", wait=0)
        raise AssertionError("TCP got a key held over the Unix socket")
    except redis.ResponseError as e:
        assert str(e).startswith("TIMEOUT"), e
    assert u.execute_command("UNLOCK") == 1
    lock(t, "shared", wait=0)
    u.close()
    t.close()
    a.stop()
    assert not os.path.exists(path), "the socket file was left behind"


CASES = [case_lock_release_tokens, case_many_keys_one_session,
         case_disconnect_releases,
         case_lease_expiry, case_resumable, case_deadlock_two_and_three,
         case_one_release_wakes_one, case_memory_steady, case_restart_tokens,
         case_limits_and_auth, case_per_request_limits, case_unix_socket]


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))
    srv = Server()
    passed = failed = 0
    for case in CASES:
        t0 = time.monotonic()
        try:
            case(srv)
            passed += 1
            print("ok   %s (%.2f s)" % (case.__name__, time.monotonic() - t0))
        except Exception:
            failed += 1
            print("FAIL %s" % case.__name__)
            traceback.print_exc()
            try:
                c = srv.client()
                print(c.execute_command("GRAPH", "DOT").decode())
                print(c.execute_command("INFO", "locks"))
            except Exception as e:
                print("(server state unavailable: %s)" % e)
        sys.stdout.flush()
    alive = srv.alive()
    srv.stop()
    if not alive:
        failed += 1
        print("FAIL the server died during the suite")
    elif srv.proc.returncode != 0:
        # A clean SIGTERM stop exits 0; a sanitizer report (LeakSanitizer's
        # at exit included) makes it fail.
        failed += 1
        print("FAIL the server exited with status %d after SIGTERM:\n%s" %
              (srv.proc.returncode, srv.proc.stderr.read()[-4000:]))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
