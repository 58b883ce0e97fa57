#!/usr/bin/env bash
# staticlm serve's n (choices) and llama-server's stopping_word, on a free
# loopback port:
#  - n = 3 gives 3 choices, indices 0, 1, 2; choice i is the reply of the
#    same request with n = 1 and seed + i (so: reproducible, and with
#    temperature > 0 not all alike); usage counts the prompt once and the
#    completion tokens of all choices; greedy gives n equal choices;
#  - streamed, each chunk names one choice, and each choice's pieces make
#    its whole text; the usage chunk sums; chat sends a role chunk per choice;
#  - logprobs, stop strings and a json_schema hold per choice; on --parallel 2 (choices side
#    by side) the texts are those of one slot (one after another);
#  - n 0, -1, 9, 1.5, "2" get 400 naming n;
#  - llama-server's /completion: n_cmpl (or n) answers an array, index 0..n-1;
#    stopping_word names the stop string that ended it ("" otherwise), whole
#    and in the stream's last event.
# usage: test_serve_choices.sh CLI SHARED_DIR
set -u
CLI=$1 SHARED=$2
MODEL=(-m "$SHARED/models/stories260K.bin" -z "$SHARED/models/tok512.bin")
. "$(dirname "$0")/serve/lib.sh"
serve_needs
command -v python3 >/dev/null || { echo "SKIP: python3 is needed to read the answers"; exit 0; }
serve_tmp test_choices
H=(-H 'Content-Type: application/json')
serve_start "$TMP/server.log" "${MODEL[@]}"
CMPL=$U/v1/completions CHAT=$U/v1/chat/completions

