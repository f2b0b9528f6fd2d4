# lib.sh -- helpers sourced by the tests/cli/*.sh scripts.
#
# Each script is called as `script.sh path/to/ordo`. Every run of ordo goes
# through run(), which bounds it with `timeout 10` (the bank check's hang
# bound): a hang shows up as exit status 124 and fails the assertion on it.
# That kill is silent, so every bank run that does work also passes
# `--watchdog 8`: a run still going after 8 s exits 3 with the lock table on
# stderr, and fail() prints that stderr.
set -euo pipefail

ORDO=${1:?usage: $0 path/to/ordo}
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
  timeout 10 "$ORDO" "$@" >"$OUT" 2>"$ERR" </dev/null
  RC=$?
  set -e
  if [ "$RC" -eq 124 ]; then fail "ordo $* did not finish within 10 s"; fi
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
