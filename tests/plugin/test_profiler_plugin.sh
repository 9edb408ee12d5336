#!/usr/bin/env bash
# The profiler plugin ABI, as a user meets it: NCCL_PROFILER_PLUGIN names the counting plugin
# (tests/plugin/profiler_count.c, built as libnccl-profiler-count*.so, one per ABI version) by
# name, path or file name, or leaves it unset for libnccl-profiler.so; a 3-rank job runs 3
# all-reduces and a group of a broadcast, a send and a receive. Each rank's counts must be exact
# and balanced, every Coll/P2p below a Group the plugin saw, finalize must run; the activation
# mask limits the events; none, a missing plugin, one without a table and a failing init leave
# the job running, the last three with a WARN.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PLUG=$ROOT/${BUILD:-build}/tests/plugin
JOB=$PLUG/prof_job
for f in "$JOB" "$PLUG/libnccl-profiler-count.so" "$PLUG/libnccl-profiler-count4.so" "$PLUG/libnccl-profiler-nosym.so"; do
  [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }
done
export WEFT_BACKEND=host
T=$(mktemp -d "${TMPDIR:-/tmp}/weft-prof.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL [$case]: $*"; fail=1; }

# run CASE [VAR=value...]: the job with the plugin's output in $T/CASE, its log in $T/CASE.log.
run() {
  case=$1
  shift
  mkdir -p "$T/$case"
  env LD_LIBRARY_PATH="$PLUG${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PROF_COUNT_DIR="$T/$case" NCCL_DEBUG=INFO \
    NCCL_DEBUG_SUBSYS=INIT,ENV "$@" timeout -k 5 120 "$JOB" 3 >"$T/$case.log" 2>&1 ||
    { bad "job failed"; tail -20 "$T/$case.log"; }
  grep -q "prof_job: all checks passed" "$T/$case.log" || bad "the job's own checks failed"
}
file_of() { ls "$T/$case"/prof-r"$1"-*.txt 2>/dev/null | head -1; }
NR=3 # ranks of the job whose files are checked
val() { awk -v k="$2" '$1 == k { $1 = ""; sub(/^ /, ""); print; exit }' "$1"; }
count() { awk -v w="$2" -v t="$3" '$1 == w && $2 == t { print $3; found = 1 } END { if (!found) print 0 }' "$1"; }

# expect_counts GROUPS COLLS P2PS [GROUPAPIS COLLAPIS P2PAPIS]: on every rank, exact starts and
# stops (API-level events: 0 unless given), nothing open, no errors.
expect_counts() {
  local r f ga=${4:-0}
  [ "$(ls "$T/$case" | wc -l)" = $NR ] || bad "$(ls "$T/$case" | wc -l) count files, not $NR (one per rank)"
  for r in $(seq 0 $((NR - 1))); do
    f=$(file_of $r)
    [ -n "$f" ] || { bad "rank $r wrote no counts (finalize not called?)"; continue; }
    grep -qx finalized "$f" || bad "rank $r: file incomplete"
    for ty in Group:$1 Coll:$2 P2p:$3 GroupApi:$ga CollApi:${5:-0} P2pApi:${6:-0} KernelLaunch:0; do
      for w in start stop; do
        [ "$(count "$f" $w "${ty%%:*}")" = "${ty#*:}" ] ||
          bad "rank $r: $w ${ty%%:*} $(count "$f" $w "${ty%%:*}"), expected ${ty#*:}"
      done
    done
    [ "$(count "$f" start KernelCh)" = "$(count "$f" stop KernelCh)" ] || bad "rank $r: KernelCh unbalanced"
    [ "$(count "$f" state GroupStartApiStop)" = "$ga" ] && [ "$(count "$f" state GroupEndApiStart)" = "$ga" ] ||
      bad "rank $r: GroupApi states $(grep 'state Group' "$f" | tr '\n' ' '), expected $ga each"
    [ "$(val "$f" open)" = 0 ] || bad "rank $r: $(val "$f" open) events never stopped"
    [ "$(val "$f" errors)" = 0 ] || bad "rank $r: plugin found $(val "$f" errors) error(s): $(val "$f" first_error)"
  done
}

# expect_calls: the collectives and sends/receives each rank saw, in order, as described.
expect_calls() {
  local r f want
  for r in $(seq 0 $((NR - 1))); do
    f=$(file_of $r)
    [ -n "$f" ] || continue
    want="AllReduce seq=0 count=1000 dtype=ncclFloat32 root=0
AllReduce seq=1 count=1000 dtype=ncclFloat32 root=0
AllReduce seq=2 count=1000 dtype=ncclFloat32 root=0
Broadcast seq=0 count=500 dtype=ncclInt32 root=0"
    [ "$(awk '$1 == "coll" { print $2, $3, $4, $5, $6 }' "$f")" = "$want" ] || bad "rank $r: collectives seen:
$(grep '^coll' "$f")"
    awk '$1 == "coll" && ($7 !~ /^algo=(RING|TREE|DIRECT)$/ || $8 !~ /^proto=(LL|SIMPLE)$/) { exit 1 }' "$f" ||
      bad "rank $r: algorithm or protocol name missing: $(grep '^coll' "$f" | head -1)"
    want="Send peer=$(((r + 1) % NR)) count=256 dtype=ncclFloat32
Recv peer=$(((r + NR - 1) % NR)) count=256 dtype=ncclFloat32"
    [ "$(awk '$1 == "p2p" { print $2, $3, $4, $5 }' "$f")" = "$want" ] || bad "rank $r: p2p seen:
$(grep '^p2p' "$f")"
  done
}

