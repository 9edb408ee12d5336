#!/usr/bin/env bash
# The device API's host-side structs (nccl_device/host.h: communicator properties, requirements)
# must have NVIDIA 2.32.3's layout and initializers: the same dump built with Weft's headers and
# with NVIDIA's must print the same lines.
set -u
cd "$(dirname "$0")/../.."
build=${BUILD:-build}
ref=$build/ref/nccl-2.32.3
command -v g++ >/dev/null || { echo "SKIP: g++ is not installed"; exit 77; }
[ -e "$ref/stamp" ] || { echo "SKIP: no NCCL 2.32.3 reference headers in $ref (scripts/fetch_nccl_ref.sh; offline?)"; exit 77; }
[ -e "$build/include/nccl_device/host.h" ] || { echo "FAILED: $build/include/nccl_device/host.h is missing; run make"; exit 1; }
cuda_inc=
for h in "${CUDA_HOME:-}" /usr/local/cuda; do [ -n "$h" ] && [ -e "$h/include/cuda_runtime.h" ] && { cuda_inc=$h/include; break; }; done
[ -n "$cuda_inc" ] || { echo "SKIP: NVIDIA's nccl.h needs cuda_runtime.h (no CUDA toolkit)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=tests/api/device_abi_dump.cpp
g++ -std=c++17 -I"$build/include" -o "$tmp/weft" "$src" || { echo "FAILED: does not compile with Weft's headers"; exit 1; }
g++ -std=c++17 -DNCCL_OS_LINUX -I"$ref/include" -I"$cuda_inc" -o "$tmp/nvidia" "$src" ||
  { echo "FAILED: does not compile with NVIDIA's headers"; exit 1; }
"$tmp/weft" >"$tmp/weft.txt" && "$tmp/nvidia" >"$tmp/nvidia.txt" || { echo "FAILED: a dump did not run"; exit 1; }
n=$(wc -l <"$tmp/nvidia.txt")
[ "$n" -ge 90 ] || { echo "FAILED: only $n facts"; exit 1; }
if ! diff "$tmp/nvidia.txt" "$tmp/weft.txt"; then
  echo "FAILED: device API host-side facts differ (< NVIDIA's, > Weft's)"
  exit 1
fi
echo "test_device_abi: $n facts identical"
