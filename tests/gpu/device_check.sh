#!/usr/bin/env bash
# The CUDA backend's check on a machine with a GPU, in 8 minutes on one H200 (16 CPUs): build for
# this GPU; every tests/gpu/test_*.c program (test_gpu_coll: every collective x datatype x op for
# 2, 3 and 4 ranks sharing GPU 0 as threads, 3 as processes; test_gpu_special: NaN, Inf, +-0 and
# subnormals through the reductions on Simple and LL; graph capture, abort/timeout, sharing the
# GPU, groups, LL flag wrap, and any new test_*.c); compute-sanitizer memcheck, racecheck,
# synccheck and initcheck, each on NCCL_PROTO=Simple and on LL, of a small all-reduce with 2
# ranks as processes; then short bandwidth runs (the GPU's device-to-device copy rate, all-reduce
# busbw of gpu_bw and all_reduce_perf as threads and processes), and nccl-tests' all_reduce_perf
# when its source is in $NCCL_TESTS_DIR. Log and summary go to $OUT (./gpu-out when unset); the
# summary is printed last, after the tail of each failed step's output.
#
# Exit status 0 only when every step ran and passed (a documented SKIP aside, below); 77 without
# a GPU. A step that times out, was not built, or gets no time because the budget ran out FAILS:
# the total never says PASS over a check that did not run. A test may SKIP (exit 77) for a reason
# it states on a "SKIP: ..." line (test_gpu_devices: "SKIP: 1 GPU(s); this test needs 2"): that is
# a SKIP row with the reason, not a failure, unless the reason is gpu_require's GPU-less one
# ("no usable CUDA device": nvidia-smi sees a GPU, so the test failed to use it) or the test says
# it "needs N" GPUs and nvidia-smi lists N or more.
#
# What this checks that the emulated GPU (tests/gpuemu, `make emu`) cannot:
#  - the PTX memory model: real weak and relaxed accesses, fences, volatile and __ldcg/st.release
#    between blocks and between processes; the emulator runs blocks as fibers on host threads
#    under x86's strong ordering, so a missing fence passes there;
#  - the hardware's arithmetic: native fp16/bf16 add, mul, max and min (canonical NaNs, +0 > -0
#    in __hmax), fp8 conversions with satfinite, float subnormals that -ftz would flush
#    (test_gpu_special); the emulator runs cuda_fp16.hpp's host code instead;
#  - CUDA IPC through the driver between real processes (the procs runs, all_reduce_perf under
#    weftrun), time-slicing of several processes' spinning kernels on one GPU;
#  - what compute-sanitizer sees: out-of-bounds and misaligned device accesses, shared-memory
#    races, barrier misuse, reads of uninitialized device memory;
#  - occupancy, registers and launch bounds of the kernels nvcc really built for this GPU, and
#    every rank's kernel resident at once on a real SM count;
#  - performance: busbw against the copy roof.
#
# Time: each step has a limit; the limits and RESERVE_S (time outside the steps) must add up to
# no more than WEFT_CHECK_BUDGET (480 s), which the script verifies before it runs anything (it
# refuses to start otherwise: rebalance the table, or raise the budget on purpose). Steps run in
# order, each cut to what is left of the budget, so the whole run ends within it. WEFT_TIMEOUT
# defaults to two thirds of each step's limit, so a kernel that waits for a peer gives up and says
# which one before the step is killed. The limits are estimates for one H200 (a full build took
# 50 s on 2 CPUs elsewhere); each row prints the seconds it took against its limit, to recalibrate.
#
#   step                                              limit (s)
#   build (lib, tools, perf, GPU tests; -j$(nproc))         72
#   device-to-device copy rate (nvcc d2d_bw.cu + run)       15
#   test_gpu_coll threads 2, 3, 4 (max count 20000)    3 x 20 = 60
#   test_gpu_coll procs 3 (max count 3000)                  25
#   test_gpu_special threads 2 3 4 (Simple and LL)          25
#   test_gpu_abort (sleeps 8 s by design)                   15
#   test_gpu_devices (SKIP with one GPU)                    10
#   test_gpu_groups                                         20
#   test_gpu_llwrap                                         12
#   every other tests/gpu/test_*.c, one step    SMALL_BASE 10 + SMALL_EACH 3 each
#                                                  (11 programs today: 43)
#   compute-sanitizer {memcheck, racecheck, synccheck,
#     initcheck} x {Simple, LL}, test_gpu_coll procs 2
#     4096 AllReduce                                   8 x 14 = 112
#   gpu_bw 2 and 4 ranks                               2 x 10 = 20
#   all_reduce_perf threads 2, 4; procs 2           10 + 10 + 12 = 32
#   RESERVE_S: nvidia-smi, parsing, summary                 15
#   total                                                  476 <= 480
#   (tests/gpu/test_device_check_plan.sh checks this sum in make test, so a new GPU test that
#   overflows the budget is seen before a GPU session, which would refuse to start)
#   (nccl-tests, only with NCCL_TESTS_DIR: build 60 + run 15 more: raise WEFT_CHECK_BUDGET)
#
# DEVICE_CHECK_DRY=1 prints the steps, their limits and the sum, and runs nothing (no GPU needed).
# DEVICE_CHECK_EMU=1 runs what can run on the emulated GPU from an existing `make emu` build
# (DEVICE_CHECK_BUILD, default build-emu): no build step, no nvidia-smi, sanitizers and nvcc
# steps shown as SKIP (emulator), tiny bandwidth sizes; its total is labelled EMULATED: it tests
# this script, not the device. DEVICE_CHECK_BUILD sets the build directory (default build).
set -u
cd "$(dirname "$0")/../.." || exit 1

