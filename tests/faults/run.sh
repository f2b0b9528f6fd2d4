#!/usr/bin/env bash
# run.sh BACKEND FCLIENT ORDOD -- one run of the fault harness
# (docs/reliability.md) against BACKEND (ordod, redis, redlock, postgres):
# starts its servers with tests/integration's fixtures (redis with
# appendonly yes and appendfsync always, the setting docs/backend-redis.md
# says keeps its counters; three such nodes for redlock), puts fproxy.py in
# front of each, starts two fclient processes, each in a network namespace
# of its own (lib.sh), and, while they run, a schedule of faults, one at a
# time, in turn: pause a server (SIGSTOP, 0.5-2.5 s), kill -9 and restart it
# (on its data), a proxy fault (drop every connection; delay 50-200 ms; cut
# replies; black hole; 0.3-1.3 s each), and a partition of one client's
# namespace; then check.py over the history, asserting what the backend's
# doc promises. The clients must be granted FAULTS_OPS locks in all (10^4
# by default; `make faults` asks 10^6) within FAULTS_MAX_S seconds (120).
# The run's folder is kept, and named, when it fails (or with FAULTS_KEEP
# set). Exit 0 passed, 1 failed, 77 skipped (not root). `run.sh shards`
# runs shards.sh, the sharded target (its own header).
set -uo pipefail
BACKEND=${1:?usage: run.sh ordod|redis|redlock|postgres|shards FCLIENT ORDOD}
FCLIENT=${2:?usage: run.sh BACKEND FCLIENT ORDOD}
ORDOD=${3:?usage: run.sh BACKEND FCLIENT ORDOD}
HERE=$(cd "$(dirname "$0")" && pwd)
# The sharded target has a schedule of its own (shards.sh).
[ "$BACKEND" != shards ] || exec bash "$HERE/shards.sh" "$FCLIENT" "$ORDOD"
# shellcheck source=lib.sh
. "$HERE/lib.sh"
fx_require_root

OPS=${FAULTS_OPS:-10000}
MAXS=${FAULTS_MAX_S:-120}
LEASE=1000
LOCK_MS=300
NPROC=2
THREADS=4
KEYS=4
# The fixtures' guards kill a server after a fixed time, whatever the
# traps do: a long run (make faults) needs them past its own end.
: "${ORDOD_FIXTURE_MAX_S:=$((MAXS + 120))}" "${REDIS_FIXTURE_MAX_S:=$((MAXS + 120))}"
: "${PG_FIXTURE_MAX_S:=$((MAXS + 120))}"
export ORDOD_FIXTURE_MAX_S REDIS_FIXTURE_MAX_S PG_FIXTURE_MAX_S
FX_RUN=$(mktemp -d "${TMPDIR:-/tmp}/ordo-faults.XXXXXX")
chmod 755 "$FX_RUN"
CLIENTS=()
RC=0

fail() {
  echo "faults $BACKEND: FAIL: $*" >&2
  RC=1
}

# The EXIT trap: clients, schedule, proxy, namespaces, then the servers
# (ordod's stop is a check: a crash or a sanitizer report fails the run).
fx_exit() {
  local rc=$? p
  [ "$RC" -eq 0 ] || rc=1
  for p in "${CLIENTS[@]}"; do
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  fx_proxy_stop
  fx_netns_down
  case $BACKEND in
    ordod) ordod_stop || rc=1 ;;
    redis | redlock) redis_stop_all ;;
    postgres) pg_stop_all ;;
  esac
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] || [ -n "${FAULTS_KEEP:-}" ]; then
    echo "faults $BACKEND: the run's folder is kept: $FX_RUN" >&2
  else
    rm -rf "$FX_RUN"
  fi
  exit "$rc"
}
trap fx_exit EXIT

fx_netns_up "$NPROC" || {
  echo "faults: could not make the client namespaces" >&2
  exit 1
}