# post BODY URL OUT: the answer in OUT; prints the status
post() { curl -s -m 60 -o "$3" -w '%{http_code}' "${H[@]}" -d "$1" "$2"; }
# py FILE... -- a python expression over b (the JSON of the first file), c (of the second), ...
py() { local e=$1; shift; python3 -c "import json,sys
fs=[json.load(open(f)) for f in sys.argv[1:]]
b=fs[0]; c=fs[1] if len(fs)>1 else None; d=fs[2] if len(fs)>2 else None
sys.exit(0 if ($e) else 1)" "$@"; }
# sse FILE: the events' JSON (not [DONE]) as a JSON list in FILE.json
sse() { python3 -c "import json,sys
ev=[json.loads(l[6:]) for l in open(sys.argv[1]) if l.startswith('data: {')]
json.dump(ev,open(sys.argv[1]+'.json','w'))" "$1"; }

P='"prompt":"Once upon a time","max_tokens":24,"temperature":1,"seed":7'
# ---- completions, n = 3, temperature 1, seed 7
post "{$P,\"n\":3}" "$CMPL" "$TMP/n3" >/dev/null
post "{$P,\"n\":3}" "$CMPL" "$TMP/n3b" >/dev/null
for i in 0 1 2; do
  post "{\"prompt\":\"Once upon a time\",\"max_tokens\":24,\"temperature\":1,\"seed\":$((7 + i))}" "$CMPL" "$TMP/one$i" >/dev/null
done
check "n=3: 3 choices, indices 0, 1, 2, each with a finish_reason" \
  'py "[x[\"index\"] for x in b[\"choices\"]]==[0,1,2] and all(x[\"finish_reason\"] in (\"stop\",\"length\") and x[\"text\"] for x in b[\"choices\"])" "$TMP/n3"'
check "n=3, temperature 1, seed 7: the choices are not all the same" \
  'py "len(set(x[\"text\"] for x in b[\"choices\"]))>1" "$TMP/n3"'
check "n=3, seed 7, asked again: the same 3 texts" \
  'py "[x[\"text\"] for x in b[\"choices\"]]==[x[\"text\"] for x in c[\"choices\"]]" "$TMP/n3" "$TMP/n3b"'
check "n=3, seed 7: choice i == the same request with n=1 and seed 7+i" \
  'py "all(b[\"choices\"][i][\"text\"]==json.load(open(\"$TMP/one%d\"%i))[\"choices\"][0][\"text\"] for i in range(3))" "$TMP/n3"'
# the independent reference: staticlm run with the same sampling and seed 7+i (serve's defaults are run's)
for i in 0 1 2; do
  "$CLI" run "${MODEL[@]}" -p "Once upon a time" -n 24 --temp 1 --seed $((7 + i)) 2>/dev/null | sed 's/^Once upon a time//' >"$TMP/run$i"
done
check "n=3, seed 7: choice i == staticlm run --temp 1 --seed 7+i" \
  'py "all(b[\"choices\"][i][\"text\"].rstrip(\"\\n\")==open(\"$TMP/run%d\"%i).read().rstrip(\"\\n\") for i in range(3))" "$TMP/n3"'
check "n=3: usage has the prompt once and the completion tokens of the 3 choices" \
  'py "b[\"usage\"][\"prompt_tokens\"]==json.load(open(\"$TMP/one0\"))[\"usage\"][\"prompt_tokens\"]>0 and b[\"usage\"][\"completion_tokens\"]==sum(json.load(open(\"$TMP/one%d\"%i))[\"usage\"][\"completion_tokens\"] for i in range(3)) and b[\"usage\"][\"total_tokens\"]==b[\"usage\"][\"prompt_tokens\"]+b[\"usage\"][\"completion_tokens\"]" "$TMP/n3"'

# ---- greedy: n equal choices, the n=1 text
post '{"prompt":"Once upon a time","max_tokens":24,"temperature":0,"n":3}' "$CMPL" "$TMP/g3" >/dev/null
post '{"prompt":"Once upon a time","max_tokens":24,"temperature":0}' "$CMPL" "$TMP/g1" >/dev/null
check "temperature 0, n=3: three equal choices, the greedy n=1 text" \
  'py "len(b[\"choices\"])==3 and all(x[\"text\"]==c[\"choices\"][0][\"text\"] for x in b[\"choices\"])" "$TMP/g3" "$TMP/g1"'

# ---- streamed == whole, per choice; the usage chunk sums
curl -s -N -m 60 "${H[@]}" -d "{$P,\"n\":3,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" "$CMPL" >"$TMP/s3"
sse "$TMP/s3"
check "streamed n=3: every chunk names one choice (or is the usage chunk), [DONE] at the end" \
  'py "all(len(e[\"choices\"])==1 and e[\"choices\"][0][\"index\"] in (0,1,2) or (not e[\"choices\"] and \"usage\" in e) for e in b)" "$TMP/s3.json" && [ "$(tail -2 "$TMP/s3" | head -1)" = "data: [DONE]" ]'
check "streamed n=3: each choice's pieces make its whole text, one finish_reason each (the whole one's)" \
  'py "all(\"\".join(e[\"choices\"][0][\"text\"] for e in b if e[\"choices\"] and e[\"choices\"][0][\"index\"]==i)==c[\"choices\"][i][\"text\"] and [e[\"choices\"][0][\"finish_reason\"] for e in b if e[\"choices\"] and e[\"choices\"][0][\"index\"]==i and e[\"choices\"][0][\"finish_reason\"]]==[c[\"choices\"][i][\"finish_reason\"]] for i in range(3))" "$TMP/s3.json" "$TMP/n3"'
check "streamed n=3: the usage chunk's token counts == the whole answer's" \
  'py "all([e for e in b if \"usage\" in e][-1][\"usage\"][k]==c[\"usage\"][k] for k in (\"prompt_tokens\",\"completion_tokens\",\"total_tokens\"))" "$TMP/s3.json" "$TMP/n3"'

# ---- chat, n = 2: whole and streamed
M='"messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":16,"temperature":1,"seed":3'
post "{$M,\"n\":2}" "$CHAT" "$TMP/c2" >/dev/null
curl -s -N -m 60 "${H[@]}" -d "{$M,\"n\":2,\"stream\":true}" "$CHAT" >"$TMP/cs2"
sse "$TMP/cs2"
post "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story\"}],\"max_tokens\":16,\"temperature\":1,\"seed\":4}" "$CHAT" "$TMP/c1" >/dev/null
check "chat n=2: 2 assistant messages, indices 0, 1; choice 1 == n=1 with seed 4" \
  'py "[x[\"index\"] for x in b[\"choices\"]]==[0,1] and all(x[\"message\"][\"role\"]==\"assistant\" for x in b[\"choices\"]) and b[\"choices\"][1][\"message\"][\"content\"]==c[\"choices\"][0][\"message\"][\"content\"]" "$TMP/c2" "$TMP/c1"'
check "chat n=2 streamed: a role chunk per choice, then each choice's content == the whole one's" \
  'py "sorted(e[\"choices\"][0][\"index\"] for e in b if e[\"choices\"][0][\"delta\"].get(\"role\")==\"assistant\")==[0,1] and all(\"\".join(e[\"choices\"][0][\"delta\"].get(\"content\",\"\") for e in b if e[\"choices\"][0][\"index\"]==i)==c[\"choices\"][i][\"message\"][\"content\"] for i in (0,1))" "$TMP/cs2.json" "$TMP/c2"'

# ---- logprobs and stop strings per choice
post "{$P,\"n\":2,\"logprobs\":2,\"stop\":[\"Lily\",\".\"]}" "$CMPL" "$TMP/lp2" >/dev/null
post "{\"prompt\":\"Once upon a time\",\"max_tokens\":24,\"temperature\":1,\"seed\":8,\"logprobs\":2,\"stop\":[\"Lily\",\".\"]}" "$CMPL" "$TMP/lp1" >/dev/null
check "n=2 with logprobs 2 and stop strings: each choice's tokens begin with its text (the last may hold the cut stop string), neither has a stop string" \
  'py "len(b[\"choices\"])==2 and all(\"\".join(x[\"logprobs\"][\"tokens\"]).startswith(x[\"text\"]) and len(\"\".join(x[\"logprobs\"][\"tokens\"][:-1]))<len(x[\"text\"]) and \"Lily\" not in x[\"text\"] and \".\" not in x[\"text\"] for x in b[\"choices\"])" "$TMP/lp2"'
check "n=2 with logprobs and stop strings: choice 1 == n=1 with seed 8 (text and logprobs)" \
  'py "b[\"choices\"][1][\"text\"]==c[\"choices\"][0][\"text\"] and b[\"choices\"][1][\"logprobs\"]==c[\"choices\"][0][\"logprobs\"]" "$TMP/lp2" "$TMP/lp1"'

# ---- a grammar per choice: each of n=3 is an object of the schema
SCHEMA='{"type":"object","properties":{"age":{"type":"integer"},"color":{"enum":["red","green","blue"]}},"required":["age","color"],"additionalProperties":false}'
post "{\"messages\":[{\"role\":\"user\",\"content\":\"A cat.\"}],\"max_tokens\":200,\"temperature\":1,\"seed\":2,\"n\":3,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":$SCHEMA}}}" "$CHAT" "$TMP/gr3" >/dev/null
check "n=3 with a json_schema: each choice is an object of the schema" \
  'py "len(b[\"choices\"])==3 and all(x[\"finish_reason\"]==\"stop\" and (lambda o: sorted(o)==[\"age\",\"color\"] and type(o[\"age\"])==int and o[\"color\"] in (\"red\",\"green\",\"blue\"))(json.loads(x[\"message\"][\"content\"])) for x in b[\"choices\"])" "$TMP/gr3"'

