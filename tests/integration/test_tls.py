#!/usr/bin/env python3
"""test_tls.py -- TLS: ordod's --tls-port, the ordod:// client's tls=1, and
rediss:// against a real redis-server built with TLS.

Usage: test_tls.py ORDOD ORDO_CLI LIBORDO_SO|-

tls_fixture.sh makes a CA, a server certificate for 127.0.0.1/::1/localhost,
a client certificate and an unrelated CA in a temporary folder. Three ordod
servers (--tls-auth-clients yes, no, optional) and one redis-server are
started once for the suite; each case talks to them with redis-cli --tls,
`ordo bank`, `ordo lock`, raw sockets, and libordo.so through ctypes (to
read ordo_dump's "last error" line, which names a certificate's problem).
A sanitizer build passes '-' for LIBORDO_SO (its library cannot be loaded
into an uninstrumented python): then the outcomes are read from `ordo
lock`'s exit status instead, and the messages are not checked.

A silent client connected at the start is dropped by the server's
handshake bound (10 s), checked last, so the suite takes about 11 s.

Every wait is bounded, bounds scale with ORDO_TEST_TIMEOUT_MULT. The cases
run through test_ordod.py's run_cases (ORDOD_CASES=REGEX runs some), which
prints 'N passed, N failed' at the end; the exit is non-zero on any failure.
"""

import ctypes
import functools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from ordod_proc import MULT, Ordod, OrdodError
from test_ordod import run_cases

ORDOD, ORDO, LIBORDO = sys.argv[1:4]
HERE = os.path.dirname(os.path.abspath(__file__))


def T(seconds):
    """A bound against a hang, stretched for slower (sanitizer) builds."""
    return seconds * MULT


TMP = tempfile.mkdtemp(prefix="ordo-tls-")
subprocess.run(["bash", os.path.join(HERE, "tls_fixture.sh"), TMP],
               check=True, timeout=T(60))
CA, CRT, KEY = (os.path.join(TMP, f) for f in ("ca.crt", "client.crt",
                                                "client.key"))
SCRT, SKEY = os.path.join(TMP, "server.crt"), os.path.join(TMP, "server.key")
OTHER_CA = os.path.join(TMP, "other-ca.crt")
TLS_FILES = ["--tls-cert-file", SCRT, "--tls-key-file", SKEY,
             "--tls-ca-cert-file", CA]


def run(args, stdin=None, timeout=30):
    return subprocess.run(args, input=stdin, capture_output=True, text=True,
                          timeout=T(timeout))


def cli(port, *cmd, ca=CA, cert=True, stdin=None):
    """redis-cli --tls on port; its CompletedProcess."""
    args = ["redis-cli", "--tls", "-p", str(port)]
    if ca:
        args += ["--cacert", ca]
    if cert:
        args += ["--cert", CRT, "--key", KEY]
    return run(args + list(cmd), stdin=stdin)


def od_url(port, host="127.0.0.1", ca=CA, cert=True, extra=""):
    q = "tls=1"
    if ca:
        q += "&tls_ca=" + ca
    if cert:
        q += "&tls_cert=%s&tls_key=%s" % (CRT, KEY)
    return "ordod://%s:%d?%s%s" % (host, port, q, extra)


def bank(url):
    r = run([ORDO, "bank", "--backend", url, "--accounts", "8",
             "--transfers", "300", "--workers", "3"], timeout=60)
    assert r.returncode == 0, (url, r.stdout, r.stderr)
    assert "verdict: OK" in r.stdout, r.stdout
    bal = [ln for ln in r.stdout.splitlines() if ln.startswith("balance")]
    assert len(bal) == 1, r.stdout
    parts = bal[0].split()  # balance before N, after N
    assert parts[2].rstrip(",") == parts[4], bal


def lock_unlock(url):
    """ordo lock takes a key and runs a command under it: the command sees
    the key's fencing token, and ordo lock exits with its status."""
    r = run([ORDO, "lock", "--backend", url, "--wait", "2000", "tls:k", "--",
             "sh", "-c", 'echo "$ORDO_FENCES"'])
    assert r.returncode == 0, (url, r.stdout, r.stderr)
    assert r.stdout.startswith("tls:k="), r.stdout


_lib = ctypes.CDLL(LIBORDO) if LIBORDO != "-" else None
DUMPS = _lib is not None


def begin_cli(url):
    """begin() through `ordo lock`: its exit status says which call failed
    (64: the URL, at ordo_open; 69: the backend, at the txn's connect)."""
    r = run([ORDO, "lock", "--backend", url, "--wait", "2000", "tls:b", "--",
             "true"])
    return ("EURL" if r.returncode == 64 else None,
            "EBACKEND" if r.returncode == 69 else None, "")


