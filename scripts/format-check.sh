#!/usr/bin/env bash
# format-check.sh -- fails when a tracked C file differs from .clang-format.
set -euo pipefail
cd "$(dirname "$0")/.."
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files=$(git ls-files '*.c' '*.h' '*.cc')
else
  # Not a git checkout (an unpacked tarball): look at the source folders.
  files=$(find src include tests bench examples \( -name '*.[ch]' -o -name '*.cc' \) \
            2>/dev/null || true)
fi
bad=0
for f in $files; do
  [ -f "$f" ] || continue
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "format-check: $f is not clang-formatted (run 'make format')" >&2
    bad=1
  fi
done
[ $bad -eq 0 ] && echo "format-check: all files follow .clang-format"
exit $bad
