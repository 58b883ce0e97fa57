/* Prefill attention on AMX-BF16 tiles (device/attention.h,
 * slm_attn_rows; docs/amx.md, "Prefill attention on BF16 tiles"): per
 * block of 16 query rows and pass of group heads, the KV tiles of 32 keys
 * of the rows' ranges, S = Q K^T and P V by TDPBF16PS on operands split
 * into three bf16 pieces (x = x0 + x1 + x2, exact for an fp32 or f16
 * value; each product the six piece products x_i y_j, i + j <= 2, into one
 * fp32 tile: fp32 accuracy; five with an f16 cache, whose x2 is 0), the
 * scaling, masking and online softmax in fp32. The body
 * (attention_amx_body.h) is compiled twice: on the AMX intrinsics and on
 * the portable emulation (device/amx_emu.c), which test_amx_attention
 * checks against a double-precision reference. The work around the tiles
 * (the splits, K^T and V as B tiles, exp, the rescale) is here twice: in
 * plain C and in AVX-512, with the same bits but for the softmax's (its
 * exp, the order of its sums): the hardware body calls the AVX-512
 * helpers, the emulated one picks them at run time (slm_cpu_features) and
 * keeps plain C for other machines. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/cpu.h"
#include "common/dtype.h"
#include "device/amx_emu.h"
#include "device/attention.h"
#include "device/bf16_split.h"

#define AR_TILE_KEYS 32   /* keys per KV tile: the K of one P V product */
#define AR_MAX_HD 256    /* head_dim bound (K^T and V of one tile: 16 KiB per piece each) */
#define AR_HEAD_DIMS 512 /* group heads x head_dim per pass (Q 16 KiB per piece, O fp32 32 KiB) */
#define AR_PIECES 3      /* bf16 pieces per operand */

/* The state of one block of <= 16 query rows and one pass of heads; on
 * the caller's stack (about 184 KiB), nothing allocated. Every operand is
 * held as its bf16 pieces [0] (largest), [1], [2] (device/bf16_split.h); K and V of
 * an f16 cache as [0] and [1] only (ar_kv_pieces). */
typedef struct ar_block {
    _Alignas(64) uint16_t qb[AR_PIECES][AR_HEAD_DIMS * 16];        /* [head][k step][16 rows][32] bf16 A tiles */
    _Alignas(64) uint16_t kb[AR_PIECES][AR_MAX_HD * AR_TILE_KEYS]; /* [k step][2 halves][16][32] K^T B tiles */
    _Alignas(64) uint16_t vb[AR_PIECES][AR_MAX_HD * AR_TILE_KEYS]; /* [dim chunk][16][32] V B tiles */
    _Alignas(64) uint16_t pb[AR_PIECES][16 * AR_TILE_KEYS];        /* P: [16 rows][32 keys] bf16 A tiles */
    _Alignas(64) float s[16 * AR_TILE_KEYS];               /* S: [16 rows][32 keys] fp32 */
    _Alignas(64) float pv[16 * 16];                        /* one P V product: [16 rows][16 dims] */
    _Alignas(64) float o[AR_HEAD_DIMS * 16];               /* [head][16 rows][head_dim] fp32 outputs */
    float m[AR_HEAD_DIMS / 32][16], l[AR_HEAD_DIMS / 32][16]; /* running max and sum per head, row */
    float corr[16];                                        /* this tile's rescale per row */
    int first[16], last[16];                               /* the rows' KV ranges */
    int nr, kmin, kmax;                                    /* rows; the union of their ranges */
    int vec;                                               /* the emulated body: 1 = the AVX-512 helpers */
    uint8_t kv[AR_TILE_KEYS];                              /* key t of the tile taken by some row */
    uint32_t kvm;                                          /* the same as bits */
} ar_block;


/* The pieces K and V of a cache type have: an f16 has 11 significant bits,
 * x0 takes 8 (rounded) and x1 the remaining 3 or fewer exactly, x2 = 0 (so
 * S and P V skip the products with it: five instead of six). */
static inline int ar_kv_pieces(int kv_type) { return kv_type == SLM_F16 ? 2 : AR_PIECES; }

