/* Gemma 4 (gemma4): synthetic GGUF files written as llama.cpp's converter
 * writes them (the window list, per-layer head_count_kv / feed_forward_length
 * lists, the window layers' head size, KV-shared layers, per-layer
 * embeddings, V = K on global layers without attn_v, layer output scales)
 * against the plain double reference (ref_gemma4.h); the KV cache sized per
 * layer (shared layers none); KV types and threads; the blob round trip and
 * its hostile config fields and tasks; the files refused. */
#include <math.h>
#include <unistd.h>

#include "blob/blob.h"
#include "blob/format.h"
#include "common/dtype.h"
#include "compiler/compiler.h"
#include "format/gguf.h"
#include "format/model.h"
#include "ref_forward.h"
#include "runtime/runtime.h"
#include "staticlm.h"
#include "text/tokenizer.h"
#include "t.h"
#include "tok_bin.h"
#include "rig.h"
#include "blob_image.h"

typedef struct g4 {
    int dim, layers, heads, kv, kv_global, hd_swa, hd, ffn, ffn_shared, ple, kv_shared, period, window, vocab;
    int k_eq_v;   /* global layers without attn_v (V = K), as the 31B */
    int rot_q;    /* global layers: quarters of the pairs rotated (rope_freqs 1, the others 1e30) */
    int untied;
    /* experts (26B-A4B's form): experts of width eff, used per row, the gate and up fused into one
     * [dim, 2 eff, experts] tensor (fused) or two, per-expert down scales (dscale) */
    int experts, used, eff, fused, dscale;
    int bad;      /* a hostile file: 1 experts, 2 a window list that is not periodic, 3 head_count_kv differing
                     within a kind, 4 shared layers whose source is of another kind, 5 value_length_swa other
                     than key_length_swa, 6 attn_logit_softcapping, 7 no per_layer_proj_norm, 8 a NaN layer
                     output scale, 9 no window list, 10 feed_forward_length differing among layers with K/V;
                     with experts: 11 sigmoid gating, 12 no ffn_gate_inp.scale on layer 1, 13 a NaN down scale,
                     14 a fused gate/up of an odd width, 15 no expert_count, 16 no router on layer 1, 17 a
                     gate/up per-expert scale */
} g4;

static uint64_t g_rng;
static double urand(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return ((g_rng >> 11) + 0.5) / 9007199254740992.0;
}
static float nrand(void) { return (float)(sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand())); }

static int swa(const g4 *s, int l) { return l % s->period < s->period - 1; }
static int own_kv(const g4 *s, int l) { return l < s->layers - s->kv_shared; }
static int hd_of(const g4 *s, int l) { return swa(s, l) ? s->hd_swa : s->hd; }
static int kv_of(const g4 *s, int l) { return !swa(s, l) && s->kv_global ? s->kv_global : s->kv; }
static int ffn_of(const g4 *s, int l) { return !own_kv(s, l) && s->ffn_shared ? s->ffn_shared : s->ffn; }

typedef struct bufs {
    void *p[1024];
    int n;
} bufs;

/* A tensor [cols, rows] of type: bias + scale * normal values (vals: these instead). */
static void add_t(slm_gguf_writer *w, bufs *b, const char *name, int64_t cols, int64_t rows, uint32_t type, float scale,
                  float bias, const float *vals) {
    const size_t n = (size_t)(cols * rows);
    float *f = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) f[i] = vals ? vals[i] : bias + scale * nrand();
    const uint64_t rb = slm_row_bytes(type, (uint64_t)cols);
    void *data = f;
    if (type != SLM_F32) {
        data = malloc((size_t)rb * (size_t)rows);
        for (int64_t r = 0; r < rows; r++) slm_quantize_row(type, f + r * cols, (uint8_t *)data + r * rb, cols);
        free(f);
    }
    b->p[b->n++] = data;
    const int64_t ne[2] = {cols, rows};
    slm_gguf_add_tensor(w, name, type, rows > 1 ? 2 : 1, ne, data, rb * (uint64_t)rows);
}

/* A 3-D tensor [cols, rows, n] of type from the floats vals. */
static void add_t3(slm_gguf_writer *w, bufs *b, const char *name, int64_t cols, int64_t rows, int64_t n, uint32_t type,
                   const float *vals) {
    const uint64_t rb = slm_row_bytes(type, (uint64_t)cols);
    uint8_t *data = malloc((size_t)(rb * (uint64_t)(rows * n)));
    for (int64_t r = 0; r < rows * n; r++) slm_quantize_row(type, vals + r * cols, data + (uint64_t)r * rb, cols);
    b->p[b->n++] = data;
    const int64_t ne[3] = {cols, rows, n};
    slm_gguf_add_tensor(w, name, type, 3, ne, data, rb * (uint64_t)(rows * n));
}

/* Layer l's experts (26B-A4B's tensors; llama.cpp's names): the router (f32, as llama-quantize leaves
 * it) and its input gains, the norms, the gate and up (fused: each expert's gate rows, then its up
 * rows; else two tensors: the same values), the down and its per-expert scales. */
