/* x86 kernels for the repacked K-quants with a min term (Q4_K_R16,
 * Q5_K_R16; layout in common/layout_r16.c).
 *
 * R rows x the 16 columns of one group. Per block of 32 elements, vector v
 * (elements 4v..4v+3 of the 16 columns: unsigned codes 0..15, for Q5_K
 * 0..31 with the fifth bit from hb) meets the row's 4 signed activation
 * codes broadcast (VNNI dpbusd: u8 weights x s8 activations; AVX2: maddubs
 * and madd, |sums| <= 31 * 128 * 2 < 2^15). The codes need no offset: the
 * block's value is d * sc * code - dmin * mn, so
 *   y += (d sc) * dx * idot - (dmin mn) * (dx * sum of the activation codes)
 * with the second factor the xq block sum (qs->s). The block's 16 scales
 * and mins are unpacked from the super-block header (6 bits: a low nibble
 * and 2 high bits) to floats once per block, for all R rows. Decode is
 * R = 1 (two accumulators split the dpbusd chain). */
#include "device/kernels_x86.h"

#ifdef SLM_X86
/* The 16 rows' (AVX2: 8 rows', 8-byte loads) 6-bit scales and mins of block s. */
INLINE void k_scales_u8(const uint8_t *sup, int s, int off, __m128i *sc, __m128i *mn, int wide) {
    const __m128i m4 = _mm_set1_epi8(0x0F), c3 = _mm_set1_epi8(3);
    const uint8_t *p = sup + 64 + 16 * s + off, *h = sup + 192 + 16 * (s / 4) + off, *g = sup + 224 + 16 * (s / 4) + off;
    const __m128i sm = wide ? _mm_loadu_si128((const __m128i *)p) : _mm_loadl_epi64((const __m128i *)p);
    const __m128i sh = wide ? _mm_loadu_si128((const __m128i *)h) : _mm_loadl_epi64((const __m128i *)h);
    const __m128i mh = wide ? _mm_loadu_si128((const __m128i *)g) : _mm_loadl_epi64((const __m128i *)g);
    const int n = 2 * (s % 4);
    /* 16-bit shifts: a byte's bits 0..1 after >> n (n <= 6) are its own */
    *sc = _mm_or_si128(_mm_and_si128(sm, m4), _mm_slli_epi16(_mm_and_si128(_mm_srl_epi16(sh, _mm_cvtsi32_si128(n)), c3), 4));
    *mn = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(sm, 4), m4),
                       _mm_slli_epi16(_mm_and_si128(_mm_srl_epi16(mh, _mm_cvtsi32_si128(n)), c3), 4));
}

/* Code vector v of a block (elements 4v..4v+3 of the 16 columns; Q5_K: the
 * fifth bit from hb), as dpbusd takes it. */
AVX512 INLINE __m512i r16k_vec_avx512(const uint8_t *blk, __m512i hb, int v, const int Q5) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i c = _mm512_loadu_si512(blk + 64 * (v / 2));
    __m512i w = (v & 1) ? _mm512_and_si512(_mm512_srli_epi16(c, 4), m4) : _mm512_and_si512(c, m4);
    if (Q5) w = _mm512_mask_add_epi8(w, _mm512_test_epi8_mask(hb, _mm512_set1_epi8((char)(1 << v))), w, _mm512_set1_epi8(0x10));
    return w;
}

/* Block s's 16 columns' d * sc and dmin * mn (dsup, msup: the super-block's). */
AVX512 INLINE void r16k_scales_avx512(const uint8_t *sup, int s, __m512 dsup, __m512 msup, __m512 *dsc, __m512 *dmn) {
    __m128i sc, mn;
    k_scales_u8(sup, s, 0, &sc, &mn, 1);
    *dsc = _mm512_mul_ps(dsup, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sc)));
    *dmn = _mm512_mul_ps(msup, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(mn)));
}

