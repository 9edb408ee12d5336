#!/usr/bin/env bash
# External net plugins loaded as a user loads them (NCCL_NET_PLUGIN), between ranks acting as
# different hosts (WEFT_HOSTID per rank, so every pair of ranks talks over the network): checked
# all-reduces and all-gathers over 2 and 3 ranks through the test plugin built for ABI v8 (by
# name, found on LD_LIBRARY_PATH) and for ABI v12 (by path), over 2 ranks for v6, v7, v9-v11, with the log saying the plugin was
# loaded and chosen and the plugin saying it carried bytes (and left nothing registered). Then what goes wrong must be plain:
# NCCL_NET_PLUGIN=none, a missing plugin, a library without the symbol (WARN, Socket used), and
# NCCL_NET naming an unknown network (a clear error at init, no hang). Mismatched calls across
# hosts over a plugin are found and named (test_coll_mismatch hosts).
set -u
cd "$(dirname "$0")/../.."
. tests/net/lib.sh
trap 'rm -rf "$NET_LOG"' EXIT
PLUGINS=$(cd "${BUILD:-build}/tests/net/plugin" 2>/dev/null && pwd)
[ -f "$PLUGINS/libnccl-net-tcptest8.so" ] || { echo "FAIL: no test plugins under ${BUILD:-build}/tests/net/plugin (make tests)"; exit 1; }
export NCCL_SOCKET_IFNAME=lo WEFT_TIMEOUT=60 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET JOB_LIMIT=120
fail=0

# expect LABEL PATTERN: every rank's log has a line matching PATTERN.
expect() {
  local f
  for f in "$NET_LOG"/rank*.log; do
    grep -Eq -- "$2" "$f" && continue
    echo "FAIL $1: $(basename "$f") has no line matching: $2"
    fail=1
    return 1
  done
}
# refuse LABEL PATTERN: no rank's log has a line matching PATTERN.
refuse() {
  if grep -Eq -- "$2" "$NET_LOG"/rank*.log; then
    echo "FAIL $1: a log has: $(grep -Eh -- "$2" "$NET_LOG"/rank*.log | head -1)"
    fail=1
  fi
}
# bytes_carried: every rank's plugin sent more than 0 bytes in all (its send comms' closing lines).
bytes_carried() {
  local f total
  for f in "$NET_LOG"/rank*.log; do
    total=$(grep -Eo 'tcptest: send comm closed, [0-9]+ bytes sent' "$f" | awk '{s += $5} END {print s + 0}')
    echo "  $(basename "$f" .log): the plugin sent $total bytes"
    [ "$total" -gt 0 ] || { echo "FAIL $1: $(basename "$f") shows no bytes sent by the plugin"; fail=1; }
  done
}
# job LABEL HOSTS: one 'short' job; every rank must pass.
job() {
  local start
  start=$(date +%s)
  run_job "$2" 1 127.0.0.1 short
  report_job "$1" "$start" || fail=1
}

for n in 2 3; do
  LD_LIBRARY_PATH=$PLUGINS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} NCCL_NET_PLUGIN=tcptest8 job "v8 by name, $n ranks" $n
  expect "v8 $n" "NET/Plugin: loaded TcpTest-v8 from libnccl-net-tcptest8.so \(net plugin ABI v8\)"
  expect "v8 $n" "Using network TcpTest-v8"
  bytes_carried "v8 $n"
  refuse "v8 $n" "registrations left"
  NCCL_NET_PLUGIN=$PLUGINS/libnccl-net-tcptest12.so job "v12 by path, $n ranks" $n
  expect "v12 $n" "NET/Plugin: loaded TcpTest-v12 .*\(net plugin ABI v12\)"
  expect "v12 $n" "CollNet plugin TcpTest-CollNet \(v12\) found .*not implemented, so it is not used"
  expect "v12 $n" "Using network TcpTest-v12"
  bytes_carried "v12 $n"
  refuse "v12 $n" "registrations left"
done

# Mismatched calls between emulated hosts over a plugin: the steps' call tags travel in the
# adapter's own message header, so every case fails with the mismatch named, as over Socket and IB.
if NCCL_NET_PLUGIN=$PLUGINS/libnccl-net-tcptest12.so NCCL_NET=TcpTest-v12 NCCL_DEBUG=WARN \
  "${BUILD:-build}/tests/integration/test_coll_mismatch" hosts >"$NET_LOG/mismatch.out" 2>&1; then
  echo "ok: mismatched calls across hosts over the v12 plugin"
