#!/usr/bin/env bash
# bank_naive.sh -- `ordo bank --naive` takes the two accounts one at a time,
# so crossing transfers deadlock. With detection (the default, immediate) the
# engine counts the deadlocks, the victims retry and the check still passes:
# the total is kept and every transfer is done once. With --detect off the
# lock timeouts end the deadlocks instead: no deadlock is counted, the timed
# out transfers retry, and the check passes too.
. "$(dirname "$0")/lib.sh"

# 2,000 transfers each way, made again while no deadlock happens (lib.sh,
# run_naive: whether transfers cross is up to the scheduler).
run_naive --transfers 2000 --json
json_check \
  'j["ok"] is True' \
  'j["mode"] == "naive" and j["detect"] == "immediate"' \
  'j["transfers"] == 4000 and j["transfers_expected"] == 4000' \
  'j["total_before"] == j["total_after"] == 2000' \
  'j["deadlocks"] > 0' \
  'j["victims"] > 0 and j["retries"] >= j["victims"]' \
  'j["violations"] == 0 and j["failed"] == 0' \
  'j["attempts"] == 0' \
  'j["graph"] is None'

run_naive --transfers 2000
grep -q '^ordo bank: mem://, naive mode, detect immediate,' "$OUT" ||
  fail "the header does not name the naive mode and the detection"
grep -q '^verdict: OK .* 4000/4000 transfers, [1-9][0-9]* deadlocks$' "$OUT" ||
  fail "no OK verdict line counting deadlocks"
grep -q '^victims  *[1-9]' "$OUT" || fail "no victims line"

# Detection off: only the lock timeout (20 ms) breaks a deadlock, and each
# costs a whole timeout, so the run is kept small. Whether a crossing happens
# in so small a run is up to the scheduler, so the check is that every retry
# was a timeout's (nothing else breaks a cycle here), not that one happened;
# tests/unit/test_engine.c shows the timeout path itself deterministically.
run bank --naive --detect off --lock-timeout 20 --transfers 50 --json \
  --watchdog "$WD"
expect_rc 0 bank --naive --detect off --lock-timeout 20 --transfers 50
json_check \
  'j["ok"] is True' \
  'j["mode"] == "naive" and j["detect"] == "off"' \
  'j["lock_timeout_ms"] == 20' \
  'j["transfers"] == 100' \
  'j["total_before"] == j["total_after"] == 2000' \
  'j["retries"] == j["timeouts"]' \
  'j["deadlocks"] == 0 and j["victims"] == 0' \
  'j["violations"] == 0 and j["failed"] == 0'

# Delayed detection, with its short default wait in the bank.
run bank --naive --detect delayed --transfers 100 --json --watchdog "$WD"
expect_rc 0 bank --naive --detect delayed --transfers 100
json_check 'j["ok"] is True' 'j["detect"] == "delayed"' \
  'j["total_before"] == j["total_after"]' 'j["transfers"] == 200'

# The URL's query wins over --detect: detection stays off, so the (short)
# timeouts end the deadlocks and none is counted.
run bank --naive --backend 'mem://?detect=off&sweep_ms=0' --lock-timeout 20 \
  --transfers 20 --json --watchdog "$WD"
expect_rc 0 bank --naive --backend 'mem://?detect=off...'
json_check 'j["ok"] is True' 'j["deadlocks"] == 0'
echo "ok: naive bank with detection, with timeouts, and delayed"
