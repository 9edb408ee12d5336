#!/usr/bin/env bash
# The IB network (transport/net_ib*.c) on the test verbs provider (tests/ibemu), through the same
# scripts as the socket network: emulated hosts over loopback (every collective and send/recv,
# Ring/Tree x Simple/LL, 2x1 2x2 3x1 and the variants), namespace hosts with a RoCE device
# (2x1 2x2 3x1), the namespace fault matrix (a rank killed, a host's link down, latency and
# loss), mismatched calls between two emulated hosts (test_coll_mismatch hosts), how often a
# job registers memory (the connectors' buffers once), and merged NICs (NCCL_IB_MERGE_NICS).
# NCCL_NET=IB makes a job that cannot use the IB network fail. SKIPs as those scripts do.
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
# Merged NICs (NCCL_IB_MERGE_NICS, default 1): two PCI functions of one card (the provider's
# name@BUS.F) are one network device, mlx5_0+mlx5_1, whose connections have queue pairs on both
# functions, each with its own protection domain and keys (the provider refuses a key of the
# other's). Namespace hosts run the collective matrix over it, results checked; the INFO names the
# merged device and its connections, and the provider counts messages sent by both functions.
# With NCCL_IB_MERGE_NICS=0 the functions are two devices again, channels spread over both.
merged_nics() ( # merged_nics merged|separate [VAR=VALUE...]
  local want=$1
  shift
  . tests/net/lib.sh
  . tests/net/netns.sh
  netns_bed 2
  use_test_ib "mlx5_0@1a.0:eth,mlx5_1@1a.1:eth" eth0 >/dev/null
  export NCCL_SOCKET_IFNAME=eth0 WEFT_TIMEOUT=60 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
    WEFT_FAKE_IB_COUNTS="$NET_LOG/counts" "$@"
  local start
  start=$(date +%s)
  run_job 2 1 "$(netns_addr 0)" check "$NS_PREFIX"
  report_job "2x1 $want" "$start" || exit 1
  grep -q "wrong" "$NET_LOG/rank0.log" || { echo "FAILED: $want: no results checked"; exit 1; }
  cat "$NET_LOG/counts"
  # pid P ... by_device M0 M1: both functions sent messages in each process
  awk '{ n++; if ($18 > 0 && $19 > 0) both++ }
       END { if (n != 2 || both != 2) { print "FAILED: both functions should carry messages in both processes"; exit 1 } }' \
    "$NET_LOG/counts" || exit 1
  local r bad=0
  for r in 0 1; do
    local log="$NET_LOG/rank$r.log"
    if [ "$want" = merged ]; then
      grep -q "NET/IB: merged device mlx5_0+mlx5_1: 2 ports of one card" "$log" &&
        grep -q "NET/IB: mlx5_0+mlx5_1 connection to" "$log" &&
        grep -q "NET/IB: mlx5_0+mlx5_1 connection from" "$log" &&
        ! grep -q "over IB device 1" "$log" || bad=1
    else
      ! grep -q "merged device" "$log" && grep -q "over IB device 0 (mlx5_0:1)" "$log" &&
        grep -q "over IB device 1 (mlx5_1:1)" "$log" || bad=1
    fi
  done
  [ $bad = 0 ] || { echo "FAILED: $want: the INFO does not show the devices expected"; dump_logs; exit 1; }
  echo "ok: $want: results checked, $( [ "$want" = merged ] && echo "connections on mlx5_0+mlx5_1" || echo "mlx5_0:1 and mlx5_1:1 apart")"
)
run merged_nics merged
run merged_nics separate NCCL_IB_MERGE_NICS=0
# A merged device with queue pairs split (each message over both functions), and hosts whose
# devices have different numbers of members (host 0 merged, host 1 one port): the receiver's
# queue pairs count, a sender with more members than those leaves the rest idle and says so.
merged_loopback() ( # merged_loopback LABEL HOST1_DEVICES [VAR=VALUE...]
  local label=$1 host1=$2
  shift 2
  . tests/net/lib.sh
  trap 'rm -rf "$NET_LOG"' EXIT
  use_test_ib "mlx5_0@1a.0,mlx5_1@1a.1" >/dev/null
  export NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET WEFT_FAKE_IB_COUNTS="$NET_LOG/counts" "$@"
  # Host 1's ranks see its own devices.
  printf '#!/usr/bin/env bash\n[ "$WEFT_HOSTID" = nethost1 ] && export WEFT_FAKE_IB_DEVICES=%q\nexec %q "$@"\n' \
    "$host1" "$PWD/$NET_RANKS" >"$NET_LOG/ranks.sh"
  chmod +x "$NET_LOG/ranks.sh"
  NET_RANKS="$NET_LOG/ranks.sh"
  local start
  start=$(date +%s)
  run_job 2 1 127.0.0.1 check
  report_job "$label" "$start" || exit 1
  cat "$NET_LOG/counts"
  grep -q "NET/IB: mlx5_0+mlx5_1 connection" "$NET_LOG/rank0.log" ||
    { echo "FAILED: $label: host 0 does not use mlx5_0+mlx5_1"; exit 1; }
  if [ "$host1" = mlx5_0 ]; then
    grep -q "1 of our 2 members carry it" "$NET_LOG/rank0.log" ||
      { echo "FAILED: $label: host 0 should say it sends to a one-port receiver over one member"; exit 1; }
  else
    awk '{ n++; if ($18 > 0 && $19 > 0) both++ }
         END { if (n != 2 || both != 2) { print "FAILED: both functions should carry messages"; exit 1 } }' "$NET_LOG/counts" || exit 1
  fi
  echo "ok: $label"
)
run merged_loopback "merged, 2 queue pairs per member, messages split" "mlx5_0@1a.0,mlx5_1@1a.1" \
  NCCL_IB_QPS_PER_CONNECTION=2 NCCL_IB_SPLIT_DATA_ON_QPS=1
