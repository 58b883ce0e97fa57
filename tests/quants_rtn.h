/* Round-to-nearest quantizers for the tests of Q5_0, Q5_1, IQ4_NL, IQ4_XS,
 * Q2_K, Q3_K and the i-quants IQ2_XXS .. IQ1_M: written from GGML's block
 * layouts (common/dtype.h) with no search for the best scales (the engine only reads these types; a test
 * needs weights of them). rtn_quantize_row returns 0 for other types. */
#ifndef SLM_TESTS_QUANTS_RTN_H
#define SLM_TESTS_QUANTS_RTN_H

#include <math.h>
#include <string.h>

#include "common/dtype.h"

static inline int rtn_clamp(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The value of largest magnitude, with its sign. */
static inline float rtn_signed_max(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), max = x[i];
    return max;
}

static inline int rtn_nearest_iq4(float v) {
    int best = 0;
    for (int i = 1; i < 16; i++)
        if (fabsf(v - slm_kvalues_iq4nl[i]) < fabsf(v - slm_kvalues_iq4nl[best])) best = i;
    return best;
}

/* Q5_0 / Q5_1: 32 codes of 5 bits; q_e -> nibble of byte e % 16 (low for
 * e < 16), fifth bit at bit e of qh. */
static inline void rtn_pack5(const int q[32], uint8_t qs[16], uint8_t qh[4]) {
    memset(qh, 0, 4);
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
    for (int e = 0; e < 32; e++) qh[e / 8] |= (uint8_t)(((q[e] >> 4) & 1) << (e % 8));
}

static inline void rtn_q5_0(const float *x, slm_block_q5_0 *y) {
    const uint16_t dh = slm_f32_to_f16(rtn_signed_max(x, 32) / -16.0f);
    const float d = slm_f16_to_f32(dh), id = d != 0.0f ? 1.0f / d : 0.0f;
    int q[32];
    for (int e = 0; e < 32; e++) q[e] = rtn_clamp((int)lrintf(x[e] * id) + 16, 0, 31);
    y->d = dh;
    rtn_pack5(q, y->qs, y->qh);
}

static inline void rtn_q5_1(const float *x, slm_block_q5_1 *y) {
    float mn = x[0], mx = x[0];
    for (int e = 1; e < 32; e++) mn = fminf(mn, x[e]), mx = fmaxf(mx, x[e]);
    y->d = slm_f32_to_f16((mx - mn) / 31.0f);
    y->m = slm_f32_to_f16(mn);
    const float d = slm_f16_to_f32(y->d), m = slm_f16_to_f32(y->m), id = d != 0.0f ? 1.0f / d : 0.0f;
    int q[32];
    for (int e = 0; e < 32; e++) q[e] = rtn_clamp((int)lrintf((x[e] - m) * id), 0, 31);
    rtn_pack5(q, y->qs, y->qh);
}

static inline void rtn_iq4(const float *x, float d, uint8_t qs[16]) {
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)(rtn_nearest_iq4(x[j] * id) | (rtn_nearest_iq4(x[j + 16] * id) << 4));
}

static inline void rtn_iq4_nl(const float *x, slm_block_iq4_nl *y) {
    y->d = slm_f32_to_f16(rtn_signed_max(x, 32) / -127.0f);
    rtn_iq4(x, slm_f16_to_f32(y->d), y->qs);
}

static inline void rtn_iq4_xs(const float *x, slm_block_iq4_xs *y) {
    float sc[8], amax = 0.0f;
    for (int s = 0; s < 8; s++) {
        sc[s] = rtn_signed_max(x + 32 * s, 32) / -127.0f;
        amax = fmaxf(amax, fabsf(sc[s]));
    }
    y->d = slm_f32_to_f16(amax / 32.0f);
    const float d = slm_f16_to_f32(y->d);
    y->scales_h = 0;
    memset(y->scales_l, 0, sizeof y->scales_l);
    for (int s = 0; s < 8; s++) {
        const int ls = (d > 0.0f ? rtn_clamp((int)lrintf(sc[s] / d), -32, 31) : 0) + 32;
        y->scales_l[s / 2] |= (uint8_t)((ls & 0xF) << (4 * (s % 2)));
        y->scales_h |= (uint16_t)((ls >> 4) << (2 * s));
        rtn_iq4(x + 32 * s, d * (float)(ls - 32), y->qs + 16 * s);
    }
}

