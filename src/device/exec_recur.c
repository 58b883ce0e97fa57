/* The executor's tasks of the hybrid recurrent layers (qwen35's Gated
 * DeltaNet): the gated query's slices, the causal conv with its window, the
 * decay, the delta rule with its state, and the sigmoid-gated product.
 * The recurrence runs over the valid rows in order (a sequential scan per
 * head, the same arithmetic per row in prefill as in decode; a chunk of a
 * sequence's rows goes to the kernel at once, which runs a few state rows
 * through all of them while they stay in L1); its state is the
 * program's conv_state / recurrent_state input, one row per sequence,
 * updated in place. Nothing here allocates. */
#include <math.h>
#include <string.h>

#include "device/exec_ops.h"

#define DELTA_MAX_STATE 512     /* the largest head size (the loader's limit) */
#define DELTA_CHUNK_FLOATS 4096 /* q and k of a chunk of rows: 16 KiB each on the stack */
#define DELTA_CHUNK_ROWS 64     /* rows per chunk at most (S = 64: 64 rows; 128: 32; 512: 8) */

static inline float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

/* Row r's sequence: its cache position over the rows of a region; -1 when
 * it is not one of the task's `window` sequences. */
static int seq_of(const slm_task *t, const int32_t *cpos, int r) {
    if (!cpos || cpos[r] < 0 || t->k <= 0) return -1;
    const int s = cpos[r] / t->k;
    return s < t->window ? s : -1;
}

void slm_exec_slice(const slm_task *t, rows rr) {
    const int runs = t->b > 0 ? t->n / t->b : 0;
    for (int r = rr.begin; r < rr.end; r++) {
        const float *x = row_f(t->p[SLM_REF_SRC0], &t->ref[SLM_REF_SRC0], r);
        float *y = row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], r);
        for (int g = 0; g < runs; g++) memcpy(y + (size_t)g * t->b, x + (size_t)g * t->c + t->a, (size_t)t->b * sizeof(float));
    }
}

void slm_exec_sigmoid_gate(const slm_task *t, rows rr) {
    for (int r = rr.begin; r < rr.end; r++) {
        const float *g = row_f(t->p[SLM_REF_SRC0], &t->ref[SLM_REF_SRC0], r);
        const float *u = row_f(t->p[SLM_REF_SRC1], &t->ref[SLM_REF_SRC1], r);
        float *y = row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], r);
        for (int i = 0; i < t->n; i++) y[i] = sigm(g[i]) * u[i];
    }
}

#define CONV_BLOCK 16 /* channels at a time: their windows and taps stay in registers over the rows */
#define CONV_MAX_TAPS 16 /* the loader's limit on ssm.conv_kernel */

/* The causal depthwise conv over the valid rows, in place, then SiLU:
 * y[r][ch] = taps[ch][K-1] x[r][ch] + sum_j taps[ch][j] window[j][ch],
 * the window (the K-1 inputs before row r, oldest first; the sequence's
 * conv_state [K-1][n] before the first) shifting by one each row. A block
 * of CONV_BLOCK channels runs down all the rows with its window and taps
 * held, so each row costs a load, a store and K multiply-adds per channel
 * (the compiler's vector width); the window goes back to the state when
 * the rows end or move to another sequence (a batch program's rows). */
slm_status slm_exec_ssm_conv(const slm_task *t, rows rr, const int32_t *cpos, const slm_kernel_set *ks) {
    const int n = t->n, K = t->c, w = K - 1;
    if (K < 2 || K > CONV_MAX_TAPS) return SLM_ERR_INTERNAL;
    const float *taps = t->p[SLM_REF_SRC2];
    for (int c0 = t->n0; c0 < t->n1; c0 += CONV_BLOCK) {
        const int nb = t->n1 - c0 < CONV_BLOCK ? t->n1 - c0 : CONV_BLOCK;
        float tp[CONV_MAX_TAPS][CONV_BLOCK], win[CONV_MAX_TAPS][CONV_BLOCK];
        memset(tp, 0, sizeof tp);
        memset(win, 0, sizeof win);
        for (int i = 0; i < nb; i++)
            for (int j = 0; j < K; j++) tp[j][i] = taps[(size_t)(c0 + i) * K + j];
        int cur = -1; /* the sequence whose window is held */
        float *st = NULL;
        for (int r = rr.begin; r < rr.end; r++) {
            const int s = seq_of(t, cpos, r);
            if (s < 0) return SLM_ERR_ARG;
            if (s != cur) {
                for (int j = 0; st && j < w; j++) memcpy(st + (size_t)j * n + c0, win[j], (size_t)nb * sizeof(float));
                st = (float *)t->p[SLM_REF_SRC1] + (size_t)s * (size_t)w * (size_t)n;
                for (int j = 0; j < w; j++) memcpy(win[j], st + (size_t)j * n + c0, (size_t)nb * sizeof(float));
                cur = s;
            }
            float *x = row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], r) + c0;
            float in[CONV_BLOCK] = {0}, y[CONV_BLOCK];
            memcpy(in, x, (size_t)nb * sizeof(float));
            for (int i = 0; i < CONV_BLOCK; i++) y[i] = tp[w][i] * in[i];
            for (int j = 0; j < w; j++)
                for (int i = 0; i < CONV_BLOCK; i++) y[i] += tp[j][i] * win[j][i];
            for (int j = 0; j + 1 < w; j++) memcpy(win[j], win[j + 1], sizeof win[j]);
            memcpy(win[w - 1], in, sizeof in);
            memcpy(x, y, (size_t)nb * sizeof(float));
        }
        for (int j = 0; st && j < w; j++) memcpy(st + (size_t)j * n + c0, win[j], (size_t)nb * sizeof(float));
    }
    for (int r = rr.begin; r < rr.end; r++) { /* SiLU over the tile, a row at a time */
        float *x = row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], r);
        ks->silu(x + t->n0, x + t->n0, t->n1 - t->n0);
    }
    return SLM_OK;
}

