#!/usr/bin/env bash
# check_contrib.sh SRC_DIR ORDOD ORDO -- checks the packaging files
# (contrib/, man/) against the programs they describe:
#   1. every flag that `ordod --help` prints is named in man/ordod.8 and has
#      an option line (commented or not) in contrib/ordod.conf, every flag
#      of `ordo --help` (which ends with each subcommand's help) is named in
#      man/ordo.1, and every function include/ordo.h exports in
#      man/libordo.3;
#   2. ordod starts with contrib/ordod.conf as shipped, and again with every
#      commented option line turned on (those ordod knows today), answers
#      PING, and stops cleanly on SIGTERM (the fixture's checks);
#   3. `systemd-analyze verify` passes on contrib/systemd/ordod.service,
#      silently (it warns without failing), where systemd-analyze exists;
#   4. `promtool check rules` passes on contrib/prometheus/ordo-alerts.yml,
#      where promtool exists.
# A missing checker is named on stdout and skipped; the rest still runs.
set -euo pipefail
src=$1
ordod=$(realpath "$2")
ordo=$(realpath "$3")
# shellcheck source=../integration/ordod_fixture.sh
. "$src/tests/integration/ordod_fixture.sh"
tmp=$(mktemp -d)
conf=$src/contrib/ordod.conf
unit=$src/contrib/systemd/ordod.service
rules=$src/contrib/prometheus/ordo-alerts.yml
fail=0
# The fixture's EXIT trap stops the server; this one also removes $tmp.
# ordod_start sets the fixture's again, so run_conf sets this one after it.
_contrib_on_exit() {
  local rc=$?
  rm -rf "$tmp"
  ordod_exit "$rc"
}
trap _contrib_on_exit EXIT
bad() {
  echo "check_contrib: FAIL: $*" >&2
  fail=1
}

# The flags a --help text names: every --word in it.
flags_of() {
  grep -o -E -- '--[a-z][a-z0-9-]*' | sort -u
}
# A man page as plain text, without hyphenation (-rHY=0) and on long lines,
# so that each flag stays one word.
man_text() {
  groff -man -Tascii -P-cbou -rHY=0 -rLL=200n "$1" 2>/dev/null
}

# ---- 1. every flag is documented ---------------------------------------
# in_man PAGE FLAG...: each FLAG must be named in man/PAGE.
in_man() {
  local page=$1 f
  shift
  man_text "$src/man/$page" >"$tmp/$page.txt"
  for f in "$@"; do
    grep -q -E -- "$f([^a-z0-9-]|\$)" "$tmp/$page.txt" ||
      bad "man/$page does not name $f (its program's --help does)"
  done
}
ordod_flags=$("$ordod" --help | flags_of)
[ -n "$ordod_flags" ] || bad "ordod --help names no flag"
# shellcheck disable=SC2086 # one flag a word
in_man ordod.8 $ordod_flags
for f in $ordod_flags; do
  name=${f#--}
  # --config and --help are flags only: the file cannot name them.
  case $name in config | help) continue ;; esac
  grep -q -E "^(# )?$name( |\$)" "$conf" ||
    bad "contrib/ordod.conf has no line for $name (ordod --help names $f)"
done
ordo_flags=$("$ordo" --help | flags_of)
[ -n "$ordo_flags" ] || bad "ordo --help names no flag"
# shellcheck disable=SC2086
in_man ordo.1 $ordo_flags
# And every function ordo.h exports (ORDO_EXTERN, its name before the first
# parenthesis, the declaration joined onto one line) in man/libordo.3.
api=$(tr '\n' ' ' <"$src/include/ordo.h" | grep -o -E 'ORDO_EXTERN[^;(]*\(' |
  grep -o -E 'ordo_[a-z0-9_]+ *\($' | tr -d '( ' | sort -u)
[ "$(wc -w <<<"$api")" -ge 60 ] ||
  bad "found only $(wc -w <<<"$api") ORDO_EXTERN functions in ordo.h"
man_text "$src/man/libordo.3" >"$tmp/libordo.3.txt"
for f in $api; do
  grep -q -E "(^|[^a-z0-9_])$f([^a-z0-9_]|\$)" "$tmp/libordo.3.txt" ||
    bad "man/libordo.3 does not name $f (include/ordo.h exports it)"
done

