#!/usr/bin/env bash
# The CUDA backend's check on a machine with a GPU (under 8 minutes): build for this GPU, every
# collective x datatype x op for 2, 3 and 4 ranks sharing GPU 0 (threads and processes) against
# the reference, a graph-captured all-reduce, abort/timeout of a waiting kernel, compute-sanitizer
# memcheck and racecheck on a small all-reduce, all-reduce bandwidth for 2 and 4 ranks (gpu_bw, and
# build/bin/all_reduce_perf as threads and processes) next to the GPU's device-to-device copy
# bandwidth, and nccl-tests' all_reduce_perf -c 1 when its source is in $NCCL_TESTS_DIR. Log and
# summary go to $OUT (./gpu-out when unset); the summary is printed last, after the tail of each
# failed step's output. Exit status 0 when every step that ran passed. Without a GPU: SKIP (77).
# Time: every step has its own limit and all of them share WEFT_CHECK_BUDGET seconds (450), so a
# hang costs one step's limit and later steps still run; WEFT_TIMEOUT (45 s) makes a kernel that
# waits for a peer give up and say which one, instead of being killed silently.
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-./gpu-out}
mkdir -p "$OUT"
LOG=$OUT/device_check.log
SUMMARY=$OUT/summary.txt
: >"$LOG"
: >"$SUMMARY"
start=$(date +%s)
deadline=$((start + ${WEFT_CHECK_BUDGET:-450}))
failures=0
FAILED_TAILS=$OUT/failures.txt
: >"$FAILED_TAILS"

note() { echo "$*" | tee -a "$LOG"; }
row() { printf '%-44s %-5s %s\n' "$1" "$2" "$3" >>"$SUMMARY"; [ "$2" = FAIL ] && failures=$((failures + 1)); true; }
# step NAME LIMIT_S COMMAND...: runs with a time limit (cut to what is left of the budget), output
# to the log; PASS/FAIL row, and a failed step's last lines in $FAILED_TAILS. The GPU is known to be
# there, so a test that reports SKIP (77) failed to use it: FAIL.
step() {
  local name=$1 limit=$2 t0 rc from
  shift 2
  local left=$((deadline - $(date +%s)))
  if [ "$left" -lt 15 ]; then
    row "$name" SKIP "out of time (WEFT_CHECK_BUDGET)"
    return 75
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  t0=$(date +%s)
  from=$(($(wc -l <"$LOG") + 2))
  note "=== $name: $*"
  timeout -k 5 "$limit" "$@" >>"$LOG" 2>&1
  rc=$?
  local secs=$(($(date +%s) - t0))
  case $rc in
    0) row "$name" PASS "${secs}s" ;;
    77) row "$name" FAIL "SKIP although nvidia-smi sees a GPU, ${secs}s" ;;
    124 | 137) row "$name" FAIL "timed out after ${limit}s" ;;
    *) row "$name" FAIL "exit $rc, ${secs}s" ;;
  esac
  if [ $rc != 0 ]; then
    { echo "--- $name (exit $rc), last lines:"; tail -n +"$from" "$LOG" | tail -n 25; } >>"$FAILED_TAILS"
  fi
  note "=== $name: exit $rc after ${secs}s"
  return $rc
}

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP: no GPU (nvidia-smi -L fails)" | tee -a "$SUMMARY"
  exit 77
fi
NVCC=${NVCC:-$(command -v nvcc || true)}
[ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "${NVCC:-/usr/local/cuda/bin/nvcc}")")}
nvidia-smi >>"$LOG" 2>&1
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader -i 0 2>/dev/null)
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader -i 0 2>/dev/null | tr -d ' .')
[ -z "$cap" ] && cap=90
nvcc_rel=$([ -n "$NVCC" ] && "$NVCC" --version 2>/dev/null | grep -o 'release [0-9.]*')
note "GPU 0: $gpu, sm_$cap; nvcc: ${NVCC:-none} (${nvcc_rel:-?}); $(nproc 2>/dev/null) CPUs"
echo "# Weft CUDA backend device check: $gpu (sm_$cap), nvcc ${nvcc_rel:-?}," \
  "$(git log -1 --format='%h %s' 2>/dev/null | cut -c1-60)" >>"$SUMMARY"

