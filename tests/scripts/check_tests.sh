#!/usr/bin/env bash
# check_tests.sh SOURCE_DIR -- the suite's own rules that a grep can check
# (tests/common/testutil.h explains them):
#   1. no test calls cmocka's skip() bare: a skip goes through TU_SKIP, which
#      says why and makes the test exit 77, so ctest counts it as skipped;
#   2. every cmocka suite's main returns through tu_exit(), which turns a
#      skip into that exit status (cmocka's own returns 0 for a skip).
set -euo pipefail
src=${1:?usage: $0 SOURCE_DIR}
cd "$src"
bad=0
files=$(grep -rlE --include='*.c' --include='*.h' --include='*.cc' \
  'cmocka|skip\(\)' tests examples bench 2>/dev/null || true)
for f in $files; do
  [ "$f" = tests/common/testutil.h ] && continue
  if grep -nE '(^|[^_A-Za-z])skip\(\)' "$f" >/dev/null; then
    echo "$f: calls skip() bare; use TU_SKIP(\"why\") (tests/common/testutil.h):"
    grep -nE '(^|[^_A-Za-z])skip\(\)' "$f" | sed 's/^/  /'
    bad=1
  fi
  if grep -q 'cmocka_run_group_tests' "$f" &&
    ! grep -qE 'return tu_exit\(cmocka_run_group_tests' "$f"; then
    echo "$f: main must end 'return tu_exit(cmocka_run_group_tests(...))'"
    bad=1
  fi
done
[ "$bad" -eq 0 ] || exit 1
echo "test rules hold in $(printf '%s\n' $files | wc -l) files"
