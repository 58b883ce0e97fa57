/* x86 kernels for repacked weights (the r16 layouts of common/layout_r16.c). */
#include "device/kernels_x86.h"

#ifdef SLM_X86
/* ---- repacked weights (Q4_0_R16, Q6_K_R16, Q8_0_R16, Q5_0_R16, IQ4_NL_R16, Q3_K_R16,
 * IQ4_XS_R16, Q2_K_R16, Q4_1_R16, Q5_1_R16, MXFP4_R16;
 * layout in common/layout_r16.c) ---------------------------------------------
 * R rows x the 16 columns of one group: per block, vector v (elements
 * 4v..4v+3 of the 16 columns, unsigned codes) meets the row's 4 signed
 * activation codes broadcast (dpbusd: u8 weights x s8 activations). The
 * codes' offset (8; 16 for Q5_0, 32 for Q6_K, 4 for Q3_K, 128 for Q8_0 and
 * for IQ4_NL and IQ4_XS, whose table values are looked up plus 128; 12 for
 * MXFP4, whose levels -12..12 are looked up plus 12) is folded into the
 * accumulator's start: -offset * (sum of the activation codes of the half
 * block). Q6_K, Q3_K and Q2_K keep one accumulator per half block (per-16
 * scales); Q2_K's codes have no offset but a min per half block: -dmin * min
 * * (the half's activation code sum), in float; Q4_1 and Q5_1 (the codes of
 * Q4_0, Q5_0, no offset) a min per block: + m * (the block's activation sum),
 * as Q4_K's in kernels_x86_r16k.c. Decode is R = 1. */
/* TY: 0 Q4_0_R16, 1 Q6_K_R16, 2 Q8_0_R16, 3 Q5_0_R16, 4 IQ4_NL_R16, 5 Q3_K_R16, 6 IQ4_XS_R16,
   7 Q2_K_R16, 8 Q4_1_R16, 9 Q5_1_R16, 10 MXFP4_R16 */
#define R16_NTY 11
#define R16_CODE_BYTES(TY) ((TY) == 2 ? 512 : (TY) == 3 || (TY) == 9 ? 320 : 256) /* per block, before the scales */
#define R16_MIN1(TY) ((TY) == 8 || (TY) == 9) /* f16 m[16] after d[16]: value = d * code + m */
#define R16_HALVES(TY) ((TY) == 1 || (TY) == 5 || (TY) == 7) /* per-16 scales: an accumulator a half block */
#define R16_TABLE(TY) ((TY) == 4 || (TY) == 6) /* codes index slm_kvalues_iq4nl */
#define R16_FP4(TY) ((TY) == 10) /* codes index slm_kvalues_mxfp4, scales E8M0 bytes */
#define R16_OFF(TY) \
    ((TY) == 2 || R16_TABLE(TY) ? -128 : (TY) == 1 ? -32 : (TY) == 3 ? -16 : (TY) == 5 ? -4 : R16_FP4(TY) ? -12 : (TY) == 7 || R16_MIN1(TY) ? 0 : -8)
/* the super-block (Q6_K, Q3_K, IQ4_XS: bytes, header) and block (bytes) of block b */
#define R16_SUPER(TY) ((TY) == 1 || (TY) == 5 || (TY) == 6 || (TY) == 7)
#define R16_SUP_BYTES(TY) ((TY) == 1 ? 3360 : (TY) == 5 ? 1760 : (TY) == 6 ? 2176 : 1344)
#define R16_HDR_BYTES(TY) ((TY) == 1 ? 32 : (TY) == 5 ? 96 : (TY) == 6 ? 128 : 64)
#define R16_BLK_BYTES(TY) \
    ((TY) == 1 ? 416 : (TY) == 5 ? 208 : (TY) == 6 ? 256 : (TY) == 7 ? 160 : R16_FP4(TY) ? 272 : R16_CODE_BYTES(TY) + 32 + 32 * R16_MIN1(TY))
#define R16_PANEL_BB(TY) ((TY) == 7 ? SLM_R16P_BLOCK2_BYTES : SLM_R16P_BLOCK_BYTES)
#define R16_HI_OFS(TY) ((TY) == 5 ? 128 : 256) /* the high bits after the low ones */
static inline const uint8_t *r16_block(const uint8_t *grp, int b, const int TY) {
    if (R16_SUPER(TY))
        return grp + (size_t)(b / 8) * R16_SUP_BYTES(TY) + R16_HDR_BYTES(TY) + (size_t)(b % 8) * R16_BLK_BYTES(TY);
    return grp + (size_t)b * R16_BLK_BYTES(TY);
}

/* slm_kvalues_mxfp4 + 12, unsigned (a wrong entry fails test_kernels' MXFP4 cases) */
AVX2 INLINE __m128i r16_fp4_table(void) { return _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0); }

AVX512 INLINE __m512i r16_vec_avx512(const uint8_t *lo, const uint8_t *hi, int v, int TY) {
    if (TY == 2) return _mm512_loadu_si512(lo + 64 * v);
    const int Q6 = TY == 1;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i c = _mm512_loadu_si512(lo + 64 * (v / 2));
    __m512i w = (v & 1) ? _mm512_and_si512(_mm512_srli_epi16(c, 4), m4) : _mm512_and_si512(c, m4);
    if (TY == 3) /* Q5_0: bit v of hb is bit 4 */
        w = _mm512_mask_add_epi8(w, _mm512_test_epi8_mask(_mm512_loadu_si512(hi), _mm512_set1_epi8((char)(1 << v))), w,
                                 _mm512_set1_epi8(0x10));
    if (R16_TABLE(TY)) { /* IQ4_NL, IQ4_XS: kvalues + 128 (the byte's sign bit flipped) */
        const __m512i tbl = _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)slm_kvalues_iq4nl)),
                                             _mm512_set1_epi8((char)0x80));
        w = _mm512_shuffle_epi8(tbl, w);
    }
    if (R16_FP4(TY)) /* MXFP4: kvalues_mxfp4 + 12 */
        w = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(r16_fp4_table()), w);
    if (Q6) {
        const __m512i h = _mm512_loadu_si512(hi + 64 * (v / 4)), m30 = _mm512_set1_epi8(0x30);
        const int s = v % 4;
        __m512i t = s < 2 ? _mm512_slli_epi16(h, 4 - 2 * s) : s == 2 ? h : _mm512_srli_epi16(h, 2);
        w = _mm512_or_si512(w, _mm512_and_si512(t, m30));
    }
    return w;
}

/* Q6_K block lb's two half-block scales of the 16 columns: the super-block
 * scale dsup times the 8-bit ones. */
AVX512 INLINE void r16_q6_scales_avx512(const uint8_t *lb, __m512 dsup, __m512 *d0, __m512 *d1) {
    *d0 = _mm512_mul_ps(dsup, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(lb + 384)))));
    *d1 = _mm512_mul_ps(dsup, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(lb + 400)))));
}

