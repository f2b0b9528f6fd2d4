#!/usr/bin/env bash
# bench.sh -- runs ordo_bench (see bench/README.md) from an existing build,
# with callgrind's instruction counts, then draws the plots.
#
# Usage: scripts/bench.sh [--publish]
#
# `make bench` builds into ./build, then runs this. Environment:
#   QUICK=1          shorter runs (passed as --quick); QUICK=0 or unset: full
#   ROWS=id1,id2     only these rows (passed as --rows); unset: every row
#   BUILD=dir        the build folder (default build)
#   BENCH_ARGS=...   extra flags for ordo_bench, e.g. "--runs 9"
#   COUNT=0          skip the instruction counts (default: count when
#                    valgrind is installed)
#   COUNT_ITERS=K    iterations per side that callgrind counts (100000)
#   PUBLISH=1        the same as --publish: afterwards, rewrite the generated
#                    part of docs/performance.md and copy the plots it shows
#                    to docs/img/ (bench/perfdoc.py); otherwise the run
#                    writes only into bench/results/, which git ignores
#
# Steps: (1) for the selected rows that have count hooks, `ordo_bench
# --count` under valgrind --tool=callgrind --instr-atstart=no, whose dumps
# become bench/results/instructions.txt; (2) the timed run, with the counts
# passed as --instructions: the tables go to stdout and to
# bench/results/latest.md, the rows as JSON to bench/results/latest.json,
# checked against bench/schema.json; where it ran to
# bench/results/machine.json; (3) bench/plot.sh draws bench/results/*.png;
# (4) with --publish, bench/perfdoc.py --publish. A failed timed run stops
# the script with its exit status; a missing valgrind or gnuplot only skips
# its step, with a note.
set -euo pipefail
cd "$(dirname "$0")/.."

publish=${PUBLISH:-0}
for arg in "$@"; do
  case "$arg" in
    --publish) publish=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "bench.sh: unknown argument '$arg' (try --help)" >&2
      exit 2
      ;;
  esac
done
[ "$publish" = 0 ] && publish=

BUILD=${BUILD:-build}
BIN="$BUILD/bench/ordo_bench"
RESULTS=bench/results
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
if [ ! -x "$BIN" ]; then
  if [ -f "$BUILD/CMakeCache.txt" ]; then
    cmake --build "$BUILD" --target ordo_bench -j 2 >&2
  else
    echo "bench.sh: $BIN not found; run 'make build' (or 'make bench') first" >&2
    exit 1
  fi
fi

args=(--out "$RESULTS/latest.json")
case "${QUICK:-}" in
  "" | 0) mode=full ;;
  *)
    mode=quick
    args+=(--quick)
    ;;
esac
if [ -n "${ROWS:-}" ]; then
  args+=(--rows "$ROWS")
fi
# shellcheck disable=SC2206 # BENCH_ARGS is split into words on purpose.
extra=(${BENCH_ARGS:-})

mkdir -p "$RESULTS"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ordo_bench_sh.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
load=$(cut -d ' ' -f 1-3 /proc/loadavg 2>/dev/null || echo unknown)

# ---- (1) Instruction counts -------------------------------------------------
# Each dump of `ordo_bench --count` is labelled "ordo_bench ROW SIDE ITERS"
# and holds the count of exactly that side's loop ("totals:"); one line
# "ROW SIDE ITERS INSTRUCTIONS" per dump goes to instructions.txt.
rm -f "$RESULTS/instructions.txt"
if [ "${COUNT:-1}" = 0 ]; then
  :
elif ! command -v valgrind >/dev/null 2>&1; then
  echo "bench.sh: valgrind not found (scripts/bootstrap.sh installs it);" \
    "no instruction counts" >&2
