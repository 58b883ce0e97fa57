/* Decode attention on AVX2: one query row of the heads that share a KV
 * head, against its KV rows [first, last] (slm_attn_args), the avx2 set's
 * per-row entry for head_dim % 8 == 0 up to 256. The steps of the AVX-512
 * entry (attention_decode.c) at 8 lanes and 16 registers:
 *   - Per tile of 8192 / head_dim keys (32 .. 128), the K rows (f16 / q8_0
 *     converted to f32 on the stack; an f32 cache in place) serve every
 *     head of the group; the next tile's K and V rows are prefetched. A
 *     whole tile of an f16 cache is read in place by groups up to 8.
 *   - Scores: one FMA chain per key and head, 8 keys side by side, then one
 *     transposing reduction of the 8 chains into one vector of 8 scores
 *     (6 horizontal adds, 2 lane permutes and an add per 8 keys).
 *   - Online softmax per head and tile with the vector exp (kv_row256.h).
 *   - P V: outputs in registers over the tile's V rows, 64 dims of one head
 *     at a time (8 accumulators), or two heads per V load for head_dim <= 32.
 * Keys the row does not take (mask, causal limit, window, the tile's tail)
 * are zero rows in the converted tiles, -inf scores and 0 probabilities; a
 * NaN behind the mask is never read (an f32 tile with such a key is copied).
 */
#include <math.h>
#include <string.h>

#include "common/dtype.h"
#include "device/attention.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "device/kv_row256.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define INL inline __attribute__((always_inline))

#define DT_MAX 128     /* keys per tile: DT_FLOATS / head_dim, 32 .. 128 */
#define DT_FLOATS 8192 /* floats of one converted tile */
#define DMAX_HD 256    /* head_dim this entry takes */
#define DMAX_GROUP 64
#define DIRECT_GROUP 8 /* groups up to this read an f16 cache in place */

/* Keys j0 .. j0 + nk - 1 the row takes, one bit each (vm[c] for keys 8c ..). */
typedef struct dec_keys {
    int j0, nk;
    uint8_t vm[DT_MAX / 8];
    int all; /* every key of the tile valid */
} dec_keys;

/* Rows of K or V: row t at base + t * stride bytes, f32 (a converted tile,
 * or an f32 cache in place) or f16 (an f16 cache in place). */
typedef struct dec_rows {
    const uint8_t *base;
    size_t stride;
} dec_rows;

/* Vector v (8 elements) of a K or V row, f16 rows converted on the way. */
AVX2 static INL __m256 ldrow(const uint8_t *row, int v, const int F16) {
    return F16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(row + 16 * v)))
               : _mm256_loadu_ps((const float *)(const void *)row + 8 * v);
}

static size_t dec_row_bytes(const slm_attn_args *a, uint64_t n) {
    return a->kv_type == SLM_F32 ? (size_t)n * sizeof(float) : (size_t)slm_row_bytes((uint32_t)a->kv_type, n);
}

/* The tile's rows as floats hd apart in buf: the rows the row takes
 * converted (or copied, f32), the others zeros. Returns the rows and their
 * stride: an f32 tile with every row valid is read in place. */
AVX2 static const float *dec_tile(const slm_attn_args *a, const void *base, const dec_keys *k, float *buf, size_t *ld) {
    const int hd = a->head_dim;
    if (a->kv_type == SLM_F32 && k->all) {
        *ld = a->ld;
        return (const float *)base + (size_t)k->j0 * a->ld;
    }
    const size_t rb = dec_row_bytes(a, a->ld);
    *ld = (size_t)hd;
    for (int t = 0; t < k->nk; t++) {
        float *o = buf + (size_t)t * hd;
        const uint8_t *r = (const uint8_t *)base + (size_t)(k->j0 + t) * rb;
        if (!(k->vm[t / 8] >> (t % 8) & 1u)) memset(o, 0, (size_t)hd * sizeof(float));
        else if (a->kv_type == SLM_F32) memcpy(o, r, (size_t)hd * sizeof(float));
        else slm_kv_row256(a->kv_type, hd, r, o);
    }
    return buf;
}

/* Touch K and V rows [j0, j1) toward L2 (one KV head's rows are a stride). */
AVX2 static void dec_prefetch(const slm_attn_args *a, int j0, int j1) {
    const size_t rb = dec_row_bytes(a, a->ld), hb = dec_row_bytes(a, (uint64_t)a->head_dim);
    if (j1 > a->last + 1) j1 = a->last + 1;
    for (int j = j0; j < j1; j++) {
        const char *k = (const char *)a->K + (size_t)j * rb, *v = (const char *)a->V + (size_t)j * rb;
        for (size_t o = 0; o < hb; o += 64) {
            _mm_prefetch(k + o, _MM_HINT_T1);
            _mm_prefetch(v + o, _MM_HINT_T1);
        }
    }
}

