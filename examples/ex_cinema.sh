#!/usr/bin/env bash
# ex_cinema.sh BINARY ORDOD -- runs the cinema example (cinema.c) on every
# backend and checks its exit status and its invariant line ("invariant:
# every seat sold at most once, N sold = N reported: OK"):
#   mem://       200 seats and 32 buyers, with two seeds, and once --json
#                (one object, "ok": true, sold = reported, nothing twice);
#   ordod://     ORDOD started by tests/integration/ordod_fixture.sh;
#   redis://     one redis-server, redis_fixture.sh;
#   redlock://   three more redis-servers, a 1 s lease;
#   postgres://  a throw-away cluster, pg_fixture.sh (database cinema);
# then the errors: a malformed URL exits 2 with one line naming the
# accepted forms, an unknown flag exits 2 too, --help 0, and a server
# that is not there exits 1.
# Buyers are scaled by ORDO_TEST_SCALE (0.5 under ASan, 0.25 under TSan).
# Every run is bounded by timeout; every server is stopped at exit.
set -euo pipefail
BIN=${1:?usage: $0 BINARY ORDOD}
ORDOD=${2:?usage: $0 BINARY ORDOD}
EX_NAME=cinema
INVARIANT='^invariant: every seat sold at most once, ([0-9]+) sold = \1 reported: OK$'
# shellcheck source=SCRIPTDIR/ex_lib.sh
. "$(dirname "$0")/ex_lib.sh"

BUYERS=$(scaled 32)
check "mem:// seed 1" --buyers "$BUYERS" --seed 1
check "mem:// seed 2" --buyers "$BUYERS" --seed 2 --map
run 60 --buyers "$BUYERS" --json
[ "$RC" -eq 0 ] || fail "mem:// --json exited $RC"
python3 -c '
import json, sys
j = json.loads(sys.argv[1])
assert j["ok"] is True and j["example"] == "cinema", j
assert j["sold"] == j["reported"] > 0 and j["sold_twice"] == 0, j
assert j["disagreements"] == 0 and j["errors"] == 0, j
print("ok: mem:// --json: %d seats sold to %d buyers, \"ok\": true"
      % (j["sold"], j["served"]))' "$OUT" || fail "mem:// --json: not a passing object"

on_remote_backends --buyers "$BUYERS"

check_errors "ordod://127.0.0.1:notaport" "redis://127.0.0.1:1" --buyers 2
