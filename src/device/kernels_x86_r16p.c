/* AVX-512 prefill (rows >= 16) of the repacked quantized weights (every r16
 * type but F16_R16; layouts in common/layout_r16.c).
 *
 * A column step of G <= 3 groups (16 G columns) is unpacked once into the
 * scratch's panel (SLM_R16P_BLOCK_BYTES a group and block: the 8 unsigned
 * code vectors dpbusd takes, and the columns' float scales: r16.c and r16k.c
 * write it); then every block of R rows reads it. Per block of 32 elements
 * and vector v (elements 4v..4v+3 of a group's 16 columns), each row's 4
 * activation codes are broadcast once and meet the G code vectors, so a
 * block of rows loads G + R vectors per G R dot products (one group: 1 + R
 * per R) and G R integer chains cover dpbusd's latency.
 *
 * Four kinds of block sum:
 *  0 Q4_0, Q5_0, IQ4_NL, IQ4_XS, Q8_0, MXFP4: one accumulator per row and group, started
 *    at -offset * (the block's activation code sum), scaled by d * dx;
 *  1 Q6_K, Q3_K: one per half block (scales per 16), each started at -32
 *    (Q3_K: -4) * the half's sum: (d0 * i0 + d1 * i1) * dx;
 *  2 Q4_K, Q5_K (Q4_1, Q5_1: d, -m): one, no offset: (d sc) * dx * idot - (dmin mn) * (dx sum);
 *  3 Q2_K: one per half block, no offset, a min per half (the panel block
 *    is SLM_R16P_BLOCK2_BYTES: scales and mins of both halves):
 *    (d0 * i0 + d1 * i1 - m0 * hs0 - m1 * hs1) * dx.
 * The starts are computed once per call for all rows (ofs, after the
 * panel: SLM_R16_OFS_BYTES) and broadcast from memory. The float steps are
 * those of the per-group kernels (r16_mk_avx512, r16k_mk_avx512) in the same
 * order, so both give the same bits. One core of a Xeon (Sapphire Rapids,
 * KVM), 512 x 2048 x 2048 Q4_0: ~310 -> ~420 GOP/s against the one-group
 * kernel with its starts made per block (docs/benchmarks.md). */
#include "device/kernels_x86.h"

