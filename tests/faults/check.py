#!/usr/bin/env python3
"""check.py -- the checker of the fault harness (docs/reliability.md).

Reads one run's folder: the clients' histories (hist-P-T.txt, one line per
call: proc thread op call start_ns end_ns rc key token value txn [gid],
written by fclient.c; histories without the gid, from before it, read as
gid "-"), the fenced registers' logs (reg-K.log: t_ns token read prev new
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
With --place PLACE (the sharded target, shards.sh: PLACE names the shards,
"shard LABEL NAME", and where each key lives, "key K NAME"), it also reads
the shards' logs (*.stderr: each cross-shard abort's line "xabort
victim=GID wseq=N shard=NAME t_mono_ns=T hops=GID@SHARD#WSEQ>NEXT,...",
at the moment the abort took effect) and the clients' lease-lost logs
(lost-P.txt: t_ns txn gid), and checks, per txn (its gid):
  exclusion no key of a txn released while that txn was told it holds it:
           a txn believes it holds a key from its grant's return until it
           starts a call that may give it up (its unlock of the key, an
           unlockall, the txn's end, a lock that fails), hears its lease
           was lost, or its process is killed; two txns' beliefs in one key
           that overlap, or a register refusing a write made in such a
           belief (a later token got in), are two holders. Not charged
           when a pause or kill of the key's shard came between the two
           grants (or within --recover-ms before): a lease that ran out on
           a stopped or restarted shard, docs/distributed.md's "A shard
           that is down";
  phantom  no phantom abort: at each xabort's t_mono_ns, every hop's waiter
           had a lock call under way (begun, not returned), on a key of
           that hop's shard, and the txn it waits for may have held that
           key or waited for it then (its grant had begun and no release
           the server answered had returned; or a lock of it was under
           way). A call that had returned before t means the cycle was
           already broken. Txns of a killed client past their last logged
           call are unknown, and not judged;
  victim   the victim's lock under way at its abort does not return 0 (an
           aborted wait answered granted);
  missed   no cycle left standing: the wait-for graph of lock calls under
           way against keys surely held (a hold from its grant's return to
           the start of its release, or to the end of a lock that failed),
           rebuilt at every instant; a
           cycle that stood longer than --cycle-bound-ms (+ --slack-ms)
           while no fault touched it (a pause or kill of one of its shards,
           those of its edges; a fault of a link between two of them; a
           fault's reach is its span plus --recover-ms, a kill's a lease
           more) is one the probes missed. A victim's keys leave the graph
           when its shard logs its abort.
--families then counts link faults (drop, delay, cut, blackhole between
shards) as "link" and client kills (clientkill, with the links' lag during
it) as "client"; --min-per-family says how many of each must have come.

--assert names the kinds that fail the run (the backend's promise); the
others are reported. The run also fails when the history is malformed,
when fewer than --min-ops locks were granted, or when a fault family of
--families was injected fewer than --min-per-family times (1). Exit 0 when
nothing asserted was violated, 1 otherwise.
"""
import argparse
import bisect
import glob
import json
import heapq
import os
import re
import struct
import sys

FAMILY = {"pause": "pause", "kill": "kill", "drop": "proxy", "delay": "proxy",
          "cut": "proxy", "blackhole": "proxy", "partition": "partition"}
# The sharded target's: the proxy stands between shards, and a client's
# kill comes with a lag on every link (shards.sh).
FAMILY_SHARDS = dict(FAMILY, drop="link", delay="link", cut="link",
                     blackhole="link", clientkill="client", lag="client")
ETIMEDOUT, EDEADLK = -1, -2
INF = 1 << 62


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
                if len(p) not in (11, 12):
                    raise SystemExit("check: %s:%d: malformed line %r"
                                     % (path, n, line))
                if p[3] == "read":
                    continue  # no check reads them: memory for 10^6 runs
                calls.append({
                    "proc": int(p[0]), "thr": int(p[1]), "op": int(p[2]),
                    "call": p[3], "s": int(p[4]), "e": int(p[5]),
                    "rc": int(p[6]), "key": int(p[7]), "token": int(p[8]),
                    "value": int(p[9]), "txn": int(p[10]),
                    "gid": p[11] if len(p) == 12 else "-"})
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


def killed_procs(faults):
    """proc -> the time its kill began (faults.log: clientkill procN)."""
    out = {}
    for fs, fe, k, target in faults:
        if k == "clientkill" and target.startswith("proc"):
            out[int(target[4:])] = fs
    return out

