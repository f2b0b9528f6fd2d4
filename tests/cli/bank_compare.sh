#!/usr/bin/env bash
# bank_compare.sh -- `ordo bank --compare` runs ordered, naive with detection
# and naive with detection off (lock timeouts) on the same flags, and prints
# one table, or one JSON object {"compare": [three results]}; all three pass.
# The detect-off run pays a whole lock timeout per deadlock, so the runs are
# kept small.
. "$(dirname "$0")/lib.sh"

run bank --compare --json --transfers 20 --watchdog "$WD"
expect_rc 0 bank --compare --json --transfers 20 --watchdog "$WD"
json_check \
  'len(j["compare"]) == 3' \
  'all(r["ok"] is True for r in j["compare"]) and j["ok"] is True' \
  '[r["mode"] for r in j["compare"]] == ["ordered", "naive", "naive"]' \
  '[r["detect"] for r in j["compare"]] == ["immediate", "immediate", "off"]' \
  '[r["lock_timeout_ms"] for r in j["compare"]] == [5000, 5000, 50]' \
  'all(r["transfers"] == 40 for r in j["compare"])' \
  'all(r["total_before"] == r["total_after"] == 2000 for r in j["compare"])' \
  'j["compare"][0]["deadlocks"] == 0 and j["compare"][2]["deadlocks"] == 0' \
  'j["graph"] is None'

run bank --compare --transfers 20 --lock-timeout 20 --watchdog "$WD"
expect_rc 0 bank --compare --transfers 20 --lock-timeout 20 --watchdog "$WD"
grep -q '^mode  *detect  *transfers/s  *seconds  *p50 us  *p99 us  *retries  *timeouts  *deadlocks  *ok$' \
  "$OUT" || fail "no table header"
grep -q '^ordered  *immediate .* yes$' "$OUT" || fail "no passing ordered row"
grep -q '^naive  *immediate .* yes$' "$OUT" || fail "no passing naive row"
grep -q '^naive  *off .* yes$' "$OUT" || fail "no passing detect-off row"
grep -q '^lock timeout: 20 ms, and 20 ms in the detect-off run' "$OUT" ||
  fail "the given --lock-timeout is not used in all three runs"
grep -q '^verdict: OK ' "$OUT" || fail "no OK verdict"
echo "ok: bank --compare"