static inline size_t ar_row_bytes(const slm_attn_rows *a) {
    return a->kv_type == SLM_F32 ? a->ld * sizeof(float) : (size_t)slm_row_bytes((uint32_t)a->kv_type, a->ld);
}

/* Element d of a cache row of kv_type (SLM_F32 or SLM_F16), split. */
static inline void kv_split(int kv_type, const uint8_t *row, int d, uint16_t p[AR_PIECES]) {
    float f;
    if (kv_type == SLM_F32) {
        memcpy(&f, row + 4 * (size_t)d, 4);
    } else {
        uint16_t h;
        memcpy(&h, row + 2 * (size_t)d, 2);
        f = slm_f16_to_f32(h);
    }
    (void)slm_bf16_split3(f, p);
}

/* 1 if the tile kernel takes the block. */
static int ar_takes(const slm_attn_rows *a) {
    return !a->alibi && a->head_dim > 0 && a->head_dim % 32 == 0 && a->head_dim <= AR_MAX_HD && a->group >= 1 &&
           (a->kv_type == SLM_F32 || a->kv_type == SLM_F16) && a->rows >= 1 && a->rows <= SLM_ATTN_ROWS_MAX;
}

/* ---- the work around the tiles in plain C (every machine) ------------------ *
 * ar_<step>_c here and ar_<step>_v in AVX-512 below take the same arguments
 * and write the same bits (the softmax aside: expf here, a polynomial
 * there, and the sums of P in another order). */

/* Q rows [r0, r0 + nr) of heads [h0, h0 + nh) as A tiles of pieces, zero
 * rows past nr. */
static void ar_qsplit_c(const slm_attn_rows *a, ar_block *b, int r0, int h0, int nh) {
    const int D = a->head_dim, nks = D / 32;
    for (int x = 0; x < AR_PIECES; x++) memset(b->qb[x], 0, (size_t)nh * 16 * D * sizeof(uint16_t));
    for (int g = 0; g < nh; g++)
        for (int i = 0; i < b->nr; i++) {
            const float *q = a->q + (size_t)(r0 + i) * a->q_ld + (size_t)(h0 + g) * a->q_stride;
            for (int d = 0; d < D; d++) {
                const size_t qi = ((size_t)(g * nks + d / 32) * 16 + i) * 32 + d % 32;
                uint16_t qp[AR_PIECES];
                (void)slm_bf16_split3(q[d], qp);
                for (int x = 0; x < AR_PIECES; x++) b->qb[x][qi] = qp[x];
            }
        }
}

/* K^T and V of KV tile [j0, j0 + 32) as B tiles (ar_kv_pieces of them):
 * keys the block does not take (kv[t] == 0: masked, past the end, outside
 * every row's range) are zeros and are never read. */
static void ar_build_kv_c(const slm_attn_rows *a, ar_block *b, int j0) {
    const int D = a->head_dim, np = ar_kv_pieces(a->kv_type);
    const size_t rb = ar_row_bytes(a);
    for (int x = 0; x < np; x++) {
        memset(b->kb[x], 0, (size_t)D * AR_TILE_KEYS * sizeof(uint16_t));
        memset(b->vb[x], 0, (size_t)D * AR_TILE_KEYS * sizeof(uint16_t));
    }
    for (int t = 0; t < AR_TILE_KEYS; t++) {
        if (!b->kv[t]) continue;
        const uint8_t *kr = (const uint8_t *)a->K + (size_t)(j0 + t) * rb;
        const uint8_t *vr = (const uint8_t *)a->V + (size_t)(j0 + t) * rb;
        const int c = t % 16, h = t / 16, vr2 = t / 2, ve = t % 2;
        for (int d = 0; d < D; d++) {
            const size_t ki = (size_t)(((d / 32) * 2 + h) * 16 + (d % 32) / 2) * 32 + 2 * c + d % 2;
            const size_t vi = (size_t)((d / 16) * 16 + vr2) * 32 + 2 * (d % 16) + ve;
            uint16_t kp[AR_PIECES], vp[AR_PIECES];
            kv_split(a->kv_type, kr, d, kp);
            kv_split(a->kv_type, vr, d, vp);
            for (int x = 0; x < np; x++) b->kb[x][ki] = kp[x], b->vb[x][vi] = vp[x];
        }
    }
}