# ---- The sharded target (--place) ------------------------------------------

XABORT = re.compile(r"\bxabort\s+(.*)$")
HOP = re.compile(r"^([0-9a-fA-F]+)@(.+)#(\d+)>([0-9a-fA-F]+)$")
FAULT_OF_SHARD = ("pause", "kill")  # what can end a lease the client renews


def load_place(path):
    """place.txt: shard label -> name, key -> its shard's name."""
    shards, keys = {}, {}
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) == 3 and p[0] == "shard":
                shards[p[1]] = p[2]
            elif len(p) == 3 and p[0] == "key":
                keys[int(p[1])] = p[2]
    return shards, keys


def load_xaborts(d, errors, truncated):
    """Every xabort line of the shards' logs (*.stderr), fields in any
    order, unknown ones ignored; a line naming xabort that does not parse
    is an error (the contract with the server is broken), but for a last
    hop cut short by the server's line buffer (counted in truncated[0])."""
    out = []
    for path in sorted(glob.glob(os.path.join(d, "*.stderr"))):
        with open(path, errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = XABORT.search(line)
                if not m:
                    continue
                kv = dict(t.split("=", 1) for t in m.group(1).split()
                          if "=" in t)
                try:
                    hops = []
                    parts = kv["hops"].split(",")
                    for i, h in enumerate(parts):
                        hm = HOP.match(h)
                        if not hm and i == len(parts) - 1 and i > 0 and \
                                len(line) >= 1000:
                            # A log line cut at the server's buffer (a
                            # cycle of many hops): its last hop is lost.
                            truncated[0] += 1
                            break
                        if not hm:
                            raise ValueError(h)
                        hops.append((hm.group(1).lower(), hm.group(2),
                                     int(hm.group(3)), hm.group(4).lower()))
                    out.append({"victim": kv["victim"].lower(),
                                "wseq": int(kv["wseq"]), "shard": kv["shard"],
                                "t": int(kv["t_mono_ns"]), "hops": hops,
                                "where": "%s:%d" % (os.path.basename(path),
                                                    n)})
                except (KeyError, ValueError) as e:
                    errors.append("%s:%d: a malformed xabort line (%s): %r"
                                  % (path, n, e, line.strip()))
    out.sort(key=lambda x: x["t"])
    return out


def load_lost(d):
    """gid -> the times its client heard its lease was lost."""
    out = {}
    for path in glob.glob(os.path.join(d, "lost-*.txt")):
        with open(path) as f:
            for line in f:
                p = line.split()
                if len(p) >= 3 and p[2] != "-":
                    out.setdefault(p[2], []).append(int(p[0]))
    return out


def touches(target, sh, labels):
    """Whether a fault on target reaches a cycle over the shards sh: a
    pause or kill of one of them; a fault of the link between two of them
    (the cycle's messages, BLOCKED, PROBE, CONFIRM and the abort, travel
    only between its own shards; a RELEASE to a third comes after the abort
    took effect); the lag on every link, of a cycle across shards."""
    if target in labels:
        return target in sh
    if target == "links":
        return len(sh) > 1
    ends = target.split("-")
    return len(ends) == 2 and all(x in sh for x in ends)


def check_shards(a, calls, faults, violate, errors, slack):
    """The sharded target's checks (see the header): exclusion, phantom,
    victim, missed; returns the figures for the summary."""
    lease = a.lease_ms * 1e6
    # A fault's reach past its end: the links' longest re-dial, and for a
    # kill the restart delay (a lease) too.
    recover_base = a.recover_ms * 1e6

    def recover(kind):
        return recover_base + (lease if kind == "kill" else 0)
    labels, key_shard = load_place(a.place)
    label_of = {v: k for k, v in labels.items()}
    truncated = [0]
    xaborts = load_xaborts(a.dir, errors, truncated)
    lost = load_lost(a.dir)
    killed = killed_procs(faults)
    first_kill = min(killed.values()) if killed else INF

    # Each thread's calls in order, and which thread ran each txn.
    threads = {}
    for c in calls:
        threads.setdefault((c["proc"], c["thr"]), []).append(c)
    thread_of = {}
    locks_of = {}  # gid -> its lock calls in order
    for th, cs in threads.items():
        cs.sort(key=lambda c: c["s"])
        for c in cs:
            if c["gid"] != "-":
                thread_of.setdefault(c["gid"], th)
                if c["call"] == "lock":
                    locks_of.setdefault(c["gid"], []).append(c)
    last_e = {th: cs[-1]["e"] for th, cs in threads.items()}

    # Holds: for each grant, the span the txn was told it holds the key
    # ("sure": its lock returned .. it began to give it up) and the span
    # it may have held it at the server ("maybe": its lock began .. its
    # release returned).
    aborted = {}
    for x in xaborts:
        aborted.setdefault(x["victim"], []).append(x["t"])
    holds = []
    for th, cs in threads.items():
        proc = th[0]
        kill_t = killed.get(proc, INF)
        for i, g in enumerate(cs):
            if g["call"] != "lock" or g["rc"] != 0 or g["gid"] == "-":
                continue
            r, rmax, rg = None, None, None
            for c in cs[i + 1:]:
                if c["gid"] != g["gid"]:
                    break
                if c["call"] == "lock" and c["rc"] != 0 and r is None:
                    r = c["s"]
                    rg = c["e"]
                    if c["rc"] == EDEADLK:
                        rmax = c["e"]  # a victim hears it after its keys go
                    elif c["rc"] != ETIMEDOUT:
                        # ELEASE, EBACKEND: the client dropped what it held
                        # on its own; the server lets it go when it ends
                        # the session, which a freeze may defer.
                        rmax = INF
                if ((c["call"] == "unlock" and c["key"] == g["key"]) or
                        c["call"] in ("unlockall", "end")):
                    r = c["s"] if r is None else r
                    rg = c["s"] if rg is None else rg
                    if rmax is None:
                        # A release the server answered; one that failed,
                        # or an end that closes sessions, may be deferred.
                        rmax = (c["e"] if c["call"] != "end" and c["rc"] == 0
                                else INF)
                    break
            if r is None:
                r = rg = min(last_e[th], kill_t)
            if rmax is None:
                rmax = INF
            for t in lost.get(g["gid"], ()):
                if g["e"] <= t < r:
                    r = t
            r = min(r, kill_t)
            rg = min(rg, kill_t)
            for t in aborted.get(g["gid"], ()):
                if g["e"] <= t < rg:
                    rg = t
            # b: told it holds (exclusion); gb: held for the wait-for graph
            # (missed), to the end of a lock that failed, when an abort
            # may have freed it, or to the moment its shard logged the
            # abort that did (a victim's -DEADLOCK waits for its keys'
            # RELEASE on the other shards, a stopped one too, while its
            # cycle is already broken); mb: may have held it at the server
            # (phantom): until a release the server answered returned.
            holds.append({"gid": g["gid"], "key": g["key"], "a": g["e"],
                          "b": r, "gb": rg, "ma": g["s"], "mb": rmax,
                          "g": g})

    def shard_faults(label):
        return [(fs, fe + recover(k)) for fs, fe, k, t in faults
                if k in FAULT_OF_SHARD and t == label]

    def excused(label, t1, t2):
        """A pause or kill of the shard between t1 and t2 (or reaching
        into it): a lease may have run out there."""
        return any(fs <= t2 and fe >= t1 for fs, fe in shard_faults(label))

    def who(g):
        return "proc %d thread %d op %d (gid %s, token %d)" % (
            g["proc"], g["thr"], g["op"], g["gid"][:12], g["token"])

    # exclusion: two txns told they hold one key at once.
    by_key = {}
    for h in holds:
        if h["b"] > h["a"]:
            by_key.setdefault(h["key"], []).append(h)
    excused_n = 0
    for k, hs in by_key.items():
        hs.sort(key=lambda h: h["a"])
        label = label_of.get(key_shard.get(k), "?")
        top = None
        for h in hs:
            if top is not None and h["a"] < top["b"] and \
                    h["gid"] != top["gid"]:
                if excused(label, top["a"], h["a"]):
                    excused_n += 1
                else:
                    violate("exclusion", top["a"], h["a"],
                            "key %d (%s): %s was granted it while %s had "
                            "been told it holds it (since %.3f s before) and"
                            " had not begun to give it up"
                            % (k, label, who(h["g"]), who(top["g"]),
                               (h["a"] - top["a"]) / 1e9))
            if top is None or h["b"] > top["b"]:
                top = h
    # ... and the register's side: a write refused while its writer was
    # told it holds the key (a later token had got in).
    hold_of = {(h["g"]["proc"], h["g"]["thr"], h["g"]["op"], h["key"]): h
               for h in holds}
    for c in calls:
        if c["call"] != "write" or c["rc"] != 0:
            continue
        h = hold_of.get((c["proc"], c["thr"], c["op"], c["key"]))
        if h is None or not (h["a"] <= c["s"] and c["e"] <= h["b"]):
            continue
        label = label_of.get(key_shard.get(c["key"]), "?")
        if excused(label, h["a"], c["e"]):
            excused_n += 1
            continue
        violate("exclusion", h["a"], c["e"],
                "key %d (%s): the register refused the write of %s, made "
                "while it was told it holds the key: a later token got in"
                % (c["key"], label, who(h["g"])))

    # phantom and victim: each cross-shard abort against the histories.
    unknown = 0

    def pending(gid, t):
        """The lock call of gid under way at t; None if none; "?" when gid
        is a killed client's and t is past what its history tells."""
        th = thread_of.get(gid)
        if th is None:
            return "?" if t >= first_kill else None
        ls = locks_of.get(gid, [])
        j = bisect.bisect_right([c["s"] for c in ls], t) - 1
        if j >= 0 and ls[j]["e"] >= t:
            return ls[j]
        if th[0] in killed and t >= last_e[th]:
            return "?"
        return None

    holds_of = {}
    for h in holds:
        holds_of.setdefault(h["gid"], []).append(h)
    for x in xaborts:
        t = x["t"]
        for (g, shard, wseq, nxt) in x["hops"]:
            c = pending(g, t)
            if c == "?":
                unknown += 1
                continue
            if c is None:
                ls = [l for l in locks_of.get(g, []) if l["s"] <= t]
                was = ls[-1] if ls else None
                violate("phantom", t, t,
                        "%s: %s aborted victim %s at t=%d, but hop txn %s "
                        "(at %s) had no lock call under way: its last had "
                        "returned %s"
                        % (x["where"], x["shard"], x["victim"][:12], t,
                           g[:12], shard,
                           "%.3f ms before (rc %d, key %d)"
                           % ((t - was["e"]) / 1e6, was["rc"], was["key"])
                           if was else "never (no lock call before it)"))
                continue
            if key_shard.get(c["key"]) != shard:
                violate("phantom", t, t,
                        "%s: hop txn %s waits at %s in the abort, but its "
                        "lock under way is on key %d of %s"
                        % (x["where"], g[:12], shard, c["key"],
                           key_shard.get(c["key"])))
                continue
            if g == x["victim"] and c["rc"] == 0:
                violate("victim", t, c["e"],
                        "%s: victim %s's abort took effect at t=%d, yet its "
                        "lock of key %d was answered granted %.3f ms later"
                        % (x["where"], g[:12], t, c["key"],
                           (c["e"] - t) / 1e6))
            # The edge: nxt may have held the key, or waited for it.
            if thread_of.get(nxt) is None:
                if t < first_kill:
                    violate("phantom", t, t, "%s: hop %s waits for %s, a txn"
                            " no client ran" % (x["where"], g[:12], nxt[:12]))
                else:
                    unknown += 1
                continue
            maybe = any(h["key"] == c["key"] and h["ma"] <= t < h["mb"]
                        for h in holds_of.get(nxt, ()))
            if not maybe:
                n2 = pending(nxt, t)
                maybe = n2 == "?" or (n2 is not None and
                                      n2["key"] == c["key"])
            if not maybe and thread_of[nxt][0] in killed:
                maybe = t >= killed[thread_of[nxt][0]]
            if not maybe:
                violate("phantom", t, t,
                        "%s: hop %s waits at %s for %s, which neither held "
                        "key %d nor waited for it at t=%d"
                        % (x["where"], g[:12], shard, nxt[:12], c["key"], t))

    # missed: the wait-for graph of lock calls under way against holds
    # surely held, swept in time; a cycle is found when its last edge comes.
    sure = {}
    reach = {}  # per key, the latest end of the holds up to each one
    for h in holds:
        if h["gb"] > h["a"]:
            sure.setdefault(h["key"], []).append(h)
    for k, hs in sure.items():
        hs.sort(key=lambda h: h["a"])
        top, reach[k] = 0, []
        for h in hs:
            top = max(top, h["gb"])
            reach[k].append(top)
    starts = {k: [h["a"] for h in hs] for k, hs in sure.items()}
    edges = []
    for gid, ls in locks_of.items():
        for c in ls:
            hs = sure.get(c["key"])
            if not hs:
                continue
            j = bisect.bisect_left(starts[c["key"]], c["e"]) - 1
            rk = reach[c["key"]]
            while j >= 0 and rk[j] > c["s"]:
                h = hs[j]
                j -= 1
                if h["gid"] == gid:
                    continue
                st, en = max(c["s"], h["a"]), min(c["e"], h["gb"])
                if en > st:
                    edges.append((st, en, gid, h["gid"], c["key"]))
    edges.sort()
    heap = []
    out = {}
    cycles = []
    for idx, (st, en, w, hgid, k) in enumerate(edges):
        while heap and heap[0][0] <= st:
            _, j = heapq.heappop(heap)
            out[edges[j][2]].pop(j, None)
        out.setdefault(w, {})[idx] = en
        heapq.heappush(heap, (en, idx))
        # From the holder along edges standing now, back to w?
        stack, seen = [(hgid, [])], {hgid}
        found = None
        while stack and found is None:
            node, path = stack.pop()
            for j in out.get(node, {}):
                nb = edges[j][3]
                if nb == w:
                    found = path + [j]
                    break
                if nb not in seen and len(path) < 64:
                    seen.add(nb)
                    stack.append((nb, path + [j]))
        if found is not None:
            cyc = [idx] + found
            cycles.append((st, min(edges[j][1] for j in cyc), cyc))

    bound = a.cycle_bound_ms * 1e6 + slack
    durations = []
    slow_faulted = 0
    cross = 0
    for t0, t1, cyc in cycles:
        # Its shards: those of its edges (a victim's keys elsewhere leave
        # the graph when its abort is logged, above).
        ks = [edges[j][4] for j in cyc]
        sh = set(label_of.get(key_shard.get(k), "?") for k in ks)
        if len(set(key_shard.get(k) for k in ks)) > 1:
            cross += 1
        durations.append(t1 - t0)
        if t1 - t0 <= bound:
            continue
        wins = sorted((fs, fe + recover(k)) for fs, fe, k, tg in faults
                      if touches(tg, sh, labels))
        gap, at = 0, t0
        for ws, we in wins:
            if we <= at:
                continue
            if ws >= t1:
                break
            gap = max(gap, ws - at)
            at = max(at, we)
        gap = max(gap, t1 - at)
        if gap > bound:
            violate("missed", t0, t1,
                    "a cycle of %d txns over %s stood %.3f s (%.3f s of it "
                    "with no fault on its shards; bound %.3f s): %s"
                    % (len(cyc), ",".join(sorted(sh)), (t1 - t0) / 1e9,
                       gap / 1e9, bound / 1e9,
                       ", ".join("%s waits for %s on key %d"
                                 % (edges[j][2][:12], edges[j][3][:12],
                                    edges[j][4]) for j in cyc)))
        else:
            slow_faulted += 1

    # The clients killed while a txn of theirs was on a cycle.
    on_cycle = 0
    for proc, tk in killed.items():
        gids = set(g for g, th in thread_of.items() if th[0] == proc)
        hit = any(t0 <= tk < t1 and gids & set(edges[j][2] for j in cyc)
                  for t0, t1, cyc in cycles)
        hit = hit or any(tk - 2e9 <= x["t"] <= tk + 3e9 and
                         gids & set(hp[0] for hp in x["hops"])
                         for x in xaborts)
        on_cycle += hit

    durations.sort()

    def pct(q):
        return (round(durations[min(len(durations) - 1,
                                    int(q * len(durations)))] / 1e6, 3)
                if durations else None)
    victims = sum(1 for c in calls
                  if c["call"] == "lock" and c["rc"] == EDEADLK)
    # Leases the clients heard were lost, and of them those with no pause
    # or kill of any shard within a lease before (reported: a shard that
    # was up, yet a session's lease went).
    lost_n = sum(len(v) for v in lost.values())
    lost_up = sum(1 for v in lost.values() for t in v
                  if not any(fs <= t and fe + recover(k) + lease >= t
                             for fs, fe, k, tg in faults
                             if k in FAULT_OF_SHARD))
    fig = {"cycles_seen": len(cycles), "cycles_cross_shard": cross,
           "cycle_ms_p50": pct(0.5), "cycle_ms_p99": pct(0.99),
           "cycle_ms_max": pct(1.0), "cycles_slow_under_faults": slow_faulted,
           "victims": victims, "xaborts": len(xaborts),
           "hops_unknown": unknown, "hops_cut_short": truncated[0],
           "exclusion_excused": excused_n,
           "clients_killed": len(killed), "clients_killed_on_cycle": on_cycle,
           "leases_lost": lost_n, "leases_lost_no_shard_fault": lost_up,
           "xaborts_by_shard": {}}
    for x in xaborts:
        s_ = label_of.get(x["shard"], x["shard"])
        fig["xaborts_by_shard"][s_] = fig["xaborts_by_shard"].get(s_, 0) + 1
    print("check %s: %d cycles seen in the histories (%d across shards; "
          "standing p50 %s ms, p99 %s ms, max %s ms; %d past the bound under"
          " faults), %d deadlock victims, %d cross-shard aborts logged %s, "
          "%d hops not judged (killed clients); %d clients killed, %d of "
          "them on a cycle; %d two-holder cases excused by a pause or kill "
          "of the key's shard; %d leases lost (%d with no shard paused or "
          "killed)"
          % (a.backend, len(cycles), cross, fig["cycle_ms_p50"],
             fig["cycle_ms_p99"], fig["cycle_ms_max"], slow_faulted, victims,
             len(xaborts), json.dumps(fig["xaborts_by_shard"]), unknown,
             len(killed), on_cycle, excused_n, lost_n, lost_up))
    return fig


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
    ap.add_argument("--min-per-family", type=int, default=1)
    ap.add_argument("--place", help="the sharded target's place.txt")
    ap.add_argument("--cycle-bound-ms", type=float, default=2000)
    ap.add_argument("--recover-ms", type=float, default=1000,
                    help="a fault's reach past its end (the links' longest "
                    "re-dial; a kill's reaches a lease further, the restart "
                    "delay)")
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
            writes[(c["proc"], c["thr"], c["op"], c["key"])] = c

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
            w = writes.get((g["proc"], g["thr"], g["op"], g["key"]))
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
    grant_of = {(g["proc"], g["thr"], g["op"], g["key"]): g
                for gs in grants.values() for g in gs}
    # A register's decision is timed by the register itself, and the
    # client logs that time as its write's end: the join of the two.
    write_at = {(w["key"], w["e"], w["token"]): w for w in writes.values()}
    # A client killed with -9 (the sharded target's client family) may
    # have made a write it never logged: known by its grant's token.
    killed = killed_procs(faults)
    grant_by_token = {(g["key"], g["token"]): g
                      for gs in grants.values() for g in gs}
    unlogged = 0
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
                    g = grant_by_token.get((key, tok))
                    if g is not None and g["proc"] in killed:
                        unlogged += 1
                        continue
                    errors.append("register %d: an accepted write (token %d "
                                  "at %d) that no client logged" % (key, tok,
                                                                    t))
                    continue
                g = grant_of[(w["proc"], w["thr"], w["op"], w["key"])]
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

    shards_fig = None
    if a.place:
        shards_fig = check_shards(a, calls, faults, violate, errors, slack)

    # The history's own shape, and the load.
    ops = sum(1 for c in calls if c["call"] == "lock")
    granted = sum(len(g) for g in grants.values())
    acked = sum(1 for c in calls if c["call"] == "write" and c["rc"] == 1)
    if acked + unlogged != accepted_total:
        errors.append("the clients saw %d writes accepted (and %d of killed "
                      "clients unlogged), the registers logged %d"
                      % (acked, unlogged, accepted_total))
    if granted < a.min_ops:
        errors.append("only %d locks granted, fewer than %d" % (granted,
                                                               a.min_ops))
    fam = {}
    family = FAMILY_SHARDS if a.place else FAMILY
    for fs, fe, k, _ in faults:
        fam.setdefault(family.get(k, k), {}).setdefault(k, 0)
        fam[family.get(k, k)][k] += 1
    for f in a.families.split(","):
        if not f:
            continue
        # A client's kill counts once, not again for its links' lag.
        n = sum(v for k, v in fam.get(f, {}).items() if k != "lag")
        if n == 0:
            errors.append("no fault of family %s was injected" % f)
        elif n < a.min_per_family:
            errors.append("only %d fault(s) of family %s, fewer than %d"
                          % (n, f, a.min_per_family))
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
    if shards_fig is not None:
        summary["shards"] = shards_fig
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
