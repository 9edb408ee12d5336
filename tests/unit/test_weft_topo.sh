#!/usr/bin/env bash
# weft-topo on every fixture (1 and 3 nodes, text and JSON), the JSON schema's keys, figures that
# the search tests also state, errors on bad input, and --detect on this machine.
set -u
cd "$(dirname "$0")/../.."
BIN=${BUILD:-build}/bin/weft-topo
[ -x "$BIN" ] || { echo "weft-topo not built"; exit 1; }
fail=0
err() { echo "FAILED: $*"; fail=1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
have_py=0
command -v python3 >/dev/null 2>&1 && have_py=1

check_json() { # file
  [ $have_py = 1 ] || { grep -q '"version": 1' "$1"; return; }
  python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["version"] == 1
for k in ("source", "nodes", "system", "graphs", "channels", "tuning"): assert k in d, k
s = d["system"]
assert s["ranks_per_node"] == len(s["ranks"]) >= 1
for g in ("ring", "tree"):
    gr = d["graphs"][g]
    assert gr["nchannels"] == len(gr["channels"]) >= 1
    for ch in gr["channels"]: assert sorted(ch["ranks"]) == list(range(s["ranks_per_node"])), ch
c = d["channels"]
assert c["nranks"] == s["ranks_per_node"] * d["nodes"] and c["nchannels"] >= 1
t = d["tuning"]
assert len(t["predictions"]) == 12, len(t["predictions"])
for p in t["predictions"]:
    best = min(x["time_us"] for x in p["candidates"])
    assert p["chosen"]["time_us"] > 0 and best > 0
    assert p["collective"] in ("AllReduce", "AllGather", "ReduceScatter", "Broadcast")
PY
}

ring_of() { # json file -> "nchannels bw"
  if [ $have_py = 1 ]; then
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["graphs"]["ring"]; print(r["nchannels"], "%g" % r["bw_intra"])' "$1"
  fi
}

n=0
for f in tests/data/topo/*.xml; do
  for nodes in 1 3; do
    "$BIN" --xml "$f" --nodes $nodes >"$tmp/out.txt" 2>"$tmp/err.txt" || { err "$f x$nodes text"; cat "$tmp/err.txt"; continue; }
    grep -q '^Ring: pattern 4' "$tmp/out.txt" || err "$f x$nodes: no ring line"
    grep -q 'AllReduce .*1073741824 B' "$tmp/out.txt" || err "$f x$nodes: no 1 GiB all-reduce prediction"
    "$BIN" --xml "$f" --nodes $nodes --json >"$tmp/out.json" 2>"$tmp/err.txt" || { err "$f x$nodes json"; continue; }
    check_json "$tmp/out.json" || err "$f x$nodes: JSON schema"
    n=$((n + 1))
  done
done
echo "ran on $n fixture/node combinations"

# Figures stated in tests/unit/test_graph_search.c.
if [ $have_py = 1 ]; then
  "$BIN" --xml tests/data/topo/a100-nvswitch-8gpu-8nic.xml --json >"$tmp/a.json"
  [ "$(ring_of "$tmp/a.json")" = "12 20" ] || err "A100 ring: $(ring_of "$tmp/a.json"), expected 12 x 20"
  "$BIN" --xml tests/data/topo/h100-nvswitch-8gpu-8nic.xml --nodes 2 --json >"$tmp/h.json"
  [ "$(ring_of "$tmp/h.json")" = "8 48" ] || err "H100 x2 ring: $(ring_of "$tmp/h.json"), expected 8 x 48"
  "$BIN" --xml tests/data/topo/cpu-2numa-2nic.xml --ranks 8 --copy-bw 10 --json >"$tmp/c.json"
  [ "$(ring_of "$tmp/c.json")" = "1 10" ] || err "host ranks ring: $(ring_of "$tmp/c.json"), expected 1 x 10"
  # The NICs each rank leaves through (tests/unit/test_near_nets.c states the same): H100, one NIC
  # per GPU; A100, two GPUs take turns on the two NICs of their switch.
  python3 - "$tmp/h.json" "$tmp/a.json" <<'PY' || err "NICs per rank"
import json, sys
h, a = (json.load(open(f))["nics"] for f in sys.argv[1:3])
assert [(x["nets"], x["turn"], x["sharers"]) for x in h] == [([f"mlx5_{i}:1"], 0, 1) for i in range(8)], h
assert [(x["nets"], x["turn"], x["sharers"]) for x in a] == \
    [([f"mlx5_{i - i % 2}:1", f"mlx5_{i - i % 2 + 1}:1"], i % 2, 2) for i in range(8)], a
PY
fi

# Bad input: clear error naming the line, exit status 1; bad usage: 2.
printf '<system version="1">\n  <cpu numaid="0">\n  </pci>\n</system>\n' >"$tmp/bad.xml"
"$BIN" --xml "$tmp/bad.xml" >/dev/null 2>"$tmp/err.txt"
rc=$?
[ $rc = 1 ] || err "bad XML exit status $rc"
grep -q 'line 3' "$tmp/err.txt" || { err "bad XML error lacks the line"; cat "$tmp/err.txt"; }
"$BIN" --xml /nonexistent.xml >/dev/null 2>&1 && err "missing file accepted"
"$BIN" >/dev/null 2>&1; [ $? = 2 ] || err "no arguments should be a usage error"
"$BIN" --xml "$tmp/bad.xml" --detect >/dev/null 2>&1; [ $? = 2 ] || err "--xml with --detect accepted"

# Detection on this machine (CPU/NUMA/NIC graph without GPUs).
if "$BIN" --detect --json >"$tmp/d.json" 2>"$tmp/err.txt"; then
  check_json "$tmp/d.json" || err "--detect JSON schema"
else
  err "--detect failed: $(cat "$tmp/err.txt")"
fi

[ $fail = 0 ] && echo "test_weft_topo: all checks passed"
exit $fail