#ifdef SLM_X86
AVX512 INLINE void r16p_mk(const slm_mm *mm, const qscratch *qs, const int32_t *ofs, const uint8_t *pan, int i0,
                           int j0, const __mmask16 *cm, const int R, const int G, const int KIND) {
    const int k = mm->k, nb = k / 32, NO = KIND == 1 ? 2 : 1, HALF = KIND == 1 || KIND == 3;
    const size_t PB = KIND == 3 ? SLM_R16P_BLOCK2_BYTES : SLM_R16P_BLOCK_BYTES;
    const uint8_t *xq = qs->q + (size_t)i0 * k;
    const float *xd = qs->d + (size_t)i0 * nb, *xs = qs->s + (size_t)i0 * nb;
    const int32_t *os = ofs ? ofs + (size_t)i0 * NO * nb : NULL, *hs = qs->hs + (size_t)i0 * 2 * nb;
    __m512 acc[3][6];
    for (int g = 0; g < G; g++)
        for (int r = 0; r < R; r++) acc[g][r] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m512i ia[3][6], ib[3][6];
        for (int r = 0; r < R; r++) {
            const __m512i o0 = KIND >= 2 ? _mm512_setzero_si512() : _mm512_set1_epi32(os[(size_t)r * NO * nb + NO * b]);
            const __m512i o1 = KIND == 1 ? _mm512_set1_epi32(os[(size_t)r * NO * nb + NO * b + 1]) : o0;
            for (int g = 0; g < G; g++) {
                ia[g][r] = o0;
                if (HALF) ib[g][r] = o1;
            }
        }
        for (int v = 0; v < 8; v++) {
            __m512i w[3];
            for (int g = 0; g < G; g++)
                w[g] = _mm512_load_si512(pan + ((size_t)g * nb + b) * PB + 64 * v);
            for (int r = 0; r < R; r++) {
                const __m512i xv = _mm512_set1_epi32(ld32(xq + (size_t)r * k + 32 * b + 4 * v));
                for (int g = 0; g < G; g++) {
                    if (HALF && v >= 4) ib[g][r] = _mm512_dpbusd_epi32(ib[g][r], w[g], xv);
                    else ia[g][r] = _mm512_dpbusd_epi32(ia[g][r], w[g], xv);
                }
            }
        }
        for (int g = 0; g < G; g++) {
            const float *pd = (const float *)(pan + ((size_t)g * nb + b) * PB + 512);
            const __m512 d0 = _mm512_load_ps(pd);
            const __m512 d1 = KIND ? _mm512_load_ps(pd + 16) : d0;
            for (int r = 0; r < R; r++) {
                const __m512 dx = _mm512_set1_ps(xd[(size_t)r * nb + b]);
                if (KIND == 3) { /* the float steps of r16_mk_avx512's Q2_K */
                    __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ib[g][r]), d1,
                                               _mm512_mul_ps(_mm512_cvtepi32_ps(ia[g][r]), d0));
                    f = _mm512_fnmadd_ps(_mm512_load_ps(pd + 32), _mm512_set1_ps((float)hs[(size_t)r * 2 * nb + 2 * b]), f);
                    f = _mm512_fnmadd_ps(_mm512_load_ps(pd + 48), _mm512_set1_ps((float)hs[(size_t)r * 2 * nb + 2 * b + 1]), f);
                    acc[g][r] = _mm512_fmadd_ps(f, dx, acc[g][r]);
                } else if (KIND == 1) {
                    const __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ib[g][r]), d1,
                                                     _mm512_mul_ps(_mm512_cvtepi32_ps(ia[g][r]), d0));
                    acc[g][r] = _mm512_fmadd_ps(f, dx, acc[g][r]);
                } else {
                    acc[g][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[g][r]), _mm512_mul_ps(d0, dx), acc[g][r]);
                    if (KIND == 2) acc[g][r] = _mm512_fnmadd_ps(d1, _mm512_set1_ps(xs[(size_t)r * nb + b]), acc[g][r]);
                }
            }
        }
    }
    for (int r = 0; r < R; r++) {
        float *y = mm->y + (size_t)(i0 + r) * mm->ldy + j0;
        for (int g = 0; g < G; g++) _mm512_mask_storeu_ps(y + 16 * g, cm[g], acc[g][r]);
    }
}

typedef void (*r16p_fn)(const slm_mm *, const qscratch *, const int32_t *, const uint8_t *, int, int, const __mmask16 *);
#define R16P_MK(R, G, KIND)                                                                                      \
    AVX512 static void r16p_mk_##R##_##G##_##KIND(const slm_mm *mm, const qscratch *qs, const int32_t *ofs,      \
                                                  const uint8_t *pan, int i0, int j0, const __mmask16 *cm) {    \
        r16p_mk(mm, qs, ofs, pan, i0, j0, cm, R, G, KIND);                                                       \
    }
/* rows per block for G groups: 4 x 3 and 6 x 2 and 6 x 1 groups (kinds 0 and
   2: at most 12 integer and 12 float accumulators), 4 x 2 and 4 x 1 (Q6_K:
   two integer accumulators a row and group) */
