#!/usr/bin/env bash
# quick.sh -- sim_quick: small scenarios of ordo_probesim (sim/README.md),
# both detectors, asserting what the simulator exists to show:
#   1. 0 phantom aborts, 0 missed cycles, no cycle with two victims, and
#      every closed cycle resolved (by its victim or by a breaker);
#   2. the same seed gives the same output byte for byte, and another seed
#      another output;
#   3. each --bug-* option that disables a safety step breaks what it
#      guards: --bug-no-confirm and --bug-no-pins show phantom aborts,
#      --bug-no-reprobe (the draft's probe trigger) missed cycles, and the
#      coordinator without its confirmation phantom aborts; so the checks
#      of point 1 can fail.
# Usage: quick.sh path/to/ordo_probesim
set -euo pipefail
SIM=${1:?usage: $0 path/to/ordo_probesim}
MULT=${ORDO_TEST_TIMEOUT_MULT:-1}
case "$MULT" in '' | *[!0-9]*) MULT=1 ;; esac
TMO=$((20 * MULT))
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# sim NAME ARGS... -- one bounded run, its output in $TMP/NAME.
sim() {
  local name=$1
  shift
  timeout "$TMO" "$SIM" "$@" >"$TMP/$name" ||
    fail "ordo_probesim $* exited $?"
}
get() {
  awk -v k="$2" '$1 == k { print $2; found = 1 } END { exit !found }' \
    "$TMP/$1" || fail "$1: no '$2' in the output"
}
expect() { # NAME FIELD OP VALUE
  local v
  v=$(get "$1" "$2")
  [ "$v" "$3" "$4" ] || fail "$1: $2 is $v, expected $3 $4"
}

# A small scenario: 100 shards, cycles of 6 over 3 to 6 shards, a breaker on
# half of them; and cycles of 2 (some keys on one shard: local cycles).
small=(--shards 100 --cycles 1500 --len 6 --break-frac 0.5 --rate 3)
pairs=(--shards 3 --cycles 1500 --len 2 --span 3 --break-frac 0.5)
sim probes "${small[@]}"
sim probes_local --shards 4 --cycles 500 --len 4 --span 1
sim probes_pairs "${pairs[@]}"
sim central "${small[@]}" --algo central --central-confirm
sim central_pairs "${pairs[@]}" --algo central --central-confirm
for r in probes probes_local probes_pairs central central_pairs; do
  expect $r phantom_aborts = 0
  expect $r missed = 0
  expect $r multi_victim_cycles = 0
  closed=$(get $r closed)
  resolved=$(($(get $r detected) + $(get $r broken_by_timeout)))
  [ "$resolved" -ge "$closed" ] ||
    fail "$r: $closed cycles closed, only $resolved resolved"
  expect $r detected -gt 0
done
# The ones that matter were found and cost what they should.
expect probes msg_probe -gt 0
expect probes_local local_detected = "$(get probes_local closed)"
expect probes_local messages = 0
expect central polls -gt 0
expect central msg_poll = "$(($(get central polls) * 100))"

# Determinism: the same seed, the same bytes; --json too.
sim again "${small[@]}"
cmp -s "$TMP/probes" "$TMP/again" || fail "two runs with one seed differ"
sim json1 "${small[@]}" --algo central --json
sim json2 "${small[@]}" --algo central --json
cmp -s "$TMP/json1" "$TMP/json2" || fail "two --json runs with one seed differ"
sim other "${small[@]}" --seed 2
! cmp -s "$TMP/probes" "$TMP/other" || fail "seeds 1 and 2 gave one output"

# The checks can fail: each step's removal shows.
sim no_confirm "${small[@]}" --bug-no-confirm
expect no_confirm phantom_aborts -gt 0
sim no_pins "${small[@]}" --bug-no-pins
expect no_pins phantom_aborts -gt 0
sim no_reprobe "${small[@]}" --bug-no-reprobe
expect no_reprobe missed -gt 0
sim central_bare "${small[@]}" --algo central
expect central_bare phantom_aborts -gt 0
# --bug-no-versions breaks no safety (the confirmation stands in for the
# versions), but it must change what the probes drop.
sim no_versions "${small[@]}" --bug-no-versions
expect no_versions phantom_aborts = 0
[ "$(get no_versions probes_stale)" -lt "$(get probes probes_stale)" ] ||
  fail "--bug-no-versions dropped as many stale probes as the protocol"
echo "sim_quick: OK"
