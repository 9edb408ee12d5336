#!/usr/bin/env bash
# Multi-host all-reduce benchmark (not a test): all_reduce_perf across 2 and 4 network-namespace
# hosts (tests/net/netns.sh) beside Gloo (TCP) and Open MPI (TCP BTL) on the same namespaces,
# plus a plain TCP stream between two of them, all in one run. Prints busbw per size and the
# ratios. Needs root, ip, and for the peers libgloo-dev and openmpi (skipped when absent).
#   bench/net_compare.sh [HOSTS...]     (default "2 4"); MAXB (default 64M), SECS per size (0.2)
#   BASE_ENV="VAR=value ...": also run Weft with these settings, as column "base" (before/after
#   comparisons within one run; the machine's speed drifts between runs); REPS=k: Weft (and base)
#   k times, alternating, best busbw per size
set -u
cd "$(dirname "$0")/.."
. tests/net/netns.sh
why=$(netns_usable) || { echo "net_compare: $why" >&2; exit 1; }
HOSTS=${*:-2 4}
MAXB=${MAXB:-64M}
SECS=${SECS:-0.2}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/weft-netbench.XXXXXX")}
trap 'netns_down' EXIT
trap 'exit 1' INT TERM
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
make -s -j2 lib perf >/dev/null || exit 1
gcc -O2 -o "$OUT/tcp_stream" bench/tcp_stream.c || exit 1
have_gloo=0 have_mpi=0
if [ -e /usr/include/gloo/allreduce.h ]; then
  # The Gloo driver listens on 127.0.0.1; here each rank must use its namespace's address.
  sed 's|tcp::attr attr("127.0.0.1");|tcp::attr attr(getenv("GLOO_HOST") ? getenv("GLOO_HOST") : "127.0.0.1");|' \
    bench/gloo_allreduce.cc >"$OUT/gloo_allreduce.cc"
  g++ -O3 -std=c++17 -Ibench -o "$OUT/gloo_allreduce" "$OUT/gloo_allreduce.cc" -lgloo -pthread && have_gloo=1
fi
command -v mpicc.openmpi >/dev/null && mpicc.openmpi -O2 -Ibench -o "$OUT/mpi_allreduce" bench/mpi_allreduce.c -lm &&
  have_mpi=1
netns_up 4 || exit 1
# mpirun reaches the other "hosts" through this agent: the host name is a namespace address.
cat >"$OUT/nsrsh" <<AGENT
#!/bin/bash
h=\$1; shift
while [[ \$h == -* ]]; do h=\$1; shift; done
exec ip netns exec "${NS_PREFIX}\$(( \${h##*.} - 1 ))" bash -c "\$*"
AGENT
chmod +x "$OUT/nsrsh"

