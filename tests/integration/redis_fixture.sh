#!/usr/bin/env bash
# redis_fixture.sh -- throw-away redis-server processes for a test: each in
# a fresh folder from mktemp, on a free port of 127.0.0.1 (and a Unix
# socket in its folder), with no persistence. Two ways to use it:
#
#   . redis_fixture.sh; redis_start [REDIS-SERVER ARGS...]
#       starts one more server and exports REDIS_PORT, REDIS_SOCK,
#       REDIS_DIR and REDIS_PID for it (each call overwrites them: copy
#       them to keep several); an EXIT trap stops every server started
#       (SIGTERM, then SIGKILL after 10 s) and removes the folders.
#       redis_stop_all does the same earlier; redis_cli runs redis-cli
#       against the latest server, bounded by 5 s; redis_start_nodes N
#       starts N of them into the arrays REDIS_PORTS and REDIS_PIDS, and
#       redlock_url [QUERY] names them as one redlock:// URL.
#   redis_fixture.sh COMMAND [ARGS...]
#       runs COMMAND (bounded by REDIS_FIXTURE_TIMEOUT seconds, 240 by
#       default) with REDIS_PORT and REDIS_SOCK exported, then stops the
#       server; exits with COMMAND's status.
#
# Every wait is bounded, each bound times MULT (ORDO_TEST_TIMEOUT_MULT, from
# mult.sh): the server must answer PING within 10 s, a stop takes at most
# 10 s (SIGTERM, a poll for the end, SIGKILL past it, and only then a
# wait), redis_cli 5 s; and a guard kills each server after
# REDIS_FIXTURE_MAX_S seconds (300 by default, not scaled) even if the trap
# never runs (the script was SIGKILLed). The server's output goes to a file
# in its folder, never to the test's own descriptors.

# shellcheck source=mult.sh
. "$(dirname "${BASH_SOURCE[0]}")/mult.sh"
REDIS_SERVER=${REDIS_SERVER:-redis-server}
REDIS_CLI=${REDIS_CLI:-redis-cli}
_redis_pids=()
_redis_guards=()
_redis_dirs=()

