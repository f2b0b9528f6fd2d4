#!/usr/bin/env bash
# rcluster_fixture.sh -- a throw-away Redis Cluster for a test script: 6
# redis-server processes (redis_fixture.sh: each in its own mktemp folder,
# on a free loopback port at most 55535, since a node's cluster bus is its
# port + 10000), started with --cluster-enabled yes, their cluster config
# file in their folder, --cluster-node-timeout 1000 (so that a killed
# primary's replica is promoted within about 2 s) and
# --cluster-replica-validity-factor 0 (a replica is promoted however long
# its link to the primary was down: test_rcluster.c cuts that link on
# purpose, and Redis 7.0 otherwise refuses with "Disconnected from master
# for longer than allowed" at once), made into 3 primaries
# and 3 replicas by `redis-cli --cluster create --cluster-replicas 1`.
# Source it, then:
#
#   rcluster_start      starts the cluster once and waits (bounded) for
#                       cluster_state:ok on every node; sets RC_PORTS and
#                       RC_PIDS (the 6 nodes, in the order given to create)
#   rcluster_url [Q]    "redis-cluster://127.0.0.1:P1,127.0.0.1:P2?Q" (two
#                       seeds)
#   rcluster_ok         waits (bounded) for cluster_state:ok on every node
#                       still running
#   rcluster_primary_port SLOT, rcluster_primary_pid SLOT
#                       the port (the pid) of the node serving SLOT now
#   rcluster_pid PORT   the pid of the node on PORT
#   rcluster_replica_port PORT
#                       the port of a replica of the primary on PORT
#   rcluster_cli PORT ARGS...
#                       redis-cli -p PORT ARGS, bounded by 5 s
#
# Every wait is bounded and scaled by MULT (mult.sh); the EXIT trap of
# redis_fixture.sh stops every node and removes the folders, and its guard
# kills each node after REDIS_FIXTURE_MAX_S even if the trap never runs.

# shellcheck source=redis_fixture.sh
. "$(dirname "${BASH_SOURCE[0]}")/redis_fixture.sh"

rcluster_cli() {
  local port=$1
  shift
  timeout "$((5 * MULT))" "$REDIS_CLI" --no-auth-warning -p "$port" "$@"
}

# rcluster_ok: every running node says cluster_state:ok within 20 s.
rcluster_ok() {
  local end=$((SECONDS + 20 * MULT)) i ok
  while [ "$SECONDS" -lt "$end" ]; do
    ok=1
    for i in "${!RC_PORTS[@]}"; do
      kill -0 "${RC_PIDS[$i]}" 2>/dev/null || continue
      if ! rcluster_cli "${RC_PORTS[$i]}" CLUSTER INFO 2>/dev/null |
        grep -q '^cluster_state:ok'; then
        ok=0
        break
      fi
    done
    [ "$ok" -eq 1 ] && return 0
    sleep 0.1
  done
  echo "rcluster_fixture: cluster_state is not ok on every node after" \
    "$((20 * MULT)) s" >&2
  for i in "${!RC_PORTS[@]}"; do
    echo "node ${RC_PORTS[$i]}:" >&2
    rcluster_cli "${RC_PORTS[$i]}" CLUSTER NODES >&2 2>/dev/null || true
  done
  return 1
}

rcluster_start() {
  redis_start_nodes 6 --cluster-enabled yes --cluster-config-file nodes.conf \
    --cluster-node-timeout 1000 --cluster-replica-validity-factor 0 ||
    return 1
  RC_PORTS=("${REDIS_PORTS[@]}")
  RC_PIDS=("${REDIS_PIDS[@]}")
  local addrs=() p
  for p in "${RC_PORTS[@]}"; do addrs+=("127.0.0.1:$p"); done
  if ! timeout "$((30 * MULT))" "$REDIS_CLI" --cluster create "${addrs[@]}" \
    --cluster-replicas 1 --cluster-yes >"$REDIS_DIR/create.log" 2>&1; then
    echo "rcluster_fixture: redis-cli --cluster create failed:" >&2
    cat "$REDIS_DIR/create.log" >&2
    return 1
  fi
  rcluster_ok || return 1
  # The replicas' roles reach every node by gossip, after cluster_state:ok:
  # wait until each node sees 3 primaries and 3 replicas, none failing or
  # still in handshake (the tests look replicas up on any node).
  local end=$((SECONDS + 20 * MULT)) i good
  while [ "$SECONDS" -lt "$end" ]; do
    good=0
    for i in "${!RC_PORTS[@]}"; do
      rcluster_cli "${RC_PORTS[$i]}" CLUSTER NODES 2>/dev/null | awk '
        $3 ~ /fail|handshake|noaddr/ { bad = 1 }
        $3 ~ /master/ { m++ }
        $3 ~ /slave/ { s++ }
        END { exit !(m == 3 && s == 3 && !bad) }' && good=$((good + 1))
    done
    [ "$good" -eq 6 ] && return 0
    sleep 0.1
  done
  echo "rcluster_fixture: the nodes do not all see 3 primaries and 3" \
    "replicas after $((20 * MULT)) s" >&2
  rcluster_cli "${RC_PORTS[0]}" CLUSTER NODES >&2 || true
  return 1
}

# shellcheck disable=SC2120 # the query is optional
rcluster_url() {
  echo "redis-cluster://127.0.0.1:${RC_PORTS[0]},127.0.0.1:${RC_PORTS[1]}${1:-}"
}

# rcluster_primary_port SLOT: the port of the primary that serves SLOT, as
# the first running node's CLUSTER NODES says.
rcluster_primary_port() {
  local slot=$1 i port
  for i in "${!RC_PORTS[@]}"; do
    kill -0 "${RC_PIDS[$i]}" 2>/dev/null || continue
    port=$(rcluster_cli "${RC_PORTS[$i]}" CLUSTER NODES 2>/dev/null |
      python3 -c '
import sys
slot = int(sys.argv[1])
# Each line: id host:port@bus flags primary-id ping pong epoch link slots...
for line in sys.stdin:
    f = line.split()
    if len(f) < 8 or "master" not in f[2] or "fail" in f[2]:
        continue
    for r in f[8:]:
        if r.startswith("["):
            continue
        lo, _, hi = r.partition("-")
        if int(lo) <= slot <= int(hi or lo):
            print(f[1].split("@")[0].rsplit(":", 1)[1])
' "$slot") || continue
    [ -n "$port" ] || continue
    echo "$port"
    return 0
  done
  return 1
}

rcluster_primary_pid() {
  local port
  port=$(rcluster_primary_port "$1") || return 1
  rcluster_pid "$port"
}

# rcluster_pid PORT: the pid of the node on PORT.
rcluster_pid() {
  local i
  for i in "${!RC_PORTS[@]}"; do
    if [ "${RC_PORTS[$i]}" = "$1" ]; then
      echo "${RC_PIDS[$i]}"
      return 0
    fi
  done
  return 1
}

# rcluster_replica_port PORT: the port of a replica of the primary on PORT.
rcluster_replica_port() {
  rcluster_cli "$1" CLUSTER NODES | python3 -c '
import sys
port = sys.argv[1]
lines = [l.split() for l in sys.stdin if l.strip()]
ids = [f[0] for f in lines if f[1].split("@")[0].rsplit(":", 1)[1] == port]
for f in lines:
    if ids and "slave" in f[2] and f[3] == ids[0]:
        print(f[1].split("@")[0].rsplit(":", 1)[1]); break
' "$1" | grep .
}