# --run-small BIN NAME...: each program in turn (the small tests' step); exit 1 if one did not pass.
run_small() {
  local bin=$1 bad=0 n rc
  shift
  for n in "$@"; do
    echo "--- $n"
    "$bin/$n"
    rc=$?
    echo "--- $n: exit $rc"
    [ $rc = 0 ] || bad=1
  done
  return $bad
}
if [ "${1:-}" = --run-small ]; then
  shift
  run_small "$@"
  exit
fi

BUDGET=${WEFT_CHECK_BUDGET:-480}
RESERVE_S=15
SMALL_BASE=10 # the small test programs' one step: this, plus SMALL_EACH per program
SMALL_EACH=3
SAN_LIMIT=14 # each compute-sanitizer run
DRY=${DEVICE_CHECK_DRY:-0}
EMU=${DEVICE_CHECK_EMU:-0}
if [ "$EMU" = 1 ]; then BUILD=${DEVICE_CHECK_BUILD:-build-emu}; else BUILD=${DEVICE_CHECK_BUILD:-build}; fi
BIN=$BUILD/tests/gpu
OUT=${OUT:-./gpu-out}
USER_TIMEOUT=${WEFT_TIMEOUT:-}

# ---- steps: one definition, run twice (plan, then run) so the sum checked is the sum run ----

PLANNING=1
LOG=/dev/null
plan_names=()
plan_limits=()
failures=0
skips=0

note() { [ $PLANNING = 1 ] || echo "$*" | tee -a "$LOG"; }
# row NAME STATUS DETAIL: a summary line; FAIL counts, SKIP is counted apart.
row() {
  [ $PLANNING = 1 ] && return 0
  printf '%-52s %-5s %s\n' "$1" "$2" "$3" >>"$SUMMARY"
  case $2 in
    FAIL) failures=$((failures + 1)) ;;
    SKIP) skips=$((skips + 1)) ;;
  esac
  return 0
}

# Whether a test's "SKIP: reason" is one this machine explains (see the header).
skip_is_documented() {
  local reason=$1
  case $reason in
    "" | *"no usable CUDA device"*) return 1 ;;
  esac
  if [[ $reason =~ needs\ ([0-9]+) ]] && [ "$ngpus" -ge "${BASH_REMATCH[1]}" ]; then return 1; fi
  return 0
}

