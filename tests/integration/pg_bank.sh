#!/usr/bin/env bash
# pg_bank.sh ORDO -- `ordo bank`'s PostgreSQL ledger (src/cli/bank_pg.c)
# against a throw-away cluster from pg_fixture.sh (deadlock_timeout 10ms,
# fsync and synchronous_commit off):
#   1. ordered, 8 workers, 2 x 1000 transfers, on its own database: exit 0,
#      ok, 2000 transfers, no deadlock, the total kept, within 10 s (the
#      mission's "the ordered bank finishes well inside 10 s", as a bound
#      against a hang or a collapse, times ORDO_TEST_TIMEOUT_MULT: 40 s in
#      the ASan build, 60 s in the TSan one, never a speed claim); psql
#      then finds 2000 journal rows, one per transfer index, and every
#      balance equal to the opening one plus the journal's ins minus outs;
#   2. naive on another database: deadlocks > 0 and equal to the 40P01
#      errors the connections got (victims), exactly 2000 journal rows, the
#      balances agreeing with them;
#   3. the conninfo form (postgres:host=... port=...) runs too, no backend
#      of any run is left behind, and --locks advisory runs the ordinary
#      bank over the postgres:// backend instead;
#   4. bad input, each within 4 s (times ORDO_TEST_TIMEOUT_MULT: a bound
#      against a retry loop or a hang, not a speed), exit 2, one line on
#      stderr naming what to do next, nothing on stdout, no password
#      echoed: the server down (a port with nothing), a wrong password, a
#      missing database, a malformed URL; --locks with mem:// and --compare
#      with the ledger are usage errors too;
#   5. the check fails when it should (ORDO_BANK_FAULT=leak: exit 1, the
#      total and the journal disagree) and a hung run ends in the watchdog
#      (ORDO_BANK_FAULT=hang --watchdog 2: exit 3, the pg_locks view).
# Every run of ordo is bounded by timeout, and every run that does work by
# --watchdog inside it, so a hang prints the server's lock view; both grow
# with ORDO_TEST_TIMEOUT_MULT ($MULT, from mult.sh), except the watchdog of
# the hang case, which is what that case tests.
set -euo pipefail
. "$(dirname "$0")/pg_fixture.sh"
ORDO=${1:?usage: $0 ORDO}
# The help says what the ledger does to the database, before any server.
# Its lines are wrapped: read it as one line, blanks squeezed.
help=$(timeout "$((10 * MULT))" "$ORDO" bank --help)
help=$(tr -s ' \n' '  ' <<< "$help")
for needle in "resets schema ordo_bank" "--locks KIND" "postgres://" \
  "postgres:CONNINFO" "pg_locks"; do
  grep -qF -- "$needle" <<< "$help" ||
    { echo "FAIL: ordo bank --help does not say '$needle'" >&2; exit 1; }
done
echo "ok: ordo bank --help documents the ledger"

pg_start
WORK=$PG_DIR/bank
mkdir -p "$WORK"
OUT=$WORK/out
ERR=$WORK/err

fail() {
  echo "FAIL: $*" >&2
  echo "--- stdout:" >&2
  cat "$OUT" >&2 2>/dev/null || true
  echo "--- stderr:" >&2
  cat "$ERR" >&2 2>/dev/null || true
  echo "--- server log (tail):" >&2
  pg_log | tail -n 20 >&2 || true
  exit 1
}

# run SECONDS ARGS...: ordo ARGS bounded by SECONDS times MULT; sets RC and
# ELAPSED.
run() {
  local secs=$(($1 * MULT)) t0 t1
  shift
  t0=$EPOCHREALTIME
  set +e
  timeout -k 5 "$secs" "$ORDO" "$@" >"$OUT" 2>"$ERR"
  RC=$?
  set -e
  t1=$EPOCHREALTIME
  ELAPSED=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
}

# sql DB QUERY: one value from psql as ordo on DB.
sql() {
  pg_psql "$1" -A -t -c "$2"
}

