#!/usr/bin/env bash
# Faults on namespace hosts: (1) a rank SIGKILLed inside a large all-reduce: every survivor gets
# an error naming that rank well within WEFT_TIMEOUT, and the same for a rank that destroyed its
# communicator where the others still call an all-reduce or a send/recv; (2) a host's link
# brought down mid-run (ip link set ... down): every rank errors out within WEFT_TIMEOUT (+ slack), nothing hangs,
# ncclCommAbort returns, and every rank off the lost host names a rank on it, with its host id
# and address (every namespace has the same host name); (3) latency and
# loss (tc netem): the collective matrix still completes correctly. SKIPs without root or ip.
set -u
cd "$(dirname "$0")/../.."
. tests/net/lib.sh
. tests/net/netns.sh
netns_bed 4
# NCCL_DEBUG=WARN: a rank that learns of the loss between two calls returns "failed earlier" from
# the next one; its WARN lines (in its log) still carry who was lost.
export NCCL_SOCKET_IFNAME=eth0 WEFT_TIMEOUT=15 WEFT_WARN_AFTER=5 NCCL_DEBUG=WARN
use_test_ib mlx5_0 eth0
fail=0
check() { # check COND MESSAGE
  if eval "$1"; then echo "ok: $2"; else echo "FAILED: $2"; fail=1; fi
}

# (1) rank 2 of 4x1 kills itself inside its third all-reduce (kill), or destroys its communicator
# normally where the others make a third all-reduce (quit) or send/recv to the next rank
# (quitp2p), having said goodbye: every survivor fails naming rank 2 well within WEFT_TIMEOUT,
# after a goodbye at once (its WARN says the peer destroyed the communicator).
for mode in kill quit quitp2p; do
  victim_rc=0 limit=8
  [ $mode = kill ] && victim_rc=137 limit=15
  start=$(date +%s)
  run_job 4 1 "$(netns_addr 0)" $mode:2 "$NS_PREFIX"
  secs=$(($(date +%s) - start))
  echo "$mode: statuses ${RCS[*]} in ${secs}s"
  check '[ "${RCS[2]}" = $victim_rc ]' "$mode: rank 2 ended with status $victim_rc"
  for r in 0 1 3; do
    check '[ "${RCS[$r]}" = 3 ]' "$mode: survivor rank $r returned an error and aborted"
    check 'grep -qF "rank 2 (host nethost2, $(netns_addr 2))" "$NET_LOG/rank$r.log"' \
      "$mode: survivor rank $r names rank 2 with its host and address"
  done
  [ $mode = kill ] || check 'grep -qF "destroyed the communicator after its last step" "$NET_LOG"/rank[013].log' \
    "$mode: a survivor says rank 2 destroyed the communicator"
  [ $mode = kill ] && check '! grep -q "destroyed" "$NET_LOG"/rank[013].log' \
    "kill: no survivor says the killed rank destroyed its communicator (it was lost)"
  check '[ $secs -lt $limit ]' "$mode: survivors failed within ${limit}s (${secs}s; WEFT_TIMEOUT 15)"
  [ $fail = 0 ] || dump_logs
done

# (2) host 1 (ranks 2, 3 of 3x2) loses its link 3 s into a stream of all-reduces.
start=$(date +%s)
( sleep 3; ip -n "$NS_SWITCH" link set "$(netns_port 1)" down ) &
run_job 3 2 "$(netns_addr 0)" loop:120 "$NS_PREFIX"
secs=$(($(date +%s) - start))
ip -n "$NS_SWITCH" link set "$(netns_port 1)" up
echo "link down: statuses ${RCS[*]} in ${secs}s"
for r in 0 1 2 3 4 5; do check '[ "${RCS[$r]}" = 3 ]' "rank $r returned an error and aborted"; done
check '[ $secs -lt $((3 + 15 + 20)) ]' "every rank gave up within WEFT_TIMEOUT + slack (${secs}s)"
lost="rank [23] \(host nethost1, $(netns_addr 1)\)"
# The first of ranks 1 and 4 to notice (TCP keepalive / user timeout) names the lost host; the
# others learn it from a neighbour that gave up: through shared connector pages on the same
# host, through a notice over the network from another host. Every rank must name host 1.
for r in 0 1 4 5; do
  check 'grep -qE "$lost" "$NET_LOG/rank$r.log"' "rank $r names a rank on host 1 with its host and address"
done
[ $fail = 0 ] || dump_logs

# (3) 2 ms latency and 1% loss on every host: results stay right. Kernels without netem get a
# rate-limited link (tbf) instead, which still reorders timing on every connection.
qdisc="netem delay 2ms loss 1%"
ip netns exec "${NS_PREFIX}0" tc qdisc add dev eth0 root $qdisc 2>/dev/null || {
  qdisc="tbf rate 200mbit burst 64kb latency 100ms"
  echo "tc netem is not available in this kernel: using $qdisc"
}
ip netns exec "${NS_PREFIX}0" tc qdisc del dev eth0 root 2>/dev/null
command -v tc >/dev/null || { echo "SKIP part 3: no tc"; exit $fail; }
for ((h = 0; h < 3; h++)); do
  ip netns exec "$NS_PREFIX$h" tc qdisc add dev eth0 root $qdisc || { echo "FAILED: tc qdisc add $qdisc"; exit 1; }
done
start=$(date +%s)
run_job 3 1 "$(netns_addr 0)" check "$NS_PREFIX"
echo "netem: statuses ${RCS[*]} in $(($(date +%s) - start))s"
for r in 0 1 2; do check '[ "${RCS[$r]}" = 0 ]' "rank $r: every collective correct under $qdisc"; done
[ $fail = 0 ] || dump_logs
exit $fail
