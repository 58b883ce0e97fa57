/* Architectures: synthetic GGUF models of each supported family (written
 * with the project's GGUF writer) against the plain reference forward in
 * ref_forward.h, and the same weights as F16 and Q8_0 giving the same greedy
 * tokens. */
#include <math.h>
#include <unistd.h>

#include "common/dtype.h"
#include "compiler/compiler.h"
#include "format/gguf.h"
#include "format/model.h"
#include "blob/blob.h"
#include "blob/format.h"
#include "ref_forward.h"
#include "text/tokenizer.h"
#include "runtime/runtime.h"
#include "t.h"
#include "tok_bin.h"
#include "rig.h"
#include "blob_image.h"

typedef struct synth {
    const char *arch;
    int dim, hidden, layers, heads, kv_heads, vocab, ctx;
    int tied, bias, window, rope_freqs;
    float rope_scale, rope_base;
    float std;        /* weight scale (x 1/sqrt(fan_in)) */
    int peaked;       /* output.weight row r = 4 x token_embd row perm(r) + noise:
                         the next token is a strong function of the current one */
    /* family keys (0 = not written) */
    int head_dim;     /* attention.key_length / value_length */
    int rope_dims;    /* rope.dimension_count (partial rotary) */
    float attn_softcap, final_softcap; /* gemma2 *_logit_softcapping */
    int orig_ctx;     /* phi3: LongRoPE factors and rope.scaling.original_context_length */
    float attn_factor;/* phi3: rope.scaling.attn_factor */
    int yarn_orig;    /* > 0: rope.scaling.type yarn (factor rope_scale) with this original context */
    float beta_fast, beta_slow, ext_factor, yarn_attn; /* its optional keys (0 = not written) */
    float granite[4]; /* granite: embedding_scale, attention.scale, residual_scale, logit_scale */
    int swa_list;     /* olmo2: attention.sliding_window_pattern as the converter's per-layer list
                         (2: layer 1 global too, which llama.cpp would not run) */
    int experts, experts_used; /* MoE: hidden is each expert's width */
    int shared;       /* the shared expert's width (qwen2moe: gated; granitemoe: not) */
    int moe_bad;      /* a hostile MoE file: 1 expert_shared_count 1, 2 sigmoid gating, 3 more
                         used than experts, 4 stacks of one expert fewer, 5 layer 1 without ffn_up_exps,
                         6 layer 1 without the shared expert's gate, 7 a shared expert's width on a
                         family without one, 8 the shared expert's down 16 columns narrow; glm4moe:
                         9 expert_group_count 2, 10 expert_gating_func 3, 11 layer 1 without its
                         selection bias, 12 nextn_predict_layers = block_count, 13 M-RoPE sections,
                         14 leading_dense_block_count beyond the layers */
    /* glm4moe: leading dense layers (width 6 * hidden), trailing MTP layers, per-head Q/K norms,
     * expert_weights_scale (0: not written) */
    int dense_lead, nextn, qk;
    float expert_scale;
    int old_linear_key; /* linear scaling as rope.scale_linear alone (2023's converters), no type */
} synth;

static int is_arch(const synth *s, const char *a) { return !strcmp(s->arch, a); }

static uint64_t g_rng;
static double urand(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return ((g_rng >> 11) + 0.5) / 9007199254740992.0;
}
static float nrand(void) { return (float)(sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand())); }

/* Owned buffers of one file being written. */
typedef struct bufs {
    void *p[1024];
    int n;
} bufs;

static float *g_emb; /* the last token_embd written, as floats */

static slm_status add_tn(slm_gguf_writer *w, bufs *b, const char *name, int64_t cols, int64_t rows, int64_t ne2,
                         uint32_t type, float scale, float bias);
static slm_status add_t(slm_gguf_writer *w, bufs *b, const char *name, int64_t cols, int64_t rows, uint32_t type,
                        float scale, float bias) {
    return add_tn(w, b, name, cols, rows, 1, type, scale, bias);
}
/* [cols, rows, ne2]: ne2 > 1 is a stack of ne2 matrices (the experts). */
static slm_status add_tn(slm_gguf_writer *w, bufs *b, const char *name, int64_t cols, int64_t rows, int64_t ne2,
                         uint32_t type, float scale, float bias) {
    const int64_t rows1 = rows;
    rows *= ne2;
    size_t n = (size_t)(cols * rows);
    float *f = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) f[i] = bias + scale * nrand();
    if (!strcmp(name, "token_embd.weight")) {
        free(g_emb);
        g_emb = malloc(n * sizeof(float));
        memcpy(g_emb, f, n * sizeof(float));
    }
    if (!strcmp(name, "output.weight") && bias != 0.0f) /* peaked: bias carries the marker */
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++)
                f[r * cols + c] = 4.0f * g_emb[((r * 37 + 11) % rows) * cols + c] + scale * nrand();
    int64_t ne[2] = {cols, rows};
    uint64_t rb = slm_row_bytes(type, (uint64_t)cols);
    void *data = f;
    if (type != SLM_F32) {
        data = malloc((size_t)rb * (size_t)rows);
        for (int64_t r = 0; r < rows; r++) {
            if (type == SLM_F16)
                for (int64_t c = 0; c < cols; c++) ((uint16_t *)data)[r * cols + c] = slm_f32_to_f16(f[r * cols + c]);
            else slm_quantize_row(type, f + r * cols, (uint8_t *)data + r * rb, cols);
        }
        free(f);
    }
    b->p[b->n++] = data;
    int64_t ne3[3] = {cols, rows1, ne2};
    if (ne2 > 1) return slm_gguf_add_tensor(w, name, type, 3, ne3, data, rb * (uint64_t)rows);
    return slm_gguf_add_tensor(w, name, type, rows > 1 ? 2 : 1, ne, data, rb * (uint64_t)rows);
}

/* glm4moe's keys, as convert_hf_to_gguf.py's Glm4MoeModel writes them (and the hostile variants). */
static void glm_keys(slm_gguf_writer *w, const synth *s) {
    char k[96];
#define K(x) (snprintf(k, sizeof k, "%s." x, s->arch), k)
    slm_gguf_set_u32(w, K("expert_shared_count"), (uint32_t)(s->shared / s->hidden));
    slm_gguf_set_u32(w, K("leading_dense_block_count"), (uint32_t)(s->moe_bad == 14 ? s->layers + 1 : s->dense_lead));
    slm_gguf_set_u32(w, K("expert_gating_func"), s->moe_bad == 10 ? 3 : 2);
    if (s->expert_scale > 0.0f) slm_gguf_set_f32(w, K("expert_weights_scale"), s->expert_scale);
    slm_gguf_set_bool(w, K("expert_weights_norm"), 1);
    slm_gguf_set_u32(w, K("nextn_predict_layers"), (uint32_t)(s->moe_bad == 12 ? s->layers + s->nextn : s->nextn));
    slm_gguf_set_u32(w, K("expert_group_count"), s->moe_bad == 9 ? 2 : 1);
    slm_gguf_set_u32(w, K("expert_group_used_count"), 1);
    if (s->moe_bad == 13) {
        const int32_t sec[4] = {8, 4, 4, 0};
        slm_gguf_set_arr(w, K("rope.dimension_sections"), SLM_GGUF_I32, sec, 4);
    }
#undef K
}

