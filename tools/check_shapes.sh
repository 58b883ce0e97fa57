#!/bin/sh
# The files users download, end to end: for each small model people run
# locally, a random-weight GGUF of its real shape and metadata
# (`staticlm synth --type f16`), quantized by llama.cpp's own llama-quantize
# to Q4_K_M (with its fallback types) and Q8_0; each of the three files
# through `staticlm run` (greedy, 16 tokens), `staticlm chat` (one turn from
# stdin) and `staticlm serve` (one /v1/chat/completions request). Prints one
# line per file: the tensor types, what each command did, and `bench`'s
# tg32 (tokens/s, all cores). Not run in CI (llama-quantize is a llama.cpp
# build you made; this script builds nothing of llama.cpp). Needs curl.
#
#   tools/check_shapes.sh STATICLM LLAMA_BIN_DIR WORKDIR [SHAPE...]
#
# SHAPE: smollm2-135m qwen2.5-0.5b qwen3-0.6b llama-3.2-1b gemma-3-1b
# phi-4-mini smollm3-3b (default: all but smollm3-3b; phi-4-mini's F16 file
# is 7.7 GB, smollm3-3b's 6.2 GB). TYPES (default
# "f16 q8_0 q4_k_m") picks the files. Exit status 1 when any command failed.
set -u
SLM=${1:?usage: check_shapes.sh STATICLM LLAMA_BIN_DIR WORKDIR [SHAPE...]}
LLAMA=${2:?usage: check_shapes.sh STATICLM LLAMA_BIN_DIR WORKDIR [SHAPE...]}
WORK=${3:?usage: check_shapes.sh STATICLM LLAMA_BIN_DIR WORKDIR [SHAPE...]}
shift 3
SHAPES=${*:-smollm2-135m qwen2.5-0.5b qwen3-0.6b llama-3.2-1b gemma-3-1b phi-4-mini}
TYPES=${TYPES:-f16 q8_0 q4_k_m}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VOCAB=${VOCAB:-$ROOT/../shared/vocab/ggml-vocab-llama-spm.gguf}
[ -x "$LLAMA/llama-quantize" ] || { echo "no $LLAMA/llama-quantize" >&2; exit 2; }
command -v curl >/dev/null || { echo "curl is not installed" >&2; exit 2; }
mkdir -p "$WORK"
fail=0
printf '%-14s %-7s %-34s %-5s %-5s %-5s %s\n' shape type "tensor types" run chat serve "decode t/s"
for s in $SHAPES; do
  f16="$WORK/$s-f16.gguf"
  [ -f "$f16" ] || "$SLM" synth --shape "$s" --type f16 -o "$f16" --vocab-file "$VOCAB" >/dev/null 2>&1 ||
    { echo "$s: synth failed" >&2; fail=1; continue; }
  for t in $TYPES; do
    f="$WORK/$s-$t.gguf"
    case $t in
      f16) ;;
      q8_0) [ -f "$f" ] || "$LLAMA/llama-quantize" "$f16" "$f" Q8_0 >/dev/null 2>&1 ;;
      q4_k_m) [ -f "$f" ] || "$LLAMA/llama-quantize" "$f16" "$f" Q4_K_M >/dev/null 2>&1 ;;
      *) echo "unknown type $t" >&2; exit 2 ;;
    esac
    [ -f "$f" ] || { echo "$s $t: llama-quantize failed" >&2; fail=1; continue; }
    "$SLM" bench -m "$f" -p 0 -n 32 -r 2 --bw-mib 0 --no-profile >"$WORK/bench.out" 2>/dev/null
    types=$(sed -n 's/^tensor types: \([^;]*\);.*/\1/p' "$WORK/bench.out")
    tps=$(grep -o 'tg32 | [0-9.]*' "$WORK/bench.out" | sed 's/.*| //')
    # run: greedy, 16 tokens
    if "$SLM" run -m "$f" -p "Once upon a time" -n 16 --temp 0 --max-prompt-len 64 --min-response-len 32 \
        >"$WORK/run.out" 2>"$WORK/run.err"; then r=ok; else r=FAIL; fail=1; fi
    # chat: one turn from stdin
    if printf 'Hello there\n' | "$SLM" chat -m "$f" -n 16 --temp 0 --max-prompt-len 64 --min-response-len 32 \
        >"$WORK/chat.out" 2>"$WORK/chat.err"; then c=ok; else c=FAIL; fail=1; fi
    # serve: one chat completion on a free port
    "$SLM" serve -m "$f" --host 127.0.0.1 --port 0 --max-prompt-len 64 --min-response-len 32 2>"$WORK/serve.err" &
    pid=$!
    port=
    for _ in $(seq 1 600); do
      port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$WORK/serve.err" 2>/dev/null | head -1 | sed 's/.*://')
      [ -n "$port" ] && break
      kill -0 $pid 2>/dev/null || break
      sleep 0.1
    done
    v=FAIL
    if [ -n "$port" ] && curl -sf -m 120 "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' \
        -d '{"messages":[{"role":"user","content":"Hello there"}],"max_tokens":16,"temperature":0}' \
        >"$WORK/serve.out" && grep -q '"completion_tokens"' "$WORK/serve.out"; then v=ok; fi
    kill $pid 2>/dev/null; wait $pid 2>/dev/null
    [ $v = ok ] || fail=1
    printf '%-14s %-7s %-34s %-5s %-5s %-5s %s\n' "$s" "$t" "${types:--}" "$r" "$c" "$v" "${tps:--}"
    [ $r = ok ] || sed -n 1,5p "$WORK/run.err"
  done
done
exit $fail
