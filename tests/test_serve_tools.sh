#!/usr/bin/env bash
# Tool calling end to end, with stories260K and a harmony (gpt-oss style)
# chat template, tests/serve/tools.jinja, whose generation prompt opens a
# call to the first tool when the kwarg open_call is set: the model's real
# greedy reply is then that call's arguments, as a gpt-oss reply after
# "to=functions.NAME ... <|message|>" is. (No model small enough to emit
# tool calls itself is in ../shared/models.)
#  - a request with tools renders them (serve -v prints the prompt);
#  - the reply comes back as message.tool_calls (id call_..., type
#    function, the name, the arguments), content null, finish_reason
#    tool_calls; its arguments equal the content of the same request with
#    tool_choice none (tools rendered, nothing parsed);
#  - streamed: a delta.tool_calls chunk with index, id, type and name, then
#    argument pieces that add up to the same arguments, finish tool_calls;
#  - a follow-up with the assistant's tool_calls (arguments as a JSON
#    string) and a tool message renders both;
#  - the real Qwen2.5 template renders the tools as its <tools> block; a
#    reply without a call stays content;
#  - tool_choice required and a named function, in every format (harmony;
#    hermes and Llama 3.1's JSON under short templates of their form,
#    tests/serve/tools_hermes.jinja and tools_llama3.jinja, as the real
#    ones leave stories260K's 512 tokens no room; Mistral Nemo's real
#    template, [TOOL_CALLS]; Gemma 4's <|tool_call>call:N{...} under a short
#    template of its form, tests/serve/tools_gemma4.jinja): over
#    temperatures and seeds each reply is one call to a
#    declared (or the named) function whose arguments a check apart from
#    staticlm finds valid under its schema; streamed too;
#  - 400 for what is not supported (a schema keyword the grammar cannot
#    enforce, a template without a tool call format) or malformed.
# usage: test_serve_tools.sh CLI SHARED_DIR TESTS_DIR
set -u
CLI=$1 SHARED=$2 TESTS=$3
MODEL=(-m "$SHARED/models/stories260K.bin" -z "$SHARED/models/tok512.bin" --kv-type f32)
. "$(dirname "$0")/serve/lib.sh"
serve_needs
serve_tmp test_serve_tools
if ! command -v node >/dev/null && ! command -v python3 >/dev/null; then echo "SKIP: neither node nor python3 to read JSON"; serve_done; exit; fi
jget() { # FILE JS-EXPR PY-EXPR over the parsed JSON `j`
  if command -v node >/dev/null; then node -e "const j=JSON.parse(require('fs').readFileSync(process.argv[1],'utf8'));const v=$2;process.stdout.write(v===undefined?'<undefined>':v===null?'<null>':String(v))" "$1"
  else python3 -c "import json,sys;j=json.load(open(sys.argv[1]));v=$3;print('<null>' if v is None else v,end='')" "$1"; fi
}
# the streamed tool call deltas: "NCHUNKS|INDEXES|ID|TYPE|NAME|ARGUMENTS joined|content joined|finish"
sse_calls() {
  if command -v node >/dev/null; then node -e "
let n=0,idx='',id='',ty='',name='',args='',content='',fin='';
for(const l of require('fs').readFileSync(process.argv[1],'utf8').split('\n')){if(!l.startsWith('data: {'))continue;
const c=JSON.parse(l.slice(6)).choices[0];if(c.finish_reason)fin=c.finish_reason;const d=c.delta||{};if(d.content)content+=d.content;
for(const t of d.tool_calls||[]){n++;idx+=t.index;if(t.id)id+=t.id;if(t.type)ty+=t.type;if(t.function.name)name+=t.function.name;args+=t.function.arguments||''}}
process.stdout.write([n,idx,id,ty,name,args,content,fin].join('|'))" "$1"
  else python3 -c "
import json,sys
n=0;idx=id=ty=name=args=content=fin=''
for l in open(sys.argv[1]):
    if not l.startswith('data: {'): continue
    c=json.loads(l[6:])['choices'][0]; fin=c.get('finish_reason') or fin; d=c.get('delta',{}); content+=d.get('content') or ''
    for t in d.get('tool_calls',[]):
        n+=1; idx+=str(t['index']); id+=t.get('id',''); ty+=t.get('type',''); f=t['function']; name+=f.get('name',''); args+=f.get('arguments','')
print('|'.join(map(str,[n,idx,id,ty,name,args,content,fin])),end='')" "$1"; fi
}
code() { curl -s -m 60 -o "$TMP/body" -w '%{http_code}' -H 'Content-Type: application/json' "$@"; }

