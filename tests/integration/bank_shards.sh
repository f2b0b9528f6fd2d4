#!/usr/bin/env bash
# bank_shards.sh ORDOD ORDO -- `ordo bank` (ordered: each transfer's two
# accounts by one lock_all) over a sharded ordod:// place of 3 servers
# (shards_fixture.sh), 8 workers: the check passes (balance conserved), 0
# deadlocks, and every shard granted locks (16 accounts, spread over
# all three). Bounded by timeout and --watchdog (times
# ORDO_TEST_TIMEOUT_MULT); the fixture fails the test if a server does not
# stop cleanly or a sanitizer reports.
set -euo pipefail
here=$(dirname "$0")
if [ -z "${ORDO_SHARD_URL:-}" ]; then
  exec bash "$here/shards_fixture.sh" "${1:?usage: $0 ORDOD ORDO}" 3 -- \
    bash "$0" "$@"
fi
. "$here/mult.sh"
ORDO=${2:?usage: $0 ORDOD ORDO}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
out=$dir/bank.json
err=$dir/bank.err
fail() {
  echo "FAIL: $*" >&2
  cat "$out" "$err" >&2 2>/dev/null || true
  exit 1
}
set +e
timeout "$((30 * MULT))" "$ORDO" bank --backend "$ORDO_SHARD_URL" \
  --workers 8 --accounts 16 --json --watchdog "$((20 * MULT))" >"$out" \
  2>"$err"
rc=$?
set -e
[ "$rc" -eq 0 ] || fail "ordo bank exited $rc"
python3 - "$out" <<'PY' || fail "the JSON does not show a passing run"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ok"] is True, j["verdict"]
assert j["workers"] == 8
assert j["transfers"] == j["transfers_expected"] == 2000
assert j["deadlocks"] == 0 and j["violations"] == 0
print("ok: %s, %d transfers, %.0f/s" % (j["verdict"], j["transfers"],
                                        j["transfers_per_s"]))
PY
IFS=, read -r -a ports <<<"$ORDO_SHARD_PORTS"
for p in "${ports[@]}"; do
  n=$(ORDOD_PORT=$p bash -c '. "$0/ordod_fixture.sh"; ordod_cmd INFO locks' \
    "$here" | tr -d '\r' | sed -n 's/^lock_acquired://p')
  [ "${n:-0}" -gt 0 ] || fail "shard 127.0.0.1:$p granted no lock"
  echo "ok: shard 127.0.0.1:$p granted $n locks"
done