#define R16P_ROWS(G, KIND) R16P_MK(1, G, KIND) R16P_MK(2, G, KIND) R16P_MK(3, G, KIND) R16P_MK(4, G, KIND)
#define R16P_ROWS6(G, KIND) R16P_ROWS(G, KIND) R16P_MK(5, G, KIND) R16P_MK(6, G, KIND)
R16P_ROWS6(1, 0) R16P_ROWS6(2, 0) R16P_ROWS(3, 0)
R16P_ROWS(1, 1) R16P_ROWS(2, 1)
R16P_ROWS6(1, 2) R16P_ROWS6(2, 2) R16P_ROWS(3, 2)
R16P_ROWS(1, 3) R16P_ROWS(2, 3)
#define R16P_T4(G, KIND) {r16p_mk_1_##G##_##KIND, r16p_mk_2_##G##_##KIND, r16p_mk_3_##G##_##KIND, r16p_mk_4_##G##_##KIND, NULL, NULL}
#define R16P_T6(G, KIND) {r16p_mk_1_##G##_##KIND, r16p_mk_2_##G##_##KIND, r16p_mk_3_##G##_##KIND, r16p_mk_4_##G##_##KIND, \
                          r16p_mk_5_##G##_##KIND, r16p_mk_6_##G##_##KIND}
static const r16p_fn k_r16p[4][3][6] = {
    {R16P_T6(1, 0), R16P_T6(2, 0), R16P_T4(3, 0)},
    {R16P_T4(1, 1), R16P_T4(2, 1), {NULL}},
    {R16P_T6(1, 2), R16P_T6(2, 2), R16P_T4(3, 2)},
    {R16P_T4(1, 3), R16P_T4(2, 3), {NULL}},
};
static const int k_r16p_gmax[4] = {3, 2, 3, 2};
static const int k_r16p_rows[4][3] = {{6, 6, 4}, {4, 4, 0}, {6, 6, 4}, {4, 4, 0}};

AVX512 void slm_x86_r16p_matmul_avx512(const slm_mm *mm, const qscratch *qs) {
    const uint32_t t = mm->wtype;
    const int kq = t == SLM_Q4_K_R16 || t == SLM_Q5_K_R16; /* the panel written by kernels_x86_r16k.c */
    const int kind = kq || t == SLM_Q4_1_R16 || t == SLM_Q5_1_R16 ? 2 : t == SLM_Q6_K_R16 || t == SLM_Q3_K_R16 ? 1
                   : t == SLM_Q2_K_R16 ? 3 : 0;
    const int nb = mm->k / 32, rows = mm->rows;
    uint8_t *pan = qs->panel;
    int32_t *ofs = NULL;
    if (kind < 2) { /* the accumulators' starts: -offset * the activation codes' sums */
        ofs = (int32_t *)(((uintptr_t)(pan + SLM_AMX_PANEL_BYTES(nb)) + 63) & ~(uintptr_t)63);
        const int off = t == SLM_Q8_0_R16 || t == SLM_IQ4_NL_R16 || t == SLM_IQ4_XS_R16 ? -128 : t == SLM_Q3_K_R16 ? -4 : kind == 1 ? -32
                      : t == SLM_Q5_0_R16 ? -16 : t == SLM_MXFP4_R16 ? -12 : -8;
        const size_t n = (size_t)rows * nb;
        const __m512i vo = _mm512_set1_epi32(off);
        size_t i = 0;
        if (kind == 1) { /* both halves: hs as it is */
            for (; i + 16 <= 2 * n; i += 16)
                _mm512_storeu_si512(ofs + i, _mm512_mullo_epi32(_mm512_loadu_si512(qs->hs + i), vo));
            for (; i < 2 * n; i++) ofs[i] = off * qs->hs[i];
        } else { /* the two halves' sums added */
            const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
            const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));
            for (; i + 16 <= n; i += 16) {
                const __m512i a = _mm512_loadu_si512(qs->hs + 2 * i), c = _mm512_loadu_si512(qs->hs + 2 * i + 16);
                const __m512i sum = _mm512_add_epi32(_mm512_permutex2var_epi32(a, ev, c), _mm512_permutex2var_epi32(a, od, c));
                _mm512_storeu_si512(ofs + i, _mm512_mullo_epi32(sum, vo));
            }
            for (; i < n; i++) ofs[i] = off * (qs->hs[2 * i] + qs->hs[2 * i + 1]);
        }
    }
    for (int g0 = mm->n0 & ~15; g0 < mm->n1;) {
        const int left = (mm->n1 - g0 + 15) / 16;
        const int G = left < k_r16p_gmax[kind] ? left : k_r16p_gmax[kind], rb = k_r16p_rows[kind][G - 1];
        __mmask16 cm[3];
        for (int g = 0; g < G; g++) {
            const int c0 = g0 + 16 * g;
            const int a = mm->n0 > c0 ? mm->n0 - c0 : 0, e = mm->n1 - c0 < 16 ? mm->n1 - c0 : 16;
            cm[g] = (__mmask16)(((1u << e) - 1) & ~((1u << a) - 1));
            uint8_t *pg = pan + (size_t)g * nb * (kind == 3 ? SLM_R16P_BLOCK2_BYTES : SLM_R16P_BLOCK_BYTES);
            if (kq) slm_x86_r16kp_unpack_avx512(mm, c0, pg);
            else slm_x86_r16p_unpack_avx512(mm, c0, pg);
        }
        for (int i0 = 0; i0 < rows; i0 += rb) {
            const int nr = rows - i0 < rb ? rows - i0 : rb;
            k_r16p[kind][G - 1][nr - 1](mm, qs, ofs, pan, i0, g0, cm);
        }
        g0 += 16 * G;
    }
}

