#!/usr/bin/env bash
# redlock_conformance.sh CONFORMANCE -- the backend conformance suite on
# redlock:// with 3 real redis-server nodes (redis_fixture.sh), a 1 s lease
# and a 3 s acquisition timeout. Skipped by cmocka as for redis:// (caps not
# declared): test_waiter_holds_nothing (ORDO_CAP_SERVER_WAIT), test_cancel
# and test_async.
set -euo pipefail
. "$(dirname "$0")/redis_fixture.sh"
CONF=${1:?usage: $0 CONFORMANCE}
redis_start_nodes 3
url=$(redlock_url "?lease_ms=1000&timeout_ms=3000")
set +e
timeout 200 "$CONF" "$url"
rc=$?
set -e
[ "$rc" -eq 0 ] || echo "FAIL: conformance on $url exited $rc" >&2
exit "$rc"
