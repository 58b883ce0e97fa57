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
 * does not take.
 */
#include <math.h>
#include <string.h>

#include "device/attention.h"
#include "device/kernels.h" /* slm_k_attention_head */

#define TILE 32
#define MAX_GROUP 64
#define MAX_HD 512

/* Scalar reference: the same tiled algorithm, plain C. */
static void attn_scalar(const slm_attn_args *a) {
    const int G = a->group, hd = a->head_dim;
    for (int g = 0; g < G; g++)
        slm_k_attention_head(a->q + (size_t)g * a->q_stride, a->K + (size_t)a->first * a->ld,
                             a->V + (size_t)a->first * a->ld, (int)a->ld, a->mask + a->first, a->last - a->first, hd,
                             a->out + (size_t)g * a->out_stride);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
#define AVX2 __attribute__((target("avx2,fma")))

/* exp(x) for x <= 0 (scores minus their max), relative error ~2e-7:
 * x = n ln2 + r, |r| <= ln2/2, exp(r) by a degree-6 polynomial. */
AVX512 static inline __m512 exp512(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.3981999507e-3f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

AVX512 static void attn_avx512(const slm_attn_args *a) {
    const int G = a->group, hd = a->head_dim, nv = hd / 16;
    float m[MAX_GROUP], l[MAX_GROUP];
    float s[MAX_GROUP][TILE] __attribute__((aligned(64)));
    for (int g = 0; g < G; g++) {
        m[g] = -INFINITY;
        l[g] = 0.0f;
        memset(a->out + (size_t)g * a->out_stride, 0, (size_t)hd * sizeof(float));
    }
    const __m512 scale = _mm512_set1_ps(a->scale);
    for (int j0 = a->first; j0 <= a->last; j0 += TILE) {
        const int nt = a->last + 1 - j0 < TILE ? a->last + 1 - j0 : TILE;
        int any = 0;
        for (int t = 0; t < nt; t++) any |= a->mask[j0 + t];
        if (!any) continue; /* the mask rules the whole tile out */
        /* scores: each K row once, against every head of the group */
        for (int t = 0; t < nt; t++) {
            if (!a->mask[j0 + t]) {
                for (int g = 0; g < G; g++) s[g][t] = -INFINITY;
                continue;
            }
            const float *k = a->K + (size_t)(j0 + t) * a->ld;
            for (int g = 0; g < G; g++) {
                const float *q = a->q + (size_t)g * a->q_stride;
                __m512 acc = _mm512_mul_ps(_mm512_loadu_ps(q), _mm512_loadu_ps(k));
                for (int v = 1; v < nv; v++) acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + 16 * v), _mm512_loadu_ps(k + 16 * v), acc);
                s[g][t] = _mm512_reduce_add_ps(_mm512_mul_ps(acc, scale));
            }
        }
        for (int g = 0; g < G; g++) {
            /* running max / sum / output */
            float tmax = -INFINITY;
            for (int t = 0; t < nt; t++) tmax = s[g][t] > tmax ? s[g][t] : tmax;
            if (tmax == -INFINITY) continue;
            const float mnew = tmax > m[g] ? tmax : m[g];
            const float corr = m[g] == -INFINITY ? 0.0f : expf(m[g] - mnew);
            m[g] = mnew;
            __m512 mv = _mm512_set1_ps(mnew), sum = _mm512_setzero_ps();
            for (int t = 0; t < nt; t += 16) {
                __mmask16 km = (__mmask16)(nt - t >= 16 ? 0xffff : (1u << (nt - t)) - 1);
                __m512 sv = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), km, &s[g][t]);
                __m512 p = _mm512_maskz_mov_ps(km, exp512(_mm512_sub_ps(sv, mv)));
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
                const float *vr = a->V + (size_t)(j0 + t) * a->ld;
                __m512 p = _mm512_set1_ps(s[g][t]);
                for (int v = 0; v < nv; v++)
                    _mm512_storeu_ps(o + 16 * v, _mm512_fmadd_ps(p, _mm512_loadu_ps(vr + 16 * v), _mm512_loadu_ps(o + 16 * v)));
            }
        }
    }
    for (int g = 0; g < G; g++) {
        if (!(l[g] > 0.0f)) continue;
        float *o = a->out + (size_t)g * a->out_stride;
        __m512 inv = _mm512_set1_ps(1.0f / l[g]);
        for (int v = 0; v < nv; v++) _mm512_storeu_ps(o + 16 * v, _mm512_mul_ps(_mm512_loadu_ps(o + 16 * v), inv));
    }
}

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
    for (int g = 0; g < G; g++) {
        m[g] = -INFINITY;
        l[g] = 0.0f;
        memset(a->out + (size_t)g * a->out_stride, 0, (size_t)hd * sizeof(float));
    }
    for (int j0 = a->first; j0 <= a->last; j0 += TILE) {
        const int nt = a->last + 1 - j0 < TILE ? a->last + 1 - j0 : TILE;
        int any = 0;
        for (int t = 0; t < nt; t++) any |= a->mask[j0 + t];
        if (!any) continue;
        for (int t = 0; t < nt; t++) {
            if (!a->mask[j0 + t]) {
                for (int g = 0; g < G; g++) s[g][t] = -INFINITY;
                continue;
            }
            const float *k = a->K + (size_t)(j0 + t) * a->ld;
            for (int g = 0; g < G; g++) {
                const float *q = a->q + (size_t)g * a->q_stride;
                __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(q), _mm256_loadu_ps(k));
                for (int v = 1; v < nv; v++) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + 8 * v), _mm256_loadu_ps(k + 8 * v), acc);
                s[g][t] = hsum8(acc) * a->scale;
            }
        }
        for (int g = 0; g < G; g++) {
            float tmax = -INFINITY;
            for (int t = 0; t < nt; t++) tmax = s[g][t] > tmax ? s[g][t] : tmax;
            if (tmax == -INFINITY) continue;
            const float mnew = tmax > m[g] ? tmax : m[g];
            const float corr = m[g] == -INFINITY ? 0.0f : expf(m[g] - mnew);
            m[g] = mnew;
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
                const float *vr = a->V + (size_t)(j0 + t) * a->ld;
                __m256 p = _mm256_set1_ps(s[g][t]);
                for (int v = 0; v < nv; v++)
                    _mm256_storeu_ps(o + 8 * v, _mm256_fmadd_ps(p, _mm256_loadu_ps(vr + 8 * v), _mm256_loadu_ps(o + 8 * v)));
            }
        }
    }
    for (int g = 0; g < G; g++) {
        if (!(l[g] > 0.0f)) continue;
        float *o = a->out + (size_t)g * a->out_stride;
        float inv = 1.0f / l[g];
        for (int d = 0; d < hd; d++) o[d] *= inv;
    }
}

AVX2 void slm_attention_avx2(const slm_attn_args *a) {
    if (a->group <= MAX_GROUP && a->head_dim <= MAX_HD && a->head_dim % 8 == 0) attn_avx2(a);
    else attn_scalar(a);
}

AVX512 void slm_attention_avx512(const slm_attn_args *a) {
    if (a->group <= MAX_GROUP && a->head_dim <= MAX_HD && a->head_dim % 16 == 0) attn_avx512(a);
    else slm_attention_avx2(a);
}
#endif

void slm_attention_scalar(const slm_attn_args *a) { attn_scalar(a); }
