#!/usr/bin/env bash
# sentinel_fixture.sh -- a throw-away Redis Sentinel set for a test: one
# primary and one replica (redis_fixture.sh's redis_start, the replica with
# --replicaof) and three sentinels (redis-server --sentinel, each with its
# config file in a fresh mktemp folder, on a free port of 127.0.0.1) that
# monitor the primary as "ordo" with a quorum of 2, down-after-milliseconds
# 1000 and failover-timeout 3000. Source it once per test script:
#
#   . sentinel_fixture.sh; sentinel_start
#       starts all five and exports PRIMARY_PORT, PRIMARY_PID,
#       REPLICA_PORT, REPLICA_PID, SENTINEL_PORTS (space-separated) and
#       SENTINEL_URL ("redis-sentinel://127.0.0.1:S1,.../ordo"); it returns
#       once the replica is in sync and every sentinel knows the primary,
#       its replica and the two other sentinels, so a failover can happen.
#   sentinel_master: the "host port" the first sentinel that answers names.
#   sentinel_wait_master PORT SECONDS: waits (bounded) until a sentinel
#       names 127.0.0.1:PORT and that node's ROLE says master.
#
# Every wait is bounded, each bound times MULT (ORDO_TEST_TIMEOUT_MULT); the
# EXIT trap of redis_fixture.sh stops every process started here (the
# sentinels are registered with it), and each one has its guard, which
# kills it after REDIS_FIXTURE_MAX_S seconds even if the trap never runs.

# shellcheck source=redis_fixture.sh
. "$(dirname "${BASH_SOURCE[0]}")/redis_fixture.sh"
SENTINEL_NAME=${SENTINEL_NAME:-ordo}

# _sentinel_cli PORT ARGS...: redis-cli against a sentinel, bounded by 5 s.
_sentinel_cli() {
  local port=$1
  shift
  timeout "$((5 * MULT))" "$REDIS_CLI" -p "$port" "$@" 2>/dev/null
}

# _sentinel_one PRIMARY_PORT: one sentinel, registered with the fixture.
_sentinel_one() {
  local dir port pid guard end _
  dir=$(mktemp -d)
  _redis_dirs+=("$dir")
  mkfifo "$dir/guard"
  for _ in 1 2 3 4 5; do
    port=$(redis_free_port)
    # Sentinel rewrites its config file: it must be its own, writable.
    cat >"$dir/sentinel.conf" <<EOF
port $port
bind 127.0.0.1
dir $dir
sentinel monitor $SENTINEL_NAME 127.0.0.1 $1 2
sentinel down-after-milliseconds $SENTINEL_NAME 1000
sentinel failover-timeout $SENTINEL_NAME 3000
EOF
    "$REDIS_SERVER" "$dir/sentinel.conf" --sentinel >"$dir/log" 2>&1 \
      </dev/null &
    pid=$!
    end=$((SECONDS + 10 * MULT))
    while [ "$SECONDS" -lt "$end" ] && kill -0 "$pid" 2>/dev/null; do
      if [ "$(_sentinel_cli "$port" PING)" = PONG ]; then
        (
          read -r -t "${REDIS_FIXTURE_MAX_S:-300}" _ <>"$dir/guard" || true
          kill -KILL "$pid" 2>/dev/null
        ) </dev/null >/dev/null 2>&1 &
        guard=$!
        _redis_pids+=("$pid")
        _redis_guards+=("$guard")
        SENTINEL_PORTS="${SENTINEL_PORTS:+$SENTINEL_PORTS }$port"
        return 0
      fi
      sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null || true
    _redis_reap "$pid" 5
    grep -q -i 'address already in use' "$dir/log" || break
  done
  echo "sentinel_fixture: a sentinel did not start; its log:" >&2
  cat "$dir/log" >&2
  return 1
}

# sentinel_master: "host port" of the primary, from the first sentinel
# that answers.
sentinel_master() {
  local p out
  for p in $SENTINEL_PORTS; do
    out=$(_sentinel_cli "$p" SENTINEL get-master-addr-by-name \
      "$SENTINEL_NAME" | tr '\n' ' ') || continue
    if [ -n "$out" ]; then
      echo "${out% }"
      return 0
    fi
  done
  return 1
}

# sentinel_wait_master PORT SECONDS (times MULT).
sentinel_wait_master() {
  local end=$((SECONDS + $2 * MULT))
  while [ "$SECONDS" -lt "$end" ]; do
    if [ "$(sentinel_master)" = "127.0.0.1 $1" ] &&
      _sentinel_cli "$1" ROLE | head -1 | grep -qx master; then
      return 0
    fi
    sleep 0.05
  done
  echo "sentinel_fixture: 127.0.0.1:$1 did not become the master within" \
    "$(($2 * MULT)) s" >&2
  return 1
}

# _sentinel_ready: every sentinel sees the replica and the 2 other sentinels.
_sentinel_ready() {
  local p info
  for p in $SENTINEL_PORTS; do
    info=$(_sentinel_cli "$p" INFO sentinel | tr -d '\r') || return 1
    [[ "$info" == *"slaves=1,sentinels=3"* ]] || return 1
  done
}

sentinel_start() {
  redis_start || return 1
  PRIMARY_PORT=$REDIS_PORT
  PRIMARY_PID=$REDIS_PID
  redis_start --replicaof 127.0.0.1 "$PRIMARY_PORT" || return 1
  REPLICA_PORT=$REDIS_PORT
  REPLICA_PID=$REDIS_PID
  SENTINEL_PORTS=
  local i end nodes=()
  for i in 1 2 3; do
    _sentinel_one "$PRIMARY_PORT" || return 1
  done
  end=$((SECONDS + 20 * MULT))
  until _sentinel_ready &&
    _sentinel_cli "$REPLICA_PORT" INFO replication | tr -d '\r' |
    grep -qx 'master_link_status:up'; do
    if [ "$SECONDS" -ge "$end" ]; then
      echo "sentinel_fixture: the sentinels did not all see the replica and" \
        "each other within $((20 * MULT)) s" >&2
      return 1
    fi
    sleep 0.1
  done
  for i in $SENTINEL_PORTS; do nodes+=("127.0.0.1:$i"); done
  SENTINEL_URL="redis-sentinel://$(
    IFS=,
    echo "${nodes[*]}"
  )/$SENTINEL_NAME"
  export PRIMARY_PORT PRIMARY_PID REPLICA_PORT REPLICA_PID SENTINEL_PORTS \
    SENTINEL_URL
}
