#!/usr/bin/env bash
# bank_redis.sh ORDO -- `ordo bank` over redis:// with 8 workers, each a txn
# of its own (a connection of its own, and a Pub/Sub one once it waits):
# the check passes, every transfer is done, no deadlock is counted, and the
# server ran the ACQUIRE script at least once per transfer.
set -euo pipefail
. "$(dirname "$0")/redis_fixture.sh"
ORDO=${1:?usage: $0 ORDO}
redis_start
out=$REDIS_DIR/bank.json
err=$REDIS_DIR/bank.err
fail() {
  echo "FAIL: $*" >&2
  cat "$out" "$err" >&2 2>/dev/null || true
  exit 1
}
set +e
timeout 60 "$ORDO" bank --backend "redis://127.0.0.1:$REDIS_PORT" \
  --json --watchdog 30 >"$out" 2>"$err"
rc=$?
set -e
[ "$rc" -eq 0 ] || fail "ordo bank exited $rc"
python3 - "$out" <<'PY' || fail "the JSON does not show a passing run"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ok"] is True, j["verdict"]
assert j["workers"] == 8
assert j["backend"].startswith("redis://")
assert j["transfers"] == j["transfers_expected"] == 2000
assert j["deadlocks"] == 0 and j["violations"] == 0
print("ok: %s, %d transfers, %.0f/s, p99 %.1f ms" % (
    j["verdict"], j["transfers"], j["transfers_per_s"], j["p99_us"] / 1000))
PY
calls=$(redis_cli INFO commandstats | tr -d '\r' |
  sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\),.*/\1/p')
[ "${calls:-0}" -ge 2000 ] ||
  fail "the server ran EVALSHA ${calls:-0} times, fewer than the transfers"
echo "ok: the server ran EVALSHA $calls times"
