#!/usr/bin/env bash
# Reasoning apart from the answer, end to end, with stories260K and a chat
# template (tests/serve/think.jinja) whose generation prompt opens <think>,
# as DeepSeek-R1 distills' do: the reply starts inside the thinking and,
# never closing it, is all reasoning. (No model small enough to emit think
# tags itself is in ../shared/models; the text reasoning_content holds here
# is the model's real greedy output, split by the server's own path.)
#  - serve: message.reasoning_content apart from content, equal to the
#    reply of reasoning_format none; the streamed delta.reasoning_content
#    chunks add up to it; chat_template_kwargs {"enable_thinking": false}
#    gives an answer without reasoning; server defaults (--reasoning-format,
#    --chat-template-kwargs) and per-request overrides; reasoning_content in
#    messages sent back; 400 for bad values; bad options refused at start;
#  - chat: the thinking between [thinking] lines (not a terminal),
#    --hide-reasoning, --no-think, refused combinations.
# usage: test_serve_reasoning.sh CLI SHARED_DIR TESTS_DIR
set -u
CLI=$1 SHARED=$2 TESTS=$3
TPL=$TESTS/serve/think.jinja
MODEL=(-m "$SHARED/models/stories260K.bin" -z "$SHARED/models/tok512.bin" --kv-type f32 --chat-template "$TPL")
. "$(dirname "$0")/serve/lib.sh"
shopt -s extglob
trim() { local t="${1##+([[:space:]])}"; printf '%s' "${t%%+([[:space:]])}"; }

serve_tmp test_serve_reasoning

# ---- chat (needs no HTTP)
chat() { printf 'Hello\n' | "$CLI" chat "${MODEL[@]}" -n 24 --temp 0 "$@" 2>"$TMP/chat.err"; }
OUT=$(chat); rc=$?
check "chat: thinking between [thinking] lines" '[ $rc = 0 ] && [ "$(printf "%s\n" "$OUT" | head -1)" = "[thinking]" ] && printf "%s\n" "$OUT" | grep -qx "\[/thinking\]"'
THINK=$(printf '%s\n' "$OUT" | sed -n '2,/^\[\/thinking\]$/p' | sed '$d')
NONE=$(chat --reasoning-format none)
check "chat: the thinking is the reply of --reasoning-format none, trimmed" '[ -n "$(trim "$THINK")" ] && [ "$(trim "$THINK")" = "$(trim "$NONE")" ]'
OUT=$(chat --hide-reasoning)
check "chat --hide-reasoning: no thinking shown" '[ $? = 0 ] && ! printf "%s" "$OUT" | grep -q "thinking\]" && [ -z "$(trim "$OUT")" ]'
OUT=$(chat --no-think)
check "chat --no-think: an answer, no thinking" '! printf "%s" "$OUT" | grep -q "thinking\]" && [ -n "$(trim "$OUT")" ]'
OUT=$(chat --chat-template-kwargs '{"enable_thinking": false}')
check "chat --chat-template-kwargs enable_thinking false: the same" '! printf "%s" "$OUT" | grep -q "thinking\]" && [ -n "$(trim "$OUT")" ]'
check "chat: --reasoning-format bogus refused" '! chat --reasoning-format bogus && grep -q "expects none, deepseek, harmony, gemma4, auto" "$TMP/chat.err"'
check "chat: --chat-template-kwargs not an object refused" '! chat --chat-template-kwargs "[1]" && grep -q "chat-template-kwargs: .*object" "$TMP/chat.err"'
check "chat: --hide-reasoning with --reasoning-format none refused" '! chat --reasoning-format none --hide-reasoning && grep -q "no reasoning to hide" "$TMP/chat.err"'
printf 'Hello\n' | "$CLI" chat -m "$SHARED/models/stories260K.bin" -z "$SHARED/models/tok512.bin" -n 4 --no-think >/dev/null 2>"$TMP/chat.err"
check "chat: --no-think warns when the template never reads enable_thinking" 'grep -q "never reads enable_thinking" "$TMP/chat.err"'

