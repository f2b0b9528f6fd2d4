#!/usr/bin/env bash
# ex_checkout.sh BINARY ORDOD -- runs the checkout example (checkout.c) on
# one throw-away PostgreSQL cluster (tests/integration/pg_fixture.sh:
# deadlock_timeout 10ms, role ordo) and checks what it claims:
#   --help       says that schema "shop" is dropped and recreated;
#   default      ordo_lock_all over the cluster's advisory locks, on database
#                shop_ordo: exit 0, the invariant line OK, every request
#                answered, 0 deadlocks in pg_stat_database and 0 40P01;
#   --naive      SELECT ... FOR UPDATE in opposite orders, on database
#                shop_naive (--json): exit 0, the invariant holds, and
#                PostgreSQL counted deadlocks > 0, as many as the 40P01
#                errors the connections received;
#   mem://       the locks in the process, the data in PostgreSQL (database
#                shop_mem): exit 0, the invariant line OK, 0 deadlocks;
# after each of the three, psql checks the tables against the journal on
# its own (stock and balances = initial -/+ the journal, one journal row
# per request that succeeded). Then the errors: a malformed --db or
# --backend URL and a bad flag exit 2 with one line and nothing on stdout;
# a server that is not there exits 1 saying what to check.
# Requests are scaled by ORDO_TEST_SCALE (0.5 under ASan, 0.25 under TSan).
# ORDOD is not used: the example needs PostgreSQL only. Every run is
# bounded by timeout; the cluster is stopped at exit.
set -euo pipefail
BIN=${1:?usage: $0 BINARY ORDOD}
EX_NAME=checkout
ORDOD=$2 # ex_lib.sh's on_remote_backends is not used here
# shellcheck source=SCRIPTDIR/ex_lib.sh
. "$(dirname "$0")/ex_lib.sh"
# scaled N: N times ORDO_TEST_SCALE, at least 400 (about 20 deadlocks in
# --naive, never none in the runs we made).
scaled() {
  awk -v n="$1" -v s="${ORDO_TEST_SCALE:-1}" \
    'BEGIN { v = int(n * s); print (v < 400 ? 400 : v) }'
}
# line PREFIX: the line of OUT that starts with PREFIX.
line() {
  grep -m1 "^$1" <<< "$OUT" || true
}
# psql_check DB OK: psql finds the stock and the balances equal to their
# initial values minus and plus what the journal moved, and OK journal rows
# with distinct request numbers.
psql_check() {
  local db=$1 ok=$2 got
  got=$(pg_psql "$db" -A -t -c "
    SELECT (SELECT count(*) FROM shop.skus s WHERE s.stock <> s.initial
              + coalesce((SELECT sum(CASE kind WHEN 'checkout' THEN -qty
                                      ELSE qty END)
                          FROM shop.orders o WHERE o.sku = s.id), 0))
         + (SELECT count(*) FROM shop.wallets w WHERE w.balance <> w.initial
              + coalesce((SELECT sum(CASE kind WHEN 'checkout' THEN -amount
                                      ELSE amount END)
                          FROM shop.orders o WHERE o.user_id = w.user_id), 0))
         || '|' || (SELECT count(*) FROM shop.orders)
         || '|' || (SELECT count(DISTINCT request) FROM shop.orders)") ||
    fail "$db: psql could not read the shop's tables"
  [ "$got" = "0|$ok|$ok" ] ||
    fail "$db: psql finds bad rows|journal rows|requests = $got," \
      "not 0|$ok|$ok"
  echo "ok: $db: psql agrees: $ok journal rows, every SKU and wallet matches"
}

REQ=$(scaled 2000)
INVARIANT_OK='invariant: inventory and wallets agree with the journal: OK'

# ---- --help ------------------------------------------------------------------
run 10 --help
[ "$RC" -eq 0 ] || fail "--help exited $RC"
help=$(tr -s ' \n' '  ' <<< "$OUT")
for needle in 'schema "shop"' "DROPPED and recreated" "--naive" "--backend" \
  "200 ms" "503"; do
  grep -qF -- "$needle" <<< "$help" || fail "--help does not say '$needle'"
done
echo "ok: --help says the schema is reset, and the backstop"

pg_start
trap ex_cleanup EXIT # pg_start set its own; ours stops the cluster too
for db in shop_ordo shop_naive shop_mem; do
  pg_createdb "$db" || fail "cannot create database $db"
done

# ---- default: ordo_lock_all, advisory locks in the same database -------------
run 60 --db "$(pg_url shop_ordo)" --requests "$REQ"
[ "$RC" -eq 0 ] || fail "default: exit $RC"
[ "$(line invariant:)" = "$INVARIANT_OK" ] ||
  fail "default: no passing invariant"
grep -qE "^requests  [0-9]+ ok .*, [0-9]+ failed \(503\)" <<< "$OUT" ||
  fail "default: no requests line"
DL0='^deadlocks 0 \(pg_stat_database.deadlocks, after minus before\); '
DL0+='0 deadlock errors \(40P01\) received: they agree$'
grep -qE "$DL0" <<< "$OUT" ||
  fail "default: the deadlocks line does not say 0 and 0"
grep -qE "^database  .* deadlock_timeout 10ms$" <<< "$OUT" ||
  fail "default: deadlock_timeout (10ms) not reported"
ok=$(awk '/^requests / { print $2 }' <<< "$OUT")
failed=$(sed -nE 's/^requests .*, ([0-9]+) failed \(503\).*/\1/p' <<< "$OUT")
[ $((ok + failed)) -eq "$REQ" ] ||
  fail "default: $ok ok + $failed failed is not $REQ requests"
echo "ok: default in $TOOK s: $(line requests)"
echo "    $(line deadlocks)"
psql_check shop_ordo "$ok"

# ---- --naive: PostgreSQL's deadlocks -----------------------------------------
run 120 --db "$(pg_url shop_naive)" --requests "$REQ" --naive --json
[ "$RC" -eq 0 ] || fail "naive: exit $RC"
naive=$(timeout 10 python3 -c '
import json, sys
j = json.loads(sys.argv[1])
n = int(sys.argv[2])
assert j["example"] == "checkout" and j["mode"] == "naive", j
assert j["ok"] is True and j["invariant_ok"] is True, j["why"]
assert j["requests"] == n and j["backend"] is None, j
assert j["deadlock_timeout"] == "10ms", j["deadlock_timeout"]
assert j["requests_ok"] + j["failed"] == n and j["not_run"] == 0, j
assert j["journal_rows"] == j["requests_ok"], j
assert j["deadlocks"] > 0, "no deadlock in the naive mode"
assert j["deadlocks"] == j["deadlock_errors"], j
assert j["retries"] + j["failed"] >= j["deadlocks"], j
print("%d|%d deadlocks (= 40P01 errors), %d retries, %d ok, %d failed (503)"
      % (j["requests_ok"], j["deadlocks"], j["retries"], j["requests_ok"],
         j["failed"]))' \
  "$OUT" "$REQ") ||
  fail "naive: the JSON does not show a passing run with deadlocks"
echo "ok: naive in $TOOK s: ${naive#*|}"
psql_check shop_naive "${naive%%|*}"

# ---- mem://: the locks in this process, the data in PostgreSQL ---------------
run 60 --db "$(pg_url shop_mem)" --backend mem:// --requests "$REQ"
[ "$RC" -eq 0 ] || fail "mem://: exit $RC"
[ "$(line invariant:)" = "$INVARIANT_OK" ] ||
  fail "mem://: no passing invariant"
grep -qE "^locks     ordo_lock_all of sku:<id> and wallet:<user> on mem://$" \
  <<< "$OUT" || fail "mem://: the locks line does not name mem://"
grep -qE "^deadlocks 0 " <<< "$OUT" || fail "mem://: deadlocks"
ok=$(awk '/^requests / { print $2 }' <<< "$OUT")
echo "ok: mem:// in $TOOK s: $(line requests)"
psql_check shop_mem "$ok"

# ---- errors ------------------------------------------------------------------
# bad STATUS NEEDLE ARGS...: exit STATUS (each run bounded by 20 s),
# nothing on stdout, one line on stderr that holds NEEDLE and no password.
bad() {
  local status=$1 needle=$2
  shift 2
  run 20 "$@"
  [ "$RC" -eq "$status" ] || fail "checkout $*: exit $RC, not $status"
  [ -z "$OUT" ] || fail "checkout $*: wrote to stdout"
  [ "$(wc -l < "$TMP/err")" -eq 1 ] || fail "checkout $*: not one line"
  grep -qF -- "$needle" "$TMP/err" ||
    fail "checkout $*: stderr does not say '$needle'"
  if grep -q hunter2 "$TMP/err"; then
    fail "checkout $*: the password was printed"
  fi
  echo "ok: exit $status: $(cat "$TMP/err")"
}
URL=$(pg_url shop_mem)
bad 2 "accepted forms are postgres://" \
  --db "postgres://ordo:hunter2@127.0.0.1:notaport/shop_mem"
bad 2 "accepted forms are postgres://" --db "mysql://ordo@127.0.0.1/shop"
bad 2 "accepted forms are mem://" --db "$URL" --backend "ordod://127.0.0.1:x"
bad 2 "--workers wants a number" --db "$URL" --workers 0
bad 2 "--db URL is required" --naive
DOWN=$(pg_free_port)
bad 1 "check that PostgreSQL is running on 127.0.0.1 port $DOWN" \
  --db "postgres://ordo:hunter2@127.0.0.1:$DOWN/shop_mem"
