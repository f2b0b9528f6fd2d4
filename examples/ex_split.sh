#!/usr/bin/env bash
# ex_split.sh BINARY ORDOD -- runs the expense-split example (split.c) on
# every backend and checks its exit status and its invariant line
# ("invariant: sum of balances 0, 50/50 balances equal a serial replay,
# N/N expenses applied once: OK"):
#   mem://       5000 expenses over 8 threads, with two seeds, and once
#                --json (one object, "ok": true, sum 0, all applied once);
#   ordod://     ORDOD started by tests/integration/ordod_fixture.sh;
#   redis://     one redis-server, redis_fixture.sh;
#   redlock://   three more redis-servers, a 1 s lease;
#   postgres://  a throw-away cluster, pg_fixture.sh (database split);
#   the remote ones with 1000 expenses (a round trip per lock and unlock);
# then the errors: a malformed URL exits 2 with one line naming the
# accepted forms, an unknown flag exits 2 too, --help 0, and a server
# that is not there exits 1.
# Expenses are scaled by ORDO_TEST_SCALE (0.5 under ASan, 0.25 under TSan).
# Every run is bounded by timeout; every server is stopped at exit.
set -euo pipefail
BIN=${1:?usage: $0 BINARY ORDOD}
ORDOD=${2:?usage: $0 BINARY ORDOD}
EX_NAME="split"
INVARIANT='^invariant: sum of balances 0, ([0-9]+)/\1 balances equal a serial replay, ([0-9]+)/\2 expenses applied once: OK$'
# shellcheck source=SCRIPTDIR/ex_lib.sh
. "$(dirname "$0")/ex_lib.sh"

MEM=$(scaled 5000)
REMOTE=$(scaled 1000)
check "mem:// seed 1" --expenses "$MEM" --seed 1
check "mem:// seed 2" --expenses "$MEM" --seed 2 --users 6 --threads 4
run 60 --expenses "$MEM" --json
[ "$RC" -eq 0 ] || fail "mem:// --json exited $RC"
python3 -c '
import json, sys
j = json.loads(sys.argv[1])
assert j["ok"] is True and j["example"] == "split", j
assert j["sum_cents"] == 0 and j["balances_off_replay"] == 0, j
assert j["applied"] == j["expenses"] and j["applied_twice"] == 0, j
print("ok: mem:// --json: %d expenses, %d cents spent, sum 0, \"ok\": true"
      % (j["applied"], j["spent_cents"]))' "$OUT" || fail "mem:// --json: not a passing object"

on_remote_backends --expenses "$REMOTE"

check_errors "redlock://127.0.0.1:1,127.0.0.1:1" "ordod://127.0.0.1:1" --threads 2 --expenses 2
