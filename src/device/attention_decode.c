/* Decode attention on AVX-512: one query row of the heads that share a KV
 * head, against its KV rows [first, last] (slm_attn_args), the avx512 set's
 * per-row entry for head_dim % 16 == 0 up to 256.
 *
 * Decode reads every valid KV row once per step, so at long contexts this
 * is the step's second stream after the weights; the kernel keeps its
 * arithmetic per key and head small:
 *   - Per tile of 8192 / head_dim keys (32 .. 128), the K rows (f16 / q8_0
 *     converted to f32 on the stack; an f32 cache in place) serve every
 *     head of the group; the next tile's K and V rows are prefetched (the
 *     rows of one KV head are a stride the hardware follows late). A whole
 *     tile of an f16 cache is read in place by groups up to DIRECT_GROUP,
 *     each vector converted where an FMA takes it: storing the converted
 *     tile and loading it back cost more than a conversion per head (one
 *     core, Zen 5, head_dim 64, 2048 keys: group 1 33 -> 15 us, group 3
 *     40 -> 26, group 8 about even, group 16 slower).
 *   - Scores: one FMA chain per key and head over the head's vectors, 16
 *     keys side by side, then one transposing reduction of the 16 chains
 *     into one vector of 16 scores (46 shuffles and adds per 16 keys, not a
 *     horizontal sum per key).
 *   - Online softmax per head and tile: one max, the correction by the
 *     vector exp, exp of the tile's score vectors, one sum.
 *   - P V: the outputs of up to 4 heads (head_dim 64; 2 at 128) held in
 *     registers over the tile's V rows, each V row loaded once for them.
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

#include "device/exp512.h"
#include "device/kv_row512.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define INL inline __attribute__((always_inline))

#define DT_MAX 128     /* keys per tile: DT_FLOATS / head_dim, 32 .. 128 */
#define DT_FLOATS 8192 /* floats of one converted tile */
#define DMAX_HD 256    /* head_dim this entry takes */
#define DMAX_GROUP 64
#define DIRECT_GROUP 8 /* groups up to this read an f16 cache in place */

/* Keys j0 .. j0 + nk - 1 the row takes, one bit each (vm[c] for keys 16c ..). */
typedef struct dec_keys {
    int j0, nk;
    uint16_t vm[DT_MAX / 16];
    int all;  /* every key of the tile valid */
} dec_keys;

/* Rows of K or V: row t at base + t * stride bytes, f32 (a converted tile,
 * or an f32 cache in place) or f16 (an f16 cache in place). */
typedef struct dec_rows {
    const uint8_t *base;
    size_t stride;
} dec_rows;

/* Vector v (16 elements) of a K or V row, f16 rows converted on the way. */
AVX512 static INL __m512 ldrow(const void *row, int v, const int F16) {
    return F16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)((const uint16_t *)row + 16 * v)))
               : _mm512_loadu_ps((const float *)row + 16 * v);
}

static size_t dec_row_bytes(const slm_attn_args *a, uint64_t n) {
    return a->kv_type == SLM_F32 ? (size_t)n * sizeof(float) : (size_t)slm_row_bytes((uint32_t)a->kv_type, n);
}

/* The tile's rows as floats hd apart in buf: the rows the row takes
 * converted (or copied, f32), the others zeros. Returns the rows and their
 * stride: an f32 tile with every row valid is read in place. */
AVX512 static const float *dec_tile(const slm_attn_args *a, const void *base, const dec_keys *k, float *buf,
                                    size_t *ld) {
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
        if (!(k->vm[t / 16] >> (t % 16) & 1u)) memset(o, 0, (size_t)hd * sizeof(float));
        else if (a->kv_type == SLM_F32) memcpy(o, r, (size_t)hd * sizeof(float));
        else slm_kv_row512(a->kv_type, hd, r, o);
    }
    return buf;
}

/* Touch K and V rows [j0, j1) toward L2: the rows of one KV head are a few
 * lines of each cache row, a stride the hardware prefetchers follow late. */
AVX512 static void dec_prefetch(const slm_attn_args *a, int j0, int j1) {
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

/* r[t] = the sum of the lanes of x[t], t < 16: pairs of 256-bit halves,
 * then 128-bit quarters, then within quarters; the last step leaves key
 * L + 4m in element 4L + m, which the permutation puts back in order. */
AVX512 static INL __m512 hsum16(const __m512 x[16]) {
    __m512 b[8], c[4], d[2];
    for (int i = 0; i < 8; i++)
        b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], 0xee));
    for (int i = 0; i < 4; i++)
        c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xdd));
    for (int i = 0; i < 2; i++)
        d[i] = _mm512_add_ps(_mm512_unpacklo_ps(c[2 * i], c[2 * i + 1]), _mm512_unpackhi_ps(c[2 * i], c[2 * i + 1]));
    const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(idx, r);
}

/* Scores of 16 keys (rows kp[0..15]) against one head's query q, NV
 * vectors (a constant where the caller makes it one). */