command -v curl >/dev/null || { echo "SKIP: curl is not installed: the serve part"; serve_done; exit; }
if ! "$CLI" serve --help >/dev/null 2>&1; then echo "SKIP: staticlm was built without serve"; serve_done; exit; fi
jget() { # FILE JS-EXPR PY-EXPR over the parsed JSON `j`
  if command -v node >/dev/null; then node -e "const j=JSON.parse(require('fs').readFileSync(process.argv[1],'utf8'));const v=$2;process.stdout.write(v===undefined?'<undefined>':String(v))" "$1"
  elif command -v python3 >/dev/null; then python3 -c "import json,sys;j=json.load(open(sys.argv[1]));print($3,end='')" "$1"
  else return 1; fi
}
# the streamed deltas of FIELD, joined
sse_join() { # FILE FIELD
  if command -v node >/dev/null; then node -e "let s='';for(const l of require('fs').readFileSync(process.argv[1],'utf8').split('\n')){if(!l.startsWith('data: {'))continue;const c=JSON.parse(l.slice(6)).choices;if(c&&c[0]&&c[0].delta&&c[0].delta[process.argv[2]]!==undefined)s+=c[0].delta[process.argv[2]]}process.stdout.write(s)" "$1" "$2"
  else python3 -c "
import json,sys
s=''
for l in open(sys.argv[1]):
    if l.startswith('data: {'):
        c=json.loads(l[6:]).get('choices') or []
        if c and sys.argv[2] in c[0].get('delta',{}): s+=c[0]['delta'][sys.argv[2]]
print(s,end='')" "$1" "$2"; fi
}
if ! command -v node >/dev/null && ! command -v python3 >/dev/null; then echo "SKIP: neither node nor python3 to read JSON: the serve part"; serve_done; exit; fi

start() { serve_start "$1" "${MODEL[@]}" "${@:2}"; } # LOG OPTIONS...
code() { curl -s -m 60 -o "$TMP/body" -w '%{http_code}' -H 'Content-Type: application/json' "$@"; }
MSG='"messages":[{"role":"user","content":"Hello"}],"temperature":0,"max_tokens":30'

start "$TMP/s1.log"
CHAT=http://127.0.0.1:$PORT/v1/chat/completions
check "serve auto: 200" '[ "$(code -d "{$MSG}" "$CHAT")" = 200 ]'
R=$(jget "$TMP/body" "j.choices[0].message.reasoning_content" "j['choices'][0]['message'].get('reasoning_content','<undefined>')")
C=$(jget "$TMP/body" "j.choices[0].message.content" "j['choices'][0]['message']['content']")
code -d "{$MSG,\"reasoning_format\":\"none\"}" "$CHAT" >/dev/null
N=$(jget "$TMP/body" "j.choices[0].message.content" "j['choices'][0]['message']['content']")
NR=$(jget "$TMP/body" "j.choices[0].message.reasoning_content" "j['choices'][0]['message'].get('reasoning_content','<undefined>')")
check "serve: reasoning_content apart, content empty (the reply never left <think>)" '[ -n "$R" ] && [ "$R" != "<undefined>" ] && [ -z "$C" ]'
check "serve: reasoning_content == the reply of reasoning_format none, trimmed" '[ "$R" = "$(trim "$N")" ] && [ "$NR" = "<undefined>" ]'
[ "$R" = "$(trim "$N")" ] || { echo "reasoning: [$R]"; echo "none: [$N]"; }
check "serve deepseek explicitly: the same" '[ "$(code -d "{$MSG,\"reasoning_format\":\"deepseek\"}" "$CHAT")" = 200 ] && [ "$(jget "$TMP/body" "j.choices[0].message.reasoning_content" "j[\"choices\"][0][\"message\"][\"reasoning_content\"]")" = "$R" ]'
curl -sN -m 60 -H 'Content-Type: application/json' -d "{$MSG,\"stream\":true}" "$CHAT" >"$TMP/sse"
check "serve stream: delta.reasoning_content chunks add up to reasoning_content" '[ "$(sse_join "$TMP/sse" reasoning_content)" = "$R" ] && [ -z "$(sse_join "$TMP/sse" content)" ] && grep -q "^data: \[DONE\]" "$TMP/sse"'
check "serve: chat_template_kwargs enable_thinking false: content, no reasoning_content" '[ "$(code -d "{$MSG,\"chat_template_kwargs\":{\"enable_thinking\":false}}" "$CHAT")" = 200 ] && ! grep -q reasoning_content "$TMP/body" && [ -n "$(jget "$TMP/body" "j.choices[0].message.content" "j[\"choices\"][0][\"message\"][\"content\"]")" ]'
HIST='"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello.","reasoning_content":"They greet me."},{"role":"user","content":"Again"}],"max_tokens":4'
check "serve: an assistant message with reasoning_content is accepted" '[ "$(code -d "{$HIST}" "$CHAT")" = 200 ]'
check "serve: bad reasoning_format -> 400" '[ "$(code -d "{$MSG,\"reasoning_format\":\"r1\"}" "$CHAT")" = 400 ] && grep -q "\"param\":\"reasoning_format\"" "$TMP/body"'
check "serve: chat_template_kwargs not an object -> 400" '[ "$(code -d "{$MSG,\"chat_template_kwargs\":\"x\"}" "$CHAT")" = 400 ] && grep -q "\"param\":\"chat_template_kwargs\"" "$TMP/body"'
check "serve: chat_template_kwargs setting messages -> 400" '[ "$(code -d "{$MSG,\"chat_template_kwargs\":{\"messages\":[]}}" "$CHAT")" = 400 ] && grep -q "set by the chat itself" "$TMP/body"'
check "serve: reasoning_content not a string -> 400" '[ "$(code -d "{\"messages\":[{\"role\":\"assistant\",\"content\":\"a\",\"reasoning_content\":1}]}" "$CHAT")" = 400 ] && grep -q "messages\[0\].reasoning_content" "$TMP/body"'
check "serve: reasoning_format on /v1/completions -> 400" '[ "$(code -d "{\"prompt\":\"Hi\",\"reasoning_format\":\"none\"}" "http://127.0.0.1:$PORT/v1/completions")" = 400 ] && grep -q "chat completions only" "$TMP/body"'
check "serve: /v1/completions untouched" '[ "$(code -d "{\"prompt\":\"Hi <think>\",\"max_tokens\":4}" "http://127.0.0.1:$PORT/v1/completions")" = 200 ] && ! grep -q reasoning_content "$TMP/body"'

