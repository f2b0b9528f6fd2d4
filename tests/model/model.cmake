# model.cmake -- the model-based tester and the history checker
# (tests/model/README.md). model_quick runs model_test, a real mem:// place
# against the reference model (model.c) for 10^6 steps from a fresh seed
# (times ORDO_TEST_SCALE); model_history runs real threads on a real clock
# and checks the history they log. Included from tests/CMakeLists.txt.
set(ORDO_MODEL_DIR ${CMAKE_CURRENT_LIST_DIR})

add_executable(model_test ${ORDO_MODEL_DIR}/model_test.c
                          ${ORDO_MODEL_DIR}/model.c)
target_include_directories(model_test PRIVATE ${ORDO_MODEL_DIR}/../../src)
target_compile_definitions(model_test PRIVATE _GNU_SOURCE)
target_link_libraries(model_test PRIVATE ordo_static)
# The hot-key spin's yields are counted per call (model_test.c).
target_link_options(model_test PRIVATE -Wl,--wrap=sched_yield)
add_test(NAME model_quick COMMAND model_test --steps 1000000)
set_tests_properties(model_quick PROPERTIES TIMEOUT 300)

# The history checker runs under every build, TSan's included (scaled by
# ORDO_TEST_SCALE); its watchdog dumps the lock table if the threads hang.
add_executable(model_history ${ORDO_MODEL_DIR}/history.c)
target_include_directories(model_history PRIVATE ${ORDO_MODEL_DIR}/../../src)
target_compile_definitions(model_history PRIVATE _GNU_SOURCE)
target_link_libraries(model_history PRIVATE ordo_static)
add_test(NAME model_history COMMAND model_history)
set_tests_properties(model_history PROPERTIES TIMEOUT 240)