# ---- n out of range, or not an integer: 400 naming n
for n in 0 -1 9 1.5 '"2"'; do
  st=$(post "{\"prompt\":\"a\",\"max_tokens\":2,\"n\":$n}" "$CMPL" "$TMP/bad")
  check "n $n: 400, param n" '[ "$st" = 400 ] && py "b[\"error\"][\"param\"]==\"n\"" "$TMP/bad"'
done
st=$(post '{"messages":[{"role":"user","content":"a"}],"n":9}' "$CHAT" "$TMP/bad")
check "chat n 9: 400, param n" '[ "$st" = 400 ] && py "b[\"error\"][\"param\"]==\"n\"" "$TMP/bad"'

# ---- llama-server's /completion: n_cmpl, stopping_word
post '{"prompt":"Once upon a time","n_predict":8,"temperature":1,"seed":7,"n_cmpl":2}' "$U/completion" "$TMP/nat2" >/dev/null
post '{"prompt":"Once upon a time","n_predict":8,"temperature":1,"seed":8}' "$U/completion" "$TMP/nat1" >/dev/null
check "/completion n_cmpl 2: an array of 2 answers, index 0 and 1, the second == n_cmpl 1 with seed 8" \
  'py "isinstance(b,list) and [x[\"index\"] for x in b]==[0,1] and all(x[\"stop\"] is True for x in b) and b[1][\"content\"]==c[\"content\"]" "$TMP/nat2" "$TMP/nat1"'
