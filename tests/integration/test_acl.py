#!/usr/bin/env python3
"""test_acl.py -- ordod's users (--aclfile, docs/protocol.md "Users and
ACLs") against a real ordod: each refusal, and what an admin may do.

Usage: redis_fixture.sh test_acl.py ORDOD_BINARY

(redis_fixture.sh starts the redis-server whose own glob matcher the key
patterns are checked against, and names its socket in REDIS_SOCK.)

One server is started with an ACL file this test writes (binary key
patterns included); the bad files are each given to a server that must not
start, and say which line is wrong. A second server checks --requirepass
beside a file that leaves the default user out. Raw sockets (test_ordod's
Raw) so that every error's exact text is checked. Every wait is bounded
(ORDO_TEST_TIMEOUT_MULT stretches the bounds). Prints 'N passed, N failed'
and exits non-zero on any failure.
"""

import hashlib
import os
import random
import subprocess
import sys
import tempfile
import time
import traceback

import redis

from ordod_proc import Ordod
from test_ordod import ORDOD, Raw, T, encode, is_grant, run_cases, wait_until

WRONGPASS = "WRONGPASS invalid username-password pair or user is disabled."
NOKEY = ("NOPERM this user has no permissions to access one of the keys "
         "used as arguments")


def noperm(cmd):
    return "NOPERM this user has no permissions to run the '%s' command" % cmd


ACL = b"""# users of test_acl.py
user default off
user alice on >secret ~acct:* ~user:* +@lock
user carol on #%s ~acct:* +@lock +@read
user admin on >pw >pw2 ~* +@all
user bob off >x ~* +@all
user pat on nopass ~k[a-c]\\*[^0-9] ~raw:?\xff* ~a*a*a*a*a*a*a*a*b +lock +unlock
""" % hashlib.sha256(b"hashed").hexdigest().encode()


def login(srv, user, password):
    c = Raw(srv.port)
    assert c.cmd("AUTH", user, password) == "OK"
    return c


def list_ids(c):
    text = c.cmd("CLIENT", "LIST").decode()
    return {int(line.split()[0][3:]) for line in text.splitlines()}


def case_auth_refusals(srv):
    """A wrong password, an unknown user, a user that is off (with its
    right password) and the default user that is off all hear Redis's one
    -WRONGPASS; before AUTH only the connection commands run; HELLO's
    AUTH, a second password and a #sha256 password work."""
    c = Raw(srv.port)
    assert c.cmd("PING") == "PONG"
    assert c.cmd("LOCK", 1, "acct:1", "X").startswith("NOAUTH ")
    for args in (("alice", "wrong"), ("alice", "secre"), ("nobody", "x"),
                 ("bob", "x"), ("secret",), ("default", "")):
        assert c.cmd("AUTH", *args) == WRONGPASS, args
    assert c.cmd("HELLO", "3", "AUTH", "alice", "nope") == WRONGPASS
    hello = c.cmd("HELLO", "3", "AUTH", "alice", "secret")
    assert isinstance(hello, dict) and hello[b"proto"] == 3, hello
    assert c.cmd("AUTH", "admin", "pw2") == "OK"
    assert c.cmd("AUTH", "carol", "hashed") == "OK"
    assert c.cmd("AUTH", "carol", hashlib.sha256(b"hashed").hexdigest()) == \
        WRONGPASS  # the digest is not the password
    assert c.cmd("AUTH", "pat", "anything") == "OK"  # nopass
    c.close()


def case_command_classes(srv):
    """A command outside the user's classes is refused by name (a
    subcommand as 'cmd|sub'); the connection commands always run."""
    a = login(srv, "alice", "secret")
    for cmd in ("INFO", "GRAPH", "DEADLOCKS"):
        assert a.cmd(cmd) == noperm(cmd.lower()), cmd
    assert a.cmd("PEER", "HELLO", "x:1") == noperm("peer")
    for args in (("PING",), ("CLIENT", "ID"), ("COMMAND", "COUNT"),
                 ("CLIENT", "SETNAME", "a")):
        r = a.cmd(*args)
        assert not str(r).startswith("NOPERM"), (args, r)
    assert isinstance(a.cmd("SESSION", "ID"), int)
    c = login(srv, "carol", "hashed")
    assert c.cmd("INFO", "server").startswith(b"# Server")
    assert c.cmd("GRAPH", "JSON").startswith(b"{")
    assert c.cmd("PEER", "HELLO", "x:1") == noperm("peer")
    p = login(srv, "pat", "")
    assert p.cmd("EXTEND") == noperm("extend")
    assert p.cmd("LOCKS") == noperm("locks")
    assert p.cmd("SESSION", "ID") == noperm("session|id")
    for x in (a, c, p):
        x.close()


