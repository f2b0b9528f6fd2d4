#!/usr/bin/env bash
# pg_fence_crash.sh TEST_POSTGRES -- issue 18, item 9: fencing tokens never
# repeat across a crash of the server, whatever synchronous_commit says.
#
# The cluster runs with synchronous_commit off (as pg_fixture.sh's always
# does), and with nothing else that would flush the WAL meanwhile: the WAL
# writer every 10 s, no background writer, no autovacuum, a checkpoint an
# hour apart. For each scope, `TEST_POSTGRES draw URL 5` takes key
# crash:1 five times and prints the tokens; after a CHECKPOINT (so that the
# next nextval writes the sequence's WAL record), `draw URL 0 hold` takes it
# once more and keeps it; the server is then killed at once (pg_crash:
# kill -9 of every process) while that key is held (in scope=xact, its
# transaction not committed),
# started again (crash recovery from the WAL that reached the OS), and five
# more grants must all get tokens greater than every token before the
# crash. A token drawn by a commit that
# did not wait for its WAL is lost with the server's memory, and comes out
# again after the restart. About 5 s.
set -euo pipefail
. "$(dirname "$0")/pg_fixture.sh"
BIN=${1:?usage: $0 TEST_POSTGRES}
pg_start -c wal_writer_delay=10s -c bgwriter_lru_maxpages=0 \
  -c autovacuum=off -c checkpoint_timeout=1h
pg_createdb ordo_it
URL=$(pg_url ordo_it)
[ "$(pg_psql ordo_it -At -c 'SHOW synchronous_commit')" = off ] || {
  echo "FAIL: the cluster's synchronous_commit is not off" >&2
  exit 1
}
work=$(mktemp -d "${TMPDIR:-/tmp}/ordo-fence.XXXXXX")
trap 'rm -rf "$work"; pg_stop_all' EXIT
fails=0
for scope in session xact; do
  # Five grants let go; a checkpoint, after which the next nextval is the
  # one that writes the sequence's WAL record; and a sixth grant, held when
  # the server dies (its client waits on a FIFO this shell holds open), so
  # that in scope=xact its token's record was written by a transaction
  # that never committed. The wait for the sixth line is bounded.
  timeout "$((30 * MULT))" "$BIN" draw "$URL?scope=$scope" 5 \
    >"$work/before.$scope"
  pg_psql ordo_it -c CHECKPOINT
  mkfifo "$work/in.$scope"
  "$BIN" draw "$URL?scope=$scope" 0 hold <"$work/in.$scope" \
    >>"$work/before.$scope" &
  drawer=$!
  exec 3>"$work/in.$scope"
  end=$((SECONDS + 30 * MULT))
  while [ "$(wc -l <"$work/before.$scope")" -lt 6 ]; do
    if [ "$SECONDS" -ge "$end" ] || ! kill -0 "$drawer" 2>/dev/null; then
      echo "FAIL: scope=$scope: the drawer did not print 6 tokens" \
        "within $((30 * MULT)) s" >&2
      exit 1
    fi
    sleep 0.02
  done
  pg_crash
  exec 3>&-
  wait "$drawer" || true # its held key went with the server
  pg_restart
  before=$(cat "$work/before.$scope")
  after=$(timeout "$((30 * MULT))" "$BIN" draw "$URL?scope=$scope" 5)
  max_before=$(sort -n <<<"$before" | tail -n 1)
  min_after=$(sort -n <<<"$after" | head -n 1)
  # shellcheck disable=SC2086 # the tokens, one a word, on one line
  echo "scope=$scope: before the crash" $before "(the last one held), after" \
    $after
  # Every line a token: 6 before, 5 after.
  if [ "$(grep -cxE '[0-9]+' <<<"$before")" -ne 6 ] ||
    [ "$(grep -cxE '[0-9]+' <<<"$after")" -ne 5 ] ||
    [ "$(wc -l <<<"$before")" -ne 6 ] || [ "$(wc -l <<<"$after")" -ne 5 ]; then
    echo "FAIL: scope=$scope: not 6 tokens before the crash and 5 after" >&2
    fails=$((fails + 1))
  elif [ "$min_after" -le "$max_before" ]; then
    echo "FAIL: scope=$scope: token $min_after after the crash is not above" \
      "$max_before, given before it" >&2
    fails=$((fails + 1))
  fi
done
if [ "$fails" -ne 0 ]; then
  echo "the server's log:" >&2
  tail -n 20 "$PG_DIR/log" >&2
  exit 1
fi
echo "PASS: tokens never went back across a kill -9"