static int write_model(const char *path, const synth *s, uint32_t mtype, uint64_t seed) {
    g_rng = seed;
    slm_gguf_writer *w = slm_gguf_writer_new();
    bufs b = {.n = 0};
    char k[96];
#define K(x) (snprintf(k, sizeof k, "%s." x, s->arch), k)
    slm_gguf_set_str(w, "general.architecture", s->arch);
    slm_gguf_set_u32(w, K("embedding_length"), (uint32_t)s->dim);
    slm_gguf_set_u32(w, K("feed_forward_length"),
                     (uint32_t)(is_arch(s, "qwen3moe") || is_arch(s, "gpt-oss") || is_arch(s, "qwen2moe") || is_arch(s, "glm4moe") ? 6 * s->hidden
                                                                                                      : s->hidden));
    slm_gguf_set_u32(w, K("block_count"), (uint32_t)(s->layers + s->nextn));
    slm_gguf_set_u32(w, K("attention.head_count"), (uint32_t)s->heads);
    slm_gguf_set_u32(w, K("attention.head_count_kv"), (uint32_t)s->kv_heads);
    slm_gguf_set_u32(w, K("context_length"), (uint32_t)s->ctx);
    slm_gguf_set_f32(w, K("rope.freq_base"), s->rope_base);
    slm_gguf_set_f32(w, K("attention.layer_norm_rms_epsilon"), 1e-5f);
    if (s->window) slm_gguf_set_u32(w, K("attention.sliding_window"), (uint32_t)s->window);
    if (is_arch(s, "granite") || is_arch(s, "granitemoe")) {
        slm_gguf_set_f32(w, K("embedding_scale"), s->granite[0]);
        slm_gguf_set_f32(w, K("attention.scale"), s->granite[1]);
        slm_gguf_set_f32(w, K("residual_scale"), s->granite[2]);
        if (s->granite[3] > 0.0f) slm_gguf_set_f32(w, K("logit_scale"), s->granite[3]);
    }
    if (s->swa_list) { /* Olmo 3: every fourth layer global */
        uint8_t pat[64];
        for (int l = 0; l < s->layers && l < 64; l++) pat[l] = (l + 1) % 4 != 0 && !(s->swa_list == 2 && l == 1);
        slm_gguf_set_arr(w, K("attention.sliding_window_pattern"), SLM_GGUF_BOOL, pat, (uint64_t)s->layers);
    }
    if (s->rope_scale > 1.0f && s->old_linear_key) {
        slm_gguf_set_f32(w, K("rope.scale_linear"), s->rope_scale);
    } else if (s->rope_scale > 1.0f) {
        slm_gguf_set_str(w, K("rope.scaling.type"), s->yarn_orig ? "yarn" : "linear");
        slm_gguf_set_f32(w, K("rope.scaling.factor"), s->rope_scale);
    }
    if (s->yarn_orig) slm_gguf_set_u32(w, K("rope.scaling.original_context_length"), (uint32_t)s->yarn_orig);
    if (s->beta_fast > 0.0f) slm_gguf_set_f32(w, K("rope.scaling.yarn_beta_fast"), s->beta_fast);
    if (s->beta_slow > 0.0f) slm_gguf_set_f32(w, K("rope.scaling.yarn_beta_slow"), s->beta_slow);
    if (s->ext_factor > 0.0f) slm_gguf_set_f32(w, K("rope.scaling.yarn_ext_factor"), s->ext_factor);
    if (s->yarn_attn > 0.0f) slm_gguf_set_f32(w, K("rope.scaling.yarn_attn_factor"), s->yarn_attn);
    const int hd = s->head_dim ? s->head_dim : s->dim / s->heads, kvd = hd * s->kv_heads, qd = hd * s->heads;
    const int gemma = is_arch(s, "gemma2") || is_arch(s, "gemma3"), phi3 = is_arch(s, "phi3");
    const int olmo2 = is_arch(s, "olmo2"), exaone4 = is_arch(s, "exaone4"), post_only = olmo2 || exaone4;
    const int olmoe = is_arch(s, "olmoe"), whole_qk = olmo2 || olmoe, oss = is_arch(s, "gpt-oss");
    const int qk_norm = is_arch(s, "qwen3") || is_arch(s, "gemma3") || post_only || is_arch(s, "qwen3moe") || olmoe || s->qk;
    const int glm = is_arch(s, "glm4moe"), dense_w = glm ? 6 * s->hidden : s->hidden;
    if (s->experts) {
        slm_gguf_set_u32(w, K("expert_count"), (uint32_t)s->experts);
        slm_gguf_set_u32(w, K("expert_used_count"), (uint32_t)(s->moe_bad == 3 ? s->experts + 1 : s->experts_used));
        if (s->moe_bad == 1) slm_gguf_set_u32(w, K("expert_shared_count"), 1);
        if (s->moe_bad == 2) slm_gguf_set_u32(w, K("expert_gating_func"), 2);
        if (is_arch(s, "qwen3moe") || is_arch(s, "gpt-oss") || is_arch(s, "qwen2moe") || is_arch(s, "glm4moe"))
            slm_gguf_set_u32(w, K("expert_feed_forward_length"), (uint32_t)s->hidden);
        if (is_arch(s, "glm4moe")) glm_keys(w, s);
        else if (s->shared || s->moe_bad == 7)
            slm_gguf_set_u32(w, K("expert_shared_feed_forward_length"), (uint32_t)(s->shared ? s->shared : 64));
    }
    if (s->head_dim) {
        slm_gguf_set_u32(w, K("attention.key_length"), (uint32_t)s->head_dim);
        slm_gguf_set_u32(w, K("attention.value_length"), (uint32_t)s->head_dim);
    }
    if (s->rope_dims) slm_gguf_set_u32(w, K("rope.dimension_count"), (uint32_t)s->rope_dims);
    if (s->attn_softcap > 0.0f) slm_gguf_set_f32(w, K("attn_logit_softcapping"), s->attn_softcap);
    if (s->final_softcap > 0.0f) slm_gguf_set_f32(w, K("final_logit_softcapping"), s->final_softcap);
    if (s->orig_ctx) slm_gguf_set_u32(w, K("rope.scaling.original_context_length"), (uint32_t)s->orig_ctx);
    if (s->attn_factor > 0.0f) slm_gguf_set_f32(w, K("rope.scaling.attn_factor"), s->attn_factor);
#undef K
    const float sd = s->std / sqrtf((float)s->dim), sh = s->std / sqrtf((float)s->hidden);
    add_t(w, &b, "token_embd.weight", s->dim, s->vocab, mtype, 1.0f, 0.0f);
    if (s->rope_freqs) {
        float *f = malloc(sizeof(float) * (size_t)(hd / 2));
        for (int i = 0; i < hd / 2; i++) f[i] = i < hd / 4 ? 1.0f : 1.0f + (float)i; /* long wavelengths slowed */
        int64_t ne[1] = {hd / 2};
        b.p[b.n++] = f;
        slm_gguf_add_tensor(w, "rope_freqs.weight", SLM_F32, 1, ne, f, sizeof(float) * (uint64_t)(hd / 2));
    }
    if (s->orig_ctx) { /* LongRoPE: both factor sets, different enough to tell apart */
        const int rd = s->rope_dims ? s->rope_dims : hd;
        add_t(w, &b, "rope_factors_long.weight", rd / 2, 1, SLM_F32, 0.0f, 1.0f);
        add_t(w, &b, "rope_factors_short.weight", rd / 2, 1, SLM_F32, 0.0f, 1.0f);
        float *lf = b.p[b.n - 2], *sf = b.p[b.n - 1];
        for (int i = 0; i < rd / 2; i++) {
            lf[i] = 1.0f + 0.5f * (float)i;
            sf[i] = 1.0f + 0.05f * (float)i;
        }
    }
    for (int l = 0; l < s->layers + s->nextn; l++) {
        char n[64];
#define NAME(x) (snprintf(n, sizeof n, "blk.%d." x, l), n)
        if (!post_only) add_t(w, &b, NAME("attn_norm.weight"), s->dim, 1, SLM_F32, 0.1f, 1.0f);
        if (phi3) { /* fused: Q, K, V rows in one matrix */
            add_t(w, &b, NAME("attn_qkv.weight"), s->dim, qd + 2 * kvd, mtype, sd, 0.0f);
        } else {
            add_t(w, &b, NAME("attn_q.weight"), s->dim, qd, mtype, sd, 0.0f);
            add_t(w, &b, NAME("attn_k.weight"), s->dim, kvd, mtype, sd, 0.0f);
            add_t(w, &b, NAME("attn_v.weight"), s->dim, kvd, mtype, sd, 0.0f);
        }
        if (s->bias) {
            add_t(w, &b, NAME("attn_q.bias"), qd, 1, SLM_F32, 0.5f, 0.0f);
            add_t(w, &b, NAME("attn_k.bias"), kvd, 1, SLM_F32, 0.5f, 0.0f);
            add_t(w, &b, NAME("attn_v.bias"), kvd, 1, SLM_F32, 0.5f, 0.0f);
        }
        if (qk_norm) { /* olmo2: whole Q and K rows */
            add_t(w, &b, NAME("attn_q_norm.weight"), whole_qk ? qd : hd, 1, SLM_F32, 0.2f, 1.0f);
            add_t(w, &b, NAME("attn_k_norm.weight"), whole_qk ? kvd : hd, 1, SLM_F32, 0.2f, 1.0f);
        }
        add_t(w, &b, NAME("attn_output.weight"), qd, s->dim, mtype, s->std / sqrtf((float)qd), 0.0f);
        if (oss) { /* gpt-oss: sinks of a few units (they take a visible share), the output bias */
            add_t(w, &b, NAME("attn_sinks.weight"), s->heads, 1, SLM_F32, 1.0f, 0.5f);
            add_t(w, &b, NAME("attn_output.bias"), s->dim, 1, SLM_F32, 0.5f, 0.0f);
        }
        if (gemma || post_only) add_t(w, &b, NAME("post_attention_norm.weight"), s->dim, 1, SLM_F32, 0.1f, 1.0f);
        if (!post_only) add_t(w, &b, oss || glm ? NAME("post_attention_norm.weight") : NAME("ffn_norm.weight"), s->dim, 1, SLM_F32, 0.1f, 1.0f);
        if (l >= s->layers) { /* glm4moe's MTP layer: written, never run */
            add_t(w, &b, NAME("nextn.eh_proj.weight"), 2 * s->dim, s->dim, mtype, sd, 0.0f);
            add_t(w, &b, NAME("nextn.enorm.weight"), s->dim, 1, SLM_F32, 0.1f, 1.0f);
            add_t(w, &b, NAME("nextn.hnorm.weight"), s->dim, 1, SLM_F32, 0.1f, 1.0f);
        }
        if (s->experts && l >= s->dense_lead) { /* the router (f32, as llama-quantize leaves it), the experts stacked */
            add_t(w, &b, NAME("ffn_gate_inp.weight"), s->dim, s->experts, SLM_F32, 4.0f * sd, 0.0f);
            /* glm4moe's selection bias: of the sigmoid scores' spread, so that it moves choices */
            if (glm && !(s->moe_bad == 11 && l == 1)) add_t(w, &b, NAME("exp_probs_b.bias"), s->experts, 1, SLM_F32, 0.3f, 0.0f);
            if (oss) { /* the router's and the experts' biases, [out, experts] */
                add_t(w, &b, NAME("ffn_gate_inp.bias"), s->experts, 1, SLM_F32, 1.0f, 0.0f);
                /* large enough that some gates and ups reach the clamp at 7 */
                add_t(w, &b, NAME("ffn_gate_exps.bias"), s->hidden, s->experts, SLM_F32, 5.0f, 0.0f);
                add_t(w, &b, NAME("ffn_up_exps.bias"), s->hidden, s->experts, SLM_F32, 5.0f, 0.0f);
                add_t(w, &b, NAME("ffn_down_exps.bias"), s->dim, s->experts, SLM_F32, 0.2f, 0.0f);
            }
            const int ne = s->experts - (s->moe_bad == 4);
            add_tn(w, &b, NAME("ffn_gate_exps.weight"), s->dim, s->hidden, ne, mtype, sd, 0.0f);
            if (!(s->moe_bad == 5 && l == 1)) add_tn(w, &b, NAME("ffn_up_exps.weight"), s->dim, s->hidden, ne, mtype, sd, 0.0f);
            add_tn(w, &b, NAME("ffn_down_exps.weight"), s->hidden, s->dim, ne, mtype, sh, 0.0f);
            if (s->shared) { /* qwen2moe's gate [dim] (f32, as llama-quantize leaves a vector) */
                if (is_arch(s, "qwen2moe") && !(s->moe_bad == 6 && l == 1))
                    add_t(w, &b, NAME("ffn_gate_inp_shexp.weight"), s->dim, 1, SLM_F32, 2.0f * sd, 0.0f);
                add_t(w, &b, NAME("ffn_gate_shexp.weight"), s->dim, s->shared, mtype, sd, 0.0f);
                add_t(w, &b, NAME("ffn_up_shexp.weight"), s->dim, s->shared, mtype, sd, 0.0f);
                add_t(w, &b, NAME("ffn_down_shexp.weight"), s->shared - 16 * (s->moe_bad == 8), s->dim, mtype,
                      s->std / sqrtf((float)s->shared), 0.0f);
            }
            continue;
        }
        if (phi3) { /* fused: gate rows, then up rows */
            add_t(w, &b, NAME("ffn_up.weight"), s->dim, 2 * s->hidden, mtype, sd, 0.0f);
        } else {
            add_t(w, &b, NAME("ffn_gate.weight"), s->dim, dense_w, mtype, sd, 0.0f);
            add_t(w, &b, NAME("ffn_up.weight"), s->dim, dense_w, mtype, sd, 0.0f);
        }
        add_t(w, &b, NAME("ffn_down.weight"), dense_w, s->dim, mtype, s->std / sqrtf((float)dense_w), 0.0f);
        if (gemma || post_only) add_t(w, &b, NAME("post_ffw_norm.weight"), s->dim, 1, SLM_F32, 0.1f, 1.0f);
#undef NAME
    }
    add_t(w, &b, "output_norm.weight", s->dim, 1, SLM_F32, 0.1f, 1.0f);
    if (!s->tied) add_t(w, &b, "output.weight", s->dim, s->vocab, mtype, 2.0f * sd, s->peaked ? 1.0f : 0.0f);
    slm_err err = {0};
    slm_status st = slm_gguf_write(w, path, &err);
    CHECKF(st == SLM_OK, "write %s: %s", path, err.msg);
    slm_gguf_writer_free(w);
    for (int i = 0; i < b.n; i++) free(b.p[i]);
    return st == SLM_OK;
}


static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[b]) b = i;
    return b;
}

/* rig_open with a runtime of n_threads threads (the pool's scratch, the
 * tiles claimed by several threads). */
