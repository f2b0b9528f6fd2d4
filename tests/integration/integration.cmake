# integration.cmake -- the ordod:// backend and `ordo lock` against a real
# ordod, each script starting its own through ordod_fixture.sh (a fresh
# --dir, a free port, a 1 s lease, every wait bounded), and the backend's
# URL checks, which need no server. integration_ordod_backend is
# test_ordod_backend.c through ordod_it.sh: an ordod with a password, a Unix
# socket and small limits; ORDO_EAUTH, ORDO_EDEADLK, ORDO_ELIMIT and
# timeout_ms (a stopped server) through the backend's calls. Included from
# tests/CMakeLists.txt.
set(ORDO_ITB ${CMAKE_CURRENT_LIST_DIR})

ordo_cmocka_test(unit_ordod_url unit/test_ordod_url.c 30)
# The sharded place (ordod://a,b,c) without servers: placement and its
# vectors (in C, and in Python against docs/protocol.md's table), URLs.
ordo_cmocka_test(unit_shards unit/test_shards.c 30)
add_test(NAME unit_shards_place
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/unit/test_shards_place.py
          ${PROJECT_SOURCE_DIR}/docs/protocol.md)
set_tests_properties(unit_shards_place PROPERTIES TIMEOUT 30)

add_test(NAME conformance_ordod
  COMMAND bash ${ORDO_ITB}/conformance_ordod.sh $<TARGET_FILE:ordod>
          $<TARGET_FILE:conformance>)
add_test(NAME integration_bank_ordod
  COMMAND bash ${ORDO_ITB}/bank_ordod.sh $<TARGET_FILE:ordod>
          $<TARGET_FILE:ordo_cli>)
add_test(NAME integration_lock
  COMMAND bash ${ORDO_ITB}/lock.sh $<TARGET_FILE:ordod>
          $<TARGET_FILE:ordo_cli>)
add_executable(test_ordod_backend ${ORDO_ITB}/test_ordod_backend.c)
target_include_directories(test_ordod_backend PRIVATE
  ${PROJECT_SOURCE_DIR}/src)
target_compile_definitions(test_ordod_backend PRIVATE _GNU_SOURCE)
target_link_libraries(test_ordod_backend PRIVATE ordo_static
  PkgConfig::CMOCKA)
add_test(NAME integration_ordod_backend
  COMMAND bash ${ORDO_ITB}/ordod_it.sh $<TARGET_FILE:ordod>
          $<TARGET_FILE:test_ordod_backend>)

# A sharded place of 3 ordod servers (shards_fixture.sh starts them):
# test_shards_it.c (global ids and HELDAT on the wire, through a stand-in
# for hiredis's redisAppendCommandArgv; lock_all all or nothing; URL order;
# a stopped and a killed shard), the conformance suite, `ordo bank`.
add_executable(test_shards_it ${ORDO_ITB}/test_shards_it.c)
target_include_directories(test_shards_it PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_compile_definitions(test_shards_it PRIVATE _GNU_SOURCE)
target_link_libraries(test_shards_it PRIVATE ordo_static PkgConfig::CMOCKA)
target_link_options(test_shards_it PRIVATE
  -Wl,--wrap=redisAppendCommandArgv)
add_test(NAME integration_shards
  COMMAND bash ${ORDO_ITB}/shards_it.sh $<TARGET_FILE:ordod>
          $<TARGET_FILE:test_shards_it>)
add_test(NAME conformance_shards
  COMMAND bash ${ORDO_ITB}/conformance_shards.sh $<TARGET_FILE:ordod>
          $<TARGET_FILE:conformance>)
add_test(NAME integration_bank_shards
  COMMAND bash ${ORDO_ITB}/bank_shards.sh $<TARGET_FILE:ordod>
          $<TARGET_FILE:ordo_cli>)
set_tests_properties(integration_shards conformance_shards
  PROPERTIES TIMEOUT 240 LABELS server)
set_tests_properties(integration_bank_shards PROPERTIES TIMEOUT 90
  LABELS server)
set_tests_properties(conformance_ordod PROPERTIES TIMEOUT 240 LABELS server)
set_tests_properties(integration_bank_ordod integration_lock
  PROPERTIES TIMEOUT 90 LABELS server)
set_tests_properties(integration_ordod_backend PROPERTIES TIMEOUT 240
  LABELS server)