/* Q2_K_R16 / Q3_K_R16 vector v's 2 low bits: field v % 4 of half v / 4 of lo. */
AVX512 INLINE __m512i r16_lo2_vec_avx512(const uint8_t *lo, int v) {
    const __m512i l = _mm512_loadu_si512(lo + 64 * (v / 4));
    return _mm512_and_si512(v % 4 ? _mm512_srli_epi16(l, 2 * (v % 4)) : l, _mm512_set1_epi8(3));
}

/* Q3_K_R16 vector v: 2 low bits from lo, bit 2 from bit v of hb (codes 0..7). */
AVX512 INLINE __m512i r16_q3_vec_avx512(const uint8_t *lo, const uint8_t *hb, int v) {
    const __m512i w = r16_lo2_vec_avx512(lo, v);
    return _mm512_mask_add_epi8(w, _mm512_test_epi8_mask(_mm512_loadu_si512(hb), _mm512_set1_epi8((char)(1 << v))), w,
                                _mm512_set1_epi8(4));
}

/* Q3_K_R16 block s (0..7) of super-block sup: the two half-block scales of
 * the 16 columns, dsup * (6-bit scale - 32). */
AVX512 INLINE void r16_q3_scales_avx512(const uint8_t *sup, const uint8_t *lb, int s, __m512 dsup, __m512 *d0, __m512 *d1) {
    const __m512i l = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(lb + 192)));
    __m512i h = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(sup + 32 + 16 * (s / 2))));
    if (s % 2) h = _mm512_srli_epi32(h, 4);
    const __m512i m4 = _mm512_set1_epi32(0xF), m30 = _mm512_set1_epi32(0x30), k32 = _mm512_set1_epi32(32);
    const __m512i s0 = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_and_si512(_mm512_slli_epi32(h, 4), m30));
    const __m512i s1 = _mm512_or_si512(_mm512_srli_epi32(l, 4), _mm512_and_si512(_mm512_slli_epi32(h, 2), m30));
    *d0 = _mm512_mul_ps(dsup, _mm512_cvtepi32_ps(_mm512_sub_epi32(s0, k32)));
    *d1 = _mm512_mul_ps(dsup, _mm512_cvtepi32_ps(_mm512_sub_epi32(s1, k32)));
}

/* IQ4_XS_R16: block b's scales of the 16 columns, dsup * (6-bit ls - 32);
 * dsup is loaded at each super-block. */
AVX512 INLINE __m512 r16_xs_scale_avx512(const uint8_t *grp, int b, __m512 *dsup) {
    const uint8_t *sup = grp + (size_t)(b / 8) * 2176;
    const int s = b % 8;
    if (s == 0) *dsup = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sup));
    __m512i l = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(sup + 32 + 16 * (s / 2))));
    __m512i h = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(sup + 96 + 16 * (s / 4))));
    if (s % 2) l = _mm512_srli_epi32(l, 4);
    h = _mm512_srli_epi32(h, 2 * (s % 4));
    const __m512i ls = _mm512_or_si512(_mm512_and_si512(l, _mm512_set1_epi32(0xF)),
                                       _mm512_and_si512(_mm512_slli_epi32(h, 4), _mm512_set1_epi32(0x30)));
    return _mm512_mul_ps(*dsup, _mm512_cvtepi32_ps(_mm512_sub_epi32(ls, _mm512_set1_epi32(32))));
}

/* A block's code vector v, every type (Q2_K: Q3_K's low bits alone). */
AVX512 INLINE __m512i r16_code_avx512(const uint8_t *lb, int v, const int TY) {
    if (TY == 7) return r16_lo2_vec_avx512(lb, v);
    if (R16_MIN1(TY)) return r16_vec_avx512(lb, lb + 256, v, TY == 9 ? 3 : 0);
    return TY == 5 ? r16_q3_vec_avx512(lb, lb + R16_HI_OFS(TY), v) : r16_vec_avx512(lb, lb + R16_HI_OFS(TY), v, TY);
}

/* The half-block scales of block b (Q6_K, Q3_K, Q2_K; Q2_K's mins dmin *
 * min in m0, m1); dsup (Q2_K: and dmsup) is loaded at each super-block. */
AVX512 INLINE void r16_half_scales_avx512(const uint8_t *grp, const uint8_t *lb, int b, __m512 *dsup, __m512 *dmsup,
                                          __m512 *d0, __m512 *d1, __m512 *m0, __m512 *m1, const int TY) {
    const uint8_t *sup = grp + (size_t)(b / 8) * R16_SUP_BYTES(TY);
    if (b % 8 == 0) {
        *dsup = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sup));
        if (TY == 7) *dmsup = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sup + 32)));
    }
    if (TY == 7) {
        const __m512i a = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(lb + 128)));
        const __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(lb + 144)));
        const __m512i m4 = _mm512_set1_epi32(0xF);
        *d0 = _mm512_mul_ps(*dsup, _mm512_cvtepi32_ps(_mm512_and_si512(a, m4)));
        *d1 = _mm512_mul_ps(*dsup, _mm512_cvtepi32_ps(_mm512_and_si512(c, m4)));
        *m0 = _mm512_mul_ps(*dmsup, _mm512_cvtepi32_ps(_mm512_srli_epi32(a, 4)));
        *m1 = _mm512_mul_ps(*dmsup, _mm512_cvtepi32_ps(_mm512_srli_epi32(c, 4)));
    } else if (TY == 5) {
        r16_q3_scales_avx512(sup, lb, b % 8, *dsup, d0, d1);
    } else {
        r16_q6_scales_avx512(lb, *dsup, d0, d1);
    }
}

/* The codes are unpacked per block of rows (decode and short prefills;
 * kernels_x86_r16p.c takes 16 rows or more from a panel). */
