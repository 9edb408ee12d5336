#!/usr/bin/env bash
# Builds NVIDIA's nccl-tests, unchanged, against Weft's headers and library ($BUILD/include,
# $BUILD/lib, from `make`), then, where a GPU is usable, runs a few of its binaries on Weft with
# results checked. Not part of `make test`: nccl-tests' source is not fetched here.
#   scripts/check_nccl_tests.sh /path/to/nccl-tests      (a checkout; tested with 2.19.6)
# Environment: BUILD (default build), CUDA_HOME, NVCC_GENCODE (default: the GPU's architecture,
# or sm_90 when no GPU answers), JOBS. Output goes to $BUILD/nccl-tests/.
# Exit status: 0 built and every run passed; 77 built, but no usable GPU to run on; else failed.
# The emulated GPU (make emu) cannot run these binaries: nvcc-built programs register GPU
# machine code at start-up (__cudaRegisterFatBinary), which the emulated runtime neither provides
# nor could execute.
set -u
src=${1:?usage: scripts/check_nccl_tests.sh /path/to/nccl-tests}
src=$(cd "$src" && pwd) || exit 1
cd "$(dirname "$0")/.."
build=$(realpath -m "${BUILD:-build}")
out=$build/nccl-tests
for f in "$build/include/nccl.h" "$build/include/nccl_device.h" "$build/lib/libnccl.so"; do
  [ -e "$f" ] || { echo "check_nccl_tests: $f is missing; run make"; exit 1; }
done
[ -e "$src/src/Makefile" ] || { echo "check_nccl_tests: $src is not an nccl-tests checkout (no src/Makefile)"; exit 1; }
cuda=
for h in "${CUDA_HOME:-}" /usr/local/cuda; do [ -n "$h" ] && [ -x "$h/bin/nvcc" ] && { cuda=$h; break; }; done
[ -n "$cuda" ] || { echo "check_nccl_tests: no CUDA toolkit (CUDA_HOME, /usr/local/cuda)"; exit 1; }
version=$(sed -n 's/^#define NCCL_TESTS_VERSION "\(.*\)"/\1/p' "$src/src/common.h")
echo "check_nccl_tests: nccl-tests ${version:-?} from $src, Weft from $build, CUDA from $cuda"

# nccl-tests links with -L$CUDA_LIB before -L$NCCL_HOME/lib, and CUDA 13 ships NVIDIA's own
# libnccl.so in lib64: give it a directory holding only the CUDA runtime.
mkdir -p "$out/cudalib"
ln -sf "$cuda"/lib64/libcudart* "$out/cudalib/"
gencode=${NVCC_GENCODE:-}
if [ -z "$gencode" ]; then
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .')
  gencode="-gencode=arch=compute_${cap:-90},code=sm_${cap:-90}"
fi
log=$out/build.log
rm -rf "$out/bin" # nccl-tests' Makefile does not track NCCL's headers: always a fresh build
echo "check_nccl_tests: building ($gencode; log in $log)"
if ! make -C "$src/src" -j"${JOBS:-$(nproc)}" NCCL_HOME="$build" CUDA_HOME="$cuda" CUDA_LIB="$out/cudalib" \
  BUILDDIR="$out/bin" NVCC_GENCODE="$gencode" >"$log" 2>&1; then
  grep -E -m 20 'error|undefined' "$log"
  echo "check_nccl_tests: FAILED: nccl-tests does not build against Weft (see $log)"
  exit 1
fi
bins="all_reduce all_gather broadcast reduce_scatter reduce alltoall alltoallv scatter gather sendrecv hypercube"
for b in $bins; do
  exe=$out/bin/${b}_perf
  [ -x "$exe" ] || { echo "check_nccl_tests: FAILED: $exe was not built"; exit 1; }
  lib=$(LD_LIBRARY_PATH="$build/lib" ldd "$exe" | awk '$1 == "libnccl.so.2" {print $3}')
  [ "$lib" = "$build/lib/libnccl.so.2" ] || { echo "check_nccl_tests: FAILED: $exe loads '$lib'"; exit 1; }
done
echo "check_nccl_tests: built all $(echo $bins | wc -w) binaries in $out/bin"

# One rank per GPU, up to 2; -c 1 checks every result, a wrong one makes the exit status nonzero.
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
ng=$((ngpus >= 2 ? 2 : 1))
for b in all_reduce all_gather reduce_scatter broadcast reduce sendrecv alltoall; do
  cmd="$out/bin/${b}_perf -b 8 -e 1M -f 4 -g $ng -c 1"
  LD_LIBRARY_PATH="$build/lib" timeout 300 $cmd >"$out/$b.txt" 2>&1
  rc=$?
  if grep -q -E 'CUDA driver version is insufficient|no CUDA-capable device|cudaErrorNoDevice' "$out/$b.txt"; then
    echo "check_nccl_tests: not run: no usable GPU ($(grep -m1 -o "'[^']*'" "$out/$b.txt"))"
    exit 77
  fi
  if [ $rc != 0 ] || ! grep -q 'Out of bounds values : 0 OK' "$out/$b.txt"; then
    tail -n 20 "$out/$b.txt"
    echo "check_nccl_tests: FAILED: $cmd (exit $rc; output in $out/$b.txt)"
    exit 1
  fi
  echo "check_nccl_tests: PASS ${b}_perf on $ng GPU(s): $(grep -m1 'Avg bus bandwidth' "$out/$b.txt")"
done
