#!/usr/bin/env bash
# Ranks bound to a core each (weftrun --bind core, and mpirun, which binds to cores by default) are
# not oversubscribed: the ranks' CPUs are counted together, not each rank's alone (which took every
# bound job for oversubscribed, so every wait yielded: about 3x slower small all-reduces). Ranks that
# share one CPU (taskset around the launcher) still are. Read from the direct paths' INIT line.
# Exits 0 if every check passed, 1 otherwise, 77 without two CPUs or taskset.
set -u
cd "$(dirname "$0")/../.." || exit 1
BIN=${BUILD:-build}/bin
export WEFT_BACKEND=${WEFT_BACKEND:-host}
for f in weftrun all_reduce_perf; do
  [ -x "$BIN/$f" ] || { echo "FAIL: $BIN/$f not built"; exit 1; }
done
command -v taskset >/dev/null || { echo "SKIP: needs taskset"; exit 77; }
allowed=$(grep Cpus_allowed_list /proc/self/status | cut -f2)
first=$(echo "$allowed" | tr ',' '\n' | head -1 | cut -d- -f1)
[ "$(nproc)" -ge 2 ] || { echo "SKIP: needs 2 CPUs (allowed: $allowed)"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/weft-bound.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail=0
PERF=("$BIN/all_reduce_perf" -b 8 -e 1K -f 4 -c 1 -w 2 -n 20)

# name, what every rank's INIT line must say ("2 ranks on N CPUs" with or without the yield note),
# then the command.
check() {
  local name=$1 want=$2
  shift 2
  timeout -k 5 60 env -u NCCL_COMM_ID NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT "$@" >"$T/out" 2>&1 </dev/null
  local rc=$? lines matching
  lines=$(grep -c 'direct paths on' "$T/out")
  matching=$(grep 'direct paths on' "$T/out" | grep -c -- "$want")
  if [ $rc = 0 ] && grep -q '^# Out of bounds values : 0 OK$' "$T/out" && [ "$lines" = 2 ] && [ "$matching" = 2 ]; then
    echo "PASS $name"
  else
    echo "FAIL $name (rc $rc, $matching of $lines INIT lines say '$want')"
    grep 'direct paths\|WARN' "$T/out" | head -5 | sed 's/^/    /'
    fail=1
  fi
}

check "weftrun --bind core -n 2: not oversubscribed" "2 ranks on [2-9][0-9]* CPUs, " \
  "$BIN/weftrun" --bind core -n 2 "${PERF[@]}"
check "taskset -c $first weftrun -n 2: oversubscribed" "2 ranks on 1 CPUs (oversubscribed" \
  taskset -c "$first" "$BIN/weftrun" -n 2 "${PERF[@]}"
if command -v mpirun >/dev/null && mpirun --version 2>&1 | grep -q "Open MPI"; then
  root=()
  [ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
  mkdir -p "$T/rdv"
  check "mpirun -n 2 (bound to cores): not oversubscribed" "2 ranks on [2-9][0-9]* CPUs, " \
    env WEFT_PERF_RENDEZVOUS_DIR="$T/rdv" mpirun "${root[@]}" --bind-to core -n 2 "${PERF[@]}"
else
  echo "SKIP mpirun: Open MPI not installed"
fi
exit $fail
