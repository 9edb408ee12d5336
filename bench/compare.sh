#!/usr/bin/env bash
# bench/compare.sh: Weft's all_reduce_perf beside Open MPI's and MPICH's MPI_Allreduce and Gloo's
# ring all-reduce, on the same sizes and rank counts, interleaved in each pass, with the memory
# bandwidth roof measured in the same pass. Prints busbw side by side and Weft/best-peer ratios.
#
# Needs (Debian/Ubuntu): openmpi-bin libopenmpi-dev mpich libmpich-dev libgloo-dev g++ python3.
# INSTALL=1 installs them with apt-get when missing (as root); otherwise the script names them.
#
# Knobs (defaults in brackets): PASSES [2]  RANKS ["2 4"]  MAXB [256M]  TARGET [0.1] seconds of
# timed calls per size and peer  PEERS ["openmpi openmpi-mallocenv mpich mpich-mallocenv gloo"]
# OUT [$TMPDIR/weft-compare]: build/, pass<P>/<name>-<n>ranks.txt, report.md.
# COLL [allreduce]: allgather, reducescatter, broadcast or reduce measure Weft's perf binary of
# that collective beside MPI_Allgather, MPI_Reduce_scatter_block, MPI_Bcast or MPI_Reduce (root
# 0; no Gloo driver: PEERS then defaults to the MPI ones), from MINB [8; 1M for those] bytes.
# The peer weft-ring is Weft with WEFT_DIRECT=0 (the ring path), e.g. PEERS="weft-ring openmpi".
# QUIET_PCT [20] QUIET_WAIT [10]: before each run, wait up to QUIET_WAIT s for the CPUs to be
# less than QUIET_PCT % busy (other jobs on the machine); the load seen is recorded either way.
# The *-mallocenv peers keep glibc from handing MPI's per-call temporary buffers back to the
# kernel (every call would otherwise fault fresh pages in from 32 MiB up).
# ROUNDS [3]: launches of each (Weft and every peer) per pass, in turn, forward then backward;
# each size's best over them counts. This machine (a VM) has slow spells lasting seconds: one
# launch of a tool ran every small size at about twice the time of the launch of another tool a
# second before or after (Open MPI's 8 B call 0.42 us against 0.19), which decided whole passes.
# BUSY [1]: one more pass (sizes 8 B..BUSY_MAXB [4K]) with a plain busy loop pinned to CPU
# BUSY_CPU [the last one] during every run, standing for another job on the machine.
# STEADY [1]: steadiness: STEADY_RUNS [20] launches of a 20-call test (-n 20) of the 2-rank
# all-reduce, 8 B..STEADY_MAXB [4K], Weft and STEADY_PEERS ["openmpi mpich"] interleaved, quiet
# and (with BUSY=1) with the busy loop; the report gives each one's median run against its best.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
HERE=$ROOT/bench
OUT=${OUT:-${TMPDIR:-/tmp}/weft-compare}
PASSES=${PASSES:-2}
RANKS=${RANKS:-"2 4"}
MAXB=${MAXB:-256M}
TARGET=${TARGET:-0.1}
COLL=${COLL:-allreduce}
case $COLL in
  allreduce) PERF=all_reduce_perf ;;
  allgather) PERF=all_gather_perf ;;
  reducescatter) PERF=reduce_scatter_perf ;;
  broadcast) PERF=broadcast_perf ;;
  reduce) PERF=reduce_perf ;;
  *) echo "compare.sh: unknown COLL=$COLL (allreduce, allgather, reducescatter, broadcast, reduce)" >&2; exit 2 ;;
esac
if [ "$COLL" = allreduce ]; then
  PEERS=${PEERS:-"openmpi openmpi-mallocenv mpich mpich-mallocenv gloo"}
  MINB=${MINB:-8}
else
  PEERS=${PEERS:-"openmpi openmpi-mallocenv mpich mpich-mallocenv"}
  MINB=${MINB:-1M}