/* One head's scores of the KV tile (s: [16][32] fp32, unscaled) into P
 * (split bf16) and the online softmax's state: keys outside a row's range
 * or masked are -inf; corr[i] rescales row i's output before this tile's
 * P V is added. The normalizer sums the P (its pieces' sum) that
 * multiplies V. */
static void ar_softmax_c(const slm_attn_rows *a, ar_block *b, int g, int j0) {
    for (int i = 0; i < 16; i++) {
        float *s = b->s + i * AR_TILE_KEYS;
        b->corr[i] = 1.0f;
        for (int x = 0; x < AR_PIECES; x++) memset(b->pb[x] + i * AR_TILE_KEYS, 0, AR_TILE_KEYS * sizeof(uint16_t));
        if (i >= b->nr) continue;
        const int f = b->first[i], l = b->last[i];
        float tmax = -INFINITY;
        for (int t = 0; t < AR_TILE_KEYS; t++) {
            const int key = j0 + t;
            s[t] = b->kv[t] && key >= f && key <= l ? s[t] * a->scale : -INFINITY;
            tmax = s[t] > tmax ? s[t] : tmax;
        }
        if (tmax == -INFINITY) continue; /* nothing of this tile for the row */
        float *m = &b->m[g][i];
        const float mnew = tmax > *m ? tmax : *m;
        b->corr[i] = *m == -INFINITY ? 0.0f : expf(*m - mnew);
        *m = mnew;
        float sum = 0.0f;
        for (int t = 0; t < AR_TILE_KEYS; t++) {
            if (s[t] == -INFINITY) continue; /* P stays 0 */
            uint16_t pp[AR_PIECES];
            sum += slm_bf16_split3(expf(s[t] - mnew), pp);
            for (int x = 0; x < AR_PIECES; x++) b->pb[x][i * AR_TILE_KEYS + t] = pp[x];
        }
        b->l[g][i] = b->l[g][i] * b->corr[i] + sum;
    }
}

/* o = o * corr + P V for dims [16 dc, 16 dc + 16) of the block's rows (o:
 * one head's [16][D] outputs; P V in pv). */
static void ar_rescale_c(ar_block *b, float *o, int D, int dc) {
    for (int i = 0; i < b->nr; i++)
        for (int c = 0; c < 16; c++) {
            float *x = &o[(size_t)i * D + 16 * dc + c];
            *x = *x * b->corr[i] + b->pv[i * 16 + c];
        }
}

/* The pass's outputs, o / l (0 for a row with no valid KV row). */
static void ar_finish_c(const slm_attn_rows *a, ar_block *b, int r0, int h0, int nh) {
    const int D = a->head_dim;
    for (int g = 0; g < nh; g++)
        for (int i = 0; i < b->nr; i++) {
            float *out = a->out + (size_t)(r0 + i) * a->out_ld + (size_t)(h0 + g) * a->out_stride;
            const float *o = b->o + ((size_t)g * 16 + i) * D, l = b->l[g][i];
            for (int d = 0; d < D; d++) out[d] = l > 0.0f ? o[d] / l : 0.0f;
        }
}

/* ---- the same in AVX-512 (x86-64) ------------------------------------------ */
#if defined(__x86_64__) && defined(__GNUC__)
#define AR_X86 1
#include <immintrin.h>

#include "device/exp512.h"

/* A subset of the AMX target (amx_ops.h), so the hardware body inlines them. */
#define AR_AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))

static int ar_have_avx512(void) {
    const slm_cpu *c = slm_cpu_features();
    return c->avx512f && c->avx2 && c->fma && c->f16c;
}

/* 16 elements of a cache row from element d as floats (vcvtph2ps: the
 * same values as slm_f16_to_f32; a signalling NaN comes out quiet, which
 * the bf16 rounding does anyway). */
AR_AVX512 static inline __m512 ar_load16(int kv_type, const uint8_t *row, int d) {
    if (kv_type == SLM_F32) return _mm512_loadu_ps(row + 4 * (size_t)d);
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(row + 2 * (size_t)d)));
}

