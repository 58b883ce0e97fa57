#!/usr/bin/env bash
# Build every tests/fuzz/fuzz_*.c as a libFuzzer target (clang, ASan + UBSan)
# and run each for SECONDS (default 20) on a seed corpus made here. The
# library is compiled with clang's -Wall -Wextra -Werror here, so CI holds
# both compilers' warnings (the main build uses gcc).
#   tests/fuzz/run.sh [SECONDS]
# Work files go to ${FUZZ_DIR:-build-fuzz}. Exits non-zero if a target fails
# to build or finds a crash (the reproducer is left in that folder).
set -euo pipefail
cd "$(dirname "$0")/../.."
SECS=${1:-20}
OUT=${FUZZ_DIR:-build-fuzz}
SHARED=${SLM_SHARED_DIR:-../shared}
CC=${FUZZ_CC:-clang}
mkdir -p "$OUT"
if ! command -v "$CC" >/dev/null; then echo "fuzz: $CC not found, skipping"; exit 0; fi

# the library, without the CLI and the server
LIB=$(ls src/*/*.c | grep -v -e "^src/cli/" -e "^src/server/")
FLAGS="-std=c11 -g -O1 -Wall -Wextra -Wshadow -Wno-unused-parameter -Werror -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Iinclude -Isrc -DSLM_SHARED_DIR=\"$SHARED\""

# libraries the library links (as CMakeLists.txt finds them)
EXTRA_LIBS=""
for pc in libpcre2-8 libcjson; do
  if pkg-config --exists "$pc" 2>/dev/null; then
    EXTRA_LIBS="$EXTRA_LIBS $(pkg-config --libs "$pc")"
    FLAGS="$FLAGS $(pkg-config --cflags "$pc")"
  fi
done
pkg-config --exists libcjson 2>/dev/null && FLAGS="$FLAGS -DSLM_HAVE_CJSON"

# seeds
seeds() { # target -> corpus dir
  local t=$1 d="$OUT/corpus_$1"
  mkdir -p "$d"
  case "$t" in
    fuzz_gguf)
      [ -f "$SHARED/vocab/ggml-vocab-llama-spm.gguf" ] && cp -f "$SHARED/vocab/ggml-vocab-llama-spm.gguf" "$d/"
      # tiny mixtures of experts (3-D expert stacks, the MoE keys; qwen2moe's shared expert and its gate; glm4moe's dense
      # layer, selection bias and MTP layer) and tiny encoders (bert, nomic-bert: their WordPiece vocabularies), when a
      # CLI is built
      for c in build/staticlm build-asan/staticlm; do
        [ -x "$c" ] && "$c" synth --shape custom --arch qwen3moe --experts 4 --experts-used 2 --expert-ffn 32 --dim 32 \
          --layers 1 --heads 2 --kv-heads 1 --n-vocab 300 --type q8_0 -o "$d/moe.gguf" >/dev/null 2>&1 &&
          "$c" synth --shape custom --arch gpt-oss --experts 4 --experts-used 2 --expert-ffn 32 --dim 32 --layers 2 \
          --heads 2 --kv-heads 1 --n-vocab 300 --sliding-window 4 --type q8_0 -o "$d/gpt-oss.gguf" >/dev/null 2>&1 &&
          "$c" synth --shape custom --arch qwen2moe --experts 4 --experts-used 2 --expert-ffn 32 --shared-ffn 64 --dim 32 \
          --layers 1 --heads 2 --kv-heads 1 --n-vocab 300 --type q8_0 -o "$d/qwen2moe.gguf" >/dev/null 2>&1 &&
          "$c" synth --shape custom --arch glm4moe --experts 4 --experts-used 2 --expert-ffn 32 --dense-lead 1 --nextn 1 \
          --dim 32 --layers 2 --heads 2 --kv-heads 1 --n-vocab 300 --type q8_0 -o "$d/glm4moe.gguf" >/dev/null 2>&1 &&
          "$c" synth --shape custom --arch bert --dim 32 --layers 1 --heads 2 --ffn 64 --ctx 16 --n-vocab 300 \
          --type q8_0 -o "$d/bert.gguf" >/dev/null 2>&1 &&
          "$c" synth --shape custom --arch nomic-bert --dim 32 --layers 1 --heads 2 --ffn 64 --ctx 16 --n-vocab 300 \
          --type f16 -o "$d/nomic-bert.gguf" >/dev/null 2>&1 && break
      done ;;
    fuzz_template)
      for f in "$SHARED"/templates/*.jinja tests/corpus/templates/*.jinja; do [ -f "$f" ] && cp -f "$f" "$d/"; done ;;
    fuzz_tokenizer)
      for f in "$SHARED"/vocab/*.inp; do [ -f "$f" ] && head -c 512 "$f" > "$d/$(basename "$f")"; done ;;
    fuzz_wpm) # texts; and a serialized record (version 1, 2 tokens, ids 0/1, lowercase, strip_accents)
      printf 'Hello World! caf\303\251 na\303\257ve \344\275\240\345\245\275 [SEP] <u> a$b\tHELLO' > "$d/text"
      printf '\001\0\0\0\002\0\0\0\001\0\0\0\001\0\0\0\0\0\0\0\001\0\0\0\001\001\0\0\003\0\0\0\005\0\0\0[UNK]\001\0\0\0\004\0\0\0\342\226\201a' > "$d/record" ;;
    fuzz_ugm) # mode 0: a text; 1: a record (4 tokens, no charsmap); 2: charsmap damage triples
      printf '\000Hello World! Le caf\303\251 \357\274\241\357\274\242 \357\254\201ne \342\221\240 <s> x </s> <ud> \346\235\261 \360\237\230\200\t  a' > "$d/text"
      printf '\001\001\0\0\0\004\0\0\0\377\377\377\377\001\0\0\0\002\0\0\0\0\0\0\0\377\377\377\377\001\0\0\001\0\0\0\0\0\0\0\0''\0\0\0\0\003\0\0\0\005\0\0\0<pad>\0\0\0\0\003\0\0\0\004\0\0\0</s>\0\0\0\0\002\0\0\0\005\0\0\0<unk>\0\0\200\277\001\0\0\0\004\0\0\0\342\226\201a' > "$d/record"
      printf '\002\020\000\001\040\000\200\377\001\004' > "$d/damage" ;;
    fuzz_ugm_hf) # 0: a tokenizer.json; 1: a tokenizer_config.json; 2: base64
      printf '\000{"normalizer": {"type": "Precompiled", "precompiled_charsmap": "AAAAAAA="}, "pre_tokenizer": {"type": "Metaspace", "add_prefix_space": true}, "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}}, {"SpecialToken": {"id": "</s>"}}], "pair": [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}}, {"SpecialToken": {"id": "</s>"}}, {"SpecialToken": {"id": "</s>"}}, {"Sequence": {"id": "B"}}, {"SpecialToken": {"id": "</s>"}}], "special_tokens": {"<s>": {"ids": [0]}, "</s>": {"ids": [2]}}}, "added_tokens": [{"id": 1, "content": "<pad>", "special": true}, {"id": 6, "content": "<mask>", "special": false}], "model": {"type": "Unigram", "unk_id": 3, "vocab": [["<s>", 0], ["<pad>", 0], ["</s>", 0], ["<unk>", 0], ["\342\226\201a", -1.5], ["b", -2], ["<mask>", 0]]}}' > "$d/tokenizer.json"
      printf '\001{"bos_token": "<s>", "eos_token": {"content": "</s>"}, "pad_token": "<pad>", "clean_up_tokenization_spaces": false, "add_eos_token": false}' > "$d/config.json"
      printf '\002SGVsbG8gd29ybGQ=' > "$d/b64" ;;
    fuzz_http) # first byte: 1 = chat, 0 = completions, 2 = /v1/embeddings, 4 = /embedding, 6 = /infill, 8 = /v1/rerank; then the body
      printf '\010{"query":"what is a cat?","documents":["a cat","a dog"],"top_n":1}' > "$d/rerank.json"
      printf '\010{"query":"q","texts":["x"],"return_text":true}' > "$d/rerank_tei.json"
      printf '\006{"input_prefix":["def f(",1,"a"],"input_suffix":"\\n","input_extra":[{"filename":"u.py","text":"x = 1"},{"text":"y"}],"prompt":"  ","n_predict":8,"temperature":0,"stream":true}' > "$d/infill.json"
      printf '\002{"input":["Once upon a time",[1,2,3]],"encoding_format":"base64","dimensions":64,"model":"m"}' > "$d/embed.json"
      printf '\004{"content":[[1,403],[7]],"embd_normalize":-1}' > "$d/embed_native.json"
      printf '\001{"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":5,"temperature":0.5,"top_p":0.9,"top_k":3,"seed":7,"stop":["a","bc"],"stream":true,"stream_options":{"include_usage":true},"n":1,"model":"m"}' > "$d/chat.json"
      printf '\000{"prompt":["Once upon a time"],"max_completion_tokens":16,"stop":"x"} ' > "$d/completion.json"
      printf '\001{"messages":[{"role":"developer","content":null},{"role":"tool","content":"\\u00e9\\ud83d\\ude00"}]} junk' > "$d/trailing.json"
      printf '\000{"prompt":"a","min_p":0.1,"repeat_penalty":1.2,"repeat_last_n":-1,"presence_penalty":0.5,"frequency_penalty":-0.5,"logit_bias":{"3":-100,"17":2.5},"tools":[],"tool_choice":"none","response_format":{"type":"text"},"logprobs":0,"best_of":1,"suffix":""}' > "$d/sampling.json"
      printf '\001{"messages":[{"role":"assistant","content":"a","reasoning_content":"r"}],"reasoning_format":"deepseek","chat_template_kwargs":{"enable_thinking":false}}' > "$d/reasoning.json"
      printf '\001{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":4,"reasoning_effort":"low","chat_template_kwargs":{"a":1}}' > "$d/logprobs.json"
      printf '\000{"prompt":[1,403,407],"logprobs":3,"n_predict":-1,"ignore_eos":true,"mirostat":0,"typical_p":1}' > "$d/prompt_ids.json"
      printf '\001{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object","properties":{"a":{"type":"integer"},"b":{"enum":["x",1]}},"required":["a"]}}}}' > "$d/json_schema.json"
      printf '\000{"prompt":"a","grammar":"root ::= [a-z]+ (\\" \\" root)?","response_format":{"type":"json_object"}}' > "$d/grammar.json"
      printf '\000{"prompt":"a","json_schema":{"items":{"$ref":"#"},"maxItems":2}}' > "$d/schema_field.json"
      printf '\001{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\\"a\\":1}"}}]},{"role":"tool","tool_call_id":"c1","name":"f","content":"ok"}],"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}],"tool_choice":"auto","parallel_tool_calls":false}' > "$d/tools.json" ;;
    fuzz_grammar) # first byte even: grammar text, 0x01, text to match; odd: a JSON schema (& 3 == 3: as Gemma 4's call arguments)
      printf '\000root ::= "{" ws (kv ("," ws kv)*)? "}"\nkv ::= str ":" ws [0-9]+\nstr ::= "\\"" [^"\\\\]* "\\""\nws ::= [ \\t\\n]*\001{"a": 1, "b":22}' > "$d/json.txt"
      printf '\000root ::= (x | y){2,5} "." # comment\nx ::= [a-c\\x41-\\u00e9]+ | "\\U0001F600"\ny ::= ("(" root ")")?\001ab\xc3\xa9(ab.).' > "$d/repeat.txt"
      printf '\000root ::= [^\\n]* .?\001anything \xe2\x82\xac' > "$d/any.txt"
      printf '\001{"type":"object","properties":{"name":{"type":"string","maxLength":5},"n":{"type":"integer"},"t":{"type":"array","items":{"enum":["a",1,null]},"minItems":1,"maxItems":3}},"required":["name"],"additionalProperties":{"type":"boolean"}}' > "$d/schema.json"
      printf '\001{"$defs":{"node":{"anyOf":[{"type":"null"},{"type":"object","properties":{"next":{"$ref":"#/$defs/node"}}}]}},"$ref":"#/$defs/node"}' > "$d/ref.json"
      printf '\001{"type":["string","number","boolean"],"const":"x","oneOf":[{"const":{"a":[1]}}]}' > "$d/types.json"
      printf '\013{"type":"object","properties":{"city":{"type":"string","maxLength":12},"unit":{"enum":["c","f"]},"l":{"type":"array","items":{"type":"object"}},"odd key":{"const":{"a":[1,null]}}},"required":["city"]}' > "$d/gemma.json"
      printf '\037{"type":"object","additionalProperties":true,"properties":{"x":{"$ref":"#/properties/x"}}}' > "$d/gemma_ref.json" ;;
    fuzz_reasoning) # first byte: format, prompt, piece size; then a reply (also read as kwargs JSON)
      printf '\011<think>\nLet me see: 2 < 3.\n</think>\n\nThe answer is 4.' > "$d/deepseek.txt"
      printf '\022<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>commentary to=f <|constrain|>json<|message|>{}<|call|>' > "$d/harmony.txt"
      printf '\013<|channel>thought\nIs 2 < 3?<channel|>Yes.<|channel>thought\n<channel|><channel|>' > "$d/gemma4.txt"
      printf '{"enable_thinking": false, "a": [1, 2.5, null, {"b": "\\u00e9\\ud83d\\ude00"}]}' > "$d/kwargs.json" ;;
    fuzz_toolcall) # first byte: format, prompt, piece size; then a reply (also read as tools JSON)
      printf '\021Hi <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "d": [1, "}"]}}\n</tool_call>' > "$d/hermes.txt"
      printf '\022{"type": "function", "name": "f", "parameters": {"x": 1.5}}' > "$d/llama3.txt"
      printf '\023[TOOL_CALLS][{"name": "a", "arguments": {}, "id": "abc123def"}, {"name": "b", "arguments": "{\\"k\\": 1}"}]' > "$d/mistral.txt"
      printf '\024<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>' > "$d/harmony.txt"
      printf '\025Ok <tool_call>\n<function=f>\n<parameter=a>\n{"b": [1, 2]}\n</parameter>\n<parameter=c>\ntwo\nlines\n</parameter>\n</function>\n</tool_call><function=g>\n</function>' > "$d/xml.txt"
      printf '\026Sure.<|tool_call>call:get_weather{city:<|"|>Paris "x"<|"|>,n:[1,-2.5,{a:True}],q:None}<tool_call|> and <|tool_call>call:g{}' > "$d/gemma4.txt"
      printf '[{"type": "function", "function": {"name": "f", "arguments": {"a": "\\u00e9"}}}]' > "$d/tools.json" ;;
    fuzz_safetensors) # the bytes are read as a safetensors image, as config.json and as generation_config.json
      printf '{"bos_token_id": 1, "do_sample": true, "eos_token_id": [1, 106], "temperature": 0.6, "top_k": 20, "top_p": 0.95, "min_p": 0.0, "sequence": "edkypmxt", "mirostat": 2, "penalty_last_n": -1, "transformers_version": "4.51.0"}' > "$d/generation_config.json"
      printf '{"model_type": "gemma3", "text_config": {"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 4, "sliding_window": 8, "sliding_window_pattern": 3, "rope_scaling": {"rope_type": "linear", "factor": 2.0}, "layer_types": ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"]}}' > "$d/gemma3.json"
      printf '{"model_type": "gemma2", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 100, "max_position_embeddings": 128, "query_pre_attn_scalar": 24, "final_logit_softcapping": null, "sliding_window": 4}' > "$d/gemma2.json"
      printf '{"model_type": "phi3", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 128, "partial_rotary_factor": 0.75, "original_max_position_embeddings": 16, "rope_scaling": {"type": "longrope", "long_factor": [1, 2, 3, 4, 5, 6], "short_factor": [1, 1, 1, 1, 1, 1]}}' > "$d/phi3.json"
      printf '{"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 24, "vocab_size": 100, "max_position_embeddings": 128, "rope_scaling": {"rope_type": "llama3"}}' > "$d/qwen3.json"
      printf '{"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}, "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}' > "$d/gemma3_v5.json"
      printf '{"model_type": "olmo3", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 4, "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 128, "sliding_window": 8, "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"], "rope_scaling": {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 32, "attention_factor": 1.2, "beta_fast": 32, "beta_slow": 1}}' > "$d/olmo3.json"
      printf '{"model_type": "granite", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100, "max_position_embeddings": 128, "embedding_multiplier": 12.0, "attention_multiplier": 0.015625, "residual_multiplier": 0.22, "logits_scaling": 8.0, "tie_word_embeddings": true}' > "$d/granite.json"
      printf '{"model_type": "exaone4", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100, "max_position_embeddings": 128, "sliding_window": 8, "sliding_window_pattern": "LLLG"}' > "$d/exaone4.json"
      printf '{"model_type": "qwen3_moe", "hidden_size": 64, "moe_intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 100, "max_position_embeddings": 128, "num_experts": 8, "num_experts_per_tok": 2, "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": []}' > "$d/qwen3_moe.json"
      printf '{"model_type": "qwen2_moe", "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100, "max_position_embeddings": 128, "num_experts": 8, "num_experts_per_tok": 2, "norm_topk_prob": false, "decoder_sparse_step": 1, "mlp_only_layers": [], "use_sliding_window": false, "sliding_window": 32768, "max_window_layers": 21, "qkv_bias": true}' > "$d/qwen2_moe.json"
      printf '{"model_type": "mixtral", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100, "max_position_embeddings": 128, "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": null}' > "$d/mixtral.json"
      printf '{"model_type": "olmoe", "hidden_size": 64, "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 128, "num_experts": 16, "num_experts_per_tok": 4, "norm_topk_prob": false, "clip_qkv": null}' > "$d/olmoe.json"
      printf '{"model_type": "gpt_oss", "attention_bias": true, "experts_per_token": 2, "head_dim": 16, "hidden_act": "silu", "hidden_size": 64, "intermediate_size": 32, "layer_types": ["sliding_attention", "full_attention"], "max_position_embeddings": 128, "num_attention_heads": 4, "num_experts_per_tok": 2, "num_hidden_layers": 2, "num_key_value_heads": 2, "num_local_experts": 4, "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "lm_head"], "quant_method": "mxfp4"}, "rms_norm_eps": 1e-05, "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 4.0, "original_max_position_embeddings": 32, "rope_type": "yarn", "truncate": false}, "rope_theta": 150000, "sliding_window": 6, "swiglu_limit": 7.0, "tie_word_embeddings": false, "vocab_size": 100}' > "$d/gpt_oss.json"
      printf '{"model_type": "qwen3_5_moe", "text_config": {"model_type": "qwen3_5_moe_text", "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 160, "max_position_embeddings": 256, "rms_norm_eps": 1e-06, "hidden_act": "silu", "attn_output_gate": true, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16, "linear_num_key_heads": 2, "linear_num_value_heads": 4, "full_attention_interval": 4, "mtp_num_hidden_layers": 1, "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25, "mrope_section": [11, 11, 10], "mrope_interleaved": true}, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32, "mlp_only_layers": []}}' > "$d/qwen3_5_moe.json"
      # the encoders' configs: nomic_bert (v1.5; v2-moe with its experts), modernbert (transformers 4's keys; 5's
      # layer_types and rope_parameters, as a reranker with its classifier keys), jina-bert-v2 (bert with alibi)
      printf '{"model_type": "nomic_bert", "architectures": ["NomicBertModel"], "n_embd": 64, "n_inner": 96, "n_layer": 2, "n_head": 4, "vocab_size": 100, "type_vocab_size": 2, "n_positions": 8192, "max_trained_positions": 2048, "rotary_emb_base": 1000, "rotary_emb_fraction": 1.0, "rotary_emb_interleaved": false, "rotary_emb_scale_base": null, "layer_norm_epsilon": 1e-12, "activation_function": "swiglu", "causal": false, "prenorm": false, "parallel_block": false, "use_rms_norm": false, "qkv_proj_bias": false, "mlp_fc1_bias": false, "mlp_fc2_bias": false}' > "$d/nomic_bert.json"
      printf '{"model_type": "nomic_bert", "n_embd": 64, "n_inner": 96, "n_layer": 4, "n_head": 4, "vocab_size": 100, "type_vocab_size": 1, "n_positions": 2048, "max_trained_positions": 2048, "rotary_emb_base": 10000, "rotary_emb_fraction": 1.0, "layer_norm_epsilon": 1e-05, "activation_function": "gelu", "causal": false, "prenorm": false, "qkv_proj_bias": true, "mlp_fc1_bias": true, "mlp_fc2_bias": true, "moe_every_n_layers": 2, "num_experts": 8, "moe_top_k": 2, "num_shared_experts": 0, "moe_normalize_expert_weights": false, "expert_choice_router": false}' > "$d/nomic_bert_moe.json"
      printf '{"model_type": "modernbert", "architectures": ["ModernBertForMaskedLM"], "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 4, "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 128, "global_attn_every_n_layers": 3, "local_attention": 8, "global_rope_theta": 160000.0, "local_rope_theta": 10000.0, "norm_eps": 1e-05, "hidden_activation": "gelu", "norm_bias": false, "attention_bias": false, "mlp_bias": false}' > "$d/modernbert.json"
      printf '{"model_type": "modernbert", "architectures": ["ModernBertForSequenceClassification"], "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 4, "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 128, "global_attn_every_n_layers": 2, "layer_types": ["full_attention", "sliding_attention", "full_attention", "sliding_attention"], "local_attention": 8, "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 160000.0}, "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}, "hidden_activation": "gelu", "classifier_pooling": "mean", "classifier_activation": "gelu", "classifier_bias": false, "id2label": {"0": "LABEL_0"}}' > "$d/modernbert_v5.json"
      printf '{"model_type": "bert", "architectures": ["JinaBertForMaskedLM"], "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 128, "vocab_size": 100, "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu", "position_embedding_type": "alibi", "feed_forward_type": "geglu", "emb_pooler": "mean", "pad_token_id": 0}' > "$d/jina_bert_v2.json"
      printf '{"model_type": "gemma4", "text_config": {"model_type": "gemma4_text", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2, "num_global_key_value_heads": 1, "attention_k_eq_v": true, "head_dim": 16, "global_head_dim": 32, "vocab_size": 100, "vocab_size_per_layer_input": 100, "hidden_size_per_layer_input": 8, "num_kv_shared_layers": 3, "use_double_wide_mlp": true, "sliding_window": 8, "final_logit_softcapping": 30.0, "layer_types": ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "full_attention"], "rope_parameters": {"full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e6}, "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}, "enable_moe_block": true, "num_experts": 8, "top_k_experts": 2, "moe_intermediate_size": 32}}' > "$d/gemma4.json" ;;
    fuzz_blob)
      # a small blob: stories260K with short programs, compiled by the CLI
      [ -f "$SHARED/models/stories260K.bin" ] || { echo "$d"; return; }
      local args=(compile -m "$SHARED/models/stories260K.bin" -z "$SHARED/models/tok512.bin"
                  --max-prompt-len 4 --min-response-len 4 -o "$d/stories260K.blob")
      # and one with batch programs (--parallel 2: batch.2 over 2 KV regions, n_seqs in the config)
      for c in build/staticlm build-asan/staticlm; do
        [ -x "$c" ] && "$c" "${args[@]}" >/dev/null 2>&1 &&
          "$c" "${args[@]/%stories260K.blob/stories260K_p2.blob}" --parallel 2 >/dev/null 2>&1 && break
      done
      if [ ! -f "$d/stories260K.blob" ]; then # no (recent) CLI: build one
        cmake -S . -B "$OUT/cli" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
          cmake --build "$OUT/cli" -j2 --target staticlm_cli >/dev/null &&
          "$OUT/cli/staticlm" "${args[@]}" >/dev/null 2>&1 || echo "fuzz: could not make a seed blob" >&2
      fi
      # embedding programs (.slm.embed): a bert cross-encoder (its head in the weights, embed.BxS programs), a
      # modern-bert (LayerNorms without bias, windows both ways), a nomic-bert-moe (ungated experts on layers
      # 1 and 3: the layer rule in .slm.embed), and stories260K's embed.T beside its decoder
      for c in build/staticlm build-asan/staticlm "$OUT/cli/staticlm"; do
        [ -x "$c" ] || continue
        "$c" synth --shape custom --arch bert --dim 32 --layers 1 --heads 2 --ffn 64 --ctx 16 --n-vocab 300 \
          --pooling rank --type q8_0 -o "$d/bert.gguf" >/dev/null 2>&1 &&
          "$c" compile -m "$d/bert.gguf" --max-prompt-len 16 -o "$d/bert.blob" >/dev/null 2>&1
        "$c" synth --shape custom --arch modern-bert --dim 32 --layers 3 --heads 2 --ffn 64 --ctx 16 --n-vocab 300 \
          --type f16 -o "$d/modern.gguf" >/dev/null 2>&1 &&
          "$c" compile -m "$d/modern.gguf" --max-prompt-len 16 -o "$d/modern.blob" >/dev/null 2>&1
        "$c" synth --shape custom --arch nomic-bert-moe --dim 32 --layers 4 --heads 2 --ffn 64 --ctx 16 \
          --n-vocab 300 --experts 4 --experts-used 2 --type q8_0 -o "$d/moe.gguf" >/dev/null 2>&1 &&
          "$c" compile -m "$d/moe.gguf" --max-prompt-len 16 -o "$d/nomic-moe.blob" >/dev/null 2>&1
        "$c" "${args[@]/%stories260K.blob/stories260K-embed.blob}" --embeddings >/dev/null 2>&1
        rm -f "$d/bert.gguf" "$d/modern.gguf" "$d/moe.gguf"
        [ -f "$d/bert.blob" ] && break
      done ;;
  esac
  echo "$d"
}

# The library once, as objects every target links (instrumented for the
# fuzzer without its main): building it again per target took most of the
# fuzz stage's time. A target may name sources outside the library on a line
# " * fuzz-sources: FILE..."; those are compiled here too.
OBJ="$OUT/obj"
mkdir -p "$OBJ"
EXTRA_SRC=$(sed -n 's/^ \* fuzz-sources: //p' tests/fuzz/fuzz_*.c | tr ' ' '\n' | sort -u)
echo "== library objects"
LIB_FLAGS=${FLAGS/-fsanitize=fuzzer,/-fsanitize=fuzzer-no-link,}
export CC LIB_FLAGS OBJ
# shellcheck disable=SC2086
compile_one() { $CC $LIB_FLAGS -c "$1" -o "$OBJ/$(echo "$1" | tr / _).o"; }
export -f compile_one
# shellcheck disable=SC2086
if ! printf '%s\n' $LIB $EXTRA_SRC | xargs -P "$(nproc)" -I{} bash -c 'compile_one "$1"' _ {}; then
  echo "fuzz: the library failed to build"; exit 1
fi
obj_of() { echo "$OBJ/$(echo "$1" | tr / _).o"; }
LIB_OBJ=$(for f in $LIB; do obj_of "$f"; done)

rc=0
for src in tests/fuzz/fuzz_*.c; do
  t=$(basename "$src" .c)
  echo "== $t: build"
  extra=$(for f in $(sed -n 's/^ \* fuzz-sources: //p' "$src"); do obj_of "$f"; done)
  # shellcheck disable=SC2086
  if ! $CC $FLAGS "$src" $extra $LIB_OBJ $EXTRA_LIBS -lm -lpthread -o "$OUT/$t"; then echo "fuzz: $t failed to build"; rc=1; continue; fi
  corpus=$(seeds "$t")
  echo "== $t: run ${SECS}s"
  maxlen=4096
  for f in "$corpus"/*; do [ -f "$f" ] && [ "$(stat -c %s "$f")" -gt "$maxlen" ] && maxlen=$(stat -c %s "$f"); done
  if ! ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
       "$OUT/$t" -max_total_time="$SECS" -max_len="$maxlen" -rss_limit_mb=4096 -malloc_limit_mb=1024 \
       -artifact_prefix="$OUT/$t-" -print_final_stats=1 "$corpus" > "$OUT/$t.log" 2>&1; then
    echo "fuzz: $t FAILED (see $OUT/$t.log)"; tail -40 "$OUT/$t.log"; rc=1
  else
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$OUT/$t.log" | sed "s/^/  $t: /" || true
  fi
done
exit $rc
