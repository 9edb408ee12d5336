#!/usr/bin/env bash
# Every perf binary for real on the host backend, with -c 1 on small sizes: 2 ranks as -g 2, as -t 2
# and as 2 processes (weftrun, or WEFT_RANK/NCCL_COMM_ID by hand), 4 ranks as -t 2 -g 2 with -J.
# Checks exit status 0, nccl-tests' header/table/footer shape, "# Out of bounds values : 0 OK", the
# busbw factor and algbw in the JSON records, and that a corrupted result (PERF_TEST_CORRUPT=1) is
# counted in #wrong and fails the run with status 7.
set -u
cd "$(dirname "$0")/../.."
BIN=${BUILD:-build}/bin
PERFS="all_reduce all_gather broadcast reduce reduce_scatter sendrecv alltoall gather scatter hypercube"
ARGS="-b 8 -e 1M -f 4 -c 1 -w 1 -n 2"
SIZES="8 32 128 512 2048 8192 32768 131072 524288"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for p in $PERFS; do
  [ -x "$BIN/${p}_perf" ] || { echo "SKIP: $BIN/${p}_perf not built (make perf)"; exit 77; }
done
fail=0
bad() { echo "FAIL $*"; fail=1; }

free_port() { # a port nobody listens on, below Linux's ephemeral range (32768 up): a port there may
  # still be the local end of a closing connection of an earlier run, and then the root cannot bind it
  local p
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 12000))
    ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && { echo "$p"; return; }
  done
  echo 29517
}

# Header, table and footer as nccl-tests prints them; $1 name, $2 output file.
check_shape() {
  local p=$1 f=$2 rows
  grep -q '^# nccl-tests version [0-9.]* nccl-headers=[0-9]* nccl-library=[0-9]*$' "$f" || bad "$p: version line"
  grep -qx "# Collective test starting: ${p}_perf" "$f" || bad "$p: starting line"
  grep -q '^# nThread [0-9]* nGpus [0-9]* minBytes 8 maxBytes 1048576 step: 4(factor) warmup iters: 1 iters: 2 agg iters: 1 validation: 1 graph: 0 unalign: 0$' "$f" || bad "$p: parameters line"
  grep -q '^#  Rank  1 Group  0 Pid *[0-9]* on .* device  *[0-9]* \[0000:00:00\] ' "$f" || bad "$p: device lines"
  grep -qxF '#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong ' "$f" || bad "$p: column header"
  grep -qxF '#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         ' "$f" || bad "$p: units header"
  local num='[0-9.e+-]+' wrong='(0|N/A)'
  rows=$(grep -cE "^ +[0-9]+ +[0-9]+ +float +(sum|none|) +-?[0-9]+ +$num +$num +$num +0 +$num +$num +$num +$wrong$" "$f")
  [ "$rows" = 9 ] || bad "$p: $rows well-formed rows, expected 9"
  [ "$(grep -c '^ ' "$f")" = 9 ] || bad "$p: stray lines in the table"
  case $p in all_reduce | broadcast | reduce | sendrecv)
    [ "$(awk '/^ +[0-9]/ {printf "%s ", $1}' "$f")" = "$SIZES " ] || bad "$p: size column" ;;
  esac
  grep -qx '# Out of bounds values : 0 OK' "$f" || bad "$p: out of bounds line"
  grep -qE '^# Avg bus bandwidth    : [0-9.e+-]+ $' "$f" || bad "$p: avg bus bandwidth line"
  grep -qx "# Collective test concluded: ${p}_perf" "$f" || bad "$p: concluded line"
}

factor() { # busbw/algbw for n ranks, from nccl-tests' PERFORMANCE.md
  case $1 in
    all_reduce) echo "2*($2-1)/$2" ;;
    broadcast | reduce | sendrecv | hypercube) echo 1 ;;
    *) echo "($2-1)/$2" ;;
  esac
}

# JSON records: bus_bw = alg_bw x factor, alg_bw = bytes / time (hypercube moves (n-1)/n of size).
check_json() {
  local p=$1 f=$2 n=$3 fac recs
  [ -s "$f" ] || { bad "$p: no JSON file"; return; }
  if command -v python3 >/dev/null; then python3 -m json.tool "$f" >/dev/null || bad "$p: invalid JSON"; fi
  fac=$(awk "BEGIN{print $(factor "$p" "$n")}")
  recs=$(grep -o '"size":[0-9]*[^}]*"out_of_place":{[^}]*}' "$f" |
    sed -E 's/"size":([0-9]+).*"time":([0-9.e+-]+),"alg_bw":([0-9.e+-]+),"bus_bw":([0-9.e+-]+),"nwrong":([0-9]+).*/\1 \2 \3 \4 \5/')
  [ "$(echo "$recs" | grep -c .)" = 9 ] || { bad "$p: $(echo "$recs" | grep -c .) JSON records, expected 9"; return; }
  echo "$recs" | awk -v fac="$fac" -v n="$n" -v p="$p" '
    function rel(a, b) { d = a - b; if (d < 0) d = -d; return b == 0 ? d : d / b }
    { bytes = (p == "hypercube") ? $1 * (n - 1) / n : $1
      if ($2 > 0 && rel($3, bytes / 1e3 / $2) > 1e-3) { print p ": algbw " $3 " for " bytes " B in " $2 " us"; bad = 1 }
      if (rel($4, $3 * fac) > 1e-3) { print p ": busbw " $4 " is not algbw " $3 " x " fac; bad = 1 }
      if ($5 != 0) { print p ": nwrong " $5; bad = 1 } }
    END { exit bad }' || bad "$p: JSON numbers"
}

