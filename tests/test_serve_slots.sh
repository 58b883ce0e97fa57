#!/usr/bin/env bash
# staticlm serve with --parallel slots (continuous batching), on free
# loopback ports:
#  - 4 concurrent greedy completions equal `staticlm run` on the same
#    prompts, whatever runs beside them (the slots decode in batch programs);
#  - a request past --queue gets 503 while the slot and the queue are taken;
#    GET /metrics counts them, the completed requests, the one that left and the tokens;
#  - a client that disconnects frees its slot for the next request;
#  - a shared system prompt is prefilled once: the next request reports it in
#    usage.prompt_tokens_details.cached_tokens;
#  - a model whose end-of-turn id differs from its EOS stops at the EOT
#    (chat's own stop at the EOT: tests/test_session.c).
# usage: test_serve_slots.sh CLI SHARED_DIR
set -u
CLI=$1 SHARED=$2
MODEL=(-m "$SHARED/models/stories260K.bin" -z "$SHARED/models/tok512.bin")
. "$(dirname "$0")/serve/lib.sh"
serve_needs
serve_tmp test_slots
H=(-H 'Content-Type: application/json')

# start NAME ARGS...: a server, its log $TMP/NAME.log; sets U; stop ends it
start() { serve_start "$TMP/$1.log" "${@:2}"; }
stop() { kill -TERM "$SPID" 2>/dev/null; wait "$WPID" 2>/dev/null; }
# the "text" of a completion body
text_of() { sed -n 's/.*"text":"\(\([^"\\]\|\\.\)*\)".*/\1/p' "$1" | head -1; }

# ---- 4 slots: greedy completions equal run
start four "${MODEL[@]}" --parallel 4 --queue 8
check "4 slots decoded together" 'grep -q "4 slots," "$TMP/four.log"'
PROMPTS=("Once upon a time" "Lily and Tom went" "The cat sat on" "One day, a big dog")
W=()
for i in 0 1 2 3; do
  curl -s -m 60 "${H[@]}" -d "{\"prompt\":\"${PROMPTS[$i]}\",\"max_tokens\":40,\"temperature\":0}" \
    "$U/v1/completions" >"$TMP/c.$i" &
  W+=($!)
done
wait "${W[@]}"
for i in 0 1 2 3; do
  "$CLI" run "${MODEL[@]}" -p "${PROMPTS[$i]}" -n 40 --temp 0 2>/dev/null >"$TMP/r.$i"
  want=$(head -c -1 "$TMP/r.$i" | tr '\n' '\1' | sed "s/^${PROMPTS[$i]}//" | sed 's/\x01/\\n/g')
  got=$(text_of "$TMP/c.$i")
  check "slot reply $i equals run" '[ -n "$got" ] && [ "$got" = "$want" ]'
  [ "$got" = "$want" ] || { echo "  got:  $got"; echo "  want: $want"; }
done

# ---- the prefix cache: a shared system prompt
SYS="You are a helpful storyteller who tells short stories about animals, children and their friends in the park."
chat() { curl -s -m 60 "${H[@]}" -d "{\"messages\":[{\"role\":\"system\",\"content\":\"$SYS\"},{\"role\":\"user\",\"content\":\"$1\"}],\"max_tokens\":8,\"temperature\":0}" "$U/v1/chat/completions"; }
chat "Tell me about a cat" >"$TMP/p1"
chat "Tell me about a dog" >"$TMP/p2"
c1=$(grep -o '"cached_tokens":[0-9]*' "$TMP/p1" | sed 's/.*://')
c2=$(grep -o '"cached_tokens":[0-9]*' "$TMP/p2" | sed 's/.*://')
check "first request: at most BOS cached ($c1)" '[ -n "$c1" ] && [ "$c1" -le 1 ]'
check "second request reuses the system prompt's rows (cached_tokens $c2 > 20)" '[ -n "$c2" ] && [ "$c2" -gt 20 ]'
# two at once on different slots still share it (the engine's prefix cache)
chat "Tell me about a bird" >"$TMP/p3" &
W=($!)
chat "Tell me about a fish" >"$TMP/p4" &
W+=($!)
wait "${W[@]}"
c3=$(grep -o '"cached_tokens":[0-9]*' "$TMP/p3" | sed 's/.*://')
c4=$(grep -o '"cached_tokens":[0-9]*' "$TMP/p4" | sed 's/.*://')
check "concurrent requests on two slots both reuse it ($c3, $c4)" '[ "${c3:-0}" -gt 20 ] && [ "${c4:-0}" -gt 20 ]'
stop