serve_start "$TMP/s1.log" "${MODEL[@]}" --chat-template "$TESTS/serve/tools.jinja" -v
CHAT=$U/v1/chat/completions
TOOLS='"tools":[{"type":"function","function":{"name":"tell_story","description":"Tell a story","parameters":{"type":"object","properties":{"topic":{"type":"string"}}}}}]'
ASK="\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],$TOOLS,\"temperature\":0,\"max_tokens\":40,\"stop\":[\",\"]"
OPEN='"chat_template_kwargs":{"open_call":true}'

check "tools: 200" '[ "$(code -d "{$ASK,$OPEN}" "$CHAT")" = 200 ]'
cp "$TMP/body" "$TMP/call.json"
ARGS=$(jget "$TMP/call.json" "j.choices[0].message.tool_calls[0].function.arguments" "j['choices'][0]['message']['tool_calls'][0]['function']['arguments']")
check "tools: the reply is a call to tell_story, type function, id call_..." '[ "$(jget "$TMP/call.json" "j.choices[0].message.tool_calls.map(t=>t.type+\" \"+t.function.name+\" \"+t.id.slice(0,5)).join()" "\",\".join(t[\"type\"]+\" \"+t[\"function\"][\"name\"]+\" \"+t[\"id\"][:5] for t in j[\"choices\"][0][\"message\"][\"tool_calls\"])")" = "function tell_story call_" ]'
check "tools: finish_reason tool_calls, content null" '[ "$(jget "$TMP/call.json" "j.choices[0].finish_reason+\" \"+j.choices[0].message.content" "j[\"choices\"][0][\"finish_reason\"]+\" \"+str(j[\"choices\"][0][\"message\"][\"content\"])")" = "tool_calls null" ] || [ "$(jget "$TMP/call.json" "j.choices[0].finish_reason+\" \"+j.choices[0].message.content" "j[\"choices\"][0][\"finish_reason\"]+\" \"+str(j[\"choices\"][0][\"message\"][\"content\"])")" = "tool_calls None" ]'
check "tools: the rendered prompt has the tools" 'grep -q "^<|start|>developer<|message|># Tools$" "$TMP/s1.log" && grep -qF "tell_story: Tell a story {\"type\": \"object\", \"properties\": {\"topic\": {\"type\": \"string\"}}}<|end|>" "$TMP/s1.log"'
# the same request with tool_choice none: tools rendered, the reply not parsed: its text is the arguments
code -d "{$ASK,$OPEN,\"tool_choice\":\"none\",\"reasoning_format\":\"none\"}" "$CHAT" >/dev/null
PLAIN=$(jget "$TMP/body" "j.choices[0].message.content" "j['choices'][0]['message']['content']")
check "tools: the arguments are the model's text (tool_choice none gives it as content)" '[ -n "$ARGS" ] && [ "$ARGS" = "$PLAIN" ] && ! grep -q tool_calls "$TMP/body"'
[ "$ARGS" = "$PLAIN" ] || { echo "arguments: [$ARGS]"; echo "content: [$PLAIN]"; }
curl -sN -m 60 -H 'Content-Type: application/json' -d "{$ASK,$OPEN,\"stream\":true}" "$CHAT" >"$TMP/sse"
IFS='|' read -r NCH IDX SID STY SNAME SARGS SCONTENT SFIN <<<"$(sse_calls "$TMP/sse")"
check "stream: a head chunk (index 0, id, type, name) then argument pieces" '[ "$NCH" -ge 2 ] && [ "$IDX" = "$(printf "0%.0s" $(seq 1 "$NCH"))" ] && [ "${SID:0:5}" = call_ ] && [ "$STY" = function ] && [ "$SNAME" = tell_story ]'
check "stream: the pieces add up to the arguments; no content; finish tool_calls" '[ "$SARGS" = "$ARGS" ] && [ -z "$SCONTENT" ] && [ "$SFIN" = tool_calls ] && grep -q "^data: \[DONE\]" "$TMP/sse"'
# no open call: the model's reply is content, finish as usual
check "tools, no call in the reply: content, no tool_calls" '[ "$(code -d "{$ASK}" "$CHAT")" = 200 ] && ! grep -q tool_calls "$TMP/body" && [ "$(jget "$TMP/body" "j.choices[0].finish_reason" "j[\"choices\"][0][\"finish_reason\"]")" != tool_calls ]'