/* r[j] lane c = r[c] lane j before (a 16 x 16 fp32 transpose). */
AR_AVX512 static inline void ar_tr16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);     /* per 128-bit lane: a0 b0 a1 b1 */
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]); /* a2 b2 a3 b3 */
    }
    for (int i = 0; i < 4; i++) { /* u[4i + k] lane L: rows 4i..4i+3 of column 4L + k */
        const __m512d a0 = _mm512_castps_pd(t[4 * i]), a1 = _mm512_castps_pd(t[4 * i + 1]);
        const __m512d c0 = _mm512_castps_pd(t[4 * i + 2]), c1 = _mm512_castps_pd(t[4 * i + 3]);
        r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, c0));
        r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, c0));
        r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, c1));
        r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, c1));
    }
    for (int k = 0; k < 4; k++) {
        const __m512 A = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x88), B = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x88);
        const __m512 C = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xDD), E = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xDD);
        t[k] = _mm512_shuffle_f32x4(A, B, 0x88);      /* column k */
        t[8 + k] = _mm512_shuffle_f32x4(A, B, 0xDD);  /* column 8 + k */
        t[4 + k] = _mm512_shuffle_f32x4(C, E, 0x88);  /* column 4 + k */
        t[12 + k] = _mm512_shuffle_f32x4(C, E, 0xDD); /* column 12 + k */
    }
    for (int j = 0; j < 16; j++) r[j] = t[j];
}

/* 16 pieces (slm_bf16_rne16's dwords) as 16 bf16 at p. */
AR_AVX512 static inline void ar_store_piece(uint16_t *p, __m512i v) {
    _mm256_storeu_si256((__m256i *)(void *)p, _mm512_cvtepi32_epi16(v));
}

/* The VNNI-2 row of two dword pieces: lo in the low halves, hi in the high. */
AR_AVX512 static inline __m512i ar_pair(__m512i lo, __m512i hi) {
    return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}

AR_AVX512 static void ar_qsplit_v(const slm_attn_rows *a, ar_block *b, int r0, int h0, int nh) {
    const int D = a->head_dim, nks = D / 32;
    for (int x = 0; x < AR_PIECES; x++) memset(b->qb[x], 0, (size_t)nh * 16 * D * sizeof(uint16_t));
    for (int g = 0; g < nh; g++)
        for (int i = 0; i < b->nr; i++) {
            const float *q = a->q + (size_t)(r0 + i) * a->q_ld + (size_t)(h0 + g) * a->q_stride;
            for (int d = 0; d < D; d += 16) {
                const size_t qi = ((size_t)(g * nks + d / 32) * 16 + i) * 32 + d % 32;
                __m512i p[AR_PIECES];
                (void)slm_bf16_split16(_mm512_loadu_ps(q + d), p);
                for (int x = 0; x < AR_PIECES; x++) ar_store_piece(b->qb[x] + qi, p[x]);
            }
        }
}

/* K^T: per k step and half of the keys, the 16 keys' 32 dims transposed
 * as floats (two 16 x 16), each dim split, dims 2r and 2r + 1 paired into
 * tile row r. V: keys 2r and 2r + 1 split and paired into row r of each
 * dim chunk. A key not taken reads as +0 (its pieces are zeros). Every
 * element of the np pieces is written. */