# _redis_reap PID SECONDS: waits at most SECONDS for our child PID to end
# (after a signal), SIGKILLs it past that, then reaps it: the wait comes
# only once the process is gone or SIGKILLed, so it cannot hang.
_redis_reap() {
  local pid=$1 i
  for ((i = 0; i < $2 * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "redis_fixture: process $pid did not end within $2 s; killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

redis_stop_all() {
  local pid i
  # A node a test stopped (SIGSTOP) must run to see the SIGTERM.
  for pid in "${_redis_pids[@]}"; do
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${_redis_pids[@]}"; do
    _redis_reap "$pid" "$((10 * MULT))"
  done
  # A guard sits in a bounded builtin read; SIGTERM ends it at once.
  for pid in "${_redis_guards[@]}"; do
    kill "$pid" 2>/dev/null || true
    _redis_reap "$pid" 5
  done
  for i in "${_redis_dirs[@]}"; do
    rm -rf "$i"
  done
  _redis_pids=()
  _redis_guards=()
  _redis_dirs=()
}

# redis_log: the latest server's log so far, for failure messages.
redis_log() {
  if [ -n "${REDIS_DIR:-}" ]; then
    cat "$REDIS_DIR/log" 2>/dev/null || true
  fi
}

# A port nobody listens on now (the kernel's choice for port 0), at most 55535:
# a Cluster node also listens on its port + 10000 (its bus), and redis-server
# refuses to start on a port above that ("Redis port number too high"). The
# kernel's ephemeral range reaches 60999, so a choice above is made again.
redis_free_port() {
  python3 -c 'import socket
for _ in range(100):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    if p <= 55535:
        break
print(p)'
}

# Does the server on port $1 answer? PONG, or NOAUTH when it wants a
# password, both count.
_redis_answers() {
  local out
  out=$(timeout "$((2 * MULT))" "$REDIS_CLI" --no-auth-warning -p "$1" PING \
    2>&1) || true
  [[ "$out" == *PONG* || "$out" == *NOAUTH* ]]
}

# shellcheck disable=SC2120 # the arguments are redis-server's, optional
redis_start() {
  if ! command -v "$REDIS_SERVER" >/dev/null; then
    echo "redis_fixture: no $REDIS_SERVER on PATH (scripts/bootstrap.sh" \
      "installs redis-server)" >&2
    return 1
  fi
  if [ ${#_redis_pids[@]} -eq 0 ]; then
    trap redis_stop_all EXIT
  fi
  local dir port pid guard end _
  dir=$(mktemp -d)
  _redis_dirs+=("$dir")
  mkfifo "$dir/guard"
  # The port may be taken between the choice and the bind: try again.
  for _ in 1 2 3 4 5; do
    port=$(redis_free_port)
    "$REDIS_SERVER" --port "$port" --save '' --appendonly no --dir "$dir" \
      --bind 127.0.0.1 --daemonize no --unixsocket "$dir/redis.sock" \
      --unixsocketperm 700 "$@" >"$dir/log" 2>&1 </dev/null &
    pid=$!
    end=$((SECONDS + 10 * MULT))
    while [ "$SECONDS" -lt "$end" ]; do
      if ! kill -0 "$pid" 2>/dev/null; then
        break
      fi
      if _redis_answers "$port"; then
        # The guard: a subshell that waits on a FIFO no one writes (a
        # builtin read, bounded), then kills.
        (
          read -r -t "${REDIS_FIXTURE_MAX_S:-300}" _ <>"$dir/guard" || true
          kill -KILL "$pid" 2>/dev/null
        ) </dev/null >/dev/null 2>&1 &
        guard=$!
        _redis_pids+=("$pid")
        _redis_guards+=("$guard")
        REDIS_PORT=$port
        REDIS_SOCK=$dir/redis.sock
        REDIS_DIR=$dir
        REDIS_PID=$pid
        export REDIS_PORT REDIS_SOCK REDIS_DIR REDIS_PID
        return 0
      fi
      sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null || true
    _redis_reap "$pid" 5
    if grep -q -i 'address already in use' "$dir/log"; then
      continue
    fi
    break
  done
  if [ "$SECONDS" -lt "$end" ]; then
    echo "redis_fixture: $REDIS_SERVER exited at start; its log:" >&2
  else
    echo "redis_fixture: $REDIS_SERVER did not answer PING within" \
      "$((10 * MULT)) s; its log:" >&2
  fi
  cat "$dir/log" >&2
  return 1
}

# redis_start_nodes N [REDIS-SERVER ARGS...]: starts N servers (a quorum's
# nodes) and sets the arrays REDIS_PORTS and REDIS_PIDS (replaced each call).
redis_start_nodes() {
  local n=$1 i
  shift
  REDIS_PORTS=()
  REDIS_PIDS=()
  for ((i = 0; i < n; i++)); do
    redis_start "$@" || return 1
    REDIS_PORTS+=("$REDIS_PORT")
    REDIS_PIDS+=("$REDIS_PID")
  done
}

# redlock_url [QUERY]: "redlock://127.0.0.1:P1,...?QUERY" over REDIS_PORTS.
redlock_url() {
  local nodes=() p
  for p in "${REDIS_PORTS[@]}"; do nodes+=("127.0.0.1:$p"); done
  echo "redlock://$(IFS=,; echo "${nodes[*]}")${1:-}"
}

# redis_cli ARGS...: redis-cli against the latest server, bounded by 5 s.
redis_cli() {
  timeout "$((5 * MULT))" "$REDIS_CLI" --no-auth-warning -p "$REDIS_PORT" "$@"
}

# Run as a command: start, run, stop.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  [ $# -ge 1 ] || {
    echo "usage: $0 COMMAND [ARGS...]" >&2
    exit 64
  }
  redis_start
  set +e
  timeout "${REDIS_FIXTURE_TIMEOUT:-240}" "$@"
  rc=$?
  set -e
  [ "$rc" -ne 124 ] || echo "redis_fixture: '$*' did not finish within" \
    "${REDIS_FIXTURE_TIMEOUT:-240} s" >&2
  exit "$rc"
fi
