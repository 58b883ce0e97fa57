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
# Greedy: `staticlm run --temp 0 -n G` (G = GREEDY, default 32) and
# `llama-simple -n G` continue the same prompt; their texts must be equal.
# Exit status 1 on any failure.
set -eu
MODEL=${1:?usage: compare_llamacpp.sh MODEL.gguf LLAMA_BIN_DIR [N] [PROMPT]}
LLAMA=${2:?usage: compare_llamacpp.sh MODEL.gguf LLAMA_BIN_DIR [N] [PROMPT]}
N=${3:-40}
PROMPT=${4:-"The quick brown fox jumps over the lazy dog. In the beginning the universe was created; this has made a lot of people very angry and been widely regarded as a bad move. It was a bright cold day in April, and the clocks were striking thirteen."}
TOL=${TOL:-1e-3}
GREEDY=${GREEDY:-32}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
if [ -x "$LLAMA/llama-debug" ]; then TOOL=debug
elif [ -x "$LLAMA/llama-logits" ]; then TOOL=logits
else echo "no $LLAMA/llama-debug or $LLAMA/llama-logits (build one of these llama.cpp targets)" >&2; exit 2
fi
[ -f "$BUILD/libstaticlm.a" ] || { echo "no $BUILD/libstaticlm.a (cmake --build build)" >&2; exit 2; }
MODEL=$(cd "$(dirname "$MODEL")" && pwd)/$(basename "$MODEL")

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
LIBS=$(pkg-config --libs libpcre2-8 libcjson 2>/dev/null || pkg-config --libs libpcre2-8)
cc -O2 -std=c11 -I"$ROOT/include" "$ROOT/tools/slm_logits.c" "$BUILD/libstaticlm.a" $LIBS -lm -lpthread \
    -o "$WORK/slm_logits"
mkdir -p "$WORK/out"
"$WORK/slm_logits" dump "$MODEL" "$WORK/out" "$N" "$PROMPT" > "$WORK/dump.txt"
head -n 1 "$WORK/dump.txt"
n=$(tail -n 1 "$WORK/dump.txt")
[ "$n" -ge 1 ] || { echo "no tokens" >&2; exit 1; }
name=$(basename "$MODEL" .gguf)

echo "pos  max|diff|  range(llama.cpp)  rel  argmax(staticlm) argmax(llama.cpp) top2-gap"
bad=0 skipped=0 k=1
cd "$WORK"
while [ "$k" -le "$n" ]; do
    text=$(cat "out/prefix_$k.txt")
    if [ "$TOOL" = debug ]; then
        ok=1; "$LLAMA/llama-debug" -m "$MODEL" -p "$text" --save-logits --logits-output-dir data \
            -t "${THREADS:-2}" > "llama_$k.txt" 2>&1 || ok=0
        # its ids: the line after "Token ids (K):", "piece(id) piece(id) ..."
        ids=$(sed -n '/^Token ids (/{n;p;q}' "llama_$k.txt")
    else
        ok=1; "$LLAMA/llama-logits" -m "$MODEL" "$text" > "llama_$k.txt" 2>&1 || ok=0
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
    "$BUILD/staticlm" run -m "$MODEL" -p "$text" -n "$GREEDY" --temp 0 --ignore-eos -t "${THREADS:-2}" \
        > slm_greedy.txt 2> slm_greedy.err || { echo "staticlm run failed"; tail -n 3 slm_greedy.err; exit 1; }
    "$LLAMA/llama-simple" -m "$MODEL" -n "$GREEDY" "$text" > llama_greedy.txt 2> llama_greedy.err \
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
