#!/usr/bin/env bash
# redis_cli.sh ORDOD [REDIS_CLI] -- redis-cli drives a scripted session
# through every ordod command, as docs/protocol.md shows them, against a
# real ordod started by ordod_fixture.sh (a fresh --dir, so the fencing
# epoch is the dir's first and every key's first token is known). Each
# reply is checked on its own and, where it is deterministic, exactly: the
# session sends `PING __reply_N__` after its command N, and the output is
# split on those lines (redis-cli reading stdin keeps one connection, so it
# is still one session). COMMAND COUNT must equal the number of entries in
# the server's table (src/server/commands.c). The fixture fails the test
# if ordod does not stop cleanly or a sanitizer reports. Every step is
# bounded by timeout(1), each bound times ORDO_TEST_TIMEOUT_MULT.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/ordod_fixture.sh"
ORDOD=${1:?usage: $0 ORDOD [REDIS_CLI]}
CLI=${2:-redis-cli}
TABLE=$here/../../src/server/commands.c
ordod_start "$ORDOD"
port=$ORDOD_PORT
T=$ORDOD_DIR/t
mkdir "$T"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
cli() { timeout "$((10 * MULT))" "$CLI" -p "$port" "$@"; }

# is_int V: V is a decimal integer of at least 1.
is_int() { [[ "$1" =~ ^[1-9][0-9]*$ ]]; }
# lease_ok V MAX: V is a lease's validity in 1..MAX ms.
lease_ok() { is_int "$1" && [ "$1" -le "$2" ]; }

# expect_lines WHAT FILE LINE...: FILE holds exactly the lines LINE...
expect_lines() {
  local what=$1 file=$2
  shift 2
  printf '%s\n' "$@" >"$file.want"
  if ! diff -u "$file.want" "$file" >"$file.diff"; then
    echo "FAIL: $what: the reply is not the expected one (- expected," \
      "+ got):" >&2
    cat "$file.diff" >&2
    exit 1
  fi
}

# The server's version and fencing epoch, from INFO server: a token is
# epoch << 40 | the key's grant count, so a key's first token is known.
cli INFO server | tr -d '\r' >"$T/info"
version=$(sed -n 's/^ordod_version://p' "$T/info")
epoch=$(sed -n 's/^fencing_epoch://p' "$T/info")
[ -n "$version" ] || fail "INFO server names no ordod_version: $(cat "$T/info")"
is_int "$epoch" || fail "INFO server's fencing_epoch is '$epoch'"
tok1=$(((epoch << 40) | 1))

[ "$(cli PING)" = "PONG" ] || fail "PING"
[ "$(cli PING hello)" = "hello" ] || fail "PING message"

# LOCK, as in docs/protocol.md: the lease's validity, then the keys in
# canonical order, each with its token (the first grant of each key).
cli LOCK 2 acct:2 X acct:1 X WAIT 1000 >"$T/lock"
lease=$(sed -n 1p "$T/lock")
lease_ok "$lease" 1000 ||
  fail "LOCK: the lease's validity is '$lease', not 1..1000 ms"
expect_lines "LOCK 2 acct:2 X acct:1 X (canonical order, first tokens)" \
  "$T/lock" "$lease" acct:1 "$tok1" acct:2 "$tok1"

# ---- One session, a reply per command ----------------------------------------
cmds=(
  'LOCK 1 k X'            # 0
  'LOCKS'                 # 1
  'HOLDERS k'             # 2
  'EXTEND 2000'           # 3
  'SESSION ID'            # 4
  'CLIENT SETNAME me'     # 5
  'CLIENT GETNAME'        # 6
  'CLIENT ID'             # 7
  'CLIENT LIST'           # 8
  'UNLOCK k'              # 9
  'LOCKS'                 # 10
  'LOCK 2 a S b X WAIT 0' # 11
  'UNLOCK'                # 12
  'GRAPH DOT'             # 13
  'GRAPH JSON'            # 14
  'INFO locks'            # 15
  'COMMAND COUNT'         # 16
  'HELLO 2'               # 17
)
for i in "${!cmds[@]}"; do
  printf '%s\nPING __reply_%d__\n' "${cmds[$i]}" "$i"
done >"$T/session.in"
set +e
cli <"$T/session.in" >"$T/session.out" 2>"$T/session.err"
rc=$?
set -e
[ "$rc" -eq 0 ] || fail "redis-cli exited $rc on the session:" \
  "$(cat "$T/session.err")"
