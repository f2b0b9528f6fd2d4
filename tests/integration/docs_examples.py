#!/usr/bin/env python3
"""docs_examples.py ORDOD PROTOCOL_MD -- runs the redis-cli examples of
docs/protocol.md against a real ordod, as the sessions the page says they
are, and compares every reply with the page's exactly.

The page's format. An example is a line inside a ``` fence that starts with
a prompt, then the reply as redis-cli prints it to a terminal, up to the
next prompt or the fence's end:

    $ redis-cli -p 7411 COMMAND ...    the first client's session
    B$ redis-cli -p 7411 COMMAND ...   a second client's, connected alongside

Read in order, the examples of one prompt are ONE session: they are typed,
in page order, at the prompt of one `redis-cli --no-raw -p PORT` that reads
them from its stdin (one connection, so one session), started at that
prompt's first example and kept open to the end. A second session shows what
one client sees of another's locks (a -TIMEOUT, a RESUME refused). Every
command returns at once (one that does not fails at the step's bound): none
waits on another session's locks, since a reply that came later would need
an order of events the page cannot show.
A fence line that looks like a prompt of no session listed in PROMPTS, or a
command that redis-cli's own prompt takes for itself (QUIT, EXIT, HELP,
CONNECT, CLEAR, a leading repeat count) fails, so no example is skipped.

Splitting the output per command: after each command the script sends
`PING __docs_end_N__` and reads up to the echoed marker, every read bounded
by select() (10 s times ORDO_TEST_TIMEOUT_MULT per step).

What is compared. redis-cli's output, CRLF read as LF, trailing blank
lines dropped, and without the '(0.52s)' line its prompt adds after a
command that took half a second or more, must equal the page's byte for
byte, except the reply fields that differ by nature from run to run. Those
are named per command in MASKS below (by their place in the reply, as
redis-cli numbers it) and in INFO_MASKS (INFO fields, by field name); only
they are masked (and never in an error reply, which is compared whole),
each by kind:
  - fencing tokens (LOCK's token after each key, LOCKS' token, HOLDERS'
    holder token): per key, the same page value must be the same real value
    wherever it appears, different page values different real ones, in the
    same order (a grant the page shows with a larger token must have a
    larger real one);
  - session ids (SESSION ID, SESSION RESUME's reply, HOLDERS' holder id) and
    client ids (CLIENT ID, HELLO's id): one-to-one, page to real;
  - resume tokens (SESSION RESUMABLE): one-to-one, 32 hex digits; a SESSION
    RESUME in the page names the page's token and is sent with the real one;
  - a lease's remaining validity (LOCK's first element, EXTEND's reply): at
    most the page's value and at least LEASE_SHORTFALL_MS below it, since a
    reply may be read a few ms after the renewal it reports;
  - INFO's tcp_port: the page shows 7411 and ordod must answer its port.

The server (tests/integration/ordod_proc.py) is started in a temporary
folder on a free port and stopped with SIGTERM; it must exit with status 0
within the bound and leave no sanitizer report in its log. Every redis-cli
must exit 0 at EOF with nothing on stderr and nothing left unread.
A page without any example fails. Prints 'N passed, N failed' (examples,
plus one failure for each of those end checks that fails) and exits 1 on
any failure.
"""

import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time

from ordod_proc import Ordod, OrdodError

ORDOD, DOC = sys.argv[1], sys.argv[2]
MULT = float(os.environ.get("ORDO_TEST_TIMEOUT_MULT", "1"))
# A bound against a hang only: how long one step (a start, a reply, an exit)
# may take before the script calls it hung.
STEP_S = 10 * MULT
# How far below the page's value a lease's remaining validity may read: the
# reply is computed after the renewal, on a machine that may be loaded or
# running a sanitizer build.
LEASE_SHORTFALL_MS = int(1000 * MULT)

PROMPTS = {"$ redis-cli -p 7411 ": "A", "B$ redis-cli -p 7411 ": "B"}
# What redis-cli's prompt handles itself instead of sending to the server.
CLI_LOCAL = {"QUIT", "EXIT", "HELP", "?", "CONNECT", "CLEAR", "RESTART"}

