#!/usr/bin/env python3
"""check.py -- the checker of the fault harness (docs/reliability.md).

Reads one run's folder: the clients' histories (hist-P-T.txt, one line per
call: proc thread op call start_ns end_ns rc key token value txn, written by
fclient.c), the fenced registers' logs (reg-K.log: t_ns token read prev new
accepted last_token, written by register.c under the register's lock, so in
the register's order), the registers themselves (reg-K) and the schedule's
log (faults.log: t_ns start|end KIND TARGET). All times are CLOCK_MONOTONIC.

It verifies, and prints per fault the violations of:
  token    tokens of a key strictly increase in the real-time order of
           grants: a grant whose lock call began after another grant's call
           had returned carries a larger token;
  stale    no write is accepted from a stale holder: the register never
           accepts a write of a holder after it accepted one of a holder
           granted later (that is what fencing is for);
  lost     no lost update: every accepted write read the value it replaced,
           and the counter equals the number of accepted writes;
  overlap  mutual exclusion: no grant of a key comes while another holder,
           granted before it, is still writing within half its lease;
  bound    every call returns within its bound: a lock within --lock-ms
           plus two exchanges (--exchange-ms), any other call within two
           exchanges, each plus --slack-ms;
  register the register's own order: accepted tokens strictly increase.
--assert names the kinds that fail the run (the backend's promise); the
others are reported. The run also fails when the history is malformed,
when fewer than --min-ops locks were granted, or when a fault family of
--families was never injected. Exit 0 when nothing asserted was violated,
1 otherwise.
"""
import argparse
import bisect
import glob
import json
import os
import struct
import sys

FAMILY = {"pause": "pause", "kill": "kill", "drop": "proxy", "delay": "proxy",
          "cut": "proxy", "blackhole": "proxy", "partition": "partition"}


def load_history(d):
    calls = []
    for path in sorted(glob.glob(os.path.join(d, "hist-*.txt"))):
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if not line.endswith("\n"):
                    # A client that its watchdog ended (run.sh has failed
                    # the run already) leaves its last line cut short.
                    print("check: %s:%d: a cut-short last line, left out"
                          % (path, n))
                    break
                p = line.split()
                if len(p) != 11:
                    raise SystemExit("check: %s:%d: malformed line %r"
                                     % (path, n, line))
                calls.append({
                    "proc": int(p[0]), "thr": int(p[1]), "op": int(p[2]),
                    "call": p[3], "s": int(p[4]), "e": int(p[5]),
                    "rc": int(p[6]), "key": int(p[7]), "token": int(p[8]),
                    "value": int(p[9]), "txn": int(p[10])})
    return calls