/* Q2_K / Q3_K: element 128h + 32j + l keeps its 2 low bits at bit 2j of
 * qs[32h + l]. */
static inline void rtn_q2_K(const float *x, slm_block_q2_K *y) {
    float sc[16], mn[16], msc = 0.0f, mmn = 0.0f;
    for (int s = 0; s < 16; s++) {
        float lo = 0.0f, hi = x[16 * s];
        for (int l = 0; l < 16; l++) lo = fminf(lo, x[16 * s + l]), hi = fmaxf(hi, x[16 * s + l]);
        sc[s] = (hi - lo) / 3.0f, mn[s] = -lo;
        msc = fmaxf(msc, sc[s]), mmn = fmaxf(mmn, mn[s]);
    }
    y->d = slm_f32_to_f16(msc / 15.0f);
    y->dmin = slm_f32_to_f16(mmn / 15.0f);
    const float d = slm_f16_to_f32(y->d), dmin = slm_f16_to_f32(y->dmin);
    memset(y->qs, 0, sizeof y->qs);
    for (int s = 0; s < 16; s++) {
        const int is = d > 0.0f ? rtn_clamp((int)lrintf(sc[s] / d), 0, 15) : 0;
        const int im = dmin > 0.0f ? rtn_clamp((int)lrintf(mn[s] / dmin), 0, 15) : 0;
        y->scales[s] = (uint8_t)(is | (im << 4));
        const float ds = d * (float)is, ms = dmin * (float)im, id = ds > 0.0f ? 1.0f / ds : 0.0f;
        for (int l = 0; l < 16; l++) {
            const int e = 16 * s + l, q = rtn_clamp((int)lrintf((x[e] + ms) * id), 0, 3);
            y->qs[32 * (e / 128) + e % 32] |= (uint8_t)(q << (2 * ((e % 128) / 32)));
        }
    }
}

static inline void rtn_q3_K(const float *x, slm_block_q3_K *y) {
    float sc[16], amax = 0.0f;
    for (int s = 0; s < 16; s++) {
        sc[s] = rtn_signed_max(x + 16 * s, 16) / -4.0f;
        amax = fmaxf(amax, fabsf(sc[s]));
    }
    y->d = slm_f32_to_f16(amax / 32.0f);
    const float d = slm_f16_to_f32(y->d);
    memset(y->qs, 0, sizeof y->qs);
    memset(y->hmask, 0, sizeof y->hmask);
    memset(y->scales, 0, sizeof y->scales);
    for (int s = 0; s < 16; s++) {
        const int is = d > 0.0f ? rtn_clamp((int)lrintf(sc[s] / d), -32, 31) : 0, u6 = is + 32;
        if (s < 8) y->scales[s] |= (uint8_t)(u6 & 0xF);
        else y->scales[s - 8] |= (uint8_t)((u6 & 0xF) << 4);
        y->scales[8 + s % 4] |= (uint8_t)((u6 >> 4) << (2 * (s / 4)));
        const float ds = d * (float)is, id = ds != 0.0f ? 1.0f / ds : 0.0f;
        for (int l = 0; l < 16; l++) {
            const int e = 16 * s + l, h = e / 128, j = (e % 128) / 32;
            const int u = rtn_clamp((int)lrintf(x[e] * id), -4, 3) + 4; /* q + 4: low 2 bits, and bit 2 in hmask */
            y->qs[32 * h + e % 32] |= (uint8_t)((u & 3) << (2 * j));
            y->hmask[e % 32] |= (uint8_t)((u >> 2) << (4 * h + j));
        }
    }
}

/* ---- the i-quants (IQ2_XXS .. IQ1_M): nearest grid entry per group -------
 * A scale per sub-block maps its largest magnitude onto the grid's largest
 * level; each group of 8 (4 for the IQ3 grids) takes the entry nearest its
 * magnitudes, the signs come from x; where only 7 sign bits are stored the
 * smallest element gives up its sign to keep the count of negatives even. */

/* Index of the entry of grid (n entries of 8 bytes) nearest a[0..7]. */
static inline int rtn_iq_near8(const uint64_t *grid, int n, const float *a) {
    int best = 0;
    float be = INFINITY;
    for (int i = 0; i < n; i++) {
        const uint8_t *g = (const uint8_t *)&grid[i];
        float e = 0.0f;
        for (int j = 0; j < 4; j++) e += (a[j] - g[j]) * (a[j] - g[j]);
        if (e >= be) continue; /* the sum only grows: this entry cannot be nearer (the same index as without) */
        for (int j = 4; j < 8; j++) e += (a[j] - g[j]) * (a[j] - g[j]);
        if (e < be) be = e, best = i;
    }
    return best;
}

