/* Attention kernels: one query row of a group of query heads that share a
 * KV head (grouped-query attention), against KV rows [first, last] whose
 * mask is set. KV rows are walked in tiles with a running max, running sum
 * and running output per head (flash attention's merge), so any number of
 * rows needs only a fixed stack buffer. Rows the mask rules out are never
 * read (a NaN there cannot reach the result); a tile with no valid row is
 * skipped whole.
 *
 * Variants: AVX-512 (head_dim % 16 == 0), AVX2 (head_dim % 8 == 0), and the
 * scalar reference (any head_dim): each an entry of a kernel set
 * (slm_kernel_set.attention), which falls back to the next for shapes it
 * does not take. Prefill also has the avx512 set's block entry
 * (slm_attention_rows_avx512, slm_kernel_set.attention_rows, below): a
 * block of query rows against K^T tiles converted once for all of them.
 *
 * KV types: the cache holds f32, f16 or q8_0 rows (slm_attn_args.kv_type).
 * The SIMD variants convert the valid rows of one tile of one KV head to
 * floats on the stack (F16C / int8 widening), K before the scores and V
 * after them, and run the f32 arithmetic on that tile: the cache is read
 * once in its own type, never copied whole. An f32 cache is read in place
 * (the same instructions as before KV types existed).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtype.h"
#include "device/attention.h"
#include "device/kernels.h" /* slm_k_attention_head */

#define TILE 32
#define MAX_GROUP 64
#define MAX_HD 512

/* Bytes between KV rows. */
static size_t kv_row_bytes(const slm_attn_args *a) {
    return a->kv_type == SLM_F32 ? a->ld * sizeof(float) : (size_t)slm_row_bytes((uint32_t)a->kv_type, a->ld);
}

/* KV row j of one head as floats: in place (f32) or converted into buf. */
static const float *kv_row(const slm_attn_args *a, const void *base, int j, float *buf) {
    const uint8_t *r = (const uint8_t *)base + (size_t)j * kv_row_bytes(a);
    if (a->kv_type == SLM_F32) return (const float *)(const void *)r;
    slm_dequantize_row((uint32_t)a->kv_type, r, buf, a->head_dim);
    return buf;
}

void slm_attention_plain(const slm_attn_args *a, float cap) {
    float kb[MAX_HD], vb[MAX_HD];
    for (int g = 0; g < a->group; g++) {
        const float *q = a->q + (size_t)g * a->q_stride;
        float *o = a->out + (size_t)g * a->out_stride;
        float m = -INFINITY, l = 0.0f;
        memset(o, 0, (size_t)a->head_dim * sizeof(float));
        for (int j = a->first; j <= a->last; j++) {
            if (!a->mask[j]) continue;
            const float *k = kv_row(a, a->K, j, kb), *v = kv_row(a, a->V, j, vb);
            float sc = 0.0f;
            for (int d = 0; d < a->head_dim; d++) sc += q[d] * k[d];
            sc = cap > 0.0f ? cap * tanhf(sc * a->scale / cap) : sc * a->scale;
            if (a->alibi) sc -= a->alibi[g] * (float)abs(a->qpos - j);
            if (sc > m) {
                const float corr = m == -INFINITY ? 0.0f : expf(m - sc);
                l *= corr;
                for (int d = 0; d < a->head_dim; d++) o[d] *= corr;
                m = sc;
            }
            const float p = expf(sc - m);
            l += p;
            for (int d = 0; d < a->head_dim; d++) o[d] += p * v[d];
        }
        if (l > 0.0f)
            for (int d = 0; d < a->head_dim; d++) o[d] /= l;
        if (a->ml) {
            a->ml[2 * g] = m;
            a->ml[2 * g + 1] = l;
        }
    }
}

/* Scalar reference: the same tiled algorithm, plain C (f32 caches); other
 * KV types one row at a time. */
static void attn_scalar(const slm_attn_args *a) {
    /* slm_k_attention_head scales by 1 / sqrt(head_dim) and keeps its softmax state */
    if (a->kv_type != SLM_F32 || a->ml || a->alibi || a->scale != 1.0f / sqrtf((float)a->head_dim)) {
        slm_attention_plain(a, 0.0f);
        return;
    }
    const int G = a->group, hd = a->head_dim;
    const float *K = a->K, *V = a->V;
    for (int g = 0; g < G; g++)
        slm_k_attention_head(a->q + (size_t)g * a->q_stride, K + (size_t)a->first * a->ld,
                             V + (size_t)a->first * a->ld, (int)a->ld, a->mask + a->first, a->last - a->first, hd,
                             a->out + (size_t)g * a->out_stride);
}

