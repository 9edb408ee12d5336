#!/usr/bin/env bash
# bench/init_ab.sh: communicator init of weftrun process jobs, two builds side by side in one run
# (the machine is shared and noisy: each repetition runs A then B at every size, so drift hits
# both alike). For each build, each size: the init time of every repetition (latest rank start to
# latest rank return, as bench/init_scale.sh's procs rows), then the median and B/A; and the
# same for jobs that only join the bootstrap and then exchange ROUNDS rounds of a 64-byte
# all-gather and a barrier (init_time -p: the slowest rank's rounds). B's bench/init_time.c is
# built against each side's library (it uses the public API and weft_bootstrap_*, alike in both).
#
#   bench/init_ab.sh A_ROOT B_ROOT     two checkouts, each built with make BUILD=$BUILD CUDA=0 lib tools
#
# Knobs (defaults in brackets): BUILD [build-host]  PROCS ["64 256"]  REPS [5]  ROUNDS [20] (0: none)
#   COUNT [1]: also one run per build and size with rank 1 under strace -c (rank 0 hosts the
#   root): its connect() attempts and accepted connections (bootstrap and transports alike)
#   OUT [$TMPDIR/weft-init-ab]: results.txt
set -u
A=$1 B=$2
BUILD=${BUILD:-build-host}
PROCS=${PROCS:-"64 256"}
REPS=${REPS:-5}
ROUNDS=${ROUNDS:-20}
COUNT=${COUNT:-1}
OUT=${OUT:-${TMPDIR:-/tmp}/weft-init-ab}
mkdir -p "$OUT"
ulimit -n "$(ulimit -Hn)" 2>/dev/null
export WEFT_BOOTSTRAP_TIMEOUT=${WEFT_BOOTSTRAP_TIMEOUT:-600} NCCL_DEBUG=${NCCL_DEBUG:-WARN}
for side in A B; do
  root=${!side}
  [ -f "$root/$BUILD/lib/libnccl_static.a" ] || { echo "init_ab.sh: $root/$BUILD missing" >&2; exit 1; }
  gcc -O2 -pthread -D_GNU_SOURCE -I"$root/include" -I"$root/src" -I"$root/$BUILD/include" -Wall \
    "$B/bench/init_time.c" "$root/$BUILD/lib/libnccl_static.a" -ldl -lrt -lm -o "$OUT/init_time.$side" ||
    exit 1
done
echo "# $(date -u +%Y-%m-%dT%H:%MZ) A $(git -C "$A" rev-parse --short HEAD) B $(git -C "$B" rev-parse --short HEAD)" \
  "cpus $(nproc) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/results.txt"

job() { # side n: one job's init seconds, or "failed"
  local side=$1 n=$2 root rows
  root=${!side}
  rows=$(timeout 600 "$root/$BUILD/bin/weftrun" -n "$n" "$OUT/init_time.$side" 2>"$OUT/last.err") || {
    echo failed
    return
  }
  echo "$rows" | awk -v n="$n" '$1 == "proc" { if ($7 > s) s = $7; if ($9 > e) e = $9; k++ }
    END { if (k == n) printf "%.3f\n", (e - s) / 1e9; else print "failed" }'
}

rounds() { # side n: the slowest rank's ROUNDS rounds in seconds, or "failed"
  local side=$1 n=$2 root rows
  root=${!side}
  rows=$(timeout 600 "$root/$BUILD/bin/weftrun" -n "$n" "$OUT/init_time.$side" -p "$ROUNDS" 2>"$OUT/last.err") || {
    echo failed
    return
  }
  echo "$rows" | awk -v n="$n" '$1 == "bproc" { if ($13 > m) m = $13; k++ }
    END { if (k == n) printf "%.4f\n", m / 1e9; else print "failed" }'
}

for rep in $(seq "$REPS"); do
  for n in $PROCS; do
    for side in A B; do echo "time $side $n $(job "$side" "$n")" | tee -a "$OUT/results.txt"; done
    if [ "$ROUNDS" -gt 0 ]; then
      for side in A B; do echo "rounds $side $n $(rounds "$side" "$n")" | tee -a "$OUT/results.txt"; done
    fi
  done
done

if [ "$COUNT" = 1 ]; then
  for n in $PROCS; do
    for side in A B; do
      root=${!side}
      rm -f "$OUT/strace.$side.$n"
      timeout 600 "$root/$BUILD/bin/weftrun" -n "$n" sh -c \
        '[ "$WEFT_RANK" = 1 ] && exec strace -f -c -e trace=connect,accept4,accept -o "$1" "$2"; exec "$2"' \
        _ "$OUT/strace.$side.$n" "$OUT/init_time.$side" >/dev/null 2>"$OUT/last.err"
      # connect: attempts; accept: connections accepted (calls less those that found none).
      calls=$(awk '$NF ~ /^(connect|accept4|accept)$/ {
          c = $4; if ($NF != "connect" && NF == 6) c -= $5; printf "%s %s ", $NF, c }' "$OUT/strace.$side.$n")
      echo "calls $side $n $calls" | tee -a "$OUT/results.txt"
    done
  done
fi

python3 - "$OUT/results.txt" <<'EOF'
import statistics, sys
t = {}
for line in open(sys.argv[1]):
    f = line.split()
    if f and f[0] in ("time", "rounds") and f[3] != "failed":
        t.setdefault((f[0], f[1], int(f[2])), []).append(float(f[3]))
for what in ("time", "rounds"):
    for n in sorted({k[2] for k in t if k[0] == what}):
        a, b = t.get((what, "A", n), []), t.get((what, "B", n), [])
        if a and b:
            ma, mb = statistics.median(a), statistics.median(b)
            label = "init" if what == "time" else "bootstrap rounds"
            print(f"procs {n} {label}: A median {ma:.3f} s ({len(a)} runs, min {min(a):.3f})  "
                  f"B median {mb:.3f} s ({len(b)} runs, min {min(b):.3f})  B/A {mb / ma:.2f}")
EOF
