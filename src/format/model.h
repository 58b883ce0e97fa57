/* format/ — a model file opened and validated: config + named tensors.
 *
 * The three loaders (llama2.c, GGUF, Hugging Face folder) produce the same
 * thing: a config and a table of tensors with GGUF names
 * ("token_embd.weight", "blk.3.attn_q.weight", ...) whose data point into
 * the model's read-only mapping (m->map). Matrices are [out, in] row-major,
 * i.e. ne[0] = in (row length), ne[1] = out, as in GGUF.
 */
#ifndef SLM_MODEL_H
#define SLM_MODEL_H

#include "common/common.h"
#include "common/dtype.h"
#include "format/gguf.h"

typedef enum slm_model_kind { SLM_MODEL_LLAMA2C = 1, SLM_MODEL_GGUF = 2, SLM_MODEL_HF = 3 } slm_model_kind;

typedef struct slm_model_config {
    char arch[32];     /* one of slm_arch_name(): "llama", "qwen2", ... */
    int dim;           /* embedding width */
    int hidden_dim;    /* FFN width */
    int n_layers;
    int n_heads;       /* query heads */
    int n_kv_heads;    /* key/value heads (GQA when < n_heads) */
    int head_dim;      /* per head: dim / n_heads, or the file's key length */
    int vocab_size;
    int context_len;   /* trained context length */
    float rope_base;   /* 10000 for Llama 2 */
    float norm_eps;    /* RMSNorm epsilon */
    int tied_embeddings; /* 1: the LM head is token_embd.weight */
    int rope_neox;     /* 1: rotate pairs (i, i + head_dim/2) (qwen2, every HF folder);
                          0: (2i, 2i+1) */
    int qkv_bias;      /* 1: blk.N.attn_{q,k,v}.bias exist (qwen2) */
    int sliding_window;/* > 0: attend to at most this many most recent rows */
    float rope_scale;  /* linear RoPE scaling: positions are divided by it (1 = none) */
    int rope_freqs;    /* 1: rope_freqs.weight [head_dim/2] divides each pair's frequency
                          (Llama 3 scaling) */
    /* Family features (0 = absent / the default, so loaders that know none
     * of them leave them zero). head_dim above may differ from dim / n_heads
     * (GGUF attention.key_length): Q is [n_heads * head_dim]. */
    int rope_dims;     /* rotated dimensions per head (partial rotary); 0 = head_dim */
    int qk_norm;       /* 1: blk.N.attn_{q,k}_norm.weight [head_dim] RMSNorm each head before RoPE;
                          2: [q_dim] / [kv_dim] RMSNorm the whole Q and K rows (olmo2) */
    float residual_scale; /* granite: the attention and FFN branch outputs times this before their
                             residual add; 0 = 1 */
    float logit_scale;    /* granite: logits divided by this; 0 = 1 */
    int no_pre_norms;  /* 1: no attn_norm / ffn_norm: Q/K/V and the FFN read the residual itself, the
                          post norms normalize the branch outputs (olmo2) */
    int post_norms;    /* 1: blk.N.post_attention_norm / post_ffw_norm on the branch outputs (gemma) */
    int ffn_gelu;      /* 1: GeGLU, gelu_tanh(gate) * up, instead of SwiGLU */
    int swa_pattern;   /* sliding window on which layers: 0 = all; n = layer l when l % n < n - 1 */
    int rope_long;     /* LongRoPE: 1 = rope_factors_long.weight, 2 = rope_factors_short.weight
                          [rope_dims/2] divide each pair's frequency: long when the KV capacity
                          exceeds rope_orig_ctx (as llama.cpp picks by context size) */
    int rope_orig_ctx; /* LongRoPE: the original context length */
    float embed_scale; /* embeddings multiplied by this (gemma: sqrt(dim)); 0 = 1 */
    float attn_scale;  /* query scale; 0 = 1 / sqrt(head_dim) */
    float attn_softcap;  /* > 0: scores = cap * tanh(scores / cap) (gemma2) */
    float final_softcap; /* > 0: logits = cap * tanh(logits / cap) (gemma2) */
    float rope_base_swa; /* RoPE base of sliding-window layers (gemma3: 10000); 0 = rope_base */
    float rope_scale_swa;/* linear RoPE scaling of sliding-window layers; 0 = rope_scale */
    float rope_attn_factor; /* cos/sin multiplier (LongRoPE rope.scaling.attn_factor); 0 = 1 */
    int nope_step;     /* no RoPE on layer l where (l + 1) % nope_step == 0 (smollm3: 4, llama.cpp's
                          n_no_rope_layer_step); 0 = RoPE on every layer */
    /* YaRN (rope.scaling.type "yarn", HF rope_type "yarn"): each pair's angle
     * mixes the interpolated one (positions / rope_scale) and the original,
     * ramping over the pairs between the correction dimensions of
     * yarn_beta_fast and yarn_beta_slow rotations in rope_orig_ctx positions;
     * the magnitude (0.1 ln(factor) + 1, or the file's attention factor) is
     * in rope_attn_factor. */
    int rope_yarn;     /* 1: YaRN; needs rope_scale > 1 and rope_orig_ctx */
    float yarn_beta_fast, yarn_beta_slow; /* rotations (32 and 1 by default) */
    float yarn_ext_factor; /* the ramp's weight (1 by default) */
    /* Mixture of experts (qwen3moe, mixtral as llama with experts, olmoe):
     * every layer's FFN is n_experts SwiGLU experts of width hidden_dim
     * (blk.N.ffn_{gate,up,down}.E.weight), of which each row runs the
     * n_experts_used with the largest router probabilities (softmax of
     * blk.N.ffn_gate_inp.weight [dim, n_experts] times the normed row),
     * weighted by those probabilities, renormalized to sum 1 when
     * expert_norm. 0 = a dense FFN. */
    int n_experts;
    int n_experts_used;
    int expert_norm;
    /* gpt-oss: attention sinks (blk.N.attn_sinks.weight [n_heads]: a logit per
     * head in each softmax's denominator), the output projection's bias
     * (blk.N.attn_output.bias), the router's and the experts' biases
     * (blk.N.ffn_gate_inp.bias, blk.N.ffn_{gate,up,down}.E.bias), and the
     * experts' clamped SwiGLU: min(g, L) * sigmoid(alpha * min(g, L)) *
     * (clamp(u, -L, L) + 1) with L = swiglu_limit when > 0 */
    int attn_sinks;
    int o_bias;
    int expert_bias;
    float swiglu_alpha, swiglu_limit;
    /* Shared expert (qwen2moe, granitemoe's shared variant): a dense SwiGLU
     * FFN of width shared_ffn (blk.N.ffn_{gate,up,down}_shexp.weight) that
     * every row runs beside the routed experts, its output added to their
     * weighted sum; with shared_gate, first multiplied per row by
     * sigmoid(xn . blk.N.ffn_gate_inp_shexp.weight [dim]) (qwen2moe).
     * 0 = none. */
    int shared_ffn;
    int shared_gate;
    /* Leading dense layers (glm4moe's leading_dense_block_count): layers
     * [0, dense_lead) of an MoE model have a dense SwiGLU FFN of width
     * dense_ffn (blk.N.ffn_{gate,up,down}.weight); the rest are MoE layers.
     * 0 = every layer MoE. */
    int dense_lead;
    int dense_ffn;
    /* Routing (general MoE features; glm4moe uses them all): expert_sigmoid
     * 1 = the router's scores are sigmoid(logits) (GGUF expert_gating_func
     * 2), 0 = softmax; expert_sel_bias 1 = blk.N.exp_probs_b.bias
     * [n_experts] is added to the scores to choose the top K only (the
     * weights stay the unbiased scores); expert_scale: the chosen weights
     * (after expert_norm) times this (routed_scaling_factor), 0 = 1. */
    int expert_sigmoid;
    int expert_sel_bias;
    float expert_scale;
    /* Multi-token-prediction layers after the n_layers (glm4moe's
     * nextn_predict_layers): in the file, never compiled (llama.cpp loads
     * and skips them too); n_layers excludes them. */
    int nextn_layers;
    /* Hybrid recurrent models (qwen35: Qwen3.5; qwen35moe: the same layers
     * with a mixture of experts and a gated shared expert as every layer's
     * FFN): layer l is a Gated DeltaNet
     * (linear attention) layer unless (l + 1) % recur_interval == 0, which is
     * a full attention layer; 0 = no recurrent layers. A DeltaNet layer:
     * blk.N.attn_qkv [dim, conv_dim] (Q, K of ssm_k_heads heads and V of
     * ssm_v_heads heads, ssm_state wide each), a causal depthwise conv of
     * ssm_conv taps (ssm_conv1d [ssm_conv, conv_dim]) with SiLU, L2-normed Q
     * and K, per value head a decay exp(softplus(alpha + ssm_dt.bias) *
     * ssm_a) and beta = sigmoid(ssm_beta x), the delta rule on a state of
     * [ssm_state x ssm_state] per value head, RMSNorm (ssm_norm) gated by
     * silu(attn_gate x), ssm_out. Its state (the conv window and the delta
     * state) is fixed-size, held by the runtime beside the KV cache. */
    int recur_interval;
    int ssm_conv;      /* conv taps (ssm.conv_kernel) */
    int ssm_state;     /* key and value head size (ssm.state_size) */
    int ssm_k_heads;   /* key heads (ssm.group_count) */
    int ssm_v_heads;   /* value heads (ssm.time_step_rank), a multiple of ssm_k_heads; value
                          head h reads key head h % ssm_k_heads (llama.cpp's tiled order) */
    int attn_gate;     /* 1: attn_q is [dim, 2 * q_dim], per head its query rows then its gate's;
                          the attention output times sigmoid(gate) (qwen35's full layers) */
    /* Gemma 4 (gemma4): the two kinds of layer differ in shape. The
     * sliding-window layers (slm_layer_swa) take head_dim_swa, n_kv_heads_swa
     * and rope_dims_swa when set (0 = the global layers' head_dim, n_kv_heads,
     * rope dims); the last kv_shared layers have no K/V of their own and
     * attend over the cache of layer slm_layer_kv_src (llama.cpp's rule: the
     * last layer with K/V of the same kind); their FFN is hidden_dim_shared
     * wide when set. ple_dim > 0: per-layer embeddings of that width
     * (per_layer_token_embd, per_layer_model_proj, per_layer_proj_norm; per
     * layer inp_gate, proj, post_norm). v_norm: V RMS-normed without a gain;
     * V is K's projection where a layer has no attn_v. rope_freqs_global:
     * rope_freqs.weight divides the global layers' frequencies only.
     * layer_scale: blk.N.layer_output_scale.weight [1] multiplies each
     * layer's output. */
    int head_dim_swa, n_kv_heads_swa, rope_dims_swa;
    int kv_shared;
    int hidden_dim_shared;
    int ple_dim;
    int v_norm;
    int rope_freqs_global;
    int layer_scale;
    /* Gemma 4 with experts (26B-A4B; its own range of the blob's family
     * record). moe_dense: every layer is an MoE layer that keeps its dense
     * GeGLU FFN (width dense_ffn; ffn_norm, then post_ffw_norm_1 on its
     * output) beside the routed GeGLU experts (their input normed by
     * pre_ffw_norm_2, their weighted sum by post_ffw_norm_2); the two sum
     * into post_ffw_norm. The router reads rmsnorm(x) without a gain times
     * blk.N.ffn_gate_inp.scale [dim] and 1/sqrt(dim); softmax, top K
     * renormalized. expert_down_scale: blk.N.ffn_down_exps.scale [E]
     * multiplies expert e's output (folded into its routing weight). */
    int moe_dense;
    int expert_down_scale;
    /* Encoders (bert, nomic-bert: embedding models, run as llama.cpp's BERT
     * graph does; format/encoder.c): every row attends to every row of its
     * input, no causal limit; the input is token_embd plus row 0 of
     * token_types (when present) plus position_embd (bert's learned
     * positions; nomic-bert rotates Q and K instead), LayerNorm'd by
     * token_embd_norm (gain and bias); each layer is post-norm:
     * x = LN(x + the attention's output) with attn_output_norm, then
     * x = LN(x + the FFN's output) with layer_output_norm; the FFN is up, GELU (tanh form), down (bert) or
     * SwiGLU (nomic-bert); a bias after any matrix where the file has one
     * (blk.N.{attn_q,attn_k,attn_v,attn_output,ffn_up,ffn_down}.bias). No
     * output norm, no LM head: the last layer's rows are the output.
     * 0 = a decoder; 1 = bert; 2 = nomic-bert; 3 = gemma-embedding
     * (EmbeddingGemma: the gemma3 decoder graph, its attention both ways:
     * every row on the global layers, rows within sliding_window / 2 on
     * either side on the window layers; the LM head dropped, and the
     * sentence-transformers dense projections (a GGUF's dense_2 / dense_3,
     * a folder's Dense modules: slm_model_file.dense) applied to the
     * pooled vector when the file has them: engine/embed.c); 4 =
     * modern-bert (ModernBERT: the encoder graph, pre-norm: token_embd
     * LayerNorm'd by token_embd_norm (a gain, no bias, as every norm of
     * it); per layer x += attention(LN(x)) with attn_norm (absent on layer
     * 0: x itself), fused attn_qkv without biases (split at load), neox
     * RoPE with rope_base on the global layers and rope_base_swa on the
     * window layers (layer l global when l % swa_pattern == 0, the first
     * of each period), the window layers attending within sliding_window /
     * 2 rows on either side; then x += down(act(gate) * up) of
     * LN(x) with ffn_norm, the fused ffn_up [dim, 2 x hidden] split into
     * the gate (first half) and up, act GELU (tanh form; ffn_gelu) or SiLU
     * (hidden_activation); output_norm last); 5 = jina-bert-v2 (bert's
     * graph without learned positions: ALiBi instead, each head's scores
     * minus its slope times |i - j|, llama.cpp's largest bias 8; optional
     * LayerNorms of Q and K (attn_q_norm, attn_k_norm, whole rows) and a
     * second attention LayerNorm (attn_norm_2: LN(that + the layer's
     * input)); the FFN GeGLU when the file has a gate (ffn_gate, or a
     * fused ffn_up of 2 x hidden split at load, its bias too), else GELU);
     * 6 = nomic-bert-moe (nomic-embed-text-v2-moe: nomic-bert's attention
     * (fused QKV, here with its bias, split at load too; neox RoPE), bert's
     * GELU FFN with its biases on the dense layers, and on every layer l
     * with l % moe_every == 1 a mixture of n_experts ungated experts
     * (expert_ungated) of width hidden_dim: softmax routing, the top
     * n_experts_used weights as they are (not renormalized), in the
     * post-norm layout: x = LN(x + the experts' weighted sum)). */
    int16_t encoder;
    /* An encoder's experts (nomic-bert-moe), in the bytes of the last int
     * (a blob's config record holds no encoder: these stay 0 there).
     * moe_every: which layers hold the experts (moe_every_n_layers, as
     * llama.cpp reads it): layer l when l % moe_every == 1; 0 = every layer
     * from dense_lead (the decoders); never 1. expert_ungated 1: each
     * expert is up, GELU (tanh form), down, without a gate matrix
     * (blk.N.ffn_{up,down}.E.weight only). */
    uint8_t moe_every;
    uint8_t expert_ungated;
} slm_model_config;

