#!/usr/bin/env bash
# Runs the topology XML fuzzer for a short time (FUZZ_SECONDS, default 25) from the fixtures.
# SKIP (77) when clang or libFuzzer is not available; FAIL on any crash, leak or sanitizer report.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
command -v "${FUZZ_CC:-clang}" >/dev/null 2>&1 || { echo "SKIP: clang not installed"; exit 77; }
if ! make --no-print-directory -s fuzz >"$BUILD/fuzz-build.log" 2>&1; then
  if grep -qiE 'fuzzer|libclang_rt|cannot find' "$BUILD/fuzz-build.log"; then
    echo "SKIP: libFuzzer not available"; tail -3 "$BUILD/fuzz-build.log"; exit 77
  fi
  echo "fuzz target failed to build"; cat "$BUILD/fuzz-build.log"; exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus"
cp tests/data/topo/*.xml "$work/corpus/"
root=$PWD
mkdir -p "$BUILD/fuzz-artifacts"
cd "$work"
"$root/$BUILD/fuzz/fuzz_xml" -artifact_prefix="$root/$BUILD/fuzz-artifacts/" -max_total_time="${FUZZ_SECONDS:-25}" -max_len=16384 -timeout=10 \
  -rss_limit_mb=2048 -dict="$root/tests/fuzz/xml.dict" -print_final_stats=1 corpus >fuzz.log 2>&1
rc=$?
tail -n 20 fuzz.log
if [ $rc = 0 ]; then echo "fuzz: no crash"; exit 0; fi
# libFuzzer's own exit codes (1, 77 for leaks/crashes...) must not read as a skip.
echo "fuzz: FAILED (exit $rc); inputs kept in $BUILD/fuzz-artifacts/"
exit 1