AVX512 INLINE void r16_mk_avx512(const slm_mm *mm, const qscratch *qs, int i0, int j0, __mmask16 cm, const int R,
                                 const int TY) {
    const int k = mm->k, nb = k / 32, Q6 = R16_HALVES(TY), CB = R16_CODE_BYTES(TY);
    const uint8_t *grp = (const uint8_t *)mm->w + (size_t)(j0 / 16) * 16 * mm->wrow;
    const int off = R16_OFF(TY);
    const uint8_t *xq = qs->q + (size_t)i0 * k;
    const float *xd = qs->d + (size_t)i0 * nb, *xs = qs->s + (size_t)i0 * nb;
    const int32_t *hs = qs->hs + (size_t)i0 * 2 * nb;
    __m512 acc[6];
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    __m512 dsup = _mm512_setzero_ps(), dmsup = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m512i ia[6], ib[6];
        for (int r = 0; r < R; r++) {
            const int32_t *h = hs + (size_t)r * 2 * nb + 2 * b;
            if (Q6) {
                ia[r] = _mm512_set1_epi32(off * h[0]);
                ib[r] = _mm512_set1_epi32(off * h[1]);
            } else {
                ia[r] = _mm512_set1_epi32(off * (h[0] + h[1]));
            }
        }
        /* the block: codes, then scales (Q6_K, Q3_K: after each super-block's header) */
        const uint8_t *lb = r16_block(grp, b, TY);
        stream_prefetch(lb, R16_BLK_BYTES(TY), mm->pf);
        for (int v = 0; v < 8; v++) {
            const __m512i w = r16_code_avx512(lb, v, TY);
            for (int r = 0; r < R; r++) {
                const __m512i xv = _mm512_set1_epi32(ld32(xq + (size_t)r * k + 32 * b + 4 * v));
                if (Q6 && v >= 4) ib[r] = _mm512_dpbusd_epi32(ib[r], w, xv);
                else ia[r] = _mm512_dpbusd_epi32(ia[r], w, xv);
            }
        }
        if (Q6) {
            __m512 d0, d1, m0 = _mm512_setzero_ps(), m1 = _mm512_setzero_ps();
            r16_half_scales_avx512(grp, lb, b, &dsup, &dmsup, &d0, &d1, &m0, &m1, TY);
            for (int r = 0; r < R; r++) {
                __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ib[r]), d1, _mm512_mul_ps(_mm512_cvtepi32_ps(ia[r]), d0));
                if (TY == 7) { /* the mins, as kernels_x86_r16p.c's kind 3 */
                    const int32_t *h = hs + (size_t)r * 2 * nb + 2 * b;
                    f = _mm512_fnmadd_ps(m0, _mm512_set1_ps((float)h[0]), f);
                    f = _mm512_fnmadd_ps(m1, _mm512_set1_ps((float)h[1]), f);
                }
                acc[r] = _mm512_fmadd_ps(f, _mm512_set1_ps(xd[(size_t)r * nb + b]), acc[r]);
            }
        } else {
            const __m512 d = TY == 6 ? r16_xs_scale_avx512(grp, b, &dsup)
                           : R16_FP4(TY) ? e8m0_half_x16(lb + CB)
                                         : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(lb + CB)));
            /* Q4_1, Q5_1: -m, as the panel keeps it (kernels_x86_r16p.c's kind 2) */
            const __m512 nm = R16_MIN1(TY) ? _mm512_sub_ps(_mm512_setzero_ps(), _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(lb + CB + 32))))
                                           : _mm512_setzero_ps();
            for (int r = 0; r < R; r++) {
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[r]), _mm512_mul_ps(d, _mm512_set1_ps(xd[(size_t)r * nb + b])),
                                         acc[r]);
                if (R16_MIN1(TY)) acc[r] = _mm512_fnmadd_ps(nm, _mm512_set1_ps(xs[(size_t)r * nb + b]), acc[r]);
            }
        }
    }
    for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(mm->y + (size_t)(i0 + r) * mm->ldy + j0, cm, acc[r]);
}

#define R16MK_AVX512(R, TY)                                                                                     \
    AVX512 static void r16_mk_avx512_##R##_##TY(const slm_mm *mm, const qscratch *qs, int i0, int j0, __mmask16 cm) { \
        r16_mk_avx512(mm, qs, i0, j0, cm, R, TY);                                                               \
    }
#define R16MK_AVX512_ALL(TY) R16MK_AVX512(1, TY) R16MK_AVX512(2, TY) R16MK_AVX512(3, TY) R16MK_AVX512(4, TY) \
    R16MK_AVX512(5, TY) R16MK_AVX512(6, TY)
R16MK_AVX512_ALL(0)
R16MK_AVX512_ALL(1)
R16MK_AVX512_ALL(2)
R16MK_AVX512_ALL(3)
R16MK_AVX512_ALL(4)
R16MK_AVX512_ALL(5)
R16MK_AVX512_ALL(6)
R16MK_AVX512_ALL(7)
R16MK_AVX512_ALL(8)
R16MK_AVX512_ALL(9)
R16MK_AVX512_ALL(10)

#define R16ROW512(TY) {r16_mk_avx512_1_##TY, r16_mk_avx512_2_##TY, r16_mk_avx512_3_##TY, r16_mk_avx512_4_##TY, \
                       r16_mk_avx512_5_##TY, r16_mk_avx512_6_##TY}
static const r16mk512_fn k_r16mk512[R16_NTY][6] = {R16ROW512(0), R16ROW512(1), R16ROW512(2), R16ROW512(3),
                                                   R16ROW512(4), R16ROW512(5), R16ROW512(6), R16ROW512(7),
                                                   R16ROW512(8), R16ROW512(9), R16ROW512(10)};

static int r16_ty(uint32_t t) {
    return t == SLM_Q6_K_R16 ? 1 : t == SLM_Q8_0_R16 ? 2 : t == SLM_Q5_0_R16 ? 3 : t == SLM_IQ4_NL_R16 ? 4
         : t == SLM_Q3_K_R16 ? 5 : t == SLM_IQ4_XS_R16 ? 6 : t == SLM_Q2_K_R16 ? 7 : t == SLM_Q4_1_R16 ? 8
         : t == SLM_Q5_1_R16 ? 9 : t == SLM_MXFP4_R16 ? 10 : 0;
}

/* The prefill panel of one group (kernels_x86_r16p.c, SLM_R16P_BLOCK_BYTES a
 * block): the 8 code vectors r16_vec_avx512 gives, then the 16 columns'
 * float scales (Q6_K: of the block's two halves, the super-block scale
 * times the 8-bit one, as r16_mk_avx512 makes them). */
AVX512 INLINE void r16p_unpack_avx512(const slm_mm *mm, int j0, uint8_t *pan, const int TY) {
    const int nb = mm->k / 32, Q6 = R16_HALVES(TY), CB = R16_CODE_BYTES(TY);
    const uint8_t *grp = (const uint8_t *)mm->w + (size_t)(j0 / 16) * 16 * mm->wrow;
    __m512 dsup = _mm512_setzero_ps(), dmsup = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *lb = r16_block(grp, b, TY);
        uint8_t *pb = pan + (size_t)b * R16_PANEL_BB(TY);
        stream_prefetch(lb, R16_BLK_BYTES(TY), mm->pf);
        for (int v = 0; v < 8; v++) _mm512_store_si512(pb + 64 * v, r16_code_avx512(lb, v, TY));
        if (Q6) {
            __m512 d0, d1, m0, m1;
            r16_half_scales_avx512(grp, lb, b, &dsup, &dmsup, &d0, &d1, &m0, &m1, TY);
            if (TY == 7) {
                _mm512_store_ps(pb + 640, m0);
                _mm512_store_ps(pb + 704, m1);
            }
            _mm512_store_ps(pb + 512, d0);
            _mm512_store_ps(pb + 576, d1);
        } else {
            _mm512_store_ps(pb + 512, TY == 6        ? r16_xs_scale_avx512(grp, b, &dsup)
                                      : R16_FP4(TY) ? e8m0_half_x16(lb + CB)
                                                    : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(lb + CB))));
            if (R16_MIN1(TY))
                _mm512_store_ps(pb + 576, _mm512_sub_ps(_mm512_setzero_ps(), _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(lb + CB + 32)))));
        }
    }
}

