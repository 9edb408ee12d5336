#!/usr/bin/env bash
# Python NCCL clients on Weft's host backend: CuPy (cupy.cuda.nccl) and nccl4py (nccl.bindings)
# from PyPI, in a venv under $BUILD/venv-clients (made once; later runs reuse it). Each runs
# tests/python/clients.py with 2 and 4 rank processes, loading our libnccl.so.2 once through
# LD_LIBRARY_PATH and once through LD_PRELOAD (clients.py asserts that no other libnccl is mapped).
# SKIP when the venv or the packages cannot be had (offline) or a client fails to import for a
# reason that is not Weft's. CLIENT_PKGS overrides the pinned packages (the versions tested).
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
LIB=$BUILD/lib/libnccl.so.2
VENV=$BUILD/venv-clients
PKGS=${CLIENT_PKGS:-"cupy-cuda13x==14.2.0 nccl4py==0.6.0"}
[ -e "$LIB" ] || { echo "SKIP: $LIB not built (make)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }
export WEFT_BACKEND=host WEFT_TIMEOUT=${WEFT_TIMEOUT:-60}
unset LD_PRELOAD

importable() { # client: its import, with our library on the search path
  local mod
  case $1 in cupy) mod=cupy.cuda.nccl ;; nccl4py) mod=nccl.bindings.nccl ;; esac
  LD_LIBRARY_PATH=$BUILD/lib "$VENV/bin/python" -c "import numpy, $mod" >"$VENV/import-$1.log" 2>&1
}

if ! { [ -x "$VENV/bin/python" ] && importable cupy && importable nccl4py; }; then
  if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV" >"$BUILD/venv-clients.log" 2>&1 || {
      echo "SKIP: python3 -m venv failed (Debian: apt-get install python3-venv): $(tail -n 1 "$BUILD/venv-clients.log")"
      rm -rf "$VENV"
      exit 77
    }
  fi
  echo "installing $PKGS into $VENV"
  # shellcheck disable=SC2086  # PKGS is a list of requirement specs
  if ! PIP_CACHE_DIR=$VENV/pip-cache timeout 500 "$VENV/bin/pip" install --disable-pip-version-check -q $PKGS \
    >"$VENV/pip.log" 2>&1; then
    echo "SKIP: pip install $PKGS failed (offline?): $(grep -m1 -iE 'error|could not' "$VENV/pip.log" | cut -c1-200)"
    exit 77
  fi
fi

fail=0 ran=0
run() { # client, ranks, how our library is loaded (path or preload)
  local c=$1 n=$2 how=$3 out="$VENV/run-$1-$2.log" rc
  local envs=(env -u LD_LIBRARY_PATH)
  if [ "$how" = path ]; then envs=(env "LD_LIBRARY_PATH=$BUILD/lib"); else envs+=("LD_PRELOAD=$LIB"); fi
  timeout -k 5 180 "${envs[@]}" "$VENV/bin/python" tests/python/clients.py "$c" "$n" "$LIB" >"$out" 2>&1
  rc=$?
  if [ $rc = 0 ]; then
    echo "PASS $c, $n ranks, library by $how: $(grep -c 'checks passed' "$out") ranks, $(grep -o '^[^:]*rank 0/[0-9]*: [0-9]* checks passed' "$out" | head -1)"
    grep 'note:' "$out" | sort -u | head -5
  else
    echo "FAIL $c, $n ranks, library by $how (rc $rc)"
    grep -vE '^\s+(File|\^)' "$out" | tail -n 25 | sed 's/^/    /'
    fail=1
  fi
  ran=$((ran + 1))
}

for c in cupy nccl4py; do
  if ! importable "$c"; then
    if grep -qiE 'undefined symbol: p?nccl|libnccl' "$VENV/import-$c.log"; then
      echo "FAIL $c does not import against Weft's library: $(grep -m1 -iE 'nccl' "$VENV/import-$c.log")"
      fail=1
    else
      echo "SKIP $c: import failed for a reason outside Weft: $(tail -n 1 "$VENV/import-$c.log" | cut -c1-200)"
    fi
    continue
  fi
  if [ $c = cupy ]; then
    run $c 2 path
    run $c 4 preload
  else
    run $c 2 preload
    run $c 4 path
  fi
done
[ $fail = 0 ] && [ $ran = 0 ] && { echo "SKIP: no Python client could be imported"; exit 77; }
[ $fail = 0 ] && echo "all Python client checks passed"
exit $fail
