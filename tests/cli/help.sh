#!/usr/bin/env bash
# help.sh -- `ordo --help`, `ordo bank --help` and `ordo graph --help` exit
# 0 and describe every flag; `ordo --version` prints the version.
. "$(dirname "$0")/lib.sh"

FLAGS="--backend --accounts --transfers --workers --lock-timeout --attempts
--naive --detect --deadlock-timeout --compare --graph --watchdog --json --help
immediate delayed off"
for args in "--help" "-h" "bank --help" "bank -h"; do
  # shellcheck disable=SC2086
  run $args
  expect_rc 0 "$args"
  for f in $FLAGS; do
    grep -qe "$f" "$OUT" || fail "ordo $args does not mention $f"
  done
  grep -qF "mem://" "$OUT" || fail "ordo $args does not show the URL form"
  # The TLS forms too (ordod://?tls=1, rediss://), since the URL list is
  # where a user finds them.
  for form in "?tls=1" "rediss://"; do
    grep -qF "$form" "$OUT" || fail "ordo $args does not show $form"
  done
done
GRAPH_FLAGS="--backend --format --naive-demo --help dot json"
for args in "--help" "graph --help" "graph -h"; do
  # shellcheck disable=SC2086
  run $args
  expect_rc 0 "$args"
  for f in $GRAPH_FLAGS; do
    grep -qe "$f" "$OUT" || fail "ordo $args does not mention $f"
  done
  grep -qF "ordo graph [--backend URL] [--format dot|json] [--naive-demo]" \
    "$OUT" || fail "ordo $args does not show the graph synopsis"
done
run --help
grep -q -e "--version" "$OUT" || fail "ordo --help does not mention --version"
grep -q "^  bank " "$OUT" || fail "ordo --help does not list the bank command"
grep -q "^  graph " "$OUT" || fail "ordo --help does not list the graph command"

run --version
expect_rc 0 --version
grep -q '^ordo [0-9]' "$OUT" || fail "ordo --version prints no version"
echo "ok: help and version"
