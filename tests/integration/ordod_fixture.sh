#!/usr/bin/env bash
# ordod_fixture.sh -- a throw-away ordod for a test: a fresh --dir from
# mktemp, a free port, a 1 s lease. Two ways to use it:
#
#   . ordod_fixture.sh; ordod_start PATH/TO/ordod [MORE ORDOD ARGS...]
#       starts the server and exports ORDOD_PORT, ORDOD_PID and ORDOD_DIR;
#       an EXIT trap stops it (SIGTERM, then SIGKILL after 10 s) and
#       removes the folder. ordod_stop does the same earlier; ordod_cmd
#       sends the server one command.
#   ordod_fixture.sh PATH/TO/ordod COMMAND [ARGS...]
#       runs COMMAND (bounded by ORDOD_FIXTURE_TIMEOUT seconds, 240 by
#       default) with ORDOD_PORT exported, then stops the server; exits
#       with COMMAND's status.
#
# Every wait is bounded: the 'ready port=N' line is awaited 10 s, the stop
# 10 s, and a guard kills the server after ORDOD_FIXTURE_MAX_S seconds (300
# by default) even if the trap never runs (the script was SIGKILLed). The
# server's stdout goes to a FIFO and its stderr to a file, never to the
# test's own descriptors, so a runner reading them is not held up by it.

ordod_stop() {
  if [ -n "${ORDOD_PID:-}" ]; then
    kill -TERM "$ORDOD_PID" 2>/dev/null || true
    local i
    for i in $(seq 100); do
      kill -0 "$ORDOD_PID" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$ORDOD_PID" 2>/dev/null; then
      echo "ordod_fixture: ordod did not stop within 10 s of SIGTERM;" \
        "killing it" >&2
      kill -KILL "$ORDOD_PID" 2>/dev/null || true
    fi
    wait "$ORDOD_PID" 2>/dev/null || true
    ORDOD_PID=
  fi
  if [ -n "${ORDOD_GUARD:-}" ]; then
    kill "$ORDOD_GUARD" 2>/dev/null || true
    wait "$ORDOD_GUARD" 2>/dev/null || true
    ORDOD_GUARD=
  fi
  exec 8<&- 2>/dev/null || true
  if [ -n "${ORDOD_DIR:-}" ]; then
    rm -rf "$ORDOD_DIR"
    ORDOD_DIR=
  fi
}

# ordod_log: the server's stderr so far, for failure messages.
ordod_log() {
  [ -n "${ORDOD_DIR:-}" ] && cat "$ORDOD_DIR/stderr" 2>/dev/null || true
}

ordod_start() {
  local bin=${1:?usage: ordod_start PATH/TO/ordod [ARGS...]}
  shift
  if [ ! -x "$bin" ]; then
    echo "ordod_fixture: '$bin' is not an executable; build target ordod" \
      "first" >&2
    return 1
  fi
  ORDOD_DIR=$(mktemp -d)
  export ORDOD_DIR
  trap ordod_stop EXIT
  mkfifo "$ORDOD_DIR/stdout" "$ORDOD_DIR/guard"
  "$bin" --port 0 --dir "$ORDOD_DIR/data" --lease-ms 1000 --verbose 0 "$@" \
    >"$ORDOD_DIR/stdout" 2>"$ORDOD_DIR/stderr" </dev/null &
  ORDOD_PID=$!
  export ORDOD_PID
  # The guard: a subshell that waits on a FIFO no one writes (a builtin
  # read, bounded, with no child process to leave behind), then kills.
  (
    read -r -t "${ORDOD_FIXTURE_MAX_S:-300}" _ <>"$ORDOD_DIR/guard" || true
    kill -KILL "$ORDOD_PID" 2>/dev/null
  ) </dev/null >/dev/null 2>&1 &
  ORDOD_GUARD=$!
  exec 8<"$ORDOD_DIR/stdout"
  local line=
  if ! read -r -t 10 -u 8 line || [[ "$line" != "ready port="* ]]; then
    echo "ordod_fixture: ordod printed no 'ready port=N' within 10 s" \
      "(got '$line'); its stderr:" >&2
    ordod_log >&2
    return 1
  fi
  ORDOD_PORT=${line#ready port=}
  export ORDOD_PORT
}

# ordod_cmd WORDS...: sends one inline command (bash's /dev/tcp, no client
# needed) and prints the raw RESP reply; bounded by 5 s.
ordod_cmd() {
  timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" &&
    printf "%s\r\nQUIT\r\n" "$*" >&3 && cat <&3' "$ORDOD_PORT" "$@"
}

# Run as a command: start, run, stop.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  [ $# -ge 2 ] || {
    echo "usage: $0 PATH/TO/ordod COMMAND [ARGS...]" >&2
    exit 64
  }
  bin=$1
  shift
  ordod_start "$bin"
  set +e
  timeout "${ORDOD_FIXTURE_TIMEOUT:-240}" "$@"
  rc=$?
  set -e
  [ "$rc" -ne 124 ] || echo "ordod_fixture: '$*' did not finish within" \
    "${ORDOD_FIXTURE_TIMEOUT:-240} s" >&2
  exit "$rc"
fi
