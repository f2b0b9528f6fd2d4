#!/usr/bin/env python3
"""test_admin.py -- ordod's admin commands over raw sockets: CLIENT KILL,
SESSION KILL, LOCKWAITS (the long-wait log, --log-lock-waits) and CONFIG
GET / SET, and who may run them (docs/protocol.md, "Admin commands").

Usage: test_admin.py ORDOD_BINARY

One server is started for the suite, with --requirepass (so that the
default user, an admin, and another user, who is not, can both be tried),
a 1 s lease and --log-lock-waits 200. Every wait is bounded (scaled by
ORDO_TEST_TIMEOUT_MULT) and waits for a state the server shows (CLIENT
LIST's waiting=1, LOCKWAITS's entry), never for a time. Prints 'N passed,
N failed' and exits non-zero on any failure; ORDOD_CASES=REGEX runs only
the cases whose names match it.
"""

import sys

# test_ordod.py's raw client and helpers (it reads ORDOD from sys.argv too).
from test_ordod import Err, Raw, T, run_cases, wait_until
from ordod_proc import Ordod

ORDOD = sys.argv[1]
PASS = "s3cret"
LOG_WAITS_MS = 200


class Server(Ordod):
    def __init__(self, *extra):
        super().__init__(ORDOD, "--lease-ms", 1000, "--verbose", 1,
                         "--requirepass", PASS, "--log-lock-waits",
                         LOG_WAITS_MS, *extra)

    def conn(self, user=None):
        """A connection authenticated as user (None: the default user,
        the admin)."""
        c = Raw(self.port)
        args = ("AUTH", user, PASS) if user else ("AUTH", PASS)
        assert c.cmd(*args) == "OK"
        return c


def clients(c):
    """CLIENT LIST as {connection id: {field: value}}."""
    out = {}
    for line in c.cmd("CLIENT", "LIST").decode().splitlines():
        fields = dict(kv.split("=", 1) for kv in line.split())
        out[int(fields["id"])] = fields
    return out


def wait_blocked(probe, conn_id):
    """Waits until the server shows conn_id's LOCK waiting."""
    wait_until(lambda: clients(probe).get(conn_id, {}).get("waiting") == "1",
               what="connection %d waiting" % conn_id)


def closed(c):
    """The server closed c: what it still said before the EOF."""
    return c.until_closed(T(10))


def grant(r, *keys):
    return (isinstance(r, list) and len(r) == 2 and
            r[1][0::2] == [k.encode() for k in keys])


def free(srv, key):
    """key can be had at once by a fresh session (which lets it go)."""
    c = srv.conn()
    ok = grant(c.cmd("LOCK", 1, key, "X", "WAIT", 0), key)
    c.close()
    return ok


def holder(c, key):
    """The session id holding key (HOLDERS), or None."""
    held = c.cmd("HOLDERS", key)[0]
    return held[0][0] if held else None


NOPERM = "NOPERM this user has no permissions to run the '%s' command"


# ---- Cases -------------------------------------------------------------------

def case_client_kill(srv):
    """CLIENT KILL ID and USER close exactly the clients named (their
    sockets get EOF, their locks go); others keep theirs; SKIPME is yes
    unless given, as Redis's; a non-admin is refused."""
    admin, b, c = srv.conn(), srv.conn(), srv.conn()
    assert grant(b.cmd("LOCK", 1, "ck:b", "X"), "ck:b")
    assert grant(c.cmd("LOCK", 1, "ck:c", "X"), "ck:c")
    c_sess = c.cmd("SESSION", "ID")
    b_id = b.cmd("CLIENT", "ID")
    assert admin.cmd("CLIENT", "KILL", "ID", b_id) == 1
    assert closed(b) == b""
    assert free(srv, "ck:b")
    assert holder(admin, "ck:c") == c_sess  # the others keep their locks
    assert admin.cmd("CLIENT", "KILL", "ID", b_id) == 0  # gone already
    # By user: both of alice's connections, nobody else's.
    a1, a2 = srv.conn("alice"), srv.conn("alice")
    assert grant(a1.cmd("LOCK", 1, "ck:a1", "X"), "ck:a1")
    listed = clients(admin)
    assert listed[a1.cmd("CLIENT", "ID")]["user"] == "alice"
    assert listed[admin.cmd("CLIENT", "ID")]["user"] == "default"
    # A non-admin may not kill, even itself.
    assert a2.cmd("CLIENT", "KILL", "USER", "alice") == Err(
        NOPERM % "client|kill")
    assert admin.cmd("CLIENT", "KILL", "USER", "alice") == 2
    assert closed(a1) == b"" and closed(a2) == b""
    assert free(srv, "ck:a1")
    assert holder(admin, "ck:c") == c_sess
    assert admin.cmd("CLIENT", "KILL", "USER", "nobody") == 0
    # Filters combine; the caller is skipped unless SKIPME no.
    me = admin.cmd("CLIENT", "ID")
    assert admin.cmd("CLIENT", "KILL", "ID", me) == 0
    assert admin.cmd("CLIENT", "KILL", "ID", me, "USER", "alice") == 0
    assert admin.cmd("CLIENT", "KILL", "ADDR", "1.2.3.4:5") == 0
    assert admin.cmd("CLIENT", "KILL", "1.2.3.4:5") == Err(
        "ERR No such client")
    assert admin.cmd("CLIENT", "KILL", "ID", "abc").startswith(
        "ERR bad CLIENT KILL filter 'ID abc'")
    assert admin.cmd("CLIENT", "KILL", "ID", 1, "USER") == Err(
        "ERR CLIENT KILL filter 'USER' needs a value")
    assert admin.cmd("CLIENT", "KILL", "ID", me, "SKIPME", "no") == 1
    assert closed(admin) == b""  # after its reply
    c.close()


