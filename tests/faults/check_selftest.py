#!/usr/bin/env python3
"""check_selftest.py -- shows that check.py catches each violation it
checks for: for each kind, a small made-up history (and register log) that
has exactly that defect must fail the check and name the kind, and the same
history without it must pass. The sharded target's kinds (exclusion,
phantom, victim, missed) each get a made-up history of two shards with the
shards' xabort lines; the cases a check excuses (a pause or kill of the
shard concerned) must pass. Run by ctest as faults_check_selftest."""
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


# ---- The sharded target's checks (--place) ---------------------------------
# Three shards, N0, N1 and N2; key 0 lives on N0, key 1 on N1, none on N2.
# Txns by gid: A, B, C.
GID = {"A": "a" * 32, "B": "b" * 32, "C": "c" * 32}
N0, N1, N2 = "127.0.0.1:1000", "127.0.0.1:1001", "127.0.0.1:1002"


def write_sharded(d, ops, xaborts=(), faults=()):
    """ops: (thread, txn, call, s_ms, e_ms, rc, key, token) in order per
    thread, one txn per thread; the registers follow the accepted writes."""
    with open(os.path.join(d, "place.txt"), "w") as f:
        f.write("url ordod://%s,%s,%s\nprefix fk:\nshard s0 %s\nshard s1 "
                "%s\nshard s2 %s\nkey 0 %s\nkey 1 %s\n"
                % (N0, N1, N2, N0, N1, N2, N0, N1))
    regs = {0: [], 1: []}
    vals = {0: 0, 1: 0}
    last = {0: 0, 1: 0}
    with open(os.path.join(d, "hist-1-0.txt"), "w") as f:
        for (thr, txn, call, s, e, rc, key, tok) in ops:
            value = 0
            if call == "write":
                acc = 1 if tok > last[key] else 0
                rc = acc
                regs[key].append((e * MS, tok, vals[key], vals[key],
                                  vals[key] + acc, acc, last[key]))
                if acc:
                    vals[key] += 1
                    last[key] = tok
                value = vals[key]
            f.write("1 %d 1 %s %d %d %d %d %d %d 1 %s\n"
                    % (thr, call, s * MS, e * MS, rc, key, tok, value,
                       GID[txn]))
    for k in (0, 1):
        with open(os.path.join(d, "reg-%d.log" % k), "w") as f:
            for line in regs[k]:
                f.write(" ".join(str(x) for x in line) + "\n")
        with open(os.path.join(d, "reg-%d" % k), "wb") as f:
            n = sum(1 for x in regs[k] if x[5])
            f.write(struct.pack("<QqQ", last[k], n, n))
    with open(os.path.join(d, "s0.stderr"), "w") as f:
        f.write("ordod: INFO peer %s: linked\n" % N1)
        for (t, victim, shard, hops) in xaborts:
            f.write("ordod: INFO xabort victim=%s wseq=7 shard=%s t_mono_ns=%d"
                    " hops=%s\n" % (GID[victim], shard, t * MS, ",".join(
                        "%s@%s#%d>%s" % (GID[a], sh, n, GID[b])
                        for n, (a, sh, b) in enumerate(hops, 1))))
    with open(os.path.join(d, "faults.log"), "w") as f:
        for line in faults:
            f.write(line + "\n")


