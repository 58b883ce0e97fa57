/* Shared by the x86 kernel files (not for other files): target attributes,
 * small helpers, the int8 scratch, and what each file offers the sets
 * (kernels_x86_sets.c). Every definition sits behind SLM_X86. */
#ifndef SLM_KERNELS_X86_H
#define SLM_KERNELS_X86_H

#include <stdint.h>
#include <string.h>

#include "common/dtype.h"
#include "device/kernels.h"

/* slm_qtype_kind for a compile-time type (folds in the inlined kernels). */
static inline int slm_qtype_kind_c(int t) {
    return t == SLM_Q6_K ? 1 : (t == SLM_Q4_1 || t == SLM_Q4_K || t == SLM_Q5_K) ? 2 : 0;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define SLM_X86 1
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define INLINE static inline __attribute__((always_inline))

AVX2 static inline float hsum256(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

/* 16 (AVX-512) or 8 (AVX2) E8M0 bytes at p as slm_e8m0_to_f32_half's floats
 * (MXFP4's block scales): the bits (e - 1) << 23, and for e < 2 the
 * subnormals 0x00200000 << e. */
AVX512 static inline __m512 e8m0_half_x16(const uint8_t *p) {
    const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
    const __m512i norm = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __mmask16 sub = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
    return _mm512_castsi512_ps(_mm512_mask_sllv_epi32(norm, sub, _mm512_set1_epi32(0x00200000), e));
}
AVX2 static inline __m256 e8m0_half_x8(const uint8_t *p) {
    const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    const __m256i norm = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(norm, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e)));
}

/* A kernel's weight stream, [p, p + bytes) read now: its lines pf bytes
 * ahead touched toward L1 and 4 pf ahead toward L2 (pf 0: nothing). A
 * prefetch never faults, so the lines beyond a matrix's end cost a wasted
 * request only. (Two levels measured best on the 2-core VM: TinyLlama Q4_0
 * decode 37-39 t/s against 32-34 with L1 alone at 4 KiB, 35-37 with L2
 * alone, 27-28 with none; Q4_K_M 32-35 against 29-30.) */
static inline void stream_prefetch(const uint8_t *p, int bytes, int pf) {
    if (pf <= 0) return;
    for (int l = 0; l < bytes; l += 64) {
        __builtin_prefetch((const char *)p + pf + l, 0, 3);
        __builtin_prefetch((const char *)p + 4 * pf + l, 0, 2);
    }
}

static inline int32_t ld32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* The columns [ha[h], he[h]) of the two 8-column halves of the group at g0
 * that the tile [n0, n1) takes (he = ha: none); the AVX2 kernels. */
static inline void halves_cut(const slm_mm *mm, int g0, int *ha, int *he) {
    for (int h = 0; h < 2; h++) {
        const int c0 = g0 + 8 * h;
        ha[h] = mm->n0 > c0 ? mm->n0 - c0 : 0;
        he[h] = mm->n1 - c0 < 8 ? mm->n1 - c0 : 8;
        if (he[h] < ha[h]) he[h] = ha[h];
    }
}

/* ---- int8 activations ------------------------------------------------------ */

/* The scratch of a quantized matmul: xq codes, block scales, block sums,
 * then the panel (see slm_matmul_scratch_bytes). */
typedef struct qscratch {
    uint8_t *q;     /* [rows][k] codes */
    float *d;       /* [rows][nb] block scales */
    float *s;       /* [rows][nb] block sums (scale * sum of codes) */
    int32_t *hs;    /* [rows][2 * nb] integer sums of the codes of each half block */
    uint8_t *panel; /* nb * SLM_PANEL_BLOCK_BYTES(16) bytes */
} qscratch;

static inline uint8_t *align64(uint8_t *p) { return (uint8_t *)(((uintptr_t)p + 63) & ~(uintptr_t)63); }

static inline qscratch qscratch_split(void *scratch, int rows, int k) {
    const size_t nb = (size_t)k / 32;
    qscratch qs;
    qs.q = align64(scratch);
    qs.d = (float *)align64(qs.q + (size_t)rows * k);
    qs.s = qs.d + (size_t)rows * nb;
    qs.hs = (int32_t *)align64((uint8_t *)(qs.s + (size_t)rows * nb));
    qs.panel = align64((uint8_t *)(qs.hs + (size_t)rows * 2 * nb));
    return qs;
}

/* ---- the repacked kernels' walk (kernels_x86_r16.c, kernels_x86_r16k.c) ---- */

