/* Weight quantization at load (format/quantize.c, --weight-type):
 * - the fitted K-quant scales against round-to-nearest, on the same rows
 *   (their error must be lower) and on awkward rows (zero, constant, one
 *   sign, one outlier);
 * - the type of every tensor of an F16 model of 8 layers (and of one whose
 *   widths do not fit 256) under every file type (q8_0, q4_0, q5_0, q4_k_s,
 *   q4_k_m, q5_k_s, q5_k_m, q6_k, iq4_nl, iq4_xs), against this file's own restatement of
 *   llama-quantize's choices, and the values against the source; the rules
 *   for 8 experts and 70B models, and the fallbacks, one call at a time;
 * - the quantized model's logits against the double-precision reference
 *   forward pass over the same (dequantized) weights;
 * - the engine: stories260K quantized at load and from its blob give the
 *   same logits bit for bit, and differ from the f32 model's;
 * - refusals: an already quantized file, the option on a blob, a bad
 *   value or name. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "t.h"
#include "t_gguf_llama.h"
#include "st_write.h"
#include "rig.h"
#include "ref_forward.h"
#include "t_engine.h"
#include "common/dtype.h"
#include "device/kernels.h"
#include "format/gguf.h"
#include "format/model.h"
#include "staticlm.h"

#define M(f) T_SHARED("models/" f)

#include <sys/stat.h>

static char g_dir[64];



/* ---- the quantizers ------------------------------------------------------------ */

static double rel_err(uint32_t t, const float *x, int64_t n, int fit) {
    void *q = malloc((size_t)slm_row_bytes(t, (uint64_t)n));
    float *y = malloc((size_t)n * sizeof *y);
    CHECK(fit ? slm_quantize_row_fit(t, x, q, n) : slm_quantize_row(t, x, q, n));
    CHECK(slm_dequantize_row(t, q, y, n));
    double e = 0, s = 0;
    for (int64_t i = 0; i < n; i++) e += ((double)x[i] - y[i]) * ((double)x[i] - y[i]), s += (double)x[i] * x[i];
    free(q), free(y);
    return s > 0 ? sqrt(e / s) : sqrt(e);
}

static void test_fit_error(void) {
    enum { N = 256 * 64 };
    float *x = malloc(N * sizeof *x);
    g_rng = 7;
    for (int i = 0; i < N; i++) x[i] = 0.02f * nrand() * (urand() < 0.01 ? 5.0f : 1.0f);
    const uint32_t ts[] = {SLM_Q4_K, SLM_Q5_K, SLM_Q6_K};
    for (int k = 0; k < 3; k++) {
        const double rtn = rel_err(ts[k], x, N, 0), fit = rel_err(ts[k], x, N, 1);
        fprintf(stderr, "  %s: relative rms error %.5f round-to-nearest, %.5f fitted\n", slm_dtype_name(ts[k]), rtn, fit);
        CHECKF(fit < 0.97 * rtn, "%s: fitted %.5f not below round-to-nearest %.5f", slm_dtype_name(ts[k]), fit, rtn);
    }
    /* awkward rows: finite, and about as good as the range's own step */
    for (int c = 0; c < 5; c++) {
        for (int i = 0; i < 512; i++) {
            const float v = 0.02f * nrand();
            x[i] = c == 0 ? 0.0f : c == 1 ? 0.75f : c == 2 ? fabsf(v) + 0.01f : c == 3 ? -fabsf(v) : v;
        }
        if (c == 4) x[77] = 3.0f; /* one outlier */
        for (int k = 0; k < 3; k++) {
            const double rtn = rel_err(ts[k], x, 512, 0), fit = rel_err(ts[k], x, 512, 1);
            /* the fit minimizes a weighted error before the 6-bit scales: it may lose a little on a row like these */
            CHECKF(isfinite(fit) && fit <= rtn * 1.05 + 1e-4, "%s row kind %d: fitted %.6f, round-to-nearest %.6f",
                   slm_dtype_name(ts[k]), c, fit, rtn);
        }
    }
    /* the 32-block types are round-to-nearest either way (as llama-quantize without an importance matrix) */
    for (int i = 0; i < 512; i++) x[i] = 0.02f * nrand();
    const uint32_t plain[] = {SLM_Q8_0, SLM_Q4_0, SLM_Q5_0};
    for (int k = 0; k < 3; k++) {
        uint8_t a[1024], b[1024];
        CHECK(slm_quantize_row(plain[k], x, a, 512) && slm_quantize_row_fit(plain[k], x, b, 512));
        CHECKF(!memcmp(a, b, (size_t)slm_row_bytes(plain[k], 512)), "%s: the fit changed a 32-block type",
               slm_dtype_name(plain[k]));
    }
    free(x);
}

/* llama-quantize's bytes: matrices of values exact in f32 (a 24-bit integer
 * over 2^27, every 97th times 8; seed 1000 + k), written as an F32 GGUF
 * and quantized by llama.cpp's llama-quantize (Q4_K_M with --tensor-type
 * overrides for Q5_K, Q8_0, Q4_0, Q5_0 and Q5_1; llama.cpp d32676d77, here): the
 * FNV-1a hashes of its tensors. The fitted quantizers must give the same
 * bytes. Q5_1 (Q5_K's fallback) is ffn_up's shape with seed 1009; the
 * last three (seeds 1010..1012) were quantized the same way to IQ4_XS,
 * IQ4_NL and IQ4_XS (--tensor-type attn_q=iq4_xs, ffn_gate=iq4_nl,
 * ffn_up=iq4_xs on an F32 GGUF of those matrices). */
static void lcg_fill(float *f, size_t n, uint64_t seed) {
    uint64_t st = seed;
    for (size_t i = 0; i < n; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        const int32_t v = (int32_t)(st >> 40) - (1 << 23);
        f[i] = (float)v / 134217728.0f * (i % 97 == 0 ? 8.0f : 1.0f);
    }
}

static uint64_t fnv1a(const void *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
    return h;
}

