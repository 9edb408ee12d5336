#!/usr/bin/env bash
# Weft's libnccl.so.2 must export exactly the dynamic symbols NVIDIA's 2.32.3 libnccl.so.2 exports
# (the list scripts/fetch_nccl_ref.sh read off the PyPI wheel's library).
set -u
cd "$(dirname "$0")/../.."
build=${BUILD:-build}
ours=$build/lib/libnccl.so.2
ref=$build/ref/nccl-2.32.3
command -v nm >/dev/null || { echo "SKIP: nm (binutils) is not installed"; exit 77; }
[ -e "$ref/stamp" ] || { echo "SKIP: no NCCL 2.32.3 export list in $ref (scripts/fetch_nccl_ref.sh; offline?)"; exit 77; }
[ -e "$ours" ] || { echo "FAILED: $ours is missing; run make"; exit 1; }

names() { nm -D --defined-only "$1" | awk 'NF >= 3 {sub(/@.*/, "", $3); print $3}' | sort -u; }
want=$(cat "$ref/exports.txt")
# Beside NCCL's names, Weft exports only its extensions, each declared in include/weft.h.
ext=$(grep -o '^ncclResult_t weft[A-Za-z]*' include/weft.h | awk '{print $2}' | sort -u)
got_all=$(names "$ours")
for e in $(grep '^weft' <<<"$got_all"); do
  grep -qx "$e" <<<"$ext" || { echo "FAILED: $e is exported but not declared in include/weft.h"; exit 1; }
done
got=$(grep -v '^weft' <<<"$got_all")
nwant=$(grep -c . <<<"$want")
nnccl=$(grep -c '^nccl' <<<"$want")
if [ "$nnccl" -lt 90 ]; then echo "FAILED: only $nnccl nccl* names in $ref/exports.txt"; exit 1; fi
echo "reference: NCCL $(cat "$ref/stamp") ($nwant symbols, $nnccl nccl*)"
if [ "$want" != "$got" ]; then
  echo "FAILED: exported names differ (< NVIDIA's, > Weft's):"
  diff <(echo "$want") <(echo "$got")
  exit 1
fi
echo "test_exports: the $nwant exported names are identical"
