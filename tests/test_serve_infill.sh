#!/usr/bin/env bash
# staticlm serve's POST /infill (llama-server's fill in the middle), on free loopback ports:
#  - the prompt's layout: a greedy /infill answer equals the greedy /completion of the ids
#    tests/serve/infill_ref.py builds apart (from /tokenize of the pieces and the FIM ids,
#    in llama-server's order), and tokens_evaluated is their count; a layout with the parts
#    swapped answers otherwise (the comparison can fail);
#  - input_extra with files (FIM_SEP + filename), mixed prefix arrays (text and ids), long
#    prefix / suffix / extra cut by the budget (3/4 of the prefill rows for the prefix's end,
#    the rest less 2 and the prompt for the suffix's start, the extra context's end in what the
#    capacity leaves less 2 x n_predict), streaming, --spm-infill (suffix first);
#  - a vocabulary that adds BOS and has no FIM_SEP (deepseek-coder's, FIM ids given as GGUF
#    keys by tests/serve/gguf_addkv.py): BOS before FIM_PRE, chunks after "--- snippet ---";
#  - refusals: a model without FIM tokens (501, as llama-server), bad fields (400 naming them);
#  - llama-server's code-completion limits on any completion: n_indent cuts the reply before the
#    first line after a newline indented less; t_max_predict_ms stops it at a newline once past the
#    time; both "limit"; bad values refused.
# usage: test_serve_infill.sh CLI SHARED_DIR
set -u
CLI=$1 SHARED=$2
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/serve/lib.sh"
serve_needs
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed (reads the JSON answers)"; exit 0; }
serve_tmp test_infill
H=(-H 'Content-Type: application/json')
start() { serve_start "$TMP/$1.log" "${@:2}"; }
code() { curl -s -m 60 -o "$TMP/body" -w '%{http_code}' "${H[@]}" "$@"; }
# py 'EXPR' FILES...: a[i] is the JSON of FILES[i]; EXPR must be true
py() { local e=$1; shift; python3 -c "import json,sys
a=[json.load(open(f)) for f in sys.argv[1:]]
sys.exit(0 if ($e) else 1)" "$@"; }
# ids NAME 'BODY' PRE SUF MID REP SEP BOS BATCH CAP SPM: the reference ids of BODY into $TMP/NAME.ids
ids() { printf '%s' "$2" >"$TMP/$1.req"; python3 "$HERE/serve/infill_ref.py" "$U" "$TMP/$1.req" "${@:3}" >"$TMP/$1.ids"; }
# same NAME 'BODY' [EXTRA_FIELDS]: /infill of BODY and /completion of NAME's ids, both greedy, answer alike
same() {
  local x=${3:-}
  [ "$(code -d "${2%\}}, \"temperature\": 0$x}" "$U/infill")" = 200 ] && cp "$TMP/body" "$TMP/$1.inf" &&
    [ "$(code -d "{\"prompt\": $(cat "$TMP/$1.ids"), \"n_predict\": $(py_np "$2"), \"temperature\": 0$x}" "$U/completion")" = 200 ] &&
    cp "$TMP/body" "$TMP/$1.cmp" &&
    py 'a[0]["content"]==a[1]["content"] and a[0]["tokens_evaluated"]==a[1]["tokens_evaluated"]==len(a[2]) and a[0]["tokens_predicted"]>0' \
      "$TMP/$1.inf" "$TMP/$1.cmp" "$TMP/$1.ids"
}
py_np() { printf '%s' "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("n_predict",-1))'; }

"$CLI" synth --shape custom --arch llama --type f16 --vocab-file "$SHARED/vocab/ggml-vocab-starcoder.gguf" -o "$TMP/sc.gguf" >/dev/null 2>&1 ||
  { echo "FAIL: synth of the starcoder-vocabulary model"; exit 1; }
"$CLI" synth --shape custom --arch llama --type f16 --vocab-file "$SHARED/vocab/ggml-vocab-deepseek-coder.gguf" -o "$TMP/ds0.gguf" >/dev/null 2>&1 &&
  python3 "$HERE/serve/gguf_addkv.py" "$TMP/ds0.gguf" "$TMP/ds.gguf" tokenizer.ggml.fim_pre_token_id=300 \
    tokenizer.ggml.fim_suf_token_id=301 tokenizer.ggml.fim_mid_token_id=302 ||
  { echo "FAIL: synth of the deepseek-coder-vocabulary model"; exit 1; }

# ---- the starcoder vocabulary: <fim_prefix> 1, <fim_middle> 2, <fim_suffix> 3, <file_sep> 6, no repo
#      token staticlm or llama.cpp knows, no BOS; 64 prefill rows, KV capacity 128
SZ=(--parallel 1 --kv-type f32 --max-prompt-len 64 --min-response-len 64)
start sc -m "$TMP/sc.gguf" "${SZ[@]}"
tk() { curl -s "${H[@]}" -d "{\"content\":\"$1\"${2:-}}" "$U/tokenize"; }
check "the vocabulary: <fim_prefix> <fim_suffix> <fim_middle> <file_sep> are 1 3 2 6, no BOS" \
  '[ "$(tk "<fim_prefix><fim_suffix><fim_middle><file_sep>")" = "{\"tokens\":[1,3,2,6]}" ] && [ "$(tk a ",\"add_special\":true")" = "$(tk a)" ]'
check "the capacity is 128" '[ "$(curl -s "$U/props" | python3 -c "import json,sys; print(json.load(sys.stdin)[\"default_generation_settings\"][\"n_ctx\"])")" = 128 ]'
SC=(1 3 2 -1 6 -1 64 128)
B1='{"input_prefix": "def add(a, b):\n    return", "input_suffix": "\n\nprint(add(1, 2))\n", "prompt": " a", "n_predict": 12}'
ids plain "$B1" "${SC[@]}" 0
check "greedy /infill = /completion of [FIM_SEP filename\\n] FIM_PRE prefix prompt FIM_SUF suffix FIM_MID" 'same plain "$B1"'
check "... whose ids start 6, 'filename\\n', 1 and end 2" 'py "a[0][0]==6 and a[0][-1]==2 and 1 in a[0] and 3 in a[0]" "$TMP/plain.ids"'
python3 -c 'import json,sys; i=json.load(open(sys.argv[1])); p,s,m=i.index(1),i.index(3),i.index(2); print(json.dumps(i[:p]+i[s:m]+i[p:s]+[2]))' "$TMP/plain.ids" >"$TMP/swap.ids"
check "the parts swapped answer otherwise (the comparison can fail)" \
  '[ "$(code -d "{\"prompt\": $(cat "$TMP/swap.ids"), \"n_predict\": 12, \"temperature\": 0}" "$U/completion")" = 200 ] && py "a[0][\"content\"]!=a[1][\"content\"]" "$TMP/body" "$TMP/plain.inf"'
B2='{"input_prefix": "import os\n", "input_suffix": "", "input_extra": [{"filename": "util.py", "text": "def sub(a, b):\n    return a - b\n"}, {"text": "X = 1\n"}], "n_predict": 10}'
ids extra "$B2" "${SC[@]}" 0
check "input_extra: FIM_SEP util.py\\n text, FIM_SEP tmp\\n text (filename's default), FIM_SEP filename\\n" \
  'same extra "$B2" && py "a[0].count(6)==3" "$TMP/extra.ids"'
B3='{"input_prefix": ["def add", 4, "(a"], "input_suffix": [5, "x"], "prompt": "<fim_pad>", "n_predict": 6}'
ids mixed "$B3" "${SC[@]}" 0
check "mixed prefix / suffix arrays (text and ids as given); the prompt's control text parsed" \
  'same mixed "$B3" && py "a[0].count(4)==2 and 5 in a[0]" "$TMP/mixed.ids"'
LONGP=$(python3 -c 'print("".join("x%d = %d\\n" % (i, i) for i in range(60)))')
LONGS=$(python3 -c 'print("".join("y%d = %d\\n" % (i, i) for i in range(60)))')
LONGX=$(python3 -c 'print("".join("z%d = %d\\n" % (i, i) for i in range(40)))')
B4="{\"input_prefix\": \"$LONGP\", \"input_suffix\": \"$LONGS\", \"prompt\": \"q\", \"input_extra\": [{\"filename\": \"a.py\", \"text\": \"$LONGX\"}], \"n_predict\": 8}"
ids long "$B4" "${SC[@]}" 0
check "long prefix / suffix / extra: cut to 48 + 13 + 48 tokens (answers alike)" \
  'same long "$B4" && py "len(a[0])==48+3+1+13+48 and a[0][48]==1" "$TMP/long.ids"'
B5="{\"input_prefix\": \"$LONGP\", \"input_suffix\": \"$LONGS\", \"input_extra\": [{\"text\": \"$LONGX\"}]}"
ids full "$B5" "${SC[@]}" 0
check "no n_predict: the extra context fills the capacity but the reply's row (127 tokens)" \
  'same full "$B5" && py "len(a[0])==127" "$TMP/full.ids" && grep -q "\"stop_type\":\"limit\"" "$TMP/full.inf"'
check "streamed: the pieces make the whole answer, the last event stop true with its counts" \
  '[ "$(code -d "${B1%\}}, \"temperature\": 0, \"stream\": true}" "$U/infill")" = 200 ] &&
   python3 -c "import json,sys
ev=[json.loads(l[6:]) for l in open(sys.argv[1]) if l.startswith(\"data: \")]
w=json.load(open(sys.argv[2]))
sys.exit(0 if len(ev)>=2 and \"\".join(e[\"content\"] for e in ev)==w[\"content\"] and ev[-1][\"stop\"] and not any(e[\"stop\"] for e in ev[:-1]) and ev[-1][\"tokens_evaluated\"]==w[\"tokens_evaluated\"] else 1)" "$TMP/body" "$TMP/plain.inf"'
# refusals
bad400() { [ "$(code -d "$1" "$U/infill")" = 400 ] && grep -q "\"param\":\"$2\"" "$TMP/body"; }
check "input_prefix missing: 400 naming it" 'bad400 "{\"input_suffix\": \"\"}" input_prefix'
check "input_suffix missing: 400 naming it" 'bad400 "{\"input_prefix\": \"\"}" input_suffix'
check "input_prefix a number: 400" 'bad400 "{\"input_prefix\": 3, \"input_suffix\": \"\"}" input_prefix'
check "input_suffix holding an object: 400" 'bad400 "{\"input_prefix\": \"\", \"input_suffix\": [{}]}" input_suffix'
check "an id outside the vocabulary in input_prefix: 400" 'bad400 "{\"input_prefix\": [512], \"input_suffix\": \"\"}" input_prefix'
check "prompt not a string: 400" 'bad400 "{\"input_prefix\": \"\", \"input_suffix\": \"\", \"prompt\": [1, 2]}" prompt'
check "input_extra not an array: 400" 'bad400 "{\"input_prefix\": \"\", \"input_suffix\": \"\", \"input_extra\": {\"text\": \"a\"}}" input_extra'
check "input_extra[1] without text: 400 naming it" \
  'bad400 "{\"input_prefix\": \"\", \"input_suffix\": \"\", \"input_extra\": [{\"text\": \"a\"}, {\"filename\": \"b\"}]}" "input_extra\\[1\\].text"'
check "input_extra[0].filename a number: 400 naming it" \
  'bad400 "{\"input_prefix\": \"\", \"input_suffix\": \"\", \"input_extra\": [{\"text\": \"a\", \"filename\": 7}]}" "input_extra\\[0\\].filename"'
check "a completion field out of range (temperature 5): 400 naming it" \
  'bad400 "{\"input_prefix\": \"\", \"input_suffix\": \"\", \"temperature\": 5}" temperature'
check "logprobs: 400 (the /completion answer has no place for them)" \
  'bad400 "{\"input_prefix\": \"\", \"input_suffix\": \"\", \"logprobs\": 2}" logprobs'
check "not JSON: 400" '[ "$(code -d "{" "$U/infill")" = 400 ]'
check "GET /infill: 405" '[ "$(curl -s -o /dev/null -w "%{http_code}" "$U/infill")" = 405 ]'
check "healthy after all that; server stops cleanly" \
  '[ "$(curl -s -o /dev/null -w "%{http_code}" "$U/health")" = 200 ] && serve_stop "$TMP/sc.log" "$SPID" "$WPID"'

# ---- --spm-infill: the suffix part first
start spm -m "$TMP/sc.gguf" "${SZ[@]}" --spm-infill
ids spm "$B1" "${SC[@]}" 1
check "--spm-infill: /infill = /completion of [extra] FIM_SUF suffix FIM_PRE prefix prompt FIM_MID" \
  'same spm "$B1" && py "a[0][\"content\"]!=a[1][\"content\"]" "$TMP/spm.inf" "$TMP/plain.inf"'
ids spmlong "$B4" "${SC[@]}" 1
check "--spm-infill: the long parts cut alike" 'same spmlong "$B4"'
check "server stops cleanly" 'serve_stop "$TMP/spm.log" "$SPID" "$WPID"'

# ---- deepseek-coder's vocabulary (adds BOS 510; FIM ids 300 301 302 from GGUF keys; no FIM_SEP)
start ds -m "$TMP/ds.gguf" --parallel 1 --kv-type f32
check "this vocabulary adds BOS 510" '[ "$(tk a ",\"add_special\":true" | python3 -c "import json,sys; print(json.load(sys.stdin)[\"tokens\"][0])")" = 510 ]'
ids bos "$B2" 300 301 302 -1 -1 510 128 256 0
check "BOS before FIM_PRE; input_extra after \"--- snippet ---\" without FIM_SEP" \
  'same bos "$B2" && py "a[0][a[0].index(300)-1]==510 and a[0].index(300) > 10" "$TMP/bos.ids"'
check "server stops cleanly" 'serve_stop "$TMP/ds.log" "$SPID" "$WPID"'

# ---- a model without FIM tokens: 501 as llama-server
start nofim -m "$SHARED/models/stories260K.bin" -z "$SHARED/models/tok512.bin"
check "no FIM tokens (stories260K): 501 not_supported_error naming the missing tokens" \
  '[ "$(code -d "{\"input_prefix\": \"a\", \"input_suffix\": \"b\"}" "$U/infill")" = 501 ] &&
   grep -q "Infill is not supported by this model: prefix token is missing. suffix token is missing. middle token is missing." "$TMP/body" &&
   grep -q "not_supported_error" "$TMP/body"'
# ---- n_indent and t_max_predict_ms (on /completion; stories' lines are not indented)
G='"prompt":"Once upon a time","n_predict":300,"temperature":0'
code -d "{$G}" "$U/completion" >/dev/null; cp "$TMP/body" "$TMP/full.json"
check "n_indent 1: cut right after the first newline, stop_type limit" \
  '[ "$(code -d "{$G,\"n_indent\":1}" "$U/completion")" = 200 ] &&
   py "(lambda f,c: \"\\n\" in f and c==f[:f.index(\"\\n\")+1])(a[1][\"content\"],a[0][\"content\"]) and a[0][\"stop_type\"]==\"limit\"" "$TMP/body" "$TMP/full.json"'
check "t_max_predict_ms 1: stopped at a newline, a prefix of the whole reply" \
  '[ "$(code -d "{$G,\"t_max_predict_ms\":1}" "$U/completion")" = 200 ] &&
   py "(lambda f,c: f.startswith(c) and \"\\n\" in c and len(c) < len(f))(a[1][\"content\"],a[0][\"content\"]) and a[0][\"stop_type\"]==\"limit\"" "$TMP/body" "$TMP/full.json"'
check "n_indent 0 and a large t_max_predict_ms change nothing" \
  '[ "$(code -d "{$G,\"n_indent\":0,\"t_max_predict_ms\":600000}" "$U/completion")" = 200 ] && py "a[0][\"content\"]==a[1][\"content\"]" "$TMP/body" "$TMP/full.json"'
check "a completion's suffix: 400 pointing to /infill" '[ "$(code -d "{\"prompt\":\"a\",\"suffix\":\"b\"}" "$U/v1/completions")" = 400 ] && grep -q "POST /infill" "$TMP/body"'
check "n_indent -1: 400 naming it" '[ "$(code -d "{$G,\"n_indent\":-1}" "$U/completion")" = 400 ] && grep -q "\"param\":\"n_indent\"" "$TMP/body"'
check "t_max_predict_ms \"x\": 400 naming it" '[ "$(code -d "{$G,\"t_max_predict_ms\":\"x\"}" "$U/completion")" = 400 ] && grep -q "t_max_predict_ms" "$TMP/body"'
check "server stops cleanly" 'serve_stop "$TMP/nofim.log" "$SPID" "$WPID"'
check "--spm-infill is listed in serve --help, with POST /infill" '"$CLI" serve --help | grep -q -- "--spm-infill" && "$CLI" serve --help | grep -q "POST /infill"'
serve_done
