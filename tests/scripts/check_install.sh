#!/usr/bin/env bash
# check_install.sh BUILD_DIR CC -- installs the build into a temporary
# prefix and builds and runs a small program with pkg-config's flags; checks
# that the manual pages are installed and render without a warning.
set -euo pipefail
build=$1
cc=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
test -f "$prefix/include/ordo.h"
# The manual pages: installed where man looks, and rendered by groff with
# every warning on (-ww) and by man itself (--warnings), neither of which
# fails on a warning: so their stderr must be empty.
for page in man1/ordo.1 man8/ordod.8 man3/libordo.3; do
  f=$prefix/share/man/$page
  [ -f "$f" ] || { echo "$page not installed under $prefix/share/man"; exit 1; }
  w=$(groff -man -Tutf8 -ww -z "$f" 2>&1)
  [ -z "$w" ] || { echo "groff warns on $page: $w"; exit 1; }
  w=$(MANWIDTH=80 man --warnings -E UTF-8 -l "$f" 2>&1 >/dev/null)
  [ -z "$w" ] || { echo "man warns on $page: $w"; exit 1; }
done
# man finds them by name in the prefix's MANPATH.
MANPATH=$prefix/share/man man -w ordo ordod libordo >/dev/null
pc=$(find "$prefix" -name ordo.pc | head -n 1)
[ -n "$pc" ] || { echo "ordo.pc not installed"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
cat > "$prefix/hello.c" <<'C'
#include <ordo.h>
#include <stdio.h>
int main(void) {
  ordo_t *o;
  ordo_txn_t *t;
  if (ordo_open(&o, "mem://", NULL) || ordo_txn_begin(o, &t, NULL))
    return 1;
  int rc = ordo_lock(t, "k", 1, ORDO_MODE_X, 0);
  ordo_txn_end(t);
  ordo_close(o);
  printf("installed libordo %s: lock -> %s\n", ordo_version(), ordo_err_name(rc));
  return rc != 0;
}
C
# Link the static library explicitly, as an embedding program would, with
# what pkg-config --static says it needs (hiredis, threads, libm).
"$cc" -o "$prefix/hello" "$prefix/hello.c" $(pkg-config --cflags ordo) \
  $(pkg-config --variable=libdir ordo)/libordo.a \
  $(pkg-config --static --libs ordo | sed 's/-lordo\b//') \
  $( [ -n "${ORDO_SAN_FLAGS:-}" ] && echo "$ORDO_SAN_FLAGS")
"$prefix/hello"
# And the shared library through pkg-config's own flags.
"$cc" -o "$prefix/hello_so" "$prefix/hello.c" $(pkg-config --cflags --libs ordo) \
  $( [ -n "${ORDO_SAN_FLAGS:-}" ] && echo "$ORDO_SAN_FLAGS")
LD_LIBRARY_PATH=$(pkg-config --variable=libdir ordo) "$prefix/hello_so"
