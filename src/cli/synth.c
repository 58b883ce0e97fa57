/* staticlm synth: random-weight GGUF models of real shapes, for benchmarks
 * and tests, that staticlm and llama.cpp both load.
 *
 * Weights are normal with a small std (0.02 by default), norms are 1.0, all
 * from a fixed seed (each tensor seeded from the seed and its index, so the
 * values do not depend on the type). The file carries the metadata a
 * converted Hugging Face model carries (the llama.cpp keys) and a
 * vocabulary copied from a vocab file (default
 * ../shared/vocab/ggml-vocab-llama-spm.gguf, SentencePiece, 32000 tokens; or
 * a byte-level BPE one, tokenizer.ggml.model "gpt2", with its merges): a
 * shape with a bigger vocabulary gets the file's padded with unique normal
 * tokens "<synth_N>" (never produced by the tokenizer: no merge chain
 * reaches them); a smaller one (custom shapes) keeps the first N tokens
 * (SPM: N >= 259 keeps <unk>, <s>, </s> and the 256 byte tokens, so any text
 * still encodes; BPE: synth_vocab.c says what a cut keeps). The encoders
 * (bert, nomic-bert: cli/synth_encoder.c) get a generated WordPiece
 * vocabulary of the shape's size instead (vocab_wpm).
 *
 * Types mirror what llama.cpp writes for each file type:
 *   f32, f16, bf16: every matrix in that type (bf16: GGUF type 30, file type
 *             32, llama_ftype's MOSTLY_BF16, as convert_hf_to_gguf.py
 *             --outtype bf16 and llama-quantize ... BF16 write it);
 *   q8_0, q4_0, q5_0, q4_k_s, q4_k_m, q5_k_s, q5_k_m, q6_k, iq4_nl, iq4_xs: as
 *             llama-quantize's file types of those names, the type of each
 *             tensor by llama-quant.cpp's rules (format/quantize.c,
 *             synth_mtype): e.g. q4_k_m's matrices Q4_K, the output matrix
 *             (output.weight, or the tied token_embd.weight) Q6_K, attn_v
 *             and ffn_down Q6_K in the layers use_more_bits picks; a K-quant
 *             whose width is not a multiple of 256 falls back as
 *             llama-quant.cpp's do (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0);
 * norm vectors (and qwen2's biases, rope_freqs) stay F32. A matrix whose rows
 * do not fit the block size falls back to F16 (custom shapes only).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli/cli.h"
#include "common/common.h"
#include "common/dtype.h"
#include "format/gguf.h"
#include "format/model.h"
#include "cli/synth.h"
#include "cli/synth_vocab.h"

/* Values from each model's config.json on the Hugging Face hub. */
static const synth_shape k_shapes[] = {
    {"smollm2-135m", "llama", 576, 30, 9, 3, 1536, 49152, 8192, 100000.0f, 1e-5f, 1, 0, 0, 0, 0, 0, 0.0f, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"tinyllama-1.1b", "llama", 2048, 22, 32, 4, 5632, 32000, 2048, 10000.0f, 1e-5f, 0, 0, 0, 0, 0, 0, 0.0f, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"llama-3.2-1b", "llama", 2048, 16, 32, 8, 8192, 128256, 131072, 500000.0f, 1e-5f, 1, 1, 0, 0, 0, 0, 0.0f, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"qwen2.5-0.5b", "qwen2", 896, 24, 14, 2, 4864, 151936, 32768, 1000000.0f, 1e-6f, 1, 0, 0, 0, 0, 0, 0.0f, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"qwen3-0.6b", "qwen3", 1024, 28, 16, 8, 3072, 151936, 40960, 1000000.0f, 1e-6f, 1, 0, .head_dim = 128},
    {"gemma-2-2b", "gemma2", 2304, 26, 8, 4, 9216, 256000, 8192, 10000.0f, 1e-6f, 1, 0, .head_dim = 256,
     .window = 4096},
    {"gemma-3-1b", "gemma3", 1152, 26, 4, 1, 6912, 262144, 32768, 1000000.0f, 1e-6f, 1, 0, .head_dim = 256,
     .window = 512},
    {"phi-4-mini", "phi3", 3072, 32, 24, 8, 8192, 200064, 131072, 10000.0f, 1e-5f, 1, 0, .rope_dims = 96,
     .orig_ctx = 4096},
    {"smollm3-3b", "smollm3", 2048, 36, 16, 4, 11008, 128256, 65536, 5000000.0f, 1e-6f, 1, 0, 0, 0, 0, 0, 0.0f, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"granite-3.3-2b", "granite", 2048, 40, 32, 8, 8192, 49159, 131072, 10000000.0f, 1e-5f, 1, 0,
     .mup = {12.0f, 0.015625f, 0.22f, 8.0f}},
    {"olmo-3-7b", "olmo2", 4096, 32, 32, 32, 11008, 100278, 65536, 500000.0f, 1e-6f, 0, 0, .window = 4096,
     .yarn = 8.0f, .yarn_orig = 8192},
    {"qwen3-30b-a3b", "qwen3moe", 2048, 48, 32, 4, 6144, 151936, 40960, 1000000.0f, 1e-6f, 0, 0, .head_dim = 128,
     .experts = 128, .experts_used = 8, .expert_ffn = 768},
    {"olmoe-1b-7b", "olmoe", 2048, 16, 16, 16, 1024, 50304, 4096, 10000.0f, 1e-5f, 0, 0, .experts = 64,
     .experts_used = 8},
    {"gpt-oss-20b", "gpt-oss", 2880, 24, 64, 8, 2880, 201088, 131072, 150000.0f, 1e-5f, 0, 0, .head_dim = 64,
     .window = 128, .yarn = 32.0f, .yarn_orig = 4096, .experts = 32, .experts_used = 4, .expert_ffn = 2880},
    {"mixtral-8x7b", "llama", 4096, 32, 32, 8, 14336, 32000, 32768, 1000000.0f, 1e-5f, 0, 0, .experts = 8,
     .experts_used = 2},
    {"qwen1.5-moe-a2.7b", "qwen2moe", 2048, 24, 16, 16, 5632, 151936, 8192, 1000000.0f, 1e-6f, 0, 0, .experts = 60,
     .experts_used = 4, .expert_ffn = 1408, .shared_ffn = 5632},
    {"glm-4.5-air", "glm4moe", 4096, 46, 96, 8, 10944, 151552, 131072, 1000000.0f, 1e-5f, 0, 0, .head_dim = 128,
     .experts = 128, .experts_used = 8, .expert_ffn = 1408, .dense_lead = 1, .nextn = 1,
     .routed_scale = 1.0f},
    /* Gemma 4 (gemma4): the global layers' head size in head_dim, the window layers' in head_dim_swa */
    {"gemma-4-e2b", "gemma4", 1536, 35, 8, 1, 6144, 262144, 131072, 1000000.0f, 1e-6f, 1, 0, .head_dim = 512,
     .window = 512, .head_dim_swa = 256, .kv_shared = 20, .ple = 256, .swa_period = 5, .rot_quarters = 1,
     .ffn_shared = 12288},
    {"gemma-4-e4b", "gemma4", 2560, 42, 8, 2, 10240, 262144, 131072, 1000000.0f, 1e-6f, 1, 0, .head_dim = 512,
     .window = 512, .head_dim_swa = 256, .kv_shared = 18, .ple = 256, .swa_period = 6, .rot_quarters = 1},
    {"gemma-4-31b", "gemma4", 5376, 60, 32, 16, 21504, 262144, 262144, 1000000.0f, 1e-6f, 1, 0, .head_dim = 512,
     .window = 1024, .head_dim_swa = 256, .swa_period = 6, .kv_heads_global = 4, .rot_quarters = 1, .k_eq_v = 1},
    /* gemma-4-26B-A4B: every layer's dense FFN (2112) beside 128 experts of 704, 8 per token */
    {"gemma-4-26b-a4b", "gemma4", 2816, 30, 16, 8, 2112, 262144, 262144, 1000000.0f, 1e-6f, 1, 0, .head_dim = 512,
     .window = 1024, .head_dim_swa = 256, .swa_period = 6, .kv_heads_global = 2, .rot_quarters = 1, .k_eq_v = 1,
     .experts = 128, .experts_used = 8, .expert_ffn = 704},
    /* Qwen3.5-0.8B's text model: 3 DeltaNet layers of 4, a full attention layer with a gated query,
     * partial rotary 0.25 (interleaved M-RoPE sections 11, 11, 10) */
    {"qwen3.5-0.8b", "qwen35", 1024, 24, 8, 2, 3584, 248320, 262144, 10000000.0f, 1e-6f, 1, 0, .head_dim = 256,
     .interval = 4, .ssm_conv = 4, .ssm_state = 128, .ssm_k = 16, .ssm_v = 16},
    /* Qwen3.5-35B-A3B's text model: Qwen3.5's layers with 256 experts of 512, 8 per token, and a
     * shared expert of 512 behind its sigmoid gate in every layer; 16 key and 32 value heads of 128
     * in the DeltaNet layers (ffn: the experts' width; no feed_forward_length is written) */
    {"qwen3.5-35b-a3b", "qwen35moe", 2048, 40, 16, 2, 512, 248320, 262144, 10000000.0f, 1e-6f, 0, 0, .head_dim = 256,
     .experts = 256, .experts_used = 8, .expert_ffn = 512, .shared_ffn = 512, .interval = 4, .ssm_conv = 4,
     .ssm_state = 128, .ssm_k = 16, .ssm_v = 32},
    /* encoders (embedding models): token types, the pooling_type written (1 mean, 2 cls); nomic-bert's
     * RoPE base 1000 (bert has learned positions: its rope_base is unused) */
    {"bge-small-en-v1.5", "bert", 384, 12, 12, 12, 1536, 30522, 512, 1000.0f, 1e-12f, 0, 0, .type_vocab = 2,
     .pooling = 2},
    {"all-minilm-l6-v2", "bert", 384, 6, 12, 12, 1536, 30522, 512, 1000.0f, 1e-12f, 0, 0, .type_vocab = 2,
     .pooling = 1},
    {"bge-base-en-v1.5", "bert", 768, 12, 12, 12, 3072, 30522, 512, 1000.0f, 1e-12f, 0, 0, .type_vocab = 2,
     .pooling = 2},
    {"nomic-embed-text-v1.5", "nomic-bert", 768, 12, 12, 12, 3072, 30522, 2048, 1000.0f, 1e-12f, 0, 0,
     .type_vocab = 2, .pooling = 1},
    /* nomic-embed-text-v2-moe: 8 ungated GELU experts of 3072, 2 per token, on every second layer; XLM-R's
     * vocabulary (--vocab-file a t5 one); trained for 512 positions (the converter's context) */
    {"nomic-embed-text-v2-moe", "nomic-bert-moe", 768, 12, 12, 12, 3072, 250048, 512, 10000.0f, 1e-5f, 0, 0,
     .experts = 8, .experts_used = 2, .type_vocab = 1, .pooling = 1},
    /* XLM-RoBERTa (bert in GGUF, a SentencePiece unigram vocabulary in the real files: pass one with
     * --vocab-file): the context is max_position_embeddings less the 2 rows the converter cuts;
     * one token type. bge-m3 (cls pooling; snowflake-arctic-embed-l-v2.0 is the same shape),
     * multilingual-e5-base (mean), bge-reranker-v2-m3 (bge-m3 with a classifier head: --pooling rank) */
    {"bge-m3", "bert", 1024, 24, 16, 16, 4096, 250002, 8192, 1000.0f, 1e-5f, 0, 0, .type_vocab = 1, .pooling = 2},
    {"multilingual-e5-base", "bert", 768, 12, 12, 12, 3072, 250002, 512, 1000.0f, 1e-5f, 0, 0, .type_vocab = 1,
     .pooling = 1},
    {"bge-reranker-v2-m3", "bert", 1024, 24, 16, 16, 4096, 250002, 8192, 1000.0f, 1e-5f, 0, 0, .type_vocab = 1,
     .pooling = 4},
    /* nomic-ai/modernbert-embed-base (ModernBERT-base's shape: GeGLU of 1152, a global layer first in every
     * 3, the others a window of 128; RoPE base 160000, the window layers' 10000) */
    {"modernbert-embed-base", "modern-bert", 768, 22, 12, 12, 1152, 50368, 8192, 160000.0f, 1e-5f, 0, 0,
     .window = 128, .type_vocab = 2, .pooling = 1},
    /* jinaai/jina-embeddings-v2-base-en: bert without learned positions (ALiBi), GeGLU of 3072 */
    {"jina-embeddings-v2-base-en", "jina-bert-v2", 768, 12, 12, 12, 3072, 30528, 8192, 1000.0f, 1e-12f, 0, 0,
     .type_vocab = 2, .pooling = 1},
    /* a tiny default for tests; every field can be overridden */
    {"custom", "llama", 64, 2, 4, 2, 160, 512, 256, 10000.0f, 1e-5f, 0, 0, 0, 0, 0, 0, 0.0f, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
};

/* ---- random numbers ------------------------------------------------------ */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef struct rng {
    uint64_t s[4];
} rng;

static void rng_seed(rng *r, uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ull);
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256+ */
static inline uint64_t rng_next(rng *r) {
    uint64_t *s = r->s;
    const uint64_t res = s[0] + s[3], t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return res;
}

/* n normal values with standard deviation std (Box-Muller, pairs). */
static void rng_normal(rng *r, float *x, int64_t n, float std) {
    const double two_pi = 6.283185307179586;
    for (int64_t i = 0; i < n; i += 2) {
        uint64_t a = rng_next(r), b = rng_next(r);
        double u1 = ((double)(a >> 11) + 1.0) * (1.0 / 9007199254740993.0); /* (0, 1] */
        double u2 = (double)(b >> 11) * (1.0 / 9007199254740992.0);
        double rad = sqrt(-2.0 * log(u1)) * std;
        x[i] = (float)(rad * cos(two_pi * u2));
        if (i + 1 < n) x[i + 1] = (float)(rad * sin(two_pi * u2));
    }
}

/* ---- options ------------------------------------------------------------- */

static int parse_i(const char *s, const char *opt, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || errno || *end || end == s || v < lo || v > hi) {
        fprintf(stderr, "staticlm synth: %s expects an integer in [%ld, %ld], got '%s'\n", opt, lo, hi,
                s ? s : "(nothing)");
        return 0;
    }
    *out = (int)v;
    return 1;
}

