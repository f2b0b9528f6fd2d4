#!/usr/bin/env bash
# shards.sh FCLIENT ORDOD -- the fault harness's sharded target
# (docs/reliability.md, "Shards"; `run.sh shards` comes here): NSHARDS
# ordods (FAULTS_SHARDS, 3 by default, 3..5) linked by --peers, every link
# through fproxy.py (shard i dials shard j at the route l<i>to<j>, so a
# link can be dropped, delayed, cut or black-holed), each with a short
# lease, --probe-delay 1 and --verbose 1, its stderr kept in the run's
# folder as s<i>.stderr (the cross-shard aborts' xabort lines, check.py's
# phantom check). The clients are fclient processes in network namespaces
# of their own (lib.sh), in --multi mode: each txn takes its keys one at a
# time in a random order, so cycles form across shards, and writes each
# key's fenced register. The clients dial the shards through the proxy too,
# at one address every namespace reaches (FX_COMMON): a shard's name is
# that address and its route's port, the same for every client, as
# placement needs.
#
# The schedule, one fault at a time, each family in turn (FAULTS_ONLY=a,b
# keeps some), FAULTS_CYCLES rounds (4): pause (SIGSTOP and SIGCONT of a
# shard, 0.5-2.5 s), kill (kill -9 of a shard, 0.1-0.6 s down, a restart on
# its --dir under the same name: it grants nothing for a lease, the restart
# delay users run), link (both directions between two shards: drop, delay
# 50-200 ms, cut, black hole, in turn, 0.3-1.3 s) and client (every peer
# link delayed 100-200 ms, so confirmations take that long; once a thread
# of the chosen client has waited in ordo_lock for twice that, likely on a
# cycle being confirmed, the client is killed with -9 and a new one, with a
# new process number, starts in its namespace). The run goes on until the
# rounds are done and FAULTS_OPS locks (10^4) were granted, within
# FAULTS_MAX_S (120) seconds, 1-2 s of calm after each fault
# (FAULTS_CALM_MS=LO,HI); then check.py asserts what docs/distributed.md
# promises (its header). The run's folder is kept, and named, when it fails
# (or with FAULTS_KEEP set). Exit 0 passed, 1 failed, 77 skipped (not root).
set -uo pipefail
FCLIENT=${1:?usage: shards.sh FCLIENT ORDOD}
ORDOD=${2:?usage: shards.sh FCLIENT ORDOD}
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
fx_require_root
. "$HERE/../integration/ordod_fixture.sh"

OPS=${FAULTS_OPS:-10000}
MAXS=${FAULTS_MAX_S:-120}
NSHARDS=${FAULTS_SHARDS:-3}
[[ "$NSHARDS" =~ ^[3-5]$ ]] || {
  echo "shards.sh: FAULTS_SHARDS must be 3, 4 or 5" >&2
  exit 64
}
LEASE=1000
# A lock's timeout five times the bound on a standing cycle (CYCLE_MS): a
# cycle the probes miss then stands until a member's timeout, long past the
# bound and past the reach of the faults around it, where check.py sees it;
# with a timeout near the bound, timeouts, not detection, would break the
# missed cycles and hide them.
LOCK_MS=10000
CYCLE_MS=2000
TMO=300 # the URL's timeout_ms: one exchange's bound
NPROC=2
THREADS=4
KEYS=$((3 * NSHARDS)) # three a shard (the prefix is chosen so)
MULTI=3               # keys a txn takes, one at a time
CYCLES=${FAULTS_CYCLES:-4}
: "${ORDOD_FIXTURE_MAX_S:=$((MAXS + 120))}"
export ORDOD_FIXTURE_MAX_S
FX_RUN=$(mktemp -d "${TMPDIR:-/tmp}/ordo-faults-shards.XXXXXX")
chmod 755 "$FX_RUN"
CLIENTS=()          # by slot - 1: the pid of the slot's fclient now
declare -A PROC_OF=() # slot -> its process number now
NEXT_PROC=$((NPROC + 1))
RC=0
T0=$SECONDS