def load_faults(d):
    path = os.path.join(d, "faults.log")
    open_ = {}
    faults = []
    if not os.path.exists(path):
        return faults
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) < 4:
                continue
            t, what, kind, target = int(p[0]), p[1], p[2], p[3]
            if what == "start":
                open_[(kind, target)] = t
            elif what == "end" and (kind, target) in open_:
                faults.append((open_.pop((kind, target)), t, kind, target))
    for (kind, target), t in open_.items():
        faults.append((t, 1 << 62, kind, target))
    return sorted(faults)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--backend", required=True)
    ap.add_argument("--lease-ms", type=int, required=True)
    ap.add_argument("--lock-ms", type=int, required=True)
    ap.add_argument("--exchange-ms", type=int, required=True)
    ap.add_argument("--slack-ms", type=float, default=500)
    ap.add_argument("--min-ops", type=int, default=0)
    ap.add_argument("--families", default="pause,kill,proxy,partition")
    ap.add_argument("--assert", dest="asserted",
                    default="token,stale,lost,overlap,bound,register")
    ap.add_argument("--json", help="write the summary here")
    a = ap.parse_args()
    mult = max(1.0, float(os.environ.get("ORDO_TEST_TIMEOUT_MULT", "1")))
    slack = a.slack_ms * mult * 1e6
    lease = a.lease_ms * 1e6
    asserted = set(x for x in a.asserted.split(",") if x)
    errors = []

    calls = load_history(a.dir)
    faults = load_faults(a.dir)

    def blame(s, e):
        """The faults whose effect may reach [s, e]: active in it, or ended
        less than a lease before it began."""
        hit = sorted(set(k for fs, fe, k, _ in faults
                         if fs <= e and fe + lease >= s))
        return ",".join(hit) or "none"

    violations = []

    def violate(kind, s, e, text):
        violations.append({"kind": kind, "faults": blame(s, e), "text": text})

    # Bounds.
    for c in calls:
        if c["call"] in ("read", "write", "skip"):
            continue
        bound = 2 * a.exchange_ms * 1e6 + slack
        if c["call"] == "lock":
            bound += a.lock_ms * 1e6
        if c["e"] - c["s"] > bound:
            violate("bound", c["s"], c["e"],
                    "%s took %.0f ms (bound %.0f ms): proc %d thread %d op %d"
                    " rc %d" % (c["call"], (c["e"] - c["s"]) / 1e6,
                                bound / 1e6, c["proc"], c["thr"], c["op"],
                                c["rc"]))

    # Grants, and each op's write.
    grants = {}
    writes = {}
    for c in calls:
        if c["call"] == "lock" and c["rc"] == 0:
            grants.setdefault(c["key"], []).append(c)
            if c["token"] == 0:
                violate("token", c["s"], c["e"], "a grant without a token: "
                        "proc %d thread %d op %d" % (c["proc"], c["thr"],
                                                     c["op"]))
        elif c["call"] == "write":
            writes[(c["proc"], c["thr"], c["op"])] = c

    # token: sweep the grants of each key by start, keeping the greatest
    # token of the grants whose calls had returned before.
    for key, gs in grants.items():
        by_end = sorted(gs, key=lambda g: g["e"])
        best = None
        i = 0
        for g in sorted(gs, key=lambda g: g["s"]):
            while i < len(by_end) and by_end[i]["e"] < g["s"]:
                if best is None or by_end[i]["token"] > best["token"]:
                    best = by_end[i]
                i += 1
            if best is not None and g["token"] <= best["token"]:
                violate("token", best["s"], g["e"],
                        "key %d: token %d granted (proc %d thread %d op %d) "
                        "after token %d had been (proc %d thread %d op %d)"
                        % (key, g["token"], g["proc"], g["thr"], g["op"],
                           best["token"], best["proc"], best["thr"],
                           best["op"]))

    # overlap: a grant that began after A's grant returned and returned
    # before A's write did (A wrote within half its lease).
    for key, gs in grants.items():
        gs.sort(key=lambda g: g["s"])
        starts = [g["s"] for g in gs]
        for g in gs:
            w = writes.get((g["proc"], g["thr"], g["op"]))
            if not w:
                continue
            j = bisect.bisect_right(starts, g["e"])
            while j < len(gs) and gs[j]["s"] < w["e"]:
                b = gs[j]
                if b["e"] < w["e"]:
                    violate("overlap", g["s"], w["e"],
                            "key %d: proc %d thread %d op %d granted (token "
                            "%d) while proc %d thread %d op %d (token %d) was"
                            " writing within its lease"
                            % (key, b["proc"], b["thr"], b["op"], b["token"],
                               g["proc"], g["thr"], g["op"], g["token"]))
                j += 1

    # The registers: stale, lost, register.
    grant_of = {(g["proc"], g["thr"], g["op"]): g
                for gs in grants.values() for g in gs}
    # A register's decision is timed by the register itself, and the
    # client logs that time as its write's end: the join of the two.
    write_at = {(w["key"], w["e"], w["token"]): w for w in writes.values()}
    accepted_total = 0
    rejected_total = 0
    nkeys = 0
    for path in sorted(glob.glob(os.path.join(a.dir, "reg-*.log"))):
        key = int(os.path.basename(path)[4:-4])
        nkeys += 1
        accepted = 0
        last = 0
        latest_grant = None  # the grant (by start) of the last accepted write
        with open(path) as f:
            for n, line in enumerate(f, 1):
                p = line.split()
                if len(p) != 7:
                    raise SystemExit("check: %s:%d: malformed line %r"
                                     % (path, n, line))
                t, tok, rd, prev, new, acc, _ = (int(x) for x in p)
                if not acc:
                    rejected_total += 1
                    continue
                accepted += 1
                if tok <= last:
                    violate("register", t, t, "register %d accepted token %d"
                            " after %d" % (key, tok, last))
                last = tok
                if rd != prev:
                    violate("lost", t - int(lease), t,
                            "register %d: the write of token %d read %d but "
                            "replaced %d: %d increment(s) lost"
                            % (key, tok, rd, prev, prev - rd))
                w = write_at.get((key, t, tok))
                if w is None:
                    errors.append("register %d: an accepted write (token %d "
                                  "at %d) that no client logged" % (key, tok,
                                                                    t))
                    continue
                g = grant_of[(w["proc"], w["thr"], w["op"])]
                if latest_grant is not None and g["e"] < latest_grant["s"]:
                    violate("stale", g["s"], t,
                            "register %d accepted token %d (proc %d thread %d"
                            " op %d) after token %d of a later grant (proc %d"
                            " thread %d op %d)"
                            % (key, tok, g["proc"], g["thr"], g["op"],
                               latest_grant["token"], latest_grant["proc"],
                               latest_grant["thr"], latest_grant["op"]))
                if latest_grant is None or g["s"] > latest_grant["s"]:
                    latest_grant = g
        accepted_total += accepted
        with open(path[:-4], "rb") as f:
            raw = f.read()
        if raw:
            last_token, value, count = struct.unpack("<QqQ", raw[:24])
            if value != count or count != accepted:
                violate("lost", 0, 1 << 62,
                        "register %d: counter %d after %d accepted writes "
                        "(%d in its log)" % (key, value, count, accepted))

    # The history's own shape, and the load.
    ops = sum(1 for c in calls if c["call"] == "lock")
    granted = sum(len(g) for g in grants.values())
    acked = sum(1 for c in calls if c["call"] == "write" and c["rc"] == 1)
    if acked != accepted_total:
        errors.append("the clients saw %d writes accepted, the registers "
                      "logged %d" % (acked, accepted_total))
    if granted < a.min_ops:
        errors.append("only %d locks granted, fewer than %d" % (granted,
                                                               a.min_ops))
    fam = {}
    for fs, fe, k, _ in faults:
        fam.setdefault(FAMILY.get(k, k), {}).setdefault(k, 0)
        fam[FAMILY.get(k, k)][k] += 1
    for f in a.families.split(","):
        if f and f not in fam:
            errors.append("no fault of family %s was injected" % f)
    rcs = {}
    urcs = {}
    for c in calls:
        if c["call"] == "lock" and c["rc"] != 0:
            rcs[c["rc"]] = rcs.get(c["rc"], 0) + 1
        elif c["call"] == "unlock" and c["rc"] != 0:
            urcs[c["rc"]] = urcs.get(c["rc"], 0) + 1

    # What each kind of fault did to the clients: lock calls that failed
    # while it was on (a check that the fault reached them at all).
    felt = {}
    for fs, fe, k, _ in faults:
        felt.setdefault(k, 0)
    for c in calls:
        if c["call"] == "lock" and c["rc"] != 0:
            for fs, fe, k, _ in faults:
                if fs <= c["e"] and c["s"] <= fe:
                    felt[k] += 1
    counts = {}
    for v in violations:
        counts.setdefault(v["kind"], {}).setdefault(v["faults"], 0)
        counts[v["kind"]][v["faults"]] += 1
    summary = {
        "backend": a.backend, "ops": ops, "granted": granted,
        "writes_accepted": accepted_total, "writes_refused": rejected_total,
        "lock_failures": rcs, "unlock_failures": urcs, "faults": fam,
        "faults_total": len(faults), "violations": counts,
        "failed_locks_during": felt,
        "asserted": sorted(asserted)}
    print("check %s: %d locks invoked, %d granted, %d writes accepted, %d "
          "refused; failures by code: lock %s, unlock %s"
          % (a.backend, ops, granted, accepted_total, rejected_total, rcs,
             urcs))
    print("check %s: %d faults: %s; failed locks during each kind: %s"
          % (a.backend, len(faults), json.dumps(fam), json.dumps(felt)))
    failed = list(errors)
    shown = {}
    for v in violations:
        shown[v["kind"]] = shown.get(v["kind"], 0) + 1
        if shown[v["kind"]] <= 5:
            print("check %s: %s%s [faults: %s] %s"
                  % (a.backend, v["kind"],
                     "" if v["kind"] in asserted else " (reported only)",
                     v["faults"], v["text"]))
    for kind, cells in sorted(counts.items()):
        for fs, n in sorted(cells.items()):
            print("check %s: VIOLATIONS %s x %s: %d%s"
                  % (a.backend, kind, fs, n,
                     "" if kind in asserted else " (not promised: reported)"))
            if kind in asserted:
                failed.append("%d %s violation(s) with faults %s" % (n, kind,
                                                                    fs))
    if not violations:
        print("check %s: no violations" % a.backend)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1, sort_keys=True)
    for e in failed:
        print("check %s: FAIL: %s" % (a.backend, e))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
