#!/usr/bin/env bash
# progress.sh -- no progress bar when stderr is not a terminal (no '\r' in
# it); a bar when it is, checked under script(1) when that is installed.
. "$(dirname "$0")/lib.sh"

run bank --transfers 20000 --watchdog "$WD"
expect_rc 0 bank --transfers 20000 --watchdog "$WD"
if grep -q $'\r' "$ERR"; then fail "a progress bar was drawn on a non-terminal"; fi
[ ! -s "$ERR" ] || fail "a passing run wrote to stderr"

# The terminal case needs script(1) and a working pseudo-terminal; probe
# both, and skip only that case when either is missing.
if ! command -v script >/dev/null 2>&1 ||
  ! timeout 10 script -qec true /dev/null >/dev/null 2>&1 </dev/null; then
  echo "ok: no bar off a terminal (no script(1) or pty: terminal case skipped)"
  exit 0
fi
# script(1) gives ordo a pseudo-terminal and copies everything it writes.
set +e
timeout "$TMO" script -qec "'$ORDO' bank --watchdog $WD" /dev/null >"$OUT" 2>"$ERR" </dev/null
RC=$?
set -e
expect_rc 0 "bank (under script)"
grep -q $'\rbank \[' "$OUT" || fail "no progress bar on a terminal"
grep -q '^verdict: OK' "$OUT" || fail "no OK verdict on a terminal"
echo "ok: no bar off a terminal, a bar on one"