def case_key_patterns(srv):
    """LOCK, UNLOCK and HOLDERS of a key outside the patterns are refused;
    a LOCK with one bad key among good ones takes none of them."""
    a = login(srv, "alice", "secret")
    adm = login(srv, "admin", "pw")
    assert is_grant(a.cmd("LOCK", 1, "acct:1", "X", "WAIT", 0), "acct:1")
    assert is_grant(a.cmd("LOCK", 1, "user:1", "S", "WAIT", 0), "user:1")
    assert a.cmd("LOCK", 1, "other", "X", "WAIT", 0) == NOKEY
    assert a.cmd("LOCK", 3, "acct:2", "X", "bad", "X", "user:2", "X",
                 "WAIT", 0) == NOKEY
    held = sorted(k for k, *_ in a.cmd("LOCKS"))
    assert held == [b"acct:1", b"user:1"], held
    for key in ("acct:2", "user:2"):
        assert adm.cmd("HOLDERS", key) == [[], []], key
    assert a.cmd("UNLOCK", "other") == NOKEY
    assert a.cmd("UNLOCK", "acct:1", "other") == NOKEY
    assert a.cmd("HOLDERS", "other") == NOKEY
    sid = a.cmd("SESSION", "ID")
    assert a.cmd("HOLDERS", "acct:1")[0][0][0] == sid
    assert a.cmd("UNLOCK", "acct:1", "user:1") == 2
    # The admin (~* +@all) may lock any key.
    assert is_grant(adm.cmd("LOCK", 2, "other", "X", "acct:1", "X", "WAIT",
                            0), "acct:1", "other")
    assert adm.cmd("UNLOCK") == 2
    a.close()
    adm.close()


def case_binary_patterns(srv):
    """Patterns match bytes: '?' any byte (NUL too), a byte 0xff as it is
    in the file, classes, negated classes and an escaped '*'."""
    p = login(srv, "pat", "")
    for key, ok in ((b"raw:\x00\xff\x01", True), (b"raw:a\xff", True),
                    (b"raw:\x00\xfe", False), (b"raw:\xff", False),
                    (b"kb*x", True), (b"ka*\x00", True), (b"kd*x", False),
                    (b"kbzx", False), (b"kb*5", False), (b"kb*xy", False)):
        r = p.cmd("LOCK", 1, key, "X", "WAIT", 0)
        if ok:
            assert isinstance(r, list) and r[1][0] == key, (key, r)
            assert p.cmd("UNLOCK", key) == 1
        else:
            assert r == NOKEY, (key, r)
    # A pattern a recursive matcher takes exponential time over: refused
    # (and matched) at once, well inside the reply's bound.
    assert p.cmd("LOCK", 1, "a" * 500, "X", "WAIT", 0) == NOKEY
    assert is_grant(p.cmd("LOCK", 1, "a" * 500 + "b", "X", "WAIT", 0),
                    "a" * 500 + "b")
    assert p.cmd("UNLOCK") == 1
    p.close()


def case_own_sessions(srv):
    """Another user's resume token is refused as a wrong one, attached or
    not, and its own user resumes it; CLIENT LIST shows a user that is
    not an admin its own connections alone, and the admin every one."""
    a1 = login(srv, "alice", "secret")
    a2 = login(srv, "alice", "secret")
    c = login(srv, "carol", "hashed")
    adm = login(srv, "admin", "pw")
    ids = {x: x.cmd("CLIENT", "ID") for x in (a1, a2, c, adm)}
    assert list_ids(a1) == {ids[a1], ids[a2]}
    assert list_ids(c) == {ids[c]}
    assert {ids[a1], ids[a2], ids[c], ids[adm]} <= list_ids(adm)
    token = a1.cmd("SESSION", "RESUMABLE")
    sid = a1.cmd("SESSION", "ID")
    assert is_grant(a1.cmd("LOCK", 1, "acct:9", "X", "WAIT", 0), "acct:9")
    a1.close()
    wait_until(lambda: ids[a1] not in list_ids(adm),
               what="alice's first hang-up")
    assert c.cmd("SESSION", "RESUME", token).startswith(
        "ERR no resumable session has that token")
    assert adm.cmd("SESSION", "RESUME", token).startswith(
        "ERR no resumable session has that token")
    assert a2.cmd("SESSION", "RESUME", token) == sid
    assert [k for k, *_ in a2.cmd("LOCKS")] == [b"acct:9"]
    assert a2.cmd("UNLOCK") == 1
    for x in (a2, c, adm):
        x.close()