/* ---- AVX2: the same panel, maddubs ---------------------------------------------
 * Unsigned codes only (Q4_0, Q5_0, Q6_K, Q4_K, Q5_K, MXFP4: below 64, so u8 x s8
 * pairs stay far from int16 saturation; Q8_0 has its own panel below, IQ4_NL
 * keeps kernels_x86_r16.c).
 * A block of R rows x one group (two 8-column halves): per vector v each row's
 * 4 activation codes are broadcast once and meet both halves; GS products
 * add in 16 bits before one madd (GS * 2 * (2^c - 1) * 128 < 2^15: 8 for
 * 4-bit codes, 4 for 5-bit, 2 for 6-bit), as r16_mk_avx2 and r16k_mk_avx2 do,
 * with the same float steps in the same order: the same bits. Against those
 * kernels (the codes unpacked per block of 4 rows and half, their state
 * spilled) this loads 2 + R vectors per 2 R maddubs and keeps the integer
 * sums in registers. */
AVX2 INLINE void r16p_mk_avx2(const slm_mm *mm, const qscratch *qs, const int32_t *ofs, const uint8_t *pan, int i0,
                              int j0, const int *ha, const int *he, const int R, const int KIND, const int GS) {
    const int k = mm->k, nb = k / 32, NO = KIND == 1 ? 2 : 1;
    const uint8_t *xq = qs->q + (size_t)i0 * k;
    const float *xd = qs->d + (size_t)i0 * nb, *xs = qs->s + (size_t)i0 * nb;
    const int32_t *os = ofs ? ofs + (size_t)i0 * NO * nb : NULL;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[3][2];
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *pb = pan + (size_t)b * SLM_R16P_BLOCK_BYTES;
        const float *pd = (const float *)(pb + 512);
        __m256i ia[3][2], s16[3][2];
        for (int r = 0; r < R; r++) ia[r][0] = ia[r][1] = s16[r][0] = s16[r][1] = _mm256_setzero_si256(); /* set at v = 0 */
#pragma GCC unroll 8
        for (int v = 0; v < 8; v++) {
            const __m256i w0 = _mm256_load_si256((const __m256i *)(pb + 64 * v));
            const __m256i w1 = _mm256_load_si256((const __m256i *)(pb + 64 * v + 32));
            const int first = v % GS == GS - 1 && (v == GS - 1 || (KIND == 1 && v == 4 + GS - 1));
#pragma GCC unroll 3
            for (int r = 0; r < R; r++) {
                const __m256i xv = _mm256_set1_epi32(ld32(xq + (size_t)r * k + 32 * b + 4 * v));
                const __m256i p0 = _mm256_maddubs_epi16(w0, xv), p1 = _mm256_maddubs_epi16(w1, xv);
                s16[r][0] = v % GS ? _mm256_add_epi16(s16[r][0], p0) : p0;
                s16[r][1] = v % GS ? _mm256_add_epi16(s16[r][1], p1) : p1;
                /* a chain, not a tree: GCC reassociates integer sums into a tree
                   that keeps all 8 products of a block live (spilled) */
                __asm__("" : "+x"(s16[r][0]), "+x"(s16[r][1]));
                if (v % GS == GS - 1) {
                    const __m256i m0 = _mm256_madd_epi16(s16[r][0], ones), m1 = _mm256_madd_epi16(s16[r][1], ones);
                    if (first) {
                        const __m256i st = KIND == 2 ? _mm256_setzero_si256()
                                                     : _mm256_set1_epi32(os[(size_t)r * NO * nb + NO * b + (KIND == 1 && v >= 4)]);
                        ia[r][0] = _mm256_add_epi32(st, m0);
                        ia[r][1] = _mm256_add_epi32(st, m1);
                    } else {
                        ia[r][0] = _mm256_add_epi32(ia[r][0], m0);
                        ia[r][1] = _mm256_add_epi32(ia[r][1], m1);
                    }
                }
            }
            if (KIND == 1 && v == 3) /* Q6_K: the first half block's own scales */
                for (int r = 0; r < R; r++) {
                    const __m256 dx = _mm256_set1_ps(xd[(size_t)r * nb + b]);
                    for (int h = 0; h < 2; h++)
                        acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[r][h]), _mm256_mul_ps(_mm256_load_ps(pd + 8 * h), dx), acc[r][h]);
                }
        }
        const float *pl = KIND == 1 ? pd + 16 : pd;
        for (int r = 0; r < R; r++) {
            const __m256 dx = _mm256_set1_ps(xd[(size_t)r * nb + b]);
            for (int h = 0; h < 2; h++) {
                acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[r][h]), _mm256_mul_ps(_mm256_load_ps(pl + 8 * h), dx), acc[r][h]);
                if (KIND == 2)
                    acc[r][h] = _mm256_fnmadd_ps(_mm256_load_ps(pd + 16 + 8 * h), _mm256_set1_ps(xs[(size_t)r * nb + b]), acc[r][h]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int h = 0; h < 2; h++) {
            float *y = mm->y + (size_t)(i0 + r) * mm->ldy + j0 + 8 * h;
            if (ha[h] == 0 && he[h] == 8) {
                _mm256_storeu_ps(y, acc[r][h]);
            } else {
                float t[8];
                _mm256_storeu_ps(t, acc[r][h]);
                for (int c = ha[h]; c < he[h]; c++) y[c] = t[c];
            }
        }
}

