/* The AMX kernel set (device/kernels_amx.h, docs/amx.md): prefill of the
 * repacked quantized types (the r16 layouts of common/layout_r16.c) on
 * AMX-INT8 tiles, prefill of BF16 matrices on AMX-BF16 tiles; decode and
 * every other type on the AVX-512 set. The tile kernels
 * (kernels_amx_body.h, kernels_amx_bf16_body.h) are compiled twice: on the
 * AMX intrinsics and on the portable emulation (device/amx_emu.c), which
 * the tests check against the double-precision reference on any machine. */
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "common/cpu.h"
#include "common/dtype.h"
#include "compiler/amx_plan.h"
#include "device/amx_emu.h"
#include "device/bf16_split.h"
#include "device/kernels_amx.h"

int slm_amx_type(uint32_t t) { return t != SLM_BF16 && slm_amx_span(t) != 0; }

/* The int8 activations in a matmul's scratch, laid out as the x86 sets'
 * (kernels_x86.h, qscratch_split), so a call of the AVX-512 set (decode)
 * and one of this set read each other's quantized rows (xq_ready). */
typedef struct amx_xq {
    uint8_t *q; /* [rows][k] signed codes */
    float *d;   /* [rows][nb] block scales */
    float *s;   /* [rows][nb] block sums (scale * sum of codes) */
    int32_t *hs;
} amx_xq;

static uint8_t *al64(uint8_t *p) { return (uint8_t *)(((uintptr_t)p + 63) & ~(uintptr_t)63); }

static amx_xq xq_split(void *scratch, int rows, int k) {
    const size_t nb = (size_t)k / 32;
    amx_xq x;
    x.q = al64(scratch);
    x.d = (float *)al64(x.q + (size_t)rows * k);
    x.s = x.d + (size_t)rows * nb;
    x.hs = (int32_t *)al64((uint8_t *)(x.s + (size_t)rows * nb));
    return x;
}

/* The panel of one column step (SLM_AMX_PANEL_BYTES, after the xq region
 * of the scratch): per group j < 3 and block b, the B tile, its scales and
 * min terms (what amx_unpack writes), unpacked once per column step. */
typedef struct amx_panel {
    int8_t *bt; /* [3][nb][512] */
    float *wd;  /* [3][nb][2][16] */
    float *wm;  /* [3][nb][16] */
} amx_panel;
#define AMX_PT(pn, j, b, nb) ((pn)->bt + ((size_t)(j) * (size_t)(nb) + (size_t)(b)) * 512)
#define AMX_PD(pn, j, b, nb) ((float(*)[16])((pn)->wd + ((size_t)(j) * (size_t)(nb) + (size_t)(b)) * 32))
#define AMX_PM(pn, j, b, nb) ((pn)->wm + ((size_t)(j) * (size_t)(nb) + (size_t)(b)) * 16)

static amx_panel panel_split(const amx_xq *xq, int rows, int k) {
    const size_t nb = (size_t)k / 32;
    amx_panel p;
    p.bt = (int8_t *)al64((uint8_t *)(xq->hs + 2 * (size_t)rows * nb));
    p.wd = (float *)(p.bt + 3 * nb * 512);
    p.wm = p.wd + 3 * nb * 32;
    return p;
}

/* Block b of the group at grp (16 columns) as a signed VNNI-4 B tile:
 * byte 64 v + 4 c + e = code of element 4v + e of column c (the r16 byte
 * order, the codes' offsets removed), and its scales: wd[h][c] for
 * elements 16h .. 16h+15, wm[c] the min term (value = wd * code + wm). */
static void amx_unpack(uint32_t t, const uint8_t *grp, int k, int b, int8_t bt[512], float wd[2][16], float wm[16]) {
    for (int c = 0; c < 16; c++) {
        int8_t q[32];
        float d[2], m[2]; /* the types the tiles take have one min a block */
        slm_r16_block_i8(t, grp, k, c, b, q, d, m);
        for (int e = 0; e < 32; e++) bt[(e / 4) * 64 + c * 4 + e % 4] = q[e];
        wd[0][c] = d[0];
        wd[1][c] = d[1];
        wm[c] = m[0];
    }
}

/* The BF16 path's scratch (slm_matmul_scratch_bytes): the activations as
 * three planes of bf16 pieces [3][rows][kpad] after the region where the int8 kernels keep their
 * quantized activations, so a BF16 matmul between two quantized ones that
 * read the same rows (exec.c's xq_ready) leaves those codes alone. */