def case_admin_rights(srv):
    """The admin commands follow the user's rights: a user without @admin
    hears -NOPERM for CLIENT KILL, CONFIG SET and LOCKWAITS, and may kill
    its own session but not another user's; CONFIG GET is @read; the admin
    (+@all) kills anyone's."""
    a = login(srv, "alice", "secret")
    c = login(srv, "carol", "hashed")
    adm = login(srv, "admin", "pw")
    assert a.cmd("CLIENT", "KILL", "ID", c.cmd("CLIENT", "ID")) == \
        noperm("client|kill")
    assert a.cmd("LOCKWAITS") == noperm("lockwaits")
    assert a.cmd("CONFIG", "GET", "lease-ms") == noperm("config|get")
    assert c.cmd("CONFIG", "SET", "lease-ms", "5000") == noperm("config|set")
    assert c.cmd("CONFIG", "GET", "lease-ms") == [b"lease-ms", b"5000"]
    carol_sid = c.cmd("SESSION", "ID")
    assert a.cmd("SESSION", "KILL", carol_sid) == noperm("session|kill")
    a2 = login(srv, "alice", "secret")
    assert a.cmd("SESSION", "KILL", a2.cmd("SESSION", "ID")) == 1
    assert a2.reply().startswith("KILLED ")
    assert adm.cmd("SESSION", "KILL", carol_sid) == 1
    assert c.reply().startswith("KILLED ")
    c2 = login(srv, "carol", "hashed")
    assert adm.cmd("CLIENT", "KILL", "ID", c2.cmd("CLIENT", "ID")) == 1
    assert c2.until_closed(T(10)) == b""
    assert isinstance(adm.cmd("LOCKWAITS"), list)
    for x in (a, a2, c, c2, adm):
        x.close()


def case_bad_files(srv_unused):
    """Each bad file stops the start, naming its file and line; nothing of
    it is loaded (the server never listens)."""
    folder = tempfile.mkdtemp(prefix="ordod-acl-")
    bad = [
        (b"user a on >x ~* +@lock\nuser a on\n", 2, "user 'a' is defined twice"),
        (b"user x on +@nosuch\n", 1,
         "unknown command class '@nosuch' (@lock, @read, @connection, "
         "@admin, @all)"),
        (b"# a comment\n\nuser x on ~* +nosuch\n", 3,
         "unknown command 'nosuch'"),
        (b"user ok on nopass\nuser x on #abc\n", 2,
         "'#' must be followed by a SHA-256 digest in 64 hex digits"),
        (b"usr x on\n", 1,
         "a line is 'user NAME RULE...' or a '#' comment, not 'usr'"),
        (b"user\n", 1, "'user' wants a name"),
        (b"user x on frobnicate\n", 1, "unknown rule 'frobnicate'"),
        (b"user x on +client|nosuch\n", 1, "unknown command 'client|nosuch'"),
        (b"user " + b"u" * 129 + b" on\n", 1,
         "a user name is at most 128 bytes"),
    ]
    for text, line, what in bad:
        path = os.path.join(folder, "bad.acl")
        with open(path, "wb") as f:
            f.write(text)
        r = subprocess.run([ORDOD, "--port", "0", "--dir", folder,
                            "--aclfile", path], capture_output=True,
                           text=True, timeout=T(10))
        assert r.returncode == 2 and "ready" not in r.stdout, (text, r)
        # The one line, and nothing else (no sanitizer report either).
        want = "ordod: --aclfile %s:%d: %s\n" % (path, line, what)
        assert r.stderr == want, (want, r.stderr)
    missing = os.path.join(folder, "missing.acl")
    r = subprocess.run([ORDOD, "--port", "0", "--dir", folder, "--aclfile",
                        missing], capture_output=True, text=True,
                       timeout=T(10))
    assert r.returncode == 2 and r.stderr.startswith(
        "ordod: --aclfile %s: No such file" % missing), r


