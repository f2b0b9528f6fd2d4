# lib.sh -- helpers sourced by the tests/cli/*.sh scripts.
#
# Each script is called as `script.sh path/to/ordo`. Every run of ordo goes
# through run(), which bounds it with `timeout $TMO` (10 s, the bank check's
# hang bound): a hang shows up as exit status 124 and fails the assertion on
# it. That kill is silent, so every bank run that does work also passes
# `--watchdog $WD` (8 s): a run still going then exits 3 with the lock table
# on stderr, and fail() prints that stderr. Both bounds grow with
# ORDO_TEST_TIMEOUT_MULT, which scripts/test.sh sets for the sanitizer
# builds, as every other suite's watchdogs do.
set -euo pipefail

ORDO=${1:?usage: $0 path/to/ordo}
MULT=${ORDO_TEST_TIMEOUT_MULT:-1}
case "$MULT" in '' | *[!0-9]*) MULT=1 ;; esac
WD=$((8 * MULT))
TMO=$((10 * MULT))
if [ ! -x "$ORDO" ]; then
  echo "FAIL: '$ORDO' is not an executable; build target ordo_cli first" >&2
  exit 1
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT=$TMP/out
ERR=$TMP/err

fail() {
  echo "FAIL: $*" >&2
  if [ -s "$OUT" ]; then echo "--- stdout:" >&2; head -c 4000 "$OUT" >&2; fi
  if [ -s "$ERR" ]; then echo "--- stderr:" >&2; head -c 4000 "$ERR" >&2; fi
  exit 1
}

# run ARGS...: runs ordo with stdout in $OUT, stderr in $ERR (neither a
# terminal), its exit status in $RC.
run() {
  set +e
  timeout "$TMO" "$ORDO" "$@" >"$OUT" 2>"$ERR" </dev/null
  RC=$?
  set -e
  if [ "$RC" -eq 124 ]; then fail "ordo $* did not finish within $TMO s"; fi
}

# run_naive ARGS...: `ordo bank --naive ARGS... --watchdog $WD`, which must
# exit 0, made again while it counts no deadlock, up to three runs in all.
# Whether two transfers cross, and so deadlock, is up to the scheduler: on an
# idle machine a run of 1,000 each way sometimes had none (its workers ran one
# after another), while on a loaded one crossings abound and each costs a
# victim's backoff (10,000 each way took 13 s beside two busy loops). So the
# runs stay small; each must exit 0 (its own check passed), the caller checks
# the last one in full, and a run without a crossing is made again rather
# than taken as a failure.
run_naive() {
  local try
  for try in 1 2 3; do
    run bank --naive "$@" --watchdog "$WD"
    expect_rc 0 bank --naive "$@" --watchdog "$WD"
    if python3 - "$OUT" <<'PY'; then return 0; fi
import json, re, sys
text = open(sys.argv[1]).read()
try:
    n = json.loads(text)["deadlocks"]
except ValueError:
    m = re.search(r"^deadlocks +([0-9]+)", text, re.M)
    n = int(m.group(1)) if m else 0
sys.exit(0 if n > 0 else 1)
PY
    echo "run_naive: run $try of 3 counted no deadlock; running again" >&2
  done
  fail "three runs of ordo bank --naive $* and not one deadlock"
}

# skip WHY: this script cannot run here because WHY, a named thing that is
# really absent from the machine (no pseudo-terminal, no script(1)): prints
# "SKIP: WHY" and exits 77, which ctest counts as skipped, not passed (every
# test has SKIP_RETURN_CODE 77, tests/CMakeLists.txt). Nothing else skips: a
# missing server or capability fails instead.
skip() {
  echo "SKIP: $*"
  exit 77
}

expect_rc() {
  [ "$RC" -eq "$1" ] || fail "ordo ${*:2}: exit status $RC, expected $1"
}

# json_check PYTHON-EXPR...: each expression, with `j` the JSON object read
# from $OUT (which must hold exactly one object and nothing else), must hold.
json_check() {
  python3 - "$OUT" "$@" <<'PY' || fail "JSON check failed"
import json, sys
text = open(sys.argv[1]).read()
try:
    j = json.loads(text)
except ValueError as e:
    sys.exit("stdout is not one JSON object: %s" % e)
if not isinstance(j, dict):
    sys.exit("stdout is JSON but not an object")
bad = [e for e in sys.argv[2:] if not eval(e, {}, {"j": j})]
for e in bad:
    sys.stderr.write("does not hold: %s\n" % e)
sys.exit(1 if bad else 0)
PY
}