static int parse_f(const char *s, const char *opt, float *out) {
    char *end;
    errno = 0;
    float v = s ? strtof(s, &end) : 0.0f;
    if (!s || errno || *end || end == s || !(v > 0.0f) || !isfinite(v)) {
        fprintf(stderr, "staticlm synth: %s expects a positive number, got '%s'\n", opt, s ? s : "(nothing)");
        return 0;
    }
    *out = v;
    return 1;
}

/* ---- tensors ------------------------------------------------------------- */


static void *synth_alloc(synth *s, size_t n) {
    if (s->n_bufs == s->cap_bufs) {
        int cap = s->cap_bufs ? 2 * s->cap_bufs : 64;
        void **p = slm_realloc(s->bufs, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        s->bufs = p;
        s->cap_bufs = cap;
    }
    void *q = slm_malloc(n ? n : 1);
    if (q) s->bufs[s->n_bufs++] = q;
    return q;
}

static int add_n(synth *s, const char *name, uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2, int init,
                 const float *vals);
static int add(synth *s, const char *name, uint32_t type, int64_t ne0, int64_t ne1, int init, const float *vals) {
    return add_n(s, name, type, ne0, ne1, 1, init, vals);
}
int synth_add(synth *s, const char *name, uint32_t type, int64_t ne0, int64_t ne1, int init, const float *vals) {
    return add(s, name, type, ne0, ne1, init, vals);
}
/* A 3-D tensor [ne0, ne1, ne2] of normal weights (the experts' matrices). */
static int add3(synth *s, const char *name, uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2) {
    return add_n(s, name, type, ne0, ne1, ne2, 0, NULL);
}
int synth_add3(synth *s, const char *name, uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2) {
    return add3(s, name, type, ne0, ne1, ne2);
}
static int add_n(synth *s, const char *name, uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2, int init,
                 const float *vals) {
    const uint32_t blk = slm_dtype_get(type)->block;
    if (ne0 % blk) {
        fprintf(stderr, "staticlm synth: %s: rows of %lld are not a multiple of %u (%s): writing f16\n", name,
                (long long)ne0, blk, slm_dtype_name(type));
        type = SLM_F16;
    }
    const uint64_t rb = slm_row_bytes(type, (uint64_t)ne0), nbytes = rb * (uint64_t)ne1 * (uint64_t)ne2;
    uint8_t *data = synth_alloc(s, (size_t)nbytes);
    if (!data) {
        fprintf(stderr, "staticlm synth: out of memory for %s (%llu bytes)\n", name, (unsigned long long)nbytes);
        return 0;
    }
    rng r;
    rng_seed(&r, s->seed, ++s->n_tensors);
    for (int64_t i = 0; i < ne1 * ne2; i++) {
        float *x = s->row;
        if (init == 0) rng_normal(&r, x, ne0, s->std);
        else if (init == 1)
            for (int64_t j = 0; j < ne0; j++) x[j] = 1.0f;
        else
            x = (float *)vals + i * ne0;
        if (!slm_quantize_row(type, x, data + (uint64_t)i * rb, ne0)) {
            fprintf(stderr, "staticlm synth: %s: cannot write type %s\n", name, slm_dtype_name(type));
            return 0;
        }
    }
    int64_t ne[3] = {ne0, ne1, ne2};
    if (slm_gguf_add_tensor(s->w, name, type, ne2 > 1 ? 3 : ne1 == 1 ? 1 : 2, ne, data, nbytes)) return 0;
    s->n_params += (uint64_t)(ne0 * ne1 * ne2);
    s->n_bytes += nbytes;
    s->type_count[type]++;
    return 1;
}

/* name, matrix type, llama_ftype, slm_weight_type */
static const synth_type k_types[] = {
    {"f32", SLM_F32, 0, SLM_WEIGHTS_AS_IS},         {"f16", SLM_F16, 1, SLM_WEIGHTS_AS_IS},
    {"bf16", SLM_BF16, 32, SLM_WEIGHTS_AS_IS},      {"q8_0", SLM_Q8_0, 7, SLM_WEIGHTS_Q8_0},
    {"q4_0", SLM_Q4_0, 2, SLM_WEIGHTS_Q4_0},        {"q5_0", SLM_Q5_0, 8, SLM_WEIGHTS_Q5_0},
    {"q4_k_s", SLM_Q4_K, 14, SLM_WEIGHTS_Q4_K_S},   {"q4_k_m", SLM_Q4_K, 15, SLM_WEIGHTS_Q4_K_M},
    {"q5_k_s", SLM_Q5_K, 16, SLM_WEIGHTS_Q5_K_S},   {"q5_k_m", SLM_Q5_K, 17, SLM_WEIGHTS_Q5_K_M},
    {"q6_k", SLM_Q6_K, 18, SLM_WEIGHTS_Q6_K},       {"iq4_nl", SLM_IQ4_NL, 25, SLM_WEIGHTS_IQ4_NL},
    {"iq4_xs", SLM_IQ4_XS, 30, SLM_WEIGHTS_IQ4_XS},
};

/* The types per tensor: llama-quantize's rules (format/quantize.c). */
uint32_t synth_mtype(const synth_type *ty, const synth_shape *sh, int role, int i, int n, int64_t width) {
    if (ty->wt == SLM_WEIGHTS_AS_IS) return ty->matrix;
    return slm_quant_layer_type(ty->wt, role, i, n, width,
                                slm_quant_model_flags(sh->arch, sh->n_layers, sh->n_heads, sh->n_kv_heads, sh->experts));
}

uint32_t synth_otype(const synth_type *ty, int64_t width) {
    return ty->wt == SLM_WEIGHTS_AS_IS ? ty->matrix : slm_quant_output_type(ty->wt, width);
}

/* Llama 3.1+ rope scaling factors, as convert_hf_to_gguf.py writes them. */
static void llama3_rope_factors(float *f, int head_dim, float base) {
    const double factor = 32.0, low = 1.0, high = 4.0, old_ctx = 8192.0;
    const double low_wl = old_ctx / low, high_wl = old_ctx / high;
    for (int i = 0; i < head_dim / 2; i++) {
        double freq = 1.0 / pow((double)base, (2.0 * i) / head_dim);
        double wl = 2.0 * 3.141592653589793 / freq;
        if (wl < high_wl) f[i] = 1.0f;
        else if (wl > low_wl) f[i] = (float)factor;
        else {
            double smooth = (old_ctx / wl - low) / (high - low);
            f[i] = (float)(1.0 / ((1.0 - smooth) / factor + smooth));
        }
    }
}


/* argv into a; 0: go on, else the exit code (help: 0 too, with *done set). */
static int parse_args(synth_args *a, int argc, char **argv, int *done) {
    *done = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = 1;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            synth_usage(stdout);
            *done = 1;
            return 0;
        } else if (!strcmp(o, "--shape")) a->shape_name = v;
        else if (!strcmp(o, "--type")) a->type_name = v;
        else if (!strcmp(o, "-o") || !strcmp(o, "--output")) a->out = v;
        else if (!strcmp(o, "--arch")) a->arch = v;
        else if (!strcmp(o, "--vocab-file")) a->vocab_file = v;
        else if (!strcmp(o, "--name")) a->name = v;
        else if (!strcmp(o, "--seed")) {
            char *end;
            errno = 0;
            unsigned long long x = v ? strtoull(v, &end, 10) : 0;
            if (!v || errno || *end || end == v) {
                fprintf(stderr, "staticlm synth: --seed expects an integer\n");
                return 2;
            }
            a->seed = x;
        } else if (!strcmp(o, "--std")) { if (!parse_f(v, o, &a->std)) return 2; }
        else if (!strcmp(o, "--dim")) { if (!parse_i(v, o, 2, 1 << 16, &a->o_dim)) return 2; }
        else if (!strcmp(o, "--layers")) { if (!parse_i(v, o, 1, 1024, &a->o_layers)) return 2; }
        else if (!strcmp(o, "--heads")) { if (!parse_i(v, o, 1, 1024, &a->o_heads)) return 2; }
        else if (!strcmp(o, "--kv-heads")) { if (!parse_i(v, o, 1, 1024, &a->o_kv)) return 2; }
        else if (!strcmp(o, "--ffn")) { if (!parse_i(v, o, 1, 1 << 18, &a->o_ffn)) return 2; }
        else if (!strcmp(o, "--n-vocab")) { if (!parse_i(v, o, SYNTH_SPM_BASE, 1 << 20, &a->o_vocab)) return 2; }
        else if (!strcmp(o, "--ctx")) { if (!parse_i(v, o, 1, 1 << 24, &a->o_ctx)) return 2; }
        else if (!strcmp(o, "--experts")) { if (!parse_i(v, o, 1, 1024, &a->experts)) return 2; }
        else if (!strcmp(o, "--experts-used")) { if (!parse_i(v, o, 1, 64, &a->experts_used)) return 2; }
        else if (!strcmp(o, "--expert-ffn")) { if (!parse_i(v, o, 1, 1 << 18, &a->expert_ffn)) return 2; }
        else if (!strcmp(o, "--shared-ffn")) { if (!parse_i(v, o, 1, 1 << 18, &a->shared_ffn)) return 2; }
        else if (!strcmp(o, "--dense-lead")) { if (!parse_i(v, o, 0, 1024, &a->dense_lead)) return 2; }
        else if (!strcmp(o, "--nextn")) { if (!parse_i(v, o, 0, 16, &a->nextn)) return 2; }
        else if (!strcmp(o, "--qk-norm")) { a->qk_norm = 1; takes = 0; }
        else if (!strcmp(o, "--expert-scale")) { if (!parse_f(v, o, &a->expert_scale)) return 2; }
        else if (!strcmp(o, "--kv-shared")) { if (!parse_i(v, o, 0, 1024, &a->kv_shared)) return 2; }
        else if (!strcmp(o, "--sliding-window")) { if (!parse_i(v, o, 1, 1 << 24, &a->window)) return 2; }
        else if (!strcmp(o, "--rope-base")) { if (!parse_f(v, o, &a->o_rope)) return 2; }
        else if (!strcmp(o, "--eps")) { if (!parse_f(v, o, &a->o_eps)) return 2; }
        else if (!strcmp(o, "--tied")) { a->o_tied = 1; takes = 0; }
        else if (!strcmp(o, "--non-causal")) { a->non_causal = 1; takes = 0; }
        else if (!strcmp(o, "--pooling")) {
            if ((a->pooling = slm_pooling_parse(v)) < 0) {
                fprintf(stderr, "staticlm synth: --pooling expects none, mean, cls, last or rank\n");
                return 2;
            }
        }
        else if (!strcmp(o, "--untied")) { a->o_tied = 0; takes = 0; }
        else {
            fprintf(stderr, "staticlm synth: unknown option '%s' (see staticlm synth --help)\n", o);
            return 2;
        }
        if (takes) {
            if (!v) {
                fprintf(stderr, "staticlm synth: %s needs a value\n", o);
                return 2;
            }
            i++;
        }
    }
    if (!a->shape_name || !a->out) {
        fprintf(stderr, "staticlm synth: --shape and -o are required\n\n");
        synth_usage(stderr);
        return 2;
    }
    return 0;
}

