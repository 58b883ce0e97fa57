/* x86 kernels for quantized weights in their file layout (Q8_0, Q4_0, Q4_1,
 * Q4_K, Q5_K, Q6_K), activations quantized to int8 blocks of 32:
 * - rows <= SLM_MM_DECODE_ROWS (decode, memory bound): per weight column a
 *   direct walk over its blocks: SIMD unpack to int8 codes, per row an
 *   integer dot (VNNI dpbusd on AVX-512; maddubs/madd on AVX2) and one float
 *   FMA per block.
 * - more rows (prefill, compute bound): per 16 (8) output columns the
 *   weights are unpacked into a panel in scratch (slm_pack_panel: codes
 *   interleaved 4 bytes per column, so one vector holds 4 elements of 16
 *   columns), then a register-blocked micro-kernel of up to 8 (4) rows x 16
 *   (8) columns runs dpbusd with the row's 4 codes broadcast; per block and
 *   row: cvt + 2 FMAs. */
#include <time.h>

#include "common/cpu.h"
#include "device/kernels_x86.h"

#ifdef SLM_X86
/* ---- weight blocks as int8 codes (decode) ------------------------------------
 * Block b (32 elements) of a row of type T: codes q (signed), scales of the
 * two halves d0, d1, min m; value = d[e / 16] * q[e] + m. */
AVX2 INLINE __m256i nibbles32(const uint8_t *qs16) {
    __m128i t = _mm_loadu_si128((const __m128i *)qs16);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0F));
}

AVX2 INLINE __m256i qblock(const uint8_t *row, int T, int b, float *d0, float *d1, float *m) {
    switch (T) {
    case SLM_Q8_0: {
        const slm_block_q8_0 *x = (const slm_block_q8_0 *)row + b;
        *d0 = *d1 = _cvtsh_ss(x->d);
        return _mm256_loadu_si256((const __m256i *)x->qs);
    }
    case SLM_Q4_0: {
        const slm_block_q4_0 *x = (const slm_block_q4_0 *)row + b;
        *d0 = *d1 = _cvtsh_ss(x->d);
        return _mm256_sub_epi8(nibbles32(x->qs), _mm256_set1_epi8(8));
    }
    case SLM_Q4_1: {
        const slm_block_q4_1 *x = (const slm_block_q4_1 *)row + b;
        *d0 = *d1 = _cvtsh_ss(x->d);
        *m = _cvtsh_ss(x->m);
        return nibbles32(x->qs);
    }
    case SLM_Q4_K:
    case SLM_Q5_K: {
        const int s = b % 8, c = s / 2, h = s % 2;
        const uint8_t *scales, *qs;
        uint16_t dh, dmh;
        const slm_block_q5_K *x5 = (const slm_block_q5_K *)row + b / 8;
        if (T == SLM_Q4_K) {
            const slm_block_q4_K *x4 = (const slm_block_q4_K *)row + b / 8;
            scales = x4->scales, qs = x4->qs, dh = x4->d, dmh = x4->dmin;
        } else {
            scales = x5->scales, qs = x5->qs, dh = x5->d, dmh = x5->dmin;
        }
        uint8_t sc, mn;
        slm_get_scale_min_k4(s, scales, &sc, &mn);
        *d0 = *d1 = _cvtsh_ss(dh) * sc;
        *m = -(_cvtsh_ss(dmh) * mn);
        __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
        v = _mm256_and_si256(_mm256_srli_epi16(v, 4 * h), _mm256_set1_epi8(0x0F));
        if (T == SLM_Q5_K) {
            const __m256i bit = _mm256_set1_epi8((char)(1 << (2 * c + h)));
            __m256i hb = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)x5->qh), bit), bit);
            v = _mm256_or_si256(v, _mm256_and_si256(hb, _mm256_set1_epi8(0x10)));
        }
        return v;
    }
    default: { /* SLM_Q6_K */
        const slm_block_q6_K *x = (const slm_block_q6_K *)row + b / 8;
        const int s = b % 8, H = s / 4, Q = s % 4;
        const float dd = _cvtsh_ss(x->d);
        *d0 = dd * x->scales[2 * s];
        *d1 = dd * x->scales[2 * s + 1];
        __m256i lo = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * H + (Q & 1) * 32));
        __m256i hi = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * H));
        lo = _mm256_and_si256(_mm256_srli_epi16(lo, 4 * (Q >> 1)), _mm256_set1_epi8(0x0F));
        hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hi, 2 * Q), _mm256_set1_epi8(3)), 4);
        return _mm256_sub_epi8(_mm256_or_si256(lo, hi), _mm256_set1_epi8(32));
    }
    }
}