# step NAME LIMIT COMMAND...: runs COMMAND with LIMIT seconds (cut to what is left of the budget),
# output to the log, and writes its row; a failed step's last lines go to $FAILED_TAILS.
step() {
  local name=$1 limit=$2
  shift 2
  if [ $PLANNING = 1 ]; then
    plan_names+=("$name")
    plan_limits+=("$limit")
    [ "$DRY" = 1 ] && printf '%5d s  %-52s %s\n' "$limit" "$name" "$*"
    return 0
  fi
  local left=$((deadline - $(date +%s)))
  if [ "$left" -lt 3 ]; then
    row "$name" FAIL "not run: the ${BUDGET}s budget was spent"
    return 75
  fi
  local lim=$limit cut=""
  if [ "$lim" -gt "$left" ]; then lim=$left cut=" (cut from ${limit}s: budget)"; fi
  local wt=${USER_TIMEOUT:-$((lim * 2 / 3 > 5 ? lim * 2 / 3 : 5))}
  local t0 from rc secs
  t0=$(date +%s)
  from=$(($(wc -l <"$LOG") + 2))
  note "=== $name: $* (limit ${lim}s, WEFT_TIMEOUT=$wt)"
  WEFT_TIMEOUT=$wt timeout -k 2 "$lim" "$@" >>"$LOG" 2>&1 </dev/null
  rc=$?
  secs=$(($(date +%s) - t0))
  local reason failed=1
  reason=$(tail -n +"$from" "$LOG" | grep -m1 '^SKIP' | cut -c1-100)
  case $rc in
    0)
      row "$name" PASS "${secs}s of ${lim}s$cut"
      failed=0
      ;;
    77)
      if skip_is_documented "$reason"; then
        row "$name" SKIP "${reason:-?}"
        failed=0
      else
        row "$name" FAIL "SKIP although nvidia-smi lists $ngpus GPU(s): ${reason:-no reason given}"
      fi
      ;;
    124 | 137) row "$name" FAIL "timed out after ${lim}s$cut" ;;
    *) row "$name" FAIL "exit $rc after ${secs}s" ;;
  esac
  if [ $failed = 1 ]; then
    { echo "--- $name (exit $rc), last lines:"; tail -n +"$from" "$LOG" | tail -n 25; } >>"$FAILED_TAILS"
  fi
  note "=== $name: exit $rc after ${secs}s"
  return $rc
}

# gpu_step NAME LIMIT BINARY COMMAND...: a step, or a FAIL row when the build did not make BINARY.
gpu_step() {
  local name=$1 limit=$2 bin=$3
  shift 3
  if [ $PLANNING = 0 ] && [ ! -x "$bin" ]; then
    row "$name" FAIL "$bin was not built"
    return 1
  fi
  step "$name" "$limit" "$@"
}

# na NAME LIMIT WHY: a step that cannot run here (emulator only): a SKIP row, still in the plan.
na() {
  if [ $PLANNING = 1 ]; then step "$1" "$2" "(not on the emulator)"; else row "$1" SKIP "$3"; fi
}

# Each tests/gpu/test_*.c program and its runs, as "name|limit|arguments" lines: the known ones
# with arguments sized for the budget; the others are small_tests.
gpu_test_runs() {
  local f n
  for f in tests/gpu/test_*.c; do
    n=${f##*/}
    n=${n%.c}
    case $n in
      test_gpu_coll)
        for r in 2 3 4; do echo "$n|20|threads $r 20000"; done
        echo "$n|25|procs 3 3000"
        ;;
      test_gpu_special) echo "$n|25|threads 2 3 4" ;;
      test_gpu_abort) echo "$n|15|" ;; # waits out WEFT_TIMEOUT=3 and a 6 s sleep by design
      test_gpu_llwrap) echo "$n|12|" ;;
      test_gpu_devices) echo "$n|10|" ;; # its SKIP (one GPU) is judged by step
      test_gpu_groups) echo "$n|20|" ;;
      *) ;; # small_tests
    esac
  done
}

# The other test programs run as one step: each takes seconds (0-4 s each on the emulated GPU,
# CUDA's context creation most of it on a real one), and a limit each would spend the budget on
# time they never use. Any of them failing, or skipping, fails the step.
small_tests() {
  local f n
  for f in tests/gpu/test_*.c; do
    n=${f##*/}
    n=${n%.c}
    case $(gpu_test_runs | grep -c "^$n|") in 0) echo "$n" ;; esac
  done
}
small_limit() { echo $((SMALL_BASE + SMALL_EACH * $(small_tests | wc -l))); }