static uint16_t *bf16_act_at(void *scratch, int k, int rows) {
    return (uint16_t *)al64((uint8_t *)scratch + slm_matmul_scratch_bytes(SLM_Q8_0_R16, k, rows));
}

void slm_amx_bf16_act(const float *x, size_t ldx, int rows, int k, uint16_t *xb) {
    const int kpad = (k + 31) & ~31;
    const size_t plane = (size_t)rows * kpad;
    for (int i = 0; i < rows; i++)
        for (int e = 0; e < kpad; e++) {
            uint16_t p[3] = {0, 0, 0};
            if (e < k) (void)slm_bf16_split3(x[(size_t)i * ldx + e], p);
            for (int q = 0; q < 3; q++) xb[q * plane + (size_t)i * kpad + e] = p[q];
        }
}

void slm_amx_bf16_unpack(const void *grp, uint64_t wrow, int c0, int c1, int k, int k0, uint16_t bt[512]) {
    memset(bt, 0, 512 * sizeof *bt);
    for (int c = c0; c < c1; c++) {
        const uint8_t *row = (const uint8_t *)grp + (size_t)c * wrow;
        for (int e = 0; e < 32 && k0 + e < k; e++) memcpy(&bt[(e / 2) * 32 + 2 * c + e % 2], row + 2 * (size_t)(k0 + e), 2);
    }
}

/* ---- the emulated kernels (every machine) --------------------------------- */
static inline void epi_c(float *acc, const int32_t *ct, const float *wd, float dx, const float *wm, float sx) {
    for (int c = 0; c < 16; c++) acc[c] += (float)ct[c] * (wd[c] * dx) + (wm ? wm[c] * sx : 0.0f);
}

#define AMX_OPS_EMU
#include "device/amx_ops.h"
#define AMX_EPI epi_c
#define AMX_UNPACK amx_unpack
#include "device/kernels_amx_body.h"
#define BF16_UNPACK slm_amx_bf16_unpack
#include "device/kernels_amx_bf16_body.h"
#undef BF16_UNPACK
#undef AMX_EPI
#undef AMX_UNPACK
#define AMX_OPS_DONE
#include "device/amx_ops.h"

void slm_amx_matmul_emu(const slm_mm *mm) {
    const amx_xq xq = xq_split(mm->scratch, mm->rows, mm->k);
    const amx_panel pn = panel_split(&xq, mm->rows, mm->k);
    if (!mm->xq_ready) slm_quantize_act_ref(mm->x, mm->ldx, mm->rows, mm->k, 0, xq.q, xq.d, xq.s);
    emu_tiles(mm, &xq, &pn);
}

void slm_amx_matmul_bf16_emu(const slm_mm *mm) {
    uint16_t *xb = bf16_act_at(mm->scratch, mm->k, mm->rows);
    slm_amx_bf16_act(mm->x, mm->ldx, mm->rows, mm->k, xb);
    emu_bf16_tiles(mm, xb);
}

/* ---- the AMX kernel ----------------------------------------------------------- */
#if defined(__x86_64__) && defined(__GNUC__) && (__GNUC__ >= 11 || defined(__clang__))
#include <immintrin.h>

#include "device/attention.h"
#include "device/kernels_x86.h"

const slm_kernel_set *slm_kernels_avx512(void); /* kernels_x86_sets.c */

/* the AMX target of amx_ops.h, for this file's own AVX-512 helpers too */
#define AMX_TARGET                                                                                                     \
    __attribute__((target("amx-tile,amx-int8,amx-bf16,avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16,avx2,fma,f16c")))

AMX_TARGET static inline __attribute__((always_inline)) void epi_amx(float *acc, const int32_t *ct, const float *wd, float dx, const float *wm, float sx) {
    __m512 a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(ct)), _mm512_mul_ps(_mm512_loadu_ps(wd), _mm512_set1_ps(dx)),
                               _mm512_load_ps(acc));
    if (wm) a = _mm512_fmadd_ps(_mm512_loadu_ps(wm), _mm512_set1_ps(sx), a);
    _mm512_store_ps(acc, a);
}

/* 16 f16 scales at p as floats (vcvtph2ps: exact, as slm_f16_to_f32) */
AMX_TARGET static inline __m512 f16x16(const uint8_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }

/* wd[0] = wd[1] = d, wm = 0: the types with one scale per block and no min */
AMX_TARGET static inline void scales_d(__m512 d, float wd[2][16], float wm[16]) {
    _mm512_storeu_ps(wd[0], d);
    _mm512_storeu_ps(wd[1], d);
    _mm512_storeu_ps(wm, _mm512_setzero_ps());
}

/* The r16 block as a signed B tile with AVX-512 (8-16 vector ops per
 * block, the scales converted 16 at a time), every type of slm_amx_type. Same results as amx_unpack
 * (test_amx). */
AMX_TARGET static void amx_unpack_hw(uint32_t t, const uint8_t *grp, int k, int b, int8_t bt[512], float wd[2][16],
                                     float wm[16]) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    if (t == SLM_Q8_0_R16) {
        const uint8_t *blk = grp + (size_t)b * 544;
        for (int v = 0; v < 8; v++)
            _mm512_store_si512(bt + 64 * v, _mm512_xor_si512(_mm512_loadu_si512(blk + 64 * v), _mm512_set1_epi8((char)0x80)));
        scales_d(f16x16(blk + 512), wd, wm);
        return;
    }
    if (t == SLM_Q4_0_R16 || t == SLM_Q4_K_R16 || t == SLM_Q5_0_R16 || t == SLM_Q5_K_R16 || t == SLM_IQ4_NL_R16) {
        const int kq = t == SLM_Q4_K_R16 || t == SLM_Q5_K_R16, five = t == SLM_Q5_0_R16 || t == SLM_Q5_K_R16;
        const int nl = t == SLM_IQ4_NL_R16;
        const int cb = five ? 320 : 256; /* code bytes per block (the fifth bits after the nibbles) */
        const uint8_t *sup = grp + (size_t)(b / 8) * (t == SLM_Q5_K_R16 ? 2816 : 2304);
        const uint8_t *blk = kq ? sup + 256 + (size_t)(b % 8) * cb : grp + (size_t)b * (cb + 32);
        const __m512i off = _mm512_set1_epi8((char)(kq || nl ? 0 : five ? 16 : 8));
        const __m512i tbl = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)slm_kvalues_iq4nl));
        const __m512i hb = five ? _mm512_loadu_si512(blk + 256) : _mm512_setzero_si512();
        for (int v = 0; v < 8; v++) {
            const __m512i c = _mm512_loadu_si512(blk + 64 * (v / 2));
            __m512i w = (v & 1) ? _mm512_and_si512(_mm512_srli_epi16(c, 4), m4) : _mm512_and_si512(c, m4);
            if (five) { /* bit v of hb to bit 4 (16-bit shifts: bit 4 of a byte comes from its own bits) */
                const __m512i h = v < 4 ? _mm512_slli_epi16(hb, 4 - v) : v == 4 ? hb : _mm512_srli_epi16(hb, v - 4);
                w = _mm512_or_si512(w, _mm512_and_si512(h, _mm512_set1_epi8(0x10)));
            }
            if (nl) w = _mm512_shuffle_epi8(tbl, w);
            _mm512_store_si512(bt + 64 * v, _mm512_sub_epi8(w, off));
        }
        if (!kq) {
            scales_d(f16x16(blk + cb), wd, wm);
            return;
        }
        /* the 16 columns' 6-bit scale and min of sub-block s (layout_r16.c's header): low
         * nibbles at 64 + 16 s, two high bits each at 192 / 224 + 16 (s / 4), bits 2 (s % 4) */
        const int s = b % 8;
        const __m128i m4b = _mm_set1_epi8(0x0F), m3 = _mm_set1_epi8(3);
        const __m128i sm = _mm_loadu_si128((const __m128i *)(sup + 64 + 16 * s));
        const __m128i hs = _mm_and_si128(_mm_srli_epi16(_mm_loadu_si128((const __m128i *)(sup + 192 + 16 * (s / 4))), 2 * (s % 4)), m3);
        const __m128i hm = _mm_and_si128(_mm_srli_epi16(_mm_loadu_si128((const __m128i *)(sup + 224 + 16 * (s / 4))), 2 * (s % 4)), m3);
        const __m128i sc = _mm_or_si128(_mm_and_si128(sm, m4b), _mm_slli_epi16(hs, 4)); /* < 64: no carry across bytes */
        const __m128i mn = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(sm, 4), m4b), _mm_slli_epi16(hm, 4));
        const __m512 d = _mm512_mul_ps(f16x16(sup), _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sc)));
        _mm512_storeu_ps(wd[0], d);
        _mm512_storeu_ps(wd[1], d);
        /* -(dmin * mn), as the scalar -f16 * (float)mn: the product negated */
        _mm512_storeu_ps(wm, _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(f16x16(sup + 32), _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(mn)))));
        return;
    }
    if (t == SLM_MXFP4_R16) { /* the codes as Q4_0's, looked up in kvalues_mxfp4; 16 E8M0 bytes */
        const uint8_t *blk = grp + (size_t)b * 272;
        const __m512i tbl = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)slm_kvalues_mxfp4));
        for (int v = 0; v < 8; v++) {
            const __m512i c = _mm512_loadu_si512(blk + 64 * (v / 2));
            const __m512i w = (v & 1) ? _mm512_and_si512(_mm512_srli_epi16(c, 4), m4) : _mm512_and_si512(c, m4);
            _mm512_store_si512(bt + 64 * v, _mm512_shuffle_epi8(tbl, w));
        }
        scales_d(e8m0_half_x16(blk + 256), wd, wm);
        return;
    }
    if (t == SLM_Q6_K_R16) {
        const uint8_t *sup = grp + (size_t)(b / 8) * 3360, *blk = sup + 32 + (size_t)(b % 8) * 416;
        const __m512i m30 = _mm512_set1_epi8(0x30), off = _mm512_set1_epi8(32);
        for (int v = 0; v < 8; v++) {
            const __m512i c = _mm512_loadu_si512(blk + 64 * (v / 2));
            __m512i w = (v & 1) ? _mm512_and_si512(_mm512_srli_epi16(c, 4), m4) : _mm512_and_si512(c, m4);
            const __m512i h = _mm512_loadu_si512(blk + 256 + 64 * (v / 4));
            const int sh = v % 4;
            const __m512i hv = sh < 2 ? _mm512_slli_epi16(h, 4 - 2 * sh) : sh == 2 ? h : _mm512_srli_epi16(h, 2);
            w = _mm512_or_si512(w, _mm512_and_si512(hv, m30));
            _mm512_store_si512(bt + 64 * v, _mm512_sub_epi8(w, off));
        }
        /* the two per-16 scales of each column: int8 at 384 (first half) and 400 */
        const __m512 d = f16x16(sup);
        _mm512_storeu_ps(wd[0], _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 384))))));
        _mm512_storeu_ps(wd[1], _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 400))))));
        _mm512_storeu_ps(wm, _mm512_setzero_ps());
        return;
    }
    amx_unpack(t, grp, k, b, bt, wd, wm);
}