def case_session_kill_waiting(srv):
    """SESSION KILL of a session that holds a key and waits for another:
    its pending LOCK hears -KILLED and its connection closes, and its key
    goes to the session waiting for it."""
    admin, a, b, c = srv.conn(), srv.conn(), srv.conn(), srv.conn()
    assert grant(a.cmd("LOCK", 1, "sk:1", "X"), "sk:1")
    assert grant(b.cmd("LOCK", 1, "sk:2", "X"), "sk:2")
    b_sess = b.cmd("SESSION", "ID")
    b_conn, c_conn = b.cmd("CLIENT", "ID"), c.cmd("CLIENT", "ID")
    b.send("LOCK", 1, "sk:1", "X", "WAIT", 30000)
    c.send("LOCK", 1, "sk:2", "X", "WAIT", 30000)
    wait_blocked(admin, b_conn)
    wait_blocked(admin, c_conn)
    assert admin.cmd("SESSION", "KILL", b_sess) == 1
    r = b.reply()
    assert r == Err("KILLED session %d was killed by default (SESSION KILL)"
                    % b_sess), r
    assert closed(b) == b""
    assert grant(c.reply(), "sk:2")  # the killed session's key, handed on
    assert admin.cmd("SESSION", "KILL", b_sess) == 0
    assert admin.cmd("SESSION", "KILL", 999999) == 0
    # A user may end its own sessions; another user's needs an admin.
    al1, al2 = srv.conn("alice"), srv.conn("alice")
    assert al1.cmd("SESSION", "KILL", a.cmd("SESSION", "ID")) == Err(
        NOPERM % "session|kill")
    al2_sess = al2.cmd("SESSION", "ID")
    assert al1.cmd("SESSION", "KILL", al2_sess) == 1
    assert al2.cmd("PING") == Err(
        "KILLED session %d was killed by alice (SESSION KILL)" % al2_sess)
    assert closed(al2) == b""
    # Its own session: :1, then closed.
    assert al1.cmd("SESSION", "KILL", al1.cmd("SESSION", "ID")) == 1
    assert closed(al1) == b""
    assert admin.cmd("SESSION", "KILL", "abc").startswith(
        "ERR SESSION KILL id:")
    assert admin.cmd("SESSION", "KILL") == Err(
        "ERR SESSION KILL id: one session id (SESSION ID, CLIENT LIST's "
        "session)")
    assert admin.cmd("SESSION", "KILL", 1, 2).startswith("ERR SESSION KILL id")
    for x in (admin, a, c):
        x.close()


def case_session_kill_detached(srv):
    """SESSION KILL of a detached resumable session: its locks go, and its
    token resumes nothing after."""
    admin, d = srv.conn(), srv.conn()
    token = d.cmd("SESSION", "RESUMABLE")
    d_sess = d.cmd("SESSION", "ID")
    d_conn = d.cmd("CLIENT", "ID")
    assert grant(d.cmd("LOCK", 1, "sd:1", "X"), "sd:1")
    d.close()
    wait_until(lambda: d_conn not in clients(admin),
               what="connection %d closed" % d_conn)
    assert holder(admin, "sd:1") == d_sess  # detached, still holding
    assert admin.cmd("SESSION", "KILL", d_sess) == 1
    assert free(srv, "sd:1")
    e = srv.conn()
    r = e.cmd("SESSION", "RESUME", token)
    assert isinstance(r, Err) and "no resumable session" in r, r
    for x in (admin, e):
        x.close()