# INFO fields that differ from run to run, by name, and why.
INFO_MASKS = {
    "process_id": "info",  # the server's pid
    "uptime_in_seconds": "info",  # whole seconds: 0 or 1, as the run goes
    "tcp_port": "port",  # checked: the page's 7411 is ordod's real port
    # Counts this script's marker PINGs and redis-cli's own COMMAND DOCS.
    "total_commands_processed": "info",
    # Microseconds measured on this machine.
    "wait_p50_us": "info",
    "wait_p99_us": "info",
    "max_wait_us": "info",
    "hold_p50_us": "info",
    "hold_p99_us": "info",
    # The heap in use, and whose allocator counts it (glibc's, or a
    # sanitizer build's).
    "used_memory": "info",
    "mem_allocator": "info",
}


class PageError(Exception):
    """The page or ordod's output is not what the checker can compare."""


# ---- ordod ------------------------------------------------------------------
# Started and stopped through tests/integration/ordod_proc.py, behind one
# small pair of functions.


def start_ordod():
    """A fresh ordod on a free port in a temporary folder of its own. Raises
    OrdodError if it does not come up."""
    return Ordod(ORDOD, "--verbose", "0")


def stop_ordod(srv):
    """Stops it with SIGTERM; returns the list of what went wrong (a hang, an
    exit status other than 0, a sanitizer report in its log)."""
    try:
        srv.stop()
    except OrdodError as e:
        return [str(e)]
    return []


# ---- One session: one redis-cli ---------------------------------------------


class Session:
    """One redis-cli process reading commands from its stdin: one
    connection, hence one ordod session, for all of a prompt's examples."""

    def __init__(self, name, port, folder):
        self.name = name
        self.errpath = os.path.join(folder, "redis-cli-%s.stderr" % name)
        with open(self.errpath, "wb") as err:
            self.proc = subprocess.Popen(
                ["redis-cli", "--no-raw", "-p", str(port)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        self.buf = b""
        self.n = 0
        self.broken = None  # why the stream can no longer be split, if so

    def run(self, command):
        """Sends command, then a marker PING; returns the output before the
        marker's echo. Raises PageError when it does not come in time."""
        if self.broken:
            raise PageError("session %s is out of step since: %s" %
                            (self.name, self.broken))
        self.n += 1
        echo = b'"__docs_end_%d__"\n' % self.n
        try:
            self.proc.stdin.write(command.encode() +
                                  b"\nPING __docs_end_%d__\n" % self.n)
            self.proc.stdin.flush()
        except OSError as e:
            self.broken = "writing %r: %s" % (command, e)
            raise PageError(self.broken)
        deadline = time.monotonic() + STEP_S
        fd = self.proc.stdout.fileno()
        while True:
            at = self.buf.find(echo)
            if at == 0 or (at > 0 and self.buf[at - 1:at] == b"\n"):
                out, self.buf = self.buf[:at], self.buf[at + len(echo):]
                return drop_times(out).decode(errors="replace")
            left = deadline - time.monotonic()
            chunk = None
            if left > 0 and select.select([fd], [], [], left)[0]:
                chunk = os.read(fd, 65536)
            if not chunk:
                self.broken = ("no reply to %r within %.0f s (%s); redis-cli "
                               "wrote %r" % (command, STEP_S, "closed"
                                             if chunk == b"" else "timeout",
                                             self.buf))
                raise PageError(self.broken)
            self.buf += chunk

    def close(self):
        """Ends the session (EOF on redis-cli's stdin); returns the list of
        what went wrong."""
        problems = []
        try:
            self.proc.stdin.close()
        except OSError as e:
            problems.append("redis-cli %s: closing its stdin: %s" %
                            (self.name, e))
        try:
            rc = self.proc.wait(STEP_S)
            if rc != 0:
                problems.append("redis-cli %s exited with status %d" %
                                (self.name, rc))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(STEP_S)
            problems.append("redis-cli %s did not exit within %.0f s of EOF"
                            % (self.name, STEP_S))
        # It has exited, so this read ends at once.
        rest = drop_times(self.buf + self.proc.stdout.read())
        self.proc.stdout.close()
        if rest:
            problems.append("redis-cli %s wrote after its last reply: %r" %
                            (self.name, rest))
        with open(self.errpath, "rb") as f:
            err = f.read()
        if err:
            problems.append("redis-cli %s's stderr: %r" % (self.name, err))
        return problems


# redis-cli's prompt prints a command's time on a line of its own after a
# command that took 0.5 s or more (a slow machine, a sanitizer build): it is
# no part of ordod's reply. A command's output may end with its own, and
# begin with the marker PING's before it.
CLI_TIME = rb"\(\d+\.\d\ds\)\n"


def drop_times(out):
    out = re.sub(rb"\A" + CLI_TIME, b"", out)
    return re.sub(rb"(\A|\n)" + CLI_TIME + rb"\Z", rb"\1", out)


# ---- The page ---------------------------------------------------------------


def examples(path):
    """The page's examples, in order: [lineno, session, command, [lines]]."""
    out, cur, fenced = [], None, False
    for lineno, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.rstrip("\n")
        if line.startswith("```"):
            fenced, cur = not fenced, None
            continue
        if not fenced:
            continue
        prompt = next((p for p in PROMPTS if line.startswith(p)), None)
        if prompt:
            cur = [lineno, PROMPTS[prompt], line[len(prompt):], []]
            out.append(cur)
        elif re.match(r"\S*\$ *redis-cli", line):
            raise PageError("line %d: %r: a prompt of no session this script "
                            "knows (%s)" % (lineno, line, ", ".join(
                                repr(p.strip()) for p in PROMPTS)))
        elif cur is not None:
            cur[3].append(line)
    return out


def words(command):
    """The command's words. redis-cli splits the line itself; this split,
    used only to find a command's name and masked arguments, is on blanks,
    so the page's examples keep quotes and escapes out of their commands."""
    if re.search(r"[\"'\\]", command):
        raise PageError("%r: the checker splits commands on blanks only; "
                        "write the example without quotes" % command)
    w = command.split()
    if not w:
        raise PageError("an empty command")
    if w[0].upper() in CLI_LOCAL or w[0].isdigit():
        raise PageError("%r: redis-cli's prompt handles this itself, so no "
                        "reply of ordod's would be compared" % command)
    return w


def cli_repr(s):
    """A string as redis-cli --no-raw shows it (hiredis's sdscatrepr)."""
    out = ['"']
    for c in s.encode():
        ch = chr(c)
        if ch in '\\"':
            out.append("\\" + ch)
        elif ch in "\n\r\t\a\b":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\a": "\\a",
                        "\b": "\\b"}[ch])
        elif 0x20 <= c < 0x7f:
            out.append(ch)
        else:
            out.append("\\x%02x" % c)
    return "".join(out) + '"'


