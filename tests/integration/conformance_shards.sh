#!/usr/bin/env bash
# conformance_shards.sh ORDOD CONFORMANCE -- the backend conformance suite
# (tests/conformance) on a sharded ordod:// place of 3 servers
# (shards_fixture.sh, each with --starvation-us 2 s, as conformance_ordod.sh
# gives its one). The suite pins the place's capabilities: ordod's, less
# ORDO_CAP_WAIT_HOLDS_NOTHING (a lock_all waiting on one shard holds the
# groups it took on the shards ranked below). Bounded by 200 s times
# ORDO_TEST_TIMEOUT_MULT.
set -euo pipefail
here=$(dirname "$0")
if [ -z "${ORDO_SHARD_URL:-}" ]; then
  ORDOD_FIXTURE_TIMEOUT=200 exec bash "$here/shards_fixture.sh" \
    "${1:?usage: $0 ORDOD CONFORMANCE}" 3 --starvation-us 2000000 -- \
    bash "$0" "$@"
fi
exec "${2:?usage: $0 ORDOD CONFORMANCE}" "$ORDO_SHARD_URL"