run() { # name, label, output file, command...
  local p=$1 label=$2 out=$3 rc
  shift 3
  timeout 60 "$@" >"$out" 2>&1
  rc=$?
  if [ $rc != 0 ]; then
    bad "$p $label: exit $rc"
    tail -5 "$out" | sed 's/^/    /'
    return 1
  fi
  return 0
}

two_procs() { # name, output file of rank 0
  local p=$1 out=$2 rc0 rc1 port
  if [ -x "$BIN/weftrun" ]; then
    timeout 60 "$BIN/weftrun" -n 2 "$BIN/${p}_perf" $ARGS >"$out" 2>&1 || bad "$p 2 processes (weftrun): exit $?"
    return
  fi
  port=$(free_port)
  NCCL_COMM_ID=127.0.0.1:$port WEFT_RANK=1 WEFT_NRANKS=2 timeout 60 "$BIN/${p}_perf" $ARGS >"$out.1" 2>&1 &
  NCCL_COMM_ID=127.0.0.1:$port WEFT_RANK=0 WEFT_NRANKS=2 timeout 60 "$BIN/${p}_perf" $ARGS >"$out" 2>&1
  rc0=$?
  wait $!
  rc1=$?
  [ $rc0 = 0 ] && [ $rc1 = 0 ] || bad "$p 2 processes: exit $rc0 / $rc1"
  [ "$(grep -c '^ ' "$out.1")" = 0 ] || bad "$p: rank 1 printed table rows"
}

for p in $PERFS; do
  start=$SECONDS
  run "$p" "-g 2" "$TMP/$p.g" "$BIN/${p}_perf" $ARGS -g 2 && check_shape "$p" "$TMP/$p.g"
  run "$p" "-t 2" "$TMP/$p.t" "$BIN/${p}_perf" $ARGS -t 2 && check_shape "$p" "$TMP/$p.t"
  run "$p" "-t 2 -g 2 -J" "$TMP/$p.tg" "$BIN/${p}_perf" $ARGS -t 2 -g 2 -J "$TMP/$p.json" &&
    check_shape "$p" "$TMP/$p.tg" && check_json "$p" "$TMP/$p.json" 4
  two_procs "$p" "$TMP/$p.mp"
  check_shape "$p" "$TMP/$p.mp"
  grep -q '^#  Rank  1 Group  0 Pid' "$TMP/$p.mp" || bad "$p: rank 1 missing from 2-process device lines"

  # A flipped output element on rank 0 must show in #wrong and fail the run with nccl-tests' status 7.
  PERF_TEST_CORRUPT=1 timeout 60 "$BIN/${p}_perf" $ARGS -g 2 >"$TMP/$p.bad" 2>&1
  rc=$?
  [ $rc = 7 ] || bad "$p corrupted: exit $rc, expected 7"
  grep -qE '^# Out of bounds values : [1-9][0-9]* FAILED$' "$TMP/$p.bad" || bad "$p corrupted: no FAILED count"
  # #wrong columns counted from the end: hypercube's empty redop column has no field of its own.
  awk '/^ +[0-9]/ && $1 > 0 && ($(NF - 4) > 0 || $NF > 0) {found = 1} END {exit !found}' "$TMP/$p.bad" ||
    bad "$p corrupted: no row with #wrong > 0"
  echo "ok   ${p}_perf ($((SECONDS - start))s)"
done

# NCCL_TESTS_MIN_BW above what any host reaches: "FAILED" after the average and status 7.
NCCL_TESTS_MIN_BW=1000000 timeout 60 "$BIN/all_reduce_perf" -b 1K -e 1K -g 2 -n 2 >"$TMP/minbw" 2>&1
rc=$?
[ $rc = 7 ] && grep -qE '^# Avg bus bandwidth    : [0-9.e+-]+ FAILED$' "$TMP/minbw" || bad "NCCL_TESTS_MIN_BW: exit $rc"
# -T: a rank whose peer never starts is stopped after the timeout with nccl-tests' status 4.
NCCL_COMM_ID=127.0.0.1:$(free_port) WEFT_RANK=0 WEFT_NRANKS=2 timeout 30 "$BIN/all_reduce_perf" -T 1 -b 8 -e 8 \
  >"$TMP/timeout" 2>&1
rc=$?
[ $rc = 4 ] && grep -q 'Test timeout (1s)' "$TMP/timeout" || { bad "-T 1 with a missing peer: exit $rc"; tail -n 5 "$TMP/timeout"; }
exit $fail