AVX512 static INL __m512 dec_scores16(const float *q, dec_rows kr, const int NV, const int F16) {
    __m512 qv[16], x[16];
#pragma GCC unroll 16
    for (int v = 0; v < NV; v++) qv[v] = _mm512_loadu_ps(q + 16 * v);
#pragma GCC unroll 16
    for (int t = 0; t < 16; t++) {
        const uint8_t *k = kr.base + (size_t)t * kr.stride;
        __m512 s = _mm512_mul_ps(qv[0], ldrow(k, 0, F16));
#pragma GCC unroll 16
        for (int v = 1; v < NV; v++) s = _mm512_fmadd_ps(qv[v], ldrow(k, v, F16), s);
        x[t] = s;
    }
    return hsum16(x);
}

/* The same with any number of vectors, the query read from memory. */
AVX512 static INL __m512 dec_scores16_any(const float *q, dec_rows kr, int nv, const int F16) {
    __m512 x[16];
    for (int t = 0; t < 16; t++) {
        const uint8_t *k = kr.base + (size_t)t * kr.stride;
        __m512 s = _mm512_mul_ps(_mm512_loadu_ps(q), ldrow(k, 0, F16));
        for (int v = 1; v < nv; v++) s = _mm512_fmadd_ps(_mm512_loadu_ps(q + 16 * v), ldrow(k, v, F16), s);
        x[t] = s;
    }
    return hsum16(x);
}

/* One head over a tile: its scores (scaled; keys not taken -inf) into p,
 * their max returned. */
AVX512 static INL float dec_head_scores_t(const float *q, dec_rows kr, const dec_keys *k, float scale, int nv,
                                          float *p, const int F16) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY), sc = _mm512_set1_ps(scale);
    __m512 mx = ninf;
    for (int c = 0; c < k->nk / 16; c++) {
        const dec_rows kc = {kr.base + (size_t)16 * c * kr.stride, kr.stride};
        __m512 s = nv == 4 ? dec_scores16(q, kc, 4, F16) : nv == 8 ? dec_scores16(q, kc, 8, F16)
                                                                    : dec_scores16_any(q, kc, nv, F16);
        s = _mm512_mask_mul_ps(ninf, (__mmask16)k->vm[c], s, sc);
        mx = _mm512_max_ps(mx, s);
        _mm512_storeu_ps(p + 16 * c, s);
    }
    return _mm512_reduce_max_ps(mx);
}

AVX512 static float dec_head_scores(const float *q, dec_rows kr, const dec_keys *k, float scale, int nv, float *p,
                                    int f16) {
    return f16 ? dec_head_scores_t(q, kr, k, scale, nv, p, 1) : dec_head_scores_t(q, kr, k, scale, nv, p, 0);
}

/* The online softmax of one head over a tile: its scores p (max tmax) into
 * probabilities, the running max m and sum l updated; returns the factor of
 * the output so far. */
AVX512 static INL float dec_softmax(const dec_keys *k, float tmax, float *m, float *l, float *p) {
    const float mnew = tmax > *m ? tmax : *m;
    /* the correction by the vector exp: a libm call would spill every vector register */
    const float corr = *m == -INFINITY ? 0.0f : _mm512_cvtss_f32(slm_exp512(_mm512_set1_ps(*m - mnew)));
    *m = mnew;
    const __m512 mv = _mm512_set1_ps(mnew);
    __m512 sum = _mm512_setzero_ps();
    for (int c = 0; c < k->nk / 16; c++) {
        const __m512 e = _mm512_maskz_mov_ps((__mmask16)k->vm[c], slm_exp512(_mm512_sub_ps(_mm512_loadu_ps(p + 16 * c), mv)));
        _mm512_storeu_ps(p + 16 * c, e);
        sum = _mm512_add_ps(sum, e);
    }
    *l = *l * corr + _mm512_reduce_add_ps(sum);
    return corr;
}

/* o[g] = o[g] * corr[g] + sum_t p[g][t] V[t] for the GC heads from g0, the
 * outputs in registers over the tile. */
