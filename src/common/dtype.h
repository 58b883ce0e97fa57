/* Element types. Numbering follows GGML's type ids so GGUF tensors map 1:1. */
#ifndef SLM_DTYPE_H
#define SLM_DTYPE_H

#include <stdint.h>
#include <stddef.h>

typedef enum slm_dtype {
    SLM_F32 = 0,
    SLM_F16 = 1,
    SLM_Q4_0 = 2,
    SLM_Q4_1 = 3,
    SLM_Q5_0 = 6,
    SLM_Q5_1 = 7,
    SLM_Q8_0 = 8,
    SLM_Q8_1 = 9,
    SLM_Q2_K = 10,
    SLM_Q3_K = 11,
    SLM_Q4_K = 12,
    SLM_Q5_K = 13,
    SLM_Q6_K = 14,
    SLM_Q8_K = 15,
    SLM_IQ2_XXS = 16,
    SLM_IQ2_XS = 17,
    SLM_IQ3_XXS = 18,
    SLM_IQ1_S = 19,
    SLM_IQ4_NL = 20,
    SLM_IQ3_S = 21,
    SLM_IQ2_S = 22,
    SLM_IQ4_XS = 23,
    SLM_I8 = 24,
    SLM_I16 = 25,
    SLM_I32 = 26,
    SLM_I64 = 27,
    SLM_F64 = 28,
    SLM_IQ1_M = 29,
    SLM_BF16 = 30,
    SLM_MXFP4 = 39,
    SLM_DTYPE_COUNT = 40
} slm_dtype;

typedef struct slm_dtype_info {
    const char *name;  /* "q8_0"; NULL for ids we do not know */
    uint32_t block;    /* elements per block (1 for plain types) */
    uint32_t bytes;    /* bytes per block */
} slm_dtype_info;

/* Repacked matrix layouts (staticlm's own; a GGUF file never holds them):
 * 16 consecutive rows of a Q4_0, Q6_K, Q8_0 or F16 matrix interleaved so that one
 * 64-byte vector holds 4 elements of each of the 16 rows (the int8 kernels'
 * panel layout), with the rows' scales side by side. A row takes the same
 * bytes as in the base type, so a matrix keeps its size and its offset;
 * the compiler repacks the matrices of N >= 16 rows (compiler/repack.c
 * documents the layout): the first N - N % 16 rows in groups of 16, the
 * last N % 16 rows (a vocabulary of 49159 or 100278) left in the base
 * layout after them. Row j's data is not contiguous: use
 * slm_dequantize_matrix_row. */
#define SLM_R16 0x80u 
#define SLM_Q4_0_R16 (SLM_R16 | SLM_Q4_0)
#define SLM_Q6_K_R16 (SLM_R16 | SLM_Q6_K)
#define SLM_Q8_0_R16 (SLM_R16 | SLM_Q8_0)
#define SLM_F16_R16 (SLM_R16 | SLM_F16) /* element e of the 16 rows side by side */
#define SLM_Q4_K_R16 (SLM_R16 | SLM_Q4_K)
#define SLM_Q5_K_R16 (SLM_R16 | SLM_Q5_K)
#define SLM_Q5_0_R16 (SLM_R16 | SLM_Q5_0)
#define SLM_IQ4_NL_R16 (SLM_R16 | SLM_IQ4_NL)
#define SLM_Q3_K_R16 (SLM_R16 | SLM_Q3_K)
#define SLM_IQ4_XS_R16 (SLM_R16 | SLM_IQ4_XS)
#define SLM_Q2_K_R16 (SLM_R16 | SLM_Q2_K)
#define SLM_Q4_1_R16 (SLM_R16 | SLM_Q4_1)
#define SLM_Q5_1_R16 (SLM_R16 | SLM_Q5_1)
#define SLM_MXFP4_R16 (SLM_R16 | SLM_MXFP4)
static inline int slm_is_r16(uint32_t t) { return (t & SLM_R16) != 0; }
static inline uint32_t slm_r16_base(uint32_t t) { return t & ~SLM_R16; }

/* NULL when the id is unknown (the repacked ids are known: same block
 * and bytes as their base type). */
const slm_dtype_info *slm_dtype_get(uint32_t t);
const char *slm_dtype_name(uint32_t t);
/* Bytes of a row of n elements; 0 when n is not a multiple of the block
 * size or the type is unknown. */
uint64_t slm_row_bytes(uint32_t t, uint64_t n);

/* IEEE half <-> float (exact, round-to-nearest-even). */
float slm_f16_to_f32(uint16_t h);
uint16_t slm_f32_to_f16(float f);

