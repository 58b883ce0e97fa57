/* The executor's attention tasks (per-row and block entries, key parts and
 * their merge, sinks) and mixture-of-experts tasks (routing, combining). */
#include <math.h>
#include <string.h>

#include "common/dtype.h"
#include "device/attention.h"
#include "program/program.h"
#include "device/exec_ops.h"

/* ---- attention ---------------------------------------------------------- */

/* The task's rows [r0, r1), query heads [h, h1) (one KV head's), one row
 * at a time: the set's attention, or plain C for gemma2's capped scores;
 * with f2 > 0 the heads' ALiBi slopes (jina-bert-v2: f2 the largest bias). */
static void attn_per_row(const slm_task *t, const slm_kernel_set *ks, const int32_t *cp, int upto, int r0, int r1, int h,
                         int h1, const void *K, const void *V, float scale) {
    const int32_t *mask = t->p[SLM_REF_SRC3];
    const float *sinks = (t->flags & SLM_TF_SINKS) ? t->p[SLM_REF_SRC4] : NULL;
    float ml[2 * 64], slope[64];
    for (int g = h; g < h1 && g - h < 64 && t->f2 > 0.0f; g++) slope[g - h] = slm_alibi_slope(g, t->a, t->f2);
    for (int r = r0; r < r1; r++) {
        int first, last;
        slm_attn_range(t, cp, r, upto, &first, &last);
        slm_attn_args a = {
            .q = row_f(t->p[SLM_REF_SRC0], &t->ref[SLM_REF_SRC0], r) + (size_t)h * t->c,
            .q_stride = (size_t)t->c,
            .group = h1 - h,
            .head_dim = t->c,
            .K = K,
            .V = V,
            .ld = t->ref[SLM_REF_SRC1].ld,
            .kv_type = t->wtype,
            .mask = mask,
            .first = first,
            .last = last,
            .scale = scale,
            .out = row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], r) + (size_t)h * t->c,
            .out_stride = (size_t)t->c,
            .ml = sinks ? ml : NULL,
            .alibi = t->f2 > 0.0f ? slope : NULL,
            .qpos = cp[r],
        };
        if (t->f1 > 0.0f) slm_attention_plain(&a, t->f1); /* gemma2's capped scores */
        else ks->attention(&a);
        if (sinks) /* one more logit in each head's denominator: out * l / (l + exp(sink - m)) */
            for (int g = 0; g < h1 - h; g++) {
                const float m = ml[2 * g], l = ml[2 * g + 1];
                const float f = l > 0.0f ? l / (l + expf(sinks[h + g] - m)) : 0.0f;
                float *o = a.out + (size_t)g * a.out_stride;
                for (int d = 0; d < t->c; d++) o[d] *= f;
            }
    }
}

/* An ATTENTION task (its rows: all valid ones, or its row part, cut by the
 * cache positions: slm_attn_part_rows): per run of query heads sharing a KV head (GQA), the
 * set's block entry (attention_rows: the avx512 set's K^T tiles, the amx
 * sets' BF16 tiles) over blocks of up to SLM_ATTN_ROWS_MAX rows of one
 * sequence region, when the set has one, the scores are uncapped and the
 * call has >= 2 rows (decode's one row keeps the per-row entry); otherwise,
 * or for a block the entry declines, one row at a time. */
/* A KEY_PARTS task: part tiles[0] of each row's KV rows, every head of
 * [n0, n1), into the partials (outputs, then max and sum, per head). */
static void run_attention_keys(const slm_task *t, rows rr, const slm_kernel_set *ks) {
    const int32_t *mask = t->p[SLM_REF_SRC3], *cp = t->p[SLM_REF_SRC4];
    const int group = t->a / t->b, part = t->tiles[0], parts = t->tiles[1], w = t->c + 2;
    const float scale = t->f0 != 0.0f ? t->f0 : 1.0f / sqrtf((float)t->c);
    float ml[2 * 64];
    for (int r = rr.begin; r < rr.end; r++) {
        int first, last, b, e;
        slm_attn_range(t, cp, r, cp[rr.end - 1], &first, &last);
        slm_attn_part_keys(first, last, part, parts, &b, &e);
        float *pr = row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], r) + (size_t)part * t->a * w;
        for (int h = t->n0; h < t->n1;) {
            const int kvh = h / group;
            int h1 = (kvh + 1) * group < t->n1 ? (kvh + 1) * group : t->n1;
            if (h1 - h > 64) h1 = h + 64;
            if (b >= e) { /* no KV rows in this part: nothing to merge */
                for (int g = h; g < h1; g++) {
                    memset(pr + (size_t)g * w, 0, (size_t)t->c * sizeof(float));
                    pr[(size_t)g * w + t->c] = -INFINITY;
                    pr[(size_t)g * w + t->c + 1] = 0.0f;
                }
                h = h1;
                continue;
            }
            const size_t kv_head_off = t->wtype == SLM_F32 ? (size_t)kvh * t->c * sizeof(float)
                                                           : (size_t)slm_row_bytes(t->wtype, (uint64_t)kvh * t->c);
            slm_attn_args a = {
                .q = row_f(t->p[SLM_REF_SRC0], &t->ref[SLM_REF_SRC0], r) + (size_t)h * t->c,
                .q_stride = (size_t)t->c,
                .group = h1 - h,
                .head_dim = t->c,
                .K = (const uint8_t *)t->p[SLM_REF_SRC1] + kv_head_off,
                .V = (const uint8_t *)t->p[SLM_REF_SRC2] + kv_head_off,
                .ld = t->ref[SLM_REF_SRC1].ld,
                .kv_type = t->wtype,
                .mask = mask,
                .first = b,
                .last = e - 1,
                .scale = scale,
                .out = pr + (size_t)h * w,
                .out_stride = (size_t)w,
                .ml = ml,
            };
            ks->attention(&a);
            for (int g = h; g < h1; g++) {
                pr[(size_t)g * w + t->c] = ml[2 * (g - h)];
                pr[(size_t)g * w + t->c + 1] = ml[2 * (g - h) + 1];
            }
            h = h1;
        }
    }
}

