#!/usr/bin/env bash
# External tuner plugins loaded by NCCL_TUNER_PLUGIN as users load them (tests/plugin/tuner_force.c
# built for ABI v6..v2): the pair the plugin forces is what runs (the TUNING plan line of every
# rank, and rank 0's explanation names the plugin), results are right, getCollInfo is asked once
# per collective per rank, finalize runs for every communicator (split children and aborted comms
# too); without a plugin, with none, with a missing name, a library without the symbol, or a
# failing plugin, the model's own choice runs; ranks that did not all load it all use the model.
set -u
cd "$(dirname "$0")/../.."
B=${BUILD:-build}
P=$B/tests/plugin
JOB=$P/tuner_job
[ -x "$JOB" ] && [ -f "$P/libnccl-tuner-force6.so" ] || { echo "tuner test plugins not built (make tests)"; exit 1; }
fail=0
err() { echo "FAILED: $*"; fail=1; }
tmp=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
NR=4 COUNT=262144 IT=3 # 1 MiB all-reduces: the model picks Simple there, never Tree/LL
export WEFT_BACKEND=host WEFT_HOST_COPY_BW=10 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING,ENV
unset NCCL_TUNER_PLUGIN NCCL_NET_PLUGIN NCCL_ALGO NCCL_PROTO TEST_TUNER_FORCE TEST_TUNER_NCHANNELS TEST_TUNER_FAIL

# run NAME [env...]: the job with the plugin directory on the library path (names resolve there);
# the count file is $tmp/NAME.count, the log $tmp/NAME.log.
run() {
  local name=$1
  shift
  rm -f "$tmp/$name.count"
  env LD_LIBRARY_PATH="$P${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" TEST_TUNER_COUNT_FILE="$tmp/$name.count" "$@" \
    "$JOB" $NR $COUNT $IT ${SPLIT:-} >"$tmp/$name.log" 2>&1 || err "$name: the job failed: $(tail -n 3 "$tmp/$name.log")"
  grep -q "^OK: " "$tmp/$name.log" || err "$name: results not checked OK"
}
# pairs NAME: the distinct "algo X proto Y" of the plan lines; plans NAME: how many plan lines.
pairs() { grep -o 'AllReduce seq [0-9]*: [0-9]* bytes, algo [A-Za-z]* proto [A-Za-z]*' "$tmp/$1.log" |
  sed 's/.*algo /algo /' | sort -u | tr '\n' ' '; }
plans() { grep -c 'AllReduce seq [0-9]*: [0-9]* bytes, algo' "$tmp/$1.log"; }
# counted NAME VERSION COMMS: every communicator's finalize wrote one line, IT calls with a sane table.
counted() {
  local n
  n=$(grep -c "^v$2 calls $IT table_ok $IT nranks $NR nnodes 1 last_coll 4 last_bytes $((COUNT * 4))\$" \
    "$tmp/$1.count" 2>/dev/null)
  [ "${n:-0}" = "$3" ] || err "$1: want $3 finalize line(s) 'v$2 calls $IT table_ok $IT ...', got: $(cat "$tmp/$1.count" 2>/dev/null)"
}
forced() { # NAME "algo X proto Y" VERSION
  [ "$(pairs "$1")" = "$2 " ] || err "$1: want only '$2' planned, got '$(pairs "$1")'"
  [ "$(plans "$1")" = $((NR * IT)) ] || err "$1: want $((NR * IT)) planned all-reduces, got $(plans "$1")"
  grep -q "reason: the tuner plugin force (v$3) (NCCL_TUNER_PLUGIN)" "$tmp/$1.log" ||
    err "$1: rank 0's explanation does not name the plugin"
  grep -q "TUNER/Plugin: loaded tuner force (v$3)" "$tmp/$1.log" || err "$1: no INFO naming the plugin and version"
}

