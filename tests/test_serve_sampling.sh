#!/usr/bin/env bash
# staticlm serve's sampling, on a free loopback port:
#  - serve's sampling options are what a request leaves out: with --temp 0
#    two requests without a temperature give the greedy text (`run --temp 0`);
#  - repeat_penalty/presence_penalty/frequency_penalty and logit_bias give
#    what `staticlm run` gives with the same options on the same prompt;
#  - log-probabilities (completions' logprobs N, chat's logprobs and
#    top_logprobs): one per generated token, their texts the reply's, the
#    greedy token the likeliest, the same streamed as whole, cut with a stop
#    string (their values against golden logits: test_session);
#  - llama-server's n_predict and ignore_eos are taken, its samplers
#    staticlm lacks (mirostat, typical_p, ...) refused unless off;
#  - llama-server's POST /completion answers in its own form (whole and
#    streamed), running to a stop without n_predict; GET /props;
#  - /tokenize gives run.c's ids (golden), its pieces make the text, and
#    /detokenize gives it back; bad ids and fields get 400;
#  - fields of features staticlm lacks (the legacy functions, response
#    formats other than text / json_object / json_schema, echo, best_of, suffix) and out-of-range values get 400, not
#    silence; the empty forms (tools [], response_format text) are taken
#    (tools themselves: test_serve_tools.sh).
# usage: test_serve_sampling.sh CLI SHARED_DIR
set -u
CLI=$1 SHARED=$2
MODEL=(-m "$SHARED/models/stories260K.bin" -z "$SHARED/models/tok512.bin")
. "$(dirname "$0")/serve/lib.sh"
serve_needs
serve_tmp test_sampling
H=(-H 'Content-Type: application/json')
serve_start "$TMP/server.log" "${MODEL[@]}" --temp 0
CMPL=$U/v1/completions CHAT=$U/v1/chat/completions

code() { curl -s -m 60 -o "$TMP/body" -w '%{http_code}' "${H[@]}" "$@"; }
# the "text" of a completion body (no quotes in stories260K's greedy text)
text_of() { sed -n 's/.*"text":"\(\([^"\\]\|\\.\)*\)".*/\1/p' "$TMP/body" | head -1; }
P='"prompt":"Once upon a time","max_tokens":40'
run_text() { "$CLI" run "${MODEL[@]}" -p "Once upon a time" -n 40 --temp 0 "$@" 2>/dev/null | sed 's/^Once upon a time//'; }

# ---- serve --temp 0: requests without a temperature are greedy
code -d "{$P}" "$CMPL" >/dev/null; A=$(text_of)
code -d "{$P,\"seed\":9}" "$CMPL" >/dev/null; B=$(text_of)
GREEDY=$(run_text)
check "serve --temp 0: a request without temperature is greedy (== run --temp 0)" '[ -n "$A" ] && [ "$A" = "$B" ] && [ "$A" = "$GREEDY" ]'

