#!/usr/bin/env bash
# check_symbols.sh LIB -- fails if LIB exports a defined symbol that does
# not start with ordo_ (everything else must be hidden).
set -euo pipefail
lib=$1
syms=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TtDdBbRrVvWw]$/ {print $3}')
[ -n "$syms" ] || { echo "no symbols found in $lib"; exit 1; }
bad=$(printf '%s\n' "$syms" | grep -v '^ordo_' || true)
n=$(printf '%s\n' "$syms" | grep -c '^ordo_')
if [ -n "$bad" ]; then
  echo "symbols exported without the ordo_ prefix:"; echo "$bad"; exit 1
fi
if grep -q '^ordo__' <<< "$syms"; then
  echo "internal ordo__ symbols are exported:"
  printf '%s\n' "$syms" | grep '^ordo__'; exit 1
fi
echo "$n exported symbols, all ordo_"
