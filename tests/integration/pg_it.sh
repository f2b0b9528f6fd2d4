#!/usr/bin/env bash
# pg_it.sh BINARY [ARGS...] -- runs a test program of the postgres://
# backend against a throw-away cluster (pg_fixture.sh) with a database of
# its own: ORDO_PG_URL (role ordo), ORDO_PG_PORT and ORDO_PG_PID (the
# postmaster) are exported, and the
# literal word @URL@ among ARGS becomes that URL (the conformance suite
# takes its URL as an argument). The cluster's log tail is shown when the
# program fails.
set -euo pipefail
. "$(dirname "$0")/pg_fixture.sh"
BIN=${1:?usage: $0 BINARY [ARGS...]}
shift
pg_start
pg_createdb ordo_it
export ORDO_PG_URL ORDO_PG_PORT=$PG_PORT ORDO_PG_PID=$PG_PID
ORDO_PG_URL=$(pg_url ordo_it)
args=()
for a in "$@"; do
  if [ "$a" = @URL@ ]; then args+=("$ORDO_PG_URL"); else args+=("$a"); fi
done
set +e
timeout 200 "$BIN" "${args[@]}"
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  echo "FAIL: $BIN exited $rc; the server's log:" >&2
  tail -n 30 "$PG_DIR/log" >&2 || true
fi
exit "$rc"