# The servers, and for each a route of the proxy: TARGETS names them for
# the schedule.
TARGETS=()
case $BACKEND in
  ordod)
    . "$HERE/../integration/ordod_fixture.sh"
    mkdir "$FX_RUN/ordod-state"
    ordod_start "$ORDOD" --dir "$FX_RUN/ordod-state" --lease-ms "$LEASE" ||
      exit 1
    trap fx_exit EXIT
    fx_proxy_start "$FX_RUN/faults.log" "srv=127.0.0.1:$ORDOD_PORT" || exit 1
    TARGETS=(srv)
    ;;
  redis | redlock)
    . "$HERE/../integration/redis_fixture.sh"
    n=1
    [ "$BACKEND" = redis ] || n=3
    routes=()
    declare -A NODE_PID=() NODE_DIR=()
    for ((i = 0; i < n; i++)); do
      mkdir "$FX_RUN/redis-$i"
      redis_start --appendonly yes --appendfsync always \
        --dir "$FX_RUN/redis-$i" || exit 1
      NODE_PID[n$i]=$REDIS_PID
      NODE_DIR[n$i]=$FX_RUN/redis-$i
      routes+=("n$i=127.0.0.1:$REDIS_PORT")
      TARGETS+=("n$i")
    done
    trap fx_exit EXIT
    fx_proxy_start "$FX_RUN/faults.log" "${routes[@]}" || exit 1
    ;;
  postgres)
    . "$HERE/../integration/pg_fixture.sh"
    pg_start || exit 1
    pg_createdb ordo || exit 1
    trap fx_exit EXIT
    fx_proxy_start "$FX_RUN/faults.log" "srv=127.0.0.1:$PG_PORT" || exit 1
    TARGETS=(srv)
    ;;
  *)
    echo "run.sh: unknown backend '$BACKEND'" >&2
    exit 64
    ;;
esac

# url I: the URL client I (1-based) dials, through its namespace's veth.
url() {
  local h=${FX_HOST[$(($1 - 1))]} q="lease_ms=$LEASE&timeout_ms=300" t nodes=()
  case $BACKEND in
    ordod) echo "ordod://$h:${FX_PORT[srv]}?$q" ;;
    redis) echo "redis://$h:${FX_PORT[n0]}?$q" ;;
    redlock)
      for t in "${TARGETS[@]}"; do nodes+=("$h:${FX_PORT[$t]}"); done
      echo "redlock://$(IFS=,; echo "${nodes[*]}")?$q"
      ;;
    postgres) echo "postgres://ordo:ordo@$h:${FX_PORT[srv]}/ordo?$q" ;;
  esac
}

# The servers' own faults: pause, resume, kill -9, restart.
pid_of() {
  case $BACKEND in
    ordod) echo "$ORDOD_PID" ;;
    redis | redlock) echo "${NODE_PID[$1]}" ;;
    postgres) echo "${_pg_launchers[${#_pg_launchers[@]} - 1]}" ;;
  esac
}

kill_restart() {
  local t=$1 down=$2
  case $BACKEND in
    ordod)
      fx_ordod_kill9
      sleep "$down"
      ordod_start "$ORDOD" --dir "$FX_RUN/ordod-state" --lease-ms "$LEASE" ||
        return 1
      trap fx_exit EXIT
      fx_proxy upstream srv "127.0.0.1:$ORDOD_PORT"
      ;;
    redis | redlock)
      fx_redis_kill9 "${NODE_PID[$t]}"
      sleep "$down"
      redis_start --appendonly yes --appendfsync always \
        --dir "${NODE_DIR[$t]}" || return 1
      trap fx_exit EXIT
      NODE_PID[$t]=$REDIS_PID
      fx_proxy upstream "$t" "127.0.0.1:$REDIS_PORT"
      ;;
    postgres)
      fx_pg_kill9 || return 1
      sleep "$down"
      fx_pg_restart
      ;;
  esac
}

# Every backend releases key by key with ordo_unlock: a release whose
# exchange loses the connection is the case the harness must reach
# (postgres.c's let_go once freed such a hold twice).
UNLOCK_ALL=0
for ((i = 1; i <= NPROC; i++)); do
  ip netns exec "${FX_NS[$((i - 1))]}" "$FCLIENT" --url "$(url "$i")" \
    --dir "$FX_RUN" --proc "$i" --threads "$THREADS" --keys "$KEYS" \
    --max-s "$MAXS" --lock-ms "$LOCK_MS" \
    --lease-ms "$LEASE" --hang-s 20 --unlock-all "$UNLOCK_ALL" >"$FX_RUN/client-$i.out" \
    2>"$FX_RUN/client-$i.err" &
  CLIENTS+=($!)
done

alive() { fx_alive "${CLIENTS[@]}"; }
ms() { fx_ms "$@"; }

# The schedule: one fault at a time, each family in turn, the proxy's four
# kinds in turn, a random target (one node of redlock's three: a minority).
PROXY_KINDS=(drop delay cut blackhole)
# FAULTS_ONLY=FAMILY[,FAMILY...] (pause, kill, proxy, partition) keeps the
# schedule to those, to tell which family a violation needs: for checking
# one fix.
FAMILIES=(pause kill proxy partition)
if [ -n "${FAULTS_ONLY:-}" ]; then
  IFS=, read -r -a FAMILIES <<<"$FAULTS_ONLY"