# The model's own choice, planned (the direct paths off so that the planner runs every call).
run model WEFT_DIRECT=0
model=$(pairs model)
[ -n "$model" ] || err "no plan lines without a plugin"
case "$model" in *Tree*LL\ *) err "the model picks Tree/LL at 1 MiB: the forcing below would prove nothing" ;; esac
[ -e "$tmp/model.count" ] && err "a plugin ran though none was asked for"

# v6 by name: forces Tree/LL; the direct paths step aside, so every call is asked about.
run v6 NCCL_TUNER_PLUGIN=force6 TEST_TUNER_FORCE=tree,ll
forced v6 "algo Tree proto LL" 6
counted v6 6 $NR
# The plugin's channel count, within the connected channels.
run v6ch NCCL_TUNER_PLUGIN=force6 TEST_TUNER_FORCE=ring,ll TEST_TUNER_NCHANNELS=1
forced v6ch "algo Ring proto LL" 6
[ "$(grep -c 'algo Ring proto LL, 1 channel(s)' "$tmp/v6ch.log")" = $((NR * IT)) ] || err "v6ch: the plugin's 1 channel"
grep -q "channels: the tuner plugin's 1" "$tmp/v6ch.log" || err "v6ch: the explanation names the plugin's channels"
# Older ABIs: by file name, by path and by short name; v2 through its shim.
run v5 NCCL_TUNER_PLUGIN=libnccl-tuner-force5.so TEST_TUNER_FORCE=tree,simple
forced v5 "algo Tree proto Simple" 5
counted v5 5 $NR
run v4 NCCL_TUNER_PLUGIN="$PWD/$P/libnccl-tuner-force4.so" TEST_TUNER_FORCE=tree,ll
forced v4 "algo Tree proto LL" 4
counted v4 4 $NR
run v3 NCCL_TUNER_PLUGIN=force3 TEST_TUNER_FORCE=tree,simple
forced v3 "algo Tree proto Simple" 3
counted v3 3 $NR
run v2 NCCL_TUNER_PLUGIN=force2 TEST_TUNER_FORCE=tree,ll
forced v2 "algo Tree proto LL" 2
counted v2 2 $NR
# A pair that was not on offer (NCCL_ALGO excludes Tree) stays out even when the plugin makes it free.
run excluded NCCL_TUNER_PLUGIN=force6 NCCL_ALGO=Ring TEST_TUNER_FORCE=tree,ll TEST_TUNER_RAISE=1
case "$(pairs excluded)" in "" | *Tree*) err "excluded: want Ring only, got '$(pairs excluded)'" ;; esac
counted excluded 6 $NR
# Split children get their own init and finalize.
SPLIT=split run split NCCL_TUNER_PLUGIN=force6 TEST_TUNER_FORCE=tree,ll
counted split 6 $((2 * NR))
[ "$(plans split)" = $((2 * NR * IT)) ] || err "split: want $((2 * NR * IT)) planned all-reduces"

# ncclCommAbort finalizes too.
SPLIT=abort run abort NCCL_TUNER_PLUGIN=force6 TEST_TUNER_FORCE=tree,ll
counted abort 6 $NR

# The default file name libnccl-tuner.so, then the net plugin's library (NCCL's search order).
mkdir -p "$tmp/lib"
ln -s "$PWD/$P/libnccl-tuner-force6.so" "$tmp/lib/libnccl-tuner.so"
run default LD_LIBRARY_PATH="$tmp/lib" TEST_TUNER_FORCE=tree,ll
forced default "algo Tree proto LL" 6
run net NCCL_NET_PLUGIN="$PWD/$P/libnccl-tuner-force3.so" TEST_TUNER_FORCE=tree,simple
forced net "algo Tree proto Simple" 3
grep -q "the net plugin's library" "$tmp/net.log" || err "net: the log says the tuner came from the net plugin"

