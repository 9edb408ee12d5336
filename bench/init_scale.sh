#!/usr/bin/env bash
# bench/init_scale.sh: communicator init time and resident memory from 2 to 1,024 ranks, as
# threads of one process and as weftrun processes, and the bootstrap's parts (joining, one
# all-gather with the log rounds and with the ring) side by side; then bench/init_model.py fits
# the model of docs/PERFORMANCE.md ("Init at scale") and predicts 1,024 and 100,000 ranks.
#
# Knobs (defaults in brackets): BUILD [build] (make BUILD=... CUDA=0 lib first)
#   THREADS ["2 4 8 16 32 64 128 256"] full inits as threads   ROOTS ["1 4"] unique ids per job
#   BOOT ["2 4 8 16 32 64 128 256 512 1024"] bootstrap-only thread jobs
#   PROCS ["2 4 8 16 32 64 128 256"] full inits as weftrun processes
#   NETNS ["4:32 4:128 8:256"] hosts:ranks jobs on network-namespace hosts (tests/net/netns.sh,
#     needs root; skipped elsewhere), ranks spread evenly, each host its own WEFT_HOSTID
#   REPS [2] runs of each (the best is kept: the machine is shared)   RUN_TIMEOUT [600] s a run
#   OUT [$TMPDIR/weft-init-scale]: results.txt (raw rows), report.txt (tables, fit, prediction)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
THREADS=${THREADS:-"2 4 8 16 32 64 128 256"}
ROOTS=${ROOTS:-"1 4"}
BOOT=${BOOT:-"2 4 8 16 32 64 128 256 512 1024"}
PROCS=${PROCS:-"2 4 8 16 32 64 128 256"}
NETNS=${NETNS-"4:32 4:128 8:256"}
REPS=${REPS:-2}
RUN_TIMEOUT=${RUN_TIMEOUT:-600}
OUT=${OUT:-${TMPDIR:-/tmp}/weft-init-scale}
mkdir -p "$OUT"
RESULTS=$OUT/results.txt
BIN=$OUT/init_time
LIB=$ROOT/$BUILD/lib/libnccl_static.a
WEFTRUN=$ROOT/$BUILD/bin/weftrun
[ -f "$LIB" ] || { echo "init_scale.sh: $LIB missing: make BUILD=$BUILD CUDA=0 lib tools" >&2; exit 1; }
gcc -O2 -pthread -D_GNU_SOURCE -I"$ROOT/include" -I"$ROOT/src" -I"$ROOT/$BUILD/include" -Wall \
  "$ROOT/bench/init_time.c" "$LIB" -ldl -lrt -lm -o "$BIN" || exit 1
# Thousands of sockets and threads: raise what the shell allows.
ulimit -n "$(ulimit -Hn)" 2>/dev/null
export WEFT_BOOTSTRAP_TIMEOUT=${WEFT_BOOTSTRAP_TIMEOUT:-600} NCCL_DEBUG=${NCCL_DEBUG:-WARN}
{
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)" \
    "cpus $(nproc) mem_gib $(awk '/MemTotal/ {printf "%.0f", $2 / 1048576}' /proc/meminfo)"
} >"$RESULTS"

run() { # label, then the command: its rows go to results.txt, a failure is recorded as such
  local label=$1 out
  shift
  if out=$(timeout "$RUN_TIMEOUT" "$@" 2>"$OUT/last.err"); then
    echo "$out" | grep -E '^(threads|boot|proc) ' | sed "s/^/$label /" >>"$RESULTS"
  else
    echo "failed $label rc $? $(tail -1 "$OUT/last.err" | cut -c1-160)" >>"$RESULTS"
  fi
}

# Per process: the job's init is from the last rank's start to the last rank's return.
procs() {
  local n=$1 rows
  rows=$(timeout "$RUN_TIMEOUT" "$WEFTRUN" -n "$n" "$BIN" 2>"$OUT/last.err") || {
    echo "failed procs-$n rc $? $(tail -1 "$OUT/last.err" | cut -c1-160)" >>"$RESULTS"
    return
  }
  echo "$rows" | awk -v n="$n" '$1 == "proc" {
      if ($7 > s) s = $7; if ($9 > e) e = $9; rss += $11; k++ }
    END { if (k == n) printf "log procs ranks %d roots 1 init_s %.4f rss_mib %.1f\n", n, (e - s) / 1e9, rss / 1024 }' \
    >>"$RESULTS"
}

# hosts ranks: one job on namespace hosts (ranks h*ppn..h*ppn+ppn-1 on host h), NCCL_COMM_ID at
# host 0; rows as procs(), labelled netns.
netns_job() {
  local k=$1 n=$2 ppn=$(($2 / $1)) port r pids=()
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  for ((r = 0; r < n; r++)); do
    NCCL_COMM_ID="$(netns_addr 0):$port" WEFT_HOSTID="inithost$((r / ppn))" WEFT_RANK=$r WEFT_NRANKS=$n \
      NCCL_SOCKET_IFNAME=eth0 WEFT_JOB_SECRET=init-scale timeout "$RUN_TIMEOUT" \
      ip netns exec "$NS_PREFIX$((r / ppn))" "$BIN" >"$OUT/netns-$r.out" 2>"$OUT/netns-$r.err" &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r"; done
  cat "$OUT"/netns-*.out | awk -v n="$n" -v k="$k" '$1 == "proc" {
      if ($7 > s) s = $7; if ($9 > e) e = $9; rss += $11; c++ }
    END { if (c == n) printf "log netns%d ranks %d roots 1 init_s %.4f rss_mib %.1f\n", k, n, (e - s) / 1e9, rss / 1024
          else printf "failed netns%d-%d: %d of %d ranks reported\n", k, n, c, n }' >>"$RESULTS"
  rm -f "$OUT"/netns-*
}

netns_all() {
  [ -n "$NETNS" ] || return 0
  . "$ROOT/tests/net/netns.sh"
  local why job most=0
  why=$(netns_usable) || { echo "# namespace hosts skipped: $why" >>"$RESULTS"; return 0; }
  for job in $NETNS; do [ "${job%:*}" -gt "$most" ] && most=${job%:*}; done
  trap 'netns_down' EXIT
  netns_up "$most" || { echo "# namespace hosts could not be made" >>"$RESULTS"; return 0; }
  for job in $NETNS; do netns_job "${job%:*}" "${job#*:}"; done
  netns_down
  trap - EXIT
}

for rep in $(seq "$REPS"); do
  for n in $BOOT; do
    run log "$BIN" -b "$n"
    WEFT_BOOTSTRAP_LOG_GATHER_MIN=0 run ring "$BIN" -b "$n"
  done
  for n in $THREADS; do
    for r in $ROOTS; do [ "$r" -le "$n" ] && run log "$BIN" -t "$n" -r "$r"; done
  done
  if [ -x "$WEFTRUN" ]; then
    for n in $PROCS; do procs "$n"; done
  else
    echo "# no $WEFTRUN: process runs skipped (make BUILD=$BUILD tools)" >>"$RESULTS"
  fi
  netns_all
done
python3 "$ROOT/bench/init_model.py" "$RESULTS" | tee "$OUT/report.txt"
