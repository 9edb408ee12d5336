#!/usr/bin/env bash
# weft-topo --explain COLL SIZE: the tuning log's three lines (candidates, exclusions, choice with
# its reason) for a topology file, offline; NCCL_PROTO forcing named as the reason; usage errors.
set -u
cd "$(dirname "$0")/../.."
BIN=${BUILD:-build}/bin/weft-topo
[ -x "$BIN" ] || { echo "weft-topo not built"; exit 1; }
fail=0
err() { echo "FAILED: $*"; fail=1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
a100=tests/data/topo/a100-nvswitch-8gpu-8nic.xml

"$BIN" --xml $a100 --nodes 2 --explain AllReduce 1M >"$tmp/out" 2>&1 || err "--explain AllReduce 1M failed"
[ "$(grep -c '^  AllReduce 1048576 B: ' "$tmp/out")" = 3 ] || err "want 3 explanation lines"
grep -q 'candidates on 16 channel(s), 16 rank(s), 2 node(s): Tree/LL .* us, .*Ring/Simple .* us' "$tmp/out" ||
  err "candidates with predicted times"
grep -q 'excluded .*NVLS.* (not in the model)' "$tmp/out" || err "exclusions with why"
grep -q 'chose Tree/LL128 on 16 channel(s), .* us predicted; reason: model, fastest of 6 candidates' "$tmp/out" ||
  err "choice and reason (docs/weft-topo.md states Tree/LL128 for 1 MiB on two nodes)"
grep -q '^Ring: pattern' "$tmp/out" && err "--explain prints only the explanation"

NCCL_PROTO=LL "$BIN" --xml $a100 --nodes 2 --explain allreduce 1048576 >"$tmp/ll" 2>&1 || err "NCCL_PROTO=LL run"
grep -q 'excluded .*Tree/LL128 .* us.*(NCCL_PROTO=LL)' "$tmp/ll" || err "NCCL_PROTO exclusion with its time"
grep -q 'chose Tree/LL on .*reason: narrowed by NCCL_PROTO=LL, which excludes the faster Tree/LL128' "$tmp/ll" ||
  err "NCCL_PROTO named as the reason"
NCCL_ALGO=Ring NCCL_PROTO=Simple "$BIN" --xml $a100 --explain Broadcast 64K >"$tmp/f" 2>&1 || err "forced run"
grep -q 'chose Ring/Simple .*reason: forced by NCCL_PROTO=Simple' "$tmp/f" || err "forced by NCCL_PROTO"

"$BIN" --xml $a100 --explain Gather 1M >/dev/null 2>"$tmp/e"
[ $? = 2 ] && grep -q 'want one of' "$tmp/e" || err "unknown collective: exit 2 with the names"
"$BIN" --xml $a100 --explain AllReduce 1Q >/dev/null 2>&1
[ $? = 2 ] || err "bad size: exit 2"
"$BIN" --xml $a100 --explain AllReduce >/dev/null 2>&1
[ $? = 2 ] || err "missing size: exit 2"
cat "$tmp/out" "$tmp/ll"
[ $fail = 0 ] && echo "weft-topo --explain: ok"
exit $fail
