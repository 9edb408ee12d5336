#!/usr/bin/env bash
# The main demo job: an nccl-tests style all-reduce table over 4 ranks on this machine when the
# perf binaries exist, otherwise the library's self-description.
set -eu
cd "$(dirname "$0")/.."
if [ -x build/bin/all_reduce_perf ] && [ -x build/bin/weftrun ]; then
  exec build/bin/weftrun -n 4 build/bin/all_reduce_perf -b 8 -e 64M -f 2 -c 1
fi
exec build/bin/weft-info
