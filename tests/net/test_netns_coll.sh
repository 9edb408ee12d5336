#!/usr/bin/env bash
# Hosts as network namespaces (tests/net/netns.sh): every collective and send/recv under
# Ring/Tree x Simple/LL for hosts x ranks-per-host 2x1, 2x2, 3x1, 4x2, 5x1, ranks launched with
# `ip netns exec`, sockets on each namespace's eth0. SKIPs without root or ip.
set -u
cd "$(dirname "$0")/../.."
. tests/net/lib.sh
. tests/net/netns.sh
netns_bed 5
export NCCL_SOCKET_IFNAME=eth0 WEFT_TIMEOUT=60
use_test_ib mlx5_0:eth eth0
fail=0
for shape in ${NET_SHAPES:-2x1 2x2 3x1 4x2 5x1}; do
  start=$(date +%s)
  run_job "${shape%x*}" "${shape#*x}" "$(netns_addr 0)" check "$NS_PREFIX"
  report_job "$shape" "$start" || fail=1
done
exit $fail
