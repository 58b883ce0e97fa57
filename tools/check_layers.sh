#!/usr/bin/env bash
# The layer map, checked: every #include "X/..." in src/L/ must name a layer
# X at or below L in this list (bottom first; docs/architecture.md draws it).
# Exits 1 and prints each include that points up the map, or one naming a
# folder that is not a layer.
#   tools/check_layers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
LAYERS=(common format text ir program compiler device blob runtime engine server cli)
rank() { local i; for i in "${!LAYERS[@]}"; do [ "${LAYERS[$i]}" = "$1" ] && { echo "$i"; return; }; done; echo -1; }
bad=0
for dir in src/*/; do
  layer=$(basename "$dir")
  r=$(rank "$layer")
  if [ "$r" -lt 0 ]; then echo "layers: src/$layer/ is not a layer of the map"; bad=1; continue; fi
  while IFS=: read -r file line inc; do
    target=${inc%%/*}
    tr=$(rank "$target")
    if [ "$tr" -lt 0 ]; then
      echo "layers: $file:$line includes \"$inc\": $target is not a layer"; bad=1
    elif [ "$tr" -gt "$r" ]; then
      echo "layers: $file:$line includes \"$inc\": $layer (layer $r) must not depend on $target (layer $tr)"; bad=1
    fi
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*/' "$dir"*.[ch] 2>/dev/null |
           sed -E 's/^([^:]*):([0-9]+):[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]*)".*/\1:\2:\3/')
  # a bare include of a sibling header must name a file of the same folder
  while IFS=: read -r file line inc; do
    [ -f "$dir$inc" ] || { echo "layers: $file:$line includes \"$inc\", not a file of src/$layer/"; bad=1; }
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"/]*"' "$dir"*.[ch] 2>/dev/null | grep -v '"staticlm.h"' |
           sed -E 's/^([^:]*):([0-9]+):[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]*)".*/\1:\2:\3/')
done
if [ "$bad" -eq 0 ]; then echo "layers: every include points down the map (${LAYERS[*]})"; fi
exit "$bad"