/* Expert e's matrix of layer l: kind 0 gate, 1 up, 2 down; 3..5 their biases (a validated MoE model). */
#define slm_model_expert(m, l, kind, e) ((m)->experts[((size_t)(l) * 6 + (size_t)(kind)) * (size_t)(m)->cfg.n_experts + (size_t)(e)])
/* 1 when layer l's FFN is a mixture of experts (not one of the leading dense layers). */
static inline int slm_layer_moe(const slm_model_config *c, int l) {
    return c->n_experts > 0 && l >= c->dense_lead && (c->moe_every <= 0 || l % c->moe_every == 1);
}
/* The dense FFN's width (an MoE model's leading dense layers: dense_ffn). */
static inline int slm_dense_ffn(const slm_model_config *c) { return c->n_experts ? c->dense_ffn : c->hidden_dim; }
/* Rotated dimensions per head. */
static inline int slm_rope_dims(const slm_model_config *c) { return c->rope_dims > 0 ? c->rope_dims : c->head_dim; }
/* 1 when layer l attends through the sliding window. */
static inline int slm_layer_swa(const slm_model_config *c, int l) {
    if (c->sliding_window <= 0) return 0;
    if (c->encoder == 4) return c->swa_pattern == 0 || l % c->swa_pattern != 0; /* modern-bert: the global layer first */
    return c->swa_pattern <= 1 ? 1 : l % c->swa_pattern < c->swa_pattern - 1;
}