static void test_llama_quantize_bytes(void) {
    static const struct {
        const char *name;
        int cols, rows;
        uint32_t type;
        uint64_t hash;
    } gold[] = {
        {"token_embd", 256, 64, SLM_Q4_K, 0x3b984fac03797bc2ull},  {"attn_q", 256, 256, SLM_Q5_K, 0xbdbf99117cab81e4ull},
        {"attn_k", 256, 128, SLM_Q4_K, 0xe5566fdbcb0bb8baull},     {"attn_v", 256, 128, SLM_Q6_K, 0x6c992ce7bc7819e3ull},
        {"attn_output", 256, 256, SLM_Q8_0, 0x92c0f87bc1d2e58bull}, {"ffn_gate", 256, 512, SLM_Q4_0, 0xf2a68d1774026c2dull},
        {"ffn_up", 256, 512, SLM_Q5_0, 0xc77ad24e8e4879b8ull},     {"ffn_down", 512, 256, SLM_Q6_K, 0xd5cd795345e209bdull},
        {"output", 256, 64, SLM_Q6_K, 0x9bcffd7ef8e45480ull},     {"ffn_up", 256, 512, SLM_Q5_1, 0xf987fe6942128a37ull},
        {"attn_q", 256, 256, SLM_IQ4_XS, 0x53840f443e6a3be2ull},   {"ffn_gate", 256, 512, SLM_IQ4_NL, 0xb1b8ac7181d7c741ull},
        {"ffn_up", 256, 512, SLM_IQ4_XS, 0x730534945a9367e6ull},
    };
    for (int k = 0; k < (int)(sizeof gold / sizeof gold[0]); k++) {
        const size_t n = (size_t)gold[k].cols * (size_t)gold[k].rows;
        const uint64_t rb = slm_row_bytes(gold[k].type, (uint64_t)gold[k].cols);
        float *f = malloc(n * sizeof *f);
        uint8_t *q = malloc((size_t)rb * (size_t)gold[k].rows);
        lcg_fill(f, n, 1000 + (uint64_t)k);
        for (int r = 0; r < gold[k].rows; r++)
            CHECK(slm_quantize_row_fit(gold[k].type, f + (size_t)r * gold[k].cols, q + (size_t)r * rb, gold[k].cols));
        const uint64_t h = fnv1a(q, (size_t)rb * (size_t)gold[k].rows);
        CHECKF(h == gold[k].hash, "%s (%s): bytes hash %016llx, llama-quantize's %016llx", gold[k].name,
               slm_dtype_name(gold[k].type), (unsigned long long)h, (unsigned long long)gold[k].hash);
        free(f), free(q);
    }
}

/* ---- a model to quantize ----------------------------------------------------- */

enum { LAYERS = 8, HEADS = 4, KVH = 2, VOCAB = 64 };

typedef struct keep {
    void *p[128];
    int n;
} keep;

/* A tensor [cols, rows] (3-D [cols, rows, n3] when n3 > 1) of normal values. */
static void put3(slm_gguf_writer *w, keep *k, const char *name, int64_t cols, int64_t rows, int64_t n3, uint32_t type,
                 float sd, float mean) {
    const uint64_t rb = slm_row_bytes(type, (uint64_t)cols);
    uint8_t *data = malloc((size_t)(rb * (uint64_t)(rows * n3)));
    float *row = malloc((size_t)cols * sizeof *row);
    for (int64_t r = 0; r < rows * n3; r++) {
        for (int64_t i = 0; i < cols; i++) row[i] = mean + sd * nrand();
        CHECK(slm_quantize_row(type, row, data + (uint64_t)r * rb, cols));
    }
    free(row);
    k->p[k->n++] = data;
    const int64_t ne[3] = {cols, rows, n3};
    CHECK(slm_gguf_add_tensor(w, name, type, n3 > 1 ? 3 : rows > 1 ? 2 : 1, ne, data, rb * (uint64_t)(rows * n3)) == SLM_OK);
}

static void put(slm_gguf_writer *w, keep *k, const char *name, int64_t cols, int64_t rows, uint32_t type, float sd, float mean) {
    put3(w, k, name, cols, rows, 1, type, sd, mean);
}

enum { FUSED_QKV = 1, EXPERTS8 = 2 }; /* write_llama's variants */

/* A llama model of LAYERS layers, width dim, FFN hid; its matrices in type
 * mt (F16, or a quantized type for the refusal), untied (output.weight)
 * unless tied; FUSED_QKV: one attn_qkv per layer (as phi3's), EXPERTS8: 8
 * experts of width hid (2 per token) for the FFN. */
