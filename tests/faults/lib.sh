#!/usr/bin/env bash
# lib.sh -- the fault harness's reusable fixtures (docs/reliability.md),
# sourced by run.sh and by any test that wants a server under faults. The
# servers themselves come from tests/integration/*_fixture.sh; this adds:
#
#   fx_netns_up N        N client network namespaces (first removing those
#                        of runs whose shell is gone), each joined to this
#                        one by a veth pair with loopback addresses
#                        (127.A.i.1 here, 127.A.i.2 inside, route_localnet
#                        on both ends): FX_NS[i], FX_HOST[i] (the address a
#                        client in namespace i dials), FX_VETH[i]; and
#                        FX_COMMON (127.A.0.1), one address that reaches
#                        this namespace from every client namespace and
#                        from here (a /32 on each veth, a route inside):
#                        what a sharded URL names, since every client must
#                        write each shard's name alike;
#   fx_partition I on|off  cuts namespace I off (its veth down) or heals it;
#   fx_netns_down        removes them;
#   fx_proxy_start LOG NAME=HOST:PORT...
#                        starts fproxy.py listening on 127.0.0.1, every
#                        FX_HOST and FX_COMMON, one route per NAME:
#                        FX_PORT[NAME] is the port a client dials;
#   fx_proxy CMD...      one control command (fproxy.py's header), which
#                        must answer "ok";
#   fx_mark start|end KIND TARGET
#                        the schedule's log line, timed by the proxy;
#   fx_proxy_stop;
#   fx_pause PID / fx_resume (SIGSTOP/SIGCONT of PID and every process
#                        under it);
#   fx_ordod_kill9 [LOG], fx_redis_kill9 PID, fx_pg_kill9: kill -9, leaving
#                        the server's data; the restarts are the fixtures'
#                        ordod_start and redis_start again (with the same
#                        --dir), and fx_pg_restart (the same folder and port);
#   fx_od_start NAME ORDOD ARGS..., fx_od_kill9 NAME, fx_od_stop NAME,
#   fx_od_stop_all       several ordods at once (shards), each by a NAME,
#                        each started and its stop checked by
#                        ordod_fixture.sh: FX_OD_PID[NAME], FX_OD_PORT[NAME];
#                        each one's stderr is kept as $FX_RUN/NAME.stderr
#                        (appended at each kill and stop);
#   fx_ms LO HI          a random duration in seconds, LO..HI ms;
#   fx_granted           the locks the clients of $FX_RUN have been granted
#                        so far (their progress files);
#   fx_alive PID...      whether any of the PIDs still runs.
# Not root (ip netns needs it): fx_require_root exits 77 with "SKIP: ...".
# Every wait is bounded, times MULT.

# shellcheck source=../integration/mult.sh
. "$(dirname "${BASH_SOURCE[0]}")/../integration/mult.sh"
FX_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FX_NS=()
FX_HOST=()
FX_VETH=()
declare -A FX_PORT=()
FX_PROXY_PID=
FX_CONTROL=
FX_COMMON=

fx_require_root() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: the fault harness needs root (ip netns, veth pairs for the" \
      "partition); run it as root"
    exit 77
  fi
  if ! command -v ip >/dev/null; then
    echo "faults: no ip (iproute2) on PATH; scripts/bootstrap.sh installs it" >&2
    exit 1
  fi
}

# _fx_stale_netns: removes the namespaces and links of runs whose shell is
# gone (a run that was SIGKILLed had no chance to).
_fx_stale_netns() {
  local ns pid
  while read -r ns _; do
    [[ "$ns" =~ ^ordo-f([0-9]+)-[0-9]+$ ]] || continue
    pid=${BASH_REMATCH[1]}
    if ! kill -0 "$pid" 2>/dev/null; then
      ip netns del "$ns" 2>/dev/null || true
    fi
  done < <(ip netns list 2>/dev/null)
}

