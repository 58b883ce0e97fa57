/* Kernels: block layouts, quantize/dequantize round trips, and every
 * weight type x every kernel set on this CPU against a double-precision
 * reference over a matrix of shapes, rows and column tiles. */
#include <math.h>
#include <stdint.h>

#include "common/cpu.h"
#include "common/dtype.h"
#include "compiler/compiler.h"
#include "device/kernels.h"
#include "quants_rtn.h"
#include "t.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static double urand(void) { /* [0, 1) */
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) / 9007199254740992.0;
}
static float nrand(void) { /* roughly normal: sum of 4 uniforms */
    return (float)((urand() + urand() + urand() + urand() - 2.0) * 1.7320508);
}

static const uint32_t k_types[] = {SLM_F32, SLM_F16, SLM_BF16, SLM_Q8_0, SLM_Q4_0, SLM_Q4_1, SLM_Q4_K, SLM_Q5_K, SLM_Q6_K};
#define NTYPES (int)(sizeof k_types / sizeof k_types[0])
static const char *k_sets[] = {"scalar", "avx2", "avx512"};

/* ---- hand-built blocks -------------------------------------------------- */

static void test_blocks_q4_0_q4_1_q8_0(void) {
    slm_block_q4_0 b4;
    b4.d = slm_f32_to_f16(0.5f);
    for (int j = 0; j < 16; j++) b4.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    float y[32];
    CHECK(slm_dequantize_row(SLM_Q4_0, &b4, y, 32));
    for (int j = 0; j < 16; j++) {
        CHECKF(y[j] == 0.5f * (j - 8), "q4_0 y[%d]=%g", j, y[j]);
        CHECKF(y[j + 16] == 0.5f * (7 - j), "q4_0 y[%d]=%g", j + 16, y[j + 16]);
    }
    slm_block_q4_1 b41;
    b41.d = slm_f32_to_f16(0.25f);
    b41.m = slm_f32_to_f16(-1.0f);
    for (int j = 0; j < 16; j++) b41.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    CHECK(slm_dequantize_row(SLM_Q4_1, &b41, y, 32));
    for (int j = 0; j < 16; j++) {
        CHECK(y[j] == 0.25f * j - 1.0f);
        CHECK(y[j + 16] == 0.25f * (15 - j) - 1.0f);
    }
    slm_block_q8_0 b8;
    b8.d = slm_f32_to_f16(2.0f);
    for (int j = 0; j < 32; j++) b8.qs[j] = (int8_t)(j * 8 - 128);
    CHECK(slm_dequantize_row(SLM_Q8_0, &b8, y, 32));
    for (int j = 0; j < 32; j++) CHECK(y[j] == 2.0f * (j * 8 - 128));
    /* bf16: exact upper halves, round to nearest even */
    CHECK(slm_bf16_to_f32(0x3f80) == 1.0f);
    CHECK(slm_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(slm_f32_to_bf16(1.00390625f) == 0x3f80); /* halfway: to even */
    CHECK(slm_f32_to_bf16(1.01171875f) == 0x3f82); /* halfway: to even (up) */
    uint16_t bf[3] = {0x4040, 0xc000, 0x0000};
    CHECK(slm_dequantize_row(SLM_BF16, bf, y, 3));
    CHECK(y[0] == 3.0f && y[1] == -2.0f && y[2] == 0.0f);
}

/* Q4_K / Q5_K scales per the GGML spec: bytes 0-3 sc[0..3] (+ high bits of
 * sc[4..7] in bits 6-7), bytes 4-7 mn[0..3] (+ high bits of mn[4..7]),
 * bytes 8-11 low nibbles sc[4..7] | mn[4..7] << 4. */
static const uint8_t k_sc[8] = {1, 2, 3, 4, 5, 40, 7, 63}, k_mn[8] = {0, 1, 2, 3, 17, 5, 6, 33};
static void pack_k_scales(uint8_t s[12]) {
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)(k_sc[j] | ((k_sc[j + 4] >> 4) << 6));
        s[j + 4] = (uint8_t)(k_mn[j] | ((k_mn[j + 4] >> 4) << 6));
        s[j + 8] = (uint8_t)((k_sc[j + 4] & 0xF) | ((k_mn[j + 4] & 0xF) << 4));
    }
}

static void test_blocks_k(void) {
    float y[256];
    /* Q4_K: element 64c + l has code qs[32c + l] & 15, element 64c + 32 + l code qs[32c + l] >> 4 */
    slm_block_q4_K k4;
    k4.d = slm_f32_to_f16(0.5f);
    k4.dmin = slm_f32_to_f16(0.25f);
    pack_k_scales(k4.scales);
    for (int i = 0; i < 128; i++) k4.qs[i] = (uint8_t)((i % 16) | ((15 - i % 16) << 4));
    CHECK(slm_dequantize_row(SLM_Q4_K, &k4, y, 256));
    for (int e = 0; e < 256; e++) {
        int s = e / 32, c = e / 64, l = e % 32, hi = (e % 64) >= 32;
        int q = hi ? 15 - (32 * c + l) % 16 : (32 * c + l) % 16;
        float want = 0.5f * k_sc[s] * q - 0.25f * k_mn[s];
        CHECKF(y[e] == want, "q4_K y[%d]=%g want %g", e, y[e], want);
    }
    /* Q5_K: plus bit (2c + hi) of qh[l] as bit 4 */
    slm_block_q5_K k5;
    k5.d = slm_f32_to_f16(0.5f);
    k5.dmin = slm_f32_to_f16(0.25f);
    pack_k_scales(k5.scales);
    for (int i = 0; i < 128; i++) k5.qs[i] = (uint8_t)((i % 16) | ((15 - i % 16) << 4));
    for (int l = 0; l < 32; l++) k5.qh[l] = (uint8_t)(l * 37 + 11);
    CHECK(slm_dequantize_row(SLM_Q5_K, &k5, y, 256));
    for (int e = 0; e < 256; e++) {
        int s = e / 32, c = e / 64, l = e % 32, hi = (e % 64) >= 32;
        int q = hi ? 15 - (32 * c + l) % 16 : (32 * c + l) % 16;
        q += ((k5.qh[l] >> (2 * c + hi)) & 1) * 16;
        float want = 0.5f * k_sc[s] * q - 0.25f * k_mn[s];
        CHECKF(y[e] == want, "q5_K y[%d]=%g want %g", e, y[e], want);
    }
    /* Q6_K: code of element 128h + 32r + l: low nibble of ql[64h + 32(r&1) + l]
     * (shift 4 for r >= 2), high 2 bits of qh[32h + l] at shift 2r; scale sc[e / 16] */
    slm_block_q6_K k6;
    k6.d = slm_f32_to_f16(0.125f);
    for (int i = 0; i < 16; i++) k6.scales[i] = (int8_t)(i * 9 - 70);
    for (int i = 0; i < 128; i++) k6.ql[i] = (uint8_t)(i * 29 + 3);
    for (int i = 0; i < 64; i++) k6.qh[i] = (uint8_t)(i * 53 + 7);
    CHECK(slm_dequantize_row(SLM_Q6_K, &k6, y, 256));
    for (int e = 0; e < 256; e++) {
        int h = e / 128, r = (e % 128) / 32, l = e % 32;
        int lo = (k6.ql[64 * h + 32 * (r & 1) + l] >> (r >= 2 ? 4 : 0)) & 0xF;
        int hb = (k6.qh[32 * h + l] >> (2 * r)) & 3;
        float want = 0.125f * k6.scales[e / 16] * ((lo | (hb << 4)) - 32);
        CHECKF(y[e] == want, "q6_K y[%d]=%g want %g", e, y[e], want);
    }
}

