#!/usr/bin/env bash
# ex_pool_join.sh BINARY ORDOD -- runs the pool deadlock example
# (pool_join.c) and checks its exit status and its --json object:
#   inline, compensate  4 workers, then depth 3 with 6 tasks: every task
#                       right (depth + 1), "ok": true, exit 0;
#   fail                the closing wait returned ORDO_EDEADLK (deadlk > 0),
#                       a record kept, nothing wrong, exit 0;
#   report              the callback fired (detections > 0), a record kept,
#                       the rest cancelled by the shutdown, exit 0; once
#                       with --dump json, whose graph must parse;
#   fewer tasks than workers, report: no hang forms, every task right;
#   --no-ordo           the plain pthread pool hangs: the watchdog (2 s)
#                       ends it with exit 1 within its bound, saying how
#                       many workers wait and how many tasks are queued;
# then the errors: an unknown flag and a bad --policy exit 2 with one line
# that points at --help, as does a remote --backend (an executor needs
# mem://); --help exits 0.
# Every run is bounded by timeout (times ORDO_TEST_TIMEOUT_MULT); the
# program's own watchdog (5 s, times the same) bounds a hang inside it.
set -euo pipefail
BIN=${1:?usage: $0 BINARY ORDOD}
EX_NAME=pool_join
# shellcheck source=SCRIPTDIR/ex_lib.sh
. "$(dirname "$0")/ex_lib.sh"
WD=$((5 * MULT))

# jcheck NAME PYTHON ARGS...: a run that must exit 0 with one JSON object
# for which the Python expression (on j) holds.
jcheck() {
  local name=$1 expr=$2
  shift 2
  run $((WD + 10 * MULT)) --json --watchdog "$WD" "$@"
  [ "$RC" -eq 0 ] || fail "$name: $EX_NAME $* exited $RC"
  python3 -c '
import json, sys
j = json.loads(sys.argv[1])
assert j["example"] == "pool_join" and j["ok"] is True and not j["hung"], j
assert j["wrong"] == 0, j
assert eval(sys.argv[2]), (sys.argv[2], j)
print("ok: %s: %d/%d right, %d EDEADLK, %d canceled, %d detections, "
      "%d records in %.1f ms" % (sys.argv[3], j["right"], j["tasks"],
      j["deadlk"], j["canceled"], j["detections"], j["records"],
      j["seconds"] * 1e3))' "$OUT" "$expr" "$name" ||
    fail "$name: not the object wanted"
}

for p in inline compensate; do
  jcheck "$p" 'j["right"] == j["tasks"] == 4 and j["policy"] == "'$p'"' \
    --policy "$p" --workers 4
  jcheck "$p, depth 3" 'j["right"] == j["tasks"] == 6 and j["depth"] == 3' \
    --policy "$p" --workers 4 --depth 3 --tasks 6
done
jcheck fail 'j["deadlk"] >= 1 and j["records"] >= 1 and j["failed"] >= 1' \
  --policy fail --workers 4
jcheck "fail, depth 3" 'j["deadlk"] >= 1 and j["records"] >= 1' \
  --policy fail --workers 4 --depth 3
jcheck report 'j["detections"] >= 1 and j["records"] >= 1 and j["canceled"] >= 1' \
  --policy report --workers 4
jcheck "report, 2 tasks on 4 workers" \
  'j["right"] == 2 and j["detections"] == 0 and j["records"] == 0' \
  --policy report --workers 4 --tasks 2

# --dump json: the live graph of the hang, on stderr, must be JSON.
jcheck "report --dump json" 'j["detections"] >= 1' --policy report \
  --workers 4 --dump json
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$TMP/err" ||
  fail "report --dump json: stderr is not one JSON document"
echo "ok: report --dump json: the graph parses"

# The plain pool hangs; its watchdog (2 s) must end the run, exit 1.
run $((2 + 10 * MULT)) --no-ordo --workers 4 --watchdog 2 --json
[ "$RC" -eq 1 ] || fail "--no-ordo exited $RC, not 1"
grep -q "4 of 4 workers wait on futures, 4 tasks queued" "$TMP/err" ||
  fail "--no-ordo: stderr does not say what the watchdog saw"
python3 -c '
import json, sys
j = json.loads(sys.argv[1])
assert j["hung"] is True and j["ok"] is False and j["ordo"] is False, j
assert j["waiting"] == 4 and j["queued"] == 4, j' "$OUT" ||
  fail "--no-ordo: not a hung object"
echo "ok: --no-ordo hangs, the watchdog exits 1 in $TOOK s: $(cat "$TMP/err")"

run 10 --no-such-flag
[ "$RC" -eq 2 ] || fail "an unknown flag exited $RC, not 2"
grep -q -- "--help" "$TMP/err" || fail "an unknown flag: no pointer to --help"
run 10 --policy sometimes
[ "$RC" -eq 2 ] || fail "a bad --policy exited $RC, not 2"
grep -q "one of inline, compensate, fail, report" "$TMP/err" ||
  fail "a bad --policy: stderr does not name the policies"
[ "$(wc -l < "$TMP/err")" -eq 1 ] || fail "a bad --policy: not one line"
run 10 --backend redis://127.0.0.1:1
[ "$RC" -eq 2 ] || fail "a remote --backend exited $RC, not 2"
grep -q "an executor needs a mem:// place" "$TMP/err" ||
  fail "a remote --backend: stderr does not say mem://"
run 10 --help
[ "$RC" -eq 0 ] || fail "--help exited $RC"
grep -q -- "--policy P" <<< "$OUT" || fail "--help does not name --policy"
echo "ok: an unknown flag, a bad --policy and a remote --backend exit 2, --help 0"
