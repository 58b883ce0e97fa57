/* Scalar kernels for the weight types llama-quantize writes beside the
 * main ones (its fallbacks for rows that are not a multiple of 256, and the
 * low-bit K-quants): Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q2_K, Q3_K; and MXFP4
 * (gpt-oss's expert matrices).
 *
 * Every 32-element block of these types reads as int8 codes with a scale
 * per half block and a min per half block (slm_qblock2_i8):
 *   Q5_0    q - 16 in [-16, 15]         one scale             kind 0
 *   IQ4_NL  kvalues[q] in [-127, 113]   one scale             kind 0
 *   MXFP4   kvalues_mxfp4[q] in [-12, 12] one scale (E8M0 / 2) kind 0
 *   IQ4_XS  kvalues[q]                  one scale (sub-block) kind 0
 *   Q3_K    q in [-4, 3]                two half scales       kind 1
 *   Q5_1    q in [0, 31]                one scale, one min    kind 2
 *   Q2_K    q in [0, 3]                 two scales, two mins  kind 3
 *   IQ2_XXS grid * sign in +-{8, 25, 43} one scale       kind 0
 *   IQ3_XXS grid * sign in +-[4, 62]   one scale             kind 0
 *   IQ3_S   grid * sign in +-[1, 15]   one scale             kind 0
 *   IQ1_S   8 grid +- 1 in [-9, 9]     one scale (d / 8)     kind 0
 *   IQ2_XS, IQ2_S  as IQ2_XXS          two half scales       kind 1
 *   IQ1_M   8 grid +- 1                two half scales (/ 8) kind 1
 * (IQ1's delta of +-1/8 per group of 8 is exact in codes scaled by 8.)
 * Kinds 0-2 fit the int8 panel of slm_pack_panel (slm_qblock_i8); kind 3
 * does not (the panel has one min per block), and the SIMD sets run its
 * rows through their decode kernels (kernels_x86_quant2.c), which take the
 * activations' half-block code sums for the two mins. */
#include <string.h>

#include "common/dtype.h"
#include "device/kernels.h"