# ---- 2. ordod accepts the sample ---------------------------------------
# ping_ordod [PASSWORD]: PING over bash's /dev/tcp (AUTH first when given),
# bounded by 5 s; prints the raw replies.
ping_ordod() {
  local auth=
  [ -z "${1:-}" ] || auth="AUTH $1"$'\r\n'
  timeout "$((5 * MULT))" bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" &&
    printf "%sPING\r\nQUIT\r\n" "$1" >&3 && cat <&3' "$ORDOD_PORT" "$auth"
}
# run_conf FILE PASSWORD [ARGS...]: starts ordod with --config FILE (and the
# fixture's temporary --dir, --port 0 and its other flags, which win over
# the file), PINGs it and stops it.
run_conf() {
  local file=$1 pass=$2
  shift 2
  if ! ordod_start "$ordod" --config "$file" "$@"; then
    bad "ordod did not start with --config $file"
    return
  fi
  trap _contrib_on_exit EXIT
  # ordod answers PING before AUTH too, so with a password the AUTH's own
  # +OK is what shows the file's password took.
  local reply want=+PONG
  [ -z "$pass" ] || want=+OK$'\n'+PONG
  reply=$(ping_ordod "$pass" | tr -d '\r')
  [[ "$reply" == "$want"$'\n'* ]] ||
    bad "ordod with --config $file answered '$reply', not '$want'"
  ordod_stop || bad "ordod with --config $file did not stop cleanly"
}
run_conf "$conf" ""

# Every commented option line that ordod knows, turned on. The values that
# name places outside a test's reach are replaced by flags (which win):
# the socket and the files go to the temporary folder, the shard list names
# this server alone (so no peer is dialled), and the ports are 0.
all=$tmp/all.conf
: >"$all"
while IFS= read -r line; do
  if [[ "$line" =~ ^#\ ([a-z][a-z0-9-]*)(\ .*)?$ ]] &&
    grep -q -x -- "--${BASH_REMATCH[1]}" <<<"$ordod_flags"; then
    echo "${line#\# }" >>"$all"
  else
    echo "$line" >>"$all"
  fi
done <"$conf"
pass=$(sed -n 's/^requirepass //p' "$all")
over=()
has() { grep -q -x -- "--$1" <<<"$ordod_flags"; }
has unixsocket && over+=(--unixsocket "$tmp/ordod.sock")
has peers && over+=(--peers 127.0.0.1:1 --shard-name 127.0.0.1:1)
has metrics-port && over+=(--metrics-port 0)
has tls-port && over+=(--tls-port 0)
if has aclfile; then
  printf 'user alice on >secret ~acct:* +@lock\nuser admin on >pw ~* +@all\n' \
    >"$tmp/users.acl"
  over+=(--aclfile "$tmp/users.acl")
fi
if has tls-cert-file; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -days 1 -subj /CN=localhost -keyout "$tmp/server.key" \
    -out "$tmp/server.crt" 2>/dev/null
  over+=(--tls-cert-file "$tmp/server.crt" --tls-key-file "$tmp/server.key"
    --tls-ca-cert-file "$tmp/server.crt")
fi
run_conf "$all" "$pass" "${over[@]}"

# ---- 3. the systemd unit -------------------------------------------------
if command -v systemd-analyze >/dev/null 2>&1; then
  # verify checks that ExecStart's program exists, and runs man for the
  # Documentation= page: so the unit names the built ordod, and MANPATH
  # holds the page.
  mkdir -p "$tmp/unit" "$tmp/man/man8"
  sed "s#/usr/bin/ordod#$ordod#" "$unit" >"$tmp/unit/ordod.service"
  cp "$src/man/ordod.8" "$tmp/man/man8/"
  if ! out=$(MANPATH=$tmp/man systemd-analyze verify \
    "$tmp/unit/ordod.service" 2>&1) || [ -n "$out" ]; then
    bad "systemd-analyze verify contrib/systemd/ordod.service: $out"
  fi
else
  echo "check_contrib: no systemd-analyze here: the unit is not verified"
fi

# ---- 4. the alert rules --------------------------------------------------
if command -v promtool >/dev/null 2>&1; then
  promtool check rules "$rules" >"$tmp/promtool.out" 2>&1 ||
    bad "promtool check rules: $(cat "$tmp/promtool.out")"
else
  echo "check_contrib: no promtool here: the alert rules are not checked"
fi

[ "$fail" -ne 0 ] || echo "check_contrib: OK"
exit "$fail"
