#!/usr/bin/env bash
# etcd_fixture.sh -- throw-away etcd members for a test, sourced:
#
#   . etcd_fixture.sh; etcd_start N
#       starts a cluster of N members (1 or 3), each in a fresh --data-dir
#       from mktemp, with client and peer ports on 127.0.0.1 chosen free,
#       and exports ETCD_EPS (h:p,h:p,... the client endpoints, for an
#       etcd:// URL), with the arrays ETCD_PORTS, ETCD_PIDS, ETCD_NAMES;
#       an EXIT trap stops them all (SIGTERM, then SIGKILL past 10 s) and
#       removes the folders. etcd_kill I kills member I with SIGKILL,
#       etcd_restart I starts it again on its data dir, etcd_leader prints
#       the index of the leader (etcdctl endpoint status), etcd_ctl runs
#       etcdctl against every endpoint, bounded by 5 s.
#
# Every wait is bounded, times MULT (ORDO_TEST_TIMEOUT_MULT, mult.sh): the
# cluster must report healthy within 20 s; a guard per member kills it
# after ETCD_FIXTURE_MAX_S seconds (300 by default) even if the trap never
# runs. The data dirs are on /dev/shm when it can be written. The heartbeat (50 ms) and election timeout (500 ms) are short so
# that etcd grants a 1 s lease (its minimum TTL is 1.5 election timeouts)
# and elects a new leader within a second. Output goes to a log per member.

# shellcheck source=mult.sh
. "$(dirname "${BASH_SOURCE[0]}")/mult.sh"
ETCD=${ETCD:-etcd}
ETCDCTL=${ETCDCTL:-etcdctl}
ETCD_PIDS=()
ETCD_PORTS=()
ETCD_PEERS=()
ETCD_NAMES=()
ETCD_DIRS=()
_etcd_guards=()
_etcd_cluster=
# The members' folders: on tmpfs where there is one, since etcd fsyncs
# each write and the tests need no more than a process's crash to keep
# what was written (the kernel keeps tmpfs).
_etcd_tmp=${TMPDIR:-/tmp}
[ -d /dev/shm ] && [ -w /dev/shm ] && _etcd_tmp=/dev/shm