static int is_moe_arch(const char *a) {
    return !strcmp(a, "qwen3moe") || !strcmp(a, "olmoe") || !strcmp(a, "granitemoe") || !strcmp(a, "gpt-oss") ||
           !strcmp(a, "qwen2moe") || !strcmp(a, "glm4moe") || !strcmp(a, "qwen35moe") || !strcmp(a, "nomic-bert-moe");
}

/* The named shape with the overrides, and the type; 0 or the exit code. */
static int head_dim_of(const synth_shape *sh) { return sh->head_dim ? sh->head_dim : sh->dim / sh->n_heads; }
static int rope_dims_of(const synth_shape *sh) { return sh->rope_dims ? sh->rope_dims : head_dim_of(sh); }

/* glm4moe's parts (others: none): the overrides, half the head rotated
 * (partial_rotary_factor 0.5), a shared expert of whole experts' width;
 * 0 or the exit code. */
static int glm_shape(const synth_args *a, synth_shape *sh) {
    if (strcmp(sh->arch, "glm4moe")) {
        sh->dense_lead = sh->nextn = sh->qk_norm = 0;
        sh->routed_scale = 0.0f;
        return 0;
    }
    if (a->dense_lead >= 0) sh->dense_lead = a->dense_lead;
    if (a->nextn >= 0) sh->nextn = a->nextn;
    if (a->qk_norm > 0) sh->qk_norm = 1;
    if (a->expert_scale > 0.0f) sh->routed_scale = a->expert_scale;
    if (!(sh->routed_scale > 0.0f)) sh->routed_scale = 1.0f;
    sh->rope_dims = head_dim_of(sh) / 2;
    const int fe = sh->expert_ffn ? sh->expert_ffn : sh->ffn;
    if (!a->shared_ffn) sh->shared_ffn = fe; /* one shared expert (GLM-4.5's n_shared_experts) */
    if (sh->dense_lead > sh->n_layers || sh->shared_ffn % fe) {
        fprintf(stderr, "staticlm synth: glm4moe: --dense-lead %d beyond %d layers, or --shared-ffn %d not a multiple "
                        "of the experts' width %d\n", sh->dense_lead, sh->n_layers, sh->shared_ffn, fe);
        return 2;
    }
    return 0;
}

