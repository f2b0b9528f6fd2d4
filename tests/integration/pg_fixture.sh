#!/usr/bin/env bash
# pg_fixture.sh -- throw-away PostgreSQL clusters for a test: each one
# initdb'd into a fresh folder from mktemp, listening on a free port of
# 127.0.0.1 (and on a Unix socket in its folder), with durability off and
# deadlock_timeout at 10ms. Two ways to use it:
#
#   . pg_fixture.sh; pg_start [-c NAME=VALUE ...]
#       initdb's and starts one more cluster and exports PG_PORT,
#       PG_SOCKDIR (its Unix socket directory), PG_DIR (its folder) and
#       PG_PID (the postmaster) for it (each call overwrites them: copy them
#       to keep several). Each -c setting is written to postgresql.conf
#       after the fixture's own, so it overrides them. An EXIT trap stops
#       every cluster started (pg_ctl stop -m fast, then -m immediate, then
#       SIGKILL, each bounded) and removes the folders; pg_stop_all does the
#       same earlier (a test that sets its own EXIT trap later must call
#       pg_stop_all from it). Against the latest cluster:
#         pg_createdb NAME    creates database NAME, owned by role ordo;
#         pg_url NAME         prints postgres://ordo:ordo@127.0.0.1:PORT/NAME;
#         pg_psql NAME ARGS   psql -X -q -v ON_ERROR_STOP=1 as ordo on NAME
#                             over TCP (with the password), bounded by 30 s;
#         pg_log              prints the server's log so far;
#         pg_crash            kill -9 of every process of the cluster;
#         pg_restart          starts it again after pg_crash (same folder,
#                             same port, crash recovery), new PG_PID.
#   pg_fixture.sh COMMAND [ARGS...]
#       starts a cluster, creates database ordo, exports PG_URL (its URL)
#       and the variables above, runs COMMAND (bounded by
#       PG_FIXTURE_TIMEOUT seconds, 300 by default), stops the cluster and
#       exits with COMMAND's status.
#
# The cluster: listen_addresses 127.0.0.1, fsync, synchronous_commit and
# full_page_writes off, max_connections 100, shared_buffers 32MB, the log
# in $PG_DIR/log. pg_hba.conf trusts local (Unix socket) connections and
# asks scram-sha-256 of host connections from 127.0.0.1, so a wrong
# password is refused; the socket and its folder are the owner's alone
# (mode 0700), so the trust extends to no other local user. Roles:
# postgres (the bootstrap superuser, with no password, so reachable only
# on the socket) and ordo (LOGIN SUPERUSER PASSWORD 'ordo', so tests can
# read pg_stat_database and SET deadlock_timeout).
#
# The server refuses to run as root: when the fixture runs as root, the
# folder is chowned to the postgres user and initdb, pg_ctl and postgres
# run as that user (runuser); otherwise they run as the current user. The
# binaries come from PG_BINDIR when set, else the highest
# /usr/lib/postgresql/*/bin that has initdb, else pg_config --bindir or
# initdb on PATH. The postmaster runs in a session of its own (setsid), so
# one kill of its process group reaches every backend, and as a child of
# this shell (through runuser when root), so it is reaped when it ends: once
# pg_stop_all returns, `kill -0 $PG_PID` fails.
#
# Every wait is bounded, each bound times MULT (ORDO_TEST_TIMEOUT_MULT, from
# mult.sh): initdb 60 s, the first answer 30 s, role ordo's first answer
# over TCP 30 s (a start usually takes 1-2 s), a stop at most about 40 s
# (a process is waited for only once it is gone or SIGKILLed, so the wait
# cannot hang), pg_psql 30 s; and a guard kills each cluster's processes
# after
# PG_FIXTURE_MAX_S seconds (600 by default; in the wrapper mode 120 more
# than PG_FIXTURE_TIMEOUT) even if the trap never runs (the test was
# SIGKILLed), removing the folder too when the test's shell is gone. The
# server's output goes to $PG_DIR/log, never to the test's descriptors.

# shellcheck source=mult.sh
. "$(dirname "${BASH_SOURCE[0]}")/mult.sh"
_pg_pids=()
_pg_launchers=()
_pg_guards=()
_pg_dirs=()

