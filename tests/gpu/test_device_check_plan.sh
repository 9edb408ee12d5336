#!/usr/bin/env bash
# The GPU session's one script (tests/gpu/device_check.sh) refuses to start when its steps' limits
# add up to more than its budget (8 minutes of a lent GPU), and every new tests/gpu program adds to
# them; a session that draws a GPU is rare, so the sum is checked here, on every make test, with
# the plan it would run (DEVICE_CHECK_DRY=1: nothing runs, no GPU needed). Every tests/gpu
# program must be in the plan too.
set -u
cd "$(dirname "$0")/../.."
plan=$(DEVICE_CHECK_DRY=1 bash tests/gpu/device_check.sh 2>&1)
last=$(tail -n 1 <<<"$plan")
fail=0
case $last in
  *"fits the"*"budget"*) echo "ok   $last" ;;
  *) echo "FAIL the plan does not fit its budget: $last"; fail=1 ;;
esac
for f in tests/gpu/test_*.c; do
  n=${f##*/}
  n=${n%.c}
  grep -q "tests/gpu/$n\b\| $n\b" <<<"$plan" || { echo "FAIL $n is not in the plan"; fail=1; }
done
[ $fail = 0 ] && echo "PASS every tests/gpu program is in a plan that fits the budget"
exit $fail