int slm_quant2_kind(uint32_t t) {
    switch (t) {
    case SLM_Q5_0: case SLM_IQ4_NL: case SLM_IQ4_XS: case SLM_MXFP4: return 0;
    case SLM_IQ2_XXS: case SLM_IQ3_XXS: case SLM_IQ3_S: case SLM_IQ1_S: return 0;
    case SLM_Q3_K: case SLM_IQ2_XS: case SLM_IQ2_S: case SLM_IQ1_M: return 1;
    case SLM_Q5_1: return 2;
    case SLM_Q2_K: return 3;
    default: return -1;
    }
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* 8 grid bytes times the signs of bits 0-7 of sg. */
static void signed8(int8_t *q, const uint8_t *grid, unsigned sg) {
    for (int j = 0; j < 8; j++) q[j] = (int8_t)((sg >> j) & 1 ? -(int)grid[j] : (int)grid[j]);
}

/* Block b of an i-quant row (common/dtype.h describes the layouts). */
static void qblock_iq(uint32_t t, const void *row, int b, int8_t q[32], float d[2]) {
    const slm_iq_grids *g = slm_iq_grids_fast();
    const int s = b % 8;
    switch (t) {
    case SLM_IQ2_XXS: {
        const slm_block_iq2_xxs *x = (const slm_block_iq2_xxs *)row + b / 8;
        uint32_t a[2];
        memcpy(a, x->qs + 4 * s, 8);
        d[0] = d[1] = slm_f16_to_f32(x->d) * (0.5f + (float)(a[1] >> 28)) * 0.25f;
        for (int l = 0; l < 4; l++)
            signed8(q + 8 * l, (const uint8_t *)&g->iq2xxs[(a[0] >> (8 * l)) & 255], slm_iq_signs((a[1] >> (7 * l)) & 127));
        return;
    }
    case SLM_IQ2_XS: case SLM_IQ2_S: {
        const slm_block_iq2_xs *x = (const slm_block_iq2_xs *)row + b / 8;
        const slm_block_iq2_s *y = (const slm_block_iq2_s *)row + b / 8;
        const int sc = t == SLM_IQ2_XS ? x->scales[s] : y->scales[s];
        const float dd = slm_f16_to_f32(t == SLM_IQ2_XS ? x->d : y->d);
        d[0] = dd * (0.5f + (float)(sc & 0xF)) * 0.25f;
        d[1] = dd * (0.5f + (float)(sc >> 4)) * 0.25f;
        for (int l = 0; l < 4; l++) {
            if (t == SLM_IQ2_XS) {
                const uint16_t c = x->qs[4 * s + l];
                signed8(q + 8 * l, (const uint8_t *)&g->iq2xs[c & 511], slm_iq_signs(c >> 9));
            } else {
                const int idx = y->qs[4 * s + l] | ((y->qh[s] << (8 - 2 * l)) & 0x300);
                signed8(q + 8 * l, (const uint8_t *)&g->iq2s[idx], y->qs[32 + 4 * s + l]);
            }
        }
        return;
    }
    case SLM_IQ3_XXS: {
        const slm_block_iq3_xxs *x = (const slm_block_iq3_xxs *)row + b / 8;
        uint32_t a;
        memcpy(&a, x->qs + 64 + 4 * s, 4);
        d[0] = d[1] = slm_f16_to_f32(x->d) * (0.5f + (float)(a >> 28)) * 0.5f;
        for (int l = 0; l < 4; l++) {
            uint8_t gr[8];
            memcpy(gr, &g->iq3xxs[x->qs[8 * s + 2 * l]], 4);
            memcpy(gr + 4, &g->iq3xxs[x->qs[8 * s + 2 * l + 1]], 4);
            signed8(q + 8 * l, gr, slm_iq_signs((a >> (7 * l)) & 127));
        }
        return;
    }
    case SLM_IQ3_S: {
        const slm_block_iq3_s *x = (const slm_block_iq3_s *)row + b / 8;
        d[0] = d[1] = slm_f16_to_f32(x->d) * (float)(1 + 2 * ((x->scales[s / 2] >> (4 * (s % 2))) & 0xF));
        const uint8_t *qs = x->qs + 8 * s, qh = x->qh[s];
        for (int l = 0; l < 4; l++) {
            uint8_t gr[8];
            memcpy(gr, &g->iq3s[qs[2 * l] | ((qh << (8 - 2 * l)) & 256)], 4);
            memcpy(gr + 4, &g->iq3s[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)], 4);
            signed8(q + 8 * l, gr, x->signs[4 * s + l]);
        }
        return;
    }
    case SLM_IQ1_S: {
        const slm_block_iq1_s *x = (const slm_block_iq1_s *)row + b / 8;
        const unsigned qh = x->qh[s];
        d[0] = d[1] = slm_f16_to_f32(x->d) * (float)(2 * ((qh >> 12) & 7) + 1) * 0.125f;
        const int delta = qh & 0x8000 ? -1 : 1;
        for (int l = 0; l < 4; l++) {
            const int8_t *gr = (const int8_t *)&g->iq1s8[x->qs[4 * s + l] | (((qh >> (3 * l)) & 7) << 8)];
            for (int j = 0; j < 8; j++) q[8 * l + j] = (int8_t)(gr[j] + delta);
        }
        return;
    }
    default: { /* SLM_IQ1_M */
        const slm_block_iq1_m *x = (const slm_block_iq1_m *)row + b / 8;
        uint16_t sc[4];
        memcpy(sc, x->scales, 8);
        const float dd = slm_iq1_m_scale(x) * 0.125f;
        for (int i = 0; i < 2; i++) d[i] = dd * (float)(2 * ((sc[s / 2] >> (6 * (s % 2) + 3 * i)) & 7) + 1);
        for (int l = 0; l < 4; l++) {
            const int h = x->qh[2 * s + l / 2] >> (4 * (l % 2));
            const int8_t *gr = (const int8_t *)&g->iq1s8[x->qs[4 * s + l] | ((h & 7) << 8)];
            for (int j = 0; j < 8; j++) q[8 * l + j] = (int8_t)(gr[j] + (h & 8 ? -1 : 1));
        }
        return;
    }
    }
}

