#!/usr/bin/env bash
# quick.sh -- sim_quick: small scenarios of ordo_probesim (sim/README.md),
# both detectors, asserting what the simulator exists to show:
#   1. 0 phantom aborts, 0 missed cycles, no cycle with two victims, no two
#      holders of a key, and every closed cycle resolved (by its victim, by
#      a breaker, or by a fault), with every protocol step in place: with
#      no fault, and with every fault on at once (link breaks, delay
#      spikes, shard freezes, client disconnects, lease expiries, timeouts,
#      txns on two cycles), each fault having happened;
#   2. the same seed gives the same output byte for byte, faults included,
#      and another seed another output;
#   3. each --bug-* option that disables a safety step breaks what it
#      guards, on a scenario where the protocol shows nothing broken:
#      --bug-no-confirm and --bug-no-pins show phantom aborts,
#      --bug-no-reprobe (the draft's probe trigger) missed cycles, the
#      coordinator without its confirmation phantom aborts;
#      --bug-release-first (defect 1) two holders, --bug-one-pin (defect 2)
#      phantom aborts, --bug-told-on-drop (defect 3) missed cycles,
#      --bug-no-defer and --bug-no-giveup phantom aborts; so the checks of
#      point 1 can fail.
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
# sim NAME ARGS... -- one bounded run, its output in $TMP/NAME and its
# `name value` lines in OUT[NAME.name] (read once, without a fork per look).
declare -A OUT
sim() {
  local name=$1 k v
  shift
  timeout "$TMO" "$SIM" "$@" >"$TMP/$name" ||
    fail "ordo_probesim $* exited $?"
  while read -r k v; do
    OUT[$name.$k]=$v
  done <"$TMP/$name"
}
get() {
  [ -n "${OUT[$1.$2]+set}" ] || fail "$1: no '$2' in the output"
  echo "${OUT[$1.$2]}"
}
expect() { # NAME FIELD OP VALUE
  [ -n "${OUT[$1.$2]+set}" ] || fail "$1: no '$2' in the output"
  local v=${OUT[$1.$2]}
  [ "$v" "$3" "$4" ] || fail "$1: $2 is $v, expected $3 $4"
}
# correct NAME -- what every run of the whole protocol must show.
correct() {
  expect "$1" phantom_aborts = 0
  expect "$1" missed = 0
  expect "$1" multi_victim_cycles = 0
  expect "$1" two_holders = 0
  local closed=${OUT[$1.closed]} resolved
  resolved=$((OUT[$1.detected] + OUT[$1.broken_by_timeout] +
    OUT[$1.broken_by_fault]))
  [ "$resolved" -ge "$closed" ] ||
    fail "$1: $closed cycles closed, only $resolved resolved"
  expect "$1" detected -gt 0
}

# A small scenario: 100 shards, cycles of 6 over 3 to 6 shards, a breaker on
# half of them; and cycles of 2 (some keys on one shard: local cycles).
small=(--shards 100 --cycles 1500 --len 6 --break-frac 0.5 --rate 3)
pairs=(--shards 3 --cycles 1500 --len 2 --span 3 --break-frac 0.5)
# Every fault at once, on 100 shards with cycles of 4 over 3 of them: a
# link breaks under 0.3% of the messages, 1% are delayed 10 to 30 ms, on a
# fifth of the cycles a shard freezes for up to 200 ms, a client goes away,
# a session reaches its lease; half the cycles have a breaker, and a third
# are two cycles sharing a member.
faults=(--shards 100 --cycles 1500 --len 4 --span 3 --rate 3 --break-frac 0.5
  --link-break 0.003 --spike 0.01 --freeze 0.2 --freeze-ms 100
  --disconnect 0.2 --lease 0.2 --overlap 0.3)
sim probes "${small[@]}"
sim probes_local --shards 4 --cycles 500 --len 4 --span 1
sim probes_pairs "${pairs[@]}"
sim central "${small[@]}" --algo central --central-confirm
sim central_pairs "${pairs[@]}" --algo central --central-confirm
sim faults "${faults[@]}"
sim faults_pairs "${pairs[@]}" --link-break 0.0005 --freeze 0.2 \
  --disconnect 0.2 --lease 0.2 --overlap 0.5
sim overlap_local --shards 4 --cycles 500 --len 3 --span 1 --overlap 0.5 \
  --lease 0.2
for r in probes probes_local probes_pairs central central_pairs faults \
  faults_pairs overlap_local; do
  correct $r
done
# The ones that matter were found and cost what they should.
expect probes msg_probe -gt 0
expect probes_local local_detected = "$(get probes_local closed)"
expect probes_local messages = 0
expect central polls -gt 0
expect central msg_poll = "$(($(get central polls) * 100))"
# Every fault happened, and what it makes the protocol do was done.
for f in link_breaks messages_lost delay_spikes freezes disconnects \
  leases_expired sessions_deferred blocked_resent aborts_gave_up; do
  expect faults "$f" -gt 0
done
expect overlap_local local_detected -gt "$(get probes_local closed)"

# Determinism: the same seed, the same bytes; --json too; faults too.
sim again "${small[@]}"
cmp -s "$TMP/probes" "$TMP/again" || fail "two runs with one seed differ"
sim json1 "${small[@]}" --algo central --json
sim json2 "${small[@]}" --algo central --json
cmp -s "$TMP/json1" "$TMP/json2" || fail "two --json runs with one seed differ"
sim faults_again "${faults[@]}"
cmp -s "$TMP/faults" "$TMP/faults_again" ||
  fail "two runs with faults and one seed differ"
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
# The defects of issue 30, each on the faults that show it, beside the
# protocol on the same faults, which shows nothing.
bug() { # NAME FIELD OPTIONS... -- the bug's run shows FIELD, the fix's none
  local name=$1 field=$2
  shift 2
  local args=(--shards 100 --len 4 --rate 3 "$@")
  sim "$name" "${args[@]}"
  expect "$name" "$field" -gt 0
  local fixed=()
  for a in "${args[@]}"; do
    [[ $a == --bug-* ]] || fixed+=("$a")
  done
  sim "${name}_fixed" "${fixed[@]}"
  correct "${name}_fixed"
}
bug release_first two_holders --cycles 1500 --bug-release-first \
  --lease 0.5 --disconnect 0.5
bug one_pin phantom_aborts --cycles 1500 --bug-one-pin --overlap 1 \
  --spike 0.02
bug told_on_drop missed --cycles 1500 --shards 20 --bug-told-on-drop \
  --link-break 0.003
bug no_defer phantom_aborts --cycles 1500 --bug-no-defer --disconnect 0.5 \
  --lease 0.5
bug no_giveup phantom_aborts --cycles 1500 --bug-no-giveup --overlap 1
echo "sim_quick: OK"
