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
#  - 400 for what is not supported (tool_choice required or named) or malformed.
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
refused "tool_choice required" "{$ASK,\"tool_choice\":\"required\"}" tool_choice unsupported_value
refused "tool_choice a named function" "{$ASK,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"tell_story\"}}}" tool_choice unsupported_value
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

# the real Qwen2.5 template: the tools as its <tools> block (hermes format)
serve_start "$TMP/s2.log" "${MODEL[@]}" --chat-template "$SHARED/templates/Qwen-Qwen2.5-7B-Instruct.jinja" -v
check "Qwen2.5 template with tools: 200, a reply without a call is content" '[ "$(code -d "{$ASK}" "$U/v1/chat/completions")" = 200 ] && ! grep -q tool_calls "$TMP/body"'
check "Qwen2.5 template: the tools rendered in <tools>" 'grep -qxF "{\"type\": \"function\", \"function\": {\"name\": \"tell_story\", \"description\": \"Tell a story\", \"parameters\": {\"type\": \"object\", \"properties\": {\"topic\": {\"type\": \"string\"}}}}}" "$TMP/s2.log" && grep -qx "<tools>" "$TMP/s2.log"'
check "serve stops cleanly" 'serve_stop "$TMP/s2.log" "$SPID" "$WPID"'
serve_done