def case_lockwaits_chain(srv):
    """A wait past --log-lock-waits is in LOCKWAITS while it waits, with its
    blocker chain three sessions long, and in the log once; its entry says
    how it ended."""
    admin, a, b, c = srv.conn(), srv.conn(), srv.conn(), srv.conn()
    a_s, b_s, c_s = (x.cmd("SESSION", "ID") for x in (a, b, c))
    b_conn, c_conn = b.cmd("CLIENT", "ID"), c.cmd("CLIENT", "ID")
    assert grant(a.cmd("LOCK", 1, "lw:1", "X"), "lw:1")
    assert grant(b.cmd("LOCK", 1, "lw:2", "X"), "lw:2")
    b.send("LOCK", 1, "lw:1", "X", "WAIT", 30000)
    wait_blocked(admin, b_conn)
    c.send("LOCK", 1, "lw:2", "S", "WAIT", 30000)
    wait_blocked(admin, c_conn)

    def entry(sess):
        for e in admin.cmd("LOCKWAITS", 128):
            f = {e[i].decode(): e[i + 1] for i in range(0, len(e), 2)}
            if f["session"] == sess:
                return f
        return None
    wait_until(lambda: entry(c_s) is not None, what="c's long wait")
    f = entry(c_s)
    assert f["state"] == b"waiting" and f["keys"] == [b"lw:2"], f
    assert f["waited_ms"] >= LOG_WAITS_MS and f["gid"] == b"", f
    assert f["chain"] == [
        b"session %d waits for lw:2 S: held by %d X; wait queue: %d S"
        % (c_s, b_s, c_s),
        b"session %d waits for lw:1 X: held by %d X; wait queue: %d X"
        % (b_s, a_s, b_s)], f["chain"]
    newest = admin.cmd("LOCKWAITS", 1)
    assert len(newest) == 1 and newest[0][5] == c_s, newest
    assert admin.cmd("LOCKWAITS", 0) == []
    line = ("session %d still waiting after " % c_s)
    wait_until(lambda: line in srv.log(), what="the long wait's log line")
    logged = [x for x in srv.log().splitlines() if line in x]
    assert len(logged) == 1, logged  # once per wait
    assert ("blocker chain: session %d waits for lw:2 S: held by %d X"
            % (c_s, b_s)) in logged[0], logged[0]
    assert ("|session %d waits for lw:1 X: held by %d X" % (b_s, a_s)) \
        in logged[0], logged[0]
    # The chain unwinds: each entry then says how its wait ended. Killing
    # the middle session hands its key to the last.
    assert admin.cmd("SESSION", "KILL", b_s) == 1
    assert b.reply().startswith("KILLED session %d " % b_s)
    assert grant(c.reply(), "lw:2")
    assert entry(b_s)["state"] == b"killed"
    assert entry(c_s)["state"] == b"granted"
    assert entry(c_s)["waited_ms"] >= LOG_WAITS_MS
    assert a.cmd("UNLOCK") == 1 and c.cmd("UNLOCK") == 1
    al = srv.conn("alice")
    assert al.cmd("LOCKWAITS") == Err(NOPERM % "lockwaits")
    assert admin.cmd("LOCKWAITS", "x") == Err(
        "ERR LOCKWAITS [count]: count is a whole number, 0 or more")
    assert admin.cmd("LOCKWAITS", 1, 2).startswith("ERR LOCKWAITS [count]")
    for x in (admin, a, b, c, al):
        x.close()