# the follow-up: the call sent back (arguments a JSON string) and the tool's answer
FOLLOW="\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"},{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"tell_story\",\"arguments\":\"{\\\"topic\\\": \\\"cats\\\"}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"name\":\"tell_story\",\"content\":\"A cat sat.\"}],$TOOLS,\"temperature\":0,\"max_tokens\":8"
check "follow-up with tool_calls and a tool message: 200" '[ "$(code -d "{$FOLLOW}" "$CHAT")" = 200 ]'
check "follow-up: the call rendered, its arguments an object" 'grep -qF "<|start|>assistant to=functions.tell_story<|channel|>commentary json<|message|>{\"topic\": \"cats\"}<|call|>" "$TMP/s1.log"'
check "follow-up: the tool message rendered with its name and tool_call_id" 'grep -qF "<|start|>functions.tell_story to=assistant<|channel|>commentary<|message|>A cat sat. (call_1)<|end|>" "$TMP/s1.log"'

# what is refused
refused() { # NAME BODY PARAM CODE
  RB=$2 RP=$3 RC=$4
  check "$1 -> 400 ($3, $4)" '[ "$(code -d "$RB" "$CHAT")" = 400 ] && grep -q "\"param\":\"$RP\"" "$TMP/body" && grep -q "\"code\":\"$RC\"" "$TMP/body"'
}
refused "tool_choice required without tools" '{"messages":[{"role":"user","content":"a"}],"tool_choice":"required"}' tool_choice invalid_value
refused "tool_choice a function not in tools" "{$ASK,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"nope\"}}}" tool_choice invalid_value
refused "tool_choice an object without a function name" "{$ASK,\"tool_choice\":{\"type\":\"function\"}}" tool_choice invalid_value
refused "tool_choice required beside response_format" "{$ASK,\"tool_choice\":\"required\",\"response_format\":{\"type\":\"json_object\"}}" tool_choice invalid_value
refused "tool_choice required, a schema keyword the grammar cannot enforce" '{"messages":[{"role":"user","content":"a"}],"tools":[{"type":"function","function":{"name":"ok"}},{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string","pattern":"^a"}}}}}],"tool_choice":"required"}' tools invalid_value
check "... the message names the function and the keyword" 'grep -q "function .lookup.: JSON schema: .pattern. is not supported" "$TMP/body"'
refused "tool_choice bogus" "{$ASK,\"tool_choice\":\"maybe\"}" tool_choice invalid_value
refused "tools not an array" '{"messages":[{"role":"user","content":"a"}],"tools":{}}' tools invalid_type
refused "a tool without a name" '{"messages":[{"role":"user","content":"a"}],"tools":[{"type":"function","function":{"description":"x"}}]}' tools invalid_value
refused "a tool name with a space" '{"messages":[{"role":"user","content":"a"}],"tools":[{"type":"function","function":{"name":"a b"}}]}' tools invalid_value
refused "parallel_tool_calls not a boolean" "{$ASK,\"parallel_tool_calls\":1}" parallel_tool_calls invalid_type
refused "tool_calls not an array" '{"messages":[{"role":"assistant","content":null,"tool_calls":{}}]}' "messages\[0\].tool_calls" invalid_type
refused "a tool call without a name" '{"messages":[{"role":"assistant","tool_calls":[{"id":"x","function":{"arguments":"{}"}}]}]}' "messages\[0\].tool_calls" invalid_value
refused "tool_call_id not a string" '{"messages":[{"role":"tool","tool_call_id":3,"content":"x"}]}' "messages\[0\].tool_call_id" invalid_type
refused "the legacy functions" '{"messages":[{"role":"user","content":"a"}],"functions":[{"name":"f"}]}' functions unsupported_value
check "tools on /v1/completions -> 400" '[ "$(code -d "{\"prompt\":\"a\",$TOOLS}" "$U/v1/completions")" = 400 ] && grep -q "chat completions only" "$TMP/body"'
check "parallel_tool_calls false and an empty tools list: 200" '[ "$(code -d "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"tools\":[],\"parallel_tool_calls\":false,\"max_tokens\":2}" "$CHAT")" = 200 ]'
check "serve stops cleanly" 'serve_stop "$TMP/s1.log" "$SPID" "$WPID"'

# tool_choice required and a named function: the reply is a call (a grammar
# in the model's format holds it), whatever the model: stories260K's replies
# over temperatures and seeds must each be one call to a declared function
# whose arguments the schema (checked here, apart from staticlm) allows
# (short: the templates' text and the tools fit stories260K's 512 tokens)
FTOOLS='"tools":[{"type":"function","function":{"name":"tell_story","description":"a story","parameters":{"type":"object","properties":{"topic":{"type":"string","maxLength":16}},"required":["topic"]}}},{"type":"function","function":{"name":"get_weather","description":"weather","parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":12},"days":{"type":"integer"}},"required":["city"]}}}]'
# valid FILE NAMES: "ok" when the reply in FILE is exactly one call, to one of
# NAMES (comma separated), whose arguments fit its schema, finish tool_calls
valid() {
  local js='const c=j.choices[0],m=c.message,t=m.tool_calls||[];const ok=(x,w)=>{if(!x)throw w};
const chars=s=>[...s].length;const names=process.argv[2].split(",");
ok(c.finish_reason==="tool_calls","finish "+c.finish_reason);ok(t.length===1,t.length+" calls");ok(m.content===null,"content");
const f=t[0].function,a=JSON.parse(f.arguments);ok(names.includes(f.name),"name "+f.name);ok(typeof a==="object"&&a&&!Array.isArray(a),"not an object");
if(f.name==="tell_story"){ok(typeof a.topic==="string"&&chars(a.topic)<=16,"topic");ok(Object.keys(a).every(k=>k==="topic"),"keys")}
else{ok(typeof a.city==="string"&&chars(a.city)<=12,"city");ok(!("days" in a)||Number.isInteger(a.days),"days");
ok(!("unit" in a)||a.unit==="c"||a.unit==="f","unit");ok(Object.keys(a).every(k=>["city","days","unit"].includes(k)),"keys")}'
  local py='c=j["choices"][0];m=c["message"];t=m.get("tool_calls") or []
def ok(x,w):
    if not x: raise SystemExit(w)
names=sys.argv[2].split(",")
ok(c["finish_reason"]=="tool_calls","finish");ok(len(t)==1,"calls");ok(m["content"] is None,"content")
f=t[0]["function"];a=json.loads(f["arguments"]);ok(f["name"] in names,"name");ok(isinstance(a,dict),"object")
if f["name"]=="tell_story": ok(isinstance(a.get("topic"),str) and len(a["topic"])<=16,"topic");ok(set(a)<={"topic"},"keys")
else: ok(isinstance(a.get("city"),str) and len(a["city"])<=12,"city");ok("days" not in a or (isinstance(a["days"],int) and not isinstance(a["days"],bool)),"days");ok(a.get("unit","c") in ("c","f"),"unit");ok(set(a)<={"city","days","unit"},"keys")'
  if command -v node >/dev/null; then node -e "try{const j=JSON.parse(require('fs').readFileSync(process.argv[1],'utf8'));$js;process.stdout.write('ok')}catch(e){process.stdout.write(String(e))}" "$1" "$2"
  else python3 -c "import json,sys
j=json.load(open(sys.argv[1]))
$py
print('ok',end='')" "$1" "$2"; fi
}
# forced LABEL TOOL_CHOICE NAMES [EXTRA]: several temperatures and seeds, each reply valid
forced() {
  local bad=0 n=0 why
  for T in 0 0.8 1.5; do for S in 1 2 3; do
    [ "$T" = 0 ] && [ "$S" != 1 ] && continue
    n=$((n + 1))
    if [ "$(code -d "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],$FTOOLS,\"tool_choice\":$2,\"temperature\":$T,\"seed\":$S,\"max_tokens\":300${4:+,$4}}" "$CHAT")" != 200 ]; then
      bad=$((bad + 1)); echo "  $1 T=$T seed=$S: $(cat "$TMP/body")"; continue; fi
    why=$(valid "$TMP/body" "$3")
    [ "$why" = ok ] || { bad=$((bad + 1)); echo "  $1 T=$T seed=$S: $why: $(cat "$TMP/body")"; }
  done; done
  check "$1: $n replies, each one valid call to $3" '[ "$bad" = 0 ]'
}
# forced_stream LABEL TOOL_CHOICE NAMES [EXTRA]: streamed, the deltas add up to a valid call
forced_stream() {
  curl -sN -m 60 -H 'Content-Type: application/json' -d "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],$FTOOLS,\"tool_choice\":$2,\"temperature\":1,\"seed\":4,\"max_tokens\":300,\"stream\":true${4:+,$4}}" "$CHAT" >"$TMP/sse"
  IFS='|' read -r -d '' NCH IDX SID STY SNAME SARGS SCONTENT SFIN < <(sse_calls "$TMP/sse") # -d '': arguments may hold newlines
  printf '{"choices":[{"finish_reason":"%s","message":{"content":null,"tool_calls":[{"function":{"name":"%s","arguments":%s}}]}}]}' \
    "$SFIN" "$SNAME" "$(node -e 'process.stdout.write(JSON.stringify(process.argv[1]))' "$SARGS" 2>/dev/null || python3 -c 'import json,sys;print(json.dumps(sys.argv[1]),end="")' "$SARGS")" >"$TMP/sse.json"
  WANT=$3
  check "$1 streamed: a head chunk then argument pieces, a valid call, no content, finish tool_calls" \
    '[ "$NCH" -ge 2 ] && [ "${SID:0:5}" = call_ -o "${#SID}" = 9 ] && [ "$STY" = function ] && [ -z "$SCONTENT" ] && [ "$(valid "$TMP/sse.json" "$WANT")" = ok ] && grep -q "^data: \[DONE\]" "$TMP/sse"'
}
NAMED='{"type":"function","function":{"name":"get_weather"}}'
serve_start "$TMP/s5.log" "${MODEL[@]}" --chat-template "$TESTS/serve/tools.jinja" -v
CHAT=$U/v1/chat/completions
forced "harmony, required" '"required"' tell_story,get_weather
forced "harmony, named" "$NAMED" get_weather
forced_stream "harmony, required" '"required"' tell_story,get_weather
forced "harmony, required, parallel_tool_calls false" '"required"' tell_story,get_weather '"parallel_tool_calls":false'
# the prompt opened a call to the first tool: the reply is its arguments, under its schema
forced "harmony, required, the prompt opens a call to tell_story" '"required"' tell_story '"chat_template_kwargs":{"open_call":true}'
check "the grammar is logged (-v), in the harmony form" 'grep -qF "hcall ::= \"<|channel|>commentary to=functions.\" call" "$TMP/s5.log"'
check "serve stops cleanly" 'serve_stop "$TMP/s5.log" "$SPID" "$WPID"'

