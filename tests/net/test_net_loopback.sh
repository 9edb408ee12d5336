#!/usr/bin/env bash
# Ranks on this machine acting as different hosts (WEFT_HOSTID per rank, sockets over
# 127.0.0.1): every collective and send/recv, Ring and Tree, Simple and LL, for hosts x
# ranks-per-host 2x1, 2x2, 3x1. Runs everywhere; the namespace test bed builds on it.
set -u
cd "$(dirname "$0")/../.."
. tests/net/lib.sh
trap 'rm -rf "$NET_LOG"' EXIT
export NCCL_SOCKET_IFNAME=lo WEFT_TIMEOUT=60
fail=0
# The last shape runs with 8 KiB network steps (WEFT_NET_CHUNKSIZE): many partial steps and
# FIFO wrap-arounds in every collective, with the same step size required on every rank.
for shape in 2x1 2x2 3x1 2x2:8192; do
  start=$(date +%s)
  chunk=${shape#*:}
  [ "$chunk" = "$shape" ] && chunk=
  shape=${shape%:*}
  if [ -n "$chunk" ]; then export WEFT_NET_CHUNKSIZE=$chunk; else unset WEFT_NET_CHUNKSIZE; fi
  run_job "${shape%x*}" "${shape#*x}" 127.0.0.1 check
  bad=0
  for rc in "${RCS[@]}"; do [ "$rc" = 0 ] || bad=1; done
  echo "shape $shape${chunk:+, ${chunk}-byte network steps}: statuses ${RCS[*]} ($(($(date +%s) - start)) s)"
  grep -h "cases\|reused" "$NET_LOG/rank0.log"
  if [ $bad = 1 ]; then
    fail=1
    dump_logs
  fi
done
exit $fail
