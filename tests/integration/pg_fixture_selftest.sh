#!/usr/bin/env bash
# pg_fixture_selftest.sh -- checks pg_fixture.sh itself: a cluster starts
# (with a -c setting), a database is created, pg_psql reaches it over TCP
# with ordo's password, a wrong password is refused, deadlock_timeout is
# 10ms, and pg_stop_all leaves no postmaster and no folder behind. Then the
# wrapper mode: `pg_fixture.sh COMMAND` gives COMMAND PG_URL and passes its
# exit status on.
set -euo pipefail
here=$(dirname "$0")
. "$here/pg_fixture.sh"
fail() {
  echo "FAIL: $*" >&2
  pg_log | tail -n 30 >&2 || true
  exit 1
}

start=$SECONDS
pg_start -c "cluster_name=ordo's selftest" -c work_mem=8MB ||
  fail "pg_start failed"
echo "ok: pg_start in $((SECONDS - start)) s: port $PG_PORT, pid $PG_PID," \
  "folder $PG_DIR, socket in $PG_SOCKDIR"
[ -d "$PG_DIR" ] || fail "PG_DIR $PG_DIR is not a folder"
[ -S "$PG_SOCKDIR/.s.PGSQL.$PG_PORT" ] ||
  fail "no socket $PG_SOCKDIR/.s.PGSQL.$PG_PORT"
kill -0 "$PG_PID" 2>/dev/null || fail "PG_PID $PG_PID is not running"

pg_createdb selftest || fail "pg_createdb selftest failed"
out=$(pg_psql selftest -At -c 'SELECT current_user, current_database(),
  host(inet_server_addr()), (SELECT rolsuper FROM pg_roles WHERE rolname = current_user),
  (SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database())') ||
  fail "pg_psql selftest failed"
[ "$out" = "ordo|selftest|127.0.0.1|t|ordo" ] ||
  fail "pg_psql: want ordo|selftest|127.0.0.1|t|ordo, got '$out'"
echo "ok: pg_psql over TCP as a superuser ordo on selftest, owned by ordo"

out=$(pg_psql selftest -At -c 'SHOW deadlock_timeout')
[ "$out" = "10ms" ] || fail "deadlock_timeout: want 10ms, got '$out'"
out=$(pg_psql selftest -At -c 'SHOW fsync')
[ "$out" = "off" ] || fail "fsync: want off, got '$out'"
out=$(pg_psql selftest -At -c 'SHOW cluster_name' -c 'SHOW work_mem')
[ "$out" = "ordo's selftest"$'\n'"8MB" ] ||
  fail "pg_start -c cluster_name=... -c work_mem=8MB: got '$out'"
# A superuser can change deadlock_timeout in a session.
out=$(pg_psql selftest -At -c "SET deadlock_timeout = '20ms'" \
  -c 'SHOW deadlock_timeout')
[ "$out" = "20ms" ] || fail "SET deadlock_timeout: got '$out'"
echo "ok: deadlock_timeout 10ms, fsync off, -c settings applied"

# ON_ERROR_STOP: a failing statement fails pg_psql.
if pg_psql selftest -c 'SELECT no_such_column' 2>/dev/null; then
  fail "pg_psql succeeded on a failing statement"
fi

# The URL works as it is, and a wrong password is refused.
url=$(pg_url selftest)
[ "$url" = "postgres://ordo:ordo@127.0.0.1:$PG_PORT/selftest" ] ||
  fail "pg_url: got '$url'"
out=$(PGCONNECT_TIMEOUT=$((10 * MULT)) timeout "$((30 * MULT))" \
  psql -X -At -d "$url" -c 'SELECT 1') ||
  fail "psql '$url' failed"
[ "$out" = 1 ] || fail "psql '$url': got '$out'"
set +e
err=$(PGPASSWORD=wrong PGCONNECT_TIMEOUT=$((10 * MULT)) \
  timeout "$((30 * MULT))" psql -X -At -h 127.0.0.1 -p "$PG_PORT" -U ordo \
  -d selftest -c 'SELECT 1' 2>&1 </dev/null)
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "a wrong password was accepted"
grep -q 'password authentication failed' <<< "$err" ||
  fail "a wrong password: want 'password authentication failed', got '$err'"
echo "ok: pg_url connects; a wrong password is refused"

# pg_stop_all: the postmaster is gone, its folder removed.
pid=$PG_PID
dir=$PG_DIR
pg_stop_all
if kill -0 "$pid" 2>/dev/null; then
  fail "postmaster $pid still runs after pg_stop_all"
fi
[ ! -e "$dir" ] || fail "$dir still exists after pg_stop_all"
echo "ok: pg_stop_all stopped postmaster $pid and removed $dir"

# The wrapper mode: COMMAND sees PG_URL, its status comes back, and the
# cluster is gone afterwards.
probe=$(mktemp)
trap 'rm -f "$probe"; pg_stop_all' EXIT
set +e
bash "$here/pg_fixture.sh" bash -c 'set -e
  echo "$PG_PID $PG_DIR" >"$1"
  [ "$(psql -X -At -d "$PG_URL" -c "SELECT current_database()")" = ordo ]
  exit 7' _ "$probe"
rc=$?
set -e
[ "$rc" -eq 7 ] || fail "wrapper mode: want exit status 7, got $rc"
read -r pid dir <"$probe"
if kill -0 "$pid" 2>/dev/null; then
  fail "wrapper mode: postmaster $pid still runs after the command"
fi
[ ! -e "$dir" ] || fail "wrapper mode: $dir still exists"
echo "ok: wrapper mode: PG_URL reaches database ordo, status 7 passed on," \
  "cluster stopped and removed"
echo "pg_fixture_selftest: all passed in $((SECONDS - start)) s"
