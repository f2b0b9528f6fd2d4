#!/usr/bin/env bash
# redis_it.sh TEST_REDIS -- runs tests/integration/test_redis.c against the
# servers it needs, each started by redis_fixture.sh: a plain one (also on
# a Unix socket), one with a password ("s3cret"), and a one-node Redis
# Cluster that owns every slot (for CROSSSLOT). redis-server is a
# dependency (scripts/bootstrap.sh installs it): a Cluster that cannot be
# set up fails the test, with the reason and that server's log. Every
# bound is times ORDO_TEST_TIMEOUT_MULT.
set -euo pipefail
. "$(dirname "$0")/redis_fixture.sh"
BIN=${1:?usage: $0 TEST_REDIS}

redis_start
export ORDO_REDIS_PORT=$REDIS_PORT ORDO_REDIS_SOCK=$REDIS_SOCK \
  ORDO_REDIS_PID=$REDIS_PID
main_dir=$REDIS_DIR

redis_start --requirepass s3cret
export ORDO_REDIS_AUTH_PORT=$REDIS_PORT

# cluster_fail REASON: the set-up failed; say why, with the server's log.
cluster_fail() {
  echo "FAIL: redis_it: no one-node Cluster: $*; its log:" >&2
  redis_log >&2
  exit 1
}
if ! redis_start --cluster-enabled yes --cluster-config-file nodes.conf; then
  # redis_start has printed why, with that server's log.
  echo "FAIL: redis_it: no one-node Cluster: redis-server --cluster-enabled" \
    "yes did not start (its log is above)" >&2
  exit 1
fi
r=$(redis_cli CLUSTER ADDSLOTSRANGE 0 16383 2>&1) ||
  cluster_fail "CLUSTER ADDSLOTSRANGE 0 16383 failed: $r"
[ "$r" = OK ] || cluster_fail "CLUSTER ADDSLOTSRANGE 0 16383 answered '$r'"
end=$((SECONDS + 10 * MULT))
state=
while :; do
  state=$(redis_cli CLUSTER INFO 2>&1 | tr -d '\r' |
    sed -n 's/^cluster_state://p') || state=
  [ "$state" != ok ] || break
  [ "$SECONDS" -lt "$end" ] ||
    cluster_fail "cluster_state is '$state', not ok, $((10 * MULT)) s after" \
      "ADDSLOTSRANGE"
  sleep 0.1
done
export ORDO_REDIS_CLUSTER_PORT=$REDIS_PORT

set +e
timeout "$((200 * MULT))" "$BIN"
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  echo "FAIL: test_redis exited $rc; the plain server's log:" >&2
  tail -n 30 "$main_dir/log" >&2
fi
exit "$rc"
