#!/usr/bin/env bash
# tls_fixture.sh -- throw-away TLS files for a test, made with openssl(1):
# a CA, a server certificate for 127.0.0.1, ::1 and localhost (as
# subjectAltNames) and a client certificate, both signed by the CA, and a
# second CA that signed neither (a client that trusts only it must refuse
# the server). Two ways to use it:
#
#   tls_fixture.sh DIR
#       writes ca.crt, ca.key, server.crt, server.key, client.crt,
#       client.key, other-ca.crt and other-ca.key into DIR (which must
#       exist), then exits 0; any openssl failure exits non-zero and says
#       which step failed.
#   . tls_fixture.sh; tls_fixture_make DIR
#       the same from a sourcing script.
#
# Keys are EC P-256 (fast to make), certificates valid for 1 day; nothing
# is written outside DIR.
set -o pipefail

tls_fixture_make() {
  local d=$1 step
  [ -d "$d" ] || { echo "tls_fixture: no folder $d" >&2; return 1; }
  # step NAME CMD...: runs one openssl step quietly; on failure prints its
  # output and the step's name.
  step() {
    local name=$1 out
    shift
    if ! out=$("$@" 2>&1); then
      echo "tls_fixture: FAIL: $name: $out" >&2
      return 1
    fi
  }
  local ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  step "the CA" openssl req -x509 "${ec[@]}" -days 1 -subj "/CN=ordo test CA" \
    -keyout "$d/ca.key" -out "$d/ca.crt" || return 1
  step "the other CA" openssl req -x509 "${ec[@]}" -days 1 \
    -subj "/CN=ordo other CA" -keyout "$d/other-ca.key" \
    -out "$d/other-ca.crt" || return 1
  printf 'subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\n' >"$d/server.ext"
  printf 'extendedKeyUsage=clientAuth\n' >"$d/client.ext"
  local who
  for who in server client; do
    step "the $who request" openssl req -new "${ec[@]}" \
      -subj "/CN=ordo test $who" -keyout "$d/$who.key" \
      -out "$d/$who.csr" || return 1
    step "the $who certificate" openssl x509 -req -in "$d/$who.csr" \
      -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 1 \
      -extfile "$d/$who.ext" -out "$d/$who.crt" || return 1
  done
  rm -f "$d"/*.csr "$d"/*.ext "$d"/*.srl
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  [ $# -eq 1 ] || { echo "usage: tls_fixture.sh DIR" >&2; exit 2; }
  tls_fixture_make "$1"
fi