static void write_experts(slm_gguf_writer *w, bufs *b, const g4 *s, int l, uint32_t mt) {
    const int D = s->dim, E = s->experts, F = s->eff;
    char n[64];
#define V(suffix, cols, sc, bias)                                                                  do {                                                                                               snprintf(n, sizeof n, "blk.%d.%s", l, suffix);                                                 add_t(w, b, n, cols, 1, SLM_F32, sc, bias, NULL);                                          } while (0)
    if (s->bad != 16 || l != 1) {
        snprintf(n, sizeof n, "blk.%d.ffn_gate_inp.weight", l);
        add_t(w, b, n, D, E, SLM_F32, 2.0f, 0.0f, NULL); /* logits of order 2: a clear top K */
    }
    if (s->bad != 12 || l != 1) V("ffn_gate_inp.scale", D, 0.3f, 1.0f);
    V("pre_ffw_norm_2.weight", D, 0.2f, 1.0f);
    V("post_ffw_norm_1.weight", D, 0.2f, 1.0f);
    V("post_ffw_norm_2.weight", D, 0.2f, 1.0f);
    if (s->bad == 17) V("ffn_up_exps.scale", E, 0.1f, 1.0f);
    const size_t ne = (size_t)E * F * D;
    float *gate = malloc(ne * sizeof(float)), *up = malloc(ne * sizeof(float)), *gu = malloc(2 * ne * sizeof(float));
    for (size_t i = 0; i < ne; i++) gate[i] = nrand() / sqrtf((float)D);
    for (size_t i = 0; i < ne; i++) up[i] = nrand() / sqrtf((float)D);
    if (s->fused) {
        const int64_t rows = s->bad == 14 ? 2 * F - 1 : 2 * F; /* 14: an odd width */
        for (int e = 0; e < E; e++) {
            memcpy(gu + (size_t)e * 2 * F * D, gate + (size_t)e * F * D, sizeof(float) * (size_t)F * D);
            memcpy(gu + (size_t)e * 2 * F * D + (size_t)F * D, up + (size_t)e * F * D, sizeof(float) * (size_t)F * D);
        }
        snprintf(n, sizeof n, "blk.%d.ffn_gate_up_exps.weight", l);
        add_t3(w, b, n, D, rows, E, mt, gu);
    } else {
        snprintf(n, sizeof n, "blk.%d.ffn_gate_exps.weight", l);
        add_t3(w, b, n, D, F, E, mt, gate);
        snprintf(n, sizeof n, "blk.%d.ffn_up_exps.weight", l);
        add_t3(w, b, n, D, F, E, mt, up);
    }
    float *down = gu; /* [E][D][F] */
    for (size_t i = 0; i < ne; i++) down[i] = nrand() / sqrtf((float)F);
    snprintf(n, sizeof n, "blk.%d.ffn_down_exps.weight", l);
    add_t3(w, b, n, F, D, E, mt, down);
    free(gate);
    free(up);
    free(gu);
    if (s->dscale) {
        float sc[64];
        for (int e = 0; e < E && e < 64; e++) sc[e] = s->bad == 13 && e == 3 ? NAN : 0.5f + 0.15f * (float)((e * 5 + l) % 7);
        snprintf(n, sizeof n, "blk.%d.ffn_down_exps.scale", l);
        add_t(w, b, n, E, 1, SLM_F32, 0, 0, sc);
    }
#undef V
}

static int write_g4(const char *path, const g4 *s, uint32_t mt, uint64_t seed) {
    g_rng = seed;
    slm_gguf_writer *w = slm_gguf_writer_new();
    bufs b = {.n = 0};
    const int L = s->layers, D = s->dim, P = s->ple;
    uint8_t pat[64];
    uint32_t kvl[64], ffl[64];
    for (int l = 0; l < L; l++) {
        pat[l] = (uint8_t)swa(s, l);
        kvl[l] = (uint32_t)kv_of(s, l);
        ffl[l] = (uint32_t)ffn_of(s, l);
    }
    if (s->bad == 2) pat[2] = 0;
    if (s->bad == 3) kvl[1] = kvl[0] + 1;
    if (s->bad == 10) ffl[1] = ffl[0] + 2;
    slm_gguf_set_str(w, "general.architecture", "gemma4");
    slm_gguf_set_u32(w, "gemma4.block_count", (uint32_t)L);
    slm_gguf_set_u32(w, "gemma4.context_length", 4096);
    slm_gguf_set_u32(w, "gemma4.embedding_length", (uint32_t)D);
    slm_gguf_set_u32(w, "gemma4.embedding_length_per_layer_input", (uint32_t)P);
    slm_gguf_set_arr(w, "gemma4.feed_forward_length", SLM_GGUF_U32, ffl, (uint64_t)L);
    slm_gguf_set_u32(w, "gemma4.attention.head_count", (uint32_t)s->heads);
    slm_gguf_set_arr(w, "gemma4.attention.head_count_kv", SLM_GGUF_U32, kvl, (uint64_t)L);
    slm_gguf_set_f32(w, "gemma4.rope.freq_base", 1000000.0f);
    slm_gguf_set_f32(w, "gemma4.rope.freq_base_swa", 10000.0f);
    slm_gguf_set_f32(w, "gemma4.attention.layer_norm_rms_epsilon", 1e-6f);
    slm_gguf_set_u32(w, "gemma4.attention.key_length", (uint32_t)s->hd);
    slm_gguf_set_u32(w, "gemma4.attention.value_length", (uint32_t)s->hd);
    slm_gguf_set_u32(w, "gemma4.attention.key_length_swa", (uint32_t)s->hd_swa);
    slm_gguf_set_u32(w, "gemma4.attention.value_length_swa", (uint32_t)(s->bad == 5 ? s->hd_swa + 2 : s->hd_swa));
    slm_gguf_set_u32(w, "gemma4.rope.dimension_count", (uint32_t)s->hd);
    slm_gguf_set_u32(w, "gemma4.rope.dimension_count_swa", (uint32_t)s->hd_swa);
    slm_gguf_set_u32(w, "gemma4.attention.sliding_window", (uint32_t)s->window);
    if (s->bad != 9) slm_gguf_set_arr(w, "gemma4.attention.sliding_window_pattern", SLM_GGUF_BOOL, pat, (uint64_t)L);
    slm_gguf_set_u32(w, "gemma4.attention.shared_kv_layers", (uint32_t)s->kv_shared);
    slm_gguf_set_f32(w, "gemma4.final_logit_softcapping", 8.0f); /* small enough to bend */
    if (s->bad == 6) slm_gguf_set_f32(w, "gemma4.attn_logit_softcapping", 50.0f);
    if (s->bad == 1) slm_gguf_set_u32(w, "gemma4.expert_count", 8);
    if (s->experts) {
        if (s->bad != 15) slm_gguf_set_u32(w, "gemma4.expert_count", (uint32_t)s->experts);
        slm_gguf_set_u32(w, "gemma4.expert_used_count", (uint32_t)s->used);
        slm_gguf_set_u32(w, "gemma4.expert_feed_forward_length", (uint32_t)s->eff);
        if (s->bad == 11) slm_gguf_set_u32(w, "gemma4.expert_gating_func", 2);
    }
    slm_gguf_set_u32(w, "gemma4.vocab_size", (uint32_t)s->vocab);
    char n[64];
    add_t(w, &b, "token_embd.weight", D, s->vocab, mt, 1.0f / sqrtf((float)D), 0.0f, NULL);
    {
        float f[256];
        for (int i = 0; i < s->hd / 2; i++) f[i] = i < s->hd / 2 * s->rot_q / 4 ? 1.0f : 1e30f;
        add_t(w, &b, "rope_freqs.weight", s->hd / 2, 1, SLM_F32, 0, 0, f);
    }
    if (P) {
        add_t(w, &b, "per_layer_token_embd.weight", (int64_t)P * L, s->vocab, mt, 1.0f / sqrtf((float)P), 0.0f, NULL);
        add_t(w, &b, "per_layer_model_proj.weight", D, (int64_t)P * L, mt, 1.0f, 0.0f, NULL);
        if (s->bad != 7) add_t(w, &b, "per_layer_proj_norm.weight", P, 1, SLM_F32, 0.2f, 1.0f, NULL);
    }
#define T(suffix, cols, rows, type, sc, bias)                                                  \
    do {                                                                                       \
        snprintf(n, sizeof n, "blk.%d.%s", l, suffix);                                         \
        add_t(w, &b, n, cols, rows, type, sc, bias, NULL);                                     \
    } while (0)
    for (int l = 0; l < L; l++) {
        const int h = hd_of(s, l), q = h * s->heads, kv = h * kv_of(s, l), F = ffn_of(s, l);
        const float sd = 1.0f / sqrtf((float)D);
        T("attn_norm.weight", D, 1, SLM_F32, 0.2f, 1.0f);
        T("attn_q.weight", D, q, mt, sd, 0);
        T("attn_k.weight", D, kv, mt, sd, 0);
        if (!(s->k_eq_v && !swa(s, l))) T("attn_v.weight", D, kv, mt, sd, 0);
        T("attn_k_norm.weight", h, 1, SLM_F32, 0.2f, 1.0f);
        /* scores of order 1 (query scale 1: the gains carry it, else softmax is a near-argmax that any
         * rounding flips) */
        T("attn_q_norm.weight", h, 1, SLM_F32, 0.2f / sqrtf((float)h), 1.0f / sqrtf((float)h));
        T("attn_output.weight", q, D, mt, 1.0f / sqrtf((float)q), 0);
        T("post_attention_norm.weight", D, 1, SLM_F32, 0.2f, 1.0f);
        T("ffn_norm.weight", D, 1, SLM_F32, 0.2f, 1.0f);
        T("ffn_gate.weight", D, F, mt, sd, 0);
        T("ffn_up.weight", D, F, mt, sd, 0);
        T("ffn_down.weight", F, D, mt, 1.0f / sqrtf((float)F), 0);
        T("post_ffw_norm.weight", D, 1, SLM_F32, 0.2f, 1.0f);
        if (s->experts) write_experts(w, &b, s, l, mt);
        if (P) {
            T("inp_gate.weight", D, P, mt, sd, 0);
            T("proj.weight", P, D, mt, 1.0f / sqrtf((float)P), 0);
            T("post_norm.weight", D, 1, SLM_F32, 0.2f, 1.0f);
        }
        const float os = s->bad == 8 && l == 1 ? NAN : 0.6f + 0.1f * (float)l;
        snprintf(n, sizeof n, "blk.%d.layer_output_scale.weight", l);
        add_t(w, &b, n, 1, 1, SLM_F32, 0, 0, &os);
    }
#undef T
    add_t(w, &b, "output_norm.weight", D, 1, SLM_F32, 0.2f, 1.0f, NULL);
    if (s->untied) add_t(w, &b, "output.weight", D, s->vocab, mt, 1.0f / sqrtf((float)D), 0, NULL);
    slm_err err = {0};
    slm_status st = slm_gguf_write(w, path, &err);
    CHECKF(st == SLM_OK, "%s: %s", path, err.msg);
    slm_gguf_writer_free(w);
    for (int i = 0; i < b.n; i++) free(b.p[i]);
    return st == SLM_OK;
}

