#!/usr/bin/env bash
# redlock_bank.sh ORDO -- `ordo bank` over redlock:// with 3 real
# redis-server nodes: the check passes and every transfer is done.
set -euo pipefail
. "$(dirname "$0")/redis_fixture.sh"
ORDO=${1:?usage: $0 ORDO}
redis_start_nodes 3
url=$(redlock_url "?lease_ms=1000")
out=$REDIS_DIR/bank.json
err=$REDIS_DIR/bank.err
fail() {
  echo "FAIL: $*" >&2
  cat "$out" "$err" >&2 2>/dev/null || true
  exit 1
}
set +e
timeout 80 "$ORDO" bank --backend "$url" --json --watchdog 60 >"$out" 2>"$err"
rc=$?
set -e
[ "$rc" -eq 0 ] || fail "ordo bank exited $rc"
python3 - "$out" <<'PY' || fail "the JSON does not show a passing run"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ok"] is True, j["verdict"]
assert j["backend"].startswith("redlock://")
assert j["transfers"] == j["transfers_expected"]
assert j["deadlocks"] == 0 and j["violations"] == 0
print("ok: %s, %d transfers, %.0f/s, p99 %.1f ms" % (
    j["verdict"], j["transfers"], j["transfers_per_s"], j["p99_us"] / 1000))
PY
