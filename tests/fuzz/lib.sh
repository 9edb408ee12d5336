# Shared by the fuzz test scripts (sourced from the repository root, BUILD set).

# fuzz_build TARGET: make $BUILD/fuzz/TARGET; SKIP (77) when clang or libFuzzer is missing, FAIL
# when it does not compile.
fuzz_build() {
  command -v "${FUZZ_CC:-clang}" >/dev/null 2>&1 || { echo "SKIP: clang not installed"; exit 77; }
  mkdir -p "$BUILD/fuzz-artifacts"
  local log="$BUILD/$1-build.log"
  make --no-print-directory -s "$BUILD/fuzz/$1" >"$log" 2>&1 && return 0
  if grep -qiE 'fuzzer|libclang_rt|cannot find' "$log"; then
    echo "SKIP: libFuzzer not available"; tail -3 "$log"; exit 77
  fi
  echo "fuzz target $1 failed to build"; cat "$log"; exit 1
}

# fuzz_verdict RC LOG: exit 0 when the run found nothing, else 1 with its first reports.
fuzz_verdict() {
  tail -n 20 "$2"
  if [ "$1" = 0 ]; then echo "fuzz: no crash"; exit 0; fi
  grep -m 3 -E '^==[0-9]+==ERROR|^SUMMARY|runtime error' "$2"
  # libFuzzer's own exit codes (1, 77 for leaks/crashes...) must not read as a skip.
  echo "fuzz: FAILED (exit $1); inputs kept in $BUILD/fuzz-artifacts/"
  exit 1
}