# busbw SIZE FROM FIELD FILTER: busbw (column FIELD) of the SIZE row logged since line FROM.
busbw_at() {
  tail -n +"$2" "$LOG" | awk -v s="$1" -v f="$3" -v t="$4" '$1 == s && (t == "" || $3 == t) {print $f}' | tail -1
}
ratio_to_d2d() { awk -v b="${1:-0}" -v d="${d2d:-0}" 'BEGIN { if (d > 0) printf "%.0f%%", 100 * b / d; else print "?" }'; }

all_steps() {
  # Build only what the steps run; -k so one target that fails leaves the others to run.
  local gpu_bins f n
  gpu_bins=$(for f in tests/gpu/*.c; do n=${f##*/}; echo "$BIN/${n%.c}"; done)
  if [ "$EMU" = 1 ]; then
    : # built by `make emu EMU_BUILD=$BUILD`
  elif [ -z "$NVCC" ] && [ $PLANNING = 0 ]; then
    row "build (CUDA_ARCH=$cap)" FAIL "nvcc not found"
  else
    # shellcheck disable=SC2086
    step "build (CUDA_ARCH=$cap)" 72 make -k -j"$jobs" BUILD="$BUILD" CUDA=1 CUDA_ARCH="$cap" NVCC="$NVCC" \
      lib tools perf $gpu_bins
  fi

  # The copy roof, first: later bandwidth rows compare with it.
  if [ "$EMU" = 1 ]; then
    na "device-to-device copy rate (d2d_bw.cu)" 15 "emulator: no nvcc device code"
  elif step "device-to-device copy rate (d2d_bw.cu)" 15 bash -c \
    "'$NVCC' -O2 -arch=sm_$cap -o '$OUT/d2d_bw' tests/gpu/d2d_bw.cu && '$OUT/d2d_bw'"; then
    d2d=$(grep 'd2d_copy_GBps' "$LOG" | awk '{print $2}' | tail -1)
    row "  cudaMemcpy D2D 256 MiB" INFO "${d2d:-?} GB/s (bytes copied per second)"
  fi

  # Every GPU test program.
  local name lim args
  while IFS='|' read -r -u 3 name lim args; do
    # shellcheck disable=SC2086
    gpu_step "$name${args:+ $args}" "$lim" "$BIN/$name" "$BIN/$name" $args
  done 3< <(gpu_test_runs)
  # shellcheck disable=SC2046
  step "small GPU tests ($(small_tests | wc -l) programs)" "$(small_limit)" bash tests/gpu/device_check.sh \
    --run-small "$BIN" $(small_tests)
  if [ $PLANNING = 0 ] && grep -q '^cudaGetDeviceCount:' "$LOG"; then
    row "  the CUDA runtime cannot use the GPU" INFO "$(grep -m1 '^cudaGetDeviceCount:' "$LOG")"
  fi

  # Sanitizers on 2 ranks as processes (a sanitizer serializes the kernels of a process, which
  # ranks as threads, waiting for each other, cannot survive), each protocol in turn.
  local tool proto
  for tool in memcheck racecheck synccheck initcheck; do
    for proto in Simple LL; do
      name="compute-sanitizer $tool, $proto (all-reduce, 2 procs)"
      if [ "$EMU" = 1 ]; then
        na "$name" "$SAN_LIMIT" "emulator: no compute-sanitizer"
      elif [ -z "$SAN" ] && [ $PLANNING = 0 ]; then
        row "$name" FAIL "compute-sanitizer not found (PATH, \$CUDA_HOME/bin)"
      else
        gpu_step "$name" "$SAN_LIMIT" "$BIN/test_gpu_coll" env NCCL_PROTO=$proto "${SAN:-compute-sanitizer}" --tool $tool \
          --target-processes all --error-exitcode 9 --print-limit 20 "$BIN/test_gpu_coll" procs 2 4096 AllReduce
      fi
    done
  done

  # Bandwidth, short: gpu_bw (ranks as threads) and all_reduce_perf (nccl-tests' table, -c 1)
  # as threads (-t N -g 1: all on device 0) and as weftrun processes (CUDA_VISIBLE_DEVICES=0).
  local from bus
  for n in 2 4; do
    from=$(($(wc -l <"$LOG" 2>/dev/null || echo 0) + 1))
    if gpu_step "gpu_bw all-reduce, $n ranks (threads)" 10 "$BIN/gpu_bw" "$BIN/gpu_bw" "$n" 1024 "$bw_max" "$bw_iters" &&
      [ $PLANNING = 0 ]; then
      bus=$(busbw_at "$bw_max" "$from" 5 "")
      row "  $bw_max B busbw, $n ranks (gpu_bw)" INFO "${bus:-?} GB/s = $(ratio_to_d2d "$bus") of the D2D copy rate"
    fi
  done
  local mode perf
  for perf in "2 threads 10" "4 threads 10" "2 procs 12"; do
    read -r n mode lim <<<"$perf"
    from=$(($(wc -l <"$LOG" 2>/dev/null || echo 0) + 1))
    name="all_reduce_perf, $n ranks ($mode)"
    if [ "$mode" = threads ]; then
      # shellcheck disable=SC2086
      gpu_step "$name" "$lim" "$BUILD/bin/all_reduce_perf" "$BUILD/bin/all_reduce_perf" -t $n -g 1 $perf_args
    else
      # shellcheck disable=SC2086
      gpu_step "$name" "$lim" "$BUILD/bin/weftrun" env CUDA_VISIBLE_DEVICES=0 \
        "$BUILD/bin/weftrun" -n $n "$BUILD/bin/all_reduce_perf" $perf_args
    fi
    local rc=$?
    [ $PLANNING = 1 ] && continue
    { echo "--- all_reduce_perf $perf_args, $n ranks ($mode), exit $rc:"
      tail -n +"$from" "$LOG" | grep -E '^ +[0-9]|^# (Out of bounds|Avg bus)'; } >>"$OUT/all_reduce_perf.txt"
    [ $rc = 0 ] || continue
    bus=$(busbw_at "$bw_max" "$from" 8 float)
    row "  $bw_max B busbw, $n ranks (perf, $mode)" INFO "${bus:-?} GB/s = $(ratio_to_d2d "$bus") of the D2D copy rate"
  done

  # nccl-tests, built against this library, when its source was brought along (over the
  # default budget: the check at start asks for a larger WEFT_CHECK_BUDGET).
  if [ -n "${NCCL_TESTS_DIR:-}" ] && [ -f "${NCCL_TESTS_DIR}/Makefile" ] && [ "$EMU" != 1 ]; then
    local home=$OUT/nccl_home
    if [ $PLANNING = 0 ]; then
      mkdir -p "$home/include" "$home/lib"
      cp include/nccl.h "$home/include/" && cp -P "$BUILD"/lib/libnccl.so* "$home/lib/"
      home=$(cd "$home" && pwd)
    fi
    if step "nccl-tests build" 60 make -C "$NCCL_TESTS_DIR" -j"$jobs" NCCL_HOME="$home" CUDA_HOME="$CUDA_HOME" \
      NVCC_GENCODE="-gencode=arch=compute_$cap,code=sm_$cap"; then
      step "nccl-tests all_reduce_perf -c 1 (1 rank)" 15 env LD_LIBRARY_PATH="$home/lib:${LD_LIBRARY_PATH:-}" \
        "$NCCL_TESTS_DIR/build/all_reduce_perf" -b 8 -e 64M -f 8 -c 1
    elif [ $PLANNING = 0 ]; then
      row "nccl-tests all_reduce_perf -c 1 (1 rank)" FAIL "nccl-tests did not build"
    fi
  else
    row "nccl-tests all_reduce_perf" INFO "not run: NCCL_TESTS_DIR not set (or emulator)"
  fi
}

