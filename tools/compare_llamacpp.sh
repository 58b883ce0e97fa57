#!/bin/sh
# Compare staticlm's logits with llama.cpp's, position by position, on the
# same GGUF file and prompt, and their greedy continuations. Not run in CI;
# needs a llama.cpp build that you made yourself (this script builds nothing
# of llama.cpp) with one of its tools that write the full logit vector of a
# prompt's last token: `llama-debug --save-logits` (examples/debug) or
# `llama-logits` (examples/model-conversion); and, for the greedy check,
# `llama-simple` (examples/simple).
#
#   tools/compare_llamacpp.sh MODEL.gguf LLAMA_BIN_DIR [N] [PROMPT]
#
# staticlm: build/libstaticlm.a (cmake --build build) and tools/slm_logits.c,
# compiled here, give the logits after each of the first N prompt tokens
# (N >= 32, default 40; one prefill, then decode steps). llama.cpp: for each
# K, the tool evaluates the text of the first K tokens in one batch (it adds
# the BOS); its tokenization is checked against staticlm's ids and positions
# where they differ are reported and skipped. Each line: position, max |diff|,
# the range of llama.cpp's logits (max - min), their ratio, both argmaxes,
# llama.cpp's top-2 gap. A position fails when the ratio exceeds TOL (default
# 1e-3, the bound for F32/F16 files; quantized files need more, since the two
# quantize activations differently) or the argmaxes differ where the top-2
# gap exceeds the difference.
#
# REF=FILE.gguf runs llama.cpp on another file than staticlm: the same
# weights upcast exactly to F32 (`llama-quantize --allow-requantize
# MODEL.gguf REF.gguf F32`), since llama.cpp's F16 matrix products round
# the activations to F16 (relative 2^-11), which alone moves its logits by
# about 1e-3 of their range; the F32 twin separates that from staticlm's error.
#
# Both sides compute in F32 by default, so that the figure measures the
# reading of the model, not roundings: staticlm with an F32 KV cache (KV,
# default f32; its own default is f16) and llama-debug with
# LLAMA_BASE="-fa off -ctk f32 -ctv f32". Flash attention must be off:
# llama.cpp's CPU flash attention (on by default) casts K and V to F16
# whatever the cache type, rounds Q to F16 and accumulates the weighted V sum
# in F16 (and, built for a CPU with AVX512-FP16, also the Q.K dot products),
# which moves its logits by up to about 1e-3 of their range, growing with
# the position. LLAMA_ARGS: more options for llama-debug, after LLAMA_BASE
# (later options win), e.g. "-c 512" (a context under a LongRoPE model's
# original one, as staticlm's default 2N; CTX=C makes staticlm's context C
# rows instead, e.g. CTX=8192 with LLAMA_ARGS="-c 8192" for the long factors).
# (llama-logits is run as it is, without these options.) What
# stays: Gemma's GeGLU, whose GELU llama.cpp reads from an F16 table.
#
# Greedy: `staticlm run --temp 0 -n G --kv-type KV` (G = GREEDY, default
# 32) and `llama-simple -n G` continue the same prompt; their texts must be
# equal (llama-simple runs with llama.cpp's defaults: flash attention and an
# F16 KV cache, so a near-tie may part them).
# Exit status 1 on any failure.
set -eu
MODEL=${1:?usage: compare_llamacpp.sh MODEL.gguf LLAMA_BIN_DIR [N] [PROMPT]}
LLAMA=${2:?usage: compare_llamacpp.sh MODEL.gguf LLAMA_BIN_DIR [N] [PROMPT]}
N=${3:-40}
PROMPT=${4:-"The quick brown fox jumps over the lazy dog. In the beginning the universe was created; this has made a lot of people very angry and been widely regarded as a bad move. It was a bright cold day in April, and the clocks were striking thirteen."}
TOL=${TOL:-1e-3}
GREEDY=${GREEDY:-32}
KV=${KV:-f32}
CTX=${CTX:-}
LLAMA_BASE=${LLAMA_BASE:--fa off -ctk f32 -ctv f32}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
if [ -x "$LLAMA/llama-debug" ]; then TOOL=debug
elif [ -x "$LLAMA/llama-logits" ]; then TOOL=logits
else echo "no $LLAMA/llama-debug or $LLAMA/llama-logits (build one of these llama.cpp targets)" >&2; exit 2
fi
[ -f "$BUILD/libstaticlm.a" ] || { echo "no $BUILD/libstaticlm.a (cmake --build build)" >&2; exit 2; }
BUILD=$(cd "$BUILD" && pwd) # the greedy check runs from a temporary folder
MODEL=$(cd "$(dirname "$MODEL")" && pwd)/$(basename "$MODEL")
REF=${REF:-$MODEL}
REF=$(cd "$(dirname "$REF")" && pwd)/$(basename "$REF")

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
LIBS=$(pkg-config --libs libpcre2-8 libcjson 2>/dev/null || pkg-config --libs libpcre2-8)
cc -O2 -std=c11 -I"$ROOT/include" "$ROOT/tools/slm_logits.c" "$BUILD/libstaticlm.a" $LIBS -lm -lpthread \
    -o "$WORK/slm_logits"
