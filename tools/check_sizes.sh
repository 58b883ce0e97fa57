#!/usr/bin/env bash
# The house's size limits, checked over src/: no file over 1000 lines, no
# function over 150 lines unless the comment block directly above it gives a
# reason with the words "long because" (e.g. "/* Long because the opcode
# switch reads best as one table. */"). A function runs from the first line of
# its signature (a line starting in column 0) to its closing brace in column 0.
# Exits 1 and prints each file or function over its limit without a reason;
# excused functions are listed too, marked as such.
#   tools/check_sizes.sh            check src/
#   tools/check_sizes.sh FILE...    check those files only
set -euo pipefail
cd "$(dirname "$0")/.."
MAX_FILE=1000
MAX_FUNC=150
if [ "$#" -gt 0 ]; then files=("$@"); else mapfile -t files < <(find src -name '*.[ch]' | sort); fi
bad=0
for f in "${files[@]}"; do
  n=$(wc -l < "$f")
  if [ "$n" -gt "$MAX_FILE" ]; then
    echo "sizes: $f: $n lines (file limit $MAX_FILE)"; bad=1
  fi
done
out=$(awk -v max="$MAX_FUNC" '
  # State: infn (inside a body), sig (first line of a signature being read),
  # com[1..ncom] (the comment block just read, still adjacent), incom (inside
  # a /* ... */ that spans lines).
  FNR == 1 { infn = 0; sig = 0; ncom = 0; incom = 0 }
  infn {
    if ($0 ~ /^\}/) {
      len = FNR - sig + 1
      if (len > max) printf("%s %s:%d: %s: %d lines\n", excuse ? "ok" : "bad", FILENAME, sig, name, len)
      infn = 0; sig = 0; ncom = 0
    }
    next
  }
  !sig && (incom || $0 ~ /^[ \t]*(\/\*|\*|\/\/)/) {
    com[++ncom] = $0
    if (incom) incom = ($0 !~ /\*\//)
    else incom = ($0 ~ /\/\*/ && $0 !~ /\*\//)
    next
  }
  !sig && /^[A-Za-z_]/ {
    sig = FNR; sigtxt = ""; excuse = 0
    for (i = 1; i <= ncom; i++) if (tolower(com[i]) ~ /long because/) excuse = 1
  }
  sig {
    sigtxt = sigtxt " " $0
    if ($0 ~ /^\{[ \t]*$/ || $0 ~ /\)[ \t]*\{[ \t]*$/) {
      if (sigtxt ~ /\(/ && sigtxt !~ /=/) {
        infn = 1; name = sigtxt
        sub(/\(.*/, "", name); sub(/.*[ *]/, "", name)
      } else sig = 0
    } else if ($0 ~ /;[ \t]*$/ || $0 ~ /^[ \t]*$/ || $0 ~ /\{/) sig = 0
    ncom = 0
    next
  }
  { ncom = 0 }
' "${files[@]}")
while read -r verdict rest; do
  [ -n "$verdict" ] || continue
  if [ "$verdict" = bad ]; then echo "sizes: $rest (function limit $MAX_FUNC)"; bad=1
  else echo "sizes: $rest, excused (long because ...)"; fi
done <<< "$out"
if [ "$bad" -eq 0 ]; then echo "sizes: no file over $MAX_FILE lines, no function over $MAX_FUNC lines without a reason"; fi
exit "$bad"