/* ATTN_MERGE: each head's parts weighted by sum * exp(max - the largest). */
void slm_exec_attn_merge(const slm_task *t, rows rr) {
    const int parts = t->tiles[1], w = t->c + 2;
    const float *sinks = (t->flags & SLM_TF_SINKS) ? t->p[SLM_REF_SRC1] : NULL;
    for (int r = rr.begin; r < rr.end; r++) {
        const float *pr = row_f(t->p[SLM_REF_SRC0], &t->ref[SLM_REF_SRC0], r);
        float *o = row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], r);
        for (int h = t->n0; h < t->n1; h++) {
            float mx = -INFINITY, sum = 0.0f, f[256];
            for (int p = 0; p < parts && p < 256; p++) {
                const float m = pr[((size_t)p * t->a + h) * w + t->c];
                if (m > mx) mx = m;
            }
            float *y = o + (size_t)h * t->c;
            memset(y, 0, (size_t)t->c * sizeof(float));
            if (mx == -INFINITY) continue; /* no part took a key: 0, as the unsplit kernels */
            for (int p = 0; p < parts && p < 256; p++) {
                const float *x = pr + ((size_t)p * t->a + h) * w;
                const float l = x[t->c + 1];
                f[p] = l > 0.0f ? l * expf(x[t->c] - mx) : 0.0f;
                sum += f[p];
            }
            for (int p = 0; p < parts && p < 256; p++) {
                if (f[p] == 0.0f) continue;
                const float *x = pr + ((size_t)p * t->a + h) * w;
                for (int d = 0; d < t->c; d++) y[d] += f[p] * x[d];
            }
            if (sinks) sum += expf(sinks[h] - mx); /* the head's sink logit in the denominator */
            if (sum > 0.0f)
                for (int d = 0; d < t->c; d++) y[d] /= sum;
        }
    }
}