AVX512 void slm_x86_r16p_unpack_avx512(const slm_mm *mm, int j0, uint8_t *pan) {
    switch (r16_ty(mm->wtype)) {
    case 0: r16p_unpack_avx512(mm, j0, pan, 0); break;
    case 1: r16p_unpack_avx512(mm, j0, pan, 1); break;
    case 2: r16p_unpack_avx512(mm, j0, pan, 2); break;
    case 3: r16p_unpack_avx512(mm, j0, pan, 3); break;
    case 4: r16p_unpack_avx512(mm, j0, pan, 4); break;
    case 5: r16p_unpack_avx512(mm, j0, pan, 5); break;
    case 6: r16p_unpack_avx512(mm, j0, pan, 6); break;
    case 7: r16p_unpack_avx512(mm, j0, pan, 7); break;
    case 8: r16p_unpack_avx512(mm, j0, pan, 8); break;
    case 9: r16p_unpack_avx512(mm, j0, pan, 9); break;
    default: r16p_unpack_avx512(mm, j0, pan, 10); break;
    }
}

/* Groups of 16 columns over [n0, n1) (a group cut by the tile computes all
 * 16 and stores the tile's); rows in blocks of 6 (Q6_K: 4, its two
 * accumulators a row spill beyond), against 8 here: Q4_0 ~460 -> ~510,
 * Q8_0 ~440 -> ~490 (Zen 5). 16 rows or more take kernels_x86_r16p.c. */
AVX512 void slm_x86_r16_matmul_avx512(const slm_mm *mm, const qscratch *qs) {
    if (mm->rows >= 16 && qs->panel) {
        slm_x86_r16p_matmul_avx512(mm, qs);
        return;
    }
    const int ty = r16_ty(mm->wtype);
    r16_walk_avx512(mm, qs, k_r16mk512[ty], ty == 1 || ty == 5 || ty == 7 ? 4 : 6);
}

/* AVX2: a group is two halves of 8 columns (bytes 0..31 and 32..63 of each
 * 64-byte vector); maddubs (u8 weights x s8 activations; |sums| < 2^15) and
 * madd make the 32-bit dot of 4 elements. Q8_0 codes would overflow that
 * (255 * 127 * 2): they are made signed again and take the sign trick, as
 * IQ4_NL's table values do (looked up signed, |value| <= 127). */
AVX2 INLINE __m256i r16_vec_avx2(const uint8_t *lo, const uint8_t *hi, int v, int half, int TY) {
    if (TY == 2)
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(lo + 64 * v + 32 * half)), _mm256_set1_epi8((char)0x80));
    const int Q6 = TY == 1;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i c = _mm256_loadu_si256((const __m256i *)(lo + 64 * (v / 2) + 32 * half));
    __m256i w = (v & 1) ? _mm256_and_si256(_mm256_srli_epi16(c, 4), m4) : _mm256_and_si256(c, m4);
    if (TY == 3) { /* Q5_0: bit v of hb to bit 4 (16-bit shifts: bit 4 of a byte comes from its own bits) */
        const __m256i h = _mm256_loadu_si256((const __m256i *)(hi + 32 * half));
        const __m256i t = v < 4 ? _mm256_slli_epi16(h, 4 - v) : v == 4 ? h : _mm256_srli_epi16(h, v - 4);
        w = _mm256_or_si256(w, _mm256_and_si256(t, _mm256_set1_epi8(0x10)));
    }
    if (R16_TABLE(TY))
        w = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)slm_kvalues_iq4nl)), w);
    if (R16_FP4(TY)) w = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(r16_fp4_table()), w);
    if (Q6) {
        const __m256i h = _mm256_loadu_si256((const __m256i *)(hi + 64 * (v / 4) + 32 * half));
        const int s = v % 4;
        __m256i t = s == 0 ? _mm256_slli_epi16(h, 4) : s == 1 ? _mm256_slli_epi16(h, 2) : s == 2 ? h : _mm256_srli_epi16(h, 2);
        w = _mm256_or_si256(w, _mm256_and_si256(t, _mm256_set1_epi8(0x30)));
    }
    return w;
}

/* Q3_K_R16: a half's code vector v (2 low bits, bit v of hb to bit 2; 16-bit
 * shifts: bit 2 of a byte comes from its own bits) and a half's two scales. */
AVX2 INLINE __m256i r16_lo2_vec_avx2(const uint8_t *lo, int v, int half) {
    const __m256i l = _mm256_loadu_si256((const __m256i *)(lo + 64 * (v / 4) + 32 * half));
    return _mm256_and_si256(v % 4 ? _mm256_srli_epi16(l, 2 * (v % 4)) : l, _mm256_set1_epi8(3));
}

AVX2 INLINE __m256i r16_q3_vec_avx2(const uint8_t *lo, const uint8_t *hb, int v, int half) {
    const __m256i w = r16_lo2_vec_avx2(lo, v, half);
    const __m256i h = _mm256_loadu_si256((const __m256i *)(hb + 32 * half));
    const __m256i t = v < 2 ? _mm256_slli_epi16(h, 2 - v) : v == 2 ? h : _mm256_srli_epi16(h, v - 2);
    return _mm256_or_si256(w, _mm256_and_si256(t, _mm256_set1_epi8(0x04)));
}

/* IQ4_XS_R16: block b's scales of half `half` (8 columns); dsup is loaded at
 * each super-block. */
AVX2 INLINE __m256 r16_xs_scale_avx2(const uint8_t *grp, int b, int half, __m256 *dsup) {
    const uint8_t *sup = grp + (size_t)(b / 8) * 2176;
    const int s = b % 8;
    if (s == 0) *dsup = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sup + 16 * half)));
    __m256i l = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(sup + 32 + 16 * (s / 2) + 8 * half)));
    __m256i h = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(sup + 96 + 16 * (s / 4) + 8 * half)));
    if (s % 2) l = _mm256_srli_epi32(l, 4);
    h = _mm256_srli_epi32(h, 2 * (s % 4));
    const __m256i ls = _mm256_or_si256(_mm256_and_si256(l, _mm256_set1_epi32(0xF)),
                                       _mm256_and_si256(_mm256_slli_epi32(h, 4), _mm256_set1_epi32(0x30)));
    return _mm256_mul_ps(*dsup, _mm256_cvtepi32_ps(_mm256_sub_epi32(ls, _mm256_set1_epi32(32))));
}