_etcd_reap() {
  local pid=$1 i
  for ((i = 0; i < $2 * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

etcd_stop_all() {
  local pid d
  for pid in "${ETCD_PIDS[@]}"; do
    [ "$pid" = 0 ] || kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${ETCD_PIDS[@]}"; do
    [ "$pid" = 0 ] || _etcd_reap "$pid" "$((10 * MULT))"
  done
  for pid in "${_etcd_guards[@]}"; do
    kill "$pid" 2>/dev/null || true
    _etcd_reap "$pid" 5
  done
  for d in "${ETCD_DIRS[@]}"; do
    rm -rf "$d"
  done
  ETCD_PIDS=()
  _etcd_guards=()
  ETCD_DIRS=()
}

# Free loopback ports, $1 of them, all distinct.
_etcd_free_ports() {
  python3 -c 'import socket, sys
ss = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); ss.append(s)
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"
}

# _etcd_run I STATE: starts member I (new or existing cluster state).
_etcd_run() {
  local i=$1 dir=${ETCD_DIRS[$1]} _
  "$ETCD" --name "${ETCD_NAMES[$i]}" --data-dir "$dir/data" \
    --listen-client-urls "http://127.0.0.1:${ETCD_PORTS[$i]}" \
    --advertise-client-urls "http://127.0.0.1:${ETCD_PORTS[$i]}" \
    --listen-peer-urls "http://127.0.0.1:${ETCD_PEERS[$i]}" \
    --initial-advertise-peer-urls "http://127.0.0.1:${ETCD_PEERS[$i]}" \
    --initial-cluster "$_etcd_cluster" --initial-cluster-state "$2" \
    --initial-cluster-token "ordo-$$" --heartbeat-interval 50 \
    --election-timeout 500 --log-level warn \
    >>"$dir/log" 2>&1 </dev/null &
  ETCD_PIDS[$i]=$!
  local pid=$!
  (
    read -r -t "${ETCD_FIXTURE_MAX_S:-300}" _ <>"$dir/guard" || true
    kill -KILL "$pid" 2>/dev/null
  ) </dev/null >/dev/null 2>&1 &
  _etcd_guards+=($!)
}

# etcd_ctl ARGS...: etcdctl against every endpoint, bounded by 5 s.
etcd_ctl() {
  ETCDCTL_API=3 timeout "$((5 * MULT))" "$ETCDCTL" --endpoints "$ETCD_EPS" \
    --command-timeout 2s --dial-timeout 1s "$@"
}

# etcd_wait_healthy: every running member answers health within 20 s.
etcd_wait_healthy() {
  local end=$((SECONDS + 20 * MULT)) eps=() i
  for i in "${!ETCD_PIDS[@]}"; do
    [ "${ETCD_PIDS[$i]}" = 0 ] || eps+=("127.0.0.1:${ETCD_PORTS[$i]}")
  done
  while [ "$SECONDS" -lt "$end" ]; do
    if ETCDCTL_API=3 timeout "$((3 * MULT))" "$ETCDCTL" \
      --endpoints "$(IFS=,; echo "${eps[*]}")" --command-timeout 1s \
      endpoint health >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.1
  done
  echo "etcd_fixture: the cluster was not healthy within $((20 * MULT)) s" >&2
  etcd_log >&2
  return 1
}

etcd_log() {
  local d
  for d in "${ETCD_DIRS[@]}"; do
    echo "== $d/log"
    tail -n 30 "$d/log" 2>/dev/null || true
  done
}

etcd_start() {
  local n=${1:-1} i ports
  command -v "$ETCD" >/dev/null || {
    echo "etcd_fixture: no $ETCD on PATH (scripts/bootstrap.sh installs" \
      "etcd-server)" >&2
    return 1
  }
  trap etcd_stop_all EXIT
  read -r -a ports <<<"$(_etcd_free_ports "$((2 * n))")"
  local members=() eps=()
  for ((i = 0; i < n; i++)); do
    ETCD_NAMES[$i]=m$i
    ETCD_PORTS[$i]=${ports[$((2 * i))]}
    ETCD_PEERS[$i]=${ports[$((2 * i + 1))]}
    ETCD_DIRS[$i]=$(mktemp -d -p "$_etcd_tmp")
    mkfifo "${ETCD_DIRS[$i]}/guard"
    members+=("m$i=http://127.0.0.1:${ETCD_PEERS[$i]}")
    eps+=("127.0.0.1:${ETCD_PORTS[$i]}")
  done
  _etcd_cluster=$(IFS=,; echo "${members[*]}")
  ETCD_EPS=$(IFS=,; echo "${eps[*]}")
  export ETCD_EPS
  for ((i = 0; i < n; i++)); do
    _etcd_run "$i" new
  done
  etcd_wait_healthy
}

# etcd_leader: the index of the member that leads now.
etcd_leader() {
  local i
  for i in "${!ETCD_PORTS[@]}"; do
    [ "${ETCD_PIDS[$i]}" = 0 ] && continue
    if ETCDCTL_API=3 timeout "$((3 * MULT))" "$ETCDCTL" \
      --endpoints "127.0.0.1:${ETCD_PORTS[$i]}" --command-timeout 1s \
      endpoint status -w json 2>/dev/null |
      python3 -c 'import json,sys
s = json.load(sys.stdin)[0]["Status"]
sys.exit(0 if s["leader"] == s["header"]["member_id"] else 1)'; then
      echo "$i"
      return 0
    fi
  done
  return 1
}

etcd_kill() {
  kill -KILL "${ETCD_PIDS[$1]}" 2>/dev/null || true
  wait "${ETCD_PIDS[$1]}" 2>/dev/null || true
  ETCD_PIDS[$1]=0
}

etcd_restart() {
  _etcd_run "$1" existing
}
