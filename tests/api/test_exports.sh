#!/usr/bin/env bash
# Weft's libnccl.so.2 must export exactly the dynamic symbols NVIDIA's 2.28.9 libnccl.so.2 exports.
set -u
cd "$(dirname "$0")/../.."
ours=${BUILD:-build}/lib/libnccl.so.2
command -v nm >/dev/null || { echo "SKIP: nm (binutils) is not installed"; exit 77; }

# Same search as the Makefile: nvcc on PATH, CUDA_HOME, then /usr/local/cuda.
homes=()
if nvcc=$(command -v nvcc 2>/dev/null); then homes+=("$(dirname "$(dirname "$nvcc")")"); fi
[ -n "${CUDA_HOME:-}" ] && homes+=("$CUDA_HOME")
homes+=(/usr/local/cuda)
theirs=
for h in "${homes[@]}"; do
  for d in lib64 lib; do
    if [ -e "$h/$d/libnccl.so.2" ]; then theirs=$h/$d/libnccl.so.2; break 2; fi
  done
done
if [ -z "$theirs" ]; then echo "SKIP: NVIDIA's libnccl.so.2 not found in the CUDA toolkit"; exit 77; fi
[ -e "$ours" ] || { echo "FAILED: $ours is missing; run make"; exit 1; }

names() { nm -D --defined-only "$1" | awk 'NF >= 3 {sub(/@.*/, "", $3); print $3}' | sort -u; }
want=$(names "$theirs")
got=$(names "$ours")
nwant=$(grep -c . <<<"$want")
if [ "$nwant" -lt 50 ]; then echo "FAILED: only $nwant symbols read from $theirs"; exit 1; fi
version=$(strings "$theirs" 2>/dev/null | grep -m1 -o 'NCCL version 2\.[0-9]*\.[0-9]*' || true)
echo "reference: $theirs ($nwant symbols${version:+, $version})"
if [ "$want" != "$got" ]; then
  echo "FAILED: exported names differ (< NVIDIA's, > Weft's):"
  diff <(echo "$want") <(echo "$got")
  exit 1
fi
echo "test_exports: the $nwant exported names are identical"