# ---- redis-cli's output, as a tree of leaves --------------------------------

FIELD = re.compile(r"( *)(\d+)\) ")


def leaves(text):
    """The leaves of a reply as redis-cli --no-raw prints it: a list of
    (path, start, end), path the 1-based indices from the top (() for a
    reply that is not an array), text[start:end] the leaf as printed.
    redis-cli prints element i of an n-element array as its index, right-
    aligned in the width of n, then ') ', the first element on its parent's
    line and the others below, indented to it."""
    out = []
    pos = _value(text, 0, "", (), out)
    if pos < len(text):
        raise PageError("cannot read as a redis-cli reply from %r" %
                        text[pos:])
    return out


def _value(text, pos, prefix, path, out):
    m = FIELD.match(text, pos)
    if not (m and m.group(2) == "1"):
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        out.append((path, pos, end))
        return end + 1
    width = len(m.group(1)) + 1
    inner = prefix + " " * (width + 2)
    i, pos = 1, m.end()
    while True:
        pos = _value(text, pos, inner, path + (i,), out)
        i += 1
        nxt = "%s%*d) " % (prefix, width, i)
        if not text.startswith(nxt, pos):
            return pos
        pos += len(nxt)


def info_leaves(text):
    """INFO's reply (redis-cli prints it raw): one leaf per 'field:value'
    line, its path the field's name, the leaf its value."""
    out, pos = [], 0
    for line in text.split("\n"):
        m = re.match(r"([a-z0-9_]+):", line)
        if m:
            out.append(((m.group(1),), pos + m.end(), pos + len(line)))
        pos += len(line) + 1
    return out


