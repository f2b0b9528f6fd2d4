#!/usr/bin/env bash
# check_symbols.sh LIB HEADER -- the shared library exports exactly the
# functions that HEADER (include/ordo.h) declares ORDO_EXTERN: every other
# symbol is hidden (so nothing internal leaks, ordo__ names above all), and
# every declared function is really there (so a program that links against
# the header finds each one). Prints both lists' difference on failure.
set -euo pipefail
lib=${1:?usage: $0 LIB HEADER}
header=${2:?usage: $0 LIB HEADER}
syms=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TtDdBbRrVvWw]$/ {print $3}' |
  sort -u)
[ -n "$syms" ] || { echo "no symbols found in $lib"; exit 1; }
# The declared names: the first ordo_ identifier followed by '(' after each
# ORDO_EXTERN, comments and the macro's own definition left out.
declared=$(python3 - "$header" <<'PY'
import re, sys
s = open(sys.argv[1]).read()
s = re.sub(r"/\*.*?\*/", "", s, flags=re.S)
s = re.sub(r"^\s*#.*$", "", s, flags=re.M)
names = re.findall(r"ORDO_EXTERN\b[^;{]*?\b(ordo_\w+)\s*\(", s)
print("\n".join(sorted(set(names))))
PY
)
[ -n "$declared" ] || { echo "no ORDO_EXTERN function found in $header"; exit 1; }
extra=$(comm -23 <(printf '%s\n' "$syms") <(printf '%s\n' "$declared"))
missing=$(comm -13 <(printf '%s\n' "$syms") <(printf '%s\n' "$declared"))
bad=0
if [ -n "$extra" ]; then
  echo "exported by $lib but not declared in $header:"
  printf '  %s\n' $extra
  bad=1
fi
if [ -n "$missing" ]; then
  echo "declared in $header but not exported by $lib:"
  printf '  %s\n' $missing
  bad=1
fi
[ "$bad" -eq 0 ] || exit 1
echo "$(printf '%s\n' "$syms" | wc -l) exported symbols, exactly the header's"
