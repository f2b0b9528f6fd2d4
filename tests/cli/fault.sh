#!/usr/bin/env bash
# fault.sh -- the check can fail: with ORDO_BANK_FAULT breaking the run on
# purpose, ordo bank says FAIL, names the reason and exits 1.
. "$(dirname "$0")/lib.sh"

export ORDO_BANK_FAULT=leak
run bank --watchdog "$WD" --json
expect_rc 1 "bank --json (leak)"
json_check 'j["ok"] is False' \
  'j["total_after"] == j["total_before"] + 1' \
  '"balance changed" in j["verdict"]'
run bank --watchdog "$WD"
expect_rc 1 "bank (leak)"
grep -q '^verdict: FAIL .* balance changed from 2000 to 2001' "$OUT" ||
  fail "no FAIL verdict naming the balance"

export ORDO_BANK_FAULT=owner
run bank --watchdog "$WD" --json
expect_rc 1 "bank --json (owner)"
json_check 'j["ok"] is False' 'j["violations"] == 2000' \
  'j["transfers"] == 0' '"mutual-exclusion" in j["verdict"]'
echo "ok: the check fails when the ledger is broken"