fail() {
  echo "faults shards: FAIL: $*" >&2
  RC=1
}

fx_exit() {
  local rc=$? p
  [ "$RC" -eq 0 ] || rc=1
  for p in "${CLIENTS[@]}"; do
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  fx_resume
  fx_proxy_stop
  fx_netns_down
  fx_od_stop_all || rc=1
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] || [ -n "${FAULTS_KEEP:-}" ]; then
    echo "faults shards: the run's folder is kept: $FX_RUN" >&2
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

# The proxy's routes: s<i> for the clients of shard i, l<i>to<j> for shard
# i's link to shard j. Their upstreams are set as the shards start.
routes=()
LINKS=()
for ((i = 0; i < NSHARDS; i++)); do
  routes+=("s$i=127.0.0.1:1")
  for ((j = 0; j < NSHARDS; j++)); do
    [ "$i" -eq "$j" ] && continue
    routes+=("l${i}to$j=127.0.0.1:1")
    LINKS+=("l${i}to$j")
  done
done
fx_proxy_start "$FX_RUN/faults.log" "${routes[@]}" || exit 1

NAME=()
for ((i = 0; i < NSHARDS; i++)); do
  NAME[i]=$FX_COMMON:${FX_PORT[s$i]}
done

# shard_start I: shard I on its folder, its routes pointed at it.
shard_start() {
  local i=$1 j peers=() port
  for ((j = 0; j < NSHARDS; j++)); do
    [ "$i" -eq "$j" ] && continue
    peers+=("${NAME[j]}=127.0.0.1:${FX_PORT[l${i}to$j]}")
  done
  mkdir -p "$FX_RUN/s$i-state"
  fx_od_start "s$i" "$ORDOD" --dir "$FX_RUN/s$i-state" --lease-ms "$LEASE" \
    --shard-name "${NAME[i]}" --peers "$(IFS=,; echo "${peers[*]}")" \
    --probe-delay 1 --verbose 1 || return 1
  trap fx_exit EXIT
  port=${FX_OD_PORT[s$i]}
  fx_proxy upstream "s$i" "127.0.0.1:$port" || return 1
  for ((j = 0; j < NSHARDS; j++)); do
    [ "$i" -eq "$j" ] && continue
    fx_proxy upstream "l${j}to$i" "127.0.0.1:$port" || return 1
  done
}

for ((i = 0; i < NSHARDS; i++)); do
  shard_start "$i" || exit 1
done
URL="ordod://$(IFS=,; echo "${NAME[*]}")?lease_ms=$LEASE&timeout_ms=$TMO"

# A key prefix that puts KEYS/NSHARDS keys on each shard (the library's
# placement, through fclient --placement), so every shard has keys to
# deadlock over. place.txt tells check.py the shards and where keys live.
PREFIX=
for ((n = 0; n < 1000; n++)); do
  if "$FCLIENT" --url "$URL" --keys "$KEYS" --key-prefix "fk$n:" --placement \
    >"$FX_RUN/placement.tmp" && [ "$(awk '{print $2}' "$FX_RUN/placement.tmp" |
      sort | uniq -c | awk -v want=$((KEYS / NSHARDS)) \
        '$1 == want {n++} END {print n + 0}')" -eq "$NSHARDS" ]; then
    PREFIX=fk$n:
    break
  fi
done
[ -n "$PREFIX" ] || {
  echo "shards.sh: no key prefix spreads $KEYS keys evenly" >&2
  exit 1
}
{
  echo "url $URL"
  echo "prefix $PREFIX"
  for ((i = 0; i < NSHARDS; i++)); do echo "shard s$i ${NAME[i]}"; done
  awk '{print "key", $1, $2}' "$FX_RUN/placement.tmp"
} >"$FX_RUN/place.txt"
rm -f "$FX_RUN/placement.tmp"