/* 1 when layer l is a recurrent (Gated DeltaNet) layer. */
static inline int slm_layer_recurrent(const slm_model_config *c, int l) {
    return c->recur_interval > 0 && (l + 1) % c->recur_interval != 0;
}
/* A DeltaNet layer's conv channels (Q, K, V), its conv window and its delta
 * state in floats (one sequence). */
static inline int slm_conv_dim(const slm_model_config *c) { return (2 * c->ssm_k_heads + c->ssm_v_heads) * c->ssm_state; }
static inline int64_t slm_conv_state_floats(const slm_model_config *c) {
    return (int64_t)(c->ssm_conv - 1) * slm_conv_dim(c);
}
static inline int64_t slm_delta_state_floats(const slm_model_config *c) {
    return (int64_t)c->ssm_v_heads * c->ssm_state * c->ssm_state;
}

/* Layer l's geometry (gemma4's two kinds of layer; the config's values elsewhere). */
static inline int slm_layer_head_dim(const slm_model_config *c, int l) {
    return c->head_dim_swa > 0 && slm_layer_swa(c, l) ? c->head_dim_swa : c->head_dim;
}
static inline int slm_layer_kv_heads(const slm_model_config *c, int l) {
    return c->n_kv_heads_swa > 0 && slm_layer_swa(c, l) ? c->n_kv_heads_swa : c->n_kv_heads;
}
static inline int slm_layer_rope_dims(const slm_model_config *c, int l) {
    if (c->head_dim_swa > 0 && slm_layer_swa(c, l)) return c->rope_dims_swa > 0 ? c->rope_dims_swa : c->head_dim_swa;
    return slm_rope_dims(c);
}
/* 1 when layer l has K/V of its own (not one of the last kv_shared layers). */
static inline int slm_layer_has_kv(const slm_model_config *c, int l) { return l < c->n_layers - c->kv_shared; }
/* The layer whose KV cache layer l attends over: itself, or for a shared
 * layer the last layer with K/V, or the one before it for a window layer
 * (llama.cpp's rule; validation checks that layer is of the same kind). */
