#!/usr/bin/env bash
# sentinel_bank.sh ORDO -- `ordo bank` on redis-sentinel:// (one primary,
# one replica, three sentinels from sentinel_fixture.sh): 8 workers, 2 x 500
# transfers, which must pass with the balance kept and no violation.
set -euo pipefail
. "$(dirname "$0")/sentinel_fixture.sh"
ORDO=${1:?usage: $0 ORDO}
sentinel_start
out=$REDIS_DIR/bank.json
err=$REDIS_DIR/bank.err
fail() {
  echo "FAIL: $*" >&2
  cat "$out" "$err" >&2 2>/dev/null || true
  exit 1
}
set +e
timeout 60 "$ORDO" bank --backend "$SENTINEL_URL?lease_ms=1000" \
  --transfers 500 --json --watchdog 30 >"$out" 2>"$err"
rc=$?
set -e
[ "$rc" -eq 0 ] || fail "ordo bank exited $rc"
python3 - "$out" <<'PY' || fail "the JSON does not show a passing run"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ok"] is True, j["verdict"]
assert j["backend"].startswith("redis-sentinel://")
assert j["transfers"] == j["transfers_expected"] == 1000
assert j["deadlocks"] == 0 and j["violations"] == 0
print("ok: %s, %d transfers, %.0f/s, p99 %.1f ms" % (
    j["verdict"], j["transfers"], j["transfers_per_s"], j["p99_us"] / 1000))
PY
# The transfers ran on the primary the sentinels named.
calls=$(REDIS_PORT=$PRIMARY_PORT redis_cli INFO commandstats | tr -d '\r' |
  sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\),.*/\1/p')
[ "${calls:-0}" -ge 1000 ] ||
  fail "the primary ran EVALSHA ${calls:-0} times, fewer than the transfers"
echo "ok: the primary ran EVALSHA $calls times"
