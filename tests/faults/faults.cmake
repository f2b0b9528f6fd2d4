# faults.cmake -- the fault harness (docs/reliability.md): fclient (the
# clients of the fenced register) and, in the plain build only, one test
# per remote backend that runs tests/faults/run.sh: at least 10^4
# operations under a schedule of all four faults (pause, kill -9 and
# restart, the proxy's drop, delay, cut and black hole, and a partition
# made with network namespaces), then check.py over the history. The
# sanitizer builds build fclient but do not run the harness (label faults):
# make test's time is spent once. `make faults` runs 10^6 operations per
# backend. etcd:// has a test of its own (etcd_faults.sh): the leader of a
# 3-member cluster killed during the run; the sharded ordod:// place too
# (shards.sh, faults_shards). Included from tests/CMakeLists.txt.
set(ORDO_FLT ${CMAKE_CURRENT_LIST_DIR})

add_executable(fclient ${ORDO_FLT}/fclient.c ${ORDO_FLT}/register.c)
target_compile_definitions(fclient PRIVATE _GNU_SOURCE)
# src/ for backend/shards.h: the placement and a sharded txn's gid.
target_include_directories(fclient PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(fclient PRIVATE ordo_static)

if(ORDO_SANITIZE STREQUAL "")
  foreach(b ordod redis redlock postgres)
    add_test(NAME faults_${b}
      COMMAND bash ${ORDO_FLT}/run.sh ${b} $<TARGET_FILE:fclient>
              $<TARGET_FILE:ordod>)
    set_tests_properties(faults_${b} PROPERTIES TIMEOUT 150 LABELS faults)
  endforeach()
  # The sharded target (shards.sh): 3 ordods linked by --peers through the
  # proxy, clients that take keys one at a time in a random order; 4
  # rounds of pause, kill -9 and restart of a shard, a fault of a link
  # between shards, and a client's kill while its txn waits; at least 10^4
  # locks granted; then check.py's exclusion, phantom, victim and missed
  # checks beside the others. About 60 s here.
  add_test(NAME faults_shards
    COMMAND bash ${ORDO_FLT}/shards.sh $<TARGET_FILE:fclient>
            $<TARGET_FILE:ordod>)
  set_tests_properties(faults_shards PROPERTIES TIMEOUT 200 LABELS faults)
  # etcd:// on a 3-member cluster, its leader killed and restarted twice
  # (etcd_faults.sh): its own script, since the proxy and the namespaces of
  # run.sh stand between one client and one server, and etcd's faults are
  # about which member leads.
  add_test(NAME faults_etcd
    COMMAND bash ${ORDO_FLT}/etcd_faults.sh $<TARGET_FILE:fclient>)
  set_tests_properties(faults_etcd PROPERTIES TIMEOUT 150 LABELS faults)
  # check.py catches each kind of violation in a made-up history.
  add_test(NAME faults_check_selftest
    COMMAND python3 ${ORDO_FLT}/check_selftest.py)
  set_tests_properties(faults_check_selftest PROPERTIES TIMEOUT 60
    LABELS faults)
endif()