# server defaults: no reasoning split, no thinking; requests override both
start "$TMP/s2.log" --reasoning-format none --chat-template-kwargs '{"enable_thinking": false}'
CHAT2=http://127.0.0.1:$PORT/v1/chat/completions
check "serve --chat-template-kwargs: no thinking by default" '[ "$(code -d "{$MSG}" "$CHAT2")" = 200 ] && ! grep -q reasoning_content "$TMP/body"'
code -d "{$MSG,\"chat_template_kwargs\":{\"enable_thinking\":true}}" "$CHAT2" >/dev/null
check "serve --reasoning-format none: a request's kwargs override; the thinking stays in content" '[ "$(jget "$TMP/body" "j.choices[0].message.content" "j[\"choices\"][0][\"message\"][\"content\"]")" = "$N" ]'
check "serve: a request's reasoning_format overrides the server's" '[ "$(code -d "{$MSG,\"reasoning_format\":\"auto\",\"chat_template_kwargs\":{\"enable_thinking\":true}}" "$CHAT2")" = 200 ] && [ "$(jget "$TMP/body" "j.choices[0].message.reasoning_content" "j[\"choices\"][0][\"message\"][\"reasoning_content\"]")" = "$R" ]'

# reasoning_effort: the template variable (gpt-oss's template reads it), under chat_template_kwargs' own
printf '%s' "{%- for m in messages %}{{ m.content }}{% endfor %}[effort={{ reasoning_effort | default('unset') }}]" >"$TMP/effort.jinja"
start "$TMP/s3.log" -v --chat-template "$TMP/effort.jinja"
CHAT3=http://127.0.0.1:$PORT/v1/chat/completions
E='"messages":[{"role":"user","content":"Hello"}],"max_tokens":2'
check "serve: reasoning_effort high reaches the template" '[ "$(code -d "{$E,\"reasoning_effort\":\"high\"}" "$CHAT3")" = 200 ] && grep -q "^Hello\[effort=high\]" "$TMP/s3.log"'
check "serve: chat_template_kwargs reasoning_effort wins over the field" '[ "$(code -d "{$E,\"reasoning_effort\":\"high\",\"chat_template_kwargs\":{\"reasoning_effort\":\"low\"}}" "$CHAT3")" = 200 ] && grep -q "^Hello\[effort=low\]" "$TMP/s3.log"'
check "serve: without it the template sees none" '[ "$(code -d "{$E}" "$CHAT3")" = 200 ] && grep -q "^Hello\[effort=unset\]" "$TMP/s3.log"'
check "serve: reasoning_effort extreme -> 400" '[ "$(code -d "{$E,\"reasoning_effort\":\"extreme\"}" "$CHAT3")" = 400 ] && grep -q "\"param\":\"reasoning_effort\"" "$TMP/body"'
check "serve: reasoning_effort on /v1/completions -> 400" '[ "$(code -d "{\"prompt\":\"Hi\",\"reasoning_effort\":\"low\"}" "http://127.0.0.1:$PORT/v1/completions")" = 400 ] && grep -q "chat completions only" "$TMP/body"'

check "serve: bad --reasoning-format refused at start" '! "$CLI" serve "${MODEL[@]}" --port 0 --reasoning-format r1 2>"$TMP/e" && grep -q "reasoning-format expects" "$TMP/e"'
check "serve: bad --chat-template-kwargs refused at start" '! "$CLI" serve "${MODEL[@]}" --port 0 --chat-template-kwargs "{\"a\":" 2>"$TMP/e" && grep -q "chat-template-kwargs" "$TMP/e"'

for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
PIDS=()
check "no sanitizer report" '! grep -q "ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:\|WARNING: ThreadSanitizer" "$TMP"/s*.log'
serve_done
