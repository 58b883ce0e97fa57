#!/usr/bin/env bash
# staticlm serve's structured output, on a free loopback port, stories260K:
#  - response_format {"type":"json_schema","json_schema":{"schema":...}} at
#    temperature 1 over several seeds: every reply's content parses as JSON
#    and has the schema's keys and types (checked by node or python3, not by
#    staticlm), finish_reason "stop"; streamed too;
#  - response_format json_object: a JSON object; llama-server's json_schema
#    and grammar fields on /v1/completions;
#  - a grammar that does not compile, a schema keyword not supported, two
#    of the fields at once, an unknown response_format type: 400 naming the
#    field, with the compiler's message;
#  - serve --grammar: the grammar of requests that give none.
# usage: test_serve_grammar.sh CLI SHARED_DIR
set -u
CLI=$1 SHARED=$2
MODEL=(-m "$SHARED/models/stories260K.bin" -z "$SHARED/models/tok512.bin")
. "$(dirname "$0")/serve/lib.sh"
serve_needs
serve_tmp test_grammar
H=(-H 'Content-Type: application/json')
serve_start "$TMP/server.log" "${MODEL[@]}"
CMPL=$U/v1/completions CHAT=$U/v1/chat/completions
code() { curl -s -m 120 -o "$TMP/body" -w '%{http_code}' "${H[@]}" "$@"; }

# js FILE EXPR: EXPR over the parsed body `j` (node), or PY (python3); "SKIP" without either
JS=1
if command -v node >/dev/null; then JS=node; elif command -v python3 >/dev/null; then JS=python3; else JS=; fi
js() { # FILE JS-EXPR PY-EXPR
  case "$JS" in
    node) node -e "const j=JSON.parse(require('fs').readFileSync(process.argv[1],'utf8'));let r;try{r=($2)}catch(e){r='ERR '+e.message};process.stdout.write(String(r))" "$1" ;;
    python3) python3 -c "import json,sys
j=json.load(open(sys.argv[1]))
try:
  r=$3
except Exception as e:
  r='ERR '+str(e)
print(r if not isinstance(r,bool) else str(r).lower(),end='')" "$1" ;;
    *) echo SKIP ;;
  esac
}
[ -n "$JS" ] || echo "SKIP: neither node nor python3 to read JSON: replies are not parsed"

SCHEMA='{"type":"object","properties":{"name":{"type":"string","maxLength":10},"age":{"type":"integer"},"happy":{"type":"boolean"},"color":{"enum":["red","green","blue"]}},"required":["name","age","happy","color"],"additionalProperties":false}'
# the content (a string) as JSON, checked against SCHEMA by hand
VALID_JS='(()=>{const o=JSON.parse(@C@);const k=Object.keys(o).sort().join(",");return k==="age,color,happy,name"&&typeof o.name==="string"&&[...o.name].length<=10&&Number.isInteger(o.age)&&typeof o.happy==="boolean"&&["red","green","blue"].includes(o.color)})()'
VALID_PY='(lambda o: sorted(o)==["age","color","happy","name"] and isinstance(o["name"],str) and len(o["name"])<=10 and isinstance(o["age"],int) and not isinstance(o["age"],bool) and isinstance(o["happy"],bool) and o["color"] in ("red","green","blue"))(json.loads(@C@))'
content_js() { echo "${VALID_JS//@C@/$1}"; }
content_py() { echo "${VALID_PY//@C@/$2}"; }

M='"messages":[{"role":"user","content":"Tell me about a cat."}],"temperature":1,"max_tokens":400'
RF="\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"cat\",\"strict\":true,\"schema\":$SCHEMA}}"
good=0 n=0
for seed in 1 2 3 4 5 6; do
  n=$((n + 1))
  c=$(code -d "{$M,$RF,\"seed\":$seed}" "$CHAT")
  r=$(js "$TMP/body" "$(content_js 'j.choices[0].message.content')&&j.choices[0].finish_reason==='stop'" \
                     "$(content_py x "j['choices'][0]['message']['content']") and j['choices'][0]['finish_reason']=='stop'")
  if [ "$c" = 200 ] && { [ "$r" = true ] || [ "$r" = SKIP ]; }; then good=$((good + 1)); else echo "seed $seed: $c $r: $(head -c 600 "$TMP/body")"; fi
  [ "$seed" = 1 ] && echo "  seed 1: $(js "$TMP/body" 'j.choices[0].message.content' "j['choices'][0]['message']['content']")"
done
check "response_format json_schema: $good of $n replies parse as JSON matching the schema, finish_reason stop" '[ "$good" = "$n" ]'

# streamed: the content deltas put together
curl -sN -m 120 "${H[@]}" -d "{$M,$RF,\"seed\":11,\"stream\":true}" "$CHAT" > "$TMP/sse"
sed -n 's/^data: //p' "$TMP/sse" | grep -v '^\[DONE\]' > "$TMP/chunks"
if [ "$JS" = node ]; then
  node -e "const l=require('fs').readFileSync(process.argv[1],'utf8').trim().split('\n');let c='';for(const x of l){const j=JSON.parse(x);for(const ch of j.choices||[])c+=(ch.delta&&ch.delta.content)||''}require('fs').writeFileSync(process.argv[2],JSON.stringify({c}))" "$TMP/chunks" "$TMP/streamed.json"
elif [ "$JS" = python3 ]; then
  python3 -c "import json,sys
c=''
for x in open(sys.argv[1]).read().split('\n'):
  if x.strip():
    for ch in json.loads(x).get('choices',[]): c+=(ch.get('delta') or {}).get('content') or ''