void slm_exec_attention(const slm_task *t, rows rr, const int32_t *cpos, const slm_kernel_set *ks) {
    if (t->flags & SLM_TF_KEY_PARTS) {
        run_attention_keys(t, rr, ks);
        return;
    }
    /* with sinks src4 holds them: the call's cache positions come from the program's input */
    const int32_t *mask = t->p[SLM_REF_SRC3], *cp = (t->flags & SLM_TF_SINKS) ? cpos : t->p[SLM_REF_SRC4];
    const int upto = rr.end > rr.begin ? cp[rr.end - 1] : 0; /* before the row part: the input's last row */
    const int group = t->a / t->b;
    const float scale = t->f0 != 0.0f ? t->f0 : 1.0f / sqrtf((float)t->c);
    /* decided on the call's rows, not the part's: a row's result does not depend on the parts;
     * sinks need each head's softmax state, which the per-row entries report. Rows of different
     * sequences (a batch program: one row each) take the per-row path, as each would alone in
     * the generate program: the blocked kernel of one row sums in another order */
    const int one_seq = rr.end - rr.begin >= 2 && (t->k <= 0 || cp[rr.begin] / t->k == cp[rr.begin + 1] / t->k);
    /* ALiBi (f2 > 0) in blocks where the set's entry takes it (avx2, avx512), else per row */
    const int blocks = ks->attention_rows && t->f1 == 0.0f && !(t->flags & SLM_TF_SINKS) && one_seq;
    slm_attn_part_rows(t, cp, rr.begin, rr.end, &rr.begin, &rr.end); /* the task's row part, if any */
    for (int h = t->n0; h < t->n1;) {
        const int kvh = h / group;
        const int h1 = (kvh + 1) * group < t->n1 ? (kvh + 1) * group : t->n1;
        /* the KV head's first element in a row of the KV type */
        const size_t kv_head_off = t->wtype == SLM_F32 ? (size_t)kvh * t->c * sizeof(float)
                                                       : (size_t)slm_row_bytes(t->wtype, (uint64_t)kvh * t->c);
        const void *K = (const uint8_t *)t->p[SLM_REF_SRC1] + kv_head_off;
        const void *V = (const uint8_t *)t->p[SLM_REF_SRC2] + kv_head_off;
        for (int r0 = rr.begin; r0 < rr.end;) {
            int r1 = rr.end, done = 0;
            if (blocks) {
                int first[SLM_ATTN_ROWS_MAX], last[SLM_ATTN_ROWS_MAX], n = 0;
                float slope[64];
                for (int g = h; g < h1 && g - h < 64 && t->f2 > 0.0f; g++) slope[g - h] = slm_alibi_slope(g, t->a, t->f2);
                /* a block stays inside one sequence region: no row sees another's keys */
                const int region = t->k > 0 ? cp[r0] / t->k : 0;
                for (r1 = r0; r1 < rr.end && n < SLM_ATTN_ROWS_MAX && (t->k > 0 ? cp[r1] / t->k : 0) == region; r1++, n++)
                    slm_attn_range(t, cp, r1, upto, &first[n], &last[n]);
                const slm_attn_rows ar = {
                    .q = row_f(t->p[SLM_REF_SRC0], &t->ref[SLM_REF_SRC0], r0) + (size_t)h * t->c,
                    .q_ld = t->ref[SLM_REF_SRC0].ld,
                    .q_stride = (size_t)t->c,
                    .rows = n,
                    .group = h1 - h,
                    .head_dim = t->c,
                    .K = K,
                    .V = V,
                    .ld = t->ref[SLM_REF_SRC1].ld,
                    .kv_type = t->wtype,
                    .mask = mask,
                    .first = first,
                    .last = last,
                    .scale = scale,
                    .out = row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], r0) + (size_t)h * t->c,
                    .out_ld = t->ref[SLM_REF_DST].ld,
                    .out_stride = (size_t)t->c,
                    .alibi = t->f2 > 0.0f && h1 - h <= 64 ? slope : NULL,
                    .qpos = cp + r0,
                };
                done = (t->f2 > 0.0f && !ar.alibi) ? 0 : ks->attention_rows(&ar);
            }
            for (int hh = h; !done && hh < h1; hh += 64) /* the sinks' softmax states: 64 heads at a time */
                attn_per_row(t, ks, cp, upto, r0, r1, hh, hh + 64 < h1 ? hh + 64 : h1, K, V, scale);
            r0 = r1;
        }
        h = h1;
    }
}

/* Row r's routing (task.h, SLM_T_MOE_ROUTE): its scores (softmax of the
 * router logits, or each one's sigmoid when b = 1), its K experts of the
 * largest score (plus the selection bias src1, when set; softmax without
 * one: of the largest logit, the same order) (ties: the lower index, as a
 * stable sort) into sel, their unbiased scores as weights (over their sum
 * when a = 1, the sum clamped as llama.cpp's; then times f2, then times
 * the expert's scale src2 when set: gemma4's), each chosen expert counted in
 * ex. key: E floats of scratch. */
static int route_row(const slm_task *t, int r, float *key, int32_t *sel, float *wt, int32_t *ex) {
    const int K = t->c, E = t->n, sigmoid = t->b == 1;
    const float *lg = row_f(t->p[SLM_REF_SRC0], &t->ref[SLM_REF_SRC0], r);
    const float *bias = t->ref[SLM_REF_SRC1].space ? t->p[SLM_REF_SRC1] : NULL;
    const float *dscale = t->ref[SLM_REF_SRC2].space ? t->p[SLM_REF_SRC2] : NULL; /* gemma4's per-expert scales */
    float mx = lg[0], sum = 0.0f, wsum = 0.0f;
    for (int e = 1; e < E; e++) mx = lg[e] > mx ? lg[e] : mx;
    for (int e = 0; e < E && !sigmoid; e++) sum += expf(lg[e] - mx);
    for (int e = 0; e < E; e++) {
        const float sc = sigmoid ? 1.0f / (1.0f + expf(-lg[e])) : expf(lg[e] - mx) / sum;
        key[e] = bias ? sc + bias[e] : sigmoid ? sc : lg[e];
    }
    for (int s = 0; s < K; s++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            int taken = 0;
            for (int q = 0; q < s && !taken; q++) taken = sel[q] == e;
            if (!taken && (best < 0 || key[e] > key[best])) best = e;
        }
        if (best < 0) return -1;
        sel[s] = best;
        wt[s] = sigmoid ? 1.0f / (1.0f + expf(-lg[best])) : expf(lg[best] - mx) / sum;
        wsum += wt[s];
        ex[2 * best + 1]++;
    }
    if (wsum < 6.103515625e-5f) wsum = 6.103515625e-5f;
    for (int s = 0; s < K; s++) {
        if (t->a) wt[s] /= wsum;
        if (t->f2 != 0.0f) wt[s] *= t->f2;
        if (dscale) wt[s] *= dscale[sel[s]];
    }
    return 0;
}

