#!/usr/bin/env bash
# progress.sh -- no progress bar when stderr is not a terminal (no '\r' in
# it); a bar when it is, checked under script(1). Only a machine without
# script(1) or without a pseudo-terminal skips (lib.sh's skip, exit 77), and
# then only after the non-terminal case has passed; where both are present
# the terminal case runs, and any failure of it fails the test.
. "$(dirname "$0")/lib.sh"

run bank --transfers 20000 --watchdog "$WD"
expect_rc 0 bank --transfers 20000 --watchdog "$WD"
if grep -q $'\r' "$ERR"; then fail "a progress bar was drawn on a non-terminal"; fi
[ ! -s "$ERR" ] || fail "a passing run wrote to stderr"

# The terminal case needs script(1) and a pseudo-terminal. Each is probed on
# its own, so the skip names the one that is missing; python3 (which lib.sh
# needs anyway) opens a pty pair the way script(1) does.
command -v script >/dev/null 2>&1 ||
  skip "no script(1) on this machine: the terminal case cannot run"
python3 -c 'import os; os.openpty()' 2>/dev/null ||
  skip "no pseudo-terminal on this machine (os.openpty() fails): the terminal case cannot run"
# script(1) gives ordo a pseudo-terminal and copies everything it writes.
set +e
timeout "$TMO" script -qec "'$ORDO' bank --watchdog $WD" /dev/null >"$OUT" 2>"$ERR" </dev/null
RC=$?
set -e
[ "$RC" -ne 124 ] || fail "bank under script(1) did not finish within $TMO s"
expect_rc 0 "bank (under script)"
grep -q $'\rbank \[' "$OUT" || fail "no progress bar on a terminal"
grep -q '^verdict: OK' "$OUT" || fail "no OK verdict on a terminal"
echo "ok: no bar off a terminal, a bar on one"