/* slm_qblock_i8 (the SIMD packers' view) agrees with dequantize. */
static void test_qblock_i8(void) {
    for (int ti = 3; ti < NTYPES; ti++) {
        const uint32_t t = k_types[ti];
        const int k = 512;
        float x[512], y[512];
        uint8_t buf[2048];
        for (int i = 0; i < k; i++) x[i] = nrand() + (i % 64 == 5 ? 4.0f : 0.0f);
        CHECK(slm_quantize_row(t, x, buf, k));
        CHECK(slm_dequantize_row(t, buf, y, k));
        int bad = 0;
        for (int b = 0; b < k / 32; b++) {
            int8_t q[32];
            float d[2], m;
            slm_qblock_i8(t, buf, b, q, d, &m);
            for (int e = 0; e < 32; e++) bad += fabsf(d[e / 16] * q[e] + m - y[32 * b + e]) > 1e-6f * (1.0f + fabsf(y[32 * b + e]));
        }
        CHECKF(bad == 0, "%s: %d elements differ", slm_dtype_name(t), bad);
    }
}

/* Round trips: max error per block against the block's (or super-block's)
 * largest magnitude, and the RMS error against the data's RMS. */
static void test_round_trip(void) {
    /* max |err| / amax of the scaling block, rms(err) / rms(x); the data mixes
     * blocks of scale 1 and 0.01 with outliers of 5, so the RMS ratios are
     * several times those of plain normal data */
    static const struct { uint32_t t; int blk; double maxrel, rmsrel; } k_rt[] = {
        {SLM_F16, 32, 1e-3, 1e-3},      {SLM_BF16, 32, 4e-3, 4e-3},   {SLM_Q8_0, 32, 0.0045, 0.01},
        {SLM_Q4_0, 32, 0.126, 0.13},    {SLM_Q4_1, 32, 0.07, 0.1},    {SLM_Q4_K, 256, 0.065, 0.1},
        {SLM_Q5_K, 256, 0.032, 0.055},  {SLM_Q6_K, 256, 0.021, 0.03},
    };
    const int n = 4096;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    uint8_t *q = malloc((size_t)n * 4);
    for (size_t ci = 0; ci < sizeof k_rt / sizeof k_rt[0]; ci++) {
        for (int i = 0; i < n; i++) x[i] = nrand() * (i % 512 < 256 ? 1.0f : 0.01f) + (i % 97 == 0 ? 5.0f : 0.0f);
        CHECK(slm_quantize_row(k_rt[ci].t, x, q, n));
        CHECK(slm_dequantize_row(k_rt[ci].t, q, y, n));
        double worst = 0, se = 0, sx = 0;
        for (int b = 0; b < n / k_rt[ci].blk; b++) {
            double amax = 0;
            for (int e = 0; e < k_rt[ci].blk; e++) amax = fmax(amax, fabs(x[b * k_rt[ci].blk + e]));
            for (int e = 0; e < k_rt[ci].blk; e++) {
                const int i = b * k_rt[ci].blk + e;
                double err = fabs((double)y[i] - x[i]);
                if (amax > 0) worst = fmax(worst, err / amax);
                se += err * err;
                sx += (double)x[i] * x[i];
            }
        }
        const double rms = sqrt(se / sx);
        CHECKF(worst <= k_rt[ci].maxrel && rms <= k_rt[ci].rmsrel, "%s: max rel %.4g (bound %.4g), rms rel %.4g (bound %.4g)",
               slm_dtype_name(k_rt[ci].t), worst, k_rt[ci].maxrel, rms, k_rt[ci].rmsrel);
        fprintf(stderr, "  %-5s max err/amax %.4f  rms err/rms %.4f\n", slm_dtype_name(k_rt[ci].t), worst, rms);
    }
    /* zero blocks stay zero */
    memset(x, 0, n * sizeof *x);
    for (size_t ci = 0; ci < sizeof k_rt / sizeof k_rt[0]; ci++) {
        CHECK(slm_quantize_row(k_rt[ci].t, x, q, 512));
        CHECK(slm_dequantize_row(k_rt[ci].t, q, y, 512));
        int nz = 0;
        for (int i = 0; i < 512; i++) nz += y[i] != 0.0f;
        CHECKF(nz == 0, "%s: zero row dequantizes to %d non-zeros", slm_dtype_name(k_rt[ci].t), nz);
    }
    free(x);
    free(y);
    free(q);
}

/* ---- matmul against the double reference ---------------------------------- */

typedef struct mcase {
    uint32_t t;
    int k, n, rows;
    uint8_t *w;   /* quantized [n][wrow] */
    double *wd;   /* dequantized [n][k] */
    float *x;     /* [rows][ldx] */
    int ldx;
    double *ref;  /* [rows][n] */
    double *bound_f, *bound_q; /* per output: float and int8-activation error bounds */
} mcase;

/* The reference and the error bounds of a case whose w / wd / x are set. */
static void case_ref(mcase *c) {
    const int k = c->k, n = c->n;
    for (int i = 0; i < c->rows; i++) {
        const float *x = c->x + (size_t)i * c->ldx;
        for (int j = 0; j < n; j++) {
            const double *w = c->wd + (size_t)j * k;
            double s = 0, sa = 0, sq = 0;
            for (int e = 0; e < k; e++) {
                s += w[e] * x[e];
                sa += fabs(w[e] * x[e]);
            }
            /* int8 activations: |x - dx * round(x / dx)| <= dx / 2, dx = amax / 127 per block of 32 */
            for (int b = 0; b < k / 32 && k % 32 == 0; b++) {
                double amax = 0, wa = 0;
                for (int e = 32 * b; e < 32 * b + 32; e++) amax = fmax(amax, fabs(x[e])), wa += fabs(w[e]);
                sq += amax / 127.0 / 2.0 * wa;
            }
            c->ref[(size_t)i * n + j] = s;
            c->bound_f[(size_t)i * n + j] = 1e-5 * sa + 1e-30;
            c->bound_q[(size_t)i * n + j] = sq * 1.0001 + 2e-5 * sa + 1e-30;
        }
    }
}

/* extreme != 0: every 16 elements of a weight row are -1 then 15 x 0.96875,
 * which every type quantizes to its largest unsigned code (15, 31, 63) but
 * one, and the activations are all +extreme: each int8 product is as large
 * as it can be, so a kernel that lets too many add in 16 bits overflows. */