fx_netns_up() {
  local n=$1 i a ns va vb
  _fx_stale_netns
  # A second octet no other interface uses (two runs at once get two).
  for ((a = 100; a < 250; a++)); do
    ip -4 addr show | grep -q "inet 127\.$a\." || break
  done
  for ((i = 1; i <= n; i++)); do
    ns=ordo-f$$-$i
    va=of$$a$i
    vb=of$$b$i
    ip netns add "$ns" || return 1
    FX_NS+=("$ns")
    ip link add "$va" type veth peer name "$vb" || return 1
    FX_VETH+=("$va")
    ip link set "$vb" netns "$ns" || return 1
    ip addr add "127.$a.$i.1/30" dev "$va" || return 1
    ip netns exec "$ns" ip addr add "127.$a.$i.2/30" dev "$vb" || return 1
    # Loopback addresses on a veth: route_localnet lets them leave it.
    sysctl -qw "net.ipv4.conf.$va.route_localnet=1" || return 1
    ip netns exec "$ns" sysctl -qw "net.ipv4.conf.$vb.route_localnet=1" ||
      return 1
    ip link set "$va" up || return 1
    ip netns exec "$ns" ip link set "$vb" up || return 1
    # The common address: on every veth of this side, routed to from inside.
    ip addr add "127.$a.0.1/32" dev "$va" || return 1
    ip netns exec "$ns" ip route add "127.$a.0.1/32" dev "$vb" || return 1
    FX_HOST+=("127.$a.$i.1")
  done
  FX_COMMON=127.$a.0.1
}

# fx_partition I on|off: namespace I (1-based) cut off, or joined again.
fx_partition() {
  local va=${FX_VETH[$(($1 - 1))]}
  if [ "$2" = on ]; then
    ip link set "$va" down
  else
    ip link set "$va" up
  fi
}

fx_netns_down() {
  local ns va
  for va in "${FX_VETH[@]}"; do
    ip link del "$va" 2>/dev/null || true
  done
  for ns in "${FX_NS[@]}"; do
    ip netns del "$ns" 2>/dev/null || true
  done
  FX_NS=()
  FX_VETH=()
  FX_HOST=()
  FX_COMMON=
}

