#!/usr/bin/env bash
# sentinel_it.sh TEST_SENTINEL [switch] -- runs test_sentinel.c (with
# "switch": its SENTINEL FAILOVER case) against one primary, one replica
# and three sentinels (sentinel_fixture.sh), started once; each run fails
# the primary over to the replica, so the set is not reused after it.
set -euo pipefail
. "$(dirname "$0")/sentinel_fixture.sh"
BIN=${1:?usage: $0 TEST_SENTINEL [switch]}
sentinel_start
export ORDO_SN_URL=$SENTINEL_URL ORDO_SN_PRIMARY_PORT=$PRIMARY_PORT \
  ORDO_SN_PRIMARY_PID=$PRIMARY_PID ORDO_SN_REPLICA_PORT=$REPLICA_PORT \
  ORDO_SN_SENTINEL_PORT=${SENTINEL_PORTS%% *}
set +e
timeout 120 "$BIN" "${@:2}"
rc=$?
set -e
if [ "$rc" -eq 0 ]; then
  # The sentinels agree on the new primary too (not only the client).
  sentinel_wait_master "$REPLICA_PORT" 10
else
  echo "FAIL: test_sentinel exited $rc; the sentinels' view:" \
    "$(sentinel_master || echo none)" >&2
fi
exit "$rc"