AR_AVX512 static void ar_build_kv_v(const slm_attn_rows *a, ar_block *b, int j0) {
    const int D = a->head_dim, np = ar_kv_pieces(a->kv_type), kt = a->kv_type;
    const size_t rb = ar_row_bytes(a);
    const uint8_t *K = (const uint8_t *)a->K + (size_t)j0 * rb, *V = (const uint8_t *)a->V + (size_t)j0 * rb;
    for (int h = 0; h < 2; h++)
        for (int ks = 0; ks < D / 32; ks++)
            for (int half = 0; half < 2; half++) {
                __m512 r[16];
                for (int c = 0; c < 16; c++)
                    r[c] = b->kv[16 * h + c] ? ar_load16(kt, K + (size_t)(16 * h + c) * rb, 32 * ks + 16 * half)
                                             : _mm512_setzero_ps();
                ar_tr16(r); /* r[j]: dim 32 ks + 16 half + j of the 16 keys */
                for (int rr = 0; rr < 8; rr++) {
                    __m512i pe[AR_PIECES], po[AR_PIECES];
                    (void)slm_bf16_split16(r[2 * rr], pe);
                    (void)slm_bf16_split16(r[2 * rr + 1], po);
                    const size_t ki = (size_t)((ks * 2 + h) * 16 + 8 * half + rr) * 32;
                    for (int x = 0; x < np; x++) _mm512_store_si512(b->kb[x] + ki, ar_pair(pe[x], po[x]));
                }
            }
    for (int rr = 0; rr < 16; rr++) {
        const int t0 = 2 * rr, t1 = 2 * rr + 1;
        for (int dc = 0; dc < D / 16; dc++) {
            __m512i pe[AR_PIECES], po[AR_PIECES];
            (void)slm_bf16_split16(b->kv[t0] ? ar_load16(kt, V + (size_t)t0 * rb, 16 * dc) : _mm512_setzero_ps(), pe);
            (void)slm_bf16_split16(b->kv[t1] ? ar_load16(kt, V + (size_t)t1 * rb, 16 * dc) : _mm512_setzero_ps(), po);
            const size_t vi = (size_t)(dc * 16 + rr) * 32;
            for (int x = 0; x < np; x++) _mm512_store_si512(b->vb[x] + vi, ar_pair(pe[x], po[x]));
        }
    }
}

#define ar_exp slm_exp512 /* device/exp512.h */

/* As ar_softmax_c in three steps, so the rows' chains overlap and nothing
 * reduces across lanes one row at a time: each row's 32 scores scaled
 * and masked (16 lanes of maxima per row: the 16 rows' lanes transposed
 * and taken elementwise give the rows' maxima; a NaN score is skipped, as
 * the plain C does), then the running max and corr for the 16 rows at
 * once (by ar_exp), then per row P = ar_exp(s - m) split and stored, its
 * sums transposed and added into l. The rows' sums of P in another order
 * than the keys' (the same P, pieces and bits). */
AR_AVX512 static void ar_softmax_v(const slm_attn_rows *a, ar_block *b, int g, int j0) {
    const __m512 sc = _mm512_set1_ps(a->scale), ninf = _mm512_set1_ps(-INFINITY);
    __m512 v[16];
    for (int i = 0; i < 16; i++) {
        float *s = b->s + i * AR_TILE_KEYS;
        uint32_t km = 0; /* keys of the tile in the row's range, taken */
        if (i < b->nr) {
            const int lo = b->first[i] - j0 > 0 ? b->first[i] - j0 : 0;
            const int hi = b->last[i] - j0 < AR_TILE_KEYS - 1 ? b->last[i] - j0 : AR_TILE_KEYS - 1;
            if (lo <= hi) km = b->kvm & ((0xFFFFFFFFu >> (31 - (hi - lo))) << lo);
        }
        const __m512 s0 = _mm512_mask_mul_ps(ninf, (__mmask16)km, _mm512_load_ps(s), sc);
        const __m512 s1 = _mm512_mask_mul_ps(ninf, (__mmask16)(km >> 16), _mm512_load_ps(s + 16), sc);
        _mm512_store_ps(s, s0);
        _mm512_store_ps(s + 16, s1);
        v[i] = _mm512_max_ps(s1, _mm512_max_ps(s0, ninf)); /* per lane s > m ? s : m (vmaxps' first operand) */
    }
    ar_tr16(v);
    __m512 tmax = v[0];
    for (int j = 1; j < 16; j++) tmax = _mm512_max_ps(v[j], tmax);
    const __m512 m = _mm512_loadu_ps(b->m[g]);
    const __mmask16 live = _mm512_cmp_ps_mask(tmax, ninf, _CMP_NEQ_OQ); /* rows with something in this tile */
    const __m512 mnew = _mm512_mask_max_ps(m, live, tmax, m);           /* tmax > m ? tmax : m */
    const __mmask16 had = _mm512_cmp_ps_mask(m, ninf, _CMP_NEQ_OQ);
    const __m512 corr = _mm512_mask_mov_ps(_mm512_set1_ps(1.0f), live,
                                           _mm512_maskz_mov_ps(had, ar_exp(_mm512_sub_ps(m, mnew))));
    _mm512_storeu_ps(b->m[g], mnew);
    _mm512_storeu_ps(b->corr, corr);
    for (int i = 0; i < 16; i++) {
        const float *s = b->s + i * AR_TILE_KEYS;
        uint16_t *pr[AR_PIECES] = {b->pb[0] + i * AR_TILE_KEYS, b->pb[1] + i * AR_TILE_KEYS, b->pb[2] + i * AR_TILE_KEYS};
        if (!(live >> i & 1)) { /* nothing of this tile for the row */
            for (int x = 0; x < AR_PIECES; x++) _mm512_store_si512(pr[x], _mm512_setzero_si512());
            v[i] = _mm512_setzero_ps();
            continue;
        }
        const __m512 mv = _mm512_set1_ps(b->m[g][i]), s0 = _mm512_load_ps(s), s1 = _mm512_load_ps(s + 16);
        /* P = 0 where s is -inf (as the plain C, a NaN score is not) */
        const __m512 e0 = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(s0, ninf, _CMP_NEQ_UQ), ar_exp(_mm512_sub_ps(s0, mv)));
        const __m512 e1 = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(s1, ninf, _CMP_NEQ_UQ), ar_exp(_mm512_sub_ps(s1, mv)));
        __m512i p0[AR_PIECES], p1[AR_PIECES];
        v[i] = _mm512_add_ps(slm_bf16_split16(e0, p0), slm_bf16_split16(e1, p1));
        for (int x = 0; x < AR_PIECES; x++) ar_store_piece(pr[x], p0[x]), ar_store_piece(pr[x] + 16, p1[x]);
    }
    ar_tr16(v);
    __m512 sum = v[0];
    for (int j = 1; j < 16; j++) sum = _mm512_add_ps(sum, v[j]);
    const __m512 l = _mm512_loadu_ps(b->l[g]);
    _mm512_storeu_ps(b->l[g], _mm512_mask_add_ps(l, live, _mm512_mul_ps(l, corr), sum));
}