# ---- one slot: 503 past --queue, and a disconnected client's slot is reused
# (rand288 decodes slowly enough to keep the slot busy)
BIGM=(-m "$SHARED/models/rand288.bin" -z "$SHARED/models/llama2-tokenizer.bin" -t 1)
start one "${BIGM[@]}" --parallel 1 --queue 1 --max-prompt-len 64 --min-response-len 960
LONG="{\"prompt\":\"Once\",\"max_tokens\":900,\"temperature\":0}"
W=()
for k in 1 2 3 4 5 6; do
  curl -s -m 60 "${H[@]}" -d "$LONG" "$U/v1/completions" -o "$TMP/q$k" -w '%{http_code}' >"$TMP/q$k.code" &
  W+=($!)
done
wait "${W[@]}"
n200=$(cat "$TMP"/q?.code | grep -o 200 | wc -l)
n503=0
for k in 1 2 3 4 5 6; do
  [ "$(cat "$TMP/q$k.code")" = 503 ] && grep -q queue_full "$TMP/q$k" && n503=$((n503 + 1))
done
check "6 requests at once on 1 slot + 1 queue place: $n200 completed, $n503 got a clean 503" \
  '[ "$n200" -ge 2 ] && [ "$n503" -ge 1 ] && [ $((n200 + n503)) = 6 ]'
# a streaming client that leaves after its first event (head closes the pipe)
curl -s -N -m 30 "${H[@]}" -d "{\"prompt\":\"Once\",\"max_tokens\":900,\"temperature\":0,\"stream\":true}" \
  "$U/v1/completions" 2>/dev/null | head -c 1 >/dev/null
t0=$(date +%s%N)
code=$(curl -s -m 60 "${H[@]}" -d '{"prompt":"Once","max_tokens":4,"temperature":0}' "$U/v1/completions" -o "$TMP/q4" -w '%{http_code}')
ms=$((($(date +%s%N) - t0) / 1000000))
check "after a client left, its slot serves the next request (200 in $ms ms)" '[ "$code" = 200 ] && [ "$ms" -lt 5000 ]'
for _ in $(seq 1 100); do grep -q "client gone" "$TMP/one.log" && break; sleep 0.1; done
check "the server saw it go" 'grep -q "client gone" "$TMP/one.log"'
grep -q "client gone" "$TMP/one.log" || tail -3 "$TMP/one.log"
# GET /metrics counts what happened: the 503s, the completed, the one that left, the tokens
# (each prompt "Once" is 6 tokens in rand288's 512-token cut of Llama 2's vocabulary)
metric() { sed -n "s/^$1 //p" "$TMP/metrics"; }
curl -s -m 10 "$U/metrics" -o "$TMP/metrics"
ctok=0
for f in "$TMP"/q?; do n=$(sed -n 's/.*"completion_tokens":\([0-9]*\).*/\1/p' "$f"); ctok=$((ctok + ${n:-0})); done
check "/metrics: $n503 rejected, $((n200 + 1)) ok, 1 cancelled, >= $ctok tokens predicted" \
  '[ "$(metric staticlm_requests_rejected_total)" = "$n503" ] && [ "$(metric "staticlm_requests_total{outcome=\"ok\"}")" = $((n200 + 1)) ] && [ "$(metric "staticlm_requests_total{outcome=\"cancelled\"}")" = 1 ] && [ "$(metric staticlm_tokens_predicted_total)" -ge "$ctok" ] && [ "$(metric staticlm_prompt_tokens_total)" = $((6 * (n200 + 2))) ] && [ "$(metric staticlm_slots)" = 1 ] && grep -q "^# TYPE staticlm_decode_steps_total counter" "$TMP/metrics"'
grep -v "^#" "$TMP/metrics" | tr '\n' ' '; echo
stop

