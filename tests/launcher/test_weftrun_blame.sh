#!/usr/bin/env bash
# weftrun blames the rank that failed first, not a rank that exited because of it: rank 2 is
# killed (SIGKILL) and rank 0, which reads a pipe rank 2 holds open, exits with status 3 the
# moment it sees rank 2 gone. Both die within microseconds and may be reaped together in pid
# order (rank 0 first), so each run must still name rank 2 and exit 137.
#   stopped: weftrun is stopped (SIGSTOP) until both ranks are zombies, so every run reaps
#            both at once (the case that used to blame rank 0 every time)
#   racing:  weftrun runs freely, as in a real job (the case that blamed rank 0 now and then)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WEFTRUN=${WEFTRUN:-$ROOT/${BUILD:-build}/bin/weftrun}
[ -x "$WEFTRUN" ] || { echo "FAIL: weftrun not built ($WEFTRUN missing)"; exit 1; }
command -v mkfifo >/dev/null || { echo "SKIP: needs mkfifo"; exit 77; }
RUNS=${BLAME_RUNS:-20} # racing runs; stopped ones are deterministic, a few suffice
T=$(mktemp -d "${TMPDIR:-/tmp}/weftrun-blame.XXXXXX")
trap 'rm -rf "$T"' EXIT
failed=0

# Rank 2 holds the pipe's write end and, in the stopped mode, waits for "go" before it dies;
# rank 0 exits 3 at EOF; rank 1 just waits to be stopped.
# shellcheck disable=SC2016  # expanded by the ranks' shells
RANK_SCRIPT='d=$0
case $WEFT_RANK in
  0) echo $$ >"$d/pid0"; exec 3<"$d/pipe"; cat <&3 >/dev/null; exit 3 ;;
  2) exec 3>"$d/pipe"; echo $$ $PPID >"$d/pid2"
     if [ "$1" = stopped ]; then while [ ! -e "$d/go" ]; do sleep 0.01; done; fi
     kill -KILL $$ ;;
  *) exec sleep 30 ;;
esac'

# Zombie state ("Z") of a pid, from /proc/<pid>/stat (the field after the command name).
is_zombie() { [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)" = Z ]; }

wait_for() { # up to 5 s for a command to succeed
  local _
  for _ in $(seq 500); do "$@" && return 0; sleep 0.01; done
  return 1
}

one_run() { # mode, run number
  local mode=$1 n=$2 wpid rc
  rm -f "$T/pipe" "$T/pid0" "$T/pid2" "$T/go" "$T/err"
  mkfifo "$T/pipe"
  timeout -k 2 20 "$WEFTRUN" -n 3 sh -c "$RANK_SCRIPT" "$T" "$mode" >/dev/null 2>"$T/err" </dev/null &
  wpid=$!
  if [ "$mode" = stopped ]; then
    local p0 p2 launcher
    wait_for test -s "$T/pid2" || { echo "FAIL: $mode run $n: rank 2 never started"; return 1; }
    read -r p2 launcher <"$T/pid2"
    p0=$(cat "$T/pid0")
    kill -STOP "$launcher"
    touch "$T/go"
    wait_for is_zombie "$p2" && wait_for is_zombie "$p0"
    kill -CONT "$launcher"
  fi
  wait "$wpid"
  rc=$?
  if [ "$rc" = 137 ] && grep -Eq '^weftrun: rank 2 \(pid [0-9]+\) killed by signal 9' "$T/err"; then return 0; fi
  echo "FAIL: $mode run $n: exit $rc (want 137), weftrun said: $(grep -m1 '^weftrun: rank' "$T/err")"
  return 1
}

for mode in stopped racing; do
  bad=0
  start=$(date +%s%N)
  runs=$RUNS
  [ "$mode" = stopped ] && runs=5
  for n in $(seq "$runs"); do one_run "$mode" "$n" || bad=$((bad + 1)); done
  ms=$((($(date +%s%N) - start) / 1000000))
  if [ "$bad" = 0 ]; then echo "PASS: $mode: rank 2 blamed in $runs of $runs runs (${ms} ms)"; else
    echo "FAIL: $mode: rank 0 or nobody blamed in $bad of $runs runs"
    failed=$((failed + 1))
  fi
done
[ "$failed" = 0 ]