/* qwen35's parts (others: none): the DeltaNet shape (defaults from the
 * heads), a quarter of each head rotated (partial_rotary_factor 0.25), MTP
 * layers by --nextn; 0 or the exit code. */
static int is_qwen35_shape(const synth_args *a, synth_shape *sh) {
    if (strcmp(sh->arch, "qwen35") && strcmp(sh->arch, "qwen35moe")) {
        sh->interval = sh->ssm_conv = sh->ssm_state = sh->ssm_k = sh->ssm_v = 0;
        return 0;
    }
    const int hd = head_dim_of(sh);
    if (!sh->interval) sh->interval = 4;
    if (!sh->ssm_conv) sh->ssm_conv = 4;
    if (!sh->ssm_state) sh->ssm_state = hd / 2 > 1 ? hd / 2 : 2;
    if (!sh->ssm_k) sh->ssm_k = sh->n_heads;
    if (!sh->ssm_v) sh->ssm_v = 2 * sh->n_heads;
    sh->nextn = a->nextn > 0 ? a->nextn : 0;
    sh->rope_dims = hd / 4 >= 2 ? hd / 4 / 2 * 2 : 2;
    if (sh->ssm_v % sh->ssm_k) {
        fprintf(stderr, "staticlm synth: %s: %d value heads are not a multiple of %d key heads\n", sh->arch, sh->ssm_v,
                sh->ssm_k);
        return 2;
    }
    return 0;
}

/* 1 when arch is one of the names in list ("a, b, c"). */
static int arch_in(const char *arch, const char *list) {
    const size_t n = strlen(arch);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        const size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k == n && !strncmp(p, arch, n)) return 1;
        if (!e) break;
        p = e + 2;
    }
    return 0;
}

/* The family options given for an architecture that has no such part are
 * refused (they used to be dropped): 0, or 2 after the message. */
static int family_opts_check(const synth_args *a, const char *arch) {
    static const struct { const char *opt, *archs; } k[] = {
        {"--dense-lead", "glm4moe"},
        {"--qk-norm", "glm4moe"},
        {"--expert-scale", "glm4moe"},
        {"--nextn", "glm4moe, qwen35, qwen35moe"},
        {"--kv-shared", "gemma4"},
        {"--sliding-window", "mistral, gemma2, gemma3, olmo2, exaone4, gpt-oss, gemma4, modern-bert"},
    };
    const int given[] = {a->dense_lead >= 0, a->qk_norm > 0, a->expert_scale > 0.0f, a->nextn >= 0, a->kv_shared >= 0,
                         a->window > 0};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (given[i] && !arch_in(arch, k[i].archs)) {
            fprintf(stderr, "staticlm synth: %s: only for %s; %s has no such part (--arch)\n", k[i].opt, k[i].archs,
                    arch);
            return 2;
        }
    return 0;
}

