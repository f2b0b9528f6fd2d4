#!/usr/bin/env python3
"""test_metrics.py -- ordod's metrics port (docs/metrics.md): /metrics read
by promtool and by a real Prometheus server, the status page loaded by
headless Chromium during a live three-way deadlock, hostile HTTP, and the flags (--metrics-bind, the config file,
--deadlock-timeout's delay).

Usage: test_metrics.py ORDOD_BINARY ORDO_CLI ARTIFACT_DIR

Two servers, each started once: one as deployed (immediate detection),
for the metrics, Prometheus and hostile cases; and one with
--deadlock-timeout 60000, whose three-way cycle stays alive while Chromium
looks at it (a deadlock the first server would end at once). The status
page's screenshot is kept in ARTIFACT_DIR/status-page.png.
ORDO_TEST_TIMEOUT_MULT scales every bound.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ordod_proc import Ordod  # noqa: E402

ORDOD, ORDO_CLI, ARTIFACTS = sys.argv[1], sys.argv[2], sys.argv[3]
MULT = float(os.environ.get("ORDO_TEST_TIMEOUT_MULT", "1"))


def T(s):
    return s * MULT


def wait_for(what, fn, bound):
    """Polls fn until it returns something true, within bound seconds."""
    end = time.monotonic() + T(bound)
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError("no %s within %.0f s" % (what, T(bound)))
        time.sleep(0.05)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def metrics_port(srv):
    """The 'metrics port=N' line, which ordod prints right after 'ready'
    (one write: read again, bounded, should a read see half of it)."""
    def line():
        with open(srv._out_path, "rb") as f:
            out = f.read()
        m = re.search(rb"^metrics port=(\d+)\n", out, re.M)
        assert not m or out.index(b"ready port=") < m.start(), out
        return m
    return int(wait_for("a 'metrics port=N' line", line, 10).group(1))


class Conn:
    """One RESP connection: a command, then one reply read."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.settimeout(T(20))
        self.buf = b""

    def send(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)

    def _line(self):
        while b"\r\n" not in self.buf:
            d = self.sock.recv(65536)
            if not d:
                raise EOFError("closed")
            self.buf += d
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t in (b"+", b":"):
            return int(rest) if t == b":" else rest.decode()
        if t == b"-":
            raise RuntimeError(rest.decode())
        if t in (b"$", b"="):
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                d = self.sock.recv(65536)
                if not d:
                    raise EOFError("closed")
                self.buf += d
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if t == b"*":
            return [self.read() for _ in range(int(rest))]
        raise AssertionError("unexpected reply %r" % line)

    def cmd(self, *args):
        self.send(*args)
        return self.read()

    def close(self):
        self.sock.close()


def granted(reply):
    """A granted LOCK's reply: [lease ms, [key, token, ...]]."""
    return (isinstance(reply, list) and len(reply) == 2 and
            isinstance(reply[0], int) and len(reply[1]) >= 2)


def info(port):
    c = Conn(port)
    text = c.cmd("INFO").decode()
    c.close()
    out = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v
    return out


def http_get(mport, path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (mport, path),
                                timeout=T(20)) as r:
        return r.status, r.headers, r.read()


