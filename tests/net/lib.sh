# Shared by the tests/net scripts: launch one job of net_ranks, rank by rank, each with its own
# host identity and (optionally) inside a network namespace; collect exit statuses and logs.
NET_RANKS=${NET_RANKS:-${BUILD:-build}/tests/net/net_ranks}
NET_LOG=${NET_LOG:-$(mktemp -d "${TMPDIR:-/tmp}/weft-net.XXXXXX")}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# run_job HOSTS PPN ROOT_ADDR MODE [NS_PREFIX]: ranks r = h*PPN + l on host h; prints nothing,
# leaves per-rank logs in $NET_LOG/rank<r>.log and statuses in RCS[r]. With NS_PREFIX, rank
# runs in namespace ${NS_PREFIX}<h> and binds the interface named in NCCL_SOCKET_IFNAME there.
run_job() {
  local hosts=$1 ppn=$2 addr=$3 mode=$4 ns=${5:-} n=$(($1 * $2)) port pids=() r h
  port=$(free_port)
  rm -f "$NET_LOG"/rank*.log
  for ((r = 0; r < n; r++)); do
    h=$((r / ppn))
    local pre=()
    [ -n "$ns" ] && pre=(ip netns exec "$ns$h")
    NCCL_COMM_ID="$addr:$port" WEFT_HOSTID="nethost$h" timeout -k 5 "${JOB_LIMIT:-240}" \
      "${pre[@]}" "$NET_RANKS" "$r" "$n" "$mode" >"$NET_LOG/rank$r.log" 2>&1 &
    pids+=($!)
  done
  RCS=()
  for ((r = 0; r < n; r++)); do
    wait "${pids[$r]}"
    RCS[$r]=$?
  done
}

dump_logs() {
  for f in "$NET_LOG"/rank*.log; do
    echo "--- $f"
    tail -n 15 "$f"
  done
}

# report_job LABEL START: after run_job, print the job's statuses and rank 0's case summary;
# on a failed rank also the tails of every log. Returns 1 when any rank failed.
report_job() {
  local bad=0 rc
  for rc in "${RCS[@]}"; do [ "$rc" = 0 ] || bad=1; done
  echo "shape $1: statuses ${RCS[*]} ($(($(date +%s) - $2)) s)"
  grep -h "cases\|reused" "$NET_LOG/rank0.log"
  [ $bad = 0 ] && return 0
  dump_logs
  return 1
}

# netns_bed K: K namespace hosts (tests/net/netns.sh, sourced first) removed on exit together
# with the job logs; exits with SKIP (77) where they cannot be made (no root or ip).
netns_bed() {
  local why
  why=$(netns_usable) || { echo "SKIP: $why"; exit 77; }
  trap 'netns_down; rm -rf "$NET_LOG"' EXIT
  trap 'exit 1' INT TERM
  netns_up "$1" || exit 1
}

# use_test_ib DEVICES [ADDR]: when WEFT_TEST_NET=IB, the job runs over the IB network on the test
# verbs provider (tests/ibemu): NCCL_NET=IB, so a job that could not use it fails at init. ADDR:
# the provider's wire address or interface (namespace hosts: eth0). Exits 77 without the provider.
use_test_ib() {
  [ "${WEFT_TEST_NET:-}" = IB ] || return 0
  local lib="$PWD/${BUILD:-build}/tests/lib/libweft_fake_verbs.so"
  [ -r "$lib" ] || { echo "SKIP: no test verbs provider ($lib; needs libibverbs-dev)"; exit 77; }
  export NCCL_NET=IB WEFT_IBVERBS_LIB="$lib" WEFT_FAKE_IB_DEVICES="$1"
  [ -n "${2:-}" ] && export WEFT_FAKE_IB_ADDR="$2"
  # Unacknowledged writes fail after 4.096 us x 2^14 x 8 tries (0.5 s), not NCCL's default 34 s.
  export NCCL_IB_TIMEOUT=${NCCL_IB_TIMEOUT:-14}
  echo "network under test: IB over the test verbs provider ($1)"
}
