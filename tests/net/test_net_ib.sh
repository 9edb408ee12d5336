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
# Several ports per job: two devices the topology does not place (the test provider has no
# sysfs), so every device is near every rank. One rank per host spreads its channels over both;
# two ranks per host take one device each (rails), as NCCL's GPUs take their own NICs. The
# provider counts each process's messages by the device that sent them.
two_ports() ( # two_ports RANKS_PER_HOST
  . tests/net/lib.sh
  trap 'rm -rf "$NET_LOG"' EXIT
  use_test_ib mlx5_0,mlx5_1 >/dev/null
  export NCCL_SOCKET_IFNAME=lo WEFT_FAKE_IB_COUNTS="$NET_LOG/counts"
  run_job 2 "$1" 127.0.0.1 short
  case " ${RCS[*]} " in *[!0\ ]*) echo "FAILED: statuses ${RCS[*]}"; dump_logs; exit 1 ;; esac
  cat "$NET_LOG/counts"
  # pid P reg_mr R dereg_mr D live L messages M empty E relaxed X dmabuf G by_device M0 M1
  awk -v ppn="$1" '{ n++; both += ($18 > 0 && $19 > 0); only0 += ($18 > 0 && $19 == 0); only1 += ($18 == 0 && $19 > 0) }
       END { want = 2 * ppn
             if (n != want) { print "FAILED: want " want " processes, got " n; exit 1 }
             if (ppn == 1 && both != 2) { print "FAILED: each rank alone on its host should send over both devices"; exit 1 }
             if (ppn == 2 && (only0 != 2 || only1 != 2)) { print "FAILED: each of two ranks per host should send over one device of its own"; exit 1 }
             print "ok: " (ppn == 1 ? "one rank per host sends over both devices" : "two ranks per host send over one device each") }' "$NET_LOG/counts"
)
run two_ports 1
run two_ports 2
# The topology places the NICs: a file with a 200G mlx5_0 near the ranks' NUMA node (and a
# slower NIC elsewhere) against two devices, mlx9 (not in the file) and mlx5_0. The model's
# nearest is mlx5_0, device 1, so each rank sends over it alone, where without the file it would
# spread its channels over both.
topology_ports() (
  . tests/net/lib.sh
  trap 'rm -rf "$NET_LOG"' EXIT
  use_test_ib mlx9,mlx5_0 >/dev/null
  export NCCL_SOCKET_IFNAME=lo WEFT_FAKE_IB_COUNTS="$NET_LOG/counts" NCCL_TOPO_FILE=tests/data/topo/cpu-2numa-2nic.xml
  run_job 2 1 127.0.0.1 short
  [ "${RCS[*]}" = "0 0" ] || { echo "FAILED: statuses ${RCS[*]}"; dump_logs; exit 1; }
  cat "$NET_LOG/counts"
  # pid P reg_mr R dereg_mr D live L messages M empty E relaxed X dmabuf G by_device M0 M1
  awk '{ n++; ok += ($18 == 0 && $19 > 0) }
       END { if (n != 2 || ok != 2) { print "FAILED: each rank should send over the topology'"'"'s nearest NIC (device 1) alone"; exit 1 }
             print "ok: each rank sends over the NIC the topology puts nearest" }' "$NET_LOG/counts"
)
run topology_ports
# Adaptive routing (NCCL_IB_ADAPTIVE_ROUTING, on by default over InfiniBand, off over RoCE): a
# message of NCCL_IB_AR_THRESHOLD bytes or more goes as a plain RDMA write, then an empty write
# with its immediate. The provider counts messages whose immediate came empty: all of them with
# the threshold at 0; only the zero-byte ones with adaptive routing off or over RoCE.
adaptive_routing() ( # adaptive_routing LABEL DEVICE WANT(all|few) [VAR=VALUE...]
  local label=$1 device=$2 want=$3
  shift 3
  . tests/net/lib.sh
  trap 'rm -rf "$NET_LOG"' EXIT
  use_test_ib "$device" >/dev/null
  export NCCL_SOCKET_IFNAME=lo WEFT_FAKE_IB_COUNTS="$NET_LOG/counts" "$@"
  run_job 2 1 127.0.0.1 short
  [ "${RCS[*]}" = "0 0" ] || { echo "FAILED: $label: statuses ${RCS[*]}"; dump_logs; exit 1; }
  cat "$NET_LOG/counts"
  # pid P reg_mr R dereg_mr D live L messages M empty E ...
  awk -v want="$want" -v label="$label" '{ n++; if ($10 < 1000) bad++
         if (want == "all" && $12 != $10) bad++
         if (want == "few" && $12 * 10 > $10) bad++ }
       END { if (n != 2 || bad) { print "FAILED: " label ": want " want " of each process'"'"'s 1000+ messages with an empty immediate"; exit 1 }
             print "ok: " label }' "$NET_LOG/counts"
)
run adaptive_routing "InfiniBand, threshold 0: every message" mlx5_0 all NCCL_IB_AR_THRESHOLD=0
run adaptive_routing "InfiniBand, NCCL_IB_ADAPTIVE_ROUTING=0: none" mlx5_0 few NCCL_IB_ADAPTIVE_ROUTING=0 NCCL_IB_AR_THRESHOLD=0
run adaptive_routing "RoCE, by default: none" mlx5_0:eth few NCCL_IB_AR_THRESHOLD=0
# Relaxed ordering (NCCL_IB_PCI_RELAXED_ORDERING, default 2: where libibverbs takes optional
# access flags, as the test provider does): the data buffers are registered with
# IBV_ACCESS_RELAXED_ORDERING, the connection's own FIFO and words never; 0 turns it off.
relaxed_ordering() ( # relaxed_ordering on|off [VAR=VALUE...]
  local want=$1
  shift
  . tests/net/lib.sh
  trap 'rm -rf "$NET_LOG"' EXIT
  use_test_ib mlx5_0 >/dev/null
  export NCCL_SOCKET_IFNAME=lo WEFT_FAKE_IB_COUNTS="$NET_LOG/counts" "$@"
  run_job 2 1 127.0.0.1 short
  [ "${RCS[*]}" = "0 0" ] || { echo "FAILED: relaxed ordering $want: statuses ${RCS[*]}"; dump_logs; exit 1; }
  cat "$NET_LOG/counts"
  # pid P reg_mr R dereg_mr D live L messages M empty E relaxed X ...
  awk -v want="$want" '{ n++
         if (want == "on" && ($14 * 2 < $4 || $14 >= $4)) bad++
         if (want == "off" && $14 != 0) bad++ }
       END { if (n != 2 || bad) { print "FAILED: relaxed ordering " want ": want " (want == "on" ? "the data buffers'"'"' registrations (most, not all) with it" : "no registration with it"); exit 1 }
             print "ok: relaxed ordering " want }' "$NET_LOG/counts"
)
run relaxed_ordering on
run relaxed_ordering off NCCL_IB_PCI_RELAXED_ORDERING=0
# Buffers registered with ncclCommRegister stay registered with the network: the host backend
# sends unchanged steps in place from the caller's buffer (WEFT_NET_SEND_BY_REF), each one a
# registration of its own unless the buffer is registered. A second of in-place 4 MiB
# all-reduces, the buffer unregistered then registered: about one registration per message,
# then a bounded number, and every registration released by the end.
registered_buffers() ( # registered_buffers loop|regloop
  local mode=$1
  . tests/net/lib.sh
  trap 'rm -rf "$NET_LOG"' EXIT
  use_test_ib mlx5_0 >/dev/null
  export NCCL_SOCKET_IFNAME=lo WEFT_FAKE_IB_COUNTS="$NET_LOG/counts"
  run_job 2 1 127.0.0.1 "$mode:1"
  [ "${RCS[*]}" = "0 0" ] || { echo "FAILED: $mode: statuses ${RCS[*]}"; dump_logs; exit 1; }
  cat "$NET_LOG/counts"
  # pid P reg_mr R dereg_mr D live L messages M ...
  awk -v mode="$mode" '{ n++; if ($10 < 200 || $8 != 0) bad++
         if (mode == "loop" && $4 * 2 < $10) bad++
         if (mode == "regloop" && $4 * 20 > $10) bad++ }
       END { if (n != 2 || bad) { print "FAILED: " mode ": want 200+ messages, " (mode == "loop" ? "about one registration per message" : "fewer than one registration per 20 messages") " and none left"; exit 1 }
             print "ok: " (mode == "loop" ? "an unregistered buffer: a registration per message" : "a registered buffer: registrations bounded") }' "$NET_LOG/counts"
)
run registered_buffers loop
run registered_buffers regloop
[ $fail = 0 ] && [ $ran = 0 ] && { echo "SKIP: nothing could run"; exit 77; }
exit $fail
