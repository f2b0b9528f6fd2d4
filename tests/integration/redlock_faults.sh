#!/usr/bin/env bash
# redlock_faults.sh ORDO -- redlock:// on 5 real redis-server nodes
# (redis_fixture.sh), 1 s lease, every wait bounded:
#  1. SIGKILL two nodes in the middle of an `ordo bank` run (once the nodes'
#     script counts show it under way, and a survivor's show it went on
#     after): it completes and the balance holds (3 of 5 is still a
#     majority);
#  2. SIGKILL a third: `ordo bank` stops with ORDO_EQUORUM ("no quorum")
#     and no key of ours is left on the two nodes still up (a scan that
#     answered, listing the fencing counters and nothing else).
# Every bound grows with ORDO_TEST_TIMEOUT_MULT ($MULT, from mult.sh).
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

# evalsha PORT: how many EVALSHA calls (the ACQUIRE and RELEASE scripts)
# the node on PORT has run, from INFO commandstats; fails the test if the
# node does not answer.
evalsha() {
  local out
  out=$(timeout "$((5 * MULT))" "$REDIS_CLI" -p "$1" INFO commandstats) ||
    fail "INFO commandstats on node $1 failed"
  out=$(tr -d '\r' <<< "$out" |
    sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\),.*/\1/p')
  echo "${out:-0}"
}

# 1. Two nodes die mid-run. The kill waits (bounded) for the run to be
# under way: both nodes to be killed have run at least 100 of its scripts
# (of about 14,000: 6,000 transfers, each an ACQUIRE and a RELEASE on every
# node). Afterwards a survivor must have run scripts after the kill, which
# shows the run was still going when the nodes died.
timeout -k 5 "$((80 * MULT))" "$ORDO" bank --backend "$url" --accounts 20 \
  --transfers 3000 --json --watchdog "$((60 * MULT))" \
  >"$work/kill2.json" 2>"$work/kill2.err" &
bank=$!
under_way=
end=$((SECONDS + 10 * MULT))
while [ "$SECONDS" -lt "$end" ] && kill -0 "$bank" 2>/dev/null; do
  c1=$(evalsha "${ports[1]}")
  c3=$(evalsha "${ports[3]}")
  if [ "$c1" -ge 100 ] && [ "$c3" -ge 100 ]; then
    under_way=1
    break
  fi
  sleep 0.01
done
if [ -z "$under_way" ]; then
  kill -KILL "$bank" 2>/dev/null || true
  wait "$bank" 2>/dev/null || true
  fail "ordo bank did not get under way (100 scripts on nodes" \
    "${ports[1]} and ${ports[3]}) before it ended or within $((10 * MULT)) s"
fi
kill -KILL "${pids[1]}" "${pids[3]}"
at_kill=$(evalsha "${ports[0]}")
kill -0 "$bank" 2>/dev/null ||
  fail "ordo bank had ended by the time the two nodes were killed"
# The bank is bounded by its timeout (SIGKILL 5 s after its SIGTERM) and
# its watchdog inside it, so this wait is bounded too.
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
after=$(evalsha "${ports[0]}")
[ "$after" -gt "$at_kill" ] ||
  fail "node ${ports[0]} ran no script after the kill ($at_kill before," \
    "$after after): the run was over when the nodes died"
echo "ok: the run went on after the kill: node ${ports[0]} ran" \
  "$((after - at_kill)) more scripts"

# 2. A third dies: no quorum.
kill -KILL "${pids[2]}"
set +e
timeout "$((60 * MULT))" "$ORDO" bank --backend "$url" --accounts 20 \
  --transfers 8 --attempts 1 --json --watchdog "$((50 * MULT))" \
  >"$work/kill3.json" 2>"$work/kill3.err"
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "ordo bank passed without a quorum"
grep -q 'EQUORUM\|no quorum' "$work/kill3.json" "$work/kill3.err" ||
  fail "ordo bank did not report ORDO_EQUORUM"
echo "ok: 3 of 5 killed: $(grep -o '"verdict": "[^"]*"' "$work/kill3.json")"
# The scan must answer (redis-cli's status), and list the fencing
# counters the run left (one per account: they are kept on purpose, so that
# tokens keep growing), which shows it read the node's keys; then no other
# key, a lock key of ours, may be among them.
for i in 0 4; do
  set +e
  keys=$(timeout "$((5 * MULT))" "$REDIS_CLI" -p "${ports[$i]}" --scan \
    --pattern '*' 2>&1)
  rc=$?
  set -e
  [ "$rc" -eq 0 ] || fail "the scan of node ${ports[$i]} failed ($rc): $keys"
  fences=$(grep -c ':ordo:fence$' <<< "$keys") || fences=0
  [ "$fences" -gt 0 ] ||
    fail "the scan of node ${ports[$i]} lists no fencing counter: '$keys'"
  left=$(grep -v ':ordo:fence$' <<< "$keys") || left=
  [ -z "$left" ] || fail "node ${ports[$i]} still has lock keys: $left"
done
echo "ok: no lock key left on the nodes still up (each scan listed only" \
  "fencing counters)"
