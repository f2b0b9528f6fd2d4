#!/usr/bin/env bash
# conformance_ordod.sh ORDOD CONFORMANCE -- the backend conformance suite
# (tests/conformance) against a real ordod started by ordod_fixture.sh (1 s
# lease). It must pass; the cases whose capability the backend does not
# declare (ORDO_CAP_CANCEL, ORDO_CAP_ASYNC) are skipped and listed by cmocka.
#
# test_waiter_holds_nothing takes one of a waiter's keys from another txn
# while the waiter waits, which the engine rightly refuses once the waiter
# has starved (1 ms by default): mem:// runs the suite with a long
# starvation bound in its URL, and the suite's ordod gets a long one too
# (--starvation-us 2 s). Without it a slow client (a sanitizer build) may
# see that case fail. The suite is bounded by 200 s times
# ORDO_TEST_TIMEOUT_MULT; the fixture fails the test if ordod does not stop
# cleanly or a sanitizer reports.
set -euo pipefail
. "$(dirname "$0")/ordod_fixture.sh"
ORDOD=${1:?usage: $0 ORDOD CONFORMANCE}
ordod_start "$ORDOD" --starvation-us 2000000
set +e
timeout "$((200 * MULT))" "${2:?usage: $0 ORDOD CONFORMANCE}" \
  "ordod://127.0.0.1:$ORDOD_PORT"
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  echo "FAIL: conformance on ordod:// exited $rc; ordod's stderr:" >&2
  ordod_log >&2
fi
exit "$rc"