# ---- What differs from run to run, by name ---------------------------------
# MASKS maps a command to a function (words, page's reply, its leaves) that
# names the leaves of its reply that differ by nature from run to run, and
# their kind: {path: kind}. The paths are read off the page's reply, whose
# shape ordod's must share; every other leaf is compared exactly, and so is
# an error reply whole. A command not in MASKS is compared exactly.


def _at(text, lv, path):
    for p, s, e in lv:
        if p == path:
            return text[s:e]
    return None


def _key(leaf):
    if leaf is None or not leaf.startswith('"'):
        raise PageError("expected a key (a string), got %r" % leaf)
    return leaf


def mask_lock(w, text, lv):
    # [validity, [key1, token1, key2, token2, ...]]
    kinds = {(1,): ("lease",)}
    for p, _, _ in lv:
        if len(p) == 2 and p[0] == 2 and p[1] % 2 == 0:
            kinds[p] = ("fence", _key(_at(text, lv, (2, p[1] - 1))))
    return kinds


def mask_locks(w, text, lv):
    # [[key, mode, token, holds], ...]
    return {p: ("fence", _key(_at(text, lv, (p[0], 1))))
            for p, _, _ in lv if len(p) == 2 and p[1] == 3}


def mask_holders(w, text, lv):
    # [[[session id, mode, token], ...], [[session id, mode], ...]]
    key = cli_repr(w[1]) if len(w) == 2 else None
    kinds = {}
    for p, _, _ in lv:
        if len(p) == 3 and p[0] in (1, 2) and p[2] == 1:
            kinds[p] = ("session",)
        elif len(p) == 3 and p[0] == 1 and p[2] == 3:
            kinds[p] = ("fence", key)
    return kinds


def mask_session(w, text, lv):
    sub = w[1].upper() if len(w) > 1 else ""
    if sub == "RESUMABLE":
        return {(): ("resume",)}
    if sub in ("ID", "RESUME"):
        return {(): ("session",)}
    return {}


def mask_client(w, text, lv):
    return {(): ("client",)} if len(w) == 2 and w[1].upper() == "ID" else {}


def mask_hello(w, text, lv):
    # RESP2's flat map: [..., "id", id, ...]
    return {(p[0] + 1,): ("client",) for p, s, e in lv
            if len(p) == 1 and text[s:e] == '"id"'}


def mask_info(w, text, lv):
    return {p: (INFO_MASKS[p[0]],) for p, _, _ in lv if p[0] in INFO_MASKS}


MASKS = {
    "LOCK": mask_lock,
    "LOCKS": mask_locks,
    "HOLDERS": mask_holders,
    "EXTEND": lambda w, text, lv: {(): ("lease",)},
    "SESSION": mask_session,
    "CLIENT": mask_client,
    "HELLO": mask_hello,
    "INFO": mask_info,
}


class Bindings:
    """Page values of the masked kinds, bound to the real ones as the
    examples show them."""

    def __init__(self, port):
        self.port = port
        self.fence = {}  # key -> {page token: real token}
        self.ids = {"session": {}, "client": {}, "resume": {}}

    def check(self, kind, page, real):
        """Raises PageError unless real may stand for page."""
        k = kind[0]
        if k == "info":
            return
        if k == "resume":
            if not re.fullmatch(r'"[0-9a-f]{32}"', real):
                raise PageError("resume token %s is not 32 hex digits" % real)
            return self._one_to_one("resume", page, real)
        pv, rv = _integer(page), _integer(real)
        if k == "port":
            if pv != 7411 or rv != self.port:
                raise PageError("tcp_port: page %s, ordod %s; want 7411 and "
                                "%d" % (page, real, self.port))
        elif k == "lease":
            if not pv - LEASE_SHORTFALL_MS <= rv <= pv:
                raise PageError("lease validity %d, not within %d ms below "
                                "the page's %d" %
                                (rv, LEASE_SHORTFALL_MS, pv))
        elif k == "fence":
            seen = self.fence.setdefault(kind[1], {})
            if pv in seen:
                if seen[pv] != rv:
                    raise PageError(
                        "token of %s: the page's %d was ordod's %d before, "
                        "ordod now says %d" % (kind[1], pv, seen[pv], rv))
                return
            for p2, r2 in seen.items():
                if (pv > p2) != (rv > r2) or rv == r2:
                    raise PageError(
                        "token of %s: the page's %d %s its earlier %d, but "
                        "ordod's %d %s its %d" %
                        (kind[1], pv, ">" if pv > p2 else "<", p2, rv,
                         ">" if rv > r2 else "<=" if rv < r2 else "==", r2))
            seen[pv] = rv
        else:
            self._one_to_one(k, page, real)

    def _one_to_one(self, k, page, real):
        m = self.ids[k]
        if page in m:
            if m[page] != real:
                raise PageError("%s id: the page's %s was ordod's %s before, "
                                "ordod now says %s" % (k, page, m[page], real))
        elif real in m.values():
            raise PageError("%s id: ordod's %s stands for another page value "
                            "already, not for %s" % (k, real, page))
        m[page] = real

    def command(self, w):
        """The command to send: the page's resume token replaced with the
        real one it stands for."""
        if len(w) == 3 and [x.upper() for x in w[:2]] == ["SESSION",
                                                            "RESUME"]:
            real = self.ids["resume"].get(cli_repr(w[2]))
            if real is None:
                raise PageError("SESSION RESUME %s: no example before shows "
                                "that token" % w[2])
            return " ".join(w[:2] + [real.strip('"')])
        return " ".join(w)