/* AVX-512: R rows (mk[R - 1]) x the columns cm of the group at j0. */
typedef void (*r16mk512_fn)(const slm_mm *, const qscratch *, int i0, int j0, __mmask16 cm);
/* AVX2: R rows (mk[R - 1]) x NH halves of the group at j0 from half h0,
 * ha[h], he[h] the columns of half h0 + h to store. */
typedef void (*r16mk2_fn)(const slm_mm *, const qscratch *, int i0, int j0, int h0, const int *ha, const int *he);

/* Groups of 16 columns over [n0, n1) (a group cut by the tile computes all
 * 16 and stores the tile's), rows in blocks of rb (mk[rb - 1] the largest). */
static inline void r16_walk_avx512(const slm_mm *mm, const qscratch *qs, const r16mk512_fn *mk, int rb) {
    for (int g0 = mm->n0 & ~15; g0 < mm->n1; g0 += 16) {
        const int a = mm->n0 > g0 ? mm->n0 - g0 : 0, e = mm->n1 - g0 < 16 ? mm->n1 - g0 : 16;
        const __mmask16 cm = (__mmask16)(((1u << e) - 1) & ~((1u << a) - 1));
        for (int i0 = 0; i0 < mm->rows; i0 += rb) {
            const int nr = mm->rows - i0 < rb ? mm->rows - i0 : rb;
            mk[nr - 1](mm, qs, i0, g0, cm);
        }
    }
}

/* The results of an AVX2 micro-kernel: acc[r][h] the 8 columns of half
 * h0 + h of the group at j0 in row i0 + r, of which [ha[h], he[h]) are
 * stored. */
AVX2 INLINE void r16_store_avx2(const slm_mm *mm, __m256 acc[][2], int i0, int j0, int h0, const int *ha, const int *he,
                                const int R, const int NH) {
    for (int r = 0; r < R; r++)
        for (int h = 0; h < NH; h++) {
            float t[8];
            _mm256_storeu_ps(t, acc[r][h]);
            float *y = mm->y + (size_t)(i0 + r) * mm->ldy + j0 + 8 * (h0 + h);
            for (int c = ha[h]; c < he[h]; c++) y[c] = t[c];
        }
}

/* The AVX2 walk: groups as two halves of 8 columns, rows in blocks of 4;
 * one row takes both halves in one pass (mk[0]), more rows a half at a time. */
static inline void r16_walk_avx2(const slm_mm *mm, const qscratch *qs, const r16mk2_fn *mk) {
    for (int g0 = mm->n0 & ~15; g0 < mm->n1; g0 += 16) {
        int ha[2], he[2];
        halves_cut(mm, g0, ha, he);
        for (int i0 = 0; i0 < mm->rows; i0 += 4) {
            const int nr = mm->rows - i0 < 4 ? mm->rows - i0 : 4;
            if (nr == 1) {
                mk[0](mm, qs, i0, g0, 0, ha, he);
                continue;
            }
            for (int h = 0; h < 2; h++)
                if (ha[h] < he[h]) mk[nr - 1](mm, qs, i0, g0, h, ha + h, he + h);
        }
    }
}

/* ---- what the files offer the sets (kernels_x86_sets.c) ------------------------ */

/* kernels_x86_float.c: float dot products, F32/F16/BF16 matrix multiply */
float slm_x86_dot_f32_avx2(const void *w, const float *x, int k);
float slm_x86_dot_f16_avx2(const void *w, const float *x, int k);
float slm_x86_dot_bf16_avx2(const void *w, const float *x, int k);
float slm_x86_dot_q8_0_avx2(const void *w, const float *x, int k);
float slm_x86_dot_f32_avx512(const void *w, const float *x, int k);
float slm_x86_dot_f16_avx512(const void *w, const float *x, int k);
float slm_x86_dot_bf16_avx512(const void *w, const float *x, int k);
float slm_x86_dot_q8_0_avx512(const void *w, const float *x, int k);
void slm_x86_fmatmul_avx2(const slm_mm *mm);
void slm_x86_fmatmul_avx512(const slm_mm *mm);

/* kernels_x86_vec.c: vector kernels, activations quantized to int8 blocks
 * (slm_quantize_act_ref's results; AVX2 always with signed codes) */
