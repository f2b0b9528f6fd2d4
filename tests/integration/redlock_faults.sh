#!/usr/bin/env bash
# redlock_faults.sh ORDO -- redlock:// on 5 real redis-server nodes
# (redis_fixture.sh), 1 s lease, every wait bounded:
#  1. SIGKILL two nodes in the middle of an `ordo bank` run: it completes
#     and the balance holds (3 of 5 is still a majority);
#  2. SIGKILL a third: `ordo bank` stops with ORDO_EQUORUM ("no quorum")
#     and no key of ours is left on the two nodes still up.
set -euo pipefail
. "$(dirname "$0")/redis_fixture.sh"
ORDO=${1:?usage: $0 ORDO}
redis_start_nodes 5
ports=("${REDIS_PORTS[@]}")
pids=("${REDIS_PIDS[@]}")
url=$(redlock_url "?lease_ms=1000&timeout_ms=2000")
work=$REDIS_DIR
fail() {
  echo "FAIL: $*" >&2
  cat "$work"/*.json "$work"/*.err >&2 2>/dev/null || true
  exit 1
}

# 1. Two nodes die mid-run.
timeout 80 "$ORDO" bank --backend "$url" --accounts 20 --transfers 3000 \
  --json --watchdog 60 >"$work/kill2.json" 2>"$work/kill2.err" &
bank=$!
sleep 0.5
kill -KILL "${pids[1]}" "${pids[3]}"
set +e
wait "$bank"
rc=$?
set -e
[ "$rc" -eq 0 ] || fail "ordo bank exited $rc after two nodes died"
python3 - "$work/kill2.json" <<'PY' || fail "the run with 2 of 5 nodes dead"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ok"] is True, j["verdict"]
assert j["total_before"] == j["total_after"]
assert j["transfers"] == j["transfers_expected"]
print("ok: 2 of 5 killed mid-run: %s" % j["verdict"])
PY

# 2. A third dies: no quorum.
kill -KILL "${pids[2]}"
set +e
timeout 60 "$ORDO" bank --backend "$url" --accounts 20 --transfers 8 \
  --attempts 1 --json --watchdog 50 >"$work/kill3.json" 2>"$work/kill3.err"
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "ordo bank passed without a quorum"
grep -q 'EQUORUM\|no quorum' "$work/kill3.json" "$work/kill3.err" ||
  fail "ordo bank did not report ORDO_EQUORUM"
echo "ok: 3 of 5 killed: $(grep -o '"verdict": "[^"]*"' "$work/kill3.json")"
for i in 0 4; do
  left=$(timeout 5 redis-cli -p "${ports[$i]}" --scan --pattern '*' |
    grep -v ':ordo:fence$' || true)
  [ -z "$left" ] || fail "node ${ports[$i]} still has lock keys: $left"
done
echo "ok: no lock key left on the nodes still up"