static int resolve_shape(const synth_args *a, synth_shape *sh, const synth_type **ty) {
    const synth_shape *base = NULL;
    for (size_t i = 0; i < sizeof k_shapes / sizeof k_shapes[0]; i++)
        if (!strcmp(k_shapes[i].name, a->shape_name)) base = &k_shapes[i];
    if (!base) {
        fprintf(stderr, "staticlm synth: unknown shape '%s' (", a->shape_name); /* the table's names */
        for (size_t i = 0; i < sizeof k_shapes / sizeof k_shapes[0]; i++)
            fprintf(stderr, "%s%s", i ? ", " : "", k_shapes[i].name);
        fprintf(stderr, ")\n");
        return 2;
    }
    *ty = NULL;
    for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++)
        if (!strcasecmp(k_types[i].name, a->type_name)) *ty = &k_types[i];
    if (!*ty) {
        fprintf(stderr, "staticlm synth: unknown type '%s' (f32, f16, bf16, %s)\n", a->type_name, SLM_WEIGHT_TYPE_NAMES);
        return 2;
    }
    *sh = *base;
    if (a->o_dim > 0) sh->dim = a->o_dim;
    if (a->o_layers > 0) sh->n_layers = a->o_layers;
    if (a->o_heads > 0) sh->n_heads = a->o_heads;
    if (a->o_kv > 0) sh->n_kv_heads = a->o_kv;
    if (a->o_ffn > 0) sh->ffn = a->o_ffn;
    if (a->o_vocab > 0) sh->vocab = a->o_vocab;
    if (a->o_ctx > 0) sh->ctx = a->o_ctx;
    if (a->o_tied >= 0) sh->tied = a->o_tied;
    if (a->o_rope > 0) sh->rope_base = a->o_rope;
    if (a->o_eps > 0) sh->eps = a->o_eps;
    if (a->arch) {
        if (slm_arch_find(a->arch, strlen(a->arch)) < 0) {
            fprintf(stderr, "staticlm synth: unknown architecture '%s' (" SLM_SUPPORTED_ARCHS ")\n", a->arch);
            return 2;
        }
        sh->arch = a->arch;
    }
    if (family_opts_check(a, sh->arch)) return 2;
    /* a changed shape: dim / heads again (gemma4 keeps its head sizes), the DeltaNet heads from them */
    if ((a->o_dim > 0 || a->o_heads > 0) && strcmp(sh->arch, "gemma4")) sh->head_dim = sh->ssm_state = sh->ssm_k = sh->ssm_v = 0;
    if (a->o_ctx > 0 && sh->orig_ctx > sh->ctx) sh->orig_ctx = sh->ctx;
    if (!strcmp(sh->arch, "phi3") && sh->rope_dims >= head_dim_of(sh)) sh->rope_dims = 0;
    if (strcmp(sh->arch, "phi3")) sh->rope_dims = 0;
    if (!strcmp(sh->arch, "gemma4")) { /* its own window, head sizes, shared layers, per-layer embeddings */
        if (synth_gemma4_shape(a, sh)) return 2;
    } else {
        sh->head_dim_swa = sh->kv_shared = sh->ple = sh->kv_heads_global = sh->ffn_shared = sh->k_eq_v = 0;
    }
    if ((!strcmp(sh->arch, "gemma2") || !strcmp(sh->arch, "gemma3")) && !sh->window) sh->window = 4096;
    if (strcmp(sh->arch, "olmo2") && strcmp(sh->arch, "gemma2") && strcmp(sh->arch, "gemma3") &&
        strcmp(sh->arch, "exaone4") && strcmp(sh->arch, "gpt-oss") && strcmp(sh->arch, "gemma4") &&
        strcmp(sh->arch, "modern-bert"))
        sh->window = 0;
    else if (a->window) sh->window = a->window;
    if (strcmp(sh->arch, "olmo2") && strcmp(sh->arch, "gpt-oss")) sh->yarn = 0.0f, sh->yarn_orig = 0;
    if ((!strcmp(sh->arch, "granite") || !strcmp(sh->arch, "granitemoe")) && !(sh->mup[3] > 0.0f)) { /* Granite 3's multipliers */
        const float g3[4] = {12.0f, 0.015625f, 0.22f, 8.0f};
        memcpy(sh->mup, g3, sizeof g3);
    }
    if (sh->yarn_orig > sh->ctx) sh->yarn_orig = sh->ctx;
    if (a->experts) sh->experts = a->experts;
    if (a->experts_used) sh->experts_used = a->experts_used;
    if (a->expert_ffn) sh->expert_ffn = a->expert_ffn;
    if (a->shared_ffn) sh->shared_ffn = a->shared_ffn;
    if ((!strcmp(sh->arch, "qwen2moe") || !strcmp(sh->arch, "qwen35moe")) && !sh->shared_ffn)
        sh->shared_ffn = sh->ffn; /* llama.cpp's default */
    if (glm_shape(a, sh)) return 2;
    if (is_qwen35_shape(a, sh)) return 2;
    if (sh->shared_ffn && strcmp(sh->arch, "qwen2moe") && strcmp(sh->arch, "granitemoe") && strcmp(sh->arch, "glm4moe") &&
        strcmp(sh->arch, "qwen35moe")) {
        if (a->shared_ffn) {
            fprintf(stderr, "staticlm synth: %s: --shared-ffn only with qwen2moe, qwen35moe, granitemoe and glm4moe\n",
                    sh->arch);
            return 2;
        }
        sh->shared_ffn = 0; /* another family on a qwen2moe shape */
    }
    /* llama (Mixtral), olmoe and granitemoe take the experts' width from feed_forward_length */
    if (sh->expert_ffn && strcmp(sh->arch, "qwen3moe") && strcmp(sh->arch, "gpt-oss") && strcmp(sh->arch, "qwen2moe") &&
        strcmp(sh->arch, "glm4moe") && strcmp(sh->arch, "gemma4") && strcmp(sh->arch, "qwen35moe")) {
        sh->ffn = sh->expert_ffn;
        sh->expert_ffn = 0;
    }
    if ((is_moe_arch(sh->arch) && !sh->experts) ||
        (sh->experts && !is_moe_arch(sh->arch) && strcmp(sh->arch, "llama") && strcmp(sh->arch, "gemma4"))) {
        fprintf(stderr, "staticlm synth: %s: %s\n", sh->arch, sh->experts ? "experts only with llama, qwen3moe, qwen2moe, olmoe, granitemoe, gpt-oss, glm4moe, qwen35moe, gemma4"
                                                                           : "needs --experts");
        return 2;
    }
    if (a->expert_ffn && !sh->experts) {
        fprintf(stderr, "staticlm synth: --expert-ffn: %s has no experts here (--experts N)\n", sh->arch);
        return 2;
    }
    if (sh->experts && !sh->experts_used) sh->experts_used = sh->experts < 2 ? sh->experts : 2;
    if (sh->experts_used > sh->experts) {
        fprintf(stderr, "staticlm synth: --experts-used %d is more than the %d experts\n", sh->experts_used, sh->experts);
        return 2;
    }
    if (synth_is_encoder(sh->arch)) { /* one KV head per head, the pooling, the WordPiece vocabulary's size */
        if (synth_encoder_shape(a, sh)) return 2;
    } else {
        sh->type_vocab = sh->pooling = 0;
    }
    if ((!sh->head_dim && sh->dim % sh->n_heads) || head_dim_of(sh) % 2 || sh->n_heads % sh->n_kv_heads) {
        fprintf(stderr, "staticlm synth: heads %d/%d do not divide dim %d into even head sizes\n", sh->n_heads,
                sh->n_kv_heads, sh->dim);
        return 2;
    }
    return 0;
}

