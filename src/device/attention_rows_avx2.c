/* The avx2 set's block entry (slm_kernel_set.attention_rows, prefill): a
 * block of query rows of one KV head group against their KV rows, the steps
 * of the avx512 entry (attention.c) at 8 lanes and 16 registers:
 *   - Per tile of 32 keys, K^T (head_dim x 32 floats) and V (32 x head_dim)
 *     are converted once on the stack (f16 / q8_0 rows through
 *     slm_kv_row256; f32 copied) and serve every row of the block and every
 *     head of the group. The per-row entry (attention_decode_avx2.c) reads
 *     them again for each row.
 *   - Scores of two query vectors (a row's heads) 32 keys at once: per dim,
 *     one broadcast query element meets the 4 K^T vectors (8 FMA chains, no
 *     horizontal sums).
 *   - Online softmax per vector and tile with the vector exp (kv_row256.h).
 *   - P V: the output 64 dims at a time in 8 registers over the tile's V
 *     rows, each V load one FMA; for head_dim 32, 96, ... 32 dims of both
 *     vectors at once (8 chains, each V load serving both: 5% faster at
 *     head_dim 32 than one vector's 4 chains), then 8.
 * Keys a row does not take (mask, causal limit, window) are -inf in its
 * scores and zero in K^T and V: a NaN behind the mask is never read. The
 * outputs accumulate in place and are divided by the sums at the end. The
 * tile conversion and the walk over tiles, rows and heads are the avx512
 * entry's (attention_rows_tile.h, attention_rows_body.h); the vector steps
 * are this file's. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common/dtype.h"
#include "device/attention.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "device/kv_row256.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define INL inline __attribute__((always_inline))

#define ROWS_ATTR AVX2
#define ROWS_LANES 8
#define ROWS_KV_ROW slm_kv_row256
#include "device/attention_rows_tile.h"

AVX2 static INL float hmax8(__m256 v) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    x = _mm_max_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

AVX2 static INL float hsum8(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

/* Lanes of keys 8c..8c+7 that rm takes: all ones, else zero. */
AVX2 static INL __m256 keys8(uint32_t rm, int c) {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i m = _mm256_and_si256(_mm256_set1_epi32((int)((rm >> (8 * c)) & 0xffu)), bit);
    return _mm256_castsi256_ps(_mm256_cmpeq_epi32(m, bit));
}

/* The softmax step of one query vector over a tile: s[4] its raw scores, rm
 * the keys it takes. Updates *m and *l, writes the weights to p[RT] (0 for
 * the keys it does not take) and returns the factor for the output so far. */
AVX2 static INL float softmax8(const __m256 *s, uint32_t rm, float scale, float *m, float *l, float *p) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY), sc = _mm256_set1_ps(scale);
    __m256 x[4], k[4];
    for (int c = 0; c < 4; c++) {
        k[c] = keys8(rm, c);
        x[c] = _mm256_blendv_ps(ninf, _mm256_mul_ps(s[c], sc), k[c]);
    }
    const float tmax = hmax8(_mm256_max_ps(_mm256_max_ps(x[0], x[1]), _mm256_max_ps(x[2], x[3])));
    if (tmax == -INFINITY) { /* every score -inf: the tile changes nothing */
        memset(p, 0, RT * sizeof(float));
        return 1.0f;
    }
    const float mold = *m, mnew = tmax > mold ? tmax : mold;
    const float corr = mold == -INFINITY ? 0.0f : expf(mold - mnew);
    *m = mnew;
    const __m256 mv = _mm256_set1_ps(mnew);
    __m256 sum = _mm256_setzero_ps();
    for (int c = 0; c < 4; c++) {
        const __m256 e = _mm256_and_ps(k[c], slm_exp256(_mm256_sub_ps(x[c], mv)));
        _mm256_store_ps(p + 8 * c, e);
        sum = _mm256_add_ps(sum, e);
    }
    *l = *l * corr + hsum8(sum);
    return corr;
}

/* o = o * corr + sum over keys t < nt of p[t] V[t], 64 dims (8 vectors) at
 * a time in registers, then the rest 8 at a time. */