void slm_kv_store_scalar(int kv_type, const float *x, void *y, int n) { slm_quantize_row((uint32_t)kv_type, x, y, n); }

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "device/exp512.h"
#include "device/kv_row256.h"
#include "device/kv_row512.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define AVX2 __attribute__((target("avx2,fma,f16c")))

/* One f16 or q8_0 KV row of head_dim elements as floats, per instruction set. */
typedef void (*kv_row_fn)(int kv_type, int hd, const uint8_t *r, float *o);

/* Rows [j0, j0 + nt) of one KV head (the valid ones) as floats, head_dim
 * apart, into buf; an f32 cache is returned in place with its own stride. */
static const float *kv_tile(const slm_attn_args *a, const void *base, int j0, int nt, float *buf, size_t *ld,
                            kv_row_fn row) {
    if (a->kv_type == SLM_F32) {
        *ld = a->ld;
        return (const float *)base + (size_t)j0 * a->ld;
    }
    const int hd = a->head_dim;
    const size_t rb = kv_row_bytes(a);
    *ld = (size_t)hd;
    for (int t = 0; t < nt; t++)
        if (a->mask[j0 + t]) row(a->kv_type, hd, (const uint8_t *)base + (size_t)(j0 + t) * rb, buf + (size_t)t * hd);
    return buf;
}

/* The running state of the group's heads: max -inf, sum 0, output 0. */
static void attn_begin(const slm_attn_args *a, float *m, float *l) {
    for (int g = 0; g < a->group; g++) {
        m[g] = -INFINITY;
        l[g] = 0.0f;
        memset(a->out + (size_t)g * a->out_stride, 0, (size_t)a->head_dim * sizeof(float));
    }
}

/* The rows of the tile at j0 (at most TILE), 0 when the mask rules out
 * every one of them. */
static inline int tile_rows(const slm_attn_args *a, int j0) {
    const int nt = a->last + 1 - j0 < TILE ? a->last + 1 - j0 : TILE;
    int any = 0;
    for (int t = 0; t < nt; t++) any |= a->mask[j0 + t];
    return any ? nt : 0;
}

/* One head's scores s[0..nt) of a tile against its running max *m: 0 when
 * every score is -inf (the tile changes nothing), else the new max in *m
 * and in *corr the factor for the sum and output so far. */
static inline int tile_max(const float *s, int nt, float *m, float *corr) {
    float tmax = -INFINITY;
    for (int t = 0; t < nt; t++) tmax = s[t] > tmax ? s[t] : tmax;
    if (tmax == -INFINITY) return 0;
    const float mnew = tmax > *m ? tmax : *m;
    *corr = *m == -INFINITY ? 0.0f : expf(*m - mnew);
    *m = mnew;
    return 1;
}

/* ALiBi on a tile's scores s[g][0..nt) of KV rows from j0 (the masked stay -inf). */
static void attn_alibi(const slm_attn_args *a, int j0, int nt, float (*s)[TILE]) {
    for (int g = 0; g < a->group; g++)
        for (int t = 0; t < nt; t++) s[g][t] -= a->alibi[g] * (float)abs(a->qpos - (j0 + t));
}

/* The softmax state out (slm_attn_args.ml), where asked for. */
static void attn_store_ml(const slm_attn_args *a, const float *m, const float *l) {
    if (a->ml)
        for (int g = 0; g < a->group; g++) a->ml[2 * g] = m[g], a->ml[2 * g + 1] = l[g];
}

/* F16C stores of f16 rows; q8_0 through the reference quantizer. */
AVX2 void slm_kv_store_x86(int kv_type, const float *x, void *y, int n) {
    if (kv_type != SLM_F16) {
        slm_quantize_row((uint32_t)kv_type, x, y, n);
        return;
    }
    uint16_t *h = y;
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(h + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) h[i] = slm_f32_to_f16(x[i]);
}

