#!/usr/bin/env bash
# conformance_ordod.sh ORDOD CONFORMANCE -- the backend conformance suite
# (tests/conformance) against a real ordod started by ordod_fixture.sh (1 s
# lease). It must pass; the cases whose capability the backend does not
# declare (ORDO_CAP_CANCEL, ORDO_CAP_ASYNC) are skipped and listed by cmocka.
#
# test_waiter_holds_nothing takes one of a waiter's keys from another txn
# while the waiter waits, which the engine rightly refuses once the waiter
# has starved (1 ms by default): mem:// runs the suite with a long
# starvation bound in its URL. ordod's bound is its own; when the server
# offers a flag for it, the suite's server gets a long one too. Without it
# a slow client (a sanitizer build) may see that case fail.
set -euo pipefail
. "$(dirname "$0")/ordod_fixture.sh"
ORDOD=${1:?usage: $0 ORDOD CONFORMANCE}
extra=()
if grep -q -e '--starvation-us' <<< "$("$ORDOD" --help 2>/dev/null)"; then
  extra=(--starvation-us 2000000)
fi
ordod_start "$ORDOD" "${extra[@]}"
set +e
timeout 200 "${2:?usage: $0 ORDOD CONFORMANCE}" \
  "ordod://127.0.0.1:$ORDOD_PORT"
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  echo "FAIL: conformance on ordod:// exited $rc; ordod's stderr:" >&2
  ordod_log >&2
fi
exit "$rc"