# client_start SLOT PROC: an fclient numbered PROC in SLOT's namespace.
client_start() {
  local c=$1 p=$2 left=$((MAXS - (SECONDS - T0)))
  [ "$left" -ge 10 ] || left=10
  ip netns exec "${FX_NS[$((c - 1))]}" "$FCLIENT" --url "$URL" \
    --dir "$FX_RUN" --proc "$p" --threads "$THREADS" --keys "$KEYS" \
    --multi "$MULTI" --key-prefix "$PREFIX" --max-s "$left" \
    --lock-ms "$LOCK_MS" --lease-ms "$LEASE" --hang-s 30 \
    >"$FX_RUN/client-$p.out" 2>"$FX_RUN/client-$p.err" &
  CLIENTS[c - 1]=$!
  PROC_OF[$c]=$p
}
for ((c = 1; c <= NPROC; c++)); do
  client_start "$c" "$c"
done

alive() { fx_alive "${CLIENTS[@]}"; }

# links_mode MODE [ARG] ROUTE...: one proxy mode on several routes.
links_mode() {
  local m=$1 a= r
  shift
  if [ "$m" = delay ]; then
    a=$1
    shift
  fi
  for r in "$@"; do
    fx_proxy mode "$r" "$m" $a || return 1
  done
}

# busy_ms PROC: the age of PROC's oldest ordo_lock under way (fclient's
# busy file), or 0.
busy_ms() {
  local v
  read -r v <"$FX_RUN/busy-$1" 2>/dev/null || v=0
  [[ "$v" =~ ^[0-9]+$ ]] || v=0
  echo "$v"
}

# client_kill: every link delayed D ms; once a thread of the chosen client
# has waited 2D in ordo_lock (awaited, bounded), kill -9 of it, and a new
# client in its slot; then the links heal.
client_kill() {
  local c=$((1 + RANDOM % NPROC)) p d end b=0 pid
  p=${PROC_OF[$c]}
  pid=${CLIENTS[$((c - 1))]}
  d=$((100 + RANDOM % 101))
  fx_mark start lag links && links_mode delay "$d" "${LINKS[@]}" || return 1
  end=$((SECONDS + 5 * MULT))
  while [ "$SECONDS" -lt "$end" ]; do
    b=$(busy_ms "$p")
    [ "$b" -lt $((2 * d)) ] || break
    sleep 0.01
  done
  echo "client kill: proc $p, links delayed $d ms, its oldest lock" \
    "${b} ms old" >>"$FX_RUN/schedule.log"
  fx_mark start clientkill "proc$p" || return 1
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  fx_mark end clientkill "proc$p" || return 1
  client_start "$c" "$NEXT_PROC"
  NEXT_PROC=$((NEXT_PROC + 1))
  sleep "$(fx_ms 300 800)"
  links_mode pass "${LINKS[@]}" && fx_mark end lag links
}

LINK_KINDS=(drop delay cut blackhole)
# FAULTS_CALM_MS=LO,HI: the calm between faults (1000-2000 ms); a longer one
# gives check.py's missed check more time with no fault on a cycle's shards.
IFS=, read -r CALM_LO CALM_HI <<<"${FAULTS_CALM_MS:-1000,2000}"
FAMILIES=(pause kill link client)
if [ -n "${FAULTS_ONLY:-}" ]; then
  IFS=, read -r -a FAMILIES <<<"$FAULTS_ONLY"
