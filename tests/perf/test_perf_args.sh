#!/usr/bin/env bash
# Perf binaries without a communicator: each one's --self-test (size parser and sweep, fp16/bf16/fp8
# encodings, exactness of the check inputs in any reduction order, counts and busbw factor), -h,
# an unknown flag and a bad size, with nccl-tests' exit statuses (0, 0, 255).
set -u
cd "$(dirname "$0")/../.."
BIN=${BUILD:-build}/bin
PERFS="all_reduce all_gather broadcast reduce reduce_scatter sendrecv alltoall gather scatter hypercube"
fail=0
for p in $PERFS; do
  b=$BIN/${p}_perf
  if [ ! -x "$b" ]; then echo "SKIP: $b not built (make perf)"; exit 77; fi
done
check() { # name, condition result
  if [ "$2" = 0 ]; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi
}
for p in $PERFS; do
  b=$BIN/${p}_perf
  out=$("$b" --self-test 2>&1); rc=$?
  check "$p --self-test (rc $rc)" $([ $rc = 0 ] && echo 0 || echo 1)
  [ $rc = 0 ] || echo "$out" | grep FAIL | head -5
  out=$("$b" -h 2>&1); rc=$?
  check "$p -h exits 0 with usage" $([ $rc = 0 ] && echo "$out" | grep -q "^USAGE: ${p}_perf" &&
    echo "$out" | grep -q -- '-J,--output_file' && echo 0 || echo 1)
  out=$("$b" -Q 2>&1); rc=$?
  check "$p unknown flag: usage, exit 0" $([ $rc = 0 ] && echo "$out" | grep -q "invalid option 'Q'" && echo 0 || echo 1)
  out=$("$b" -b 12X 2>&1); rc=$?
  check "$p bad size exits 255 (rc $rc)" $([ $rc = 255 ] && echo "$out" | grep -q "invalid size specified for 'minbytes'" && echo 0 || echo 1)
  out=$("$b" -b 2M -e 1M 2>&1); rc=$?
  check "$p min > max exits 255 (rc $rc)" $([ $rc = 255 ] && echo 0 || echo 1)
done
# hypercube refuses a rank count that is not a power of two before creating communicators.
out=$("$BIN/hypercube_perf" -g 3 -b 8 -e 8 2>&1); rc=$?
check "hypercube -g 3 is invalid usage (rc $rc)" $([ $rc = 6 ] && echo "$out" | grep -q 'power-of-two' && echo 0 || echo 1)
# Several processes without NCCL_COMM_ID cannot share a unique id.
out=$(env -u NCCL_COMM_ID WEFT_RANK=1 WEFT_NRANKS=2 "$BIN/all_reduce_perf" -b 8 -e 8 2>&1); rc=$?
check "2 processes without NCCL_COMM_ID (rc $rc)" $([ $rc = 6 ] && echo "$out" | grep -q NCCL_COMM_ID && echo 0 || echo 1)
out=$(env WEFT_RANK=2 WEFT_NRANKS=2 "$BIN/all_reduce_perf" -b 8 -e 8 2>&1); rc=$?
check "rank outside the size (rc $rc)" $([ $rc = 6 ] && echo 0 || echo 1)
exit $fail
