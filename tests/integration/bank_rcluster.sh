#!/usr/bin/env bash
# bank_rcluster.sh ORDO -- `ordo bank` over redis-cluster:// on a real
# 3-primary, 3-replica cluster (rcluster_fixture.sh), with 16 accounts
# whose keys are checked to lie on all 3 primaries, so that transfers take
# keys of two slots (two script calls, in slot order) and often of two
# primaries: the check passes and every transfer is done.
set -euo pipefail
. "$(dirname "$0")/rcluster_fixture.sh"
ORDO=${1:?usage: $0 ORDO}
rcluster_start
url=$(rcluster_url "?lease_ms=1000")
out=$REDIS_DIR/bank.json
err=$REDIS_DIR/bank.err
fail() {
  echo "FAIL: $*" >&2
  cat "$out" "$err" >&2 2>/dev/null || true
  exit 1
}
# The bank's keys are acct:%08d (src/cli/bank_ordo.c): which primaries
# serve the 16 of them.
declare -A prim=()
for ((i = 0; i < 16; i++)); do
  slot=$(rcluster_cli "${RC_PORTS[0]}" CLUSTER KEYSLOT "$(printf 'acct:%08d' "$i")")
  pid=$(rcluster_primary_pid "$slot") || fail "no primary for slot $slot"
  prim[$pid]=1
done
[ "${#prim[@]}" -eq 3 ] || fail "the 16 accounts lie on ${#prim[@]} primaries, not 3"
set +e
timeout "$((80 * MULT))" "$ORDO" bank --backend "$url" --accounts 16 \
  --transfers 1000 --json --watchdog 60 >"$out" 2>"$err"
rc=$?
set -e
[ "$rc" -eq 0 ] || fail "ordo bank exited $rc"
python3 - "$out" <<'PY' || fail "the JSON does not show a passing run"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ok"] is True, j["verdict"]
assert j["backend"].startswith("redis-cluster://")
assert j["accounts"] == 16
assert j["transfers"] == j["transfers_expected"]
assert j["deadlocks"] == 0 and j["violations"] == 0
print("ok: %s, %d transfers, %.0f/s, p99 %.1f ms" % (
    j["verdict"], j["transfers"], j["transfers_per_s"], j["p99_us"] / 1000))
PY
