# redlock.cmake -- the redlock:// backend against real redis-server
# processes (redis_fixture.sh): the conformance suite and `ordo bank` on 3
# nodes. Included from tests/CMakeLists.txt.
set(ORDO_ITRL ${CMAKE_CURRENT_LIST_DIR})
add_test(NAME redlock_conformance
  COMMAND bash ${ORDO_ITRL}/redlock_conformance.sh $<TARGET_FILE:conformance>)
add_test(NAME redlock_bank
  COMMAND bash ${ORDO_ITRL}/redlock_bank.sh $<TARGET_FILE:ordo_cli>)
set_tests_properties(redlock_conformance PROPERTIES TIMEOUT 240 LABELS redis)
set_tests_properties(redlock_bank PROPERTIES TIMEOUT 120 LABELS redis)
# redlock_faults.sh (5 nodes: two killed mid-run, then a third) is not
# registered yet: a run that loses two nodes mid-transfer sometimes stops on
# ORDO_ELEASE, which is a bug in how a release counts a majority with dead
# nodes, not in the test. It joins the suite with the fix.
