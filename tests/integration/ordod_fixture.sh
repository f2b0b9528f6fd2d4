#!/usr/bin/env bash
# ordod_fixture.sh -- a throw-away ordod for a test: a fresh --dir from
# mktemp, a free port, a 1 s lease. Every ordod a shell test starts is
# started and stopped here, so that every one is checked the same way at
# its end. Two ways to use it:
#
#   . ordod_fixture.sh; ordod_start PATH/TO/ordod [MORE ORDOD ARGS...]
#       starts the server (later ARGS override the defaults above) and
#       exports ORDOD_PORT, ORDOD_PID and ORDOD_DIR; an EXIT trap
#       (ordod_exit) stops it and removes the folder. ordod_stop does the
#       same earlier; ordod_cmd sends the server one command; ordod_log
#       prints its stderr so far.
#   ordod_fixture.sh PATH/TO/ordod COMMAND [ARGS...]
#       runs COMMAND (bounded by ORDOD_FIXTURE_TIMEOUT seconds, 240 by
#       default) with ORDOD_PORT exported, then stops the server; exits
#       with COMMAND's status, or 1 if the stop found a failure.
#
# The stop is a check: ordod_stop sends SIGTERM, waits for the server to
# end (10 s), SIGKILLs it past that, and reads its exit status (a clean stop
# on SIGTERM exits 0) and its stderr. A status other than 0 (a crash, a
# sanitizer's abort, the SIGKILL) or a sanitizer report in the stderr
# (AddressSanitizer, LeakSanitizer, ThreadSanitizer, UBSan's "runtime
# error:") makes it print the reason and the whole stderr and return 1.
# ordod_exit RC, the EXIT trap, turns that 1 into the script's status: a
# test that sets an EXIT trap of its own must end it with
# `ordod_exit "$rc"`, rc being the $? its trap began with.
#
# Every wait is bounded, each bound times MULT (ORDO_TEST_TIMEOUT_MULT, from
# mult.sh; scripts/test.sh sets it for the sanitizer builds): the 'ready
# port=N' line is awaited 10 s, the stop 10 s, ordod_cmd 5 s; and a guard
# kills the server after ORDOD_FIXTURE_MAX_S seconds (300 by default, not
# scaled) even if the trap never runs (the script was SIGKILLed). The
# server's stdout goes to a FIFO and its stderr to a file, never to the
# test's own descriptors, so a runner reading them is not held up by it.

# MULT: the factor of every bound (mult.sh).
# shellcheck source=mult.sh
. "$(dirname "${BASH_SOURCE[0]}")/mult.sh"

# What a sanitizer writes when it finds something (a grep -E pattern).
ORDOD_SANITIZER_RE='ERROR: (Address|Leak|Thread)Sanitizer'
ORDOD_SANITIZER_RE+='|WARNING: ThreadSanitizer|runtime error:'
ORDOD_SANITIZER_RE+='|SUMMARY: [A-Za-z]+Sanitizer'