void slm_qblock2_i8(uint32_t t, const void *row, int b, int8_t q[32], float d[2], float m[2]) {
    m[0] = m[1] = 0.0f;
    switch (t) {
    case SLM_IQ2_XXS: case SLM_IQ2_XS: case SLM_IQ2_S: case SLM_IQ3_XXS: case SLM_IQ3_S: case SLM_IQ1_S:
    case SLM_IQ1_M: qblock_iq(t, row, b, q, d); return;
    case SLM_Q5_0: case SLM_Q5_1: {
        const uint8_t *qs, *qhb;
        if (t == SLM_Q5_0) {
            const slm_block_q5_0 *x = (const slm_block_q5_0 *)row + b;
            d[0] = d[1] = slm_f16_to_f32(x->d);
            qs = x->qs, qhb = x->qh;
        } else {
            const slm_block_q5_1 *x = (const slm_block_q5_1 *)row + b;
            d[0] = d[1] = slm_f16_to_f32(x->d);
            m[0] = m[1] = slm_f16_to_f32(x->m);
            qs = x->qs, qhb = x->qh;
        }
        const uint32_t qh = le32(qhb);
        const int off = t == SLM_Q5_0 ? 16 : 0;
        for (int j = 0; j < 16; j++) {
            q[j] = (int8_t)(((qs[j] & 0xF) | (int)((qh >> j) & 1) << 4) - off);
            q[j + 16] = (int8_t)(((qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4) - off);
        }
        return;
    }
    case SLM_IQ4_NL: case SLM_IQ4_XS: {
        const uint8_t *qs;
        if (t == SLM_IQ4_NL) {
            const slm_block_iq4_nl *x = (const slm_block_iq4_nl *)row + b;
            d[0] = d[1] = slm_f16_to_f32(x->d);
            qs = x->qs;
        } else {
            const slm_block_iq4_xs *x = (const slm_block_iq4_xs *)row + b / 8;
            const int s = b % 8;
            const int ls = ((x->scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((x->scales_h >> (2 * s)) & 3) << 4);
            d[0] = d[1] = slm_f16_to_f32(x->d) * (float)(ls - 32);
            qs = x->qs + 16 * s;
        }
        for (int j = 0; j < 16; j++) {
            q[j] = slm_kvalues_iq4nl[qs[j] & 0xF];
            q[j + 16] = slm_kvalues_iq4nl[qs[j] >> 4];
        }
        return;
    }
    case SLM_MXFP4: {
        const slm_block_mxfp4 *x = (const slm_block_mxfp4 *)row + b;
        d[0] = d[1] = slm_e8m0_to_f32_half(x->e);
        for (int j = 0; j < 16; j++) {
            q[j] = slm_kvalues_mxfp4[x->qs[j] & 0xF];
            q[j + 16] = slm_kvalues_mxfp4[x->qs[j] >> 4];
        }
        return;
    }
    case SLM_Q2_K: {
        const slm_block_q2_K *x = (const slm_block_q2_K *)row + b / 8;
        const int s = b % 8, h = s / 4, j = s % 4;
        const float dd = slm_f16_to_f32(x->d), dmin = slm_f16_to_f32(x->dmin);
        for (int i = 0; i < 2; i++) {
            d[i] = dd * (float)(x->scales[2 * s + i] & 0xF);
            m[i] = -(dmin * (float)(x->scales[2 * s + i] >> 4));
        }
        for (int l = 0; l < 32; l++) q[l] = (int8_t)((x->qs[32 * h + l] >> (2 * j)) & 3);
        return;
    }
    case SLM_Q3_K: {
        const slm_block_q3_K *x = (const slm_block_q3_K *)row + b / 8;
        const int s = b % 8, h = s / 4, j = s % 4;
        const float dd = slm_f16_to_f32(x->d);
        for (int i = 0; i < 2; i++) d[i] = dd * (float)(slm_get_scale_q3_k(2 * s + i, x->scales) - 32);
        for (int l = 0; l < 32; l++) {
            const int lo = (x->qs[32 * h + l] >> (2 * j)) & 3, hi = (x->hmask[l] >> (4 * h + j)) & 1;
            q[l] = (int8_t)(lo - (hi ? 0 : 4));
        }
        return;
    }
    default:
        memset(q, 0, 32);
        d[0] = d[1] = 0.0f;
        return;
    }
}

/* Float dot product: one block's codes at a time, in float (the reference
 * every SIMD kernel is tested against computes in double). */
static float dot_quant2_ref(uint32_t t, const void *w, const float *x, int k) {
    float s = 0.0f;
    for (int b = 0; b < k / 32; b++) {
        int8_t q[32];
        float d[2], m[2], h[2] = {0.0f, 0.0f}, xs[2] = {0.0f, 0.0f};
        slm_qblock2_i8(t, w, b, q, d, m);
        for (int e = 0; e < 32; e++) {
            h[e / 16] += (float)q[e] * x[32 * b + e];
            xs[e / 16] += x[32 * b + e];
        }
        s += d[0] * h[0] + d[1] * h[1] + m[0] * xs[0] + m[1] * xs[1];
    }
    return s;
}

#define DOT2(name, type) \
    static float name(const void *w, const float *x, int k) { return dot_quant2_ref(type, w, x, k); }
DOT2(dot_q5_0_ref, SLM_Q5_0)
DOT2(dot_q5_1_ref, SLM_Q5_1)
DOT2(dot_iq4_nl_ref, SLM_IQ4_NL)
DOT2(dot_mxfp4_ref, SLM_MXFP4)
DOT2(dot_iq4_xs_ref, SLM_IQ4_XS)
DOT2(dot_q2_k_ref, SLM_Q2_K)
DOT2(dot_q3_k_ref, SLM_Q3_K)
DOT2(dot_iq2_xxs_ref, SLM_IQ2_XXS)
DOT2(dot_iq2_xs_ref, SLM_IQ2_XS)
DOT2(dot_iq2_s_ref, SLM_IQ2_S)
DOT2(dot_iq3_xxs_ref, SLM_IQ3_XXS)
DOT2(dot_iq3_s_ref, SLM_IQ3_S)
DOT2(dot_iq1_s_ref, SLM_IQ1_S)
DOT2(dot_iq1_m_ref, SLM_IQ1_M)

slm_dot_fn slm_quant2_dot_ref(uint32_t t) {
    switch (t) {
    case SLM_Q5_0: return dot_q5_0_ref;
    case SLM_Q5_1: return dot_q5_1_ref;
    case SLM_IQ4_NL: return dot_iq4_nl_ref;
    case SLM_MXFP4: return dot_mxfp4_ref;
    case SLM_IQ4_XS: return dot_iq4_xs_ref;
    case SLM_Q2_K: return dot_q2_k_ref;
    case SLM_Q3_K: return dot_q3_k_ref;
    case SLM_IQ2_XXS: return dot_iq2_xxs_ref;
    case SLM_IQ2_XS: return dot_iq2_xs_ref;
    case SLM_IQ2_S: return dot_iq2_s_ref;
    case SLM_IQ3_XXS: return dot_iq3_xxs_ref;
    case SLM_IQ3_S: return dot_iq3_s_ref;
    case SLM_IQ1_S: return dot_iq1_s_ref;
    case SLM_IQ1_M: return dot_iq1_m_ref;
    default: return NULL;
    }
}