static inline int rtn_iq_near4(const uint32_t *grid, int n, const float *a) {
    int best = 0;
    float be = INFINITY;
    for (int i = 0; i < n; i++) {
        const uint8_t *g = (const uint8_t *)&grid[i];
        float e = 0.0f;
        for (int j = 0; j < 4; j++) e += (a[j] - g[j]) * (a[j] - g[j]);
        if (e < be) be = e, best = i;
    }
    return best;
}

/* Sign bits of x[0..7] (bit j: x[j] < 0); with even, the smallest element's
 * bit flipped where the count is odd (its sign is then wrong). */
static inline unsigned rtn_iq_signs(const float *x, int even) {
    unsigned s = 0;
    int small = 0;
    for (int j = 0; j < 8; j++) {
        if (x[j] < 0.0f) s |= 1u << j;
        if (fabsf(x[j]) < fabsf(x[small])) small = j;
    }
    if (even && __builtin_parity(s)) s ^= 1u << small;
    return s;
}

static inline float rtn_amax(const float *x, int n) {
    float a = 0.0f;
    for (int i = 0; i < n; i++) a = fmaxf(a, fabsf(x[i]));
    return a;
}

/* A 4-bit scale ls of the IQ2/IQ3 form d * (0.5 + ls) * f nearest want. */
static inline int rtn_iq_ls(float want, float d, float f) {
    return d > 0.0f ? rtn_clamp((int)lrintf(want / (d * f) - 0.5f), 0, 15) : 0;
}

/* Group l's magnitudes over dl (zero where dl is). */
static inline void rtn_iq_mag(const float *x, float dl, float *a, int n) {
    for (int j = 0; j < n; j++) a[j] = dl > 0.0f ? fabsf(x[j]) / dl : 0.0f;
}

/* IQ2_XXS, IQ2_XS, IQ2_S: grid levels up to 43, dl = d * (0.5 + ls) / 4
 * per sub-block (IQ2_XXS) or per 16 elements. */
static inline void rtn_iq2(uint32_t t, const float *x, void *yv) {
    const slm_iq_grids *g = slm_iq_grids_get();
    float want[16], top = 0.0f;
    for (int h = 0; h < 16; h++) {
        want[h] = t == SLM_IQ2_XXS ? rtn_amax(x + 32 * (h / 2), 32) / 43.0f : rtn_amax(x + 16 * h, 16) / 43.0f;
        top = fmaxf(top, want[h]);
    }
    const uint16_t dh = slm_f32_to_f16(top * 4.0f / 15.5f);
    const float d = slm_f16_to_f32(dh);
    int ls[16];
    for (int h = 0; h < 16; h++) ls[h] = rtn_iq_ls(want[h], d, 0.25f);
    slm_block_iq2_xxs *a = yv;
    slm_block_iq2_xs *b = yv;
    slm_block_iq2_s *c = yv;
    if (t == SLM_IQ2_XXS) a->d = dh;
    else if (t == SLM_IQ2_XS) b->d = dh;
    else c->d = dh, memset(c->qh, 0, sizeof c->qh);
    for (int s = 0; s < 8; s++) {
        uint32_t w0 = 0, w1 = (uint32_t)ls[2 * s] << 28;
        if (t != SLM_IQ2_XXS) {
            const uint8_t sc = (uint8_t)(ls[2 * s] | ls[2 * s + 1] << 4);
            if (t == SLM_IQ2_XS) b->scales[s] = sc;
            else c->scales[s] = sc;
        }
        for (int l = 0; l < 4; l++) {
            const float *xg = x + 32 * s + 8 * l;
            const float dl = d * (0.5f + (float)ls[t == SLM_IQ2_XXS ? 2 * s : 2 * s + l / 2]) * 0.25f;
            float m[8];
            rtn_iq_mag(xg, dl, m, 8);
            const unsigned sg = rtn_iq_signs(xg, t != SLM_IQ2_S);
            if (t == SLM_IQ2_XXS) {
                w0 |= (uint32_t)rtn_iq_near8(g->iq2xxs, 256, m) << (8 * l);
                w1 |= (sg & 127) << (7 * l);
            } else if (t == SLM_IQ2_XS) {
                b->qs[4 * s + l] = (uint16_t)(rtn_iq_near8(g->iq2xs, 512, m) | (sg & 127) << 9);
            } else {
                const int idx = rtn_iq_near8(g->iq2s, 1024, m);
                c->qs[4 * s + l] = (uint8_t)idx;
                c->qh[s] |= (uint8_t)((idx >> 8) << (2 * l));
                c->qs[32 + 4 * s + l] = (uint8_t)sg;
            }
        }
        if (t == SLM_IQ2_XXS) memcpy(a->qs + 4 * s, (uint32_t[2]){w0, w1}, 8);
    }
}

