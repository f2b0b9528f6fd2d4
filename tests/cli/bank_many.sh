#!/usr/bin/env bash
# bank_many.sh -- 64 accounts, 2 x 2000 transfers between random pairs, 16
# workers: the check passes.
. "$(dirname "$0")/lib.sh"

run bank --accounts 64 --transfers 2000 --workers 16 --watchdog "$WD" --json
expect_rc 0 bank --accounts 64 --transfers 2000 --workers 16 --watchdog "$WD" --json
json_check \
  'j["ok"] is True' \
  'j["transfers"] == 4000' \
  'j["total_before"] == j["total_after"] == 64000' \
  'j["accounts"] == 64 and j["workers"] == 16' \
  'j["deadlocks"] == 0 and j["violations"] == 0'
echo "ok: bank with 64 accounts and 16 workers"
