#!/usr/bin/env bash
# resp3_push.sh ORDOD -- under RESP3, a session whose lease runs out hears a
# push message naming the keys it lost. redis-cli -3 shows pushes only in its
# interactive mode, so it runs in a tmux pane, and the screen is read back.
# ordod (300 ms lease) is started and stopped by ordod_fixture.sh, which
# fails the test if it does not stop cleanly or a sanitizer reports. Every
# wait is a bounded poll, each bound times ORDO_TEST_TIMEOUT_MULT.
set -euo pipefail
. "$(dirname "$0")/ordod_fixture.sh"
ORDOD=${1:?usage: $0 ORDOD}
sock="ordo-push-$$"
cleanup() {
  local rc=$?
  tmux -L "$sock" kill-server 2>/dev/null || true
  ordod_exit "$rc"
}
ordod_start "$ORDOD" --lease-ms 300
trap cleanup EXIT
port=$ORDOD_PORT
fail() {
  echo "FAIL: $*" >&2
  echo "--- the pane:" >&2
  tmux -L "$sock" capture-pane -t rc -p >&2 || true
  exit 1
}

screen() { tmux -L "$sock" capture-pane -t rc -p; }
wait_for() { # wait_for PATTERN: bounded poll of the pane
  local i
  for ((i = 0; i < 200 * MULT; i++)); do
    grep -q "$1" <<< "$(screen)" && return 0
    sleep 0.025
  done
  fail "the pane never showed '$1' within $((5 * MULT)) s"
}
tmux -L "$sock" new-session -d -s rc -x 120 -y 40 "redis-cli -3 -p $port"
wait_for "127.0.0.1:$port>"
tmux -L "$sock" send-keys -t rc "LOCK 1 lost:key X" Enter
wait_for '"lost:key"' # the LOCK's reply names the key with its token
# The lease (300 ms) runs out while the session is idle (time is what is
# under test here): wait, bounded, until HOLDERS no longer lists the key,
# then the next command shows the push that arrived meanwhile.
gone=
for ((i = 0; i < 100 * MULT; i++)); do
  r=$(timeout "$((5 * MULT))" redis-cli -p "$port" HOLDERS lost:key) ||
    fail "redis-cli HOLDERS lost:key failed"
  # No holder and no waiter: two empty arrays, two empty lines.
  if [ -z "$r" ]; then
    gone=1
    break
  fi
  sleep 0.02
done
[ -n "$gone" ] || fail "lost:key is still held $((2 * MULT)) s into a 300 ms lease"
tmux -L "$sock" send-keys -t rc "PING" Enter
wait_for "PONG"
grep -q '"lease-lost"' <<< "$(screen)" || fail "no lease-lost push"
# Once in the LOCK's reply, once in the push.
[ "$(screen | grep -c '"lost:key"')" -ge 2 ] || fail "the push does not name the key"
echo "redis-cli -3 saw: lease-lost lost:key"
