#include <math.h>
#include <string.h>

#include "dtype.h"

_Static_assert(sizeof(slm_block_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(slm_block_q4_0) == 18, "q4_0 block");
_Static_assert(sizeof(slm_block_q4_1) == 20, "q4_1 block");
_Static_assert(sizeof(slm_block_q4_K) == 144, "q4_K block");
_Static_assert(sizeof(slm_block_q5_K) == 176, "q5_K block");
_Static_assert(sizeof(slm_block_q6_K) == 210, "q6_K block");
_Static_assert(sizeof(slm_block_q5_0) == 22, "q5_0 block");
_Static_assert(sizeof(slm_block_q5_1) == 24, "q5_1 block");
_Static_assert(sizeof(slm_block_iq4_nl) == 18, "iq4_nl block");
_Static_assert(sizeof(slm_block_iq4_xs) == 136, "iq4_xs block");
_Static_assert(sizeof(slm_block_q2_K) == 84, "q2_K block");
_Static_assert(sizeof(slm_block_q3_K) == 110, "q3_K block");
_Static_assert(sizeof(slm_block_mxfp4) == 17, "mxfp4 block");

const int8_t slm_kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
const int8_t slm_kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static const slm_dtype_info k_types[SLM_DTYPE_COUNT] = {
    [SLM_F32] = {"f32", 1, 4},       [SLM_F16] = {"f16", 1, 2},
    [SLM_Q4_0] = {"q4_0", 32, 18},   [SLM_Q4_1] = {"q4_1", 32, 20},
    [SLM_Q5_0] = {"q5_0", 32, 22},   [SLM_Q5_1] = {"q5_1", 32, 24},
    [SLM_Q8_0] = {"q8_0", 32, 34},   [SLM_Q8_1] = {"q8_1", 32, 36},
    [SLM_Q2_K] = {"q2_k", 256, 84},  [SLM_Q3_K] = {"q3_k", 256, 110},
    [SLM_Q4_K] = {"q4_k", 256, 144}, [SLM_Q5_K] = {"q5_k", 256, 176},
    [SLM_Q6_K] = {"q6_k", 256, 210}, [SLM_Q8_K] = {"q8_k", 256, 292},
    [SLM_IQ4_NL] = {"iq4_nl", 32, 18}, [SLM_IQ4_XS] = {"iq4_xs", 256, 136},
    [SLM_IQ2_XXS] = {"iq2_xxs", 256, 66}, [SLM_IQ2_XS] = {"iq2_xs", 256, 74},
    [SLM_IQ2_S] = {"iq2_s", 256, 82}, [SLM_IQ3_XXS] = {"iq3_xxs", 256, 98},
    [SLM_IQ3_S] = {"iq3_s", 256, 110}, [SLM_IQ1_S] = {"iq1_s", 256, 50},
    [SLM_IQ1_M] = {"iq1_m", 256, 56}, [SLM_MXFP4] = {"mxfp4", 32, 17},
    [SLM_I8] = {"i8", 1, 1},         [SLM_I16] = {"i16", 1, 2},
    [SLM_I32] = {"i32", 1, 4},       [SLM_I64] = {"i64", 1, 8},
    [SLM_F64] = {"f64", 1, 8},       [SLM_BF16] = {"bf16", 1, 2},
};

static const slm_dtype_info k_q4_0_r16 = {"q4_0_r16", 32, 18}, k_q6_k_r16 = {"q6_k_r16", 256, 210},
                            k_q8_0_r16 = {"q8_0_r16", 32, 34}, k_f16_r16 = {"f16_r16", 1, 2};
static const slm_dtype_info k_q4_k_r16 = {"q4_k_r16", 256, 144}, k_q5_k_r16 = {"q5_k_r16", 256, 176};
static const slm_dtype_info k_q5_0_r16 = {"q5_0_r16", 32, 22}, k_iq4_nl_r16 = {"iq4_nl_r16", 32, 18};
static const slm_dtype_info k_q3_k_r16 = {"q3_k_r16", 256, 110}, k_iq4_xs_r16 = {"iq4_xs_r16", 256, 136};
static const slm_dtype_info k_q2_k_r16 = {"q2_k_r16", 256, 84}, k_q4_1_r16 = {"q4_1_r16", 32, 20},
                            k_q5_1_r16 = {"q5_1_r16", 32, 24}, k_mxfp4_r16 = {"mxfp4_r16", 32, 17};

const slm_dtype_info *slm_dtype_get(uint32_t t) {
    if (t == SLM_Q4_0_R16) return &k_q4_0_r16;
    if (t == SLM_Q6_K_R16) return &k_q6_k_r16;
    if (t == SLM_Q8_0_R16) return &k_q8_0_r16;
    if (t == SLM_F16_R16) return &k_f16_r16;
    if (t == SLM_Q4_K_R16) return &k_q4_k_r16;
    if (t == SLM_Q5_K_R16) return &k_q5_k_r16;
    if (t == SLM_Q5_0_R16) return &k_q5_0_r16;
    if (t == SLM_IQ4_NL_R16) return &k_iq4_nl_r16;
    if (t == SLM_Q3_K_R16) return &k_q3_k_r16;
    if (t == SLM_IQ4_XS_R16) return &k_iq4_xs_r16;
    if (t == SLM_Q2_K_R16) return &k_q2_k_r16;
    if (t == SLM_Q4_1_R16) return &k_q4_1_r16;
    if (t == SLM_Q5_1_R16) return &k_q5_1_r16;
    if (t == SLM_MXFP4_R16) return &k_mxfp4_r16;
    if (t >= SLM_DTYPE_COUNT || !k_types[t].name) return NULL;
    return &k_types[t];
}

const char *slm_dtype_name(uint32_t t) {
    const slm_dtype_info *i = slm_dtype_get(t);
    return i ? i->name : "unknown";
}

uint64_t slm_row_bytes(uint32_t t, uint64_t n) {
    const slm_dtype_info *i = slm_dtype_get(t);
    if (!i || n % i->block) return 0;
    return n / i->block * i->bytes;
}

float slm_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalize */
            int e = -1;
            do { man <<= 1; e++; } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t slm_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
    if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* overflow -> inf */
    if (absx < 0x38800000u) { /* result is subnormal or zero */
        if (absx < 0x33000000u) return (uint16_t)sign;
        /* value / 2^-24 = m * 2^(e - 126), with e < 113: shift right by 126 - e. */
        uint32_t e = absx >> 23;
        uint32_t m = (absx & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e;
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t e = (absx >> 23) - 127 + 15;
    uint32_t m = absx & 0x7fffff;
    uint32_t h = (e << 10) | (m >> 13);
    uint32_t rem = m & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* may carry into exp: fine */
    return (uint16_t)(sign | h);
}

void slm_quantize_row_q8_0(const float *x, void *vy, int64_t n) {
    slm_block_q8_0 *y = vy;
    for (int64_t b = 0; b < n / SLM_QK8_0; b++) {
        const float *xb = x + b * SLM_QK8_0;
        float amax = 0.0f;
        for (int j = 0; j < SLM_QK8_0; j++) {
            float v = fabsf(xb[j]);
            if (v > amax) amax = v;
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = slm_f32_to_f16(d);
        for (int j = 0; j < SLM_QK8_0; j++) y[b].qs[j] = (int8_t)roundf(xb[j] * id);
    }
}

float slm_bf16_to_f32(uint16_t h) {
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

uint16_t slm_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

void slm_quantize_row_q4_0(const float *x, void *vy, int64_t n) {
    slm_block_q4_0 *y = vy;
    for (int64_t b = 0; b < n / SLM_QK4_0; b++) {
        const float *xb = x + b * SLM_QK4_0;
        float amax = 0.0f, max = 0.0f; /* the value of largest magnitude, with its sign */
        for (int j = 0; j < SLM_QK4_0; j++)
            if (fabsf(xb[j]) > amax) { amax = fabsf(xb[j]); max = xb[j]; }
        /* max maps to code 0 (-8 * d): the asymmetric range [-8, 7] covers it exactly. The codes from the
         * unrounded d, a half added and cut (GGML's quantize_row_q4_0_ref: the same bytes as llama-quantize) */
        const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = slm_f32_to_f16(d);
        for (int j = 0; j < SLM_QK4_0 / 2; j++) {
            int q0 = clampi((int)(xb[j] * id + 8.5f), 0, 15);
            int q1 = clampi((int)(xb[j + 16] * id + 8.5f), 0, 15);
            y[b].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

/* As Q4_0 with 5-bit codes: the value of largest magnitude maps to code 0
 * (-16 * d); the fifth bits go to qh (bit e for element e). */
void slm_quantize_row_q5_0(const float *x, void *vy, int64_t n) {
    slm_block_q5_0 *y = vy;
    for (int64_t b = 0; b < n / SLM_QK5_0; b++) {
        const float *xb = x + b * SLM_QK5_0;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < SLM_QK5_0; j++)
            if (fabsf(xb[j]) > amax) { amax = fabsf(xb[j]); max = xb[j]; }
        const float d = max / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f; /* as Q4_0: GGML's arithmetic */
        uint32_t qh = 0;
        y[b].d = slm_f32_to_f16(d);
        for (int j = 0; j < SLM_QK5_0 / 2; j++) {
            const int q0 = clampi((int)(xb[j] * id + 16.5f), 0, 31);
            const int q1 = clampi((int)(xb[j + 16] * id + 16.5f), 0, 31);
            y[b].qs[j] = (uint8_t)((q0 & 0xF) | (q1 & 0xF) << 4);
            qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + 16);
        }
        for (int i = 0; i < 4; i++) y[b].qh[i] = (uint8_t)(qh >> (8 * i));
    }
}

/* The least and greatest of a block's n values. */
static void block_min_max(const float *x, int n, float *mn, float *mx) {
    *mn = *mx = x[0];
    for (int j = 1; j < n; j++) {
        if (x[j] < *mn) *mn = x[j];
        if (x[j] > *mx) *mx = x[j];
    }
}

/* Q5_1: codes from the block's minimum at step (max - min) / 31, the step
 * unrounded and the codes cut after adding a half (GGML's
 * quantize_row_q5_1_ref arithmetic: llama-quantize's bytes); fifth bits as
 * Q5_0. */
void slm_quantize_row_q5_1(const float *x, void *vy, int64_t n) {
    slm_block_q5_1 *y = vy;
    for (int64_t b = 0; b < n / SLM_QK5_1; b++) {
        const float *xb = x + b * SLM_QK5_1;
        float mn, mx;
        block_min_max(xb, SLM_QK5_1, &mn, &mx);
        const float d = (mx - mn) / 31.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = slm_f32_to_f16(d);
        y[b].m = slm_f32_to_f16(mn);
        uint32_t qh = 0;
        for (int j = 0; j < SLM_QK5_1 / 2; j++) {
            const int q0 = clampi((int)((xb[j] - mn) * id + 0.5f), 0, 31);
            const int q1 = clampi((int)((xb[j + 16] - mn) * id + 0.5f), 0, 31);
            y[b].qs[j] = (uint8_t)((q0 & 0xF) | (q1 & 0xF) << 4);
            qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + 16);
        }
        for (int i = 0; i < 4; i++) y[b].qh[i] = (uint8_t)(qh >> (8 * i));
    }
}

void slm_quantize_row_q4_1(const float *x, void *vy, int64_t n) {
    slm_block_q4_1 *y = vy;
    for (int64_t b = 0; b < n / SLM_QK4_1; b++) {
        const float *xb = x + b * SLM_QK4_1;
        float mn, mx;
        block_min_max(xb, SLM_QK4_1, &mn, &mx);
        y[b].d = slm_f32_to_f16((mx - mn) / 15.0f);
        y[b].m = slm_f32_to_f16(mn);
        const float d = slm_f16_to_f32(y[b].d), m = slm_f16_to_f32(y[b].m);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int j = 0; j < SLM_QK4_1 / 2; j++) {
            int q0 = clampi((int)lrintf((xb[j] - m) * id), 0, 15);
            int q1 = clampi((int)lrintf((xb[j + 16] - m) * id), 0, 15);
            y[b].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

/* Fitted scale and offset of 32 values for codes in [0, nmax]: x ~ sc * q
 * - mn, mn >= 0. Candidate steps (hi - mn) / (nmax + rmin + 0.1 k), k =
 * 0..nstep, each give codes by rounding from the best offset mn so far;
 * for those codes the scale and offset are the weighted least-squares fit
 * (weights: the block's rms plus |x|, so large values count more), the
 * offset held at mn >= 0; the pair with the least weighted error is kept
 * (the range's own step among them). The scheme of GGML's
 * make_qkx2_quants, as llama-quantize runs it for Q4_K (rmin -1, 20
 * steps) and Q5_K (-0.5, 15) without an importance matrix, the sums in its
 * order: the same bytes. L gets the best codes. */

static void fit_scale_min(const float *x, int nmax, float rmin, int nstep, float *sc_out, float *mn_out, uint8_t L[32]) {
    float sumsq = 0.0f, w[32];
    for (int j = 0; j < 32; j++) sumsq += x[j] * x[j];
    const float av = sqrtf(sumsq / 32.0f);
    for (int j = 0; j < 32; j++) w[j] = av + fabsf(x[j]);
    /* the sums in one order, element by element: the bytes llama-quantize writes */
    float lo = x[0], hi = x[0], sw = w[0], sx = w[0] * x[0];
    for (int j = 1; j < 32; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
        sw += w[j];
        sx += w[j] * x[j];
    }
    if (lo > 0.0f) lo = 0.0f; /* the min is stored as a non-negative offset */
    if (hi == lo) {
        memset(L, 0, 32);
        *sc_out = 0.0f, *mn_out = -lo;
        return;
    }
    float is = (float)nmax / (hi - lo), sc = 1.0f / is, mn = lo, best = 0.0f;
    for (int j = 0; j < 32; j++) { /* the range's own step */
        L[j] = (uint8_t)clampi((int)slm_round_even(is * (x[j] - lo)), 0, nmax);
        const float r = sc * (float)L[j] + lo - x[j];
        best += w[j] * (r * r);
    }
    for (int k = 0; k <= nstep; k++) {
        is = (rmin + 0.1f * (float)k + (float)nmax) / (hi - mn);
        float sl = 0, sll = 0, sxl = 0;
        uint8_t q[32];
        for (int j = 0; j < 32; j++) {
            q[j] = (uint8_t)clampi((int)slm_round_even(is * (x[j] - mn)), 0, nmax);
            sl += w[j] * q[j], sll += w[j] * q[j] * q[j], sxl += w[j] * q[j] * x[j];
        }
        const float D = sw * sll - sl * sl;
        if (!(D > 0.0f)) continue;
        float a = (sw * sxl - sx * sl) / D, b = (sll * sx - sl * sxl) / D; /* x ~ a q + b */
        if (b > 0.0f) b = 0.0f, a = sxl / sll;
        float err = 0.0f;
        for (int j = 0; j < 32; j++) {
            const float r = a * q[j] + b - x[j];
            err += w[j] * (r * r);
        }
        if (err < best) best = err, sc = a, mn = b, memcpy(L, q, 32);
    }
    *sc_out = sc, *mn_out = -mn;
}

/* Q4_K / Q5_K: per sub-block of 32 a scale and a min (x ~ sc * q - mn,
 * mn >= 0; from the range, or fitted: fit_scale_min), both quantized to 6
 * bits against the super-block's d / dmin; then codes in [0, nmax] against
 * the rounded scales. L gets the codes. */
static void quantize_k_scales(const float *x, int nmax, int fit, uint8_t scales[SLM_K_SCALE_SIZE], uint16_t *dh,
                              uint16_t *dminh, uint8_t L[SLM_QK_K]) {
    float sc[8], mn[8], max_sc = 0.0f, max_mn = 0.0f;
    memset(L, 0, SLM_QK_K);
    for (int s = 0; s < 8; s++) {
        const float *xs = x + 32 * s;
        if (fit) fit_scale_min(xs, nmax, nmax == 15 ? -1.0f : -0.5f, nmax == 15 ? 20 : 15, &sc[s], &mn[s], L + 32 * s);
        else {
            float lo = xs[0], hi = xs[0];
            for (int j = 1; j < 32; j++) {
                if (xs[j] < lo) lo = xs[j];
                if (xs[j] > hi) hi = xs[j];
            }
            if (lo > 0.0f) lo = 0.0f; /* the min is stored as a non-negative offset */
            sc[s] = (hi - lo) / (float)nmax;
            mn[s] = -lo;
        }
        if (sc[s] > max_sc) max_sc = sc[s];
        if (mn[s] > max_mn) max_mn = mn[s];
    }
    *dh = slm_f32_to_f16(max_sc / 63.0f);
    *dminh = slm_f32_to_f16(max_mn / 63.0f);
    const float d = slm_f16_to_f32(*dh), dmin = slm_f16_to_f32(*dminh);
    uint8_t isc[8], imn[8];
    for (int s = 0; s < 8; s++) {
        /* 6-bit scales against the unrounded maxima, as GGML's quantize_row_q4_K_ref */
        isc[s] = (uint8_t)(max_sc > 0.0f ? clampi((int)lrintf(63.0f / max_sc * sc[s]), 0, 63) : 0);
        imn[s] = (uint8_t)(max_mn > 0.0f ? clampi((int)lrintf(63.0f / max_mn * mn[s]), 0, 63) : 0);
    }
    memset(scales, 0, SLM_K_SCALE_SIZE);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            scales[j] = isc[j];
            scales[j + 4] = imn[j];
        } else {
            scales[j + 4] = (uint8_t)((isc[j] & 0xF) | ((imn[j] & 0xF) << 4));
            scales[j - 4] |= (uint8_t)((isc[j] >> 4) << 6);
            scales[j] |= (uint8_t)((imn[j] >> 4) << 6);
        }
    }
    for (int s = 0; s < 8; s++) {
        uint8_t a, m;
        slm_get_scale_min_k4(s, scales, &a, &m);
        const float ds = d * a, ms = dmin * m;
        if (!(ds > 0.0f)) continue; /* a zero scale: the codes stay (the fit's, else 0) */
        for (int j = 0; j < 32; j++) /* divided, as GGML does */
            L[32 * s + j] = (uint8_t)clampi((int)lrintf((x[32 * s + j] + ms) / ds), 0, nmax);
    }
}

static void q4_K_row(const float *x, void *vy, int64_t n, int fit) {
    slm_block_q4_K *y = vy;
    uint8_t L[SLM_QK_K];
    for (int64_t b = 0; b < n / SLM_QK_K; b++) {
        quantize_k_scales(x + b * SLM_QK_K, 15, fit, y[b].scales, &y[b].d, &y[b].dmin, L);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) y[b].qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    }
}

static void q5_K_row(const float *x, void *vy, int64_t n, int fit) {
    slm_block_q5_K *y = vy;
    uint8_t L[SLM_QK_K];
    for (int64_t b = 0; b < n / SLM_QK_K; b++) {
        quantize_k_scales(x + b * SLM_QK_K, 31, fit, y[b].scales, &y[b].d, &y[b].dmin, L);
        memset(y[b].qh, 0, sizeof y[b].qh);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
                y[b].qs[32 * c + l] = (uint8_t)((lo & 0xF) | ((hi & 0xF) << 4));
                y[b].qh[l] |= (uint8_t)(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
            }
    }
}

/* Fitted signed scale of 16 values for codes in [-32, 31] (GGML's
 * make_qx_quants with weights x^2, as llama-quantize runs it for Q6_K
 * without an importance matrix, the sums in its order): the value of
 * largest magnitude at -32 (the scale takes its sign), then steps 0.1 code
 * apart from -(32 - 0.9) to -(32 + 0.9), each kept when its least-squares
 * scale explains more of the weighted sum of squares. L gets the codes
 * (+32); 0 and codes 0 for a zero row. */
static float fit_scale_sym(const float *x, uint8_t L[16]) {
    float amax = 0.0f, vmax = 0.0f;
    for (int j = 0; j < 16; j++)
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]), vmax = x[j];
    if (amax < 1e-15f) {
        memset(L, 0, 16);
        return 0.0f;
    }
    float is = -32.0f / vmax, sxl = 0.0f, sll = 0.0f;
    for (int j = 0; j < 16; j++) {
        const int l = clampi((int)slm_round_even(is * x[j]), -32, 31);
        L[j] = (uint8_t)(l + 32);
        const float w = x[j] * x[j];
        sxl += w * x[j] * (float)l, sll += w * (float)l * (float)l;
    }
    float scale = sll != 0.0f ? sxl / sll : 0.0f, best = scale * sxl;
    for (int k = -9; k <= 9; k++) {
        if (!k) continue;
        is = -(32.0f + 0.1f * (float)k) / vmax;
        float a = 0.0f, b = 0.0f;
        int8_t q[16];
        for (int j = 0; j < 16; j++) {
            q[j] = (int8_t)clampi((int)slm_round_even(is * x[j]), -32, 31);
            const float w = x[j] * x[j];
            a += w * x[j] * (float)q[j], b += w * (float)q[j] * (float)q[j];
        }
        if (b > 0.0f && a * a > best * b) {
            for (int j = 0; j < 16; j++) L[j] = (uint8_t)(q[j] + 32);
            scale = a / b, best = scale * a;
        }
    }
    return scale;
}

/* Q6_K with fitted scales: the sub-scales as int8 against the one of
 * largest magnitude at -128, then codes by division (GGML's
 * quantize_row_q6_K_ref); a zero sub-scale keeps the fit's codes. */
static void q6_K_fit_block(const float *xb, slm_block_q6_K *y, uint8_t L[SLM_QK_K]) {
    float sc[16], max_sc = 0.0f, amax_sc = 0.0f;
    for (int s = 0; s < 16; s++) {
        sc[s] = fit_scale_sym(xb + 16 * s, L + 16 * s);
        if (fabsf(sc[s]) > amax_sc) amax_sc = fabsf(sc[s]), max_sc = sc[s];
    }
    if (amax_sc < 1e-15f) {
        memset(y, 0, sizeof *y);
        memset(L, 0, SLM_QK_K);
        return;
    }
    const float is = -128.0f / max_sc;
    y->d = slm_f32_to_f16(1.0f / is);
    for (int s = 0; s < 16; s++) {
        const int v = (int)slm_round_even(is * sc[s]);
        y->scales[s] = (int8_t)(v > 127 ? 127 : v);
    }
    for (int s = 0; s < 16; s++) {
        const float d = slm_f16_to_f32(y->d) * (float)y->scales[s];
        if (d == 0.0f) continue;
        for (int j = 0; j < 16; j++) L[16 * s + j] = (uint8_t)(clampi((int)slm_round_even(xb[16 * s + j] / d), -32, 31) + 32);
    }
}

static void q6_K_row(const float *x, void *vy, int64_t n, int fit) {
    slm_block_q6_K *y = vy;
    for (int64_t b = 0; b < n / SLM_QK_K; b++) {
        const float *xb = x + b * SLM_QK_K;
        uint8_t L[SLM_QK_K];
        if (fit) q6_K_fit_block(xb, &y[b], L);
        else {
            float ssc[16], amax_sc = 0.0f;
            for (int s = 0; s < 16; s++) {
                float amax = 0.0f;
                for (int j = 0; j < 16; j++) amax = fmaxf(amax, fabsf(xb[16 * s + j]));
                ssc[s] = amax / 31.0f;
                if (ssc[s] > amax_sc) amax_sc = ssc[s];
            }
            y[b].d = slm_f32_to_f16(amax_sc / 127.0f);
            const float d = slm_f16_to_f32(y[b].d);
            for (int s = 0; s < 16; s++) {
                int sc = d > 0.0f ? clampi((int)lrintf(ssc[s] / d), 0, 127) : 0;
                y[b].scales[s] = (int8_t)sc;
                const float ds = d * sc, id = ds > 0.0f ? 1.0f / ds : 0.0f;
                for (int j = 0; j < 16; j++) L[16 * s + j] = (uint8_t)(clampi((int)lrintf(xb[16 * s + j] * id), -32, 31) + 32);
            }
        }
        for (int h = 0; h < 2; h++) {
            const uint8_t *Lh = L + 128 * h;
            uint8_t *ql = y[b].ql + 64 * h, *qh = y[b].qh + 32 * h;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
                ql[l + 32] = (uint8_t)((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
                qh[l] = (uint8_t)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) |
                                  ((Lh[l + 96] >> 4) << 6));
            }
        }
    }
}

