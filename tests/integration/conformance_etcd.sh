#!/usr/bin/env bash
# conformance_etcd.sh CONFORMANCE -- the backend conformance suite
# (tests/conformance) on etcd://, against a real 1-member etcd started by
# etcd_fixture.sh, with a 1 s lease and a 2 s starvation bound (test_waiter_holds_nothing
# must see the waiter hold nothing, reservations included). It must pass; test_cancel and
# test_async check ORDO_ENOTSUP (etcd:// declares neither). ORDO_TEST_SCALE
# cuts test_opposite_orders to a tenth: each lock is a Raft write (about
# 2 ms here), 20000 of them would take the whole test budget.
set -euo pipefail
. "$(dirname "$0")/etcd_fixture.sh"
CONF=${1:?usage: $0 CONFORMANCE}
etcd_start 1
set +e
ORDO_TEST_SCALE=0.1 timeout "$((200 * MULT))" "$CONF" "etcd://$ETCD_EPS?lease_ms=1000&starve_ms=2000"
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  echo "FAIL: conformance on etcd:// exited $rc; etcd's log:" >&2
  etcd_log >&2
fi
exit "$rc"
