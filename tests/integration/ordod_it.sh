#!/usr/bin/env bash
# ordod_it.sh ORDOD TEST_ORDOD_BACKEND -- runs
# tests/integration/test_ordod_backend.c against a real ordod that
# ordod_fixture.sh starts with a password (--requirepass s3cret), a Unix
# socket in a folder of its own (--unixsocket), and small limits
# (--max-keys 4, --max-session-locks 8). It exports ORDO_OD_PORT,
# ORDO_OD_PID, ORDO_OD_SOCK, ORDO_OD_PASS, ORDO_OD_MAX_KEYS and
# ORDO_OD_MAX_SESSION_LOCKS. The program is bounded by 200 s times
# ORDO_TEST_TIMEOUT_MULT; the fixture lets a stopped ordod run again before
# it stops it, and fails the test if ordod does not stop cleanly or a
# sanitizer reports.
set -euo pipefail
# shellcheck source=ordod_fixture.sh
. "$(dirname "$0")/ordod_fixture.sh"
ORDOD=${1:?usage: $0 ORDOD TEST_ORDOD_BACKEND}
BIN=${2:?usage: $0 ORDOD TEST_ORDOD_BACKEND}
max_keys=4
max_session_locks=8
sock_dir=$(mktemp -d)
if ! ordod_start "$ORDOD" --requirepass s3cret \
  --unixsocket "$sock_dir/ordod.sock" --max-keys "$max_keys" \
  --max-session-locks "$max_session_locks"; then
  rm -rf "$sock_dir"
  exit 1
fi
# Our EXIT trap replaces the fixture's: it removes the socket's folder, then
# ends as the fixture's would (ordod_exit stops the server and checks it).
# shellcheck disable=SC2317 # called by the trap
on_exit() {
  local rc=$?
  rm -rf "$sock_dir"
  ordod_exit "$rc"
}
trap on_exit EXIT
export ORDO_OD_PORT=$ORDOD_PORT ORDO_OD_PID=$ORDOD_PID \
  ORDO_OD_SOCK=$sock_dir/ordod.sock ORDO_OD_PASS=s3cret \
  ORDO_OD_MAX_KEYS=$max_keys ORDO_OD_MAX_SESSION_LOCKS=$max_session_locks

set +e
timeout "$((200 * MULT))" "$BIN"
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  echo "FAIL: test_ordod_backend exited $rc; ordod's stderr:" >&2
  ordod_log >&2
fi
exit "$rc"