AVX512 static void attn_avx512(const slm_attn_args *a) {
    const int G = a->group, hd = a->head_dim, nv = hd / 16;
    float m[MAX_GROUP], l[MAX_GROUP];
    float s[MAX_GROUP][TILE] __attribute__((aligned(64)));
    attn_begin(a, m, l);
    float kvbuf[TILE * MAX_HD] __attribute__((aligned(64))); /* one tile of K, then of V (typed caches) */
    const __m512 scale = _mm512_set1_ps(a->scale);
    for (int j0 = a->first; j0 <= a->last; j0 += TILE) {
        const int nt = tile_rows(a, j0);
        if (!nt) continue; /* the mask rules the whole tile out */
        size_t kld, vld;
        const float *kt = kv_tile(a, a->K, j0, nt, kvbuf, &kld, slm_kv_row512);
        /* scores: each K row once, against every head of the group */
        for (int t = 0; t < nt; t++) {
            if (!a->mask[j0 + t]) {
                for (int g = 0; g < G; g++) s[g][t] = -INFINITY;
                continue;
            }
            const float *k = kt + (size_t)t * kld;
            for (int g = 0; g < G; g++) {
                const float *q = a->q + (size_t)g * a->q_stride;
                __m512 acc = _mm512_mul_ps(_mm512_loadu_ps(q), _mm512_loadu_ps(k));
                for (int v = 1; v < nv; v++) acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + 16 * v), _mm512_loadu_ps(k + 16 * v), acc);
                s[g][t] = _mm512_reduce_add_ps(_mm512_mul_ps(acc, scale));
            }
        }
        if (a->alibi) attn_alibi(a, j0, nt, s);
        const float *vt = kv_tile(a, a->V, j0, nt, kvbuf, &vld, slm_kv_row512);
        for (int g = 0; g < G; g++) {
            /* running max / sum / output */
            float corr;
            if (!tile_max(s[g], nt, &m[g], &corr)) continue;
            __m512 mv = _mm512_set1_ps(m[g]), sum = _mm512_setzero_ps();
            for (int t = 0; t < nt; t += 16) {
                __mmask16 km = (__mmask16)(nt - t >= 16 ? 0xffff : (1u << (nt - t)) - 1);
                __m512 sv = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), km, &s[g][t]);
                __m512 p = _mm512_maskz_mov_ps(km, slm_exp512(_mm512_sub_ps(sv, mv)));
                /* masked rows: exp(-inf) underflows to 0 after the clamp? force it */
                p = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(sv, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ), p);
                _mm512_storeu_ps(&s[g][t], p);
                sum = _mm512_add_ps(sum, p);
            }
            l[g] = l[g] * corr + _mm512_reduce_add_ps(sum);
            float *o = a->out + (size_t)g * a->out_stride;
            __m512 c = _mm512_set1_ps(corr);
            for (int v = 0; v < nv; v++) _mm512_storeu_ps(o + 16 * v, _mm512_mul_ps(_mm512_loadu_ps(o + 16 * v), c));
            for (int t = 0; t < nt; t++) {
                if (!a->mask[j0 + t]) continue;
                const float *vr = vt + (size_t)t * vld;
                __m512 p = _mm512_set1_ps(s[g][t]);
                for (int v = 0; v < nv; v++)
                    _mm512_storeu_ps(o + 16 * v, _mm512_fmadd_ps(p, _mm512_loadu_ps(vr + 16 * v), _mm512_loadu_ps(o + 16 * v)));
            }
        }
    }
    attn_store_ml(a, m, l);
    for (int g = 0; g < G; g++) {
        if (!(l[g] > 0.0f)) continue;
        float *o = a->out + (size_t)g * a->out_stride;
        __m512 inv = _mm512_set1_ps(1.0f / l[g]);
        for (int v = 0; v < nv; v++) _mm512_storeu_ps(o + 16 * v, _mm512_mul_ps(_mm512_loadu_ps(o + 16 * v), inv));
    }
}

/* ---- the block entry: a block of query rows at once (prefill) ------------
 *
 * Per tile of RT keys, K^T (head_dim x RT floats) and V (RT x head_dim) are
 * converted once on the stack and serve every query row of the block and
 * every head of the group (the per-row entry converts them per row). The
 * scores of up to 4 query vectors (a row's head) are formed 32 keys at once
 * (one FMA per dim against a broadcast query element: no horizontal sums);
 * the online softmax then takes one max and one sum per vector and tile,
 * and P V runs two vectors at a time over the tile's V rows (each V load
 * serves both), with the output in registers for head_dim 64 and 128. The
 * outputs accumulate in place and are divided by the sums at the end.
 * Keys a row does not take (mask, causal limit, window) are -inf in its
 * scores and zero in K^T and V: a NaN behind the mask is never read. The
 * tile conversion and the walk are attention_rows_tile.h's and
 * attention_rows_body.h's, shared with the avx2 entry. */