/* The metadata, in the order convert_hf_to_gguf.py writes it. */
static int is(const synth_shape *sh, const char *arch) { return !strcmp(sh->arch, arch); }
static void put_metadata(slm_gguf_writer *w, const synth_args *a, const synth_shape *sh, const synth_type *ty,
                         const vocab *voc) {
    const int head_dim = head_dim_of(sh);
    char key[96], gname[128];
    snprintf(gname, sizeof gname, "synth-%s", sh->name);
#define K(suffix) (snprintf(key, sizeof key, "%s.%s", sh->arch, suffix), key)
    slm_gguf_set_str(w, "general.architecture", sh->arch);
    slm_gguf_set_str(w, "general.type", "model");
    slm_gguf_set_str(w, "general.name", a->name ? a->name : gname);
    if (synth_is_encoder(sh->arch)) { /* bert, nomic-bert, modern-bert: their own keys (cli/synth_encoder.c) */
        synth_encoder_metadata(w, sh, ty);
        vocab_put(w, voc);
        return;
    }
    slm_gguf_set_u32(w, K("block_count"), (uint32_t)(sh->n_layers + sh->nextn)); /* glm4moe: with the MTP layers */
    slm_gguf_set_u32(w, K("context_length"), (uint32_t)sh->ctx);
    slm_gguf_set_u32(w, K("embedding_length"), (uint32_t)sh->dim);
    if (is(sh, "gemma4")) synth_gemma4_metadata(w, sh); /* FFN widths and KV heads may be per-layer lists */
    else if (!is(sh, "qwen35moe")) /* qwen35moe: the experts' widths only (llama.cpp reads it as optional) */
        slm_gguf_set_u32(w, K("feed_forward_length"), (uint32_t)sh->ffn);
    slm_gguf_set_u32(w, K("attention.head_count"), (uint32_t)sh->n_heads);
    if (!is(sh, "gemma4")) slm_gguf_set_u32(w, K("attention.head_count_kv"), (uint32_t)sh->n_kv_heads);
    slm_gguf_set_f32(w, K("rope.freq_base"), sh->rope_base);
    slm_gguf_set_f32(w, K("attention.layer_norm_rms_epsilon"), sh->eps);
    if (a->pooling >= 0) slm_gguf_set_u32(w, K("pooling_type"), (uint32_t)a->pooling); /* an embedding model's */
    if (a->pooling == SLM_POOLING_RANK) { /* as llama.cpp's converter writes Qwen3-Reranker's */
        const char *labels[] = {"yes", "no"};
        const uint64_t lens[] = {3, 2};
        slm_gguf_set_arr_str(w, K("classifier.output_labels"), labels, lens, 2);
        slm_gguf_set_str(w, "tokenizer.chat_template.rerank",
                         "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and "
                         "the Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
                         "<|im_start|>user\n<Instruct>: Given a web search query, retrieve relevant passages that "
                         "answer the query\n<Query>: {query}\n<Document>: {document}<|im_end|>\n"
                         "<|im_start|>assistant\n<think>\n\n</think>\n\n");
    }
    if (a->non_causal) slm_gguf_set_bool(w, K("attention.causal"), 0);
    if (!strcmp(sh->arch, "mistral")) slm_gguf_set_u32(w, K("attention.sliding_window"), (uint32_t)(a->window ? a->window : 4096));
    if (is(sh, "gemma2") || is(sh, "gemma3") || (is(sh, "gpt-oss") && sh->window))
        slm_gguf_set_u32(w, K("attention.sliding_window"), (uint32_t)sh->window);
    if ((is(sh, "olmo2") || is(sh, "exaone4")) && sh->window) { /* as llama.cpp's converters write it: a per-layer list */
        slm_gguf_set_u32(w, K("attention.sliding_window"), (uint32_t)sh->window);
        uint8_t pat[1024];
        const int n = sh->n_layers < 1024 ? sh->n_layers : 1024;
        for (int l = 0; l < n; l++) pat[l] = (l + 1) % 4 != 0;
        slm_gguf_set_arr(w, K("attention.sliding_window_pattern"), SLM_GGUF_BOOL, pat, (uint64_t)n);
    }
    if (sh->experts) { /* as llama.cpp's converters write them */
        slm_gguf_set_u32(w, K("expert_count"), (uint32_t)sh->experts);
        slm_gguf_set_u32(w, K("expert_used_count"), (uint32_t)sh->experts_used);
        const int fe = sh->expert_ffn ? sh->expert_ffn : sh->ffn;
        if (is(sh, "qwen3moe") || is(sh, "gpt-oss") || is(sh, "qwen2moe") || is(sh, "glm4moe") || is(sh, "gemma4") || is(sh, "qwen35moe"))
            slm_gguf_set_u32(w, K("expert_feed_forward_length"), (uint32_t)fe);
        if (sh->shared_ffn && !is(sh, "glm4moe"))
            slm_gguf_set_u32(w, K("expert_shared_feed_forward_length"), (uint32_t)sh->shared_ffn);
    }
    if (is(sh, "glm4moe")) { /* as convert_hf_to_gguf.py's Glm4MoeModel writes them */
        slm_gguf_set_u32(w, K("expert_shared_count"), (uint32_t)(sh->shared_ffn / (sh->expert_ffn ? sh->expert_ffn : sh->ffn)));
        slm_gguf_set_u32(w, K("leading_dense_block_count"), (uint32_t)sh->dense_lead);
        slm_gguf_set_u32(w, K("expert_gating_func"), 2);
        slm_gguf_set_f32(w, K("expert_weights_scale"), sh->routed_scale);
        slm_gguf_set_bool(w, K("expert_weights_norm"), 1);
        slm_gguf_set_u32(w, K("nextn_predict_layers"), (uint32_t)sh->nextn);
    }
    if (is(sh, "qwen35") || is(sh, "qwen35moe")) { /* as convert_hf_to_gguf.py's Qwen3_5(Moe)TextModel writes them */
        slm_gguf_set_u32(w, K("ssm.conv_kernel"), (uint32_t)sh->ssm_conv);
        slm_gguf_set_u32(w, K("ssm.state_size"), (uint32_t)sh->ssm_state);
        slm_gguf_set_u32(w, K("ssm.group_count"), (uint32_t)sh->ssm_k);
        slm_gguf_set_u32(w, K("ssm.time_step_rank"), (uint32_t)sh->ssm_v);
        slm_gguf_set_u32(w, K("ssm.inner_size"), (uint32_t)(sh->ssm_v * sh->ssm_state));
        slm_gguf_set_u32(w, K("full_attention_interval"), (uint32_t)sh->interval);
        const int32_t sec[4] = {11, 11, 10, 0};
        slm_gguf_set_arr(w, K("rope.dimension_sections"), SLM_GGUF_I32, sec, 4);
        if (sh->nextn) slm_gguf_set_u32(w, K("nextn_predict_layers"), (uint32_t)sh->nextn);
    }
    if (is(sh, "granite") || is(sh, "granitemoe")) { /* as llama.cpp's converter writes Granite's multipliers */
        slm_gguf_set_f32(w, K("embedding_scale"), sh->mup[0]);
        slm_gguf_set_f32(w, K("attention.scale"), sh->mup[1]);
        slm_gguf_set_f32(w, K("residual_scale"), sh->mup[2]);
        slm_gguf_set_f32(w, K("logit_scale"), sh->mup[3]);
    }
    if (sh->yarn > 1.0f) { /* Olmo 3's and gpt-oss's rope_scaling, every key as its config.json gives it */
        slm_gguf_set_str(w, K("rope.scaling.type"), "yarn");
        slm_gguf_set_f32(w, K("rope.scaling.factor"), sh->yarn);
        slm_gguf_set_u32(w, K("rope.scaling.original_context_length"), (uint32_t)sh->yarn_orig);
        if (is(sh, "olmo2")) slm_gguf_set_f32(w, K("rope.scaling.yarn_attn_factor"), 1.0f + 0.1f * logf(sh->yarn));
        slm_gguf_set_f32(w, K("rope.scaling.yarn_beta_fast"), 32.0f);
        slm_gguf_set_f32(w, K("rope.scaling.yarn_beta_slow"), 1.0f);
    }
    if (is(sh, "gemma2")) { /* gemma-2's config.json values */
        slm_gguf_set_f32(w, K("attn_logit_softcapping"), 50.0f);
        slm_gguf_set_f32(w, K("final_logit_softcapping"), 30.0f);
    }
    if (strcmp(sh->arch, "qwen2")) {
        slm_gguf_set_u32(w, K("attention.key_length"), (uint32_t)head_dim);
        slm_gguf_set_u32(w, K("attention.value_length"), (uint32_t)head_dim);
        slm_gguf_set_u32(w, K("vocab_size"), (uint32_t)sh->vocab);
        slm_gguf_set_u32(w, K("rope.dimension_count"), (uint32_t)rope_dims_of(sh));
    }
    if (is(sh, "phi3") && sh->orig_ctx) { /* LongRoPE: as convert_hf_to_gguf.py's Phi3MiniModel writes it */
        slm_gguf_set_u32(w, K("rope.scaling.original_context_length"), (uint32_t)sh->orig_ctx);
        const double scale = (double)sh->ctx / sh->orig_ctx;
        if (scale > 1.0)
            slm_gguf_set_f32(w, K("rope.scaling.attn_factor"), (float)sqrt(1.0 + log(scale) / log((double)sh->orig_ctx)));
    }
    slm_gguf_set_u32(w, "general.file_type", ty->ftype);
    if (ty->matrix != SLM_F32 && ty->matrix != SLM_F16 && ty->matrix != SLM_BF16) slm_gguf_set_u32(w, "general.quantization_version", 2);
#undef K
    vocab_put(w, voc);
}

/* glm4moe's selection bias blk.L.exp_probs_b.bias [E] (e_score_correction_bias):
 * a fixed spread of +-0.1, large beside the sigmoid scores' differences at
 * std 0.02, so that it changes which experts run. */
static int put_select_bias(synth *s, int l, int E) {
    float b[1024];
    char n[64];
    if (E > 1024) return 0;
    for (int e = 0; e < E; e++) b[e] = 0.1f * sinf(1.7f * (float)e + (float)l);
    snprintf(n, sizeof n, "blk.%d.exp_probs_b.bias", l);
    return add(s, n, SLM_F32, E, 1, 2, b);
}

/* A qwen35 Gated DeltaNet layer's tensors (after its attn_norm): the fused
 * Q/K/V and the output gate, the conv taps (f32, normal of std 0.5: the
 * conv sums 4 of them), the decay's dt bias (normal) and a (-0.1 .. -1, as
 * -exp(A_log)), beta and alpha, the gated norm's gains (ones), ssm_out. */