def case_requirepass_beside_file(srv_unused):
    """--requirepass is the default user's password (every right) when the
    file leaves the default user out; AUTH's names are then the file's.
    Both come from a config file here (requirepass, aclfile).
    A file that defines the default user refuses --requirepass too."""
    folder = tempfile.mkdtemp(prefix="ordod-acl-")
    path = os.path.join(folder, "users.acl")
    with open(path, "wb") as f:
        f.write(b"user alice on >secret ~acct:* +@lock\n")
    conf = os.path.join(folder, "ordod.conf")
    with open(conf, "w") as f:
        f.write("requirepass pw\naclfile %s\n" % path)
    with Ordod(ORDOD, "--config", conf) as s:  # the config file's names
        c = Raw(s.port)
        assert c.cmd("LOCK", 1, "x", "X").startswith("NOAUTH ")
        assert c.cmd("AUTH", "mallory", "pw") == WRONGPASS
        assert c.cmd("AUTH", "pw") == "OK"
        assert c.cmd("INFO", "server").startswith(b"# Server")
        assert is_grant(c.cmd("LOCK", 1, "x", "X", "WAIT", 0), "x")
        assert c.cmd("AUTH", "alice", "secret") == "OK"
        assert c.cmd("INFO") == noperm("info")
        c.close()
    with open(path, "wb") as f:
        f.write(b"user default on >a ~* +@all\n")
    r = subprocess.run([ORDOD, "--port", "0", "--dir", folder, "--aclfile",
                        path, "--requirepass", "pw"], capture_output=True,
                       text=True, timeout=T(10))
    assert r.returncode == 2 and "defines the default user" in r.stderr, r


def case_globs_like_redis(srv_unused):
    """ordod's key patterns match what Redis's own glob matches: random
    patterns of the bytes that mean something to a glob (unclosed and empty
    classes, ranges at the class's end, escapes, runs of '*'), one user
    each, against random keys, compared with redis-server's KEYS."""
    rnd = random.Random(23)
    pat_bytes = [b"a", b"b", b"c", b"*", b"?", b"[", b"]", b"^", b"-", b"\\"]
    key_bytes = [b"a", b"b", b"c", b"-", b"]", b"^", b"\\", b"*", b"[",
                 b"\xff", b"\x00"]
    pats = sorted({b"".join(rnd.choice(pat_bytes)
                            for _ in range(rnd.randint(1, 7)))
                   for _ in range(150)})
    keys = sorted({b"".join(rnd.choice(key_bytes)
                            for _ in range(rnd.randint(1, 6)))
                   for _ in range(200)})
    r = redis.Redis(unix_socket_path=os.environ["REDIS_SOCK"],
                    socket_timeout=T(20))
    r.flushall()
    r.mset({k: 1 for k in keys})
    folder = tempfile.mkdtemp(prefix="ordod-acl-")
    path = os.path.join(folder, "globs.acl")
    with open(path, "wb") as f:
        for i, p in enumerate(pats):
            f.write(b"user u%d on nopass ~%s +lock +unlock\n" % (i, p))
    with Ordod(ORDOD, "--verbose", "0", "--aclfile", path) as s:
        c = Raw(s.port)
        for i, p in enumerate(pats):
            assert c.cmd("AUTH", "u%d" % i, "x") == "OK"
            c.sock.sendall(b"".join(
                encode("LOCK", 1, k, "X", "WAIT", 0) for k in keys))
            # The replies come in the requests' order: a grant or -NOPERM.
            got = set()
            for k in keys:
                rep = c.reply()
                assert isinstance(rep, list) or rep == NOKEY, (p, k, rep)
                if isinstance(rep, list):
                    got.add(k)
            assert c.cmd("UNLOCK") == len(got)
            want = set(r.keys(p))
            assert got == want, (p, sorted(want - got), sorted(got - want))
        c.close()
    r.close()


CASES = [case_auth_refusals, case_command_classes, case_key_patterns,
         case_binary_patterns, case_own_sessions, case_admin_rights,
         case_bad_files,
         case_requirepass_beside_file, case_globs_like_redis]


def main():
    folder = tempfile.mkdtemp(prefix="ordod-acl-")
    path = os.path.join(folder, "users.acl")
    with open(path, "wb") as f:
        f.write(ACL)
    srv = Ordod(ORDOD, "--lease-ms", "5000", "--verbose", "0", "--aclfile",
                path)
    return run_cases(srv, CASES)


if __name__ == "__main__":
    sys.exit(main())
