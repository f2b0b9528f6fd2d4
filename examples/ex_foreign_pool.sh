#!/usr/bin/env bash
# ex_foreign_pool.sh BINARY ORDOD -- runs the foreign pool example
# (foreign_pool.c), a plain pthread pool annotated for ordo, on the seed's
# hang (4 workers, each waiting for a leaf it queued on the same pool):
#   --policy report  exit 0, the record printed ("pool deadlock"), every
#                    task right once the pool's waiters help;
#   --policy fail    exit 0, at least one wait refused (EDEADLK), the
#                    other tasks right;
#   --no-notes       no annotations: the watchdog (--watchdog 2) ends the
#                    hang with exit 1;
# then an unknown flag and a bad --policy exit 2, --help 0.
# Every run is bounded by timeout (times ORDO_TEST_TIMEOUT_MULT).
set -euo pipefail
BIN=${1:?usage: $0 BINARY ORDOD}
EX_NAME=foreign_pool
# shellcheck source=SCRIPTDIR/ex_lib.sh
. "$(dirname "$0")/ex_lib.sh"

run $((10 * MULT)) --policy report --workers 4 --watchdog $((5 * MULT))
[ "$RC" -eq 0 ] || fail "report exited $RC"
grep -qE '^record [0-9]+: pool deadlock, [0-9]+ edges$' <<< "$OUT" ||
  fail "report: no record printed"
grep -qE 'policy report, 4 workers: 4/4 tasks right, 0 refused waits \(EDEADLK\), [1-9][0-9]* records: OK$' <<< "$OUT" ||
  fail "report: not every task right"
echo "ok: report: $(tail -n 1 <<< "$OUT")"

run $((10 * MULT)) --policy fail --workers 4 --watchdog $((5 * MULT))
[ "$RC" -eq 0 ] || fail "fail exited $RC"
grep -qE 'policy fail, 4 workers: [0-9]/4 tasks right, [1-9] refused waits \(EDEADLK\), [1-9][0-9]* records: OK$' <<< "$OUT" ||
  fail "fail: no refused wait"
echo "ok: fail: $(tail -n 1 <<< "$OUT")"

run $((2 + 10 * MULT)) --no-notes --workers 4 --watchdog 2
[ "$RC" -eq 1 ] || fail "--no-notes exited $RC, not 1"
grep -q "hang: after 2 s, 0 of 4 tasks done" "$TMP/err" ||
  fail "--no-notes: the watchdog did not say what it saw"
echo "ok: --no-notes hangs, the watchdog exits 1 in $TOOK s"

run 10 --bogus
[ "$RC" -eq 2 ] || fail "an unknown flag exited $RC, not 2"
run 10 --policy inline
[ "$RC" -eq 2 ] || fail "--policy inline exited $RC, not 2"
grep -q "fail or report" "$TMP/err" || fail "a bad --policy: no choices"
run 10 --help
[ "$RC" -eq 0 ] || fail "--help exited $RC"
echo "ok: an unknown flag and a bad --policy exit 2, --help 0"