# expect_ident VERSION: what init told the plugin (v3's init is told nothing: the name and hash
# come with its Coll and P2p events instead).
expect_ident() {
  local r f hashes
  for r in $(seq 0 $((NR - 1))); do
    f=$(file_of $r)
    [ -n "$f" ] || continue
    [ "$(val "$f" version)" = "$1" ] || bad "rank $r: plugin version $(val "$f" version), expected $1"
    [ "$(val "$f" rank)" = $r ] || bad "rank $r: plugin saw rank $(val "$f" rank)"
    [ "$(val "$f" name)" = prof-job ] || bad "rank $r: comm name '$(val "$f" name)'"
    if [ "$1" -ge 4 ]; then
      [ "$(val "$f" nranks)" = $NR ] && [ "$(val "$f" nnodes)" = "${NNODES:-1}" ] ||
        bad "rank $r: nranks $(val "$f" nranks) nnodes $(val "$f" nnodes), expected $NR and ${NNODES:-1}"
    fi
  done
  hashes=$(for f in "$T/$case"/*.txt; do val "$f" hash; done | sort -u)
  [ "$(echo "$hashes" | wc -l)" = 1 ] && [ "$hashes" != 0 ] || bad "comm hashes differ or are 0: $hashes"
}
loaded() { grep -q "PROFILER/Plugin: Loaded profiler_count (v$1)" "$T/$case.log" || bad "no INFO line saying v$1 loaded"; }
no_files() { [ -z "$(ls "$T/$case")" ] || bad "a plugin ran: $(ls "$T/$case")"; }

# By name (libnccl-profiler-count.so on the loader's path), v6.
run v6 NCCL_PROFILER_PLUGIN=count
expect_counts 4 4 2 4 4 2
expect_calls
expect_ident 6
loaded 6
for f in "$T/v6"/*.txt; do
  [ "$(count "$f" start KernelCh)" -ge 4 ] && [ "$(val "$f" "state")" != "" ] || bad "no KernelCh events"
  [ "$(awk '$1 == "state" && $2 == "KernelChStop" { print $3 }' "$f")" = "$(count "$f" start KernelCh)" ] ||
    bad "KernelChStop states differ from KernelCh events"
done

# Older versions: v5 by name, v4 by path, v3 by file name, v2 by name.
run v5 NCCL_PROFILER_PLUGIN=count5
expect_counts 4 4 2 4 4 2
expect_calls
expect_ident 5
loaded 5
run v4 NCCL_PROFILER_PLUGIN="$PLUG/libnccl-profiler-count4.so"
expect_counts 4 4 2
expect_calls
expect_ident 4
loaded 4
run v3 NCCL_PROFILER_PLUGIN=libnccl-profiler-count3.so
expect_counts 4 4 2
expect_calls
expect_ident 3
loaded 3
run v2 NCCL_PROFILER_PLUGIN=count2 # v2 has no KernelCh events
expect_counts 4 4 2
expect_calls
expect_ident 2
loaded 2
for f in "$T/v2"/*.txt; do [ ! -e "$f" ] || [ "$(count "$f" start KernelCh)" = 0 ] || bad "KernelCh events for v2"; done

# The ring, by force: its name, protocol and one KernelCh event per channel it ran.
run ring NCCL_PROFILER_PLUGIN=count WEFT_DIRECT=0 NCCL_ALGO=Ring NCCL_PROTO=Simple
expect_counts 4 4 2 4 4 2
expect_calls
for f in "$T/ring"/*.txt; do
  [ "$(grep -c '^coll .* algo=RING proto=SIMPLE$' "$f")" = 4 ] || bad "not every collective reported RING/SIMPLE:
$(grep '^coll' "$f")"
done

# The activation mask: Coll only, P2p only, Group only. As in NCCL, the events above what the mask
# asks for come too, as parents: Group and GroupApi always, CollApi for Coll, P2pApi for P2p.
run mask_coll NCCL_PROFILER_PLUGIN=count NCCL_PROFILE_EVENT_MASK=2
expect_counts 4 4 0 4 4 0
for f in "$T/$case"/*.txt; do [ ! -e "$f" ] || [ "$(count "$f" start KernelCh)" = 0 ] || bad "KernelCh events outside the mask"; done
run mask_p2p NCCL_PROFILER_PLUGIN=count NCCL_PROFILE_EVENT_MASK=4
expect_counts 4 0 2 4 0 2
run mask_group NCCL_PROFILER_PLUGIN=count NCCL_PROFILE_EVENT_MASK=1
expect_counts 4 0 0 4 0 0

# Unset: libnccl-profiler.so is tried, and loaded when the loader finds one.
mkdir -p "$T/default_lib"
ln -s "$PLUG/libnccl-profiler-count.so" "$T/default_lib/libnccl-profiler.so"
run default LD_LIBRARY_PATH="$T/default_lib"
expect_counts 4 4 2 4 4 2
loaded 6
# Unset and absent: no profiler, and nothing to warn about.
run absent
no_files
grep -q "WARN.*PROFILER" "$T/absent.log" && bad "a WARN without any plugin asked for"

# Ranks as processes on two emulated hosts (WEFT_HOSTID): nNodes is 2, the traffic goes over the
# network transport and its proxy thread, and each process loads and finalizes its own plugin.
# run_procs CASE [VAR=value...]: the job as 2 processes.
run_procs() {
  case=$1
  shift
  mkdir -p "$T/$case"
  local port r pids=()
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  for r in 0 1; do
    env LD_LIBRARY_PATH="$PLUG" PROF_COUNT_DIR="$T/$case" NCCL_PROFILER_PLUGIN=count NCCL_COMM_ID=127.0.0.1:$port \
      WEFT_HOSTID=prof-host-$r NCCL_DEBUG=WARN "$@" timeout -k 5 120 "$JOB" proc $r 2 >"$T/$case.$r.log" 2>&1 &
    pids+=($!)
  done
  for r in 0 1; do wait "${pids[$r]}" || { bad "rank $r process failed"; tail -20 "$T/$case.$r.log"; }; done
}
run_procs procs NCCL_MAX_NCHANNELS=1
NR=2 NNODES=2 expect_counts 4 4 2 4 4 2
NR=2 expect_calls
NR=2 NNODES=2 expect_ident 6
# The proxy's work for the ring collectives (one channel): on each rank a ProxyOp per network
# connector that moved steps, all-reduce: send and receive; broadcast: the root's send, the other
# rank's receive; each op with its steps. Sends and receives to and from the other rank only.
for r in 0 1; do
  f=$(file_of $r)
  [ -n "$f" ] || continue
  ops=$(count "$f" start ProxyOp) steps=$(count "$f" start ProxyStep)
  [ "$ops" = 7 ] && [ "$(count "$f" stop ProxyOp)" = 7 ] || bad "$f: ProxyOp $ops started, $(count "$f" stop ProxyOp) stopped, expected 7"
  [ "$(grep -c "^proxyop peer=$((1 - r)) send=1 channel=0$" "$f")" = $((4 - r)) ] &&
    [ "$(grep -c "^proxyop peer=$((1 - r)) send=0 channel=0$" "$f")" = $((3 + r)) ] || bad "rank $r: proxy ops:
$(grep '^proxyop' "$f" | sort | uniq -c)"
  [ "$steps" -ge "$ops" ] && [ "$steps" = "$(count "$f" stop ProxyStep)" ] ||
    bad "$f: ProxyStep $steps started, $(count "$f" stop ProxyStep) stopped"
done
# Without ProxyOp and ProxyStep in the mask the proxy reports nothing.
run_procs procs_noproxy NCCL_PROFILE_EVENT_MASK=$((0xf47))
NR=2 NNODES=2 expect_counts 4 4 2 4 4 2
for f in "$T/$case"/*.txt; do
  [ ! -e "$f" ] || [ "$(count "$f" start ProxyOp)$(count "$f" start ProxyStep)" = 00 ] || bad "proxy events outside the mask"
done

# none, a missing plugin, one without a table, a failing init: the job runs without a profiler.
run none NCCL_PROFILER_PLUGIN=none
no_files
grep -q "NCCL_PROFILER_PLUGIN set by environment to none" "$T/none.log" || bad "no INFO line for none"
grep -q "PROFILER/Plugin: Loaded" "$T/none.log" && bad "a plugin loaded with none"
run missing NCCL_PROFILER_PLUGIN=nosuchprofiler
no_files
grep -q "WARN PROFILER/Plugin: could not load nosuchprofiler" "$T/missing.log" || bad "no WARN for a missing plugin"
run nosym NCCL_PROFILER_PLUGIN=nosym
no_files
grep -q "WARN PROFILER/Plugin: .*libnccl-profiler-nosym.so exports none of ncclProfiler_v6" "$T/nosym.log" ||
  bad "no WARN for a plugin without a table"
run initfail NCCL_PROFILER_PLUGIN=count PROF_COUNT_FAIL_INIT=1
no_files
[ "$(grep -c "WARN .*profiler profiler_count init returned" "$T/initfail.log")" = 3 ] ||
  bad "no WARN per rank for a failing init"

[ $fail = 0 ] && echo "profiler plugin: all cases passed"
exit $fail
