#!/usr/bin/env bash
# bank_default.sh -- `ordo bank` with its defaults passes, in JSON and human
# form: 2,000 transfers, the total kept, no deadlock.
. "$(dirname "$0")/lib.sh"

run bank --watchdog "$WD" --json
expect_rc 0 bank --watchdog "$WD" --json
json_check \
  'j["ok"] is True' \
  'j["transfers"] == 2000' \
  'j["transfers_expected"] == 2000' \
  'j["total_before"] == j["total_after"] == 2000' \
  'j["deadlocks"] == 0' \
  'j["violations"] == 0' \
  'j["failed"] == 0' \
  'j["backend"] == "mem://"' \
  'j["mode"] == "ordered"' \
  'j["accounts"] == 2 and j["workers"] == 8' \
  'isinstance(j["retries"], int) and j["retries"] >= 0' \
  'isinstance(j["timeouts"], int) and j["timeouts"] >= 0' \
  'j["seconds"] > 0 and j["transfers_per_s"] > 0' \
  '0 <= j["p50_us"] <= j["p99_us"]'
[ ! -s "$ERR" ] || fail "a passing --json run wrote to stderr"

run bank --watchdog "$WD"
expect_rc 0 bank --watchdog "$WD"
grep -q '^verdict: OK .* 2000/2000 transfers, 0 deadlocks$' "$OUT" ||
  fail "no OK verdict line"
grep -q '^transfers  *2000/2000 (1000 from 0 to 1, 1000 from 1 to 0)$' \
  "$OUT" || fail "the transfers line does not show 1000 each way"
grep -q '^balance  *before 2000, after 2000$' "$OUT" ||
  fail "the balance line does not show 2000 before and after"
for label in seconds 'transfers/s' latency retries timeouts deadlocks; do
  grep -q "^$label " "$OUT" || fail "no '$label' line in the summary"
done
grep -q 'p50 .* us, p99 .* us' "$OUT" || fail "no p50/p99 latency"
echo "ok: bank default run"
