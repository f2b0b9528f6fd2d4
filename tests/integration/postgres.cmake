# postgres.cmake -- tests against real PostgreSQL clusters, each script
# starting its own through pg_fixture.sh (a fresh initdb in a mktemp folder,
# a free port of 127.0.0.1, fsync off, deadlock_timeout 10ms, role ordo
# with password ordo, every wait bounded; run as the postgres user when we
# are root). Included from tests/CMakeLists.txt. Each test carries the
# label "postgres" (ctest -L postgres runs them all).
#
# The tests:
#   pg_fixture  pg_fixture.sh itself: start, createdb, psql over TCP with
#               the password, a wrong password refused, deadlock_timeout,
#               stop, and the wrapper mode.
#   conformance_postgres  the backend conformance suite on postgres://
#               (session scope), through pg_it.sh.
#   integration_postgres  test_postgres.c: URLs, bad input, the values in
#               pg_locks, timeouts, timeout_ms against a stopped backend,
#               every call's bound with the whole server SIGSTOPped,
#               an incremental deadlock PostgreSQL finds, the fencing
#               pattern (two clients, one whose session was killed), two
#               roles with schemas of their own sharing one token
#               sequence, fence_seq, a killed session, the server's idle
#               timeouts ending a holder's session, xact scope.
#   integration_pg_fence_crash  pg_fence_crash.sh: fencing tokens never
#               go back across kill -9 of the server with
#               synchronous_commit off, in both scopes, a key held at the
#               crash included (issue 18, item 9); about 6 s.
#   integration_bank_pg  pg_bank.sh: `ordo bank`'s ledger on real rows
#               (src/cli/bank_pg.c): ordered (no deadlock, within 10 s) and
#               naive (pg_stat_database's deadlocks = the 40P01 errors), the
#               journal and balances checked again with psql; the conninfo
#               form; a server down, a wrong password, a missing database
#               and a malformed URL (exit 2, one line); a leaked unit
#               failing the check; a hung run ending in the watchdog.
# (Further tests of `ordo bank`'s ledger on PostgreSQL go below, each
# listed here with a line on what it covers.)
set(ORDO_ITPG ${CMAKE_CURRENT_LIST_DIR})

add_test(NAME pg_fixture
  COMMAND bash ${ORDO_ITPG}/pg_fixture_selftest.sh)
set_tests_properties(pg_fixture PROPERTIES TIMEOUT 120 LABELS postgres)

add_executable(test_postgres ${ORDO_ITPG}/test_postgres.c)
target_include_directories(test_postgres PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_compile_definitions(test_postgres PRIVATE _GNU_SOURCE)
target_link_libraries(test_postgres PRIVATE ordo_static PkgConfig::CMOCKA
  PkgConfig::LIBPQ)
add_test(NAME conformance_postgres
  COMMAND bash ${ORDO_ITPG}/pg_it.sh $<TARGET_FILE:conformance> @URL@)
add_test(NAME integration_postgres
  COMMAND bash ${ORDO_ITPG}/pg_it.sh $<TARGET_FILE:test_postgres>)
set_tests_properties(conformance_postgres PROPERTIES TIMEOUT 240
  LABELS postgres)
set_tests_properties(integration_postgres PROPERTIES TIMEOUT 240
  LABELS postgres)

add_test(NAME integration_pg_fence_crash
  COMMAND bash ${ORDO_ITPG}/pg_fence_crash.sh $<TARGET_FILE:test_postgres>)
set_tests_properties(integration_pg_fence_crash PROPERTIES TIMEOUT 180
  LABELS postgres)

add_test(NAME integration_bank_pg
  COMMAND bash ${ORDO_ITPG}/pg_bank.sh $<TARGET_FILE:ordo_cli>)
set_tests_properties(integration_bank_pg PROPERTIES TIMEOUT 180
  LABELS postgres)