/* As ar_rescale_c: a multiply, then an add (no fused rounding). */
AR_AVX512 static void ar_rescale_v(ar_block *b, float *o, int D, int dc) {
    for (int i = 0; i < b->nr; i++) {
        float *x = o + (size_t)i * D + 16 * dc;
        const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x), _mm512_set1_ps(b->corr[i]));
        _mm512_storeu_ps(x, _mm512_add_ps(v, _mm512_load_ps(b->pv + i * 16)));
    }
}

AR_AVX512 static void ar_finish_v(const slm_attn_rows *a, ar_block *b, int r0, int h0, int nh) {
    const int D = a->head_dim;
    for (int g = 0; g < nh; g++)
        for (int i = 0; i < b->nr; i++) {
            float *out = a->out + (size_t)(r0 + i) * a->out_ld + (size_t)(h0 + g) * a->out_stride;
            const float *o = b->o + ((size_t)g * 16 + i) * D, l = b->l[g][i];
            const __m512 lv = _mm512_set1_ps(l);
            for (int d = 0; d < D; d += 16)
                _mm512_storeu_ps(out + d, l > 0.0f ? _mm512_div_ps(_mm512_loadu_ps(o + d), lv) : _mm512_setzero_ps());
        }
}

/* the emulated body: the AVX-512 helpers where the block says so */
#define AR_NT_ANY(f) (b->vec ? ar_##f##_v : ar_##f##_c)
#else
static int ar_have_avx512(void) { return 0; }
#define AR_NT_ANY(f) ar_##f##_c
#endif

/* ---- on the emulation (every machine) -------------------------------------- */
#define AMX_OPS_EMU
#include "device/amx_ops.h"
#define AR_NT AR_NT_ANY
#include "device/attention_amx_body.h"
#define AMX_OPS_DONE
#include "device/amx_ops.h"
#undef AR_NT

int slm_attention_rows_amx_emu_path(const slm_attn_rows *a, int vec) {
    if (!ar_takes(a)) return 0;
    ar_block b;
    b.vec = vec && ar_have_avx512();
    emu_rows(a, &b);
    return 1;
}

int slm_attention_rows_amx_emu(const slm_attn_rows *a) { return slm_attention_rows_amx_emu_path(a, 1); }