/* ---- AVX2: Q8_0's panel, |w| and the sign mask ---------------------------------
 * Q8_0's codes are signed (-128..127): as unsigned codes plus 128 a maddubs
 * pair would reach 2 * 255 * 127 and saturate. The panel (SLM_R16P_Q8_BYTES a
 * block, written a group at a time by r16p_q8_unpack_avx2) holds per code
 * vector |w| (|-128| = 128, unsigned) and the mask m of w < 0 (0xFF bytes),
 * then the 16 columns' float scales and the integer sums c = sum over the
 * block of |w| where w < 0. A row's activation codes x (-127..127,
 * slm_x86_quant_act_avx2) meet |w| as x ^ m: x where w >= 0, ~x = -x - 1
 * where w < 0, so |w| (x ^ m) = w x - |w| [w < 0] and the block's
 * sum w . x = c + sum of maddubs(|w|, x ^ m): one xor in place of the sign
 * trick's _mm256_sign_epi8(x, w), which measured slower (Zen 3, one core:
 * ~103 against ~126 GOP/s). Bounds: x ^ m is an int8 (~x = -x - 1 holds for
 * every x, -128 included, unlike a negation), so a maddubs pair is in
 * [-2 * 128 * 128, 2 * 128 * 127] = [-32768, 32512]: int16, exact (-32768 for
 * x = 127 against w = -128). No 16-bit chain (two pairs could reach -65536): every product is made
 * 32-bit by one madd with ones and the block's 8 vectors add in 32 bits,
 * |sum| <= 32 * 128 * 128 + c <= 2^20 per column and block. A block of R rows x
 * NH halves from half h0: per vector v each row's 4 activation codes are
 * broadcast once for the NH halves. The integer sums are the exact w . x of
 * r16_mk_avx2 (Q8_0: signed, no offset), the float step the same (acc +=
 * float(sum) * (d * dx)): the same bits. */
