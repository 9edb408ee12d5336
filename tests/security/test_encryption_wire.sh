#!/usr/bin/env bash
# What crosses the wire with a pre-shared key: two ranks acting as two hosts run all_reduce_perf
# over loopback sockets, once in clear and once with WEFT_PSK_FILE (TLS 1.3), while a packet
# socket watches lo. In clear the socket network's message headers are seen; with the key none
# is, the results are still right, and the log says the connections were encrypted. A third run
# gives the ranks different keys: it must fail. SKIP without root (packet sockets) or OpenSSL.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
PERF=$BUILD/bin/all_reduce_perf
[ -x "$PERF" ] || { echo "SKIP: $PERF not built"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root for a packet socket on lo"; exit 77; }
ldconfig -p 2>/dev/null | grep -q 'libssl.so.3 ' || { echo "SKIP: libssl.so.3 not installed"; exit 77; }
work=$(mktemp -d)
trap 'kill $sniffer 2>/dev/null; rm -rf "$work"' EXIT
printf 'wire test key\n' >"$work/key" && chmod 600 "$work/key"
printf 'another key\n' >"$work/other" && chmod 600 "$work/other"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# run TAG KEY0 KEY1: one 2-rank job (empty KEY: clear); statuses in rc0 rc1, sniffer's count in hdrs
run() {
  local tag=$1 p pids=() r key
  p=$(port)
  python3 tests/security/sniff_lo.py >"$work/$tag.sniff" 2>&1 &
  sniffer=$!
  for _ in $(seq 50); do grep -q ready "$work/$tag.sniff" 2>/dev/null && break; sleep 0.1; done
  for r in 0 1; do
    key=$2
    [ $r = 1 ] && key=$3
    env ${key:+WEFT_PSK_FILE=$key} WEFT_RANK=$r WEFT_NRANKS=2 NCCL_COMM_ID=127.0.0.1:$p WEFT_HOSTID=wire$r \
      NCCL_SOCKET_IFNAME=lo NCCL_SOCKET_NTHREADS=2 WEFT_BOOTSTRAP_TIMEOUT=8 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET \
      timeout 120 "$PERF" -b 64K -e 4M -f 4 -n 3 -w 1 -c 1 >"$work/$tag.$r" 2>&1 &
    pids+=($!)
  done
  wait "${pids[0]}"; rc0=$?
  wait "${pids[1]}"; rc1=$?
  kill -TERM $sniffer; wait $sniffer
  hdrs=$(awk '/^headers/ {print $2}' "$work/$tag.sniff")
  echo "$tag: statuses $rc0 $rc1, clear message headers on lo: ${hdrs:-?} ($(awk '/^headers/ {print $4}' "$work/$tag.sniff") bytes seen)"
}

fail=0
run clear "" ""
if [ $rc0 != 0 ] || [ $rc1 != 0 ] || [ "${hdrs:-0}" -lt 10 ]; then
  echo "FAIL: the clear job must pass and show its headers (else the sniffer sees nothing)"; tail -n 5 "$work"/clear.*; fail=1
fi
run tls "$work/key" "$work/key"
if [ $rc0 != 0 ] || [ $rc1 != 0 ] || [ "${hdrs:-1}" != 0 ]; then
  echo "FAIL: with the key the job must pass and no clear header may cross the wire"; tail -n 5 "$work"/tls.*; fail=1
fi
grep -q '#wrong' "$work/tls.0" && awk '$1 ~ /^[0-9]+$/ && ($9 != 0 || $13 != 0) {bad=1} END {exit bad}' "$work/tls.0" ||
  { echo "FAIL: wrong results with encryption"; fail=1; }
grep -q 'encrypted: TLS 1.3' "$work/tls.0" || { echo "FAIL: rank 0 did not log encrypted connections"; fail=1; }
run mixed "$work/key" "$work/other"
if [ $rc0 = 0 ] || [ $rc1 = 0 ]; then echo "FAIL: ranks with different keys ran a job"; fail=1; fi
grep -q 'pre-shared key' "$work/mixed.1" || { echo "FAIL: the refused rank does not say why"; tail -3 "$work/mixed.1"; fail=1; }
exit $fail