static inline int slm_layer_kv_src(const slm_model_config *c, int l) {
    if (slm_layer_has_kv(c, l)) return l;
    return c->n_layers - c->kv_shared - (slm_layer_swa(c, l) ? 2 : 1);
}
/* Elements of one K (or V) row of layer l's cache; 0 for a shared layer
 * (gemma4) and for a recurrent layer (qwen35: its state instead). */
static inline int slm_layer_kv_dim(const slm_model_config *c, int l) {
    return slm_layer_has_kv(c, l) && !slm_layer_recurrent(c, l) ? slm_layer_kv_heads(c, l) * slm_layer_head_dim(c, l) : 0;
}
/* Layer l's dense FFN width. */
static inline int slm_layer_ffn(const slm_model_config *c, int l) {
    return c->hidden_dim_shared > 0 && !slm_layer_has_kv(c, l) ? c->hidden_dim_shared : slm_dense_ffn(c);
}
/* The widest K/V head of any layer. */
static inline int slm_max_head_dim(const slm_model_config *c) {
    return c->head_dim_swa > c->head_dim ? c->head_dim_swa : c->head_dim;
}

/* 1 when the model runs the encoder graph (bert, nomic-bert, modern-bert, jina-bert-v2, nomic-bert-moe),
 * not a decoder's. */