AVX512 INLINE void r16k_mk_avx512(const slm_mm *mm, const qscratch *qs, int i0, int j0, __mmask16 cm, const int R,
                                  const int Q5) {
    const int k = mm->k, nb = k / 32, SB = Q5 ? 2816 : 2304, BB = Q5 ? 320 : 256;
    const int SPLIT = R <= 4; /* two accumulators per row: v < 4 and v >= 4 */
    const uint8_t *grp = (const uint8_t *)mm->w + (size_t)(j0 / 16) * 16 * mm->wrow;
    const uint8_t *xq = qs->q + (size_t)i0 * k;
    const float *xd = qs->d + (size_t)i0 * nb, *xs = qs->s + (size_t)i0 * nb;
    __m512 acc[8];
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    __m512 dsup = _mm512_setzero_ps(), msup = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const int s = b % 8;
        const uint8_t *sup = grp + (size_t)(b / 8) * SB, *blk = sup + 256 + (size_t)s * BB;
        stream_prefetch(grp + (size_t)b * (SB / 8), SB / 8, mm->pf); /* a header and 8 blocks per super-block */
        if (s == 0) {
            dsup = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sup));
            msup = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sup + 32)));
        }
        __m512i ia[8], ib[8];
        for (int r = 0; r < R; r++) ia[r] = ib[r] = _mm512_setzero_si512();
        const __m512i hb = Q5 ? _mm512_loadu_si512(blk + 256) : _mm512_setzero_si512();
        for (int v = 0; v < 8; v++) {
            const __m512i w = r16k_vec_avx512(blk, hb, v, Q5);
            for (int r = 0; r < R; r++) {
                const __m512i xv = _mm512_set1_epi32(ld32(xq + (size_t)r * k + 32 * b + 4 * v));
                if (SPLIT && v >= 4) ib[r] = _mm512_dpbusd_epi32(ib[r], w, xv);
                else ia[r] = _mm512_dpbusd_epi32(ia[r], w, xv);
            }
        }
        __m512 dsc, dmn;
        r16k_scales_avx512(sup, s, dsup, msup, &dsc, &dmn);
        for (int r = 0; r < R; r++) {
            const __m512i id = SPLIT ? _mm512_add_epi32(ia[r], ib[r]) : ia[r];
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(id), _mm512_mul_ps(dsc, _mm512_set1_ps(xd[(size_t)r * nb + b])), acc[r]);
            acc[r] = _mm512_fnmadd_ps(dmn, _mm512_set1_ps(xs[(size_t)r * nb + b]), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(mm->y + (size_t)(i0 + r) * mm->ldy + j0, cm, acc[r]);
}

#define R16KMK_AVX512(R, Q5)                                                                                      \
    AVX512 static void r16k_mk_avx512_##R##_##Q5(const slm_mm *mm, const qscratch *qs, int i0, int j0, __mmask16 cm) { \
        r16k_mk_avx512(mm, qs, i0, j0, cm, R, Q5);                                                                 \
    }
#define R16KMK_AVX512_ALL(Q5) R16KMK_AVX512(1, Q5) R16KMK_AVX512(2, Q5) R16KMK_AVX512(3, Q5) R16KMK_AVX512(4, Q5) \
    R16KMK_AVX512(5, Q5) R16KMK_AVX512(6, Q5) R16KMK_AVX512(7, Q5) R16KMK_AVX512(8, Q5)
R16KMK_AVX512_ALL(0)
R16KMK_AVX512_ALL(1)

#define R16KROW512(Q5) {r16k_mk_avx512_1_##Q5, r16k_mk_avx512_2_##Q5, r16k_mk_avx512_3_##Q5, r16k_mk_avx512_4_##Q5, \
                        r16k_mk_avx512_5_##Q5, r16k_mk_avx512_6_##Q5, r16k_mk_avx512_7_##Q5, r16k_mk_avx512_8_##Q5}
static const r16mk512_fn k_r16kmk512[2][8] = {R16KROW512(0), R16KROW512(1)};