/* Q8_0: 32 int8 with one f16 scale, as GGML lays it out. */
#define SLM_QK8_0 32
typedef struct { uint16_t d; int8_t qs[SLM_QK8_0]; } slm_block_q8_0;

/* bfloat16 <-> float (the upper 16 bits of an IEEE single; to-bf16 rounds to
 * nearest even, NaN stays NaN). */
float slm_bf16_to_f32(uint16_t h);
uint16_t slm_f32_to_bf16(float f);

/* GGML block layouts, byte for byte as GGUF stores them (all fields little
 * endian; scales are IEEE halves stored as uint16_t). In every layout the
 * value of element i is a linear function of its small integer code. */

/* Q4_0: 32 elements; x = (q - 8) * d, q in [0, 15]. Byte j holds element j
 * in its low nibble and element j + 16 in its high nibble. */
#define SLM_QK4_0 32
typedef struct { uint16_t d; uint8_t qs[SLM_QK4_0 / 2]; } slm_block_q4_0;

/* Q4_1: 32 elements; x = q * d + m, q in [0, 15]; nibbles as Q4_0. */
#define SLM_QK4_1 32
typedef struct { uint16_t d, m; uint8_t qs[SLM_QK4_1 / 2]; } slm_block_q4_1;

/* K-quants: super-blocks of 256 elements. */
#define SLM_QK_K 256
#define SLM_K_SCALE_SIZE 12

/* Q4_K: 8 sub-blocks of 32; x = d * sc[s] * q - dmin * mn[s], q in [0, 15].
 * scales[12] packs the eight 6-bit (sc, mn) pairs (slm_get_scale_min_k4).
 * qs: per 64 elements, 32 bytes: low nibbles elements 0..31, high 32..63. */
typedef struct {
    uint16_t d;                          /* super-block scale for sc (f16) */
    uint16_t dmin;                       /* super-block scale for mn (f16) */
    uint8_t scales[SLM_K_SCALE_SIZE];    /* 6-bit sc and mn, packed */
    uint8_t qs[SLM_QK_K / 2];            /* 4-bit codes */
} slm_block_q4_K;

/* Q5_K: as Q4_K with a fifth bit: q = nibble + 16 * bit; for the 64-element
 * chunk c, bit 2c of qh[l] belongs to element 64c + l, bit 2c + 1 to
 * element 64c + 32 + l. q in [0, 31]. */
typedef struct {
    uint16_t d;                          /* super-block scale for sc (f16) */
    uint16_t dmin;                       /* super-block scale for mn (f16) */
    uint8_t scales[SLM_K_SCALE_SIZE];    /* 6-bit sc and mn, packed */
    uint8_t qh[SLM_QK_K / 8];            /* fifth bits */
    uint8_t qs[SLM_QK_K / 2];            /* low 4 bits */
} slm_block_q5_K;

/* Q6_K: 16 sub-blocks of 16; x = d * scales[i / 16] * (q - 32), q in [0, 63].
 * Per 128 elements: ql 64 bytes (low nibbles of 0..31 and 32..63, high
 * nibbles of 64..95 and 96..127), qh 32 bytes (2 bits each of l, l + 32,
 * l + 64, l + 96 at shifts 0, 2, 4, 6). */
typedef struct {
    uint8_t ql[SLM_QK_K / 2];            /* low 4 bits */
    uint8_t qh[SLM_QK_K / 4];            /* high 2 bits */
    int8_t scales[SLM_QK_K / 16];        /* 8-bit sub-block scales */
    uint16_t d;                          /* super-block scale (f16) */
} slm_block_q6_K;

/* Q5_0: 32 elements; x = (q - 16) * d, q in [0, 31]. Nibbles as Q4_0; the
 * fifth bit of element j is bit j of qh read as a little-endian uint32. */
#define SLM_QK5_0 32
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[SLM_QK5_0 / 2]; } slm_block_q5_0;

/* Q5_1: 32 elements; x = q * d + m, q in [0, 31]; bits as Q5_0. */
#define SLM_QK5_1 32
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[SLM_QK5_1 / 2]; } slm_block_q5_1;

/* IQ4_NL: 32 elements; x = d * slm_kvalues_iq4nl[q], q in [0, 15]; nibbles
 * as Q4_0. */
#define SLM_QK4_NL 32
typedef struct { uint16_t d; uint8_t qs[SLM_QK4_NL / 2]; } slm_block_iq4_nl;
/* The 16 non-linear levels of IQ4_NL / IQ4_XS (GGML's kvalues_iq4nl). */
extern const int8_t slm_kvalues_iq4nl[16];