else
  echo "FAIL mismatched calls across hosts over the v12 plugin:"
  grep -E '^(FAIL|FAILED)' "$NET_LOG/mismatch.out" | head -20
  fail=1
fi

# The other ABI versions the loader takes, 2 ranks each (tests/unit/test_net_conformance runs the
# network-level cases over all of them).
for v in 6 7 9 10 11; do
  NCCL_NET_PLUGIN=$PLUGINS/libnccl-net-tcptest$v.so job "v$v by path, 2 ranks" 2
  expect "v$v" "NET/Plugin: loaded TcpTest-v$v .*\(net plugin ABI v$v\)"
  expect "v$v" "Using network TcpTest-v$v"
  bytes_carried "v$v"
  refuse "v$v" "registrations left"
done

# Two plugins: the first is used unless NCCL_NET names another (any case).
NCCL_NET_PLUGIN=$PLUGINS/libnccl-net-tcptest8.so,$PLUGINS/libnccl-net-tcptest12.so NCCL_NET=tcptest-V12 \
  job "NCCL_NET picks the second of two plugins" 2
expect "NCCL_NET=tcptest-V12" "Using network TcpTest-v12"
NCCL_NET_PLUGIN=$PLUGINS/libnccl-net-tcptest8.so NCCL_NET=Socket job "NCCL_NET=Socket past a plugin" 2
expect "NCCL_NET=Socket" "Using network Socket"

NCCL_NET_PLUGIN=none job "NCCL_NET_PLUGIN=none" 2
expect "none" "NCCL_NET_PLUGIN=none; no plugin loaded"
expect "none" "Using network Socket"
refuse "none" "NET/Plugin: loaded"

NCCL_NET_PLUGIN=nosuchplugin job "a missing plugin" 2
expect "missing" "WARN NET/Plugin: cannot load NCCL_NET_PLUGIN entry 'nosuchplugin' \(.*libnccl-net-nosuchplugin.so"
expect "missing" "Using network Socket"

NCCL_NET_PLUGIN=$PLUGINS/libnccl-net-nosym.so job "a library without the symbol" 2
expect "no symbol" "WARN NET/Plugin: .*libnccl-net-nosym.so exports none of ncclNetPlugin_v12..v6"
expect "no symbol" "Using network Socket"

# Encryption asked for, a plugin network chosen: refused (a plugin cannot encrypt), not run in clear.
if ldconfig -p 2>/dev/null | grep -q 'libssl.so.3 '; then
  printf 'plugin test key\n' >"$NET_LOG/key" && chmod 600 "$NET_LOG/key"
  start=$(date +%s)
  JOB_LIMIT=60 WEFT_PSK_FILE=$NET_LOG/key NCCL_NET_PLUGIN=$PLUGINS/libnccl-net-tcptest8.so run_job 2 1 127.0.0.1 short
  echo "encryption with a plugin network: statuses ${RCS[*]} ($(($(date +%s) - start)) s)"
  for rc in "${RCS[@]}"; do [ "$rc" = 2 ] || { echo "FAIL encryption: a rank exited $rc, not 2 (init failed)"; fail=1; }; done
  expect "encryption" "NET/Plugin TcpTest-v8: encryption is on .* a plugin network cannot encrypt"
else
  echo "encryption with a plugin network: not checked (no libssl.so.3)"
fi

# An unknown NCCL_NET fails every rank's init at once (exit 2 from net_ranks), naming the value
# and what there is.
start=$(date +%s)
JOB_LIMIT=60 NCCL_NET_PLUGIN=$PLUGINS/libnccl-net-tcptest8.so NCCL_NET=NoSuchNet run_job 2 1 127.0.0.1 short
echo "unknown NCCL_NET: statuses ${RCS[*]} ($(($(date +%s) - start)) s)"
for rc in "${RCS[@]}"; do [ "$rc" = 2 ] || { echo "FAIL unknown NCCL_NET: a rank exited $rc, not 2 (init failed)"; fail=1; }; done
expect "unknown NCCL_NET" "NCCL_NET=NoSuchNet names no usable network; the networks available are: TcpTest-v8, IB, Socket"

[ $fail = 0 ] || dump_logs
exit $fail