/* Q2_K_R16: block b's mins dmin * min of half `half`'s two half blocks. */
AVX2 INLINE void r16_q2_mins_avx2(const uint8_t *grp, const uint8_t *lb, int b, int half, __m256 *dmsup, __m256 *m0,
                                  __m256 *m1) {
    if (b % 8 == 0) *dmsup = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(grp + (size_t)(b / 8) * 1344 + 32 + 16 * half)));
    *m0 = _mm256_mul_ps(*dmsup, _mm256_cvtepi32_ps(_mm256_srli_epi32(
                                    _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(lb + 128 + 8 * half))), 4)));
    *m1 = _mm256_mul_ps(*dmsup, _mm256_cvtepi32_ps(_mm256_srli_epi32(
                                    _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(lb + 144 + 8 * half))), 4)));
}

AVX2 INLINE __m256i r16_code_avx2(const uint8_t *lb, int v, int half, const int TY) {
    if (TY == 7) return r16_lo2_vec_avx2(lb, v, half);
    if (R16_MIN1(TY)) return r16_vec_avx2(lb, lb + 256, v, half, TY == 9 ? 3 : 0);
    return TY == 5 ? r16_q3_vec_avx2(lb, lb + R16_HI_OFS(TY), v, half) : r16_vec_avx2(lb, lb + R16_HI_OFS(TY), v, half, TY);
}

/* The half-block scales of block b of half `half` (8 columns; Q6_K, Q3_K);
 * dsup is loaded at each super-block. */
AVX2 INLINE void r16_half_scales_avx2(const uint8_t *grp, const uint8_t *lb, int b, int half, __m256 *dsup, __m256 *d0,
                                      __m256 *d1, const int TY) {
    const uint8_t *sup = grp + (size_t)(b / 8) * R16_SUP_BYTES(TY);
    if (b % 8 == 0) *dsup = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sup + 16 * half)));
    if (TY == 7) { /* the scales; the mins are r16_q2_mins_avx2's */
        const __m256i m4 = _mm256_set1_epi32(0xF);
        *d0 = _mm256_mul_ps(*dsup, _mm256_cvtepi32_ps(_mm256_and_si256(
                                     _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(lb + 128 + 8 * half))), m4)));
        *d1 = _mm256_mul_ps(*dsup, _mm256_cvtepi32_ps(_mm256_and_si256(
                                     _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(lb + 144 + 8 * half))), m4)));
    } else if (TY == 5) {
        const int s = b % 8;
        const __m256i l = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(lb + 192 + 8 * half)));
        __m256i h = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(sup + 32 + 16 * (s / 2) + 8 * half)));
        if (s % 2) h = _mm256_srli_epi32(h, 4);
        const __m256i m4 = _mm256_set1_epi32(0xF), m30 = _mm256_set1_epi32(0x30), k32 = _mm256_set1_epi32(32);
        const __m256i s0 = _mm256_or_si256(_mm256_and_si256(l, m4), _mm256_and_si256(_mm256_slli_epi32(h, 4), m30));
        const __m256i s1 = _mm256_or_si256(_mm256_srli_epi32(l, 4), _mm256_and_si256(_mm256_slli_epi32(h, 2), m30));
        *d0 = _mm256_mul_ps(*dsup, _mm256_cvtepi32_ps(_mm256_sub_epi32(s0, k32)));
        *d1 = _mm256_mul_ps(*dsup, _mm256_cvtepi32_ps(_mm256_sub_epi32(s1, k32)));
    } else {
        const uint8_t *sc = lb + 384 + 8 * half;
        *d0 = _mm256_mul_ps(*dsup, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)sc))));
        *d1 = _mm256_mul_ps(*dsup, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(sc + 16)))));
    }
}

/* Unsigned codes below 16 (Q4_0), 32 (Q5_0), 64 (Q6_K) times |activation|
 * <= 128 make maddubs pairs below 2 * 15 * 128 (...63 * 128): G of a
 * block's products add in 16 bits before one madd (G * 2 * (2^c - 1) *
 * 128 < 2^15 for G = 8, 4, 2), a third fewer multiply-port operations
 * (MXFP4's codes 0..24: 4 * 2 * 24 * 128 < 2^15, G = 4). */
#define R16_G(TY) \
    ((TY) == 0 || (TY) == 8 ? 8 : (TY) == 3 || (TY) == 5 || (TY) == 7 || (TY) == 9 || R16_FP4(TY) ? 4 : (TY) == 1 ? 2 : 1) /* Q3_K, Q2_K: 4, the half's end */

/* R rows x NH halves of the group at j0, from half h0 (NH 2: h0 0, the
 * whole group in one pass over its bytes: decode). ha[h], he[h]: the
 * columns of half h0 + h to store. The float steps of a row and column do
 * not depend on R or NH: every call gives the same bits. */
AVX2 INLINE void r16_mk_avx2(const slm_mm *mm, const qscratch *qs, int i0, int j0, int h0, const int *ha, const int *he,
                             const int R, const int NH, const int TY) {
    const int k = mm->k, nb = k / 32, Q6 = R16_HALVES(TY), CB = R16_CODE_BYTES(TY), SIGNED = TY == 2 || R16_TABLE(TY), G = R16_G(TY);
    const uint8_t *grp = (const uint8_t *)mm->w + (size_t)(j0 / 16) * 16 * mm->wrow;
    const int off = SIGNED ? 0 : R16_OFF(TY); /* Q8_0, IQ4_NL: signed codes, no offset */
    const __m256i ones = _mm256_set1_epi16(1);
    const uint8_t *xq = qs->q + (size_t)i0 * k;
    const float *xd = qs->d + (size_t)i0 * nb, *xs = qs->s + (size_t)i0 * nb;
    const int32_t *hs = qs->hs + (size_t)i0 * 2 * nb;
    __m256 acc[4][2];
    for (int r = 0; r < R; r++)
        for (int h = 0; h < NH; h++) acc[r][h] = _mm256_setzero_ps();
    __m256 dsup[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, dmsup[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int b = 0; b < nb; b++) {
        const uint8_t *lb = r16_block(grp, b, TY);
        if (!h0) stream_prefetch(lb, R16_BLK_BYTES(TY), mm->pf); /* a call on the second half reads the group again */
        /* the column scales of the block (Q6_K, Q3_K, Q2_K: of its two halves; Q2_K's mins) */
        __m256 d0[2], d1[2], m0[2], m1[2];
        for (int h = 0; h < NH; h++) {
            const int half = h0 + h;
            d1[h] = m0[h] = m1[h] = _mm256_setzero_ps();
            if (Q6) {
                r16_half_scales_avx2(grp, lb, b, half, &dsup[h], &d0[h], &d1[h], TY);
                if (TY == 7) r16_q2_mins_avx2(grp, lb, b, half, &dmsup[h], &m0[h], &m1[h]);
            } else {
                d0[h] = TY == 6        ? r16_xs_scale_avx2(grp, b, half, &dsup[h])
                        : R16_FP4(TY) ? e8m0_half_x8(lb + CB + 8 * half)
                                      : _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(lb + CB + 16 * half)));
                if (R16_MIN1(TY)) /* -m, as the AVX2 panel keeps it */
                    m0[h] = _mm256_sub_ps(_mm256_setzero_ps(), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(lb + CB + 32 + 16 * half))));
            }
        }
        __m256i ia[4][2], s16[4][2];
        for (int r = 0; r < R; r++) {
            const int32_t *hr = hs + (size_t)r * 2 * nb + 2 * b;
            for (int h = 0; h < NH; h++) {
                ia[r][h] = _mm256_set1_epi32(off * (Q6 ? hr[0] : hr[0] + hr[1]));
                s16[r][h] = _mm256_setzero_si256(); /* set at v = 0 */
            }
        }