/* MXFP4 (OCP microscaling FP4, gpt-oss's expert matrices): 32 elements;
 * x = slm_e8m0_to_f32_half(e) * slm_kvalues_mxfp4[q], q in [0, 15]; nibbles
 * as Q4_0. The levels are twice the E2M1 values (0, 0.5, 1, 1.5, 2, 3, 4, 6
 * and their negatives), so the shared power of two is halved. */
#define SLM_QK_MXFP4 32
typedef struct { uint8_t e; uint8_t qs[SLM_QK_MXFP4 / 2]; } slm_block_mxfp4;
/* GGML's kvalues_mxfp4: 2 x E2M1, small integers (|value| <= 12). */
extern const int8_t slm_kvalues_mxfp4[16];
/* An E8M0 scale halved, 2^(e - 128), as GGML's ggml_e8m0_to_fp32_half:
 * the float with exponent field e - 1; e = 0 and 1 are the subnormals
 * 2^-128 (bits 0x00200000) and 2^-127 (0x00400000). e = 255 (NaN in the
 * OCP format) reads as 2^127, as GGML's does. */
static inline float slm_e8m0_to_f32_half(uint8_t e) {
    const union { uint32_t u; float f; } v = {e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23};
    return v.f;
}

/* IQ4_XS: 8 sub-blocks of 32; x = d * (ls[s] - 32) * slm_kvalues_iq4nl[q].
 * ls[s] is 6 bits: low 4 in nibble s % 2 of scales_l[s / 2], high 2 at bit
 * 2s of scales_h. qs: 16 bytes per sub-block, nibbles as Q4_0. */
typedef struct {
    uint16_t d;                          /* super-block scale (f16) */
    uint16_t scales_h;                   /* high 2 bits of the 8 scales */
    uint8_t scales_l[SLM_QK_K / 64];     /* low 4 bits of the 8 scales */
    uint8_t qs[SLM_QK_K / 2];            /* 4-bit indices */
} slm_block_iq4_xs;

/* Q2_K: 16 sub-blocks of 16; x = d * (sc & 15) * q - dmin * (sc >> 4),
 * sc = scales[s], q in [0, 3]. Element 128h + 32j + l (j 0..3, l 0..31)
 * has its code at bits 2j of qs[32h + l]; its sub-block is its index / 16. */
typedef struct {
    uint8_t scales[SLM_QK_K / 16];       /* 4-bit scale | 4-bit min << 4 */
    uint8_t qs[SLM_QK_K / 4];            /* 2-bit codes */
    uint16_t d;                          /* super-block scale for scales (f16) */
    uint16_t dmin;                       /* super-block scale for mins (f16) */
} slm_block_q2_K;

/* Q3_K: 16 sub-blocks of 16; x = d * (sc[s] - 32) * q, q in [-4, 3]: the
 * low 2 bits as Q2_K's, minus 4 when the element's hmask bit is clear
 * (element 128h + 32j + l: bit 4h + j of hmask[l]). The 6-bit sc[s] are
 * packed in scales[12] (slm_get_scale_q3_k). */
typedef struct {
    uint8_t hmask[SLM_QK_K / 8];         /* high bits, inverted sign of -4 */
    uint8_t qs[SLM_QK_K / 4];            /* low 2 bits */
    uint8_t scales[12];                  /* 6-bit scales, packed */
    uint16_t d;                          /* super-block scale (f16) */
} slm_block_q3_K;

/* ---- the i-quants of 1.5-3.4 bits (common/dtype_iq.c) --------------------
 * Super-blocks of 256 elements in 8 sub-blocks of 32; codes index grids of
 * 8 (IQ2, IQ1) or 4 (IQ3) values. Sign bytes: bit j negates element j of a
 * group of 8; where only 7 bits are stored (IQ2_XXS, IQ2_XS, IQ3_XXS) the
 * eighth makes the count of negatives even (slm_iq_signs). */
typedef struct slm_iq_grids {
    uint64_t iq2xxs[256], iq2xs[512], iq2s[1024]; /* 8 bytes each, values 8, 25, 43 */
    uint32_t iq3xxs[256], iq3s[512];              /* 4 bytes: 4..62; 1..15 odd */
    uint64_t iq1s8[2048];                         /* 8 int8 each: 8 x the grid's -1, 0, 1 */
    uint64_t sign7[128]; /* 7 sign bits as 8 byte masks (0xFF: negative), the eighth by parity */
} slm_iq_grids;
/* The expanded grids (built once, thread-safe); slm_iq_grids_fast is the
 * kernels' inline form (one load once they are built). */
