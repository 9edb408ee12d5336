#!/usr/bin/env bash
# Fetches NVIDIA's NCCL 2.32.3 (PyPI nvidia-nccl-cu13) into DIR as a reference for the ABI tests:
# DIR/include (its headers) and DIR/exports.txt (its library's exported names). The wheel and the
# library are deleted afterwards; nothing of it is ever linked or committed. Offline, it says so
# and leaves DIR without a stamp, and the tests that need it SKIP.
set -u
dir=${1:?usage: fetch_nccl_ref.sh DIR}
version=2.32.3
[ -e "$dir/stamp" ] && exit 0
command -v python3 >/dev/null || { echo "nccl-ref: python3 missing; ABI tests against $version will SKIP"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! python3 -m pip download -q --no-deps --timeout 30 --retries 1 -d "$tmp" "nvidia-nccl-cu13==$version" >"$tmp/log" 2>&1; then
  echo "nccl-ref: could not download nvidia-nccl-cu13==$version (offline?); ABI tests against it will SKIP"
  exit 0
fi
wheel=$(ls "$tmp"/*.whl 2>/dev/null | head -n1)
python3 - "$wheel" "$tmp/x" <<'PY' || { echo "nccl-ref: unpacking $wheel failed"; exit 0; }
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for n in z.namelist():
        if n.startswith("nvidia/nccl/include/") or n == "nvidia/nccl/lib/libnccl.so.2":
            z.extract(n, sys.argv[2])
PY
lib=$tmp/x/nvidia/nccl/lib/libnccl.so.2
rm -rf "$dir" && mkdir -p "$dir"
nm -D --defined-only "$lib" | awk 'NF >= 3 {sub(/@.*/, "", $3); print $3}' | sort -u >"$dir/exports.txt"
mv "$tmp/x/nvidia/nccl/include" "$dir/include"
echo "$version" >"$dir/stamp"
echo "nccl-ref: NCCL $version headers and export list in $dir ($(wc -l <"$dir/exports.txt") names)"