/* E2B's form: per-layer embeddings, two KV-shared layers, the shared layers' FFN twice as wide,
 * global heads twice the window's (a quarter rotated), one KV head, window 6 on four of five layers */
static const g4 k_e2b = {.dim = 64, .layers = 7, .heads = 2, .kv = 1, .hd_swa = 32, .hd = 64, .ffn = 96, .ffn_shared = 192,
                         .ple = 32, .kv_shared = 2, .period = 5, .window = 6, .vocab = 160, .rot_q = 1};
/* 31B's form: no per-layer embeddings or shared layers, fewer KV heads on the global layers, which have
 * no attn_v (V = K), window 5 on two of three layers, untied */
static const g4 k_31b = {.dim = 64, .layers = 6, .heads = 4, .kv = 2, .kv_global = 1, .hd_swa = 16, .hd = 32, .ffn = 96,
                         .period = 3, .window = 5, .vocab = 160, .k_eq_v = 1, .rot_q = 2, .untied = 1};

/* 26B-A4B's form: 31B's, every layer's dense FFN beside 8 experts of width 32, 2 per row, their gate
 * and up fused, per-expert down scales */
static const g4 k_26b = {.dim = 64, .layers = 6, .heads = 4, .kv = 2, .kv_global = 1, .hd_swa = 16, .hd = 32, .ffn = 96,
                         .period = 3, .window = 5, .vocab = 160, .k_eq_v = 1, .rot_q = 2, .experts = 8, .used = 2,
                         .eff = 32, .fused = 1, .dscale = 1};

static int g_kv_type = SLM_F32, g_threads = 1;

static int rig_open_g4(rig *r, const char *path, int mpl, int mrl) {
    memset(r, 0, sizeof *r);
    slm_err err = {0};
    slm_compile_options o = rig_opts(mpl, mrl);
    o.kv_type = g_kv_type;
    if (slm_model_open(&r->m, path, &err) || slm_model_repack(&r->m, &err) || slm_compile(&r->c, &r->m, &o, &err) ||
        slm_rt_init(&r->rt, &r->c, r->m.map.data, g_threads, &err)) {
        CHECKF(0, "%s: %s", path, err.msg);
        slm_compiled_free(&r->c);
        slm_model_close(&r->m);
        return 0;
    }
    return r->ok = 1;
}

/* The worst logit error relative to the reference's largest, over a prefill
 * of `first` ids (mpl rows a program: chunks beyond) and decode steps to n. */