/* r[t] = the sum of the lanes of x[t], t < 8: horizontal adds within the
 * 128-bit halves leave keys 0-3 (low half sums) and 4-7 in two vectors
 * whose halves the permutes line up. */
AVX2 static INL __m256 hsum8x8(const __m256 x[8]) {
    const __m256 a0 = _mm256_hadd_ps(x[0], x[1]), a1 = _mm256_hadd_ps(x[2], x[3]);
    const __m256 a2 = _mm256_hadd_ps(x[4], x[5]), a3 = _mm256_hadd_ps(x[6], x[7]);
    const __m256 b0 = _mm256_hadd_ps(a0, a1), b1 = _mm256_hadd_ps(a2, a3);
    return _mm256_add_ps(_mm256_permute2f128_ps(b0, b1, 0x20), _mm256_permute2f128_ps(b0, b1, 0x31));
}

/* Scores of 8 keys (rows kt, kld apart) against one head's query q, nv
 * vectors (a constant where the caller makes it one). */
AVX2 static INL __m256 dec_scores8(const float *q, dec_rows kr, const int nv, const int F16) {
    __m256 x[8];
#pragma GCC unroll 8
    for (int t = 0; t < 8; t++) {
        const uint8_t *k = kr.base + (size_t)t * kr.stride;
        __m256 s = _mm256_mul_ps(_mm256_loadu_ps(q), ldrow(k, 0, F16));
#pragma GCC unroll 32
        for (int v = 1; v < nv; v++) s = _mm256_fmadd_ps(_mm256_loadu_ps(q + 8 * v), ldrow(k, v, F16), s);
        x[t] = s;
    }
    return hsum8x8(x);
}

/* The lanes of 8 keys that the row takes (bit t of vm: key t). */
AVX2 static INL __m256 key_mask(uint8_t vm) {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(vm), bit), bit));
}

/* One head over a tile: its scores (scaled; keys not taken -inf) into p,
 * their max returned. */
AVX2 static INL float dec_head_scores_t(const float *q, dec_rows kr, const dec_keys *k, float scale, int nv,
                                        float *p, const int F16) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY), sc = _mm256_set1_ps(scale);
    __m256 mx = ninf;
    for (int c = 0; c < k->nk / 8; c++) {
        const dec_rows kc = {kr.base + (size_t)8 * c * kr.stride, kr.stride};
        __m256 s = nv == 8 ? dec_scores8(q, kc, 8, F16) : nv == 16 ? dec_scores8(q, kc, 16, F16)
                 : nv == 4 ? dec_scores8(q, kc, 4, F16) : dec_scores8(q, kc, nv, F16);
        s = _mm256_blendv_ps(ninf, _mm256_mul_ps(s, sc), key_mask(k->vm[c]));
        mx = _mm256_max_ps(mx, s);
        _mm256_storeu_ps(p + 8 * c, s);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    return _mm_cvtss_f32(m4);
}

AVX2 static float dec_head_scores(const float *q, dec_rows kr, const dec_keys *k, float scale, int nv, float *p,
                                  int f16) {
    return f16 ? dec_head_scores_t(q, kr, k, scale, nv, p, 1) : dec_head_scores_t(q, kr, k, scale, nv, p, 0);
}

