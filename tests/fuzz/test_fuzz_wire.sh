#!/usr/bin/env bash
# Runs the bootstrap / socket-network message fuzzer (tests/fuzz/fuzz_wire.c) for FUZZ_SECONDS
# (default 20) from the seeds it writes itself (one valid message of each kind).
# SKIP (77) when clang or libFuzzer is not available; FAIL on any crash, leak or sanitizer report.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
command -v "${FUZZ_CC:-clang}" >/dev/null 2>&1 || { echo "SKIP: clang not installed"; exit 77; }
mkdir -p "$BUILD"
if ! make --no-print-directory -s "$BUILD/fuzz/fuzz_wire" >"$BUILD/fuzz-wire-build.log" 2>&1; then
  if grep -qiE 'fuzzer|libclang_rt|cannot find' "$BUILD/fuzz-wire-build.log"; then
    echo "SKIP: libFuzzer not available"; tail -3 "$BUILD/fuzz-wire-build.log"; exit 77
  fi
  echo "fuzz target failed to build"; cat "$BUILD/fuzz-wire-build.log"; exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus"
root=$PWD
mkdir -p "$BUILD/fuzz-artifacts"
cd "$work"
WEFT_FUZZ_SEEDS="$work/corpus" "$root/$BUILD/fuzz/fuzz_wire" -artifact_prefix="$root/$BUILD/fuzz-artifacts/wire-" \
  -max_total_time="${FUZZ_SECONDS:-20}" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  corpus >fuzz.log 2>&1
rc=$?
tail -n 20 fuzz.log
nseeds=$(ls corpus | wc -l)
if [ "$nseeds" -lt 10 ]; then echo "fuzz: only $nseeds seeds written"; exit 1; fi
if [ $rc = 0 ]; then echo "fuzz: no crash"; exit 0; fi
grep -m 3 -E '^==[0-9]+==ERROR|^SUMMARY|runtime error' fuzz.log
# libFuzzer's own exit codes (1, 77 for leaks/crashes...) must not read as a skip.
echo "fuzz: FAILED (exit $rc); inputs kept in $BUILD/fuzz-artifacts/"
exit 1
