#!/usr/bin/env bash
# rcluster_failover.sh TEST_RCLUSTER -- test_rcluster.c on a real Redis
# Cluster (rcluster_fixture.sh): it picks the nodes each case kills and
# exports them. test_moved_ask: the key "mig:k", its primary and the two
# others (its slot is moved from the first to the second); test_lost_lock: the key "loss:k", its primary and that
# primary's replica; test_failover_loop: another primary, which serves
# some of the keys loop:0..loop:11 (its replica is promoted in the case).
set -euo pipefail
. "$(dirname "$0")/rcluster_fixture.sh"
TEST=${1:?usage: $0 TEST_RCLUSTER}
trap 'echo "FAIL: rcluster_failover.sh: line $LINENO: $BASH_COMMAND" >&2' ERR
rcluster_start
export ORDO_RC_URL
ORDO_RC_URL=$(rcluster_url)
export ORDO_RC_LOSS_KEY=loss:k
slot=$(rcluster_cli "${RC_PORTS[0]}" CLUSTER KEYSLOT "$ORDO_RC_LOSS_KEY")
export ORDO_RC_LOSS_PRIMARY_PORT ORDO_RC_LOSS_PRIMARY_PID ORDO_RC_LOSS_REPLICA_PID
ORDO_RC_LOSS_PRIMARY_PORT=$(rcluster_primary_port "$slot")
ORDO_RC_LOSS_PRIMARY_PID=$(rcluster_pid "$ORDO_RC_LOSS_PRIMARY_PORT")
ORDO_RC_LOSS_REPLICA_PID=$(rcluster_pid \
  "$(rcluster_replica_port "$ORDO_RC_LOSS_PRIMARY_PORT")")
# The loop's victim: the primary of the first loop key not on the loss
# key's primary.
export ORDO_RC_LOOP_PID=
for ((i = 0; i < 12; i++)); do
  s=$(rcluster_cli "${RC_PORTS[0]}" CLUSTER KEYSLOT "loop:$i")
  p=$(rcluster_primary_port "$s")
  if [ "$p" != "$ORDO_RC_LOSS_PRIMARY_PORT" ]; then
    ORDO_RC_LOOP_PID=$(rcluster_pid "$p")
    break
  fi
done
[ -n "$ORDO_RC_LOOP_PID" ] || {
  echo "FAIL: every loop key is on the loss key's primary" >&2
  exit 1
}
# test_moved_ask: the slot of "mig:k" moves from its primary to a primary
# that neither killing case touches... any other primary will do, since
# the move comes first; ORDO_RC_MIG_OTHER_PORT is the third primary.
export ORDO_RC_MIG_KEY=mig:k ORDO_RC_MIG_SLOT ORDO_RC_MIG_SRC_PORT \
  ORDO_RC_MIG_DST_PORT ORDO_RC_MIG_OTHER_PORT
ORDO_RC_MIG_SLOT=$(rcluster_cli "${RC_PORTS[0]}" CLUSTER KEYSLOT mig:k)
ORDO_RC_MIG_SRC_PORT=$(rcluster_primary_port "$ORDO_RC_MIG_SLOT")
others=()
for s in 0 5461 10923; do
  p=$(rcluster_primary_port "$s")
  [ "$p" = "$ORDO_RC_MIG_SRC_PORT" ] || others+=("$p")
done
ORDO_RC_MIG_DST_PORT=${others[0]}
ORDO_RC_MIG_OTHER_PORT=${others[1]}
set +e
timeout "$((100 * MULT))" "$TEST"
rc=$?
set -e
[ "$rc" -eq 0 ] || echo "FAIL: test_rcluster exited $rc" >&2
exit "$rc"
