#!/usr/bin/env bash
# An undersized /dev/shm, planted in a private mount namespace (unshare -m, then a 1 MiB tmpfs on
# /dev/shm), is found twice: weft-doctor --ranks 2 reports shm.size as blocking (exit 1, text and
# JSON), and a 2-rank job's init fails with a WARN that names the check. A roomy tmpfs in the same
# way passes, so the finding comes from the size, not from the namespace. With NCCL_SHM_DISABLE=1
# the doctor is content and the job runs on the small /dev/shm.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/${BUILD:-build}/bin
for b in weft-doctor weftrun all_reduce_perf; do
  [ -x "$BIN/$b" ] || { echo "FAIL: $BIN/$b not built"; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to mount a tmpfs in a mount namespace"; exit 77; }
command -v unshare >/dev/null || { echo "SKIP: needs unshare (util-linux)"; exit 77; }
unshare -m true 2>/dev/null || { echo "SKIP: cannot create a mount namespace here"; exit 77; }
export WEFT_BACKEND=host WEFTRUN_GRACE_SECONDS=1
unset WEFT_SHM_DIR
T=$(mktemp -d "${TMPDIR:-/tmp}/weft-doctor-shm.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail=0

# in_small_shm SIZE CMD...: CMD with a fresh tmpfs of SIZE on /dev/shm, seen by CMD only.
in_shm() {
  local size=$1
  shift
  unshare -m --propagation private bash -c 'mount -t tmpfs -o size="$0" weft-doctor-test /dev/shm && exec "$@"' \
    "$size" "$@"
}

in_shm 1m "$BIN/weft-doctor" --ranks 2 >"$T/small.txt" 2>&1
rc=$?
cat "$T/small.txt"
[ $rc = 1 ] || { echo "FAIL: weft-doctor exited $rc with a 1 MiB /dev/shm, expected 1"; fail=1; }
grep -q '^blocks shm.size .*1.0 MiB free' "$T/small.txt" || { echo "FAIL: no blocking shm.size finding"; fail=1; }
grep -q 'fix: Give /dev/shm at least' "$T/small.txt" || { echo "FAIL: shm.size without its fix"; fail=1; }

in_shm 1m "$BIN/weft-doctor" --ranks 2 --json >"$T/small.json" 2>&1
python3 - "$T/small.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
shm = [f for f in d["findings"] if f["id"] == "shm.size"]
ok = d["blocks"] is True and len(shm) == 1 and shm[0]["severity"] == "blocks" and shm[0]["fix"]
print("json:", "ok" if ok else "FAIL: %r" % shm)
sys.exit(0 if ok else 1)
PY

in_shm 256m "$BIN/weft-doctor" --ranks 2 >"$T/big.txt" 2>&1
grep -q '^ok     shm.size' "$T/big.txt" || { echo "FAIL: a 256 MiB /dev/shm is not ok for 2 ranks:"; cat "$T/big.txt"; fail=1; }

# The library meets the same /dev/shm: init fails and its WARN names the doctor's check.
in_shm 1m timeout -k 5 60 "$BIN/weftrun" -n 2 "$BIN/all_reduce_perf" -b 8 -e 8 -n 1 -w 0 >"$T/job.txt" 2>&1
rc=$?
tail -n 4 "$T/job.txt"
[ $rc != 0 ] || { echo "FAIL: the job ran with a 1 MiB /dev/shm"; fail=1; }
grep -q 'weft-doctor check shm.size' "$T/job.txt" || { echo "FAIL: init's error does not name check shm.size"; fail=1; }

# The usual way out in a container, as with NCCL: NCCL_SHM_DISABLE=1. The doctor says the size
# no longer matters, and the same job runs, its two processes joined through the network.
export NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo
in_shm 1m "$BIN/weft-doctor" --ranks 2 >"$T/off.txt" 2>&1
grep -q '^ok     shm.size .*NCCL_SHM_DISABLE=1' "$T/off.txt" || {
  echo "FAIL: with NCCL_SHM_DISABLE=1 shm.size is not ok:"
  cat "$T/off.txt"
  fail=1
}
in_shm 1m timeout -k 5 60 "$BIN/weftrun" -n 2 "$BIN/all_reduce_perf" -b 8 -e 1M -f 16 -n 2 -w 1 -c 1 >"$T/off_job.txt" 2>&1
rc=$?
tail -n 4 "$T/off_job.txt"
[ $rc = 0 ] && grep -q 'Out of bounds values : 0 OK' "$T/off_job.txt" || {
  echo "FAIL: with NCCL_SHM_DISABLE=1 the job did not run correctly on a 1 MiB /dev/shm (exit $rc)"
  fail=1
}
unset NCCL_SHM_DISABLE NCCL_SOCKET_IFNAME

[ $fail = 0 ] && echo "PASS: undersized /dev/shm found by weft-doctor and named by init; NCCL_SHM_DISABLE=1 gets past it"
exit $fail
