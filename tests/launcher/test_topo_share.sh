#!/usr/bin/env bash
# Topology detection once per host (core/topo_share.c): of the processes weftrun starts on one
# host, only the first rank's reads the machine; the others take its tree, unless their detection
# settings differ. Counted from each rank's GRAPH log: "Topology detection: hwloc|sysfs" is a
# detection, "shared within the host" a tree taken, "not taken" one refused. Each job must also
# pass its checked all-reduce. Exits 0 if all passed, 1 otherwise.
# shellcheck disable=SC2016  # the rank script is single-quoted on purpose

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/${BUILD:-build}/bin
[ -x "$BIN/weftrun" ] && [ -x "$BIN/all_reduce_perf" ] || { echo "FAIL: weftrun or all_reduce_perf not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/topo-share.XXXXXX")
trap 'rm -rf "$T"' EXIT
failed=0

# Rank script: RANK_ENV_<rank>="VAR=value ..." adds settings for one rank.
cat >"$T/rank.sh" <<'EOF'
eval "extra=\${RANK_ENV_$WEFT_RANK:-}"
exec env $extra "$@"
EOF

# job NAME NRANKS [perf args...]: runs the job; its log is $T/NAME.log.
job() {
  local name=$1 n=$2
  shift 2
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=GRAPH timeout -k 5 120 "$BIN/weftrun" -n "$n" -- \
    bash "$T/rank.sh" "$BIN/all_reduce_perf" -b 8 -e 1K -f 4 -n 2 -w 1 -c 1 "$@" >"$T/$name.log" 2>&1
  echo $? >"$T/$name.rc"
}

count() { grep -cE "$2" "$T/$1.log"; }

# expect NAME DETECTIONS SHARED REFUSED
expect() {
  local name=$1 d s r got
  d=$(count "$name" 'Topology detection: (hwloc|sysfs)')
  s=$(count "$name" 'shared within the host')
  r=$(count "$name" 'not taken')
  got="rc $(cat "$T/$name.rc"), $d detection(s), $s shared, $r refused"
  if [ "$(cat "$T/$name.rc")" = 0 ] && grep -q 'Out of bounds values : 0 OK' "$T/$name.log" &&
    [ "$d $s $r" = "$2 $3 $4" ]; then
    echo "PASS: $name ($got)"
  else
    echo "FAIL: $name: want rc 0, $2 detection(s), $3 shared, $4 refused; got $got"
    grep -E 'Topology detection|WARN|error' "$T/$name.log" | head -20 | sed 's/^/    /'
    failed=$((failed + 1))
  fi
}

job one_host 4
expect one_host 1 3 0

# Two emulated hosts: each host's first rank detects.
RANK_ENV_0=WEFT_HOSTID=hostA RANK_ENV_1=WEFT_HOSTID=hostA RANK_ENV_2=WEFT_HOSTID=hostB \
  RANK_ENV_3=WEFT_HOSTID=hostB job two_hosts 4
expect two_hosts 2 2 0

# A rank told to detect otherwise reads the machine itself; the rank it passes the tree on to
# still takes the first rank's.
RANK_ENV_2=WEFT_TOPO_DETECT=sysfs job settings_differ 4
expect settings_differ 2 2 1

# Two processes of two thread ranks: the second process's ranks take the tree.
job threads 2 -t 2
expect threads 1 2 0

# NCCL_TOPO_FILE: nobody detects, nothing is passed.
NCCL_TOPO_DUMP_FILE=$T/topo.xml "$BIN/all_reduce_perf" -b 8 -e 8 -n 1 -w 0 >/dev/null 2>&1
NCCL_TOPO_FILE=$T/topo.xml job topo_file 4
expect topo_file 0 0 0

[ $failed = 0 ] && echo "all passed" || echo "$failed failed"
[ $failed = 0 ]