mkdir -p "$WORK/out"
"$WORK/slm_logits" dump "$MODEL" "$WORK/out" "$N" "$PROMPT" "$KV" $CTX > "$WORK/dump.txt"
head -n 1 "$WORK/dump.txt"
echo "staticlm: KV $KV${CTX:+, context $CTX}; llama-debug: $LLAMA_BASE ${LLAMA_ARGS:-}"
n=$(tail -n 1 "$WORK/dump.txt")
[ "$n" -ge 1 ] || { echo "no tokens" >&2; exit 1; }
name=$(basename "$REF" .gguf)

echo "pos  max|diff|  range(llama.cpp)  rel  argmax(staticlm) argmax(llama.cpp) top2-gap"
bad=0 skipped=0 k=1
cd "$WORK"
while [ "$k" -le "$n" ]; do
    text=$(cat "out/prefix_$k.txt")
    if [ "$TOOL" = debug ]; then
        ok=1; "$LLAMA/llama-debug" -m "$REF" -p "$text" --save-logits --logits-output-dir data \
            -t "${THREADS:-2}" $LLAMA_BASE ${LLAMA_ARGS:-} > "llama_$k.txt" 2>&1 || ok=0
        # its ids: the line after "Token ids (K):", "piece(id) piece(id) ..."
        ids=$(sed -n '/^Token ids (/{n;p;q}' "llama_$k.txt")
    else
        ok=1; "$LLAMA/llama-logits" -m "$REF" "$text" > "llama_$k.txt" 2>&1 || ok=0
        # its ids, from "Tokenized prompt (K tokens): piece (id)piece (id)..."
        ids=$(grep '^Tokenized prompt' "llama_$k.txt")
    fi
    if [ "$ok" = 0 ]; then
        echo "$((k - 1)): llama.cpp failed (see below)"; tail -n 5 "llama_$k.txt"; exit 1
    fi
    echo "$ids" | grep -o '([0-9]*)' | tr -d '()' > "ids_llama_$k.txt"
    head -n "$k" out/ids.txt > "ids_slm_$k.txt"
    if ! cmp -s "ids_llama_$k.txt" "ids_slm_$k.txt"; then
        echo "$((k - 1)): tokenization of the prefix differs; skipped"
        skipped=$((skipped + 1)); k=$((k + 1)); continue
    fi
    line=$("$WORK/slm_logits" compare "out/slm_$k.bin" "data/llamacpp-$name.bin")
    echo "$((k - 1)) $line"
    # over the tolerance, or a differing argmax where the top-2 gap exceeds the difference
    echo "$line" | awk -v tol="$TOL" '{ exit !($3 > tol || ($4 != $5 && $6 > $1)) }' && bad=$((bad + 1))
    k=$((k + 1))
done
echo "positions: $n, skipped (tokenization): $skipped, failed (tolerance $TOL or argmax): $bad"

gbad=0
if [ "$GREEDY" -gt 0 ] && [ -x "$LLAMA/llama-simple" ] && [ -x "$BUILD/staticlm" ]; then
    # the same prompt text as the compared prefix, continued greedily by both
    text=$(cat "out/prefix_$n.txt")
    "$BUILD/staticlm" run -m "$MODEL" -p "$text" -n "$GREEDY" --temp 0 --ignore-eos --kv-type "$KV" -t "${THREADS:-2}" \
        > slm_greedy.txt 2> slm_greedy.err || { echo "staticlm run failed"; tail -n 3 slm_greedy.err; exit 1; }
    "$LLAMA/llama-simple" -m "$REF" -n "$GREEDY" "$text" > llama_greedy.txt 2> llama_greedy.err \
        || { echo "llama-simple failed"; tail -n 3 llama_greedy.err; exit 1; }
    # what follows the prompt in each output (llama-simple also prints the BOS piece)
    after() { awk -v p="$text" 'BEGIN { RS = "\001" } { i = index($0, p); print (i ? substr($0, i + length(p)) : $0) }' "$1"; }
    after slm_greedy.txt > slm_cont.txt
    after llama_greedy.txt > llama_cont.txt
    if cmp -s slm_cont.txt llama_cont.txt; then
        echo "greedy $GREEDY tokens: identical"
    else
        gbad=1
        echo "greedy $GREEDY tokens: the texts differ"
        echo "  staticlm:  $(tr '\n' ' ' < slm_cont.txt | cut -c1-300)"
        echo "  llama.cpp: $(tr '\n' ' ' < llama_cont.txt | cut -c1-300)"
    fi
else
    echo "greedy check skipped (needs $LLAMA/llama-simple and $BUILD/staticlm)"
fi
[ "$bad" -eq 0 ] && [ "$gbad" -eq 0 ]
