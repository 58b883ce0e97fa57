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
 *     tile of an f16 cache is read in place: V vectors converted where the
 *     FMAs take them, K rows 16 at a time into a chunk in L1 that every
 *     head's scores read (one head: converted in the FMA). Converting the
 *     whole tile, storing it and loading it back cost more (one core, Zen
 *     5, head_dim 64, 2048 keys: group 1 33 -> 14 us, 3 40 -> 21, 8 57 ->
 *     ~42, 16 84 -> ~68).
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

#define DEC_ATTR AVX512
#define DEC_LANES 16
#define DEC_VM_T uint16_t
#define DEC_KV_ROW slm_kv_row512
/* a q8_0 tile in place up to 8 heads (one core, Zen 5, head_dim 64, 2048 keys:
   group 1 19.2 -> 10.8 us, 3 27 -> 21, 8 44 -> 41; 16 73 -> 90) */
#define DEC_Q8_DIRECT 8
#include "device/attention_decode_tile.h"

/* Bit t: key t of these 16 is taken (t < n, 1 <= n <= 16, and mask[t] != 0);
 * the mask past n is not read. */
AVX512 static INL uint16_t dec_take(const int32_t *mask, int n) {
    const __mmask16 lim = (__mmask16)(n >= 16 ? 0xffffu : (1u << n) - 1u);
    const __m512i m = _mm512_maskz_loadu_epi32(lim, mask);
    return (uint16_t)_mm512_mask_cmpneq_epi32_mask(lim, m, _mm512_setzero_si512());
}

/* Vector v (16 elements) of a K or V row, f16 (F16 1) and q8_0 (F16 2)
 * rows converted on the way: the q8_0 values as slm_kv_row512 makes them
 * (int8 widened, times the block's scale), so both give the same bits. */
AVX512 static INL __m512 ldrow(const uint8_t *row, int v, const int F16) {
    if (F16 == 2) {
        const uint8_t *blk = row + (size_t)(v / 2) * sizeof(slm_block_q8_0);
        uint16_t h;
        memcpy(&h, blk, 2);
        const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(blk + 2 + 16 * (v % 2))));
        return _mm512_mul_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(_cvtsh_ss(h)));
    }
    return F16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(row + 32 * v)))
               : _mm512_loadu_ps((const float *)(const void *)row + 16 * v);
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

/* Every head's scores of the tile (dec_scores in attention_decode_body.h).
 * f16 and q8_0 rows in place: one head converts in its FMAs; more convert
 * each 16 rows once into kc for all of them. */
AVX512 static void dec_scores(const slm_attn_args *a, dec_rows kr, const dec_keys *k, int nv, float (*p)[DT_MAX],
                              float *tmax, int f16) {
    const int G = a->group, hd = a->head_dim;
    if (!f16 || G == 1) {
        for (int g = 0; g < G; g++)
            tmax[g] = f16 == 2 ? dec_head_scores_t(a->q + (size_t)g * a->q_stride, kr, k, a->scale, nv, p[g], 2)
                    : f16      ? dec_head_scores_t(a->q + (size_t)g * a->q_stride, kr, k, a->scale, nv, p[g], 1)
                               : dec_head_scores_t(a->q + (size_t)g * a->q_stride, kr, k, a->scale, nv, p[g], 0);
        return;
    }
    float kc[16 * DMAX_HD] __attribute__((aligned(64)));
    const dec_rows kcr = {(const uint8_t *)kc, (size_t)hd * sizeof(float)};
    const __m512 ninf = _mm512_set1_ps(-INFINITY), sc = _mm512_set1_ps(a->scale);
    __m512 mx[DMAX_GROUP];
    for (int g = 0; g < G; g++) mx[g] = ninf;
    for (int c = 0; c < k->nk / 16; c++) {
        for (int t = 0; t < 16; t++) {
            const uint8_t *r = kr.base + (size_t)(16 * c + t) * kr.stride;
            if (f16 == 2) slm_kv_row512(SLM_Q8_0, hd, r, kc + (size_t)t * hd);
            else
                for (int v = 0; v < nv; v++) _mm512_store_ps(kc + (size_t)t * hd + 16 * v, ldrow(r, v, 1));
        }
        for (int g = 0; g < G; g++) {
            const float *q = a->q + (size_t)g * a->q_stride;
            __m512 s = nv == 4 ? dec_scores16(q, kcr, 4, 0) : nv == 8 ? dec_scores16(q, kcr, 8, 0)
                                                                       : dec_scores16_any(q, kcr, nv, 0);
            s = _mm512_mask_mul_ps(ninf, (__mmask16)k->vm[c], s, sc);
            mx[g] = _mm512_max_ps(mx[g], s);
            _mm512_storeu_ps(p[g] + 16 * c, s);
        }
    }
    for (int g = 0; g < G; g++) tmax[g] = _mm512_reduce_max_ps(mx[g]);
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
    if (f16 == 2) dec_pv_group_t(a, vr, nk, p, corr, 2);
    else if (f16) dec_pv_group_t(a, vr, nk, p, corr, 1);
    else dec_pv_group_t(a, vr, nk, p, corr, 0);
}

/* o[0..hd) *= inv. */
AVX512 static void dec_normalize(float *o, int hd, float inv) {
    const __m512 iv = _mm512_set1_ps(inv);
    for (int v = 0; v < hd / 16; v++) _mm512_storeu_ps(o + 16 * v, _mm512_mul_ps(_mm512_loadu_ps(o + 16 * v), iv));
}

#define DEC_NAME slm_attention_decode_avx512
#include "device/attention_decode_body.h"
#else
int slm_attention_decode_avx512(const slm_attn_args *a) {
    (void)a;
    return 0;
}
#endif
