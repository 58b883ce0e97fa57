#!/usr/bin/env bash
# staticlm serve --parallel 4 from a blob with batch programs (compile
# --parallel 4) and from the blob cache mode writes (--cache-dir): 4 clients
# at once get the same greedy replies as `staticlm run` on each prompt
# alone, and the slots decode together (batch programs, not one by one);
# the cache's second start maps the blob it wrote; a blob compiled for
# --parallel 4 serves --parallel 3 (its 4 KV regions, one unused: a note)
# with each reply equal to run's, and refuses --parallel 5 saying what to do.
# usage: test_serve_blob_batch.sh CLI SHARED_DIR
set -u
CLI=$1 SHARED=$2
SRC=(-m "$SHARED/models/stories260K.bin" -z "$SHARED/models/tok512.bin")
SHAPE=(--max-prompt-len 32 --min-response-len 64)
. "$(dirname "$0")/serve/lib.sh"
serve_needs
serve_tmp test_blob_batch
H=(-H 'Content-Type: application/json')
stop() { kill -TERM "$SPID" 2>/dev/null; wait "$WPID" 2>/dev/null; }
text_of() { sed -n 's/.*"text":"\(\([^"\\]\|\\.\)*\)".*/\1/p' "$1" | head -1; }

PROMPTS=("Once upon a time" "Lily and Tom went" "The cat sat on" "One day, a big dog")
# each prompt alone, from the source model
for i in 0 1 2 3; do
  "$CLI" run "${SRC[@]}" "${SHAPE[@]}" -p "${PROMPTS[$i]}" -n 40 --temp 0 2>/dev/null >"$TMP/r.$i"
done
# four_clients NAME: 4 concurrent completions on the server at $U, each equal to run's
four_clients() {
  local W=() i
  for i in 0 1 2 3; do
    curl -s -m 60 "${H[@]}" -d "{\"prompt\":\"${PROMPTS[$i]}\",\"max_tokens\":40,\"temperature\":0}" \
      "$U/v1/completions" >"$TMP/$1.$i" &
    W+=($!)
  done
  wait "${W[@]}"
  for i in 0 1 2 3; do
    want=$(head -c -1 "$TMP/r.$i" | tr '\n' '\1' | sed "s/^${PROMPTS[$i]}//" | sed 's/\x01/\\n/g')
    got=$(text_of "$TMP/$1.$i")
    check "$1: reply $i equals run alone" '[ -n "$got" ] && [ "$got" = "$want" ]'
    [ "$got" = "$want" ] || { echo "  got:  $got"; echo "  want: $want"; }
  done
}

# ---- a blob compiled with --parallel 4
"$CLI" compile "${SRC[@]}" "${SHAPE[@]}" --parallel 4 -o "$TMP/p4.slmblob" 2>"$TMP/compile.log"
check "compile --parallel 4 writes the blob" '[ -s "$TMP/p4.slmblob" ]'
"$CLI" inspect "$TMP/p4.slmblob" >"$TMP/inspect"
check "inspect shows n_seqs 4 and batch.4" 'grep -q "n_seqs 4" "$TMP/inspect" && grep -q "^program batch.4: rows 4" "$TMP/inspect"'
serve_start "$TMP/blob.log" -m "$TMP/p4.slmblob" --parallel 4 --queue 8
check "from the blob: 4 slots decoded together" 'grep -q "4 slots," "$TMP/blob.log" && ! grep -q "one by one\|held unused" "$TMP/blob.log"'
four_clients blob
stop

# ---- --parallel 3 with that blob: 3 slots over its 4 KV regions (a note says so), the 4th client waits
serve_start "$TMP/p3.log" -m "$TMP/p4.slmblob" --parallel 3 --queue 8
check "--parallel 3 from the --parallel 4 blob: 3 slots decoded together" 'grep -q "3 slots," "$TMP/p3.log" && ! grep -q "one by one" "$TMP/p3.log"'
check "--parallel 3: a note on the unused KV region" 'grep -q "address 4 KV regions (compile --parallel 4): 1 of them held unused, [0-9.]* MiB of KV cache; recompile with --parallel 3" "$TMP/p3.log"'
four_clients p3
stop

# ---- --parallel 5 with that blob: refused, saying what to do
"$CLI" serve -m "$TMP/p4.slmblob" --parallel 5 --port 0 2>"$TMP/p5.log" &
P=$!
for _ in $(seq 1 100); do kill -0 "$P" 2>/dev/null || break; sleep 0.1; done
kill -KILL "$P" 2>/dev/null
check "--parallel 5 refused: compiled for --parallel 4" 'grep -q "compiled for --parallel 4.*use --parallel 4 or fewer.*recompile with --parallel 5" "$TMP/p5.log"'

# ---- cache mode: the first start compiles the batch programs into the blob, the second maps it
for run in first second; do
  serve_start "$TMP/cache_$run.log" "${SRC[@]}" "${SHAPE[@]}" --cache-dir "$TMP/cache" --parallel 4 -v
  check "cache, $run start: 4 slots decoded together" 'grep -q "4 slots," "$TMP/cache_$run.log" && ! grep -q "one by one" "$TMP/cache_$run.log"'
  four_clients "cache_$run"
  stop
done
check "the second start loaded the cached blob" 'grep -q "loaded cached blob" "$TMP/cache_second.log"'
check "one blob in the cache" '[ "$(ls "$TMP/cache" | grep -c "\.slmblob$")" = 1 ]'
serve_done