# none, a missing name, a library without the symbol: WARN (not for none), the model decides.
for c in "none none" "missing doesnotexist" "nosym nosym"; do
  set -- $c
  run "$1" NCCL_TUNER_PLUGIN="$2" TEST_TUNER_FORCE=tree,ll WEFT_DIRECT=0
  [ "$(pairs "$1")" = "$model" ] || err "$1: want the model's '$model', got '$(pairs "$1")'"
  [ -e "$tmp/$1.count" ] && err "$1: the plugin ran"
done
grep -q "WARN" "$tmp/none.log" && err "none: no WARN expected"
grep -q "NCCL_TUNER_PLUGIN set by environment to none" "$tmp/none.log" || err "none: not logged"
grep -q "WARN NCCL_TUNER_PLUGIN=doesnotexist: no such tuner plugin" "$tmp/missing.log" || err "missing: no WARN"
grep -q "WARN NCCL_TUNER_PLUGIN=nosym: .*libnccl-tuner-nosym.so exports none of ncclTunerPlugin_v6" \
  "$tmp/nosym.log" || err "nosym: no WARN"

# A plugin whose getCollInfo fails: one WARN per communicator, the model's choice, still asked each time.
run failing NCCL_TUNER_PLUGIN=force6 TEST_TUNER_FORCE=tree,ll TEST_TUNER_FAIL=1
[ "$(pairs failing)" = "$model" ] || err "failing: want the model's '$model', got '$(pairs failing)'"
[ "$(grep -c 'WARN rank [0-9]: tuner plugin force (v6): getCollInfo failed (internal error' "$tmp/failing.log")" = $NR ] ||
  err "failing: want one WARN per rank"
counted failing 6 $NR

# Process ranks: the same forcing; then ranks that did not all load the plugin (rank 1 says none)
# all fall back to the model, with a WARN, instead of planning the same call differently.
SPLIT=procs run procs NCCL_TUNER_PLUGIN=force6 TEST_TUNER_FORCE=tree,ll
forced procs "algo Tree proto LL" 6
counted procs 6 $NR
SPLIT=procs run differ NCCL_TUNER_PLUGIN=force6 TUNER_JOB_PLUGIN_1=none TEST_TUNER_FORCE=tree,ll WEFT_TIMEOUT=20 \
  WEFT_BOOTSTRAP_TIMEOUT=20
case "$(pairs differ)" in "" | *Tree*LL\ *) err "differ: want the model's choice, got '$(pairs differ)'" ;; esac
[ "$(grep -c 'WARN Rank [0-9]: ranks 0 and 1 did not load the same tuner plugin' "$tmp/differ.log")" = $NR ] ||
  err "differ: want the WARN on every rank"
[ "$(grep -c '^v6 calls 0 ' "$tmp/differ.count" 2>/dev/null)" = $((NR - 1)) ] ||
  err "differ: want finalize, and no call, on the $((NR - 1)) ranks that loaded it"