/* IQ3_XXS: levels up to 62, dl = d * (0.5 + ls) / 2; IQ3_S: levels up to
 * 15, dl = d * (1 + 2 * nibble). */
static inline void rtn_iq3(uint32_t t, const float *x, void *yv) {
    const slm_iq_grids *g = slm_iq_grids_get();
    const int xxs = t == SLM_IQ3_XXS;
    float want[8], top = 0.0f;
    for (int s = 0; s < 8; s++) top = fmaxf(top, want[s] = rtn_amax(x + 32 * s, 32) / (xxs ? 62.0f : 15.0f));
    const uint16_t dh = slm_f32_to_f16(xxs ? top * 2.0f / 15.5f : top / 31.0f);
    const float d = slm_f16_to_f32(dh);
    slm_block_iq3_xxs *a = yv;
    slm_block_iq3_s *b = yv;
    if (xxs) a->d = dh;
    else b->d = dh, memset(b->qh, 0, sizeof b->qh), memset(b->scales, 0, sizeof b->scales);
    for (int s = 0; s < 8; s++) {
        const int ls = xxs ? rtn_iq_ls(want[s], d, 0.5f)
                           : (d > 0.0f ? rtn_clamp((int)lrintf((want[s] / d - 1.0f) / 2.0f), 0, 15) : 0);
        const float dl = xxs ? d * (0.5f + (float)ls) * 0.5f : d * (float)(1 + 2 * ls);
        uint32_t w = (uint32_t)ls << 28;
        if (!xxs) b->scales[s / 2] |= (uint8_t)(ls << (4 * (s % 2)));
        for (int l = 0; l < 4; l++) {
            const float *xg = x + 32 * s + 8 * l;
            float m[8];
            rtn_iq_mag(xg, dl, m, 8);
            const unsigned sg = rtn_iq_signs(xg, xxs);
            for (int hf = 0; hf < 2; hf++) {
                const int idx = xxs ? rtn_iq_near4(g->iq3xxs, 256, m + 4 * hf) : rtn_iq_near4(g->iq3s, 512, m + 4 * hf);
                if (xxs) a->qs[8 * s + 2 * l + hf] = (uint8_t)idx;
                else {
                    b->qs[8 * s + 2 * l + hf] = (uint8_t)idx;
                    b->qh[s] |= (uint8_t)((idx >> 8) << (2 * l + hf));
                }
            }
            if (xxs) w |= (sg & 127) << (7 * l);
            else b->signs[4 * s + l] = (uint8_t)sg;
        }
        if (xxs) memcpy(a->qs + 64 + 4 * s, &w, 4);
    }
}

/* Group of 8 of an IQ1 type: the entry and delta sign (1: -1/8) nearest
 * x / dl; returns the squared error, *idx the entry. */
static inline float rtn_iq1_group(const float *x, float dl, int neg, int *idx) {
    const slm_iq_grids *g = slm_iq_grids_get();
    const float delta = neg ? -0.125f : 0.125f;
    float be = INFINITY;
    for (int i = 0; i < 2048; i++) {
        const int8_t *gr = (const int8_t *)&g->iq1s8[i];
        float e = 0.0f;
        for (int j = 0; j < 8; j++) {
            const float v = dl * ((float)(gr[j] / 8) + delta) - x[j];
            e += v * v;
        }
        if (e < be) be = e, *idx = i;
    }
    return be;
}