/* The routing table of the valid rows (task.h, SLM_T_MOE_ROUTE): each
 * row's experts and weights (route_row), then the (row, slot) pairs sorted
 * by expert by counting. */
slm_status slm_exec_moe_route(const slm_task *t, rows rr) {
    const int T = t->m, K = t->c, E = t->n;
    int32_t *tab = t->p[SLM_REF_DST];
    int32_t *rowlist = tab + SLM_MOE_ROWLIST(T, K), *pos = tab + SLM_MOE_POS(T, K);
    float *wt = (float *)(tab + SLM_MOE_WEIGHT(T, K));
    int32_t *ex = tab + SLM_MOE_EXPERT(T, K, 0); /* (first, count) per expert */
    float key[1024]; /* E <= 1024 (blob_check) */
    if (E > 1024) return SLM_ERR_INTERNAL;
    for (int e = 0; e < E; e++) ex[2 * e] = ex[2 * e + 1] = 0;
    for (int r = rr.begin; r < rr.end; r++) /* the row's experts go in pos until the places replace them */
        if (route_row(t, r, key, pos + (size_t)r * K, wt + (size_t)r * K, ex)) return SLM_ERR_INTERNAL;
    for (int e = 0, at = 0; e < E; e++) { /* places: experts in order */
        ex[2 * e] = at;
        at += ex[2 * e + 1];
    }
    for (int e = 0; e < E; e++) ex[2 * e + 1] = 0; /* recounted as the places fill */
    for (int r = rr.begin; r < rr.end; r++)
        for (int s = 0; s < K; s++) {
            const int e = pos[(size_t)r * K + s], at = ex[2 * e] + ex[2 * e + 1]++;
            rowlist[at] = r;
            pos[(size_t)r * K + s] = at;
        }
    return SLM_OK;
}

/* x[r, n0:n1] += scale * sum over the row's slots of weight * y[place]
 * (b = 1: x[r, n0:n1] = that sum). */
slm_status slm_exec_moe_combine(const slm_task *t, rows rr) {
    const int T = t->m, K = t->c, w = t->n1 - t->n0;
    const int32_t *tab = t->p[SLM_REF_SRC3];
    const int32_t *pos = tab + SLM_MOE_POS(T, K);
    const float *wt = (const float *)(tab + SLM_MOE_WEIGHT(T, K));
    const float scale = t->f2 != 0.0f ? t->f2 : 1.0f;
    float acc[256];
    for (int r = rr.begin; r < rr.end; r++) {
        float *x = row_f(t->p[SLM_REF_DST], &t->ref[SLM_REF_DST], r) + t->n0;
        for (int s = 0; s < K; s++) {
            const int32_t at = pos[(size_t)r * K + s];
            if (at < 0 || at >= T * K) return SLM_ERR_INTERNAL;
        }
        /* the shared expert's row and gate (qwen2moe: sigmoid of its logit) */
        const float *sh = t->a ? row_f(t->p[SLM_REF_SRC1], &t->ref[SLM_REF_SRC1], r) + t->n0 : NULL;
        const float sg = t->a == 2 ? 1.0f / (1.0f + expf(-*row_f(t->p[SLM_REF_SRC2], &t->ref[SLM_REF_SRC2], r))) : 1.0f;
        for (int j0 = 0; j0 < w; j0 += 256) { /* the experts' sum, then into the residual (llama.cpp's order) */
            const int jn = w - j0 < 256 ? w - j0 : 256;
            for (int s = 0; s < K; s++) {
                const float a = wt[(size_t)r * K + s];
                const float *y = row_f(t->p[SLM_REF_SRC0], &t->ref[SLM_REF_SRC0], pos[(size_t)r * K + s]) + t->n0 + j0;
                if (s == 0)
                    for (int j = 0; j < jn; j++) acc[j] = a * y[j];
                else
                    for (int j = 0; j < jn; j++) acc[j] += a * y[j];
            }
            if (sh)
                for (int j = 0; j < jn; j++) acc[j] += sg * sh[j0 + j];
            if (t->b) /* gemma4: the sum alone (x lent its storage) */
                for (int j = 0; j < jn; j++) x[j0 + j] = scale * acc[j];
            else
                for (int j = 0; j < jn; j++) x[j0 + j] += scale * acc[j];
        }
    }
    return SLM_OK;
}
