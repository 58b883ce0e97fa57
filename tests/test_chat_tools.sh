#!/usr/bin/env bash
# staticlm chat --tools FILE: function calling in the CLI chat, piped, with
# stories260K + tok512 (which cannot call tools of itself: the grammar of
# --tool-choice required / NAME makes its reply a call; a harmony template
# whose prompt opens a call, tests/serve/tools.jinja, makes its free reply
# under auto a call's arguments):
#  - a forced reply is one '[tool_call] JSON' line per call: an element of
#    OpenAI's tool_calls whose arguments a check apart from staticlm finds
#    valid under the function's schema, over temperatures and seeds;
#  - the next stdin line is the call's result: -v shows the next prompt
#    rendering the assistant's call and the tool message (with the call's
#    id under tools.jinja), then the line after that is a user turn again;
#  - /save keeps the calls and tool messages (OpenAI's form), /load reads
#    them back and the next prompt renders them;
#  - --tool-choice none renders the tools and parses nothing; auto parses;
#    --no-parallel-tool-calls keeps one call;
#  - bad tools files and options are refused, naming the file and the fault.
# usage: test_chat_tools.sh CLI SHARED_DIR TESTS_DIR
set -u
CLI=$1 SHARED=$2 TESTS=$3
MODEL=(-m "$SHARED/models/stories260K.bin" -z "$SHARED/models/tok512.bin" --kv-type f32)
HERMES=(--chat-template "$TESTS/serve/tools_hermes.jinja")
pass=0 fail=0
check() { if eval "$2"; then pass=$((pass + 1)); echo "ok: $1"; else fail=$((fail + 1)); echo "FAIL: $1"; fi; }
TMP=$(mktemp -d /tmp/slm_test_chat_tools.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
if ! command -v node >/dev/null && ! command -v python3 >/dev/null; then echo "SKIP: neither node nor python3 to read JSON"; exit 0; fi

cat >"$TMP/tools.json" <<'EOF'
[{"type": "function", "function": {"name": "get_weather", "description": "weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}, "days": {"type": "integer"}},
                 "required": ["city"]}}},
 {"type": "function", "function": {"name": "tell_story", "description": "a story",
  "parameters": {"type": "object", "properties": {"topic": {"type": "string", "enum": ["cat", "dog"]}}, "required": ["topic"]}}}]