/* Row r's integer dot id with block b (lanes 0-3 and 4-7 the two half
 * blocks) into the row's sums: acc += id [d0 dx | d1 dx], *macc += the min
 * term m (dx * sum of codes) (kind 2). */
AVX2 INLINE void qdecode_block(int T, __m256i id, float d0, float d1, float m, const qscratch *qs, int nb, int b, int r,
                               __m256 *acc, float *macc) {
    const float dx = qs->d[(size_t)r * nb + b];
    const __m256 sc = d0 == d1 ? _mm256_set1_ps(d0 * dx) : _mm256_set_m128(_mm_set1_ps(d1 * dx), _mm_set1_ps(d0 * dx));
    *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(id), sc, *acc);
    if (slm_qtype_kind_c(T) == 2) *macc += m * qs->s[(size_t)r * nb + b];
}

/* Decode: R <= SLM_MM_DECODE_ROWS activation rows (xq with offset 128),
 * every column of the tile; each block is unpacked once for the rows.
 * Per block and row: idot = dpbusd(xq + 128, q) - 128 * sum(q), lanes 0-3
 * the first half block and 4-7 the second; times [d0 dx x4 | d1 dx x4];
 * the min term m * (dx * sum of codes) is accumulated apart. A row's
 * operations do not depend on R (kernels.h: a batch row decodes as alone). */
AVX512 INLINE void qdecode_avx512_t(const slm_mm *mm, int T, const qscratch *qs, const int R) {
    const int nb = mm->k / 32, bb = (int)(mm->wrow / (uint64_t)nb);
    const __m256i c80 = _mm256_set1_epi8((char)0x80);
    for (int j = mm->n0; j < mm->n1; j++) {
        const uint8_t *row = (const uint8_t *)mm->w + (size_t)j * mm->wrow;
        __m256 acc[SLM_MM_DECODE_ROWS];
        float macc[SLM_MM_DECODE_ROWS];
        for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps(), macc[r] = 0.0f;
        for (int b = 0; b < nb; b++) {
            float d0, d1, m = 0.0f;
            stream_prefetch(row + (size_t)b * bb, bb, mm->pf); /* columns are consecutive rows: one stream */
            const __m256i q = qblock(row, T, b, &d0, &d1, &m);
            const __m256i corr = _mm256_dpbusd_epi32(_mm256_setzero_si256(), c80, q);
            for (int r = 0; r < R; r++) {
                const __m256i xv = _mm256_loadu_si256((const __m256i *)(qs->q + (size_t)r * mm->k + 32 * b));
                const __m256i id = _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), xv, q), corr);
                qdecode_block(T, id, d0, d1, m, qs, nb, b, r, &acc[r], &macc[r]);
            }
        }
        for (int r = 0; r < R; r++) mm->y[(size_t)r * mm->ldy + j] = hsum256(acc[r]) + macc[r];
    }
}

/* AVX2 decode: as above with the sign trick (|q| unsigned times x with q's
 * sign, maddubs then madd) on signed activation codes. */