def _integer(leaf):
    m = re.fullmatch(r"(?:\(integer\) )?(-?\d+)", leaf)
    if not m:
        raise PageError("expected an integer, got %r" % leaf)
    return int(m.group(1))


def compare(w, page, real, binds):
    """Raises PageError unless real (ordod's output) is the page's, masked
    fields aside."""
    name = w[0].upper()
    read = info_leaves if name == "INFO" else leaves
    plv, rlv = read(page), read(real)
    if [p for p, _, _ in plv] != [p for p, _, _ in rlv]:
        raise PageError("the reply's shape differs from the page's")
    kinds = MASKS.get(name, lambda *a: {})(w, page, plv)
    # ordod's output with each masked field replaced by the page's value,
    # once that value may stand for it.
    pieces, pos = [], 0
    for (path, ps, pe), (_, rs, re_) in zip(plv, rlv):
        kind = kinds.get(path)
        # An error reply is compared whole, whatever the command.
        if kind is None or page[ps:pe].startswith("(error) "):
            continue
        binds.check(kind, page[ps:pe], real[rs:re_])
        pieces += [real[pos:rs], page[ps:pe]]
        pos = re_
    masked = "".join(pieces) + real[pos:]
    if masked != page:
        pl, rl = page.split("\n"), masked.split("\n")
        n = next((i for i, (a, b) in enumerate(zip(pl, rl)) if a != b),
                 min(len(pl), len(rl)))
        raise PageError("the reply differs from the page's at its line %d: "
                        "page %r, ordod %r" % (n + 1, "\n".join(pl[n:n + 1]),
                                               "\n".join(rl[n:n + 1])))


def clean(text):
    """CRLF as LF (INFO's lines), without trailing blank lines."""
    lines = text.replace("\r\n", "\n").split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)


def main():
    exs = examples(DOC)
    passed = failed = 0
    srv = start_ordod()
    folder = tempfile.mkdtemp(prefix="ordod-docs-")
    sessions = {}
    binds = Bindings(srv.port)
    try:
        for lineno, who, command, want in exs:
            page = clean("\n".join(want))
            got = None
            try:
                w = words(command)
                if who not in sessions:
                    sessions[who] = Session(who, srv.port, folder)
                got = clean(sessions[who].run(binds.command(w)))
                compare(w, page, got, binds)
                passed += 1
            except PageError as e:
                failed += 1
                print("FAIL %s:%d (session %s) %s: %s\n--- the page says:\n%s"
                      "\n--- ordod said:\n%s" % (DOC, lineno, who, command, e,
                                                 page, got))
    finally:
        problems = []
        for s in sessions.values():
            problems += s.close()
        problems += stop_ordod(srv)
    if not exs:
        problems.append("no example found in " + DOC)
    for p in problems:
        failed += 1
        print("FAIL " + p)
    print("%d passed, %d failed" % (passed, failed))
    if failed:
        print("(redis-cli's stderr is in %s)" % folder)
    else:
        shutil.rmtree(folder, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (PageError, OrdodError) as e:
        print("FAIL %s\n0 passed, 1 failed" % e)
        sys.exit(1)
