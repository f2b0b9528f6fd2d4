#!/usr/bin/env bash
# bootstrap.sh -- installs the Debian packages ordo needs, and nothing else.
#
# It asks dpkg which packages are missing; when none is, it does nothing (no
# network, no apt-get update). Otherwise it runs apt-get update once and
# installs just the missing ones. Run as root, or with sudo available.
set -euo pipefail

# Why each package is here:
#   build-essential, cmake, pkg-config  the C toolchain and the build
#   libcmocka-dev                       unit tests (run by ctest)
#   clang, libclang-rt-14-dev           ThreadSanitizer and ASan+UBSan builds
#   clang-format                        the style check in `make test`
#   g++                                 the C++ header test and the bench peers
#   python3                             the CLI tests read `ordo bank --json` with it
#   graphviz                            `dot` draws the wait-for graphs ordo writes
#   libuv1-dev                          ordod's event loop
#   libhiredis-dev                      the ordod:// and redis:// clients (Redis protocol)
#   redis-tools, python3-redis          peers' clients that drive ordod in the tests
#   tmux                                shows redis-cli -3 its interactive mode, for the RESP3 test
#   redis-server                        the redis:// backends' real server, and the bench peer
#   libpq-dev                           the postgres:// backend and the ledger's client
#   postgresql, postgresql-contrib      the real server the tests start (initdb, pg_ctl),
#                                       psql, and pgbench (the bench peer)
#   libdb5.3-dev                        Berkeley DB's lock subsystem, a bench peer
#   gnuplot-nox                         the bench's PNG plots
#   valgrind                            callgrind's instruction counts in the bench
#   spin                                model-checks the engine's protocols (src/core/*.pml)
#   iproute2, procps                    the fault harness: ip netns and veth pairs for the
#                                       partition, ps for the processes a pause stops
#   gcovr                               `make coverage`'s report of gcov's counts, per folder
#   libmicrohttpd-dev                   ordod's metrics port and status page (HTTP, in its loop)
#   libgraphviz-dev                     libgvc: the status page's wait-for graph as SVG, in process
#   chromium                            loads the status page headless in the metrics test
#   libssl-dev                          OpenSSL: SHA-256 of ordod's ACL passwords, and TLS
#                                       (ordod's --tls-port, the ordod://?tls=1 and rediss://
#                                       clients, since hiredis 0.14 has none)
#   openssl                             openssl(1) makes the TLS tests' certificates
#   man-db, groff-base                  build_install renders the man pages (man -l, groff -ww)
#                                       and fails on any warning
#   systemd                             systemd-analyze verify of contrib/systemd/ordod.service
#   libcurl4-openssl-dev, libjson-c-dev the etcd:// backend's HTTP and JSON, to etcd's gateway
#   etcd-server, etcd-client            the real etcd members the tests start, and etcdctl
#   prometheus                          promtool check rules of contrib/prometheus/ordo-alerts.yml;
#                                       the metrics test's real scraper, and promtool check metrics
PACKAGES=(build-essential g++ cmake pkg-config libcmocka-dev clang python3
          libclang-rt-14-dev clang-format graphviz libuv1-dev libhiredis-dev
          redis-tools redis-server python3-redis tmux libpq-dev postgresql
          postgresql-contrib libdb5.3-dev gnuplot-nox valgrind spin iproute2
          procps gcovr man-db groff-base systemd prometheus libssl-dev openssl
          libmicrohttpd-dev libgraphviz-dev chromium libcurl4-openssl-dev
          libjson-c-dev etcd-server etcd-client)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "bootstrap: installing missing Debian packages: ${missing[*]}" >&2
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    echo "bootstrap: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
# etcd-server's postinst may start a system etcd on 127.0.0.1:2379 where
# systemd runs: the tests start their own members on free ports, so that
# service is stopped and kept from starting at boot (nothing else needs it).
if command -v systemctl >/dev/null 2>&1 &&
  systemctl is-active --quiet etcd 2>/dev/null; then
  "${SUDO[@]}" systemctl disable --now etcd
fi
