#!/usr/bin/env bash
# curves.sh -- draws the curve_* rows of a bench run (bench/curves.c) as
# line charts of cost against size with gnuplot; see bench/README.md,
# "Curves". bench/plot.sh calls it for every run.
#
# Usage: bench/curves.sh [RESULTS_DIR [OUT_DIR]]
#   RESULTS_DIR  where latest.json is (default bench/results)
#   OUT_DIR      where the PNGs go (default RESULTS_DIR); docs/img to
#                publish them for docs/performance.md, "How cost grows"
#   (relative paths are from the repository's root)
#
# Removes OUT_DIR/curve-*.png of an earlier run, then draws, each only when
# the run has two points of it or more:
#   curve-lockall.png   ns per key of lock_all+unlock_all of k keys against
#                       k: ordod, ordo in-process (mem://), redis Lua
#   curve-held.png      bytes per held lock (left axis) and the lock+unlock
#                       round trip (right axis) against the locks held:
#                       ordod and redis-server
#   curve-waiters.png   one release's p50 and p99 against the waiters on
#                       the key: ordod and redis-server's BLPOP queue
#   curve-bank.png      bank transfers/s against workers, 10,000 accounts:
#                       ordo and hand-ordered pthread mutexes
# Without gnuplot it says so and exits 0, as plot.sh does.
set -euo pipefail
cd "$(dirname "$0")/.."

JSON="${1:-bench/results}/latest.json"
OUT=${2:-${1:-bench/results}}
PY=$(command -v /usr/bin/python3 || command -v python3)
[ -f "$JSON" ] || {
  echo "curves.sh: $JSON not found; run scripts/bench.sh first" >&2
  exit 1
}
mkdir -p "$OUT"
rm -f "$OUT"/curve-*.png
if ! command -v gnuplot >/dev/null 2>&1; then
  echo "curves.sh: gnuplot not found; no curves drawn" >&2
  exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ordo_curves.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# One data file per curve, lines of x and values sorted by x (NaN for a
# value the run lacks), and have.gp saying which curves have 2 points.
"$PY" - "$JSON" "$tmp" <<'PY'
import json, math, sys

src, tmp = sys.argv[1:3]
with open(src) as f:
    rows = json.load(f)


def num(v):
    return repr(v) if isinstance(v, (int, float)) and math.isfinite(v) \
        else "NaN"


def extra(r, name, side):
    return (r.get("extra", {}).get(name) or {}).get(side)


def x_of(r, param, extra_name=None):
    """The x of a row: what the run reported (quick mode caps some), else
    the row's parameter."""
    if extra_name:
        v = extra(r, extra_name, "ordo")
        if isinstance(v, (int, float)) and math.isfinite(v):
            return v
    return r["params"][param]


curves = {
    "lockall": ("curve_lockall_", lambda r: x_of(r, "keys_per_lock"),
                lambda r: [r["ordo"], r["peer"],
                           extra(r, "inproc_ns_per_key", "ordo")]),
    "held": ("curve_held_", lambda r: x_of(r, "locks", "locks"),
             lambda r: [r["ordo"], r["peer"],
                        extra(r, "lock_unlock_us", "ordo"),
                        extra(r, "lock_unlock_us", "peer")]),
    "waiters": ("curve_waiters_", lambda r: x_of(r, "waiters", "waiters"),
                lambda r: [r["ordo"], r["peer"], extra(r, "p99_us", "ordo"),
                           extra(r, "p99_us", "peer")]),
    "bank": ("curve_bank_", lambda r: x_of(r, "workers"),
             lambda r: [r["ordo"], r["peer"]]),
}
with open(f"{tmp}/have.gp", "w") as have:
    for name, (prefix, x, ys) in curves.items():
        pts = sorted((x(r), ys(r)) for r in rows if r["id"].startswith(prefix))
        with open(f"{tmp}/{name}.dat", "w") as f:
            for xv, yv in pts:
                f.write("\t".join([num(xv)] + [num(v) for v in yv]) + "\n")
        have.write(f"have_{name} = {int(len(pts) >= 2)}\n")