void slm_quantize_row_q4_K(const float *x, void *vy, int64_t n) { q4_K_row(x, vy, n, 0); }
void slm_quantize_row_q5_K(const float *x, void *vy, int64_t n) { q5_K_row(x, vy, n, 0); }
void slm_quantize_row_q6_K(const float *x, void *vy, int64_t n) { q6_K_row(x, vy, n, 0); }

/* The level nearest x at scale d, the lowest index on a tie (GGML's
 * best_index_mxfp4: the same float expression, so the same choices). */
static int mxfp4_index(float x, float d) {
    int best = 0;
    float best_err = fabsf(slm_kvalues_mxfp4[0] * d - x);
    for (int i = 1; i < 16; i++) {
        const float err = fabsf(slm_kvalues_mxfp4[i] * d - x);
        if (err < best_err) best = i, best_err = err;
    }
    return best;
}

void slm_quantize_row_mxfp4(const float *x, void *vy, int64_t n) {
    slm_block_mxfp4 *y = vy;
    for (int64_t b = 0; b < n / SLM_QK_MXFP4; b++) {
        const float *xb = x + b * SLM_QK_MXFP4;
        float amax = 0.0f;
        for (int j = 0; j < SLM_QK_MXFP4; j++)
            if (amax < fabsf(xb[j])) amax = fabsf(xb[j]);
        /* d = 2^(floor(log2(amax)) - 3): amax / d in [8, 16), the top levels 8 and 12 (above 12 d it clamps) */
        const float ef = amax > 0.0f ? floorf(log2f(amax)) - 2 + 127 : 0.0f;
        const uint8_t e = (uint8_t)(ef > 0.0f ? ef : 0.0f);
        const float d = slm_e8m0_to_f32_half(e);
        y[b].e = e;
        for (int j = 0; j < SLM_QK_MXFP4 / 2; j++)
            y[b].qs[j] = (uint8_t)(mxfp4_index(xb[j], d) | mxfp4_index(xb[j + 16], d) << 4);
    }
}

