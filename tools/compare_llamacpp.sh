#!/bin/sh
# Compare staticlm's logits with llama.cpp's, position by position, on the
# same GGUF file and prompt. Not run in CI; needs a llama.cpp build that you
# made yourself (this script builds nothing of llama.cpp) with its
# `llama-logits` tool (examples/model-conversion/logits.cpp), which writes
# the full logit vector of a prompt's last token to data/llamacpp-NAME.bin.
#
#   tools/compare_llamacpp.sh MODEL.gguf LLAMA_BIN_DIR [N] [PROMPT]
#
# staticlm: build/libstaticlm.a (cmake --build build) and tools/slm_logits.c,
# compiled here, give the logits after each of the first N prompt tokens
# (N >= 32 by default 40; one prefill, then decode steps). llama.cpp: for
# each K, llama-logits evaluates the text of the first K tokens in one batch
# (it adds the BOS); its tokenization is checked against staticlm's ids and
# positions where they differ are reported and skipped. Each line: position,
# max |diff|, max |llama.cpp logit|, their ratio, both argmaxes. Exit status
# 1 when a position's relative difference exceeds TOL (default 1e-2: the two
# quantize activations differently) or the argmaxes differ where the top two
# llama.cpp logits are not a near tie.
set -eu
MODEL=${1:?usage: compare_llamacpp.sh MODEL.gguf LLAMA_BIN_DIR [N] [PROMPT]}
LLAMA=${2:?usage: compare_llamacpp.sh MODEL.gguf LLAMA_BIN_DIR [N] [PROMPT]}
N=${3:-40}
PROMPT=${4:-"The quick brown fox jumps over the lazy dog. In the beginning the universe was created; this has made a lot of people very angry and been widely regarded as a bad move. It was a bright cold day in April, and the clocks were striking thirteen."}
TOL=${TOL:-1e-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
LOGITS_BIN="$LLAMA/llama-logits"
[ -x "$LOGITS_BIN" ] || { echo "no $LOGITS_BIN (build llama.cpp's llama-logits target)" >&2; exit 2; }
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

echo "pos  max|diff|  max|ref|  rel  argmax(staticlm) argmax(llama.cpp)"
bad=0 skipped=0 k=1
cd "$WORK"
while [ "$k" -le "$n" ]; do
    text=$(cat "out/prefix_$k.txt")
    if ! "$LOGITS_BIN" -m "$MODEL" "$text" > "llama_$k.txt" 2>&1; then
        echo "$((k - 1)): llama-logits failed (see below)"; tail -n 5 "llama_$k.txt"; exit 1
    fi
    # its ids, from "Tokenized prompt (K tokens): piece (id)piece (id)..."
    grep '^Tokenized prompt' "llama_$k.txt" | grep -o '([0-9]*)' | tr -d '()' > "ids_llama_$k.txt"
    head -n "$k" out/ids.txt > "ids_slm_$k.txt"
    if ! cmp -s "ids_llama_$k.txt" "ids_slm_$k.txt"; then
        echo "$((k - 1)): tokenization of the prefix differs; skipped"
        skipped=$((skipped + 1)); k=$((k + 1)); continue
    fi
    line=$("$WORK/slm_logits" compare "out/slm_$k.bin" "data/llamacpp-$name.bin")
    echo "$((k - 1)) $line"
    echo "$line" | awk -v tol="$TOL" '{ exit !($3 > tol) }' && bad=$((bad + 1))
    k=$((k + 1))
done
echo "positions: $n, skipped (tokenization): $skipped, over tolerance $TOL: $bad"
[ "$bad" -eq 0 ]
