#!/usr/bin/env bash
# fuzz.sh [SECONDS] -- builds the libFuzzer target fuzz_resp (tests/fuzz,
# the RESP parser of src/server) with clang in build-fuzz/, and runs it for
# SECONDS (default 60) on a copy of its seed corpus, tests/fuzz/corpus/resp
# (the repository's corpus is never written). Prints a one-line summary and
# exits with libFuzzer's status: non-zero on any crash, leak, sanitizer
# report or failed check. A crashing input is kept in build-fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-60}
if ! [[ $secs =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/fuzz.sh [SECONDS]  (a positive number of seconds)" >&2
  exit 2
fi
BUILD=build-fuzz
SEEDS=tests/fuzz/corpus/resp

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ordo-fuzz.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# libFuzzer ships with clang's compiler-rt (Debian: libclang-rt-N-dev).
if ! command -v clang >/dev/null 2>&1; then
  echo "fuzz.sh: clang not found; install clang" >&2
  exit 2
fi
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)'\
' { (void)d; (void)n; return 0; }\n' >"$tmp/probe.c"
if ! clang -fsanitize=fuzzer "$tmp/probe.c" -o "$tmp/probe" 2>"$tmp/probe.log"
then
  echo "fuzz.sh: clang cannot link libFuzzer (-fsanitize=fuzzer);" \
       "install clang's runtime (libclang-rt-$(clang -dumpversion | cut -d. -f1)-dev)" >&2
  cat "$tmp/probe.log" >&2
  exit 2
fi

CC=clang CXX=clang++ cmake -S . -B "$BUILD" -DORDO_FUZZ=ON -DORDO_TESTS=OFF \
  -DORDO_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$BUILD" --target fuzz_resp -j 2 >"$tmp/build.log" 2>&1 || {
  cat "$tmp/build.log" >&2
  exit 1
}

mkdir -p "$tmp/corpus" "$BUILD/artifacts"
cp "$SEEDS"/* "$tmp/corpus/"
seeds=$(find "$tmp/corpus" -type f | wc -l)

status=0
"$BUILD/tests/fuzz/fuzz_resp" -max_total_time="$secs" -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$BUILD/artifacts/" "$tmp/corpus" >"$tmp/log" 2>&1 ||
  status=$?

# The figures may be missing (a crash on a seed stops before any): never
# let their absence end the script before the report.
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$tmp/log")
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$tmp/log")
cov=$(grep -o 'cov: [0-9]*' "$tmp/log" | tail -n 1 | cut -d' ' -f2 || true)
corpus=$(find "$tmp/corpus" -type f | wc -l)
if [ "$status" -ne 0 ]; then
  # The report: the check or sanitizer message and the input that caused it.
  { grep -v -E '^(#[0-9]+|INFO:|MERGE|\s*$|"|###)' "$tmp/log" || true; } |
    tail -n 60 >&2
  echo "fuzz.sh: fuzz_resp FAILED (exit $status) after ${execs:-?} execs;" \
       "crashing input in $BUILD/artifacts/" >&2
  exit "$status"
fi
echo "fuzz.sh: fuzz_resp ok: ${execs:-?} execs in ${secs} s" \
     "(${rate:-?}/s), coverage ${cov:-?}, corpus ${seeds} seeds -> ${corpus} inputs"
