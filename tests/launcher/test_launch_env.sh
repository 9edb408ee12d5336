#!/usr/bin/env bash
# The plain perf binaries started as torchrun and srun start them, without NCCL_COMM_ID: each
# process gets only the launcher's variables (RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT,
# or SLURM_PROCID/SLURM_STEP_NUM_TASKS/SLURM_JOB_ID/SLURM_STEP_ID/SLURM_STEP_NODELIST). The root
# must not take MASTER_PORT itself (torch's TCPStore listens there: a stand-in holds it here).
# Real torchrun runs too when torch is installed (TORCH_PYTHON: a python that has it).
# Exits 0 if every check passed, 1 otherwise.
# shellcheck disable=SC2317,SC2154  # rank starters run through job(); coll is set per job
set -u
cd "$(dirname "$0")/../.." || exit 1
BIN=${BUILD:-build}/bin
export WEFT_BACKEND=${WEFT_BACKEND:-host}
for p in all_reduce reduce_scatter broadcast; do
  [ -x "$BIN/${p}_perf" ] || { echo "FAIL: $BIN/${p}_perf not built (make perf)"; exit 1; }
done
T=$(mktemp -d "${TMPDIR:-/tmp}/weft-launch-env.XXXXXX")
holder=
trap '[ -n "$holder" ] && kill "$holder" 2>/dev/null; rm -rf "$T"' EXIT
fail=0
ARGS=(-b 8 -e 64K -f 8 -c 1 -w 1 -n 2)
unset NCCL_COMM_ID MASTER_ADDR MASTER_PORT RANK WORLD_SIZE LOCAL_RANK WEFT_RANK WEFT_NRANKS
for v in $(env | grep -oE '^(SLURM|OMPI|PMIX?)_[A-Za-z0-9_]*'); do unset "$v"; done

free_port() { # a port nobody listens on, as is the one after it
  local p
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 12000))
    ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && ! (exec 3<>"/dev/tcp/127.0.0.1/$((p + 1))") 2>/dev/null &&
      { echo "$p"; return; }
  done
  echo 29517
}

# name, ranks, then a function that starts rank $1 of $2 (output to $T/out.$1); checks every rank's
# status and rank 0's result line and device lines.
job() {
  local name=$1 n=$2 start=$3 r pids=() rc ok=1
  for r in $(seq 0 $((n - 1))); do
    "$start" "$r" "$n" >"$T/out.$r" 2>&1 </dev/null &
    pids+=($!)
  done
  for r in $(seq 0 $((n - 1))); do
    wait "${pids[$r]}"
    rc=$?
    [ $rc = 0 ] || { ok=0; echo "    rank $r exited with $rc"; }
  done
  grep -q '^# Out of bounds values : 0 OK$' "$T/out.0" || ok=0
  [ "$(grep -c '^#  Rank  *[0-9]* Group' "$T/out.0")" = "$n" ] || ok=0
  if [ $ok = 1 ]; then
    echo "PASS $name"
  else
    echo "FAIL $name"
    for r in $(seq 0 $((n - 1))); do tail -n 8 "$T/out.$r" | sed "s/^/    [$r] /"; done
    fail=1
  fi
}

# torchrun: every process has the same MASTER_ADDR/MASTER_PORT.
torch_rank() {
  RANK=$1 WORLD_SIZE=$2 LOCAL_RANK=$1 LOCAL_WORLD_SIZE=$2 GROUP_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    timeout -k 5 60 "$BIN/$coll" "${ARGS[@]}"
}
port=$(free_port)
# torch's TCPStore on MASTER_PORT, played by a listener that holds the port for the whole job.
if command -v python3 >/dev/null; then
  python3 -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8); print("ready", flush=True); time.sleep(120)' "$port" >"$T/holder" 2>&1 &
  holder=$!
  for _ in $(seq 100); do grep -q ready "$T/holder" 2>/dev/null && break; sleep 0.05; done
fi
coll=all_reduce_perf job "torchrun-style env, 2 ranks, all_reduce_perf (MASTER_PORT held)" 2 torch_rank
coll=reduce_scatter_perf job "torchrun-style env, 4 ranks, reduce_scatter_perf (MASTER_PORT held)" 4 torch_rank
[ -n "$holder" ] && kill "$holder" 2>/dev/null
holder=

# srun: the root goes to the step's first node on a port derived from the job and step ids.
slurm_rank() {
  SLURM_PROCID=$1 SLURM_STEP_NUM_TASKS=$2 SLURM_NTASKS=$2 SLURM_LOCALID=$1 SLURM_JOB_ID=$jobid SLURM_STEP_ID=3 \
    SLURM_STEP_NODELIST='127.0.0.[1-2],otherhost[07-09]' SLURM_JOB_NODELIST='unused[1-4]' \
    timeout -k 5 60 "$BIN/$coll" "${ARGS[@]}"
}
for _ in $(seq 50); do # a job id whose derived port is free
  jobid=$((100000 + RANDOM))
  slurm_port=$((20000 + (jobid % 1500) * 8 + 3))
  ! (exec 3<>"/dev/tcp/127.0.0.1/$slurm_port") 2>/dev/null && break
done
coll=broadcast_perf job "Slurm-style env, 3 ranks, broadcast_perf" 3 slurm_rank

# Without a rendezvous the binaries say what to set (nccl-tests' invalid-usage status 6).
out=$(RANK=1 WORLD_SIZE=2 timeout 30 "$BIN/all_reduce_perf" -b 8 -e 8 2>&1)
rc=$?
if [ $rc = 6 ] && echo "$out" | grep -q 'MASTER_ADDR' && echo "$out" | grep -q 'NCCL_COMM_ID'; then
  echo "PASS torchrun variables without MASTER_ADDR: status 6 and a hint"
else
  echo "FAIL torchrun variables without MASTER_ADDR (rc $rc): $out"
  fail=1
fi
out=$(RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=65535 timeout 30 "$BIN/all_reduce_perf" -b 8 -e 8 2>&1)
rc=$?
if [ $rc = 6 ] && echo "$out" | grep -q 'MASTER_PORT'; then
  echo "PASS MASTER_PORT=65535 leaves no port for the root: status 6"
else
  echo "FAIL MASTER_PORT=65535 (rc $rc): $out"
  fail=1
fi

# Real torchrun when torch is installed (it is not by default; TORCH_PYTHON names a python that has it).
PY=${TORCH_PYTHON:-python3}
if "$PY" -c 'import torch.distributed.run' >/dev/null 2>&1; then
  port=$(free_port)
  if timeout -k 5 120 "$PY" -m torch.distributed.run --nproc-per-node 2 --master-addr 127.0.0.1 \
    --master-port "$port" --no-python "$BIN/all_reduce_perf" "${ARGS[@]}" >"$T/torchrun" 2>&1 &&
    grep -q '^# Out of bounds values : 0 OK$' "$T/torchrun"; then
    echo "PASS torchrun --nproc-per-node 2 all_reduce_perf"
  else
    echo "FAIL torchrun --nproc-per-node 2 all_reduce_perf"
    tail -n 20 "$T/torchrun" | sed 's/^/    /'
    fail=1
  fi
else
  echo "SKIP real torchrun: torch is not installed"
fi

[ $fail = 0 ] && echo "all launcher-environment checks passed"
exit $fail
