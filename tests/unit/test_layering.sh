#!/usr/bin/env bash
# The layers of src/ include only the layers below them (DESIGN's layout): util at the bottom,
# then bootstrap and graph, transport and proxy, collectives (which sees a communicator only
# through collectives/context.h), and core on top with the public entry points. A file that
# includes a layer above its own is reported with the include.
set -u
cd "$(dirname "$0")/../.."
allowed() {
  case $1 in
    util) echo "util" ;;
    bootstrap) echo "bootstrap util" ;;
    graph) echo "graph util" ;;
    proxy) echo "proxy transport util" ;;
    transport) echo "transport proxy bootstrap util" ;;
    collectives) echo "collectives bootstrap graph proxy transport util nccl_device" ;;
    doctor) echo "doctor collectives bootstrap graph proxy transport util" ;;
    *) echo "*" ;;
  esac
}
fail=0
for dir in src/*/; do
  layer=$(basename "$dir")
  ok=$(allowed "$layer")
  [ "$ok" = "*" ] && continue
  while IFS= read -r hit; do
    inc=$(echo "$hit" | sed -E 's/.*#include "([a-z_]+)\/.*/\1/')
    case " $ok " in *" $inc "*) ;; *) echo "FAILED: $hit (layer $layer may include: $ok)"; fail=1 ;; esac
  done < <(grep -rnE '#include "[a-z_]+/' "$dir" --include='*.c' --include='*.h' --include='*.cu' --include='*.cuh' --include='*.cpp')
done
# The public entry points are core's: no other layer defines one.
if grep -rln 'WEFT_API(' src --include='*.c' | grep -v '^src/core/'; then
  echo "FAILED: public entry points (WEFT_API) outside src/core"
  fail=1
fi
[ $fail = 0 ] && echo "layering: every include points down"
exit $fail
