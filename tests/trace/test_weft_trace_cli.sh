#!/usr/bin/env bash
# weft-trace on hand-written dumps, no library involved: its verdicts on fixed inputs (a rank
# that did not enter, a mismatch, a stall, a missing rank, one that left (destroyed its
# communicator while the others waited), CUDA ranks whose kernels had not
# finished an operation, a healthy job), --json, and a clear
# error naming the file for every kind of bad input (not JSON, a field missing or of the wrong
# type, two dumps of one rank, an empty directory, bad arguments).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TOOL=$ROOT/${BUILD:-build}/bin/weft-trace
[ -x "$TOOL" ] || { echo "FAIL: $TOOL not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/weft-trace-cli.XXXXXX")
[ -n "${KEEP:-}" ] || trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# op SEQ COLL_NO COUNT STATE [OP] [ROOT]
op() {
  printf '{"seq": %s, "coll_no": %s, "op": "%s", "count": %s, "dtype": "float32", "redop": "sum", "root": %s, "algo": "ring", "proto": "Simple", "channels": 1, "stream": "0x0", "enqueued_ns": 1000, "started_ns": 1000, "finished_ns": 2000, "state": "%s", "result": 0}' \
    "$1" "$2" "${5:-AllReduce}" "$3" "${6:--1}" "$4"
}
# chan WAITING PEER SINCE
chan() { printf '{"channel": 0, "steps": 3, "waiting": %s, "peer": %s, "since_ns": %s, "peer_steps": 2, "what": "data"}' "$1" "$2" "$3"; }
# dump DIR RANK NRANKS OPS INFLIGHT [CAUSE]
dump() {
  local peers="" p
  for ((p = 0; p < $3; p++)); do
    peers+="${peers:+, }{\"rank\": $p, \"host\": \"h$((p / 2))\", \"host_id\": \"$((p / 2))\", \"pid\": $((100 + p))}"
  done
  mkdir -p "$1"
  printf '{"weft_trace": 1, "comm_hash": "00000000000000aa", "rank": %s, "nranks": %s, "host": "h", "pid": %s, "backend": "host", "reason": "abort", "time_ns": 5000000000, "buffer": 16, "async_error": 0, "cause": %s, "peers": [%s], "ops": [%s], "in_flight": %s}\n' \
    "$2" "$3" "$((100 + $2))" "${6:-null}" "$peers" "$4" "$5" >"$1/weft-trace-00000000000000aa-r$2-h-$((100 + $2)).json"
}
expect() { # DIR PATTERN WHAT
  local out
  out=$("$TOOL" "$1" 2>&1)
  grep -q -- "$2" <<<"$out" || fail "$3: want /$2/ in:"$'\n'"$out"
}

done2="$(op 0 1 64 done), $(op 1 2 64 done)"
# Rank 1 stopped after operation 1; ranks 0 and 2 wait in operation 2.
d=$T/notentered
dump "$d" 0 3 "$done2, $(op 2 3 64 failed)" "{\"seq\": 2, \"channels\": [$(chan true 1 1000000)]}"
dump "$d" 1 3 "$(op 0 1 64 done), $(op 1 2 64 done)" null
dump "$d" 2 3 "$done2, $(op 2 3 64 failed)" "{\"seq\": 2, \"channels\": [$(chan true 1 1000000)]}"
expect "$d" '^culprit: rank 1 did not enter operation 3 (AllReduce count 64 float32 sum) that ranks 0,2 entered' not-entered
"$TOOL" --json "$d" | grep -q '"kind": "not-entered", "ranks": \[1\], "operation": 3' || fail "--json of not-entered"

# Rank 2 of 3 called a broadcast where the others called an all-reduce.
d=$T/mismatch
dump "$d" 0 3 "$done2" null
dump "$d" 1 3 "$done2" null
dump "$d" 2 3 "$(op 0 1 64 done), $(op 1 2 64 done Broadcast 0)" null
expect "$d" '^culprit: rank 2 entered a different collective at operation 2 (Broadcast count 64 float32 sum root 0), the others AllReduce count 64 float32 sum' mismatch

# All in operation 2: rank 0 waits for rank 1 since t, rank 2 for rank 0 since t+1ms (a victim),
# rank 1 started waiting (for rank 2) two seconds later: rank 1 stalled.
d=$T/stall
run="$(op 0 1 64 done), $(op 1 2 64 failed)"
dump "$d" 0 3 "$run" "{\"seq\": 1, \"channels\": [$(chan true 1 1000000000)]}"
dump "$d" 1 3 "$run" "{\"seq\": 1, \"channels\": [$(chan true 2 3000000000)]}"
dump "$d" 2 3 "$run" "{\"seq\": 1, \"channels\": [$(chan true 0 1001000000)]}"
expect "$d" '^culprit: rank 1 stopped progressing in operation 2: rank 0 waits for it, and it only started waiting (for rank 2) 2.000 s later' stall
# Every rank waiting since the same moment: no rank to blame, and it says so.
d=$T/cycle
dump "$d" 0 2 "$run" "{\"seq\": 1, \"channels\": [$(chan true 1 1000000000)]}"
dump "$d" 1 2 "$run" "{\"seq\": 1, \"channels\": [$(chan true 0 1000000000)]}"
expect "$d" '^culprit: none found' cycle

