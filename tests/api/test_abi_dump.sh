#!/usr/bin/env bash
# The ABI dump built with NVIDIA's 2.32.3 nccl.h and the one built with Weft's must print the same facts.
set -u
cd "$(dirname "$0")/../.."
dir=${BUILD:-build}/tests/api
if [ ! -x "$dir/abi_dump_nvidia" ]; then
  echo "SKIP: no ABI dump built with NVIDIA's 2.32.3 nccl.h (reference headers not fetched; offline?)"
  exit 77
fi
[ -x "$dir/abi_dump_weft" ] || { echo "FAILED: $dir/abi_dump_weft is missing; run make tests"; exit 1; }
nv=$("$dir/abi_dump_nvidia") || { echo "FAILED: abi_dump_nvidia did not run"; exit 1; }
weft=$("$dir/abi_dump_weft") || { echo "FAILED: abi_dump_weft did not run"; exit 1; }
# The first line names the header each dump was built with; a mix-up would make the test vacuous.
[ "$(head -n1 <<<"$nv")" = "/* header: other */" ] || { echo "FAILED: NVIDIA dump was built with Weft's header"; exit 1; }
[ "$(head -n1 <<<"$weft")" = "/* header: weft */" ] || { echo "FAILED: Weft dump was not built with Weft's header"; exit 1; }
n=$(grep -c '^ABI_' <<<"$nv")
if [ "$n" -lt 150 ]; then echo "FAILED: only $n facts in the NVIDIA dump"; exit 1; fi
if ! diff <(tail -n +2 <<<"$nv") <(tail -n +2 <<<"$weft") >/dev/null; then
  echo "FAILED: ABI facts differ (< NVIDIA's nccl.h, > Weft's nccl.h):"
  diff <(tail -n +2 <<<"$nv") <(tail -n +2 <<<"$weft")
  exit 1
fi
echo "test_abi_dump: $n ABI facts identical"
