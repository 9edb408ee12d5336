#!/usr/bin/env bash
# Tests the weftrun launcher with real rank processes (small sh -c programs): exit status
# and signal propagation, timeout, rank environment, output tagging, signal forwarding.
# Prints PASS/FAIL per check; exits 0 if all passed, 1 otherwise, 77 if it cannot run.
# shellcheck disable=SC2016,SC2317  # rank scripts are single-quoted on purpose; checks run via check()

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WEFTRUN=${WEFTRUN:-$ROOT/${BUILD:-build}/bin/weftrun}
if [ ! -x "$WEFTRUN" ]; then
    echo "FAIL: weftrun not built ($WEFTRUN missing)"
    exit 1
fi
command -v timeout >/dev/null || { echo "SKIP: needs timeout(1)"; exit 77; }

T=$(mktemp -d "${TMPDIR:-/tmp}/weftrun-test.XXXXXX")
trap 'rm -rf "$T"' EXIT
failed=0

check() { # name, then a command whose success means the check passed
    local name=$1
    shift
    if "$@"; then
        echo "PASS: $name"
    else
        echo "FAIL: $name (rc=$rc, ${ms}ms)"
        sed 's/^/    stdout: /' "$T/out" 2>/dev/null | head -20
        sed 's/^/    stderr: /' "$T/err" 2>/dev/null | head -20
        failed=$((failed + 1))
    fi
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# Runs weftrun with a safety limit, so a broken launcher cannot hang the suite;
# sets rc and ms (elapsed milliseconds), output goes to $T/out and $T/err.
run() {
    local start
    start=$(now_ms)
    timeout -k 2 20 "$WEFTRUN" "$@" >"$T/out" 2>"$T/err" </dev/null
    rc=$?
    ms=$(($(now_ms) - start))
}

pids_gone() { # every pid listed in the given files has exited
    local f
    for f in "$@"; do
        [ -s "$f" ] || return 1
        ! kill -0 "$(cat "$f")" 2>/dev/null || return 1
    done
}

wait_files() { # up to 5 s for the given files to appear
    local _ f
    for _ in $(seq 100); do
        for f in "$@"; do [ -e "$f" ] || break; done
        [ -e "$f" ] && return 0
        sleep 0.05
    done
    return 1
}

test_exit_status() {
    run -n 4 sh -c '[ "$WEFT_RANK" = 2 ] && exit 3; exec sleep 30'
    check exit_status_propagated [ "$rc" = 3 ]
    check exit_status_names_rank grep -Eq '^weftrun: rank 2 \(pid [0-9]+\) exited with status 3$' "$T/err"
    check exit_status_stops_others [ "$ms" -lt 10000 ]
}

test_signal_death() {
    rm -f "$T"/pid.*
    # Rank 1 kills itself only once the others are running, so stopping them is tested.
    run -n 3 sh -c 'if [ "$WEFT_RANK" = 1 ]; then
            while [ ! -e "$0/pid.0" ] || [ ! -e "$0/pid.2" ]; do sleep 0.05; done
            kill -KILL $$
        fi
        echo $$ > "$0/pid.$WEFT_RANK.tmp" && mv "$0/pid.$WEFT_RANK.tmp" "$0/pid.$WEFT_RANK"
        exec sleep 30' "$T"
    check signal_exit_137 [ "$rc" = 137 ]
    check signal_names_rank grep -Eq '^weftrun: rank 1 \(pid [0-9]+\) killed by signal 9 \(.+\)$' "$T/err"
    check signal_stops_others pids_gone "$T/pid.0" "$T/pid.2"
}

test_timeout() {
    run --timeout 1 -n 2 sleep 30
    check timeout_exit_124 [ "$rc" = 124 ]
    check timeout_message grep -q '^weftrun: job timed out after 1 seconds$' "$T/err"
    check timeout_prompt [ "$ms" -ge 900 -a "$ms" -lt 8000 ]
}

# Fields: WEFT_RANK RANK WEFT_NRANKS WORLD_SIZE WEFT_LOCAL_RANK LOCAL_RANK
#         WEFT_LOCAL_NRANKS LOCAL_WORLD_SIZE NCCL_COMM_ID MASTER_ADDR:MASTER_PORT
env_ok() {
    [ "$(wc -l <"$T/out")" = 4 ] || return 1
    [ "$(cut -d' ' -f1 "$T/out" | sort -n | tr '\n' ' ')" = "0 1 2 3 " ] || return 1
    [ "$(cut -d' ' -f9 "$T/out" | sort -u | wc -l)" = 1 ] || return 1
    awk '$1 != $2 || $1 != $5 || $1 != $6 || $3 != 4 || $4 != 4 || $7 != 4 || $8 != 4 ||
         $9 != $10 || $9 !~ /^127\.0\.0\.1:[0-9]+$/ { bad = 1 } END { exit bad }' "$T/out"
}

# With the flight recorder on, a timed-out job's ranks are asked for their dumps (SIGUSR1)
# before SIGTERM: rank 1 stops itself inside a loop of all-reduces, rank 0 waits for it in one.
test_timeout_dumps() {
    local perf=$ROOT/${BUILD:-build}/bin/all_reduce_perf d=$T/dumps
    if [ ! -x "$perf" ]; then
        echo "FAIL: timeout_dumps: $perf not built"
        failed=$((failed + 1))
        return
    fi
    mkdir -p "$d"
    WEFT_TRACE_DIR=$d run --timeout 3 -n 2 sh -c 'args="-b 8 -e 8 -n 100000000 -w 0 -c 0"
        if [ "$WEFT_RANK" = 1 ]; then "$0" $args & p=$!; sleep 1; kill -STOP $p; wait $p; fi
        exec "$0" $args' "$perf"
    check timeout_dumps_exit_124 [ "$rc" = 124 ]
    check timeout_dumps_message grep -q 'asking the ranks for their flight-recorder dumps' "$T/err"
    check timeout_dumps_written sh -c 'ls "$0"/weft-trace-*-r0-*.json' "$d"
    check timeout_dumps_no_blame_of_the_signal sh -c '! grep -q "killed by signal" "$0"' "$T/err"
}

test_environment() {
    run -n 4 sh -c 'echo "$WEFT_RANK $RANK $WEFT_NRANKS $WORLD_SIZE $WEFT_LOCAL_RANK $LOCAL_RANK" \
        "$WEFT_LOCAL_NRANKS $LOCAL_WORLD_SIZE $NCCL_COMM_ID $MASTER_ADDR:$MASTER_PORT"'
    check environment [ "$rc" = 0 ] && check environment_values env_ok
}

gpu_ok() { # ranks 0..2 saw the expected CUDA_VISIBLE_DEVICES ("-" for unset)
    [ "$(sort -n "$T/out" | cut -d' ' -f2 | tr '\n' ' ')" = "$1" ]
}

test_gpu_binding() {
    local cmd='echo "$WEFT_RANK ${CUDA_VISIBLE_DEVICES--}"'
    CUDA_VISIBLE_DEVICES=5,7 run -n 3 sh -c "$cmd"
    check gpu_from_user_list gpu_ok "5 7 5 "
    local n
    n=$(find /proc/driver/nvidia/gpus -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
    [ "$n" = 0 ] && n=$(find /dev -maxdepth 1 -name 'nvidia[0-9]*' | grep -c '/nvidia[0-9][0-9]*$')
    (unset CUDA_VISIBLE_DEVICES; run -n 3 sh -c "$cmd")
    if [ "$n" = 0 ]; then
        check gpu_unset_without_gpus gpu_ok "- - - "
    else
        check gpu_one_per_local_rank gpu_ok "0 $((1 % n)) $((2 % n)) "
    fi
}

test_tag_output() {
    run --tag-output -n 2 sh -c 'echo "out-$WEFT_RANK"; echo "err-$WEFT_RANK" >&2; printf "part-$WEFT_RANK"'
    check tag_stdout [ "$(sort "$T/out" | tr '\n' '|')" = "[0] out-0|[0] part-0|[1] out-1|[1] part-1|" ]
    check tag_stderr [ "$(sort "$T/err" | tr '\n' '|')" = "[0] err-0|[1] err-1|" ]
    run -n 2 sh -c 'echo "plain-$WEFT_RANK"'
    check untagged_passthrough [ "$(sort "$T/out" | tr '\n' '|')" = "plain-0|plain-1|" ]
    printf 'line-in\n' | timeout 20 "$WEFTRUN" --tag-output -n 2 cat >"$T/out" 2>"$T/err"
    check stdin_to_rank0_only [ "$(cat "$T/out")" = "[0] line-in" ]
    # A reader that goes away must end the job the way it would without tagging (SIGPIPE).
    timeout 20 "$WEFTRUN" --tag-output -n 2 yes 2>"$T/err" </dev/null | head -n 2 >"$T/out"
    rc=${PIPESTATUS[0]}
    check tag_broken_pipe_ends_job [ "$rc" = 141 ]
}

test_sigterm_forwarded() {
    rm -f "$T"/ready.* "$T"/term.*
    "$WEFTRUN" -n 2 sh -c 'trap "touch $0/term.$WEFT_RANK; exit 0" TERM
        touch "$0/ready.$WEFT_RANK"; sleep 30 & wait' "$T" >"$T/out" 2>"$T/err" </dev/null &
    local pid=$!
    wait_files "$T/ready.0" "$T/ready.1"
    kill -TERM "$pid"
    local _
    for _ in $(seq 300); do # at most 15 s, then give up on a launcher that did not stop
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid"
    rc=$?
    check sigterm_exit_143 [ "$rc" = 143 ]
    check sigterm_reaches_ranks [ -e "$T/term.0" -a -e "$T/term.1" ]
}

test_grace_then_kill() {
    rm -f "$T"/pid.*
    # Rank 1 ignores SIGTERM; rank 0 fails once rank 1 is ready, so only SIGKILL can end rank 1.
    WEFTRUN_GRACE_SECONDS=1 run -n 2 sh -c 'if [ "$WEFT_RANK" = 0 ]; then
            while [ ! -e "$0/pid.1" ]; do sleep 0.05; done; exit 4; fi
        trap "" TERM; echo $$ > "$0/pid.1.tmp"; mv "$0/pid.1.tmp" "$0/pid.1"; exec sleep 30' "$T"
    check grace_exit_status [ "$rc" = 4 ]
    check grace_then_sigkill [ "$ms" -ge 900 -a "$ms" -lt 10000 ]
    check grace_rank_gone pids_gone "$T/pid.1"
}

test_remote_via_ssh() {
    # A stand-in for ssh that runs the remote command line with sh, as sshd would.
    printf '#!/bin/sh\nshift\nexec sh -c "$*"\n' >"$T/fakessh"
    chmod +x "$T/fakessh"
    WEFTRUN_SSH="$T/fakessh" run -H localhost:1,127.0.0.2:2 sh -c \
        'echo "$WEFT_RANK $LOCAL_RANK $LOCAL_WORLD_SIZE $NCCL_COMM_ID $(pwd) [$0]"' "it's  quoted"
    local id
    id=$(head -n1 "$T/out" | cut -d' ' -f4)
    check remote_ranks [ "$(sort "$T/out" | tr '\n' '|')" = \
        "0 0 1 $id $PWD [it's  quoted]|1 0 2 $id $PWD [it's  quoted]|2 1 2 $id $PWD [it's  quoted]|" ]
}

test_bind_core() {
    [ -r /proc/self/status ] || return 0
    run --bind core -n 2 sh -c 'echo "$(grep Cpus_allowed_list /proc/self/status | cut -f2)"'
    # A core is all its hardware threads ("3" or "3,67"); tests/launcher/test_weftrun_bind.sh checks more.
    check bind_core_one_core [ "$rc" = 0 ] && check bind_core_values \
        awk 'NF != 1 || $1 !~ /^[0-9]+([,-][0-9]+)*$/ { bad = 1 } END { exit bad || NR != 2 }' "$T/out"
}

bad_args() {
    local args
    for args in "" "-n" "-n 0 true" "-n x true" "-n 2" "--bind bogus -n 1 true" "--frob -n 1 true" \
        "-n 3 -H localhost:2 true" "-H localhost:0 true" "--timeout -1 -n 1 true" "true"; do
        # shellcheck disable=SC2086
        run $args
        if [ "$rc" != 2 ] || ! grep -q '^weftrun: ' "$T/err"; then
            echo "    '$args' gave rc=$rc"
            return 1
        fi
    done
}

test_usage() {
    check bad_arguments_exit_2 bad_args
    run --help
    check help [ "$rc" = 0 ] && check help_text grep -q '^Usage: weftrun -n N' "$T/out"
    run -n 1 "$T/no-such-program"
    check missing_program [ "$rc" = 127 ] && check missing_program_message grep -q 'rank 0' "$T/err"
}

test_exit_status
test_signal_death
test_timeout
test_timeout_dumps
test_environment
test_gpu_binding
test_tag_output
test_sigterm_forwarded
test_grace_then_kill
test_remote_via_ssh
test_bind_core
test_usage

if [ "$failed" -ne 0 ]; then
    echo "$failed check(s) failed"
    exit 1
fi
exit 0