# ---- penalties and biases == run with the same options
code -d "{$P,\"repeat_penalty\":1.5,\"repeat_last_n\":32,\"presence_penalty\":0.5,\"frequency_penalty\":0.3}" "$CMPL" >/dev/null
PEN=$(text_of)
RUN_PEN=$(run_text --repeat-penalty 1.5 --repeat-last-n 32 --presence-penalty 0.5 --frequency-penalty 0.3)
check "penalties: server == run, and not the plain greedy text" '[ -n "$PEN" ] && [ "$PEN" = "$RUN_PEN" ] && [ "$PEN" != "$GREEDY" ]'
[ "$PEN" = "$RUN_PEN" ] || { echo "server: [$PEN]"; echo "run:    [$RUN_PEN]"; }
# ban the second token of the greedy reply (its first is often a space)
ID=$("$CLI" tokenize "${MODEL[@]}" -p "Once upon a time$GREEDY" | awk '{print $7}')
code -d "{$P,\"logit_bias\":{\"$ID\":-100}}" "$CMPL" >/dev/null
BIAS=$(text_of)
RUN_BIAS=$(run_text --logit-bias "$ID-100")
check "logit_bias $ID -100: server == run, not the greedy text" '[ -n "$ID" ] && [ -n "$BIAS" ] && [ "$BIAS" = "$RUN_BIAS" ] && [ "$BIAS" != "$GREEDY" ]'
# serve's --logit-bias is what a request without logit_bias takes (a request's own replaces it)
U1=$U SPID1=$SPID WPID1=$WPID
serve_start "$TMP/server2.log" "${MODEL[@]}" --temp 0 --logit-bias "$ID-100"
code -d "{$P}" "$U/v1/completions" >/dev/null; SBIAS=$(text_of)
code -d "{$P,\"logit_bias\":{}}" "$U/v1/completions" >/dev/null; SNONE=$(text_of)
check "serve --logit-bias $ID-100: a request without logit_bias == run --logit-bias; logit_bias {} replaces it" '[ -n "$SBIAS" ] && [ "$SBIAS" = "$RUN_BIAS" ] && [ "$SNONE" = "$GREEDY" ]'
check "the second server exits 0 on SIGTERM" 'serve_stop "$TMP/server2.log" "$SPID" "$WPID"'
U=$U1 SPID=$SPID1 WPID=$WPID1
code -d "{$P,\"min_p\":0.5,\"temperature\":1,\"seed\":4}" "$CMPL" >/dev/null
MP=$(text_of)
RUN_MP=$("$CLI" run "${MODEL[@]}" -p "Once upon a time" -n 40 --temp 1 --top-p 0.9 --min-p 0.5 --seed 4 2>/dev/null | sed 's/^Once upon a time//')
check "min_p 0.5 at temperature 1, seed 4: server == run" '[ -n "$MP" ] && [ "$MP" = "$RUN_MP" ]'

# ---- log-probabilities
M='"messages":[{"role":"user","content":"Hi"}],"max_tokens":4'
if command -v python3 >/dev/null; then
  # completions, logprobs 3, greedy: one entry per token, the texts the reply's, the chosen one the likeliest
  LPC='import json,sys
b=json.load(open(sys.argv[1])); c=b["choices"][0]; l=c["logprobs"]; n=b["usage"]["completion_tokens"]
off=[sum(len(t.encode()) for t in l["tokens"][:i]) for i in range(len(l["tokens"]))]
ok=(len(l["tokens"])==len(l["token_logprobs"])==len(l["top_logprobs"])==len(l["text_offset"])==n>0
 and "".join(l["tokens"])==c["text"] and l["text_offset"]==off
 and all(len(m)==int(sys.argv[2]) and max(m.values())==lp and max(m,key=m.get)==t and lp<=0
         for t,lp,m in zip(l["tokens"],l["token_logprobs"],l["top_logprobs"])))
sys.exit(0 if ok else 1)'
  code -d "{$P,\"logprobs\":3}" "$CMPL" >/dev/null; cp "$TMP/body" "$TMP/lp_whole"
  check "completions logprobs 3: a token each, texts = the reply, greedy = the top one" 'python3 -c "$LPC" "$TMP/lp_whole" 3 && [ "$(text_of)" = "$GREEDY" ]'
  # streamed: the chunks' logprobs joined are the whole reply's
  curl -s -m 60 -N "${H[@]}" -d "{$P,\"logprobs\":3,\"stream\":true}" "$CMPL" > "$TMP/lp_stream"
  LPS='import json,sys
w=json.load(open(sys.argv[1]))["choices"][0]["logprobs"]
s={"tokens":[],"token_logprobs":[],"top_logprobs":[],"text_offset":[]}
for line in open(sys.argv[2]):
    if line.startswith("data: {"):
        l=json.loads(line[6:])["choices"][0].get("logprobs")
        for k in s: s[k]+=l[k] if l else []