void slm_amx_unpack_avx512(uint32_t t, const void *grp, int k, int b, int8_t bt[512], float wd[2][16], float wm[16]) {
    amx_unpack_hw(t, grp, k, b, bt, wd, wm);
}

/* The VNNI-2 B tile with AVX-512: the 16 columns' 32 elements (16 dwords
 * of 2 bf16 each) as a 16 x 16 dword transpose, the dword-pair in each
 * lane kept in order. Same bytes as slm_amx_bf16_unpack (test_amx). */
AMX_TARGET static void bf16_unpack_hw(const void *grp, uint64_t wrow, int c0, int c1, int k, int k0, uint16_t bt[512]) {
    const int nv = k - k0 < 32 ? k - k0 : 32; /* >= 1 */
    const __mmask32 m = nv == 32 ? 0xFFFFFFFFu : (__mmask32)((1u << nv) - 1);
    __m512i r[16], t[16];
    for (int c = 0; c < 16; c++)
        r[c] = c >= c0 && c < c1 ? _mm512_maskz_loadu_epi16(m, (const uint8_t *)grp + (size_t)c * wrow + 2 * (size_t)k0)
                                 : _mm512_setzero_si512();
    for (int i = 0; i < 8; i++) { /* lane L of t[2i]: (2i, 4L) (2i+1, 4L) (2i, 4L+1) (2i+1, 4L+1) */
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) { /* lane L of r[4i + j]: dword 4L + j of columns 4i .. 4i+3 */
        r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int j = 0; j < 4; j++) { /* row 4L + j: lane L of r[j], r[4 + j], r[8 + j], r[12 + j] */
        const __m512i p = _mm512_shuffle_i32x4(r[j], r[4 + j], 0x88), q = _mm512_shuffle_i32x4(r[j], r[4 + j], 0xDD);
        const __m512i p2 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0x88), q2 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0xDD);
        _mm512_store_si512(bt + 32 * j, _mm512_shuffle_i32x4(p, p2, 0x88));
        _mm512_store_si512(bt + 32 * (4 + j), _mm512_shuffle_i32x4(q, q2, 0x88));
        _mm512_store_si512(bt + 32 * (8 + j), _mm512_shuffle_i32x4(p, p2, 0xDD));
        _mm512_store_si512(bt + 32 * (12 + j), _mm512_shuffle_i32x4(q, q2, 0xDD));
    }
}

