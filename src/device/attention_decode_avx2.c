/* Decode attention on AVX2: one query row of the heads that share a KV
 * head, against its KV rows [first, last] (slm_attn_args), the avx2 set's
 * per-row entry for head_dim % 8 == 0 up to 256. The steps of the AVX-512
 * entry (attention_decode.c) at 8 lanes and 16 registers:
 *   - Per tile of 8192 / head_dim keys (32 .. 128), the K rows (f16 / q8_0
 *     converted to f32 on the stack; an f32 cache in place) serve every
 *     head of the group; the next tile's K and V rows are prefetched. A
 *     whole tile of an f16 cache is read in place, as in the AVX-512 entry
 *     (K rows 8 at a time into an L1 chunk for groups of more than 8).
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

#define DEC_ATTR AVX2
#define DEC_LANES 8
#define DEC_VM_T uint8_t
#define DEC_KV_ROW slm_kv_row256
/* a q8_0 tile in place for one head (one core, Zen 5, head_dim 64, 2048 keys:
   group 1 37.1 -> 21.0 us; 3 38.8 -> 52.6: two heads at most share a V load) */
#define DEC_Q8_DIRECT 1
#include "device/attention_decode_tile.h"

/* Bit t: key t of these 8 is taken (t < n, 1 <= n <= 8, and mask[t] != 0);
 * the mask past n is not read. */
AVX2 static INL uint8_t dec_take(const int32_t *mask, int n) {
    const __m256i lim = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i zero = _mm256_cmpeq_epi32(_mm256_maskload_epi32(mask, lim), _mm256_setzero_si256());
    return (uint8_t)(_mm256_movemask_ps(_mm256_castsi256_ps(lim)) & ~_mm256_movemask_ps(_mm256_castsi256_ps(zero)));
}

/* Vector v (8 elements) of a K or V row, f16 (F16 1) and q8_0 (F16 2)
 * rows converted on the way: the q8_0 values as slm_kv_row256 makes them. */
AVX2 static INL __m256 ldrow(const uint8_t *row, int v, const int F16) {
    if (F16 == 2) {
        const uint8_t *blk = row + (size_t)(v / 4) * sizeof(slm_block_q8_0);
        uint16_t h;
        memcpy(&h, blk, 2);
        const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(blk + 2 + 8 * (v % 4))));
        return _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(_cvtsh_ss(h)));
    }
    return F16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(row + 16 * v)))
               : _mm256_loadu_ps((const float *)(const void *)row + 8 * v);
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

AVX2 static INL float hmax8(__m256 v) {
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    return _mm_cvtss_f32(m4);
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
    return hmax8(mx);
}

/* Every head's scores of the tile (dec_scores in attention_decode_body.h).
 * f16 rows in place: up to 8 heads convert in their FMAs; more convert each
 * 8 rows once into kc for all of them (one core, Zen 5, head_dim 64, 2048
 * keys: group 16 158 -> 142 us; at group 3 the chunk was slower). */
AVX2 static void dec_scores(const slm_attn_args *a, dec_rows kr, const dec_keys *k, int nv, float (*p)[DT_MAX],
                            float *tmax, int f16) {
    const int G = a->group, hd = a->head_dim;
    if (!f16 || G <= 8) { /* q8_0 rows come in place only for one head (DEC_Q8_DIRECT) */
        for (int g = 0; g < G; g++)
            tmax[g] = f16 == 2 ? dec_head_scores_t(a->q + (size_t)g * a->q_stride, kr, k, a->scale, nv, p[g], 2)
                    : f16      ? dec_head_scores_t(a->q + (size_t)g * a->q_stride, kr, k, a->scale, nv, p[g], 1)
                               : dec_head_scores_t(a->q + (size_t)g * a->q_stride, kr, k, a->scale, nv, p[g], 0);
        return;
    }
    float kc[8 * DMAX_HD] __attribute__((aligned(32)));
    const dec_rows kcr = {(const uint8_t *)kc, (size_t)hd * sizeof(float)};
    const __m256 ninf = _mm256_set1_ps(-INFINITY), sc = _mm256_set1_ps(a->scale);
    __m256 mx[DMAX_GROUP];
    for (int g = 0; g < G; g++) mx[g] = ninf;
    for (int c = 0; c < k->nk / 8; c++) {
        for (int t = 0; t < 8; t++) {
            const uint8_t *r = kr.base + (size_t)(8 * c + t) * kr.stride;
            for (int v = 0; v < nv; v++) _mm256_store_ps(kc + (size_t)t * hd + 8 * v, ldrow(r, v, 1));
        }
        for (int g = 0; g < G; g++) {
            const float *q = a->q + (size_t)g * a->q_stride;
            __m256 s = nv == 8 ? dec_scores8(q, kcr, 8, 0) : nv == 16 ? dec_scores8(q, kcr, 16, 0)
                     : nv == 4 ? dec_scores8(q, kcr, 4, 0) : dec_scores8(q, kcr, nv, 0);
            s = _mm256_blendv_ps(ninf, _mm256_mul_ps(s, sc), key_mask(k->vm[c]));
            mx[g] = _mm256_max_ps(mx[g], s);
            _mm256_storeu_ps(p[g] + 8 * c, s);
        }
    }
    for (int g = 0; g < G; g++) tmax[g] = hmax8(mx[g]);
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
        /* d0: a multiple of 64 elements, whole q8_0 blocks */
        const uint8_t *r = vr.base + (size_t)t * vr.stride +
                           (F16 == 2 ? (size_t)d0 / 32 * sizeof(slm_block_q8_0) : (size_t)d0 * (F16 ? 2 : 4));
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
    if (f16 == 2) dec_pv_group_t(a, vr, nk, p, corr, 2);
    else if (f16) dec_pv_group_t(a, vr, nk, p, corr, 1);
    else dec_pv_group_t(a, vr, nk, p, corr, 0);
}

/* o[0..hd) *= inv. */
AVX2 static void dec_normalize(float *o, int hd, float inv) {
    const __m256 iv = _mm256_set1_ps(inv);
    for (int v = 0; v < hd / 8; v++) _mm256_storeu_ps(o + 8 * v, _mm256_mul_ps(_mm256_loadu_ps(o + 8 * v), iv));
}

#define DEC_NAME slm_attention_decode_avx2
#include "device/attention_decode_body.h"
#else
int slm_attention_decode_avx2(const slm_attn_args *a) {
    (void)a;
    return 0;
}
#endif