run merged_loopback "a merged device and a single port" mlx5_0
# GPUDirect RDMA over a merged device, on the emulated GPU when `make emu` has built it: the
# FIFOs in GPU memory are registered (DMA-BUF) in both functions, since either's queue pairs
# write into them, LL lines and split Simple steps alike.
merged_gpu() ( # merged_gpu [VAR=VALUE...]
  local bin=${EMU_BUILD:-build-emu}/tests/gpu/test_gpu_coll out
  [ -x "$bin" ] || { echo "SKIP: $bin not built (make emu)"; exit 77; }
  out=$(env WEFT_BACKEND=cuda WEFT_TIMEOUT=120 NCCL_NET=IB WEFT_IBVERBS_LIB="$PWD/${BUILD:-build}/tests/lib/libweft_fake_verbs.so" \
    WEFT_FAKE_IB_DEVICES="mlx5_0@1a.0,mlx5_1@1a.1" NCCL_IB_TIMEOUT=14 NCCL_NET_GDR_LEVEL=PHB \
    NCCL_BUFFSIZE=65536 NCCL_LL_BUFFSIZE=32768 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET "$@" \
    timeout 300 "$bin" hosts 2 3000 2>&1) || { echo "FAILED: merged GPU $*"; grep WARN <<<"$out" | head; exit 1; }
  grep -q "NET/IB: mlx5_0+mlx5_1 GPUDirect RDMA: DMA-BUF" <<<"$out" &&
    grep -q "received into GPU [0-9]*'s memory (GPUDirect RDMA, DMA-BUF)" <<<"$out" ||
    { echo "FAILED: merged GPU $*: the FIFOs are not in GPU memory over mlx5_0+mlx5_1"; exit 1; }
  echo "ok: GPUDirect RDMA over mlx5_0+mlx5_1, $*"
)
run merged_gpu NCCL_PROTO=LL
run merged_gpu NCCL_PROTO=Simple NCCL_MIN_NCHANNELS=2 NCCL_IB_SPLIT_DATA_ON_QPS=1
[ $fail = 0 ] && [ $ran = 0 ] && { echo "SKIP: nothing could run"; exit 77; }
exit $fail
