#!/usr/bin/env bash
# The CUDA backend's collective matrix on the emulated GPU (build-emu/, `make emu`): every
# collective x datatype x op of test_gpu_coll, in place and out of place, for 1-5 ranks as
# threads and as processes sharing the emulated device, on Simple and LL, 1-4 channels, and
# connector slots small enough that the counts loop several times per channel; and ranks whose
# step-shaping settings differ (test_gpu_coll's mismatch mode); ranks on devices that cannot map
# each other (shared memory, or the network), on devices each process sees as its device 0
# (CUDA_VISIBLE_DEVICES) and on emulated hosts (the network through the proxy); tree all-reduce;
# then the perf binaries.
set -u
cd "$(dirname "$0")/../.."
BIN=${EMU_BUILD:-build-emu}/tests/gpu/test_gpu_coll
[ -x "$BIN" ] || { echo "SKIP: $BIN not built (make emu)"; exit 77; }
export WEFT_BACKEND=cuda WEFT_TIMEOUT=120
fail=0 runs=0
# mode ranks max_count, then the environment of the run. With WANT_LOG set ("SUBSYS pattern"),
# the run logs that NCCL_DEBUG_SUBSYS and its log must match the pattern (grep -E), and WANT_ALSO
# (a pattern) too when set; with BAN_LOG set (a pattern) no line of that log may match it.
WANT_LOG= WANT_ALSO= BAN_LOG=
run() {
  local mode=$1 n=$2 max=$3
  shift 3
  runs=$((runs + 1))
  local out start why=
  start=$(date +%s)
  [ -n "$WANT_LOG" ] && set -- "$@" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS="${WANT_LOG%% *}"
  if ! out=$(env "$@" timeout 300 "$BIN" "$mode" "$n" "$max" ${COLL:-} 2>&1); then
    why="failed"
  elif [ -n "$WANT_LOG" ] && ! grep -Eq "${WANT_LOG#* }" <<<"$out"; then
    why="the log has no line matching '${WANT_LOG#* }'"
  elif [ -n "$WANT_ALSO" ] && ! grep -Eq "$WANT_ALSO" <<<"$out"; then
    why="the log has no line matching '$WANT_ALSO'"
  elif [ -n "$BAN_LOG" ] && grep -Eq "$BAN_LOG" <<<"$out"; then
    why="the log has a line matching '$BAN_LOG': $(grep -Em1 "$BAN_LOG" <<<"$out")"
  fi
  if [ -z "$why" ]; then
    echo "ok   $mode $n ranks, ${*:-defaults} ($(($(date +%s) - start))s)"
  else
    fail=$((fail + 1))
    echo "FAIL $mode $n ranks, ${*:-defaults}: $why"
    echo "$out" | grep -v '^FAILED rank\|NCCL INFO' | head -20 | sed 's/^/    /'
  fi
}
SMALL="NCCL_BUFFSIZE=65536 NCCL_LL_BUFFSIZE=32768" # 8 KiB Simple and 4 KiB LL slots
run threads 1 3000 NCCL_PROTO=Simple
run threads 2 3000 NCCL_PROTO=Simple $SMALL NCCL_MIN_NCHANNELS=2
run threads 2 3000 NCCL_PROTO=LL $SMALL NCCL_MIN_NCHANNELS=4 NCCL_MAX_NCHANNELS=4
run threads 3 3000 NCCL_PROTO=LL $SMALL NCCL_MIN_NCHANNELS=3
run threads 4 3000 NCCL_PROTO=Simple $SMALL NCCL_MIN_NCHANNELS=4 NCCL_MAX_NCHANNELS=4
run threads 5 3000
run procs 2 3000 NCCL_PROTO=Simple $SMALL NCCL_MIN_NCHANNELS=2
run procs 3 3000 NCCL_PROTO=LL $SMALL NCCL_MIN_NCHANNELS=3
run procs 4 1000
run mismatch 3 3000 WEFT_TIMEOUT=30 # ranks with different NCCL_BUFFSIZE, NCCL_PROTO, channel bounds
# Transports besides P2P, each seen in the init log: shared memory between devices that cannot map
# each other (threads, processes), the network between them with shared memory off, and the
# network between emulated hosts (the proxy moving the kernels' FIFOs).
NOP2P=WEFT_EMU_NO_PEER_ACCESS=1
WANT_LOG="INIT connector from rank [0-9]+ over SHM"
run devthreads 2 3000 NCCL_PROTO=LL $SMALL $NOP2P
run devices 3 3000 NCCL_PROTO=Simple $SMALL $NOP2P NCCL_MIN_NCHANNELS=2
# Each process sees its GPU as device 0 (CUDA_VISIBLE_DEVICES): one device is one bus id. A peer
# GPU visible under another ordinal maps through IPC (P2P) unless the GPUs cannot map each other;
# one this process cannot see is reached through shared memory; ranks 0 and 2 share GPU 0 (P2P).
WANT_LOG="INIT connector from rank [0-9]+ over P2P" BAN_LOG="over SHM"
run rotated 2 3000 NCCL_PROTO=Simple $SMALL NCCL_MIN_NCHANNELS=2
WANT_LOG="INIT connector from rank [0-9]+ over SHM"
BAN_LOG="rank 0: connector from rank 1 over P2P|rank 1: connector from rank 0 over P2P"
run rotated 2 3000 NCCL_PROTO=LL $SMALL $NOP2P
run visible 2 3000 NCCL_PROTO=Simple $SMALL
WANT_LOG="INIT rank 0: connector from rank 2 over P2P"
BAN_LOG="rank 1: connector from rank [02] over P2P|rank [02]: connector from rank 1 over P2P"
run visible 3 1000 NCCL_PROTO=LL $SMALL
# With a topology model (NCCL_TOPO_FILE naming the emulator's bus ids) the path between the GPUs
# and NCCL_P2P_LEVEL (default PXB) decide: across two sockets (SYS) shared memory unless the level
# allows SYS; behind one switch (PIX) P2P, also to a GPU this process cannot see (CUDA IPC), but
# not between GPUs that cannot map each other.
SOCKETS=NCCL_TOPO_FILE=tests/data/topo/emu-2gpu-2socket.xml
SWITCH=NCCL_TOPO_FILE=tests/data/topo/emu-2gpu-1switch.xml
WANT_LOG="INIT connector from rank [0-9]+ over SHM"
BAN_LOG="rank 0: connector from rank 1 over P2P|rank 1: connector from rank 0 over P2P"
run devthreads 2 1000 NCCL_PROTO=Simple $SMALL $SOCKETS
run visible 2 1000 NCCL_PROTO=LL $SMALL $SOCKETS
run rotated 2 1000 NCCL_PROTO=Simple $SMALL $SWITCH $NOP2P
WANT_LOG="INIT rank 1: connector from rank 0 over P2P" BAN_LOG="over SHM"
run devthreads 2 1000 NCCL_PROTO=LL $SMALL $SOCKETS NCCL_P2P_LEVEL=SYS
run visible 2 1000 NCCL_PROTO=Simple $SMALL $SOCKETS NCCL_P2P_LEVEL=SYS
run visible 2 1000 NCCL_PROTO=LL $SMALL $SWITCH
BAN_LOG=
WANT_LOG="INIT connector from rank [0-9]+ over NET"
run devthreads 2 1000 $NOP2P NCCL_SHM_DISABLE=1
run hosts 3 3000 NCCL_PROTO=LL $SMALL NCCL_MIN_NCHANNELS=2
run hosts 4 3000 NCCL_PROTO=Simple $SMALL
# The network between emulated hosts over IB (the test verbs provider, tests/ibemu), with
# GPUDirect RDMA: the FIFOs in GPU memory on both sides, registered through the emulator's
# DMA-BUF records, the NIC writing LL lines straight into the receiver's and reading the sender's.
# The provider places no device in the topology, so GDR takes NCCL_NET_GDR_LEVEL=PHB (a NIC under
# the CPU), or a topology file that places it; at the default (PXB) the FIFOs stay in host memory,
# as without DMA-BUF export. Sending from GPU memory: not with NCCL_NET_GDR_READ=0, nor by default
# before Ampere (then with NCCL_NET_GDR_READ=1).
FAKE_VERBS=$PWD/${BUILD:-build}/tests/lib/libweft_fake_verbs.so
if [ -r "$FAKE_VERBS" ]; then
  IB="NCCL_NET=IB WEFT_IBVERBS_LIB=$FAKE_VERBS WEFT_FAKE_IB_DEVICES=mlx5_0 NCCL_IB_TIMEOUT=14"
  WANT_LOG="NET connector from rank [0-9]+ received into GPU [0-9]+'s memory \(GPUDirect RDMA, DMA-BUF\)"
  WANT_ALSO="connector to rank [0-9]+ sent from GPU [0-9]+'s memory \(GPUDirect RDMA, DMA-BUF\)"
  BAN_LOG="in host memory, not GPU"
  run hosts 2 3000 NCCL_PROTO=LL $SMALL $IB NCCL_NET_GDR_LEVEL=PHB
  run hosts 3 3000 NCCL_PROTO=Simple $SMALL $IB NCCL_NET_GDR_LEVEL=PHB NCCL_MIN_NCHANNELS=2
  run hosts 2 1000 $SMALL $IB NCCL_NET_GDR_LEVEL=PHB WEFT_EMU_COMPUTE_CAPABILITY=7.0 NCCL_NET_GDR_READ=1
  WANT_ALSO="connector to rank [0-9]+ in host memory, not GPU [0-9]+'s: NCCL_NET_GDR_READ=0" BAN_LOG="sent from GPU"
  run hosts 2 1000 NCCL_PROTO=Simple $SMALL $IB NCCL_NET_GDR_LEVEL=PHB NCCL_NET_GDR_READ=0
  WANT_ALSO="connector to rank [0-9]+ in host memory, not GPU [0-9]+'s: before Ampere"
  run hosts 2 1000 NCCL_PROTO=Simple $SMALL $IB NCCL_NET_GDR_LEVEL=PHB WEFT_EMU_COMPUTE_CAPABILITY=7.0
  WANT_ALSO= BAN_LOG="in host memory, not GPU"
  # The topology placing the NIC behind the GPUs' switch (PIX): GDR at the default level, not at LOC.
  NIC=NCCL_TOPO_FILE=tests/data/topo/emu-2gpu-1switch-nic.xml
  run hosts 2 1000 NCCL_PROTO=LL $SMALL $IB $NIC
  WANT_LOG="INIT connector from rank [0-9]+ over NET" BAN_LOG="received into GPU|sent from GPU"
  run hosts 2 1000 $SMALL $IB $NIC NCCL_NET_GDR_LEVEL=LOC
  run hosts 2 1000 $SMALL $IB
  WANT_LOG="NET connector from rank [0-9]+ in host memory, not GPU [0-9]+'s: it exports no DMA-BUF"
  run hosts 2 1000 $SMALL $IB NCCL_NET_GDR_LEVEL=PHB WEFT_EMU_NO_DMABUF=1
  # A GPU whose kernels may see the NIC's writes out of order (before Hopper): every Simple step is
  # flushed before it is published (the log counts them); NCCL_NET_FORCE_FLUSH=1 flushes on any
  # GPU; a GPU that can neither order nor flush stays on host memory.
  WANT_LOG="NET connector from rank [0-9]+: [1-9][0-9]* of [0-9]+ steps flushed to GPU" BAN_LOG=
  run hosts 2 3000 NCCL_PROTO=Simple $SMALL $IB NCCL_NET_GDR_LEVEL=PHB WEFT_EMU_GDR_UNORDERED=1
  run hosts 3 1000 NCCL_PROTO=Simple $SMALL $IB NCCL_NET_GDR_LEVEL=PHB NCCL_NET_FORCE_FLUSH=1
  WANT_LOG="NET connector from rank [0-9]+ in host memory, not GPU [0-9]+'s: its kernels may see"
  run hosts 2 1000 $SMALL $IB NCCL_NET_GDR_LEVEL=PHB WEFT_EMU_GDR_UNORDERED=noflush