curl -s -N -m 60 "${H[@]}" -d '{"prompt":"Once upon a time","n_predict":8,"temperature":1,"seed":7,"n":2,"stream":true}' "$U/completion" >"$TMP/nats"
sse "$TMP/nats"
check "/completion n 2 streamed: each index's pieces make its content, one last event (stop true) per index" \
  'py "all(\"\".join(e[\"content\"] for e in b if e[\"index\"]==i)==c[i][\"content\"] and sum(1 for e in b if e[\"index\"]==i and e[\"stop\"])==1 for i in (0,1))" "$TMP/nats.json" "$TMP/nat2"'
# the greedy reply, and stop strings taken from it: one inside a later token's text, one across tokens
post '{"prompt":"Once upon a time","n_predict":24,"temperature":0}' "$U/completion" "$TMP/greedy" >/dev/null
G=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['content'])" "$TMP/greedy")
W1=${G:9:3} W2=${G:4:8}
check "the greedy reply is long enough to take stop strings from ([$G])" '[ ${#G} -ge 16 ]'
post "{\"prompt\":\"Once upon a time\",\"n_predict\":24,\"temperature\":0,\"stop\":[\"zzzz\",\"$W1\"]}" "$U/completion" "$TMP/w1" >/dev/null
check "/completion stop [zzzz, '$W1']: stop_type word, stopping_word '$W1', the content up to it" \
  'py "b[\"stop_type\"]==\"word\" and b[\"stopping_word\"]==\"$W1\" and b[\"content\"]+\"$W1\"==\"${G:0:12}\"" "$TMP/w1"'
# both are complete after the same token; the second listed, across tokens, starts earlier: it ends the reply
post "{\"prompt\":\"Once upon a time\",\"n_predict\":24,\"temperature\":0,\"stop\":[\"$W1\",\"$W2\"]}" "$U/completion" "$TMP/w2" >/dev/null
check "/completion stop ['$W1', '$W2']: the earlier one ends it, stopping_word '$W2'" \
  'py "b[\"stop_type\"]==\"word\" and b[\"stopping_word\"]==\"$W2\" and b[\"content\"]==\"${G:0:4}\"" "$TMP/w2"'
curl -s -N -m 60 "${H[@]}" -d "{\"prompt\":\"Once upon a time\",\"n_predict\":24,\"temperature\":0,\"stream\":true,\"stop\":[\"$W1\",\"$W2\"]}" "$U/completion" >"$TMP/ws"
sse "$TMP/ws"
check "/completion streamed: the last event has stopping_word '$W2'" \
  'py "b[-1][\"stop\"] is True and b[-1][\"stopping_word\"]==\"$W2\" and all(\"stopping_word\" not in e for e in b[:-1])" "$TMP/ws.json"'
check "/completion with no stop string hit: stopping_word is \"\"" \
  'py "b[\"stop_type\"] in (\"limit\",\"eos\") and b[\"stopping_word\"]==\"\"" "$TMP/greedy"'
check "the server exits 0 on SIGTERM" 'serve_stop "$TMP/server.log" "$SPID" "$WPID"'

# ---- --parallel 2: the choices side by side give the texts they give one after another
serve_start "$TMP/server2.log" "${MODEL[@]}" --parallel 2
post "{$P,\"n\":3}" "$U/v1/completions" "$TMP/p3" >/dev/null
check "--parallel 2, n=3, seed 7: the texts of --parallel 1" \
  'py "[x[\"text\"] for x in b[\"choices\"]]==[x[\"text\"] for x in c[\"choices\"]] and b[\"usage\"][\"completion_tokens\"]==c[\"usage\"][\"completion_tokens\"]" "$TMP/p3" "$TMP/n3"'
curl -s -N -m 60 "${H[@]}" -d "{$P,\"n\":3,\"stream\":true}" "$U/v1/completions" >"$TMP/ps3"
sse "$TMP/ps3"
check "--parallel 2, streamed n=3: each choice's pieces make its text" \
  'py "all(\"\".join(e[\"choices\"][0][\"text\"] for e in b if e[\"choices\"][0][\"index\"]==i)==c[\"choices\"][i][\"text\"] for i in range(3))" "$TMP/ps3.json" "$TMP/n3"'
check "the --parallel 2 server exits 0 on SIGTERM" 'serve_stop "$TMP/server2.log" "$SPID" "$WPID"'
serve_done