sys.exit(0 if s==w else 1)'
  check "completions logprobs streamed = whole" 'python3 -c "$LPS" "$TMP/lp_whole" "$TMP/lp_stream"'
  # a stop string: the tokens up to the one it starts in
  code -d "{$P,\"logprobs\":1,\"stop\":\"was\"}" "$CMPL" >/dev/null
  LPT='import json,sys
c=json.load(open(sys.argv[1]))["choices"][0]; l=c["logprobs"]; j="".join(l["tokens"])
sys.exit(0 if j.startswith(c["text"]) and "was" in j and "was" not in c["text"] and l["text_offset"][-1]<len(c["text"]) else 1)'
  check "completions logprobs with a stop string: up to its token" 'python3 -c "$LPT" "$TMP/body"'
  # chat: logprobs.content, one per token, top_logprobs 2, bytes the token's
  LPH='import json,sys
b=json.load(open(sys.argv[1])); c=b["choices"][0]; l=c["logprobs"]["content"]
ok=(len(l)==b["usage"]["completion_tokens"]>0 and "".join(e["token"] for e in l)==c["message"]["content"]
 and all(len(e["top_logprobs"])==2 and e["top_logprobs"][0]["token"]==e["token"] and e["top_logprobs"][0]["logprob"]==e["logprob"]
         and e["top_logprobs"][1]["logprob"]<=e["logprob"] and bytes(e["bytes"])==e["token"].encode() for e in l))
sys.exit(0 if ok else 1)'
  check "chat logprobs true, top_logprobs 2" '[ "$(code -d "{$M,\"logprobs\":true,\"top_logprobs\":2}" "$CHAT")" = 200 ] && python3 -c "$LPH" "$TMP/body"'
  check "chat without logprobs: none in the reply" '[ "$(code -d "{$M}" "$CHAT")" = 200 ] && ! grep -q logprobs "$TMP/body"'
else
  echo "SKIP: the log-probability checks need python3"
fi

is_unsup() { grep -q '"code":"unsupported_value"' "$TMP/body" && grep -q "\"param\":\"$1\"" "$TMP/body"; }
# ---- llama-server's fields: n_predict, ignore_eos taken; its samplers staticlm lacks refused unless off
usage_of() { sed -n 's/.*"completion_tokens":\([0-9]*\).*/\1/p' "$TMP/body"; }
fin_of() { sed -n 's/.*"finish_reason":"\([a-z_]*\)".*/\1/p' "$TMP/body" | head -1; }
check "n_predict 40 == max_tokens 40" '[ "$(code -d "{\"prompt\":\"Once upon a time\",\"n_predict\":40}" "$CMPL")" = 200 ] && [ "$(text_of)" = "$GREEDY" ]'
code -d '{"prompt":"Once upon a time","max_tokens":400}' "$CMPL" >/dev/null; NSTOP=$(usage_of) FSTOP=$(fin_of)
code -d '{"prompt":"Once upon a time","max_tokens":400,"ignore_eos":true}' "$CMPL" >/dev/null
check "ignore_eos: the reply that stopped at $NSTOP tokens runs to max_tokens 400" '[ "$FSTOP" = stop ] && [ "$NSTOP" -lt 400 ] && [ "$(usage_of)" = 400 ] && [ "$(fin_of)" = length ]'
check "n_predict beside max_tokens -> 400" '[ "$(code -d "{$P,\"n_predict\":5}" "$CMPL")" = 400 ] && grep -q "\"param\":\"n_predict\"" "$TMP/body"'
for f in mirostat:2 typical_p:0.9 tfs_z:0.5 dynatemp_range:0.5 xtc_probability:0.1 dry_multiplier:0.8 n_probs:3 top_n_sigma:1.5; do
  check "${f%%:*} ${f#*:} -> 400 unsupported" '[ "$(code -d "{$P,\"${f%%:*}\":${f#*:}}" "$CMPL")" = 400 ] && is_unsup "${f%%:*}"'