static inline int slm_encoder_graph(const slm_model_config *c) {
    return c->encoder == 1 || c->encoder == 2 || c->encoder == 4 || c->encoder == 5 || c->encoder == 6;
}

/* 1 when layer l rotates Q and K (RoPE). */
static inline int slm_layer_rope(const slm_model_config *c, int l) { return c->nope_step <= 0 || (l + 1) % c->nope_step != 0; }

/* Weight types the kernels take for matrices (and embedding tables). */
#define SLM_MATRIX_TYPES "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_xs, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m, mxfp4"
int slm_matrix_type_supported(uint32_t t);
/* ne[0..n_dims) as "[a, b, ...]" into buf[cap] (cut to fit); returns buf. */
const char *slm_fmt_shape(char *buf, size_t cap, const int64_t *ne, uint32_t n_dims);

/* Architectures staticlm runs, by their GGUF general.architecture (which
 * slm_model_config.arch holds). The one list every loader, the HF folder
 * families and synth use; SLM_SUPPORTED_ARCHS is the same names for messages
 * (test_model checks that they agree). */
typedef enum slm_arch {
    SLM_ARCH_LLAMA,
    SLM_ARCH_MISTRAL,
    SLM_ARCH_QWEN2,
    SLM_ARCH_QWEN3,
    SLM_ARCH_GEMMA2,
    SLM_ARCH_GEMMA3,
    SLM_ARCH_PHI3,
    SLM_ARCH_SMOLLM3,
    SLM_ARCH_OLMO2,
    SLM_ARCH_GRANITE,
    SLM_ARCH_EXAONE,
    SLM_ARCH_EXAONE4,
    SLM_ARCH_QWEN3MOE,
    SLM_ARCH_OLMOE,
    SLM_ARCH_GRANITEMOE,
    SLM_ARCH_GPT_OSS,
    SLM_ARCH_QWEN2MOE,
    SLM_ARCH_GLM4MOE,
    SLM_ARCH_QWEN35,
    SLM_ARCH_GEMMA4,
    SLM_ARCH_QWEN35MOE,
    SLM_ARCH_BERT,
    SLM_ARCH_NOMIC_BERT,
    SLM_ARCH_GEMMA_EMBEDDING,
    SLM_ARCH_MODERN_BERT,
    SLM_ARCH_JINA_BERT_V2,
    SLM_ARCH_NOMIC_BERT_MOE,
    SLM_ARCH_COUNT
} slm_arch;
#define SLM_SUPPORTED_ARCHS "llama, mistral, qwen2, qwen3, gemma2, gemma3, phi3, smollm3, olmo2, granite, exaone, exaone4, qwen3moe, olmoe, granitemoe, gpt-oss, qwen2moe, glm4moe, qwen35, gemma4, qwen35moe, bert, nomic-bert, gemma-embedding, modern-bert, jina-bert-v2, nomic-bert-moe"
/* The name of a (NULL when out of range). */
const char *slm_arch_name(int a);
/* The architecture called name[0..len) (not NUL-terminated), or -1. */
int slm_arch_find(const char *name, size_t len);