AVX2 INLINE void qdecode_avx2_t(const slm_mm *mm, int T, const qscratch *qs, const int R) {
    const int nb = mm->k / 32, bb = (int)(mm->wrow / (uint64_t)nb);
    const __m256i ones = _mm256_set1_epi16(1);
    for (int j = mm->n0; j < mm->n1; j++) {
        const uint8_t *row = (const uint8_t *)mm->w + (size_t)j * mm->wrow;
        __m256 acc[SLM_MM_DECODE_ROWS];
        float macc[SLM_MM_DECODE_ROWS];
        for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps(), macc[r] = 0.0f;
        for (int b = 0; b < nb; b++) {
            float d0, d1, m = 0.0f;
            stream_prefetch(row + (size_t)b * bb, bb, mm->pf); /* columns are consecutive rows: one stream */
            const __m256i q = qblock(row, T, b, &d0, &d1, &m), aq = _mm256_abs_epi8(q);
            for (int r = 0; r < R; r++) {
                const __m256i xv = _mm256_loadu_si256((const __m256i *)(qs->q + (size_t)r * mm->k + 32 * b));
                const __m256i id = _mm256_madd_epi16(_mm256_maddubs_epi16(aq, _mm256_sign_epi8(xv, q)), ones);
                qdecode_block(T, id, d0, d1, m, qs, nb, b, r, &acc[r], &macc[r]);
            }
        }
        for (int r = 0; r < R; r++) mm->y[(size_t)r * mm->ldy + j] = hsum256(acc[r]) + macc[r];
    }
}

/* ---- int8 micro-kernels over a packed panel --------------------------------
 * R rows x NC columns; KIND 0: one scale per block, 1: two half scales,
 * 2: one scale and a min term. Activation codes: AVX-512 unsigned (+128,
 * corrected by the panel's corr), AVX2 signed. */
AVX512 INLINE void mk_avx512(const qscratch *qs, int k, int i0, const uint8_t *panel, float *y, size_t ldy,
                             __mmask16 cm, const int R, const int KIND) {
    const int nb = k / 32;
    const size_t PB = SLM_PANEL_BLOCK_BYTES(16);
    __m512 acc[8];
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    const uint8_t *xq = qs->q + (size_t)i0 * k;
    const float *xd = qs->d + (size_t)i0 * nb, *xs = qs->s + (size_t)i0 * nb;
    for (int b = 0; b < nb; b++) {
        const uint8_t *p = panel + (size_t)b * PB;
        __m512i ia[8], ib[8];
        const __m512i c0 = _mm512_load_si512(p + 512), c1 = _mm512_load_si512(p + 576);
        if (KIND == 1) {
            for (int r = 0; r < R; r++) ia[r] = c0, ib[r] = c1;
        } else {
            const __m512i c = _mm512_add_epi32(c0, c1);
            for (int r = 0; r < R; r++) ia[r] = c;
        }
        for (int g = 0; g < 4; g++) {
            const __m512i w = _mm512_load_si512(p + 64 * g);
            for (int r = 0; r < R; r++)
                ia[r] = _mm512_dpbusd_epi32(ia[r], _mm512_set1_epi32(ld32(xq + (size_t)r * k + 32 * b + 4 * g)), w);
        }
        for (int g = 4; g < 8; g++) {
            const __m512i w = _mm512_load_si512(p + 64 * g);
            for (int r = 0; r < R; r++) {
                const __m512i xv = _mm512_set1_epi32(ld32(xq + (size_t)r * k + 32 * b + 4 * g));
                if (KIND == 1) ib[r] = _mm512_dpbusd_epi32(ib[r], xv, w);
                else ia[r] = _mm512_dpbusd_epi32(ia[r], xv, w);
            }
        }
        const __m512 d0 = _mm512_load_ps(p + 640);
        if (KIND == 1) {
            const __m512 d1 = _mm512_load_ps(p + 704);
            for (int r = 0; r < R; r++) {
                __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ib[r]), d1, _mm512_mul_ps(_mm512_cvtepi32_ps(ia[r]), d0));
                acc[r] = _mm512_fmadd_ps(f, _mm512_set1_ps(xd[(size_t)r * nb + b]), acc[r]);
            }
        } else {
            /* d0 dx first: MXFP4's scales reach 2^127, where idot d0 would overflow */
            for (int r = 0; r < R; r++)
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[r]), _mm512_mul_ps(d0, _mm512_set1_ps(xd[(size_t)r * nb + b])),
                                         acc[r]);
            if (KIND == 2) {
                const __m512 m = _mm512_load_ps(p + 768);
                for (int r = 0; r < R; r++) acc[r] = _mm512_fmadd_ps(m, _mm512_set1_ps(xs[(size_t)r * nb + b]), acc[r]);
            }
        }
    }
    for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(y + (size_t)r * ldy, cm, acc[r]);
}

