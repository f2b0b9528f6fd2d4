#!/usr/bin/env bash
# ex_philosophers.sh BINARY ORDOD -- runs the dining philosophers example
# (philosophers.c) on every backend and checks its exit status and its
# invariant line ("invariant: no fork held by two diners at once (0 seen),
# every diner ate (fewest meals N), no deadlock: OK"), N being every
# diner's full count of meals:
#   mem://       5 diners, 100 meals each; 7 diners for 1 s (--meals 0
#                --seconds 1: every diner ate at least once); and 2 diners
#                (both want the same two forks) with --json (one object,
#                "ok": true, no fork violation, every diner's meals);
#   ordod://     ORDOD started by tests/integration/ordod_fixture.sh;
#   redis://     one redis-server, redis_fixture.sh;
#   redlock://   three more redis-servers, a 1 s lease;
#   postgres://  a throw-away cluster, pg_fixture.sh (database philosophers);
#   the remote ones with 5 diners and 50 meals each;
# then the errors: a malformed URL exits 2 with one line naming the
# accepted forms, an unknown flag exits 2 too, --help 0, and a server
# that is not there exits 1.
# Meals are scaled by ORDO_TEST_SCALE (0.5 under ASan, 0.25 under TSan).
# Every run is bounded by timeout; every server is stopped at exit.
set -euo pipefail
BIN=${1:?usage: $0 BINARY ORDOD}
ORDOD=${2:?usage: $0 BINARY ORDOD}
EX_NAME=philosophers
# fewest R: the invariant line with R (a regular expression) as the
# fewest meals of a diner.
fewest() {
  INVARIANT="^invariant: no fork held by two diners at once \\(0 seen\\), every diner ate \\(fewest meals $1\\), no deadlock: OK\$"
}
# shellcheck source=SCRIPTDIR/ex_lib.sh
. "$(dirname "$0")/ex_lib.sh"

MEM=$(scaled 100)
REMOTE=$(scaled 50)
fewest "$MEM"; check "mem://" --meals "$MEM"
fewest "[1-9][0-9]*"; check "mem:// 7 diners for 1 s" --diners 7 --meals 0 \
  --seconds 1 --seed 2
run 60 --diners 2 --meals "$MEM" --json
[ "$RC" -eq 0 ] || fail "mem:// --json exited $RC"
python3 -c '
import json, sys
j = json.loads(sys.argv[1])
n = int(sys.argv[2])
assert j["ok"] is True and j["example"] == "philosophers", j
assert j["meals"] == [n, n] and j["fork_violations"] == 0, j
assert j["peak_eating"] == 1 and not j["stalled"] and j["errors"] == 0, j
print("ok: mem:// --json: 2 diners, %d meals each, longest waits %s us, "
      "\"ok\": true" % (n, j["max_wait_us"]))' "$OUT" "$MEM" ||
  fail "mem:// --json: not a passing object"

fewest "$REMOTE"
on_remote_backends --meals "$REMOTE"

check_errors "mem:/" "postgres://ordo:secret@127.0.0.1:1/nothing" --meals 1