def begin(url):
    """ordo_open and ordo_txn_begin on url: (open's error name or None,
    txn_begin's error name or None, ordo_dump's text)."""
    if not DUMPS:
        return begin_cli(url)
    return begin_lib(url)


def setup_lib():
    if not DUMPS:
        return
    _lib.ordo_open.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                               ctypes.c_char_p, ctypes.c_void_p]
    _lib.ordo_txn_begin.argtypes = [ctypes.c_void_p,
                                    ctypes.POINTER(ctypes.c_void_p),
                                    ctypes.c_void_p]
    _lib.ordo_dump.argtypes = [ctypes.c_void_p, ctypes.c_int]
    _lib.ordo_close.argtypes = [ctypes.c_void_p]
    _lib.ordo_txn_end.argtypes = [ctypes.c_void_p]
    _lib.ordo_err_name.restype = ctypes.c_char_p


setup_lib()


def begin_lib(url):
    o = ctypes.c_void_p()
    rc = _lib.ordo_open(ctypes.byref(o), url.encode(), None)
    if rc != 0:
        return _lib.ordo_err_name(rc).decode(), None, ""
    t = ctypes.c_void_p()
    rc = _lib.ordo_txn_begin(o, ctypes.byref(t), None)
    r, w = os.pipe()
    _lib.ordo_dump(o, w)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    if rc == 0:
        _lib.ordo_txn_end(t)
    _lib.ordo_close(o)
    return None, (_lib.ordo_err_name(rc).decode() if rc else None), \
        b"".join(chunks).decode("utf-8", "replace")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- The servers ----------------------------------------------------------

YES = Ordod(ORDOD, "--tls-port", "0", *TLS_FILES, "--verbose", "2")
NO = Ordod(ORDOD, "--tls-port", "0", *TLS_FILES, "--tls-auth-clients", "no")
OPT = Ordod(ORDOD, "--tls-port", "0", *TLS_FILES, "--tls-auth-clients",
            "optional")