#define SLM_R16P_Q8_BYTES 1152 /* 512 |w|, 512 m, 16 floats d, 16 int32 c */
AVX2 INLINE void r16p_q8_mk_avx2(const slm_mm *mm, const qscratch *qs, const uint8_t *pan, int i0, int j0, int h0,
                                 const int *ha, const int *he, const int R, const int NH) {
    const int k = mm->k, nb = k / 32;
    const uint8_t *xq = qs->q + (size_t)i0 * k;
    const float *xd = qs->d + (size_t)i0 * nb;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[4][2];
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *pb = pan + (size_t)b * SLM_R16P_Q8_BYTES + 32 * h0;
        __m256i ia[4][2];
#pragma GCC unroll 8
        for (int v = 0; v < 8; v++) {
            __m256i aw[2];
            for (int h = 0; h < NH; h++) aw[h] = _mm256_load_si256((const __m256i *)(pb + 64 * v + 32 * h));
            for (int r = 0; r < R; r++) {
                const __m256i xv = _mm256_set1_epi32(ld32(xq + (size_t)r * k + 32 * b + 4 * v));
                for (int h = 0; h < NH; h++) {
                    const __m256i sm = _mm256_load_si256((const __m256i *)(pb + 512 + 64 * v + 32 * h));
                    const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw[h], _mm256_xor_si256(xv, sm)), ones);
                    ia[r][h] = _mm256_add_epi32(v ? ia[r][h] : _mm256_load_si256((const __m256i *)(pb + 1088 + 32 * h)), p);
                    __asm__("" : "+x"(ia[r][h])); /* a chain, not a tree (r16p_mk_avx2) */
                }
            }
        }
        const float *pd = (const float *)(pb + 1024);
        for (int r = 0; r < R; r++) {
            const __m256 dx = _mm256_set1_ps(xd[(size_t)r * nb + b]);
            for (int h = 0; h < NH; h++)
                acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[r][h]), _mm256_mul_ps(_mm256_load_ps(pd + 8 * h), dx), acc[r][h]);
        }
    }
    r16_store_avx2(mm, acc, i0, j0, h0, ha, he, R, NH);
}

/* The Q8_0 panel of the group at j0 from Q8_0_R16 (codes plus 128, f16
 * scales): |w|, m, the scales as floats (as r16_mk_avx2 makes them) and c. */
