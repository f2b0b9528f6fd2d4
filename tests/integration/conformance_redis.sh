#!/usr/bin/env bash
# conformance_redis.sh CONFORMANCE -- the backend conformance suite
# (tests/conformance) on redis://, against a real redis-server started by
# redis_fixture.sh, with a 1 s lease. It must pass; the cases whose
# capability redis:// does not declare are skipped and listed by cmocka:
# test_waiter_holds_nothing (ORDO_CAP_SERVER_WAIT: waits are the client's,
# not queued by Redis), test_cancel and test_async.
set -euo pipefail
. "$(dirname "$0")/redis_fixture.sh"
CONF=${1:?usage: $0 CONFORMANCE}
redis_start
set +e
timeout 200 "$CONF" "redis://127.0.0.1:$REDIS_PORT?lease_ms=1000"
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  echo "FAIL: conformance on redis:// exited $rc; redis-server's log:" >&2
  redis_log >&2
fi
exit "$rc"
