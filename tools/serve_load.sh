#!/usr/bin/env bash
# Load test of `staticlm serve`: C concurrent streaming clients against one
# server, each sending R chat requests back to back; prints the aggregate
# generated tokens/s and the time to first token (median and worst). Run it
# once with 1 client and once with 4 on the same server to see what the
# slots (--parallel) buy: decode reads the weights once per step for all of
# them.
#
#   tools/serve_load.sh URL [CLIENTS [REQUESTS [MAX_TOKENS]]]
#   e.g. staticlm serve -m model.gguf --parallel 4 --port 8080 &
#        tools/serve_load.sh http://127.0.0.1:8080 1 4 128
#        tools/serve_load.sh http://127.0.0.1:8080 4 4 128
#
# Needs curl. Greedy (temperature 0): each request asks for up to MAX_TOKENS
# (a reply may stop earlier at its end-of-turn token) and counts the tokens
# the server reports in usage.
set -euo pipefail
URL=${1:?usage: serve_load.sh URL [CLIENTS [REQUESTS [MAX_TOKENS]]]}
C=${2:-4} R=${3:-4} N=${4:-128}
command -v curl >/dev/null || { echo "serve_load: curl is not installed" >&2; exit 1; }
TMP=$(mktemp -d /tmp/slm_serve_load.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
now() { date +%s%N; }

# one client: R streaming requests; per request a line "ttft_ns tokens"
client() {
  local id=$1 out=$TMP/client.$1
  : >"$out"
  for r in $(seq 1 "$R"); do
    local body="{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story number $id-$r.\"}],\"max_tokens\":$N,\"temperature\":0,\"stream\":true,\"stream_options\":{\"include_usage\":true}}"
    local t0 first= line tokens=0
    t0=$(now)
    while IFS= read -r line; do
      case $line in
        data:*'"content":"'[!\"]*) [ -z "$first" ] && first=$(now) ;;
        data:*'"completion_tokens":'*) tokens=$(printf '%s' "$line" | sed 's/.*"completion_tokens":\([0-9]*\).*/\1/') ;;
      esac
    done < <(curl -sN -m 600 -H 'Content-Type: application/json' -d "$body" "$URL/v1/chat/completions")
    [ -z "$first" ] && first=$(now)
    echo "$((first - t0)) $tokens" >>"$out"
  done
}

curl -sf "$URL/health" >/dev/null || { echo "serve_load: no server at $URL" >&2; exit 1; }
start=$(now)
pids=()
for c in $(seq 1 "$C"); do
  client "$c" &
  pids+=($!)
done
wait "${pids[@]}"
end=$(now)
cat "$TMP"/client.* >"$TMP/all"
total=$(awk '{s += $2} END {print s + 0}' "$TMP/all")
secs=$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.3f", (b - a) / 1e9}')
ttft=$(awk '{print $1 / 1e6}' "$TMP/all" | sort -n | awk '{v[NR] = $1} END {printf "median %.1f ms, worst %.1f ms", v[int((NR + 1) / 2)], v[NR]}')
echo "clients $C x $R requests, max_tokens $N: $total tokens in $secs s = $(awk -v t="$total" -v s="$secs" 'BEGIN {printf "%.1f", t / s}') tokens/s aggregate; time to first token $ttft"