#define MK_AVX512(R, K)                                                                                   \
    AVX512 static void mk_avx512_##R##_##K(const qscratch *qs, int k, int i0, const uint8_t *panel, float *y, \
                                           size_t ldy, int nc) {                                          \
        mk_avx512(qs, k, i0, panel, y, ldy, (__mmask16)((1u << nc) - 1), R, K);                           \
    }
#define MK_AVX512_ALL(K) MK_AVX512(1, K) MK_AVX512(2, K) MK_AVX512(3, K) MK_AVX512(4, K) \
    MK_AVX512(5, K) MK_AVX512(6, K) MK_AVX512(7, K) MK_AVX512(8, K)
MK_AVX512_ALL(0)
MK_AVX512_ALL(1)
MK_AVX512_ALL(2)

/* A micro-kernel of either set: R rows x the first nc columns of the panel. */
typedef void (*mk_fn)(const qscratch *, int k, int i0, const uint8_t *panel, float *y, size_t ldy, int nc);
static const mk_fn k_mk512[3][8] = {
    {mk_avx512_1_0, mk_avx512_2_0, mk_avx512_3_0, mk_avx512_4_0, mk_avx512_5_0, mk_avx512_6_0, mk_avx512_7_0, mk_avx512_8_0},
    {mk_avx512_1_1, mk_avx512_2_1, mk_avx512_3_1, mk_avx512_4_1, mk_avx512_5_1, mk_avx512_6_1, mk_avx512_7_1, mk_avx512_8_1},
    {mk_avx512_1_2, mk_avx512_2_2, mk_avx512_3_2, mk_avx512_4_2, mk_avx512_5_2, mk_avx512_6_2, mk_avx512_7_2, mk_avx512_8_2},
};

AVX2 INLINE void mk_avx2(const qscratch *qs, int k, int i0, const uint8_t *panel, float *y, size_t ldy, int nc,
                         const int R, const int KIND) {
    const int nb = k / 32;
    const size_t PB = SLM_PANEL_BLOCK_BYTES(8);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[4];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    const uint8_t *xq = qs->q + (size_t)i0 * k;
    const float *xd = qs->d + (size_t)i0 * nb, *xs = qs->s + (size_t)i0 * nb;
    for (int b = 0; b < nb; b++) {
        const uint8_t *p = panel + (size_t)b * PB;
        __m256i ia[4], ib[4];
        for (int r = 0; r < R; r++) ia[r] = ib[r] = _mm256_setzero_si256();
        for (int g = 0; g < 8; g++) {
            const __m256i w = _mm256_load_si256((const __m256i *)(p + 32 * g)), aw = _mm256_abs_epi8(w);
            for (int r = 0; r < R; r++) {
                const __m256i xv = _mm256_set1_epi32(ld32(xq + (size_t)r * k + 32 * b + 4 * g));
                const __m256i t = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(xv, w)), ones);
                if (KIND == 1 && g >= 4) ib[r] = _mm256_add_epi32(ib[r], t);
                else ia[r] = _mm256_add_epi32(ia[r], t);
            }
        }
        const __m256 d0 = _mm256_load_ps((const float *)(p + 320));
        for (int r = 0; r < R; r++) {
            if (KIND == 1) {
                __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(ia[r]), d0);
                f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ib[r]), _mm256_load_ps((const float *)(p + 352)), f);
                acc[r] = _mm256_fmadd_ps(f, _mm256_set1_ps(xd[(size_t)r * nb + b]), acc[r]);
            } else { /* d0 dx first: MXFP4's scales reach 2^127, where idot d0 would overflow */
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[r]), _mm256_mul_ps(d0, _mm256_set1_ps(xd[(size_t)r * nb + b])), acc[r]);
            }
            if (KIND == 2)
                acc[r] = _mm256_fmadd_ps(_mm256_load_ps((const float *)(p + 384)), _mm256_set1_ps(xs[(size_t)r * nb + b]),
                                         acc[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        float t[8];
        _mm256_storeu_ps(t, acc[r]);
        memcpy(y + (size_t)r * ldy, t, (size_t)nc * sizeof(float));
    }
}

