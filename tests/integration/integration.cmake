# integration.cmake -- the ordod:// backend and `ordo lock` against a real
# ordod, each script starting its own through ordod_fixture.sh (a fresh
# --dir, a free port, a 1 s lease, every wait bounded), and the backend's
# URL checks, which need no server. Included from tests/CMakeLists.txt.
set(ORDO_ITB ${CMAKE_CURRENT_LIST_DIR})

ordo_cmocka_test(unit_ordod_url unit/test_ordod_url.c 30)

add_test(NAME conformance_ordod
  COMMAND bash ${ORDO_ITB}/conformance_ordod.sh $<TARGET_FILE:ordod>
          $<TARGET_FILE:conformance>)
add_test(NAME integration_bank_ordod
  COMMAND bash ${ORDO_ITB}/bank_ordod.sh $<TARGET_FILE:ordod>
          $<TARGET_FILE:ordo_cli>)
add_test(NAME integration_lock
  COMMAND bash ${ORDO_ITB}/lock.sh $<TARGET_FILE:ordod>
          $<TARGET_FILE:ordo_cli>)
set_tests_properties(conformance_ordod PROPERTIES TIMEOUT 240 LABELS server)
set_tests_properties(integration_bank_ordod integration_lock
  PROPERTIES TIMEOUT 90 LABELS server)