# Reply N is the lines before the marker __reply_N__ (and after the one
# before it); every marker must come, in order.
tr -d '\r' <"$T/session.out" | awk -v dir="$T" '
  BEGIN { next_n = 0 }
  /^__reply_[0-9]+__$/ {
    n = substr($0, 9) + 0
    if (n != next_n) { printf "marker %d where %d was due\n", n, next_n; exit 1 }
    printf "" >>(dir "/reply." n)
    close(dir "/reply." n)
    next_n++
    next
  }
  { print >>(dir "/reply." next_n); close(dir "/reply." next_n) }
  END { print next_n >(dir "/markers") }' ||
  fail "the session's replies are out of order: $(cat "$T/session.out")"
[ "$(cat "$T/markers")" -eq "${#cmds[@]}" ] ||
  fail "the session answered $(cat "$T/markers") of ${#cmds[@]} commands:" \
    "$(cat "$T/session.out")"
R=$T/reply
# An empty reply file stands for no line at all; an empty array shows as
# one empty line, so the two differ.
for i in "${!cmds[@]}"; do [ -e "$R.$i" ] || : >"$R.$i"; done

lease=$(sed -n 1p "$R.0")
lease_ok "$lease" 1000 ||
  fail "LOCK 1 k X: the lease's validity is '$lease', not 1..1000 ms"
expect_lines "LOCK 1 k X" "$R.0" "$lease" k "$tok1"
expect_lines "LOCKS (k held)" "$R.1" k X "$tok1" 1
sid=$(cat "$R.4")
is_int "$sid" || fail "SESSION ID answered '$sid'"
# HOLDERS: one holder (this session, X, k's token), no waiter.
expect_lines "HOLDERS k" "$R.2" "$sid" X "$tok1" ""
expect_lines "EXTEND 2000" "$R.3" 2000
expect_lines "CLIENT SETNAME me" "$R.5" OK
expect_lines "CLIENT GETNAME" "$R.6" me
cid=$(cat "$R.7")
is_int "$cid" || fail "CLIENT ID answered '$cid'"
# CLIENT LIST: a line per connection; ours names itself, its session and
# its one hold (the connections of earlier redis-cli runs may still be
# closing, so they are not counted).
grep -qxE "id=$cid addr=127\.0\.0\.1:[0-9]+ name=me age=[0-9]+ session=$sid holds=1 waiting=0 resp=2 user=default" \
  "$R.8" || fail "CLIENT LIST has no line for this connection: $(cat "$R.8")"
expect_lines "UNLOCK k" "$R.9" 1
expect_lines "LOCKS (none held)" "$R.10" ""
# EXTEND 2000 made the session's lease 2 s.
lease=$(sed -n 1p "$R.11")
lease_ok "$lease" 2000 ||
  fail "LOCK 2 a S b X: the lease's validity is '$lease', not 1..2000 ms"
expect_lines "LOCK 2 a S b X WAIT 0" "$R.11" "$lease" a "$tok1" b "$tok1"
expect_lines "UNLOCK (every lock)" "$R.12" 2
# Nothing waits: the graph has no edge (the bulk ends in a newline, and
# redis-cli adds one).
expect_lines "GRAPH DOT" "$R.13" "digraph waitfor {" "  rankdir=LR;" \
  "  node [shape=box];" "}" ""
expect_lines "GRAPH JSON" "$R.14" '{"edges": [], "waiting": []}' ""
# INFO locks: the section's header, then the fields this test knows, in
# order (a field added after them is allowed, if it is name:number; one
# removed, renamed or moved is not), then the blank line that ends the
# section. Three LOCKs were granted (acct, k, a+b), none waited or timed
# out; the counts of lock objects and releases depend on when the server
# saw the first redis-cli's connection close.
known=(lock_objects lock_waiting lock_acquired lock_released lock_waited
  lock_timeouts lock_wakeups lock_pokes lease_expiries)
awk -F: -v n="${#known[@]}" 'NR == 1 || NF == 0 { print; next }
  NF == 2 && $1 ~ /^[a-z_]+$/ && $2 ~ /^[0-9]+$/ {
    if (NR <= n + 1) print $1; else print "(a later field)"; next
  }
  { print "bad line: " $0 }' "$R.15" | uniq >"$R.15.fields"
if [ "$(wc -l <"$R.15")" -gt "$((${#known[@]} + 2))" ]; then
  expect_lines "INFO locks (its fields)" "$R.15.fields" "# Locks" \
    "${known[@]}" "(a later field)" ""
else
  expect_lines "INFO locks (its fields)" "$R.15.fields" "# Locks" \
    "${known[@]}" ""
fi
for want in lock_waiting:0 lock_acquired:3 lock_waited:0 lock_timeouts:0; do
  grep -qx "$want" "$R.15" || fail "INFO locks: no line '$want': $(cat "$R.15")"
