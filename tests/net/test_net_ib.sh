#!/usr/bin/env bash
# The IB network (transport/net_ib*.c) on the test verbs provider (tests/ibemu), through the same
# scripts as the socket network: emulated hosts over loopback (every collective and send/recv,
# Ring/Tree x Simple/LL, 2x1 2x2 3x1 and the variants), namespace hosts with a RoCE device
# (2x1 2x2 3x1), the namespace fault matrix (a rank killed, a host's link down, latency and
# loss), mismatched calls between two emulated hosts (test_coll_mismatch hosts), and how often a
# job registers memory (the connectors' buffers once). NCCL_NET=IB makes a job that cannot use the
# IB network fail. SKIPs as those scripts do.
set -u
cd "$(dirname "$0")/../.."
export WEFT_TEST_NET=IB
fail=0 ran=0
run() {
  echo "=== over IB: $*"
  "$@"
  case $? in 0) ran=$((ran + 1)) ;; 77) echo "(skipped)" ;; *) fail=1 ;; esac
}
# Without NCCL_NET the IB network comes first, as in NCCL; with a pre-shared key it stands aside
# for TLS sockets (RDMA cannot encrypt) and the job still runs.
default_choice() { # default_choice LABEL WANT_NETWORK [KEYFILE]
  (
    . tests/net/lib.sh
    trap 'rm -rf "$NET_LOG"' EXIT
    use_test_ib mlx5_0 >/dev/null
    unset NCCL_NET
    export NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET ${3:+WEFT_PSK_FILE=$3}
    run_job 2 1 127.0.0.1 short
    if [ "${RCS[*]}" = "0 0" ] && grep -q "Using network $2\$" "$NET_LOG/rank0.log"; then
      echo "ok: $1: the job ran over $2"
    else
      echo "FAILED: $1: statuses ${RCS[*]}, want network $2"; dump_logs; exit 1
    fi
  )
}
key=$(mktemp)
printf 'ib test key\n' >"$key" && chmod 600 "$key"
echo "=== the default network"
default_choice "no NCCL_NET" IB && ran=$((ran + 1)) || fail=1
default_choice "no NCCL_NET, WEFT_PSK_FILE set" Socket "$key" || fail=1
rm -f "$key"
run bash tests/net/test_net_loopback.sh
run env NET_SHAPES="2x1 2x2 3x1" bash tests/net/test_netns_coll.sh
run bash tests/net/test_netns_faults.sh
# Mismatched calls between two emulated hosts: the steps' call tags cross IB as metadata words.
mismatch_over_ib() (
  . tests/net/lib.sh
  use_test_ib mlx5_0 >/dev/null
  export NCCL_SOCKET_IFNAME=lo
  "${BUILD:-build}/tests/integration/test_coll_mismatch" hosts
)
run mismatch_over_ib
# The connectors' buffers are registered once per connection (the proxy keeps them registered):
# a job's thousands of steps over IB, all through the connectors (8 KiB steps, none sent in place
# from the caller's buffer), make a bounded number of registrations, not several per message, and
# every process deregisters all it registered. The test verbs provider counts them at exit.
registrations_over_ib() (
  . tests/net/lib.sh
  trap 'rm -rf "$NET_LOG"' EXIT
  use_test_ib mlx5_0 >/dev/null
  export NCCL_SOCKET_IFNAME=lo WEFT_NET_CHUNKSIZE=8192 WEFT_NET_SEND_BY_REF=0 WEFT_FAKE_IB_COUNTS="$NET_LOG/counts"
  run_job 2 1 127.0.0.1 short
  [ "${RCS[*]}" = "0 0" ] || { echo "FAILED: statuses ${RCS[*]}"; dump_logs; exit 1; }
  cat "$NET_LOG/counts"
  # pid P reg_mr R dereg_mr D live L messages M
  awk '{ n++; if ($10 < 1000 || $4 * 10 > $10 || $8 != 0) bad++ }
       END { if (n != 2 || bad) { print "FAILED: want 2 processes, each with 1000+ messages, fewer than one registration per 10 of them and none left"; exit 1 }
             print "ok: registrations bounded, none left" }' "$NET_LOG/counts"
)
run registrations_over_ib
[ $fail = 0 ] && [ $ran = 0 ] && { echo "SKIP: nothing could run"; exit 77; }
exit $fail
