#!/usr/bin/env bash
# bank_etcd.sh ORDO -- `ordo bank` over etcd:// on a 1-member etcd
# (etcd_fixture.sh), with a 1 s lease: the ordered run (8 workers, one Txn
# per transfer's pair) and the naive one (2 workers taking the two keys one
# at a time, whose deadlocks end by the 100 ms lock timeout and a retry),
# each keeping the balance, doing every transfer exactly once, with no two
# workers inside one account at once. Few transfers: each lock is a Raft
# write.
set -euo pipefail
. "$(dirname "$0")/etcd_fixture.sh"
ORDO=${1:?usage: $0 ORDO}
etcd_start 1
out=${ETCD_DIRS[0]}/bank.json
err=${ETCD_DIRS[0]}/bank.err
fail() {
  echo "FAIL: $*" >&2
  cat "$out" "$err" >&2 2>/dev/null || true
  exit 1
}
# check MODE WORKERS TRANSFERS: the JSON of the last run shows a pass.
check() {
  python3 - "$out" "$@" <<'PY' || fail "$1: the JSON does not show a passing run"
import json, sys
j = json.load(open(sys.argv[1]))
mode, workers, expected = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
assert j["ok"] is True, j["verdict"]
assert j["mode"] == mode and j["workers"] == workers, j
assert j["backend"].startswith("etcd://")
assert j["transfers"] == j["transfers_expected"] == expected, j
assert j["violations"] == 0, j
assert j["total_before"] == j["total_after"], j
print("ok: %s: %s, %.0f/s, p99 %.1f ms, %d retries" % (
    mode, j["verdict"], j["transfers_per_s"], j["p99_us"] / 1000, j["retries"]))
PY
}
URL="etcd://$ETCD_EPS?lease_ms=1000"
set +e
timeout "$((60 * MULT))" "$ORDO" bank --backend "$URL" --transfers 100 \
  --json --watchdog "$((45 * MULT))" >"$out" 2>"$err"
rc=$?
set -e
[ "$rc" -eq 0 ] || fail "ordered: ordo bank exited $rc"
check ordered 8 200
set +e
timeout "$((60 * MULT))" "$ORDO" bank --backend "$URL" --naive --workers 2 \
  --lock-timeout 100 --transfers 100 --json --watchdog "$((45 * MULT))" \
  >"$out" 2>"$err"
rc=$?
set -e
[ "$rc" -eq 0 ] || fail "naive: ordo bank exited $rc"
check naive 2 200