static void case_make_ex(mcase *c, uint32_t t, int k, int n, int rows, float extreme) {
    c->t = t, c->k = k, c->n = n, c->rows = rows;
    const uint64_t wrow = slm_row_bytes(t, (uint64_t)k);
    c->w = malloc((size_t)wrow * n);
    c->wd = malloc(sizeof(double) * k * n);
    c->ldx = k + 3; /* a row stride that is not the width */
    c->x = malloc(sizeof(float) * (size_t)c->ldx * rows);
    c->ref = malloc(sizeof(double) * rows * n);
    c->bound_f = malloc(sizeof(double) * rows * n);
    c->bound_q = malloc(sizeof(double) * rows * n);
    float *row = malloc(sizeof(float) * k), *deq = malloc(sizeof(float) * k);
    for (int j = 0; j < n; j++) {
        const float scale = 0.02f * (1.0f + (float)(j % 5));
        for (int e = 0; e < k; e++) row[e] = extreme != 0 ? scale * (e % 16 ? 0.96875f : -1.0f) : nrand() * scale;
        rtn_quantize_row(t, row, c->w + (size_t)j * wrow, k); /* slm_quantize_row, or a test quantizer */
        slm_dequantize_row(t, c->w + (size_t)j * wrow, deq, k);
        for (int e = 0; e < k; e++) c->wd[(size_t)j * k + e] = deq[e];
    }
    for (int i = 0; i < rows; i++)
        for (int e = 0; e < k; e++)
            c->x[(size_t)i * c->ldx + e] = extreme != 0 ? extreme : nrand() + (e % 61 == 7 ? 6.0f : 0.0f);
    case_ref(c);
    free(row);
    free(deq);
}

static void case_make(mcase *c, uint32_t t, int k, int n, int rows) { case_make_ex(c, t, k, n, rows, 0); }

static void case_free(mcase *c) {
    free(c->w), free(c->wd), free(c->x), free(c->ref), free(c->bound_f), free(c->bound_q);
}

/* Repack a case's weights in place to the r16 layout (c->t becomes it). */
static void case_repack(mcase *c) {
    uint8_t *tmp = malloc((size_t)slm_row_bytes(c->t, (uint64_t)c->k) * 16);
    slm_repack_r16(c->t, c->w, c->k, c->n, tmp);
    free(tmp);
    c->t |= SLM_R16;
}

static uint8_t *g_scratch;
static size_t g_scratch_cap;

/* Run one column tile [n0, n1) through the active set; returns failures. */
static int case_run(const mcase *c, int n0, int n1, const char *set, double *worst_rel) {
    const int ldy = c->n + 2;
    float *y = malloc(sizeof(float) * (size_t)ldy * c->rows);
    for (int i = 0; i < ldy * c->rows; i++) y[i] = -12345.0f;
    size_t need = slm_matmul_scratch_bytes(c->t, c->k, c->rows);
    if (need > g_scratch_cap) {
        free(g_scratch);
        g_scratch = aligned_alloc(64, (need + 63) & ~(size_t)63);
        g_scratch_cap = need;
    }
    slm_mm mm = {.w = c->w, .wrow = slm_row_bytes(c->t, (uint64_t)c->k), .wtype = c->t, .k = c->k, .n0 = n0, .n1 = n1,
                 .rows = c->rows, .x = c->x, .ldx = (size_t)c->ldx, .y = y, .ldy = (size_t)ldy, .scratch = g_scratch};
    slm_kernels_active()->matmul(&mm);
    const int int8 = strcmp(set, "scalar") != 0 && (slm_qtype_kind(c->t) >= 0 || (slm_is_r16(c->t) && c->t != SLM_F16_R16));
    int fails = 0;
    for (int i = 0; i < c->rows; i++)
        for (int j = 0; j < ldy; j++) {
            const float got = y[(size_t)i * ldy + j];
            if (j < n0 || j >= n1) {
                if (got != -12345.0f) fails++;
                continue;
            }
            const double ref = c->ref[(size_t)i * c->n + j];
            const double bound = int8 ? c->bound_q[(size_t)i * c->n + j] : c->bound_f[(size_t)i * c->n + j];
            const double err = fabs(got - ref);
            if (!(err <= bound)) {
                if (fails < 3)
                    fprintf(stderr, "  %s %s k=%d n=%d rows=%d tile=[%d,%d) y[%d][%d]=%.9g ref=%.9g err=%.3g bound=%.3g\n", set,
                            slm_dtype_name(c->t), c->k, c->n, c->rows, n0, n1, i, j, got, ref, err, bound);
                fails++;
            }
            if (bound > 0 && err / bound > *worst_rel) *worst_rel = err / bound;
        }
    free(y);
    return fails;
}

static int type_k_ok(uint32_t t, int k) {
    const slm_dtype_info *in = slm_dtype_get(t);
    return k % (int)in->block == 0;
}

static void test_matmul_shapes(void) {
    static const int ks[] = {1, 7, 33, 172, 32, 64, 96, 256, 288, 512, 768, 2304};
    static const int ns[] = {1, 3, 16, 17, 64};
    static const int rows_[] = {1, 2, 5, 8, 33};
    for (int si = 0; si < 3; si++) {
        if (!slm_kernels_select(k_sets[si])) {
            fprintf(stderr, "  set %s: not on this CPU, skipped\n", k_sets[si]);
            continue;
        }
        for (int ti = 0; ti < NTYPES; ti++) {
            const uint32_t t = k_types[ti];
            int cases = 0, fails = 0;
            double worst = 0;
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
                if (!type_k_ok(t, ks[ki])) continue;
                for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
                    for (size_t ri = 0; ri < sizeof rows_ / sizeof rows_[0]; ri++) {
                        const int k = ks[ki], n = ns[ni], rows = rows_[ri];
                        if ((size_t)k * n * rows > 3000000) continue; /* keep the largest products out */
                        mcase c;
                        case_make(&c, t, k, n, rows);
                        fails += case_run(&c, 0, n, k_sets[si], &worst);
                        cases++;
                        if (n >= 3) { /* odd column tiles */
                            fails += case_run(&c, 1, n - 1, k_sets[si], &worst);
                            fails += case_run(&c, n / 2 | 1, n, k_sets[si], &worst);
                            cases += 2;
                        }
                        case_free(&c);
                    }
            }
            CHECKF(fails == 0, "%s %s: %d bad outputs", k_sets[si], slm_dtype_name(t), fails);
            fprintf(stderr, "  %-6s %-5s %4d tiles, worst err / bound %.3f\n", k_sets[si], slm_dtype_name(t), cases, worst);
        }
    }
    slm_kernels_select(NULL);
}

/* Big shapes, few rows: the sizes the models use. */
static void test_matmul_large(void) {
    for (int si = 0; si < 3; si++) {
        if (!slm_kernels_select(k_sets[si])) continue;
        for (int ti = 0; ti < NTYPES; ti++) {
            double worst = 0;
            int fails = 0;
            mcase c;
            case_make(&c, k_types[ti], 2304, 64, 33);
            fails += case_run(&c, 0, 64, k_sets[si], &worst);
            fails += case_run(&c, 5, 59, k_sets[si], &worst);
            case_free(&c);
            CHECKF(fails == 0, "%s %s: %d bad outputs", k_sets[si], slm_dtype_name(k_types[ti]), fails);
        }
    }
    slm_kernels_select(NULL);
}

/* Every set picks the same top logit on an LM-head-like product. */
static void test_same_argmax(void) {
    const int k = 768, n = 512;
    for (int ti = 0; ti < NTYPES; ti++) {
        mcase c;
        case_make(&c, k_types[ti], k, n, 1);
        int want = 0;
        for (int j = 1; j < n; j++)
            if (c.ref[j] > c.ref[want]) want = j;
        for (int si = 0; si < 3; si++) {
            if (!slm_kernels_select(k_sets[si])) continue;
            float *y = malloc(sizeof(float) * n);
            size_t need = slm_matmul_scratch_bytes(c.t, k, 1);
            void *scratch = need ? aligned_alloc(64, (need + 63) & ~(size_t)63) : NULL;
            slm_mm mm = {.w = c.w, .wrow = slm_row_bytes(c.t, (uint64_t)k), .wtype = c.t, .k = k, .n0 = 0, .n1 = n,
                         .rows = 1, .x = c.x, .ldx = (size_t)c.ldx, .y = y, .ldy = (size_t)n, .scratch = scratch};
            slm_kernels_active()->matmul(&mm);
            int got = 0;
            for (int j = 1; j < n; j++)
                if (y[j] > y[got]) got = j;
            CHECKF(got == want, "%s %s: argmax %d, reference %d", k_sets[si], slm_dtype_name(c.t), got, want);
            free(y);
            free(scratch);
        }
        case_free(&c);
    }
    slm_kernels_select(NULL);
}

