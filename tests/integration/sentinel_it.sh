#!/usr/bin/env bash
# sentinel_it.sh TEST_SENTINEL -- runs test_sentinel.c against one primary,
# one replica and three sentinels (sentinel_fixture.sh), started once; its
# last case kills the primary, so the set is not reused after it.
set -euo pipefail
. "$(dirname "$0")/sentinel_fixture.sh"
BIN=${1:?usage: $0 TEST_SENTINEL}
sentinel_start
export ORDO_SN_URL=$SENTINEL_URL ORDO_SN_PRIMARY_PORT=$PRIMARY_PORT \
  ORDO_SN_PRIMARY_PID=$PRIMARY_PID ORDO_SN_REPLICA_PORT=$REPLICA_PORT
set +e
timeout 120 "$BIN"
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