EOF
# one tool: a conversation of several turns fits stories260K's 512 tokens
cat >"$TMP/one.json" <<'EOF'
[{"type": "function", "function": {"name": "get_weather", "description": "weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}}, "required": ["city"]}}}]
EOF
printf 'Hello\n' | "$CLI" chat "${MODEL[@]}" --tools "$TMP/tools.json" --tool-choice get_weather -n 4 >/dev/null 2>"$TMP/probe"
if grep -q "without cJSON\|no JSON reader" "$TMP/probe"; then echo "SKIP: built without cJSON"; exit 0; fi

# valid LINE NAMES: "ok" when LINE is "[tool_call] " and one call to one of NAMES
# (comma separated), id call_ + 24 letters and digits, arguments valid under its schema
valid() {
  local js='const l=process.argv[1];const ok=(x,w)=>{if(!x)throw w};ok(l.startsWith("[tool_call] "),"prefix");
const t=JSON.parse(l.slice(12));ok(Object.keys(t).join()==="id,type,function","keys "+Object.keys(t));
ok(/^call_[A-Za-z0-9]{24}$/.test(t.id),"id "+t.id);ok(t.type==="function","type");
const f=t.function;ok(process.argv[2].split(",").includes(f.name),"name "+f.name);ok(typeof f.arguments==="string","arguments not a string");
const a=JSON.parse(f.arguments);ok(a&&typeof a==="object"&&!Array.isArray(a),"not an object");
if(f.name==="get_weather"){ok(typeof a.city==="string"&&[...a.city].length<=8,"city");ok(!("days" in a)||Number.isInteger(a.days),"days");
ok(Object.keys(a).every(k=>k==="city"||k==="days"),"keys")}else{ok(a.topic==="cat"||a.topic==="dog","topic");ok(Object.keys(a).join()==="topic","keys")}'
  local py='import json,re,sys
l=sys.argv[1]
def ok(x,w):
    if not x: raise SystemExit(w)
ok(l.startswith("[tool_call] "),"prefix");t=json.loads(l[12:]);ok(list(t)==["id","type","function"],"keys")
ok(re.fullmatch(r"call_[A-Za-z0-9]{24}",t["id"]),"id");ok(t["type"]=="function","type");f=t["function"]
ok(f["name"] in sys.argv[2].split(","),"name");ok(isinstance(f["arguments"],str),"arguments");a=json.loads(f["arguments"]);ok(isinstance(a,dict),"object")
if f["name"]=="get_weather": ok(isinstance(a.get("city"),str) and len(a["city"])<=8,"city");ok("days" not in a or (type(a["days"]) is int),"days");ok(set(a)<={"city","days"},"keys")
else: ok(a.get("topic") in ("cat","dog"),"topic");ok(list(a)==["topic"],"keys")
print("ok",end="")'
  if command -v node >/dev/null; then node -e "try{$js;process.stdout.write('ok')}catch(e){process.stdout.write(String(e))}" "$1" "$2"
  else python3 -c "$py" "$1" "$2" 2>&1; fi
}
# a JSON field of FILE (JS expression over j / Python expression over j)
jget() {
  if command -v node >/dev/null; then node -e "const j=JSON.parse(require('fs').readFileSync(process.argv[1],'utf8'));const v=$2;process.stdout.write(String(v))" "$1"
  else python3 -c "import json,sys;j=json.load(open(sys.argv[1]));print($3,end='')" "$1"; fi
}

# forced LABEL CHOICE NAMES [OPTIONS...]: over temperatures and seeds, each reply one valid call
forced() {
  local label=$1 choice=$2 names=$3 bad=0 n=0 why line
  shift 3
  for T in 0 0.8 1.5; do for S in 1 2 3; do
    [ "$T" = 0 ] && [ "$S" != 1 ] && continue
    n=$((n + 1))
    printf 'Hello\n' | "$CLI" chat "${MODEL[@]}" "${HERMES[@]}" --tools "$TMP/tools.json" --tool-choice "$choice" \
      --temp "$T" --seed "$S" -n 120 --no-parallel-tool-calls "$@" >"$TMP/out" 2>"$TMP/err"
    if [ "$(grep -c '^\[tool_call\] ' "$TMP/out")" != 1 ]; then bad=$((bad + 1)); echo "  T=$T seed=$S: $(cat "$TMP/out" "$TMP/err")"; continue; fi
    line=$(grep '^\[tool_call\] ' "$TMP/out")
    why=$(valid "$line" "$names")
    [ "$why" = ok ] || { bad=$((bad + 1)); echo "  T=$T seed=$S: $why: $line"; }
  done; done
  check "$label: $n replies, each one valid call to $names" '[ "$bad" = 0 ]'
}
forced "hermes, --tool-choice get_weather" get_weather get_weather
forced "hermes, --tool-choice required" required get_weather,tell_story
forced "hermes, --tool-choice tell_story (an enum)" tell_story tell_story

# the piped protocol: a turn, the call's result on the next line, the reply
# to it, then a user turn again (forced again: a call, its result, the
# reply), then /save; -v shows each prompt
RESULT='{"temp_c": 21, "sky": "clear"}'
RESULT2='{"temp_c": 5}'
printf 'Hello\n%s\nBye\n%s\n/save %s\n' "$RESULT" "$RESULT2" "$TMP/conv.json" |
  "$CLI" chat "${MODEL[@]}" "${HERMES[@]}" --tools "$TMP/one.json" --tool-choice get_weather --temp 0 -n 100 \
    --no-parallel-tool-calls -v >"$TMP/out" 2>"$TMP/err"
RC=$?
CALL=$(grep '^\[tool_call\] ' "$TMP/out" | head -1)
check "piped: exit 0, the first reply a valid call" '[ "$RC" = 0 ] && [ "$(valid "$CALL" get_weather)" = ok ]'
ARGS=$(printf '%s' "$CALL" | sed 's/^\[tool_call\] //' >"$TMP/call.json"; jget "$TMP/call.json" "JSON.stringify(JSON.parse(j.function.arguments))" "json.dumps(json.loads(j['function']['arguments']),separators=(',',':'))")
ID=$(jget "$TMP/call.json" "j.id" "j['id']")
# the last call (the history outgrew the KV capacity: turn 3 dropped turn 1's messages)
grep '^\[tool_call\] ' "$TMP/out" | tail -1 | sed 's/^\[tool_call\] //' >"$TMP/call2.json"
ID2=$(jget "$TMP/call2.json" "j.id" "j['id']")
# the second prompt: the assistant's call as the template renders it, then the tool message
awk '/^\[chat\] the rendered prompt:/{n++} n==2' "$TMP/err" >"$TMP/p2"
check "piped: the tools in the first prompt" 'awk "/^\[chat\] the rendered prompt:/{n++} n==1" "$TMP/err" | grep -q "^{\"name\": \"get_weather\", \"description\": \"weather\""'
check "piped: the second prompt renders the call (<tool_call> with its arguments)" \
  'grep -qF "{\"name\": \"get_weather\", \"arguments\": " "$TMP/p2" && [ "$(grep -F "{\"name\": \"get_weather\", \"arguments\": " "$TMP/p2" | sed "s/.*\"arguments\": //; s/}\$//" | tr -d " ")" = "$(printf %s "$ARGS" | tr -d " ")" ]'
check "piped: ... and the result as the tool message" 'grep -A1 -x "<tool_response>" "$TMP/p2" | tail -1 | grep -qxF "$RESULT"'
check "piped: the reply to the result is turn 2, the next line turn 3 (a user message, forced to call again)" \
  'grep -q "turn=2 .*calls=0" "$TMP/err" && awk "/^\[chat\] the rendered prompt:/{n++} n==3" "$TMP/err" | grep -qx "Bye<|im_end|>"'
check "piped: two calls, /save keeps the last (id, name) and its tool message" \
  '[ "$(jget "$TMP/conv.json" "[j.messages[1].tool_calls[0].id,j.messages[1].tool_calls[0].function.name,j.messages[2].role,j.messages[2].tool_call_id,j.messages[2].name,j.messages[2].content].join(\"|\")" "\"|\".join([j[\"messages\"][1][\"tool_calls\"][0][\"id\"],j[\"messages\"][1][\"tool_calls\"][0][\"function\"][\"name\"],j[\"messages\"][2][\"role\"],j[\"messages\"][2][\"tool_call_id\"],j[\"messages\"][2][\"name\"],j[\"messages\"][2][\"content\"]])")" = "$ID2|get_weather|tool|$ID2|get_weather|$RESULT2" ] && [ "$ID" != "$ID2" ]'
# /load: a conversation in OpenAI's form (arguments a JSON string, content
# null beside the calls) renders the calls (arguments as the object they
# spell) and the tool message (with its call id: tools.jinja shows it)
cat >"$TMP/hand.json" <<'EOF'
{"messages": [{"role": "user", "content": "Hi"},
  {"role": "assistant", "content": null, "tool_calls": [{"id": "call_abc", "type": "function",
    "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
  {"role": "tool", "tool_call_id": "call_abc", "name": "get_weather", "content": "cold"}]}
EOF
printf '/load %s\nAgain\n/save %s\n' "$TMP/hand.json" "$TMP/hand2.json" |
  "$CLI" chat "${MODEL[@]}" --chat-template "$TESTS/serve/tools.jinja" --tools "$TMP/one.json" --temp 0 -n 4 -v \
    >"$TMP/out" 2>"$TMP/err"
check "/load: the next prompt renders the loaded call and the tool message with its id" \
  'grep -qF "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Oslo\"}<|call|><|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>cold (call_abc)<|end|><|start|>user<|message|>Again<|end|>" "$TMP/err"'
check "/load then /save: the call's arguments a JSON string again, the tool message's fields kept" \
  '[ "$(jget "$TMP/hand2.json" "[j.messages[1].tool_calls[0].function.arguments,j.messages[2].tool_call_id,j.messages[2].name].join(\"|\")" "\"|\".join([j[\"messages\"][1][\"tool_calls\"][0][\"function\"][\"arguments\"],j[\"messages\"][2][\"tool_call_id\"],j[\"messages\"][2][\"name\"]])")" = "{\"city\":\"Oslo\"}|call_abc|get_weather" ]'
printf '{"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "x", "function": {"arguments": "{}"}}]}]}' >"$TMP/badconv.json"
printf '/load %s\n' "$TMP/badconv.json" | "$CLI" chat "${MODEL[@]}" -n 4 >/dev/null 2>"$TMP/err"
RC=$?
check "/load: a call without a name is refused, naming the message" '[ "$RC" = 1 ] && grep -q "message 0: tool_calls\[0\] must be" "$TMP/err"'

# auto: the harmony template's prompt opens a call to the first tool; the
# model's own reply is its arguments, parsed into a call; the result goes back
printf 'Hello\nsunny\n' | "$CLI" chat "${MODEL[@]}" --chat-template "$TESTS/serve/tools.jinja" --tools "$TMP/one.json" \
  --chat-template-kwargs '{"open_call": true}' --temp 0 -n 30 -v >"$TMP/out" 2>"$TMP/err"
check "auto (harmony): the reply is parsed into a call to get_weather" \
  'grep "^\[tool_call\] " "$TMP/out" | head -1 | grep -q "^\[tool_call\] {\"id\":\"call_[A-Za-z0-9]*\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":"'
check "auto (harmony): the result goes back as a message from functions.get_weather" \
  'grep -qF "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>sunny (call_" "$TMP/err"'
# none: tools rendered, the same reply is text
printf 'Hello\n' | "$CLI" chat "${MODEL[@]}" --chat-template "$TESTS/serve/tools.jinja" --tools "$TMP/one.json" \
  --tool-choice none --chat-template-kwargs '{"open_call": true}' --temp 0 -n 30 -v >"$TMP/out2" 2>"$TMP/err2"
check "none: the tools rendered, the reply is text (no call)" \
  'grep -qF "get_weather: weather {" "$TMP/err2" && ! grep -q "^\[tool_call\]" "$TMP/out2" && [ -s "$TMP/out2" ]'
# parallel calls: hermes lets the model list several (some seeds do), one
# with --no-parallel-tool-calls (every seed)
MAXPAR=0 ONE_OK=1
for S in 1 2 3 4 5 6 7 8; do
  N=$(printf 'Hello\n' | "$CLI" chat "${MODEL[@]}" "${HERMES[@]}" --tools "$TMP/one.json" --tool-choice required --temp 1.5 \
        --seed "$S" -n 280 2>/dev/null | grep -c '^\[tool_call\] ')
  [ "$N" -gt "$MAXPAR" ] && MAXPAR=$N
  N1=$(printf 'Hello\n' | "$CLI" chat "${MODEL[@]}" "${HERMES[@]}" --tools "$TMP/one.json" --tool-choice required --temp 1.5 \
        --seed "$S" -n 280 --no-parallel-tool-calls 2>/dev/null | grep -c '^\[tool_call\] ')
  [ "$N1" = 1 ] || ONE_OK=0
done
check "parallel calls by default (most in one reply: $MAXPAR), one with --no-parallel-tool-calls" '[ "$MAXPAR" -ge 2 ] && [ "$ONE_OK" = 1 ]'

# refused: bad files and options, exit 2 (1: after the model is open), naming the fault
refused() { # LABEL WANT_RC PATTERN ARGS...
  local label=$1 want=$2 pat=$3
  shift 3
  printf 'Hello\n' | "$CLI" chat "${MODEL[@]}" "${HERMES[@]}" -n 4 "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  check "refused: $label (rc $want)" '[ "$rc" = "$want" ] && grep -q -- "$pat" "$TMP/err" && [ ! -s "$TMP/out" ]'
  [ "$rc" = "$want" ] && grep -q -- "$pat" "$TMP/err" || echo "  rc $rc: $(cat "$TMP/err")"
}
printf '[{"type": "function", "function": {"name": "a"}},\n oops]' >"$TMP/bad_json.json"
printf '{"tools": []}' >"$TMP/object.json"
printf '[]' >"$TMP/empty.json"
printf '[{"type": "function", "function": {"description": "x"}}]' >"$TMP/noname.json"
printf '[{"type": "function", "function": {"name": "a b"}}]' >"$TMP/space.json"
printf '[{"type": "function", "function": {"name": "a", "parameters": []}}]' >"$TMP/params.json"
printf '[{"type": "tool", "function": {"name": "a"}}]' >"$TMP/type.json"
printf '[{"type": "function", "function": {"name": "a"}}] x' >"$TMP/trailing.json"
printf '[{"type": "function", "function": {"name": "q", "parameters": {"type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}}}}}]' >"$TMP/pattern.json"
refused "a file that is not JSON (line and column)" 2 "bad_json.json': not valid JSON (line 2, column" --tools "$TMP/bad_json.json"
refused "an object, not an array" 2 "object.json': must hold a JSON array of tools" --tools "$TMP/object.json"
refused "an empty array" 2 "empty.json': the tools array is empty" --tools "$TMP/empty.json"
refused "a tool without a name" 2 "noname.json': tools\[0\] must be .*: no function \"name\" string" --tools "$TMP/noname.json"
refused "a name with a space" 2 "space.json': tools\[0\] .*: the name is not" --tools "$TMP/space.json"
refused "parameters not an object" 2 "params.json': tools\[0\] .*: \"parameters\" is not an object" --tools "$TMP/params.json"
refused "a type other than function" 2 "type.json': tools\[0\] .*: its \"type\" is not \"function\"" --tools "$TMP/type.json"
refused "bytes after the array" 2 "trailing.json': bytes after the JSON value (line 1, column 51)" --tools "$TMP/trailing.json"
refused "a missing file" 2 "--tools '$TMP/missing.json': cannot read it" --tools "$TMP/missing.json"
refused "required, a schema keyword the grammar cannot enforce" 2 "pattern.json': function 'q': JSON schema: 'pattern' is not supported" \
  --tools "$TMP/pattern.json" --tool-choice required
refused "--tool-choice a function not in the file" 2 "--tool-choice 'nope': '$TMP/tools.json' has no function of that name" \
  --tools "$TMP/tools.json" --tool-choice nope
refused "--tool-choice a malformed name" 2 "--tool-choice expects auto, none, required" --tools "$TMP/tools.json" --tool-choice "a b"
refused "--tool-choice without --tools" 2 "--tool-choice needs --tools FILE" --tool-choice required
refused "--no-parallel-tool-calls without --tools" 2 "--no-parallel-tool-calls needs --tools FILE" --no-parallel-tool-calls
refused "--tool-choice required beside --grammar" 2 "constrains the reply itself" --tools "$TMP/tools.json" --tool-choice required --grammar 'root ::= "a"'
refused "--tools with --bench" 2 "--bench times plain turns" --tools "$TMP/tools.json" --bench
refused "required with a template of no tool call format (chatml)" 1 "needs the model's tool call format" \
  --tools "$TMP/tools.json" --tool-choice required --chat-template chatml
# auto with such a template: a warning, the chat goes on
printf 'Hello\n' | "$CLI" chat "${MODEL[@]}" --chat-template chatml --tools "$TMP/tools.json" -n 4 >"$TMP/out" 2>"$TMP/err"
RC=$?
check "auto with chatml: warnings (tools not read, no call format), exit 0" \
  '[ "$RC" = 0 ] && grep -q "never reads tools" "$TMP/err" && grep -q "no tool call format" "$TMP/err"'
# the pattern keyword is fine when nothing is forced (the grammar is not made)
printf 'Hello\n' | "$CLI" chat "${MODEL[@]}" "${HERMES[@]}" --tools "$TMP/pattern.json" -n 4 >/dev/null 2>"$TMP/err"
RC=$?
check "auto: a schema the grammar could not enforce is accepted" '[ "$RC" = 0 ]'
check "chat --help lists --tools, --tool-choice, --no-parallel-tool-calls" \
  '"$CLI" chat --help | grep -q -- "--tools FILE" && "$CLI" chat --help | grep -q -- "--tool-choice C" && "$CLI" chat --help | grep -q -- "--no-parallel-tool-calls"'
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
