#!/usr/bin/env bash
# A misspelt variable (NCCL_SOCKET_IFNAM=lo) is found by weft-doctor ("did you mean
# NCCL_SOCKET_IFNAME", a warning: exit 0) and warned once by the library at init, in a 2-rank job;
# the right spelling, and a name only NVIDIA's NCCL reads (NCCL_IB_HCA), draw neither.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/${BUILD:-build}/bin
for b in weft-doctor weftrun all_reduce_perf; do
  [ -x "$BIN/$b" ] || { echo "FAIL: $BIN/$b not built"; exit 1; }
done
export WEFT_BACKEND=host WEFTRUN_GRACE_SECONDS=1
T=$(mktemp -d "${TMPDIR:-/tmp}/weft-doctor-env.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail=0
MSG='NCCL_SOCKET_IFNAM is set but nothing reads it; did you mean NCCL_SOCKET_IFNAME?'

NCCL_SOCKET_IFNAM=lo NCCL_IB_HCA=mlx5_0 "$BIN/weft-doctor" --problems >"$T/doctor.txt" 2>&1
rc=$?
cat "$T/doctor.txt"
# A misspelling warns, it does not block: exit 1 only where this machine has a blocking finding.
others=$(grep -c '^blocks' "$T/doctor.txt")
[ $rc = $((others > 0)) ] || { echo "FAIL: weft-doctor exited $rc with $others blocking finding(s)"; fail=1; }
grep -qF "warn   env.spelling     $MSG" "$T/doctor.txt" || { echo "FAIL: weft-doctor missed the misspelling"; fail=1; }
grep -qF "fix: Rename NCCL_SOCKET_IFNAM to NCCL_SOCKET_IFNAME" "$T/doctor.txt" || { echo "FAIL: no fix"; fail=1; }
grep -q "NCCL_IB_HCA" "$T/doctor.txt" && { echo "FAIL: NCCL_IB_HCA (known to NVIDIA NCCL) was flagged"; fail=1; }

NCCL_SOCKET_IFNAM=lo "$BIN/weft-doctor" --json >"$T/doctor.json" 2>&1
python3 - "$T/doctor.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
hits = [f for f in d["findings"] if f["id"] == "env.spelling" and f["severity"] == "warn"
        and "did you mean NCCL_SOCKET_IFNAME" in f["seen"]]
print("json env.spelling:", "ok" if len(hits) == 1 else "FAIL: %r" % d)
sys.exit(0 if len(hits) == 1 else 1)
PY

# run_job SPELLING OUT: a 2-rank all_reduce_perf with NCCL_<SPELLING>=lo, WARNs logged.
run_job() {
  env "NCCL_$1=lo" NCCL_DEBUG=WARN NCCL_IB_HCA=mlx5_0 timeout -k 5 60 "$BIN/weftrun" -n 2 \
    "$BIN/all_reduce_perf" -b 8 -e 8 -n 1 -w 0 >"$T/$2" 2>&1
  rc=$?
}
run_job SOCKET_IFNAM bad.txt
[ $rc = 0 ] || { echo "FAIL: the job failed ($rc)"; tail -n 5 "$T/bad.txt"; fail=1; }
n=$(grep -cF "NCCL WARN $MSG" "$T/bad.txt")
grep -m1 -F "$MSG" "$T/bad.txt"
[ "$n" = 2 ] || { echo "FAIL: $n WARN line(s) for 2 ranks, expected one per rank"; fail=1; }
run_job SOCKET_IFNAME good.txt
[ $rc = 0 ] || { echo "FAIL: the job failed ($rc)"; fail=1; }
grep -q "did you mean" "$T/good.txt" && { echo "FAIL: a WARN for correct names"; fail=1; }

[ $fail = 0 ] && echo "PASS: the misspelt variable is found by weft-doctor and warned at init"
exit $fail