static int g_kv_type = SLM_F32; /* the KV cache's element type of the runs below */

static int rig_open_threads(rig *r, const char *path, int mpl, int mrl, int n_threads) {
    memset(r, 0, sizeof *r);
    slm_err err = {0};
    slm_compile_options o = rig_opts(mpl, mrl);
    o.kv_type = g_kv_type;
    if (slm_model_open(&r->m, path, &err) || slm_model_repack(&r->m, &err) || slm_compile(&r->c, &r->m, &o, &err) ||
        slm_rt_init(&r->rt, &r->c, r->m.map.data, n_threads, &err)) {
        CHECKF(0, "%s: %s", path, err.msg);
        slm_compiled_free(&r->c);
        slm_model_close(&r->m);
        return 0;
    }
    return r->ok = 1;
}

static int g_threads = 1;

/* Our logits for each position (prefill of `first` ids, then decode)
 * against the reference; returns the worst relative error. */
static double compare(const char *path, const int32_t *ids, int n, int first, int mpl) {
    rig r;
    if (!rig_open_threads(&r, path, mpl, n, g_threads)) return INFINITY;
    const int V = r.c.cfg.vocab_size;
    float *ref = malloc(sizeof(float) * (size_t)n * V);
    double worst = 0;
    if (!ref_forward_ctx(&r.m, ids, n, ref, r.c.kv_capacity)) {
        CHECKF(0, "reference forward failed on %s", path);
        worst = INFINITY;
        goto done;
    }
    slm_err err = {0};
    if (slm_rt_prefill(&r.rt, ids, first, &err)) {
        CHECKF(0, "prefill: %s", err.msg);
        worst = INFINITY;
        goto done;
    }
    for (int p = first - 1; p < n; p++) {
        if (p >= first && slm_rt_decode(&r.rt, ids[p], &err)) {
            CHECKF(0, "decode: %s", err.msg);
            worst = INFINITY;
            break;
        }
        double maxd = 0, maxr = 1e-6;
        for (int i = 0; i < V; i++) {
            maxd = fmax(maxd, fabs((double)r.rt.logits[i] - ref[(size_t)p * V + i]));
            maxr = fmax(maxr, fabs(ref[(size_t)p * V + i]));
        }
        if (isnan(r.rt.logits[0])) maxd = INFINITY;
        worst = fmax(worst, maxd / maxr);
    }
done:
    free(ref);
    rig_close(&r);
    return worst;
}

static const synth k_archs[] = {
    /* llama with GQA, untied head, Llama 3 style rope_freqs */
    {.arch = "llama", .dim = 64, .hidden = 96, .layers = 2, .heads = 4, .kv_heads = 2, .vocab = 160, .ctx = 128,
      .rope_freqs = 1, .rope_scale = 1.0f, .rope_base = 500000.0f, .std = 1.0f},
    /* qwen2: Q/K/V bias, neox RoPE, tied embeddings */
    {.arch = "qwen2", .dim = 64, .hidden = 96, .layers = 2, .heads = 4, .kv_heads = 1, .vocab = 160, .ctx = 128,
      .tied = 1, .bias = 1, .rope_scale = 1.0f, .rope_base = 1000000.0f, .std = 1.0f},
    /* mistral: sliding window of 8 rows over a 40-token sequence */
    {.arch = "mistral", .dim = 64, .hidden = 96, .layers = 2, .heads = 8, .kv_heads = 2, .vocab = 160, .ctx = 128,
      .window = 8, .rope_scale = 1.0f, .rope_base = 10000.0f, .std = 1.0f},
    /* llama with linear RoPE scaling */
    {.arch = "llama", .dim = 32, .hidden = 64, .layers = 1, .heads = 2, .kv_heads = 2, .vocab = 96, .ctx = 128,
      .tied = 1, .rope_scale = 4.0f, .rope_base = 10000.0f, .std = 1.0f},
    /* qwen3: per-head Q/K RMSNorm, head size 32 with 4 heads over dim 64
     * (Q is 128 wide, as Qwen3-0.6B's 16 x 128 over 1024), tied */
    {.arch = "qwen3", .dim = 64, .hidden = 96, .layers = 2, .heads = 4, .kv_heads = 2, .vocab = 160, .ctx = 128,
     .tied = 1, .rope_scale = 1.0f, .rope_base = 1000000.0f, .std = 1.0f, .head_dim = 32},
    /* gemma2: GeGLU, post norms, embedding scale, score and logit caps small
     * enough to bend, window 6 on layer 0 of 2 (layer 1 global), head size 32 */
    {.arch = "gemma2", .dim = 64, .hidden = 96, .layers = 2, .heads = 4, .kv_heads = 2, .vocab = 160, .ctx = 128,
     .tied = 1, .window = 6, .rope_scale = 1.0f, .rope_base = 10000.0f, .std = 1.0f, .head_dim = 32,
     .attn_softcap = 2.0f, .final_softcap = 8.0f},
    /* gemma3: Q/K norm, window 6 on layers 0-4 (RoPE base 10000), layer 5
     * global with the file's base 1e6, linear scaling 2 there */
    {.arch = "gemma3", .dim = 64, .hidden = 96, .layers = 6, .heads = 2, .kv_heads = 1, .vocab = 160, .ctx = 128,
     .tied = 1, .window = 6, .rope_scale = 2.0f, .rope_base = 1000000.0f, .std = 1.0f, .head_dim = 32},
    /* phi3 (Phi-4-mini-like): fused QKV and gate/up, partial rotary 24 of 32,
     * LongRoPE factors (long above 64 rows of context, so the 104-row run
     * takes the long ones and the 48-row run the short ones), attn_factor */
    {.arch = "phi3", .dim = 64, .hidden = 96, .layers = 2, .heads = 2, .kv_heads = 1, .vocab = 160, .ctx = 256,
     .tied = 1, .rope_scale = 1.0f, .rope_base = 10000.0f, .std = 1.0f, .rope_dims = 24, .orig_ctx = 64,
     .attn_factor = 1.19f},
    /* smollm3: llama with no RoPE on every fourth layer (layer 3 of 4 here;
     * llama.cpp's fixed step), GQA, head size 32, tied */
    {.arch = "smollm3", .dim = 64, .hidden = 96, .layers = 4, .heads = 2, .kv_heads = 1, .vocab = 160, .ctx = 128,
     .tied = 1, .rope_scale = 1.0f, .rope_base = 5000000.0f, .std = 1.0f},
    /* qwen3 with YaRN (Qwen3's long-context setting, factor 4): pairs 0..1
     * keep their angle, 2..4 ramp, 5.. are interpolated (orig_ctx 64,
     * base 10000, 32 wide heads); magnitude 1 + 0.1 ln 4 */
    {.arch = "qwen3", .dim = 64, .hidden = 96, .layers = 2, .heads = 4, .kv_heads = 2, .vocab = 160, .ctx = 256,
     .tied = 1, .rope_scale = 4.0f, .rope_base = 10000.0f, .std = 1.0f, .head_dim = 32, .yarn_orig = 64},
    /* olmo2 (OLMo 2): no pre-norms, Q/K norms over the whole rows, post
     * norms, neox RoPE, untied */
    {.arch = "olmo2", .dim = 64, .hidden = 96, .layers = 2, .heads = 4, .kv_heads = 2, .vocab = 160, .ctx = 128,
     .rope_scale = 1.0f, .rope_base = 500000.0f, .std = 1.0f},
    /* olmo2 as Olmo 3: window 6 on layers 0-2 (the converter's per-layer
     * list), layer 3 global with YaRN factor 4; the window layers rotate
     * plainly (llama.cpp's rule) */
    {.arch = "olmo2", .dim = 64, .hidden = 96, .layers = 4, .heads = 4, .kv_heads = 2, .vocab = 160, .ctx = 256,
     .window = 6, .rope_scale = 4.0f, .rope_base = 10000.0f, .std = 1.0f, .yarn_orig = 64, .swa_list = 1},
    /* granite: llama with muP multipliers (embedding 3, residual 0.5, logits
     * / 4, query scale 1/16 instead of 1/4: Granite 3's 12 / 0.22 drown the
     * attention in the embeddings, and the KV types' rounding with it), GQA, tied */
    {.arch = "granite", .dim = 64, .hidden = 96, .layers = 2, .heads = 4, .kv_heads = 2, .vocab = 163, .ctx = 128,
     .tied = 1, .rope_scale = 1.0f, .rope_base = 10000000.0f, .std = 1.0f, .granite = {3.0f, 0.0625f, 0.5f, 4.0f}},
    /* exaone (EXAONE 3.5): llama's tensors with neox RoPE, GQA, untied */
    {.arch = "exaone", .dim = 64, .hidden = 96, .layers = 2, .heads = 4, .kv_heads = 2, .vocab = 160, .ctx = 128,
     .rope_scale = 1.0f, .rope_base = 1000000.0f, .std = 1.0f},
    /* exaone4 at 64 layers (the 32B's depth, where llama.cpp turns the window
     * on): no pre-norms, per-head Q/K norms, post norms, window 6 on three
     * layers of four, every fourth layer global without RoPE; small widths */
    {.arch = "exaone4", .dim = 32, .hidden = 64, .layers = 64, .heads = 2, .kv_heads = 1, .vocab = 96, .ctx = 128,
     .tied = 1, .window = 6, .rope_scale = 1.0f, .rope_base = 1000000.0f, .std = 1.0f},
    /* exaone4 at 2 layers (EXAONE 4.0 1.2B style): no window, RoPE everywhere */
    {.arch = "exaone4", .dim = 64, .hidden = 96, .layers = 2, .heads = 4, .kv_heads = 2, .vocab = 160, .ctx = 128,
     .tied = 1, .window = 6, .rope_scale = 1.0f, .rope_base = 1000000.0f, .std = 1.0f},
    /* qwen3moe (Qwen3-30B-A3B's form): 8 experts of width 32, 3 per token,
     * renormalized; per-head Q/K norms, head size 32, untied */
    {.arch = "qwen3moe", .dim = 64, .hidden = 32, .layers = 2, .heads = 4, .kv_heads = 2, .vocab = 160, .ctx = 128,
     .rope_scale = 1.0f, .rope_base = 1000000.0f, .std = 1.0f, .head_dim = 32, .experts = 8, .experts_used = 3},
    /* olmoe: 16 experts, 4 per token, weights as the router gives them (not
     * renormalized), whole-row Q/K norms, no GQA */
    {.arch = "olmoe", .dim = 64, .hidden = 64, .layers = 2, .heads = 2, .kv_heads = 2, .vocab = 160, .ctx = 128,
     .rope_scale = 1.0f, .rope_base = 10000.0f, .std = 1.0f, .experts = 16, .experts_used = 4},
    /* granitemoe (Granite 3 MoE): granite's multipliers (the residual scale on
     * the experts' weighted sum too), 8 experts, 2 per token, tied */
    {.arch = "granitemoe", .dim = 64, .hidden = 64, .layers = 2, .heads = 4, .kv_heads = 2, .vocab = 160, .ctx = 128,
     .tied = 1, .rope_scale = 1.0f, .rope_base = 10000.0f, .std = 1.0f, .granite = {1.5f, 0.25f, 0.5f, 4.0f},
     .experts = 8, .experts_used = 2},
    /* gpt-oss: Q/K/V and output biases, attention sinks, window 6 on the even
     * layers, YaRN 4 over 64 on all, 8 experts of width 64, 2 per token, the
     * router's and the experts' biases, the clamped SwiGLU (gate and up
     * biases reach the clamp at 7), untied */
    {.arch = "gpt-oss", .dim = 64, .hidden = 64, .layers = 2, .heads = 4, .kv_heads = 2, .vocab = 160, .ctx = 256,
     .bias = 1, .window = 6, .rope_scale = 4.0f, .rope_base = 150000.0f, .std = 1.0f, .head_dim = 32, .yarn_orig = 64,
     .experts = 8, .experts_used = 2},
    /* qwen2moe (Qwen1.5-MoE's form): Q/K/V biases, 8 experts of width 32, 2
     * per token, not renormalized, the shared expert of width 96 behind its
     * sigmoid gate, untied */
    {.arch = "qwen2moe", .dim = 64, .hidden = 32, .layers = 2, .heads = 4, .kv_heads = 2, .vocab = 160, .ctx = 128,
     .bias = 1, .rope_scale = 1.0f, .rope_base = 1000000.0f, .std = 1.0f, .experts = 8, .experts_used = 2, .shared = 96},
    /* granitemoe with a shared expert (GraniteMoeShared): width 64, no gate,
     * granite's residual scale over the experts' sum and the shared output */
    {.arch = "granitemoe", .dim = 64, .hidden = 32, .layers = 2, .heads = 4, .kv_heads = 2, .vocab = 160, .ctx = 128,
     .tied = 1, .rope_scale = 1.0f, .rope_base = 10000.0f, .std = 1.0f, .granite = {1.5f, 0.25f, 0.5f, 4.0f},
     .experts = 4, .experts_used = 2, .shared = 64},
    /* llama with experts (Mixtral): 4 experts, 2 per token, GQA, tied */
    {.arch = "llama", .dim = 64, .hidden = 96, .layers = 2, .heads = 4, .kv_heads = 2, .vocab = 160, .ctx = 128,
     .tied = 1, .rope_scale = 1.0f, .rope_base = 1000000.0f, .std = 1.0f, .experts = 4, .experts_used = 2},
    /* llama (adjacent pairs) with YaRN and every optional key: beta_fast 4,
     * beta_slow 2, half the ramp, the file's magnitude */
    {.arch = "llama", .dim = 64, .hidden = 96, .layers = 2, .heads = 2, .kv_heads = 2, .vocab = 160, .ctx = 256,
     .rope_scale = 8.0f, .rope_base = 10000.0f, .std = 1.0f, .yarn_orig = 32, .beta_fast = 4.0f, .beta_slow = 2.0f,
     .ext_factor = 0.5f, .yarn_attn = 1.3f},
    /* glm4moe (GLM-4.5's form): Q/K/V biases, per-head Q/K norms, half of each
     * head rotated (neox), layer 0 dense (width 192), 8 experts of width 32, 2
     * per token by sigmoid score plus the selection bias, renormalized and
     * scaled by 2.5, an ungated shared expert of one expert's width, an MTP
     * layer after the 3 (not run), untied */
    {.arch = "glm4moe", .dim = 64, .hidden = 32, .layers = 3, .heads = 4, .kv_heads = 2, .vocab = 160, .ctx = 128,
     .bias = 1, .rope_scale = 1.0f, .rope_base = 1000000.0f, .std = 1.0f, .rope_dims = 8, .experts = 8,
     .experts_used = 2, .shared = 32, .dense_lead = 1, .nextn = 1, .qk = 1, .expert_scale = 2.5f},
    /* glm4moe (GLM-4.5-Air's form): no Q/K norms, two dense layers, a shared
     * expert of two experts' width, no scale key (1), no MTP layer, tied */
    {.arch = "glm4moe", .dim = 64, .hidden = 32, .layers = 3, .heads = 4, .kv_heads = 2, .vocab = 160, .ctx = 128,
     .tied = 1, .bias = 1, .rope_scale = 1.0f, .rope_base = 1000000.0f, .std = 1.0f, .rope_dims = 8, .experts = 8,
     .experts_used = 2, .shared = 64, .dense_lead = 2},
};

