# etcd.cmake -- the etcd:// backend against real etcd members, each script
# starting its own through etcd_fixture.sh (fresh data dirs, free loopback
# ports, every wait bounded): the conformance suite and `ordo bank` on one
# member. Plain build only: each lock is a Raft write, and the sanitizer
# builds would add time to make test for no new path (the backend's code
# runs the same there). Included from tests/CMakeLists.txt.
set(ORDO_ETCD_ITR ${CMAKE_CURRENT_LIST_DIR})
if(ORDO_SANITIZE STREQUAL "")
  add_test(NAME conformance_etcd
    COMMAND bash ${ORDO_ETCD_ITR}/conformance_etcd.sh $<TARGET_FILE:conformance>)
  add_test(NAME integration_bank_etcd
    COMMAND bash ${ORDO_ETCD_ITR}/bank_etcd.sh $<TARGET_FILE:ordo_cli>)
  set_tests_properties(conformance_etcd PROPERTIES TIMEOUT 240 LABELS etcd)
  set_tests_properties(integration_bank_etcd PROPERTIES TIMEOUT 150 LABELS etcd)
endif()