typedef struct slm_tensor {
    char name[64];
    uint32_t type;     /* slm_dtype */
    uint32_t n_dims;
    int64_t ne[4];     /* elements per dim, ne[0] innermost; unused dims = 1 */
    const void *data;  /* into m->map (HF vectors converted to f32: its anonymous tail) */
    uint64_t nbytes;   /* bytes at data */
} slm_tensor;

#define SLM_MAX_FOLDER_META 12
/* sentence-transformers' Dense modules a folder may hold, and what follows their linear map. */
#define SLM_MAX_DENSE 8
enum { SLM_DENSE_IDENTITY = 0, SLM_DENSE_TANH = 1 };

typedef struct slm_model_file {
    char path[1024];
    slm_model_kind kind;
    slm_map map;            /* the whole file, read-only; HF: every shard side by side,
                               then an anonymous area of converted tensors */
    slm_map src_map;        /* after slm_model_quantize: the source file's mapping (its GGUF
                               metadata points into it); map then holds the weights */
    slm_model_config cfg;
    slm_tensor *tensors;    /* [n_tensors] */
    int n_tensors;
    int *by_name;           /* [n_by_name] tensor indices sorted by name (built by
                               slm_model_validate; slm_model_tensor bisects it) */
    int n_by_name;          /* n_tensors when the index is current, else lookups scan */
    slm_gguf *gguf;         /* GGUF metadata (tokenizer etc.); NULL for llama2.c */
    /* MoE: [n_layers][6][n_experts] the experts' gate, up and down matrices,
     * then their biases (NULL without expert_bias) (built by
     * slm_model_validate; NULL for a dense model); the shared expert's
     * matrices are ordinary named tensors */
    const slm_tensor **experts;
    /* hf: a Hugging Face folder's tokenizer.json ("DIR/tokenizer.json"); an
     * encoder's (bert) folder without one: its vocab.txt; empty when the
     * folder has none (or the model is not a folder). */
    char tokenizer_json[1024];
    int tok_unigram;        /* hf: config.json says xlm-roberta: its tokenizer must be Unigram */
    int cls_pool;           /* the rows a classifier head reads (SLM_POOLING_MEAN, _CLS, _LAST); 0: the
                               architecture's (engine/embed.c). hf: ModernBERT's classifier_pooling;
                               a GGUF's {arch}.classifier.pooling_type is read by engine/embed.c */
    int qkv_fused;          /* 1: the file's Q/K/V matrices are one (attn_qkv, qkv_proj: phi3,
                               nomic-bert, modern-bert), split at load into attn_q/k/v row ranges;
                               slm_model_quantize gives the three attn_qkv's type */
    /* hf: sentence-transformers' Dense modules, in modules.json's order
     * after Pooling (format/hf_modules.c): module k's tensors are
     * name.weight [in -> out] and name.bias [out] (when it has one), act
     * what follows them (SLM_DENSE_*). None for other files: a GGUF's
     * dense_2 / dense_3 pair is engine/embed.c's. */
    int n_dense;
    struct {
        char name[16];      /* "dense_K", K the module's place in modules.json */
        int act;            /* SLM_DENSE_IDENTITY, SLM_DENSE_TANH */
    } dense[SLM_MAX_DENSE];
    /* hf: metadata a GGUF of the folder would hold as these keys, as text
     * (slm_model_meta's form): generation_config.json's sampling values as
     * general.sampling.* (format/hf_generation.c) */
    int n_meta;
    struct {
        char key[40];
        char val[64];
    } meta[SLM_MAX_FOLDER_META];
} slm_model_file;