/* The activations as bf16 with AVX-512: round to nearest even as
 * slm_f32_to_bf16 (NaN stays a quiet NaN), the tail up to kpad zero. */
AMX_TARGET static void bf16_act_hw(const float *x, size_t ldx, int rows, int k, uint16_t *xb) {
    const int kpad = (k + 31) & ~31;
    const size_t plane = (size_t)rows * kpad;
    for (int i = 0; i < rows; i++)
        for (int e = 0; e < kpad; e += 16) {
            const int nv = k - e < 16 ? (k - e > 0 ? k - e : 0) : 16;
            const __mmask16 m = (__mmask16)((1u << nv) - 1);
            const __m512 xf = _mm512_maskz_loadu_ps(m, x + (size_t)i * ldx + e);
            __m512i v[3];
            (void)slm_bf16_split16(xf, v);
            uint16_t *o = xb + (size_t)i * kpad + e;
            for (int q = 0; q < 3; q++) _mm256_storeu_si256((__m256i *)(o + q * plane), _mm512_cvtepi32_epi16(v[q]));
        }
}

void slm_amx_bf16_unpack_avx512(const void *grp, uint64_t wrow, int c0, int c1, int k, int k0, uint16_t bt[512]) {
    bf16_unpack_hw(grp, wrow, c0, c1, k, k0, bt);
}

void slm_amx_bf16_act_avx512(const float *x, size_t ldx, int rows, int k, uint16_t *xb) { bf16_act_hw(x, ldx, rows, k, xb); }

#include "device/amx_ops.h"
#define AMX_EPI epi_amx
#define AMX_UNPACK amx_unpack_hw
#include "device/kernels_amx_body.h"
#define BF16_UNPACK bf16_unpack_hw
#include "device/kernels_amx_bf16_body.h"

/* The tile paths for prefill of the r16 quantized types (AMX-INT8) and of
 * BF16 matrices (AMX-BF16); the rest (decode up to SLM_MM_DECODE_ROWS rows:
 * bandwidth-bound, the tiles gain nothing, and each row keeps the bits it
 * gets alone; F16: bf16 would drop 3 mantissa bits) on the AVX-512 set. */
AMX_TARGET static void matmul_amx(const slm_mm *mm) {
    if (mm->rows > SLM_MM_DECODE_ROWS && mm->wtype == SLM_BF16 && mm->scratch && slm_cpu_features()->amx_bf16) {
        uint16_t *xb = bf16_act_at(mm->scratch, mm->k, mm->rows);
        bf16_act_hw(mm->x, mm->ldx, mm->rows, mm->k, xb);
        hw_bf16_tiles(mm, xb);
        return;
    }
    if (mm->rows <= SLM_MM_DECODE_ROWS || !slm_amx_type(mm->wtype)) {
        slm_kernels_avx512()->matmul(mm);
        return;
    }
    const amx_xq xq = xq_split(mm->scratch, mm->rows, mm->k);
    const amx_panel pn = panel_split(&xq, mm->rows, mm->k);
    if (!mm->xq_ready) slm_x86_quant_act_avx512(mm->x, mm->ldx, mm->rows, mm->k, 0, xq.q, xq.d, xq.s, xq.hs);
    hw_tiles(mm, &xq, &pn);
}

/* The same set with the tile kernel on the emulation (tests: the whole
 * engine through the tile path on a machine without AMX). */
static void matmul_amx_emu(const slm_mm *mm) {
    if (mm->rows > SLM_MM_DECODE_ROWS && mm->wtype == SLM_BF16 && mm->scratch) slm_amx_matmul_bf16_emu(mm);
    else if (mm->rows <= SLM_MM_DECODE_ROWS || !slm_amx_type(mm->wtype)) slm_kernels_avx512()->matmul(mm);
    else slm_amx_matmul_emu(mm);
}

