#!/usr/bin/env bash
# bank_ordod.sh ORDOD ORDO -- `ordo bank` over ordod:// with 8 workers, each
# a txn of its own and so a connection and a server session of its own: the
# check passes, and the server saw at least those 8 connections. The run
# is bounded by timeout and --watchdog (each times ORDO_TEST_TIMEOUT_MULT);
# the fixture fails the test if ordod does not stop cleanly or a sanitizer
# reports.
set -euo pipefail
. "$(dirname "$0")/ordod_fixture.sh"
ordod_start "${1:?usage: $0 ORDOD ORDO}"
ORDO=${2:?usage: $0 ORDOD ORDO}
out=$ORDOD_DIR/bank.json
err=$ORDOD_DIR/bank.err
fail() {
  echo "FAIL: $*" >&2
  cat "$out" "$err" >&2 2>/dev/null || true
  exit 1
}
set +e
timeout "$((30 * MULT))" "$ORDO" bank \
  --backend "ordod://127.0.0.1:$ORDOD_PORT" --workers 8 --json \
  --watchdog "$((20 * MULT))" >"$out" 2>"$err"
rc=$?
set -e
[ "$rc" -eq 0 ] || fail "ordo bank exited $rc"
python3 - "$out" <<'PY' || fail "the JSON does not show a passing run"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ok"] is True, j["verdict"]
assert j["workers"] == 8
assert j["backend"].startswith("ordod://")
assert j["transfers"] == j["transfers_expected"] == 2000
assert j["deadlocks"] == 0 and j["violations"] == 0
print("ok: %s, %d transfers, %.0f/s" % (j["verdict"], j["transfers"],
                                        j["transfers_per_s"]))
PY
conns=$(ordod_cmd INFO clients | tr -d '\r' |
  sed -n 's/^total_connections_received://p')
[ "${conns:-0}" -ge 8 ] ||
  fail "the server saw ${conns:-no} connections, expected one per worker (8)"
echo "ok: the server saw $conns connections"