# ---- the machine ----

ngpus=0
cap=90
NVCC=${NVCC:-$(command -v nvcc || true)}
[ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "${NVCC:-/usr/local/cuda/bin/nvcc}")")}
SAN=$(command -v compute-sanitizer || true)
for d in "$CUDA_HOME/bin" "$CUDA_HOME/compute-sanitizer"; do
  [ -z "$SAN" ] && [ -x "$d/compute-sanitizer" ] && SAN=$d/compute-sanitizer
done
jobs=$(nproc 2>/dev/null || echo 4)
if [ "$EMU" = 1 ]; then
  bw_max=1048576 bw_iters=2 perf_args="-b 1K -e 1M -f 32 -w 1 -n 2 -c 1"
else
  bw_max=268435456 bw_iters=10 perf_args="-b 64K -e 256M -f 16 -w 2 -n 10 -c 1"
fi
d2d=""

# ---- plan: the limits must fit the budget before anything runs ----

[ "$DRY" = 1 ] && echo "device_check.sh plan (limit, step, command); build dir $BUILD:"
all_steps
total=$RESERVE_S
for l in "${plan_limits[@]}"; do total=$((total + l)); done
verdict="fits"
[ "$total" -gt "$BUDGET" ] && verdict="EXCEEDS"
line="${#plan_limits[@]} steps: limits + ${RESERVE_S}s reserve = ${total}s, $verdict the ${BUDGET}s budget"
if [ "$DRY" = 1 ]; then
  echo "$line"
  [ "$total" -le "$BUDGET" ]
  exit