#pragma GCC unroll 8
        for (int v = 0; v < 8; v++) {
            __m256i w[2], aw[2];
            for (int h = 0; h < NH; h++) {
                w[h] = r16_code_avx2(lb, v, h0 + h, TY);
                aw[h] = SIGNED ? _mm256_abs_epi8(w[h]) : w[h];
            }
            for (int r = 0; r < R; r++) {
                const __m256i xv = _mm256_set1_epi32(ld32(xq + (size_t)r * k + 32 * b + 4 * v));
                for (int h = 0; h < NH; h++) {
                    const __m256i p = _mm256_maddubs_epi16(aw[h], SIGNED ? _mm256_sign_epi8(xv, w[h]) : xv);
                    if (G == 1) {
                        ia[r][h] = _mm256_add_epi32(ia[r][h], _mm256_madd_epi16(p, ones));
                    } else {
                        s16[r][h] = v % G ? _mm256_add_epi16(s16[r][h], p) : p;
                        __asm__("" : "+x"(s16[r][h])); /* a chain, not a tree (kernels_x86_r16p.c) */
                        if (v % G == G - 1) ia[r][h] = _mm256_add_epi32(ia[r][h], _mm256_madd_epi16(s16[r][h], ones));
                    }
                }
            }
            if (Q6 && v == 3) /* the first half block's own scales */
                for (int r = 0; r < R; r++)
                    for (int h = 0; h < NH; h++) {
                        const float dx = xd[(size_t)r * nb + b];
                        acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[r][h]), _mm256_mul_ps(d0[h], _mm256_set1_ps(dx)), acc[r][h]);
                        if (TY == 7)
                            acc[r][h] = _mm256_fnmadd_ps(m0[h], _mm256_set1_ps(dx * (float)hs[(size_t)r * 2 * nb + 2 * b]), acc[r][h]);
                        ia[r][h] = _mm256_set1_epi32(off * hs[(size_t)r * 2 * nb + 2 * b + 1]);
                    }
        }
        for (int r = 0; r < R; r++)
            for (int h = 0; h < NH; h++) {
                const float dx = xd[(size_t)r * nb + b];
                acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[r][h]), _mm256_mul_ps(Q6 ? d1[h] : d0[h], _mm256_set1_ps(dx)),
                                            acc[r][h]);
                if (TY == 7)
                    acc[r][h] = _mm256_fnmadd_ps(m1[h], _mm256_set1_ps(dx * (float)hs[(size_t)r * 2 * nb + 2 * b + 1]), acc[r][h]);
                if (R16_MIN1(TY)) acc[r][h] = _mm256_fnmadd_ps(m0[h], _mm256_set1_ps(xs[(size_t)r * nb + b]), acc[r][h]);
            }
    }
    r16_store_avx2(mm, acc, i0, j0, h0, ha, he, R, NH);
}

/* The prefill panel of one group for the AVX2 panel kernel (kernels_x86_r16p.c;
 * Q4_0, Q5_0, Q6_K, MXFP4: unsigned codes): the bytes slm_x86_r16p_unpack_avx512
 * writes, made a half (8 columns) at a time as r16_mk_avx2 makes them, so both
 * kernels compute the same bits. */
AVX2 INLINE void r16p_unpack_avx2(const slm_mm *mm, int j0, uint8_t *pan, const int TY) {
    const int nb = mm->k / 32, Q6 = R16_HALVES(TY), CB = R16_CODE_BYTES(TY);
    const uint8_t *grp = (const uint8_t *)mm->w + (size_t)(j0 / 16) * 16 * mm->wrow;
    __m256 dsup[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int b = 0; b < nb; b++) {
        const uint8_t *lb = r16_block(grp, b, TY);
        uint8_t *pb = pan + (size_t)b * SLM_R16P_BLOCK_BYTES;
        stream_prefetch(lb, R16_BLK_BYTES(TY), mm->pf);
        for (int half = 0; half < 2; half++) {
            for (int v = 0; v < 8; v++)
                _mm256_store_si256((__m256i *)(pb + 64 * v + 32 * half), r16_code_avx2(lb, v, half, TY));
            float *pd = (float *)(pb + 512) + 8 * half;
            if (Q6) {
                __m256 d0, d1;
                r16_half_scales_avx2(grp, lb, b, half, &dsup[half], &d0, &d1, TY);
                _mm256_store_ps(pd, d0);
                _mm256_store_ps(pd + 16, d1);
            } else {
                _mm256_store_ps(pd, R16_FP4(TY) ? e8m0_half_x8(lb + CB + 8 * half)
                                                : _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(lb + CB + 16 * half))));
                if (R16_MIN1(TY))
                    _mm256_store_ps(pd + 16, _mm256_sub_ps(_mm256_setzero_ps(), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(lb + CB + 32 + 16 * half)))));
            }
        }
    }
}

AVX2 int slm_x86_r16p_unpack_avx2(const slm_mm *mm, int j0, uint8_t *pan) {
    switch (r16_ty(mm->wtype)) {
    case 0: r16p_unpack_avx2(mm, j0, pan, 0); return 1;
    case 1: r16p_unpack_avx2(mm, j0, pan, 1); return 1;
    case 3: r16p_unpack_avx2(mm, j0, pan, 3); return 1;
    case 5: r16p_unpack_avx2(mm, j0, pan, 5); return 1;
    case 8: r16p_unpack_avx2(mm, j0, pan, 8); return 1;
    case 9: r16p_unpack_avx2(mm, j0, pan, 9); return 1;
    case 10: r16p_unpack_avx2(mm, j0, pan, 10); return 1;
    default: return 0; /* IQ4_NL: signed codes (maddubs would saturate on unsigned ones); Q8_0: r16p.c's own panel */
    }
}

#define R16MK_AVX2(R, NH, TY)                                                                                  \
    AVX2 static void r16_mk_avx2_##R##_##NH##_##TY(const slm_mm *mm, const qscratch *qs, int i0, int j0, int h0,     \
                                                   const int *ha, const int *he) {                                 \
        r16_mk_avx2(mm, qs, i0, j0, h0, ha, he, R, NH, TY);                                                        \
    }