AVX2 static INL float hsum8(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

/* The online softmax of one head over a tile: its scores p (max tmax) into
 * probabilities, the running max m and sum l updated; returns the factor of
 * the output so far. */
AVX2 static float dec_softmax(const dec_keys *k, float tmax, float *m, float *l, float *p) {
    const float mnew = tmax > *m ? tmax : *m;
    const float corr = *m == -INFINITY ? 0.0f : _mm256_cvtss_f32(slm_exp256(_mm256_set1_ps(*m - mnew)));
    *m = mnew;
    const __m256 mv = _mm256_set1_ps(mnew);
    __m256 sum = _mm256_setzero_ps();
    for (int c = 0; c < k->nk / 8; c++) {
        const __m256 e = _mm256_and_ps(key_mask(k->vm[c]), slm_exp256(_mm256_sub_ps(_mm256_loadu_ps(p + 8 * c), mv)));
        _mm256_storeu_ps(p + 8 * c, e);
        sum = _mm256_add_ps(sum, e);
    }
    *l = *l * corr + hsum8(sum);
    return corr;
}

/* Dims [d0, d0 + 8 NV) of o[g] = o[g] * corr[g] + sum_t p[g][t] V[t] for
 * the GC heads from g0, in registers over the tile. */
AVX2 static INL void dec_pv(const slm_attn_args *a, dec_rows vr, int nk, const float (*p)[DT_MAX], const float *corr,
                            int g0, int d0, const int GC, const int NV, const int F16) {
    __m256 o[2][8];
#pragma GCC unroll 2
    for (int g = 0; g < GC; g++) {
        const float *out = a->out + (size_t)(g0 + g) * a->out_stride + d0;
        const __m256 c = _mm256_set1_ps(corr[g0 + g]);
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) o[g][v] = _mm256_mul_ps(_mm256_loadu_ps(out + 8 * v), c);
    }
    for (int t = 0; t < nk; t++) {
        const uint8_t *r = vr.base + (size_t)t * vr.stride + (size_t)d0 * (F16 ? 2 : 4);
        __m256 pv[2];
#pragma GCC unroll 2
        for (int g = 0; g < GC; g++) pv[g] = _mm256_set1_ps(p[g0 + g][t]);
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) {
            const __m256 x = ldrow(r, v, F16);
#pragma GCC unroll 2
            for (int g = 0; g < GC; g++) o[g][v] = _mm256_fmadd_ps(pv[g], x, o[g][v]);
        }
    }
#pragma GCC unroll 2
    for (int g = 0; g < GC; g++) {
        float *out = a->out + (size_t)(g0 + g) * a->out_stride + d0;
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) _mm256_storeu_ps(out + 8 * v, o[g][v]);
    }
}

/* Runtime-width pieces: one head, NV <= 8 vectors from d0 (a 64-dim chunk or
 * head_dim's tail), or two heads of NV <= 4 vectors. */
AVX2 static INL void dec_pv_1(const slm_attn_args *a, dec_rows vr, int nk, const float (*p)[DT_MAX],
                              const float *corr, int g, int d0, int nv, const int F16) {
    switch (nv) {
    case 1: dec_pv(a, vr, nk, p, corr, g, d0, 1, 1, F16); break;
    case 2: dec_pv(a, vr, nk, p, corr, g, d0, 1, 2, F16); break;
    case 3: dec_pv(a, vr, nk, p, corr, g, d0, 1, 3, F16); break;
    case 4: dec_pv(a, vr, nk, p, corr, g, d0, 1, 4, F16); break;
    case 5: dec_pv(a, vr, nk, p, corr, g, d0, 1, 5, F16); break;
    case 6: dec_pv(a, vr, nk, p, corr, g, d0, 1, 6, F16); break;
    case 7: dec_pv(a, vr, nk, p, corr, g, d0, 1, 7, F16); break;
    default: dec_pv(a, vr, nk, p, corr, g, d0, 1, 8, F16); break;
    }
}

AVX2 static INL void dec_pv_2(const slm_attn_args *a, dec_rows vr, int nk, const float (*p)[DT_MAX],
                              const float *corr, int g, int nv, const int F16) {
    switch (nv) {
    case 1: dec_pv(a, vr, nk, p, corr, g, 0, 2, 1, F16); break;
    case 2: dec_pv(a, vr, nk, p, corr, g, 0, 2, 2, F16); break;
    case 3: dec_pv(a, vr, nk, p, corr, g, 0, 2, 3, F16); break;
    default: dec_pv(a, vr, nk, p, corr, g, 0, 2, 4, F16); break;
    }
}

/* P V of every head of the group. */
AVX2 static INL void dec_pv_group_t(const slm_attn_args *a, dec_rows vr, int nk, const float (*p)[DT_MAX],
                                    const float *corr, const int F16) {
    const int G = a->group, nv = a->head_dim / 8;
    int g = 0;
    if (nv <= 4)
        for (; g + 2 <= G; g += 2) dec_pv_2(a, vr, nk, p, corr, g, nv, F16);
    for (; g < G; g++)
        for (int v0 = 0; v0 < nv; v0 += 8) dec_pv_1(a, vr, nk, p, corr, g, 8 * v0, nv - v0 < 8 ? nv - v0 : 8, F16);
}

AVX2 static void dec_pv_group(const slm_attn_args *a, dec_rows vr, int nk, const float (*p)[DT_MAX],
                              const float *corr, int f16) {
    if (f16) dec_pv_group_t(a, vr, nk, p, corr, 1);
    else dec_pv_group_t(a, vr, nk, p, corr, 0);
}