/* Open a model by what path holds (a folder: Hugging Face; GGUF magic; else
 * llama2.c), validate the config and every tensor the decoder needs (name,
 * type, shape, bounds). On failure m is closed and err says why. */
slm_status slm_model_open(slm_model_file *m, const char *path, slm_err *err);
void slm_model_close(slm_model_file *m);
/* 1 when the model at path is an encoder (an embedding model), read from
 * as little as says so: a GGUF's architecture key, a folder's config.json;
 * 0 for anything else, a file that does not parse included (its load says
 * why). No tensor is read or converted. */
int slm_model_peek_encoder(const char *path);
/* A tensor by name: O(log n) once slm_model_validate has indexed the table,
 * a linear scan before (loaders, a table changed since). NULL when absent. */
const slm_tensor *slm_model_tensor(const slm_model_file *m, const char *name);

/* Weight quantization (format/quantize.c): m's F32 / F16 / BF16 matrices
 * (token_embd, output and the layers' attention and feed-forward
 * projections, experts included) rewritten as file type wt (an
 * slm_weight_type) with llama-quantize's choice of type per tensor; a
 * matrix already quantized is refused. n_threads 0: all cores; progress:
 * 1 a summary line on stderr, 2 also a live percentage (a terminal). On failure m
 * is unchanged, but for the final validation of the new types (then the caller closes it). */
slm_status slm_model_quantize(slm_model_file *m, int wt, int n_threads, int progress, slm_err *err);
/* llama-quantize's type (llama-quant.cpp's rules) under file type wt for a
 * layer's matrix of a role below, rows of `width`: i of n is an attn_v's
 * (or attn_qkv's) place among the model's attn_v and attn_qkv tensors, an
 * ffn_down's layer among all (MTP layers included); model: SLM_QMODEL_*
 * (slm_quant_model_flags). The output matrix (or the tied embedding) takes
 * slm_quant_output_type. K-quants of a width not a multiple of 256 fall
 * back to 32-block types, what no block fits to F16. 0 for
 * SLM_WEIGHTS_AS_IS. */
enum {
    SLM_QROLE_OTHER = 0,   /* attn_q, ffn_gate, ffn_up, the untied token_embd, ... */
    SLM_QROLE_ATTN_V,      /* attn_v, attn_qkv */
    SLM_QROLE_ATTN_K,
    SLM_QROLE_ATTN_OUTPUT,
    SLM_QROLE_FFN_DOWN     /* ffn_down, ffn_down_exps, ffn_down_shexp */
};
enum { SLM_QMODEL_8_EXPERTS = 1, SLM_QMODEL_70B = 2, SLM_QMODEL_GQA4 = 4 };
uint32_t slm_quant_layer_type(int wt, int role, int i, int n, int64_t width, unsigned model);
uint32_t slm_quant_output_type(int wt, int64_t width);
/* SLM_QMODEL_8_EXPERTS for 8 experts, SLM_QMODEL_70B for what llama.cpp
 * calls a 70B model (llama with GQA, qwen2: 80 layers), SLM_QMODEL_GQA4
 * for 4 or more query heads a KV head. */
unsigned slm_quant_model_flags(const char *arch, int n_layers, int n_heads, int n_kv_heads, int n_experts);
/* The --weight-type names, for messages. */
#define SLM_WEIGHT_TYPE_NAMES "q8_0, q4_0, q5_0, q4_k_s, q4_k_m, q5_k_s, q5_k_m, q6_k, iq4_nl, iq4_xs"
const char *slm_weight_type_name(int wt);