PY

gnuplot <<GP
dir = "$tmp"
out = "$OUT"
load dir."/have.gp"
set datafile separator "\t"
set datafile missing "NaN"
set encoding utf8
set terminal pngcairo noenhanced size 800, 500 font "Sans,10"
set grid xtics ytics lc rgb "#dddddd"
set key below center horizontal maxrows 2
set autoscale xfix
set style data linespoints
set logscale x
set format x "%g"

if (have_lockall) {
  set output out."/curve-lockall.png"
  set title "lock_all + unlock_all of k keys, one client: cost per key (lower is better; flat: linear in k)"
  set xlabel "k, keys in one lock_all"
  set ylabel "ns per key (log scale)"
  set logscale y
  plot dir."/lockall.dat" using 1:2 title "ordod (LOCK k ... WAIT 0, UNLOCK)" lw 2 pt 7 lc rgb "#1f77b4", \
       '' using 1:4 title "ordo in-process (mem://)" lw 2 pt 5 lc rgb "#2ca02c", \
       '' using 1:3 title "redis-server, one Lua script each way" lw 2 pt 9 lc rgb "#ff7f0e"
  unset logscale y
  set output
}

if (have_held) {
  set output out."/curve-held.png"
  set title "Locks held on distinct keys: memory per lock and one more lock+unlock"
  set xlabel "locks held"
  set ylabel "bytes per held lock (server RSS growth)"
  set y2label "lock+unlock round trip, us p50"
  set ytics nomirror
  set y2tics
  set yrange [0:*]
  set y2range [0:*]
  plot dir."/held.dat" using 1:2 title "ordod, bytes/lock" lw 2 pt 7 lc rgb "#1f77b4", \
       '' using 1:3 title "redis SET NX PX, bytes/lock" lw 2 pt 9 lc rgb "#ff7f0e", \
       '' using 1:4 axes x1y2 title "ordod, lock+unlock us" lw 1 dt 2 pt 6 lc rgb "#1f77b4", \
       '' using 1:5 axes x1y2 title "redis, lock+unlock us" lw 1 dt 2 pt 8 lc rgb "#ff7f0e"
  unset y2label
  unset y2tics
  set ytics mirror
  set autoscale y
  set output
}

if (have_waiters) {
  set output out."/curve-waiters.png"
  set title "One release (wake one, grant one) against the queue on the key"
  set xlabel "sessions blocked on the key"
  set ylabel "us from the release to the grant read"
  set yrange [0:*]
  plot dir."/waiters.dat" using 1:2 title "ordod p50" lw 2 pt 7 lc rgb "#1f77b4", \
       '' using 1:4 title "ordod p99" lw 1 dt 2 pt 6 lc rgb "#1f77b4", \
       '' using 1:3 title "redis BLPOP queue p50" lw 2 pt 9 lc rgb "#ff7f0e", \
       '' using 1:5 title "redis BLPOP queue p99" lw 1 dt 2 pt 8 lc rgb "#ff7f0e"
  set autoscale y
  set output
}

if (have_bank) {
  set output out."/curve-bank.png"
  set title "The bank, 10,000 accounts: transfers/s against workers (higher is better)"
  set xlabel "workers (threads)"
  set ylabel "transfers/s"
  set logscale x 2
  set format y "%.1s%c"
  set yrange [0:*]
  plot dir."/bank.dat" using 1:2 title "ordo (mem://)" lw 2 pt 7 lc rgb "#1f77b4", \
       '' using 1:3 title "pthread hand-ordered" lw 2 pt 9 lc rgb "#ff7f0e"
  set output
}
GP

shopt -s nullglob
drawn=("$OUT"/curve-*.png)
if [ ${#drawn[@]} -gt 0 ]; then
  echo "curves.sh: wrote ${drawn[*]}" >&2
else
  echo "curves.sh: the run has no curve_* rows of two points; no curves drawn" >&2
fi