fi
if [ "$total" -gt "$BUDGET" ]; then
  echo "FAIL: $line; rebalance the limits in $0 or raise WEFT_CHECK_BUDGET" >&2
  exit 1
fi

# ---- run ----

mkdir -p "$OUT"
LOG=$OUT/device_check.log
SUMMARY=$OUT/summary.txt
FAILED_TAILS=$OUT/failures.txt
: >"$LOG"
: >"$SUMMARY"
: >"$FAILED_TAILS"
: >"$OUT/all_reduce_perf.txt"
start=$(date +%s)
deadline=$((start + BUDGET))
PLANNING=0

if [ "$EMU" = 1 ]; then
  gpu="emulated GPU ($BUILD)"
  nvcc_rel="-"
else
  if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "SKIP: no GPU (nvidia-smi -L fails)" | tee -a "$SUMMARY"
    exit 77
  fi
  nvidia-smi >>"$LOG" 2>&1
  ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader -i 0 2>/dev/null)
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader -i 0 2>/dev/null | tr -d ' .')
  [ -z "$cap" ] && cap=90
  nvcc_rel=$([ -n "$NVCC" ] && "$NVCC" --version 2>/dev/null | grep -o 'release [0-9.]*')
fi
note "GPU 0: $gpu, sm_$cap, $ngpus GPU(s); nvcc: ${NVCC:-none} (${nvcc_rel:-?}); sanitizer: ${SAN:-none}; $jobs CPUs"
note "plan: $line"
echo "# Weft CUDA backend device check: $gpu (sm_$cap), nvcc ${nvcc_rel:-?}," \
  "$(git log -1 --format='%h %s' 2>/dev/null | cut -c1-60)" >>"$SUMMARY"
echo "# $line" >>"$SUMMARY"
export WEFT_BACKEND=cuda NCCL_DEBUG=${NCCL_DEBUG:-WARN}

all_steps

label=$([ "$EMU" = 1 ] && echo "total (EMULATED GPU: tests this script, not the device)" || echo total)
row "$label" "$([ $failures = 0 ] && echo PASS || echo FAIL)" \
  "$failures failed, $skips skipped for a stated reason, $(($(date +%s) - start))s of ${BUDGET}s"
{
  echo "--- all-reduce bandwidth tables (size, count, time us, algbw, busbw GB/s):"
  awk '/^# all-reduce float sum/ {p = 1} p && /^ *[0-9]/ {print} /exit [0-9]+ after/ {p = 0}' "$LOG"
  cat "$OUT/all_reduce_perf.txt"
} >"$OUT/bandwidth.txt"
cat "$OUT/bandwidth.txt" >>"$SUMMARY"
echo
[ -s "$FAILED_TAILS" ] && cat "$FAILED_TAILS" && echo
cat "$SUMMARY"
[ $failures = 0 ]
