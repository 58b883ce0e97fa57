/* Helpers shared by the kernel sets (kernels_ref.c, kernels_x86*.c): weight
 * blocks as int8 codes, activation quantization, the packed panel, the
 * scalar vector kernels, and scratch sizes. */
#include <math.h>
#include <string.h>

#include "common/dtype.h"
#include "device/kernels.h"
#include "program/task.h"

int slm_qtype_kind(uint32_t t) {
    switch (t) {
    case SLM_Q4_0: case SLM_Q8_0: return 0;
    case SLM_Q6_K: return 1;
    case SLM_Q4_1: case SLM_Q4_K: case SLM_Q5_K: return 2;
    default: return slm_quant2_kind(t); /* kernels_quant2_ref.c */
    }
}

size_t slm_matmul_scratch_bytes(uint32_t wtype, int k, int rows) {
    if (wtype == SLM_BF16) {
        /* the amx set's BF16 tile path (rows >= 2; the other sets ignore
           it): the activations as three bf16 pieces [3][rows][k rounded up to 32], after the
           region where the int8 kernels keep quantized activations (what
           exec.c's xq_ready reuses is left alone), alignment slack */
        if (k <= 0 || rows < 2) return 0;
        return slm_matmul_scratch_bytes(SLM_Q8_0_R16, k, rows) + 3 * (size_t)rows * (size_t)((k + 31) & ~31) * 2 + 64;
    }
    if ((slm_qtype_kind(wtype) < 0 && !slm_is_r16(wtype)) || wtype == SLM_F16_R16 || k <= 0 || rows <= 0) return 0;
    const size_t nb = (size_t)k / 32;
    /* xq codes, block scales and sums, integer sums of half blocks, one
       panel of 16 columns (not for repacked weights: their kernels read the
       weights in place), alignment slack; then, for repacked weights, the
       amx set's unpacked B tiles of one column step (SLM_AMX_PANEL_BYTES:
       the other sets ignore it; the AVX-512 set's prefill panel lies in the
       same bytes) and the accumulator starts of kernels_x86_r16p.c */
    return (size_t)rows * (size_t)k + 2 * (size_t)rows * nb * sizeof(float) + 2 * (size_t)rows * nb * sizeof(int32_t) +
           (slm_is_r16(wtype) ? SLM_AMX_PANEL_BYTES(nb) + SLM_R16_OFS_BYTES(rows, nb) : nb * SLM_PANEL_BLOCK_BYTES(16)) +
           5 * 64;
}

void slm_qblock_i8(uint32_t t, const void *row, int b, int8_t q[32], float d[2], float *m) {
    *m = 0.0f;
    switch (t) {
    case SLM_Q8_0: {
        const slm_block_q8_0 *x = (const slm_block_q8_0 *)row + b;
        d[0] = d[1] = slm_f16_to_f32(x->d);
        memcpy(q, x->qs, 32);
        return;
    }
    case SLM_Q4_0: case SLM_Q4_1: {
        const uint8_t *qs;
        if (t == SLM_Q4_0) {
            const slm_block_q4_0 *x = (const slm_block_q4_0 *)row + b;
            d[0] = d[1] = slm_f16_to_f32(x->d);
            qs = x->qs;
        } else {
            const slm_block_q4_1 *x = (const slm_block_q4_1 *)row + b;
            d[0] = d[1] = slm_f16_to_f32(x->d);
            *m = slm_f16_to_f32(x->m);
            qs = x->qs;
        }
        const int off = t == SLM_Q4_0 ? 8 : 0;
        for (int j = 0; j < 16; j++) {
            q[j] = (int8_t)((qs[j] & 0xF) - off);
            q[j + 16] = (int8_t)((qs[j] >> 4) - off);
        }
        return;
    }
    case SLM_Q4_K: case SLM_Q5_K: {
        const int sb = b / 8, s = b % 8, c = s / 2, h = s % 2;
        const slm_block_q4_K *x4 = (const slm_block_q4_K *)row + sb;
        const slm_block_q5_K *x5 = (const slm_block_q5_K *)row + sb;
        const int five = t == SLM_Q5_K;
        uint8_t sc, mn;
        slm_get_scale_min_k4(s, five ? x5->scales : x4->scales, &sc, &mn);
        d[0] = d[1] = slm_f16_to_f32(five ? x5->d : x4->d) * sc;
        *m = -(slm_f16_to_f32(five ? x5->dmin : x4->dmin) * mn);
        const uint8_t *qs = (five ? x5->qs : x4->qs) + 32 * c;
        for (int l = 0; l < 32; l++) {
            int v = h ? qs[l] >> 4 : qs[l] & 0xF;
            if (five) v |= ((x5->qh[l] >> (2 * c + h)) & 1) << 4;
            q[l] = (int8_t)v;
        }
        return;
    }
    case SLM_Q6_K: {
        const slm_block_q6_K *x = (const slm_block_q6_K *)row + b / 8;
        const int s = b % 8, H = s / 4, Q = s % 4;
        const float dd = slm_f16_to_f32(x->d);
        d[0] = dd * x->scales[2 * s];
        d[1] = dd * x->scales[2 * s + 1];
        const uint8_t *ql = x->ql + 64 * H + (Q & 1) * 32, *qh = x->qh + 32 * H;
        const int shl = (Q >> 1) * 4, shh = 2 * Q;
        for (int l = 0; l < 32; l++) q[l] = (int8_t)((((ql[l] >> shl) & 0xF) | (((qh[l] >> shh) & 3) << 4)) - 32);
        return;
    }
    default: { /* kernels_quant2_ref.c's types; zeros for Q2_K (two mins) */
        float m2[2];
        slm_qblock2_i8(slm_quant2_kind(t) == 3 ? SLM_F32 : t, row, b, q, d, m2);
        *m = m2[0];
        return;
    }
    }
}