done
check "the same fields off -> 200" '[ "$(code -d "{$P,\"mirostat\":0,\"typical_p\":1,\"tfs_z\":1,\"n_probs\":0,\"top_n_sigma\":-1}" "$CMPL")" = 200 ]'

# ---- llama-server's own POST /completion: its answer's form; no n_predict: until a stop
if command -v python3 >/dev/null; then
  NAT='import json,sys
b=json.load(open(sys.argv[1])); want=sys.argv[2:]
got=[str(b["content"]), str(b["stop"]), str(b["tokens_predicted"]), str(b["stop_type"]), str(b["tokens_evaluated"])]
sys.exit(0 if got==want and b["timings"]["predicted_n"]==b["tokens_predicted"] else 1)'
  check "/completion n_predict 40: content == run's, stop_type limit" '[ "$(code -d "{\"prompt\":\"Once upon a time\",\"n_predict\":40}" "$U/completion")" = 200 ] && python3 -c "$NAT" "$TMP/body" "$GREEDY" True 40 limit 5'
  code -d '{"prompt":"Once upon a time"}' "$U/completion" >/dev/null
  check "/completion without n_predict runs to EOS as max_tokens 400 did ($NSTOP tokens)" 'python3 -c "import json,sys; b=json.load(open(sys.argv[1])); sys.exit(0 if b[\"tokens_predicted\"]==int(sys.argv[2]) and b[\"stop_type\"]==\"eos\" else 1)" "$TMP/body" "$NSTOP"'
  curl -s -m 60 -N "${H[@]}" -d '{"prompt":"Once upon a time","n_predict":40,"stream":true}' "$U/completion" >"$TMP/nat_stream"
  NATS='import json,sys
ev=[json.loads(l[6:]) for l in open(sys.argv[1]) if l.startswith("data: ")]
sys.exit(0 if ev and "".join(e["content"] for e in ev)==sys.argv[2] and ev[-1]["stop"] and ev[-1]["tokens_predicted"]==40 and not any(e["stop"] for e in ev[:-1]) else 1)'
  check "/completion streamed: the events join to the same content, the last one stop, no [DONE]" 'python3 -c "$NATS" "$TMP/nat_stream" "$GREEDY" && ! grep -q "DONE" "$TMP/nat_stream"'
  check "/completion with a stop word: stop_type word, stopping_word park, not in the content" '[ "$(code -d "{\"prompt\":\"Once upon a time\",\"stop\":[\"park\"]}" "$U/completion")" = 200 ] && grep -q "\"stop_type\":\"word\",\"stopping_word\":\"park\"" "$TMP/body" && ! grep -q "\"content\":\"[^\"]*park" "$TMP/body"'
fi
check "/completion with logprobs -> 400" '[ "$(code -d "{\"prompt\":\"x\",\"logprobs\":2}" "$U/completion")" = 400 ] && is_unsup logprobs'

check "GET /props: llama-server's n_ctx, slots, sampling defaults, template" '[ "$(code "$U/props")" = 200 ] && grep -q "\"n_ctx\":512," "$TMP/body" && grep -q "\"temperature\":0," "$TMP/body" && grep -q "\"top_p\":0.9," "$TMP/body" && grep -q "\"total_slots\":4," "$TMP/body" && grep -q "\"chat_template\":\"{%" "$TMP/body" && grep -q "\"vision\":false" "$TMP/body"'

# ---- /tokenize and /detokenize (llama-server's)
GOLD_IDS=$(tr -s ' \n' ',' < "$SHARED/models/golden/stories260K/0.prompt_ids.txt" | sed 's/,$//')
check "/tokenize with add_special = the golden prompt ids (run.c's encode)" '[ "$(code -d "{\"content\":\"$(cat "$SHARED/models/golden/stories260K/0.prompt.txt")\",\"add_special\":true}" "$U/tokenize")" = 200 ] && grep -q "^{\"tokens\":\[$GOLD_IDS\]}$" "$TMP/body"'
check "/tokenize without add_special: no BOS" '[ "$(code -d "{\"content\":\"Once upon a time\"}" "$U/tokenize")" = 200 ] && grep -q "^{\"tokens\":\[${GOLD_IDS#1,}\]}$" "$TMP/body"'
if command -v python3 >/dev/null; then
  TXT='Héllo, wörld: 3 × 4 = 12 🙂'
  code -d "$(python3 -c 'import json,sys; print(json.dumps({"content":sys.argv[1],"with_pieces":True}))' "$TXT")" "$U/tokenize" >/dev/null
  PIECES='import json,sys
