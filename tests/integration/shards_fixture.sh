#!/usr/bin/env bash
# shards_fixture.sh ORDOD N [ORDOD ARGS...] -- COMMAND [ARGS...] -- N
# throw-away ordod servers, each started (and checked at its stop) by
# ordod_fixture.sh with the ORDOD ARGS, then COMMAND with
# ORDO_SHARD_PORTS=p1,p2,... and ORDO_SHARD_PIDS=pid1,pid2,... exported
# (in start order) and ORDO_SHARD_URL=ordod://127.0.0.1:p1,127.0.0.1:p2,...
# Each server is one level of this script running itself with N-1, so
# every one has the fixture's EXIT trap of its own; the script exits with
# COMMAND's status, or 1 if a stop found a failure. COMMAND is bounded by
# ORDOD_FIXTURE_TIMEOUT seconds (240 by default) times MULT.
set -euo pipefail
# shellcheck source=ordod_fixture.sh
. "$(dirname "$0")/ordod_fixture.sh"
ORDOD=${1:?usage: $0 ORDOD N [ORDOD ARGS...] -- COMMAND [ARGS...]}
N=${2:?usage: $0 ORDOD N [ORDOD ARGS...] -- COMMAND [ARGS...]}
shift 2
args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  args+=("$1")
  shift
done
[ $# -gt 1 ] || {
  echo "usage: $0 ORDOD N [ORDOD ARGS...] -- COMMAND [ARGS...]" >&2
  exit 64
}
shift
if [ "$N" -eq 0 ]; then
  hosts=$(echo "$ORDO_SHARD_PORTS" | sed 's/^/127.0.0.1:/; s/,/,127.0.0.1:/g')
  export ORDO_SHARD_URL="ordod://$hosts"
  set +e
  timeout "$((${ORDOD_FIXTURE_TIMEOUT:-240} * MULT))" "$@"
  rc=$?
  set -e
  [ "$rc" -ne 124 ] || echo "shards_fixture: '$*' did not finish in time" >&2
  exit "$rc"
fi
ordod_start "$ORDOD" "${args[@]}"
export ORDO_SHARD_PORTS=${ORDO_SHARD_PORTS:+$ORDO_SHARD_PORTS,}$ORDOD_PORT
export ORDO_SHARD_PIDS=${ORDO_SHARD_PIDS:+$ORDO_SHARD_PIDS,}$ORDOD_PID
set +e
env -u ORDOD_PID -u ORDOD_DIR -u ORDOD_PORT \
  bash "$0" "$ORDOD" "$((N - 1))" "${args[@]}" -- "$@"
rc=$?
set -e
exit "$rc" # the EXIT trap stops this level's server and checks it