void slm_quantize_act_ref(const float *x, size_t ldx, int rows, int k, int offset, uint8_t *q, float *d, float *s) {
    const int nb = k / 32;
    for (int i = 0; i < rows; i++) {
        const float *xr = x + (size_t)i * ldx;
        for (int b = 0; b < nb; b++) {
            float amax = 0.0f;
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(xr[32 * b + j]));
            const float db = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
            int sum = 0;
            for (int j = 0; j < 32; j++) {
                int v = (int)lrintf(xr[32 * b + j] * id);
                sum += v;
                q[(size_t)i * k + 32 * b + j] = (uint8_t)(v + offset);
            }
            d[(size_t)i * nb + b] = db;
            s[(size_t)i * nb + b] = db * (float)sum;
        }
    }
}

void slm_pack_panel(uint32_t t, const uint8_t *w, uint64_t wrow, int c0, int valid, int nc, int nb, uint8_t *panel) {
    const size_t pb = SLM_PANEL_BLOCK_BYTES(nc);
    for (int c = 0; c < nc; c++) {
        const uint8_t *row = c < valid ? w + (size_t)(c0 + c) * wrow : NULL;
        for (int b = 0; b < nb; b++) {
            uint8_t *p = panel + (size_t)b * pb;
            int8_t q[32];
            float dd[2] = {0.0f, 0.0f}, m = 0.0f;
            if (row) slm_qblock_i8(t, row, b, q, dd, &m);
            else memset(q, 0, sizeof q);
            int32_t s0 = 0, s1 = 0;
            for (int j = 0; j < 16; j++) {
                s0 += q[j];
                s1 += q[j + 16];
            }
            for (int g = 0; g < 8; g++) memcpy(p + ((size_t)g * nc + c) * 4, q + 4 * g, 4);
            int32_t *corr = (int32_t *)(p + (size_t)nc * 32);
            float *fd = (float *)(p + (size_t)nc * 40), *fm = (float *)(p + (size_t)nc * 48);
            corr[c] = -128 * s0;
            corr[nc + c] = -128 * s1;
            fd[c] = dd[0];
            fd[nc + c] = dd[1];
            fm[c] = m;
        }
    }
}

/* As run.c: o = g * (x / sqrt(mean(x^2) + eps)). */
void slm_k_rmsnorm(const float *x, const float *g, float *y, int n, float eps) {
    float ss = 0.0f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    ss /= (float)n;
    ss += eps;
    ss = 1.0f / sqrtf(ss);
    for (int i = 0; i < n; i++) y[i] = g[i] * (ss * x[i]);
}

/* Rotate adjacent pairs (2i, 2i+1) of each head; cs = [head_dim/2][cos, sin]. */
void slm_k_rope(float *x, int heads, int head_dim, const float *cs) {
    for (int h = 0; h < heads; h++) {
        float *v = x + (size_t)h * head_dim;
        for (int i = 0; i < head_dim / 2; i++) {
            float c = cs[2 * i], s = cs[2 * i + 1];
            float v0 = v[2 * i], v1 = v[2 * i + 1];
            v[2 * i] = v0 * c - v1 * s;
            v[2 * i + 1] = v0 * s + v1 * c;
        }
    }
}