done
released=$(sed -n 's/^lock_released://p' "$R.15")
[ "$released" -ge 3 ] ||
  fail "INFO locks: lock_released is $released, not at least 3 (k, a, b)"
# COMMAND COUNT: the entries of the server's table, from its source.
ncmds=$(awk '/^static const srv_cmd cmds\[\] = \{/ { t = 1; next }
  t && /^};/ { t = 0 } t && /^ *\{"[A-Z]+", *-?[0-9]+,/ { n++ }
  END { print n + 0 }' "$TABLE")
[ "$ncmds" -gt 0 ] || fail "found no entry in the command table of $TABLE"
expect_lines "COMMAND COUNT ($ncmds entries in $TABLE)" "$R.16" "$ncmds"
# HELLO 2: a flat array of the map's pairs; id is this connection's.
expect_lines "HELLO 2" "$R.17" server ordod version "$version" proto 2 id \
  "$cid" mode standalone role master modules ""
echo "ok: the session's ${#cmds[@]} replies, each as expected"

# QUIT answers OK and closes the connection: over a raw socket, the PING
# after it gets no answer, and the read ends (EOF) instead of timing out.
[ "$(cli QUIT)" = "OK" ] || fail "QUIT did not answer OK"
set +e
got=$(timeout "$((5 * MULT))" bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" &&
  printf "PING\r\nQUIT\r\nPING\r\n" >&3 && cat <&3' "$port" | od -An -c |
  tr -s ' \n' ' ')
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || fail "QUIT: the connection was not closed (status $rc)"
[ "$got" = " + P O N G \r \n + O K \r \n " ] ||
  fail "QUIT: PING QUIT PING over a socket gave '$got', not +PONG +OK"

# ---- Errors lead with their code ---------------------------------------------
r=$(cli NOSUCH 2>&1)
[ "$r" = "ERR unknown command 'NOSUCH' (COMMAND DOCS lists them)" ] ||
  fail "unknown command: $r"
r=$(cli LOCK 1 2>&1)
[[ "$r" == "ERR wrong number of arguments for 'LOCK' command: LOCK numkeys "* ]] ||
  fail "arity: $r"
r=$(cli AUTH x 2>&1)
[ "$r" = "ERR AUTH called without any password configured (ordod --requirepass)" ] ||
  fail "AUTH without a password: $r"

# A key held by another session: a try gets -TIMEOUT. The holder is a
# redis-cli kept open on a fifo until we are done.
fifo=$T/holder.fifo
mkfifo "$fifo"
timeout "$((20 * MULT))" "$CLI" -p "$port" <"$fifo" >"$T/holder.out" 2>&1 &
holder=$!
exec 3>"$fifo"
echo 'LOCK 1 t X' >&3
held=
for ((i = 0; i < 200 * MULT; i++)); do
  if [ -n "$(cli HOLDERS t | head -n 1)" ]; then
    held=1
    break
  fi
  sleep 0.02
done
[ -n "$held" ] || fail "the holder's LOCK 1 t X never showed in HOLDERS t"
r=$(cli LOCK 1 t X WAIT 0 2>&1)
[ "$r" = "TIMEOUT the keys are held; WAIT 0 tried once. Nothing is held for this LOCK" ] ||
  fail "a held key was not refused: $r"
# At EOF the holder's redis-cli ends: a bounded wait, then its status.
exec 3>&-
for ((i = 0; i < 100 * MULT; i++)); do
  kill -0 "$holder" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$holder" 2>/dev/null; then
  kill -KILL "$holder" 2>/dev/null || true
  wait "$holder" 2>/dev/null || true
  fail "the holder's redis-cli did not end within $((10 * MULT)) s of EOF"
fi
rc=0
wait "$holder" || rc=$?
[ "$rc" -eq 0 ] || fail "the holder's redis-cli exited $rc: $(cat "$T/holder.out")"
echo "ok: errors lead with their code; a held key gives TIMEOUT"

# HELLO 3 switches to RESP3: redis-cli -3 reads the reply as a map (a key
# and its value on one line). It must work: a failure fails the test.
set +e
r=$(timeout "$((10 * MULT))" "$CLI" -3 -p "$port" HELLO 3 2>&1)
rc=$?
set -e
[ "$rc" -eq 0 ] || fail "redis-cli -3 HELLO 3 exited $rc: $r"
printf '%s\n' "$r" >"$T/hello3"
id3=$(sed -n 's/^id //p' "$T/hello3")
is_int "$id3" || fail "HELLO 3 gives no id: $r"
expect_lines "HELLO 3 (a RESP3 map)" "$T/hello3" "server ordod" \
  "version $version" "proto 3" "id $id3" "mode standalone" "role master" \
  "modules "
echo "redis-cli session: every command answered as expected"
