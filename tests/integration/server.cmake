# server.cmake -- ordod as a real process, driven by peers' clients:
# Debian's python3-redis (a Redis client library of another language),
# redis-cli, and raw sockets. Included from tests/CMakeLists.txt.
#
# /usr/bin/python3 on purpose: it is Debian's, which has python3-redis
# (scripts/bootstrap.sh installs it); a python3 earlier on PATH may not.
set(ORDO_IT ${CMAKE_CURRENT_LIST_DIR})
add_test(NAME integration_ordod
  COMMAND /usr/bin/python3 ${ORDO_IT}/test_ordod.py $<TARGET_FILE:ordod>)
# Shards of ordod linked by --peers: deadlocks across them found by probes
# (docs/distributed.md), 10,000 cycles of the phantom check among them.
add_test(NAME integration_probes
  COMMAND /usr/bin/python3 ${ORDO_IT}/test_probes.py $<TARGET_FILE:ordod>
          $<TARGET_FILE:ordo_cli>)
# The probes under faults (issue 30): a stopped shard, a cut or delayed
# peer link (a proxy in the test), hostile and lying peers; one case per
# defect, each its own shards. Just these: ctest -R integration_probes_faults,
# or test_probes_faults.py ORDOD case_name...
add_test(NAME integration_probes_faults
  COMMAND /usr/bin/python3 ${ORDO_IT}/test_probes_faults.py $<TARGET_FILE:ordod>)
set_tests_properties(integration_probes_faults PROPERTIES TIMEOUT 180
  LABELS server)
# The hostile review of the new protocol (issue 30): one case per finding,
# each failing before its fix (a late or slow RELEASE, SESSION KILL and
# the engine's reorder against a confirmed cycle, a borrowed gid, a
# refused RELEASE, pins and the victim's answer under a stopped or killed
# shard, hot keys, a peer that does not read, and what a connection with
# PEER rights can forge).
# Not in the TSan build: its cases drive the loop thread's protocol logic
# (which the plain and ASan builds check), through long waits on stopped
# shards that TSan's slowdown only stretches; the server's threads meet
# the engine's under TSan in integration_probes and _faults.
if(NOT ORDO_SANITIZE STREQUAL "thread")
  add_test(NAME integration_probes_review
    COMMAND /usr/bin/python3 ${ORDO_IT}/test_probes_review.py
            $<TARGET_FILE:ordod>)
  set_tests_properties(integration_probes_review PROPERTIES TIMEOUT 300
    LABELS server)
endif()
# The admin commands: CLIENT KILL, SESSION KILL, LOCKWAITS, CONFIG.
add_test(NAME integration_admin
  COMMAND /usr/bin/python3 ${ORDO_IT}/test_admin.py $<TARGET_FILE:ordod>)
set_tests_properties(integration_admin PROPERTIES TIMEOUT 120 LABELS server)
add_test(NAME integration_redis_cli
  COMMAND bash ${ORDO_IT}/redis_cli.sh $<TARGET_FILE:ordod> redis-cli)
add_test(NAME integration_docs_examples
  COMMAND /usr/bin/python3 ${ORDO_IT}/docs_examples.py $<TARGET_FILE:ordod>
          ${PROJECT_SOURCE_DIR}/docs/protocol.md)
add_test(NAME integration_resp3_push
  COMMAND bash ${ORDO_IT}/resp3_push.sh $<TARGET_FILE:ordod>)
# The metrics port (docs/metrics.md): promtool, a real Prometheus, headless
# Chromium on the status page during a live deadlock, and hostile HTTP.
add_test(NAME integration_metrics
  COMMAND /usr/bin/python3 ${ORDO_IT}/test_metrics.py $<TARGET_FILE:ordod>
          $<TARGET_FILE:ordo_cli> ${CMAKE_CURRENT_BINARY_DIR}/artifacts)
set_tests_properties(integration_metrics PROPERTIES TIMEOUT 180 LABELS server)
set_tests_properties(integration_ordod integration_probes
  PROPERTIES TIMEOUT 300 LABELS server)
set_tests_properties(integration_redis_cli integration_resp3_push
  integration_docs_examples
  PROPERTIES TIMEOUT 60 LABELS server)
# Users and ACLs (--aclfile): each refusal, the admin's rights, bad files,
# and the key patterns against redis-server's own glob (redis_fixture.sh).
add_test(NAME integration_acl
  COMMAND bash ${ORDO_IT}/redis_fixture.sh /usr/bin/python3
          ${ORDO_IT}/test_acl.py $<TARGET_FILE:ordod>)
set_tests_properties(integration_acl PROPERTIES TIMEOUT 120 LABELS server)
# TLS: ordod's --tls-port (certificates from tls_fixture.sh), the ordod://
# client's tls=1, and rediss:// against a real redis-server with TLS. A
# sanitizer build's libordo.so cannot be loaded into python (ctypes): '-'
# has the test use the CLI alone.
if(ORDO_SANITIZE STREQUAL "")
  set(ORDO_TLS_LIB $<TARGET_FILE:ordo_shared>)
else()
  set(ORDO_TLS_LIB -)
endif()
add_test(NAME integration_tls
  COMMAND /usr/bin/python3 ${ORDO_IT}/test_tls.py $<TARGET_FILE:ordod>
          $<TARGET_FILE:ordo_cli> ${ORDO_TLS_LIB})
set_tests_properties(integration_tls PROPERTIES TIMEOUT 180 LABELS server)