static int put_delta_layer(synth *s, const synth_shape *sh, const synth_type *ty, int l) {
    const int S = sh->ssm_state, cd = (2 * sh->ssm_k + sh->ssm_v) * S, vd = sh->ssm_v * S, hv = sh->ssm_v;
    const int N = sh->n_layers + sh->nextn;
    const uint32_t t_in = synth_mtype(ty, sh, SLM_QROLE_OTHER, l, N, sh->dim), t_out = synth_mtype(ty, sh, SLM_QROLE_OTHER, l, N, vd);
    const uint32_t t_qkv = synth_mtype(ty, sh, SLM_QROLE_ATTN_V, l, N, sh->dim); /* llama-quantize's attn_v rules */
    char n[64];
    float *taps = synth_alloc(s, (size_t)cd * (size_t)sh->ssm_conv * sizeof(float)), av[4096];
    if (!taps || hv > 4096) return 0;
    rng r;
    rng_seed(&r, s->seed ^ 0x5eedu, (uint64_t)l);
    rng_normal(&r, taps, (int64_t)cd * sh->ssm_conv, 0.5f);
    for (int h = 0; h < hv; h++) av[h] = -(0.1f + 0.9f * (float)((h * 7 + l) % 10) / 9.0f);
#define T(suffix, type, ne0, ne1, init, vals) \
    (snprintf(n, sizeof n, "blk.%d.%s", l, suffix), add(s, n, type, ne0, ne1, init, vals))
    return T("attn_qkv.weight", t_qkv, sh->dim, cd, 0, NULL) && T("attn_gate.weight", t_in, sh->dim, vd, 0, NULL) &&
           T("ssm_conv1d.weight", SLM_F32, sh->ssm_conv, cd, 2, taps) && T("ssm_dt.bias", SLM_F32, hv, 1, 0, NULL) &&
           T("ssm_a", SLM_F32, hv, 1, 2, av) && T("ssm_beta.weight", t_in, sh->dim, hv, 0, NULL) &&
           T("ssm_alpha.weight", t_in, sh->dim, hv, 0, NULL) && T("ssm_norm.weight", SLM_F32, S, 1, 1, NULL) &&
           T("ssm_out.weight", t_out, vd, sh->dim, 0, NULL);
#undef T
}

/* The tensors, in llama.cpp's order; 0 when one could not be made. */
static int put_tensors(synth *s, const synth_shape *sh, const synth_type *ty) {
    if (is(sh, "gemma4")) return synth_gemma4_tensors(s, sh, ty);
    if (synth_is_encoder(sh->arch)) return synth_encoder_tensors(s, sh, ty);
    const int head_dim = head_dim_of(sh), kv_dim = head_dim * sh->n_kv_heads, q_dim = head_dim * sh->n_heads;
    const int glm = is(sh, "glm4moe");
    const int qwen2 = is(sh, "qwen2") || is(sh, "gpt-oss") || is(sh, "qwen2moe") || glm, phi3 = is(sh, "phi3"), gemma = is(sh, "gemma2") || is(sh, "gemma3");
    const int oss = is(sh, "gpt-oss");
    const int olmo2 = is(sh, "olmo2"), post_only = olmo2 || is(sh, "exaone4");
    const int qk_norm = is(sh, "qwen3") || is(sh, "gemma3") || is(sh, "qwen3moe") || is(sh, "olmoe") || post_only || sh->qk_norm,
              rope_dims = rope_dims_of(sh), whole_qk = olmo2 || is(sh, "olmoe");
    const int E = sh->experts, fe = sh->expert_ffn ? sh->expert_ffn : sh->ffn;
    const int N = sh->n_layers + sh->nextn; /* llama.cpp's block count */
    const uint32_t emb_t = sh->tied ? synth_otype(ty, sh->dim) : synth_mtype(ty, sh, SLM_QROLE_OTHER, 0, 1, sh->dim);
    if (!add(s, "token_embd.weight", emb_t, sh->dim, sh->vocab, 0, NULL)) return 0;
    if (sh->llama3_rope) {
        float f[512];
        if (head_dim / 2 > (int)(sizeof f / sizeof f[0])) return 0;
        llama3_rope_factors(f, head_dim, sh->rope_base);
        if (!add(s, "rope_freqs.weight", SLM_F32, head_dim / 2, 1, 2, f)) return 0;
    }
    if (phi3 && sh->orig_ctx) { /* LongRoPE factors: short ones near 1, long ones growing with wavelength */
        float fl[512], fs[512];
        if (rope_dims / 2 > (int)(sizeof fl / sizeof fl[0])) return 0;
        const double scale = (double)sh->ctx / sh->orig_ctx;
        for (int i = 0; i < rope_dims / 2; i++) {
            const double t = (double)i / (rope_dims / 2 > 1 ? rope_dims / 2 - 1 : 1);
            fl[i] = (float)(1.0 + (scale > 1.0 ? scale - 1.0 : 0.0) * t * t);
            fs[i] = (float)(1.0 + 0.05 * t);
        }
        if (!add(s, "rope_factors_long.weight", SLM_F32, rope_dims / 2, 1, 2, fl)) return 0;
        if (!add(s, "rope_factors_short.weight", SLM_F32, rope_dims / 2, 1, 2, fs)) return 0;
    }
    for (int l = 0; l < sh->n_layers + sh->nextn; l++) {
        char n[64];
#define T(suffix, type, ne0, ne1, init)                                                        \
    do {                                                                                       \
        snprintf(n, sizeof n, "blk.%d.%s", l, suffix);                                         \
        if (!add(s, n, type, ne0, ne1, init, NULL)) return 0;                                  \
    } while (0)
        if (!post_only) T("attn_norm.weight", SLM_F32, sh->dim, 1, 1);
        /* widths: dim for all but attn_output (q_dim) and ffn_down (ffn) */
        const uint32_t t_in = synth_mtype(ty, sh, SLM_QROLE_OTHER, l, N, sh->dim);
        const uint32_t t_k = synth_mtype(ty, sh, SLM_QROLE_ATTN_K, l, N, sh->dim);
        const uint32_t t_v = synth_mtype(ty, sh, SLM_QROLE_ATTN_V, l, N, sh->dim); /* every layer has attn_v or attn_qkv */
        const uint32_t t_o = synth_mtype(ty, sh, SLM_QROLE_ATTN_OUTPUT, l, N, q_dim);
        const uint32_t t_down = synth_mtype(ty, sh, SLM_QROLE_FFN_DOWN, l, N, sh->ffn);
        if (is(sh, "qwen35") || is(sh, "qwen35moe")) {
            if (l < sh->n_layers && (l + 1) % sh->interval != 0) { /* a Gated DeltaNet layer */
                if (!put_delta_layer(s, sh, ty, l)) return 0;
            } else { /* full attention: the gated query (query and gate rows per head) */
                T("attn_q.weight", t_in, sh->dim, 2 * q_dim, 0);
                T("attn_k.weight", t_k, sh->dim, kv_dim, 0);
                T("attn_v.weight", t_v, sh->dim, kv_dim, 0);
                T("attn_k_norm.weight", SLM_F32, head_dim, 1, 1);
                T("attn_q_norm.weight", SLM_F32, head_dim, 1, 1);
                T("attn_output.weight", t_o, q_dim, sh->dim, 0);
            }
            T("post_attention_norm.weight", SLM_F32, sh->dim, 1, 1); /* the FFN's norm */
            goto after_attention;
        }
        if (phi3) { /* fused, as the phi3 GGUFs store them: Q, K, V rows */
            T("attn_qkv.weight", t_v, sh->dim, q_dim + 2 * kv_dim, 0);
        } else {
            T("attn_q.weight", t_in, sh->dim, q_dim, 0);
            T("attn_k.weight", t_k, sh->dim, kv_dim, 0);
            T("attn_v.weight", t_v, sh->dim, kv_dim, 0);
        }
        if (qwen2) {
            T("attn_q.bias", SLM_F32, q_dim, 1, 0);
            T("attn_k.bias", SLM_F32, kv_dim, 1, 0);
            T("attn_v.bias", SLM_F32, kv_dim, 1, 0);
        }
        if (qk_norm) { /* olmo2: over the whole Q and K rows */
            T("attn_k_norm.weight", SLM_F32, whole_qk ? kv_dim : head_dim, 1, 1);
            T("attn_q_norm.weight", SLM_F32, whole_qk ? q_dim : head_dim, 1, 1);
        }
        T("attn_output.weight", t_o, q_dim, sh->dim, 0);
        if (oss) { /* biases and sinks: normal values (std 0.02 would make them vanish) */
            T("attn_output.bias", SLM_F32, sh->dim, 1, 0);
            T("attn_sinks.weight", SLM_F32, sh->n_heads, 1, 1);
        }
        if (gemma || post_only) T("post_attention_norm.weight", SLM_F32, sh->dim, 1, 1);
        if (!post_only) T(oss || glm ? "post_attention_norm.weight" : "ffn_norm.weight", SLM_F32, sh->dim, 1, 1);
    after_attention:
        if (l >= sh->n_layers) { /* glm4moe's MTP layer: its own tensors (llama.cpp loads, never runs them) */
            T("nextn.eh_proj.weight", t_in, 2 * sh->dim, sh->dim, 0);
            T("nextn.enorm.weight", SLM_F32, sh->dim, 1, 1);
            T("nextn.hnorm.weight", SLM_F32, sh->dim, 1, 1);
            T("nextn.shared_head_norm.weight", SLM_F32, sh->dim, 1, 1);
        }
        if (E && l >= sh->dense_lead) { /* the router (f32, as llama-quantize leaves it) and the experts, 3-D */
            T("ffn_gate_inp.weight", SLM_F32, sh->dim, E, 0);
            if (glm && !put_select_bias(s, l, E)) return 0;
            if (oss) { /* the router's and the experts' biases, [out, experts] */
                T("ffn_gate_inp.bias", SLM_F32, E, 1, 0);
                T("ffn_gate_exps.bias", SLM_F32, fe, E, 0);
                T("ffn_up_exps.bias", SLM_F32, fe, E, 0);
                T("ffn_down_exps.bias", SLM_F32, sh->dim, E, 0);
            }
            const uint32_t t_de = synth_mtype(ty, sh, SLM_QROLE_FFN_DOWN, l, N, fe);
#define T3(suffix, type, ne0, ne1)                                                             \
    do {                                                                                       \
        snprintf(n, sizeof n, "blk.%d.%s", l, suffix);                                         \
        if (!add3(s, n, type, ne0, ne1, E)) return 0;                                          \
    } while (0)
            T3("ffn_gate_exps.weight", t_in, sh->dim, fe);
            T3("ffn_down_exps.weight", t_de, fe, sh->dim);
            T3("ffn_up_exps.weight", t_in, sh->dim, fe);
#undef T3
            if (sh->shared_ffn) { /* qwen2moe's gate [dim] (f32, as llama-quantize leaves a vector), the shared expert */
                if (is(sh, "qwen2moe") || is(sh, "qwen35moe")) T("ffn_gate_inp_shexp.weight", SLM_F32, sh->dim, 1, 0);
                T("ffn_gate_shexp.weight", t_in, sh->dim, sh->shared_ffn, 0);
                T("ffn_down_shexp.weight", synth_mtype(ty, sh, SLM_QROLE_FFN_DOWN, l, N, sh->shared_ffn), sh->shared_ffn, sh->dim, 0);
                T("ffn_up_shexp.weight", t_in, sh->dim, sh->shared_ffn, 0);
            }
            continue;
        }
        if (phi3) { /* fused: gate rows, then up rows */
            T("ffn_up.weight", t_in, sh->dim, 2 * sh->ffn, 0);
        } else {
            T("ffn_gate.weight", t_in, sh->dim, sh->ffn, 0);
            T("ffn_up.weight", t_in, sh->dim, sh->ffn, 0);
        }
        T("ffn_down.weight", t_down, sh->ffn, sh->dim, 0);
        if (gemma || post_only) T("post_ffw_norm.weight", SLM_F32, sh->dim, 1, 1);
#undef T
    }
    if (!add(s, "output_norm.weight", SLM_F32, sh->dim, 1, 1, NULL)) return 0;
    if (!sh->tied && !add(s, "output.weight", synth_otype(ty, sh->dim), sh->dim, sh->vocab, 0, NULL)) return 0;
    return 1;
}

