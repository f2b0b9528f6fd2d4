#!/usr/bin/env bash
# etcd_faults.sh FCLIENT -- the fault test of etcd:// on a real 3-member
# cluster (tests/integration/etcd_fixture.sh): two fclient processes (the
# fenced register's clients, docs/reliability.md), 4 threads each on 4 keys,
# every client given all three endpoints; while they run, the leader (as
# `etcdctl endpoint status` names it) is killed with SIGKILL, once a new
# leader is elected it is restarted on its data, and that twice. Then
# check.py over the history asserts what docs/backend-etcd.md promises: tokens
# that never go back, no stale write, no lost update, no overlap of holders
# within a lease, and every call returned within its bound (no hang: a lock
# within lock_ms plus two exchanges, each of which may try the three
# endpoints in turn, timeout_ms each). ETCD_FAULTS_OPS locks must be granted
# in all (600 by default). Exit 0 passed, 1 failed.
set -uo pipefail
FCLIENT=${1:?usage: etcd_faults.sh FCLIENT}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../integration/etcd_fixture.sh"
OPS=${ETCD_FAULTS_OPS:-600}
MAXS=60
LEASE=1000
LOCK_MS=300
TMO=300
RUN=$(mktemp -d "${TMPDIR:-/tmp}/ordo-etcd-faults.XXXXXX")
CLIENTS=()
RC=0
fail() {
  echo "etcd faults: FAIL: $*" >&2
  RC=1
}
on_exit() {
  local p
  for p in "${CLIENTS[@]}"; do
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  etcd_stop_all
  if [ "$RC" -ne 0 ]; then
    echo "etcd faults: the run's folder is kept: $RUN" >&2
  else
    rm -rf "$RUN"
  fi
  exit "$RC"
}
etcd_start 3 || exit 1
trap on_exit EXIT
URL="etcd://$ETCD_EPS?lease_ms=$LEASE&timeout_ms=$TMO"
for i in 1 2; do
  "$FCLIENT" --url "$URL" --dir "$RUN" --proc "$i" --threads 4 --keys 4 \
    --max-s "$MAXS" --lock-ms "$LOCK_MS" --lease-ms "$LEASE" --hang-s 20 \
    >"$RUN/client-$i.out" 2>"$RUN/client-$i.err" &
  CLIENTS+=($!)
done
alive() {
  local p
  for p in "${CLIENTS[@]}"; do
    kill -0 "$p" 2>/dev/null && return 0
  done
  return 1
}
granted() {
  local f n sum=0
  for f in "$RUN"/progress-*; do
    n=$(cat "$f" 2>/dev/null) || n=0
    [[ "$n" =~ ^[0-9]+$ ]] || n=0
    sum=$((sum + n))
  done
  echo "$sum"
}
# wait_granted N: until the clients have been granted N locks, within 20 s.
wait_granted() {
  local end=$((SECONDS + 20 * MULT))
  while alive && [ "$SECONDS" -lt "$end" ]; do
    [ "$(granted)" -ge "$1" ] && return 0
    sleep 0.05
  done
  return 1
}
mark() {
  echo "$(python3 -c 'import time; print(time.monotonic_ns())') $1 kill $2" \
    >>"$RUN/faults.log"
}
for round in 1 2; do
  wait_granted $((round * OPS / 3)) ||
    fail "round $round: fewer than $((round * OPS / 3)) locks granted"
  [ "$RC" -eq 0 ] || break
  l=$(etcd_leader) || {
    fail "no leader found"
    break
  }
  mark start "m$l"
  etcd_kill "$l"
  # A new leader among the other two, within 10 s.
  end=$((SECONDS + 10 * MULT))
  until nl=$(etcd_leader) && [ "$nl" != "$l" ]; do
    [ "$SECONDS" -lt "$end" ] || {
      fail "no new leader within $((10 * MULT)) s"
      break 2
    }
    sleep 0.05
  done
  echo "etcd faults: round $round: killed leader m$l, m$nl leads"
  etcd_restart "$l"
  etcd_wait_healthy || fail "m$l did not come back"
  mark end "m$l"
done
wait_granted "$OPS" || fail "fewer than $OPS locks granted"
: >"$RUN/stop"
for ((i = 1; i <= 2; i++)); do
  rc=0
  wait "${CLIENTS[$((i - 1))]}" || rc=$?
  if [ "$rc" -ne 0 ]; then
    fail "client $i exited $rc; its stderr:"
    cat "$RUN/client-$i.err" >&2
  fi
done
CLIENTS=()
# An exchange may try the three endpoints, timeout_ms each.
python3 "$HERE/check.py" "$RUN" --backend etcd --lease-ms "$LEASE" \
  --lock-ms "$LOCK_MS" --exchange-ms $((3 * TMO)) --min-ops "$OPS" \
  --families kill --assert token,stale,lost,overlap,bound,register ||
  RC=1
exit "$RC"