#define MK_AVX2(R, K)                                                                                              \
    AVX2 static void mk_avx2_##R##_##K(const qscratch *qs, int k, int i0, const uint8_t *panel, float *y, size_t ldy, \
                                       int nc) {                                                                    \
        mk_avx2(qs, k, i0, panel, y, ldy, nc, R, K);                                                                \
    }
#define MK_AVX2_ALL(K) MK_AVX2(1, K) MK_AVX2(2, K) MK_AVX2(3, K) MK_AVX2(4, K)
MK_AVX2_ALL(0)
MK_AVX2_ALL(1)
MK_AVX2_ALL(2)

static const mk_fn k_mk2[3][4] = {
    {mk_avx2_1_0, mk_avx2_2_0, mk_avx2_3_0, mk_avx2_4_0},
    {mk_avx2_1_1, mk_avx2_2_1, mk_avx2_3_1, mk_avx2_4_1},
    {mk_avx2_1_2, mk_avx2_2_2, mk_avx2_3_2, mk_avx2_4_2},
};

/* Rows 1..SLM_MM_DECODE_ROWS as constants (registers), per weight type. */
_Static_assert(SLM_MM_DECODE_ROWS == 4, "qdecode's row cases");
#define QDECODE(ISA, T)                                            \
    switch (mm->rows) {                                            \
    case 1: qdecode_##ISA##_t(mm, T, qs, 1); break;                \
    case 2: qdecode_##ISA##_t(mm, T, qs, 2); break;                \
    case 3: qdecode_##ISA##_t(mm, T, qs, 3); break;                \
    default: qdecode_##ISA##_t(mm, T, qs, 4); break;               \
    }
AVX512 static void qdecode_avx512(const slm_mm *mm, const qscratch *qs) {
    switch (mm->wtype) {
    case SLM_Q8_0: QDECODE(avx512, SLM_Q8_0); break;
    case SLM_Q4_0: QDECODE(avx512, SLM_Q4_0); break;
    case SLM_Q4_1: QDECODE(avx512, SLM_Q4_1); break;
    case SLM_Q4_K: QDECODE(avx512, SLM_Q4_K); break;
    case SLM_Q5_K: QDECODE(avx512, SLM_Q5_K); break;
    default: QDECODE(avx512, SLM_Q6_K); break;
    }
}

AVX2 static void qdecode_avx2(const slm_mm *mm, const qscratch *qs) {
    switch (mm->wtype) {
    case SLM_Q8_0: QDECODE(avx2, SLM_Q8_0); break;
    case SLM_Q4_0: QDECODE(avx2, SLM_Q4_0); break;
    case SLM_Q4_1: QDECODE(avx2, SLM_Q4_1); break;
    case SLM_Q4_K: QDECODE(avx2, SLM_Q4_K); break;
    case SLM_Q5_K: QDECODE(avx2, SLM_Q5_K); break;
    default: QDECODE(avx2, SLM_Q6_K); break;
    }
}

/* The panel writer: SIMD for the quant2 types (kinds 0-2), the scalar one for
 * the file-layout types (rare: the compiler repacks their matrices whose row
 * count is a multiple of 16). */
static void pack(uint32_t t, const uint8_t *w, uint64_t wrow, int c0, int valid, int nc, int nb, uint8_t *panel) {
    const int kind = slm_quant2_kind(t);
    if (kind >= 0 && kind <= 2) slm_x86_quant2_pack_panel(t, w, wrow, c0, valid, nc, nb, panel);
    else slm_pack_panel(t, w, wrow, c0, valid, nc, nb, panel);
}

/* Prefill: panels of `cols` columns, each packed once, against rows in
 * blocks of `rows` (mk[rows - 1] the largest micro-kernel). */
