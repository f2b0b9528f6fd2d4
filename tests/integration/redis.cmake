# redis.cmake -- the redis:// backend against real redis-server processes,
# each script starting its own through redis_fixture.sh (a fresh --dir, a
# free port, no persistence, every wait bounded): the conformance suite,
# `ordo bank`, and test_redis.c (the key layout, leases and their loss,
# stale holders, bad input, idle connections, 20 waiters and one release,
# a one-node Cluster). Included from tests/CMakeLists.txt.
set(ORDO_ITR ${CMAKE_CURRENT_LIST_DIR})

add_executable(test_redis ${ORDO_ITR}/test_redis.c)
target_include_directories(test_redis PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_compile_definitions(test_redis PRIVATE _GNU_SOURCE)
target_link_libraries(test_redis PRIVATE ordo_static PkgConfig::CMOCKA)

add_test(NAME conformance_redis
  COMMAND bash ${ORDO_ITR}/conformance_redis.sh $<TARGET_FILE:conformance>)
add_test(NAME integration_bank_redis
  COMMAND bash ${ORDO_ITR}/bank_redis.sh $<TARGET_FILE:ordo_cli>)
add_test(NAME integration_redis
  COMMAND bash ${ORDO_ITR}/redis_it.sh $<TARGET_FILE:test_redis>)
set_tests_properties(conformance_redis PROPERTIES TIMEOUT 240 LABELS redis)
set_tests_properties(integration_bank_redis PROPERTIES TIMEOUT 90 LABELS redis)
set_tests_properties(integration_redis PROPERTIES TIMEOUT 240 LABELS redis)
