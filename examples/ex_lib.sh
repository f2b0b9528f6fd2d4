#!/usr/bin/env bash
# ex_lib.sh -- what the examples' test scripts share (ex_cinema.sh,
# ex_split.sh, ex_philosophers.sh; ex_pool_join.sh and ex_foreign_pool.sh
# use only fail, run and the fixtures' MULT). Sourced after setting:
#   BIN        the example's binary       EX_NAME  its name (for messages)
#   ORDOD      the build's ordod          INVARIANT  an extended regular
#                                         expression its passing invariant
#                                         line must match (may be changed
#                                         between checks)
# It sources the fixtures of tests/integration, makes $TMP, and stops every
# server it started at exit. Functions:
#   fail MSG             prints MSG, the last run's stdout and stderr; exit 1
#   start FN ARGS...     runs a fixture's start function (ordod_start, ...)
#   scaled N             N times ORDO_TEST_SCALE, at least 2
#   run SECONDS ARGS...  the example, bounded; sets RC, OUT, TOOK
#   check NAME ARGS...   a run that must exit 0 with the invariant line
#   on_remote_backends ARGS...
#                        check on ordod://, redis://, redlock:// (3 nodes,
#                        1 s lease) and postgres:// (database $EX_NAME),
#                        each started here, with ARGS after --backend
#   check_errors BAD_URL ABSENT_URL ARGS...
#                        a malformed URL exits 2 with one line naming the
#                        accepted forms; an unknown flag 2; --help 0; a
#                        server that is not there (ABSENT_URL, with ARGS)
#                        exits 1, saying what to check, no password shown
FIX=$(cd "$(dirname "${BASH_SOURCE[0]}")/../tests/integration" && pwd)
# shellcheck source=SCRIPTDIR/../tests/integration/ordod_fixture.sh
. "$FIX/ordod_fixture.sh"
# shellcheck source=SCRIPTDIR/../tests/integration/redis_fixture.sh
. "$FIX/redis_fixture.sh"
# shellcheck source=SCRIPTDIR/../tests/integration/pg_fixture.sh
. "$FIX/pg_fixture.sh"

TMP=$(mktemp -d)
# Every server is stopped and the folder removed whatever happened; an
# ordod that did not stop cleanly (ordod_stop returns 1: a nonzero exit, or
# a sanitizer report in its log) then fails a run that had passed.
ex_cleanup() {
  local rc=$? stopped=0
  ordod_stop || stopped=1
  redis_stop_all
  pg_stop_all
  rm -rf "$TMP"
  if [ "$stopped" -ne 0 ] && { [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ]; }; then
    rc=1
  fi
  exit "$rc"
}
trap ex_cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  echo "--- stdout:" >&2
  printf '%s\n' "${OUT:-}" >&2
  echo "--- stderr:" >&2
  cat "$TMP/err" >&2 2>/dev/null || true
  exit 1
}

# The fixtures each set an EXIT trap of their own, which would forget the
# other servers: put ours back, which stops them all.
start() {
  if ! "$@"; then
    trap ex_cleanup EXIT
    fail "$* failed"
  fi
  trap ex_cleanup EXIT
}

scaled() {
  awk -v n="$1" -v s="${ORDO_TEST_SCALE:-1}" \
    'BEGIN { v = int(n * s); print (v < 2 ? 2 : v) }'
}

run() {
  local secs=$1 t0
  shift
  t0=$EPOCHREALTIME
  RC=0
  OUT=$(timeout -k 5 "$secs" "$BIN" "$@" 2>"$TMP/err" </dev/null) || RC=$?
  TOOK=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
  [ "$RC" -ne 124 ] || fail "$EX_NAME $*: did not finish within $secs s"
}

check() {
  local name=$1 line
  shift
  run 60 "$@"
  [ "$RC" -eq 0 ] || fail "$name: $EX_NAME $* exited $RC"
  grep -qE "$INVARIANT" <<< "$OUT" || fail "$name: no passing invariant line"
  line=$(grep '^invariant:' <<< "$OUT")
  echo "ok: $name in $TOOK s: ${line#invariant: }"
}

on_remote_backends() {
  start ordod_start "$ORDOD"
  check "ordod://" --backend "ordod://127.0.0.1:$ORDOD_PORT" "$@"
  start redis_start
  check "redis://" --backend "redis://127.0.0.1:$REDIS_PORT" "$@"
  start redis_start_nodes 3
  check "redlock://" --backend "$(redlock_url "?lease_ms=1000")" "$@"
  start pg_start
  start pg_createdb "$EX_NAME"
  check "postgres://" --backend "$(pg_url "$EX_NAME")" "$@"
}

check_errors() {
  local bad=$1 absent=$2
  shift 2
  run 10 --backend "$bad"
  [ "$RC" -eq 2 ] || fail "a malformed URL exited $RC, not 2"
  grep -q "accepted forms are mem://" "$TMP/err" ||
    fail "a malformed URL: stderr does not name the accepted forms"
  [ "$(wc -l < "$TMP/err")" -eq 1 ] || fail "a malformed URL: not one line"
  echo "ok: a malformed URL exits 2: $(cat "$TMP/err")"
  run 10 --no-such-flag
  [ "$RC" -eq 2 ] || fail "an unknown flag exited $RC, not 2"
  run 10 --help
  [ "$RC" -eq 0 ] || fail "--help exited $RC"
  grep -q -- "--backend URL" <<< "$OUT" || fail "--help does not name --backend"
  echo "ok: an unknown flag exits 2, --help 0"
  run 20 --backend "$absent" "$@"
  [ "$RC" -eq 1 ] || fail "a server that is not there: exit $RC, not 1"
  grep -q "check that its server is running" "$TMP/err" ||
    fail "a server that is not there: stderr does not say what to check"
  ! grep -q secret "$TMP/err" || fail "the password shows in an error line"
  echo "ok: a server that is not there exits 1, no password shown"
}
