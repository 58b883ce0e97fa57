/* The non-linear 4-bit quantizers: IQ4_NL (blocks of 32, an f16 scale) and
 * IQ4_XS (super-blocks of 256: eight 6-bit sub-block scales under an f16
 * one), the types llama-quantize writes for its IQ4_NL and IQ4_XS file
 * types. Without an importance matrix each element weighs x^2; a block's
 * scale is the weighted least-squares step of its codes, tried from the
 * largest element mapped onto each of 15 levels near the first (-127) and
 * kept where it explains the most; codes are the nearest of
 * slm_kvalues_iq4nl to x / step. The arithmetic (float sums in element
 * order, the choice between two levels) is GGML's quantize_iq4_nl /
 * quantize_iq4_xs at ntry 7, so the bytes match llama-quantize's
 * (docs/benchmarks.md, "Quantizing at compile time"). */
#include <math.h>
#include <string.h>

#include "dtype.h"

/* The index of the level nearest x (the lower one on a tie). */
static int nearest_level(float x) {
    const int8_t *v = slm_kvalues_iq4nl;
    if (x <= v[0]) return 0;
    if (x >= v[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < v[mid]) hi = mid;
        else lo = mid;
    }
    return x - v[hi - 1] < v[hi] - x ? hi - 1 : hi;
}

enum { IQ4_TRIES = 7 };

/* The scale of the 32 values x (codes into L), 0 when they are all ~0. */
static float block_scale(const float *x, uint8_t *L) {
    float w[32], amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++) {
        w[j] = x[j] * x[j];
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
    }
    if (amax < 1e-15f) return 0.0f;
    const float v0 = slm_kvalues_iq4nl[0];
    float d = -max / v0, id = 1.0f / d, sqx = 0.0f, sq2 = 0.0f;
    for (int j = 0; j < 32; j++) {
        const int l = nearest_level(id * x[j]);
        const float q = slm_kvalues_iq4nl[l];
        L[j] = (uint8_t)l;
        sqx += w[j] * q * x[j];
        sq2 += w[j] * q * q;
    }
    d = sq2 > 0 ? sqx / sq2 : 0.0f;
    float best = d * sqx;
    for (int t = -IQ4_TRIES; t <= IQ4_TRIES; t++) {
        id = ((float)t + v0) / max;
        sqx = sq2 = 0.0f;
        for (int j = 0; j < 32; j++) {
            const float q = slm_kvalues_iq4nl[nearest_level(id * x[j])];
            sqx += w[j] * q * x[j];
            sq2 += w[j] * q * q;
        }
        if (sq2 > 0 && sqx * sqx > best * sq2) d = sqx / sq2, best = d * sqx;
    }
    return d;
}

/* Codes L[0, 32) of x under step d into 16 bytes (element j low nibble of
 * byte j, element j + 16 its high nibble). */
static void pack(const float *x, float d, uint8_t *L, uint8_t *qs) {
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++) L[j] = (uint8_t)nearest_level(id * x[j]);
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(L[j] | L[j + 16] << 4);
}

void slm_quantize_row_iq4_nl(const float *x, void *vy, int64_t n) {
    slm_block_iq4_nl *y = vy;
    uint8_t L[32];
    for (int64_t b = 0; b < n / SLM_QK4_NL; b++, x += SLM_QK4_NL) {
        const float d = block_scale(x, L);
        y[b].d = slm_f32_to_f16(d);
        pack(x, d, L, y[b].qs); /* the codes of the unrounded step */
    }
}

void slm_quantize_row_iq4_xs(const float *x, void *vy, int64_t n) {
    slm_block_iq4_xs *y = vy;
    uint8_t L[32];
    for (int64_t b = 0; b < n / SLM_QK_K; b++, x += SLM_QK_K) {
        float sc[SLM_QK_K / 32], max_sc = 0.0f, amax_sc = 0.0f;
        for (int s = 0; s < SLM_QK_K / 32; s++) {
            sc[s] = block_scale(x + 32 * s, L);
            if (fabsf(sc[s]) > amax_sc) amax_sc = fabsf(sc[s]), max_sc = sc[s];
        }
        /* the sub-block scales as 6-bit multiples of d = -max / 32 (-0 when all are 0, as GGML writes it) */
        const float d = -max_sc / 32.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = slm_f32_to_f16(d);
        y[b].scales_h = 0;
        memset(y[b].scales_l, 0, sizeof y[b].scales_l);
        for (int s = 0; s < SLM_QK_K / 32; s++) {
            int l = (int)slm_round_even(id * sc[s]); /* |id * sc[s]| <= 32 */
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            pack(x + 32 * s, d * (float)l, L, y[b].qs + 16 * s);
            l += 32;
            y[b].scales_l[s / 2] |= (uint8_t)((l & 0xf) << 4 * (s % 2));
            y[b].scales_h |= (uint16_t)((l >> 4) << 2 * s);
        }
    }
}