static void test_arch_vs_reference(void) {
    int32_t ids[40];
    g_rng = 99;
    for (int i = 0; i < 40; i++) ids[i] = (int32_t)(urand() * 90);
    for (size_t a = 0; a < sizeof k_archs / sizeof k_archs[0]; a++) {
        /* the quantized files' matrices run repacked (SLM_*_R16) */
        static const uint32_t types[4] = {SLM_F32, SLM_F16, SLM_Q8_0, SLM_Q4_0};
        /* 64 layers (exaone4's window): int8 activations' rounding adds up to
         * ~10% of the logits; the float types check the layer pattern. MoE:
         * the same rounding moves the router's logits, and where two experts
         * are that close a row picks the other one (llama.cpp's int8
         * activations do too), so only q8_0 of the quantized types */
        const int n_types = k_archs[a].layers > 16 ? 2 : k_archs[a].experts ? 3 : 4;
        for (int t = 0; t < n_types; t++) {
            char path[256];
            snprintf(path, sizeof path, "arch_%zu_%s.gguf", a, slm_dtype_name(types[t]));
            if (!write_model(path, &k_archs[a], types[t], 1234 + a)) continue;
            double e1 = compare(path, ids, 40, 5, 64);  /* prefill 5, decode 35 */
            double e2 = compare(path, ids, 40, 30, 8);  /* chunked prefill: 30 ids through 8 rows */
            /* f32/f16: float dot products, only the summation order differs.
             * q8_0: activations are quantized to int8 blocks for the integer
             * dot product (as llama.cpp does), ~0.4% per element. */
            double tol = types[t] == SLM_Q8_0 || types[t] == SLM_Q4_0 ? 5e-2 : 1e-4;
            CHECKF(e1 < tol && e2 < tol, "%s %s: logits rel err %.3g / %.3g vs reference", k_archs[a].arch,
                   slm_dtype_name(types[t]), e1, e2);
            unlink(path);
        }
    }
}

/* The KV cache as f16 or q8_0: every family's logits (prefill, decode,
 * chunked prefill; one thread and three) stay within the type's rounding of
 * the double-precision reference, on f32 weights so that the KV is the only
 * rounding. q8_0 needs head_dim % 32 == 0: the 16-wide llama shapes are
 * refused with a message naming head_dim. */
static void test_arch_kv_types(void) {
    int32_t ids[40];
    g_rng = 77;
    for (int i = 0; i < 40; i++) ids[i] = (int32_t)(urand() * 90);
    static const int kts[2] = {SLM_F16, SLM_Q8_0};
    for (size_t a = 0; a < sizeof k_archs / sizeof k_archs[0]; a++) {
        char path[256];
        snprintf(path, sizeof path, "arch_kv_%zu.gguf", a);
        if (!write_model(path, &k_archs[a], SLM_F32, 4321 + a)) continue;
        const int hd = k_archs[a].head_dim ? k_archs[a].head_dim : k_archs[a].dim / k_archs[a].heads;
        for (int t = 0; t < 2; t++) {
            g_kv_type = kts[t];
            if (kts[t] == SLM_Q8_0 && hd % 32) {
                slm_model_file m;
                slm_compiled c;
                slm_err err = {0};
                slm_compile_options o = rig_opts(8, 8);
                o.kv_type = SLM_Q8_0;
                if (slm_model_open(&m, path, &err) == SLM_OK) {
                    CHECKF(slm_compile(&c, &m, &o, &err) == SLM_ERR_UNSUPPORTED && strstr(err.msg, "head_dim"),
                           "%s: q8_0 KV with head_dim %d: %s", k_archs[a].arch, hd, err.msg);
                    slm_model_close(&m);
                }
                continue;
            }
            g_threads = t + 1 + (int)(a % 2); /* one to three threads */
            double e1 = compare(path, ids, 40, 5, 64);
            double e2 = compare(path, ids, 40, 30, 8);
            /* f16: 2^-11 relative per K/V element (measured ~2e-4 on the logits);
               q8_0: 1/254 of each block's largest (~4e-3). Above f32's ~1e-6: the
               cache really holds the type */
            /* ... and the rounding adds up with depth (64 layers: exaone4's window) */
            const double depth = k_archs[a].layers > 16 ? k_archs[a].layers / 16.0 : 1.0;
            const double tol = (kts[t] == SLM_F16 ? 1e-3 : 2e-2) * depth;
            CHECKF(e1 < tol && e2 < tol && e1 > 1e-5, "%s KV %s: logits rel err %.3g / %.3g vs reference",
                   k_archs[a].arch, slm_dtype_name((uint32_t)kts[t]), e1, e2);
        }
        unlink(path);
    }
    g_kv_type = SLM_F32;
    g_threads = 1;
}

/* The new families' programs run by three threads give the reference's
 * logits too (quantized: repacked kernels, per-thread activation memo). */
static void test_arch_threads(void) {
    int32_t ids[40];
    g_rng = 7;
    for (int i = 0; i < 40; i++) ids[i] = (int32_t)(urand() * 90);
    static const char *const archs[] = {"qwen3", "gemma2", "gemma3", "phi3", "smollm3", "qwen3moe", "olmoe"};
    g_threads = 3;
    for (int a = 0; a < (int)(sizeof archs / sizeof archs[0]); a++) {
        const synth *sy = NULL;
        for (size_t j = 0; j < sizeof k_archs / sizeof k_archs[0]; j++)
            if (!strcmp(k_archs[j].arch, archs[a])) sy = &k_archs[j];
        static const uint32_t types[2] = {SLM_F32, SLM_Q8_0};
        for (int t = 0; t < 2; t++) {
            char path[64];
            snprintf(path, sizeof path, "thr_%s.gguf", archs[a]);
            if (!sy || !write_model(path, sy, types[t], 99)) continue;
            double e1 = compare(path, ids, 40, 13, 64), e2 = compare(path, ids, 40, 30, 8);
            double tol = types[t] == SLM_F32 ? 1e-4 : 5e-2;
            CHECKF(e1 < tol && e2 < tol, "%s %s, 3 threads: logits rel err %.3g / %.3g", archs[a], slm_dtype_name(types[t]),
                   e1, e2);
            unlink(path);
        }
    }
    g_threads = 1;
}

/* The new families' programs survive a blob: written, validated, read back
 * and run, they give the model file's logits bit for bit, with every KV
 * type (the options record keeps it; the KV I/O and tasks validate in it). */