# the real Qwen2.5 template: the tools as its <tools> block (hermes format)
serve_start "$TMP/s2.log" "${MODEL[@]}" --chat-template "$SHARED/templates/Qwen-Qwen2.5-7B-Instruct.jinja" -v
check "Qwen2.5 template with tools: 200, a reply without a call is content" '[ "$(code -d "{$ASK}" "$U/v1/chat/completions")" = 200 ] && ! grep -q tool_calls "$TMP/body"'
check "Qwen2.5 template: the tools rendered in <tools>" 'grep -qxF "{\"type\": \"function\", \"function\": {\"name\": \"tell_story\", \"description\": \"Tell a story\", \"parameters\": {\"type\": \"object\", \"properties\": {\"topic\": {\"type\": \"string\"}}}}}" "$TMP/s2.log" && grep -qx "<tools>" "$TMP/s2.log"'
check "serve stops cleanly" 'serve_stop "$TMP/s2.log" "$SPID" "$WPID"'

# hermes calls under a short template of Qwen2.5's form (tests/serve/tools_hermes.jinja)
serve_start "$TMP/s2.log" "${MODEL[@]}" --chat-template "$TESTS/serve/tools_hermes.jinja" -v
CHAT=$U/v1/chat/completions
# (one call: with parallel calls allowed stories260K lists them until the length)
ONE='"parallel_tool_calls":false'
forced "hermes, required" '"required"' tell_story,get_weather "$ONE"
forced "hermes, named" "$NAMED" get_weather "$ONE"
forced_stream "hermes, named" "$NAMED" get_weather "$ONE"
check "the grammar is logged (-v), in the hermes form" 'grep -qF "root ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"" "$TMP/s2.log"'
check "serve stops cleanly" 'serve_stop "$TMP/s2.log" "$SPID" "$WPID"'

