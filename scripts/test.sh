#!/usr/bin/env bash
# test.sh -- everything `make test` runs, in order:
#   1. the style check (.clang-format);
#   2. the default build with -Werror, and its ctest suite;
#   3. the same suite built with ASan+UBSan (clang), in build-asan/;
#   4. the same suite built with ThreadSanitizer (clang), in build-tsan/;
#   5. the libFuzzer target of ordod's request parser, for 60 s (build-fuzz/).
# Sanitizer runs use fewer operations (ORDO_TEST_SCALE) and longer
# watchdogs (ORDO_TEST_TIMEOUT_MULT); any sanitizer report fails its test.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
start=$(date +%s)

step() { printf '\n== %s\n' "$*"; }

step "format check"
scripts/format-check.sh

suite() {
  local dir=$1; shift
  cmake -S . -B "$dir" -DORDO_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS" 2>&1 | grep -vE '^\[ *[0-9]+%\]' || true
  # The build must have succeeded: the grep above swallows its status.
  cmake --build "$dir" -j "$JOBS" >/dev/null
  ctest --test-dir "$dir" --output-on-failure -j "$JOBS" --timeout 600
}

step "default build (gcc, -Werror)"
suite build -DCMAKE_BUILD_TYPE=RelWithDebInfo

san_common=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
            -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS=-O1 -DCMAKE_CXX_FLAGS=-O1
            -DORDO_BENCH=OFF)

step "ASan+UBSan build (clang)"
ORDO_TEST_SCALE=0.5 ORDO_TEST_TIMEOUT_MULT=4 \
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
ORDO_SAN_FLAGS="-fsanitize=address,undefined" \
  suite build-asan "${san_common[@]}" -DORDO_SANITIZE=address

step "ThreadSanitizer build (clang)"
ORDO_TEST_SCALE=0.25 ORDO_TEST_TIMEOUT_MULT=6 \
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
ORDO_SAN_FLAGS="-fsanitize=thread" \
  suite build-tsan "${san_common[@]}" -DORDO_SANITIZE=thread

step "fuzzing the request parser (60 s)"
scripts/fuzz.sh "${ORDO_FUZZ_SECONDS:-60}"

echo
echo "make test: all suites passed in $(( $(date +%s) - start )) s"