const slm_iq_grids *slm_iq_grids_get(void);
extern const slm_iq_grids *slm_iq_grids_built; /* read and written with __atomic builtins */
static inline const slm_iq_grids *slm_iq_grids_fast(void) {
    const slm_iq_grids *g = __atomic_load_n(&slm_iq_grids_built, __ATOMIC_ACQUIRE);
    return g ? g : slm_iq_grids_get();
}
static inline uint8_t slm_iq_signs(unsigned s7) {
    return (uint8_t)(s7 | (unsigned)__builtin_parity(s7) << 7);
}

/* IQ2_XXS (2.06 bpw): per sub-block s, 8 bytes at qs + 4s: bytes 0-3 index
 * iq2xxs for the 4 groups of 8; the next 32 bits hold 4 x 7 sign bits
 * (group l at bit 7l) and the scale ls in bits 28-31:
 *   x = d * (0.5 + ls) / 4 * grid * sign. */
typedef struct { uint16_t d; uint16_t qs[SLM_QK_K / 8]; } slm_block_iq2_xxs;
/* IQ2_XS (2.31 bpw): qs[4s + l]: grid index (iq2xs, 9 bits) | 7 sign bits
 * << 9; scales[s]: low nibble for groups 0-1, high for 2-3. */
typedef struct { uint16_t d; uint16_t qs[SLM_QK_K / 8]; uint8_t scales[SLM_QK_K / 32]; } slm_block_iq2_xs;
/* IQ2_S (2.56 bpw): qs[4s + l] the low 8 bits of an iq2s index, bits 2l,
 * 2l+1 of qh[s] its high 2; qs[32 + 4s + l] the 8 sign bits; scales as
 * IQ2_XS. */
typedef struct { uint16_t d; uint8_t qs[SLM_QK_K / 4]; uint8_t qh[SLM_QK_K / 32]; uint8_t scales[SLM_QK_K / 32]; } slm_block_iq2_s;
/* IQ3_XXS (3.06 bpw): qs[0..63] iq3xxs indices (two per group of 8); at
 * qs + 64 + 4s, 32 bits as IQ2_XXS's second word: x = d * (0.5 + ls) / 2 *
 * grid * sign. */
typedef struct { uint16_t d; uint8_t qs[3 * SLM_QK_K / 8]; } slm_block_iq3_xxs;
/* IQ3_S (3.44 bpw): qs[8s + i] the low 8 bits of an iq3s index, bit i of
 * qh[s] the ninth; signs[4s + l] the sign bits of group l; scales: a nibble
 * per sub-block (low for even s): x = d * (1 + 2 * nibble) * grid * sign. */
typedef struct {
    uint16_t d;
    uint8_t qs[SLM_QK_K / 4];
    uint8_t qh[SLM_QK_K / 32];
    uint8_t signs[SLM_QK_K / 8];
    uint8_t scales[SLM_QK_K / 64];
} slm_block_iq3_s;
/* IQ1_S (1.56 bpw): index of group l of sub-block s: qs[4s + l] | bits 3l..
 * 3l+2 of qh[s] << 8 (iq1s, values -1, 0, 1); qh[s] bits 12-14 the scale u,
 * bit 15 the delta's sign: x = d * (2u + 1) * (grid +- 1/8). */
typedef struct { uint16_t d; uint8_t qs[SLM_QK_K / 8]; uint16_t qh[SLM_QK_K / 32]; } slm_block_iq1_s;
/* IQ1_M (1.75 bpw): no d field: its f16 bits are the top nibbles of the
 * four 16-bit scale words (slm_iq1_m_scale); 3-bit scales per 16 elements
 * (word s / 2, bits 6 (s % 2) and 6 (s % 2) + 3); qh[2s + l / 2] >> 4 (l % 2):
 * index bits 8-10 in bits 0-2, the delta's sign (per group of 8) in bit 3. */
typedef struct { uint8_t qs[SLM_QK_K / 8]; uint8_t qh[SLM_QK_K / 16]; uint8_t scales[SLM_QK_K / 32]; } slm_block_iq1_m;
float slm_iq1_m_scale(const slm_block_iq1_m *x);
static inline uint16_t slm_iq1_m_scale_bits(const slm_block_iq1_m *x) { /* the f16 bits, for inline use */
    const uint8_t *s = x->scales; /* the top nibble of each little-endian word */
    return (uint16_t)((s[1] >> 4) | (s[3] & 0xF0) | (s[5] >> 4) << 8 | (s[7] & 0xF0) << 8);
}
/* 1 for the grid i-quants above (IQ2_XXS .. IQ1_M), 0 otherwise. */
static inline int slm_iq_is(uint32_t t) {
    return t == SLM_IQ2_XXS || t == SLM_IQ2_XS || t == SLM_IQ2_S || t == SLM_IQ3_XXS || t == SLM_IQ3_S ||
           t == SLM_IQ1_S || t == SLM_IQ1_M;
}
/* Dequantize n elements (a multiple of 256) of an i-quant above; 0 for any
 * other type. */
