#!/usr/bin/env bash
# lock.sh ORDOD ORDO -- `ordo lock` against a real ordod (ordod_fixture.sh,
# 1 s lease): the command sees ORDO_FENCES; the exit statuses 0 (and the
# command's own), 75, 64 and 69; --wait 0 on a held key gives 75 at once;
# the keys are released however the command ends; SIGTERM, SIGHUP and
# SIGINT reach the command; a lost lease (the server stopped with SIGSTOP)
# gets the command SIGTERM and exit 75, or lets it run with
# --keep-running. Every run of ordo is bounded by `timeout 20`, and every
# wait for a process by a bounded poll, each bound times
# ORDO_TEST_TIMEOUT_MULT ($MULT, from the fixture). The fixture's EXIT trap
# lets a server the lease test stopped (SIGSTOP) go on, stops it, and fails
# the test if it did not exit 0 or a sanitizer reported.
set -euo pipefail
. "$(dirname "$0")/ordod_fixture.sh"
ordod_start "${1:?usage: $0 ORDOD ORDO}"
ORDO=${2:?usage: $0 ORDOD ORDO}
U=ordod://127.0.0.1:$ORDOD_PORT
T=$ORDOD_DIR/t
mkdir "$T"
OUT=$T/out
ERR=$T/err

fail() {
  echo "FAIL: $*" >&2
  for f in "$OUT" "$ERR"; do
    [ -s "$f" ] && { echo "--- $f:" >&2; head -c 4000 "$f" >&2; }
  done
  echo "--- ordod's stderr:" >&2
  ordod_log >&2
  exit 1
}

# run ARGS...: ordo ARGS with stdout in $OUT, stderr in $ERR, status in $RC.
run() {
  set +e
  timeout "$((20 * MULT))" "$ORDO" "$@" >"$OUT" 2>"$ERR" </dev/null
  RC=$?
  set -e
  [ "$RC" -ne 124 ] || fail "ordo $* did not finish within $((20 * MULT)) s"
}

expect_rc() {
  [ "$RC" -eq "$1" ] || fail "${*:2}: exit status $RC, expected $1"
}

# wait_file PATH: a bounded wait (10 s) for a file the command creates once
# it is ready (its traps set).
wait_file() {
  local i
  for ((i = 0; i < 200 * MULT; i++)); do
    [ -e "$1" ] && return 0
    sleep 0.05
  done
  fail "the command never created $1"
}

# wait_exit PID: a bounded wait (15 s) for a background ordo to end; its
# status in $RC. Past the bound it is killed (so that the failure leaves
# nothing behind) and the test fails.
wait_exit() {
  local i
  for ((i = 0; i < 300 * MULT; i++)); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.05
  done
  if kill -0 "$1" 2>/dev/null; then
    kill -KILL "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    fail "ordo lock (pid $1) still ran after $((15 * MULT)) s"
  fi
  set +e
  wait "$1"
  RC=$?
  set -e
}

# free KEY...: another `ordo lock --wait 0` gets the keys at once.
free() {
  run lock --backend "$U" --wait 0 "$@" -- true
  expect_rc 0 "the keys $* should be free again"
}

# ---- ORDO_FENCES and the command's status ----------------------------------
run lock --backend "$U" 'b key' a:1 "$(printf 'c\303\251')" a:1 -- \
  sh -c 'printf "%s" "$ORDO_FENCES" > "$0"; exit 3' "$T/fences"
expect_rc 3 "the command's own status"
fences=$(cat "$T/fences")
[[ "$fences" =~ ^a:1=[0-9]+\ b%20key=[0-9]+\ c%C3%A9=[0-9]+$ ]] ||
  fail "ORDO_FENCES is '$fences', expected a:1=N b%20key=N c%C3%A9=N"
free a:1 'b key'
# Tokens grow with every grant of a key.
run lock --backend "$U" a:1 -- sh -c 'printf "%s" "$ORDO_FENCES" > "$0"' \
  "$T/fences2"