class Redis:
    """A throw-away redis-server with TLS only, on a free port (Redis's
    --tls-port 0 means no TLS, so the port is picked here; a port taken in
    between makes it fail to start, which the bound below reports)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="ordo-tls-redis-")
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", "0", "--tls-port", str(self.port),
             "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.dir, "--tls-cert-file", SCRT, "--tls-key-file",
             SKEY, "--tls-ca-cert-file", CA],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.monotonic() + T(10)
        while cli(self.port, "PING").stdout.strip() != "PONG":
            assert self.proc.poll() is None, "redis-server exited"
            assert time.monotonic() < end, "redis-server not up in time"
            time.sleep(0.05)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(T(10))
        shutil.rmtree(self.dir, ignore_errors=True)


REDIS = Redis()

# A client that connects to the TLS port and never says a word: the server
# drops it once its handshake has not been done for 10 s (checked by the
# last case, so that the wait overlaps the others).
SILENT = socket.create_connection(("127.0.0.1", YES.tls_port))
SILENT_AT = time.monotonic()
HANDSHAKE_S = 10  # ORDOD_TLS_HANDSHAKE_MS

# ---- The cases ------------------------------------------------------------

CASES = []


def case(fn):
    """A case of the suite: run_cases (test_ordod.py) hands each the suite's
    server; these reach the servers above by name, so it is dropped."""
    @functools.wraps(fn)
    def one(srv):
        return fn()
    CASES.append(one)
    return fn


@case
def test_ping_and_lock_over_tls():
    assert YES.tls_port and YES.tls_port != YES.port
    r = cli(YES.tls_port, "PING")
    assert r.stdout.strip() == "PONG", (r.stdout, r.stderr)
    # LOCK and UNLOCK in one session: the grant, its token, then 1 key.
    r = cli(YES.tls_port, stdin="LOCK 1 tls:a X\nUNLOCK tls:a\n")
    out = r.stdout.split()
    assert r.returncode == 0 and out[1] == "tls:a" and out[-1] == "1", \
        (r.stdout, r.stderr)
    # The plain port keeps working beside the TLS one.
    r = run(["redis-cli", "-p", str(YES.port), "PING"])
    assert r.stdout.strip() == "PONG", r.stdout
    # CONFIG GET shows the TLS options, the port as bound.
    r = run(["redis-cli", "-p", str(YES.port), "CONFIG", "GET", "tls-*"])
    got = r.stdout.split("\n")
    conf = dict(zip(got[0::2], got[1::2]))
    assert conf["tls-port"] == str(YES.tls_port), r.stdout
    assert conf["tls-auth-clients"] == "yes", r.stdout
    assert conf["tls-cert-file"] == SCRT, r.stdout
    r = run(["redis-cli", "-p", str(NO.port), "CONFIG", "GET",
             "tls-auth-clients"])
    assert r.stdout.split() == ["tls-auth-clients", "no"], r.stdout


@case
def test_bank_over_ordod_tls():
    bank(od_url(YES.tls_port))
    lock_unlock(od_url(YES.tls_port))
    # A host name is checked against the certificate's DNS name.
    lock_unlock(od_url(YES.tls_port, host="localhost"))


@case
def test_sharded_url_over_tls():
    # Two shards, each a TLS address; the options apply to both.
    url = "ordod://127.0.0.1:%d,127.0.0.1:%d?tls=1&tls_ca=%s&tls_cert=%s" \
          "&tls_key=%s" % (YES.tls_port, OPT.tls_port, CA, CRT, KEY)
    lock_unlock(url)


@case
def test_client_without_the_ca_is_refused():
    r = cli(YES.tls_port, "PING", ca=None)
    assert r.returncode != 0 and "PONG" not in r.stdout, r.stdout
    assert "certificate verify failed" in r.stderr + r.stdout, r.stderr
    r = cli(YES.tls_port, "PING", ca=OTHER_CA)
    assert "PONG" not in r.stdout, r.stdout
    # ordod:// without tls_ca checks against the system's CAs, which do not
    # know the test CA; the failure names the certificate's problem.
    err_open, err, dump = begin(od_url(YES.tls_port, ca=None))
    assert err_open is None and err == "EBACKEND", (err_open, err)
    assert not DUMPS or "TLS: the certificate of 127.0.0.1: self-signed " \
        "certificate" in dump, dump
    err_open, err, dump = begin(od_url(YES.tls_port, ca=OTHER_CA))
    assert err == "EBACKEND", err
    assert not DUMPS or "the certificate of 127.0.0.1" in dump, dump


@case
def test_host_name_is_checked():
    # The certificate names 127.0.0.1, ::1 and localhost: another name
    # sent and checked (tls_sni) fails the check.
    _, err, dump = begin(od_url(YES.tls_port, extra="&tls_sni=elsewhere.test"))
    assert err == "EBACKEND", err
    assert not DUMPS or "elsewhere.test: hostname mismatch" in dump, dump


@case
def test_client_certificate_modes():
    # yes: a client without a certificate is refused.
    r = cli(YES.tls_port, "PING", cert=False)
    assert "PONG" not in r.stdout, r.stdout
    _, err, dump = begin(od_url(YES.tls_port, cert=False))
    assert err == "EBACKEND", (err, dump)
    # ordo lock, which leaves SIGPIPE at its default, exits EBACKEND's 69
    # (a SIGPIPE from a write to the socket the server closed would kill
    # it instead; this run does not force one, tls.c blocks it in any case).
    r = run([ORDO, "lock", "--backend", od_url(YES.tls_port, cert=False),
             "--wait", "2000", "tls:p", "--", "true"])
    assert r.returncode == 69, (r.returncode, r.stderr)
    # no: accepted without one.
    r = cli(NO.tls_port, "PING", cert=False)
    assert r.stdout.strip() == "PONG", (r.stdout, r.stderr)
    lock_unlock(od_url(NO.tls_port, cert=False))
    # optional: accepted without one, and with a good one.
    r = cli(OPT.tls_port, "PING", cert=False)
    assert r.stdout.strip() == "PONG", (r.stdout, r.stderr)
    r = cli(OPT.tls_port, "PING")
    assert r.stdout.strip() == "PONG", (r.stdout, r.stderr)


@case
def test_plaintext_on_the_tls_port_is_dropped():
    # A client that speaks plain RESP to the TLS port is closed (after
    # OpenSSL's alert, if any), and the server goes on serving others.
    with socket.create_connection(("127.0.0.1", YES.tls_port),
                                  timeout=T(10)) as s:
        # A silent client, connected the whole time, holds up no one.
        silent = socket.create_connection(("127.0.0.1", YES.tls_port))
        # Half a TLS record header: the server waits for the rest, alone.
        half = socket.create_connection(("127.0.0.1", YES.tls_port))
        half.sendall(b"\x16\x03\x01")
        s.sendall(b"*1\r\n$4\r\nPING\r\n")
        got = b""
        while True:
            b = s.recv(4096)  # bounded by the socket's timeout
            if not b:
                break
            got += b
        assert b"PONG" not in got, got
        r = cli(YES.tls_port, "PING")
        assert r.stdout.strip() == "PONG", (r.stdout, r.stderr)
        silent.close()
        half.close()
    assert YES.alive()
    # The drop is logged at debug, with OpenSSL's reason.
    assert "TLS: error:" in YES.log(), YES.log()[-2000:]


@case
def test_bad_files_fail_startup():
    missing = os.path.join(TMP, "missing.crt")
    for args, named in [
            (["--tls-cert-file", missing, "--tls-key-file", SKEY],
             "--tls-cert-file " + missing),
            (["--tls-cert-file", SCRT, "--tls-key-file", CRT],
             "--tls-key-file " + CRT),
            (["--tls-cert-file", SCRT, "--tls-key-file", KEY],
             "--tls-key-file " + KEY),
            (["--tls-cert-file", SCRT, "--tls-key-file", SKEY,
              "--tls-ca-cert-file", SKEY], "--tls-ca-cert-file " + SKEY),
            (["--tls-cert-file", SCRT, "--tls-key-file", SKEY],
             "needs --tls-ca-cert-file")]:
        d = tempfile.mkdtemp(prefix="ordod-tls-bad-", dir=TMP)
        r = run([ORDOD, "--port", "0", "--dir", d, "--tls-port", "0"] + args)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert named in r.stderr, (named, r.stderr)
    r = run([ORDOD, "--tls-auth-clients", "maybe"])
    assert r.returncode == 2 and "yes, no or optional" in r.stderr, r.stderr
    # A URL whose files do not load is refused at open.
    err_open, _, _ = begin("ordod://127.0.0.1:1?tls=1&tls_ca=" + missing)
    assert err_open == "EURL", err_open
    err_open, _, _ = begin("ordod://127.0.0.1:1?tls_ca=" + CA)  # no tls=1
    assert err_open == "EURL", err_open
    err_open, _, _ = begin("rediss://127.0.0.1:1?tls_cert=" + CRT)  # no key
    assert err_open == "EURL", err_open


@case
def test_config_file():
    d = tempfile.mkdtemp(prefix="ordod-tls-conf-", dir=TMP)
    conf = os.path.join(d, "ordod.conf")
    with open(conf, "w") as f:
        f.write("tls-port 0\ntls-cert-file %s\ntls-key-file %s\n"
                "tls-ca-cert-file %s\ntls-auth-clients no\n" % (SCRT, SKEY, CA))
    with Ordod(ORDOD, "--config", conf, folder=d) as srv:
        r = cli(srv.tls_port, "PING", cert=False)
        assert r.stdout.strip() == "PONG", (r.stdout, r.stderr)


@case
def test_rediss_against_redis_server():
    url = "rediss://127.0.0.1:%d?tls_ca=%s&tls_cert=%s&tls_key=%s" % (
        REDIS.port, CA, CRT, KEY)
    lock_unlock(url)
    bank(url)
    # redlock:// over TLS too, on the one node.
    lock_unlock("redlock://127.0.0.1:%d?tls=1&tls_ca=%s&tls_cert=%s"
                "&tls_key=%s" % (REDIS.port, CA, CRT, KEY))
    # Without the CA: refused, the certificate named.
    _, err, dump = begin("rediss://127.0.0.1:%d?tls_cert=%s&tls_key=%s"
                         % (REDIS.port, CRT, KEY))
    assert err == "EBACKEND", err
    assert not DUMPS or "the certificate of 127.0.0.1" in dump, dump


@case
def test_silent_client_is_dropped_after_the_handshake_bound():
    # The server checks once a second, so the drop comes between 10 and
    # 11 s after the connect; the bound against a hang is wider.
    SILENT.settimeout(max(0.1, SILENT_AT + T(HANDSHAKE_S + 5) -
                          time.monotonic()))
    got = SILENT.recv(4096)  # b"" at the server's close
    waited = time.monotonic() - SILENT_AT
    SILENT.close()
    assert got == b"", got
    assert waited >= HANDSHAKE_S - 0.5, waited
    assert "no TLS handshake in 10000 ms; closed" in YES.log(), \
        YES.log()[-2000:]


def main():
    failed = 0
    try:
        # Runs the cases, then stops YES and judges its exit.
        failed = run_cases(YES, CASES)
    finally:
        REDIS.stop()
        for srv in (NO, OPT):
            try:
                srv.stop()
            except OrdodError as e:
                failed = 1
                print("FAIL server stop: %s" % e)
        shutil.rmtree(TMP, ignore_errors=True)
    return failed


if __name__ == "__main__":
    sys.exit(main())