/* The prefill panel of one group (kernels_x86_r16p.c, SLM_R16P_BLOCK_BYTES a
 * block): the 8 code vectors (v: elements 4v..4v+3 of the 16 columns), then
 * the 16 columns' d * sc and dmin * mn as floats. */
AVX512 void slm_x86_r16kp_unpack_avx512(const slm_mm *mm, int j0, uint8_t *pan) {
    const int Q5 = mm->wtype == SLM_Q5_K_R16, nb = mm->k / 32, SB = Q5 ? 2816 : 2304, BB = Q5 ? 320 : 256;
    const uint8_t *grp = (const uint8_t *)mm->w + (size_t)(j0 / 16) * 16 * mm->wrow;
    __m512 dsup = _mm512_setzero_ps(), msup = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const int s = b % 8;
        const uint8_t *sup = grp + (size_t)(b / 8) * SB, *blk = sup + 256 + (size_t)s * BB;
        uint8_t *pb = pan + (size_t)b * SLM_R16P_BLOCK_BYTES;
        stream_prefetch(grp + (size_t)b * (SB / 8), SB / 8, mm->pf);
        if (s == 0) {
            dsup = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sup));
            msup = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sup + 32)));
        }
        const __m512i hb = Q5 ? _mm512_loadu_si512(blk + 256) : _mm512_setzero_si512();
        for (int v = 0; v < 8; v++) _mm512_store_si512(pb + 64 * v, Q5 ? r16k_vec_avx512(blk, hb, v, 1) : r16k_vec_avx512(blk, hb, v, 0));
        __m512 dsc, dmn;
        r16k_scales_avx512(sup, s, dsup, msup, &dsc, &dmn);
        _mm512_store_ps(pb + 512, dsc);
        _mm512_store_ps(pb + 576, dmn);
    }
}

/* Groups of 16 columns over [n0, n1) (a group cut by the tile computes all
 * 16 and stores the tile's); rows in blocks of 6 (one core, 512 x 2048 x
 * 2048: Q4_K ~360 -> ~500 GOP/s, Q5_K ~295 -> ~450 against blocks of 8). */
AVX512 void slm_x86_r16k_matmul_avx512(const slm_mm *mm, const qscratch *qs) {
    if (mm->rows >= 16 && qs->panel) { /* from the panel: kernels_x86_r16p.c */
        slm_x86_r16p_matmul_avx512(mm, qs);
        return;
    }
    /* 6-row blocks: ~1.4x 8-row ones here (Zen 5) */
    r16_walk_avx512(mm, qs, k_r16kmk512[mm->wtype == SLM_Q5_K_R16], 6);
}

/* AVX2: R rows x NH halves (8 columns: bytes 32 half .. +31 of each 64-byte
 * vector) of the group at j0, from half h0 (NH 2, h0 0: the whole group in
 * one pass, decode); ha[h], he[h] the columns of half h0 + h to store. The
 * float steps of a row and column do not depend on R or NH. */
