#!/usr/bin/env bash
# The perf binaries under a real mpirun with no variable set by hand: the MPI build
# (<coll>_perf_mpi, which `make tests` builds when mpicc exists: rank 0's unique id goes out by
# MPI_Bcast) and the plain build (rank and size from OMPI_COMM_WORLD_* / PMI_*, the id through a
# file rank 0 writes), 2 and 4 processes, with -c 1. MPICH's mpiexec.hydra is used too when present.
# Exits 0 if every check passed, 1 otherwise, 77 without mpirun.
set -u
cd "$(dirname "$0")/../.." || exit 1
BIN=${BUILD:-build}/bin
export WEFT_BACKEND=${WEFT_BACKEND:-host}
command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed (bash scripts/deps.sh installs Open MPI)"; exit 77; }
for p in all_reduce all_gather sendrecv; do
  [ -x "$BIN/${p}_perf" ] || { echo "FAIL: $BIN/${p}_perf not built (make perf)"; exit 1; }
done
T=$(mktemp -d "${TMPDIR:-/tmp}/weft-mpirun.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail=0
ARGS=(-b 8 -e 64K -f 8 -c 1 -w 1 -n 2)

# Open MPI refuses root without these; oversubscribe lets 4 ranks run on a 2-core machine.
MPIRUN=(mpirun)
if mpirun --version 2>&1 | grep -q "Open MPI"; then
  MPIRUN+=(--oversubscribe)
  [ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
fi

# A job as users start it: nothing of ours or of torchrun's in the environment.
clean_env=(env -u NCCL_COMM_ID -u MASTER_ADDR -u MASTER_PORT -u RANK -u WORLD_SIZE -u WEFT_RANK -u WEFT_NRANKS
  "WEFT_PERF_RENDEZVOUS_DIR=$T/rdv")
mkdir -p "$T/rdv"

# name, ranks expected, then the command; checks status, the result line and one device line per rank.
job() {
  local name=$1 n=$2 out="$T/out"
  shift 2
  timeout -k 5 90 "${clean_env[@]}" "$@" >"$out" 2>&1 </dev/null
  local rc=$? lines
  lines=$(grep -c '^#  Rank  *[0-9]* Group' "$out")
  if [ $rc = 0 ] && grep -q '^# Out of bounds values : 0 OK$' "$out" && [ "$lines" = "$n" ] &&
    grep -q "^#  Rank  *$((n - 1)) Group" "$out" && [ -z "$(ls -A "$T/rdv")" ]; then
    echo "PASS $name"
  else
    echo "FAIL $name (rc $rc, $lines device lines, rendezvous dir: $(ls -A "$T/rdv" | tr '\n' ' '))"
    tail -n 15 "$out" | sed 's/^/    /'
    fail=1
  fi
  rm -f "$T"/rdv/*
}

job "mpirun -n 2 all_reduce_perf (plain)" 2 "${MPIRUN[@]}" -n 2 "$BIN/all_reduce_perf" "${ARGS[@]}"
job "mpirun -n 4 all_gather_perf (plain)" 4 "${MPIRUN[@]}" -n 4 "$BIN/all_gather_perf" "${ARGS[@]}"
job "mpirun -n 2 sendrecv_perf -g 2 (plain)" 4 "${MPIRUN[@]}" -n 2 "$BIN/sendrecv_perf" "${ARGS[@]}" -g 2

if command -v mpicc >/dev/null; then
  for p in all_reduce all_gather sendrecv; do
    [ -x "$BIN/${p}_perf_mpi" ] || { echo "FAIL: $BIN/${p}_perf_mpi not built (make tests builds it when mpicc exists)"; exit 1; }
  done
  job "mpirun -n 2 all_reduce_perf_mpi" 2 "${MPIRUN[@]}" -n 2 "$BIN/all_reduce_perf_mpi" "${ARGS[@]}"
  job "mpirun -n 4 all_gather_perf_mpi" 4 "${MPIRUN[@]}" -n 4 "$BIN/all_gather_perf_mpi" "${ARGS[@]}"
  job "mpirun -n 2 sendrecv_perf_mpi -t 2" 4 "${MPIRUN[@]}" -n 2 "$BIN/sendrecv_perf_mpi" "${ARGS[@]}" -t 2
  # The MPI build takes rank and size from MPI alone: launcher variables that disagree do not matter.
  job "mpirun -n 2 all_reduce_perf_mpi, stray WEFT_RANK" 2 env WEFT_RANK=5 WEFT_NRANKS=9 \
    "${MPIRUN[@]}" -n 2 "$BIN/all_reduce_perf_mpi" "${ARGS[@]}"
  if readelf -d "$BIN/all_reduce_perf_mpi" 2>/dev/null | grep -q 'libmpi'; then
    echo "PASS all_reduce_perf_mpi links libmpi"
  else
    echo "FAIL all_reduce_perf_mpi does not link libmpi"
    fail=1
  fi
else
  echo "SKIP MPI build: mpicc not installed"
fi

# MPICH's launcher, if installed beside Open MPI: ranks from PMI_*, the job's name over PMI-1.
if command -v mpiexec.hydra >/dev/null; then
  job "mpiexec.hydra -n 3 all_reduce_perf (plain)" 3 mpiexec.hydra -launcher fork -n 3 "$BIN/all_reduce_perf" "${ARGS[@]}"
fi

[ $fail = 0 ] && echo "all mpirun checks passed"
exit $fail
