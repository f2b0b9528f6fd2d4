#!/usr/bin/env bash
# mult.sh -- sourced by the fixtures (ordod_fixture.sh, redis_fixture.sh,
# pg_fixture.sh), and so by every script that uses one: sets MULT to
# ORDO_TEST_TIMEOUT_MULT as a whole number, rounded up, at least 1 (1 when
# unset or not a number). scripts/test.sh sets it for the sanitizer builds
# (4 for ASan, 6 for TSan), whose servers and clients run several times
# slower: every bound a script puts on elapsed time is a bound against a
# hang, and is written N * MULT seconds so that it grows with them. Shell
# arithmetic has no fractions, hence the rounding.

_ordo_mult() {
  local m=${ORDO_TEST_TIMEOUT_MULT:-1} int frac
  if [[ "$m" =~ ^([0-9]*)(\.([0-9]*))?$ ]] && [ "$m" != . ]; then
    int=${BASH_REMATCH[1]:-0}
    frac=${BASH_REMATCH[3]:-}
    int=$((10#$int))
    [[ "$frac" =~ ^0*$ ]] || int=$((int + 1))
    [ "$int" -ge 1 ] || int=1
    echo "$int"
  else
    echo 1
  fi
}
# shellcheck disable=SC2034 # read by the scripts that source this file
MULT=$(_ordo_mult)
