# sentinel.cmake -- the redis-sentinel:// backend against one primary, one
# replica and three sentinels (sentinel_fixture.sh, started once per
# script): the conformance suite, `ordo bank`, and test_sentinel.c (URLs,
# the resolved primary, and a SIGKILL of the primary under a lock loop:
# the client follows to the new primary, and a txn holding a key across it
# gets ORDO_ELEASE). Not registered, for time (about 17 s): its SENTINEL
# FAILOVER case, `bash tests/integration/sentinel_it.sh
# build/tests/test_sentinel switch`. Plain build only (each script runs a failover's worth
# of seconds). Included from tests/CMakeLists.txt.
set(ORDO_ITSN ${CMAKE_CURRENT_LIST_DIR})

if(ORDO_SANITIZE STREQUAL "")
  add_executable(test_sentinel ${ORDO_ITSN}/test_sentinel.c)
  target_include_directories(test_sentinel PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_definitions(test_sentinel PRIVATE _GNU_SOURCE)
  target_link_libraries(test_sentinel PRIVATE ordo_static PkgConfig::CMOCKA)

  add_test(NAME sentinel_conformance
    COMMAND bash ${ORDO_ITSN}/sentinel_conformance.sh
            $<TARGET_FILE:conformance>)
  add_test(NAME sentinel_bank
    COMMAND bash ${ORDO_ITSN}/sentinel_bank.sh $<TARGET_FILE:ordo_cli>)
  add_test(NAME sentinel_failover
    COMMAND bash ${ORDO_ITSN}/sentinel_it.sh $<TARGET_FILE:test_sentinel>)
  set_tests_properties(sentinel_conformance PROPERTIES TIMEOUT 240
                       LABELS redis)
  set_tests_properties(sentinel_bank PROPERTIES TIMEOUT 120 LABELS redis)
  set_tests_properties(sentinel_failover PROPERTIES TIMEOUT 180 LABELS redis)
endif()