expect_rc 0 "a second grant"
t1=${fences%% *}
t1=${t1#a:1=}
t2=$(cat "$T/fences2")
t2=${t2#a:1=}
[ "$t2" -gt "$t1" ] || fail "the token of a:1 went from $t1 to $t2"
echo "ok: ORDO_FENCES='$fences'; exit status passed through"

# $ORDO_URL is the default backend.
set +e
ORDO_URL=$U timeout "$((20 * MULT))" "$ORDO" lock k -- true >"$OUT" 2>"$ERR"
RC=$?
set -e
expect_rc 0 "ordo lock with \$ORDO_URL"

# ---- Held keys: --wait 0 and --wait MS give 75 -----------------------------
run lock --backend "$U" k1 k2 -- \
  "$ORDO" lock --backend "$U" --wait 0 k2 k3 -- true
expect_rc 75 "--wait 0 on a held key (the inner ordo lock's status)"
grep -q "held elsewhere" "$ERR" || fail "no line says the keys are held"
start=$(date +%s%N)
run lock --backend "$U" k1 -- "$ORDO" lock --backend "$U" --wait 300 k1 -- true
ms=$((($(date +%s%N) - start) / 1000000))
expect_rc 75 "--wait 300 on a held key"
[ "$ms" -ge 300 ] || fail "--wait 300 gave up after $ms ms"
free k1 k2 k3
echo "ok: held keys give 75 (--wait 0 at once, --wait 300 after ${ms} ms)"

# ---- Usage (64) and an unreachable backend (69) ----------------------------
for args in "k" "-- true" "k --" "--wait x k -- true" "--bogus k -- true" \
  "--backend mem:// --ttl 100 k -- true" "--backend ordod://h:x k -- true" \
  "--ttl 5 k -- true"; do
  # shellcheck disable=SC2086
  run lock $args
  expect_rc 64 "ordo lock $args"
  [ "$(wc -l <"$ERR")" -eq 1 ] || fail "ordo lock $args: not one line"
  [ ! -s "$OUT" ] || fail "ordo lock $args wrote on stdout"
done
run lock --backend "ordod://$T/no-such-socket" k -- true
expect_rc 69 "an unreachable backend (a Unix socket that is not there)"
grep -q "cannot reach" "$ERR" || fail "no line says the backend is unreachable"
run lock --backend "$U" k -- "$T/no-such-command"
expect_rc 127 "a command that is not there"
free k
run lock --help
expect_rc 0 "ordo lock --help"
grep -q -- "--keep-running" "$OUT" || fail "--help does not name --keep-running"
echo "ok: usage errors give 64, an unreachable backend 69"

# ---- The keys are released however the command ends -----------------------
run lock --backend "$U" r1 r2 -- sh -c 'kill -KILL $$'
expect_rc 137 "a command killed by SIGKILL (128 + 9)"
free r1 r2
run lock --backend "$U" --ttl 300 r1 -- sleep 1
expect_rc 0 "a command that outlives a 300 ms lease (renewed meanwhile)"
free r1
echo "ok: keys released after the command, a 300 ms lease renewed for 1 s"

# ---- Signals are passed on -------------------------------------------------
# Job control on: without it a background command starts with SIGINT
# ignored, and a shell cannot trap a signal ignored on entry.
set -m
for sig in TERM HUP INT; do
  rm -f "$T/ready"
  # The command traps sig and exits 7; `wait` returns when a trapped
  # signal comes. Its sleep goes with it.
  "$ORDO" lock --backend "$U" s1 -- sh -c \
    'trap "kill \$s; exit 7" '"$sig"'; sleep 30 & s=$!; touch "$0"; wait $s' \
    "$T/ready" >"$OUT" 2>"$ERR" </dev/null &
  pid=$!
  wait_file "$T/ready"
  kill -"$sig" "$pid"
  wait_exit "$pid"
  expect_rc 7 "SIG$sig to ordo lock (the command traps it and exits 7)"
  free s1
done
set +m
echo "ok: SIGTERM, SIGHUP and SIGINT reach the command; keys released"

# ---- A lost lease ----------------------------------------------------------
# Stopping the server stops its replies: the next EXTEND times out (two
# thirds of the 1 s lease), the lease is lost, the command gets SIGTERM.
rm -f "$T/ready" "$T/got"
"$ORDO" lock --backend "$U" l1 -- sh -c \
  'trap "echo TERM > \$0.got; kill \$s; exit 9" TERM; sleep 30 & s=$!;
   touch "$0"; wait $s' "$T/ready" >"$OUT" 2>"$ERR" </dev/null &
pid=$!
wait_file "$T/ready"
kill -STOP "$ORDOD_PID"
wait_exit "$pid"
kill -CONT "$ORDOD_PID"
expect_rc 75 "a lost lease"
[ -s "$T/ready.got" ] || fail "the command did not get SIGTERM"
grep -q "lease was lost" "$ERR" || fail "no line says the lease was lost"
free l1
# With --keep-running the command runs on to its end; the status is 75.
rm -f "$T/ready" "$T/ready.got"
"$ORDO" lock --backend "$U" --keep-running l1 -- sh -c \
  'trap "echo TERM > \$0.got; exit 9" TERM; touch "$0"; sleep 2' \
  "$T/ready" >"$OUT" 2>"$ERR" </dev/null &
pid=$!
wait_file "$T/ready"
kill -STOP "$ORDOD_PID"
wait_exit "$pid"
kill -CONT "$ORDOD_PID"
expect_rc 75 "a lost lease with --keep-running"
[ ! -e "$T/ready.got" ] || fail "--keep-running: the command got SIGTERM"
grep -q "runs on" "$ERR" || fail "no line says the command runs on"
free l1
echo "ok: a lost lease stops the command (75), or not with --keep-running"