/* IQ1_S: dl = d * (2u + 1) per sub-block, one delta sign per sub-block. */
static inline void rtn_iq1_s(const float *x, slm_block_iq1_s *y) {
    float want[8], top = 0.0f;
    for (int s = 0; s < 8; s++) top = fmaxf(top, want[s] = rtn_amax(x + 32 * s, 32) / 1.125f);
    y->d = slm_f32_to_f16(top / 15.0f);
    const float d = slm_f16_to_f32(y->d);
    for (int s = 0; s < 8; s++) {
        const int u = d > 0.0f ? rtn_clamp((int)lrintf((want[s] / d - 1.0f) / 2.0f), 0, 7) : 0;
        const float dl = d * (float)(2 * u + 1);
        int best[2][4];
        float err[2] = {0.0f, 0.0f};
        for (int neg = 0; neg < 2; neg++)
            for (int l = 0; l < 4; l++) err[neg] += rtn_iq1_group(x + 32 * s + 8 * l, dl, neg, &best[neg][l]);
        const int neg = err[1] < err[0];
        uint16_t qh = (uint16_t)(u << 12 | neg << 15);
        for (int l = 0; l < 4; l++) {
            y->qs[4 * s + l] = (uint8_t)best[neg][l];
            qh |= (uint16_t)((best[neg][l] >> 8) << (3 * l));
        }
        y->qh[s] = qh;
    }
}

/* IQ1_M: dl = d * (2 s3 + 1) per 16 elements, a delta sign per group; d's
 * f16 bits in the top nibbles of the four scale words. */
static inline void rtn_iq1_m(const float *x, slm_block_iq1_m *y) {
    float want[16], top = 0.0f;
    for (int h = 0; h < 16; h++) top = fmaxf(top, want[h] = rtn_amax(x + 16 * h, 16) / 1.125f);
    const uint16_t dh = slm_f32_to_f16(top / 15.0f);
    const float d = slm_f16_to_f32(dh);
    uint16_t sc[4] = {0, 0, 0, 0};
    memset(y->qh, 0, sizeof y->qh);
    for (int h = 0; h < 16; h++) {
        const int s3 = d > 0.0f ? rtn_clamp((int)lrintf((want[h] / d - 1.0f) / 2.0f), 0, 7) : 0;
        sc[h / 4] |= (uint16_t)(s3 << (3 * (h % 4)));
        const float dl = d * (float)(2 * s3 + 1);
        for (int l2 = 0; l2 < 2; l2++) {
            const int grp = 2 * h + l2; /* group of 8: sub-block grp / 4, l = grp % 4 */
            int i0 = 0, i1 = 0;
            const float e0 = rtn_iq1_group(x + 8 * grp, dl, 0, &i0), e1 = rtn_iq1_group(x + 8 * grp, dl, 1, &i1);
            const int neg = e1 < e0, idx = neg ? i1 : i0;
            y->qs[grp] = (uint8_t)idx;
            y->qh[grp / 2] |= (uint8_t)(((idx >> 8) | neg << 3) << (4 * (grp % 2)));
        }
    }
    for (int i = 0; i < 4; i++) sc[i] |= (uint16_t)(((dh >> (4 * i)) & 0xF) << 12);
    memcpy(y->scales, sc, 8);
}

/* One row of n elements (a multiple of the type's block) of type t. */
static inline int rtn_quantize_row(uint32_t t, const float *x, void *y, int64_t n) {
    const slm_dtype_info *in = slm_dtype_get(t);
    if (!in || n % in->block) return 0;
    for (int64_t b = 0; b < n / in->block; b++) {
        const float *xb = x + b * in->block;
        void *yb = (uint8_t *)y + b * in->bytes;
        switch (t) {
        case SLM_Q5_0: rtn_q5_0(xb, yb); break;
        case SLM_Q5_1: rtn_q5_1(xb, yb); break;
        case SLM_IQ4_NL: rtn_iq4_nl(xb, yb); break;
        case SLM_IQ4_XS: rtn_iq4_xs(xb, yb); break;
        case SLM_Q2_K: rtn_q2_K(xb, yb); break;
        case SLM_Q3_K: rtn_q3_K(xb, yb); break;
        case SLM_IQ2_XXS: case SLM_IQ2_XS: case SLM_IQ2_S: rtn_iq2(t, xb, yb); break;
        case SLM_IQ3_XXS: case SLM_IQ3_S: rtn_iq3(t, xb, yb); break;
        case SLM_IQ1_S: rtn_iq1_s(xb, yb); break;
        case SLM_IQ1_M: rtn_iq1_m(xb, yb); break;
        default: return slm_quantize_row(t, x, y, n);
        }
    }
    return 1;
}

#endif
