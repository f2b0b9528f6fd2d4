#!/usr/bin/env bash
# redis_cli.sh ORDOD REDIS_CLI -- redis-cli drives a scripted session through
# every ordod command, as docs/protocol.md shows them, against a real ordod
# on a free port. Every step is bounded by timeout(1).
set -euo pipefail
ORDOD=$1
CLI=${2:-redis-cli}
dir=$(mktemp -d)
out=$(mktemp)
cleanup() {
  [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$dir" "$out"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$ORDOD" --port 0 --dir "$dir" --lease-ms 1000 --verbose 0 > "$out" &
pid=$!
for _ in $(seq 200); do
  grep -q '^ready port=' "$out" && break
  sleep 0.05
done
port=$(sed -n 's/^ready port=//p' "$out")
[ -n "$port" ] || fail "ordod did not print 'ready port=N'"
cli() { timeout 10 "$CLI" -p "$port" "$@"; }

[ "$(cli PING)" = "PONG" ] || fail "PING"
[ "$(cli PING hello)" = "hello" ] || fail "PING message"

# LOCK, as in docs/protocol.md: keys come back in canonical order with tokens.
r=$(cli LOCK 2 acct:2 X acct:1 X WAIT 1000)
grep -qx 'acct:1' <<< "$r" || fail "LOCK reply lacks acct:1: $r"
[ "$(echo "$r" | sed -n 2p)" = "acct:1" ] || fail "keys not in canonical order: $r"
[ "$(echo "$r" | sed -n 4p)" = "acct:2" ] || fail "keys not in canonical order: $r"

# One redis-cli session for the commands that need a held lock: a script.
script=$(printf '%s\n' \
  'LOCK 1 k X' 'LOCKS' 'HOLDERS k' 'EXTEND 2000' 'SESSION ID' \
  'CLIENT SETNAME me' 'CLIENT GETNAME' 'CLIENT ID' 'UNLOCK k' 'LOCKS' \
  'LOCK 2 a S b X WAIT 0' 'UNLOCK' 'GRAPH DOT' 'GRAPH JSON' 'INFO locks' \
  'COMMAND COUNT' 'HELLO 2' 'QUIT')
r=$(echo "$script" | cli)
grep -q '^k$' <<< "$r" || fail "LOCKS does not list k: $r"
grep -qx '2000' <<< "$r" || fail "EXTEND 2000 did not answer 2000"
grep -qx 'me' <<< "$r" || fail "CLIENT GETNAME"
grep -q 'digraph waitfor' <<< "$r" || fail "GRAPH DOT"
grep -q '"edges"' <<< "$r" || fail "GRAPH JSON"
grep -q 'lock_acquired:' <<< "$r" || fail "INFO locks"
grep -qx 'ordod' <<< "$r" || fail "HELLO names the server"
grep -qx 'OK' <<< "$r" || fail "QUIT"

# Errors lead with their code.
r=$(cli NOSUCH 2>&1 || true)
grep -q 'ERR unknown command' <<< "$r" || fail "unknown command: $r"
r=$(cli LOCK 1 2>&1 || true)
grep -q 'ERR wrong number of arguments' <<< "$r" || fail "arity: $r"
# A key held by another session: a try gets -TIMEOUT. The holder is a
# redis-cli kept open on a fifo until we are done.
fifo="$dir/holder.fifo"
mkfifo "$fifo"
timeout 20 "$CLI" -p "$port" < "$fifo" > /dev/null &
holder=$!
exec 3> "$fifo"
echo 'LOCK 1 t X' >&3
for _ in $(seq 200); do
  [ "$(cli HOLDERS t | head -n 1)" != "" ] && break
  sleep 0.02
done
r=$(cli LOCK 1 t X WAIT 0 2>&1 || true)
grep -q '^TIMEOUT' <<< "$r" || fail "a held key was not refused: $r"
exec 3>&-
wait "$holder" || true

# HELLO 3 switches to RESP3 (redis-cli -3 reads it).
if timeout 10 "$CLI" -3 -p "$port" HELLO 3 >/dev/null 2>&1; then
  r=$(timeout 10 "$CLI" -3 -p "$port" HELLO 3)
  grep -q 'proto' <<< "$r" || fail "HELLO 3"
fi
echo "redis-cli session: every command answered"