AVX2 INLINE void r16k_mk_avx2(const slm_mm *mm, const qscratch *qs, int i0, int j0, int h0, const int *ha, const int *he,
                              const int R, const int NH, const int Q5) {
    const int k = mm->k, nb = k / 32, SB = Q5 ? 2816 : 2304, BB = Q5 ? 320 : 256, G = Q5 ? 4 : 8;
    const uint8_t *grp = (const uint8_t *)mm->w + (size_t)(j0 / 16) * 16 * mm->wrow;
    const uint8_t *xq = qs->q + (size_t)i0 * k;
    const float *xd = qs->d + (size_t)i0 * nb, *xs = qs->s + (size_t)i0 * nb;
    const __m256i m4 = _mm256_set1_epi8(0x0F), c16 = _mm256_set1_epi8(0x10), ones = _mm256_set1_epi16(1);
    __m256 acc[4][2];
    for (int r = 0; r < R; r++)
        for (int h = 0; h < NH; h++) acc[r][h] = _mm256_setzero_ps();
    __m256 dsup[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, msup[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int b = 0; b < nb; b++) {
        const int s = b % 8;
        const uint8_t *sup = grp + (size_t)(b / 8) * SB, *blk = sup + 256 + (size_t)s * BB;
        if (!h0) stream_prefetch(grp + (size_t)b * (SB / 8), SB / 8, mm->pf); /* a call on the second half reads it again */
        __m256i hb[2], ia[4][2], s16[4][2];
        for (int h = 0; h < NH; h++) {
            const int half = h0 + h;
            if (s == 0) {
                dsup[h] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sup + 16 * half)));
                msup[h] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sup + 32 + 16 * half)));
            }
            hb[h] = Q5 ? _mm256_loadu_si256((const __m256i *)(blk + 256 + 32 * half)) : _mm256_setzero_si256();
            for (int r = 0; r < R; r++) ia[r][h] = s16[r][h] = _mm256_setzero_si256(); /* s16: set at v = 0 */
        }
#pragma GCC unroll 8
        for (int v = 0; v < 8; v++) {
            __m256i w[2];
            for (int h = 0; h < NH; h++) {
                const __m256i c = _mm256_loadu_si256((const __m256i *)(blk + 64 * (v / 2) + 32 * (h0 + h)));
                w[h] = (v & 1) ? _mm256_and_si256(_mm256_srli_epi16(c, 4), m4) : _mm256_and_si256(c, m4);
                if (Q5) { /* bit v of hb to bit 4 (16-bit shifts: bit 4 of a byte comes from its own bits) */
                    const __m256i t = v < 4 ? _mm256_slli_epi16(hb[h], 4 - v) : v == 4 ? hb[h] : _mm256_srli_epi16(hb[h], v - 4);
                    w[h] = _mm256_or_si256(w[h], _mm256_and_si256(t, c16));
                }
            }
            for (int r = 0; r < R; r++) { /* G products add in 16 bits: G * 2 * (2^c - 1) * 128 < 2^15 */
                const __m256i xv = _mm256_set1_epi32(ld32(xq + (size_t)r * k + 32 * b + 4 * v));
                for (int h = 0; h < NH; h++) {
                    const __m256i p = _mm256_maddubs_epi16(w[h], xv);
                    s16[r][h] = v % G ? _mm256_add_epi16(s16[r][h], p) : p;
                    __asm__("" : "+x"(s16[r][h])); /* a chain, not a tree (kernels_x86_r16p.c) */
                    if (v % G == G - 1) ia[r][h] = _mm256_add_epi32(ia[r][h], _mm256_madd_epi16(s16[r][h], ones));
                }
            }
        }
        for (int h = 0; h < NH; h++) {
            __m128i sc, mn;
            k_scales_u8(sup, s, 8 * (h0 + h), &sc, &mn, 0);
            const __m256 dsc = _mm256_mul_ps(dsup[h], _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc)));
            const __m256 dmn = _mm256_mul_ps(msup[h], _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mn)));
            for (int r = 0; r < R; r++) {
                acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[r][h]), _mm256_mul_ps(dsc, _mm256_set1_ps(xd[(size_t)r * nb + b])), acc[r][h]);
                acc[r][h] = _mm256_fnmadd_ps(dmn, _mm256_set1_ps(xs[(size_t)r * nb + b]), acc[r][h]);
            }
        }
    }
    r16_store_avx2(mm, acc, i0, j0, h0, ha, he, R, NH);
}

/* The prefill panel of one group for the AVX2 panel kernel
 * (kernels_x86_r16p.c): slm_x86_r16kp_unpack_avx512's bytes, made a half at
 * a time as r16k_mk_avx2 makes them (the same bits). */
