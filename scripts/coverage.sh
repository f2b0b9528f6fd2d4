#!/usr/bin/env bash
# coverage.sh -- what `make coverage` runs: the line and branch coverage of
# src/ by the ctest suite, per folder, and its floors.
#   1. builds the tree with gcov's counters (ORDO_COVERAGE, gcc, -O0) in
#      build-cov/ (COVERAGE_BUILD to change it), and clears the counts of
#      any earlier run;
#   2. runs the ctest suite there, less the tests named in EXCLUDE below;
#   3. has gcovr read the counts: the lines and branches of each folder of
#      src/ and the total on stdout, each file's figures in
#      build-cov/coverage/coverage.txt, and every line's count in
#      build-cov/coverage/index.html;
#   4. checks the floors: src/core and src/detect at least 90% of their
#      lines, src/server at least 80%.
# It fails when a test fails or a folder is under its floor, and names
# which. `make test` does not run it: it is a second full build and suite.
set -uo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
BUILD=${COVERAGE_BUILD:-build-cov}
start=$(date +%s)

# The tests left out, which run no line of src/ or cannot pass in this
# build:
#   spin_*         the models of src/core/*.pml run in spin, not our C code;
#   build_symbols  the instrumented library also exports gcov's own symbols;
#   build_install  a program linked against the installed, instrumented
#                  libordo.a needs libgcov, which its pkg-config does not say;
#   faults_*       the fault harness checks each call's latency against
#                  bounds set for the optimised build, and at -O0 with
#                  atomic counters, beside the rest of the suite, clients
#                  broke them with no fault injected ("begin took 5728 ms
#                  (bound 1600 ms)"). What it adds is about 35 lines of the
#                  remote backends' reconnect paths (src/backend, no floor)
#                  and 2 of src/server, for about 3 minutes:
#                  COVERAGE_FAULTS=1 runs it too, after the rest, alone.
EXCLUDE='^(spin_.*|build_symbols|build_install|faults_.*)$'

# Every watchdog is doubled: -O0 with atomic counters is slower than the
# plain build, and a slow run should fail on what it checks, not on time.
export ORDO_TEST_TIMEOUT_MULT=${ORDO_TEST_TIMEOUT_MULT:-2}

# gcc by name: gcov reads gcc's counters, and CC may name another compiler.
if ! cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DORDO_COVERAGE=ON \
  -DORDO_WERROR=ON -DORDO_TESTS=ON -DORDO_BENCH=OFF >/dev/null; then
  echo "coverage: configuring $BUILD failed" >&2
  exit 1
fi
if ! cmake --build "$BUILD" -j "$JOBS" >/dev/null; then
  # Build again to show the errors without the progress lines.
  cmake --build "$BUILD" -j 1 2>&1 | grep -vE '^\[ *[0-9]+%\]' >&2
  echo "coverage: building $BUILD failed" >&2
  exit 1
fi

# The counts add up across runs: clear them, so the figures are this run's.
find "$BUILD" -name '*.gcda' -delete

ctest --test-dir "$BUILD" --output-on-failure --no-tests=error -j "$JOBS" \
  --timeout 600 -E "$EXCLUDE"
tests_rc=$?
if [ "${COVERAGE_FAULTS:-0}" = 1 ]; then
  # One backend at a time, with nothing else running: its bounds are on
  # time.
  ctest --test-dir "$BUILD" --output-on-failure --no-tests=error -j 1 \
    --timeout 600 -R '^faults_' || tests_rc=1
fi

out="$BUILD/coverage"
rm -rf "$out"
mkdir -p "$out"
# --exclude-unreachable-branches: a branch gcc adds that no source line
# can take (a cleanup edge, say) is not counted against its file.
if ! gcovr --root . --object-directory "$BUILD" --filter 'src/' \
  --exclude-unreachable-branches \
  --txt "$out/coverage.txt" \
  --html-details "$out/index.html" \
  --json-summary "$out/summary.json"; then
  echo "coverage: gcovr could not read the counts in $BUILD" >&2
  exit 1
fi

took=$(($(date +%s) - start))
python3 - "$out/summary.json" "$took" "$tests_rc" <<'PY'
import collections, json, sys

path, took, tests_rc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
# The floors, in % of lines: the engine's two folders, and the server.
FLOORS = {"src/core": 90.0, "src/detect": 90.0, "src/server": 80.0}

folders = collections.defaultdict(lambda: [0, 0, 0, 0])
for f in json.load(open(path))["files"]:
    parts = f["filename"].split("/")
    # A header at the top of src/ (ordo_int.h, ordo_tsa.h) is its own row.
    name = "/".join(parts[:2]) if len(parts) > 2 else "src (top)"
    for row in (folders[name], folders["total"]):
        row[0] += f["line_covered"]
        row[1] += f["line_total"]
        row[2] += f["branch_covered"]
        row[3] += f["branch_total"]

def pct(covered, total):
    return 100.0 * covered / total if total else 100.0

print("\n%-12s %16s %18s" % ("folder", "lines", "branches"))
under = []
for name in sorted(folders, key=lambda n: (n == "total", n)):
    lc, lt, bc, bt = folders[name]
    line = pct(lc, lt)
    floor = FLOORS.get(name)
    note = ""
    if floor is not None:
        note = "  floor %g%%" % floor
        if line < floor:
            # Two decimals, so 89.96% is not shown as the floor it misses.
            under.append("%s at %.2f%% of lines, under its floor of %g%%"
                         % (name, line, floor))
            note += ": UNDER"
    print("%-12s %5.1f%% %4d/%-5d %5.1f%% %4d/%-5d%s"
          % (name, line, lc, lt, pct(bc, bt), bc, bt, note))

for name in FLOORS:
    if name not in folders:
        under.append("%s has no counts at all" % name)
print("\nper file: %s; every line: %s"
      % (path.replace("summary.json", "coverage.txt"),
         path.replace("summary.json", "index.html")))
for u in under:
    print("coverage: " + u)
if tests_rc != 0:
    print("coverage: some tests failed (above): the figures are of a broken run")
if under or tests_rc != 0:
    print("make coverage: FAILED in %d s" % took)
    sys.exit(1)
print("make coverage: every floor met in %d s" % took)
PY
