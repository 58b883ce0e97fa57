#!/usr/bin/env bash
# staticlm serve --embeddings, on free loopback ports:
#  - POST /v1/embeddings (OpenAI's form) gives `staticlm embed`'s vectors (json form) for a list of
#    texts; base64 encoding decodes to the same floats; token ids give the text's vector;
#    usage counts the tokens;
#  - llama-server's /embedding: one pooled vector, embd_normalize honoured; with --pooling none
#    every token's vector (and /v1/embeddings refuses none);
#  - an embedding request while another slot generates: both answered, the generation as alone;
#  - refusals: no --embeddings (501), bad input, ids outside the vocabulary, dimensions,
#    encoding_format, an input over the slot's capacity; --pooling without --embeddings;
#  - an encoder (synth bert): requests of several clients admitted together share one batch call;
#    a list of texts (packed into its batch programs) gives each text's
#    vector alone, in order, and staticlm embed -f's;
#  - --reranking with a reranker (synth --pooling rank, Qwen3-Reranker's layout): /v1/rerank's
#    scores equal `staticlm embed --pooling rank`'s, best first, top_n; TEI's form; refusals;
#    the same for a cross-encoder (synth --arch bert --pooling rank: a classifier head, no template).
# usage: test_serve_embed.sh CLI SHARED_DIR
set -u
CLI=$1 SHARED=$2
MODEL=(-m "$SHARED/models/stories260K.bin" -z "$SHARED/models/tok512.bin" --kv-type f32)
. "$(dirname "$0")/serve/lib.sh"
serve_needs
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed (reads the JSON answers)"; exit 0; }
serve_tmp test_embed
H=(-H 'Content-Type: application/json')
start() { serve_start "$TMP/$1.log" "${@:2}"; }
stop() { kill -TERM "$SPID" 2>/dev/null; wait "$WPID" 2>/dev/null; }
code() { curl -s -m 60 -o "$TMP/body" -w '%{http_code}' "${H[@]}" "$@"; }
# py 'EXPR' FILES...: python3 with json, base64, struct, sys; EXPR must be true
py() { local e=$1; shift; python3 -c "import json,base64,struct,sys
a=[json.load(open(f)) for f in sys.argv[1:]]
close=lambda x,y: len(x)==len(y) and max(abs(p-q) for p,q in zip(x,y))<1e-5
sys.exit(0 if ($e) else 1)" "$@"; }

# ---- --embeddings --pooling mean
start mean "${MODEL[@]}" --parallel 2 --embeddings --pooling mean
check "the banner names the pooling" 'grep -q "embeddings pooled mean" "$TMP/mean.log"'
"$CLI" embed "${MODEL[@]}" --pooling mean -p $'Once upon a time\nThe dog ran' --embd-output-format json >"$TMP/cli.json" 2>/dev/null
check "/v1/embeddings: 2 texts = staticlm embed's vectors" \
  '[ "$(code -d "{\"input\":[\"Once upon a time\",\"The dog ran\"],\"model\":\"m\"}" "$U/v1/embeddings")" = 200 ] && cp "$TMP/body" "$TMP/two.json" &&
   py "a[0][\"object\"]==\"list\" and [d[\"index\"] for d in a[0][\"data\"]]==[0,1] and all(close(a[0][\"data\"][i][\"embedding\"],a[1][\"data\"][i][\"embedding\"]) for i in (0,1)) and len(a[0][\"data\"][0][\"embedding\"])==64" "$TMP/two.json" "$TMP/cli.json"'
check "usage counts both texts' tokens (5 + 6)" 'py "a[0][\"usage\"][\"prompt_tokens\"]==a[0][\"usage\"][\"total_tokens\"]==11" "$TMP/two.json"'
check "unit length (embd_normalize 2)" 'py "abs(sum(x*x for x in a[0][\"data\"][0][\"embedding\"])-1)<1e-5" "$TMP/two.json"'
check "encoding_format base64: the same little-endian floats" \
  '[ "$(code -d "{\"input\":\"Once upon a time\",\"encoding_format\":\"base64\"}" "$U/v1/embeddings")" = 200 ] &&
   py "close(list(struct.unpack(\"<64f\",base64.b64decode(a[0][\"data\"][0][\"embedding\"]))),a[1][\"data\"][0][\"embedding\"])" "$TMP/body" "$TMP/two.json"'
IDS=$(curl -s "${H[@]}" -d '{"content":"Once upon a time","add_special":true}' "$U/tokenize" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens"])')
check "token ids ($IDS) give the text's vector" \
  '[ "$(code -d "{\"input\":$IDS}" "$U/v1/embeddings")" = 200 ] && py "close(a[0][\"data\"][0][\"embedding\"],a[1][\"data\"][0][\"embedding\"])" "$TMP/body" "$TMP/two.json"'
check "/embedding (llama-server's): [{index, embedding: [vector]}], embd_normalize -1 is the raw mean" \
  '[ "$(code -d "{\"content\":\"Once upon a time\",\"embd_normalize\":-1}" "$U/embedding")" = 200 ] &&
   py "len(a[0])==1 and len(a[0][0][\"embedding\"])==1 and abs(sum(x*x for x in a[0][0][\"embedding\"][0])-1)>1e-3 and close([x/sum(y*y for y in a[0][0][\"embedding\"][0])**0.5 for x in a[0][0][\"embedding\"][0]],a[1][\"data\"][0][\"embedding\"])" "$TMP/body" "$TMP/two.json"'
# an embedding while the other slot generates
curl -s -m 60 "${H[@]}" -d '{"prompt":"Once upon a time","max_tokens":200,"temperature":0}' "$U/v1/completions" >"$TMP/gen" &
GP=$!
sleep 0.05
check "an embedding while a completion runs" '[ "$(code -d "{\"input\":\"The dog ran\"}" "$U/v1/embeddings")" = 200 ] && py "close(a[0][\"data\"][0][\"embedding\"],a[1][\"data\"][1][\"embedding\"])" "$TMP/body" "$TMP/two.json"'
wait "$GP"
"$CLI" run "${MODEL[@]}" -p "Once upon a time" -n 200 --temp 0 2>/dev/null >"$TMP/run"
check "the completion beside it equals run" 'py "a[0][\"choices\"][0][\"text\"]==open(sys.argv[2]).read()[len(\"Once upon a time\"):]" "$TMP/gen" "$TMP/run" 2>/dev/null || python3 -c "import json,sys; t=json.load(open(sys.argv[1]))[\"choices\"][0][\"text\"]; r=open(sys.argv[2]).read(); sys.exit(0 if r.startswith(\"Once upon a time\"+t) else 1)" "$TMP/gen" "$TMP/run"'
# refusals
check "input missing: 400 naming input" '[ "$(code -d "{}" "$U/v1/embeddings")" = 400 ] && grep -q "\"param\":\"input\"" "$TMP/body"'
check "input of another type: 400" '[ "$(code -d "{\"input\":{\"a\":1}}" "$U/v1/embeddings")" = 400 ]'
check "an id outside the vocabulary: 400" '[ "$(code -d "{\"input\":[1,512]}" "$U/v1/embeddings")" = 400 ]'
check "dimensions other than the width: 400" '[ "$(code -d "{\"input\":\"a\",\"dimensions\":32}" "$U/v1/embeddings")" = 400 ] && grep -q dimensions "$TMP/body"'
check "dimensions = the width: 200" '[ "$(code -d "{\"input\":\"a\",\"dimensions\":64}" "$U/v1/embeddings")" = 200 ]'
check "encoding_format other: 400" '[ "$(code -d "{\"input\":\"a\",\"encoding_format\":\"int8\"}" "$U/v1/embeddings")" = 400 ]'
LONG=$(python3 -c 'print("word " * 700)')
check "an input over the slot's capacity: 400 naming it" '[ "$(code -d "{\"input\":\"$LONG\"}" "$U/v1/embeddings")" = 400 ] && grep -q "a slot holds" "$TMP/body"'
check "GET /v1/embeddings: 405" '[ "$(curl -s -o /dev/null -w "%{http_code}" "$U/v1/embeddings")" = 405 ]'
check "healthy after all that" '[ "$(curl -s -o /dev/null -w "%{http_code}" "$U/health")" = 200 ]'
check "server stops cleanly" 'serve_stop "$TMP/mean.log" "$SPID" "$WPID"'

# ---- --pooling none: /embedding gives every token's vector; /v1/embeddings refuses
start none "${MODEL[@]}" --embeddings --pooling none
check "/embedding with pooling none: a vector per token (5)" \
  '[ "$(code -d "{\"content\":\"Once upon a time\"}" "$U/embedding")" = 200 ] && py "len(a[0][0][\"embedding\"])==5 and all(len(v)==64 for v in a[0][0][\"embedding\"])" "$TMP/body"'
check "/v1/embeddings refuses pooling none" '[ "$(code -d "{\"input\":\"a\"}" "$U/v1/embeddings")" = 400 ] && grep -q "pooling none" "$TMP/body"'
stop

# ---- no --embeddings: 501; --pooling alone refused
start plain "${MODEL[@]}"
check "without --embeddings: 501" '[ "$(code -d "{\"input\":\"a\"}" "$U/v1/embeddings")" = 501 ] && grep -q -- "--embeddings" "$TMP/body"'
stop
# ---- an encoder: a list of texts packed into its batch programs (embed.BxS), each text's vector as
# when it comes alone, in the list's order; one text over the largest region (64 rows) runs alone
"$CLI" synth --shape custom --arch bert --dim 64 --layers 2 --heads 4 --ffn 128 --ctx 128 --type f32 --pooling mean \
  -o "$TMP/bert.gguf" >/dev/null 2>&1
LONG=$(printf 'word%d ' $(seq 1 40))
TEXTS=("the dog ran" "once upon a time there was a cat that liked to sit on the mat" "a" "big red ball" "$LONG" "hi there")
start enc -m "$TMP/bert.gguf" --kv-type f32 --embeddings --parallel 2
python3 -c 'import json,sys; print(json.dumps({"input":sys.argv[1:]}))' "${TEXTS[@]}" >"$TMP/enc_req.json"
curl -s -m 60 "${H[@]}" -d @"$TMP/enc_req.json" "$U/v1/embeddings" >"$TMP/enc_all2.json" & # the other slot's, at once
EP=$!
check "encoder: /v1/embeddings of 6 texts (one over the largest region)" \
  '[ "$(code -d @"$TMP/enc_req.json" "$U/v1/embeddings")" = 200 ] && cp "$TMP/body" "$TMP/enc_all.json"'
wait "$EP"
check "encoder: the same list on two slots at once: the same vectors" \
  'py "all(close(a[0][\"data\"][i][\"embedding\"],a[1][\"data\"][i][\"embedding\"]) for i in range(6))" "$TMP/enc_all.json" "$TMP/enc_all2.json"'
ALONE=()
for i in "${!TEXTS[@]}"; do
  python3 -c 'import json,sys; print(json.dumps({"input":sys.argv[1]}))' "${TEXTS[$i]}" >"$TMP/enc_one.json"
  code -d @"$TMP/enc_one.json" "$U/v1/embeddings" >/dev/null && cp "$TMP/body" "$TMP/enc_$i.json"
  ALONE+=("$TMP/enc_$i.json")
done
check "encoder: each text's vector in the list = the text alone" \
  'py "len(a[0][\"data\"])==6 and all(a[0][\"data\"][i][\"index\"]==i and close(a[0][\"data\"][i][\"embedding\"],a[i+1][\"data\"][0][\"embedding\"]) for i in range(6)) and a[0][\"usage\"][\"prompt_tokens\"]==sum(x[\"usage\"][\"prompt_tokens\"] for x in a[1:])" "$TMP/enc_all.json" "${ALONE[@]}"'
printf '%s\n' "${TEXTS[@]}" >"$TMP/enc_texts.txt"
"$CLI" embed -m "$TMP/bert.gguf" --kv-type f32 -f "$TMP/enc_texts.txt" --embd-output-format json >"$TMP/enc_cli.json" 2>/dev/null
check "encoder: the list = staticlm embed -f's vectors" \
  'py "all(close(a[0][\"data\"][i][\"embedding\"],a[1][\"data\"][i][\"embedding\"]) for i in range(6))" "$TMP/enc_all.json" "$TMP/enc_cli.json"'
stop
# several clients at once: requests admitted together run in one batch call (their texts share the
# batch programs); each answer is its text's vector alone. A long list first keeps the worker busy
# while the four arrive (tried up to 5 times: the joining depends on their timing, the answers not)
start enc4 -m "$TMP/bert.gguf" --kv-type f32 --embeddings --parallel 4
python3 -c 'import json,sys; print(json.dumps({"input":[sys.argv[1]]*1000}))' "$LONG" >"$TMP/busy.json"
for i in 0 1 2 3; do
  python3 -c 'import json,sys; print(json.dumps({"input":sys.argv[1]}))' "${TEXTS[$i]}" >"$TMP/c$i.json"
done
JOINED=0 SAME=1
for try in 1 2 3 4 5; do
  curl -s -m 60 "${H[@]}" -d @"$TMP/busy.json" "$U/v1/embeddings" >/dev/null &
  BP=$!
  sleep 0.05
  PIDS=()
  for i in 0 1 2 3; do
    curl -s -m 60 "${H[@]}" -d @"$TMP/c$i.json" "$U/v1/embeddings" >"$TMP/c${i}_out.json" &
    PIDS+=($!)
  done
  wait "$BP" "${PIDS[@]}"
  for i in 0 1 2 3; do
    py "close(a[0][\"data\"][0][\"embedding\"],a[1][\"data\"][0][\"embedding\"])" "$TMP/c${i}_out.json" "${ALONE[$i]}" || SAME=0
  done
  JOINED=$(curl -s "$U/metrics" | awk '/^staticlm_embeddings_joined_total/ {print $2}')
  [ "${JOINED:-0}" -ge 2 ] && break
done
check "4 clients at once: each answer = its text alone" '[ "$SAME" = 1 ]'
check "4 clients at once: requests joined in one batch call ($JOINED joined)" '[ "${JOINED:-0}" -ge 2 ]'
stop
# ---- --reranking
"$CLI" synth --shape custom --arch qwen3 --type f16 --vocab-file "$SHARED/vocab/ggml-vocab-gpt-2.gguf" --pooling rank \
  -o "$TMP/rr.gguf" >/dev/null 2>&1
RR=(-m "$TMP/rr.gguf" --kv-type f32)
"$CLI" embed "${RR[@]}" --pooling rank -p $'what is a cat?\tA cat is a small animal.\nwhat is a cat?\tParis is in France.\nwhat is a cat?\tcats purr' \
  --embd-output-format json >"$TMP/rr_cli.json" 2>/dev/null
start rr "${RR[@]}" --reranking
check "/v1/rerank: the scores of staticlm embed --pooling rank, best first, top_n 2" \
  '[ "$(code -d "{\"query\":\"what is a cat?\",\"documents\":[\"A cat is a small animal.\",\"Paris is in France.\",\"cats purr\"],\"top_n\":2}" "$U/v1/rerank")" = 200 ] &&
   py "(lambda r,s: len(r)==2 and [x[\"index\"] for x in r]==sorted(range(3),key=lambda i:-s[i])[:2] and all(abs(x[\"relevance_score\"]-s[x[\"index\"]])<1e-5 for x in r))(a[0][\"results\"],[d[\"embedding\"][0] for d in a[1][\"data\"]]) and a[0][\"usage\"][\"prompt_tokens\"]>0" "$TMP/body" "$TMP/rr_cli.json"'
check "TEI's form (texts, return_text): an array with score and text" \
  '[ "$(code -d "{\"query\":\"what is a cat?\",\"texts\":[\"A cat is a small animal.\"],\"return_text\":true}" "$U/rerank")" = 200 ] &&
   py "a[0][0][\"index\"]==0 and a[0][0][\"text\"]==\"A cat is a small animal.\" and abs(a[0][0][\"score\"]-a[1][\"data\"][0][\"embedding\"][0])<1e-5" "$TMP/body" "$TMP/rr_cli.json"'
check "rerank without a query: 400" '[ "$(code -d "{\"documents\":[\"a\"]}" "$U/v1/rerank")" = 400 ] && grep -q "\"param\":\"query\"" "$TMP/body"'
check "rerank with no documents: 400" '[ "$(code -d "{\"query\":\"q\",\"documents\":[]}" "$U/v1/rerank")" = 400 ]'
check "rerank top_n 0: 400" '[ "$(code -d "{\"query\":\"q\",\"documents\":[\"a\"],\"top_n\":0}" "$U/v1/rerank")" = 400 ]'
check "a reranking server refuses /v1/embeddings" '[ "$(code -d "{\"input\":\"a\"}" "$U/v1/embeddings")" = 400 ] && grep -q "/v1/rerank" "$TMP/body"'
check "reranking server stops cleanly" 'serve_stop "$TMP/rr.log" "$SPID" "$WPID"'
# a cross-encoder (bert with a classifier head, no rerank template): the same answers as the CLI
"$CLI" synth --shape custom --arch bert --type q8_0 --pooling rank -o "$TMP/rrb.gguf" >/dev/null 2>&1
"$CLI" embed -m "$TMP/rrb.gguf" --pooling rank -p $'what is a cat?\tA cat is a small animal.\nwhat is a cat?\tParis is in France.' \
  --embd-output-format json >"$TMP/rrb_cli.json" 2>/dev/null
start rrb -m "$TMP/rrb.gguf" --reranking
check "a cross-encoder (bert): /v1/rerank scores = staticlm embed --pooling rank's" \
  '[ "$(code -d "{\"query\":\"what is a cat?\",\"documents\":[\"A cat is a small animal.\",\"Paris is in France.\"]}" "$U/v1/rerank")" = 200 ] &&
   py "(lambda r,s: len(r)==2 and s[0]!=s[1] and all(abs(x[\"relevance_score\"]-s[x[\"index\"]])<1e-5 for x in r))(a[0][\"results\"],[d[\"embedding\"][0] for d in a[1][\"data\"]])" "$TMP/body" "$TMP/rrb_cli.json"'
check "cross-encoder server stops cleanly" 'serve_stop "$TMP/rrb.log" "$SPID" "$WPID"'
start mean2 "${MODEL[@]}" --embeddings
check "an embedding server refuses /v1/rerank: 501" '[ "$(code -d "{\"query\":\"q\",\"documents\":[\"a\"]}" "$U/v1/rerank")" = 501 ] && grep -q -- "--reranking" "$TMP/body"'
stop
check "--pooling without --embeddings: exit 2" '"$CLI" serve "${MODEL[@]}" --pooling mean --port 0 >/dev/null 2>"$TMP/e"; [ $? = 2 ] && grep -q -- "--embeddings" "$TMP/e"'
serve_done