t=json.load(open(sys.argv[1]))["tokens"]
b=b"".join(bytes(e["piece"]) if isinstance(e["piece"],list) else e["piece"].encode() for e in t)
sys.exit(0 if b.decode().lstrip(" ")==sys.argv[2] and any(isinstance(e["piece"],list) for e in t) else 1)'
  check "/tokenize with_pieces: the pieces (bytes where not whole UTF-8) make the text" 'python3 -c "$PIECES" "$TMP/body" "$TXT"'
  IDS=$(python3 -c 'import json,sys; print(json.dumps({"tokens":[e["id"] for e in json.load(open(sys.argv[1]))["tokens"]]}))' "$TMP/body")
  check "/detokenize of /tokenize = the text" '[ "$(code -d "$IDS" "$U/detokenize")" = 200 ] && [ "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[\"content\"].lstrip(\" \"))" "$TMP/body")" = "$TXT" ]'
fi
check "completions: a prompt of ids (BOS included) == the same prompt as text" '[ "$(code -d "{\"prompt\":[$GOLD_IDS],\"max_tokens\":40}" "$CMPL")" = 200 ] && [ "$(text_of)" = "$GREEDY" ] && grep -q "\"prompt_tokens\":5," "$TMP/body"'
check "completions: a prompt id past the vocabulary -> 400" '[ "$(code -d "{\"prompt\":[1,512]}" "$CMPL")" = 400 ] && grep -q "vocabulary has 512" "$TMP/body"'
check "completions: a prompt of ids and strings -> 400" '[ "$(code -d "{\"prompt\":[1,\"a\"]}" "$CMPL")" = 400 ] && grep -q "\"param\":\"prompt\"" "$TMP/body"'
check "/detokenize: an id past the vocabulary -> 400" '[ "$(code -d "{\"tokens\":[1,512]}" "$U/detokenize")" = 400 ] && grep -q "\"param\":\"tokens\"" "$TMP/body"'
check "/detokenize: a fraction -> 400" '[ "$(code -d "{\"tokens\":[1.5]}" "$U/detokenize")" = 400 ]'
check "/tokenize: content not a string -> 400" '[ "$(code -d "{\"content\":3}" "$U/tokenize")" = 400 ] && grep -q "\"param\":\"content\"" "$TMP/body"'
check "/tokenize: add_special not a boolean -> 400" '[ "$(code -d "{\"content\":\"x\",\"add_special\":1}" "$U/tokenize")" = 400 ]'
check "/tokenize: bytes after the JSON object -> 400, as the completions" '[ "$(code -d "{\"content\":\"x\"} x" "$U/tokenize")" = 400 ] && grep -q "bytes after its JSON value" "$TMP/body"'
check "GET /tokenize -> 405" '[ "$(curl -s -o /dev/null -w "%{http_code}" "$U/tokenize")" = 405 ]'