int slm_quantize_row(uint32_t t, const float *x, void *vy, int64_t n) {
    const slm_dtype_info *info = slm_dtype_get(t);
    if (!info || n % info->block) return 0;
    switch (t) {
    case SLM_F32: memcpy(vy, x, (size_t)n * 4); return 1;
    case SLM_F16: for (int64_t i = 0; i < n; i++) ((uint16_t *)vy)[i] = slm_f32_to_f16(x[i]); return 1;
    case SLM_BF16: for (int64_t i = 0; i < n; i++) ((uint16_t *)vy)[i] = slm_f32_to_bf16(x[i]); return 1;
    case SLM_Q8_0: slm_quantize_row_q8_0(x, vy, n); return 1;
    case SLM_Q4_0: slm_quantize_row_q4_0(x, vy, n); return 1;
    case SLM_Q4_1: slm_quantize_row_q4_1(x, vy, n); return 1;
    case SLM_Q5_0: slm_quantize_row_q5_0(x, vy, n); return 1;
    case SLM_Q5_1: slm_quantize_row_q5_1(x, vy, n); return 1;
    case SLM_Q4_K: slm_quantize_row_q4_K(x, vy, n); return 1;
    case SLM_Q5_K: slm_quantize_row_q5_K(x, vy, n); return 1;
    case SLM_Q6_K: slm_quantize_row_q6_K(x, vy, n); return 1;
    case SLM_MXFP4: slm_quantize_row_mxfp4(x, vy, n); return 1;
    case SLM_IQ4_NL: slm_quantize_row_iq4_nl(x, vy, n); return 1;
    case SLM_IQ4_XS: slm_quantize_row_iq4_xs(x, vy, n); return 1;
    default: return 0;
    }
}