#define ROWS_ATTR AVX512
#define ROWS_LANES 16
#define ROWS_KV_ROW slm_kv_row512
#include "device/attention_rows_tile.h"

/* The softmax step of one query vector over a tile: s0, s1 its raw scores
 * (keys 0..15, 16..31), rm the keys it takes. Updates *m and *l, writes the
 * weights to p[RT] and returns the factor for the output so far. */
AVX512 static inline float rows_softmax(__m512 s0, __m512 s1, uint32_t rm, float scale, float *m, float *l,
                                        float *p) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY), sc = _mm512_set1_ps(scale);
    const __mmask16 k0 = (__mmask16)rm, k1 = (__mmask16)(rm >> 16);
    s0 = _mm512_mask_mul_ps(ninf, k0, s0, sc);
    s1 = _mm512_mask_mul_ps(ninf, k1, s1, sc);
    const float tmax = _mm512_reduce_max_ps(_mm512_max_ps(s0, s1));
    if (tmax == -INFINITY) { /* every score -inf: as the per-row entry, the tile changes nothing */
        memset(p, 0, RT * sizeof(float));
        return 1.0f;
    }
    const float mold = *m, mnew = tmax > mold ? tmax : mold;
    const float corr = mold == -INFINITY ? 0.0f : expf(mold - mnew);
    *m = mnew;
    const __m512 mv = _mm512_set1_ps(mnew);
    const __m512 p0 = _mm512_maskz_mov_ps(k0, slm_exp512(_mm512_sub_ps(s0, mv)));
    const __m512 p1 = _mm512_maskz_mov_ps(k1, slm_exp512(_mm512_sub_ps(s1, mv)));
    _mm512_store_ps(p, p0);
    _mm512_store_ps(p + 16, p1);
    *l = *l * corr + _mm512_reduce_add_ps(_mm512_add_ps(p0, p1));
    return corr;
}

/* o = o * corr + sum over keys t < nt of p[t] V[t], for one or two query
 * vectors (o1 NULL: one); HD 0 = any head_dim (hd), with the output in
 * memory, else the output of HD / 16 vectors in registers. */
AVX512 static inline __attribute__((always_inline)) void rows_pv(const float *vt, int hd, int nt, const int HD,
                                                                  float *o0, const float *p0, float c0, float *o1,
                                                                  const float *p1, float c1) {
    if (HD) {
        const int nv = HD / 16;
        __m512 a0[HD ? HD / 16 : 1], a1[HD ? HD / 16 : 1];
        const __m512 cv0 = _mm512_set1_ps(c0), cv1 = _mm512_set1_ps(c1);
        for (int v = 0; v < nv; v++) a0[v] = _mm512_mul_ps(_mm512_loadu_ps(o0 + 16 * v), cv0);
        if (o1)
            for (int v = 0; v < nv; v++) a1[v] = _mm512_mul_ps(_mm512_loadu_ps(o1 + 16 * v), cv1);
        for (int t = 0; t < nt; t++) {
            const float *vr = vt + (size_t)t * HD;
            const __m512 b0 = _mm512_set1_ps(p0[t]);
            if (o1) {
                const __m512 b1 = _mm512_set1_ps(p1[t]);
                for (int v = 0; v < nv; v++) {
                    const __m512 x = _mm512_load_ps(vr + 16 * v);
                    a0[v] = _mm512_fmadd_ps(b0, x, a0[v]);
                    a1[v] = _mm512_fmadd_ps(b1, x, a1[v]);
                }
            } else {
                for (int v = 0; v < nv; v++) a0[v] = _mm512_fmadd_ps(b0, _mm512_load_ps(vr + 16 * v), a0[v]);
            }
        }
        for (int v = 0; v < nv; v++) _mm512_storeu_ps(o0 + 16 * v, a0[v]);
        if (o1)
            for (int v = 0; v < nv; v++) _mm512_storeu_ps(o1 + 16 * v, a1[v]);
        return;
    }
    float *os[2] = {o0, o1};
    const float *ps[2] = {p0, p1};
    const float cs[2] = {c0, c1};
    for (int h = 0; h < (o1 ? 2 : 1); h++) {
        float *o = os[h];
        const __m512 cv = _mm512_set1_ps(cs[h]);
        for (int v = 0; v < hd / 16; v++) {
            __m512 acc = _mm512_mul_ps(_mm512_loadu_ps(o + 16 * v), cv);
            for (int t = 0; t < nt; t++)
                acc = _mm512_fmadd_ps(_mm512_set1_ps(ps[h][t]), _mm512_load_ps(vt + (size_t)t * hd + 16 * v), acc);
            _mm512_storeu_ps(o + 16 * v, acc);
        }
    }
}