/* Repacked matrices: the layout round-trips (every row of a repacked
 * matrix dequantizes to the original row), and every set's matmul on the
 * repacked weights meets the same bounds as on the original, for whole
 * groups, tiles cut inside a group, one row (decode) and many (prefill). */
static void test_matmul_r16(void) {
    static const uint32_t base[] = {SLM_Q4_0, SLM_Q6_K, SLM_Q8_0, SLM_F16, SLM_Q4_K, SLM_Q5_K, SLM_Q5_0, SLM_IQ4_NL,
                                    SLM_Q3_K, SLM_IQ4_XS, SLM_Q2_K, SLM_Q4_1, SLM_Q5_1, SLM_MXFP4};
    static const int ks[] = {32, 96, 256, 768, 2304};
    static const int ns[] = {16, 48, 80}; /* 80: a step of 3 groups, then one of 2 (prefill) */
    static const int rows_[] = {1, 2, 7, 8, 9, 33, 121}; /* 121 at k = 2304 only */
    for (int bi = 0; bi < (int)(sizeof base / sizeof base[0]); bi++) {
        const uint32_t t = base[bi], rt = SLM_R16 | t;
        CHECK(slm_repack_type(t, 256, 15) == 0); /* under one group */
        if (type_k_ok(t, 256)) { /* 2 groups and 3 rows after them, in the base layout (a vocabulary of 100278) */
            CHECK(slm_repack_type(t, 256, 35) == rt);
            mcase c;
            case_make(&c, t, 256, 35, 1);
            case_repack(&c);
            float y[256];
            int bad = 0;
            for (int j = 0; j < 35; j++) {
                CHECK(slm_dequantize_matrix_row(rt, c.w, 256, 35, j, y));
                for (int e = 0; e < 256; e++)
                    bad += fabs(y[e] - c.wd[(size_t)j * 256 + e]) > 1e-6 * fabs(c.wd[(size_t)j * 256 + e]) + 1e-30;
            }
            CHECKF(bad == 0, "%s n=35: %d elements differ after repacking 32 rows", slm_dtype_name(rt), bad);
            case_free(&c);
        }
        CHECK(slm_repack_type(SLM_Q4_1, 256, 16) == SLM_Q4_1_R16 && slm_repack_type(SLM_Q5_1, 256, 16) == SLM_Q5_1_R16);
        CHECK(slm_repack_type(SLM_Q5_1, 48, 16) == 0 && slm_repack_type(SLM_Q3_K, 288, 16) == 0);
        CHECK(slm_repack_type(SLM_Q4_K, 96, 16) == 0);
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            if (!type_k_ok(t, ks[ki])) continue;
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
                const int k = ks[ki], n = ns[ni];
                CHECK(slm_repack_type(t, k, n) == rt);
                for (size_t ri = 0; ri < sizeof rows_ / sizeof rows_[0]; ri++) {
                    if (rows_[ri] > 100 && k != 2304) continue;
                    mcase c;
                    case_make(&c, t, k, n, rows_[ri]);
                    case_repack(&c);
                    if (ri == 0) { /* round trip: bit-exact codes, scales within one rounding */
                        float *y = malloc(sizeof(float) * k);
                        int bad = 0;
                        for (int j = 0; j < n; j++) {
                            CHECK(slm_dequantize_matrix_row(rt, c.w, k, n, j, y));
                            for (int e = 0; e < k; e++)
                                bad += fabs(y[e] - c.wd[(size_t)j * k + e]) > 1e-6 * fabs(c.wd[(size_t)j * k + e]) + 1e-30;
                        }
                        CHECKF(bad == 0, "%s k=%d n=%d: %d elements differ after repacking", slm_dtype_name(rt), k, n, bad);
                        free(y);
                    }
                    for (int si = 0; si < 3; si++) {
                        if (!slm_kernels_select(k_sets[si])) continue;
                        double worst = 0;
                        int fails = case_run(&c, 0, n, k_sets[si], &worst);
                        fails += case_run(&c, 16, n, k_sets[si], &worst);
                        fails += case_run(&c, 3, n - 5, k_sets[si], &worst); /* cut inside groups */
                        CHECKF(fails == 0, "%s %s k=%d n=%d rows=%d: %d bad outputs", k_sets[si], slm_dtype_name(rt), k, n,
                               rows_[ri], fails);
                    }
                    case_free(&c);
                }
            }
        }
    }
    slm_kernels_select(NULL);
}

/* Each row of mm (just run) against a one-row call on that row alone, into
 * y1 (n floats): returns bad plus the outputs whose bits differ, each told
 * on stderr while the count is under 3 (bad carries it across calls). */
static int rows_alone_check(const slm_mm *mm, const mcase *c, int n, float *y1, const char *set, int bad) {
    for (int i = 0; i < mm->rows; i++) {
        slm_mm one = *mm;
        one.rows = 1, one.x = c->x + (size_t)i * c->ldx, one.y = y1, one.ldy = (size_t)n;
        slm_kernels_active()->matmul(&one);
        for (int j = mm->n0; j < mm->n1; j++) {
            const float a = y1[j], b = mm->y[(size_t)i * mm->ldy + j];
            if (memcmp(&a, &b, sizeof a) != 0) {
                if (bad < 3)
                    fprintf(stderr, "  %s %s rows=%d tile=[%d,%d) y[%d][%d]: %.9g in %d rows, %.9g alone\n", set,
                            slm_dtype_name(mm->wtype), mm->rows, mm->n0, mm->n1, i, j, b, mm->rows, a);
                bad++;
            }
        }
    }
    return bad;
}

/* The outputs of mm (just run) in [n0, n1) outside case c's error bounds
 * (int8 bounds for the quantized types on the SIMD sets, as case_run),
 * each told on stderr while the count is under 3 (bad carries it). */
static int ref_check(const slm_mm *mm, const mcase *c, const char *set, int bad) {
    const int int8 = strcmp(set, "scalar") != 0 && slm_qtype_kind(c->t & ~(uint32_t)SLM_R16) >= 0;
    for (int i = 0; i < mm->rows; i++)
        for (int j = mm->n0; j < mm->n1; j++) {
            const double got = mm->y[(size_t)i * mm->ldy + j], ref = c->ref[(size_t)i * c->n + j];
            const double bound = int8 ? c->bound_q[(size_t)i * c->n + j] : c->bound_f[(size_t)i * c->n + j];
            if (!(fabs(got - ref) <= bound)) {
                if (bad < 3)
                    fprintf(stderr, "  %s %s rows=%d tile=[%d,%d) y[%d][%d]=%.9g ref=%.9g bound=%.3g\n", set,
                            slm_dtype_name(mm->wtype), mm->rows, mm->n0, mm->n1, i, j, got, ref, bound);
                bad++;
            }
        }
    return bad;
}

