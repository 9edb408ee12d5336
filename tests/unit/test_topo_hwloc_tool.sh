#!/usr/bin/env bash
# weft-topo --hwloc FILE and --detect show what hwloc saw (packages, NUMA cpusets and memory, the
# PCI branches to GPUs and NICs with RDMA/netdev names) beside the model; --json says which
# detection ran; without libhwloc (WEFT_HWLOC_LIB naming a missing library) detection falls back
# to sysfs, says so, and a communicator still works; bad input is a clear error.
set -u
cd "$(dirname "$0")/../.."
BIN=${BUILD:-build}/bin/weft-topo
COLL=${BUILD:-build}/tests/integration/test_coll_threads
XML=tests/data/hwloc/2socket-switch-gpu-nic.xml
[ -x "$BIN" ] || { echo "weft-topo not built"; exit 1; }
/sbin/ldconfig -p 2>/dev/null | grep -q 'libhwloc\.so\.15' || { echo "SKIP: libhwloc.so.15 not installed"; exit 77; }
fail=0
err() { echo "FAILED: $*"; fail=1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
has() { grep -qF -- "$2" "$1" || err "$1 lacks: $2"; }

"$BIN" --hwloc "$XML" >"$tmp/h.txt" 2>"$tmp/err.txt" || err "--hwloc failed: $(cat "$tmp/err.txt")"
has "$tmp/h.txt" "hwloc: $XML: 2 packages, 2 NUMA nodes, 4 cores, 7 PUs; CPUs allowed 0-6 of 0-7"
has "$tmp/h.txt" "NUMA node 1: CPUs 4-6, 64.0 GiB"
has "$tmp/h.txt" "0000:04:00.0 device 15b3:1021 class 0207, 31.5 GB/s mlx5_0 (RDMA) ib0 (netdev)"
has "$tmp/h.txt" "0000:03:00.0 device 10de:2330 class 0302, 31.5 GB/s (GPU)"
has "$tmp/h.txt" "weft-topo: $XML (hwloc), 1 node"
has "$tmp/h.txt" "System: 1 host(s), 2 GPUs, 2 CPUs, 2 NICs, 3 NETs, 0 NVSwitches"
has "$tmp/h.txt" "NET/0 mlx5_0 dev 0"
"$BIN" --hwloc "$XML" --json >"$tmp/h.json" || err "--hwloc --json failed"
has "$tmp/h.json" '"detection": "hwloc"'

"$BIN" --detect >"$tmp/d.txt" 2>&1 || err "--detect failed"
has "$tmp/d.txt" "hwloc: this machine:"
has "$tmp/d.txt" "weft-topo: detect (hwloc)"
WEFT_TOPO_DETECT=sysfs "$BIN" --detect --json >"$tmp/s.json" || err "sysfs --detect failed"
has "$tmp/s.json" '"detection": "sysfs"'

# No hwloc at run time: sysfs, and the log says which was used.
WEFT_HWLOC_LIB=libhwloc-absent.so.15 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT "$BIN" --detect >"$tmp/n.txt" 2>&1 ||
  err "--detect without hwloc failed"
has "$tmp/n.txt" "hwloc: cannot load libhwloc-absent.so.15"
has "$tmp/n.txt" "Topology detection: sysfs"
has "$tmp/n.txt" "weft-topo: detect (sysfs)"
WEFT_HWLOC_LIB=libhwloc-absent.so.15 WEFT_TOPO_DETECT=hwloc "$BIN" --detect >/dev/null 2>"$tmp/e.txt" &&
  err "WEFT_TOPO_DETECT=hwloc without hwloc accepted"
has "$tmp/e.txt" "WEFT_TOPO_DETECT=hwloc but hwloc is not usable here"
WEFT_HWLOC_LIB=libhwloc-absent.so.15 WEFT_HWLOC_XML="$XML" "$BIN" --detect >/dev/null 2>"$tmp/e.txt" &&
  err "WEFT_HWLOC_XML without hwloc accepted"
has "$tmp/e.txt" "cannot read $XML without hwloc"
if [ -x "$COLL" ]; then
  WEFT_HWLOC_LIB=libhwloc-absent.so.15 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=GRAPH timeout 60 "$COLL" >"$tmp/c.txt" 2>&1 ||
    err "collectives without hwloc failed: $(tail -3 "$tmp/c.txt")"
  has "$tmp/c.txt" "Topology detection: sysfs"
fi

# Bad input.
"$BIN" --hwloc "$tmp/none.xml" >/dev/null 2>"$tmp/e.txt"; [ $? = 1 ] || err "missing hwloc file: want exit 1"
has "$tmp/e.txt" "$tmp/none.xml"
"$BIN" --hwloc "$XML" --xml "$XML" >/dev/null 2>&1; [ $? = 2 ] || err "--hwloc with --xml accepted"
WEFT_HWLOC_XML="$tmp/none.xml" "$BIN" --detect >/dev/null 2>&1 && err "bad WEFT_HWLOC_XML fell back silently"

[ $fail = 0 ] && echo "test_topo_hwloc_tool: all checks passed"
exit $fail
