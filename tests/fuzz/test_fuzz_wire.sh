#!/usr/bin/env bash
# Runs the bootstrap / socket-network message fuzzer (tests/fuzz/fuzz_wire.c) for FUZZ_SECONDS
# (default 20) from the seeds it writes itself (one valid message of each kind).
# SKIP (77) when clang or libFuzzer is not available; FAIL on any crash, leak or sanitizer report.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
. tests/fuzz/lib.sh
fuzz_build fuzz_wire
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus"
root=$PWD
cd "$work"
WEFT_FUZZ_SEEDS="$work/corpus" "$root/$BUILD/fuzz/fuzz_wire" -artifact_prefix="$root/$BUILD/fuzz-artifacts/wire-" \
  -max_total_time="${FUZZ_SECONDS:-20}" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  corpus >fuzz.log 2>&1
rc=$?
nseeds=$(ls corpus | wc -l)
if [ "$nseeds" -lt 10 ]; then echo "fuzz: only $nseeds seeds written"; exit 1; fi
fuzz_verdict $rc fuzz.log
