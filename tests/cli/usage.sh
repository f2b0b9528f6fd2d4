#!/usr/bin/env bash
# usage.sh -- bad flags, bad numbers and bad URLs: exit status 2, nothing on
# stdout, and one line on stderr that names the culprit.
. "$(dirname "$0")/lib.sh"

# case NEEDLE ARGS...: ordo ARGS must fail as bad usage naming NEEDLE.
case_() {
  local needle=$1
  shift
  run "$@"
  expect_rc 2 "$@"
  [ ! -s "$OUT" ] || fail "ordo $*: wrote to stdout"
  [ "$(wc -l <"$ERR")" -eq 1 ] || fail "ordo $*: stderr is not one line"
  grep -qF -- "$needle" "$ERR" || fail "ordo $*: stderr does not name '$needle'"
}

case_ "'--frobnicate'" bank --frobnicate
case_ "'--frobnicate'" bank --frobnicate=3
case_ "--lock-timeout MS" bank --frobnicate # the list of accepted flags
case_ "'0' for --workers" bank --workers 0
case_ "'1025' for --workers" bank --workers 1025
case_ "'abc' for --workers" bank --workers abc
case_ "'8x' for --workers" bank --workers=8x
case_ "'-3' for --workers" bank --workers -3
case_ "'1' for --accounts" bank --accounts 1
case_ "'0' for --transfers" bank --transfers 0
case_ "'99999999999999999999' for --transfers" bank --transfers 99999999999999999999
case_ "'soon' for --lock-timeout" bank --lock-timeout soon
case_ "'1s' for --watchdog" bank --watchdog 1s
case_ "'86401' for --watchdog" bank --watchdog 86401
case_ "'--watchdog' needs a value" bank --watchdog
case_ "'--workers' needs a value" bank --workers
case_ "'--json' takes no value" bank --json=yes
case_ "'foo' for --detect" bank --detect foo
case_ "immediate, delayed, off" bank --detect=foo
case_ "'--detect' needs a value" bank --detect
case_ "'x' for --attempts" bank --attempts x
case_ "'5s' for --deadlock-timeout" bank --deadlock-timeout 5s
case_ "'--graph' needs a value" bank --graph
case_ "'--naive' takes no value" bank --naive=1
case_ "--naive cannot be combined with --compare" bank --compare --naive
case_ "--detect cannot be combined with --compare" bank --detect off --compare
case_ "'xml' for --format" graph --format xml
case_ "accepted values are dot, json" graph --format=svg --naive-demo
case_ "'--frobnicate'" graph --frobnicate
case_ "--naive-demo" graph
case_ "'stray'" graph stray
case_ "'stray'" bank stray
case_ "'foo://x'" bank --backend foo://x
case_ "accepted forms are mem://" bank --backend foo://x
case_ "'foo://x'" graph --naive-demo --backend foo://x
case_ "'mem://?detect=sometimes'" bank --backend 'mem://?detect=sometimes'
case_ "'nosuch'" nosuch
case_ "'--nosuch'" --nosuch
case_ "missing command" 

# A password in a bad URL must not be echoed.
run bank --backend 'foo://user:hunter2@host:1'
expect_rc 2 bank --backend foo://...
if grep -q hunter2 "$ERR"; then fail "the password was printed"; fi
grep -qF "'foo://user:***@host:1'" "$ERR" || fail "the URL was not shown redacted"
echo "ok: usage errors"
