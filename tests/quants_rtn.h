/* Round-to-nearest quantizers for the tests of Q5_0, Q5_1, IQ4_NL, IQ4_XS,
 * Q2_K and Q3_K: written from GGML's block layouts (common/dtype.h) with no
 * search for the best scales (the engine only reads these types; a test
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
        default: return slm_quantize_row(t, x, y, n);
        }
    }
    return 1;
}

#endif