/* NQ (1..4) query vectors against one tile: their scores, softmax steps
 * and P V. q[h], o[h]: the vectors' queries and outputs; rm[h] their keys;
 * st[h] the index of their m / l. */
AVX512 static inline __attribute__((always_inline)) void rows_chunk(const slm_attn_rows *a, const float *kt,
                                                                     const float *vt, const int NQ, const int HD,
                                                                     const float *const *q, float *const *o,
                                                                     const uint32_t *rm, const int *st, float *m,
                                                                     float *l, int j0) {
    const int hd = HD ? HD : a->head_dim;
    __m512 s[4][2];
    for (int h = 0; h < NQ; h++) s[h][0] = s[h][1] = _mm512_setzero_ps();
    for (int d = 0; d < hd; d++) {
        const __m512 k0 = _mm512_load_ps(kt + (size_t)d * RT), k1 = _mm512_load_ps(kt + (size_t)d * RT + 16);
        for (int h = 0; h < NQ; h++) {
            const __m512 b = _mm512_set1_ps(q[h][d]);
            s[h][0] = _mm512_fmadd_ps(b, k0, s[h][0]);
            s[h][1] = _mm512_fmadd_ps(b, k1, s[h][1]);
        }
    }
    if (a->alibi) /* ALiBi: minus slope * |qpos - j| on the scaled score (here before the scale: over it) */
        for (int h = 0; h < NQ; h++) {
            const __m512 k = _mm512_set1_ps(-a->alibi[st[h] % a->group] / a->scale);
            const __m512i qp = _mm512_set1_epi32(a->qpos[st[h] / a->group]);
            const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
            for (int c = 0; c < 2; c++) {
                const __m512i j = _mm512_add_epi32(_mm512_set1_epi32(j0 + 16 * c), lane);
                const __m512 dist = _mm512_cvtepi32_ps(_mm512_abs_epi32(_mm512_sub_epi32(qp, j)));
                s[h][c] = _mm512_fmadd_ps(k, dist, s[h][c]);
            }
        }
    float p[4][RT] __attribute__((aligned(64)));
    float corr[4];
    uint32_t all = 0;
    for (int h = 0; h < NQ; h++) {
        corr[h] = rows_softmax(s[h][0], s[h][1], rm[h], a->scale, &m[st[h]], &l[st[h]], p[h]);
        all |= rm[h];
    }
    const int nt = 32 - __builtin_clz(all); /* keys past the last any vector takes add nothing */
    int h = 0;
    for (; h + 2 <= NQ; h += 2) rows_pv(vt, hd, nt, HD, o[h], p[h], corr[h], o[h + 1], p[h + 1], corr[h + 1]);
    if (h < NQ) rows_pv(vt, hd, nt, HD, o[h], p[h], corr[h], NULL, NULL, 0.0f);
}

AVX512 static void rows_chunk_any(const slm_attn_rows *a, const float *kt, const float *vt, int nq,
                                  const float *const *q, float *const *o, const uint32_t *rm, const int *st, float *m,
                                  float *l, int j0) {
#define RC(NQ, HD) rows_chunk(a, kt, vt, NQ, HD, q, o, rm, st, m, l, j0)
#define RC_HD(HD)                                                                                                  \
    do {                                                                                                           \
        switch (nq) {                                                                                              \
        case 4: RC(4, HD); break;                                                                                  \
        case 3: RC(3, HD); break;                                                                                  \
        case 2: RC(2, HD); break;                                                                                  \
        default: RC(1, HD); break;                                                                                 \
        }                                                                                                          \
    } while (0)
    if (a->head_dim == 64) RC_HD(64);
    else if (a->head_dim == 128) RC_HD(128);
    else RC_HD(0);
#undef RC_HD
#undef RC
}

/* o *= inv, the block entry's end: the outputs over their sums. */
AVX512 static inline __attribute__((always_inline)) void rows_normalize(float *o, int hd, float inv) {
    const __m512 v = _mm512_set1_ps(inv);
    for (int i = 0; i < hd / 16; i++) _mm512_storeu_ps(o + 16 * i, _mm512_mul_ps(_mm512_loadu_ps(o + 16 * i), v));
}

