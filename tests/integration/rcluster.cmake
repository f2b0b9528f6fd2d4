# rcluster.cmake -- the redis-cluster:// backend against a real Redis
# Cluster of 3 primaries and 3 replicas (rcluster_fixture.sh, one cluster
# per script): the conformance suite, `ordo bank` over keys on every
# primary, and test_rcluster.c (rcluster_failover.sh): a slot migrated
# under a held key (ASK, then MOVED), a lock lost on purpose with an
# unreplicated primary killed, and a lock loop through a primary's SIGKILL. Plain build only: the sanitizer builds
# run the same code through redis:// and redlock://, and make test's time
# is spent once. Included from tests/CMakeLists.txt.
set(ORDO_ITRC ${CMAKE_CURRENT_LIST_DIR})

add_executable(test_rcluster ${ORDO_ITRC}/test_rcluster.c)
target_include_directories(test_rcluster PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_compile_definitions(test_rcluster PRIVATE _GNU_SOURCE)
target_link_libraries(test_rcluster PRIVATE ordo_static PkgConfig::CMOCKA)

if(ORDO_SANITIZE STREQUAL "")
  add_test(NAME rcluster_conformance
    COMMAND bash ${ORDO_ITRC}/conformance_rcluster.sh
            $<TARGET_FILE:conformance>)
  add_test(NAME rcluster_bank
    COMMAND bash ${ORDO_ITRC}/bank_rcluster.sh $<TARGET_FILE:ordo_cli>)
  add_test(NAME rcluster_failover
    COMMAND bash ${ORDO_ITRC}/rcluster_failover.sh
            $<TARGET_FILE:test_rcluster>)
  set_tests_properties(rcluster_failover PROPERTIES TIMEOUT 150 LABELS redis)
  set_tests_properties(rcluster_conformance PROPERTIES TIMEOUT 240
    LABELS redis)
  set_tests_properties(rcluster_bank PROPERTIES TIMEOUT 120 LABELS redis)
endif()