run_weft() { # n [tag env...]: tag names the output (weft by default)
  local n=$1 tag=${2:-weft} r pids=() port=29600
  shift $(($# < 2 ? $# : 2))
  for ((r = 0; r < n; r++)); do
    ip netns exec "$NS_PREFIX$r" env "$@" WEFT_RANK=$r WEFT_NRANKS=$n NCCL_COMM_ID="$(netns_addr 0):$port" \
      WEFT_HOSTID="bench$r" NCCL_SOCKET_IFNAME=eth0 build/bin/all_reduce_perf -b 8 -e "$MAXB" -f 8 -n 20 -w 3 \
      >"$OUT/$tag$n.$r" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  # Best of the repetitions so far (REPS): the machine's load drifts while the run goes on.
  touch "$OUT/$tag$n.bw"
  awk '$1 ~ /^[0-9]+$/ && NF >= 12 {print $1, $8}' "$OUT/$tag$n.0" | cat "$OUT/$tag$n.bw" - |
    awk '{if (!($1 in m) || $2 > m[$1]) m[$1] = $2} END {for (b in m) print b, m[b]}' | sort -n >"$OUT/$tag$n.tmp"
  mv "$OUT/$tag$n.tmp" "$OUT/$tag$n.bw"
}
run_gloo() {
  local n=$1 r pids=() store
  store=$(mktemp -d "$OUT/store.XXXX")
  for ((r = 0; r < n; r++)); do
    ip netns exec "$NS_PREFIX$r" env RANK=$r SIZE=$n GLOO_STORE="$store" GLOO_HOST="$(netns_addr $r)" \
      "$OUT/gloo_allreduce" -b 8 -e "$MAXB" -f 8 -t "$SECS" >"$OUT/gloo$n.$r" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  awk -v n=$n '$1 ~ /^[0-9]+$/ {print $1, $1 / $2 / 1e3 * 2 * (n - 1) / n}' "$OUT/gloo$n.0" >"$OUT/gloo$n.bw"
}
run_mpi() {
  local n=$1 r hosts=""
  for ((r = 0; r < n; r++)); do hosts="$hosts${hosts:+,}$(netns_addr $r)"; done
  ip netns exec "${NS_PREFIX}0" timeout 600 mpirun --allow-run-as-root -np $n --host "$hosts" \
    --mca plm_rsh_agent "$OUT/nsrsh" --mca btl tcp,self --mca btl_tcp_if_include eth0 \
    --mca oob_tcp_if_include eth0 "$OUT/mpi_allreduce" -b 8 -e "$MAXB" -f 8 -t "$SECS" >"$OUT/mpi$n.0" 2>&1
  awk -v n=$n '$1 ~ /^[0-9]+$/ {print $1, $1 / $2 / 1e3 * 2 * (n - 1) / n}' "$OUT/mpi$n.0" >"$OUT/mpi$n.bw"
}
stream() {
  ip netns exec "${NS_PREFIX}1" "$OUT/tcp_stream" -s 29700 >"$OUT/stream" &
  local p=$!
  sleep 0.3
  ip netns exec "${NS_PREFIX}0" "$OUT/tcp_stream" -c "$(netns_addr 1)" 29700 3
  wait $p
  cat "$OUT/stream"
}
# Every host streaming to the next at once (what a ring all-reduce asks of the hosts, here all
# sharing the same CPUs): the slowest stream's GB/s, the roof for ring busbw on n hosts.
stream_ring() { # n
  local n=$1 h pids=()
  for ((h = 0; h < n; h++)); do
    ip netns exec "$NS_PREFIX$(((h + 1) % n))" "$OUT/tcp_stream" -s $((29710 + h)) >"$OUT/ring$n.$h" &
    pids+=($!)
  done
  sleep 0.3
  for ((h = 0; h < n; h++)); do
    ip netns exec "$NS_PREFIX$h" "$OUT/tcp_stream" -c "$(netns_addr $(((h + 1) % n)))" $((29710 + h)) 3 &
  done
  wait
  cat "$OUT"/ring$n.* | sort -g | head -1
}

echo "# Multi-host all-reduce, float32 sum, busbw GB/s; $(nproc) CPUs shared by every namespace"
TCP=$(stream)
echo "# plain TCP stream host0 -> host1: $TCP GB/s"
for n in $HOSTS; do
  : >"$OUT/weft$n.bw"
  : >"$OUT/base$n.bw"
  for ((rep = 0; rep < ${REPS:-1}; rep++)); do # alternate, so drift hits both alike
    run_weft $n
    # shellcheck disable=SC2086
    [ -n "${BASE_ENV:-}" ] && run_weft $n base $BASE_ENV
  done
  [ $have_gloo = 1 ] && run_gloo $n || : >"$OUT/gloo$n.bw"
  [ $have_mpi = 1 ] && run_mpi $n || : >"$OUT/mpi$n.bw"
  RING=$(stream_ring $n)
  echo "## $n hosts x 1 rank; TCP ring (each host streams to the next, all at once): $RING GB/s per stream"
  printf "%12s %10s %10s %10s %10s %12s %10s %10s %10s\n" bytes weft base gloo openmpi weft/best weft/tcp \
    weft/ring weft/base
  python3 - "$OUT" "$n" "$TCP" "$RING" <<'PY'
import sys
out, n, tcp, ring = sys.argv[1], sys.argv[2], float(sys.argv[3] or 0), float(sys.argv[4] or 0)
def load(name):
    d = {}
    try:
        for line in open(f"{out}/{name}{n}.bw"):
            b, bw = line.split()[:2]
            d[int(b)] = float(bw)
    except (OSError, ValueError):
        pass
    return d
w, base, g, m = load("weft"), load("base"), load("gloo"), load("mpi")
for b in sorted(w):
    peers = [x for x in (g.get(b), m.get(b)) if x]
    best = max(peers) if peers else 0
    fmt = lambda x: f"{x:10.3f}" if x is not None else f"{'-':>10}"
    ratio = f"{w[b] / best:12.2f}" if best else f"{'-':>12}"
    vs_base = f"{w[b] / base[b]:10.2f}" if base.get(b) else f"{'-':>10}"
    print(f"{b:12d} {fmt(w[b])} {fmt(base.get(b))} {fmt(g.get(b))} {fmt(m.get(b))} {ratio} "
          f"{w[b] / tcp if tcp else 0:10.2f} {w[b] / ring if ring else 0:10.2f} {vs_base}")
PY
  echo "8-byte latency (us): weft $(awk '$1 == 8 && NF >= 12 {print $6}' "$OUT/weft$n.0")," \
    "gloo $(awk '$1 == 8 {print $2}' "$OUT/gloo$n.0" 2>/dev/null)," \
    "openmpi $(awk '$1 == 8 {print $2}' "$OUT/mpi$n.0" 2>/dev/null)"
done
echo "# raw outputs in $OUT"