# Ranks 2 and 3 (host h1) left no dump; rank 0 names rank 3 as lost.
d=$T/lost
dump "$d" 0 4 "$(op 0 1 64 failed)" "{\"seq\": 0, \"channels\": [$(chan true 3 1000)]}" '{"rank": 3, "host": "h1"}'
dump "$d" 1 4 "$(op 0 1 64 failed)" "{\"seq\": 0, \"channels\": [$(chan true 0 1000)]}"
expect "$d" '^culprit: ranks 2,3 (h1 pid 102, h1 pid 103) left no dump (the others stopped in operation 1): their host was lost' lost
expect "$d" 'rank 0 reports rank 3 as lost' lost-evidence

# Rank 2 of 3 destroyed its communicator (healthy: no dump) while ranks 0 and 1 waited for it.
d=$T/left
dump "$d" 0 3 "$done2, $(op 2 3 64 failed)" "{\"seq\": 2, \"channels\": [$(chan true 2 1000)]}" '{"rank": 2, "host": "h1", "kind": "left"}'
dump "$d" 1 3 "$done2, $(op 2 3 64 failed)" "{\"seq\": 2, \"channels\": [$(chan true 2 1000)]}" '{"rank": 2, "host": "h1", "kind": "left"}'
expect "$d" '^culprit: rank 2 (h1 pid 102) left no dump (the others stopped in operation 3): it destroyed its communicator while the others still waited for it' left
expect "$d" 'rank 1 reports rank 2 as having destroyed its communicator' left-evidence

# CUDA ranks: "launched" is an operation the kernel had not finished (the recorder follows the
# kernels through their progress area), and their channels name the operation each runs.
cuda() { sed -i 's/"backend": "host"/"backend": "cuda"/' "$1"/*.json; }
cchan() { printf '{"channel": 0, "seq": 1, "steps": 4, "waiting": %s, "peer": %s, "since_ns": %s, "peer_steps": 0, "what": "data from the peer"}' "$1" "$2" "$3"; }
d=$T/cuda-killed
dump "$d" 0 2 "$(op 0 1 64 done), $(op 1 2 64 launched)" "{\"seq\": 1, \"channels\": [$(cchan true 1 1000)]}"
cuda "$d"
expect "$d" '^culprit: rank 1 (h0 pid 101) left no dump (the others stopped in operation 2)' cuda-killed
d=$T/cuda-stall
dump "$d" 0 2 "$(op 0 1 64 done), $(op 1 2 64 failed)" "{\"seq\": 1, \"channels\": [$(cchan true 1 1000000000)]}"
dump "$d" 1 2 "$(op 0 1 64 done), $(op 1 2 64 launched)" "{\"seq\": 1, \"channels\": [$(cchan false -1 0)]}"
cuda "$d"
expect "$d" '^culprit: rank 1 stopped progressing in operation 2: rank 0 waits for it, and it was not waiting' cuda-stall

d=$T/healthy
dump "$d" 0 2 "$done2" null
dump "$d" 1 2 "$done2" null
expect "$d" '^culprit: none: every rank completed' healthy

# Bad input: each an error (exit 2) that names the file.
bad() { # NAME TEXT PATTERN
  local d=$T/bad-$1 out rc
  mkdir -p "$d"
  printf '%s' "$2" >"$d/weft-trace-00000000000000aa-r0-h-1.json"
  out=$("$TOOL" "$d" 2>&1)
  rc=$?
  [ $rc -eq 2 ] || fail "bad $1: exit $rc, want 2"
  grep -q "weft-trace-00000000000000aa-r0-h-1.json: .*$3" <<<"$out" || fail "bad $1: want the file and /$3/ in: $out"
}
bad truncated '{"weft_trace": 1, "rank": ' 'not valid JSON: line 1 column'
bad trailing-comma '{"weft_trace": 1,}' 'not valid JSON'
bad not-object '[1, 2]' 'not a JSON object'
bad foreign '{"hello": 1}' 'weft_trace is missing'
bad rank-type '{"weft_trace": 1, "comm_hash": "a", "rank": "0"}' 'rank is not an integer'
good=$(cat "$T/healthy/weft-trace-00000000000000aa-r0-h-100.json")
bad no-ops "${good/\"ops\"/\"opz\"}" 'ops is missing'
bad bad-state "${good/\"state\": \"done\"/\"state\": 3}" 'state is not a string'
bad out-of-range "${good/\"rank\": 0/\"rank\": 7}" 'rank is out of range'

d=$T/twice
dump "$d" 0 2 "$done2" null
cp "$d/weft-trace-00000000000000aa-r0-h-100.json" "$d/weft-trace-00000000000000aa-r0-h-999.json"
out=$("$TOOL" "$d" 2>&1) && fail "two dumps of rank 0 accepted"
grep -q 'are both rank 0' <<<"$out" || fail "two dumps of rank 0: $out"

mkdir -p "$T/empty"
out=$("$TOOL" "$T/empty" 2>&1) && fail "empty directory accepted"
grep -q 'no weft-trace-\*.json dumps' <<<"$out" || fail "empty directory: $out"
"$TOOL" >/dev/null 2>&1 && fail "no argument accepted"
"$TOOL" "$T/empty" --frobnicate >/dev/null 2>&1 && fail "unknown option accepted"
"$TOOL" "$T/nonexistent" >/dev/null 2>&1 && fail "missing directory accepted"

[ $fails -eq 0 ] && echo "test_weft_trace_cli: all checks passed"
[ $fails -eq 0 ]
