#!/usr/bin/env bash
# plot.sh -- draws the rows of a bench run (bench/results/latest.json) as PNG
# charts with gnuplot; see bench/README.md, "Plots".
#
# Usage: bench/plot.sh [RESULTS_DIR]   (default bench/results; a relative
#                                       path is from the repository's root)
#
# Reads RESULTS_DIR/latest.json, removes the RESULTS_DIR/bench-*.png of an
# earlier run, and draws:
#   bench-ratios.png     every row's ratio as a bar, its target as a tick
#                        (green: met, red: missed, grey: no target), on a
#                        log scale when the ratios span more than 20x
#   bench-FAMILY.png     for each family of 2 rows or more (the same first
#                        word of the id, metric and peer; see below), ordo's
#                        and the peer's medians side by side with min-max
#                        bars, in the rows' metric, on a log scale when the
#                        values span more than 30x
#   plots.tsv            the PNGs in order, each with a caption
#   curve-*.png          the curve_* rows as lines (bench/curves.sh; they
#                        are left out of the family charts)
# python3 turns the JSON into gnuplot data files and per-chart settings in a
# temporary folder; the drawing itself is the gnuplot script below. Without
# gnuplot it says so and exits 0, so that a bench run still succeeds.
set -euo pipefail
cd "$(dirname "$0")/.."

RESULTS=${1:-bench/results}
JSON="$RESULTS/latest.json"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

if [ ! -f "$JSON" ]; then
  echo "plot.sh: $JSON not found; run scripts/bench.sh first" >&2
  exit 1
fi
# The plots of an earlier run go first, drawn or not: none may pass for
# this run's.
rm -f "$RESULTS"/bench-*.png "$RESULTS/plots.tsv"
if ! command -v gnuplot >/dev/null 2>&1; then
  echo "plot.sh: gnuplot not found (Debian: gnuplot-nox, which" \
    "scripts/bootstrap.sh installs); no plots drawn" >&2
  exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ordo_plot.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The data: ratios.dat (one line per row) and, per family chart k,
# famK.dat and famK.gp (its settings as gnuplot variables); charts.gp sets
# nfam. Tab-separated, so that ids and titles need no quoting.
"$PY" - "$JSON" "$tmp" "$RESULTS" <<'PY'
import json, math, re, sys

src, tmp, results = sys.argv[1:4]
with open(src) as f:
    rows = json.load(f)


def num(v):
    """A finite number, or None."""
    return v if isinstance(v, (int, float)) and math.isfinite(v) else None


def gp_str(s):
    """A gnuplot string literal."""
    s = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + s + '"'


def higher_is_better(r):
    """Whether the row's metric is a rate: the ratio is ordo/peer then."""
    o, p, q = num(r["ordo"]), num(r["peer"]), num(r["ratio"])
    if o and p and q and abs(o / p - p / o) > 1e-9 * q:
        return abs(o / p - q) < abs(p / o - q)
    return r["metric"].endswith("/s")


GREEN, RED, GREY = 0x2CA02C, 0xD62728, 0x8C8C8C

# -- The ratio chart: one bar per row from the base (1 on a log scale, 0 on a
# linear one) to the ratio; the target as a tick across the row.
vals = [v for r in rows for v in (num(r["ratio"]), num(r["target"]))
        if v is not None and v > 0]
lo, hi = (min(vals + [1.0]), max(vals + [1.0])) if vals else (1.0, 1.0)
logx = hi / lo > 20
base = 1.0 if logx else 0.0
with open(f"{tmp}/ratios.dat", "w") as f:
    for i, r in enumerate(rows):
        q, t = num(r["ratio"]), num(r["target"])
        color = GREY if r["met"] is None else GREEN if r["met"] else RED
        label = "-" if q is None else f"{q:.3g}"
        # The value goes right of the bar, or of the target's tick if that
        # is further right, so that the tick never hides it.
        label_x = max(v for v in (q, t, base) if v is not None)
        f.write("\t".join([str(i), r["id"],
                           repr(base if q is None else q),
                           "NaN" if t is None else repr(t),
                           str(color), label, repr(label_x)]) + "\n")