#define ROWS_NAME slm_attention_rows_avx512
#define ROWS_NQ 4
#define ROWS_ALIBI 1
#include "device/attention_rows_body.h"

AVX2 static inline float hsum8(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

AVX2 static void attn_avx2(const slm_attn_args *a) {
    const int G = a->group, hd = a->head_dim, nv = hd / 8;
    float m[MAX_GROUP], l[MAX_GROUP];
    float s[MAX_GROUP][TILE];
    attn_begin(a, m, l);
    float kvbuf[TILE * MAX_HD] __attribute__((aligned(32)));
    for (int j0 = a->first; j0 <= a->last; j0 += TILE) {
        const int nt = tile_rows(a, j0);
        if (!nt) continue;
        size_t kld, vld;
        const float *kt = kv_tile(a, a->K, j0, nt, kvbuf, &kld, slm_kv_row256);
        for (int t = 0; t < nt; t++) {
            if (!a->mask[j0 + t]) {
                for (int g = 0; g < G; g++) s[g][t] = -INFINITY;
                continue;
            }
            const float *k = kt + (size_t)t * kld;
            for (int g = 0; g < G; g++) {
                const float *q = a->q + (size_t)g * a->q_stride;
                __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(q), _mm256_loadu_ps(k));
                for (int v = 1; v < nv; v++) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + 8 * v), _mm256_loadu_ps(k + 8 * v), acc);
                s[g][t] = hsum8(acc) * a->scale;
            }
        }
        if (a->alibi) attn_alibi(a, j0, nt, s);
        const float *vt = kv_tile(a, a->V, j0, nt, kvbuf, &vld, slm_kv_row256);
        for (int g = 0; g < G; g++) {
            float corr;
            if (!tile_max(s[g], nt, &m[g], &corr)) continue;
            const float mnew = m[g];
            float sum = 0.0f;
            for (int t = 0; t < nt; t++) {
                float p = s[g][t] == -INFINITY ? 0.0f : expf(s[g][t] - mnew);
                s[g][t] = p;
                sum += p;
            }
            l[g] = l[g] * corr + sum;
            float *o = a->out + (size_t)g * a->out_stride;
            __m256 c = _mm256_set1_ps(corr);
            for (int v = 0; v < nv; v++) _mm256_storeu_ps(o + 8 * v, _mm256_mul_ps(_mm256_loadu_ps(o + 8 * v), c));
            for (int t = 0; t < nt; t++) {
                if (!a->mask[j0 + t]) continue;
                const float *vr = vt + (size_t)t * vld;
                __m256 p = _mm256_set1_ps(s[g][t]);
                for (int v = 0; v < nv; v++)
                    _mm256_storeu_ps(o + 8 * v, _mm256_fmadd_ps(p, _mm256_loadu_ps(vr + 8 * v), _mm256_loadu_ps(o + 8 * v)));
            }
        }
    }
    attn_store_ml(a, m, l);
    for (int g = 0; g < G; g++) {
        if (!(l[g] > 0.0f)) continue;
        float *o = a->out + (size_t)g * a->out_stride;
        float inv = 1.0f / l[g];
        for (int d = 0; d < hd; d++) o[d] *= inv;
    }
}

AVX2 void slm_attention_avx2(const slm_attn_args *a) {
    if (!a->alibi && slm_attention_decode_avx2(a)) return; /* attention_decode_avx2.c: head_dim % 8, <= 256 */
    if (a->group <= MAX_GROUP && a->head_dim <= MAX_HD && a->head_dim % 8 == 0 &&
        (a->kv_type != SLM_Q8_0 || a->head_dim % 32 == 0))
        attn_avx2(a);
    else attn_scalar(a);
}

AVX512 void slm_attention_avx512(const slm_attn_args *a) {
    if (!a->alibi && slm_attention_decode_avx512(a)) return; /* attention_decode.c: head_dim % 16, <= 256 */
    if (a->group <= MAX_GROUP && a->head_dim <= MAX_HD && a->head_dim % 16 == 0 &&
        (a->kv_type != SLM_Q8_0 || a->head_dim % 32 == 0))
        attn_avx512(a);
    else slm_attention_avx2(a);
}
#else
void slm_kv_store_x86(int kv_type, const float *x, void *y, int n) { slm_kv_store_scalar(kv_type, x, y, n); }
int slm_attention_rows_avx512(const slm_attn_rows *a) {
    (void)a;
    return 0;
}
#endif

void slm_attention_scalar(const slm_attn_args *a) { attn_scalar(a); }