AVX2 void slm_x86_r16kp_unpack_avx2(const slm_mm *mm, int j0, uint8_t *pan) {
    const int Q5 = mm->wtype == SLM_Q5_K_R16, nb = mm->k / 32, SB = Q5 ? 2816 : 2304, BB = Q5 ? 320 : 256;
    const uint8_t *grp = (const uint8_t *)mm->w + (size_t)(j0 / 16) * 16 * mm->wrow;
    const __m256i m4 = _mm256_set1_epi8(0x0F), c16 = _mm256_set1_epi8(0x10);
    __m256 dsup[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, msup[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int b = 0; b < nb; b++) {
        const int s = b % 8;
        const uint8_t *sup = grp + (size_t)(b / 8) * SB, *blk = sup + 256 + (size_t)s * BB;
        uint8_t *pb = pan + (size_t)b * SLM_R16P_BLOCK_BYTES;
        stream_prefetch(grp + (size_t)b * (SB / 8), SB / 8, mm->pf);
        for (int half = 0; half < 2; half++) {
            if (s == 0) {
                dsup[half] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sup + 16 * half)));
                msup[half] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sup + 32 + 16 * half)));
            }
            const __m256i hb = Q5 ? _mm256_loadu_si256((const __m256i *)(blk + 256 + 32 * half)) : _mm256_setzero_si256();
            for (int v = 0; v < 8; v++) {
                const __m256i c = _mm256_loadu_si256((const __m256i *)(blk + 64 * (v / 2) + 32 * half));
                __m256i w = (v & 1) ? _mm256_and_si256(_mm256_srli_epi16(c, 4), m4) : _mm256_and_si256(c, m4);
                if (Q5) {
                    const __m256i t = v < 4 ? _mm256_slli_epi16(hb, 4 - v) : v == 4 ? hb : _mm256_srli_epi16(hb, v - 4);
                    w = _mm256_or_si256(w, _mm256_and_si256(t, c16));
                }
                _mm256_store_si256((__m256i *)(pb + 64 * v + 32 * half), w);
            }
            __m128i sc, mn;
            k_scales_u8(sup, s, 8 * half, &sc, &mn, 0);
            float *pd = (float *)(pb + 512) + 8 * half;
            _mm256_store_ps(pd, _mm256_mul_ps(dsup[half], _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc))));
            _mm256_store_ps(pd + 16, _mm256_mul_ps(msup[half], _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mn))));
        }
    }
}

#define R16KMK_AVX2(R, NH, Q5)                                                                                   \
    AVX2 static void r16k_mk_avx2_##R##_##NH##_##Q5(const slm_mm *mm, const qscratch *qs, int i0, int j0, int h0,      \
                                                    const int *ha, const int *he) {                                  \
        r16k_mk_avx2(mm, qs, i0, j0, h0, ha, he, R, NH, Q5);                                                         \
    }
R16KMK_AVX2(1, 2, 0) R16KMK_AVX2(2, 1, 0) R16KMK_AVX2(3, 1, 0) R16KMK_AVX2(4, 1, 0)
R16KMK_AVX2(1, 2, 1) R16KMK_AVX2(2, 1, 1) R16KMK_AVX2(3, 1, 1) R16KMK_AVX2(4, 1, 1)

/* [Q5][rows - 1]: one row takes both halves in one pass, more rows a half at a time */
static const r16mk2_fn k_r16kmk2[2][4] = {
    {r16k_mk_avx2_1_2_0, r16k_mk_avx2_2_1_0, r16k_mk_avx2_3_1_0, r16k_mk_avx2_4_1_0},
    {r16k_mk_avx2_1_2_1, r16k_mk_avx2_2_1_1, r16k_mk_avx2_3_1_1, r16k_mk_avx2_4_1_1},
};

AVX2 void slm_x86_r16k_matmul_avx2(const slm_mm *mm, const qscratch *qs) {
    if (slm_x86_r16p_matmul_avx2(mm, qs)) return; /* 16 rows or more: kernels_x86_r16p.c */
    r16_walk_avx2(mm, qs, k_r16kmk2[mm->wtype == SLM_Q5_K_R16]);
}
#endif
