#!/usr/bin/env bash
# redlock_it.sh TEST_REDLOCK -- runs tests/integration/test_redlock.c
# against the servers it needs, each started by redis_fixture.sh: five plain
# nodes (ORDO_RL_PORTS, ORDO_RL_PIDS) and three with the password "s3cret"
# (ORDO_RL_AUTH_PORTS). A node the test stopped is let run again before the
# fixture stops it, whatever the test's outcome.
set -euo pipefail
. "$(dirname "$0")/redis_fixture.sh"
BIN=${1:?usage: $0 TEST_REDLOCK}

redis_start_nodes 5
ports=("${REDIS_PORTS[@]}")
pids=("${REDIS_PIDS[@]}")
redis_start_nodes 3 --requirepass s3cret
auth=("${REDIS_PORTS[@]}")
export ORDO_RL_PORTS ORDO_RL_PIDS ORDO_RL_AUTH_PORTS
ORDO_RL_PORTS=$(IFS=,; echo "${ports[*]}")
ORDO_RL_PIDS=$(IFS=,; echo "${pids[*]}")
ORDO_RL_AUTH_PORTS=$(IFS=,; echo "${auth[*]}")

set +e
timeout 200 "$BIN"
rc=$?
set -e
kill -CONT "${pids[@]}" 2>/dev/null || true
if [ "$rc" -ne 0 ]; then
  echo "FAIL: test_redlock exited $rc" >&2
fi
exit "$rc"
