#!/usr/bin/env bash
# The IB network (transport/net_ib*.c) on the test verbs provider (tests/ibemu), through the same
# scripts as the socket network: emulated hosts over loopback (every collective and send/recv,
# Ring/Tree x Simple/LL, 2x1 2x2 3x1 and the variants), namespace hosts with a RoCE device
# (2x1 2x2 3x1), and the namespace fault matrix (a rank killed, a host's link down, latency and
# loss). NCCL_NET=IB makes a job that cannot use the IB network fail. SKIPs as those scripts do.
set -u
cd "$(dirname "$0")/../.."
export WEFT_TEST_NET=IB
fail=0 ran=0
run() {
  echo "=== over IB: $*"
  "$@"
  case $? in 0) ran=$((ran + 1)) ;; 77) echo "(skipped)" ;; *) fail=1 ;; esac
}
run bash tests/net/test_net_loopback.sh
run env NET_SHAPES="2x1 2x2 3x1" bash tests/net/test_netns_coll.sh
run bash tests/net/test_netns_faults.sh
[ $fail = 0 ] && [ $ran = 0 ] && { echo "SKIP: nothing could run"; exit 77; }
exit $fail
