#!/usr/bin/env bash
# run_spin.sh [options] MODEL.pml -- model-checks a Promela model of the
# engine (src/core/*.pml) with spin, in a temporary folder (never the
# source tree), and then checks that every deliberate bug the model's
# header lists (lines " *   -DBUG_NAME ...") makes spin report an error:
# a model that cannot fail checks nothing.
#
# The model passes when spin and the C compiler succeed, pan exits 0 and
# reports "errors: 0", and its report has no assertion violation, no
# invalid end state (a thread that can never end: a deadlock or a lost
# wake-up), and no sign of a search cut short (its depth bound, its memory
# bound). It prints the state count, the depth reached, pan's memory (MB),
# "errors: 0" and the time. Each bug passes when spin reports at least one
# error for it (an assertion or an invalid end state); a bug line that says
# "(pan -A)" is checked with pan's assertions off, so that what it must
# show is the invalid end state.
# A bug line that says "(with -DNAME=VALUE ...)" (on its first line) is
# checked with those defines added to the bound's: the bound at which that
# bug shows (src/server/probe.pml's scenarios); the model itself is then
# checked at each such set of defines too, so that every bug is caught
# where the model without it passes, unless the set is one define that the
# header's line " * The default bound covers: -DA=1 -DA=2 ..." names (a
# bound that the default one includes: its run checked it already).
#
# Options:
#   -D NAME[=VALUE]  a define for spin (the bound: -D ROUNDS=2, -D ALL_ABORTS)
#   --depth N        pan's depth bound, -m (default 1000000)
#   --hash N         pan's hash table, 2^N slots, -w (default 24)
#   --mem MB         pan's memory bound, -DMEMLIM (default 6000)
#   --no-bugs        check the model only
#   --timeout S      the bound of each pan run against a hang, in seconds
#                    (default 1200), times ORDO_TEST_TIMEOUT_MULT
#
# PAN_OPT (default -O0) is the optimisation pan is compiled with.
#
# spin and a C compiler (cc, or $CC) must be installed (scripts/bootstrap.sh
# installs spin); their absence fails the check. Exit 0 when everything
# passed, 1 otherwise.
set -euo pipefail

usage() {
  echo "usage: $0 [-D NAME[=VALUE]]... [--depth N] [--hash N] [--mem MB]" \
    "[--no-bugs] [--timeout S] MODEL.pml" >&2
  exit 2
}

DEFS=()
DEPTH=1000000
HASH=24
MEM=6000
BUGS=1
TMO=1200
MODEL=
while [ $# -gt 0 ]; do
  case "$1" in
  -D) DEFS+=("-D$2"); shift 2 ;;
  -D*) DEFS+=("$1"); shift ;;
  --depth) DEPTH=$2; shift 2 ;;
  --hash) HASH=$2; shift 2 ;;
  --mem) MEM=$2; shift 2 ;;
  --no-bugs) BUGS=0; shift ;;
  --timeout) TMO=$2; shift 2 ;;
  -*) usage ;;
  *) [ -z "$MODEL" ] || usage; MODEL=$1; shift ;;
  esac
done
[ -n "$MODEL" ] || usage
MULT=${ORDO_TEST_TIMEOUT_MULT:-1}
case "$MULT" in '' | *[!0-9]*) MULT=1 ;; esac
CC=${CC:-cc}
PAN_OPT=${PAN_OPT:--O0}
NAME=$(basename "$MODEL")

fail() {
  echo "FAIL: $NAME: $*" >&2
  exit 1
}

[ -r "$MODEL" ] || fail "cannot read $MODEL"
MODEL=$(cd "$(dirname "$MODEL")" && pwd)/$(basename "$MODEL")
command -v spin >/dev/null 2>&1 ||
  fail "spin is not installed (scripts/bootstrap.sh installs the Debian package spin)"
command -v "$CC" >/dev/null 2>&1 || fail "no C compiler ($CC) to build pan"
command -v timeout >/dev/null 2>&1 || fail "timeout(1) is missing (coreutils)"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# verify DIR PANFLAGS DEFINES...: spin -a and pan, in DIR; pan's report in
# DIR/report, its exit status in $PAN_RC, its seconds in $SECS.
verify() {
  local dir=$1 panflags=$2
  shift 2
  mkdir -p "$dir"
  (cd "$dir" && spin "$@" -a "$MODEL" >spin.out 2>&1) || {
    cat "$dir/spin.out" >&2
    fail "spin -a failed ($*)"
  }
  # pan.c's own code draws warnings from newer compilers: they are not ours.
  # -O0 by default: pan.c is large, and -O2 takes 10 times longer to
  # compile (about 50 s) than it saves in a search of these models.
  # shellcheck disable=SC2086 # PAN_OPT is a list of flags
  (cd "$dir" && "$CC" $PAN_OPT -w -DSAFETY -DNOCLAIM -DCOLLAPSE -DMEMLIM="$MEM" \
    -o pan pan.c >cc.out 2>&1) || {
    cat "$dir/cc.out" >&2
    fail "compiling pan failed ($*)"
  }
  local t0 t1
  t0=$(date +%s.%N)
  set +e
  # shellcheck disable=SC2086 # panflags is a list of flags
  (cd "$dir" && timeout "$((TMO * MULT))" ./pan -m"$DEPTH" -w"$HASH" $panflags \
    >report 2>&1)
  PAN_RC=$?
  set -e
  t1=$(date +%s.%N)
  SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  [ "$PAN_RC" -ne 124 ] ||
    fail "pan did not finish within $((TMO * MULT)) s ($*)"
}