static void test_arch_blob_roundtrip(void) {
    static const char *const archs[] = {"qwen3", "gemma2", "gemma3", "phi3", "smollm3", "qwen3moe", "olmoe"};
    int32_t ids[24];
    g_rng = 11;
    for (int i = 0; i < 24; i++) ids[i] = (int32_t)(urand() * 90);
    if (!write_tok("arch_tok.bin", 160)) return;
    for (int a = 0; a < (int)(sizeof archs / sizeof archs[0]); a++) {
        const synth *sy = NULL;
        for (size_t j = 0; j < sizeof k_archs / sizeof k_archs[0]; j++)
            if (!strcmp(k_archs[j].arch, archs[a])) sy = &k_archs[j];
        char path[64], bpath[64];
        snprintf(path, sizeof path, "blob_%s.gguf", archs[a]);
        snprintf(bpath, sizeof bpath, "blob_%s.slmblob", archs[a]);
        if (!sy || !write_model(path, sy, SLM_Q8_0, 5)) continue;
        static const int kts[3] = {SLM_F32, SLM_F16, SLM_Q8_0};
        for (int kt = 0; kt < 3; kt++) {
        g_kv_type = kts[kt];
        rig r;
        if (!rig_open_threads(&r, path, 8, 24, 1)) continue;
        CHECK(r.c.opt.kv_type == kts[kt]);
        rig_blob_trip(&r, archs[a], "arch_tok.bin", 160, bpath, ids, 13, 24);
        rig_close(&r);
        unlink(bpath);
        }
        g_kv_type = SLM_F32;
        unlink(path);
    }
    unlink("arch_tok.bin");
}

static const synth *find_synth(const char *arch) {
    for (size_t a = 0; a < sizeof k_archs / sizeof k_archs[0]; a++)
        if (!strcmp(k_archs[a].arch, arch)) return &k_archs[a];
    return NULL;
}

/* Each family's hyperparameters come from the file's keys (not from sizes
 * built into the loader), with llama.cpp's rules for what the keys leave out. */
static int open_ok(slm_model_file *m, const char *path) {
    slm_err err = {0};
    slm_status st = slm_model_open(m, path, &err);
    CHECKF(st == SLM_OK, "%s", err.msg);
    return st == SLM_OK;
}

/* The k_archs entry with YaRN of family arch. */
static const synth *find_yarn(const char *arch) {
    for (size_t a = 0; a < sizeof k_archs / sizeof k_archs[0]; a++)
        if (!strcmp(k_archs[a].arch, arch) && k_archs[a].yarn_orig) return &k_archs[a];
    return NULL;
}

/* YaRN's keys: the defaults (betas 32 and 1, the whole ramp, magnitude
 * 1 + 0.1 ln(factor)) and the file's own; a factor of 1 is no scaling;
 * linear scaling by the older key rope.scale_linear;
 * beside gemma3's local RoPE (kept plain); refused with Llama 3 factors. */
static void test_yarn_config(void) {
    slm_model_file m;
    if (write_model("yarn_q3.gguf", find_yarn("qwen3"), SLM_F32, 5) && open_ok(&m, "yarn_q3.gguf")) {
        const slm_model_config *c = &m.cfg;
        CHECK(c->rope_yarn == 1 && c->rope_scale == 4.0f && c->rope_orig_ctx == 64 && !c->rope_long);
        CHECK(c->yarn_beta_fast == 32.0f && c->yarn_beta_slow == 1.0f && c->yarn_ext_factor == 1.0f);
        CHECKF(fabsf(c->rope_attn_factor - (1.0f + 0.1f * logf(4.0f))) < 1e-6f, "%g", (double)c->rope_attn_factor);
        slm_model_close(&m);
    }
    if (write_model("yarn_ll.gguf", find_yarn("llama"), SLM_F32, 5) && open_ok(&m, "yarn_ll.gguf")) {
        const slm_model_config *c = &m.cfg;
        CHECK(c->rope_yarn == 1 && c->rope_scale == 8.0f && c->rope_orig_ctx == 32);
        CHECK(c->yarn_beta_fast == 4.0f && c->yarn_beta_slow == 2.0f && c->yarn_ext_factor == 0.5f);
        CHECK(c->rope_attn_factor == 1.3f);
        slm_model_close(&m);
    }
    synth one = *find_yarn("qwen3");
    one.rope_scale = 1.0f; /* "yarn" with factor 1: no scaling at all */
    if (write_model("yarn_q3.gguf", &one, SLM_F32, 5) && open_ok(&m, "yarn_q3.gguf")) {
        CHECK(!m.cfg.rope_yarn && m.cfg.rope_scale == 1.0f && m.cfg.rope_attn_factor == 0.0f);
        slm_model_close(&m);
    }
    synth lin = *find_synth("llama"); /* linear scaling by the older key, as llama.cpp reads it */
    lin.rope_freqs = 0, lin.rope_scale = 4.0f, lin.old_linear_key = 1;
    if (write_model("yarn_q3.gguf", &lin, SLM_F32, 5) && open_ok(&m, "yarn_q3.gguf")) {
        CHECKF(!m.cfg.rope_yarn && m.cfg.rope_scale == 4.0f, "rope.scale_linear 4: scale %g", (double)m.cfg.rope_scale);
        slm_model_close(&m);
    }
    lin.rope_scale = 1.0f; /* not written: none */
    if (write_model("yarn_q3.gguf", &lin, SLM_F32, 5) && open_ok(&m, "yarn_q3.gguf")) {
        CHECK(m.cfg.rope_scale == 1.0f);
        slm_model_close(&m);
    }
    synth g3 = *find_synth("gemma3"); /* the local layers keep plain RoPE, as llama.cpp runs them */
    g3.yarn_orig = 64;
    if (write_model("yarn_g3.gguf", &g3, SLM_F32, 5) && open_ok(&m, "yarn_g3.gguf")) {
        CHECK(m.cfg.rope_yarn && m.cfg.rope_scale == 2.0f && m.cfg.rope_scale_swa == 1.0f);
        slm_model_close(&m);
    }
    synth l3 = *find_synth("llama"); /* Llama 3 factors and YaRN: refused */
    l3.rope_scale = 2.0f;
    l3.yarn_orig = 64;
    if (write_model("yarn_g3.gguf", &l3, SLM_F32, 5)) {
        slm_err err = {0};
        CHECK(slm_model_open(&m, "yarn_g3.gguf", &err) == SLM_ERR_UNSUPPORTED);
        CHECKF(strstr(err.msg, "yarn_g3.gguf") && strstr(err.msg, "YaRN") && strstr(err.msg, "rope_freqs"), "%s", err.msg);
    }
    unlink("yarn_q3.gguf");
    unlink("yarn_ll.gguf");
    unlink("yarn_g3.gguf");
}

/* olmo2's keys: OLMo 2 (no window) and Olmo 3 (window on three layers of
 * four, from the converter's list; a list of another pattern is refused
 * naming the layer, since llama.cpp runs period 4 whatever it says). */
static void test_olmo2_config(void) {
    slm_model_file m;
    const synth *o2 = find_synth("olmo2"), *o3 = find_yarn("olmo2");
    if (write_model("fam_olmo2.gguf", o2, SLM_F32, 5) && open_ok(&m, "fam_olmo2.gguf")) {
        const slm_model_config *c = &m.cfg;
        CHECK(c->qk_norm == 2 && c->no_pre_norms && c->post_norms && c->rope_neox && !c->ffn_gelu && !c->tied_embeddings);
        CHECK(c->sliding_window == 0 && c->rope_base_swa == 0.0f && !c->rope_yarn);
        CHECK(!slm_model_tensor(&m, "blk.0.attn_norm.weight") && slm_model_tensor(&m, "blk.0.attn_q_norm.weight")->ne[0] == 64);
        slm_model_close(&m);
    }
    if (write_model("fam_olmo2.gguf", o3, SLM_F32, 5) && open_ok(&m, "fam_olmo2.gguf")) {
        const slm_model_config *c = &m.cfg;
        CHECK(c->sliding_window == 6 && c->swa_pattern == 4 && c->rope_base_swa == 10000.0f && c->rope_scale_swa == 1.0f);
        CHECK(slm_layer_swa(c, 0) && slm_layer_swa(c, 2) && !slm_layer_swa(c, 3) && slm_rope_table_of(c, 0) == 1 &&
              slm_rope_table_of(c, 3) == 0);
        CHECK(c->rope_yarn && c->rope_scale == 4.0f && c->rope_orig_ctx == 64);
        slm_model_close(&m);
    }
    synth bad = *o3; /* 8 layers: the list says period 4, so layer 7 global; with 5 layers, layer 4 slides */
    bad.layers = 5;
    if (write_model("fam_olmo2.gguf", &bad, SLM_F32, 5) && open_ok(&m, "fam_olmo2.gguf")) {
        CHECK(slm_layer_swa(&m.cfg, 4) && !slm_layer_swa(&m.cfg, 3));
        slm_model_close(&m);
    }
    bad.swa_list = 2;
    if (write_model("fam_olmo2.gguf", &bad, SLM_F32, 5)) {
        slm_err err = {0};
        CHECK(slm_model_open(&m, "fam_olmo2.gguf", &err) == SLM_ERR_UNSUPPORTED);
        CHECKF(strstr(err.msg, "fam_olmo2.gguf") && strstr(err.msg, "sliding_window_pattern") && strstr(err.msg, "layer 1"),
               "%s", err.msg);
    }
    unlink("fam_olmo2.gguf");
}

/* exaone / exaone4 keys (llama.cpp's rules): exaone is llama with neox
 * RoPE; exaone4 has no pre-norms, per-head Q/K norms and post norms, and at
 * 64 layers only the window on three layers of four with the fourth global
 * and without RoPE. */
static void test_exaone_config(void) {
    slm_model_file m;
    const synth *e3 = find_synth("exaone"), *deep = NULL, *flat = NULL;
    for (size_t a = 0; a < sizeof k_archs / sizeof k_archs[0]; a++)
        if (!strcmp(k_archs[a].arch, "exaone4")) *(k_archs[a].layers == 64 ? &deep : &flat) = &k_archs[a];
    if (write_model("fam_exaone.gguf", e3, SLM_F32, 5) && open_ok(&m, "fam_exaone.gguf")) {
        const slm_model_config *c = &m.cfg;
        CHECK(c->rope_neox && !c->qk_norm && !c->post_norms && !c->no_pre_norms && !c->nope_step && !c->tied_embeddings);
        slm_model_close(&m);
    }
    if (deep && write_model("fam_exaone.gguf", deep, SLM_F32, 5) && open_ok(&m, "fam_exaone.gguf")) {
        const slm_model_config *c = &m.cfg;
        CHECK(c->rope_neox && c->qk_norm == 1 && c->post_norms && c->no_pre_norms && c->nope_step == 4);
        CHECK(c->sliding_window == 6 && c->swa_pattern == 4 && slm_layer_swa(c, 0) && !slm_layer_swa(c, 3) &&
              slm_layer_rope(c, 2) && !slm_layer_rope(c, 3) && !slm_layer_rope(c, 63) && c->rope_base_swa == 0.0f);
        slm_model_close(&m);
    }
    if (flat && write_model("fam_exaone.gguf", flat, SLM_F32, 5) && open_ok(&m, "fam_exaone.gguf")) {
        const slm_model_config *c = &m.cfg; /* the window key is there; llama.cpp ignores it below 64 layers */
        CHECK(c->qk_norm == 1 && c->no_pre_norms && c->sliding_window == 0 && c->nope_step == 0);
        slm_model_close(&m);
    }
    unlink("fam_exaone.gguf");
}