else
  echo "SKIP: the IB runs (no test verbs provider $FAKE_VERBS)"
fi
# The same over an external net plugin (tests/net/plugin, told to take GPU memory): regMrDmaBuf
# (v12), regMr of NCCL_PTR_CUDA (v8); a device that asks for flushes (forceFlush) stays on host.
PLUG=${BUILD:-build}/tests/net/plugin
WANT_LOG="NET connector from rank [0-9]+ received into GPU [0-9]+'s memory \(GPUDirect RDMA, DMA-BUF\)"
WANT_ALSO="connector to rank [0-9]+ sent from GPU [0-9]+'s memory \(GPUDirect RDMA, DMA-BUF\)"
BAN_LOG="in host memory, not GPU"
run hosts 2 3000 NCCL_PROTO=LL $SMALL NCCL_NET_PLUGIN=$PLUG/libnccl-net-tcptest12.so TCPTEST_GPU=dmabuf NCCL_NET_GDR_LEVEL=PHB
WANT_LOG="NET connector from rank [0-9]+ received into GPU [0-9]+'s memory \(GPUDirect RDMA, registered by address\)"
WANT_ALSO="connector to rank [0-9]+ sent from GPU [0-9]+'s memory \(GPUDirect RDMA, registered by address\)"
run hosts 2 3000 NCCL_PROTO=Simple $SMALL NCCL_NET_PLUGIN=$PLUG/libnccl-net-tcptest8.so TCPTEST_GPU=cuda NCCL_NET_GDR_LEVEL=PHB
WANT_LOG="INIT connector from rank [0-9]+ over NET" WANT_ALSO= BAN_LOG="received into GPU|sent from GPU"
run hosts 2 1000 $SMALL NCCL_NET_PLUGIN=$PLUG/libnccl-net-tcptest9.so TCPTEST_GPU=dmabuf TCPTEST_FORCE_FLUSH=1 NCCL_NET_GDR_LEVEL=PHB
BAN_LOG=
# Tree all-reduce (every type and op): across emulated hosts, and as chains inside one host.
WANT_LOG="TUNING AllReduce seq [0-9]+: .*algo Tree" COLL=AllReduce
run hosts 4 3000 NCCL_ALGO=Tree NCCL_PROTO=Simple $SMALL NCCL_MIN_NCHANNELS=2
run hosts 3 3000 NCCL_ALGO=Tree NCCL_PROTO=LL $SMALL NCCL_MIN_NCHANNELS=2
run threads 3 3000 NCCL_ALGO=Tree $SMALL
WANT_LOG= COLL=
# The perf binaries on the CUDA path (device buffers, streams): every collective as 2 threads,
# all-reduce as 2 processes under weftrun; nccl-tests' own check (-c 1) must count no errors.
PERF=${EMU_BUILD:-build-emu}/bin
perf() {
  runs=$((runs + 1))
  local out
  if out=$(timeout 120 "$@" -b 8 -e 256K -f 8 -c 1 2>&1) && echo "$out" | grep -q '^# Out of bounds values : 0 OK'; then
    echo "ok   ${*##*/}"
  else
    fail=$((fail + 1))
    echo "FAIL $*"
    echo "$out" | tail -15 | sed 's/^/    /'
  fi
}
for p in all_reduce all_gather broadcast reduce reduce_scatter sendrecv alltoall gather scatter; do
  perf "$PERF/${p}_perf" -t 2 -g 1
done
perf "$PERF/weftrun" -n 2 "$PERF/all_reduce_perf"
echo "$((runs - fail)) of $runs configurations match the reference"
[ "$fail" = 0 ]