void slm_x86_rmsnorm_avx2(const float *x, const float *g, float *y, int n, float eps);
void slm_x86_swiglu_avx2(const float *gate, const float *up, float *y, int n);
void slm_x86_silu_avx2(const float *x, float *y, int n);
void slm_x86_geglu_avx2(const float *gate, const float *up, float *y, int n);
void slm_x86_delta_rule_avx2(float *M, const slm_delta_steps *d, int S);
void slm_x86_rmsnorm_avx512(const float *x, const float *g, float *y, int n, float eps);
void slm_x86_swiglu_avx512(const float *gate, const float *up, float *y, int n);
void slm_x86_silu_avx512(const float *x, float *y, int n);
void slm_x86_geglu_avx512(const float *gate, const float *up, float *y, int n);
void slm_x86_delta_rule_avx512(float *M, const slm_delta_steps *d, int S);
void slm_x86_quant_act_avx2(const float *x, size_t ldx, int rows, int k, uint8_t *q, float *d, float *s, int32_t *hs);
void slm_x86_quant_act_avx512(const float *x, size_t ldx, int rows, int k, int offset, uint8_t *q, float *d, float *s,
                              int32_t *hs);

/* kernels_x86_dot.c: quantized weights in their file layout (activations
 * already in qs: offset 128 for AVX-512, signed for AVX2) */
void slm_x86_qmatmul_avx2(const slm_mm *mm, const qscratch *qs);
void slm_x86_qmatmul_avx512(const slm_mm *mm, const qscratch *qs);

/* kernels_x86_quant2.c: Q5_0, Q5_1, IQ4_NL, MXFP4, IQ4_XS, Q2_K, Q3_K in their file
 * layout (activations in qs as for kernels_x86_dot.c): every row of mm, one
 * column at a time; the sets call it for decode, and for Q2_K always. */
void slm_x86_quant2_matmul_avx2(const slm_mm *mm, const qscratch *qs);
void slm_x86_quant2_matmul_avx512(const slm_mm *mm, const qscratch *qs);
/* slm_pack_panel's bytes for the types of quant2 kinds 0-2 (AVX2; both sets'
 * prefill panels, nc = 8 or 16 columns), each block unpacked with SIMD. */
void slm_x86_quant2_pack_panel(uint32_t t, const uint8_t *w, uint64_t wrow, int c0, int valid, int nc, int nb, uint8_t *panel);

/* kernels_x86_r16.c: repacked weights (activations signed in qs; F16_R16
 * takes none) */
void slm_x86_r16_matmul_avx2(const slm_mm *mm, const qscratch *qs);
void slm_x86_r16_matmul_avx512(const slm_mm *mm, const qscratch *qs);
void slm_x86_f16r16_matmul_avx2(const slm_mm *mm);
void slm_x86_f16r16_matmul_avx512(const slm_mm *mm);
/* kernels_x86_r16k.c: the repacked K-quants with a min term (Q4_K, Q5_K) */
void slm_x86_r16k_matmul_avx2(const slm_mm *mm, const qscratch *qs);
void slm_x86_r16k_matmul_avx512(const slm_mm *mm, const qscratch *qs);
/* The prefill panel of the group at column j0 (SLM_R16P_BLOCK_BYTES a block,
 * kernels_x86_r16p.c): r16.c for Q4_0, Q5_0, IQ4_NL, Q8_0, Q6_K; r16k.c for
 * Q4_K, Q5_K. */
void slm_x86_r16p_unpack_avx512(const slm_mm *mm, int j0, uint8_t *pan);
void slm_x86_r16kp_unpack_avx512(const slm_mm *mm, int j0, uint8_t *pan);
/* kernels_x86_r16p.c: prefill (rows >= 16) of every repacked quantized
 * type, up to 3 groups at once from the panel */
void slm_x86_r16p_matmul_avx512(const slm_mm *mm, const qscratch *qs);
/* The AVX2 panel (kernels_x86_r16p.c): Q4_0, Q5_0, Q6_K (r16.c unpacks; 0 for
 * the others), Q4_K, Q5_K (r16k.c), Q8_0 (its own panel of |w| and sign
 * masks, unpacked in r16p.c); the matmul returns 0 where it does not take the
 * call (another type, fewer than 16 rows, no panel). */
int slm_x86_r16p_unpack_avx2(const slm_mm *mm, int j0, uint8_t *pan);
void slm_x86_r16kp_unpack_avx2(const slm_mm *mm, int j0, uint8_t *pan);
int slm_x86_r16p_matmul_avx2(const slm_mm *mm, const qscratch *qs);

#endif
#endif