# check_journal DB: the journal has one row per transfer index 0..1999,
# the total is 2000 (2 accounts of 1000) and every balance is the opening
# one plus what the journal moved in, minus what it moved out.
check_journal() {
  local db=$1 got
  got=$(sql "$db" "SELECT count(*), count(DISTINCT xfer), min(xfer),
                          max(xfer) FROM ordo_bank.journal")
  [ "$got" = "2000|2000|0|1999" ] ||
    fail "$db: journal rows|distinct xfer|min|max are $got, not 2000|2000|0|1999"
  got=$(sql "$db" "SELECT count(*), sum(balance) FROM ordo_bank.accounts")
  [ "$got" = "2|2000" ] ||
    fail "$db: accounts count|total are $got, not 2|2000"
  got=$(sql "$db" "SELECT count(*) FROM ordo_bank.accounts a
    WHERE a.balance <> 1000
      + coalesce((SELECT sum(amount) FROM ordo_bank.journal WHERE dst = a.id), 0)
      - coalesce((SELECT sum(amount) FROM ordo_bank.journal WHERE src = a.id), 0)")
  [ "$got" = "0" ] || fail "$db: $got accounts disagree with the journal"
  echo "ok: $db: psql finds 2000 journal rows, one per transfer, and both" \
    "balances agree with them"
}

# ---- 1. ordered --------------------------------------------------------------
pg_createdb bank_ordered
URL=$(pg_url bank_ordered)
run 90 bank --backend "$URL" --transfers 1000 --workers 8 --json \
  --watchdog "$((60 * MULT))"
[ "$RC" -eq 0 ] || fail "ordered: ordo bank exited $RC"
python3 - "$OUT" "$ELAPSED" "$MULT" <<'PY' || fail "ordered: the JSON does not show a passing run"
import json, sys
j = json.load(open(sys.argv[1]))
elapsed = float(sys.argv[2])
# The whole process (connections, schema, transfers, checks): "well inside
# 10 s" on the plain build, as a bound scaled for the sanitizer builds.
bound = 10 * int(sys.argv[3])
assert j["ok"] is True, j["verdict"]
assert j["locks"] == "rows" and j["mode"] == "ordered", j
assert j["backend"].startswith("postgres://ordo:***@127.0.0.1:"), j["backend"]
assert j["workers"] == 8
assert j["transfers"] == j["transfers_expected"] == 2000, j
assert j["failed"] == 0 and j["journal_rows"] == 2000, j
assert j["deadlocks"] == 0 and j["victims"] == 0, j
assert j["total_before"] == j["total_after"] == 2000, j
assert j["mismatched_accounts"] == 0 and j["duplicate_xfers"] == 0, j
assert j["deadlock_timeout"] == "10ms", j["deadlock_timeout"]
assert elapsed < bound, "the run took %.1f s, not under %d" % (elapsed, bound)
print("ok: ordered: %s; %d transfers in %.2f s of transfers (%.2f s in all), "
      "%.0f/s, p99 %.1f ms" % (j["verdict"], j["transfers"], j["seconds"],
                               elapsed, j["transfers_per_s"],
                               j["p99_us"] / 1000))
PY
if grep -q ":ordo@" "$OUT"; then
  fail "ordered: the password is in the report"
fi
check_journal bank_ordered

# ---- 2. naive ----------------------------------------------------------------
# Two workers: with eight, every deadlock stands for deadlock_timeout while
# the queues behind it fill with crossing transfers that deadlock in turn
# (about 7,600 deadlocks and a minute for 2,000 transfers on 2 cores); two
# show the same thing in a few seconds.
pg_createdb bank_naive
URL=$(pg_url bank_naive)
run 120 bank --backend "$URL" --naive --transfers 1000 --workers 2 --json \
  --watchdog "$((90 * MULT))"
[ "$RC" -eq 0 ] || fail "naive: ordo bank exited $RC"
python3 - "$OUT" "$ELAPSED" <<'PY' || fail "naive: the JSON does not show a passing run with deadlocks"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ok"] is True, j["verdict"]
assert j["mode"] == "naive" and j["attempts"] == 0, j
assert j["transfers"] == j["transfers_expected"] == 2000, j
assert j["journal_rows"] == 2000 and j["failed"] == 0, j
assert j["deadlocks"] > 0, "no deadlock in the naive mode"
assert j["deadlocks"] == j["victims"], (j["deadlocks"], j["victims"])
assert j["retries"] >= j["victims"], j
assert j["total_before"] == j["total_after"] == 2000, j
print("ok: naive: %d deadlocks = %d 40P01 errors, %d retries, %.2f s "
      "(%s s in all)" % (j["deadlocks"], j["victims"], j["retries"],
                         j["seconds"], sys.argv[2]))
PY
check_journal bank_naive

# ---- 3. the conninfo form, and nothing left behind ---------------------------
run 60 bank --backend "postgres:host=127.0.0.1 port=$PG_PORT dbname=bank_naive user=ordo password=ordo" \
  --transfers 50 --watchdog "$((30 * MULT))"
[ "$RC" -eq 0 ] || fail "conninfo: ordo bank exited $RC"
grep -q "^verdict: OK" "$OUT" || fail "conninfo: no passing verdict"
grep -qF "password=***" "$OUT" || fail "conninfo: the password is not redacted"
if grep -q "password=ordo" "$OUT"; then
  fail "conninfo: the password is in the report"
fi
left=$(sql postgres "SELECT count(*) FROM pg_stat_activity
                     WHERE application_name LIKE 'ordo-bank-%'")
[ "$left" = "0" ] || fail "$left ordo bank backends are still connected"
echo "ok: the conninfo form passes, and no ordo bank backend is left"

# --locks advisory is the ordinary bank over ordo_open(URL), the postgres://
# backend's advisory locks: the same report, saying which locks it used.
run 60 bank --backend "$(pg_url bank_ordered)" --locks advisory \
  --transfers 100 --json --watchdog "$((30 * MULT))"
[ "$RC" -eq 0 ] || fail "advisory: ordo bank exited $RC"
python3 - "$OUT" <<'PY' || fail "advisory: the JSON does not show a passing run"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ok"] is True, j["verdict"]
assert j["locks"] == "advisory" and j["detect"] == "immediate", j
assert j["transfers"] == j["transfers_expected"] == 200, j
assert "journal_rows" not in j, "the advisory run went to the ledger"
print("ok: --locks advisory: %s" % j["verdict"])
PY

# ---- 4. bad input ------------------------------------------------------------
# bad NEEDLE ARGS...: exit 2 within 4 s (times MULT), nothing on stdout, one
# line on stderr holding NEEDLE, and no password in it.
bad() {
  local needle=$1
  shift
  run 20 bank "$@"
  [ "$RC" -eq 2 ] || fail "bank $*: exit $RC, not 2"
  awk -v e="$ELAPSED" -v b="$((4 * MULT))" 'BEGIN { exit !(e < b) }' ||
    fail "bank $*: took $ELAPSED s, not under $((4 * MULT))"
  [ ! -s "$OUT" ] || fail "bank $*: wrote to stdout"
  [ "$(wc -l <"$ERR")" -eq 1 ] || fail "bank $*: stderr is not one line"
  grep -qF -- "$needle" "$ERR" || fail "bank $*: stderr does not say '$needle'"
  if grep -q "hunter2" "$ERR"; then
    fail "bank $*: the password was printed"
  fi
  echo "ok: bank $* -> exit 2 in $ELAPSED s: $(cat "$ERR")"
}
DOWN=$(pg_free_port)
bad "check that PostgreSQL is running on 127.0.0.1:$DOWN" \
  --backend "postgres://ordo:hunter2@127.0.0.1:$DOWN/bank_ordered"
bad "check the password" \
  --backend "postgres://ordo:hunter2@127.0.0.1:$PG_PORT/bank_ordered"
bad "create the database" \
  --backend "postgres://ordo:ordo@127.0.0.1:$PG_PORT/no_such_db"
bad "no_such_db" \
  --backend "postgresql://ordo:ordo@127.0.0.1:$PG_PORT/no_such_db"
bad "malformed PostgreSQL URL" \
  --backend "postgres://ordo:hunter2@127.0.0.1:$PG_PORT/bank%zz"
bad "fix the URL" \
  --backend "postgres://ordo:hunter2@127.0.0.1:notaport/bank_ordered"
bad "--locks applies only to PostgreSQL" --backend mem:// --locks rows
bad "--compare cannot be used with the PostgreSQL ledger" \
  --backend "$(pg_url bank_ordered)" --compare

# ---- 5. the check fails, and the watchdog fires, when they should ------------
URL=$(pg_url bank_ordered)
ORDO_BANK_FAULT=leak run 60 bank --backend "$URL" --transfers 50 \
  --watchdog "$((30 * MULT))"
[ "$RC" -eq 1 ] || fail "leak: exit $RC, not 1"
grep -q "^verdict: FAIL .*balance changed from 2000 to 2001" "$OUT" ||
  fail "leak: the verdict does not name the balance"
grep -q "accounts disagree with the journal" "$OUT" ||
  fail "leak: the verdict does not name the journal"
echo "ok: a leaked unit fails the check: $(grep '^verdict' "$OUT")"

# The watchdog's 2 s is what this case tests, so it is not scaled.
ORDO_BANK_FAULT=hang run 30 bank --backend "$URL" --transfers 50 --workers 2 \
  --watchdog 2
[ "$RC" -eq 3 ] || fail "hang: exit $RC, not 3"
[ ! -s "$OUT" ] || fail "hang: wrote to stdout"
grep -q "^ordo bank: watchdog: the run did not finish within 2 s; the server's lock view (pg_locks) follows:" \
  "$ERR" || fail "hang: no watchdog line"
grep -q "^pid .*locktype .*granted" "$ERR" || fail "hang: no pg_locks header"
grep -q "ordo-bank-[0-9]* .*transactionid .*ShareLock .* f " "$ERR" ||
  fail "hang: no worker waiting for the hung transaction"
echo "ok: a hung run ends in the watchdog after $ELAPSED s with the lock view"
