#!/usr/bin/env bash
# Installs the Debian packages the build and tests need (as root), or prints the apt-get line.
set -u
# OpenSSL: TLS for ncclSetEncryption (loaded at run time; the headers let test_tls check constants).
# hwloc: topology detection and weftrun --bind (loaded at run time; the header gives its types).
# Open MPI: the MPI build of the perf binaries (make MPI=1) and tests/launcher/test_mpirun.sh.
PKGS="build-essential make git iproute2 procps clang-format clang libclang-rt-14-dev openmpi-bin libopenmpi-dev libssl3 libssl-dev libhwloc-dev libhwloc15 libibverbs-dev"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
  echo "deps: installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null && apt-get install -y -qq $missing >/dev/null || {
    echo "deps: apt-get install$missing failed" >&2
    exit 1
  }
else
  echo "deps: missing packages; run: sudo apt-get install -y$missing" >&2
  exit 1
fi
