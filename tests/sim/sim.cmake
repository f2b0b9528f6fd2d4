# sim.cmake -- the simulator's quick check (sim/README.md), included from
# tests/CMakeLists.txt. quick.sh gets ordo_probesim as $1; its 28 runs take
# about 3 s of CPU, and a few times that under ASan (the simulator is one
# thread, so TSan has nothing to find but runs it too).
add_test(NAME sim_quick
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/quick.sh $<TARGET_FILE:ordo_probesim>)
set_tests_properties(sim_quick PROPERTIES TIMEOUT 60 LABELS sim)
