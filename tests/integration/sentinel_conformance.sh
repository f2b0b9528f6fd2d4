#!/usr/bin/env bash
# sentinel_conformance.sh CONFORMANCE -- the backend conformance suite
# (tests/conformance) on redis-sentinel://, against one primary, one
# replica and three sentinels started by sentinel_fixture.sh, with a 1 s
# lease. It must pass, with the cases redis:// skips skipped.
set -euo pipefail
. "$(dirname "$0")/sentinel_fixture.sh"
CONF=${1:?usage: $0 CONFORMANCE}
sentinel_start
set +e
timeout 200 "$CONF" "$SENTINEL_URL?lease_ms=1000"
rc=$?
set -e
[ "$rc" -eq 0 ] || echo "FAIL: conformance on $SENTINEL_URL exited $rc" >&2
exit "$rc"
