#!/usr/bin/env bash
# resp3_push.sh ORDOD -- under RESP3, a session whose lease runs out hears a
# push message naming the keys it lost. redis-cli -3 shows pushes only in its
# interactive mode, so it runs in a tmux pane, and the screen is read back.
set -euo pipefail
ORDOD=$1
dir=$(mktemp -d)
sock="ordo-push-$$"
cleanup() {
  tmux -L "$sock" kill-server 2>/dev/null || true
  [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; tmux -L "$sock" capture-pane -t rc -p >&2 || true; exit 1; }

"$ORDOD" --port 0 --dir "$dir" --lease-ms 300 --verbose 0 > "$dir/out" &
pid=$!
for _ in $(seq 200); do
  grep -q '^ready port=' "$dir/out" && break
  sleep 0.05
done
port=$(sed -n 's/^ready port=//p' "$dir/out")
[ -n "$port" ] || fail "ordod did not start"

screen() { tmux -L "$sock" capture-pane -t rc -p; }
wait_for() { # wait_for PATTERN: bounded poll of the pane
  for _ in $(seq 200); do
    grep -q "$1" <<< "$(screen)" && return 0
    sleep 0.025
  done
  fail "the pane never showed '$1'"
}
tmux -L "$sock" new-session -d -s rc -x 120 -y 40 "redis-cli -3 -p $port"
wait_for "127.0.0.1:$port>"
tmux -L "$sock" send-keys -t rc "LOCK 1 lost:key X" Enter
wait_for '"lost:key"'   # the LOCK's reply names the key with its token
# The lease (300 ms) runs out while the session is idle; the next command
# shows the push that arrived meanwhile.
for _ in $(seq 100); do
  grep -q 'X' <<< "$(redis-cli -p "$port" HOLDERS lost:key)" || break
  sleep 0.02
done
tmux -L "$sock" send-keys -t rc "PING" Enter
wait_for "PONG"
grep -q '"lease-lost"' <<< "$(screen)" || fail "no lease-lost push"
# Once in the LOCK's reply, once in the push.
[ "$(screen | grep -c '"lost:key"')" -ge 2 ] || fail "the push does not name the key"
echo "redis-cli -3 saw: lease-lost lost:key"