#define R16MK_AVX2_ALL(TY) R16MK_AVX2(1, 2, TY) R16MK_AVX2(2, 1, TY) R16MK_AVX2(3, 1, TY) R16MK_AVX2(4, 1, TY)
R16MK_AVX2_ALL(0)
R16MK_AVX2_ALL(1)
R16MK_AVX2_ALL(2)
R16MK_AVX2_ALL(3)
R16MK_AVX2_ALL(4)
R16MK_AVX2_ALL(5)
R16MK_AVX2_ALL(6)
R16MK_AVX2_ALL(7)
R16MK_AVX2_ALL(8)
R16MK_AVX2_ALL(9)
R16MK_AVX2_ALL(10)

/* [type][rows - 1]: one row takes both halves in one pass, more rows a half at a time */
#define R16ROW2(TY) {r16_mk_avx2_1_2_##TY, r16_mk_avx2_2_1_##TY, r16_mk_avx2_3_1_##TY, r16_mk_avx2_4_1_##TY}
static const r16mk2_fn k_r16mk2[R16_NTY][4] = {R16ROW2(0), R16ROW2(1), R16ROW2(2), R16ROW2(3),
                                               R16ROW2(4), R16ROW2(5), R16ROW2(6), R16ROW2(7),
                                               R16ROW2(8), R16ROW2(9), R16ROW2(10)};

AVX2 void slm_x86_r16_matmul_avx2(const slm_mm *mm, const qscratch *qs) {
    if (slm_x86_r16p_matmul_avx2(mm, qs)) return; /* 16 rows or more: kernels_x86_r16p.c */
    r16_walk_avx2(mm, qs, k_r16mk2[r16_ty(mm->wtype)]);
}

/* ---- repacked F16 (F16_R16): exact float FMAs ----------------------------------
 * R rows x the 16 columns of a group: per input element e, one 32-byte load
 * converts to the 16 columns' weights and meets the rows' x[e] broadcast.
 * No horizontal sums, one memory stream per group. Decode (R up to
 * SLM_MM_DECODE_ROWS) keeps 4 accumulators a row over e (AVX2: 2) to cover
 * the FMA latency, the same for every R (a batch row decodes as alone). */
AVX512 INLINE void f16r16_mk_avx512(const slm_mm *mm, int i0, int j0, __mmask16 cm, const int R) {
    const int k = mm->k;
    const uint16_t *g = (const uint16_t *)((const uint8_t *)mm->w + (size_t)(j0 / 16) * 16 * mm->wrow);
    const float *x = mm->x + (size_t)i0 * mm->ldx;
    __m512 acc[8];
    if (R <= SLM_MM_DECODE_ROWS) {
        __m512 a[SLM_MM_DECODE_ROWS][4];
        for (int r = 0; r < R; r++) a[r][0] = a[r][1] = a[r][2] = a[r][3] = _mm512_setzero_ps();
        int e = 0;
        for (; e + 4 <= k; e += 4) {
            stream_prefetch((const uint8_t *)(g + (size_t)e * 16), 128, mm->pf);
            for (int c = 0; c < 4; c++) {
                const __m512 w = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(g + (size_t)(e + c) * 16)));
                for (int r = 0; r < R; r++) a[r][c] = _mm512_fmadd_ps(w, _mm512_set1_ps(x[(size_t)r * mm->ldx + e + c]), a[r][c]);
            }
        }
        for (; e < k; e++) {
            const __m512 w = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(g + (size_t)e * 16)));
            for (int r = 0; r < R; r++) a[r][0] = _mm512_fmadd_ps(w, _mm512_set1_ps(x[(size_t)r * mm->ldx + e]), a[r][0]);
        }
        for (int r = 0; r < R; r++) acc[r] = _mm512_add_ps(_mm512_add_ps(a[r][0], a[r][1]), _mm512_add_ps(a[r][2], a[r][3]));
    } else {
        for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
        for (int e = 0; e < k; e++) {
            if (!(e & 1)) stream_prefetch((const uint8_t *)(g + (size_t)e * 16), 64, mm->pf);
            const __m512 w = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(g + (size_t)e * 16)));
            for (int r = 0; r < R; r++) acc[r] = _mm512_fmadd_ps(w, _mm512_set1_ps(x[(size_t)r * mm->ldx + e]), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(mm->y + (size_t)(i0 + r) * mm->ldy + j0, cm, acc[r]);
}

#define F16MK_AVX512(R)                                                                            \
    AVX512 static void f16r16_mk_avx512_##R(const slm_mm *mm, int i0, int j0, __mmask16 cm) { \
        f16r16_mk_avx512(mm, i0, j0, cm, R);                                                       \
    }
F16MK_AVX512(1) F16MK_AVX512(2) F16MK_AVX512(3) F16MK_AVX512(4) F16MK_AVX512(5) F16MK_AVX512(6) F16MK_AVX512(7)
F16MK_AVX512(8)
typedef void (*f16mk512_fn)(const slm_mm *, int, int, __mmask16);
static const f16mk512_fn k_f16mk512[8] = {f16r16_mk_avx512_1, f16r16_mk_avx512_2, f16r16_mk_avx512_3, f16r16_mk_avx512_4,
                                         f16r16_mk_avx512_5, f16r16_mk_avx512_6, f16r16_mk_avx512_7, f16r16_mk_avx512_8};

AVX512 void slm_x86_f16r16_matmul_avx512(const slm_mm *mm) {
    /* column groups in chunks of ~256 KiB of weights, kept in L2 across the rows */
    const uint64_t group_bytes = mm->wrow * 16 > 0 ? mm->wrow * 16 : 1;
    int chunk = (int)((256u << 10) / group_bytes) * 16;
    if (chunk < 16) chunk = 16;
    for (int c0 = mm->n0 & ~15; c0 < mm->n1; c0 += chunk)
        for (int i0 = 0; i0 < mm->rows; i0 += 8) {
            const int nr = mm->rows - i0 < 8 ? mm->rows - i0 : 8;
            for (int g0 = c0; g0 < c0 + chunk && g0 < mm->n1; g0 += 16) {
                const int a = mm->n0 > g0 ? mm->n0 - g0 : 0, e = mm->n1 - g0 < 16 ? mm->n1 - g0 : 16;
                k_f16mk512[nr - 1](mm, i0, g0, (__mmask16)(((1u << e) - 1) & ~((1u << a) - 1)));
            }
        }
}