fi
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
BUILD=$OUT/build
MALLOC_ENV=(MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
NCPU=$(nproc)
QUIET_PCT=${QUIET_PCT:-20}
QUIET_WAIT=${QUIET_WAIT:-10}
BUSY=${BUSY:-1}
BUSY_MAXB=${BUSY_MAXB:-4K}
BUSY_CPU=${BUSY_CPU:-$((NCPU - 1))}
STEADY=${STEADY:-1}
ROUNDS=${ROUNDS:-3}
STEADY_RUNS=${STEADY_RUNS:-20}
STEADY_MAXB=${STEADY_MAXB:-4K}
STEADY_PEERS=${STEADY_PEERS:-"openmpi mpich"}
HOG_PID=
log() { echo "[compare $(date +%T)] $*" >&2; }

busy_pct() { # share of all CPUs busy over one second, from /proc/stat
  local a b
  read -r _ a1 a2 a3 a4 a5 a6 a7 a8 _ < /proc/stat
  sleep 1
  read -r _ b1 b2 b3 b4 b5 b6 b7 b8 _ < /proc/stat
  a=$(((b1 + b2 + b3 + b6 + b7 + b8) - (a1 + a2 + a3 + a6 + a7 + a8)))
  b=$((a + (b4 + b5) - (a4 + a5)))
  echo $((100 * a / (b > 0 ? b : 1)))
}

wait_quiet() { # prints the busy % finally seen
  local t0 b
  t0=$(date +%s)
  while :; do
    b=$(busy_pct)
    if [ "$b" -lt "$QUIET_PCT" ] || [ $(($(date +%s) - t0)) -ge "$QUIET_WAIT" ]; then
      echo "$b"
      return
    fi
  done
}

# The busy loop of BUSY=1: started before a run, killed after it (and on exit).
hog_start() {
  taskset -c "$BUSY_CPU" bash -c 'while :; do :; done' &
  HOG_PID=$!
}
hog_stop() {
  [ -n "$HOG_PID" ] || return 0
  kill "$HOG_PID" 2>/dev/null
  wait "$HOG_PID" 2>/dev/null
  HOG_PID=
}
trap hog_stop EXIT

need_packages() {
  local missing=()
  command -v mpicc.openmpi >/dev/null || missing+=(openmpi-bin libopenmpi-dev)
  command -v mpicc.mpich >/dev/null || missing+=(mpich libmpich-dev)
  [ -e /usr/include/gloo/allreduce.h ] || missing+=(libgloo-dev)
  command -v g++ >/dev/null || missing+=(g++)
  command -v python3 >/dev/null || missing+=(python3)
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "${INSTALL:-0}" = 1 ] && [ "$(id -u)" = 0 ]; then
    log "installing ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null && return 0
  fi
  echo "compare.sh needs: apt-get install -y ${missing[*]}   (or run with INSTALL=1 as root)" >&2
  exit 2
}

build() {
  mkdir -p "$BUILD"
  log "building Weft (make) and the peer drivers into $BUILD"
  if ! { make -C "$ROOT" -j2 lib >/dev/null && make -C "$ROOT" -j2 >/dev/null; }; then
    [ -x "$ROOT/build/bin/$PERF" ] || exit 1
    log "make failed: measuring the Weft binaries already in build/"
  fi
  set -e
  gcc -O3 -march=native -pthread -Wall "$HERE/memroof.c" -o "$BUILD/memroof"
  mpicc.openmpi -O2 -Wall "$HERE/mpi_allreduce.c" -o "$BUILD/mpi_allreduce.openmpi" -lm
  mpicc.mpich -O2 -Wall "$HERE/mpi_allreduce.c" -o "$BUILD/mpi_allreduce.mpich" -lm
  g++ -O3 -march=native -std=c++17 -Wall "$HERE/gloo_allreduce.cc" -o "$BUILD/gloo_allreduce" -lgloo -pthread
  set +e
}

# Gloo ranks rendezvous through a FileStore; rank 0 prints.
run_gloo() {
  local n=$1 store rc=0 pids=()
  shift
  store=$(mktemp -d "${TMPDIR:-/tmp}/gloo-store.XXXXXX")
  for ((r = 0; r < n; r++)); do
    if [ $r -eq 0 ]; then
      RANK=$r SIZE=$n GLOO_STORE=$store "$@" &
    else
      RANK=$r SIZE=$n GLOO_STORE=$store "$@" >/dev/null &
    fi
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  rm -rf "$store"
  return $rc
}

