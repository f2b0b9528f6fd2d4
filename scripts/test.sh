#!/usr/bin/env bash
# test.sh -- everything `make test` runs, in order:
#   1. the style check (.clang-format);
#   2. the default build with -Werror, and its ctest suite;
#   3. the same suite built with ASan+UBSan (clang), in build-asan/;
#   4. the same suite built with ThreadSanitizer (clang), in build-tsan/;
#   5. the libFuzzer target of ordod's request parser, for 60 s (build-fuzz/).
# Sanitizer runs use fewer operations (ORDO_TEST_SCALE) and longer
# watchdogs (ORDO_TEST_TIMEOUT_MULT); any sanitizer report fails its test.
#
# Every stage runs even when an earlier one failed, so one failure does not
# hide another; the run then fails with the list of the stages that failed.
# The last line counts every test of every stage: "N passed, N failed, N
# skipped" (a ctest test that exits 77 is skipped: tests/CMakeLists.txt),
# and each skip is named above it with the reason its test printed.
set -uo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
start=$(date +%s)

PASSED=0
FAILED=0
SKIPPED=0
FAILED_STAGES=()
SKIP_LINES=()

step() { printf '\n== %s\n' "$*"; }

# stage_result NAME STATUS: a stage that is one check (not a ctest suite)
# counts as one test.
stage_result() {
  if [ "$2" -eq 0 ]; then
    PASSED=$((PASSED + 1))
  else
    FAILED=$((FAILED + 1))
    FAILED_STAGES+=("$1")
  fi
}

# tally JUNIT LABEL: adds a ctest run's results (its --output-junit file) to
# the counts, and remembers each skipped test with its "SKIP: ..." line.
tally() {
  local counts
  counts=$(python3 - "$1" "$2" <<'PY'
import re, sys
import xml.etree.ElementTree as ET
path, label = sys.argv[1], sys.argv[2]
try:
    root = ET.parse(path).getroot()
except (OSError, ET.ParseError) as e:
    print("0 1 0")
    print("%s: no ctest results (%s)" % (label, e), file=sys.stderr)
    sys.exit(0)
p = f = s = 0
for tc in root.iter("testcase"):
    st = tc.get("status")
    if st == "run":
        p += 1
    elif tc.find("skipped") is not None:
        s += 1
        out = tc.findtext("system-out") or ""
        why = re.findall(r"^SKIP: (.*)$", out, re.M)
        print("skip\t%s: %s (%s)" % (label, tc.get("name"),
              "; ".join(why) or "no reason given"))
    else:
        f += 1
print("%d %d %d" % (p, f, s))
PY
)
  local line
  while IFS= read -r line; do
    case "$line" in
      skip$'\t'*) SKIP_LINES+=("${line#skip$'\t'}") ;;
      *) read -r p f s <<<"$line"
         PASSED=$((PASSED + p)); FAILED=$((FAILED + f))
         SKIPPED=$((SKIPPED + s)) ;;
    esac
  done <<<"$counts"
}

# suite DIR LABEL CMAKE-ARGS...: configure, build, run ctest. A build that
# fails fails the stage (and counts as one failed test: its tests never ran).
suite() {
  local dir=$1 label=$2
  shift 2
  if ! cmake -S . -B "$dir" -DORDO_WERROR=ON -DORDO_TESTS=ON "$@" >/dev/null; then
    echo "test.sh: configuring $dir failed" >&2
    stage_result "$label (configure)" 1
    return
  fi
  cmake --build "$dir" -j "$JOBS" 2>&1 | grep -vE '^\[ *[0-9]+%\]'
  # The build must have succeeded: the grep above swallows its status.
  if ! cmake --build "$dir" -j "$JOBS" >/dev/null; then
    echo "test.sh: building $dir failed" >&2
    stage_result "$label (build)" 1
    return
  fi
  rm -f "$dir/ctest-junit.xml"
  # --no-tests=error: a build with no tests (a cached ORDO_TESTS=OFF, say)
  # is a failure, not a green run of nothing.
  ctest --test-dir "$dir" --output-on-failure --no-tests=error -j "$JOBS" \
    --timeout 600 --output-junit ctest-junit.xml
  local rc=$?
  tally "$dir/ctest-junit.xml" "$label"
  [ "$rc" -eq 0 ] || FAILED_STAGES+=("$label")
}

step "format check"
scripts/format-check.sh
stage_result "format check" $?

step "default build (gcc, -Werror)"
suite build "gcc" -DCMAKE_BUILD_TYPE=RelWithDebInfo

san_common=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
            -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS=-O1 -DCMAKE_CXX_FLAGS=-O1
            -DORDO_BENCH=OFF)

step "ASan+UBSan build (clang)"
ORDO_TEST_SCALE=0.5 ORDO_TEST_TIMEOUT_MULT=4 \
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
ORDO_SAN_FLAGS="-fsanitize=address,undefined" \
  suite build-asan "asan" "${san_common[@]}" -DORDO_SANITIZE=address

step "ThreadSanitizer build (clang)"
ORDO_TEST_SCALE=0.25 ORDO_TEST_TIMEOUT_MULT=6 \
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
ORDO_SAN_FLAGS="-fsanitize=thread" \
  suite build-tsan "tsan" "${san_common[@]}" -DORDO_SANITIZE=thread

step "fuzzing the request parser (${ORDO_FUZZ_SECONDS:-60} s)"
scripts/fuzz.sh "${ORDO_FUZZ_SECONDS:-60}"
stage_result "fuzz" $?

echo
took=$(($(date +%s) - start))
for s in "${SKIP_LINES[@]+"${SKIP_LINES[@]}"}"; do
  echo "skipped: $s"
done
if [ "${#FAILED_STAGES[@]}" -gt 0 ]; then
  echo "make test: FAILED in $took s; failing stages: ${FAILED_STAGES[*]}"
else
  echo "make test: every stage passed in $took s"
fi
echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
[ "${#FAILED_STAGES[@]}" -eq 0 ] && [ "$FAILED" -eq 0 ]
