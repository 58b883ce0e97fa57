/* staticlm synth's shared parts (cli/synth.c; gemma4's tensors in
 * cli/synth_gemma4.c; the encoders' (bert, nomic-bert, modern-bert) in
 * cli/synth_encoder.c; the vocabulary in cli/synth_vocab.c; --help in
 * cli/synth_help.c). */
#ifndef SLM_CLI_SYNTH_H
#define SLM_CLI_SYNTH_H

#include <stdint.h>
#include <stdio.h>

#include "common/dtype.h"
#include "format/gguf.h"
#include "format/model.h"

typedef struct synth_shape {
    const char *name, *arch; /* arch: "llama", "qwen2" or "mistral" */
    int dim, n_layers, n_heads, n_kv_heads, ffn, vocab, ctx;
    float rope_base, eps;
    int tied;
    int llama3_rope; /* rope_freqs.weight (Llama 3.1+ scaling: factor 32, 1, 4, 8192) */
    /* families (0 = the default) */
    int head_dim;    /* attention.key_length when not dim / n_heads (qwen3, gemma) */
    int rope_dims;   /* rope.dimension_count below head_dim (phi3: partial rotary) */
    int window;      /* attention.sliding_window (gemma) */
    int orig_ctx;    /* phi3: LongRoPE factors for contexts above this */
    float yarn;      /* YaRN factor (olmo2 as Olmo 3: global layers), original context yarn_orig */
    int yarn_orig;
    float mup[4];    /* granite: embedding, attention, residual multipliers, logits scaling */
    int experts, experts_used, expert_ffn; /* MoE: experts, used per token, their width (0: ffn) */
    int shared_ffn;  /* the shared expert's width (qwen2moe: gated; granitemoe; glm4moe: a multiple of
                        the experts'), 0 = none */
    /* glm4moe: leading dense layers (width ffn), trailing MTP layers (written, not run), per-head
     * Q/K norms, the routed weights' scale */
    int dense_lead, nextn, qk_norm;
    float routed_scale;
    /* gemma4: the window layers' head size, KV-shared trailing layers, per-layer embedding width,
     * the window's layer period (the window on l % p < p - 1), the global layers' KV heads (0: as the
     * window's), their partial rotary (rotated / head size x 4: 1 = a quarter), the FFN width of the
     * KV-shared layers (0: ffn), no attn_v on the global layers (V = K) */
    int head_dim_swa, kv_shared, ple, swa_period, kv_heads_global, rot_quarters, ffn_shared, k_eq_v;
    /* qwen35: Gated DeltaNet layers but every interval-th; conv taps, key/value head size, key and
     * value heads (0: from the heads: conv 4, head size head_dim / 2, the query heads twice as key heads) */
    int interval, ssm_conv, ssm_state, ssm_k, ssm_v;
    /* encoders (bert, nomic-bert): token types (type_vocab_size), the pooling_type written (1 mean, 2 cls) */
    int type_vocab, pooling;
} synth_shape;

typedef struct synth {
    slm_gguf_writer *w;
    void **bufs;
    int n_bufs, cap_bufs;
    uint64_t seed, n_tensors, n_params, n_bytes;
    float std;
    float *row; /* scratch row (f32), widest row */
    uint64_t type_count[SLM_DTYPE_COUNT];
} synth;

/* GGUF general.file_type (llama_ftype) and the matrix types of --type. */
typedef struct synth_type {
    const char *name;
    uint32_t matrix, ftype;
    int wt; /* the slm_weight_type of its per-tensor rules; SLM_WEIGHTS_AS_IS: every matrix `matrix` */
} synth_type;

/* The command line: the shape's name, type and overrides (-1: keep). */
typedef struct synth_args {
    const char *shape_name, *type_name, *out, *arch, *vocab_file, *name;
    uint64_t seed;
    float std;
    int o_dim, o_layers, o_heads, o_kv, o_ffn, o_vocab, o_ctx, o_tied;
    float o_rope, o_eps;
    int window;
    int experts, experts_used, expert_ffn, shared_ffn;
    int dense_lead, nextn, qk_norm; /* -1: the shape's */
    float expert_scale;
    int kv_shared; /* gemma4: -1 = from the shape */
    int pooling;   /* {arch}.pooling_type to write (-1: none written) */
    int non_causal;/* 1: write {arch}.attention.causal = false */
} synth_args;

/* Add a tensor [ne0, ne1] of `type`: init 0 = normal(std), 1 = ones,
 * 2 = the given f32 values; 0 when it could not be made. */
int synth_add(synth *s, const char *name, uint32_t type, int64_t ne0, int64_t ne1, int init, const float *vals);
/* A 3-D tensor [ne0, ne1, ne2] of normal weights (experts' matrices); 0 when it could not be made. */
int synth_add3(synth *s, const char *name, uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2);
/* The types per tensor: a layer's matrix of role SLM_QROLE_* (i of n as
 * slm_quant_layer_type's) and the output matrix (or the tied embedding),
 * by llama-quantize's rules (format/quantize.c); the float types as they
 * are. */
uint32_t synth_mtype(const synth_type *ty, const synth_shape *sh, int role, int i, int n, int64_t width);
uint32_t synth_otype(const synth_type *ty, int64_t width);

/* gemma4 (cli/synth_gemma4.c): the shape's defaults and overrides (0 or an
 * exit code), its metadata keys, its tensors (0 when one could not be
 * made). */
int synth_gemma4_shape(const synth_args *a, synth_shape *sh);
void synth_gemma4_metadata(slm_gguf_writer *w, const synth_shape *sh);
int synth_gemma4_tensors(synth *s, const synth_shape *sh, const synth_type *ty);

/* bert, nomic-bert, modern-bert (cli/synth_encoder.c): 1 for an encoder architecture;
 * the shape's encoder parts and checks (0 or an exit code); its metadata
 * keys after general.*; its tensors (0 when one could not be made). */
int synth_is_encoder(const char *arch);
#define SYNTH_MOE_EVERY 2 /* nomic-bert-moe: experts on layer l when l % 2 == 1 (nomic-embed-text-v2-moe) */
int synth_encoder_shape(const synth_args *a, synth_shape *sh);
void synth_encoder_metadata(slm_gguf_writer *w, const synth_shape *sh, const synth_type *ty);
int synth_encoder_tensors(synth *s, const synth_shape *sh, const synth_type *ty);

/* staticlm synth --help (cli/synth_help.c). */
void synth_usage(FILE *f);

#endif
