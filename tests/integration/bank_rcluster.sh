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
# The bank's keys are acct:%08d (src/cli/bank_ordo.c): the 16 of them
# must lie on all 3 primaries. One CLUSTER NODES, and each key's slot by
# CLUSTER KEYSLOT in one redis-cli pipe.
cnodes=$(rcluster_cli "${RC_PORTS[0]}" CLUSTER NODES)
slots=$(for ((i = 0; i < 16; i++)); do
  printf 'CLUSTER KEYSLOT acct:%08d\n' "$i"
done | rcluster_cli "${RC_PORTS[0]}")
n=$(python3 -c '
import sys
nodes, slots = sys.argv[1], [int(x) for x in sys.argv[2].split()]
owner = {}
for line in nodes.splitlines():
    f = line.split()
    if len(f) < 9 or "master" not in f[2]:
        continue
    for r in f[8:]:
        if r.startswith("["):
            continue
        lo, _, hi = r.partition("-")
        for s in range(int(lo), int(hi or lo) + 1):
            owner[s] = f[0]
assert len(slots) == 16, slots
print(len({owner[s] for s in slots}))
' "$cnodes" "$slots") || fail "cannot tell the accounts' primaries"
[ "$n" -eq 3 ] || fail "the 16 accounts lie on $n primaries, not 3"
set +e
timeout "$((80 * MULT))" "$ORDO" bank --backend "$url" --accounts 16 \
  --transfers 300 --json --watchdog 60 >"$out" 2>"$err"
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