jobs=$(nproc 2>/dev/null || echo 4)
B=build/tests/gpu
# Only what the steps run: library, tools (weftrun), perf binaries and the GPU tests; -k so that
# one target that does not build leaves the others to run.
gpu_bins=$(for f in tests/gpu/*.c; do n=${f##*/}; echo "$B/${n%.c}"; done)
if [ -z "$NVCC" ]; then
  row "build (CUDA_ARCH=$cap)" FAIL "nvcc not found"
else
  # shellcheck disable=SC2086
  step "build (CUDA_ARCH=$cap)" 300 make -k -j"$jobs" BUILD=build CUDA=1 CUDA_ARCH="$cap" NVCC="$NVCC" \
    lib tools perf $gpu_bins
fi
export WEFT_BACKEND=cuda NCCL_DEBUG=${NCCL_DEBUG:-WARN} WEFT_TIMEOUT=${WEFT_TIMEOUT:-45}

# gpu_test NAME LIMIT BINARY COMMAND...: a step, or a FAIL row when the build did not make BINARY.
gpu_test() {
  local name=$1 limit=$2 need=$3
  shift 3
  if [ -x "$need" ]; then
    step "$name" "$limit" "$@"
  else
    row "$name" FAIL "$need was not built"
    return 1
  fi
}
for n in 2 3 4; do
  gpu_test "collectives x types x ops, $n ranks (threads)" 90 $B/test_gpu_coll $B/test_gpu_coll threads $n 20000
  if [ $n = 2 ] && grep -q '^cudaGetDeviceCount:' "$LOG"; then
    row "  the CUDA runtime cannot use the GPU" INFO "$(grep -m1 '^cudaGetDeviceCount:' "$LOG")"
  fi
done
for n in 2 3 4; do
  gpu_test "collectives x types x ops, $n ranks (procs)" 120 $B/test_gpu_coll $B/test_gpu_coll procs $n 20000
done
gpu_test "graph-captured all-reduce (2 threads)" 60 $B/test_gpu_graph $B/test_gpu_graph
gpu_test "abort and timeout of a waiting kernel" 60 $B/test_gpu_abort $B/test_gpu_abort

# Bandwidth: the copy roof, then all-reduce with 2 and 4 ranks sharing the GPU.
d2d=""
if [ -n "$NVCC" ] && timeout 60 "$NVCC" -O2 -arch=sm_"$cap" -o "$OUT/d2d_bw" tests/gpu/d2d_bw.cu >>"$LOG" 2>&1; then
  d2d=$(timeout -k 5 30 "$OUT/d2d_bw" 2>>"$LOG" | awk '/d2d_copy_GBps/ {print $2}')
fi
note "device-to-device copy: ${d2d:-?} GB/s"
row "cudaMemcpy D2D 256 MiB" "${d2d:+PASS}${d2d:-FAIL}" "${d2d:-?} GB/s (bytes copied per second)"
for n in 2 4; do
  from=$(($(wc -l <"$LOG") + 1))
  if gpu_test "all-reduce bandwidth, $n ranks (threads)" 60 $B/gpu_bw $B/gpu_bw $n 1024 $((256 << 20)) 20; then
    line=$(tail -n +"$from" "$LOG" | awk -v s=$((256 << 20)) '$1 == s' | tail -1)
    bus=$(echo "$line" | awk '{print $5}')
    ratio=$(awk -v b="${bus:-0}" -v d="${d2d:-0}" 'BEGIN { if (d > 0) printf "%.0f%%", 100 * b / d; else print "?" }')
    row "  256 MiB busbw, $n ranks" INFO "${bus:-?} GB/s = $ratio of the D2D copy rate"
  fi
