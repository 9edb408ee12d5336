#!/usr/bin/env bash
# weftrun hands every rank of a job the same fresh WEFT_JOB_SECRET (a user's own is kept), and a
# rank started by hand with the wrong secret is refused by the job's root with an error saying
# why, while the real job (2 ranks of all_reduce_perf, results checked) completes.
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BIN:-$ROOT/${BUILD:-build}/bin}
for b in weftrun all_reduce_perf; do
  [ -x "$BIN/$b" ] || { echo "FAIL: $BIN/$b not built"; exit 1; }
done
T=$(mktemp -d "${TMPDIR:-/tmp}/weftrun-secret.XXXXXX")
trap 'rm -rf "$T"' EXIT
failed=0
pass() { echo "PASS: $1"; }
fail() { echo "FAIL: $1"; failed=$((failed + 1)); }
export WEFT_BOOTSTRAP_TIMEOUT=30 NCCL_SOCKET_IFNAME=lo
unset WEFT_JOB_SECRET NCCL_COMM_ID

# shellcheck disable=SC2016  # expanded by the rank's shell
timeout 20 "$BIN/weftrun" -n 2 sh -c 'echo "$WEFT_JOB_SECRET" > '"$T"'/s.$WEFT_RANK' </dev/null
timeout 20 "$BIN/weftrun" -n 1 sh -c 'echo "$WEFT_JOB_SECRET" > '"$T"'/s.again' </dev/null
if [ -s "$T/s.0" ] && cmp -s "$T/s.0" "$T/s.1" && [ "$(tr -d '\n' <"$T/s.0" | wc -c)" -eq 64 ]; then
  pass "both ranks got the same 64-hex-digit secret"
else
  fail "ranks' secrets: '$(cat "$T/s.0" 2>/dev/null)' '$(cat "$T/s.1" 2>/dev/null)'"
fi
cmp -s "$T/s.0" "$T/s.again" && fail "two jobs got the same secret" || pass "each job gets a fresh secret"
WEFT_JOB_SECRET=mine timeout 20 "$BIN/weftrun" -n 1 sh -c 'echo "$WEFT_JOB_SECRET" > '"$T"'/s.user' </dev/null
[ "$(cat "$T/s.user")" = mine ] && pass "a user's WEFT_JOB_SECRET is kept" || fail "user's secret replaced"

# Rank 1 of the real job waits until the intruder has tried.
cat >"$T/rank.sh" <<SH
#!/bin/sh
echo "\$NCCL_COMM_ID" > "$T/commid.\$WEFT_RANK"
if [ "\$WEFT_RANK" = 1 ]; then
  i=0; while [ ! -e "$T/go" ] && [ \$i -lt 300 ]; do sleep 0.1; i=\$((i + 1)); done
fi
exec "$BIN/all_reduce_perf" -b 1K -e 1K -c 1 -n 2 -w 1
SH
chmod +x "$T/rank.sh"
timeout 60 "$BIN/weftrun" -n 2 "$T/rank.sh" >"$T/job.out" 2>&1 </dev/null &
job=$!
for _ in $(seq 100); do [ -s "$T/commid.1" ] && break; sleep 0.1; done
sleep 0.5 # rank 0 has started the root
NCCL_COMM_ID=$(cat "$T/commid.1") WEFT_JOB_SECRET=wrong WEFT_RANK=1 WEFT_NRANKS=2 \
  timeout 30 "$BIN/all_reduce_perf" -b 1K -e 1K -n 1 -w 0 >"$T/intruder.out" 2>&1 </dev/null
rc=$?
touch "$T/go"
wait $job
jobrc=$?
if [ $rc -ne 0 ] && grep -q "do not hold its job key" "$T/intruder.out"; then
  pass "a rank with the wrong secret is refused and told why"
else
  fail "intruder rc=$rc"; sed 's/^/    intruder: /' "$T/intruder.out" | tail -8
fi
if [ $jobrc -eq 0 ] && grep -q "Out of bounds values : 0" "$T/job.out"; then
  pass "the real job completes with right results"
else
  fail "real job rc=$jobrc"; sed 's/^/    job: /' "$T/job.out" | tail -12
fi
[ $failed -eq 0 ]