/* Loaders (called by slm_model_open). */
slm_status slm_llama2c_load(slm_model_file *m, slm_err *err);
slm_status slm_gguf_model_load(slm_model_file *m, slm_err *err);
/* hf: a Hugging Face folder (m->path): config.json and model.safetensors,
 * or shards listed by model.safetensors.index.json; llama, mistral, qwen2,
 * qwen3, gemma2, gemma3 (gemma3_text, or Gemma3ForConditionalGeneration's
 * text part), phi3, smollm3, olmo2 / olmo3, granite, exaone4 and the
 * mixtures of experts qwen3_moe, mixtral, olmoe and gpt_oss (MXFP4 experts
 * re-packed to GGML's layout), Qwen3.5's hybrids qwen3_5 / qwen3_5_moe
 * (DeltaNet tensors made at load: hf_qwen35.c) and the encoders bert and
 * xlm-roberta (hf_bert.c; docs/architecture.md).
 * Maps every shard into one reserved address range (m->map covers it all),
 * converts norm and bias vectors to f32 in an anonymous area at its end, and
 * names tensors as GGUF does. Needs cJSON (else SLM_ERR_UNSUPPORTED). */
slm_status slm_hf_model_load(slm_model_file *m, slm_err *err);
/* A sentence-transformers folder's pooling (the Pooling module modules.json
 * names, else 1_Pooling; its config.json): 1 mean, 2 cls, 3 last token
 * (GGUF's pooling_type values), read in the order llama.cpp's converter
 * reads them; -1 when the folder has none (or it is not JSON); -2 for a mode
 * staticlm has not (max, weighted mean). */
int slm_hf_pooling(const char *dir);
/* config.json (len bytes, `name` for messages) -> c. When it asks for
 * Llama 3 RoPE scaling, *rope_freqs receives head_dim/2 frequency divisors
 * (slm_malloc'd; as llama.cpp's converter computes rope_freqs.weight) and
 * c->rope_freqs = 1; for LongRoPE (phi3) the long then the short factors,
 * rope_dims/2 each, and c->rope_long = 2; otherwise *rope_freqs = NULL. */
slm_status slm_hf_parse_config(slm_model_config *c, float **rope_freqs, const char *json, size_t len,
                               const char *name, slm_err *err);
/* gemma4 (format/gemma4.c): the keys that give the layer shapes, read in
 * place of the plain ones (block_count, the window list, head counts and FFN
 * widths that may be per-layer lists); then the rest of its keys, after the
 * head size. slm_gemma4_check_config: the gemma4 fields in range (zero on
 * other families; no recurrent layers or gated query beside them). */
slm_status slm_gguf_gemma4_shape(const slm_gguf *g, const char *file, slm_model_config *c, slm_err *err);
slm_status slm_gguf_gemma4_params(const slm_gguf *g, const char *file, slm_model_config *c, slm_err *err);
/* What every gemma4 is, whatever file it came from (gemma4.c): embeddings
 * times sqrt(dim), GeGLU, post norms, per-head Q/K norms, V normed without
 * a gain, query scale 1. */
void slm_gemma4_fixed(slm_model_config *c);
slm_status slm_gemma4_check_config(const slm_model_config *c, const char *file, slm_err *err);
/* Encoders (format/encoder.c): slm_gguf_bert_family is 1 for the
 * architectures slm_gguf_encoder_params reads (bert, nomic-bert,
 * nomic-bert-moe, modern-bert, jina-bert-v2), which it does after the
 * common keys (the LayerNorm epsilon, attention.causal false or absent);
 * slm_encoder_check_tensors validates every tensor the encoder graph
 * reads, in place of the decoder's. */
int slm_gguf_bert_family(const char *arch);
slm_status slm_gguf_encoder_params(const slm_gguf *g, const char *file, const char *A, slm_model_config *c,
                                   slm_err *err);
slm_status slm_encoder_check_tensors(const slm_model_file *m, const char *file, slm_err *err);
/* Tensor `name` present with shape [ne0] (is_vector) or [ne0, ne1]; else the error names it. */
slm_status slm_model_check_tensor(const slm_model_file *m, const char *file, const char *name, int64_t ne0,
                                  int64_t ne1, int is_vector, slm_err *err);
/* Checks shared by every loader: the name index (duplicate names refused),
 * tensors whose bytes overlap refused (whatever their kind), config ranges
 * and required tensors. */
slm_status slm_model_validate(slm_model_file *m, slm_err *err);

#endif