# pg_bindir: the folder of initdb, pg_ctl and postgres (see the header).
pg_bindir() {
  local d
  if [ -n "${PG_BINDIR:-}" ]; then
    if [ -x "$PG_BINDIR/initdb" ] && [ -x "$PG_BINDIR/pg_ctl" ]; then
      echo "$PG_BINDIR"
      return 0
    fi
    echo "pg_fixture: PG_BINDIR=$PG_BINDIR has no initdb and pg_ctl" >&2
    return 1
  fi
  # The versioned folders, highest version first (sort -V: 15 after 9.6).
  while IFS= read -r d; do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
      echo "$d"
      return 0
    fi
  done <<< "$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -r -V)"
  if command -v pg_config >/dev/null; then
    d=$(pg_config --bindir 2>/dev/null) || d=
    if [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
      echo "$d"
      return 0
    fi
  fi
  if d=$(command -v initdb); then
    d=$(dirname "$d")
    if [ -x "$d/pg_ctl" ]; then
      echo "$d"
      return 0
    fi
  fi
  echo "pg_fixture: no PostgreSQL server binaries (initdb, pg_ctl) in" \
    "/usr/lib/postgresql/*/bin, pg_config --bindir or PATH; set PG_BINDIR" \
    "(scripts/bootstrap.sh installs postgresql)" >&2
  return 1
}

# _pg_client NAME: a client program (psql, pg_isready) of the server's own
# version when its folder has one, else the one on PATH.
_pg_client() {
  if [ -n "${_pg_bin:-}" ] && [ -x "$_pg_bin/$1" ]; then
    echo "$_pg_bin/$1"
  else
    echo "$1"
  fi
}

# _pg_as_owner DIR SECONDS CMD...: runs CMD as the owner of the cluster in
# DIR (postgres when we are root), from inside DIR (the caller's working
# folder may be one the postgres user cannot enter), bounded by SECONDS
# times MULT.
_pg_as_owner() {
  local dir=$1 secs=$(($2 * MULT))
  shift 2
  if [ "$(id -u)" -eq 0 ]; then
    (cd "$dir" && timeout -k 5 "$secs" runuser -u postgres -- "$@")
  else
    (cd "$dir" && timeout -k 5 "$secs" "$@")
  fi
}

# _pg_alive PID: is PID a live process? A zombie is not (it has ended, and
# waits for its parent to reap it).
_pg_alive() {
  local stat
  stat=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [ -n "$stat" ] && [[ "$stat" != Z* ]]
}

# _pg_wait_gone PID SECONDS: waits at most SECONDS times MULT for PID to end.
_pg_wait_gone() {
  local end=$((SECONDS + $2 * MULT))
  while _pg_alive "$1"; do
    [ "$SECONDS" -lt "$end" ] || return 1
    sleep 0.05
  done
}

# _pg_kill_group PID: SIGKILLs PID and its process group, unless that group
# is ours. Each cluster runs in a session of its own (setsid), so its group
# holds the launcher (runuser), the postmaster and its backends.
_pg_kill_group() {
  local pgid ours
  pgid=$(ps -o pgid= -p "$1" 2>/dev/null | tr -d ' ') || pgid=
  ours=$(ps -o pgid= -p "$BASHPID" 2>/dev/null | tr -d ' ') || ours=
  if [ -n "$pgid" ] && [ "$pgid" != "$ours" ] && [ "$pgid" -gt 1 ]; then
    kill -KILL -- "-$pgid" 2>/dev/null || true
  fi
  kill -KILL "$1" 2>/dev/null || true
}

# _pg_reap PID: reaps our child PID once it is gone (it was killed and
# waited for with _pg_wait_gone); one still there is reported and left, so
# that the wait cannot hang.
_pg_reap() {
  if _pg_alive "$1"; then
    echo "pg_fixture: process $1 is still there after SIGKILL; not" \
      "waiting for it" >&2
  else
    wait "$1" 2>/dev/null || true
  fi
}

# _pg_stop DIR PID LAUNCHER: stops one cluster (postmaster PID, started by
# our child LAUNCHER), each way bounded, then removes DIR.
_pg_stop() {
  local dir=$1 pid=$2 launcher=$3
  if [ -n "$pid" ] && _pg_alive "$pid"; then
    _pg_as_owner "$dir" 15 "$_pg_bin/pg_ctl" stop -D "$dir/data" -m fast \
      -w -t "$((10 * MULT))" >>"$dir/ctl.log" 2>&1 </dev/null || true
    _pg_wait_gone "$pid" 2 || true
  fi
  if [ -n "$pid" ] && _pg_alive "$pid"; then
    echo "pg_fixture: postmaster $pid did not stop within $((15 * MULT)) s" \
      "of pg_ctl stop -m fast; trying -m immediate" >&2
    _pg_as_owner "$dir" 10 "$_pg_bin/pg_ctl" stop -D "$dir/data" \
      -m immediate -w -t "$((5 * MULT))" >>"$dir/ctl.log" 2>&1 </dev/null ||
      true
    _pg_wait_gone "$pid" 2 || true
  fi
  if [ -n "$pid" ] && _pg_alive "$pid"; then
    echo "pg_fixture: postmaster $pid did not stop with -m immediate;" \
      "killing it" >&2
    _pg_kill_group "$pid"
    _pg_wait_gone "$pid" 5 || echo "pg_fixture: postmaster $pid is still" \
      "there $((5 * MULT)) s after SIGKILL" >&2
  fi
  if [ -n "$launcher" ]; then
    _pg_wait_gone "$launcher" 5 || true
    # Whatever is left in the cluster's session (the backends of a
    # postmaster a test SIGKILLed) goes too.
    _pg_kill_group "$launcher"
    _pg_wait_gone "$launcher" 5 || true
    _pg_reap "$launcher"
  fi
  rm -rf "$dir"
}

pg_stop_all() {
  local i
  # A guard sits in a bounded builtin read; SIGTERM ends it at once, and
  # SIGKILL if not.
  for i in "${_pg_guards[@]}"; do
    kill "$i" 2>/dev/null || true
    _pg_wait_gone "$i" 2 || kill -KILL "$i" 2>/dev/null || true
    _pg_wait_gone "$i" 2 || true
    _pg_reap "$i"
  done
  for i in "${!_pg_dirs[@]}"; do
    _pg_stop "${_pg_dirs[$i]}" "${_pg_pids[$i]:-}" "${_pg_launchers[$i]:-}"
  done
  _pg_pids=()
  _pg_launchers=()
  _pg_guards=()
  _pg_dirs=()
}

# pg_log: the latest cluster's log so far, for failure messages.
pg_log() {
  if [ -n "${PG_DIR:-}" ]; then
    cat "$PG_DIR/log" 2>/dev/null || true
  fi
}

# A port nobody listens on now (the kernel's choice for port 0).
pg_free_port() {
  python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# _pg_fail MESSAGE FILE...: reports a failed start with each FILE's tail.
_pg_fail() {
  local f
  echo "pg_fixture: $1" >&2
  shift
  for f in "$@"; do
    if [ -s "$f" ]; then
      echo "pg_fixture: the last lines of $f:" >&2
      tail -n 30 "$f" >&2
    fi
  done
  return 1
}

# _pg_conf_quote VALUE: VALUE as a postgresql.conf string ('' for ').
_pg_conf_quote() {
  printf "'%s'" "${1//\'/\'\'}"
}

# _pg_sql_socket DIR PORT SQL: runs SQL as the bootstrap superuser over the
# Unix socket (trusted), bounded by 10 s times MULT.
_pg_sql_socket() {
  PGCONNECT_TIMEOUT=$((5 * MULT)) timeout -k 2 "$((10 * MULT))" \
    "$(_pg_client psql)" -X -q -A -t \
    -v ON_ERROR_STOP=1 -h "$1/sock" -p "$2" -U postgres -d postgres \
    -c "$3" </dev/null
}

# _pg_guard DIR LAUNCHER PID: the guard, a subshell that waits on a FIFO
# no one writes (a builtin read, bounded), then kills the cluster's
# processes, and removes the folder when the test's shell ($$) is gone.
_pg_guard() {
  local dir=$1 launcher=$2 pid=$3 fifo
  fifo=$(mktemp -u "$dir/guard.XXXXXX")
  mkfifo "$fifo"
  (
    read -r -t "${PG_FIXTURE_MAX_S:-600}" _ <>"$fifo" || true
    _pg_kill_group "$launcher"
    _pg_kill_group "$pid"
    if ! kill -0 $$ 2>/dev/null; then
      sleep 1
      rm -rf "$dir"
    fi
  ) </dev/null >/dev/null 2>&1 &
  _pg_guards+=($!)
}

# _pg_launch DIR: starts the postmaster of the cluster in DIR in a session
# of its own (setsid), as a child of this shell (so it is reaped when it
# ends: hence no command substitution, whose subshell would be its
# parent), its output appended to DIR/log; sets _pg_launched to the
# launcher's pid.
_pg_launch() {
  if [ "$(id -u)" -eq 0 ]; then
    (cd "$1" && exec setsid -w runuser -u postgres -- \
      "$_pg_bin/postgres" -D "$1/data") >>"$1/log" 2>&1 </dev/null &
  else
    (cd "$1" && exec setsid -w "$_pg_bin/postgres" -D "$1/data") \
      >>"$1/log" 2>&1 </dev/null &
  fi
  _pg_launched=$!
}

# pg_crash: kill -9 of the latest cluster, every process at once, as a
# crash of the server would (what was written to the OS survives: only
# what sat in the server's memory, unflushed WAL included, is lost). The
# postmaster is stopped first, so that it starts no process the kill would
# miss. runuser (the launcher when root) stops itself when its child stops,
# and would then never reap it: it is continued after the kill. Each wait
# is bounded. pg_restart starts the cluster again.
pg_crash() {
  local i=$((${#_pg_dirs[@]} - 1)) kids k
  kill -STOP "$PG_PID" 2>/dev/null || true
  kids=$(ps -o pid= --ppid "$PG_PID" 2>/dev/null) || kids=
  # shellcheck disable=SC2086 # one pid a word
  kill -KILL "$PG_PID" $kids 2>/dev/null || true
  if [ -n "${_pg_launchers[$i]:-}" ]; then
    kill -CONT "${_pg_launchers[$i]}" 2>/dev/null || true
  fi
  for k in "$PG_PID" $kids; do
    _pg_wait_gone "$k" 5 || {
      echo "pg_fixture: pg_crash: process $k is still there" >&2
      return 1
    }
  done
  if [ -n "${_pg_launchers[$i]:-}" ]; then
    _pg_wait_gone "${_pg_launchers[$i]}" 5 || true
    _pg_reap "${_pg_launchers[$i]}"
    _pg_launchers[i]=
  fi
  _pg_pids[i]=
}

# pg_restart: starts the latest cluster again after pg_crash, on the same
# folder and port (crash recovery replays its WAL), and waits (bounded by
# 60 s times MULT) until it answers; exports the new PG_PID.
pg_restart() {
  local i=$((${#_pg_dirs[@]} - 1)) dir=$PG_DIR launcher pid end
  _pg_launch "$dir"
  launcher=$_pg_launched
  _pg_launchers[i]=$launcher
  end=$((SECONDS + 60 * MULT))
  pid=
  while [ "$SECONDS" -lt "$end" ] && _pg_alive "$launcher"; do
    if _pg_sql_socket "$dir" "$PG_PORT" 'SELECT 1' >/dev/null 2>&1; then
      pid=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null) || pid=
      [[ ! "$pid" =~ ^[0-9]+$ ]] || break
      pid=
    fi
    sleep 0.05
  done
  if [ -z "$pid" ]; then
    _pg_fail "the server did not start again on port $PG_PORT within" \
      "$((60 * MULT)) s" "$dir/log"
    return 1
  fi
  _pg_pids[i]=$pid
  PG_PID=$pid
  export PG_PID
  _pg_guard "$dir" "$launcher" "$pid"
}

# shellcheck disable=SC2120 # the -c settings are optional
pg_start() {
  local settings=() arg dir data port pid launcher end ready _
  while [ $# -gt 0 ]; do
    case $1 in
      -c)
        [ $# -ge 2 ] || {
          echo "pg_fixture: pg_start: -c needs NAME=VALUE" >&2
          return 64
        }
        arg=$2
        shift 2
        ;;
      -c*)
        arg=${1#-c}
        shift
        ;;
      *)
        echo "pg_fixture: pg_start: unknown argument '$1' (usage:" \
          "pg_start [-c NAME=VALUE ...])" >&2
        return 64
        ;;
    esac
    if [[ "$arg" != ?*=* ]]; then
      echo "pg_fixture: pg_start: '-c $arg' is not NAME=VALUE" >&2
      return 64
    fi
    settings+=("${arg%%=*} = $(_pg_conf_quote "${arg#*=}")")
  done

  _pg_bin=$(pg_bindir) || return 1
  if [ "$(id -u)" -eq 0 ]; then
    if ! id -u postgres >/dev/null 2>&1 || ! command -v runuser >/dev/null; then
      echo "pg_fixture: running as root, and PostgreSQL refuses to: this" \
        "needs the postgres user and runuser" >&2
      return 1
    fi
  fi
  if [ ${#_pg_dirs[@]} -eq 0 ]; then
    trap pg_stop_all EXIT
  fi

  # The folder: the socket's path (.../sock/.s.PGSQL.PORT) must fit in
  # sun_path (107 bytes), and as root the postgres user must reach it.
  dir=$(mktemp -d "${TMPDIR:-/tmp}/ordo-pg.XXXXXX") || return 1
  if [ ${#dir} -gt 70 ] || { [ "$(id -u)" -eq 0 ] &&
    ! runuser -u postgres -- test -x "$dir/.." 2>/dev/null; }; then
    rmdir "$dir"
    dir=$(mktemp -d /tmp/ordo-pg.XXXXXX) || return 1
  fi
  _pg_dirs+=("$dir")
  _pg_pids+=("")
  _pg_launchers+=("")
  data=$dir/data
  mkdir "$dir/sock"
  : >"$dir/log"
  : >"$dir/ctl.log"
  if [ "$(id -u)" -eq 0 ]; then
    chown -R postgres: "$dir"
  fi
  chmod 700 "$dir"

  if ! _pg_as_owner "$dir" 60 "$_pg_bin/initdb" -D "$data" \
    --username=postgres --auth-local=trust --auth-host=scram-sha-256 \
    --encoding=UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1 </dev/null
  then
    _pg_fail "initdb ($_pg_bin/initdb) failed or took over $((60 * MULT)) s" \
      "$dir/initdb.log"
    return 1
  fi

  # Our own pg_hba.conf, and our settings after initdb's (the last wins).
  cat >"$data/pg_hba.conf" <<'EOF'
# pg_fixture.sh: the socket is trusted; TCP from 127.0.0.1 needs a password.
local all all                  trust
host  all all 127.0.0.1/32     scram-sha-256
EOF
  {
    echo
    echo "# pg_fixture.sh"
    echo "listen_addresses = '127.0.0.1'"
    echo "unix_socket_directories = $(_pg_conf_quote "$dir/sock")"
    echo "unix_socket_permissions = 0700"
    echo "fsync = off"
    echo "synchronous_commit = off"
    echo "full_page_writes = off"
    echo "deadlock_timeout = '10ms'"
    echo "max_connections = 100"
    echo "shared_buffers = '32MB'"
    echo "password_encryption = 'scram-sha-256'"
    echo "logging_collector = off"
    echo "log_min_messages = warning"
    echo "log_line_prefix = '%m [%p] %q%u@%d '"
    if [ ${#settings[@]} -gt 0 ]; then
      echo "# pg_start -c"
      printf '%s\n' "${settings[@]}"
    fi
  } >>"$data/postgresql.conf"
  if [ "$(id -u)" -eq 0 ]; then
    chown postgres: "$data/pg_hba.conf" "$data/postgresql.conf"
  fi

  # The port may be taken between the choice and the bind: try again. The
  # postmaster runs in a session of its own (setsid), as a descendant of
  # this shell (so it is reaped when it ends), its output in $dir/log.
  for _ in 1 2 3 4 5; do
    port=$(pg_free_port)
    echo "port = $port" >>"$data/postgresql.conf"
    : >"$dir/log"
    _pg_launch "$dir"
    launcher=$_pg_launched
    _pg_launchers[${#_pg_launchers[@]} - 1]=$launcher
    # Ready: it answers SELECT 1 on its socket (not "the database system
    # is starting up"), and postmaster.pid names the postmaster.
    ready=
    end=$((SECONDS + 30 * MULT))
    while [ "$SECONDS" -lt "$end" ] && _pg_alive "$launcher"; do
      if _pg_sql_socket "$dir" "$port" 'SELECT 1' >/dev/null 2>&1; then
        pid=$(head -n 1 "$data/postmaster.pid" 2>/dev/null) || pid=
        if [[ "$pid" =~ ^[0-9]+$ ]]; then
          ready=1
          break
        fi
      fi
      sleep 0.05
    done
    [ -z "$ready" ] || break
    _pg_kill_group "$launcher"
    _pg_wait_gone "$launcher" 5 || true
    _pg_reap "$launcher"
    _pg_launchers[${#_pg_launchers[@]} - 1]=
    if grep -q -i 'could not bind\|address already in use' "$dir/log"; then
      continue
    fi
    break
  done
  if [ -z "$ready" ]; then
    if [ "$SECONDS" -ge "$end" ]; then
      _pg_fail "the server ($_pg_bin/postgres, port $port) did not answer" \
        "SELECT 1 on its socket within $((30 * MULT)) s" "$dir/log"
    else
      _pg_fail "the server ($_pg_bin/postgres, port $port) exited at" \
        "start" "$dir/log"
    fi
    return 1
  fi
  _pg_pids[${#_pg_pids[@]} - 1]=$pid

  _pg_guard "$dir" "$launcher" "$pid"

  # Role ordo, then TCP with its password.
  if ! _pg_sql_socket "$dir" "$port" \
    "CREATE ROLE ordo LOGIN SUPERUSER PASSWORD 'ordo'" >>"$dir/ctl.log" 2>&1; then
    _pg_fail "could not create role ordo" "$dir/ctl.log" "$dir/log"
    return 1
  fi
  PG_PORT=$port
  PG_SOCKDIR=$dir/sock
  PG_DIR=$dir
  PG_PID=$pid
  export PG_PORT PG_SOCKDIR PG_DIR PG_PID
  end=$((SECONDS + 30 * MULT))
  until pg_psql postgres -c 'SELECT 1' >/dev/null 2>>"$dir/ctl.log"; do
    if [ "$SECONDS" -ge "$end" ] || ! _pg_alive "$pid"; then
      _pg_fail "the server (pid $pid) did not answer role ordo on" \
        "127.0.0.1:$port within $((30 * MULT)) s" "$dir/ctl.log" "$dir/log"
      return 1
    fi
    sleep 0.1
  done
}

# pg_url NAME: the URL of database NAME on the latest cluster, as ordo.
pg_url() {
  echo "postgres://ordo:ordo@127.0.0.1:$PG_PORT/${1:?usage: pg_url NAME}"
}

# pg_psql NAME [PSQL ARGS...]: psql as ordo (with its password) on
# database NAME of the latest cluster over TCP, bounded by 30 s times MULT.
pg_psql() {
  local db=${1:?usage: pg_psql NAME [PSQL ARGS...]}
  shift
  PGPASSWORD=ordo PGCONNECT_TIMEOUT=$((10 * MULT)) \
    timeout -k 5 "$((30 * MULT))" \
    "$(_pg_client psql)" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 \
    -p "$PG_PORT" -U ordo -d "$db" "$@"
}

# pg_createdb NAME: creates database NAME, owned by ordo, on the latest
# cluster.
pg_createdb() {
  local db=${1:?usage: pg_createdb NAME}
  pg_psql postgres -v "db=$db" <<< 'CREATE DATABASE :"db" OWNER ordo;'
}

# Run as a command: start, create database ordo, run, stop.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  [ $# -ge 1 ] || {
    echo "usage: $0 COMMAND [ARGS...]" >&2
    exit 64
  }
  : "${PG_FIXTURE_MAX_S:=$((${PG_FIXTURE_TIMEOUT:-300} + 120))}"
  # shellcheck disable=SC2119 # COMMAND's arguments are not pg_start's
  pg_start
  pg_createdb ordo
  PG_URL=$(pg_url ordo)
  export PG_URL
  set +e
  timeout -k 10 "${PG_FIXTURE_TIMEOUT:-300}" "$@"
  rc=$?
  set -e
  [ "$rc" -ne 124 ] || echo "pg_fixture: '$*' did not finish within" \
    "${PG_FIXTURE_TIMEOUT:-300} s" >&2
  pg_stop_all
  exit "$rc"
fi
