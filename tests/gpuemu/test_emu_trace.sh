#!/usr/bin/env bash
# The flight recorder's fault matrix on CUDA ranks of the emulated GPU (build-emu/, `make emu`):
# test_gpu_trace matrix runs each case (a rank that skips a call, one killed and one stalled
# mid-transfer, on 2-4 ranks as threads and as processes, Ring and Tree) and checks that
# weft-trace names the culprit from the dumps, which follow the kernels through their progress
# area. The stalls need the emulator: a SIGSTOP stops a rank's kernel there (its blocks are
# threads of the process), not on a real GPU.
set -u
cd "$(dirname "$0")/../.." || exit 1
B=${EMU_BUILD:-build-emu}
BIN=$B/tests/gpu/test_gpu_trace
for f in "$BIN" "$B/bin/weft-trace"; do
  [ -x "$f" ] || { echo "SKIP: $f not built (make emu)"; exit 77; }
done
export WEFT_BACKEND=cuda
exec "$BIN" matrix