AVX2 static INL void pv8(const float *vt, int hd, int nt, float *o, const float *p, float corr) {
    const __m256 cv = _mm256_set1_ps(corr);
    int d0 = 0;
    for (; d0 + 64 <= hd; d0 += 64) {
        __m256 acc[8];
        for (int v = 0; v < 8; v++) acc[v] = _mm256_mul_ps(_mm256_loadu_ps(o + d0 + 8 * v), cv);
        for (int t = 0; t < nt; t++) {
            const __m256 b = _mm256_set1_ps(p[t]);
            const float *vr = vt + (size_t)t * hd + d0;
            for (int v = 0; v < 8; v++) acc[v] = _mm256_fmadd_ps(b, _mm256_load_ps(vr + 8 * v), acc[v]);
        }
        for (int v = 0; v < 8; v++) _mm256_storeu_ps(o + d0 + 8 * v, acc[v]);
    }
    for (; d0 + 32 <= hd; d0 += 32) { /* head_dim 32, 96, ...: four chains, one broadcast a key */
        __m256 acc[4];
        for (int v = 0; v < 4; v++) acc[v] = _mm256_mul_ps(_mm256_loadu_ps(o + d0 + 8 * v), cv);
        for (int t = 0; t < nt; t++) {
            const __m256 b = _mm256_set1_ps(p[t]);
            const float *vr = vt + (size_t)t * hd + d0;
            for (int v = 0; v < 4; v++) acc[v] = _mm256_fmadd_ps(b, _mm256_load_ps(vr + 8 * v), acc[v]);
        }
        for (int v = 0; v < 4; v++) _mm256_storeu_ps(o + d0 + 8 * v, acc[v]);
    }
    for (; d0 < hd; d0 += 8) {
        __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(o + d0), cv);
        for (int t = 0; t < nt; t++) acc = _mm256_fmadd_ps(_mm256_set1_ps(p[t]), _mm256_load_ps(vt + (size_t)t * hd + d0), acc);
        _mm256_storeu_ps(o + d0, acc);
    }
}

/* pv8 for two vectors whose head_dim is not a multiple of 64: 32 dims of
 * both at a time, 8 chains (one vector's 4 were latency-bound), each V load
 * serving both; then the 8-dim rest. */
AVX2 static INL void pv8x2(const float *vt, int hd, int nt, float *const *o, const float *p0, const float *p1,
                           const float *corr) {
    int d0 = 0;
    const __m256 c0 = _mm256_set1_ps(corr[0]), c1 = _mm256_set1_ps(corr[1]);
    for (; d0 + 32 <= hd; d0 += 32) {
        __m256 a0[4], a1[4];
        for (int v = 0; v < 4; v++) {
            a0[v] = _mm256_mul_ps(_mm256_loadu_ps(o[0] + d0 + 8 * v), c0);
            a1[v] = _mm256_mul_ps(_mm256_loadu_ps(o[1] + d0 + 8 * v), c1);
        }
        for (int t = 0; t < nt; t++) {
            const __m256 b0 = _mm256_set1_ps(p0[t]), b1 = _mm256_set1_ps(p1[t]);
            const float *vr = vt + (size_t)t * hd + d0;
            for (int v = 0; v < 4; v++) {
                const __m256 x = _mm256_load_ps(vr + 8 * v);
                a0[v] = _mm256_fmadd_ps(b0, x, a0[v]);
                a1[v] = _mm256_fmadd_ps(b1, x, a1[v]);
            }
        }
        for (int v = 0; v < 4; v++) {
            _mm256_storeu_ps(o[0] + d0 + 8 * v, a0[v]);
            _mm256_storeu_ps(o[1] + d0 + 8 * v, a1[v]);
        }
    }
    for (; d0 < hd; d0 += 8) {
        __m256 x0 = _mm256_mul_ps(_mm256_loadu_ps(o[0] + d0), c0), x1 = _mm256_mul_ps(_mm256_loadu_ps(o[1] + d0), c1);
        for (int t = 0; t < nt; t++) {
            const __m256 x = _mm256_load_ps(vt + (size_t)t * hd + d0);
            x0 = _mm256_fmadd_ps(_mm256_set1_ps(p0[t]), x, x0);
            x1 = _mm256_fmadd_ps(_mm256_set1_ps(p1[t]), x, x1);
        }
        _mm256_storeu_ps(o[0] + d0, x0);
        _mm256_storeu_ps(o[1] + d0, x1);
    }
}

