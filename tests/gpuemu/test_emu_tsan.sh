#!/usr/bin/env bash
# ThreadSanitizer on the emulated GPU (build-emu-tsan/, `make emu-tsan`). First that the race
# detector sees what it must: test_emu_race publishes data from one block to another with the
# library's accessors; with the producer's __threadfence_system() it must run clean, without it
# (and with a barrier missing inside a block) it must report a data race in the test's own code.
# Then that neither the emulator (test_emu_grid, test_emu_runtime) nor the library on a small collective matrix
# (2 ranks as threads, Simple and LL; over the network through the proxy thread; tree all-reduce),
# nor kernels that give up (timeout, abort, mismatch) show a race. (Process ranks are left out: ThreadSanitizer cannot see their synchronisation.)
set -u
cd "$(dirname "$0")/../.."
B=${EMU_TSAN_BUILD:-build-emu-tsan}
RACE=$B/tests/gpuemu/test_emu_race GRID=$B/tests/gpuemu/test_emu_grid COLL=$B/tests/gpu/test_gpu_coll
RT=$B/tests/gpuemu/test_emu_runtime ABORT=$B/tests/gpu/test_gpu_abort MISMATCH=$B/tests/gpu/test_gpu_mismatch
for bin in "$RACE" "$GRID" "$COLL" "$RT" "$ABORT" "$MISMATCH"; do
  [ -x "$bin" ] || { echo "SKIP: $bin not built (make emu-tsan)"; exit 77; }
done
# Keep going after a report (every report is listed) and exit 66 at the end if there was one.
export TSAN_OPTIONS="halt_on_error=0 exitcode=66 ${TSAN_OPTIONS:-}"
export WEFT_BACKEND=cuda WEFT_TIMEOUT=120
LOG=$(mktemp -d)
trap 'rm -rf "$LOG"' EXIT

# Some kernels give ThreadSanitizer's runtime an address space it cannot use: nothing to test there.
"$RACE" fence >"$LOG/probe" 2>&1
if grep -q "FATAL: ThreadSanitizer" "$LOG/probe"; then
  echo "SKIP: ThreadSanitizer cannot run here: $(grep -m1 FATAL "$LOG/probe")"
  exit 77
fi

fail=0 runs=0
# expect (clean|race) name command...: clean = exit 0 and no report; race = exit 66 and every
# report a data race in test_emu_race.cu (the one that was planted, not one of the emulator's).
check() {
  local expect=$1 name=$2
  shift 2
  runs=$((runs + 1))
  local out=$LOG/$runs rc start verdict=
  start=$(date +%s)
  env "$@" >"$out" 2>&1
  rc=$?
  local reports planted
  reports=$(grep -c '^SUMMARY: ThreadSanitizer' "$out")
  planted=$(grep -c '^SUMMARY: ThreadSanitizer: data race tests/gpuemu/test_emu_race.cu' "$out")
  case $expect in
    clean) [ "$rc" = 0 ] && [ "$reports" = 0 ] || verdict="exit $rc, $reports ThreadSanitizer reports" ;;
    race) [ "$rc" = 66 ] && [ "$planted" -gt 0 ] && [ "$planted" = "$reports" ] ||
      verdict="exit $rc (want 66), $planted planted races of $reports reports" ;;
  esac
  if [ -z "$verdict" ]; then
    echo "ok   $name ($(($(date +%s) - start))s)"
  else
    fail=$((fail + 1))
    echo "FAIL $name: $verdict"
    grep -E '^(WARNING|SUMMARY): ThreadSanitizer|^    #0 |^  (Read|Write|Previous|Atomic)|FAIL' "$out" | head -30 |
      sed 's/^/    /'
  fi
}

check clean "fenced publish: no report" timeout 120 "$RACE" fence
check race "publish without the fence: a data race" timeout 120 "$RACE" nofence
check race "barrier missing in a block: a data race" timeout 120 "$RACE" nosync
check clean "emulator grid tests" timeout 120 "$GRID"
# The runtime's test forks children that start threads, which TSan refuses unless told to go on.
check clean "emulated runtime tests" env TSAN_OPTIONS="$TSAN_OPTIONS die_after_fork=0" timeout 200 "$RT"
MATRIX="NCCL_NTHREADS=64"
check clean "collectives, 2 ranks, Simple" $MATRIX NCCL_PROTO=Simple timeout 300 "$COLL" threads 2 300
check clean "collectives, 2 ranks, LL" $MATRIX NCCL_PROTO=LL timeout 300 "$COLL" threads 2 300
# The proxy thread moving the kernels' FIFOs over the network (devices without peer access and
# shared memory off, so the two thread ranks connect over loopback sockets), and tree all-reduce.
NET="WEFT_EMU_NO_PEER_ACCESS=1 NCCL_SHM_DISABLE=1"
check clean "collectives over the network, 2 ranks, LL" $MATRIX $NET NCCL_PROTO=LL timeout 300 "$COLL" devthreads 2 300
check clean "tree all-reduce, 3 ranks, LL" $MATRIX NCCL_ALGO=Tree NCCL_PROTO=LL timeout 300 "$COLL" threads 3 300 AllReduce
# Kernels that give up while the host watches their flags: a timeout and ncclCommAbort (the
# error report and the abort flag, written by blocks and the host), and mismatched collectives
# (a step's call tag, the report, ncclGetLastError read while another rank's WARN is written).
check clean "a kernel timing out, and one aborted" timeout 300 "$ABORT"
check clean "mismatched collectives, 2 ranks" timeout 300 "$MISMATCH" 2
# 4 ranks: ranks further round the ring learn it from marks on the connectors they share.
check clean "mismatched collectives, 4 ranks" NCCL_NTHREADS=64 timeout 300 "$MISMATCH" 4
echo "$((runs - fail)) of $runs ThreadSanitizer checks passed"
[ "$fail" = 0 ]