# The CUDA backend plans through the same planner (collectives/plan.c): on the emulated GPU
# (make emu) every collective of test_gpu_coll (2 thread ranks, each type and op, counts up to
# 3000: the defaults pick LL on 1 channel there) runs the plugin's pair and channel count, and the
# results match the reference. The kernel runs Tree for all-reduce only: a Tree the plugin makes
# free is taken there (a chain of the two ranks), and stays off the other collectives' tables.
EMU=${EMU_BUILD:-build-emu}
if [ -x "$EMU/tests/gpu/test_gpu_coll" ] && [ -f "$EMU/tests/plugin/libnccl-tuner-force6.so" ]; then
  cuda() { # NAME env...
    local name=$1
    shift
    rm -f "$tmp/$name.count"
    env WEFT_BACKEND=cuda WEFT_TIMEOUT=120 LD_LIBRARY_PATH="$EMU/lib:$EMU/tests/plugin" \
      TEST_TUNER_COUNT_FILE="$tmp/$name.count" "$@" timeout 300 "$EMU/tests/gpu/test_gpu_coll" threads 2 3000 \
      >"$tmp/$name.log" 2>&1 || err "$name: test_gpu_coll failed: $(tail -n 3 "$tmp/$name.log")"
    grep -q "^all cases match the reference" "$tmp/$name.log" || err "$name: results not checked"
  }
  # cplans NAME: how many CUDA plan lines; cchoices NAME: their distinct "algo X proto Y, N channel(s)".
  cplans() { grep -c ' bytes, algo [A-Za-z]* proto [A-Za-z]*, [0-9]* channel(s), chunk .* (CUDA)' "$tmp/$1.log"; }
  cchoices() { grep -o ' bytes, algo [A-Za-z]* proto [A-Za-z]*, [0-9]* channel(s), chunk .* (CUDA)' "$tmp/$1.log" |
    sed 's/, chunk.*//; s/ bytes, //' | sort | uniq -c | tr -s ' \n' ' '; }
  cuda cudamodel NCCL_TUNER_PLUGIN=none
  [ "$(cplans cudamodel)" -gt 0 ] || err "cudamodel: no CUDA plan lines"
  case "$(cchoices cudamodel)" in *"proto Simple, 3 channel(s)"*) err "cudamodel: the planner picks Simple on 3 channels itself: the forcing below would prove nothing" ;; esac
  cuda cudaforce NCCL_TUNER_PLUGIN=force6 TEST_TUNER_FORCE=ring,simple TEST_TUNER_NCHANNELS=3
  n=$(cplans cudaforce)
  [ "$n" -gt 0 ] && [ "$(cchoices cudaforce)" = " $n algo Ring proto Simple, 3 channel(s) " ] ||
    err "cudaforce: want all $n plans Ring/Simple on 3 channels, got '$(cchoices cudaforce)'"
  [ "$(grep -c "^v6 calls $((n / 2)) table_ok $((n / 2)) nranks 2 nnodes 1 " "$tmp/cudaforce.count" 2>/dev/null)" = 2 ] ||
    err "cudaforce: want each rank's plugin asked about its $((n / 2)) collectives, got: $(cat "$tmp/cudaforce.count" 2>/dev/null)"
  grep -q "reason: the tuner plugin force (v6) (NCCL_TUNER_PLUGIN); channels: the tuner plugin's 3" "$tmp/cudaforce.log" ||
    err "cudaforce: rank 0's explanation does not name the plugin and its channels"
  grep -q "WARN.*tuner" "$tmp/cudaforce.log" && err "cudaforce: a WARN about the tuner: $(grep 'WARN.*tuner' "$tmp/cudaforce.log" | head -1)"
  cuda cudatree NCCL_TUNER_PLUGIN=force6 TEST_TUNER_FORCE=tree,ll TEST_TUNER_RAISE=1 TEST_TUNER_NCHANNELS=2
  ar=$(grep -c 'AllReduce seq [0-9]*: .* (CUDA)' "$tmp/cudatree.log")
  [ "$ar" -gt 0 ] && [ "$(grep -c 'AllReduce seq [0-9]*: [0-9]* bytes, algo Tree proto LL, 2 channel' "$tmp/cudatree.log")" = "$ar" ] ||
    err "cudatree: want all $ar all-reduce plans Tree/LL on 2 channels"
  grep -v 'AllReduce seq' "$tmp/cudatree.log" | grep -q 'algo Tree.* (CUDA)' &&
    err "cudatree: a Tree planned for a collective other than all-reduce"
  [ "$(grep -c '^v6 calls [1-9]' "$tmp/cudatree.count" 2>/dev/null)" = 2 ] || err "cudatree: the plugin was not asked"
else
  echo "SKIP the CUDA backend's cases: $EMU/tests/gpu/test_gpu_coll or its plugins not built (make emu)"
fi

if [ $fail = 0 ]; then echo "PASS test_tuner_plugin"; else
  echo "logs kept in $tmp.keep"
  cp -r "$tmp" "$tmp.keep"
fi
exit $fail