AVX2 static void r16p_q8_unpack_avx2(const slm_mm *mm, int j0, uint8_t *pan) {
    const int nb = mm->k / 32;
    const uint8_t *grp = (const uint8_t *)mm->w + (size_t)(j0 / 16) * 16 * mm->wrow;
    const __m256i k80 = _mm256_set1_epi8((char)0x80), one8 = _mm256_set1_epi8(1), one16 = _mm256_set1_epi16(1);
    for (int b = 0; b < nb; b++) {
        const uint8_t *lb = grp + (size_t)b * 544;
        uint8_t *pb = pan + (size_t)b * SLM_R16P_Q8_BYTES;
        stream_prefetch(lb, 544, mm->pf);
        __m256i c[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int i = 0; i < 16; i++) { /* vector i / 2, half i % 2 */
            const __m256i w = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(lb + 32 * i)), k80);
            const __m256i aw = _mm256_abs_epi8(w), m = _mm256_cmpgt_epi8(_mm256_setzero_si256(), w);
            _mm256_store_si256((__m256i *)(pb + 32 * i), aw);
            _mm256_store_si256((__m256i *)(pb + 512 + 32 * i), m);
            /* a column's 4 bytes of |w| [w < 0] (each <= 128) summed */
            c[i % 2] = _mm256_add_epi32(c[i % 2], _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(aw, m), one8), one16));
        }
        for (int h = 0; h < 2; h++) {
            _mm256_store_ps((float *)(pb + 1024) + 8 * h, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(lb + 512 + 16 * h))));
            _mm256_store_si256((__m256i *)(pb + 1088 + 32 * h), c[h]);
        }
    }
}

#define R16P_Q8_MK(R)                                                                                              \
    AVX2 static void r16p_q8_mk_##R(const slm_mm *mm, const qscratch *qs, const uint8_t *pan, int i0, int j0,         \
                                    const int *ha, const int *he) {                                                 \
        r16p_q8_mk_avx2(mm, qs, pan, i0, j0, 0, ha, he, R, 2);                                                      \
    }
R16P_Q8_MK(1) R16P_Q8_MK(2) R16P_Q8_MK(3)
typedef void (*r16p_q8_fn)(const slm_mm *, const qscratch *, const uint8_t *, int, int, const int *, const int *);
static const r16p_q8_fn k_r16p_q8[3] = {r16p_q8_mk_1, r16p_q8_mk_2, r16p_q8_mk_3};

/* Q8_0 from the panel (nb * SLM_R16P_Q8_BYTES <= SLM_AMX_PANEL_BYTES(nb), the
   panel region): blocks of 3 rows x both halves (6 float and 6 integer
   accumulators). One core of a Zen 3 EPYC, 512 x 2048 x 2048 (thread CPU
   time, best of 5): 3 rows x 2 halves ~128 GOP/s, 2 x 2 ~108, 4 rows x one
   half ~108, 3 x one half ~95; the per-half kernels ~90 (docs/benchmarks.md). */
AVX2 static void r16p_q8_matmul_avx2(const slm_mm *mm, const qscratch *qs) {
    uint8_t *pan = qs->panel;
    for (int g0 = mm->n0 & ~15; g0 < mm->n1; g0 += 16) {
        int ha[2], he[2];
        halves_cut(mm, g0, ha, he);
        r16p_q8_unpack_avx2(mm, g0, pan);
        for (int i0 = 0; i0 < mm->rows; i0 += 3) {
            const int nr = mm->rows - i0 < 3 ? mm->rows - i0 : 3;
            k_r16p_q8[nr - 1](mm, qs, pan, i0, g0, ha, he);
        }
    }
}

typedef void (*r16p2_fn)(const slm_mm *, const qscratch *, const int32_t *, const uint8_t *, int, int, const int *,
                         const int *);
#define R16P2_MK(R, KIND, GS)                                                                                      \
    AVX2 static void r16p2_mk_##R##_##KIND##_##GS(const slm_mm *mm, const qscratch *qs, const int32_t *ofs,         \
                                                  const uint8_t *pan, int i0, int j0, const int *ha, const int *he) { \
        r16p_mk_avx2(mm, qs, ofs, pan, i0, j0, ha, he, R, KIND, GS);                                                 \
    }