/* ---- on AMX ---------------------------------------------------------------- */
#if defined(__x86_64__) && defined(__GNUC__) && (__GNUC__ >= 11 || defined(__clang__))
#include "device/amx_ops.h"
#define AR_NT(f) ar_##f##_v /* every AMX machine has AVX-512 */
#include "device/attention_amx_body.h"
#undef AR_NT

int slm_attention_rows_amx(const slm_attn_rows *a) {
    const slm_cpu *c = slm_cpu_features();
    if (!(c->amx_tile && c->amx_bf16 && c->amx_os) || !ar_have_avx512() || !ar_takes(a)) return 0;
    ar_block b;
    b.vec = 1;
    hw_rows(a, &b);
    return 1;
}
#else
int slm_attention_rows_amx(const slm_attn_rows *a) {
    (void)a;
    return 0;
}
#endif

/* ---- for test_amx_attention ------------------------------------------------- */
#if defined(AR_X86)
AR_AVX512 static void ar_split_test(const float x[16], uint16_t p[AR_PIECES][16], float sum[16]) {
    __m512i v[AR_PIECES];
    _mm512_storeu_ps(sum, slm_bf16_split16(_mm512_loadu_ps(x), v));
    for (int k = 0; k < AR_PIECES; k++) ar_store_piece(p[k], v[k]);
}

AR_AVX512 static void ar_exp_test(const float x[16], float y[16]) { _mm512_storeu_ps(y, ar_exp(_mm512_loadu_ps(x))); }
#endif

int slm_attention_amx_split(const float *x, int n, int vec, uint16_t *p0, uint16_t *p1, uint16_t *p2, float *sum) {
    uint16_t *p[AR_PIECES] = {p0, p1, p2};
    if (!vec) {
        for (int i = 0; i < n; i++) {
            uint16_t q[AR_PIECES];
            sum[i] = slm_bf16_split3(x[i], q);
            for (int k = 0; k < AR_PIECES; k++) p[k][i] = q[k];
        }
        return 1;
    }
#if defined(AR_X86)
    if (!ar_have_avx512()) return 0;
    for (int i = 0; i < n; i += 16) {
        float xi[16] = {0}, si[16];
        uint16_t pi[AR_PIECES][16];
        const int m = n - i < 16 ? n - i : 16;
        memcpy(xi, x + i, sizeof(float) * (size_t)m);
        ar_split_test(xi, pi, si);
        memcpy(sum + i, si, sizeof(float) * (size_t)m);
        for (int k = 0; k < AR_PIECES; k++) memcpy(p[k] + i, pi[k], sizeof(uint16_t) * (size_t)m);
    }
    return 1;
#else
    return 0;
#endif
}

int slm_attention_amx_exp(const float *x, int n, float *y) {
#if defined(AR_X86)
    if (!ar_have_avx512()) return 0;
    for (int i = 0; i < n; i += 16) {
        float xi[16] = {0}, yi[16];
        const int m = n - i < 16 ? n - i : 16;
        memcpy(xi, x + i, sizeof(float) * (size_t)m);
        ar_exp_test(xi, yi);
        memcpy(y + i, yi, sizeof(float) * (size_t)m);
    }
    return 1;
#else
    (void)x, (void)n, (void)y;
    return 0;
#endif
}

int slm_attention_amx_build_kv(const slm_attn_rows *a, int j0, const uint8_t kv[32], int vec, uint16_t *kb,
                               uint16_t *vb) {
    if (!ar_takes(a) || (vec && !ar_have_avx512())) return 0;
    ar_block *b = aligned_alloc(64, sizeof *b); /* its tiles are 64-byte aligned */
    if (!b) return 0;
    memset(b, 0, sizeof *b);
    b->vec = vec;
    for (int t = 0; t < AR_TILE_KEYS; t++) b->kv[t] = kv[t] != 0;
    AR_NT_ANY(build_kv)(a, b, j0);
    const int np = ar_kv_pieces(a->kv_type);
    const size_t n = (size_t)a->head_dim * AR_TILE_KEYS;
    for (int x = 0; x < np; x++) {
        memcpy(kb + x * n, b->kb[x], n * sizeof(uint16_t));
        memcpy(vb + x * n, b->vb[x], n * sizeof(uint16_t));
    }
    free(b);
    return np;
}