int slm_quantize_row_fit(uint32_t t, const float *x, void *vy, int64_t n) {
    const slm_dtype_info *info = slm_dtype_get(t);
    if (!info || n % info->block) return 0;
    switch (t) {
    case SLM_Q4_K: q4_K_row(x, vy, n, 1); return 1;
    case SLM_Q5_K: q5_K_row(x, vy, n, 1); return 1;
    case SLM_Q6_K: q6_K_row(x, vy, n, 1); return 1;
    default: return slm_quantize_row(t, x, vy, n);
    }
}

/* The types llama-quantize's mixes add (GGML's dequantize_row_q5_0, _q5_1,
 * _iq4_nl, _iq4_xs, _q2_K, _q3_K: the same products in the same order). */
static void dequantize_q5(int one, const void *vx, float *y, int64_t n) {
    for (int64_t b = 0; b < n / SLM_QK5_0; b++, y += SLM_QK5_0) {
        const slm_block_q5_0 *x0 = (const slm_block_q5_0 *)vx + b;
        const slm_block_q5_1 *x1 = (const slm_block_q5_1 *)vx + b;
        const uint8_t *qhb = one ? x1->qh : x0->qh, *qs = one ? x1->qs : x0->qs;
        const float d = slm_f16_to_f32(one ? x1->d : x0->d), m = one ? slm_f16_to_f32(x1->m) : 0.0f;
        const uint32_t qh = (uint32_t)qhb[0] | (uint32_t)qhb[1] << 8 | (uint32_t)qhb[2] << 16 | (uint32_t)qhb[3] << 24;
        for (int j = 0; j < 16; j++) {
            const int q0 = (qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
            const int q1 = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            if (one) {
                y[j] = q0 * d + m;
                y[j + 16] = q1 * d + m;
            } else {
                y[j] = (q0 - 16) * d;
                y[j + 16] = (q1 - 16) * d;
            }
        }
    }
}

static void dequantize_iq4_nl(const void *vx, float *y, int64_t n) {
    const slm_block_iq4_nl *x = vx;
    for (int64_t b = 0; b < n / SLM_QK4_NL; b++, y += SLM_QK4_NL) {
        const float d = slm_f16_to_f32(x[b].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * slm_kvalues_iq4nl[x[b].qs[j] & 0xF];
            y[j + 16] = d * slm_kvalues_iq4nl[x[b].qs[j] >> 4];
        }
    }
}

/* GGML's dequantize_row_mxfp4: level times the halved E8M0 scale. */
static void dequantize_mxfp4(const void *vx, float *y, int64_t n) {
    const slm_block_mxfp4 *x = vx;
    for (int64_t b = 0; b < n / SLM_QK_MXFP4; b++, y += SLM_QK_MXFP4) {
        const float d = slm_e8m0_to_f32_half(x[b].e);
        for (int j = 0; j < 16; j++) {
            y[j] = slm_kvalues_mxfp4[x[b].qs[j] & 0xF] * d;
            y[j + 16] = slm_kvalues_mxfp4[x[b].qs[j] >> 4] * d;
        }
    }
}

static void dequantize_iq4_xs(const void *vx, float *y, int64_t n) {
    const slm_block_iq4_xs *x = vx;
    for (int64_t b = 0; b < n / SLM_QK_K; b++) {
        const float d = slm_f16_to_f32(x[b].d);
        for (int s = 0; s < 8; s++, y += 32) {
            const int ls = ((x[b].scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((x[b].scales_h >> (2 * s)) & 3) << 4);
            const float dl = d * (float)(ls - 32);
            const uint8_t *qs = x[b].qs + 16 * s;
            for (int j = 0; j < 16; j++) {
                y[j] = dl * slm_kvalues_iq4nl[qs[j] & 0xF];
                y[j + 16] = dl * slm_kvalues_iq4nl[qs[j] >> 4];
            }
        }
    }
}

static void dequantize_q2_K(const void *vx, float *y, int64_t n) {
    const slm_block_q2_K *x = vx;
    for (int64_t b = 0; b < n / SLM_QK_K; b++) {
        const float d = slm_f16_to_f32(x[b].d), dmin = slm_f16_to_f32(x[b].dmin);
        for (int e = 0; e < SLM_QK_K; e += 16, y += 16) {
            const int s = e / 16, h = e / 128, j = (e % 128) / 32, l0 = e % 32;
            const float dl = d * (float)(x[b].scales[s] & 0xF), ml = dmin * (float)(x[b].scales[s] >> 4);
            for (int l = 0; l < 16; l++) y[l] = dl * (float)((x[b].qs[32 * h + l0 + l] >> (2 * j)) & 3) - ml;
        }
    }
}

static void dequantize_q3_K(const void *vx, float *y, int64_t n) {
    const slm_block_q3_K *x = vx;
    for (int64_t b = 0; b < n / SLM_QK_K; b++) {
        const float d = slm_f16_to_f32(x[b].d);
        for (int e = 0; e < SLM_QK_K; e += 16, y += 16) {
            const int s = e / 16, h = e / 128, j = (e % 128) / 32, l0 = e % 32;
            const float dl = d * (float)(slm_get_scale_q3_k(s, x[b].scales) - 32);
            for (int l = 0; l < 16; l++) {
                const int lo = (x[b].qs[32 * h + l0 + l] >> (2 * j)) & 3;
                const int hi = (x[b].hmask[l0 + l] >> (4 * h + j)) & 1;
                y[l] = dl * (float)(lo - (hi ? 0 : 4));
            }
        }
    }
}

int slm_dequantize_row(uint32_t t, const void *vx, float *y, int64_t n) {
    switch (t) {
    case SLM_F32:
        memcpy(y, vx, (size_t)n * 4);
        return 1;
    case SLM_F16: {
        const uint16_t *x = vx;
        for (int64_t i = 0; i < n; i++) y[i] = slm_f16_to_f32(x[i]);
        return 1;
    }
    case SLM_BF16: {
        const uint16_t *x = vx;
        for (int64_t i = 0; i < n; i++) y[i] = slm_bf16_to_f32(x[i]);
        return 1;
    }
    case SLM_Q8_0: {
        const slm_block_q8_0 *x = vx;
        for (int64_t b = 0; b < n / SLM_QK8_0; b++) {
            const float d = slm_f16_to_f32(x[b].d);
            for (int j = 0; j < SLM_QK8_0; j++) y[b * SLM_QK8_0 + j] = x[b].qs[j] * d;
        }
        return 1;
    }
    case SLM_Q4_0: {
        const slm_block_q4_0 *x = vx;
        for (int64_t b = 0; b < n / SLM_QK4_0; b++, y += SLM_QK4_0) {
            const float d = slm_f16_to_f32(x[b].d);
            for (int j = 0; j < 16; j++) {
                y[j] = ((x[b].qs[j] & 0xF) - 8) * d;
                y[j + 16] = ((x[b].qs[j] >> 4) - 8) * d;
            }
        }
        return 1;
    }
    case SLM_Q4_1: {
        const slm_block_q4_1 *x = vx;
        for (int64_t b = 0; b < n / SLM_QK4_1; b++, y += SLM_QK4_1) {
            const float d = slm_f16_to_f32(x[b].d), m = slm_f16_to_f32(x[b].m);
            for (int j = 0; j < 16; j++) {
                y[j] = (x[b].qs[j] & 0xF) * d + m;
                y[j + 16] = (x[b].qs[j] >> 4) * d + m;
            }
        }
        return 1;
    }
    case SLM_Q5_0: case SLM_Q5_1: dequantize_q5(t == SLM_Q5_1, vx, y, n); return 1;
    case SLM_IQ4_NL: dequantize_iq4_nl(vx, y, n); return 1;
    case SLM_MXFP4: dequantize_mxfp4(vx, y, n); return 1;
    case SLM_IQ4_XS: dequantize_iq4_xs(vx, y, n); return 1;
    case SLM_Q2_K: dequantize_q2_K(vx, y, n); return 1;
    case SLM_Q3_K: dequantize_q3_K(vx, y, n); return 1;
    case SLM_IQ2_XXS: case SLM_IQ2_XS: case SLM_IQ2_S: case SLM_IQ3_XXS: case SLM_IQ3_S: case SLM_IQ1_S:
    case SLM_IQ1_M: return slm_dequantize_iq(t, vx, y, n);
    case SLM_Q4_K:
    case SLM_Q5_K: {
        const int five = t == SLM_Q5_K;
        for (int64_t b = 0; b < n / SLM_QK_K; b++) {
            const slm_block_q4_K *x4 = (const slm_block_q4_K *)vx + b;
            const slm_block_q5_K *x5 = (const slm_block_q5_K *)vx + b;
            const uint8_t *scales = five ? x5->scales : x4->scales, *qs = five ? x5->qs : x4->qs;
            const float d = slm_f16_to_f32(five ? x5->d : x4->d), dmin = slm_f16_to_f32(five ? x5->dmin : x4->dmin);
            for (int c = 0; c < 4; c++) {
                uint8_t sc, m;
                for (int h = 0; h < 2; h++) {
                    slm_get_scale_min_k4(2 * c + h, scales, &sc, &m);
                    const float ds = d * sc, ms = dmin * m;
                    for (int l = 0; l < 32; l++) {
                        int q = h ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 0xF;
                        if (five) q += ((x5->qh[l] >> (2 * c + h)) & 1) << 4;
                        *y++ = ds * q - ms;
                    }
                }
            }
        }
        return 1;
    }
    case SLM_Q6_K: {
        const slm_block_q6_K *x = vx;
        for (int64_t b = 0; b < n / SLM_QK_K; b++) {
            const float d = slm_f16_to_f32(x[b].d);
            for (int h = 0; h < 2; h++, y += 128) {
                const uint8_t *ql = x[b].ql + 64 * h, *qh = x[b].qh + 32 * h;
                const int8_t *sc = x[b].scales + 8 * h;
                for (int l = 0; l < 32; l++) {
                    const int is = l / 16;
                    const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                    const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                    const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                    const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                    y[l] = d * sc[is] * q1;
                    y[l + 32] = d * sc[is + 2] * q2;
                    y[l + 64] = d * sc[is + 4] * q3;
                    y[l + 96] = d * sc[is + 6] * q4;
                }
            }
        }
        return 1;
    }
    default:
        return 0;
    }
}