else
  t0=$(date +%s)
  if valgrind --tool=callgrind --instr-atstart=no \
    --callgrind-out-file="$tmp/callgrind.out" \
    "$BIN" --count "${ROWS:-all}" --iters "${COUNT_ITERS:-100000}" \
    >"$tmp/count.log" 2>&1; then
    for f in "$tmp"/callgrind.out.*; do
      [ -e "$f" ] || continue
      awk '/^desc: Trigger: Client Request: ordo_bench / {
             sub(/^desc: Trigger: Client Request: ordo_bench /, ""); label = $0
           }
           /^totals:/ { total = $2 }
           END { if (label != "" && total != "") print label, total }' "$f"
    done >"$tmp/instructions.txt"
    if [ -s "$tmp/instructions.txt" ]; then
      mv "$tmp/instructions.txt" "$RESULTS/instructions.txt"
      echo "bench.sh: callgrind counted $(wc -l <"$RESULTS/instructions.txt")" \
        "side(s) in $(($(date +%s) - t0)) s" >&2
    fi
  else
    rc=$?
    # A usage error (an unknown row id) is the timed run's to report.
    if [ "$rc" != 2 ]; then
      echo "bench.sh: the callgrind count failed (exit $rc); no instruction" \
        "counts. Its output:" >&2
      tail -n 20 "$tmp/count.log" >&2
    fi
  fi
fi

# ---- (2) The timed run ------------------------------------------------------
if [ -s "$RESULTS/instructions.txt" ]; then
  args+=(--instructions "$RESULTS/instructions.txt")
fi
set +e
"$BIN" "${args[@]}" "${extra[@]}" | tee "$tmp/latest.md"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" != 0 ]; then
  exit "$rc"
fi
mv "$tmp/latest.md" "$RESULTS/latest.md"
if ! "$PY" bench/perfdoc.py --check "$RESULTS/latest.json"; then
  echo "bench.sh: $RESULTS/latest.json does not match bench/schema.json" >&2
  exit 1
fi

# Where the numbers came from, for docs/performance.md.
# The compiler's first --version line, named by its real file (/usr/bin/cc
# calls itself "cc").
compiler_version() {
  local real
  real=$(basename "$(readlink -f "$(command -v "$1")")")
  "$1" --version 2>/dev/null | head -n 1 | sed "s/^[^ ]*/$real/"
}
cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)
command=("make bench")
[ "$mode" = quick ] && command+=("QUICK=1")
[ -n "${ROWS:-}" ] && command+=("ROWS=$ROWS")
[ -n "${BENCH_ARGS:-}" ] && command+=("BENCH_ARGS=\"$BENCH_ARGS\"")
DATE=$started \
  NPROC=$(nproc) \
  CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1) \
  KERNEL="$(uname -s) $(uname -r) $(uname -m)" \
  COMPILER=$(compiler_version "${cc:-gcc}") \
  BUILD_TYPE=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD/CMakeCache.txt" 2>/dev/null) \
  COMMIT=$(git describe --always --dirty 2>/dev/null || echo unknown) \
  COMMAND="${command[*]}" \
  RUN=$(sed -n 's/^- ordo //p' "$RESULTS/latest.md" | head -n 1) \
  LOAD=$load \
  "$PY" - "$RESULTS/machine.json" <<'PY'
import json, os, sys
keys = ["date", "load", "nproc", "cpu", "kernel", "compiler", "build_type",
        "commit", "command", "run"]
info = {k: os.environ.get(k.upper(), "") for k in keys}
info["run"] = "ordo " + info["run"]
with open(sys.argv[1], "w") as f:
    json.dump(info, f, indent=2)
    f.write("\n")
PY

# ---- (3) Plots, (4) publishing ------------------------------------------------
bench/plot.sh "$RESULTS"
if [ -n "$publish" ]; then
  if [ -n "${ROWS:-}" ]; then
    echo "bench.sh: publishing the rows of ROWS=$ROWS only" >&2
  fi
  if ! ls "$RESULTS"/bench-*.png >/dev/null 2>&1; then
    echo "bench.sh: no plots to publish; docs/performance.md gets the" \
      "tables only" >&2
  fi
  "$PY" bench/perfdoc.py --publish
fi