void slm_exec_delta_gate(const slm_task *t, rows rr) {
    const float *dt = t->p[SLM_REF_SRC1], *a = t->p[SLM_REF_SRC2];
    for (int r = rr.begin; r < rr.end; r++) {
        float *x = row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], r);
        for (int h = 0; h < t->n; h++) {
            const float v = x[h] + dt[h];
            x[h] = (v > 20.0f ? v : log1pf(expf(v))) * a[h];
        }
    }
}

/* v[0..n) * 1 / max(||v||, eps) * extra into out. Eight partial sums (a
 * vector's worth, no chain of n dependent adds), then the tail. */
static void l2_norm(const float *v, float *out, int n, float eps, float extra) {
    float p[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) p[l] += v[i + l] * v[i + l];
    float ss = ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]));
    for (; i < n; i++) ss += v[i] * v[i];
    const float nrm = sqrtf(ss), k = extra / (nrm > eps ? nrm : eps);
    for (i = 0; i < n; i++) out[i] = v[i] * k;
}

slm_status slm_exec_delta_net(const slm_task *t, rows rr, const int32_t *cpos, const slm_kernel_set *ks) {
    const int Hk = t->a, Hv = t->b, S = t->c;
    if (S > DELTA_MAX_STATE || S < 1 || Hk <= 0) return SLM_ERR_INTERNAL;
    /* a chunk of rows of one sequence at a time: their normed q and k here,
       so the kernel can run a few state rows through all of them */
    float q[DELTA_CHUNK_FLOATS], k[DELTA_CHUNK_FLOATS], decay[DELTA_CHUNK_ROWS], beta[DELTA_CHUNK_ROWS];
    int tmax = DELTA_CHUNK_FLOATS / S;
    if (tmax > DELTA_CHUNK_ROWS) tmax = DELTA_CHUNK_ROWS;
    const size_t per_seq = (size_t)Hv * S * S;
    const float qs = 1.0f / sqrtf((float)S);
    const slm_ref *x = &t->ref[SLM_REF_SRC0], *g = &t->ref[SLM_REF_SRC1], *bt = &t->ref[SLM_REF_SRC2], *out = &t->ref[SLM_REF_DST];
    for (int h = t->n0; h < t->n1; h++) {
        const int kh = h % Hk; /* llama.cpp's tiled order of the value heads over the key heads */
        for (int r0 = rr.begin; r0 < rr.end;) {
            const int s = seq_of(t, cpos, r0);
            if (s < 0) return SLM_ERR_ARG;
            int n = 0;
            for (; n < tmax && r0 + n < rr.end && (n == 0 || seq_of(t, cpos, r0 + n) == s); n++) {
                const float *row = row_f(t->p[SLM_REF_SRC0], x, r0 + n);
                l2_norm(row + (size_t)kh * S, q + (size_t)n * S, S, t->f0, qs);
                l2_norm(row + (size_t)(Hk + kh) * S, k + (size_t)n * S, S, t->f0, 1.0f);
                decay[n] = expf(row_f(t->p[SLM_REF_SRC1], g, r0 + n)[h]);
                beta[n] = sigm(row_f(t->p[SLM_REF_SRC2], bt, r0 + n)[h]);
            }
            const slm_delta_steps d = {.q = q,
                                       .k = k,
                                       .v = row_f(t->p[SLM_REF_SRC0], x, r0) + (size_t)(2 * Hk + h) * S,
                                       .decay = decay,
                                       .beta = beta,
                                       .o = row_f(t->p[SLM_REF_DST], out, r0) + (size_t)h * S,
                                       .ldv = x->ld,
                                       .ldo = out->ld,
                                       .T = n};
            ks->delta_rule((float *)t->p[SLM_REF_SRC3] + (size_t)s * per_seq + (size_t)h * S * S, &d, S);
            r0 += n;
        }
    }
    return SLM_OK;
}