static double compare(const char *path, const int32_t *ids, int n, int first, int mpl) {
    rig r;
    if (!rig_open_g4(&r, path, mpl, n)) return INFINITY;
    const int V = r.c.cfg.vocab_size;
    float *ref = malloc(sizeof(float) * (size_t)n * V);
    double worst = 0;
    slm_err err = {0};
    if (!ref_forward_ctx(&r.m, ids, n, ref, r.c.kv_capacity) || slm_rt_prefill(&r.rt, ids, first, &err)) {
        CHECKF(0, "%s: reference or prefill: %s", path, err.msg);
        worst = INFINITY;
    }
    for (int p = first - 1; p < n && worst < INFINITY; p++) {
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
    free(ref);
    rig_close(&r);
    return worst;
}

static void test_g4_vs_reference(void) {
    int32_t ids[40];
    g_rng = 99;
    for (int i = 0; i < 40; i++) ids[i] = (int32_t)(urand() * 150);
    const g4 *forms[2] = {&k_e2b, &k_31b};
    static const uint32_t types[3] = {SLM_F32, SLM_F16, SLM_Q8_0};
    for (int f = 0; f < 2; f++)
        for (int t = 0; t < 3; t++) {
            if (!write_g4("g4_ref.gguf", forms[f], types[t], 1234 + f)) continue;
            g_threads = 1 + t; /* one to three threads */
            const double e1 = compare("g4_ref.gguf", ids, 40, 5, 64), e2 = compare("g4_ref.gguf", ids, 40, 30, 8);
            /* q8_0: int8 activations (~0.4% an element); V is RMS-normed, its average over the rows
             * attended shrinks with their number, and the post-attention norm scales the output back
             * to unit RMS: the rounding returns amplified (random weights attend broadly) */
            const double tol = types[t] == SLM_Q8_0 ? 1.5e-1 : 1e-4;
            CHECKF(e1 < tol && e2 < tol, "%s %s: logits rel err %.3g / %.3g vs reference", f ? "31b" : "e2b",
                   slm_dtype_name(types[t]), e1, e2);
            unlink("g4_ref.gguf");
        }
    g_threads = 1;
}

/* The logits of the first n of ids after a prefill (mpl rows a program) into out [V]. */
static int last_logits(const char *path, const int32_t *ids, int n, int mpl, float *out, int V) {
    rig r;
    if (!rig_open_g4(&r, path, mpl, 32)) return 0;
    slm_err err = {0};
    const int ok = r.c.cfg.vocab_size == V && slm_rt_prefill(&r.rt, ids, n, &err) == SLM_OK;
    if (ok) memcpy(out, r.rt.logits, sizeof(float) * (size_t)V);
    rig_close(&r);
    return ok;
}

/* Gemma 4 with experts (26B-A4B's form) against the reference: F32, F16,
 * Q8_0 on one to three threads, one prefill and chunked ones, decode; the
 * fused gate/up and the two tensors of the same values give the same
 * logits bit for bit; without down scales, too. */
static void test_g4_moe_vs_reference(void) {
    int32_t ids[40];
    g_rng = 123;
    for (int i = 0; i < 40; i++) ids[i] = (int32_t)(urand() * 150);
    static const uint32_t types[3] = {SLM_F32, SLM_F16, SLM_Q8_0};
    for (int t = 0; t < 3; t++) {
        g4 s = k_26b;
        s.dscale = t != 1; /* f16: no per-expert scales */
        /* q8_0: int8 activations move the router's logits by ~1e-2, which flips near-tied top-K
         * choices against the double reference (measured 0.25-0.8 over six seeds, each a flip); with
         * every expert used no choice is left to flip (0.12, as the dense forms' 0.11) */
        if (types[t] == SLM_Q8_0) s.used = s.experts;
        if (!write_g4("g4m_ref.gguf", &s, types[t], 2024)) continue;
        g_threads = 1 + t;
        const double e1 = compare("g4m_ref.gguf", ids, 40, 5, 64), e2 = compare("g4m_ref.gguf", ids, 40, 30, 8);
        const double tol = types[t] == SLM_Q8_0 ? 1.5e-1 : 1e-4; /* q8_0: as the dense forms' */
        CHECKF(e1 < tol && e2 < tol, "26b %s: logits rel err %.3g / %.3g vs reference", slm_dtype_name(types[t]), e1, e2);
        unlink("g4m_ref.gguf");
    }
    g_threads = 2;
    g4 s = k_26b;
    float a[160], b[160];
    s.fused = 0;
    const int ok = write_g4("g4m_sep.gguf", &s, SLM_Q8_0, 77) && last_logits("g4m_sep.gguf", ids, 20, 8, a, 160);
    s.fused = 1;
    CHECK(ok && write_g4("g4m_fus.gguf", &s, SLM_Q8_0, 77) && last_logits("g4m_fus.gguf", ids, 20, 8, b, 160) &&
          !memcmp(a, b, sizeof a));
    unlink("g4m_sep.gguf");
    unlink("g4m_fus.gguf");
    g_threads = 1;
}

/* The KV cache as f16 / q8_0: within the type's rounding of the reference,
 * above f32's (the cache holds the type); and its bytes are each layer's own
 * rows, none for the shared layers. */
static void test_g4_kv(void) {
    int32_t ids[40];
    g_rng = 77;
    for (int i = 0; i < 40; i++) ids[i] = (int32_t)(urand() * 150);
    if (!write_g4("g4_kv.gguf", &k_e2b, SLM_F32, 4321)) return;
    static const int kts[2] = {SLM_F16, SLM_Q8_0};
    for (int t = 0; t < 2; t++) {
        g_kv_type = kts[t];
        g_threads = 2;
        const double e1 = compare("g4_kv.gguf", ids, 40, 5, 64), e2 = compare("g4_kv.gguf", ids, 40, 30, 8);
        /* amplified as the q8_0 weights' rounding above (measured 1.2-1.8e-3 and 3.6e-2) */
        const double tol = kts[t] == SLM_F16 ? 4e-3 : 1e-1;
        CHECKF(e1 < tol && e2 < tol && e1 > 1e-6, "KV %s: logits rel err %.3g / %.3g", slm_dtype_name((uint32_t)kts[t]), e1, e2);
    }
    g_kv_type = SLM_F32;
    g_threads = 1;
    rig r;
    if (rig_open_g4(&r, "g4_kv.gguf", 8, 24)) {
        uint64_t want = 0; /* rows of 32 (window layers) or 64 (global) floats, K and V, 5 layers with K/V */
        for (int l = 0; l < k_e2b.layers; l++)
            if (own_kv(&k_e2b, l)) want += 2ull * (uint64_t)r.c.kv_capacity * (uint64_t)(kv_of(&k_e2b, l) * hd_of(&k_e2b, l)) * 4;
        CHECKF(r.rt.kv_bytes == want, "KV bytes %llu, want %llu", (unsigned long long)r.rt.kv_bytes, (unsigned long long)want);
        CHECK(slm_rt_kv_row_bytes(&r.rt, 0) == 32 * 4 && slm_rt_kv_row_bytes(&r.rt, 4) == 64 * 4 &&
              slm_rt_kv_row_bytes(&r.rt, 5) == 0 && slm_rt_kv_row_bytes(&r.rt, 6) == 0);
        rig_close(&r);
    }
    unlink("g4_kv.gguf");
}

/* The model as a blob (KV type kt) read back: the same logits bit for bit; the image in *img. */
static void blob_roundtrip(const g4 *s, int kt, uint8_t **img, size_t *n) {
    int32_t ids[24];
    g_rng = 11;
    for (int i = 0; i < 24; i++) ids[i] = (int32_t)(urand() * 150);
    if (img) *img = NULL;
    if (!write_tok("g4_tok.bin", 160) || !write_g4("g4_blob.gguf", s, SLM_Q8_0, 5)) return;
    g_kv_type = kt;
    rig r;
    if (rig_open_g4(&r, "g4_blob.gguf", 8, 24)) {
        char what[32];
        snprintf(what, sizeof what, "gemma4, KV %d", kt);
        if (rig_blob_trip(&r, what, "g4_tok.bin", 160, "g4.slmblob", ids, 13, 24) && img) *img = (uint8_t *)t_read_file("g4.slmblob", n);
        rig_close(&r);
    }
    g_kv_type = SLM_F32;
    unlink("g4.slmblob");
    unlink("g4_blob.gguf");
    unlink("g4_tok.bin");
}

/* A task of op (with flag bits all of `flags` when given) in the prefill program. */
static int find_task(uint8_t *tasks, uint64_t len, int op, uint16_t flags, int nth) {
    for (uint64_t i = 0; i < len / 160; i++) {
        uint16_t fl;
        memcpy(&fl, tasks + i * 160 + 2, 2);
        if (tasks[i * 160] == op && (fl & flags) == flags && nth-- == 0) return (int)i;
    }
    return -1;
}

/* Round trips with every KV type; then the gemma4 fields of the config
 * record and the tasks they shape, damaged one at a time, are refused
 * naming what is wrong. */
static void test_g4_blob(void) {
    blob_roundtrip(&k_31b, SLM_F32, NULL, NULL);
    blob_roundtrip(&k_e2b, SLM_Q8_0, NULL, NULL);
    size_t n = 0;
    uint8_t *img = NULL;
    blob_roundtrip(&k_e2b, SLM_F16, &img, &n);
    if (!img) return;
    uint64_t len = 0, clen = 0;
    uint8_t *tasks = t_blob_section(img, n, ".slm.tasks.prefill.8", &len);
    uint8_t *cfg = t_blob_section(img, n, ".slm.config", &clen);
    char msg[512];
    CHECKF(tasks && cfg && clen == BLOB_CONFIG_SIZE && t_blob_opens(img, n, "g4.blob", msg, sizeof msg), "pristine: %s", msg);
    if (!tasks || !cfg || clen != BLOB_CONFIG_SIZE) {
        free(img);
        return;
    }
    /* the family record's gemma4 fields: config offset 224 + 176 + 4 i (after qwen35's) */
    static const struct { int i; int32_t v; const char *want; } cm[] = {
        {0, 33, "head_dim_swa"}, {1, 3, "n_kv_heads_swa"}, {2, 34, "rope_dims_swa"}, {3, 7, "kv_shared"},
        {3, 1, "not a window layer"}, {4, -1, "hidden_dim_shared"}, {5, -1, "ple_dim"}, {6, 2, "v_norm"},
        {7, 0, "rope_freqs_global"}, {8, 3, "layer_scale"}, {9, 4, "rope_pairs_swa"},
    };
    for (size_t i = 0; i < sizeof cm / sizeof cm[0]; i++) {
        uint8_t *e = cfg + 224 + 176 + 4 * cm[i].i, keep[4];
        memcpy(keep, e, 4);
        memcpy(e, &cm[i].v, 4);
        if (cm[i].i == 7) { /* rope_freqs_global 0: table 1 would take the factors; the tasks still match, so */
            memcpy(e, keep, 4); /* instead: rope_freqs off with rope_freqs_global on */
            int32_t z = 0;
            memcpy(keep, cfg + 92, 4);
            memcpy(cfg + 92, &z, 4);
            CHECKF(!t_blob_opens(img, n, "g4.blob", msg, sizeof msg) && strstr(msg, cm[i].want), "rope_freqs 0: %s", msg);
            memcpy(cfg + 92, keep, 4);
            continue;
        }
        CHECKF(!t_blob_opens(img, n, "g4.blob", msg, sizeof msg) && strstr(msg, cm[i].want), "config field %d = %d: %s",
               cm[i].i, cm[i].v, msg);
        memcpy(e, keep, 4);
    }
    /* qwen35's recurrent layers (config offset 224 + 152: recur_interval, ssm_conv, ssm_state, ssm_k_heads,
     * ssm_v_heads, each in range) or gated query (+ 172: attn_gate) beside gemma4's fields: refused */
    for (int k = 0; k < 2; k++) {
        uint8_t *e = cfg + 224 + (k ? 172 : 152), keep[20];
        const int32_t v[5] = {k ? 1 : 4, 4, 8, 1, 1};
        const size_t nb = k ? 4 : 20;
        memcpy(keep, e, nb);
        memcpy(e, v, nb);
        CHECKF(!t_blob_opens(img, n, "g4.blob", msg, sizeof msg) && strstr(msg, k ? "gated query" : "recurrent layers"),
               "gemma4 with %s: %s", k ? "attn_gate" : "recur_interval", msg);
        memcpy(e, keep, nb);
    }
    /* v_norm 0: the gainless V norm is refused as a task */
    {
        uint8_t *e = cfg + 224 + 176 + 24, keep[4];
        int32_t z = 0;
        memcpy(keep, e, 4);
        memcpy(e, &z, 4);
        CHECKF(!t_blob_opens(img, n, "g4.blob", msg, sizeof msg) && strstr(msg, "no gains"), "v_norm 0: %s", msg);
        memcpy(e, keep, 4);
    }
    /* tasks: a scaled add's NaN scale, a KV store's width not its layer's, a window layer's rope on table 0 */
    const int add = find_task(tasks, len, SLM_T_ADD, 0, 0), kvs = find_task(tasks, len, SLM_T_KV_STORE, 0, 0),
              rope = find_task(tasks, len, SLM_T_ROPE, SLM_TF_NEOX, 0);
    CHECKF(add >= 0 && kvs >= 0 && rope >= 0, "tasks add %d, kv_store %d, rope %d", add, kvs, rope);
    struct { int task, off; int32_t v; const char *want; } tm[] = {
        {add, 156, 0x7fc00000, "scale f2"},        /* f2 NaN */
        {kvs, 12, 64, "kv_dim"},                   /* n: the global layers' width on a window layer */
        {rope, 56 + 32 + 8, 0, "RoPE table"},      /* src2 offset: table 0 for a window layer's 32 dims */
    };
    for (size_t i = 0; i < sizeof tm / sizeof tm[0] && add >= 0 && kvs >= 0 && rope >= 0; i++) {
        uint8_t *e = tasks + (size_t)tm[i].task * 160 + tm[i].off, keep[4];
        memcpy(keep, e, 4);
        memcpy(e, &tm[i].v, 4);
        CHECKF(!t_blob_opens(img, n, "g4.blob", msg, sizeof msg) && strstr(msg, tm[i].want), "task mutation %zu: %s", i, msg);
        memcpy(e, keep, 4);
    }
    CHECKF(t_blob_opens(img, n, "g4.blob", msg, sizeof msg), "restored: %s", msg);
    free(img);
}

/* Gemma 4 with experts as a blob: the same logits; its fields in the
 * family record's range 216..223 (moe_dense, expert_down_scale) and the
 * tasks they shape (the route's per-expert scales, the combine's sum
 * alone, the experts' GeGLU), damaged one at a time, are refused. */
static void test_g4_moe_blob(void) {
    size_t n = 0;
    uint8_t *img = NULL;
    blob_roundtrip(&k_26b, SLM_F32, &img, &n);
    if (!img) return;
    uint64_t len = 0, clen = 0;
    uint8_t *tasks = t_blob_section(img, n, ".slm.tasks.prefill.8", &len);
    uint8_t *cfg = t_blob_section(img, n, ".slm.config", &clen);
    char msg[512];
    const int route = tasks ? find_task(tasks, len, SLM_T_MOE_ROUTE, 0, 0) : -1,
              comb = tasks ? find_task(tasks, len, SLM_T_MOE_COMBINE, 0, 0) : -1,
              down = tasks ? find_task(tasks, len, SLM_T_MATMUL, SLM_TF_EXPERT | SLM_TF_PRE_SWIGLU | SLM_TF_GELU, 0) : -1;
    CHECKF(cfg && clen == BLOB_CONFIG_SIZE && route >= 0 && comb >= 0 && down >= 0 && t_blob_opens(img, n, "g4m.blob", msg, sizeof msg),
           "pristine: route %d, combine %d, down %d: %s", route, comb, down, msg);
    if (!cfg || clen != BLOB_CONFIG_SIZE || route < 0 || comb < 0 || down < 0) {
        free(img);
        return;
    }
    static const struct { int off; int32_t v; const char *want; } cm[] = {
        {216, 0, "dense_ffn"}, {216, 2, "moe_dense"}, /* 0: its dense width then out of range */ {220, 0, "per-expert scales"}, {220, 2, "expert_down_scale"},
    };
    for (size_t i = 0; i < sizeof cm / sizeof cm[0]; i++) {
        uint8_t *e = cfg + 224 + cm[i].off, keep[4];
        memcpy(keep, e, 4);
        memcpy(e, &cm[i].v, 4);
        CHECKF(!t_blob_opens(img, n, "g4m.blob", msg, sizeof msg) && strstr(msg, cm[i].want), "config +%d = %d: %s",
               cm[i].off, cm[i].v, msg);
        memcpy(e, keep, 4);
    }
    uint16_t fl;
    memcpy(&fl, tasks + (size_t)down * 160 + 2, 2);
    fl = (uint16_t)(fl & ~SLM_TF_GELU);
    struct { int task, off, size; int32_t v; const char *want; } tm[] = {
        {route, 56 + 32, 1, 0, "per-expert scales"}, /* src2 (the scales) none */
        {comb, 32, 4, 0, "moe_dense"},               /* b: into x instead of the sum alone */
        {down, 2, 2, fl, "SwiGLU"},                  /* the experts' GeGLU flag off */
    };
    for (size_t i = 0; i < sizeof tm / sizeof tm[0]; i++) {
        uint8_t *e = tasks + (size_t)tm[i].task * 160 + tm[i].off, keep[4];
        memcpy(keep, e, (size_t)tm[i].size);
        memcpy(e, &tm[i].v, (size_t)tm[i].size);
        CHECKF(!t_blob_opens(img, n, "g4m.blob", msg, sizeof msg) && strstr(msg, tm[i].want), "task mutation %zu: %s", i,
               msg);
        memcpy(e, keep, (size_t)tm[i].size);
    }
    CHECKF(t_blob_opens(img, n, "g4m.blob", msg, sizeof msg), "restored: %s", msg);
    free(img);
}

/* Files llama.cpp would read otherwise, or not at all, are refused naming the key, layer or tensor. */
static void test_g4_refused(void) {
    static const struct { int bad; const char *want; } cases[] = {
        {1, "expert_used_count"}, {2, "sliding_window_pattern"}, {3, "head_count_kv"}, {5, "value length"}, {6, "attn_logit_softcapping"},
        {7, "per_layer_proj_norm"}, {8, "layer_output_scale"}, {9, "missing required key"}, {10, "feed_forward_length"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        g4 s = k_e2b;
        s.bad = cases[i].bad;
        if (!write_g4("g4_bad.gguf", &s, SLM_F32, 3)) continue;
        slm_model_file m;
        slm_err err = {0};
        const slm_status st = slm_model_open(&m, "g4_bad.gguf", &err);
        CHECKF(st != SLM_OK && strstr(err.msg, cases[i].want), "bad %d: %s", cases[i].bad, err.msg);
        if (st == SLM_OK) slm_model_close(&m);
    }
    static const struct { int bad; const char *want; } moe[] = {
        {11, "expert_gating_func"}, {12, "blk.1.ffn_gate_inp.scale"}, {13, "ffn_down_exps.scale"},
        {14, "ffn_gate_up_exps"}, {15, "expert_count"}, {16, "blk.1.ffn_gate_inp.weight"}, {17, "ffn_up_exps.scale"},
    };
    for (size_t i = 0; i < sizeof moe / sizeof moe[0]; i++) {
        g4 s = k_26b;
        s.bad = moe[i].bad;
        if (!write_g4("g4_bad.gguf", &s, SLM_F32, 3)) continue;
        slm_model_file m;
        slm_err err = {0};
        const slm_status st = slm_model_open(&m, "g4_bad.gguf", &err);
        CHECKF(st != SLM_OK && strstr(err.msg, moe[i].want), "bad %d: %s", moe[i].bad, err.msg);
        if (st == SLM_OK) slm_model_close(&m);
    }
    { /* gemma4's expert fields on another family's config */
        slm_model_config c;
        memset(&c, 0, sizeof c);
        snprintf(c.arch, sizeof c.arch, "qwen3moe");
        c.moe_dense = 1;
        slm_err err = {0};
        CHECK(slm_gemma4_check_config(&c, "x", &err) != SLM_OK && strstr(err.msg, "moe_dense"));
        c.moe_dense = 0;
        c.expert_down_scale = 1;
        CHECK(slm_gemma4_check_config(&c, "x", &err) != SLM_OK && strstr(err.msg, "expert_down_scale"));
    }
    /* shared layers whose source is a window layer (4 shared of 7: layer 2 would hold the last K/V) */
    g4 s = k_e2b;
    s.kv_shared = 4;
    if (write_g4("g4_bad.gguf", &s, SLM_F32, 3)) {
        slm_model_file m;
        slm_err err = {0};
        const slm_status st = slm_model_open(&m, "g4_bad.gguf", &err);
        CHECKF(st != SLM_OK && strstr(err.msg, "shares the KV cache"), "4 shared: %s", err.msg);
        if (st == SLM_OK) slm_model_close(&m);
    }
    unlink("g4_bad.gguf");
}

/* Sessions on an engine of 3 KV regions (batch programs) with the prefix
 * cache: each id prompt's greedy tokens equal those of a one-sequence engine
 * without it; the repeated prompt restores its rows from the cache (each
 * layer's rows of its own width, none for the shared layers). */
static slm_engine *g4_engine(int n_seqs, int pc_mb) {
    slm_options o = slm_default_options();
    o.kv_type = SLM_KV_F32;
    o.tokenizer_path = "g4_tok.bin";
    o.n_threads = 2;
    o.n_seqs = n_seqs;
    o.prefix_cache_mb = pc_mb;
    o.max_prompt_len = 8;
    o.min_response_len = 32;
    slm_engine *e = NULL;
    if (slm_load(&e, "g4_sess.gguf", &o)) {
        CHECKF(0, "load: %s", slm_last_error(e));
        slm_free(e);
        return NULL;
    }
    return e;
}

static void sessions(const g4 *form, uint32_t ty) {
    enum { NP = 4, NT = 16 };
    int32_t prompts[NP][12];
    g_rng = 5;
    for (int p = 0; p < NP; p++)
        for (int i = 0; i < 12; i++) prompts[p][i] = p == 3 ? prompts[0][i] : 3 + (int32_t)(urand() * 150);
    if (!write_tok("g4_tok.bin", 160) || !write_g4("g4_sess.gguf", form, ty, 8)) return;
    slm_session_cfg c;
    memset(&c, 0, sizeof c);
    c.n_predict = NT;
    c.ignore_eos = 1;
    int32_t want[NP][NT], got[NP][NT];
    slm_engine *e = g4_engine(1, 0);
    for (int p = 0; e && p < NP; p++) {
        slm_session *s = NULL;
        CHECK(slm_session_new(e, &c, &s) == SLM_OK && slm_session_feed(s, prompts[p], 12) == SLM_OK);
        for (int i = 0; s && i < NT; i++) CHECK(slm_session_next(s, &want[p][i], NULL) == SLM_OK);
        slm_session_free(s);
    }
    slm_free(e);
    e = g4_engine(3, 16);
    if (!e) return;
    slm_session *ss[NP] = {0};
    for (int p = 0; p < 3; p++) CHECK(slm_session_new(e, &c, &ss[p]) == SLM_OK && slm_session_feed(ss[p], prompts[p], 12) == SLM_OK);
    for (int i = 0; i < NT; i++) {
        int32_t ids[3];
        CHECK(slm_session_next_batch(ss, 3, ids, NULL, NULL) == SLM_OK);
        for (int p = 0; p < 3; p++) got[p][i] = ids[p];
    }
    slm_session_free(ss[0]); /* its slot (and its prompt's rows in the prefix cache) for the fourth */
    CHECK(slm_session_new(e, &c, &ss[3]) == SLM_OK && slm_session_set_prompt(ss[3], prompts[3], 12) == SLM_OK);
    for (int i = 0; i < NT; i++) CHECK(slm_session_next(ss[3], &got[3][i], NULL) == SLM_OK);
    slm_session_stats st;
    slm_session_get_stats(ss[3], &st);
    CHECKF(st.n_reused > 0, "prefix cache: %d rows reused", st.n_reused);
    for (int p = 0; p < NP; p++) CHECKF(!memcmp(got[p], want[p], sizeof got[p]), "prompt %d: batch / prefix tokens differ", p);
    for (int p = 1; p < NP; p++) slm_session_free(ss[p]);
    slm_free(e);
    unlink("g4_sess.gguf");
    unlink("g4_tok.bin");
}

static void test_g4_sessions(void) {
    sessions(&k_e2b, SLM_Q8_0);
    /* batch programs of MoE layers beside the dense FFN */
    sessions(&k_26b, SLM_F32);
    sessions(&k_26b, SLM_Q8_0);
}

/* Two sequences decoded together through batch.2 get the logits each gets
 * alone through the generate program, bit for bit, at every step (regions
 * of 40 rows, below the key parts' 256: the plain attention path). Once a
 * batch call's rows took the blocked attention kernel, one row a block,
 * which sums in another order than the one-row kernel: logits some 1e-6
 * apart at F32, and at q8_0 an activation's 8-bit rounding now and then
 * falling the other way made it 0.1 and parted the greedy tokens at a
 * top-2 gap of 0.02 (test_g4_sessions' 26B-A4B q8_0 case). */
static void batch_logits(const g4 *form, uint32_t ty, int threads) {
    enum { NPRE = 12, NS = 12 };
    if (!write_g4("g4_bl.gguf", form, ty, 9)) return;
    int32_t ids[2][NPRE + NS];
    g_rng = 11;
    for (int q = 0; q < 2; q++)
        for (int i = 0; i < NPRE + NS; i++) ids[q][i] = 3 + (int32_t)(urand() * 150);
    slm_model_file m;
    slm_compiled c;
    slm_runtime rt;
    memset(&c, 0, sizeof c);
    slm_err err = {0};
    const int batches[] = {2};
    if (slm_model_open(&m, "g4_bl.gguf", &err)) {
        CHECKF(0, "open: %s", err.msg);
        return;
    }
    const slm_compile_options o = rig_opts(8, 32);
    if (slm_model_repack(&m, &err) || slm_compile(&c, &m, &o, &err) || slm_compile_batch(&c, &m, 2, batches, 1, &err) ||
        slm_rt_init_seqs(&rt, &c, m.map.data, threads, 2, slm_rt_snaps(0), &err)) {
        CHECKF(0, "compile: %s", err.msg);
        slm_compiled_free(&c);
        slm_model_close(&m);
        return;
    }
    const int V = c.cfg.vocab_size;
    float *alone = malloc(sizeof(float) * 2 * NS * (size_t)V);
    int steps = 0, same = 0;
    double worst = 0;
    for (int q = 0; q < 2; q++) { /* each alone, in its own region */
        slm_rt_select(&rt, q);
        CHECK(slm_rt_prefill(&rt, ids[q], NPRE, &err) == SLM_OK);
        for (int i = 0; i < NS; i++) {
            CHECK(slm_rt_decode(&rt, ids[q][NPRE + i], &err) == SLM_OK);
            memcpy(alone + ((size_t)q * NS + i) * V, rt.logits, sizeof(float) * (size_t)V);
        }
        slm_rt_reset(&rt);
    }
    for (int q = 0; q < 2; q++) {
        slm_rt_select(&rt, q);
        CHECK(slm_rt_prefill(&rt, ids[q], NPRE, &err) == SLM_OK);
    }
    for (int i = 0; i < NS; i++) {
        const int seqs[2] = {0, 1};
        const int32_t step[2] = {ids[0][NPRE + i], ids[1][NPRE + i]};
        const float *lg = NULL;
        if (slm_rt_decode_batch(&rt, seqs, step, 2, &lg, &err)) {
            CHECKF(0, "decode_batch: %s", err.msg);
            break;
        }
        for (int q = 0; q < 2; q++, steps++) {
            const float *a = alone + ((size_t)q * NS + i) * V, *b = lg + (size_t)q * V;
            same += !memcmp(a, b, sizeof(float) * (size_t)V);
            for (int j = 0; j < V; j++) worst = fmax(worst, fabs((double)a[j] - b[j]));
        }
    }
    CHECKF(steps == 2 * NS && same == steps, "%s, %d threads: %d of %d batch rows equal alone, largest difference %.3g",
           slm_dtype_name(ty), threads, same, steps, worst);
    free(alone);
    slm_rt_free(&rt);
    slm_compiled_free(&c);
    slm_model_close(&m);
    unlink("g4_bl.gguf");
}

static void test_g4_batch_logits(void) {
    batch_logits(&k_26b, SLM_F32, 1);
    batch_logits(&k_26b, SLM_F16, 2);
    batch_logits(&k_26b, SLM_Q8_0, 2);
    batch_logits(&k_e2b, SLM_Q8_0, 1);
}

/* tokenizer.ggml.model "gemma4" (llama.cpp's gemma4 pre-type): BPE merges
 * over the text with spaces as "▁" and no prefix, pieces cut at runs of
 * newlines (a run that is a token whole: that token), <0xXX> for bytes
 * without a token, BOS added; decoding gives the text back. */
static void test_g4_tokenizer(void) {
    const char *toks[] = {"<pad>", "<eos>", "<bos>", "<unk>", "\xe2\x96\x81", "h", "e", "l", "o", "x", "\n", "\n\n",
                          "he", "ll", "hell", "hello", "\xe2\x96\x81hello", "lo", "o\n"};
    enum { NB = 19 };
    const char *all[NB + 256];
    int32_t type[NB + 256];
    char bytes[256][8];
    for (int i = 0; i < NB; i++) {
        all[i] = toks[i];
        type[i] = i < 4 ? 3 : 1; /* control, normal */
    }
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        all[NB + b] = bytes[b];
        type[NB + b] = 6; /* byte */
    }
    /* "o \n" would merge across the newline without the cut: o\n is a merge */
    const char *merges[] = {"h e", "l l", "he ll", "hell o", "\xe2\x96\x81 hello", "l o", "o \n"};
    slm_gguf_writer *w = slm_gguf_writer_new();
    uint64_t lens[NB + 256];
    for (int i = 0; i < NB + 256; i++) lens[i] = strlen(all[i]);
    slm_gguf_set_str(w, "general.architecture", "gemma4");
    slm_gguf_set_str(w, "tokenizer.ggml.model", "gemma4");
    slm_gguf_set_arr_str(w, "tokenizer.ggml.tokens", all, lens, NB + 256);
    slm_gguf_set_arr(w, "tokenizer.ggml.token_type", SLM_GGUF_I32, type, NB + 256);
    uint64_t ml[7];
    for (int i = 0; i < 7; i++) ml[i] = strlen(merges[i]);
    slm_gguf_set_arr_str(w, "tokenizer.ggml.merges", merges, ml, 7);
    slm_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 2);
    slm_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 1);
    slm_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 3);
    slm_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", 0); /* llama.cpp adds it anyway */
    slm_err err = {0};
    CHECK(slm_gguf_write(w, "g4_tok.gguf", &err) == SLM_OK);
    slm_gguf_writer_free(w);
    slm_map map;
    slm_gguf *g = NULL;
    slm_tokenizer *t = NULL;
    if (slm_map_file(&map, "g4_tok.gguf", &err) || slm_gguf_open(&g, map.data, map.size, "g4_tok.gguf", &err) ||
        slm_tok_load_gguf(&t, g, "g4_tok.gguf", &err)) {
        CHECKF(0, "%s", err.msg);
    } else {
        int32_t ids[32];
        const int n = slm_tok_encode(t, "hello hello\n\nxo\nlo z", 1, 0, ids, 32);
        /* <bos> hello ▁hello \n\n x o \n lo ▁ <0x7A> */
        static const int32_t want[] = {2, 15, 16, 11, 9, 8, 10, 17, 4, NB + 0x7a};
        CHECKF(n == 10 && !memcmp(ids, want, sizeof want), "%d ids: %d %d %d %d %d %d %d %d %d %d", n, ids[0], ids[1],
               ids[2], ids[3], ids[4], ids[5], ids[6], ids[7], ids[8], ids[9]);
        char text[64] = "";
        for (int i = 1; i < n && i < 10; i++) strncat(text, slm_tok_decode(t, ids[i - 1], ids[i]), sizeof text - strlen(text) - 1);
        CHECKF(!strcmp(text, "hello hello\n\nxo\nlo z"), "decoded '%s'", text);
        slm_tok_free(t);
    }
    slm_gguf_close(g);
    slm_unmap(&map);
    unlink("g4_tok.gguf");
}

int main(void) {
    T_RUN(test_g4_vs_reference);
    T_RUN(test_g4_moe_vs_reference);
    T_RUN(test_g4_kv);
    T_RUN(test_g4_blob);
    T_RUN(test_g4_moe_blob);
    T_RUN(test_g4_refused);
    T_RUN(test_g4_sessions);
    T_RUN(test_g4_batch_logits);
    T_RUN(test_g4_tokenizer);
    T_DONE();
}