def check_sharded(d):
    r = subprocess.run([sys.executable, os.path.join(HERE, "check.py"), d,
                        "--backend", "selftest", "--lease-ms", "1000",
                        "--lock-ms", "6000", "--exchange-ms", "300",
                        "--slack-ms", "100", "--families", "",
                        "--place", os.path.join(d, "place.txt"),
                        "--cycle-bound-ms", "2000", "--assert",
                        "token,stale,bound,register,exclusion,phantom,"
                        "victim,missed"],
                       capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def unit(thr, txn, first, second, t_second, end2, rc2, tokens, t_after):
    """A txn that takes key `first` at once (0..1 ms), waits for `second`
    from t_second until end2 (rc2), then, if granted, writes both and
    unlocks them; else gives back everything."""
    ops = [(thr, txn, "begin", 0, 0, 0, -1, 0),
           (thr, txn, "lock", 0, 1, 0, first, tokens[0]),
           (thr, txn, "lock", t_second, end2, rc2, second,
            tokens[1] if rc2 == 0 else 0)]
    if rc2 == 0:
        a = end2
        ops += [(thr, txn, "write", a, a + 1, 0, first, tokens[0]),
                (thr, txn, "write", a + 1, a + 2, 0, second, tokens[1]),
                (thr, txn, "unlock", t_after, t_after + 1, 0, second,
                 tokens[1]),
                (thr, txn, "unlock", t_after + 1, t_after + 2, 0, first,
                 tokens[0])]
    else:
        ops += [(thr, txn, "unlockall", end2, end2 + 1, 0, -1, 0)]
    ops += [(thr, txn, "end", t_after + 3, t_after + 4, 0, -1, 0)]
    return ops


# A holds key 0 and waits for key 1; B holds key 1 and waits for key 0; the
# cycle stands from 3 ms; B, the victim, is aborted at 4 ms (xabort), hears
# -DEADLOCK at 5 ms and gives back key 1, which A is granted at 6 ms.
CLEAN_OPS = (unit(0, "A", 0, 1, 2, 6, 0, (1, 2), 20) +
             unit(1, "B", 1, 0, 3, 5, -2, (1, 0), 8))
CLEAN_X = [(4, "B", N0, [("A", N1, "B"), ("B", N0, "A")])]

# A and B form the cycle at 3 ms and nothing breaks it until B's lock times
# out at 5 s.
MISSED_OPS = (unit(0, "A", 0, 1, 2, 5001, 0, (1, 2), 5020) +
              unit(1, "B", 1, 0, 3, 5000, -1, (1, 0), 5003))

SHARDED = {
    "sh_clean": (CLEAN_OPS, CLEAN_X, []),
    # The same cycle, but A had its key 1 granted at 3.5 ms, before the
    # abort at 4 ms: the abort came after the cycle was broken.
    "phantom": (unit(0, "A", 0, 1, 2, 3, 0, (1, 2), 20) +
                unit(1, "B", 1, 0, 3, 5, -2, (1, 0), 8), CLEAN_X, []),
    # The abort names a hop of A waiting for C at N1, but C neither held
    # key 1 nor waited for it (it held key 0, later).
    "phantom_edge": (CLEAN_OPS + [
        (2, "C", "begin", 30, 30, 0, -1, 0),
        (2, "C", "lock", 30, 31, 0, 0, 3),
        (2, "C", "unlock", 32, 33, 0, 0, 3),
        (2, "C", "end", 34, 35, 0, -1, 0)],
        [(4, "B", N0, [("A", N1, "C"), ("C", N0, "A")])], []),
    # B's abort took effect at 4 ms, yet its lock was answered granted.
    "victim": (unit(0, "A", 0, 1, 2, 6, -1, (1, 0), 20) +
               unit(1, "B", 1, 0, 3, 5, 0, (1, 2), 8), CLEAN_X, []),
    # The cycle that stands 5 s, with no fault anywhere.
    "missed": (MISSED_OPS, [], []),
    # The missed cycle, while the link between s0 and s2 (a shard not on
    # the cycle) was black-holed throughout: no excuse.
    "missed_link_elsewhere": (MISSED_OPS, [],
                              ["%d start blackhole s0-s2" % MS,
                               "%d end blackhole s0-s2" % (4900 * MS)]),
    # B is granted key 1 at 2 ms while A, told at 1 ms it holds key 1, had
    # not begun to give it up (A unlocks it at 20 ms).
    "exclusion": ([(0, "A", "begin", 0, 0, 0, -1, 0),
                   (0, "A", "lock", 0, 1, 0, 1, 1),
                   (0, "A", "unlock", 20, 21, 0, 1, 1),
                   (0, "A", "end", 22, 23, 0, -1, 0),
                   (1, "B", "begin", 0, 0, 0, -1, 0),
                   (1, "B", "lock", 1, 2, 0, 1, 2),
                   (1, "B", "write", 3, 4, 0, 1, 2),
                   (1, "B", "unlock", 5, 6, 0, 1, 2),
                   (1, "B", "end", 7, 8, 0, -1, 0)], [], []),
}
# Cases that must pass: what each check excuses, the reason it names.
EXCUSED = {
    # The missed cycle, but shard s1 was paused from 1 ms to 4.9 s: a
    # cycle over a stopped shard waits for it.
    "missed_paused": (SHARDED["missed"][0], [],
                      ["%d start pause s1" % MS, "%d end pause s1"
                       % (4900 * MS)]),
    # The missed cycle, but the link between its two shards was cut from
    # 1 ms to 4.9 s: its messages could not pass.
    "missed_link": (MISSED_OPS, [], ["%d start cut s1-s0" % MS,
                                         "%d end cut s1-s0" % (4900 * MS)]),
    # The two holders, but key 1's shard was killed and restarted in
    # between: the first holder's lease went with it.
    "exclusion_killed": (SHARDED["exclusion"][0], [],
                         ["%d start kill s1" % (MS // 2),
                          "%d end kill s1" % (MS + MS // 2)]),
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
    for kind, (ops, xs, fl) in SHARDED.items():
        with tempfile.TemporaryDirectory() as d:
            write_sharded(d, ops, xs, fl)
            rc, out = check_sharded(d)
            want = kind.split("_")[0]
            if kind == "sh_clean":
                if rc != 0:
                    failures.append("a clean sharded history failed:\n" + out)
            elif rc != 1 or ("VIOLATIONS %s x" % want) not in out:
                failures.append("%s: not caught (exit %d):\n%s"
                                % (kind, rc, out))
    for kind, (ops, xs, fl) in EXCUSED.items():
        with tempfile.TemporaryDirectory() as d:
            write_sharded(d, ops, xs, fl)
            rc, out = check_sharded(d)
            if rc != 0:
                failures.append("%s: failed though excused:\n%s"
                                % (kind, out))
    # A line that names xabort but breaks the contract fails the run.
    with tempfile.TemporaryDirectory() as d:
        write_sharded(d, CLEAN_OPS, CLEAN_X)
        with open(os.path.join(d, "s1.stderr"), "w") as f:
            f.write("ordod: INFO xabort victim=%s t_mono_ns=4000000\n"
                    % GID["B"])
        rc, out = check_sharded(d)
        if rc != 1 or "malformed xabort" not in out:
            failures.append("a malformed xabort line: not caught:\n" + out)
    n = len(CASES) + 2 + len(SHARDED) + len(EXCUSED) + 1
    for f in failures:
        print("FAIL:", f)
    print("check_selftest: %d cases, %d failed" % (n, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