static void test_family_config(void) {
    slm_model_file m;
    if (write_model("fam_qwen3.gguf", find_synth("qwen3"), SLM_F32, 5) &&
        open_ok(&m, "fam_qwen3.gguf")) {
        const slm_model_config *c = &m.cfg;
        CHECK(c->head_dim == 32 && c->n_heads * c->head_dim == 128 && c->dim == 64);
        CHECK(c->qk_norm && c->rope_neox && !c->qkv_bias && !c->post_norms && !c->ffn_gelu);
        CHECK(c->rope_base == 1000000.0f && c->attn_scale == 0.0f && c->sliding_window == 0);
        slm_model_close(&m);
    }
    if (write_model("fam_gemma2.gguf", find_synth("gemma2"), SLM_F32, 5) &&
        open_ok(&m, "fam_gemma2.gguf")) {
        const slm_model_config *c = &m.cfg;
        CHECK(c->post_norms && c->ffn_gelu && !c->qk_norm && c->rope_neox);
        CHECK(c->attn_softcap == 2.0f && c->final_softcap == 8.0f);
        CHECK(fabsf(c->embed_scale - 8.0f) < 1e-6f && fabsf(c->attn_scale - 1.0f / sqrtf(32.0f)) < 1e-7f);
        CHECK(c->sliding_window == 6 && slm_layer_swa(c, 0) && !slm_layer_swa(c, 1));
        slm_model_close(&m);
    }
    synth g2 = *find_synth("gemma2"); /* no window key: llama.cpp's 4096 */
    g2.window = 0;
    if (write_model("fam_gemma2.gguf", &g2, SLM_F32, 5) && open_ok(&m, "fam_gemma2.gguf")) {
        CHECK(m.cfg.sliding_window == 4096 && m.cfg.swa_pattern == 2);
        slm_model_close(&m);
    }
    if (write_model("fam_gemma3.gguf", find_synth("gemma3"), SLM_F32, 5) &&
        open_ok(&m, "fam_gemma3.gguf")) {
        const slm_model_config *c = &m.cfg;
        CHECK(c->post_norms && c->ffn_gelu && c->qk_norm && c->attn_softcap == 0.0f && c->final_softcap == 0.0f);
        CHECK(c->rope_base == 1000000.0f && c->rope_scale == 2.0f && c->rope_base_swa == 10000.0f && c->rope_scale_swa == 1.0f);
        int swa = 0;
        for (int l = 0; l < 6; l++) swa += slm_layer_swa(c, l);
        CHECK(swa == 5 && !slm_layer_swa(c, 5));
        slm_model_close(&m);
    }
    if (write_model("fam_phi3.gguf", find_synth("phi3"), SLM_F32, 5) &&
        open_ok(&m, "fam_phi3.gguf")) {
        const slm_model_config *c = &m.cfg;
        CHECK(c->rope_dims == 24 && slm_rope_dims(c) == 24 && c->head_dim == 32 && c->rope_neox);
        CHECK(c->rope_long && c->rope_orig_ctx == 64 && fabsf(c->rope_attn_factor - 1.19f) < 1e-6f);
        /* the fused matrices are gone; their parts are row ranges of them */
        CHECK(!slm_model_tensor(&m, "blk.0.attn_qkv.weight"));
        const slm_gguf_tensor *qkv = slm_gguf_find_tensor(m.gguf, "blk.1.attn_qkv.weight"),
                              *up = slm_gguf_find_tensor(m.gguf, "blk.1.ffn_up.weight");
        const slm_tensor *q = slm_model_tensor(&m, "blk.1.attn_q.weight"), *k = slm_model_tensor(&m, "blk.1.attn_k.weight"),
                         *v = slm_model_tensor(&m, "blk.1.attn_v.weight"), *g = slm_model_tensor(&m, "blk.1.ffn_gate.weight"),
                         *u = slm_model_tensor(&m, "blk.1.ffn_up.weight");
        CHECK(qkv && up && q && k && v && g && u);
        if (qkv && up && q && k && v && g && u) {
            const uint64_t rb = 64 * sizeof(float);
            CHECK(q->ne[1] == 64 && k->ne[1] == 32 && v->ne[1] == 32 && g->ne[1] == 96 && u->ne[1] == 96);
            CHECK(q->data == qkv->data && (const uint8_t *)k->data == (const uint8_t *)qkv->data + 64 * rb &&
                  (const uint8_t *)v->data == (const uint8_t *)qkv->data + 96 * rb);
            CHECK(g->data == up->data && (const uint8_t *)u->data == (const uint8_t *)up->data + 96 * rb);
        }
        slm_model_close(&m);
    }
    if (write_model("fam_granite.gguf", find_synth("granite"), SLM_F32, 5) && open_ok(&m, "fam_granite.gguf")) {
        const slm_model_config *c = &m.cfg;
        CHECK(c->embed_scale == 3.0f && c->attn_scale == 0.0625f && c->residual_scale == 0.5f && c->logit_scale == 4.0f);
        CHECK(!c->rope_neox && !c->qk_norm && !c->post_norms && c->tied_embeddings);
        slm_model_close(&m);
    }
    synth gr = *find_synth("granite"); /* llama.cpp requires logit_scale */
    gr.granite[3] = 0.0f;
    if (write_model("fam_granite.gguf", &gr, SLM_F32, 5)) {
        slm_err err = {0};
        CHECK(slm_model_open(&m, "fam_granite.gguf", &err) == SLM_ERR_FORMAT);
        CHECKF(strstr(err.msg, "fam_granite.gguf") && strstr(err.msg, "granite.logit_scale"), "%s", err.msg);
    }
    unlink("fam_granite.gguf");
    if (write_model("fam_smollm3.gguf", find_synth("smollm3"), SLM_F32, 5) &&
        open_ok(&m, "fam_smollm3.gguf")) {
        const slm_model_config *c = &m.cfg;
        CHECK(c->nope_step == 4 && !c->rope_neox && !c->qk_norm && !c->post_norms && c->tied_embeddings);
        CHECK(slm_layer_rope(c, 0) && slm_layer_rope(c, 2) && !slm_layer_rope(c, 3) && !slm_layer_rope(c, 7));
        slm_model_close(&m);
    }
    unlink("fam_smollm3.gguf");
    unlink("fam_qwen3.gguf");
    unlink("fam_gemma2.gguf");
    unlink("fam_gemma3.gguf");
    unlink("fam_phi3.gguf");
}

/* Q4_K_M's types (every matrix Q4_K, Q5_K, Q6_K or Q5_0) run repacked
 * (q4_k_r16, q5_k_r16, q6_k_r16, q5_0_r16) against the reference forward on
 * the file's weights. */
static void test_k_quants_vs_reference(void) {
    int32_t ids[24];
    g_rng = 7;
    for (int i = 0; i < 24; i++) ids[i] = (int32_t)(urand() * 90);
    const synth s = {.arch = "llama", .dim = 256, .hidden = 512, .layers = 2, .heads = 4, .kv_heads = 2, .vocab = 256, .ctx = 128,
        .rope_scale = 1.0f, .rope_base = 10000.0f, .std = 1.0f};
    static const uint32_t types[4] = {SLM_Q4_K, SLM_Q5_K, SLM_Q6_K, SLM_Q5_0};
    for (int t = 0; t < 4; t++) {
        char path[64];
        snprintf(path, sizeof path, "kq_%s.gguf", slm_dtype_name(types[t]));
        if (!write_model(path, &s, types[t], 4321)) continue;
        const double e1 = compare(path, ids, 24, 5, 32), e2 = compare(path, ids, 24, 17, 8);
        CHECKF(e1 < 5e-2 && e2 < 5e-2, "%s: logits rel err %.3g / %.3g vs reference", slm_dtype_name(types[t]), e1, e2);
        unlink(path);
    }
}

static void test_unknown_arch_refused(void) {
    synth s = k_archs[0];
    s.arch = "falcon";
    if (!write_model("arch_unknown.gguf", &s, SLM_F32, 1)) return;
    slm_model_file m;
    slm_err err = {0};
    slm_status st = slm_model_open(&m, "arch_unknown.gguf", &err);
    CHECK(st == SLM_ERR_UNSUPPORTED);
    CHECKF(strstr(err.msg, "falcon") && strstr(err.msg, "llama, mistral, qwen2, qwen3, gemma2, gemma3, phi3, smollm3"), "message: %s",
           err.msg);
    unlink("arch_unknown.gguf");
}

/* The same weights as F16 and as Q8_0 decode the same greedy tokens. The
 * model is scaled so that its logits are decisive (a trained model's are;
 * tiny random ones sit near ties that any rounding flips). */
static void test_f16_q8_agree(void) {
    synth s = {.arch = "llama", .dim = 128, .hidden = 256, .layers = 2, .heads = 4, .kv_heads = 4, .vocab = 256, .ctx = 256,
        .rope_scale = 1.0f, .rope_base = 10000.0f, .std = 1.0f, .peaked = 1};
    if (!write_model("agree_f16.gguf", &s, SLM_F16, 77) || !write_model("agree_q8.gguf", &s, SLM_Q8_0, 77)) return;
    rig a, b;
    if (rig_open(&a, "agree_f16.gguf", 16, 80) && rig_open(&b, "agree_q8.gguf", 16, 80)) {
        int32_t prompt[4] = {1, 17, 42, 99};
        slm_err err = {0};
        CHECK(slm_rt_prefill(&a.rt, prompt, 4, &err) == SLM_OK && slm_rt_prefill(&b.rt, prompt, 4, &err) == SLM_OK);
        int same = 0, distinct = 0, seen[256] = {0};
        for (int i = 0; i < 64; i++) {
            int ta = argmax(a.rt.logits, 256), tb = argmax(b.rt.logits, 256);
            if (ta != tb) break;
            same++;
            distinct += !seen[ta]++;
            if (slm_rt_decode(&a.rt, ta, &err) || slm_rt_decode(&b.rt, tb, &err)) break;
        }
        CHECKF(same == 64, "F16 and Q8_0 agree for %d of 64 steps", same);
        CHECKF(distinct >= 8, "only %d distinct tokens: the test model repeats itself", distinct);
        rig_close(&a);
        rig_close(&b);
    }
    unlink("agree_f16.gguf");
    unlink("agree_q8.gguf");
}

/* MoE keys: the experts' width (qwen3moe's own key), the renormalization
 * by family; hostile files refused with a message naming the key or tensor;
 * experts on a family llama.cpp runs densely refused. */