# Weft: all_reduce_perf, or COLL's perf binary (ncclMemAlloc buffers), every result checked (-c 1). Small sizes: best
# of 3 cycles (-N 3) of 1000 calls, like the peers' 3 trials; large ones: one cycle of 20 calls
# (their spread is small, and a check of 256 MiB takes longer than the calls).
# The table prints times to 0.01 us (0.21 or 0.22 us: 5 % apart at 256 B); its -J results have six
# digits: each row again as "# precise bytes out-of-place-us in-place-us wrong", which report.py
# prefers.
run_weft() {
  local n=$1 maxb=$2 small_max=1048576
  local maxbytes minbytes json rc=0
  maxbytes=$(numfmt --from=iec "$maxb")
  minbytes=$(numfmt --from=iec "$MINB")
  json=$(mktemp "${TMPDIR:-/tmp}/weft-perf.XXXXXX.json")
  if [ "$minbytes" -le $small_max ]; then
    "$ROOT/build/bin/weftrun" -n "$n" "$ROOT/build/bin/$PERF" -b "$minbytes" -e $((maxbytes < small_max ? maxbytes : small_max)) \
      -f 2 -c 1 -w 100 -n 1000 -N 3 -J "$json" || rc=$?
    precise_rows "$json"
  fi
  if [ $rc = 0 ] && [ "$maxbytes" -gt $small_max ]; then
    "$ROOT/build/bin/weftrun" -n "$n" "$ROOT/build/bin/$PERF" -b $((minbytes > small_max ? minbytes : small_max * 2)) \
      -e "$maxb" -f 2 -c 1 -w 3 -n 20 -N 1 -J "$json" || rc=$?
    precise_rows "$json"
  fi
  rm -f "$json"
  return $rc
}

precise_rows() { # perf binary's -J file
  python3 - "$1" <<'PY'
import json, sys
try:
    rows = json.load(open(sys.argv[1])).get("results", [])
except (OSError, ValueError):
    rows = []
for r in rows:
    o, i = r["out_of_place"], r["in_place"]
    if o.get("time") is None or i.get("time") is None:
        continue
    print("# precise %d %s %s %d" % (r["size"], o["time"], i["time"], (o["nwrong"] or 0) + (i["nwrong"] or 0)))
PY
}

# Steadiness: one launch of a 20-call test, 2 ranks (5 warm-up calls for Weft, the drivers' own
# warm-up of up to 8 for the peers).
run_steady() { # name
  case $1 in
    weft) "$ROOT/build/bin/weftrun" -n 2 "$ROOT/build/bin/all_reduce_perf" -b 8 -e "$STEADY_MAXB" -f 2 -c 1 -w 5 -n 20 -N 1 ;;
    *) run_peer "$1" 2 -b 8 -e "$STEADY_MAXB" -T 1 -n 20 ;;
  esac
}

run_peer() { # name n [driver args] -> runs the benchmark, output on stdout
  local peer=$1 n=$2 osub=()
  shift 2
  local args=(-C "$COLL" -b "$MINB" -e "$MAXB" -t "$TARGET" -T 3)
  [ $# -gt 0 ] && args=("$@")
  [ "$n" -gt "$NCPU" ] && osub=(--oversubscribe)
  case $peer in
    weft) run_weft "$n" "$MAXB" ;;
    weft-ring) WEFT_DIRECT=0 run_weft "$n" "$MAXB" ;;
    openmpi) mpirun.openmpi --allow-run-as-root "${osub[@]}" -n "$n" "$BUILD/mpi_allreduce.openmpi" "${args[@]}" ;;
    openmpi-mallocenv)
      env "${MALLOC_ENV[@]}" mpirun.openmpi --allow-run-as-root "${osub[@]}" -n "$n" -x MALLOC_MMAP_THRESHOLD_ \
        -x MALLOC_TRIM_THRESHOLD_ "$BUILD/mpi_allreduce.openmpi" "${args[@]}" ;;
    mpich) mpiexec.mpich -n "$n" "$BUILD/mpi_allreduce.mpich" "${args[@]}" ;;
    mpich-mallocenv) env "${MALLOC_ENV[@]}" mpiexec.mpich -n "$n" "$BUILD/mpi_allreduce.mpich" "${args[@]}" ;;
    gloo) run_gloo "$n" "$BUILD/gloo_allreduce" "${args[@]:2}" ;;
    *) echo "unknown peer $peer" >&2; return 1 ;;
  esac
}