with open(f"{tmp}/ratios.gp", "w") as f:
    f.write(f"nrows = {len(rows)}\nlogx = {int(logx)}\n")
    if logx:
        f.write(f"base = 1.0\nxmin = {lo / 2!r}\nxmax = {hi * 3!r}\n")
    else:
        f.write(f"base = 0.0\nxmin = 0.0\nxmax = {hi * 1.2!r}\n")
    f.write(f"out = {gp_str(results + '/bench-ratios.png')}\n")

# -- The family charts. A family: the rows with the same first word of the
# id, the same metric and the same peer (bank_a2_w2 and bank_a10000_w8, but
# not bank_bdb_a2_w2); a row alone in its family joins the one other family
# of its first word and metric, if there is exactly one (ordod_lock16 joins
# ordod_pairs_*). Single rows left get no chart. A chart is named after the
# words its ids share: bench-bank.png, bench-bank-bdb.png.
groups = {}
for r in rows:
    # The curve_* rows are points of curves: bench/curves.sh draws them as
    # lines, not as a family of bars.
    if r["id"].startswith("curve_"):
        continue
    groups.setdefault((r["id"].split("_")[0], r["metric"], r["peer_name"]),
                      []).append(r)
for key in [k for k, g in groups.items() if len(g) == 1]:
    others = [k for k in groups if k != key and k[:2] == key[:2]
              and len(groups[k]) > 1]
    if len(others) == 1:
        groups[others[0]] += groups.pop(key)
charts, names = [], set()
for (word, metric, _), group in groups.items():
    if len(group) < 2:
        continue
    split = [r["id"].split("_") for r in group]
    common = []
    for words in zip(*split):
        if len(set(words)) > 1:
            break
        common.append(words[0])
    # Stop before the first word that holds a parameter (a2, w8, k16).
    cut = next((i for i, w in enumerate(common) if re.search(r"\d", w)),
               len(common))
    name = "-".join(common[:cut]) or word
    while name in names or name == "ratios":
        name += "-" + re.sub(r"[^a-z0-9]+", "-", metric.lower()).strip("-")
    names.add(name)
    charts.append((name, metric, group))
for k, (name, metric, group) in enumerate(charts, 1):
    vals = []
    with open(f"{tmp}/fam{k}.dat", "w") as f:
        for i, r in enumerate(group):
            cols = [num(r["ordo"]), num(r["min"]["ordo"]), num(r["max"]["ordo"]),
                    num(r["peer"]), num(r["min"]["peer"]), num(r["max"]["peer"])]
            vals += [v for v in cols if v is not None and v > 0]
            f.write("\t".join([str(i), r["id"]] +
                              ["NaN" if v is None else repr(v) for v in cols])
                    + "\n")
    logy = bool(vals) and max(vals) / min(vals) > 30
    peers = list(dict.fromkeys(r["peer_name"] for r in group))
    better = "higher" if higher_is_better(group[0]) else "lower"
    title = (f"{name}: ordo vs " + (peers[0] if len(peers) == 1 else "its peer")
             + f", {metric} ({better} is better)\n"
             + "medians of the runs, bars from min to max"
             + ("; log scale" if logy else ""))
    with open(f"{tmp}/fam{k}.gp", "w") as f:
        # Wide enough for the bars and for the title's longer line (about 7
        # pixels a character at 10 points).
        width = max(640, len(group) * 110 + 260,
                    max(len(line) for line in title.split("\n")) * 7 + 60)
        f.write(f"n = {len(group)}\nlogy = {int(logy)}\nwidth = {width}\n")
        f.write(f"ymax = {max(vals) * (3 if logy else 1.15) if vals else 1!r}\n")
        f.write(f"ymin = {min(vals) / 3 if logy and vals else 0!r}\n")
        f.write(f"title = {gp_str(title)}\nylabel = {gp_str(metric)}\n")
        # Rates in the millions read better as 2.5M than as 2.5x10^6.
        big = bool(vals) and max(vals) >= 1e4
        f.write(f"yformat = {gp_str('%.1s%c' if big else '%g')}\n")
        f.write(f"out = {gp_str(results + '/bench-' + name + '.png')}\n")
