# redlock.cmake -- the redlock:// backend against real redis-server
# processes (redis_fixture.sh): the conformance suite and `ordo bank` on 3
# nodes; faults on 5 (two killed mid-run, then a third); and test_redlock.c
# (URLs, unreachable nodes, passwords and users, a database, Unix-socket
# nodes and the two modes run against the nodes, a single owner's tokens
# across a forgotten counter and a stopped node, a stale holder, an upgrade
# no majority granted, owner values from getrandom, SCRIPT FLUSH, the
# per-node timeout, a black-holed node, lost leases told in time, a node
# restarted empty, a node stopped past the lease under an owner
# register). Included from tests/CMakeLists.txt.
set(ORDO_ITRL ${CMAKE_CURRENT_LIST_DIR})

add_executable(test_redlock ${ORDO_ITRL}/test_redlock.c)
target_include_directories(test_redlock PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_compile_definitions(test_redlock PRIVATE _GNU_SOURCE)
target_link_libraries(test_redlock PRIVATE ordo_static PkgConfig::CMOCKA)

add_test(NAME redlock_conformance
  COMMAND bash ${ORDO_ITRL}/redlock_conformance.sh $<TARGET_FILE:conformance>)
add_test(NAME redlock_bank
  COMMAND bash ${ORDO_ITRL}/redlock_bank.sh $<TARGET_FILE:ordo_cli>)
add_test(NAME redlock_faults
  COMMAND bash ${ORDO_ITRL}/redlock_faults.sh $<TARGET_FILE:ordo_cli>)
add_test(NAME integration_redlock
  COMMAND bash ${ORDO_ITRL}/redlock_it.sh $<TARGET_FILE:test_redlock>)
set_tests_properties(redlock_conformance PROPERTIES TIMEOUT 240 LABELS redis)
set_tests_properties(redlock_bank PROPERTIES TIMEOUT 120 LABELS redis)
set_tests_properties(redlock_faults PROPERTIES TIMEOUT 200 LABELS redis)
set_tests_properties(integration_redlock PROPERTIES TIMEOUT 240 LABELS redis)