static slm_kernel_set k_amx, k_amx_emu;

/* Prefill attention: blocks of >= 16 rows on the BF16 tiles (below that a
 * tile is mostly padding), the others and those the tiles decline (a q8_0
 * cache, head_dim % 32, no AMX-BF16) on the avx512 set's block entry. */
static int attention_rows_amx(const slm_attn_rows *a) {
    return (a->rows >= 16 && slm_attention_rows_amx(a)) || slm_attention_rows_avx512(a);
}
static int attention_rows_amx_emu(const slm_attn_rows *a) {
    return (a->rows >= 16 && slm_attention_rows_amx_emu(a)) || slm_attention_rows_avx512(a);
}

static void init_amx(void) {
    k_amx = *slm_kernels_avx512();
    k_amx.name = "amx";
    k_amx.matmul = matmul_amx;
    k_amx_emu = k_amx;
    k_amx_emu.name = "amx-emu";
    k_amx_emu.matmul = matmul_amx_emu;
    k_amx.attention_rows = attention_rows_amx;
    k_amx_emu.attention_rows = attention_rows_amx_emu;
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

const slm_kernel_set *slm_kernels_amx(void) {
    if (!slm_kernels_avx512()) return NULL;
    pthread_once(&g_once, init_amx);
    return &k_amx;
}

const slm_kernel_set *slm_kernels_amx_emu(void) {
    if (!slm_kernels_avx512()) return NULL;
    pthread_once(&g_once, init_amx);
    return &k_amx_emu;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

AMX_TARGET static double peak_run(long reps) {
    slm_amx_plan pl;
    slm_amx_plan_make(32, 2, 32, &pl);
    /* full 16 x 64 tiles: A 16 x 64 int8, B 16 rows (K = 64) */
    for (int t = 0; t < 8; t++) {
        pl.cfg.rows[t] = 16;
        pl.cfg.colsb[t] = 64;
    }
    _Alignas(64) uint8_t buf[1024];
    for (int i = 0; i < 1024; i++) buf[i] = (uint8_t)(i * 7);
    AMX_BARRIER();
    _tile_loadconfig(&pl.cfg);
    _tile_loadd(4, buf, 64);
    _tile_loadd(5, buf, 64);
    _tile_loadd(6, buf, 64);
    _tile_loadd(7, buf, 64);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    const double t0 = now_s();
    for (long i = 0; i < reps; i++) {
        _tile_dpbusd(0, 4, 6);
        _tile_dpbusd(1, 4, 7);
        _tile_dpbusd(2, 5, 6);
        _tile_dpbusd(3, 5, 7);
    }
    _tile_stored(0, buf, 64); /* the chains' results are used */
    const double dt = now_s() - t0;
    _tile_release();
    return dt > 0 ? (double)reps * 4 * 16 * 16 * 64 * 2 / dt : 0;
}

double slm_amx_int8_peak(double seconds) {
    const slm_cpu *c = slm_cpu_features();
    if (!(c->amx_tile && c->amx_int8 && c->amx_os)) return 0;
    long reps = 1000;
    double best = 0;
    const double end = now_s() + seconds;
    do {
        const double t0 = now_s(), r = peak_run(reps);
        if (r > best) best = r;
        if (now_s() - t0 < 0.01) reps *= 2;
    } while (now_s() < end);
    return best;
}
#else
const slm_kernel_set *slm_kernels_amx(void) { return NULL; }
const slm_kernel_set *slm_kernels_amx_emu(void) { return NULL; }
void slm_amx_unpack_avx512(uint32_t t, const void *grp, int k, int b, int8_t bt[512], float wd[2][16], float wm[16]) {
    amx_unpack(t, grp, k, b, bt, wd, wm);
}
void slm_amx_bf16_unpack_avx512(const void *grp, uint64_t wrow, int c0, int c1, int k, int k0, uint16_t bt[512]) {
    slm_amx_bf16_unpack(grp, wrow, c0, c1, k, k0, bt);
}
void slm_amx_bf16_act_avx512(const float *x, size_t ldx, int rows, int k, uint16_t *xb) { slm_amx_bf16_act(x, ldx, rows, k, xb); }
double slm_amx_int8_peak(double seconds) {
    (void)seconds;
    return 0;
}
#endif
