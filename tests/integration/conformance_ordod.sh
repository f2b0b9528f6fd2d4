#!/usr/bin/env bash
# conformance_ordod.sh ORDOD CONFORMANCE -- the backend conformance suite
# (tests/conformance) against a real ordod started by ordod_fixture.sh (1 s
# lease). It must pass; the cases whose capability the backend does not
# declare (ORDO_CAP_CANCEL, ORDO_CAP_ASYNC) are skipped and listed by cmocka.
set -euo pipefail
. "$(dirname "$0")/ordod_fixture.sh"
ordod_start "${1:?usage: $0 ORDOD CONFORMANCE}"
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