fx_proxy_start() {
  local log=$1 dir line hosts i
  shift
  dir=$(dirname "$log")
  hosts=127.0.0.1
  for i in "${FX_HOST[@]}" $FX_COMMON; do hosts+=",$i"; done
  local routes=()
  for i in "$@"; do routes+=(--route "$i"); done
  mkfifo "$dir/proxy.stdin"
  python3 "$FX_HERE/fproxy.py" --log "$log" --listen "$hosts" \
    "${routes[@]}" <"$dir/proxy.stdin" >"$dir/proxy.out" \
    2>"$dir/proxy.err" &
  FX_PROXY_PID=$!
  # The proxy reads this FIFO until it closes: when this shell ends, so
  # does the proxy.
  exec 7>"$dir/proxy.stdin"
  local end=$((SECONDS + 10 * MULT))
  line=
  while [ "$SECONDS" -lt "$end" ] && kill -0 "$FX_PROXY_PID" 2>/dev/null; do
    line=$(head -n 1 "$dir/proxy.out")
    [[ "$line" == ready* ]] && break
    sleep 0.05
  done
  if [[ "$line" != ready* ]]; then
    echo "faults: fproxy.py did not start within $((10 * MULT)) s:" >&2
    cat "$dir/proxy.err" >&2
    return 1
  fi
  for i in ${line#ready }; do
    if [[ "$i" == control=* ]]; then
      FX_CONTROL=${i#control=}
    else
      FX_PORT[${i%%=*}]=${i#*=}
    fi
  done
  exec 6<>"/dev/tcp/127.0.0.1/$FX_CONTROL"
}

fx_proxy() {
  local reply
  echo "$*" >&6
  if ! read -r -t "$((5 * MULT))" reply <&6 || [[ "$reply" != ok* ]]; then
    echo "faults: proxy command '$*' answered '${reply:-nothing}'" >&2
    return 1
  fi
}

fx_mark() { fx_proxy mark "$@"; }

fx_proxy_stop() {
  if [ -n "$FX_PROXY_PID" ]; then
    # Closing a descriptor cannot fail; no 2>/dev/null here, which exec
    # would make this shell's stderr for good.
    exec 6>&- 7>&-
    kill -TERM "$FX_PROXY_PID" 2>/dev/null || true
    local i
    for ((i = 0; i < 50; i++)); do
      kill -0 "$FX_PROXY_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$FX_PROXY_PID" 2>/dev/null || true
    wait "$FX_PROXY_PID" 2>/dev/null || true
    FX_PROXY_PID=
  fi
}

# _fx_group PID: PID's process group when PID leads a group of its own
# (pg_fixture's setsid), else empty.
_fx_group() {
  local g ours
  g=$(ps -o pgid= -p "$1" 2>/dev/null | tr -d ' ')
  ours=$(ps -o pgid= -p $$ 2>/dev/null | tr -d ' ')
  if [ -n "$g" ] && [ "$g" != "$ours" ] && [ "$g" -gt 1 ]; then
    echo "$g"
  fi
}

# fx_tree PID: PID and all its descendants, parents first.
fx_tree() {
  local all=("$1") i=0 c
  while [ "$i" -lt ${#all[@]} ]; do
    for c in $(ps -o pid= --ppid "${all[$i]}" 2>/dev/null); do
      all+=("$c")
    done
    i=$((i + 1))
  done
  echo "${all[@]}"
}

# fx_pause PID / fx_resume: SIGSTOP PID and every descendant (the list
# kept for the resume), SIGCONT them. A process group would not do:
# PostgreSQL's backends each call setsid(), so a stopped postmaster's
# backends would go on serving their connections. A stopped parent forks
# nothing new meanwhile.
FX_PAUSED=()
fx_pause() {
  local p
  read -r -a FX_PAUSED <<<"$(fx_tree "$1")"
  for p in "${FX_PAUSED[@]}"; do
    kill -STOP "$p" 2>/dev/null || true
  done
  kill -0 "$1" # the server itself must have been there
}
fx_resume() {
  local p
  for p in "${FX_PAUSED[@]}"; do
    kill -CONT "$p" 2>/dev/null || true
  done
  FX_PAUSED=()
}
fx_signal() {
  local g
  g=$(_fx_group "$2")
  if [ -n "$g" ]; then
    kill "-$1" -- "-$g"
  else
    kill "-$1" "$2"
  fi
}

# fx_ordod_kill9: kill -9 of the fixture's ordod, then the fixture's state
# cleared (its folder; --dir is the caller's and stays), so that
# ordod_start can start the next one. The stop's check does not apply to a
# server killed on purpose.
fx_ordod_kill9() {
  local log=${1:-$FX_RUN/ordod-killed.stderr}
  kill -KILL "$ORDOD_PID" 2>/dev/null || true
  wait "$ORDOD_PID" 2>/dev/null || true
  ORDOD_PID=
  kill -KILL "$ORDOD_GUARD" 2>/dev/null || true
  wait "$ORDOD_GUARD" 2>/dev/null || true
  ORDOD_GUARD=
  exec 8<&-
  # Keep the killed server's stderr for a failure's message.
  cat "$ORDOD_DIR/stderr" >>"$log" 2>/dev/null || true
  rm -rf "$ORDOD_DIR"
  ORDOD_DIR=
}

# fx_redis_kill9 PID: kill -9 of one redis-server of the fixture (its
# fixture entry stays; redis_stop_all passes over a dead one).
fx_redis_kill9() {
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# fx_pg_kill9: kill -9 of the latest cluster's every process (its group).
fx_pg_kill9() {
  local launcher=${_pg_launchers[${#_pg_launchers[@]} - 1]}
  fx_signal KILL "$launcher" 2>/dev/null || true
  kill -KILL "$PG_PID" 2>/dev/null || true
  _pg_wait_gone "$PG_PID" 10 || {
    echo "faults: postmaster $PG_PID still there after SIGKILL" >&2
    return 1
  }
  wait "$launcher" 2>/dev/null || true
}

# fx_pg_restart: starts the latest cluster again on its folder and port,
# as pg_start does, and waits (bounded) for it to answer.
fx_pg_restart() {
  local dir=$PG_DIR data=$PG_DIR/data launcher pid end
  # The killed postmaster may linger as a zombie (its parent, runuser, was
  # killed too, and a container's first process need not reap): its pid
  # then still answers kill -0, and the new postmaster would take
  # postmaster.pid (and the socket's lock file) for a live server's.
  # fx_pg_kill9 has seen it gone.
  rm -f "$data/postmaster.pid" "$dir/sock/.s.PGSQL.$PG_PORT.lock"
  (cd "$dir" && exec setsid -w runuser -u postgres -- \
    "$_pg_bin/postgres" -D "$data") >>"$dir/log" 2>&1 </dev/null &
  launcher=$!
  _pg_launchers[${#_pg_launchers[@]} - 1]=$launcher
  end=$((SECONDS + 30 * MULT))
  while [ "$SECONDS" -lt "$end" ] && _pg_alive "$launcher"; do
    if _pg_sql_socket "$dir" "$PG_PORT" 'SELECT 1' >/dev/null 2>&1; then
      pid=$(head -n 1 "$data/postmaster.pid" 2>/dev/null) || pid=
      if [[ "$pid" =~ ^[0-9]+$ ]] && _pg_alive "$pid"; then
        _pg_pids[${#_pg_pids[@]} - 1]=$pid
        PG_PID=$pid
        return 0
      fi
    fi
    sleep 0.05
  done
  echo "faults: the cluster did not restart within $((30 * MULT)) s; its" \
    "log:" >&2
  tail -n 30 "$dir/log" >&2
  return 1
}

# ---- Several ordods at once (the shards) -----------------------------------
# ordod_fixture.sh keeps one server in its globals (ORDOD_PID, ORDOD_DIR,
# ORDOD_GUARD, ORDOD_PORT, and its stdout FIFO on descriptor 8); these keep
# each server's in arrays by NAME, and put them back in the globals for the
# fixture's own stop and for fx_ordod_kill9. The FIFO's reader moves to a
# descriptor of its own, so the server never writes to a pipe with no reader.
declare -A FX_OD_PID=() FX_OD_DIR=() FX_OD_GUARD=() FX_OD_PORT=() FX_OD_FD=()

_fx_od_clear() {
  ORDOD_PID=
  ORDOD_DIR=
  ORDOD_GUARD=
  ORDOD_PORT=
}

_fx_od_use() {
  local n=$1
  ORDOD_PID=${FX_OD_PID[$n]}
  ORDOD_DIR=${FX_OD_DIR[$n]}
  ORDOD_GUARD=${FX_OD_GUARD[$n]}
  ORDOD_PORT=${FX_OD_PORT[$n]}
  local fd=${FX_OD_FD[$n]}
  exec 8<&"$fd"
  eval "exec $fd<&-"
  unset "FX_OD_PID[$n]" "FX_OD_DIR[$n]" "FX_OD_GUARD[$n]" "FX_OD_PORT[$n]" \
    "FX_OD_FD[$n]"
}

# fx_od_start NAME ORDOD ARGS...: ordod_start ORDOD ARGS, kept as NAME. The
# fixture sets its EXIT trap: the caller sets its own again after.
fx_od_start() {
  local n=$1 fd
  shift
  _fx_od_clear
  if ! ordod_start "$@"; then
    [ -z "${ORDOD_DIR:-}" ] || cat "$ORDOD_DIR/stderr" >>"$FX_RUN/$n.stderr"
    ordod_stop >/dev/null 2>&1 || true
    _fx_od_clear
    return 1
  fi
  exec {fd}<&8
  exec 8<&-
  FX_OD_PID[$n]=$ORDOD_PID
  FX_OD_DIR[$n]=$ORDOD_DIR
  FX_OD_GUARD[$n]=$ORDOD_GUARD
  FX_OD_PORT[$n]=$ORDOD_PORT
  FX_OD_FD[$n]=$fd
  _fx_od_clear
}

# fx_od_kill9 NAME: kill -9 (fx_ordod_kill9), its stderr kept.
fx_od_kill9() {
  _fx_od_use "$1"
  fx_ordod_kill9 "$FX_RUN/$1.stderr"
  echo "== (the run above ended by kill -9) ==" >>"$FX_RUN/$1.stderr"
  _fx_od_clear
}

# fx_od_stop NAME: the fixture's checked stop (1: it found a failure).
fx_od_stop() {
  local rc=0
  _fx_od_use "$1"
  # The stop may remove the folder: its stderr is copied first, and what a
  # SIGTERM makes it write is lost, which the stop's check prints anyway.
  cat "$ORDOD_DIR/stderr" >>"$FX_RUN/$1.stderr" 2>/dev/null || true
  ordod_stop || rc=1
  _fx_od_clear
  return "$rc"
}

fx_od_stop_all() {
  local n rc=0
  for n in "${!FX_OD_PID[@]}"; do
    fx_od_stop "$n" || rc=1
  done
  return "$rc"
}

# ---- What every schedule needs -----------------------------------------------

fx_ms() {
  local v=$(($1 + RANDOM % ($2 - $1 + 1)))
  printf '%d.%03d' $((v / 1000)) $((v % 1000))
}

fx_granted() {
  local f n sum=0
  for f in "$FX_RUN"/progress-*; do
    n=$(cat "$f" 2>/dev/null) || n=0
    [[ "$n" =~ ^[0-9]+$ ]] || n=0
    sum=$((sum + n))
  done
  echo "$sum"
}

fx_alive() {
  local p
  for p in "$@"; do
    kill -0 "$p" 2>/dev/null && return 0
  done
  return 1
}