fi
step=0
pk=0
# It ends once FAULTS_CYCLES rounds of the four (4 by default, so each of
# the proxy's kinds comes once) are done
# and the clients have been granted FAULTS_OPS locks; then the clients stop.
CYCLES=${FAULTS_CYCLES:-4}
while alive && [ "$RC" -eq 0 ]; do
  if [ "$step" -ge $((4 * CYCLES)) ] && [ "$(fx_granted)" -ge "$OPS" ]; then
    break
  fi
  t=${TARGETS[$((RANDOM % ${#TARGETS[@]}))]}
  hold=$(ms 300 1300)
  k_last=${FAMILIES[$((step % ${#FAMILIES[@]}))]}
  case $k_last in
    pause)
      # Longer than the others: past the lease, and past a call's bound.
      hold=$(ms 500 2500)
      fx_mark start pause "$t" &&
        fx_pause "$(pid_of "$t")" && sleep "$hold" &&
        fx_resume && fx_mark end pause "$t" ||
        fail "the pause of $t"
      ;;
    kill)
      fx_mark start kill "$t" && kill_restart "$t" "$(ms 100 600)" &&
        fx_mark end kill "$t" || fail "kill -9 and restart of $t"
      ;;
    proxy)
      k=${PROXY_KINDS[$((pk % 4))]}
      pk=$((pk + 1))
      fx_mark start "$k" "$t" || fail "the proxy"
      case $k in
        drop) fx_proxy drop "$t" ;;
        delay) fx_proxy mode "$t" delay $((50 + RANDOM % 151)) &&
          sleep "$hold" && fx_proxy mode "$t" pass ;;
        cut | blackhole) fx_proxy mode "$t" "$k" && sleep "$hold" &&
          fx_proxy mode "$t" pass ;;
      esac || fail "the proxy's $k of $t"
      fx_mark end "$k" "$t" || fail "the proxy"
      ;;
    partition)
      c=$((1 + RANDOM % NPROC))
      fx_mark start partition "client$c" && fx_partition "$c" on &&
        sleep "$hold" && fx_partition "$c" off &&
        fx_mark end partition "client$c" || fail "the partition of client$c"
      ;;
    *)
      fail "FAULTS_ONLY: no fault family '${FAMILIES[$((step % ${#FAMILIES[@]}))]}'"
      ;;
  esac
  step=$((step + 1))
  # The calm after a fault; after a kill, past ordod's restart delay (a
  # lease with no grant), or kills alone would never let a lock through.
  calm=$(ms 300 800)
  [ "$k_last" != kill ] || calm=$(ms $((LEASE + 300)) $((LEASE + 800)))
  alive && sleep "$calm"
done

: >"$FX_RUN/stop"
alive || fail "the clients ended before the schedule did"
for ((i = 1; i <= NPROC; i++)); do
  rc=0
  wait "${CLIENTS[$((i - 1))]}" || rc=$?
  if [ "$rc" -ne 0 ]; then
    fail "client $i exited $rc; its stderr:"
    cat "$FX_RUN/client-$i.err" >&2
  fi
done
CLIENTS=()
echo "faults $BACKEND: $step faults injected"

# The backend's promise (docs/backend-*.md): tokens that never go back
# (ordod, PostgreSQL; Redis with appendfsync always; Redlock's granted
# tokens written back as a max, issue 18 item 15), so no stale write, and
# every call within its bound. Mutual exclusion within a lease (overlap,
# lost) is promised where a lock outlives its holder's connection (redis,
# redlock: the entry stays for its lease); ordod and PostgreSQL release a
# session's locks as soon as its connection ends, so a proxy's drop or cut
# can free a lock under a holder still writing: reported, not asserted.
ASSERT=token,stale,bound,register
EXCH=300
case $BACKEND in
  redis) ASSERT+=,lost,overlap ;;
  redlock) ASSERT+=,lost,overlap EXCH=340 ;; # a third of the lease
esac
python3 "$HERE/check.py" "$FX_RUN" --backend "$BACKEND" --lease-ms "$LEASE" \
  --lock-ms "$LOCK_MS" --exchange-ms "$EXCH" --min-ops "$OPS" \
  --families "$(IFS=,; echo "${FAMILIES[*]}")" \
  --assert "$ASSERT" --json "$FX_RUN/summary.json" || RC=1
# FAULTS_SUMMARY (a folder): check.py's figures, as BACKEND.json, for
# docs/reliability.md.
if [ -n "${FAULTS_SUMMARY:-}" ]; then
  cp "$FX_RUN/summary.json" "$FAULTS_SUMMARY/$BACKEND.json"
fi
exit "$RC"
