#!/usr/bin/env bash
# redis_it.sh TEST_REDIS -- runs tests/integration/test_redis.c against the
# servers it needs, each started by redis_fixture.sh: a plain one (also on
# a Unix socket), one with a password ("s3cret"), and a one-node Redis
# Cluster that owns every slot (for CROSSSLOT). When the Cluster cannot be
# set up, its case is skipped and says so.
set -euo pipefail
. "$(dirname "$0")/redis_fixture.sh"
BIN=${1:?usage: $0 TEST_REDIS}

redis_start
export ORDO_REDIS_PORT=$REDIS_PORT ORDO_REDIS_SOCK=$REDIS_SOCK \
  ORDO_REDIS_PID=$REDIS_PID
main_dir=$REDIS_DIR

redis_start --requirepass s3cret
export ORDO_REDIS_AUTH_PORT=$REDIS_PORT

if redis_start --cluster-enabled yes --cluster-config-file nodes.conf; then
  redis_cli CLUSTER ADDSLOTSRANGE 0 16383 >/dev/null
  end=$((SECONDS + 10))
  while [ "$SECONDS" -lt "$end" ]; do
    if grep -q '^cluster_state:ok' <<< "$(redis_cli CLUSTER INFO | tr -d '\r')"; then
      export ORDO_REDIS_CLUSTER_PORT=$REDIS_PORT
      break
    fi
    sleep 0.1
  done
fi
[ -n "${ORDO_REDIS_CLUSTER_PORT:-}" ] ||
  echo "redis_it: no one-node Cluster could be set up; its case skips" >&2

set +e
timeout 200 "$BIN"
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  echo "FAIL: test_redis exited $rc; the plain server's log:" >&2
  tail -n 30 "$main_dir/log" >&2
fi
exit "$rc"
