# cli.cmake -- ctest registrations for the `ordo` command (src/cli), included
# from tests/CMakeLists.txt. Each script gets the built binary as $1, bounds
# every run of it with `timeout` (lib.sh), and needs bash and python3 (for
# JSON).
set(ORDO_CLI_TESTS ${CMAKE_CURRENT_LIST_DIR})

add_test(NAME cli_bank_default
  COMMAND bash ${ORDO_CLI_TESTS}/bank_default.sh $<TARGET_FILE:ordo_cli>)
add_test(NAME cli_bank_many
  COMMAND bash ${ORDO_CLI_TESTS}/bank_many.sh $<TARGET_FILE:ordo_cli>)
add_test(NAME cli_usage
  COMMAND bash ${ORDO_CLI_TESTS}/usage.sh $<TARGET_FILE:ordo_cli>)
add_test(NAME cli_help
  COMMAND bash ${ORDO_CLI_TESTS}/help.sh $<TARGET_FILE:ordo_cli>)
add_test(NAME cli_progress
  COMMAND bash ${ORDO_CLI_TESTS}/progress.sh $<TARGET_FILE:ordo_cli>)
add_test(NAME cli_fault
  COMMAND bash ${ORDO_CLI_TESTS}/fault.sh $<TARGET_FILE:ordo_cli>)
add_test(NAME cli_watchdog
  COMMAND bash ${ORDO_CLI_TESTS}/watchdog.sh $<TARGET_FILE:ordo_cli>)
add_test(NAME cli_bank_naive
  COMMAND bash ${ORDO_CLI_TESTS}/bank_naive.sh $<TARGET_FILE:ordo_cli>)
add_test(NAME cli_bank_compare
  COMMAND bash ${ORDO_CLI_TESTS}/bank_compare.sh $<TARGET_FILE:ordo_cli>)
add_test(NAME cli_graph
  COMMAND bash ${ORDO_CLI_TESTS}/graph.sh $<TARGET_FILE:ordo_cli>)

# The scripts' own bounds grow with ORDO_TEST_TIMEOUT_MULT (lib.sh); so
# does this outer one (tests/CMakeLists.txt scales every test's TIMEOUT).
set(ORDO_CLI_TIMEOUT 60)
set_tests_properties(
  cli_bank_default cli_bank_many cli_usage cli_help cli_progress cli_fault
  cli_watchdog cli_bank_naive cli_bank_compare cli_graph
  PROPERTIES TIMEOUT ${ORDO_CLI_TIMEOUT} LABELS cli)