# The state count, the depth reached, pan's memory (MB) and the errors
# line of DIR/report.
states_of() {
  awk '/states, stored/ { print $1; exit }' "$1/report"
}
depth_of() {
  grep -oE 'depth reached [0-9]+' "$1/report" | head -1 | awk '{ print $3 }'
}
mem_of() {
  awk '/total actual memory usage/ { print $1; exit }' "$1/report"
}
summary_of() {
  echo "$(states_of "$1") states, depth $(depth_of "$1"), $(mem_of "$1") MB"
}
errors_of() {
  grep -oE 'errors: [0-9]+' "$1/report" | head -1
}

show() {
  echo "--- pan's report ($1):" >&2
  grep -v '^Depth=' "$1/report" | head -60 >&2
}

# The model itself, at the bound the defines set.
verify "$TMP/model" "" "${DEFS[@]}"
D=$TMP/model
ERRS=$(errors_of "$D")
# pan's errors are its "pan:N: ..." lines; its header's "invalid end
# states +" only says the check was on.
BAD=$(grep -E '^pan:[0-9]+: |Search not completed|max search depth too small|reached -DMEMLIM|out of memory' \
  "$D/report" | head -3 || true)
if [ "$PAN_RC" -ne 0 ] || [ "$ERRS" != "errors: 0" ] || [ -n "$BAD" ]; then
  show "$D"
  fail "spin reports an error (pan exit $PAN_RC, '${ERRS:-no errors line}'): ${BAD:-see above}"
fi
echo "$NAME ${DEFS[*]:-(default bound)}: $(summary_of "$D"), $ERRS, ${SECS} s"

# with_of BUG: the defines its header line adds, "(with -DA=1 -DB)".
with_of() {
  grep -E "^ \*   -D$1\b" "$MODEL" | head -1 |
    grep -oE '\(with( -D[A-Za-z0-9_]+(=[^ )]+)?)+\)' |
    grep -oE -- '-D[A-Za-z0-9_]+(=[^ )]+)?' | tr '\n' ' ' | sed 's/ $//' || true
}

# The deliberate bugs: each must be caught.
if [ "$BUGS" -eq 1 ]; then
  bugs=$(grep -E '^ \*   -DBUG_[A-Z0-9_]+' "$MODEL" |
    sed -E 's/^ \*   -D(BUG_[A-Z0-9_]+).*/\1/')
  [ -n "$bugs" ] || fail "its header lists no deliberate bug (-DBUG_...)"
  # The model without the bugs at each bound a bug line names.
  withs=$(for b in $bugs; do with_of "$b"; echo; done | sort -u | grep -v '^ *$' || true)
  covered=" $(grep -m1 -E '^ \* The default bound covers:' "$MODEL" |
    grep -oE -- '-D[A-Za-z0-9_]+(=[^ ]+)?' | tr '\n' ' ' || true)"
  nw=0
  while IFS= read -r w; do
    [ -n "$w" ] || continue
    if [ "${#DEFS[@]}" -eq 0 ] && [ "$(echo "$w" | wc -w)" -eq 1 ] &&
      [[ "$covered" == *" $w "* ]]; then
      continue
    fi
    nw=$((nw + 1))
    # shellcheck disable=SC2086 # w is a list of defines
    verify "$TMP/with$nw" "" "${DEFS[@]}" $w
    D=$TMP/with$nw
    ERRS=$(errors_of "$D")
    BAD=$(grep -E '^pan:[0-9]+: |Search not completed|max search depth too small|reached -DMEMLIM|out of memory' \
      "$D/report" | head -3 || true)
    if [ "$PAN_RC" -ne 0 ] || [ "$ERRS" != "errors: 0" ] || [ -n "$BAD" ]; then
      show "$D"
      fail "spin reports an error at $w (pan exit $PAN_RC, '${ERRS:-no errors line}'): ${BAD:-see above}"
    fi
    echo "  $NAME $w: $(summary_of "$D"), $ERRS, ${SECS} s"
  done <<<"$withs"
  nb=0
  for b in $bugs; do
    grep -qE "^#if(n?def)? .*\b$b\b|^#if(n?def)? $b\$" "$MODEL" ||
      fail "$b is listed in the header but no #ifdef uses it"
    flags=""
    if grep -E "^ \*   -D$b\b" "$MODEL" | grep -q '(pan -A)'; then
      flags="-A"
    fi
    w=$(with_of "$b")
    # shellcheck disable=SC2086 # w is a list of defines
    verify "$TMP/$b" "$flags" "${DEFS[@]}" $w "-D$b"
    D=$TMP/$b
    ERRS=$(errors_of "$D")
    what=$(grep -m1 -E '^pan:[0-9]+: ' "$D/report" | cut -c1-160 || true)
    case "$ERRS" in
    "errors: 0" | "")
      show "$D"
      fail "$b is not caught: the model cannot fail the way this bug would"
      ;;
    esac
    [ -n "$what" ] || {
      show "$D"
      fail "$b: an error count but no report line"
    }
    if [ "$flags" = "-A" ] && ! grep -q 'invalid end state' "$D/report"; then
      show "$D"
      fail "$b: with assertions off it must show an invalid end state"
    fi
    echo "  caught $b${flags:+ (pan $flags)}${w:+ ($w)}: $what (${SECS} s)"
    nb=$((nb + 1))
  done
  echo "$NAME: all $nb deliberate bugs caught"
fi
