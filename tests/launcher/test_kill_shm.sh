#!/usr/bin/env bash
# Nothing is left in /dev/shm after kill -9: a 3-rank all_reduce_perf job under weftrun has one
# rank killed with SIGKILL, and weftrun then stops the others. The moment cycles through three
# kinds: (every other try) the instant the victim has mapped its first shared memory segment (init, while its peers
# are still connecting: the window in which named segments used to be left behind), a random
# moment of init, and a random moment of the all-reduce loop. Afterwards no /dev/shm/weft-* entry
# may carry the pid of any rank of that job (segment names hold their creator's pid).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/${BUILD:-build}/bin
for b in weftrun all_reduce_perf; do
  [ -x "$BIN/$b" ] || { echo "FAIL: $BIN/$b not built"; exit 1; }
done
[ -d /dev/shm ] || { echo "SKIP: no /dev/shm"; exit 77; }
command -v pgrep >/dev/null || { echo "SKIP: needs pgrep"; exit 77; }
TRIES=${KILL_TRIES:-12}
export WEFT_BACKEND=host WEFTRUN_GRACE_SECONDS=1
T=$(mktemp -d "${TMPDIR:-/tmp}/weft-kill-shm.XXXXXX")
trap 'rm -rf "$T"' EXIT
RANDOM=$$

# Pids of weftrun's children (the ranks), added to $T/pids as they appear, until it exits.
watch_ranks() {
  local launcher=$1
  while kill -0 "$launcher" 2>/dev/null; do
    pgrep -P "$launcher" >>"$T/pids"
    sleep 0.005
  done
}

leftovers() { # /dev/shm entries named with one of the pids in $T/pids
  local p
  for p in $(sort -u "$T/pids"); do ls /dev/shm 2>/dev/null | grep -E "^weft-.*-$p-" | sed 's|^|/dev/shm/|'; done
}

# Waits (up to 5 s) until the victim maps something from /dev/shm, as connectors do.
wait_first_segment() {
  local _
  for _ in $(seq 2500); do
    grep -q ' /dev/shm/' "/proc/$1/maps" 2>/dev/null && return 0
    sleep 0.002
  done
  return 1
}

rank_pid() { # launcher, rank: the rank's pid once started (ranks are spawned in order)
  local _ p
  for _ in $(seq 500); do
    p=$(pgrep -P "$1" | sed -n "$(($2 + 1))p")
    [ -n "$p" ] && { echo "$p"; return; }
    sleep 0.002
  done
}

failed=0
for try in $(seq "$TRIES"); do
  case $((try % 4)) in
    1 | 3) moment="first segment" ;;
    2) delay_ms=$((RANDOM % 250)) moment="init, ${delay_ms} ms" ;;
    0) delay_ms=$((300 + RANDOM % 1200)) moment="run, ${delay_ms} ms" ;;
  esac
  victim=$((RANDOM % 3))
  : >"$T/pids"
  timeout -k 2 60 "$BIN/weftrun" -n 3 "$BIN/all_reduce_perf" -b 1M -e 4M -n 200 -w 0 -c 0 \
    >"$T/out" 2>"$T/err" </dev/null &
  tpid=$!
  launcher=$(rank_pid "$tpid" 0) # the launcher is timeout's only child
  [ -n "$launcher" ] || { echo "FAIL: try $try: weftrun did not start"; failed=$((failed + 1)); continue; }
  watch_ranks "$launcher" &
  wpid=$!
  pid=$(rank_pid "$launcher" "$victim")
  if [ -n "$pid" ]; then
    if [ "$moment" = "first segment" ]; then
      wait_first_segment "$pid" || moment="no segment seen"
    else
      sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
    fi
    kill -KILL "$pid" 2>/dev/null
  fi
  wait "$tpid"
  rc=$?
  wait "$wpid"
  left=$(leftovers)
  what="kill -9 of rank $victim (pid ${pid:-none}) at $moment, weftrun exit $rc"
  if [ -n "$left" ]; then
    echo "FAIL: try $try: $what; left behind:" $left
    rm -f $left
    failed=$((failed + 1))
  else
    echo "ok   try $try: $what, $(sort -u "$T/pids" | wc -l) rank pids, nothing left in /dev/shm"
  fi
done
[ "$failed" = 0 ] && echo "PASS: $TRIES kills left nothing in /dev/shm"
[ "$failed" = 0 ]
