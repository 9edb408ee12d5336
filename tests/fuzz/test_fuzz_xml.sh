#!/usr/bin/env bash
# Runs the topology XML fuzzer for a short time (FUZZ_SECONDS, default 25) from the fixtures.
# SKIP (77) when clang or libFuzzer is not available; FAIL on any crash, leak or sanitizer report.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
. tests/fuzz/lib.sh
fuzz_build fuzz_xml
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus"
cp tests/data/topo/*.xml "$work/corpus/"
root=$PWD
cd "$work"
"$root/$BUILD/fuzz/fuzz_xml" -artifact_prefix="$root/$BUILD/fuzz-artifacts/" -max_total_time="${FUZZ_SECONDS:-25}" -max_len=16384 -timeout=10 \
  -rss_limit_mb=2048 -dict="$root/tests/fuzz/xml.dict" -print_final_stats=1 corpus >fuzz.log 2>&1
rc=$?
fuzz_verdict $rc fuzz.log