static void qprefill(const slm_mm *mm, const qscratch *qs, int cols, int rows, const mk_fn *mk) {
    const int nb = mm->k / 32;
    for (int j0 = mm->n0; j0 < mm->n1; j0 += cols) {
        const int nc = mm->n1 - j0 < cols ? mm->n1 - j0 : cols;
        pack(mm->wtype, mm->w, mm->wrow, j0, nc, cols, nb, qs->panel);
        for (int i0 = 0; i0 < mm->rows; i0 += rows) {
            const int nr = mm->rows - i0 < rows ? mm->rows - i0 : rows;
            mk[nr - 1](qs, mm->k, i0, qs->panel, mm->y + (size_t)i0 * mm->ldy + j0, mm->ldy, nc);
        }
    }
}

AVX512 void slm_x86_qmatmul_avx512(const slm_mm *mm, const qscratch *qs) {
    if (mm->rows <= SLM_MM_DECODE_ROWS) qdecode_avx512(mm, qs);
    else qprefill(mm, qs, 16, 8, k_mk512[slm_qtype_kind(mm->wtype)]);
}

AVX2 void slm_x86_qmatmul_avx2(const slm_mm *mm, const qscratch *qs) {
    if (mm->rows <= SLM_MM_DECODE_ROWS) qdecode_avx2(mm, qs);
    else qprefill(mm, qs, 8, 4, k_mk2[slm_qtype_kind(mm->wtype)]);
}
/* The AVX-512 VNNI int8 peak on one core (kernels.h): 12 independent
 * chains of vpdpbusd (latency 5 at up to 2 a cycle needs 10), in named
 * registers so nothing spills, for about `seconds`; the best of runs of
 * >= 10 ms. */
static double vnni_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

AVX512 static double vnni_run(long reps) {
    __m512i a0 = _mm512_set1_epi32(0), a1 = _mm512_set1_epi32(1), a2 = _mm512_set1_epi32(2), a3 = _mm512_set1_epi32(3);
    __m512i a4 = _mm512_set1_epi32(4), a5 = _mm512_set1_epi32(5), a6 = _mm512_set1_epi32(6), a7 = _mm512_set1_epi32(7);
    __m512i a8 = _mm512_set1_epi32(8), a9 = _mm512_set1_epi32(9), a10 = _mm512_set1_epi32(10), a11 = _mm512_set1_epi32(11);
    __m512i w = _mm512_set1_epi8(3), x = _mm512_set1_epi8(5);
    const double t0 = vnni_now();
    for (long i = 0; i < reps; i++) {
        a0 = _mm512_dpbusd_epi32(a0, w, x); a1 = _mm512_dpbusd_epi32(a1, w, x); a2 = _mm512_dpbusd_epi32(a2, w, x);
        a3 = _mm512_dpbusd_epi32(a3, w, x); a4 = _mm512_dpbusd_epi32(a4, w, x); a5 = _mm512_dpbusd_epi32(a5, w, x);
        a6 = _mm512_dpbusd_epi32(a6, w, x); a7 = _mm512_dpbusd_epi32(a7, w, x); a8 = _mm512_dpbusd_epi32(a8, w, x);
        a9 = _mm512_dpbusd_epi32(a9, w, x); a10 = _mm512_dpbusd_epi32(a10, w, x); a11 = _mm512_dpbusd_epi32(a11, w, x);
        __asm__ volatile("" : "+v"(w), "+v"(x)); /* the operands stay opaque: no loop folding */
    }
    const double dt = vnni_now() - t0;
    __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
                                 _mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(a6, a7)));
    s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(a8, a9), _mm512_add_epi32(a10, a11)));
    __asm__ volatile("" : : "v"(s)); /* the chains' results are used (they wrap: no value matters) */
    return dt > 0 ? (double)reps * 12.0 * 64.0 * 2.0 / dt : 0;
}

double slm_vnni_int8_peak(double seconds) {
    const slm_cpu *c = slm_cpu_features();
    if (!(c->avx512f && c->avx512bw && c->avx512vl && c->avx512vnni)) return 0;
    long reps = 1000;
    double best = 0;
    const double end = vnni_now() + seconds;
    do {
        const double t0 = vnni_now(), r = vnni_run(reps);
        if (vnni_now() - t0 < 0.01) reps *= 2; /* too short to count */
        else if (r > best) best = r;
    } while (vnni_now() < end || best == 0);
    return best;
}
#else
double slm_vnni_int8_peak(double seconds) {
    (void)seconds;
    return 0;
}
#endif