# ---- refused, not ignored
TOOLS='[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]'
check "functions -> 400 unsupported" '[ "$(code -d "{$M,\"functions\":$TOOLS}" "$CHAT")" = 400 ] && is_unsup functions && grep -q "not supported" "$TMP/body"'
check "tool_choice required without tools -> 400" '[ "$(code -d "{$M,\"tool_choice\":\"required\"}" "$CHAT")" = 400 ] && grep -q "\"param\":\"tool_choice\"" "$TMP/body" && grep -q "\"code\":\"invalid_value\"" "$TMP/body"'
check "tools [] and tool_choice none -> 200" '[ "$(code -d "{$M,\"tools\":[],\"tool_choice\":\"none\"}" "$CHAT")" = 200 ]'
check "response_format type foo -> 400" '[ "$(code -d "{$M,\"response_format\":{\"type\":\"foo\"}}" "$CHAT")" = 400 ] && is_unsup response_format'
check "response_format text -> 200" '[ "$(code -d "{$M,\"response_format\":{\"type\":\"text\"}}" "$CHAT")" = 200 ]'
is_bad() { grep -q '"code":"invalid_value"' "$TMP/body" && grep -q "\"param\":\"$1\"" "$TMP/body"; }
check "chat top_logprobs without logprobs -> 400" '[ "$(code -d "{$M,\"top_logprobs\":2}" "$CHAT")" = 400 ] && is_bad top_logprobs'
check "chat top_logprobs 21 -> 400" '[ "$(code -d "{$M,\"logprobs\":true,\"top_logprobs\":21}" "$CHAT")" = 400 ] && is_bad top_logprobs'
check "chat logprobs 1 (not a boolean) -> 400" '[ "$(code -d "{$M,\"logprobs\":1}" "$CHAT")" = 400 ] && grep -q "\"param\":\"logprobs\"" "$TMP/body"'
check "completions logprobs 21 -> 400" '[ "$(code -d "{$P,\"logprobs\":21}" "$CMPL")" = 400 ] && is_bad logprobs'
check "completions top_logprobs -> 400" '[ "$(code -d "{$P,\"top_logprobs\":2}" "$CMPL")" = 400 ] && is_unsup top_logprobs'
check "modalities [text, audio] -> 400" '[ "$(code -d "{$M,\"modalities\":[\"text\",\"audio\"]}" "$CHAT")" = 400 ] && is_unsup modalities'
check "modalities [text] -> 200" '[ "$(code -d "{$M,\"modalities\":[\"text\"]}" "$CHAT")" = 200 ]'
check "audio -> 400" '[ "$(code -d "{$M,\"audio\":{\"voice\":\"alloy\",\"format\":\"wav\"}}" "$CHAT")" = 400 ] && is_unsup audio'
check "echo -> 400" '[ "$(code -d "{$P,\"echo\":true}" "$CMPL")" = 400 ] && is_unsup echo'
check "best_of 2 -> 400" '[ "$(code -d "{$P,\"best_of\":2}" "$CMPL")" = 400 ] && is_unsup best_of'
check "suffix -> 400" '[ "$(code -d "{$P,\"suffix\":\"end\"}" "$CMPL")" = 400 ] && is_unsup suffix'
check "presence_penalty 3 -> 400" '[ "$(code -d "{$P,\"presence_penalty\":3}" "$CMPL")" = 400 ] && grep -q "\"param\":\"presence_penalty\"" "$TMP/body"'
check "logit_bias past the vocabulary -> 400" '[ "$(code -d "{$P,\"logit_bias\":{\"512\":1}}" "$CMPL")" = 400 ] && grep -q "vocabulary has 512" "$TMP/body"'
check "logit_bias bad key -> 400" '[ "$(code -d "{$P,\"logit_bias\":{\"abc\":1}}" "$CMPL")" = 400 ] && grep -q "\"param\":\"logit_bias\"" "$TMP/body"'
check "run --logit-bias past the vocabulary refused" '! "$CLI" run "${MODEL[@]}" -p x -n 2 --logit-bias 512+1 2>"$TMP/e" >/dev/null && grep -q "vocabulary has 512" "$TMP/e"'
check "healthy after the errors" '[ "$(curl -s -o /dev/null -w "%{http_code}" "$U/health")" = 200 ]'

check "server exits 0 on SIGTERM, no sanitizer report" 'serve_stop "$TMP/server.log" "$SPID" "$WPID"'
serve_done
