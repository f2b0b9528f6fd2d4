# spin.cmake -- the model checks of the engine's two protocols
# (src/core/fast.pml, src/core/grant.pml; src/core/README.md, "The models"),
# of the probe protocol between shards (src/server/probe.pml;
# src/server/README.md, "The model") and of the executor's action protocol
# (src/exec/exec.pml; src/exec/README.md, "The model").
# tests/spin/run_spin.sh runs spin and pan on each, and then checks that each
# deliberate bug the model lists is caught. make test runs the fast path at
# its full bound (3 threads, 2 keys, 2 lock objects, any number of calls) and
# the grant protocol at 2 threads (and again with every thread allowed to
# time out and cancel); `make verify` runs the grant protocol at 3 threads
# (about 33 million states). make test runs the probe protocol's small
# bound (every scenario but 3 txns on 3 shards, one fault each, about half a
# million states, and each deliberate bug at its scenario: about a minute);
# make verify runs 3 txns on 3 shards. make test runs the executor's model at
# 2 workers and 3 tasks (about half a million states) with each of its
# deliberate bugs (about 25 s of CPU, most of it compiling pan ten times);
# make verify runs 3 workers and 4 tasks. The models do not run our C code, so
# the sanitizer builds do not run them again. Included from
# tests/CMakeLists.txt.
if(NOT ORDO_SANITIZE)
  set(ORDO_SPIN_RUN ${CMAKE_CURRENT_LIST_DIR}/run_spin.sh)
  set(ORDO_CORE_DIR ${CMAKE_CURRENT_LIST_DIR}/../../src/core)
  # fast.pml's full search is deep (about 11 million steps): its stack
  # needs --depth, and 2^25 hash slots keep its 21 million states apart.
  add_test(NAME spin_fast
           COMMAND bash ${ORDO_SPIN_RUN} --depth 20000000 --hash 25
                   ${ORDO_CORE_DIR}/fast.pml)
  add_test(NAME spin_grant_quick
           COMMAND bash ${ORDO_SPIN_RUN} -D NT=2 ${ORDO_CORE_DIR}/grant.pml)
  # Every thread may time out and cancel (the default lets one of each).
  add_test(NAME spin_grant_aborts
           COMMAND bash ${ORDO_SPIN_RUN} --no-bugs -D NT=2 -D ALL_ABORTS
                   ${ORDO_CORE_DIR}/grant.pml)
  # The probe protocol: its default bound, and its bugs at their scenarios.
  add_test(NAME spin_probe_quick
           COMMAND bash ${ORDO_SPIN_RUN}
                   ${CMAKE_CURRENT_LIST_DIR}/../../src/server/probe.pml)
  # The executor's action protocol: its default bound and its bugs. Half a
  # million states at a depth under 500 need neither 2^24 hash slots nor a
  # stack of a million steps.
  add_test(NAME spin_exec_quick
           COMMAND bash ${ORDO_SPIN_RUN} --depth 10000 --hash 22
                   ${CMAKE_CURRENT_LIST_DIR}/../../src/exec/exec.pml)
  set_tests_properties(spin_fast spin_grant_quick spin_grant_aborts
                       spin_probe_quick spin_exec_quick PROPERTIES TIMEOUT 600)
endif()
