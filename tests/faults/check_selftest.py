#!/usr/bin/env python3
"""check_selftest.py -- shows that check.py catches each violation it
checks for: for each kind, a small made-up history (and register log) that
has exactly that defect must fail the check and name the kind, and the same
history without it must pass. Run by ctest as faults_check_selftest."""
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MS = 1000000


def write_run(d, ops, reg_lines, reg_state, faults=()):
    """ops: (proc, thr, op, key, token, lock_s, lock_e, read, write_e,
    accepted) in ms; one register (key 0)."""
    with open(os.path.join(d, "hist-1-0.txt"), "w") as f:
        for (p, t, op, key, tok, ls, le, rd, we, acc) in ops:
            f.write("%d %d %d lock %d %d 0 %d %d 0 1\n"
                    % (p, t, op, ls * MS, le * MS, key, tok))
            f.write("%d %d %d read %d %d 0 %d %d %d 1\n"
                    % (p, t, op, le * MS, le * MS, key, tok, rd))
            f.write("%d %d %d write %d %d %d %d %d %d 1\n"
                    % (p, t, op, le * MS, we * MS, acc, key, tok, rd + 1))
            f.write("%d %d %d unlock %d %d 0 %d %d 0 1\n"
                    % (p, t, op, we * MS, we * MS + 1, key, tok))
    with open(os.path.join(d, "reg-0.log"), "w") as f:
        for line in reg_lines:
            f.write(" ".join(str(x) for x in line) + "\n")
    with open(os.path.join(d, "reg-0"), "wb") as f:
        f.write(struct.pack("<QqQ", *reg_state))
    with open(os.path.join(d, "faults.log"), "w") as f:
        for line in faults:
            f.write(line + "\n")


def check(d, extra=()):
    r = subprocess.run([sys.executable, os.path.join(HERE, "check.py"), d,
                        "--backend", "selftest", "--lease-ms", "1000",
                        "--lock-ms", "300", "--exchange-ms", "300",
                        "--slack-ms", "100", "--families", ""] + list(extra),
                       capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def reg(op_rows):
    """Register log lines for accepted writes: (t_ms, token, read, prev)."""
    return [(t * MS, tok, rd, prev, rd + 1, 1, 0)
            for (t, tok, rd, prev) in op_rows]


CASES = {
    # Two holders in turn, tokens 1 then 2: nothing wrong.
    "clean": ([(1, 0, 1, 0, 1, 0, 1, 0, 2, 1), (1, 1, 1, 0, 2, 10, 11, 1, 12, 1)],
              reg([(2, 1, 0, 0), (12, 2, 1, 1)]), (2, 2, 2)),
    # The second grant, after the first, carries a smaller token.
    "token": ([(1, 0, 1, 0, 5, 0, 1, 0, 2, 1), (1, 1, 1, 0, 3, 10, 11, 1, 12, 0)],
              reg([(2, 5, 0, 0)]) + [(12 * MS, 3, 1, 1, 2, 0, 5)], (5, 1, 1)),
    # The earlier holder (token 9, granted first) writes after the later
    # one (token 8) was accepted.
    "stale": ([(1, 0, 1, 0, 9, 0, 1, 5, 30, 1), (1, 1, 1, 0, 8, 10, 11, 5, 12, 1)],
              reg([(12, 8, 5, 5), (30, 9, 6, 6)]), (9, 7, 2)),
    # Both read 0, both writes accepted: one increment lost.
    "lost": ([(1, 0, 1, 0, 1, 0, 1, 0, 2, 1), (1, 1, 1, 0, 2, 0, 1, 0, 3, 1)],
             reg([(2, 1, 0, 0), (3, 2, 0, 1)]), (2, 1, 2)),
    # A second grant while the first holder is still writing.
    "overlap": ([(1, 0, 1, 0, 1, 0, 1, 0, 20, 1), (1, 1, 1, 0, 2, 5, 6, 1, 30, 1)],
                reg([(20, 1, 0, 0), (30, 2, 1, 1)]), (2, 2, 2)),
    # A lock call of 2 s (bound 300 + 600 + 100 ms).
    "bound": ([(1, 0, 1, 0, 1, 0, 2000, 0, 2001, 1)],
              reg([(2001, 1, 0, 0)]), (1, 1, 1)),
}


def main():
    failures = []
    for kind, (ops, lines, state) in CASES.items():
        with tempfile.TemporaryDirectory() as d:
            write_run(d, ops, lines, state)
            rc, out = check(d)
            if kind == "clean":
                if rc != 0:
                    failures.append("a clean history failed:\n" + out)
                continue
            if rc != 1 or ("VIOLATIONS %s x" % kind) not in out:
                failures.append("%s: not caught (exit %d):\n%s"
                                % (kind, rc, out))
            # Not asserted: reported, and the run passes.
            others = "token,stale,lost,overlap,bound,register".split(",")
            others.remove(kind)
            rc2, out2 = check(d, ["--assert", ",".join(others)])
            if kind not in ("stale", "lost") and rc2 != 0:
                failures.append("%s: failed though not asserted:\n%s"
                                % (kind, out2))
    # A fault family that never came fails the run.
    with tempfile.TemporaryDirectory() as d:
        ops, lines, state = CASES["clean"]
        write_run(d, ops, lines, state, ["1 start pause srv", "2 end pause srv"])
        rc, out = check(d, ["--families", "pause,kill"])
        if rc != 1 or "no fault of family kill" not in out:
            failures.append("a missing fault family: not caught:\n" + out)
        rc, out = check(d, ["--min-ops", "3"])
        if rc != 1 or "fewer than 3" not in out:
            failures.append("too few operations: not caught:\n" + out)
    for f in failures:
        print("FAIL:", f)
    print("check_selftest: %d cases, %d failed" % (len(CASES) + 2,
                                                  len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
