#!/usr/bin/env bash
# Does a current PyTorch CUDA wheel (built against NCCL >= 2.30) import with Weft's libnccl.so.2?
# Not part of `make test`: the wheel and its nvidia-* dependencies are several GB.
#   bash scripts/check_torch_import.sh [pip spec, default "torch"]
# BUILD (default build) picks the library, TORCH_VENV (default $BUILD/venv-torch) the venv.
# It installs the wheel into the venv (once), lists the nccl* symbols torch's libraries need that
# our library does not export, then runs, with LD_PRELOAD of our library (torch's RPATH to
# nvidia/nccl/lib beats LD_LIBRARY_PATH) and LD_BIND_NOW=1 (every symbol resolved at load):
#   python -c 'import torch; print(torch.cuda.nccl.version())'
# and checks that the library mapped is ours. No GPU needed. Exits 0 when all of that holds.
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
LIB=$BUILD/lib/libnccl.so.2
VENV=${TORCH_VENV:-$BUILD/venv-torch}
SPEC=${1:-torch}
[ -e "$LIB" ] || { echo "check_torch_import: $LIB not built (make)"; exit 2; }
mkdir -p "$VENV"
echo "== disk"
df -h "$VENV" | tail -n 1
free_kb=$(df -Pk "$VENV" | awk 'NR == 2 { print $4 }')
[ "$free_kb" -gt $((12 * 1024 * 1024)) ] || { echo "check_torch_import: under 12 GB free at $VENV"; exit 2; }

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV" || { echo "check_torch_import: python3 -m venv failed"; exit 2; }
fi
if ! "$VENV/bin/python" -c 'import torch' >/dev/null 2>&1; then
  echo "== pip install $SPEC into $VENV"
  PIP_CACHE_DIR=$VENV/pip-cache "$VENV/bin/pip" install --disable-pip-version-check -q "$SPEC" ||
    { echo "check_torch_import: pip install $SPEC failed (offline?)"; exit 2; }
fi
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "== installed"
"$VENV/bin/pip" list 2>/dev/null | grep -iE '^(torch|nvidia-nccl)' | sed 's/^/  /'
nvnccl=$(find "$SITE/nvidia" -name 'libnccl.so*' 2>/dev/null | head -n 1)
[ -n "$nvnccl" ] && echo "  torch's own NCCL: $nvnccl"

fail=0
echo "== nccl symbols torch needs that $LIB lacks"
nm -D --defined-only "$LIB" | awk '{ print $NF }' | sort -u >"$VENV/weft.syms"
: >"$VENV/torch.syms"
for so in "$SITE"/torch/lib/*.so*; do
  readelf -d "$so" 2>/dev/null | grep -q 'NEEDED.*libnccl' || continue
  echo "  $(basename "$so") needs libnccl.so.2; $(readelf -d "$so" | grep -E 'R(UN)?PATH' | sed 's/.*\(R[A-Z]*PATH\)[^[]*/\1 /')"
  nm -D --undefined-only "$so" | awk '{ print $NF }' | grep -E '^p?nccl' >>"$VENV/torch.syms"
done
sort -u -o "$VENV/torch.syms" "$VENV/torch.syms"
missing=$(comm -23 "$VENV/torch.syms" "$VENV/weft.syms")
echo "  $(wc -l <"$VENV/torch.syms") distinct nccl symbols referenced"
if [ -n "$missing" ]; then
  echo "$missing" | sed 's/^/  MISSING /'
  fail=1
else
  echo "  none missing"
fi

echo "== import torch with our library preloaded"
# torch.cuda.nccl.version() is the NCCL torch was compiled against. torch's own loader also dlopens
# nvidia/nccl/lib/libnccl.so.2 by path, so two copies are mapped: what counts is which one torch's
# libraries bind their nccl* references to, which LD_DEBUG=bindings shows (all at load: BIND_NOW).
rm -f "$VENV"/ld-debug.*
# shellcheck disable=SC2016
LD_DEBUG=bindings LD_DEBUG_OUTPUT=$VENV/ld-debug LD_PRELOAD=$LIB LD_BIND_NOW=1 WEFT_BACKEND=host \
  "$VENV/bin/python" -W ignore -c '
import os
import torch
libs = sorted({os.path.realpath(l.split()[-1]) for l in open("/proc/self/maps")
               if len(l.split()) >= 6 and "libnccl" in os.path.basename(l.split()[-1])})
print("  torch", torch.__version__, "cuda", torch.version.cuda, "built against NCCL", torch.cuda.nccl.version())
print("  libnccl mapped:", " ".join(libs))
' 2>&1 | tail -n 20
rc=${PIPESTATUS[0]}
if [ "$rc" != 0 ]; then
  echo "  import FAILED (exit $rc)"
  fail=1
fi
cat "$VENV"/ld-debug.* 2>/dev/null | grep -E "binding file [^ ]*/torch/lib/[^ ]* \[[0-9]+\] to .* symbol .p?nccl" \
  >"$VENV/nccl-bindings.txt"
ours=$(grep -cF "to $LIB " "$VENV/nccl-bindings.txt")
total=$(wc -l <"$VENV/nccl-bindings.txt")
echo "  torch's nccl* references bound to $LIB: $ours of $total"
if [ "$total" = 0 ] || [ "$ours" != "$total" ]; then
  grep -vF "to $LIB " "$VENV/nccl-bindings.txt" | head -n 5 | sed 's/^ *[0-9]*:/  OTHER/'
  fail=1
fi
rm -f "$VENV"/ld-debug.*
[ $fail = 0 ] && echo "check_torch_import: OK" || echo "check_torch_import: FAILED"
exit $fail
