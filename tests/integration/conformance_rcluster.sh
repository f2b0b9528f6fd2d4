#!/usr/bin/env bash
# conformance_rcluster.sh CONFORMANCE -- the backend conformance suite on
# redis-cluster:// against a real 3-primary, 3-replica cluster
# (rcluster_fixture.sh), with a 1 s lease and a 3 s acquisition timeout.
# Skipped by cmocka (caps not declared): test_waiter_holds_nothing (a set
# across slots keeps the groups it took while it waits for the next),
# test_cancel and test_async.
set -euo pipefail
. "$(dirname "$0")/rcluster_fixture.sh"
CONF=${1:?usage: $0 CONFORMANCE}
rcluster_start
url=$(rcluster_url "?lease_ms=1000&timeout_ms=3000")
set +e
timeout "$((200 * MULT))" "$CONF" "$url"
rc=$?
set -e
[ "$rc" -eq 0 ] || echo "FAIL: conformance on $url exited $rc" >&2
exit "$rc"
