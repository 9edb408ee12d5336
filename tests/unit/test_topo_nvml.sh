#!/usr/bin/env bash
# GPU detection through NVML with a stand-in libnvidia-ml.so.1 (built here): two "GPUs" at PCI
# devices this machine really has, sm 90, 18 NVLinks each to a bus id that is not on the PCI bus
# (an NVSwitch). weft-topo --detect must find both, one NVSwitch, and rings over NVLink.
set -u
cd "$(dirname "$0")/../.."
BIN=${BUILD:-build}/bin/weft-topo
[ -x "$BIN" ] || { echo "weft-topo not built"; exit 1; }
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 needed to read the JSON"; exit 77; }
command -v "${CC:-gcc}" >/dev/null 2>&1 || { echo "SKIP: no C compiler"; exit 77; }
ids=()
for d in /sys/bus/pci/devices/*; do
  [ -e "$d" ] || continue
  ls -d "$d"/net "$d"/*/net >/dev/null 2>&1 && continue   # keep the NICs as NICs
  ids+=("$(basename "$d")")
  [ ${#ids[@]} = 2 ] && break
done
[ ${#ids[@]} = 2 ] || { echo "SKIP: fewer than two PCI devices to stand in for GPUs"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/nvml.c" <<'C'
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
struct pci { char legacy[16]; unsigned int domain, bus, device, id, sub; char bus_id[32]; };
static const char* ids(int i) {
  static char buf[2][32];
  const char* env = getenv("FAKE_NVML_BUSIDS");
  const char* comma = strchr(env, ',');
  if (i == 0) snprintf(buf[0], 32, "0000%.*s", (int)(comma - env), env);
  else snprintf(buf[1], 32, "0000%s", comma + 1);
  return buf[i];
}
int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned int* n) { *n = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void** d) { *d = (void*)(long)(i + 1); return 0; }
int nvmlDeviceGetPciInfo_v3(void* d, struct pci* p) {
  memset(p, 0, sizeof(*p)); snprintf(p->bus_id, 32, "%s", ids((int)(long)d - 1)); return 0;
}
int nvmlDeviceGetCudaComputeCapability(void* d, int* ma, int* mi) { (void)d; *ma = 9; *mi = 0; return 0; }
int nvmlDeviceGetNvLinkState(void* d, unsigned int l, int* on) { (void)d; *on = l < 18; return 0; }
int nvmlDeviceGetP2PStatus(void* a, void* b, int caps, int* st) {
  (void)a; (void)b; (void)caps; *st = getenv("FAKE_NVML_P2P") ? atoi(getenv("FAKE_NVML_P2P")) : 0; return 0;
}
int nvmlDeviceGetNvLinkRemotePciInfo_v2(void* d, unsigned int l, struct pci* p) {
  (void)d; (void)l; memset(p, 0, sizeof(*p)); snprintf(p->bus_id, 32, "00000000:FF:1F.0"); return 0;
}
C
"${CC:-gcc}" -shared -fPIC -o "$tmp/libnvidia-ml.so.1" "$tmp/nvml.c" || { echo "cannot build the stand-in"; exit 1; }
FAKE_NVML_BUSIDS="${ids[0]},${ids[1]}" LD_LIBRARY_PATH="$tmp" "$BIN" --detect --json >"$tmp/out.json" || exit 1
python3 - "$tmp/out.json" "${ids[0]}" "${ids[1]}" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = d["system"]
assert s["gpus"] == 2 and not s["host_ranks"], s
assert s["nvswitches"] == 1, s
assert sorted(r["busid"] for r in s["ranks"]) == sorted(sys.argv[2:4]), s["ranks"]
assert all(r["sm"] == 90 for r in s["ranks"]), s["ranks"]
ring = d["graphs"]["ring"]
assert ring["type_intra"] == "NVL", ring
# 18 x 20.6 GB/s per GPU: 6 x 60 fits (7 does not), split in two since 60 >= 50.
assert ring["nchannels"] == 12 and abs(ring["bw_intra"] - 30) < 1e-3, ring
assert d["tuning"]["model"] == "hopper"
assert all(r["p2p"] for r in s["ranks"]), s["ranks"]
PY
[ $? = 0 ] || exit 1
# The driver says no PCIe P2P (as for GeForce boards): the GPUs are marked so in the model.
FAKE_NVML_P2P=5 FAKE_NVML_BUSIDS="${ids[0]},${ids[1]}" LD_LIBRARY_PATH="$tmp" "$BIN" --detect --json >"$tmp/np.json" || exit 1
python3 - "$tmp/np.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["system"]
assert s["gpus"] == 2 and not any(r["p2p"] for r in s["ranks"]), s["ranks"]
print("test_topo_nvml: all checks passed")
PY