AVX2 INLINE void f16r16_mk_avx2(const slm_mm *mm, int i0, int j0, int half, int a, int e, const int R) {
    const int k = mm->k;
    const uint16_t *g = (const uint16_t *)((const uint8_t *)mm->w + (size_t)(j0 / 16) * 16 * mm->wrow) + 8 * half;
    const float *x = mm->x + (size_t)i0 * mm->ldx;
    const int pf = half ? 0 : mm->pf; /* the second half reads the group again */
    __m256 acc[4];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    if (R <= SLM_MM_DECODE_ROWS) {
        __m256 a1[SLM_MM_DECODE_ROWS];
        for (int r = 0; r < R; r++) a1[r] = _mm256_setzero_ps();
        int q = 0;
        for (; q + 2 <= k; q += 2) {
            stream_prefetch((const uint8_t *)(g + (size_t)q * 16), 64, pf);
            const __m256 w0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + (size_t)q * 16)));
            const __m256 w1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + (size_t)(q + 1) * 16)));
            for (int r = 0; r < R; r++) {
                acc[r] = _mm256_fmadd_ps(w0, _mm256_set1_ps(x[(size_t)r * mm->ldx + q]), acc[r]);
                a1[r] = _mm256_fmadd_ps(w1, _mm256_set1_ps(x[(size_t)r * mm->ldx + q + 1]), a1[r]);
            }
        }
        for (; q < k; q++) {
            const __m256 w = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + (size_t)q * 16)));
            for (int r = 0; r < R; r++) acc[r] = _mm256_fmadd_ps(w, _mm256_set1_ps(x[(size_t)r * mm->ldx + q]), acc[r]);
        }
        for (int r = 0; r < R; r++) acc[r] = _mm256_add_ps(acc[r], a1[r]);
    } else {
        for (int q = 0; q < k; q++) {
            if (!(q & 1)) stream_prefetch((const uint8_t *)(g + (size_t)q * 16), 64, pf);
            const __m256 w = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + (size_t)q * 16)));
            for (int r = 0; r < R; r++) acc[r] = _mm256_fmadd_ps(w, _mm256_set1_ps(x[(size_t)r * mm->ldx + q]), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        float t[8];
        _mm256_storeu_ps(t, acc[r]);
        float *y = mm->y + (size_t)(i0 + r) * mm->ldy + j0 + 8 * half;
        for (int c = a; c < e; c++) y[c] = t[c];
    }
}

#define F16MK_AVX2(R)                                                                                      \
    AVX2 static void f16r16_mk_avx2_##R(const slm_mm *mm, int i0, int j0, int half, int a, int e) { \
        f16r16_mk_avx2(mm, i0, j0, half, a, e, R);                                                         \
    }
F16MK_AVX2(1) F16MK_AVX2(2) F16MK_AVX2(3) F16MK_AVX2(4)
typedef void (*f16mk2_fn)(const slm_mm *, int, int, int, int, int);
static const f16mk2_fn k_f16mk2[4] = {f16r16_mk_avx2_1, f16r16_mk_avx2_2, f16r16_mk_avx2_3, f16r16_mk_avx2_4};

/* Prefill: R (1..6) rows of a whole group of 16 columns, both halves per
 * broadcast of x (12 accumulators: a weight load and conversion per 6 FMAs
 * rather than per 4, one broadcast per 2). */
AVX2 INLINE void f16r16_mk16_avx2(const slm_mm *mm, int i0, int j0, const int R) {
    const int k = mm->k;
    const uint16_t *g = (const uint16_t *)((const uint8_t *)mm->w + (size_t)(j0 / 16) * 16 * mm->wrow);
    const float *x = mm->x + (size_t)i0 * mm->ldx;
    __m256 lo[6], hi[6];
    for (int r = 0; r < R; r++) lo[r] = hi[r] = _mm256_setzero_ps();
    for (int q = 0; q < k; q++) {
        if (!(q & 1)) stream_prefetch((const uint8_t *)(g + (size_t)q * 16), 64, mm->pf);
        const __m256 w0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + (size_t)q * 16)));
        const __m256 w1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + (size_t)q * 16 + 8)));
        for (int r = 0; r < R; r++) {
            const __m256 b = _mm256_set1_ps(x[(size_t)r * mm->ldx + q]);
            lo[r] = _mm256_fmadd_ps(w0, b, lo[r]);
            hi[r] = _mm256_fmadd_ps(w1, b, hi[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        float *y = mm->y + (size_t)(i0 + r) * mm->ldy + j0;
        _mm256_storeu_ps(y, lo[r]);
        _mm256_storeu_ps(y + 8, hi[r]);
    }
}

#define F16MK16_AVX2(R)                                                                \
    AVX2 static void f16r16_mk16_avx2_##R(const slm_mm *mm, int i0, int j0) { f16r16_mk16_avx2(mm, i0, j0, R); }
F16MK16_AVX2(1) F16MK16_AVX2(2) F16MK16_AVX2(3) F16MK16_AVX2(4) F16MK16_AVX2(5) F16MK16_AVX2(6)
typedef void (*f16mk16_fn)(const slm_mm *, int, int);
static const f16mk16_fn k_f16mk16[6] = {f16r16_mk16_avx2_1, f16r16_mk16_avx2_2, f16r16_mk16_avx2_3,
                                        f16r16_mk16_avx2_4, f16r16_mk16_avx2_5, f16r16_mk16_avx2_6};

AVX2 void slm_x86_f16r16_matmul_avx2(const slm_mm *mm) {
    if (mm->rows > SLM_MM_DECODE_ROWS) { /* prefill: whole groups 6 rows x 16 columns, chunks kept in L2 */
        const uint64_t group_bytes = mm->wrow * 16 > 0 ? mm->wrow * 16 : 1;
        int chunk = (int)((256u << 10) / group_bytes) * 16;
        if (chunk < 16) chunk = 16;
        const int g_lo = (mm->n0 + 15) & ~15, g_hi = mm->n1 & ~15; /* the whole groups inside [n0, n1) */
        for (int c0 = g_lo; c0 < g_hi; c0 += chunk)
            for (int i0 = 0; i0 < mm->rows; i0 += 6) {
                const int nr = mm->rows - i0 < 6 ? mm->rows - i0 : 6;
                for (int g0 = c0; g0 < c0 + chunk && g0 < g_hi; g0 += 16) k_f16mk16[nr - 1](mm, i0, g0);
            }
        if (g_lo < g_hi) { /* the parts of groups outside them: the per-half kernel below */
            slm_mm edge = *mm;
            if (mm->n0 < g_lo) {
                edge.n1 = g_lo;
                slm_x86_f16r16_matmul_avx2(&edge);
            }
            if (g_hi < mm->n1) {
                edge.n0 = g_hi;
                edge.n1 = mm->n1;
                slm_x86_f16r16_matmul_avx2(&edge);
            }
            return;
        }
    }
    for (int h0 = mm->n0 & ~7; h0 < mm->n1; h0 += 8) {
        const int a = mm->n0 > h0 ? mm->n0 - h0 : 0, e = mm->n1 - h0 < 8 ? mm->n1 - h0 : 8;
        for (int i0 = 0; i0 < mm->rows; i0 += 4) {
            const int nr = mm->rows - i0 < 4 ? mm->rows - i0 : 4;
            k_f16mk2[nr - 1](mm, i0, h0 & ~15, (h0 / 8) & 1, a, e);
        }
    }
}

#endif
