#!/usr/bin/env bash
# An interface that cannot reach the other host, planted between two network-namespace hosts
# (tests/net/netns.sh): both are on one bridge through eth0, and each also has an eth1 in a
# second subnet whose cable ends on no bridge. weft-doctor -H <other host> on host 0 passes through
# eth0 and blocks (exit 1, net.reach) through eth1; NCCL_SOCKET_IFNAME naming no interface blocks
# as net.ifname.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/${BUILD:-build}/bin
[ -x "$BIN/weft-doctor" ] || { echo "FAIL: $BIN/weft-doctor not built"; exit 1; }
NETNS_ID=${NETNS_ID:-$$}
. "$ROOT/tests/net/netns.sh"
why=$(netns_usable) || { echo "SKIP: $why"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/weft-doctor-net.XXXXXX")
trap 'netns_down; rm -rf "$T"' EXIT
trap 'exit 1' INT TERM
netns_up 2 || { echo "FAIL: cannot build the namespace hosts"; exit 1; }
ISLAND=10.77.$((NETNS_ID % 200 + 20))
for h in 0 1; do
  # The other end stays in the switch namespace, up but on no bridge: a cable to nowhere.
  ip link add "wd${NETNS_ID}h$h" netns "$NS_PREFIX$h" type veth peer name "i$h" netns "$NS_SWITCH" || exit 1
  ip -n "$NS_PREFIX$h" link set "wd${NETNS_ID}h$h" name eth1
  ip -n "$NS_PREFIX$h" addr add "$ISLAND.$((h + 1))/24" dev eth1
  ip -n "$NS_PREFIX$h" link set eth1 up
  ip -n "$NS_SWITCH" link set "i$h" up
done
H1=$(netns_addr 1)
fail=0

# doctor IFNAME OUT ARGS...: weft-doctor on host 0 with NCCL_SOCKET_IFNAME=IFNAME; sets rc.
doctor() {
  local ifname=$1 out=$2
  shift 2
  ip netns exec "${NS_PREFIX}0" env NCCL_SOCKET_IFNAME="$ifname" "$BIN/weft-doctor" --timeout-ms 1000 "$@" \
    >"$T/$out" 2>&1
  rc=$?
  grep 'net\.' "$T/$out"
  # The exit status follows the worst finding; other families (this machine's /dev/shm, ...) may
  # block too, so "no net finding blocks" is what a passing case checks.
  net_blocks=$(grep -c '^blocks net\.' "$T/$out")
  [ $rc = $(($(grep -c '^blocks' "$T/$out") > 0)) ] || [ "$out" = bad.txt ] || { echo "FAIL: exit $rc"; fail=1; }
}

doctor eth0 good.txt -H "$H1"
[ "$net_blocks" = 0 ] || { echo "FAIL: through eth0 a net check blocks"; fail=1; }
grep -q "^ok     net.reach .*$H1.* answers through eth0" "$T/good.txt" || { echo "FAIL: eth0 does not reach $H1"; fail=1; }

doctor eth1 bad.txt -H "$H1" --json
[ $rc = 1 ] || { echo "FAIL: through eth1 weft-doctor exited $rc, expected 1"; fail=1; }
python3 - "$T/bad.txt" "$H1" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
reach = [f for f in d["findings"] if f["id"] == "net.reach"]
ok = (d["blocks"] and len(reach) == 1 and reach[0]["severity"] == "blocks"
      and sys.argv[2] in reach[0]["seen"] and "eth1" in reach[0]["seen"] and "NCCL_SOCKET_IFNAME" in reach[0]["fix"])
print("json net.reach:", "ok" if ok else "FAIL: %r" % reach)
sys.exit(0 if ok else 1)
PY

# A host list file names the same host; an interface name matching nothing blocks before probing.
printf '# hosts\n%s slots=1\n' "$H1" >"$T/hosts"
doctor eth0 file.txt --hostfile "$T/hosts"
[ "$net_blocks" = 0 ] && grep -q "^ok     net.reach" "$T/file.txt" || { echo "FAIL: --hostfile"; fail=1; }
doctor ens9 none.txt -H "$H1"
[ $rc = 1 ] && grep -q "^blocks net.ifname .*NCCL_SOCKET_IFNAME=ens9" "$T/none.txt" || { echo "FAIL: ens9"; fail=1; }
grep -q "fix: Set NCCL_SOCKET_IFNAME to one of: .*eth0" "$T/none.txt" || { echo "FAIL: ens9 fix lists eth0"; fail=1; }

# NCCL_SOCKET_IFNAME=eth selects both: eth0 reaches, eth1 (given a smaller MTU) does not: warnings.
ip -n "${NS_PREFIX}0" link set eth1 mtu 1400
doctor eth both.txt -H "$H1"
[ "$net_blocks" = 0 ] || { echo "FAIL: with eth0 reaching, a net check blocks"; fail=1; }
grep -q "^warn   net.mtu .*eth0 mtu 1500, eth1 mtu 1400" "$T/both.txt" || { echo "FAIL: no MTU mismatch"; fail=1; }
grep -q "^warn   net.reach .*through eth1" "$T/both.txt" || { echo "FAIL: eth1 not reported"; fail=1; }

# The library meets the same interface: a 2-host job on eth1 fails at init, and the failed
# connection's WARN points at the check (one quick retry, so the test stays short).
. "$ROOT/tests/net/lib.sh"
NET_RANKS=$ROOT/${BUILD:-build}/tests/net/net_ranks
if [ -x "$NET_RANKS" ]; then
  NCCL_SOCKET_IFNAME=eth1 NCCL_SOCKET_RETRY_CNT=1 WEFT_BOOTSTRAP_TIMEOUT=20 NCCL_DEBUG=WARN JOB_LIMIT=60 \
    run_job 2 1 "$(netns_addr 0)" check "$NS_PREFIX"
  echo "job on eth1: statuses ${RCS[*]}"
  [ "${RCS[0]}" != 0 ] || [ "${RCS[1]}" != 0 ] || { echo "FAIL: the job ran over eth1"; fail=1; }
  cat "$NET_LOG"/rank*.log >"$T/job.txt"
  grep -m2 "Connect to" "$T/job.txt"
  grep -q "check net.reach" "$T/job.txt" || { echo "FAIL: no WARN names check net.reach"; fail=1; }
  rm -rf "$NET_LOG"
else
  echo "note: $NET_RANKS not built, library half not run"
fi

[ $fail = 0 ] && echo "PASS: the unreachable interface between namespace hosts is found"
exit $fail