static void test_moe_config(void) {
    slm_model_file m;
    if (write_model("moe_q3.gguf", find_synth("qwen3moe"), SLM_F32, 5) && open_ok(&m, "moe_q3.gguf")) {
        const slm_model_config *c = &m.cfg;
        CHECK(c->n_experts == 8 && c->n_experts_used == 3 && c->expert_norm == 1 && c->hidden_dim == 32);
        CHECK(c->qk_norm == 1 && c->rope_neox && m.experts != NULL);
        /* the 3-D stacks became per-expert slices of the same bytes */
        const slm_tensor *e0 = slm_model_tensor(&m, "blk.1.ffn_down.0.weight"), *e7 = slm_model_tensor(&m, "blk.1.ffn_down.7.weight");
        CHECK(e0 && e7 && e0->n_dims == 2 && e0->ne[0] == 32 && e0->ne[1] == 64 &&
              (const uint8_t *)e7->data == (const uint8_t *)e0->data + 7 * e0->nbytes);
        CHECK(!slm_model_tensor(&m, "blk.0.ffn_down_exps.weight") && slm_model_expert(&m, 1, 2, 7) == e7);
        slm_model_close(&m);
    }
    if (write_model("moe_ol.gguf", find_synth("olmoe"), SLM_F32, 5) && open_ok(&m, "moe_ol.gguf")) {
        CHECK(m.cfg.n_experts == 16 && m.cfg.n_experts_used == 4 && m.cfg.expert_norm == 0 && m.cfg.qk_norm == 2);
        CHECK(m.cfg.shared_ffn == 0 && m.cfg.shared_gate == 0);
        slm_model_close(&m);
    }
    /* qwen2moe: the experts' own width, no renormalization, Q/K/V biases, the
     * gated shared expert; granitemoe's shared variant: no gate */
    if (write_model("moe_q2.gguf", find_synth("qwen2moe"), SLM_F32, 5) && open_ok(&m, "moe_q2.gguf")) {
        const slm_model_config *c = &m.cfg;
        CHECK(c->n_experts == 8 && c->n_experts_used == 2 && c->expert_norm == 0 && c->hidden_dim == 32);
        CHECK(c->shared_ffn == 96 && c->shared_gate == 1 && c->qkv_bias == 1 && c->rope_neox == 1);
        slm_model_close(&m);
    }
    /* glm4moe: layer 0 dense of feed_forward_length, the experts' own width, sigmoid
     * routing with the selection bias, renormalized, scaled, one shared expert, the
     * MTP layer not among the layers */
    if (write_model("moe_glm.gguf", find_synth("glm4moe"), SLM_F32, 5) && open_ok(&m, "moe_glm.gguf")) {
        const slm_model_config *c = &m.cfg;
        CHECK(c->n_layers == 3 && c->nextn_layers == 1 && c->dense_lead == 1 && c->dense_ffn == 192 && c->hidden_dim == 32);
        CHECK(c->expert_sigmoid == 1 && c->expert_sel_bias == 1 && c->expert_norm == 1 && c->expert_scale == 2.5f);
        CHECK(c->shared_ffn == 32 && c->shared_gate == 0 && c->qkv_bias == 1 && c->qk_norm == 1 && c->rope_neox == 1);
        CHECK(c->rope_dims == 8 && slm_layer_moe(c, 1) && !slm_layer_moe(c, 0));
        slm_model_close(&m);
    }
    synth gs = k_archs[0];
    for (size_t i = 0; i < sizeof k_archs / sizeof k_archs[0]; i++)
        if (is_arch(&k_archs[i], "granitemoe") && k_archs[i].shared) gs = k_archs[i];
    if (write_model("moe_gs.gguf", &gs, SLM_F32, 5) && open_ok(&m, "moe_gs.gguf")) {
        CHECK(m.cfg.shared_ffn == 64 && m.cfg.shared_gate == 0 && m.cfg.expert_norm == 1 && m.cfg.residual_scale == 0.5f);
        slm_model_close(&m);
    }
    static const struct { int bad; const char *arch, *want; } cases[] = {
        {1, "qwen3moe", "shared experts"}, {2, "qwen3moe", "expert_gating_func"}, {3, "qwen3moe", "expert_used_count"},
        {4, "qwen3moe", "ffn_gate_exps"},  {5, "olmoe", "blk.1.ffn_up.0.weight"}, {0, "gemma2", "expert_count"},
        {6, "qwen2moe", "blk.1.ffn_gate_inp_shexp.weight"}, {7, "olmoe", "expert_shared_feed_forward_length"},
        {8, "qwen2moe", "blk.0.ffn_down_shexp.weight"}, {2, "qwen2moe", "expert_gating_func"},
        {9, "glm4moe", "expert_group_count"}, {10, "glm4moe", "expert_gating_func"},
        {11, "glm4moe", "blk.1.exp_probs_b.bias"}, {12, "glm4moe", "nextn_predict_layers"},
        {13, "glm4moe", "rope.dimension_sections"}, {14, "glm4moe", "leading_dense_block_count"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        synth sy = *find_synth(cases[i].bad ? cases[i].arch : "qwen3moe");
        sy.moe_bad = cases[i].bad;
        if (!cases[i].bad) { /* experts on gemma2: llama.cpp has no such model */
            sy.arch = cases[i].arch;
            sy.head_dim = 32;
        }
        slm_err err = {0};
        if (!write_model("moe_bad.gguf", &sy, SLM_F32, 5)) continue;
        const slm_status st = slm_model_open(&m, "moe_bad.gguf", &err);
        CHECKF(st != SLM_OK && strstr(err.msg, cases[i].want) && strstr(err.msg, "moe_bad.gguf"), "case %d: %s", cases[i].bad,
               err.msg);
        if (st == SLM_OK) slm_model_close(&m);
    }
    unlink("moe_q3.gguf");
    unlink("moe_ol.gguf");
    unlink("moe_q2.gguf");
    unlink("moe_gs.gguf");
    unlink("moe_glm.gguf");
    unlink("moe_bad.gguf");
}

/* The blob of family arch's test model (q8_0), compiled for 8-row
 * prefills, read back as an image (*n bytes; free it), or NULL. */
static uint8_t *moe_blob_image(const char *arch, const char *stem, size_t *n) {
    char gguf[64], blob[64], tokf[64];
    snprintf(gguf, sizeof gguf, "%s.gguf", stem);
    snprintf(blob, sizeof blob, "%s.slmblob", stem);
    snprintf(tokf, sizeof tokf, "%s_tok.bin", stem);
    if (!write_tok(tokf, 160) || !write_model(gguf, find_synth(arch), SLM_Q8_0, 5)) return NULL;
    rig r;
    uint8_t *img = NULL;
    if (rig_open_threads(&r, gguf, 8, 24, 1)) {
        slm_err err = {0};
        slm_tokenizer *tok = NULL;
        slm_blob_ident id;
        memset(&id, 0, sizeof id);
        slm_blob_ident_seal(&id);
        const int ok = slm_tok_load_llama2c(&tok, tokf, 160, &err) == SLM_OK &&
                       slm_blob_write(blob, &r.c, &r.m, tok, &id, NULL, NULL, &err) == SLM_OK;
        CHECKF(ok, "%s blob: %s", arch, err.msg);
        slm_tok_free(tok);
        rig_close(&r);
        if (ok) img = (uint8_t *)t_read_file(blob, n);
    }
    unlink(blob);
    unlink(gguf);
    unlink(tokf);
    return img;
}

/* A blob's MoE tasks are validated like the others: an expert index beyond
 * the experts, more experts used than 64 or than the router has, a routing
 * table outside the arena, a combine's width are refused, naming the task. */
static void test_moe_blob_hostile(void) {
    size_t n = 0;
    uint8_t *img = moe_blob_image("qwen3moe", "moe_h", &n);
    uint64_t len = 0;
    uint8_t *tasks = img ? t_blob_section(img, n, ".slm.tasks.prefill.8", &len) : NULL;
    CHECK(tasks != NULL);
    char msg[512];
    if (tasks) CHECKF(t_blob_opens(img, n, "moe.blob", msg, sizeof msg), "pristine: %s", msg);
    int ex = -1, route = -1, comb = -1;
    for (uint64_t i = 0; tasks && i < len / 160; i++) {
        const uint8_t *e = tasks + i * 160;
        uint16_t fl;
        memcpy(&fl, e + 2, 2);
        if (e[0] == SLM_T_MATMUL && (fl & SLM_TF_EXPERT) && ex < 0) ex = (int)i;
        if (e[0] == SLM_T_MOE_ROUTE && route < 0) route = (int)i;
        if (e[0] == SLM_T_MOE_COMBINE && comb < 0) comb = (int)i;
    }
    CHECKF(!tasks || (ex >= 0 && route >= 0 && comb >= 0), "tasks: expert %d route %d combine %d", ex, route, comb);
    if (tasks && ex >= 0 && route >= 0 && comb >= 0) {
        static const struct { int task, off; int32_t v; const char *want; } muts[] = {
            {0, 32, 8, "expert 8 of 8"},       /* b: expert index = E */
            {0, 36, 65, "out of range"},        /* c: used */
            {0, 112, 1 << 30, "beyond arena"},  /* src3 (ref 3 at 56 + 3 * 16): its offset's low word */
            {1, 36, 9, "experts"},              /* route: used > E */
            {1, 12, 2000, "experts"},           /* route: E */
            {2, 36, 0, "used 0"},               /* combine: used */
            {2, 24, 1 << 20, "tile"},           /* combine: n1 beyond n */
        };
        const int at[3] = {ex, route, comb};
        for (size_t i = 0; i < sizeof muts / sizeof muts[0]; i++) {
            uint8_t *e = tasks + (size_t)at[muts[i].task] * 160 + muts[i].off;
            uint8_t keep[4];
            memcpy(keep, e, 4);
            memcpy(e, &muts[i].v, 4);
            CHECKF(!t_blob_opens(img, n, "moe.blob", msg, sizeof msg) && strstr(msg, muts[i].want), "mutation %zu: %s", i, msg);
            memcpy(e, keep, 4);
        }
        CHECKF(t_blob_opens(img, n, "moe.blob", msg, sizeof msg), "restored: %s", msg);
    }
    free(img);
}

/* The shared expert in a blob: a combine's shared-expert kind must be the
 * config's (0 none, 1 ungated, 2 gated), its rows and its gate's logits in
 * the arena; the config's shared_ffn / shared_gate in range. */
static void test_shared_blob_hostile(void) {
    size_t n = 0;
    uint8_t *img = moe_blob_image("qwen2moe", "shx_h", &n);
    uint64_t len = 0, clen = 0;
    uint8_t *tasks = img ? t_blob_section(img, n, ".slm.tasks.prefill.8", &len) : NULL;
    uint8_t *cfg = img ? t_blob_section(img, n, ".slm.config", &clen) : NULL;
    char msg[512];
    int comb = -1;
    for (uint64_t i = 0; tasks && i < len / 160; i++)
        if (tasks[i * 160] == SLM_T_MOE_COMBINE && comb < 0) comb = (int)i;
    CHECKF(tasks && cfg && clen == BLOB_CONFIG_SIZE && comb >= 0, "combine task %d, config %llu bytes", comb, (unsigned long long)clen);
    if (!tasks || !cfg || clen != BLOB_CONFIG_SIZE || comb < 0) {
        free(img);
        return;
    }
    CHECKF(t_blob_opens(img, n, "shx.blob", msg, sizeof msg), "pristine: %s", msg);
    int32_t a;
    memcpy(&a, tasks + (size_t)comb * 160 + 28, 4);
    CHECKF(a == 2, "combine's shared expert kind %d", a);
    static const struct { int cfg, off; int32_t v; const char *want; } muts[] = {
        {0, 28, 1, "shared expert 1, the config's is 2"},        /* a: ungated */
        {0, 28, 0, "shared expert 0"},                           /* a: none */
        {0, 28, 3, "shared expert 3"},                           /* a: no such kind */
        {0, 56 + 16 + 8, 1 << 30, "beyond arena"},               /* src1's offset */
        {0, 56 + 32 + 8, 1 << 30, "beyond arena"},               /* src2's offset */
        {0, 56 + 16, 0, "space 0"},                              /* src1's space: none */
        {1, 224 + 124, 2, "shared_gate"},                        /* config: shared_gate 2 */
        {1, 224 + 120, -1, "shared_ffn"},                        /* config: shared_ffn -1 */
    };
    for (size_t i = 0; i < sizeof muts / sizeof muts[0]; i++) {
        uint8_t *e = muts[i].cfg ? cfg + muts[i].off : tasks + (size_t)comb * 160 + muts[i].off;
        uint8_t keep[4];
        memcpy(keep, e, 4);
        if (muts[i].off == 56 + 16 && !muts[i].cfg) e[0] = 0;
        else memcpy(e, &muts[i].v, 4);
        CHECKF(!t_blob_opens(img, n, "shx.blob", msg, sizeof msg) && strstr(msg, muts[i].want), "mutation %zu: %s", i, msg);
        memcpy(e, keep, 4);
    }
    CHECKF(t_blob_opens(img, n, "shx.blob", msg, sizeof msg), "restored: %s", msg);
    free(img);
}

/* glm4moe's routing in a blob: the route task's gating, weight scale and
 * selection bias must be the config's (the bias [E] in the weights); the
 * config's dense layers, gating, bias, scale and MTP count in range. */
static void test_glm_blob_hostile(void) {
    size_t n = 0;
    uint8_t *img = moe_blob_image("glm4moe", "glm_h", &n);
    uint64_t len = 0, clen = 0;
    uint8_t *tasks = img ? t_blob_section(img, n, ".slm.tasks.prefill.8", &len) : NULL;
    uint8_t *cfg = img ? t_blob_section(img, n, ".slm.config", &clen) : NULL;
    char msg[512];
    int route = -1;
    for (uint64_t i = 0; tasks && i < len / 160; i++)
        if (tasks[i * 160] == SLM_T_MOE_ROUTE && route < 0) route = (int)i;
    CHECKF(tasks && cfg && clen == BLOB_CONFIG_SIZE && route >= 0, "route task %d, config %llu bytes", route, (unsigned long long)clen);
    if (!tasks || !cfg || clen != BLOB_CONFIG_SIZE || route < 0) {
        free(img);
        return;
    }
    CHECKF(t_blob_opens(img, n, "glm.blob", msg, sizeof msg), "pristine: %s", msg);
    const float bad_scale = 1.5f, neg = -1.0f;
    int32_t fs, fn;
    memcpy(&fs, &bad_scale, 4);
    memcpy(&fn, &neg, 4);
    static const int F = 224; /* the family record in .slm.config */
    const struct { int cfg, off; int32_t v; const char *want; } muts[] = {
        {0, 32, 0, "gating 0, the config's is 1"},             /* b: softmax */
        {0, 156, fs, "weight scale f2 1.5"},                     /* f2 */
        {0, 56 + 16, 0, "selection bias missing"},               /* src1's space: none */
        {0, 56 + 16 + 8, 1 << 30, "beyond weights"},             /* src1's offset */
        {0, 56 + 16, SLM_SPACE_ARENA, "bias must be in the weights"}, /* src1 in the arena */
        {1, F + 128, -1, "dense_lead"},                          /* config */
        {1, F + 128, 4, "dense_lead"},
        {1, F + 132, 0, "dense_ffn"},
        {1, F + 136, 2, "expert_sigmoid"},
        {1, F + 140, 2, "expert_sel_bias"},
        {1, F + 144, fn, "expert_scale"},
        {1, F + 148, -1, "nextn_layers"},
    };
    for (size_t i = 0; i < sizeof muts / sizeof muts[0]; i++) {
        uint8_t *e = muts[i].cfg ? cfg + muts[i].off : tasks + (size_t)route * 160 + muts[i].off;
        uint8_t keep[4];
        memcpy(keep, e, 4);
        if (muts[i].off == 56 + 16 && !muts[i].cfg) e[0] = (uint8_t)muts[i].v;
        else memcpy(e, &muts[i].v, 4);
        CHECKF(!t_blob_opens(img, n, "glm.blob", msg, sizeof msg) && strstr(msg, muts[i].want), "mutation %zu: %s", i, msg);
        memcpy(e, keep, 4);
    }
    CHECKF(t_blob_opens(img, n, "glm.blob", msg, sizeof msg), "restored: %s", msg);
    free(img);
}

/* gpt-oss's sinks in decode key parts (a KV capacity of >= 256 rows cuts
 * each decode attention into parts; the merge adds the sinks) and in prefill
 * (the per-row entries, with prefill rows of 64 and more: the row parts), one
 * thread and two. */
static void test_oss_key_parts(void) {
    int32_t ids[40];
    g_rng = 5;
    for (int i = 0; i < 40; i++) ids[i] = (int32_t)(urand() * 90);
    if (!write_model("oss_kp.gguf", find_synth("gpt-oss"), SLM_F32, 3)) return;
    for (int th = 1; th <= 2; th++) {
        g_threads = th;
        const double e1 = compare("oss_kp.gguf", ids, 40, 5, 300), e2 = compare("oss_kp.gguf", ids, 40, 39, 100);
        CHECKF(e1 < 1e-4 && e2 < 1e-4, "gpt-oss, %d threads, key parts / prefill of 100 rows: rel err %.3g / %.3g", th, e1, e2);
    }
    g_threads = 1;
    unlink("oss_kp.gguf");
}

/* gpt-oss's tasks in a blob: sinks only on an attention or a merge and in the
 * weights, an expert's bias in the weights, the clamped SwiGLU's alpha in range. */
static void test_oss_blob_hostile(void) {
    size_t n = 0;
    uint8_t *img = moe_blob_image("gpt-oss", "oss_h", &n);
    uint64_t len = 0;
    uint8_t *tasks = img ? t_blob_section(img, n, ".slm.tasks.prefill.8", &len) : NULL;
    char msg[512];
    int att = -1, down = -1, mm = -1;
    for (uint64_t i = 0; tasks && i < len / 160; i++) {
        const uint8_t *e = tasks + i * 160;
        uint16_t fl;
        memcpy(&fl, e + 2, 2);
        if (e[0] == SLM_T_ATTENTION && (fl & SLM_TF_SINKS) && att < 0) att = (int)i;
        if (e[0] == SLM_T_MATMUL && (fl & SLM_TF_EXPERT) && (fl & SLM_TF_PRE_SWIGLU) && down < 0) down = (int)i;
        if (e[0] == SLM_T_MATMUL && !(fl & SLM_TF_EXPERT) && mm < 0) mm = (int)i;
    }
    CHECKF(tasks && att >= 0 && down >= 0 && mm >= 0, "tasks: attention with sinks %d, expert down %d, matmul %d", att, down, mm);
    if (tasks && att >= 0 && down >= 0 && mm >= 0) {
        CHECKF(t_blob_opens(img, n, "moe.blob", msg, sizeof msg), "pristine: %s", msg);
        static const struct { int task, off, len; uint32_t v; const char *want; } muts[] = {
            {0, 56 + 4 * 16, 1, SLM_SPACE_ARENA, "sinks must be in the weights"}, /* src4 space */
            {1, 56 + 4 * 16, 1, SLM_SPACE_ARENA, "bias must be in the weights"},  /* the expert's bias */
            {1, 40, 4, 0xbf800000u, "alpha"},                                   /* f0 = -1 */
            {2, 3, 1, 0x80, "sinks"},                                           /* flag 0x8000 on a matmul */
        };
        const int at[3] = {att, down, mm};
        for (size_t i = 0; i < sizeof muts / sizeof muts[0]; i++) {
            uint8_t *e = tasks + (size_t)at[muts[i].task] * 160 + muts[i].off;
            uint8_t keep[4];
            memcpy(keep, e, (size_t)muts[i].len);
            if (muts[i].len == 4) memcpy(e, &muts[i].v, 4);
            else if (muts[i].v == 0x80) e[0] |= 0x80; /* the flags' high byte */
            else e[0] = (uint8_t)muts[i].v;
            CHECKF(!t_blob_opens(img, n, "moe.blob", msg, sizeof msg) && strstr(msg, muts[i].want), "mutation %zu: %s", i, msg);
            memcpy(e, keep, (size_t)muts[i].len);
        }
        CHECKF(t_blob_opens(img, n, "moe.blob", msg, sizeof msg), "restored: %s", msg);
    }
    free(img);
}

/* A residual narrower than a combine tile's 8-column step (dim 4): the
 * compiler once cut 0-wide moe_combine tiles here and never finished. Now the
 * narrow MoE model compiles, and its logits match the reference. */
static void test_moe_narrow(void) {
    int32_t ids[24];
    g_rng = 11;
    for (int i = 0; i < 24; i++) ids[i] = (int32_t)(urand() * 90);
    const synth s = {.arch = "qwen3moe", .dim = 4, .hidden = 8, .layers = 2, .heads = 2, .kv_heads = 1, .vocab = 96,
                     .ctx = 64, .rope_scale = 1.0f, .rope_base = 10000.0f, .std = 1.0f, .head_dim = 8, .experts = 4,
                     .experts_used = 2};
    if (!write_model("moe_narrow.gguf", &s, SLM_F32, 21)) return;
    const double e1 = compare("moe_narrow.gguf", ids, 24, 5, 16), e2 = compare("moe_narrow.gguf", ids, 24, 20, 8);
    CHECKF(e1 < 1e-4 && e2 < 1e-4, "qwen3moe dim 4: logits rel err %.3g / %.3g vs reference", e1, e2);
    unlink("moe_narrow.gguf");
}

int main(void) {
    T_RUN(test_arch_vs_reference);
    T_RUN(test_arch_threads);
    T_RUN(test_arch_kv_types);
    T_RUN(test_family_config);
    T_RUN(test_yarn_config);
    T_RUN(test_olmo2_config);
    T_RUN(test_exaone_config);
    T_RUN(test_moe_config);
    T_RUN(test_moe_blob_hostile);
    T_RUN(test_oss_blob_hostile);
    T_RUN(test_shared_blob_hostile);
    T_RUN(test_glm_blob_hostile);
    T_RUN(test_oss_key_parts);
    T_RUN(test_moe_narrow);
    T_RUN(test_arch_blob_roundtrip);
    T_RUN(test_k_quants_vs_reference);
    T_RUN(test_unknown_arch_refused);
    T_RUN(test_f16_q8_agree);
    free(g_emb);
    T_DONE();
}