int slm_cli_synth(int argc, char **argv) {
    synth_args a;
    memset(&a, 0, sizeof a);
    a.type_name = "f16";
    a.seed = 1;
    a.std = 0.02f;
    a.o_dim = a.o_layers = a.o_heads = a.o_kv = a.o_ffn = a.o_vocab = a.o_ctx = a.o_tied = -1;
    a.o_rope = a.o_eps = -1.0f;
    a.dense_lead = a.nextn = a.kv_shared = a.pooling = -1;
    int done, rc = parse_args(&a, argc, argv, &done);
    if (rc || done) return rc;
    synth_shape sh;
    const synth_type *ty;
    if ((rc = resolve_shape(&a, &sh, &ty))) return rc;
    const char *vocab_file = a.vocab_file;
    const int encoder = synth_is_encoder(sh.arch);

    if (!encoder && !vocab_file && !(vocab_file = default_vocab_file())) {
        fprintf(stderr, "staticlm synth: no vocabulary: ../shared/vocab/ggml-vocab-llama-spm.gguf not found; "
                        "pass --vocab-file FILE (a GGUF with a llama/SPM or gpt2/BPE vocabulary)\n");
        return 1;
    }

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    vocab voc;
    if (encoder && !vocab_file ? !vocab_wpm(&voc, sh.vocab) : !vocab_load(&voc, vocab_file, sh.vocab)) return 1;
    if (encoder && !voc.ugm && !voc.wpm) { /* an encoder's vocabulary: WordPiece (generated) or a unigram one */
        fprintf(stderr, "staticlm synth: %s: --vocab-file: an encoder takes a unigram (t5) vocabulary, as XLM-RoBERTa's; "
                        "without --vocab-file its WordPiece vocabulary is generated\n", sh.arch);
        vocab_free(&voc);
        return 2;
    }

    synth s;
    memset(&s, 0, sizeof s);
    s.seed = a.seed;
    s.std = a.std;
    s.w = slm_gguf_writer_new();
    int widest = 3 * sh.dim > 2 * sh.ffn ? 3 * sh.dim : 2 * sh.ffn; /* nomic-bert-moe's Q/K/V bias, jina's up bias */
    if (sh.expert_ffn > widest) widest = sh.expert_ffn;
    if (sh.shared_ffn > widest) widest = sh.shared_ffn;
    if (2 * head_dim_of(&sh) * sh.n_heads > widest) widest = 2 * head_dim_of(&sh) * sh.n_heads;
    if ((2 * sh.ssm_k + sh.ssm_v) * sh.ssm_state > widest) widest = (2 * sh.ssm_k + sh.ssm_v) * sh.ssm_state;
    if (sh.ffn_shared > widest) widest = sh.ffn_shared; /* gemma4 */
    if (sh.ple * sh.n_layers > widest) widest = sh.ple * sh.n_layers;
    s.row = slm_malloc(((size_t)widest + 1) * sizeof(float));
    rc = 1;
    if (!s.w || !s.row) {
        fprintf(stderr, "staticlm synth: out of memory\n");
        goto done;
    }
    put_metadata(s.w, &a, &sh, ty, &voc);
    if (!put_tensors(&s, &sh, ty)) goto done;
    /* a reranker: Qwen3-Reranker's classifier head, its "yes" and "no" rows (random here) */
    if (a.pooling == SLM_POOLING_RANK && !synth_is_encoder(sh.arch) && /* an encoder's head: synth_encoder.c */
        !synth_add(&s, "cls.output.weight", SLM_F16, sh.dim, 2, 0, NULL))
        goto done;

    slm_err err;
    memset(&err, 0, sizeof err);
    if (slm_gguf_write(s.w, a.out, &err)) {
        fprintf(stderr, "staticlm synth: %s\n", err.msg);
        goto done;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "synth: %s %s (%s, %d dim, %d layers, %d/%d heads, ffn %d, vocab %d, %s): %.2f M params, "
                    "%.1f MiB of tensors, in %.1f s ->  %s\n  tensor types:",
            sh.name, ty->name, sh.arch, sh.dim, sh.n_layers, sh.n_heads, sh.n_kv_heads, sh.ffn, sh.vocab,
            sh.tied ? "tied" : "untied", s.n_params / 1e6, s.n_bytes / 1048576.0,
            (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9, a.out);
    for (int t = 0; t < SLM_DTYPE_COUNT; t++)
        if (s.type_count[t]) fprintf(stderr, " %s x%llu", slm_dtype_name((uint32_t)t), (unsigned long long)s.type_count[t]);
    fprintf(stderr, "\n");
    rc = 0;
done:
    for (int i = 0; i < s.n_bufs; i++) slm_xfree(s.bufs[i]);
    slm_xfree(s.bufs);
    slm_xfree(s.row);
    slm_gguf_writer_free(s.w);
    vocab_free(&voc);
    return rc;
}