AVX512 static INL void dec_pv(const slm_attn_args *a, dec_rows vr, int nk, const float (*p)[DT_MAX],
                              const float *corr, int g0, const int GC, const int NV, const int F16) {
    __m512 o[4][16];
#pragma GCC unroll 4
    for (int g = 0; g < GC; g++) {
        const float *out = a->out + (size_t)(g0 + g) * a->out_stride;
        const __m512 c = _mm512_set1_ps(corr[g0 + g]);
#pragma GCC unroll 16
        for (int v = 0; v < NV; v++) o[g][v] = _mm512_mul_ps(_mm512_loadu_ps(out + 16 * v), c);
    }
    for (int t = 0; t < nk; t++) {
        __m512 pv[4];
#pragma GCC unroll 4
        for (int g = 0; g < GC; g++) pv[g] = _mm512_set1_ps(p[g0 + g][t]);
#pragma GCC unroll 16
        for (int v = 0; v < NV; v++) {
            const __m512 x = ldrow(vr.base + (size_t)t * vr.stride, v, F16);
#pragma GCC unroll 4
            for (int g = 0; g < GC; g++) o[g][v] = _mm512_fmadd_ps(pv[g], x, o[g][v]);
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < GC; g++) {
        float *out = a->out + (size_t)(g0 + g) * a->out_stride;
#pragma GCC unroll 16
        for (int v = 0; v < NV; v++) _mm512_storeu_ps(out + 16 * v, o[g][v]);
    }
}

/* The same with any number of vectors (head_dim 16 .. 256), one head. */
AVX512 static INL void dec_pv_any(const slm_attn_args *a, dec_rows vr, int nk, const float (*p)[DT_MAX],
                                  const float *corr, int g, const int F16) {
    const int nv = a->head_dim / 16;
    float *out = a->out + (size_t)g * a->out_stride;
    __m512 o[16];
    const __m512 c = _mm512_set1_ps(corr[g]);
    for (int v = 0; v < nv; v++) o[v] = _mm512_mul_ps(_mm512_loadu_ps(out + 16 * v), c);
    for (int t = 0; t < nk; t++) {
        const __m512 pv = _mm512_set1_ps(p[g][t]);
        const uint8_t *r = vr.base + (size_t)t * vr.stride;
        for (int v = 0; v < nv; v++) o[v] = _mm512_fmadd_ps(pv, ldrow(r, v, F16), o[v]);
    }
    for (int v = 0; v < nv; v++) _mm512_storeu_ps(out + 16 * v, o[v]);
}

/* P V of every head of the group, in chunks whose outputs fit the registers. */
AVX512 static INL void dec_pv_group_t(const slm_attn_args *a, dec_rows vr, int nk,
                                      const float (*p)[DT_MAX], const float *corr, const int F16) {
    const int G = a->group, nv = a->head_dim / 16;
    int g = 0;
    if (nv == 4) {
        for (; g + 4 <= G; g += 4) dec_pv(a, vr, nk, p, corr, g, 4, 4, F16);
        if (G - g == 3) dec_pv(a, vr, nk, p, corr, g, 3, 4, F16);
        else if (G - g == 2) dec_pv(a, vr, nk, p, corr, g, 2, 4, F16);
        else if (G - g == 1) dec_pv(a, vr, nk, p, corr, g, 1, 4, F16);
    } else if (nv == 8) {
        for (; g + 2 <= G; g += 2) dec_pv(a, vr, nk, p, corr, g, 2, 8, F16);
        if (G - g == 1) dec_pv(a, vr, nk, p, corr, g, 1, 8, F16);
    } else {
        for (; g < G; g++) dec_pv_any(a, vr, nk, p, corr, g, F16);
    }
}

AVX512 static void dec_pv_group(const slm_attn_args *a, dec_rows vr, int nk, const float (*p)[DT_MAX],
                                const float *corr, int f16) {
    if (f16) dec_pv_group_t(a, vr, nk, p, corr, 1);
    else dec_pv_group_t(a, vr, nk, p, corr, 0);
}

AVX512 int slm_attention_decode_avx512(const slm_attn_args *a) {
    const int G = a->group, hd = a->head_dim, nv = hd / 16;
    if (G < 1 || G > DMAX_GROUP || hd % 16 || hd > DMAX_HD || (a->kv_type == SLM_Q8_0 && hd % 32) ||
        (a->kv_type != SLM_F32 && a->kv_type != SLM_F16 && a->kv_type != SLM_Q8_0))
        return 0;
    /* keys per tile: a converted tile of K (or V) stays DT_FLOATS, a multiple of 32 */
    const int dt = DT_FLOATS / hd >= DT_MAX ? DT_MAX : DT_FLOATS / hd / 32 * 32;
    float m[DMAX_GROUP], l[DMAX_GROUP], corr[DMAX_GROUP];
    float p[DMAX_GROUP][DT_MAX] __attribute__((aligned(64)));
    float kbuf[DT_FLOATS] __attribute__((aligned(64))), vbuf[DT_FLOATS] __attribute__((aligned(64)));
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
        dec_keys k = {.j0 = j0, .nk = a->last + 1 - j0 < dt ? (a->last + 16 - j0) / 16 * 16 : dt};
        int n = 0;
        for (int t = 0; t < k.nk; t++) {
            const int take = j0 + t <= a->last && a->mask[j0 + t];
            k.vm[t / 16] = (uint16_t)((t % 16 ? k.vm[t / 16] : 0) | (take ? 1u : 0u) << (t % 16));
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
        const __m512 inv = _mm512_set1_ps(1.0f / l[g]);
        for (int v = 0; v < nv; v++) _mm512_storeu_ps(o + 16 * v, _mm512_mul_ps(_mm512_loadu_ps(o + 16 * v), inv));
    }
    return 1;
}
#else
int slm_attention_decode_avx512(const slm_attn_args *a) {
    (void)a;
    return 0;
}
#endif