machine() {
  echo "date: $(date -u +%FT%TZ)"
  echo "kernel: $(uname -sr)"
  lscpu | grep -E '^(Model name|CPU\(s\)|Thread|Hypervisor vendor)' | sed 's/  */ /g'
  free -g | awk '/Mem:/{print "memory: " $2 " GiB"}'
  echo "weft: $(git -C "$ROOT" describe --always --dirty 2>/dev/null)"
  dpkg-query -W -f='${Package} ${Version}\n' openmpi-bin mpich libgloo-dev 2>/dev/null
}

need_packages
[ -z "${NO_BUILD:-}" ] && build
rm -rf "$OUT"/pass* "$OUT"/steady*
mkdir -p "$OUT" && echo "$COLL" > "$OUT/coll.txt"
machine | tee "$OUT/machine.txt" >&2
T0=$(date +%s)
FUNCS="$(declare -f run_peer run_weft precise_rows run_gloo run_steady)"

isolated() { # command words -> runs them in a fresh shell with the script's functions, bounded
  timeout "$RUN_TIMEOUT" bash -c "$FUNCS; $(declare -p BUILD ROOT MAXB TARGET NCPU MALLOC_ENV STEADY_MAXB COLL PERF MINB); $*"
}

run_pass() { # dir busy(0|1)
  local dir=$1 busy=$2 n name order busy_before t rc r
  mkdir -p "$dir"
  [ "$busy" = 1 ] && echo "a busy loop pinned to CPU $BUSY_CPU during every run" > "$dir/busy.txt"
  log "$(basename "$dir"): memory roof"
  "$BUILD/memroof" -m 256 -r 7 > "$dir/memroof.txt"
  for n in $RANKS; do
    for name in weft $PEERS; do rm -f "$dir/$name-${n}ranks.txt" "$dir/$name-${n}ranks.err"; done
    # ROUNDS launches of each, forward then backward: a slow spell of the machine (see ROUNDS above)
    # during one launch does not decide the pass, and every one gets as many launches.
    for ((r = 1; r <= ROUNDS; r++)); do
      order=(weft $PEERS)
      [ $((r % 2)) = 0 ] && order=($(printf '%s\n' "${order[@]}" | tac))
      for name in "${order[@]}"; do
        busy_before=$(wait_quiet)
        echo "# launch $r of $ROUNDS; background CPU before it: $busy_before %" >> "$dir/$name-${n}ranks.txt"
        [ "$busy" = 1 ] && hog_start
        t=$(date +%s)
        isolated run_peer "$name" "$n" >> "$dir/$name-${n}ranks.txt" 2>> "$dir/$name-${n}ranks.err"
        rc=$?
        hog_stop
        log "$(basename "$dir"), $n ranks, $name (launch $r): rc $rc, $(($(date +%s) - t)) s (CPUs $busy_before % busy before)"
      done
    done
    for name in weft $PEERS; do [ -s "$dir/$name-${n}ranks.err" ] || rm -f "$dir/$name-${n}ranks.err"; done
  done
}

steady_pass() { # dir busy(0|1)
  local dir=$1 busy=$2 r name busy_before
  mkdir -p "$dir"
  [ "$busy" = 1 ] && echo "a busy loop pinned to CPU $BUSY_CPU during every run" > "$dir/busy.txt"
  for ((r = 1; r <= STEADY_RUNS; r++)); do
    busy_before=$(wait_quiet)
    for name in weft $STEADY_PEERS; do
      echo "# background CPU before the round: $busy_before %" > "$dir/$name-run$r.txt"
      [ "$busy" = 1 ] && hog_start
      isolated run_steady "$name" >> "$dir/$name-run$r.txt" 2>> "$dir/$name.err"
      hog_stop
    done
  done
  for name in weft $STEADY_PEERS; do [ -s "$dir/$name.err" ] || rm -f "$dir/$name.err"; done
  log "$(basename "$dir"): $STEADY_RUNS rounds of weft $STEADY_PEERS"
}

for ((p = 1; p <= PASSES; p++)); do run_pass "$OUT/pass$p" 0; done
[ "$BUSY" = 1 ] && [ "$COLL" = allreduce ] && MAXB=$BUSY_MAXB run_pass "$OUT/pass$((PASSES + 1))" 1
if [ "$STEADY" = 1 ] && [ "$COLL" = allreduce ]; then
  steady_pass "$OUT/steady" 0
  [ "$BUSY" = 1 ] && steady_pass "$OUT/steady-busy" 1
fi
python3 "$HERE/report.py" "$OUT" | tee "$OUT/report.md"
log "done in $(($(date +%s) - T0)) s; results in $OUT"
