#!/usr/bin/env bash
# Weft's public headers compile as their users compile them: nccl.h alone and nccl_device.h's
# host side as C (gcc), C++ (g++) and CUDA (nvcc), linked to Weft's library so that every
# declaration matches an export with C linkage; nccl_device.h's device side under nvcc with
# every device call nccl-tests 2.19.6 makes; and NVIDIA's own nccl_device.h (2.32.3 from
# NCCL_REF_INCLUDE, and CUDA's 2.28.9) on top of Weft's nccl.h, which must therefore define
# nothing those define. Parts whose compiler or reference headers are missing are skipped (named).
set -u
cd "$(dirname "$0")/../.."
build=${BUILD:-build}
inc=$build/include
ref=${NCCL_REF_INCLUDE:-$build/ref/nccl-2.32.3/include}
src=tests/api
command -v gcc >/dev/null && command -v g++ >/dev/null || { echo "SKIP: gcc and g++ are needed"; exit 77; }
for f in "$inc/nccl.h" "$inc/nccl_device.h" "$build/lib/libnccl.so"; do
  [ -e "$f" ] || { echo "FAILED: $f is missing; run make"; exit 1; }
done
for f in "$inc"/nccl_device/*.h; do # make copies headers but never deletes one that was renamed
  [ -e "include/nccl_device/${f##*/}" ] || { echo "FAILED: $f is left over from an older build; delete it"; exit 1; }
done
cuda=
for h in "${CUDA_HOME:-}" /usr/local/cuda; do [ -n "$h" ] && [ -x "$h/bin/nvcc" ] && { cuda=$h; break; }; done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 skipped=()

check() { # name, command...
  local name=$1
  shift
  if "$@" >"$tmp/log" 2>&1; then
    passed=$((passed + 1))
  else
    echo "FAILED: $name"
    echo "  $*"
    head -n 40 "$tmp/log" | sed 's/^/    /'
    exit 1
  fi
}

warn="-Wall -Wextra -Wno-missing-field-initializers -Werror" # the initializers are partial by design
link="-L$build/lib -lnccl"
check "C: nccl.h alone (C99, pedantic)" gcc -std=c99 -pedantic $warn -I"$inc" -o "$tmp/c" $src/device_headers.c $link
check "C: nccl_device.h (C99, pedantic)" gcc -std=c99 -pedantic $warn -DWITH_DEVICE -I"$inc" -o "$tmp/c" \
  $src/device_headers.c $link
check "C++: nccl.h alone" g++ -x c++ -std=c++11 $warn -I"$inc" -o "$tmp/cxx" $src/device_headers.c -x none $link
check "C++: nccl_device.h (host side; C linkage of its functions)" g++ -x c++ -std=c++11 $warn -DWITH_DEVICE \
  -I"$inc" -o "$tmp/cxx" $src/device_headers.c -x none $link
check "C++: device_headers_use.cu, host side" g++ -x c++ -std=c++17 $warn -I"$inc" -c -o "$tmp/use.o" \
  $src/device_headers_use.cu

if [ -n "$cuda" ]; then
  nvcc="$cuda/bin/nvcc -arch=sm_80 -std=c++17"
  check "CUDA: nccl.h alone" $nvcc -x cu -Werror all-warnings -I"$inc" -c -o "$tmp/cu.o" $src/device_headers.c
  check "CUDA: nccl_device.h with the device calls of nccl-tests" $nvcc -Werror all-warnings \
    -Xcompiler "${warn// /,}" -I"$inc" -c -o "$tmp/use.o" $src/device_headers_use.cu
  # Weft's directory first, then NVIDIA's: <nccl.h> is Weft's, NVIDIA's headers find their own.
  if [ -e "$ref/nccl_device.h" ]; then
    check "CUDA: NVIDIA's 2.32.3 nccl_device.h on Weft's nccl.h ($ref)" $nvcc -DNCCL_OS_LINUX -I"$inc" -I"$ref" \
      "-DNVIDIA_NCCL_DEVICE_H=\"$(realpath "$ref")/nccl_device.h\"" -c -o "$tmp/nv.o" $src/device_headers_nvidia.cu
  else
    skipped+=("NVIDIA's 2.32.3 headers: none in $ref (NCCL_REF_INCLUDE; scripts/fetch_nccl_ref.sh)")
  fi
  if [ -e "$cuda/include/nccl_device.h" ]; then
    check "CUDA: the toolkit's nccl_device.h on Weft's nccl.h" $nvcc -I"$inc" \
      "-DNVIDIA_NCCL_DEVICE_H=\"$cuda/include/nccl_device.h\"" -c -o "$tmp/nv.o" $src/device_headers_nvidia.cu
  else
    skipped+=("the toolkit's nccl_device.h: none in $cuda/include")
  fi
else
  skipped+=("every nvcc check: no CUDA toolkit (CUDA_HOME, /usr/local/cuda)")
fi

echo "test_nccl_device_headers: $passed checks passed"
for s in "${skipped[@]}"; do echo "  not checked: $s"; done
exit 0