/* Up to SLM_MM_DECODE_ROWS rows (the batch programs' decode), each output
 * row has the bits of a one-row call on that row alone: every weight type
 * in its file layout and repacked, every set, whole and cut tiles. A
 * sequence decoded beside others then gives the tokens it gives alone.
 * The outputs also meet the reference's bounds (the i-quants' and Q2_K's,
 * Q3_K's, IQ4_XS's decode kernels are checked here for 1-4 rows). */
static void test_matmul_rows_alone(void) {
    static const uint32_t types[] = {SLM_F32,     SLM_F16,    SLM_BF16,  SLM_Q8_0,    SLM_Q4_0,  SLM_Q4_1,  SLM_Q5_0,
                                     SLM_Q5_1,    SLM_Q4_K,   SLM_Q5_K,  SLM_Q6_K,    SLM_Q2_K,  SLM_Q3_K,  SLM_IQ4_NL,
                                     SLM_IQ4_XS,  SLM_IQ2_XXS, SLM_IQ2_XS, SLM_IQ2_S, SLM_IQ3_XXS, SLM_IQ3_S, SLM_IQ1_S,
                                     SLM_IQ1_M,   SLM_MXFP4};
    const int k = 768, n = 48, ldy = n + 1;
    float *y1 = malloc(sizeof(float) * n), *yr = malloc(sizeof(float) * (size_t)ldy * SLM_MM_DECODE_ROWS);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (int packed = 0; packed < 2; packed++) {
            const uint32_t t = types[ti], rt = packed ? slm_repack_type(t, k, n) : t;
            if (!rt) continue; /* no repacked layout for this type */
            mcase c;
            case_make(&c, t, k, n, SLM_MM_DECODE_ROWS);
            if (packed) case_repack(&c);
            size_t need = slm_matmul_scratch_bytes(rt, k, SLM_MM_DECODE_ROWS);
            void *scratch = need ? aligned_alloc(64, (need + 63) & ~(size_t)63) : NULL;
            for (int si = 0; si < 3; si++) {
                if (!slm_kernels_select(k_sets[si])) continue;
                int bad = 0, far = 0;
                for (int rows = 1; rows <= SLM_MM_DECODE_ROWS; rows++)
                    for (int cut = 0; cut < 2; cut++) {
                        const int n0 = cut ? 3 : 0, n1 = cut ? n - 5 : n;
                        slm_mm mm = {.w = c.w, .wrow = slm_row_bytes(t, (uint64_t)k), .wtype = rt, .k = k, .n0 = n0,
                                     .n1 = n1, .rows = rows, .x = c.x, .ldx = (size_t)c.ldx, .y = yr,
                                     .ldy = (size_t)ldy, .scratch = scratch};
                        slm_kernels_active()->matmul(&mm);
                        far = ref_check(&mm, &c, k_sets[si], far);
                        if (rows > 1) bad = rows_alone_check(&mm, &c, n, y1, k_sets[si], bad);
                    }
                CHECKF(bad == 0, "%s %s: %d outputs of a multi-row call differ from the row alone", k_sets[si],
                       slm_dtype_name(rt), bad);
                CHECKF(far == 0, "%s %s: %d outputs of 1-%d rows outside the reference's bounds", k_sets[si],
                       slm_dtype_name(rt), far, SLM_MM_DECODE_ROWS);
            }
            free(scratch);
            case_free(&c);
        }
    free(y1);
    free(yr);
    slm_kernels_select(NULL);
}

/* Prefill rows of the repacked quantized types (the panel kernels of
 * kernels_x86_r16p.c from 16 rows on) give each row the bits of a one-row
 * call: a prompt's last row prefilled has the logits it has decoded. */
static void test_matmul_prefill_rows_alone(void) {
    static const uint32_t types[] = {SLM_Q4_0, SLM_Q5_0, SLM_Q6_K, SLM_Q4_K, SLM_Q5_K, SLM_Q8_0, SLM_IQ4_NL, SLM_Q3_K,
                                     SLM_IQ4_XS, SLM_Q2_K, SLM_Q4_1, SLM_Q5_1, SLM_MXFP4};
    const int k = 768, n = 48, ldy = n + 1, rows = 19;
    float *y1 = malloc(sizeof(float) * n), *yr = malloc(sizeof(float) * (size_t)ldy * rows);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const uint32_t t = types[ti], rt = slm_repack_type(t, k, n);
        CHECK(rt != 0);
        if (!rt) continue;
        mcase c;
        case_make(&c, t, k, n, rows);
        case_repack(&c);
        const size_t need = slm_matmul_scratch_bytes(rt, k, rows);
        void *scratch = aligned_alloc(64, (need + 63) & ~(size_t)63);
        for (int si = 0; si < 3; si++) {
            if (!slm_kernels_select(k_sets[si])) continue;
            int bad = 0;
            for (int cut = 0; cut < 3; cut++) {
                const int n0 = cut == 1 ? 3 : cut == 2 ? 8 : 0, n1 = cut == 1 ? n - 5 : cut == 2 ? 40 : n;
                slm_mm mm = {.w = c.w, .wrow = slm_row_bytes(t, (uint64_t)k), .wtype = rt, .k = k, .n0 = n0, .n1 = n1,
                             .rows = rows, .x = c.x, .ldx = (size_t)c.ldx, .y = yr, .ldy = (size_t)ldy, .scratch = scratch};
                slm_kernels_active()->matmul(&mm);
                bad = rows_alone_check(&mm, &c, n, y1, k_sets[si], bad);
            }
            CHECKF(bad == 0, "%s %s: %d outputs of a %d-row call differ from the row alone", k_sets[si], slm_dtype_name(rt),
                   bad, rows);
        }
        free(scratch);
        case_free(&c);
    }
    free(y1);
    free(yr);
    slm_kernels_select(NULL);
}

/* The int8 products at their largest (every code at its type's maximum,
 * every activation +-127): the 16-bit partial sums of the r16 kernels stay
 * in range. Fails if a kernel adds more products in 16 bits than the
 * type's code width allows. */
static void test_matmul_r16_extreme(void) {
    static const uint32_t base[] = {SLM_Q4_0, SLM_Q5_0, SLM_Q6_K, SLM_Q4_K, SLM_Q5_K, SLM_Q8_0, SLM_IQ4_NL, SLM_MXFP4};
    static const float xs[] = {3.0f, -3.0f};
    for (int bi = 0; bi < (int)(sizeof base / sizeof base[0]); bi++)
        for (int xi = 0; xi < 2; xi++) {
            const uint32_t t = base[bi];
            const int k = 512, n = 32, rows = xi ? 9 : 33; /* 33: the prefill panel (kernels_x86_r16p.c) */
            mcase c;
            case_make_ex(&c, t, k, n, rows, xs[xi]);
            case_repack(&c);
            for (int si = 0; si < 3; si++) {
                if (!slm_kernels_select(k_sets[si])) continue;
                double worst = 0;
                const int fails = case_run(&c, 0, n, k_sets[si], &worst) + case_run(&c, 3, n - 5, k_sets[si], &worst);
                CHECKF(fails == 0, "%s %s extreme codes, x = %g: %d bad outputs (worst err / bound %.3g)", k_sets[si],
                       slm_dtype_name(c.t), xs[xi], fails, worst);
            }
            case_free(&c);
        }
    slm_kernels_select(NULL);
}