# Llama 3.1's JSON calls (a short template of that form, tests/serve/tools_llama3.jinja)
# and the real Mistral Nemo template ([TOOL_CALLS])
for TPL in "$TESTS/serve/tools_llama3.jinja:llama3" "$SHARED/templates/mistralai-Mistral-Nemo-Instruct-2407.jinja:mistral"; do
  serve_start "$TMP/s3.log" "${MODEL[@]}" --chat-template "${TPL%%:*}" -v
  CHAT=$U/v1/chat/completions
  forced "${TPL##*:}, required" '"required"' tell_story,get_weather "$ONE"
  forced "${TPL##*:}, named" "$NAMED" get_weather "$ONE"
  forced_stream "${TPL##*:}, required" '"required"' tell_story,get_weather "$ONE"
  check "${TPL##*:}: the grammar is logged (-v), in its form" 'grep -q "the tool call grammar (${TPL##*:})" "$TMP/s3.log"'
  check "serve stops cleanly" 'serve_stop "$TMP/s3.log" "$SPID" "$WPID"'
done
# Gemma 4's calls (a short template of its form, tests/serve/tools_gemma4.jinja):
# the arguments in Gemma's syntax under the grammar, JSON in tool_calls
serve_start "$TMP/s6.log" "${MODEL[@]}" --chat-template "$TESTS/serve/tools_gemma4.jinja" -v
CHAT=$U/v1/chat/completions
forced "gemma4, required" '"required"' tell_story,get_weather "$ONE"
forced "gemma4, named" "$NAMED" get_weather "$ONE"
forced_stream "gemma4, required" '"required"' tell_story,get_weather "$ONE"
check "gemma4: the grammar is logged (-v), in its form" 'grep -qF "root ::= \"<|tool_call>\" call \"<tool_call|>\"" "$TMP/s6.log"'
check "serve stops cleanly" 'serve_stop "$TMP/s6.log" "$SPID" "$WPID"'
# a template with no tool call format: required is refused, auto is not
serve_start "$TMP/s4.log" "${MODEL[@]}" --chat-template chatml
CHAT=$U/v1/chat/completions
refused "tool_choice required, a model with no tool call format" "{$ASK,\"tool_choice\":\"required\"}" tool_choice unsupported_value
check "serve stops cleanly" 'serve_stop "$TMP/s4.log" "$SPID" "$WPID"'
serve_done