with open(f"{tmp}/charts.gp", "w") as f:
    f.write(f"nfam = {len(charts)}\n")
# The list of plots, in order, with a caption each (bench/perfdoc.py links
# them in this order).
with open(f"{tmp}/plots.tsv", "w") as f:
    f.write("bench-ratios.png\tEvery row's ratio against its target\n")
    for name, metric, group in charts:
        peers = list(dict.fromkeys(r["peer_name"] for r in group))
        f.write(f"bench-{name}.png\t{name}: ordo and "
                + (peers[0] if len(peers) == 1 else "its peer")
                + f", {metric}, medians with min-max bars\n")
PY

gnuplot <<GP
dir = "$tmp"
load dir."/charts.gp"
set datafile separator "\t"
set encoding utf8
set style fill solid 0.85 border -1
set grid xtics ytics lc rgb "#dddddd"

# -- Every row's ratio against its target.
load dir."/ratios.gp"
set terminal pngcairo noenhanced size 1000, 150 + 24 * nrows font "Sans,10"
set output out
set title "ordo bench: how many times better ordo is (ratio of the medians; above 1: ordo wins" . (logx ? "; log scale)" : ")")
if (logx) { set logscale x } else { unset logscale x }
set xrange [xmin:xmax]
set yrange [nrows - 0.5:-0.5]
set ytics scale 0 font ",9"
set key below center horizontal
set arrow 1 from 1, graph 0 to 1, graph 1 nohead dt 2 lc rgb "#555555"
set lmargin 24
plot dir."/ratios.dat" \
       using ((\$3 < base ? \$3 : base)):1:((\$3 < base ? \$3 : base)):((\$3 > base ? \$3 : base)):(\$1 - 0.35):(\$1 + 0.35):5:ytic(2) \
       with boxxyerror lc rgb variable notitle, \
     '' using 4:(\$1 - 0.45):(0):(0.9) with vectors nohead lw 3 lc rgb "black" notitle, \
     '' using 7:1:6 with labels left offset 0.6, 0 font ",8" notitle, \
     keyentry with boxes lc rgb "#2ca02c" title "meets its target", \
     keyentry with boxes lc rgb "#d62728" title "misses its target", \
     keyentry with boxes lc rgb "#8c8c8c" title "no target", \
     keyentry with vectors nohead lw 3 lc rgb "black" title "target"
unset arrow 1
unset logscale x
set lmargin -1
set output

# -- One chart per family: ordo's and the peer's medians, min-max bars.
do for [k = 1:nfam] {
  load sprintf("%s/fam%d.gp", dir, k)
  set terminal pngcairo noenhanced size width, 480 font "Sans,10"
  set output out
  set title title
  set ylabel ylabel
  set xrange [-0.6:n - 0.4]
  set yrange [ymin:ymax]
  if (logy) { set logscale y } else { unset logscale y }
  set xtics rotate by -25 scale 0 font ",9"
  set ytics auto
  set format y yformat
  set boxwidth 0.38
  set key inside top right
  plot sprintf("%s/fam%d.dat", dir, k) \
         using (\$1 - 0.2):3:xtic(2) with boxes lc rgb "#1f77b4" title "ordo", \
       '' using (\$1 - 0.2):4:(0):(\$5 - \$4) with vectors heads size 0.06, 90 lc rgb "black" notitle, \
       '' using (\$1 + 0.2):6 with boxes lc rgb "#ff7f0e" title "peer", \
       '' using (\$1 + 0.2):7:(0):(\$8 - \$7) with vectors heads size 0.06, 90 lc rgb "black" notitle
  set output
  unset logscale y
}
GP

mv "$tmp/plots.tsv" "$RESULTS/plots.tsv"
echo "plot.sh: wrote" "$RESULTS"/bench-*.png >&2
# The curves of the curve_* rows, as RESULTS_DIR/curve-*.png.
bench/curves.sh "$RESULTS"
