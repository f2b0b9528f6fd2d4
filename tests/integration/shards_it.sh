#!/usr/bin/env bash
# shards_it.sh ORDOD TEST_SHARDS_IT -- tests/integration/test_shards_it.c
# against 3 ordod servers (shards_fixture.sh: 1 s leases), with ORDO_ORDOD
# naming the binary for the 4th server the test starts and kills itself.
set -euo pipefail
ORDOD=${1:?usage: $0 ORDOD TEST_SHARDS_IT}
export ORDO_ORDOD=$ORDOD
ORDOD_FIXTURE_TIMEOUT=200 exec bash "$(dirname "$0")/shards_fixture.sh" \
  "$ORDOD" 3 -- "${2:?usage: $0 ORDOD TEST_SHARDS_IT}"