done
# build/bin/all_reduce_perf (nccl-tests' table, -c 1) with 2 and 4 ranks sharing GPU 0: threads
# (-t N -g 1, every thread on device 0) and processes (weftrun, CUDA_VISIBLE_DEVICES=0 for each).
perf_args="-b 1K -e 256M -f 4 -w 5 -n 20 -c 1"
: >"$OUT/all_reduce_perf.txt"
for n in 2 4; do
  for mode in threads procs; do
    from=$(($(wc -l <"$LOG") + 1))
    if [ $mode = threads ]; then
      # shellcheck disable=SC2086
      gpu_test "all_reduce_perf, $n ranks ($mode)" 90 build/bin/all_reduce_perf build/bin/all_reduce_perf \
        -t $n -g 1 $perf_args
    else
      # shellcheck disable=SC2086
      gpu_test "all_reduce_perf, $n ranks ($mode)" 90 build/bin/weftrun env CUDA_VISIBLE_DEVICES=0 \
        build/bin/weftrun -n $n build/bin/all_reduce_perf $perf_args
    fi
    rc=$?
    { echo "--- all_reduce_perf $perf_args, $n ranks ($mode), exit $rc:"
      tail -n +"$from" "$LOG" | grep -E '^ +[0-9]|^# (Out of bounds|Avg bus)'; } >>"$OUT/all_reduce_perf.txt"
    [ $rc = 0 ] || continue
    bus=$(tail -n +"$from" "$LOG" | awk -v s=$((256 << 20)) '$1 == s && $3 == "float" {print $8}' | tail -1)
    ratio=$(awk -v b="${bus:-0}" -v d="${d2d:-0}" 'BEGIN { if (d > 0) printf "%.0f%%", 100 * b / d; else print "?" }')
    row "  256 MiB busbw, $n ranks (perf, $mode)" INFO "${bus:-?} GB/s = $ratio of the D2D copy rate"
  done
done
{
  echo "--- all-reduce bandwidth tables (size, count, time us, algbw, busbw GB/s):"
  awk '/^# all-reduce float sum/ {p = 1} p && /^ *[0-9]/ {print} /exit [0-9]+ after/ {p = 0}' "$LOG"
  cat "$OUT/all_reduce_perf.txt"
} >"$OUT/bandwidth.txt"

# Sanitizers on a small all-reduce with 2 ranks as processes (a sanitizer serializes kernels
# within a process, which ranks as threads cannot survive).
SAN=$(command -v compute-sanitizer || true)
for d in "$CUDA_HOME/bin" "$CUDA_HOME/compute-sanitizer"; do
  [ -z "$SAN" ] && [ -x "$d/compute-sanitizer" ] && SAN=$d/compute-sanitizer
done
for tool in memcheck racecheck; do
  if [ -z "$SAN" ]; then
    row "compute-sanitizer $tool" SKIP "compute-sanitizer not installed"
  else
    gpu_test "compute-sanitizer $tool (all-reduce, 2 procs)" 120 $B/test_gpu_coll "$SAN" --tool $tool \
      --target-processes all --error-exitcode 9 $B/test_gpu_coll procs 2 4096 AllReduce
  fi
done

# nccl-tests, built against this library, when its source was brought along.
if [ -n "${NCCL_TESTS_DIR:-}" ] && [ -f "${NCCL_TESTS_DIR}/Makefile" ]; then
  mkdir -p "$OUT/nccl_home/include" "$OUT/nccl_home/lib"
  cp include/nccl.h "$OUT/nccl_home/include/" && cp -P build/lib/libnccl.so* "$OUT/nccl_home/lib/"
  if step "nccl-tests build" 240 make -C "$NCCL_TESTS_DIR" -j"$jobs" NCCL_HOME="$(cd "$OUT/nccl_home" && pwd)" \
    CUDA_HOME="$CUDA_HOME" NVCC_GENCODE="-gencode=arch=compute_$cap,code=sm_$cap"; then
    export LD_LIBRARY_PATH=$(cd "$OUT/nccl_home/lib" && pwd):${LD_LIBRARY_PATH:-}
    step "nccl-tests all_reduce_perf -c 1 (1 rank)" 90 "$NCCL_TESTS_DIR/build/all_reduce_perf" -b 8 -e 64M -f 8 -c 1
    # nccl-tests gives each thread its own device; with one GPU this may be refused: for information.
    left=$((deadline - $(date +%s)))
    if [ $left -ge 15 ]; then
      timeout -k 5 $((left < 90 ? left : 90)) "$NCCL_TESTS_DIR/build/all_reduce_perf" -b 8 -e 64M -f 8 -c 1 -t 2 \
        >>"$LOG" 2>&1
      row "nccl-tests all_reduce_perf -c 1 (2 threads)" INFO "exit $? (one GPU: may be refused by nccl-tests)"
    fi
  fi
else
  row "nccl-tests all_reduce_perf" SKIP "NCCL_TESTS_DIR not set"
fi

row "total" "$([ $failures = 0 ] && echo PASS || echo FAIL)" "$failures failed step(s), $(($(date +%s) - start))s"
cat "$OUT/bandwidth.txt" >>"$SUMMARY"
echo
[ -s "$FAILED_TAILS" ] && cat "$FAILED_TAILS" && echo
cat "$SUMMARY"
[ $failures = 0 ]