static int write_llama(const char *path, int dim, int hid, uint32_t mt, int tied, uint64_t seed, int variant) {
    g_rng = seed;
    slm_gguf_writer *w = slm_gguf_writer_new();
    keep k = {.n = 0};
    t_gguf_llama_keys(w, dim, hid, LAYERS, HEADS, KVH, 64);
    if (variant & EXPERTS8) {
        slm_gguf_set_u32(w, "llama.expert_count", 8);
        slm_gguf_set_u32(w, "llama.expert_used_count", 2);
    }
    const int kvd = dim / HEADS * KVH;
    const float sd = 1.0f / sqrtf((float)dim);
    put(w, &k, "token_embd.weight", dim, VOCAB, mt, 1.0f, 0.0f);
    static const char *const mats[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
    for (int l = 0; l < LAYERS; l++) {
        char n[64];
        snprintf(n, sizeof n, "blk.%d.attn_norm.weight", l);
        put(w, &k, n, dim, 1, SLM_F32, 0.1f, 1.0f);
        snprintf(n, sizeof n, "blk.%d.ffn_norm.weight", l);
        put(w, &k, n, dim, 1, SLM_F32, 0.1f, 1.0f);
        if (variant & FUSED_QKV) {
            snprintf(n, sizeof n, "blk.%d.attn_qkv.weight", l);
            put(w, &k, n, dim, dim + 2 * kvd, mt, sd, 0.0f);
        }
        if (variant & EXPERTS8) {
            snprintf(n, sizeof n, "blk.%d.ffn_gate_inp.weight", l);
            put(w, &k, n, dim, 8, SLM_F32, sd, 0.0f);
        }
        for (int i = (variant & FUSED_QKV) ? 3 : 0; i < 7; i++) {
            const int64_t cols = i == 6 ? hid : dim, rows = i == 1 || i == 2 ? kvd : i == 3 || i == 6 ? dim : i > 3 ? hid : dim;
            snprintf(n, sizeof n, i > 3 && (variant & EXPERTS8) ? "blk.%d.%s_exps.weight" : "blk.%d.%s.weight", l, mats[i]);
            put3(w, &k, n, cols, rows, i > 3 && (variant & EXPERTS8) ? 8 : 1, mt, i == 6 ? 1.0f / sqrtf((float)hid) : sd, 0.0f);
        }
    }
    put(w, &k, "output_norm.weight", dim, 1, SLM_F32, 0.1f, 1.0f);
    if (!tied) put(w, &k, "output.weight", dim, VOCAB, mt, 2.0f * sd, 0.0f);
    slm_err err = {0};
    const slm_status st = slm_gguf_write(w, path, &err);
    CHECKF(st == SLM_OK, "write %s: %s", path, err.msg);
    slm_gguf_writer_free(w);
    for (int i = 0; i < k.n; i++) free(k.p[i]);
    return st == SLM_OK;
}

/* llama-quantize's choice (llama-quant.cpp), restated here for this llama
 * model of 8 layers (8 attn_v tensors, no experts):
 * - the output (or tied embedding): Q8_0 for q8_0, else Q6_K;
 * - q4_k_m, q5_k_m: attn_v and ffn_down Q6_K in layers 0, 3, 6 and 7 (the
 *   first and last eighth, every third between);
 * - q4_k_s: attn_v Q5_K in layers 0 to 3 (the first four), ffn_down Q5_K
 *   in layer 0 (the first eighth);
 * - everything else the file type's own: Q8_0, Q4_0, Q5_0, Q4_K (q4_k_*),
 *   Q5_K (q5_k_*), Q6_K;
 * - a K-quant of a width not a multiple of 256 becomes Q5_0 (Q4_K), Q5_1
 *   (Q5_K) or Q8_0 (Q6_K);
 * - FUSED_QKV: the attn_qkv (split into attn_q/k/v at load) takes attn_v's
 *   rules, all three parts alike;
 * - iq4_nl, iq4_xs: ffn_down Q5_K in layer 0 (the first eighth; attn_v is
 *   not raised: 2 query heads a KV head); IQ4_XS of a width not a multiple
 *   of 256 becomes IQ4_NL;
 * - EXPERTS8: attn_v and attn_k Q8_0, attn_output Q5_K under q4_k_s,
 *   q4_k_m, iq4_nl and iq4_xs; the experts as the dense FFN (ffn_down by its
 *   layer); the router stays F32. */
static uint32_t fallback(uint32_t t, int64_t width) {
    if (width % 256 == 0) return t;
    return t == SLM_Q4_K ? SLM_Q5_0 : t == SLM_Q5_K ? SLM_Q5_1 : t == SLM_Q6_K ? SLM_Q8_0 : t == SLM_IQ4_XS ? SLM_IQ4_NL : t;
}

static uint32_t expected(int wt, const char *name, int64_t width, int tied, int variant) {
    if (strstr(name, "_norm") || strstr(name, "ffn_gate_inp")) return SLM_F32;
    const int out = !strcmp(name, "output.weight") || (tied && !strcmp(name, "token_embd.weight"));
    if (out) return wt == SLM_WEIGHTS_Q8_0 ? SLM_Q8_0 : fallback(SLM_Q6_K, width);
    int l = -1;
    sscanf(name, "blk.%d.", &l);
    const int fused = (variant & FUSED_QKV) && (strstr(name, "attn_q.") || strstr(name, "attn_k."));
    const int v = fused || strstr(name, "attn_v.") != NULL, down = strstr(name, "ffn_down.") != NULL;
    if ((variant & EXPERTS8) && (v || strstr(name, "attn_k."))) return SLM_Q8_0;
    if ((variant & EXPERTS8) && strstr(name, "attn_output.") && (wt == SLM_WEIGHTS_Q4_K_S || wt == SLM_WEIGHTS_Q4_K_M ||
                                                             wt == SLM_WEIGHTS_IQ4_NL || wt == SLM_WEIGHTS_IQ4_XS))
        return fallback(SLM_Q5_K, width);
    const int more = (v || down) && (l == 0 || l == 3 || l == 6 || l == 7);
    switch (wt) {
    case SLM_WEIGHTS_Q8_0: return SLM_Q8_0;
    case SLM_WEIGHTS_Q4_0: return SLM_Q4_0;
    case SLM_WEIGHTS_Q5_0: return SLM_Q5_0;
    case SLM_WEIGHTS_Q6_K: return fallback(SLM_Q6_K, width);
    case SLM_WEIGHTS_Q4_K_M: return fallback(more ? SLM_Q6_K : SLM_Q4_K, width);
    case SLM_WEIGHTS_Q5_K_M: return fallback(more ? SLM_Q6_K : SLM_Q5_K, width);
    case SLM_WEIGHTS_Q5_K_S: return fallback(SLM_Q5_K, width);
    case SLM_WEIGHTS_Q4_K_S: return fallback((v && l < 4) || (down && l == 0) ? SLM_Q5_K : SLM_Q4_K, width);
    case SLM_WEIGHTS_IQ4_NL: return fallback(down && l == 0 ? SLM_Q5_K : SLM_IQ4_NL, width);
    case SLM_WEIGHTS_IQ4_XS: return fallback(down && l == 0 ? SLM_Q5_K : SLM_IQ4_XS, width);
    default: return 0;
    }
}

/* The relative rms error a type's codes leave on normal values, about. */
static double error_bound(int wt) {
    switch (wt) {
    case SLM_WEIGHTS_Q8_0: return 0.01;
    case SLM_WEIGHTS_Q6_K: return 0.04;
    case SLM_WEIGHTS_Q5_0: case SLM_WEIGHTS_Q5_K_S: case SLM_WEIGHTS_Q5_K_M: return 0.08;
    default: return 0.15; /* 4-bit codes: about 0.1 */
    }
}

static void check_model(const char *path, int dim, int hid, int tied, int variant, int wt) {
    slm_model_file src, m;
    slm_err err = {0};
    if (slm_model_open(&src, path, &err) || slm_model_open(&m, path, &err)) {
        CHECKF(0, "%s: %s", path, err.msg);
        return;
    }
    CHECKF(slm_model_quantize(&m, wt, 2, 0, &err) == SLM_OK, "quantize %s: %s", slm_weight_type_name(wt), err.msg);
    int wrong = 0;
    double worst = 0;
    float *a = malloc((size_t)hid * sizeof *a), *b = malloc((size_t)hid * sizeof *b);
    for (int i = 0; i < m.n_tensors; i++) {
        const slm_tensor *t = &m.tensors[i], *s = slm_model_tensor(&src, t->name);
        const uint32_t want = expected(wt, t->name, t->ne[0], tied, variant);
        if (t->type != want && wrong++ < 4)
            fprintf(stderr, "  %s %s (width %lld): %s, want %s\n", slm_weight_type_name(wt), t->name, (long long)t->ne[0],
                    slm_dtype_name(t->type), slm_dtype_name(want));
        CHECK(s && t->nbytes == slm_row_bytes(t->type, (uint64_t)t->ne[0]) * (uint64_t)t->ne[1]);
        CHECK((const uint8_t *)t->data >= (const uint8_t *)m.map.data &&
              (const uint8_t *)t->data + t->nbytes <= (const uint8_t *)m.map.data + m.map.size);
        if (!s) continue;
        double e = 0, q = 0;
        for (int64_t r = 0; r < t->ne[1]; r++) {
            slm_dequantize_row(s->type, (const uint8_t *)s->data + (uint64_t)r * slm_row_bytes(s->type, (uint64_t)s->ne[0]), a, s->ne[0]);
            slm_dequantize_row(t->type, (const uint8_t *)t->data + (uint64_t)r * slm_row_bytes(t->type, (uint64_t)t->ne[0]), b, t->ne[0]);
            for (int64_t j = 0; j < t->ne[0]; j++) e += ((double)a[j] - b[j]) * ((double)a[j] - b[j]), q += (double)a[j] * a[j];
        }
        worst = fmax(worst, sqrt(e / fmax(q, 1e-30)));
    }
    free(a), free(b);
    CHECKF(wrong == 0, "%s, width %d: %d tensors of the wrong type", slm_weight_type_name(wt), dim, wrong);
    const double bound = error_bound(wt);
    CHECKF(worst < bound, "%s: a tensor's relative rms error %.4f (bound %.2f)", slm_weight_type_name(wt), worst, bound);
    fprintf(stderr, "  %s width %d%s%s%s: types as llama-quantize's, worst relative rms error %.4f\n",
            slm_weight_type_name(wt), dim, tied ? " tied" : "", variant & FUSED_QKV ? " attn_qkv" : "",
            variant & EXPERTS8 ? " 8 experts" : "", worst);
    slm_model_close(&m);
    slm_model_close(&src);
}

static void test_types(void) {
    char p[128], pt[128], po[128], pf[128], pe[128];
    snprintf(p, sizeof p, "%s/f16.gguf", g_dir);
    snprintf(pt, sizeof pt, "%s/f16-tied.gguf", g_dir);
    snprintf(po, sizeof po, "%s/f16-288.gguf", g_dir);
    snprintf(pf, sizeof pf, "%s/f16-qkv.gguf", g_dir);
    snprintf(pe, sizeof pe, "%s/f16-e8.gguf", g_dir);
    if (!write_llama(p, 256, 512, SLM_F16, 0, 11, 0) || !write_llama(pt, 256, 512, SLM_F16, 1, 12, 0) ||
        !write_llama(po, 288, 576, SLM_F16, 0, 13, 0) || !write_llama(pf, 256, 512, SLM_F16, 0, 14, FUSED_QKV) ||
        !write_llama(pe, 256, 256, SLM_F16, 0, 15, EXPERTS8))
        return;
    for (int wt = SLM_WEIGHTS_Q8_0; wt < SLM_WEIGHTS_COUNT; wt++) {
        check_model(p, 256, 512, 0, 0, wt);
        check_model(pt, 256, 512, 1, 0, wt);
        check_model(po, 288, 576, 0, 0, wt);
        check_model(pf, 256, 512, 0, FUSED_QKV, wt);
        check_model(pe, 256, 256, 0, EXPERTS8, wt);
    }
}

/* The model at p quantized as each of wts[0 .. n_wt) (repacked, compiled,
 * run) against the reference forward pass over its weights, on every
 * kernel set this CPU has. */
static void forward_vs_ref(const char *p, const int *wts, int n_wt) {
    enum { N = 12, MPL = 8 };
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = (i * 37 + 5) % VOCAB;
    static const char *const sets[] = {"scalar", "avx2", "avx512"};
    for (int k = 0; k < 3 * n_wt; k++) {
        const int wt = wts[k % n_wt];
        if (!slm_kernels_select(sets[k / n_wt])) continue; /* not on this CPU */
        rig r;
        memset(&r, 0, sizeof r);
        slm_err err = {0};
        const slm_compile_options o = rig_opts(MPL, N);
        if (slm_model_open(&r.m, p, &err) || slm_model_quantize(&r.m, wt, 2, 0, &err) || slm_model_repack(&r.m, &err) ||
            slm_compile(&r.c, &r.m, &o, &err) || slm_rt_init(&r.rt, &r.c, r.m.map.data, 1, &err)) {
            CHECKF(0, "%s: %s", slm_weight_type_name(wt), err.msg);
            slm_compiled_free(&r.c);
            slm_model_close(&r.m);
            continue;
        }
        r.ok = 1;
        float *ref = malloc(sizeof(float) * N * VOCAB);
        double worst = 0;
        CHECK(ref_forward(&r.m, ids, N, ref));
        CHECK(slm_rt_prefill(&r.rt, ids, MPL, &err) == SLM_OK);
        for (int pos = MPL - 1; pos < N; pos++) {
            if (pos >= MPL) CHECK(slm_rt_decode(&r.rt, ids[pos], &err) == SLM_OK);
            double d = 0, s = 1e-6;
            for (int i = 0; i < VOCAB; i++) {
                d = fmax(d, fabs((double)r.rt.logits[i] - ref[pos * VOCAB + i]));
                s = fmax(s, fabs(ref[pos * VOCAB + i]));
            }
            worst = fmax(worst, isnan(r.rt.logits[0]) ? INFINITY : d / s);
        }
        /* scalar: float dots, the summation order only; SIMD: int8 activations (as test_dtype_quants) */
        const double tol = k < n_wt ? 1e-4 : 5e-2;
        fprintf(stderr, "  %-6s %-6s logits against the reference, worst relative error %.2e\n", sets[k / n_wt],
                slm_weight_type_name(wt), worst);
        CHECKF(worst < tol, "%s %s: logits off the reference by %.3e", sets[k / n_wt], slm_weight_type_name(wt), worst);
        free(ref);
        rig_close(&r);
    }
    slm_kernels_select(NULL);
}

/* Every file type at width 256; at 288 (FFN 576) the K-quant types again,
 * with their 32-block fallbacks (Q5_0, Q5_1, Q8_0) in the kernels. */
static void test_forward(void) {
    char p[128];
    int all[SLM_WEIGHTS_COUNT - 1];
    for (int i = 0; i < SLM_WEIGHTS_COUNT - 1; i++) all[i] = SLM_WEIGHTS_AS_IS + 1 + i;
    snprintf(p, sizeof p, "%s/f16.gguf", g_dir);
    forward_vs_ref(p, all, SLM_WEIGHTS_COUNT - 1);
    static const int k_types[] = {SLM_WEIGHTS_Q4_K_S, SLM_WEIGHTS_Q5_K_M, SLM_WEIGHTS_Q6_K};
    snprintf(p, sizeof p, "%s/f16-288.gguf", g_dir);
    forward_vs_ref(p, k_types, 3);
}

/* A Hugging Face folder (llama, BF16, two shards: the loader's reserved
 * range): the same types per tensor, and its logits against the reference;
 * phi3's (fused qkv_proj and gate_up_proj, split at load): its Q/K/V as
 * one attn_qkv. */
static void hf_folder(int phi3) {
    char dir[128], path[200];
    snprintf(dir, sizeof dir, "%s/hf", g_dir);
    mkdir(dir, 0755);
    enum { D = 256, F = 512 };
    const int kvd = D / HEADS * KVH;
    char buf[1024];
    const int n = snprintf(buf, sizeof buf,
                           "{\"architectures\": [\"%s\"], \"model_type\": \"%s\", \"hidden_size\": %d, "
                           "\"intermediate_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d, "
                           "\"num_key_value_heads\": %d, \"vocab_size\": %d, \"max_position_embeddings\": 64, "
                           "\"rope_theta\": 10000.0, \"rms_norm_eps\": 1e-05, \"hidden_act\": \"silu\", "
                           "\"torch_dtype\": \"bfloat16\", \"tie_word_embeddings\": false}\n",
                           phi3 ? "Phi3ForCausalLM" : "LlamaForCausalLM", phi3 ? "phi3" : "llama", D, F, LAYERS, HEADS, KVH,
                           VOCAB);
    snprintf(path, sizeof path, "%s/config.json", dir);
    CHECK(t_write_file(path, buf, (size_t)n));
    static weights w;
    g_rng = 31;
    const float sd = 1.0f / sqrtf((float)D);
    add_w(&w, "model.embed_tokens.weight", "BF16", VOCAB, D, 1.0f, 0.0f);
    for (int l = 0; l < LAYERS; l++) {
        char nm[96];
#define W(x, dt, r, c, sc, b) (snprintf(nm, sizeof nm, "model.layers.%d." x, l), add_w(&w, nm, dt, r, c, sc, b))
        W("input_layernorm.weight", "BF16", 0, D, 0.1f, 1.0f);
        if (phi3) W("self_attn.qkv_proj.weight", "BF16", D + 2 * kvd, D, sd, 0.0f);
        else {
            W("self_attn.q_proj.weight", "BF16", D, D, sd, 0.0f);
            W("self_attn.k_proj.weight", "BF16", kvd, D, sd, 0.0f);
            W("self_attn.v_proj.weight", "BF16", kvd, D, sd, 0.0f);
        }
        W("self_attn.o_proj.weight", "BF16", D, D, sd, 0.0f);
        W("post_attention_layernorm.weight", "BF16", 0, D, 0.1f, 1.0f);
        if (phi3) W("mlp.gate_up_proj.weight", "BF16", 2 * F, D, sd, 0.0f);
        else {
            W("mlp.gate_proj.weight", "BF16", F, D, sd, 0.0f);
            W("mlp.up_proj.weight", "BF16", F, D, sd, 0.0f);
        }
        W("mlp.down_proj.weight", "BF16", D, F, 1.0f / sqrtf((float)F), 0.0f);
#undef W
    }
    add_w(&w, "model.norm.weight", "BF16", 0, D, 0.1f, 1.0f);
    add_w(&w, "lm_head.weight", "BF16", VOCAB, D, 2.0f * sd, 0.0f);
    CHECK(st_write_weights(dir, w.it, w.n, 2, 0));
    free_weights(&w);
    for (int wt = SLM_WEIGHTS_Q4_K_M; wt <= SLM_WEIGHTS_Q4_K_S; wt++) check_model(dir, D, F, 0, phi3 ? FUSED_QKV : 0, wt);
    static const int wts[] = {SLM_WEIGHTS_Q8_0, SLM_WEIGHTS_Q4_0, SLM_WEIGHTS_Q4_K_M};
    if (phi3) forward_vs_ref(dir, wts + 2, 1);
    else forward_vs_ref(dir, wts, 3);
    st_rm_dir(dir);
}

static void test_hf_folder(void) {
    hf_folder(0);
    hf_folder(1);
}

/* stories260K (llama2.c, f32, width 64, FFN 172, tied, 5 layers):
 * llama-quantize's Q4_K_M of its GGUF has Q5_0 for the K-quants of width
 * 64, Q8_0 for the tied embedding and layers 2 and 4's attn_v (Q6_K's
 * fallback) and F16 for ffn_down (172 fits no block): 28 Q5_0, 3 Q8_0, 5
 * F16, the same here. The other file types by the same rules: the
 * embedding Q8_0 (Q6_K's fallback, or q8_0's own), ffn_down F16, attn_v as
 * the layer rules pick (q4_k_s: Q5_K in layers 0 to 3), each K-quant its
 * 32-block fallback. */
static uint32_t stories_type(int wt, const char *name) {
    if (strstr(name, "ffn_down")) return SLM_F16;
    if (!strcmp(name, "token_embd.weight")) return SLM_Q8_0;
    int l = -1;
    sscanf(name, "blk.%d.", &l);
    const int v = strstr(name, "attn_v.") != NULL, more = v && (l == 2 || l == 4);
    switch (wt) {
    case SLM_WEIGHTS_Q8_0: case SLM_WEIGHTS_Q6_K: return SLM_Q8_0;
    case SLM_WEIGHTS_Q4_0: return SLM_Q4_0;
    case SLM_WEIGHTS_Q5_0: return SLM_Q5_0;
    case SLM_WEIGHTS_Q4_K_M: return more ? SLM_Q8_0 : SLM_Q5_0;
    case SLM_WEIGHTS_Q5_K_M: return more ? SLM_Q8_0 : SLM_Q5_1;
    case SLM_WEIGHTS_Q4_K_S: return v && l < 4 ? SLM_Q5_1 : SLM_Q5_0;
    case SLM_WEIGHTS_Q5_K_S: return SLM_Q5_1;
    case SLM_WEIGHTS_IQ4_NL: case SLM_WEIGHTS_IQ4_XS: return SLM_IQ4_NL; /* IQ4_XS's fallback */
    default: return 0;
    }
}

static void test_fallbacks(void) {
    for (int wt = SLM_WEIGHTS_Q8_0; wt < SLM_WEIGHTS_COUNT; wt++) {
        slm_model_file m;
        slm_err err = {0};
        if (slm_model_open(&m, M("stories260K.bin"), &err)) {
            CHECKF(0, "%s", err.msg);
            return;
        }
        CHECKF(slm_model_quantize(&m, wt, 1, 0, &err) == SLM_OK, "%s", err.msg);
        int wrong = 0, n = 0;
        for (int i = 0; i < m.n_tensors; i++) {
            const slm_tensor *t = &m.tensors[i];
            const uint32_t want = t->n_dims < 2 ? SLM_F32 : stories_type(wt, t->name);
            n++;
            if (t->type != want && wrong++ < 3)
                fprintf(stderr, "  %s %s: %s, want %s\n", slm_weight_type_name(wt), t->name, slm_dtype_name(t->type),
                        slm_dtype_name(want));
        }
        CHECKF(wrong == 0 && n > 20, "%s: %d of %d tensors of the wrong type", slm_weight_type_name(wt), wrong, n);
        slm_model_close(&m);
    }
}

/* The rules one call at a time: 8 experts (attn_v / attn_qkv and attn_k
 * Q8_0 under every file type, attn_output Q5_K under q4_k_s, q4_k_m,
 * iq4_nl and iq4_xs), a 70B model (attn_v Q4_K -> Q5_K), 4 or more query
 * heads a KV head (iq4_*: attn_v Q5_K), the fallbacks, F16 where no block
 * fits, and which models get which flags. */
static void test_rules(void) {
    const unsigned e8 = SLM_QMODEL_8_EXPERTS, big = SLM_QMODEL_70B, g4 = SLM_QMODEL_GQA4;
    for (int wt = SLM_WEIGHTS_Q8_0; wt < SLM_WEIGHTS_COUNT; wt++) {
        const char *nm = slm_weight_type_name(wt);
        const int iq4 = wt == SLM_WEIGHTS_IQ4_NL || wt == SLM_WEIGHTS_IQ4_XS;
        const int q4k = wt == SLM_WEIGHTS_Q4_K_S || wt == SLM_WEIGHTS_Q4_K_M;
        const uint32_t plain = slm_quant_layer_type(wt, SLM_QROLE_OTHER, 5, 32, 4096, 0);
        CHECKF(slm_quant_layer_type(wt, SLM_QROLE_ATTN_V, 5, 32, 4096, e8) == SLM_Q8_0, "%s: 8 experts' attn_v", nm);
        CHECKF(slm_quant_layer_type(wt, SLM_QROLE_ATTN_K, 5, 32, 4096, e8) == SLM_Q8_0, "%s: 8 experts' attn_k", nm);
        CHECKF(slm_quant_layer_type(wt, SLM_QROLE_ATTN_K, 5, 32, 4096, 0) == plain, "%s: attn_k", nm);
        CHECKF(slm_quant_layer_type(wt, SLM_QROLE_ATTN_OUTPUT, 5, 32, 4096, e8) == (q4k || iq4 ? SLM_Q5_K : plain),
               "%s: 8 experts' attn_output", nm);
        CHECKF(slm_quant_layer_type(wt, SLM_QROLE_ATTN_V, 5, 32, 4096, g4) == (iq4 ? SLM_Q5_K : plain), "%s: GQA 4 attn_v", nm);
        CHECKF(slm_quant_layer_type(wt, SLM_QROLE_ATTN_V, 5, 32, 4096, g4 | e8) == SLM_Q8_0, "%s: 8 experts' GQA attn_v", nm);
        CHECKF(slm_quant_layer_type(wt, SLM_QROLE_OTHER, 5, 32, 4096, e8 | big) == plain, "%s: attn_q", nm);
        /* layer 5 of 32: not one use_more_bits picks (4 <= 5 < 28, (5 - 4) % 3 != 2) */
        CHECKF(slm_quant_layer_type(wt, SLM_QROLE_ATTN_V, 5, 32, 4096, big) == (q4k ? SLM_Q5_K : plain), "%s: 70B attn_v", nm);
        CHECKF(slm_quant_layer_type(wt, SLM_QROLE_OTHER, 0, 1, 172, 0) == SLM_F16, "%s: width 172", nm);
    }
    CHECK(slm_quant_layer_type(SLM_WEIGHTS_Q4_K_M, SLM_QROLE_ATTN_V, 6, 32, 4096, 0) == SLM_Q6_K); /* (6 - 4) % 3 == 2 */
    CHECK(slm_quant_layer_type(SLM_WEIGHTS_Q5_K_M, SLM_QROLE_FFN_DOWN, 28, 32, 4096, 0) == SLM_Q6_K); /* the last eighth */
    CHECK(slm_quant_layer_type(SLM_WEIGHTS_Q5_K_M, SLM_QROLE_FFN_DOWN, 5, 32, 4096, 0) == SLM_Q5_K);
    CHECK(slm_quant_layer_type(SLM_WEIGHTS_Q5_K_M, SLM_QROLE_FFN_DOWN, 28, 32, 4000, 0) == SLM_Q8_0);
    CHECK(slm_quant_layer_type(SLM_WEIGHTS_Q5_K_S, SLM_QROLE_OTHER, 0, 32, 4000, 0) == SLM_Q5_1);
    CHECK(slm_quant_layer_type(SLM_WEIGHTS_Q4_K_S, SLM_QROLE_ATTN_V, 3, 32, 4096, 0) == SLM_Q5_K);
    CHECK(slm_quant_layer_type(SLM_WEIGHTS_Q4_K_S, SLM_QROLE_ATTN_V, 4, 32, 4096, 0) == SLM_Q4_K);
    CHECK(slm_quant_layer_type(SLM_WEIGHTS_Q4_K_S, SLM_QROLE_FFN_DOWN, 3, 32, 4096, 0) == SLM_Q5_K);
    CHECK(slm_quant_layer_type(SLM_WEIGHTS_Q4_K_S, SLM_QROLE_FFN_DOWN, 4, 32, 4096, 0) == SLM_Q4_K);
    CHECK(slm_quant_layer_type(SLM_WEIGHTS_IQ4_XS, SLM_QROLE_FFN_DOWN, 3, 32, 4096, 0) == SLM_Q5_K);
    CHECK(slm_quant_layer_type(SLM_WEIGHTS_IQ4_NL, SLM_QROLE_FFN_DOWN, 4, 32, 4096, 0) == SLM_IQ4_NL);
    CHECK(slm_quant_layer_type(SLM_WEIGHTS_IQ4_XS, SLM_QROLE_OTHER, 4, 32, 4000, 0) == SLM_IQ4_NL);
    CHECK(slm_quant_layer_type(SLM_WEIGHTS_IQ4_XS, SLM_QROLE_ATTN_V, 0, 32, 4000, g4) == SLM_Q5_1);
    CHECK(slm_quant_output_type(SLM_WEIGHTS_IQ4_XS, 4096) == SLM_Q6_K && slm_quant_output_type(SLM_WEIGHTS_IQ4_XS, 4000) ==
          SLM_Q8_0 && slm_quant_output_type(SLM_WEIGHTS_IQ4_NL, 4000) == SLM_Q8_0);
    CHECK(slm_quant_layer_type(SLM_WEIGHTS_AS_IS, SLM_QROLE_OTHER, 0, 1, 4096, 0) == 0);
    CHECK(slm_quant_output_type(SLM_WEIGHTS_Q8_0, 4096) == SLM_Q8_0 && slm_quant_output_type(SLM_WEIGHTS_Q5_0, 4096) == SLM_Q6_K &&
          slm_quant_output_type(SLM_WEIGHTS_Q6_K, 4000) == SLM_Q8_0 && slm_quant_output_type(SLM_WEIGHTS_Q5_K_S, 4000) == SLM_Q8_0 &&
          slm_quant_output_type(SLM_WEIGHTS_Q5_0, 100) == SLM_F16);
    CHECK(slm_quant_model_flags("llama", 80, 64, 8, 0) == (big | g4) && slm_quant_model_flags("llama", 80, 64, 64, 0) == 0 &&
          slm_quant_model_flags("qwen2", 80, 64, 8, 0) == (big | g4) && slm_quant_model_flags("llama", 32, 32, 8, 8) == (e8 | g4) &&
          slm_quant_model_flags("qwen3", 80, 64, 8, 0) == g4 && slm_quant_model_flags("llama", 32, 32, 16, 0) == 0 &&
          slm_quant_model_flags("llama", 32, 9, 3, 0) == 0 && slm_quant_model_flags("llama", 32, 8, 0, 0) == 0);
}

/* ---- the engine ------------------------------------------------------------------ */

static int logits_of(slm_engine *e, float *out, int V) {
    static const int32_t ids[] = {1, 403, 407, 261, 378, 426, 376};
    const float *lg = NULL;
    if (slm_prefill(e, ids, 7, &lg) || !lg) return 0;
    memcpy(out, lg, sizeof(float) * (size_t)V);
    if (slm_decode(e, 300, &lg) || !lg) return 0;
    memcpy(out + V, lg, sizeof(float) * (size_t)V);
    return 1;
}

static void test_engine(void) {
    slm_options o = slm_default_options();
    o.tokenizer_path = M("tok512.bin");
    o.max_prompt_len = 16;
    o.n_threads = 1;
    o.kv_type = SLM_KV_F32;
    slm_engine *plain = t_load(M("stories260K.bin"), &o);
    if (!plain) return;
    slm_info in;
    slm_get_info(plain, &in);
    const int V = in.vocab_size;
    float *a = malloc(sizeof(float) * 2 * (size_t)V), *b = malloc(sizeof(float) * 2 * (size_t)V),
          *c = malloc(sizeof(float) * 2 * (size_t)V);
    CHECK(logits_of(plain, a, V));
    const size_t plain_bytes = in.weight_bytes;
    slm_free(plain);
    for (int wt = SLM_WEIGHTS_Q8_0; wt < SLM_WEIGHTS_COUNT; wt++) {
        o.weight_type = wt;
        slm_engine *e = t_load(M("stories260K.bin"), &o);
        if (!e) continue;
        slm_get_info(e, &in);
        CHECKF(in.weight_bytes < plain_bytes / 2, "%s: %zu weight bytes (f32: %zu)", slm_weight_type_name(wt), in.weight_bytes,
               plain_bytes);
        CHECK(logits_of(e, b, V));
        double d = 0, s = 0;
        for (int i = 0; i < 2 * V; i++) d = fmax(d, fabs((double)a[i] - b[i])), s = fmax(s, fabs((double)a[i]));
        CHECKF(d > 0 && d < 0.2 * s, "%s: logits %.3g from the f32 model's (largest %.3g)", slm_weight_type_name(wt), d, s);
        char blob[128];
        snprintf(blob, sizeof blob, "%s/q.slmblob", g_dir);
        CHECKF(slm_save_blob(e, blob) == SLM_OK, "save: %s", slm_last_error(e));
        slm_free(e);
        slm_options ob = slm_default_options();
        ob.n_threads = 1;
        slm_engine *f = t_load(blob, &ob);
        if (f) {
            CHECK(logits_of(f, c, V));
            CHECKF(!memcmp(b, c, sizeof(float) * 2 * (size_t)V), "%s: the blob's logits differ from the source's",
                   slm_weight_type_name(wt));
            slm_free(f);
        }
        /* the option on a blob: refused, naming it */
        ob.weight_type = wt;
        slm_engine *g = NULL;
        CHECK(slm_load(&g, blob, &ob) != SLM_OK && strstr(slm_last_error(g), "--weight-type") &&
              strstr(slm_last_error(g), "holds the weights it was compiled with"));
        slm_free(g);
        unlink(blob);
    }
    free(a), free(b), free(c);
}

static void test_refusals(void) {
    char p[128];
    snprintf(p, sizeof p, "%s/q8.gguf", g_dir);
    if (!write_llama(p, 256, 512, SLM_Q8_0, 0, 21, 0)) return;
    slm_model_file m;
    slm_err err = {0};
    CHECK(slm_model_open(&m, p, &err) == SLM_OK);
    const void *before = m.map.data;
    CHECK(slm_model_quantize(&m, SLM_WEIGHTS_Q4_K_M, 1, 0, &err) == SLM_ERR_ARG);
    CHECKF(strstr(err.msg, "already quantized") && strstr(err.msg, "q8.gguf") && strstr(err.msg, "token_embd.weight"),
           "%s", err.msg);
    CHECK(m.map.data == before && m.tensors[0].type == SLM_Q8_0); /* unchanged */
    CHECK(slm_model_quantize(&m, SLM_WEIGHTS_COUNT, 1, 0, &err) == SLM_ERR_ARG && strstr(err.msg, "weight_type 11") &&
          strstr(err.msg, "iq4_xs"));
    CHECK(slm_model_quantize(&m, -1, 1, 0, &err) == SLM_ERR_ARG && strstr(err.msg, "weight_type -1"));
    slm_model_close(&m);
    slm_options o = slm_default_options();
    o.tokenizer_path = M("tok512.bin");
    o.weight_type = 42;
    slm_engine *e = NULL;
    CHECK(slm_load(&e, M("stories260K.bin"), &o) != SLM_OK && strstr(slm_last_error(e), "weight_type 42"));
    slm_free(e);
    /* every name gives its type and back; others (llama-quantize's names not taken, K-quants without a mix) are refused */
    static const char *const names[] = {"q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k", "q4_k_s", "q5_k_s", "q5_0", "iq4_nl",
                                        "iq4_xs"};
    for (int k = 0; k < 10; k++) {
        const int wt = slm_weight_type_parse(names[k]);
        CHECKF(wt == SLM_WEIGHTS_Q8_0 + k && !strcmp(slm_weight_type_name(wt), names[k]), "%s: %d", names[k], wt);
    }
    CHECK(slm_weight_type_parse("Q4_K_M") == SLM_WEIGHTS_Q4_K_M && slm_weight_type_parse("Q8_0") == SLM_WEIGHTS_Q8_0 &&
          slm_weight_type_parse("q5_K_s") == SLM_WEIGHTS_Q5_K_S); /* llama-quantize's spelling too */
    static const char *const bad[] = {"q4_k", "q5_k", "q5_1", "q4_1", "q3_k_m", "Q4_K", "q6_k_m", "", "as is"};
    for (int k = 0; k < 9; k++) CHECKF(slm_weight_type_parse(bad[k]) < 0, "'%s' taken", bad[k]);
    CHECK(slm_weight_type_parse(NULL) < 0);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/slm_quant_XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    T_RUN(test_fit_error);
    T_RUN(test_llama_quantize_bytes);
    T_RUN(test_types);
    T_RUN(test_forward);
    T_RUN(test_hf_folder);
    T_RUN(test_fallbacks);
    T_RUN(test_rules);
    T_RUN(test_engine);
    T_RUN(test_refusals);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    T_DONE();
}