json.dump({'c':c},open(sys.argv[2],'w'))" "$TMP/chunks" "$TMP/streamed.json"
fi
if [ -n "$JS" ]; then
  check "streamed json_schema reply parses and matches" '[ "$(js "$TMP/streamed.json" "$(content_js j.c)" "$(content_py x "j[\"c\"]")")" = true ] && grep -q "^data: \[DONE\]" "$TMP/sse"'
fi

# json_object: any JSON object
good=0
for seed in 1 2 3; do
  c=$(code -d "{$M,\"response_format\":{\"type\":\"json_object\"},\"seed\":$seed}" "$CHAT")
  r=$(js "$TMP/body" "(()=>{const o=JSON.parse(j.choices[0].message.content);return typeof o==='object'&&o!==null&&!Array.isArray(o)})()" \
                     "isinstance(json.loads(j['choices'][0]['message']['content']),dict)")
  if [ "$c" = 200 ] && { [ "$r" = true ] || [ "$r" = SKIP ] || js "$TMP/body" "j.choices[0].finish_reason==='length'" "j['choices'][0]['finish_reason']=='length'" | grep -q true; }; then
    good=$((good + 1))
  else echo "json_object seed $seed: $c $r: $(head -c 600 "$TMP/body")"; fi
done
check "response_format json_object: replies are JSON objects (or cut by max_tokens)" '[ "$good" = 3 ]'

# llama-server's fields on completions
P='"prompt":"Once upon a time","temperature":1,"max_tokens":60'
check "completions json_schema field: the text matches" '[ "$(code -d "{\"prompt\":\"Once upon a time\",\"temperature\":1,\"max_tokens\":400,\"json_schema\":$SCHEMA,\"seed\":5}" "$CMPL")" = 200 ] && { r=$(js "$TMP/body" "$(content_js j.choices[0].text)" "$(content_py x "j[\"choices\"][0][\"text\"]")"); [ "$r" = true ] || [ "$r" = SKIP ]; }'
ok_words=0
for seed in 1 2 3 4 5; do
  code -d "{$P,\"grammar\":\"root ::= \\\" \\\" (\\\"yes\\\" | \\\"no\\\")\",\"seed\":$seed}" "$CMPL" >/dev/null
  grep -q '"text":" \(yes\|no\)"' "$TMP/body" && grep -q '"finish_reason":"stop"' "$TMP/body" && ok_words=$((ok_words + 1))
done
check "completions grammar field: 5 of 5 texts are ' yes' or ' no'" '[ "$ok_words" = 5 ]'

# refused with the message
is_bad() { grep -q "\"param\":\"$1\"" "$TMP/body" && grep -q "$2" "$TMP/body"; }
check "a grammar that does not compile -> 400 with line and column" '[ "$(code -d "{$P,\"grammar\":\"root ::= item\"}" "$CMPL")" = 400 ] && is_bad grammar "line 1, column 10" && is_bad grammar "not defined"'
check "left recursion -> 400" '[ "$(code -d "{$P,\"grammar\":\"root ::= root \\\"a\\\" | \\\"b\\\"\"}" "$CMPL")" = 400 ] && is_bad grammar "left-recursive"'
check "schema with pattern -> 400 naming it" '[ "$(code -d "{$M,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{\"type\":\"string\",\"pattern\":\"a+\"}}}}" "$CHAT")" = 400 ] && is_bad response_format "pattern"'
check "json_schema without schema -> 400" '[ "$(code -d "{$M,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\"}}}" "$CHAT")" = 400 ] && is_bad response_format "needs"'
check "response_format type foo -> 400 unsupported" '[ "$(code -d "{$M,\"response_format\":{\"type\":\"foo\"}}" "$CHAT")" = 400 ] && is_bad response_format unsupported_value'
check "grammar and json_schema at once -> 400" '[ "$(code -d "{$P,\"grammar\":\"root ::= \\\"a\\\"\",\"json_schema\":{}}" "$CMPL")" = 400 ] && is_bad grammar "one of"'
check "response_format text -> 200" '[ "$(code -d "{$M,\"max_tokens\":4,\"response_format\":{\"type\":\"text\"}}" "$CHAT")" = 200 ]'
check "healthy after the errors" '[ "$(curl -s -o /dev/null -w "%{http_code}" "$U/health")" = 200 ]'
check "server exits 0 on SIGTERM, no sanitizer report" 'serve_stop "$TMP/server.log" "$SPID" "$WPID"'

# serve --grammar: the default of requests
serve_start "$TMP/server2.log" "${MODEL[@]}" --grammar 'root ::= " " ("cat" | "dog") "."'
U2=$U
check "serve --grammar applies to a request without one" '[ "$(code -d "{$P,\"seed\":2}" "$U2/v1/completions")" = 200 ] && grep -q "\"text\":\" \(cat\|dog\)\.\"" "$TMP/body"'
check "a request's grammar replaces serve's" '[ "$(code -d "{$P,\"seed\":2,\"grammar\":\"root ::= \\\" yes\\\"\"}" "$U2/v1/completions")" = 200 ] && grep -q "\"text\":\" yes\"" "$TMP/body"'
check "serve --grammar: exits 0 on SIGTERM" 'serve_stop "$TMP/server2.log" "$SPID" "$WPID"'
check "serve --grammar that does not compile: refused at start" '! "$CLI" serve "${MODEL[@]}" --port 0 --grammar "root ::= (" 2>"$TMP/e" && grep -q "not closed" "$TMP/e"'
serve_done