/* Activation rows with NaN and infinities (a model whose weights overflow, or
 * damaged weights in a blob): the int8 quantizers turn them into INT_MIN lanes,
 * and the block sums built from those lanes fed signed int arithmetic that
 * overflowed (UBSan, under the blob fuzzer). Every type, plain and repacked,
 * decode and prefill row counts, every set: no undefined behaviour (the
 * sanitized run), and the finite rows keep their reference values. */
static void test_matmul_nonfinite(void) {
    static const uint32_t base[] = {SLM_Q4_0, SLM_Q6_K, SLM_Q8_0, SLM_Q4_K, SLM_Q5_K, SLM_Q5_0, SLM_IQ4_NL,
                                    SLM_Q3_K, SLM_IQ4_XS, SLM_Q2_K, SLM_Q4_1, SLM_Q5_1, SLM_MXFP4};
    static const int rows_[] = {9, 33};
    const int k = 512, n = 32;
    for (int bi = 0; bi < (int)(sizeof base / sizeof base[0]); bi++)
        for (int ri = 0; ri < 2; ri++)
            for (int rp = 0; rp < 2; rp++) {
                const uint32_t t = base[bi];
                const int rows = rows_[ri];
                mcase c;
                case_make(&c, t, k, n, rows);
                if (rp) case_repack(&c);
                /* row 1: a NaN block; row 3: one +inf; row 5: all -inf; row 7: NaN and inf in both halves of every block */
                for (int e = 32; e < 64; e++) c.x[(size_t)1 * c.ldx + e] = NAN;
                c.x[(size_t)3 * c.ldx + 100] = INFINITY;
                for (int e = 0; e < k; e++) c.x[(size_t)5 * c.ldx + e] = -INFINITY;
                for (int e = 0; e < k; e++) c.x[(size_t)7 * c.ldx + e] = e % 16 == 3 ? NAN : e % 16 == 9 ? INFINITY : 1.0f;
                for (int si = 0; si < 3; si++) {
                    if (!slm_kernels_select(k_sets[si])) continue;
                    const int ldy = n;
                    float *y = malloc(sizeof(float) * (size_t)ldy * rows);
                    size_t need = slm_matmul_scratch_bytes(c.t, k, rows);
                    uint8_t *scratch = aligned_alloc(64, (need + 63) & ~(size_t)63);
                    slm_mm mm = {.w = c.w, .wrow = slm_row_bytes(c.t, (uint64_t)k), .wtype = c.t, .k = k, .n0 = 0, .n1 = n,
                                 .rows = rows, .x = c.x, .ldx = (size_t)c.ldx, .y = y, .ldy = (size_t)ldy, .scratch = scratch};
                    slm_kernels_active()->matmul(&mm);
                    int bad = 0;
                    for (int i = 0; i < rows; i++) {
                        if (i == 1 || i == 3 || i == 5 || i == 7) continue;
                        for (int j = 0; j < n; j++) {
                            const double err = fabs(y[(size_t)i * ldy + j] - c.ref[(size_t)i * n + j]);
                            if (!(err <= c.bound_q[(size_t)i * n + j] + c.bound_f[(size_t)i * n + j])) bad++;
                        }
                    }
                    CHECKF(bad == 0, "%s %s rows=%d beside non-finite rows: %d finite outputs off", k_sets[si],
                           slm_dtype_name(c.t), rows, bad);
                    free(scratch);
                    free(y);
                }
                case_free(&c);
            }
    slm_kernels_select(NULL);
}

/* Q8_0 repacked at prefill row counts (the AVX2 set's Q8_0 panel of
 * kernels_x86_r16p.c: |w| against the activations xor the sign mask of w,
 * plus the block's sum of |w| where w < 0), at the codes' and activations'
 * extremes: blocks of -128 (|-128| = 128), of -128 and 127 alternating, of
 * 127, of -1 and 1, and random codes, against activation rows of +-127
 * (every element +3 or -3, or signs alternating by element or by pair) and
 * random ones. +127 against -128 is the panel's most negative maddubs pair
 * (128 x -128 x 2 = -32768, still int16). Rows 16, 17, 20 (blocks of 3 rows
 * and tails of 1 and 2), whole and cut tiles, every set: each output within
 * the reference's bounds and with the bits of its row alone (the one-row
 * kernel, which takes no panel). */
static void test_matmul_q8_0_r16_signs(void) {
    static const int rows_[] = {16, 17, 20};
    const int k = 256, n = 48, nb = k / 32, ldy = n + 1;
    float *y1 = malloc(sizeof(float) * n), *yr = malloc(sizeof(float) * (size_t)ldy * 20), *deq = malloc(sizeof(float) * k);
    for (size_t ri = 0; ri < sizeof rows_ / sizeof rows_[0]; ri++) {
        const int rows = rows_[ri];
        mcase c;
        case_make_ex(&c, SLM_Q8_0, k, n, rows, 3.0f);
        const uint64_t wrow = slm_row_bytes(SLM_Q8_0, (uint64_t)k);
        for (int j = 0; j < n; j++) {
            slm_block_q8_0 *row = (slm_block_q8_0 *)(c.w + (size_t)j * wrow);
            for (int b = 0; b < nb; b++) {
                const int kind = (j + b) % 5;
                row[b].d = slm_f32_to_f16(0.01f * (float)(1 + (j + 2 * b) % 4));
                for (int e = 0; e < 32; e++)
                    row[b].qs[e] = (int8_t)(kind == 0 ? -128 : kind == 1 ? (e % 2 ? 127 : -128) : kind == 2 ? 127
                                            : kind == 3 ? (e % 3 ? 1 : -1) : (int)(urand() * 256.0) - 128);
            }
            CHECK(slm_dequantize_row(SLM_Q8_0, row, deq, k));
            for (int e = 0; e < k; e++) c.wd[(size_t)j * k + e] = deq[e];
        }
        for (int i = 0; i < rows; i++)
            for (int e = 0; e < k; e++) {
                const int kind = i % 5;
                c.x[(size_t)i * c.ldx + e] = kind == 0 ? 3.0f : kind == 1 ? -3.0f : kind == 2 ? (e % 2 ? -3.0f : 3.0f)
                                           : kind == 3 ? (e / 2 % 2 ? -3.0f : 3.0f) : nrand();
            }
        case_ref(&c);
        case_repack(&c);
        for (int si = 0; si < 3; si++) {
            if (!slm_kernels_select(k_sets[si])) continue;
            double worst = 0;
            const int fails = case_run(&c, 0, n, k_sets[si], &worst) + case_run(&c, 3, n - 5, k_sets[si], &worst);
            CHECKF(fails == 0, "%s q8_0_r16 rows=%d extreme codes: %d outputs outside the reference's bounds (worst %.3g)",
                   k_sets[si], rows, fails, worst);
            int bad = 0;
            for (int cut = 0; cut < 2; cut++) {
                const int n0 = cut ? 8 : 0, n1 = cut ? n - 3 : n;
                slm_mm mm = {.w = c.w, .wrow = wrow, .wtype = c.t, .k = k, .n0 = n0, .n1 = n1, .rows = rows, .x = c.x,
                             .ldx = (size_t)c.ldx, .y = yr, .ldy = (size_t)ldy, .scratch = g_scratch};
                slm_kernels_active()->matmul(&mm);
                bad = rows_alone_check(&mm, &c, n, y1, k_sets[si], bad);
            }
            CHECKF(bad == 0, "%s q8_0_r16 rows=%d extreme codes: %d outputs differ from the row alone", k_sets[si], rows, bad);
        }
        case_free(&c);
    }
    free(y1);
    free(yr);
    free(deq);
    slm_kernels_select(NULL);
}

