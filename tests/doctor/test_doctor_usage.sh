#!/usr/bin/env bash
# weft-doctor's command line: bad values are refused with exit 2 and a message naming the option
# and the value; --help exits 0; a clean run on this machine prints one finding per check family
# and valid JSON with the same findings.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DOC=$ROOT/${BUILD:-build}/bin/weft-doctor
[ -x "$DOC" ] || { echo "FAIL: $DOC not built"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/weft-doctor-usage.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail=0

refused() { # refused MESSAGE ARGS...: exit 2 and MESSAGE on stderr
  local msg=$1
  shift
  "$DOC" "$@" >/dev/null 2>"$T/err"
  local rc=$?
  if [ $rc = 2 ] && grep -qF -- "$msg" "$T/err"; then
    echo "ok: $* refused"
  else
    echo "FAIL: '$*' gave exit $rc: $(cat "$T/err")"
    fail=1
  fi
}
refused "--ranks takes an integer in [1, 1048576], got '0'" --ranks 0
refused "--ranks takes an integer in [1, 1048576], got '3x'" --ranks 3x
refused "--port takes an integer in [1, 65535], got '70000'" --port 70000
refused "-H needs a value" -H
refused "unknown option '--bogus'" --bogus
refused "cannot open host file $T/none" --hostfile "$T/none"
"$DOC" --help | grep -q "^usage: weft-doctor" || { echo "FAIL: --help"; fail=1; }

"$DOC" >"$T/text" 2>&1
"$DOC" --json >"$T/json" 2>&1
python3 - "$T/text" "$T/json" <<'PY' || fail=1
import json, sys
text = [l.split()[1] for l in open(sys.argv[1]) if l[:1] != " " and not l.startswith("weft-doctor:")]
d = json.load(open(sys.argv[2]))
ids = [f["id"] for f in d["findings"]]
families = {i.split(".")[0] for i in ids}
want = {"shm", "ptrace", "memlock", "net", "pcie", "gpus", "numa", "env"}
ok = text == ids and want <= families and all(f["severity"] in ("ok", "info", "warn", "blocks") for f in d["findings"])
print("text and json agree, families:", sorted(families), "ok" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY

[ $fail = 0 ] && echo "PASS: weft-doctor's usage and outputs"
exit $fail