def parse_metrics(text):
    """{(name, labels): value} of every sample line."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", line)
        assert m, "bad sample line %r" % line
        out[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return out


def raw_http(mport, data, bound=20):
    """Sends data as it is and reads the reply until the server closes."""
    s = socket.create_connection(("127.0.0.1", mport))
    s.settimeout(T(bound))
    s.sendall(data)
    got = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        got += d
        if b"\r\n\r\n" in got and b"Connection: close" in got:
            head, _, rest = got.partition(b"\r\n\r\n")
            m = re.search(rb"Content-Length: (\d+)", head)
            if m and len(rest) >= int(m.group(1)):
                break
    s.close()
    return got


def status_of(reply):
    m = re.match(rb"HTTP/1\.[01] (\d{3}) ", reply)
    assert m, "no status line in %r" % reply[:200]
    return int(m.group(1))


# ---- The cases ------------------------------------------------------------


def case_promtool(main):
    """promtool accepts /metrics, and its values agree with INFO after
    LOCK/UNLOCK and a timeout."""
    port, mport = main.port, metrics_port(main)
    a, b = Conn(port), Conn(port)
    for i in range(5):
        a.cmd("LOCK", 2, "m:%d" % i, "X", "m:s", "S")
        a.cmd("UNLOCK")
    a.cmd("LOCK", 2, "m:held", "X", "m:other", "S")
    try:
        b.cmd("LOCK", 1, "m:held", "X", "WAIT", 50)
        raise AssertionError("the LOCK should have timed out")
    except RuntimeError as e:
        assert str(e).startswith("TIMEOUT"), e
    status, headers, data = http_get(mport, "/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4"), \
        headers["Content-Type"]
    # INFO at once, while a's lease (1 s) still holds its keys; INFO's own
    # connection comes and goes between the scrapes, so the connection
    # counters are compared across the two.
    inf = info(port)
    m2 = parse_metrics(http_get(mport, "/metrics")[2].decode())
    m = parse_metrics(data.decode())
    r = subprocess.run(["promtool", "check", "metrics"], input=data,
                       capture_output=True, timeout=T(30))
    assert r.returncode == 0, (r.stdout, r.stderr)
    pairs = {
        "ordo_locks_acquired_total": "lock_acquired",
        "ordo_locks_released_total": "lock_released",
        "ordo_lock_timeouts_total": "lock_timeouts",
        "ordo_lock_waits_total": "lock_waited",
        "ordo_lock_requests_waiting": "lock_waiting",
        "ordo_lock_objects": "lock_objects",
        "ordo_lease_expiries_total": "lease_expiries",
        "ordo_protocol_errors_total": "protocol_errors",
        "ordo_order_refusals_total": "order_refusals",
    }
    for name, field in pairs.items():
        assert m[(name, "")] == float(inf[field]), (name, m[(name, "")],
                                                    inf[field])
    assert m[("ordo_connections_total", "")] + 1 == \
        m2[("ordo_connections_total", "")] == \
        float(inf["total_connections_received"]), "connections"
    # INFO's own session was open when it spoke.
    assert m[("ordo_sessions", "")] + 1 == float(inf["sessions"]), "sessions"
    assert m[("ordo_connections", "")] == 2, m[("ordo_connections", "")]
    assert m[("ordo_lock_timeouts_total", "")] >= 1
    assert m[("ordo_locks_acquired_total", "")] >= 6
    assert m[("ordo_locks_held", "")] == 2, m[("ordo_locks_held", "")]
    dl = (m[("ordo_deadlocks_total", '{kind="local"}')] +
          m[("ordo_deadlocks_total", '{kind="cross_shard"}')])
    assert dl == float(inf["deadlocks"]), (dl, inf["deadlocks"])
    for h in ("ordo_lock_wait_seconds", "ordo_lock_hold_seconds",
              "ordo_deadlock_detect_seconds"):
        buckets = sorted(
            (float(re.search(r'le="([^"]+)"', lab).group(1)), v)
            for (n, lab), v in m.items() if n == h + "_bucket")
        assert buckets[-1][0] == float("inf"), h
        counts = [v for _, v in buckets]
        assert counts == sorted(counts), (h, counts)
        assert counts[-1] == m[(h + "_count", "")], h
    # A wait that ends in a grant enters the wait histogram.
    b.send("LOCK", 1, "m:held", "X", "WAIT", 5000)
    wait_for("b's wait", lambda: info(port)["lock_waiting"] == "1", 20)
    a.cmd("UNLOCK")
    assert granted(b.read())
    m3 = parse_metrics(http_get(mport, "/metrics")[2].decode())
    assert m3[("ordo_lock_wait_seconds_count", "")] > \
        m[("ordo_lock_wait_seconds_count", "")], "the wait histogram"
    b.cmd("UNLOCK")
    a.close()
    b.close()


def case_prometheus(main):
    """A real Prometheus scrapes ordod every second; after a naive bank run
    (whose deadlocks are retried) increase(ordo_deadlocks_total[5m]) > 0
    answers with a sample."""
    mport = metrics_port(main)
    folder = tempfile.mkdtemp(prefix="ordod-prom-")
    pport = free_port()
    conf = os.path.join(folder, "prometheus.yml")
    with open(conf, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n  - job_name: ordod\n    static_configs:\n"
                "      - targets: ['127.0.0.1:%d']\n" % mport)
    log = open(os.path.join(folder, "prometheus.log"), "wb")
    prom = subprocess.Popen(
        ["prometheus", "--config.file=" + conf,
         "--storage.tsdb.path=" + os.path.join(folder, "data"),
         "--web.listen-address=127.0.0.1:%d" % pport],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=folder)
    api = "http://127.0.0.1:%d/api/v1/query?query=" % pport

    def query(q):
        if prom.poll() is not None:
            raise AssertionError("prometheus exited with status %d" %
                                 prom.returncode)
        try:
            with urllib.request.urlopen(api + urllib.parse.quote(q),
                                        timeout=T(10)) as r:
                j = json.loads(r.read())
        except (urllib.error.URLError, ConnectionError):
            return None  # not listening yet
        assert j["status"] == "success", j
        return j["data"]["result"]

    try:
        # A scrape before the run, so that the counter's rise is seen.
        wait_for("first scrape", lambda: query('ordo_deadlocks_total'
                                               '{kind="local"}'), 60)
        r = subprocess.run(
            [ORDO_CLI, "bank", "--backend", "ordod://127.0.0.1:%d" %
             main.port, "--accounts", "8", "--naive", "--json"],
            capture_output=True, text=True, timeout=T(120))
        assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
        j = json.loads(r.stdout)
        assert j["ok"] and j["deadlocks"] > 0, j
        res = wait_for("a sample of increase(...) > 0", lambda: query(
            "increase(ordo_deadlocks_total[5m]) > 0"), 60)
        assert any(s["metric"].get("kind") == "local" for s in res), res
        # The status page lists the newest of them, as DEADLOCKS has them.
        page = http_get(mport, "/")[2].decode()
        ended = int(info(main.port)["deadlocks"])
        assert "Deadlocks (%d ended)" % ended in page, page[-2000:]
        rows = re.findall(r"<tr><td>(\d+)</td><td>[-0-9: ]+</td>"
                          r"<td>local</td><td>\d+</td><td>[^<]* waits for ",
                          page)
        assert [int(x) for x in rows] == list(range(ended, ended - 10, -1)), \
            rows
        print("  prometheus: %d deadlocks in the bank run; %s" % (
            j["deadlocks"], res))
    finally:
        prom.terminate()
        try:
            prom.wait(T(20))
        except subprocess.TimeoutExpired:
            prom.kill()
            prom.wait(T(20))
        log.close()
    assert prom.returncode == 0, "prometheus exited with %d" % prom.returncode
    shutil.rmtree(folder, ignore_errors=True)


def chromium(args, bound=90):
    profile = tempfile.mkdtemp(prefix="ordod-chromium-")
    try:
        r = subprocess.run(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu",
             "--user-data-dir=" + profile, *args],
            capture_output=True, timeout=T(bound))
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    return r.stdout


def case_status_page(slow):
    """Chromium loads the status page during a live three-way deadlock: the
    three sessions and the SVG's three cycle edges are in its DOM, and its
    screenshot is a PNG. Then the cycle is broken and every wait ends."""
    port, mport = slow.port, metrics_port(slow)
    a, b, c = Conn(port), Conn(port), Conn(port)
    ids = [x.cmd("SESSION", "ID") for x in (a, b, c)]
    # A binary key too: it must reach the page escaped.
    for x, k in ((a, b"a\x00<k>"), (b, "b"), (c, "c")):
        assert granted(x.cmd("LOCK", 1, k, "X"))
    a.send("LOCK", 1, "b", "X")
    b.send("LOCK", 1, "c", "X")
    c.send("LOCK", 1, b"a\x00<k>", "X")
    wait_for("three waits", lambda: info(port)["lock_waiting"] == "3", 20)
    url = "http://127.0.0.1:%d/" % mport
    dom = chromium(["--dump-dom", url]).decode("utf-8", "replace")
    rows = {int(x) for x in re.findall(r'<tr data-sess="(\d+)">', dom)}
    assert rows == set(ids), ("the sessions' table", rows, ids, dom[:3000])
    for i in ids:
        assert dom.count('id="sess-%d"' % i) == 1, ("session %d" % i,
                                                    dom[:3000])
    svg = dom[dom.index("<svg"):dom.index("</svg>")]
    edges = set()
    for t in re.findall(r'class="edge">\s*<title>([^<]*)</title>', svg):
        m = re.match(r"txn (\d+)(?:-|&#45;)&gt;txn (\d+)$", t)
        assert m, t
        edges.add((int(m.group(1)), int(m.group(2))))
    want = {(ids[0], ids[1]), (ids[1], ids[2]), (ids[2], ids[0])}
    assert edges == want, (edges, want)
    for i in ids:
        assert re.search(r'<g id="sess-%d" class="node"' % i, svg), i
    # The binary key, escaped, in the sessions' table and in the graph.
    assert dom.count("a\\x00&lt;k&gt;") >= 3, "the binary key, escaped"
    assert "a\\x00&lt;k&gt;" in svg, "the binary key in the graph"
    os.makedirs(ARTIFACTS, exist_ok=True)
    png = os.path.join(ARTIFACTS, "status-page.png")
    if os.path.exists(png):
        os.unlink(png)
    chromium(["--screenshot=" + png, "--window-size=1200,900", url])
    with open(png, "rb") as f:
        head = f.read(8)
    assert head == b"\x89PNG\r\n\x1a\n", head
    assert os.path.getsize(png) > 1000, os.path.getsize(png)
    # C leaves: its session ends, its wait and its lock with it; B gets c,
    # then releases, and A gets b.
    c.close()
    assert granted(b.read())
    b.cmd("UNLOCK")
    assert granted(a.read())
    a.cmd("UNLOCK")
    wait_for("no waits", lambda: info(port)["lock_waiting"] == "0", 20)
    a.close()
    b.close()
    print("  status page: %d bytes of DOM, screenshot %s (%d bytes)" % (
        len(dom), png, os.path.getsize(png)))


def case_hostile(main):
    """A bad method, an unknown path, a huge header, a client that sends
    nothing: each is answered or held without stalling the loop."""
    port, mport = main.port, metrics_port(main)
    r = raw_http(mport, b"DELETE /metrics HTTP/1.1\r\nHost: x\r\n"
                 b"Connection: close\r\n\r\n")
    assert status_of(r) == 405 and b"Allow: GET, HEAD" in r, r[:300]
    r = raw_http(mport, b"BREW / HTTP/1.1\r\nHost: x\r\n"
                 b"Connection: close\r\n\r\n")
    assert status_of(r) == 405, r[:300]
    r = raw_http(mport, b"GET /nope HTTP/1.1\r\nHost: x\r\n"
                 b"Connection: close\r\n\r\n")
    assert status_of(r) == 404, r[:300]
    r = raw_http(mport, b"GET /metrics/../ HTTP/1.1\r\nHost: x\r\n"
                 b"Connection: close\r\n\r\n")
    assert status_of(r) == 404, r[:300]
    # Past the 32 KiB a connection's headers may take (HTTP_MEMORY).
    big = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200000 + \
        b"\r\nConnection: close\r\n\r\n"
    r = raw_http(mport, big)
    assert status_of(r) == 431, r[:300]
    # A client that connects and says nothing, and one that sends half a
    # request: the loop still serves locks and metrics meanwhile.
    idle = socket.create_connection(("127.0.0.1", mport))
    half = socket.create_connection(("127.0.0.1", mport))
    half.sendall(b"GET /metrics HTTP/1.1\r\nHost:")
    x = Conn(port)
    t0 = time.monotonic()
    for i in range(20):
        assert granted(x.cmd("LOCK", 1, "h:%d" % i, "X"))
        assert x.cmd("UNLOCK") == 1
    assert http_get(mport, "/metrics")[0] == 200
    took = time.monotonic() - t0
    assert took < T(5), "locks took %.2f s beside an idle client" % took
    x.close()
    idle.close()
    half.close()
    assert http_get(mport, "/graph.dot")[2].startswith(b"digraph")
    status, headers, data = http_get(mport, "/graph.svg")
    assert headers["Content-Type"] == "image/svg+xml" and b"<svg" in data
    # A chain of 201 waits is past what the loop lays out (HTTP_GRAPH_EDGES):
    # the SVG is refused, the page says why, the DOT still has every edge.
    n = 201
    chain = [Conn(port) for _ in range(n + 1)]
    for i, x in enumerate(chain):
        assert granted(x.cmd("LOCK", 1, "c:%d" % i, "X", "LEASE", 60000))
    for i, x in enumerate(chain[:-1]):
        x.send("LOCK", 1, "c:%d" % (i + 1), "X")
    wait_for("the chain", lambda: info(port)["lock_waiting"] == str(n), 20)
    try:
        http_get(mport, "/graph.svg")
        raise AssertionError("a graph of %d edges was laid out" % n)
    except urllib.error.HTTPError as e:
        assert e.code == 503, e
    assert b"too large to lay out" in http_get(mport, "/")[2]
    assert http_get(mport, "/graph.dot")[2].count(b" -> ") == n
    for x in chain:
        x.close()
    wait_for("no waits", lambda: info(port)["lock_waiting"] == "0", 20)


def case_flags(main_unused):
    """No --metrics-port, no HTTP; a non-loopback --metrics-bind without
    --requirepass is refused; the config file takes metrics-port and
    deadlock-timeout, and a two-way cycle then lives until its wait is
    deadlock-timeout old, no sooner."""
    plain = Ordod(ORDOD)
    with open(plain._out_path, "rb") as f:
        assert b"metrics port=" not in f.read()
    plain.stop()
    r = subprocess.run([ORDOD, "--port", "0", "--dir", tempfile.mkdtemp(),
                        "--metrics-port", "0", "--metrics-bind", "0.0.0.0"],
                       capture_output=True, text=True, timeout=T(10))
    assert r.returncode == 2 and "--requirepass" in r.stderr, r
    r = subprocess.run([ORDOD, "--help"], capture_output=True, text=True,
                       timeout=T(10))
    for flag in ("--metrics-port N", "--metrics-bind ADDR",
                 "--deadlock-timeout MS"):
        assert flag in r.stdout, flag
    # With --peers (one that is not there), the probes' counters, as INFO
    # has them.
    with Ordod(ORDOD, "--metrics-port", "0", "--peers",
               "127.0.0.1:%d" % free_port()) as d:
        data = http_get(metrics_port(d), "/metrics")[2]
        r = subprocess.run(["promtool", "check", "metrics"], input=data,
                           capture_output=True, timeout=T(30))
        assert r.returncode == 0, (r.stdout, r.stderr)
        m = parse_metrics(data.decode())
        inf = info(d.port)
        assert m[("ordo_peers", "")] == 1 == int(inf["peers"])
        for name, field in (("ordo_probes_sent_total", "probes_sent"),
                            ("ordo_probes_received_total", "probes_received"),
                            ("ordo_peer_messages_dropped_total",
                             "peer_messages_dropped")):
            assert m[(name, "")] == float(inf[field]), name
    folder = tempfile.mkdtemp(prefix="ordod-conf-")
    conf = os.path.join(folder, "ordod.conf")
    with open(conf, "w") as f:
        f.write("metrics-port 0\ndeadlock-timeout 300\n")
    with Ordod(ORDOD, "--config", conf, folder=folder) as d:
        assert http_get(metrics_port(d), "/metrics")[0] == 200
        a, b = Conn(d.port), Conn(d.port)
        # CONFIG GET names the options, metrics-port as bound.
        assert a.cmd("CONFIG", "GET", "metrics-port") == [
            b"metrics-port", str(metrics_port(d)).encode()]
        assert a.cmd("CONFIG", "GET", "deadlock-timeout") == [
            b"deadlock-timeout", b"300"]
        for name, val in (("deadlock-timeout", 5), ("metrics-port", 0),
                          ("metrics-bind", "127.0.0.2")):
            try:
                a.cmd("CONFIG", "SET", name, val)
                raise AssertionError("CONFIG SET %s was taken" % name)
            except RuntimeError as e:
                assert "immutable config" in str(e), e
        assert granted(a.cmd("LOCK", 1, "x", "X"))
        assert granted(b.cmd("LOCK", 1, "y", "X"))
        # The first wait of this server: its search comes 300 ms after
        # it, and so does the engine's first sweep (its period is the
        # deadlock timeout, counted from the first wait).
        t0 = time.monotonic()
        a.send("LOCK", 1, "y", "X")
        wait_for("a's wait", lambda: info(d.port)["lock_waiting"] == "1", 20)
        b.send("LOCK", 1, "x", "X")
        # The younger (b) is the victim.
        try:
            b.read()
            raise AssertionError("b should have been the victim")
        except RuntimeError as e:
            assert str(e).startswith("DEADLOCK"), e
        took = time.monotonic() - t0
        assert took >= 0.3, "found after %.3f s, before 300 ms" % took
        assert granted(a.read())
        a.close()
        b.close()
    shutil.rmtree(folder, ignore_errors=True)


def main():
    failed = 0
    # Under LeakSanitizer, what graphviz and fontconfig keep for the
    # process's life is theirs, not a leak of ordod's; under
    # ThreadSanitizer, pango's start-up thread syncs through uninstrumented
    # glib (each file says which).
    here = os.path.dirname(os.path.abspath(__file__))
    for var, name in (("LSAN_OPTIONS", "lsan_graphviz.supp"),
                      ("TSAN_OPTIONS", "tsan_graphviz.supp")):
        os.environ[var] = ":".join(
            x for x in (os.environ.get(var),
                        "suppressions=" + os.path.join(here, name)) if x)
    # graphviz is built without frame pointers: only the slow unwinder
    # finds the function (gvconfig) that a suppression names.
    if os.environ.get("ASAN_OPTIONS"):
        os.environ["ASAN_OPTIONS"] += ":fast_unwind_on_malloc=0"
    srv = Ordod(ORDOD, "--metrics-port", "0", "--lease-ms", "1000")
    slow = Ordod(ORDOD, "--metrics-port", "0", "--lease-ms", "1000",
                 "--deadlock-timeout", "60000")
    cases = [(case_promtool, srv), (case_hostile, srv),
             (case_prometheus, srv), (case_status_page, slow),
             (case_flags, None)]
    for case, s in cases:
        try:
            case(s)
            print("ok   %s" % case.__name__)
        except Exception:
            failed += 1
            print("FAIL %s" % case.__name__)
            traceback.print_exc()
        sys.stdout.flush()
    for s in (srv, slow):
        try:
            s.stop()
        except AssertionError:
            failed += 1
            traceback.print_exc()
    print("%d passed, %d failed" % (len(cases) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