/* NQ (1 or 2) query vectors against one tile: their scores, softmax steps
 * and P V. q[h], o[h]: the vectors' queries and outputs; rm[h] their keys;
 * st[h] the index of their m / l. */
AVX2 static INL void chunk8(const slm_attn_rows *a, const float *kt, const float *vt, const int NQ,
                            const float *const *q, float *const *o, const uint32_t *rm, const int *st, float *m,
                            float *l, int j0) {
    const int hd = a->head_dim;
    __m256 s[2][4];
    for (int h = 0; h < NQ; h++)
        for (int c = 0; c < 4; c++) s[h][c] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d++) {
        const float *kd = kt + (size_t)d * RT;
        const __m256 k0 = _mm256_load_ps(kd), k1 = _mm256_load_ps(kd + 8), k2 = _mm256_load_ps(kd + 16),
                     k3 = _mm256_load_ps(kd + 24);
        for (int h = 0; h < NQ; h++) {
            const __m256 b = _mm256_set1_ps(q[h][d]);
            s[h][0] = _mm256_fmadd_ps(b, k0, s[h][0]);
            s[h][1] = _mm256_fmadd_ps(b, k1, s[h][1]);
            s[h][2] = _mm256_fmadd_ps(b, k2, s[h][2]);
            s[h][3] = _mm256_fmadd_ps(b, k3, s[h][3]);
        }
    }
    if (a->alibi) /* ALiBi: minus slope * |qpos - j| on the scaled score (here before the scale: over it) */
        for (int h = 0; h < NQ; h++) {
            const int row = st[h] / a->group;
            const __m256 k = _mm256_set1_ps(-a->alibi[st[h] % a->group] / a->scale);
            const __m256i qp = _mm256_set1_epi32(a->qpos[row]);
            for (int c = 0; c < 4; c++) {
                const __m256i j = _mm256_add_epi32(_mm256_set1_epi32(j0 + 8 * c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
                const __m256 d = _mm256_cvtepi32_ps(_mm256_abs_epi32(_mm256_sub_epi32(qp, j)));
                s[h][c] = _mm256_fmadd_ps(k, d, s[h][c]);
            }
        }
    float p[2][RT] __attribute__((aligned(32)));
    float corr[2];
    uint32_t all = 0;
    for (int h = 0; h < NQ; h++) {
        corr[h] = softmax8(s[h], rm[h], a->scale, &m[st[h]], &l[st[h]], p[h]);
        all |= rm[h];
    }
    const int nt = 32 - __builtin_clz(all); /* keys past the last any vector takes add nothing */
    if (NQ == 2 && hd % 64) { /* head_dim 32, 96, ...: both vectors' 32-dim blocks at once */
        pv8x2(vt, hd, nt, o, p[0], p[1], corr);
        return;
    }
    for (int h = 0; h < NQ; h++) pv8(vt, hd, nt, o[h], p[h], corr[h]);
}

/* nq (1 or 2) query vectors: chunk8 at a constant count keeps its scores
 * in registers. */
AVX2 static INL void rows_chunk_any(const slm_attn_rows *a, const float *kt, const float *vt, int nq,
                                    const float *const *q, float *const *o, const uint32_t *rm, const int *st,
                                    float *m, float *l, int j0) {
    if (nq == 2) chunk8(a, kt, vt, 2, q, o, rm, st, m, l, j0);
    else chunk8(a, kt, vt, 1, q, o, rm, st, m, l, j0);
}

/* o *= inv, the entry's end: the outputs over their sums. */
AVX2 static INL void rows_normalize(float *o, int hd, float inv) {
    const __m256 v = _mm256_set1_ps(inv);
    for (int i = 0; i < hd / 8; i++) _mm256_storeu_ps(o + 8 * i, _mm256_mul_ps(_mm256_loadu_ps(o + 8 * i), v));
}

#define ROWS_NAME slm_attention_rows_avx2
#define ROWS_NQ 2
#define ROWS_ALIBI 1
#include "device/attention_rows_body.h"
#else
int slm_attention_rows_avx2(const slm_attn_rows *a) {
    (void)a;
    return 0;
}
#endif