fi
step=0
lk=0
while alive && [ "$RC" -eq 0 ]; do
  if [ "$step" -ge $((${#FAMILIES[@]} * CYCLES)) ] &&
    [ "$(fx_granted)" -ge "$OPS" ]; then
    break
  fi
  i=$((RANDOM % NSHARDS))
  fam=${FAMILIES[$((step % ${#FAMILIES[@]}))]}
  case $fam in
    pause)
      fx_mark start pause "s$i" && fx_pause "${FX_OD_PID[s$i]}" &&
        sleep "$(fx_ms 500 2500)" && fx_resume && fx_mark end pause "s$i" ||
        fail "the pause of s$i"
      ;;
    kill)
      fx_mark start kill "s$i" && fx_od_kill9 "s$i" &&
        sleep "$(fx_ms 100 600)" && shard_start "$i" &&
        fx_mark end kill "s$i" || fail "kill -9 and restart of s$i"
      ;;
    link)
      j=$(((i + 1 + RANDOM % (NSHARDS - 1)) % NSHARDS))
      k=${LINK_KINDS[$((lk % 4))]}
      lk=$((lk + 1))
      pair=(l${i}to$j l${j}to$i)
      fx_mark start "$k" "s$i-s$j" || fail "the proxy"
      case $k in
        drop) fx_proxy drop "${pair[0]}" && fx_proxy drop "${pair[1]}" ;;
        delay) links_mode delay $((50 + RANDOM % 151)) "${pair[@]}" &&
          sleep "$(fx_ms 300 1300)" && links_mode pass "${pair[@]}" ;;
        cut | blackhole) links_mode "$k" "${pair[@]}" &&
          sleep "$(fx_ms 300 1300)" && links_mode pass "${pair[@]}" ;;
      esac || fail "the proxy's $k of s$i-s$j"
      fx_mark end "$k" "s$i-s$j" || fail "the proxy"
      ;;
    client)
      client_kill || fail "the kill of a client"
      ;;
    *)
      fail "FAULTS_ONLY: no fault family '$fam'"
      ;;
  esac
  step=$((step + 1))
  # The calm after a fault, longer than its reach (check.py's --recover-ms,
  # 1 s) so that a cycle it left standing is seen past its bound; after a
  # kill, a lease more (the restart delay, when nothing is granted).
  calm=$(fx_ms "$CALM_LO" "$CALM_HI")
  [ "$fam" != kill ] || calm=$(fx_ms $((LEASE + CALM_LO)) $((LEASE + CALM_HI)))
  alive && sleep "$calm"
done

: >"$FX_RUN/stop"
alive || fail "the clients ended before the schedule did"
for ((c = 1; c <= NPROC; c++)); do
  rc=0
  wait "${CLIENTS[$((c - 1))]}" || rc=$?
  if [ "$rc" -ne 0 ]; then
    fail "client proc ${PROC_OF[$c]} exited $rc; its stderr:"
    cat "$FX_RUN/client-${PROC_OF[$c]}.err" >&2
  fi
done
CLIENTS=()
echo "faults shards: $step faults injected in $((SECONDS - T0)) s"
# The shards' checked stops, before the check: it reads their logs.
fx_od_stop_all || fail "a shard did not stop cleanly"

# What docs/distributed.md promises a sharded place (check.py's header):
# tokens that never go back, no stale write, calls within their bounds, no
# two holders told they hold one key, no phantom abort, no cycle standing
# past its bound while its shards are up. A lost update and an overlap of
# writes are reported (a pause past the lease frees a key under a holder
# still writing, as on one ordod).
python3 "$HERE/check.py" "$FX_RUN" --backend shards --lease-ms "$LEASE" \
  --lock-ms "$LOCK_MS" --exchange-ms "$TMO" --min-ops "$OPS" \
  --families "$(IFS=,; echo "${FAMILIES[*]}")" \
  --place "$FX_RUN/place.txt" --cycle-bound-ms "$CYCLE_MS" \
  --assert token,stale,bound,register,exclusion,phantom,victim,missed \
  --min-per-family "$CYCLES" \
  --json "$FX_RUN/summary.json" || RC=1
if [ -n "${FAULTS_SUMMARY:-}" ]; then
  cp "$FX_RUN/summary.json" "$FAULTS_SUMMARY/shards.json"
fi
exit "$RC"
