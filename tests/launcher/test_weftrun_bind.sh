#!/usr/bin/env bash
# weftrun --bind through hwloc: under taskset the ranks' CPUs stay inside the allowed set (numa
# and core); hwloc's view is the one used (an hwloc XML file with two NUMA nodes splits the ranks
# where this machine's sysfs may not); a rank with a GPU goes to its GPU's NUMA node unless that
# leaves the allowed set, which NCCL_IGNORE_CPU_AFFINITY=1 overrides; WEFT_TOPO_DETECT=sysfs falls
# back to sysfs. Exits 0 if all passed, 1 otherwise, 77 if it cannot run.

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=${WEFTRUN:-$ROOT/${BUILD:-build}/bin/weftrun}
XML=$ROOT/tests/data/hwloc/2cpu-2numa-gpu-on-node1.xml
[ -x "$W" ] || { echo "FAIL: weftrun not built ($W missing)"; exit 1; }
for tool in taskset timeout; do
    command -v $tool >/dev/null || { echo "SKIP: needs $tool"; exit 77; }
done
[ -r /proc/self/status ] || { echo "SKIP: needs /proc/self/status"; exit 77; }
/sbin/ldconfig -p 2>/dev/null | grep -q 'libhwloc\.so\.15' || { echo "SKIP: libhwloc.so.15 not installed"; exit 77; }

T=$(mktemp -d "${TMPDIR:-/tmp}/weftrun-bind.XXXXXX")
trap 'rm -rf "$T"' EXIT
failed=0
CPUS='grep Cpus_allowed_list /proc/self/status | cut -f2'

# run [VAR=value...] [taskset -c L] weftrun args...: each rank prints its CPU list; the sorted
# lists go to $T/out on one line, weftrun's log to $T/err.
run() {
    timeout -k 2 20 env -u CUDA_VISIBLE_DEVICES NCCL_DEBUG=INFO "$@" sh -c "$CPUS" >"$T/raw" 2>"$T/err" </dev/null
    rc=$?
    sort "$T/raw" | tr '\n' ' ' >"$T/out"
}

expect() { # name, expected sorted CPU lists, text a log line must hold
    if [ "$rc" = 0 ] && [ "$(cat "$T/out")" = "$2" ] && grep -q -- "$3" "$T/err"; then
        echo "PASS: $1"
    else
        echo "FAIL: $1 (rc=$rc): got '$(cat "$T/out")', wanted '$2' and a log line with '$3'"
        sed 's/^/    stderr: /' "$T/err" | head -10
        failed=$((failed + 1))
    fi
}

# Every CPU of a list ("0-3,8") on its own line.
expand() { tr ',' '\n' | awk -F- '{ hi = $2 == "" ? $1 : $2; for (c = $1; c <= hi; c++) print c }'; }

mine=$(grep Cpus_allowed_list /proc/self/status | cut -f2)
last=$(echo "$mine" | expand | tail -1)

# taskset restricts the launcher; hwloc's NUMA nodes and cores are intersected with it.
for mode in numa core; do
    run taskset -c "$last" "$W" --bind $mode -n 3
    expect "taskset_${mode}_stays_inside" "$last $last $last " "hwloc (this machine)"
done
run WEFT_TOPO_DETECT=sysfs taskset -c "$last" "$W" --bind numa -n 2
expect sysfs_fallback_stays_inside "$last $last " ": sysfs"

if echo "$mine" | expand | grep -qx 0 && echo "$mine" | expand | grep -qx 1; then
    # The file has two NUMA nodes (CPU 0 | CPU 1), GPU 0000:41:00.0 on node 1.
    run WEFT_HWLOC_XML="$XML" "$W" --bind numa -n 2
    expect numa_nodes_from_hwloc_file "0 1 " "NUMA node 1 of 2 usable"
    run WEFT_HWLOC_XML="$XML" taskset -c 1 "$W" --bind numa -n 2
    expect numa_nodes_without_allowed_cpus_skipped "1 1 " "NUMA node 1 of 1 usable"
    run WEFT_HWLOC_XML="$XML" CUDA_VISIBLE_DEVICES=0 "$W" --bind numa -n 2
    expect near_its_gpu "1 1 " "near GPU 0000:41:00.0"
    run WEFT_HWLOC_XML="$XML" CUDA_VISIBLE_DEVICES=0 taskset -c 0 "$W" --bind numa -n 1
    expect gpu_node_outside_taskset_not_used "0 " "NUMA node 0 of 1 usable"
    run WEFT_HWLOC_XML="$XML" CUDA_VISIBLE_DEVICES=0 NCCL_IGNORE_CPU_AFFINITY=1 taskset -c 0 "$W" --bind numa -n 1
    expect ignore_cpu_affinity_goes_to_gpu "1 " "NCCL_IGNORE_CPU_AFFINITY=1"
else
    echo "SKIP: the hwloc XML checks need CPUs 0 and 1 (allowed: $mine)"
fi

if [ "$failed" -ne 0 ]; then
    echo "$failed check(s) failed"
    exit 1
fi
exit 0