# ---- a long prompt while another slot decodes goes in in pieces (--prefill-chunk),
# and its reply still equals run's
start chunk "${BIGM[@]}" --parallel 2 --prefill-chunk 8 --max-prompt-len 64 --min-response-len 960 -v
# a stream decoding on one slot (the KV capacity, 256, gives it ~250 steps): the long prompt is sent
# once its first tokens are out
curl -s -N -m 120 "${H[@]}" -d '{"prompt":"Once","max_tokens":600,"temperature":0,"stream":true}' "$U/v1/completions" -o "$TMP/k1" &
W=($!)
for _ in $(seq 1 500); do grep -q '"text":"[^"]' "$TMP/k1" 2>/dev/null && break; sleep 0.01; done
LP="Once upon a time there was a little girl who lived in a small house near the woods with her mother and her dog"
curl -s -m 120 "${H[@]}" -d "{\"prompt\":\"$LP\",\"max_tokens\":12,\"temperature\":0}" "$U/v1/completions" -o "$TMP/k2"
wait "${W[@]}"
"$CLI" run "${BIGM[@]}" --max-prompt-len 64 --min-response-len 960 -p "$LP" -n 12 --temp 0 2>/dev/null >"$TMP/kr"
want=$(head -c -1 "$TMP/kr" | tr '\n' '\1' | sed "s/^ *$LP//" | sed 's/\x01/\\n/g')
got=$(text_of "$TMP/k2")
check "a prompt prefilled in pieces beside a decoding slot replies as run does" '[ -n "$got" ] && [ "$got" = "$want" ]'
[ "$got" = "$want" ] || { echo "  got:  $got"; echo "  want: $want"; }
pieces=$(grep -o 'went in in [0-9]* pieces' "$TMP/chunk.log" | head -1 | grep -o '[0-9]*')
check "the long prompt went in in pieces of 8 tokens (${pieces:-none})" '[ -n "$pieces" ] && [ "$pieces" -ge 3 ]'
check "the decoding slot's stream completed" 'grep -q "\"finish_reason\":\"length\"" "$TMP/k1"'
stop

# ---- a model whose EOT differs from its EOS: generation stops at the EOT
if command -v python3 >/dev/null; then
  "$CLI" convert "${MODEL[@]}" -o "$TMP/eot.gguf" 2>/dev/null
  # the reply without an EOT, then its 3rd piece's token as EOT (tokenizer.ggml.bos_token_id renamed)
  start eot0 -m "$TMP/eot.gguf" --parallel 2
  curl -s -m 60 "${H[@]}" -d '{"prompt":"Once upon a time","max_tokens":12,"temperature":0,"logprobs":null}' \
    "$U/v1/completions" >"$TMP/e0"
  stop
  full=$(text_of "$TMP/e0")
  # a token of the reply: the 4th generated one as the tokenizer splits the text
  np=$("$CLI" tokenize -m "$TMP/eot.gguf" -p "Once upon a time" 2>/dev/null | wc -w)
  X=$("$CLI" tokenize -m "$TMP/eot.gguf" -p "Once upon a time$(printf '%b' "$full")" 2>/dev/null | awk -v k=$((np + 4)) '{print $k}')
  if [ -n "$X" ]; then
    python3 - "$TMP/eot.gguf" "$X" <<'EOF'
import struct, sys
p, x = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, 'rb').read())
k = b'tokenizer.ggml.bos_token_id'
i = b.index(k)
b[i:i + len(k)] = b'tokenizer.ggml.eot_token_id'
assert struct.unpack_from('<I', b, i + len(k))[0] == 4
struct.pack_into('<I', b, i + len(k) + 4, x)
open(p, 'wb').write(bytes(b))
EOF
    start eot -m "$TMP/eot.gguf" --parallel 2
    curl -s -m 60 "${H[@]}" -d '{"prompt":"Once upon a time","max_tokens":12,"temperature":0}' "$U/v1/completions" >"$TMP/e1"
    stop
    short=$(text_of "$TMP/e1")
    check "serve stops at the EOT: finish_reason stop, a prefix of the reply without it" \
      'grep -q "\"finish_reason\":\"stop\"" "$TMP/e1" && [ -n "$short" ] && [ "${#short}" -lt "${#full}" ] && [ "${full#"$short"}" != "$full" ]'
    ct=$(grep -o '"completion_tokens":[0-9]*' "$TMP/e1" | sed 's/.*://')
    check "usage counts the tokens before the EOT ($ct)" '[ -n "$ct" ] && [ "$ct" -lt 12 ]'
  else
    echo "SKIP: EOT check (run --print-ids unavailable)"
  fi
else
  echo "SKIP: EOT check (no python3)"
fi

check "no sanitizer report in the servers' logs" '! grep -q "Sanitizer\|runtime error" "$TMP"/*.log'
grep -h -A20 "Sanitizer\|runtime error" "$TMP"/*.log | head -60
serve_done
