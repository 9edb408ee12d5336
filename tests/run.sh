#!/usr/bin/env bash
# Runs every test: built programs under build/tests/ and scripts tests/**/test_*.sh.
# Exit status 0 = pass, 77 = skip, anything else = fail. Ends with "N passed, N failed".
# TESTS=regex limits the run to matching names, TESTS_SKIP=regex leaves matching ones out;
# TEST_TIMEOUT sets seconds per test (default 600).
# Then, when `make emu` has built $EMU_BUILD (default build-emu), the programs under its tests/gpu
# and tests/gpuemu run on the emulated GPU (names prefixed emu/); EMU_TESTS=0 leaves them out.
set -u
cd "$(dirname "$0")/.."
export BUILD=${BUILD:-build} # the scripts among the tests find the binaries here
# Tests pass host buffers: on a GPU machine "auto" would pick the CUDA backend. tests/gpu/ set
# WEFT_BACKEND=cuda themselves.
export WEFT_BACKEND=${WEFT_BACKEND:-host}
LOGDIR=$BUILD/test-logs
mkdir -p "$LOGDIR"
filter=${TESTS:-.}
skip=${TESTS_SKIP:-}
limit=${TEST_TIMEOUT:-600}
passed=0 failed=0 skipped=0
failed_names=()

EMU_BUILD=${EMU_BUILD:-build-emu}
list_tests() {
  find "$BUILD/tests" -type f -name 'test_*' -perm -u+x 2>/dev/null | sort
  find tests -type f -name 'test_*.sh' 2>/dev/null | sort
}
list_emu_tests() {
  [ "${EMU_TESTS:-1}" = 0 ] && return
  find "$EMU_BUILD/tests/gpuemu" "$EMU_BUILD/tests/gpu" -type f -name 'test_*' -perm -u+x 2>/dev/null | sort
}

run_one() {
  local t=$1 name log start rc
  name=${t#"$BUILD"/}
  case $t in "$EMU_BUILD"/*) name=emu/${t#"$EMU_BUILD"/} ;; esac
  log="$LOGDIR/$(echo "$name" | tr '/' '_').log"
  start=$(date +%s)
  timeout -k 10 "$limit" bash -c '[[ "$1" == *.sh ]] && exec bash "$1" || exec "$1"' _ "$t" >"$log" 2>&1 </dev/null
  rc=$?
  local secs=$(($(date +%s) - start))
  case $rc in
    0) passed=$((passed + 1)); echo "PASS $name (${secs}s)" ;;
    77) skipped=$((skipped + 1)); echo "SKIP $name: $(grep -m1 -i skip "$log" | cut -c1-160)" ;;
    *) failed=$((failed + 1)); failed_names+=("$name")
       [ $rc = 124 ] && echo "FAIL $name: timed out after ${limit}s" || echo "FAIL $name (exit $rc, ${secs}s)"
       tail -n 30 "$log" | sed 's/^/    /' ;;
  esac
}

for t in $(list_tests); do
  echo "$t" | grep -Eq -- "$filter" || continue
  [ -n "$skip" ] && echo "$t" | grep -Eq -- "$skip" && continue
  run_one "$t"
done
for t in $(list_emu_tests); do
  echo "emu/${t#"$EMU_BUILD"/}" | grep -Eq -- "$filter" || continue
  run_one "$t"
done

if [ ${#failed_names[@]} -gt 0 ]; then echo "failed: ${failed_names[*]}"; fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