void slm_k_swiglu(const float *gate, const float *up, float *y, int n) {
    for (int i = 0; i < n; i++) {
        float g = gate[i];
        y[i] = g * (1.0f / (1.0f + expf(-g))) * up[i];
    }
}

void slm_k_silu(const float *x, float *y, int n) {
    for (int i = 0; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
}

void slm_k_geglu(const float *gate, const float *up, float *y, int n) {
    for (int i = 0; i < n; i++) {
        /* x sigmoid(2z): no cancellation where tanh(z) is near -1 */
        const float x = gate[i], t = 2.0f * 0.7978845608028654f * (x + 0.044715f * x * x * x);
        y[i] = (t >= 0.0f ? x / (1.0f + expf(-t)) : x * expf(t) / (1.0f + expf(t))) * up[i];
    }
}

float slm_k_delta_row(float *m, const float *q, const float *k, float vj, float decay, float beta, int S) {
    float sk = 0.0f;
    for (int i = 0; i < S; i++) {
        m[i] *= decay;
        sk += m[i] * k[i];
    }
    const float d = (vj - sk) * beta;
    float oq = 0.0f;
    for (int i = 0; i < S; i++) {
        m[i] += d * k[i];
        oq += m[i] * q[i];
    }
    return oq;
}

void slm_k_delta_rule(float *M, const slm_delta_steps *d, int S) {
    for (int j = 0; j < S; j++)
        for (int t = 0; t < d->T; t++)
            d->o[(size_t)t * d->ldo + j] = slm_k_delta_row(M + (size_t)j * S, d->q + (size_t)t * S, d->k + (size_t)t * S,
                                                           d->v[(size_t)t * d->ldv + j], d->decay[t], d->beta[t], S);
}

void slm_k_add(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] += x[i];
}

void slm_k_attention_head(const float *q, const float *K, const float *V, int ld, const int32_t *mask,
                          int last, int head_dim, float *out) {
    const float scale = 1.0f / sqrtf((float)head_dim);
    float m = -INFINITY, l = 0.0f;
    for (int d = 0; d < head_dim; d++) out[d] = 0.0f;
    for (int j = 0; j <= last; j++) {
        if (!mask[j]) continue;
        const float *k = K + (size_t)j * ld;
        const float *v = V + (size_t)j * ld;
        float s = 0.0f;
        for (int d = 0; d < head_dim; d++) s += q[d] * k[d];
        s *= scale;
        if (s > m) {
            float corr = expf(m - s); /* 0 on the first valid row */
            l = l * corr + 1.0f;
            for (int d = 0; d < head_dim; d++) out[d] = out[d] * corr + v[d];
            m = s;
        } else {
            float w = expf(s - m);
            l += w;
            for (int d = 0; d < head_dim; d++) out[d] += w * v[d];
        }
    }
    if (l > 0.0f) {
        float inv = 1.0f / l;
        for (int d = 0; d < head_dim; d++) out[d] *= inv;
    }
}

static size_t align64z(size_t n) { return (n + 63) & ~(size_t)63; }

slm_mm_scratch slm_task_scratch_layout(const struct slm_task *t, int rows) {
    slm_mm_scratch l = {0, 0, 0};
    if (t->flags & (SLM_TF_PRE_NORM | SLM_TF_PRE_SWIGLU | SLM_TF_EXPERT_GATHER))
        l.pre = align64z((size_t)rows * (size_t)(t->k > 0 ? t->k : 0) * sizeof(float));
    l.kernel = align64z(slm_matmul_scratch_bytes(t->wtype, t->k, rows));
    if (t->flags & (SLM_TF_POST_ADD | SLM_TF_DST_CPOS)) l.post = align64z((size_t)rows * (size_t)(t->n1 > t->n0 ? t->n1 - t->n0 : 0) * sizeof(float));
    return l;
}

size_t slm_task_scratch_bytes(const struct slm_task *t) {
    if (t->op == SLM_T_EMBED && t->a) return align64z((size_t)(t->n > 0 ? t->n : 0) * sizeof(float)); /* a row to add */
    if (t->op != SLM_T_MATMUL) return 0;
    const slm_mm_scratch l = slm_task_scratch_layout(t, (t->flags & SLM_TF_ONE_ROW) ? 1 : (t->m > 0 ? t->m : 1));
    return l.pre + l.kernel + l.post;
}
