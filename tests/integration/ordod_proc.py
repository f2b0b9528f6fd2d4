"""ordod_proc.py -- one ordod process for a Python test, started and stopped
so that a server which crashes, hangs at shutdown or reports a sanitizer
error fails the test that started it.

    from ordod_proc import Ordod, OrdodError
    srv = Ordod(ORDOD_BINARY, "--lease-ms", "1000")  # more flags if wanted
    ... connect to 127.0.0.1:srv.port ...
    srv.stop()   # raises OrdodError on a bad exit or a sanitizer report
    srv.log()    # what it wrote on stderr so far

Ordod(binary, *args, folder=None) starts `binary --port 0 --dir FOLDER
*args` (FOLDER a new temporary folder unless given; pass the same folder
to a later server to restart on its state) and waits, within a bound, for
its 'ready port=N' line (with --tls-port, tls_port is read from the
'tls port=N' line after it; None without). Its stdout and stderr go to
files, never to pipes, so a chatty or stuck server can never block on a
full pipe, and reading its log never blocks on a live process.

stop() sends SIGTERM, waits within a bound, SIGKILLs past it, and raises
OrdodError if the server had to be killed, exited with a status other than
0, or wrote a sanitizer report (AddressSanitizer, LeakSanitizer,
ThreadSanitizer, UndefinedBehaviorSanitizer) to its log. stop(kill=True)
sends SIGKILL instead, for a test of a crash: then the exit status is not
judged (it must have been alive to be killed), but the log still is. A
second stop() does nothing. An Ordod is also a context manager that stops
it on leaving the block.

Bounds scale with ORDO_TEST_TIMEOUT_MULT (sanitizer builds start, run and
exit slower; LeakSanitizer's exit scan takes a while). Servers still
running when the interpreter exits are killed, so a test that fails
half-way leaves no process behind.
"""

import atexit
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

MULT = float(os.environ.get("ORDO_TEST_TIMEOUT_MULT", "1"))
START_BOUND_S = 10.0  # to 'ready port=N'
STOP_BOUND_S = 10.0   # from SIGTERM to the exit

# What a sanitizer writes when it finds something. UBSan's line is
# 'file:line:col: runtime error: ...'; every sanitizer ends its report with
# 'SUMMARY: <Name>Sanitizer: ...'.
SANITIZER_REPORT = re.compile(
    r"ERROR: AddressSanitizer|ERROR: LeakSanitizer|WARNING: ThreadSanitizer"
    r"|runtime error:|SUMMARY: \w*Sanitizer")

_live = set()


class OrdodError(AssertionError):
    """The server failed to start, or stopped badly. An AssertionError, so
    a test that lets it through fails as on any other check."""


class Ordod:
    """One ordod process on a free port (see the module's comment)."""

    def __init__(self, binary, *args, folder=None):
        self._own_folder = folder is None
        self.dir = folder or tempfile.mkdtemp(prefix="ordod-test-")
        self.args = [binary, "--port", "0", "--dir", self.dir,
                     *[str(a) for a in args]]
        # The files live beside the state, one pair per process, so that
        # servers restarted on one folder keep their own logs.
        fd, self._out_path = tempfile.mkstemp(dir=self.dir, prefix="stdout-")
        self._out = os.fdopen(fd, "wb")
        fd, self._err_path = tempfile.mkstemp(dir=self.dir, prefix="stderr-")
        self._err = os.fdopen(fd, "wb")
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL,
                                     stdout=self._out, stderr=self._err)
        self.returncode = None
        self._log = None
        _live.add(self)
        self.port = self._wait_ready()
        # With --tls-port (a flag, or a config file's line): the 'tls
        # port=N' line, which the server writes with 'ready' in one write.
        with open(self._out_path, "rb") as f:
            m = re.search(rb"^tls port=(\d+)\n", f.read(), re.M)
        self.tls_port = int(m.group(1)) if m else None

    def _wait_ready(self):
        end = time.monotonic() + START_BOUND_S * MULT
        while True:
            with open(self._out_path, "rb") as f:
                m = re.search(rb"^ready port=(\d+)\n", f.read(), re.M)
            if m:
                return int(m.group(1))
            # Polled, since a file gives no event; each look is cheap.
            if self.proc.poll() is not None or time.monotonic() > end:
                why = ("exited with status %d" % self.proc.returncode
                       if self.proc.poll() is not None else
                       "said no 'ready port=N' within %.0f s"
                       % (START_BOUND_S * MULT))
                self._kill_quietly()
                raise OrdodError("ordod %s: %s\n%s" % (
                    " ".join(self.args[1:]), why, self._read_log()[-4000:]))
            time.sleep(0.01)

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def _read_log(self):
        with open(self._err_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def log(self):
        """Everything the server wrote on stderr so far (after stop(), all
        of it)."""
        return self._log if self._log is not None else self._read_log()

    def _kill_quietly(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(STOP_BOUND_S * MULT)
        self._close()

    def _close(self):
        _live.discard(self)
        self.returncode = self.proc.returncode
        self._out.close()
        self._err.close()

    def stop(self, kill=False):
        """Stops the server and judges how it went (see the module's
        comment). Returns the exit status (negative: the signal)."""
        if self._log is not None:
            return self.returncode
        problems = []
        was_alive = self.proc.poll() is None
        if not was_alive:
            problems.append("it had exited already, with status %d" %
                            self.proc.returncode)
        elif kill:
            self.proc.kill()
            self.proc.wait(STOP_BOUND_S * MULT)
        else:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_BOUND_S * MULT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STOP_BOUND_S * MULT)
                problems.append("it did not exit within %.0f s of SIGTERM "
                                "and was killed" % (STOP_BOUND_S * MULT))
        self._close()
        self._log = self._read_log()
        if was_alive and not kill and not problems and self.returncode != 0:
            problems.append("it exited with status %d after SIGTERM" %
                            self.returncode)
        if SANITIZER_REPORT.search(self._log):
            problems.append("its log has a sanitizer report")
        if problems:
            raise OrdodError("ordod on port %d: %s. Its log (the end):\n%s" % (
                self.port, "; ".join(problems), self._log[-6000:]))
        if self._own_folder:
            shutil.rmtree(self.dir, ignore_errors=True)
        return self.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


@atexit.register
def _kill_leftovers():
    for srv in list(_live):
        srv._kill_quietly()
