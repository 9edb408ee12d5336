#!/usr/bin/env bash
# Predictions on real PCIe machines' NCCL topology dumps (the held-out set, read where it is kept;
# SKIP when absent) against what NCCL itself chose on them: the RTX 3090 box's 2-node graph
# (1 channel at 4 GB/s), Azure's NC A100 v4 ring graph (2 channels at 12 GB/s, SYS), the 4x RTX
# 4090 host's measured all-reduce (12.6 GB/s busbw: predicted 1 x 12); GeForce
# GPUs are modelled without P2P, so their rings go through host memory (PHB or SYS).
set -u
cd "$(dirname "$0")/../.."
BIN=${BUILD:-build}/bin/weft-topo
DIR=${WEFT_TOPO_REAL_DIR:-../shared/data/topo-real}
[ -x "$BIN" ] || { echo "weft-topo not built"; exit 1; }
[ -d "$DIR" ] || { echo "SKIP: no real topology files ($DIR)"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 needed to read the JSON"; exit 77; }
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ring() { # file nodes -> "nchannels bw type_intra p2p"
  "$BIN" --xml "$DIR/$1" --nodes "$2" --json >"$tmp/o.json" 2>"$tmp/e.txt" || { echo "error"; return; }
  python3 -c 'import json,sys
d = json.load(open(sys.argv[1])); r = d["graphs"]["ring"]
print(r["nchannels"], "%g" % r["bw_intra"], r["type_intra"], all(x["p2p"] for x in d["system"]["ranks"]))' "$tmp/o.json"
}

expect() { # file nodes wanted why
  [ -f "$DIR/$1" ] || { echo "skip $1 (absent)"; return; }
  local got
  got=$(ring "$1" "$2")
  if [ "$got" = "$3" ]; then echo "ok   $1 x$2: $got"; else echo "FAILED $1 x$2: got '$got', want '$3' ($4)"; fail=1; fi
}

expect pcie-8x-rtx3090-2plx-ib56g.xml 2 "1 4 SYS False" "NCCL 2.18.1's graph dump for this box: 1 channel, speed 4"
expect pcie-8x-rtx3090-2plx-ib56g.xml 1 "1 5 SYS False" "switch uplinks carry 4 staged hops a channel"
expect pcie-8x-rtx3090-2plx-ib56g.xml 4 "1 4 SYS False" "4 such nodes measured 4.03 GB/s all-reduce busbw at 1 GiB"
expect pcie-4x-rtx4090-epyc-rome.xml 1 "1 12 SYS False" \
  "this host's own all-reduce records: 12.6 GB/s busbw; one GPU per NPS4 node, 25 GB/s of memory a node"
expect azure-ncv4-a100pcie-x4.pre-pr314.xml 1 "2 12 SYS True" "Azure's ncv4-graph.xml: ring, 2 channels, speed 12, SYS"
for f in pcie-4x-rtx4090-epyc-rome.xml pcie-2x-rtx4090-cx4-ib100g.xml; do
  [ -f "$DIR/$f" ] || continue
  got=$(ring "$f" 1)
  case "$got" in
    *" SYS False" | *" PHB False") echo "ok   $f: no P2P, through host memory ($got)" ;;
    *) echo "FAILED $f: $got (GeForce GPUs must be staged in host memory)"; fail=1 ;;
  esac
done
[ $fail = 0 ] && echo "test_topo_real_pcie: all checks passed"
exit $fail
