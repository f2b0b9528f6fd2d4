#!/usr/bin/env bash
# bench.sh -- runs ordo_bench (see bench/README.md) from an existing build.
#
# `make bench` builds into ./build, then runs this. Environment:
#   QUICK=1          shorter runs (passed as --quick); QUICK=0 or unset: full
#   ROWS=id1,id2     only these rows (passed as --rows); unset: every row
#   BUILD=dir        the build folder (default build)
#   BENCH_ARGS=...   extra flags for ordo_bench, e.g. "--runs 9"
# The table goes to stdout; the rows as JSON to bench/results/latest.json.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
BIN="$BUILD/bench/ordo_bench"
if [ ! -x "$BIN" ]; then
  if [ -f "$BUILD/CMakeCache.txt" ]; then
    cmake --build "$BUILD" --target ordo_bench -j 2 >&2
  else
    echo "bench.sh: $BIN not found; run 'make build' (or 'make bench') first" >&2
    exit 1
  fi
fi

args=(--out bench/results/latest.json)
case "${QUICK:-}" in
  "" | 0) ;;
  *) args+=(--quick) ;;
esac
if [ -n "${ROWS:-}" ]; then
  args+=(--rows "$ROWS")
fi
# shellcheck disable=SC2206 # BENCH_ARGS is split into words on purpose.
extra=(${BENCH_ARGS:-})

mkdir -p bench/results
exec "$BIN" "${args[@]}" "${extra[@]}"
