#!/usr/bin/env bash
# Compile check of the CUDA backend's kernel for sm_90 with warnings as errors, and a check that
# the library built with it needs no C++ runtime (libnccl.so.2 must load where only libc is).
# SKIP when nvcc is absent.
set -eu
cd "$(dirname "$0")/../.."
NVCC=${NVCC:-$(command -v nvcc || true)}
[ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc
if [ -z "$NVCC" ]; then echo "SKIP: nvcc not found"; exit 77; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for cu in src/collectives/cuda/*.cu; do
  "$NVCC" -O2 -Werror all-warnings -Xcompiler -Wall,-fno-exceptions,-fno-rtti,-fno-threadsafe-statics \
    -DWEFT_CUDA=1 -Iinclude -Isrc -gencode arch=compute_90,code=sm_90 -c "$cu" -o "$tmp/k.o"
  if nm "$tmp/k.o" | grep -E ' U (__gxx_personality|__cxa_guard|__cxa_throw|_Unwind_Resume|_Zn)'; then
    echo "FAILED: $cu needs the C++ runtime"
    exit 1
  fi
  echo "$cu compiles for sm_90"
done
lib=build/lib/libnccl.so.2
if [ -e "$lib" ] && nm -D --undefined-only "$lib" | grep -E '__gxx_personality|__cxa_guard|__cxa_throw|_Unwind_Resume|GLIBCXX|CXXABI'; then
  echo "FAILED: $lib needs the C++ runtime"
  exit 1
fi
echo "CUDA kernels compile; the library needs no C++ runtime"