AVX2 int slm_attention_decode_avx2(const slm_attn_args *a) {
    const int G = a->group, hd = a->head_dim, nv = hd / 8;
    if (G < 1 || G > DMAX_GROUP || hd % 8 || hd > DMAX_HD || (a->kv_type == SLM_Q8_0 && hd % 32) ||
        (a->kv_type != SLM_F32 && a->kv_type != SLM_F16 && a->kv_type != SLM_Q8_0))
        return 0;
    /* keys per tile: a converted tile of K (or V) stays DT_FLOATS, a multiple of 32 */
    const int dt = DT_FLOATS / hd >= DT_MAX ? DT_MAX : DT_FLOATS / hd / 32 * 32;
    float m[DMAX_GROUP], l[DMAX_GROUP], corr[DMAX_GROUP];
    float p[DMAX_GROUP][DT_MAX] __attribute__((aligned(32)));
    float kbuf[DT_FLOATS] __attribute__((aligned(32))), vbuf[DT_FLOATS] __attribute__((aligned(32)));
    /* an f16 cache read in place by a small group: converting each K vector once per head costs
       less than converting the tile once, storing it and reading it back */
    const int direct_f16 = a->kv_type == SLM_F16 && G <= DIRECT_GROUP;
    for (int g = 0; g < G; g++) {
        m[g] = -INFINITY;
        l[g] = 0.0f;
        memset(a->out + (size_t)g * a->out_stride, 0, (size_t)hd * sizeof(float));
    }
    dec_prefetch(a, a->first, a->first + dt);
    for (int j0 = a->first; j0 <= a->last; j0 += dt) {
        dec_keys k = {.j0 = j0, .nk = a->last + 1 - j0 < dt ? (a->last + 8 - j0) / 8 * 8 : dt};
        int n = 0;
        for (int t = 0; t < k.nk; t++) {
            const int take = j0 + t <= a->last && a->mask[j0 + t];
            k.vm[t / 8] = (uint8_t)((t % 8 ? k.vm[t / 8] : 0) | (take ? 1u : 0u) << (t % 8));
            n += take;
        }
        if (!n) continue; /* the mask rules the whole tile out */
        k.all = n == k.nk;
        dec_prefetch(a, j0 + dt, j0 + 2 * dt);
        /* a whole tile of an f16 cache, small group: read in place */
        const int direct = direct_f16 && k.all;
        const size_t rb = dec_row_bytes(a, a->ld);
        dec_rows kr, vr = {(const uint8_t *)a->V + (size_t)j0 * rb, rb};
        if (direct) {
            kr = (dec_rows){(const uint8_t *)a->K + (size_t)j0 * rb, rb};
        } else {
            size_t kld;
            kr.base = (const uint8_t *)dec_tile(a, a->K, &k, kbuf, &kld);
            kr.stride = kld * sizeof(float);
        }
        int any = 0;
        for (int g = 0; g < G; g++) {
            const float tmax = dec_head_scores(a->q + (size_t)g * a->q_stride, kr, &k, a->scale, nv, p[g], direct);
            if (tmax == -INFINITY) { /* every score -inf: the head's output stays (a NaN goes on) */
                memset(p[g], 0, sizeof p[g]);
                corr[g] = 1.0f;
                continue;
            }
            corr[g] = dec_softmax(&k, tmax, &m[g], &l[g], p[g]);
            any = 1;
        }
        if (!any) continue;
        if (!direct) {
            size_t vld;
            vr.base = (const uint8_t *)dec_tile(a, a->V, &k, vbuf, &vld);
            vr.stride = vld * sizeof(float);
        }
        dec_pv_group(a, vr, k.nk, (const float (*)[DT_MAX])p, corr, direct);
    }
    if (a->ml)
        for (int g = 0; g < G; g++) a->ml[2 * g] = m[g], a->ml[2 * g + 1] = l[g];
    for (int g = 0; g < G; g++) {
        if (!(l[g] > 0.0f)) continue;
        float *o = a->out + (size_t)g * a->out_stride;
        const __m256 inv = _mm256_set1_ps(1.0f / l[g]);
        for (int v = 0; v < nv; v++) _mm256_storeu_ps(o + 8 * v, _mm256_mul_ps(_mm256_loadu_ps(o + 8 * v), inv));
    }
    return 1;
}
#else
int slm_attention_decode_avx2(const slm_attn_args *a) {
    (void)a;
    return 0;
}
#endif