# ordod_stop: stops the server and checks how it ended (see the header);
# returns 1, with the reason and the server's stderr on stderr, if it did
# not end cleanly. Safe to call twice, and when no server was started.
ordod_stop() {
  local failed=0 rc i
  if [ -n "${ORDOD_PID:-}" ]; then
    # A stopped server (SIGSTOP, as lock.sh's lease test does) must run to
    # see the SIGTERM.
    kill -CONT "$ORDOD_PID" 2>/dev/null || true
    kill -TERM "$ORDOD_PID" 2>/dev/null || true
    for ((i = 0; i < 100 * MULT; i++)); do
      kill -0 "$ORDOD_PID" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$ORDOD_PID" 2>/dev/null; then
      echo "ordod_fixture: FAIL: ordod (pid $ORDOD_PID) did not stop within" \
        "$((10 * MULT)) s of SIGTERM; killing it" >&2
      kill -KILL "$ORDOD_PID" 2>/dev/null || true
      failed=1
    fi
    # The server has ended (or been SIGKILLed just now): this wait returns
    # at once, with its status.
    rc=0
    wait "$ORDOD_PID" 2>/dev/null || rc=$?
    if [ "$rc" -ne 0 ]; then
      if [ "$rc" -gt 128 ]; then
        echo "ordod_fixture: FAIL: ordod (pid $ORDOD_PID) ended by signal" \
          "$((rc - 128)) (status $rc), not by a clean exit 0 on SIGTERM" >&2
      else
        echo "ordod_fixture: FAIL: ordod (pid $ORDOD_PID) exited $rc, not" \
          "0, on SIGTERM" >&2
      fi
      failed=1
    fi
    if [ -n "${ORDOD_DIR:-}" ] &&
      grep -q -E "$ORDOD_SANITIZER_RE" "$ORDOD_DIR/stderr" 2>/dev/null; then
      echo "ordod_fixture: FAIL: a sanitizer report in ordod's stderr" >&2
      failed=1
    fi
    if [ "$failed" -ne 0 ]; then
      echo "ordod_fixture: ordod's stderr ($ORDOD_DIR/stderr):" >&2
      ordod_log >&2
      echo "ordod_fixture: (end of ordod's stderr)" >&2
    fi
    ORDOD_PID=
  fi
  if [ -n "${ORDOD_GUARD:-}" ]; then
    # The guard sits in a bounded builtin read; SIGKILL ends it at once,
    # so the wait cannot hang.
    kill -KILL "$ORDOD_GUARD" 2>/dev/null || true
    wait "$ORDOD_GUARD" 2>/dev/null || true
    ORDOD_GUARD=
  fi
  exec 8<&-
  if [ -n "${ORDOD_DIR:-}" ]; then
    rm -rf "$ORDOD_DIR"
    ORDOD_DIR=
  fi
  [ "$failed" -eq 0 ]
}

# ordod_exit RC: stops the server and exits: with RC, or with 1 when the
# stop failed and RC would have passed (0) or skipped (77). The EXIT trap.
ordod_exit() {
  local rc=${1:-0}
  if ! ordod_stop; then
    if [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ]; then
      rc=1
    fi
  fi
  exit "$rc"
}

# The EXIT trap: its $? on entry is the status the script is ending with.
_ordod_on_exit() {
  ordod_exit "$?"
}

# ordod_log: the server's stderr so far, for failure messages.
ordod_log() {
  if [ -n "${ORDOD_DIR:-}" ]; then
    cat "$ORDOD_DIR/stderr" 2>/dev/null || true
  fi
}

ordod_start() {
  local bin=${1:?usage: ordod_start PATH/TO/ordod [ARGS...]}
  shift
  if [ ! -x "$bin" ]; then
    echo "ordod_fixture: '$bin' is not an executable; build target ordod" \
      "first" >&2
    return 1
  fi
  if [ -n "${ORDOD_PID:-}" ]; then
    echo "ordod_fixture: ordod_start: a server (pid $ORDOD_PID) is already" \
      "running; ordod_stop it first" >&2
    return 1
  fi
  ORDOD_DIR=$(mktemp -d)
  export ORDOD_DIR
  trap _ordod_on_exit EXIT
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
  if ! read -r -t "$((10 * MULT))" -u 8 line ||
    [[ "$line" != "ready port="* ]]; then
    echo "ordod_fixture: ordod printed no 'ready port=N' within" \
      "$((10 * MULT)) s (got '$line'); its stderr:" >&2
    ordod_log >&2
    return 1
  fi
  ORDOD_PORT=${line#ready port=}
  export ORDOD_PORT
}

# ordod_cmd WORDS...: sends one inline command (bash's /dev/tcp, no client
# needed) and prints the raw RESP reply; bounded by 5 s.
ordod_cmd() {
  timeout "$((5 * MULT))" bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" &&
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