/* MXFP4 (gpt-oss's expert matrices) at the widths a multiple of 32 but not
 * of 256 (gpt-oss's 2880 = 90 x 32), in its file layout with rows that are
 * not a multiple of 16, and repacked (mxfp4_r16: the 32 rows of two groups,
 * the last 3 in the file layout as a vocabulary's tail is run), every set,
 * decode and prefill row counts, on four kinds of weights:
 *  0 the quantizer's codes of random rows;
 *  1 E8M0 scales 0..3 (2^-128 .. 2^-125: subnormal floats, GGML's rule for
 *    e < 2) with activations near 2^100, so the products are normal floats;
 *  2 scales 248..252 (the largest whose 12 d is finite) with activations near 2^-110;
 *  3 every level +-12 and every activation +-3 (its largest code): the
 *    16-bit partial sums of the AVX2 kernels at their largest. */
static void mxfp4_case(mcase *c, int k, int n, int rows, int kind, float xsign) {
    case_make(c, SLM_MXFP4, k, n, rows);
    if (kind == 0) return;
    const uint64_t wrow = slm_row_bytes(SLM_MXFP4, (uint64_t)k);
    float *deq = malloc(sizeof(float) * k);
    for (int j = 0; j < n; j++) {
        slm_block_mxfp4 *row = (slm_block_mxfp4 *)(c->w + (size_t)j * wrow);
        for (int b = 0; b < k / 32; b++) {
            const int r = (int)(urand() * 65536.0);
            row[b].e = (uint8_t)(kind == 1 ? r % 4 : kind == 2 ? 248 + r % 5 : 127);
            for (int i = 0; i < 16; i++)
                row[b].qs[i] = kind == 3 ? (uint8_t)((j + b + i) % 3 ? 0x77 : 0xF7) : (uint8_t)(urand() * 256.0);
        }
        slm_dequantize_row(SLM_MXFP4, row, deq, k);
        for (int e = 0; e < k; e++) c->wd[(size_t)j * k + e] = deq[e];
    }
    const float xm = kind == 1 ? 0x1p100f : kind == 2 ? 0x1p-110f : 1.0f;
    for (int i = 0; i < rows; i++)
        for (int e = 0; e < k; e++) {
            float *x = &c->x[(size_t)i * c->ldx + e];
            *x = kind == 3 ? 3.0f * xsign : *x * xm;
        }
    case_ref(c);
    free(deq);
}

static void test_matmul_mxfp4(void) {
    static const int ks[] = {96, 288, 2880};
    static const int rows_[] = {1, 2, 4, 5, 16, 19, 33};
    const int n = 35;
    const uint64_t wrow0 = slm_row_bytes(SLM_MXFP4, 96);
    CHECK(slm_repack_type(SLM_MXFP4, 2880, 35) == SLM_MXFP4_R16 && slm_repack_type(SLM_MXFP4, 2880, 15) == 0 && wrow0 == 51);
    for (int kind = 0; kind < 5; kind++) /* 4: kind 3 with activations -3 */
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
            for (size_t ri = 0; ri < sizeof rows_ / sizeof rows_[0]; ri++) {
                const int k = ks[ki], rows = rows_[ri];
                mcase c;
                mxfp4_case(&c, k, n, rows, kind < 4 ? kind : 3, kind < 4 ? 1.0f : -1.0f);
                int fails = 0;
                double worst = 0;
                for (int si = 0; si < 3; si++) {
                    if (!slm_kernels_select(k_sets[si])) continue;
                    c.t = SLM_MXFP4;
                    fails += case_run(&c, 0, n, k_sets[si], &worst) + case_run(&c, 1, n - 1, k_sets[si], &worst);
                }
                case_repack(&c);
                for (int si = 0; si < 3; si++) {
                    if (!slm_kernels_select(k_sets[si])) continue;
                    c.t = SLM_MXFP4_R16;
                    fails += case_run(&c, 0, 32, k_sets[si], &worst) + case_run(&c, 3, 29, k_sets[si], &worst);
                    c.t = SLM_MXFP4; /* the 3 rows after the groups */
                    fails += case_run(&c, 32, n, k_sets[si], &worst);
                }
                CHECKF(fails == 0, "mxfp4 kind %d k=%d rows=%d: %d bad outputs (worst err / bound %.3g)", kind, k, rows, fails,
                       worst);
                case_free(&c);
            }
    slm_kernels_select(NULL);
}

/* RMSNorm and SwiGLU of every set against double precision, over lengths
 * with tails and gate values from deep negative (exp underflow) to large. */
static void test_vector_kernels(void) {
    static const int ns[] = {1, 7, 16, 17, 33, 100, 576, 2048, 5632};
    float *x = malloc(sizeof(float) * 5632 * 4);
    float *g = x + 5632, *u = g + 5632, *y = u + 5632;
    for (int si = 0; si < 3; si++) {
        if (!slm_kernels_select(k_sets[si])) continue;
        const slm_kernel_set *ks = slm_kernels_active();
        double worst_n = 0, worst_s = 0, worst_g = 0;
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
            const int n = ns[ni];
            for (int i = 0; i < n; i++) {
                x[i] = nrand() * 3.0f;
                g[i] = i % 11 == 0 ? -100.0f + (float)i / 64.0f : nrand() * 6.0f; /* some far below exp's range */
                u[i] = nrand();
            }
            ks->rmsnorm(x, u, y, n, 1e-5f);
            double ss = 0;
            for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
            const double inv = 1.0 / sqrt(ss / n + 1e-5);
            for (int i = 0; i < n; i++) {
                const double want = (double)u[i] * inv * x[i], err = fabs(y[i] - want) / (fabs(want) + 1e-6);
                if (err > worst_n) worst_n = err;
            }
            ks->swiglu(g, u, y, n);
            for (int i = 0; i < n; i++) {
                const double want = (double)g[i] / (1.0 + exp(-(double)g[i])) * u[i];
                const double err = fabs(y[i] - want) / (fabs(want) + 1e-30);
                if (err > worst_s && fabs(want) > 1e-30) worst_s = err;
            }
            ks->silu(g, y, n);
            for (int i = 0; i < n; i++) {
                const double want = (double)g[i] / (1.0 + exp(-(double)g[i]));
                const double err = fabs(y[i] - want) / (fabs(want) + 1e-30);
                if (err > worst_s && fabs(want) > 1e-30) worst_s = err;
            }
            ks->geglu(g, u, y, n); /* the tanh GELU in double */
            for (int i = 0; i < n; i++) {
                const double a = g[i], want = 0.5 * a * (1.0 + tanh(0.79788456080286535588 * (a + 0.044715 * a * a * a))) * u[i];
                /* relative to the value, or to the input's size where gelu(x) is tiny */
                const double err = fabs(y[i] - want) / (fabs(want) + 1e-7 * fabs(a * u[i]) + 1e-30);
                if (err > worst_g && fabs(want) > 1e-30) worst_g = err;
            }
        }
        CHECKF(worst_n < 1e-5 && worst_s < 1e-5 && worst_g < 1e-5, "%s: rmsnorm rel err %.3g, swiglu/silu %.3g, geglu %.3g",
               k_sets[si], worst_n, worst_s, worst_g);
        fprintf(stderr, "  %-6s rmsnorm rel err %.2g, swiglu/silu %.2g, geglu %.2g\n", k_sets[si], worst_n, worst_s, worst_g);
    }
    slm_kernels_select(NULL);
    free(x);
}