int slm_dequantize_iq(uint32_t t, const void *x, float *y, int64_t n);

/* The 6-bit scale (0..63, before the -32) of sub-block s (0..15) of a Q3_K
 * block: low 4 bits in the low nibble of byte s (s < 8) or the high nibble
 * of byte s - 8; high 2 bits at bit 2 * (s / 4) of byte 8 + s % 4. */
static inline int slm_get_scale_q3_k(int s, const uint8_t *sc) {
    const int lo = s < 8 ? sc[s] & 0xF : sc[s - 8] >> 4;
    return lo | (((sc[8 + s % 4] >> (2 * (s / 4))) & 3) << 4);
}

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block. */
static inline void slm_get_scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *mn) {
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *mn = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Reference (scalar) conversions of one row of n elements (n a multiple of
 * the block size). The quantizers are plain round-to-nearest (no search for
 * the best scale); the output is bit-exact GGML layout. */
void slm_quantize_row_q8_0(const float *x, void *y, int64_t n);
void slm_quantize_row_q4_0(const float *x, void *y, int64_t n);
void slm_quantize_row_q4_1(const float *x, void *y, int64_t n);
void slm_quantize_row_q5_0(const float *x, void *y, int64_t n);
void slm_quantize_row_q5_1(const float *x, void *y, int64_t n);
void slm_quantize_row_q4_K(const float *x, void *y, int64_t n);
void slm_quantize_row_q5_K(const float *x, void *y, int64_t n);
void slm_quantize_row_q6_K(const float *x, void *y, int64_t n);
/* Round to nearest (ties to even) for |v| < 2^22, as GGML's nearest_int. */
static inline float slm_round_even(float v) { return (v + 12582912.0f) - 12582912.0f; }
/* IQ4_NL, IQ4_XS as llama-quantize writes them without an importance
 * matrix (GGML's quantize_iq4_nl / quantize_iq4_xs, bit for bit; quant_iq4.c). */
void slm_quantize_row_iq4_nl(const float *x, void *y, int64_t n);
void slm_quantize_row_iq4_xs(const float *x, void *y, int64_t n);
/* MXFP4 as GGML's quantize_row_mxfp4_ref (bit for bit): e from the block's
 * largest magnitude, floor(log2(amax)) - 2 + 127 (0 for a zero block, and
 * for amax < 2^-125, where GGML's conversion of a negative float is
 * undefined), then each element the nearest level (the lowest index on a
 * tie). */
void slm_quantize_row_mxfp4(const float *x, void *y, int64_t n);
/* Quantize a row to type t (F32, F16, BF16 and the quantizers above);
 * returns 0 if unsupported or n is not a multiple of the block size. */
int slm_quantize_row(uint32_t t, const float *x, void *y, int64_t n);
/* As slm_quantize_row, with the K-quants' scales fitted (least squares over
 * candidate steps, the error weighted toward large values) rather than
 * taken from the range: what compile --weight-type writes. The 32-block
 * types are round-to-nearest either way; IQ4_NL and IQ4_XS are fitted either way. */
int slm_quantize_row_fit(uint32_t t, const float *x, void *y, int64_t n);
/* Dequantize a row of any supported type to float; returns 0 if unsupported
 * (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K,
 * Q4_K, Q5_K, Q6_K, IQ4_XS and the i-quants are). Bit-exact with GGML's dequantize_row_*. */
int slm_dequantize_row(uint32_t t, const void *x, float *y, int64_t n);

/* ---- repacked matrices (layout: common/layout_r16.c; written by compiler/repack.c) */
/* 32 elements (block b of 32) of row c (0..15) of a 16-row group of a
 * repacked matrix of width k: codes as int8, half-block scales and a min
 * term (value = d[e / 16] * q[e] + m; m is 0 but for Q4_K/Q5_K). */
void slm_r16_block_i8(uint32_t rt, const void *group, int64_t k, int c, int64_t b, int8_t q[32], float d[2], float m[2]);
/* Row j of a matrix of n rows (base = row 0, k elements per row) of any
 * type the kernels take, repacked or not (a repacked one's last n % 16 rows
 * are in the base layout), to float; 0 if unsupported. */
int slm_dequantize_matrix_row(uint32_t t, const void *base, int64_t k, int64_t n, int64_t j, float *y);

#endif
