#!/usr/bin/env bash
# Ranks on this machine acting as different hosts (WEFT_HOSTID per rank, sockets over
# 127.0.0.1): every collective and send/recv, Ring and Tree, Simple and LL, for hosts x
# ranks-per-host 2x1, 2x2, 3x1, and 2x2 again with short network steps and with socket helper
# threads; then one host's two ranks with NCCL_SHM_DISABLE=1. Runs everywhere; the namespace test
# bed builds on it.
set -u
cd "$(dirname "$0")/../.."
. tests/net/lib.sh
trap 'rm -rf "$NET_LOG"' EXIT
export NCCL_SOCKET_IFNAME=lo WEFT_TIMEOUT=60
use_test_ib mlx5_0
fail=0
# The last shapes run with one setting changed: 8 KiB network steps (many partial steps and FIFO
# wrap-arounds, the same step size required on every rank), and two helper threads per connection
# moving large messages over data sockets of their own.
for job in 2x1 2x2 3x1 2x2:WEFT_NET_CHUNKSIZE=8192 2x2:NCCL_SOCKET_NTHREADS=2; do
  start=$(date +%s)
  shape=${job%%:*} setting=
  [ "$job" != "$shape" ] && setting=${job#*:}
  [ -n "$setting" ] && export "${setting?}"
  run_job "${shape%x*}" "${shape#*x}" 127.0.0.1 check
  [ -n "$setting" ] && unset "${setting%%=*}"
  report_job "$shape${setting:+ with $setting}" "$start" || fail=1
done
# Two ranks of one host with NCCL_SHM_DISABLE=1: NCCL joins them through the network, so must we
# (every connector says what it runs over in the INIT log).
start=$(date +%s)
NCCL_SHM_DISABLE=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT run_job 1 2 127.0.0.1 check
report_job "1x2 with NCCL_SHM_DISABLE=1" "$start" || fail=1
net=$(cat "$NET_LOG"/rank*.log | grep -c "connector from rank [0-9]* over NET")
shm=$(cat "$NET_LOG"/rank*.log | grep -c "connector from rank [0-9]* over SHM")
echo "1x2 with NCCL_SHM_DISABLE=1: $net connectors via NET, $shm via SHM"
if [ "$net" = 0 ] || [ "$shm" != 0 ]; then
  echo "FAIL: with NCCL_SHM_DISABLE=1 every connector between the two processes must run over NET"
  fail=1
fi
exit $fail