/* The gated delta rule of every set against a double-precision recurrence
 * over several steps (the state carries the error forward), for head sizes
 * with and without SIMD tails: all the steps in one call (v and o at strides
 * wider than a row) and one call per step, which must agree. */
static void test_delta_rule(void) {
    static const int Ss[] = {1, 5, 16, 24, 64, 100, 128};
    enum { STEPS = 6 };
    for (int si = 0; si < 3; si++) {
        if (!slm_kernels_select(k_sets[si])) continue;
        const slm_kernel_set *ks = slm_kernels_active();
        double worst = 0, split = 0;
        for (size_t ci = 0; ci < sizeof Ss / sizeof Ss[0]; ci++) {
            const int S = Ss[ci];
            const size_t ldv = (size_t)S + 3, ldo = (size_t)S + 5;
            float *M = calloc((size_t)S * S, sizeof *M), *M1 = calloc((size_t)S * S, sizeof *M1),
                  *q = malloc((size_t)STEPS * S * sizeof *q), *k = malloc((size_t)STEPS * S * sizeof *k),
                  *v = malloc(STEPS * ldv * sizeof *v), *o = malloc(STEPS * ldo * sizeof *o), *o1 = malloc(STEPS * ldo * sizeof *o1);
            double *R = calloc((size_t)S * S, sizeof *R);
            CHECK(M && M1 && q && k && v && o && o1 && R);
            if (!M || !M1 || !q || !k || !v || !o || !o1 || !R) return;
            float decay[STEPS], beta[STEPS];
            for (int st = 0; st < STEPS; st++) {
                float *qt = q + (size_t)st * S, *kt = k + (size_t)st * S;
                double kn = 0;
                for (int i = 0; i < S; i++) {
                    qt[i] = nrand() * 0.2f;
                    kt[i] = nrand();
                    v[st * ldv + (size_t)i] = nrand();
                    kn += (double)kt[i] * kt[i];
                }
                for (int i = 0; i < S; i++) kt[i] = (float)(kt[i] / sqrt(kn)); /* L2-normed, as the task passes it */
                decay[st] = 0.6f + 0.06f * (float)st, beta[st] = 0.3f + 0.1f * (float)st;
            }
            const slm_delta_steps all = {.q = q, .k = k, .v = v, .decay = decay, .beta = beta, .o = o, .ldv = ldv, .ldo = ldo, .T = STEPS};
            ks->delta_rule(M, &all, S);
            for (int st = 0; st < STEPS; st++) {
                const slm_delta_steps one = {.q = q + (size_t)st * S, .k = k + (size_t)st * S, .v = v + st * ldv,
                                             .decay = decay + st, .beta = beta + st, .o = o1 + st * ldo, .ldv = ldv, .ldo = ldo, .T = 1};
                ks->delta_rule(M1, &one, S);
            }
            for (int st = 0; st < STEPS; st++) {
                const float *qt = q + (size_t)st * S, *kt = k + (size_t)st * S;
                double oscale = 1e-3;
                for (int j = 0; j < S; j++) {
                    double *r = R + (size_t)j * S, sk = 0, oq = 0;
                    for (int i = 0; i < S; i++) sk += (r[i] *= decay[st]) * kt[i];
                    const double dd = (v[st * ldv + (size_t)j] - sk) * beta[st];
                    for (int i = 0; i < S; i++) oq += (r[i] += dd * kt[i]) * qt[i];
                    if (fabs(oq) > oscale) oscale = fabs(oq);
                    const double e = fabs(o[st * ldo + (size_t)j] - oq);
                    if (e > worst * oscale) worst = e / oscale;
                    const double e1 = fabs((double)o[st * ldo + (size_t)j] - o1[st * ldo + (size_t)j]);
                    if (e1 > split) split = e1;
                }
            }
            for (size_t i = 0; i < (size_t)S * S; i++) {
                const double e = fabs(M[i] - R[i]);
                if (e > worst) worst = e; /* the state: entries of order 1 */
                if (M[i] != M1[i]) split = fmax(split, fabs((double)M[i] - M1[i]));
            }
            free(M), free(M1), free(q), free(k), free(v), free(o), free(o1), free(R);
        }
        CHECKF(worst < 1e-4, "%s: delta rule err %.3g", k_sets[si], worst);
        /* the same arithmetic per row whether the tokens come in one call or six */
        CHECKF(split == 0, "%s: delta rule in one call vs per step: %.3g", k_sets[si], split);
        fprintf(stderr, "  %-6s delta rule err %.2g\n", k_sets[si], worst);
    }
    slm_kernels_select(NULL);
}

/* Selection: a set is available exactly when the CPU has its features (read
 * once); each set fills every entry; NULL restores the best. */
static void test_selection(void) {
    const slm_cpu *c = slm_cpu_features();
    CHECK(c == slm_cpu_features());
    CHECK(slm_kernels_select("scalar") && slm_kernels_active() == slm_kernels_ref());
    const int want2 = c->avx2 && c->fma && c->f16c;
    const int want512 = want2 && c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq && c->avx512vnni;
#if defined(__x86_64__) && defined(__GNUC__)
    CHECK(slm_kernels_select("avx2") == want2);
    CHECK(slm_kernels_select("avx512") == want512);
#else
    (void)want512;
    CHECK(!slm_kernels_select("avx2") && !slm_kernels_select("avx512"));
#endif
    CHECK(!slm_kernels_select("sse9"));
    for (int si = 0; si < 3; si++) {
        if (!slm_kernels_select(k_sets[si])) continue;
        const slm_kernel_set *ks = slm_kernels_active();
        CHECK(!strcmp(ks->name, k_sets[si]));
        CHECK(ks->dot_f32 && ks->dot_f16 && ks->dot_bf16 && ks->dot_q8_0 && ks->matmul && ks->rmsnorm && ks->swiglu && ks->silu && ks->geglu && ks->delta_rule &&
              ks->attention);
    }
    CHECK(slm_kernels_select(NULL) && slm_kernels_active() == slm_kernels_best());
    CHECK(!strcmp(slm_kernels_best()->name, want512 ? "avx512" : want2 ? "avx2" : "scalar"));
}

int main(void) {
    T_RUN(test_selection);
    T_RUN(test_delta_rule);
    T_RUN(test_blocks_q4_0_q4_1_q8_0);
    T_RUN(test_blocks_k);
    T_RUN(test_qblock_i8);
    T_RUN(test_round_trip);
    T_RUN(test_matmul_shapes);
    T_RUN(test_matmul_large);
    T_RUN(test_same_argmax);
    T_RUN(test_matmul_r16);
    T_RUN(test_matmul_r16_extreme);
    T_RUN(test_matmul_rows_alone);
    T_RUN(test_matmul_prefill_rows_alone);
    T_RUN(test_matmul_q8_0_r16_signs);
    T_RUN(test_matmul_nonfinite);
    T_RUN(test_matmul_mxfp4);
    T_RUN(test_vector_kernels);
    free(g_scratch);
    T_DONE();
}