#define R16P2_ROWS(KIND, GS) R16P2_MK(1, KIND, GS) R16P2_MK(2, KIND, GS) R16P2_MK(3, KIND, GS)
#define R16P2_T(KIND, GS) {r16p2_mk_1_##KIND##_##GS, r16p2_mk_2_##KIND##_##GS, r16p2_mk_3_##KIND##_##GS}
R16P2_ROWS(0, 8) R16P2_ROWS(0, 4) R16P2_ROWS(1, 2) R16P2_ROWS(2, 8) R16P2_ROWS(2, 4) R16P2_ROWS(1, 4)
/* [Q4_0, Q5_0, Q6_K, Q4_K, Q5_K, Q3_K][rows - 1]: blocks of 3 rows (6 float
   and 6 16-bit accumulators; 2 and 4 rows measured slower for every type, Zen 3) */
static const r16p2_fn k_r16p2[6][3] = {R16P2_T(0, 8), R16P2_T(0, 4), R16P2_T(1, 2), R16P2_T(2, 8), R16P2_T(2, 4),
                                       R16P2_T(1, 4)};

AVX2 int slm_x86_r16p_matmul_avx2(const slm_mm *mm, const qscratch *qs) {
    const uint32_t t = mm->wtype;
    const int ty = t == SLM_Q4_0_R16 ? 0 : t == SLM_Q5_0_R16 ? 1 : t == SLM_Q6_K_R16 ? 2 : t == SLM_Q4_K_R16 ? 3
                 : t == SLM_Q5_K_R16 ? 4 : t == SLM_Q3_K_R16 ? 5 : t == SLM_Q4_1_R16 ? 6 : t == SLM_Q5_1_R16 ? 7
                 : t == SLM_MXFP4_R16 ? 8 : -1;
    if (t == SLM_Q8_0_R16 && mm->rows >= 16 && qs->panel) {
        r16p_q8_matmul_avx2(mm, qs);
        return 1;
    }
    if (ty < 0 || mm->rows < 16 || !qs->panel) return 0;
    /* Q4_1, Q5_1: the kernels of Q4_K, Q5_K (kind 2, the same 16-bit group), their own panel writer;
       MXFP4 (codes 0..24): Q5_0's (kind 0, 4 products in 16 bits) */
    const int row = ty == 6 ? 3 : ty == 7 ? 4 : ty == 8 ? 1 : ty;
    const int kind = ty == 2 || ty == 5 ? 1 : row >= 3 ? 2 : 0, nb = mm->k / 32, rows = mm->rows, rb = 3;
    uint8_t *pan = qs->panel;
    int32_t *ofs = NULL;
    if (kind != 2) { /* the accumulators' starts: -offset * the activation codes' sums */
        ofs = (int32_t *)(((uintptr_t)(pan + SLM_AMX_PANEL_BYTES(nb)) + 63) & ~(uintptr_t)63);
        const int off = ty == 5 ? -4 : kind == 1 ? -32 : ty == 1 ? -16 : ty == 8 ? -12 : -8;
        const size_t n = (size_t)rows * nb;
        if (kind == 1)
            for (size_t i = 0; i < 2 * n; i++) ofs[i] = off * qs->hs[i];
        else
            for (size_t i = 0; i < n; i++) ofs[i] = off * (qs->hs[2 * i] + qs->hs[2 * i + 1]);
    }
    for (int g0 = mm->n0 & ~15; g0 < mm->n1; g0 += 16) {
        int ha[2], he[2];
        halves_cut(mm, g0, ha, he);
        if (ty == 3 || ty == 4) slm_x86_r16kp_unpack_avx2(mm, g0, pan);
        else slm_x86_r16p_unpack_avx2(mm, g0, pan);
        for (int i0 = 0; i0 < rows; i0 += rb) {
            const int nr = rows - i0 < rb ? rows - i0 : rb;
            k_r16p2[row][nr - 1](mm, qs, ofs, pan, i0, g0, ha, he);
        }
    }
    return 1;
}
#endif