def case_config(srv):
    """CONFIG GET and SET round trip; a SET takes effect; bad values,
    options fixed at start and unknown ones are refused and change
    nothing; only an admin may SET."""
    admin = srv.conn()
    assert admin.cmd("CONFIG", "GET", "max-keys") == [b"max-keys", b"1024"]
    got = admin.cmd("CONFIG", "GET", "max-*")
    assert got[0::2] == [b"max-keys", b"max-request", b"max-output",
                         b"max-session-locks", b"max-locks"], got
    assert admin.cmd("CONFIG", "GET", "LOG-LOCK-WAITS") == [
        b"log-lock-waits", str(LOG_WAITS_MS).encode()]
    assert b"requirepass" not in admin.cmd("CONFIG", "GET", "*")
    assert admin.cmd("CONFIG", "GET", "nothing*") == []
    assert admin.cmd("CONFIG", "SET", "max-keys", 2) == "OK"
    assert admin.cmd("CONFIG", "GET", "max-keys") == [b"max-keys", b"2"]
    assert admin.cmd("LOCK", 3, "cf:1", "X", "cf:2", "X", "cf:3", "X") == \
        Err("LIMIT 3 keys in one LOCK; the limit is 2")
    # Larger than at start: the parser's arguments grow with it.
    assert admin.cmd("CONFIG", "SET", "max-keys", 3000) == "OK"
    keys = ["cf:%d" % i for i in range(2500)]
    args = ["LOCK", len(keys)]
    for k in keys:
        args += [k, "X"]
    r = admin.cmd(*args)
    assert isinstance(r, list) and len(r[1]) == 2 * len(keys), r
    assert admin.cmd("UNLOCK") == len(keys)
    for bad in ("abc", "-1", "0", "65537", "99999999999999999999999", "1.5"):
        assert admin.cmd("CONFIG", "SET", "max-keys", bad) == Err(
            "ERR CONFIG SET failed (possibly related to argument 'max-keys') "
            "- --max-keys wants a number in 1..65536, got '%s'" % bad), bad
    # A bad pair changes nothing, not even the good pairs before it.
    assert admin.cmd("CONFIG", "SET", "max-output", 5000, "lease-ms",
                     5).startswith("ERR CONFIG SET failed (possibly related "
                                   "to argument 'lease-ms')")
    assert admin.cmd("CONFIG", "GET", "max-output") == [b"max-output",
                                                        b"4194304"]
    assert admin.cmd("CONFIG", "SET", "port", 1) == Err(
        "ERR CONFIG SET failed (possibly related to argument 'port') - "
        "can't set immutable config: the socket is bound at start; restart "
        "ordod with --port")
    assert admin.cmd("CONFIG", "SET", "starvation-us", 5).startswith(
        "ERR CONFIG SET failed (possibly related to argument "
        "'starvation-us') - can't set immutable config")
    assert admin.cmd("CONFIG", "SET", "requirepass", "x").startswith(
        "ERR Unknown option or number of arguments for CONFIG SET - "
        "'requirepass'")
    assert admin.cmd("CONFIG", "SET", "max-keys") == Err(
        "ERR CONFIG GET pattern [pattern ...] | CONFIG SET name value "
        "[name value ...]")
    assert admin.cmd("CONFIG", "SET", "max-keys", 4, "verbose") == Err(
        "ERR CONFIG SET name value [name value ...]: a value for each name")
    assert admin.cmd("CONFIG", "RESETSTAT", "x").startswith(
        "ERR CONFIG GET pattern")
    assert admin.cmd("CONFIG").startswith(
        "ERR wrong number of arguments for 'CONFIG' command")
    al = srv.conn("alice")
    assert al.cmd("CONFIG", "SET", "max-keys", 1) == Err(
        NOPERM % "config|set")
    assert al.cmd("CONFIG", "GET", "max-keys") == [b"max-keys", b"3000"]
    assert admin.cmd("CONFIG", "SET", "max-keys", 1024, "lease-ms",
                     1000) == "OK"
    # A new session takes the lease CONFIG SET gave.
    assert admin.cmd("CONFIG", "SET", "lease-ms", 1500) == "OK"
    fresh = srv.conn()
    assert fresh.cmd("EXTEND") == 1500
    assert admin.cmd("CONFIG", "SET", "lease-ms", 1000) == "OK"
    for x in (admin, al, fresh):
        x.close()


def case_no_requirepass_is_admin(srv):
    """Without --requirepass every connection is the default user, an
    admin; --log-lock-waits 0 keeps no wait, and CONFIG SET turns it on."""
    with Ordod(ORDOD, "--verbose", 1, "--log-lock-waits", 0) as other:
        a, b = Raw(other.port), Raw(other.port)
        assert a.cmd("CONFIG", "SET", "verbose", 1) == "OK"
        assert a.cmd("CONFIG", "GET", "log-lock-waits") == [
            b"log-lock-waits", b"0"]
        assert grant(a.cmd("LOCK", 1, "off:1", "X"), "off:1")
        r = b.cmd("LOCK", 1, "off:1", "X", "WAIT", 100)
        assert r.startswith("TIMEOUT"), r
        assert a.cmd("LOCKWAITS") == []
        # CONFIG SET turns it on; the next wait past 20 ms is kept.
        assert a.cmd("CONFIG", "SET", "log-lock-waits", 20) == "OK"
        r = b.cmd("LOCK", 1, "off:1", "X", "WAIT", 100)
        assert r.startswith("TIMEOUT"), r
        got = a.cmd("LOCKWAITS")
        assert len(got) == 1, got
        f = {got[0][i].decode(): got[0][i + 1]
             for i in range(0, len(got[0]), 2)}
        assert f["state"] == b"timeout" and f["waited_ms"] >= 100, f
        assert f["session"] == b.cmd("SESSION", "ID"), f
        a.close()
        b.close()


CASES = [case_client_kill, case_session_kill_waiting,
         case_session_kill_detached, case_lockwaits_chain, case_config,
         case_no_requirepass_is_admin]


def main():
    return run_cases(Server(), CASES)


if __name__ == "__main__":
    sys.exit(main())
