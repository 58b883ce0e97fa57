/* Attention for one query row of the query heads that share one KV head. */
#ifndef SLM_ATTENTION_H
#define SLM_ATTENTION_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

typedef struct slm_attn_args {
    const float *q;       /* group rows of head_dim queries, q_stride apart */
    size_t q_stride;      /* floats between the group's query heads (head_dim) */
    int group;            /* query heads sharing this KV head */
    int head_dim;
    const void *K, *V;    /* row 0 of this KV head's keys / values: its first element, of kv_type */
    size_t ld;            /* elements between KV rows (kv_dim) */
    int kv_type;          /* SLM_F32 (0), SLM_F16 or SLM_Q8_0 (head_dim % 32 == 0) */
    const int32_t *mask;  /* [>= last + 1] 1 = valid KV row */
    int first, last;      /* KV rows to consider, inclusive (causal limit, window) */
    float scale;          /* 1 / sqrt(head_dim) */
    float *out;           /* group rows of head_dim outputs, out_stride apart */
    size_t out_stride;
    float *ml;            /* NULL, or [2 * group]: each head's softmax state, for merging
                             parts of the KV rows (decode key parts): ml[2g] the max score
                             (scaled, capped: the exponent's), ml[2g + 1] the sum of exp(score
                             - max) over the keys taken; -inf and 0 when the head took none */
    const float *alibi;   /* NULL, or [group] each head's ALiBi slope (jina-bert-v2): every score
                             (after the scale) minus slope * |qpos - j| for KV row j; the
                             per-row entries only (decode entries decline it) */
    int qpos;             /* the query's position (its KV row) for alibi */
} slm_attn_args;

/* Head h's ALiBi slope of `heads` heads with the largest bias max_bias
 * (llama.cpp's soft_max with max_bias: n = the largest power of two <=
 * heads; 2^(-max_bias (h + 1) / n) for h < n, else 2^(-max_bias (2 (h -
 * n) + 1) / (2 n))). */
static inline float slm_alibi_slope(int h, int heads, float max_bias) {
    int n = 1;
    while (2 * n <= heads) n *= 2;
    const float m0 = powf(2.0f, -max_bias / (float)n), m1 = powf(2.0f, -max_bias / 2.0f / (float)n);
    return h < n ? powf(m0, (float)(h + 1)) : powf(m1, (float)(2 * (h - n) + 1));
}

/* Attention for a block of consecutive query rows of the query heads that
 * share one KV head (prefill): slm_kernel_set.attention_rows. Row i is the
 * query row slm_attn_args would take with first[i], last[i]; outputs as
 * the per-row entry writes them (0 for a row with no valid KV row). */
#define SLM_ATTN_ROWS_MAX 64
typedef struct slm_attn_rows {
    const float *q;       /* head g of row i at q + i * q_ld + g * q_stride: head_dim floats */
    size_t q_ld;          /* floats between query rows */
    size_t q_stride;      /* floats between the group's query heads */
    int rows;             /* query rows, 1..SLM_ATTN_ROWS_MAX */
    int group;            /* query heads sharing this KV head, >= 1 */
    int head_dim;
    const void *K, *V;    /* row 0 of this KV head's keys / values, of kv_type */
    size_t ld;            /* elements between KV rows (kv_dim) */
    int kv_type;          /* SLM_F32, SLM_F16 or SLM_Q8_0 */
    const int32_t *mask;  /* [>= max last + 1] 1 = valid KV row */
    const int *first;     /* [rows] row i's KV rows [first[i], last[i]], inclusive */
    const int *last;      /* [rows] */
    float scale;          /* the query scale (1 / sqrt(head_dim)) */
    float *out;           /* head g of row i at out + i * out_ld + g * out_stride */
    size_t out_ld, out_stride;
    const float *alibi;   /* NULL, or [group] each head's ALiBi slope: every score (after the
                             scale) minus slope * |qpos[i] - j| for KV row j (the avx2 entry;
                             the others decline it) */
    const int32_t *qpos;  /* [rows] with alibi: row i's position (its KV row) */
} slm_attn_rows;

/* The amx sets' entries (attention_amx.c, docs/amx.md): Q·K^T and P·V on
 * AMX-BF16 tiles, flash-attention style. Return 1 when done, 0 (nothing
 * written) for a block they do not take: head_dim % 32 != 0 or > 256, a
 * q8_0 cache, rows outside 1..SLM_ATTN_ROWS_MAX; the hardware entry also
 * where the CPU lacks AMX-BF16 (or it is not compiled). The emulated entry
 * runs the same body on device/amx_emu.c (any machine; tests). */
int slm_attention_rows_amx(const slm_attn_rows *a);
/* The avx512 set's entry (attention.c): K^T and V of a tile of 32 keys
 * converted once for the whole block and group, scores 32 keys per FMA,
 * P V two query vectors per V load. Returns 0 (nothing written) for
 * head_dim % 16 != 0 or > 256, group > 64, a q8_0 cache with head_dim % 32,
 * rows outside 1..SLM_ATTN_ROWS_MAX, and off x86-64. */
int slm_attention_rows_avx512(const slm_attn_rows *a);
/* The avx2 set's entry (attention_rows_avx2.c): the same steps at 8 lanes
 * (tiles of 32 keys converted once, scores of two query vectors per K^T
 * load, P V 64 dims at a time in registers). Returns 0 (nothing written)
 * for head_dim % 8 != 0 or > 256, group > 64, a q8_0 cache with head_dim %
 * 32, rows outside 1..SLM_ATTN_ROWS_MAX, and off x86-64. */
int slm_attention_rows_avx2(const slm_attn_rows *a);
int slm_attention_rows_amx_emu(const slm_attn_rows *a);
/* The avx512 set's per-row entry for head_dim % 16 == 0 up to 256, group
 * <= 64 (attention_decode.c): K and V tiles of 8192 / head_dim keys (32 ..
 * 128) converted once for the group (read in place from an f16 cache, K
 * 16 rows at a time into an L1 chunk for two heads or more), 16 keys' scores per transposing
 * reduction, one softmax step per head and tile, outputs of up to 4 heads
 * in registers, the next tile prefetched. Returns 0 (nothing written) for other shapes, a KV
 * type other than f32 / f16 / q8_0 (head_dim % 32), and off x86-64;
 * slm_attention_avx512 then runs its own loop. */
int slm_attention_decode_avx512(const slm_attn_args *a);
/* The same steps at 8 lanes, the avx2 set's per-row entry for head_dim % 8
 * == 0 up to 256, group <= 64 (attention_decode_avx2.c): 8 keys' scores per
 * transposing reduction, outputs of one head 64 dims at a time in
 * registers (two heads per V load for head_dim <= 32). Returns 0 as above;
 * slm_attention_avx2 then runs its own loop. */
int slm_attention_decode_avx2(const slm_attn_args *a);

/* For test_amx_attention: the emulated entry with the work around the
 * tiles (the bf16 splits, K^T and V as B tiles, softmax, rescale) in plain
 * C (vec 0) or in AVX-512 where the CPU has it (vec 1: what
 * slm_attention_rows_amx_emu does; the hardware entry always). */
int slm_attention_rows_amx_emu_path(const slm_attn_rows *a, int vec);
/* x[0..n) as the kernel splits it: three bf16 pieces into p0, p1, p2 and
 * their fp32 sums; vec 0 plain C, 1 AVX-512 (returns 0 where the CPU has
 * none or off x86-64, nothing written). */
int slm_attention_amx_split(const float *x, int n, int vec, uint16_t *p0, uint16_t *p1, uint16_t *p2, float *sum);
/* The AVX-512 softmax's exp of x[0..n) into y (0: none here). */
int slm_attention_amx_exp(const float *x, int n, float *y);
/* K^T and V of the KV tile of 32 keys from row j0 as the kernel's B tiles
 * (keys with kv[t] == 0 as zeros, never read): kb and vb get the pieces
 * [piece][head_dim * 32] the cache type has, returned (3 for f32, 2 for
 * f16; 0 for a block the kernel declines, or vec 1 without AVX-512). */
int slm_attention_amx_build_kv(const slm_attn_rows *a, int j0, const uint8_t kv[32], int vec, uint16_t *kb,
                               uint16_t *vb);

/* The kernel sets' attention entries (slm_kernel_set.attention; call it
 * through the active set). Each takes any head_dim and group: the AVX-512
 * variant runs head_dim % 16 == 0, the AVX2 variant head_dim % 8 == 0, and
 * anything else (or group > 64, head_dim > 512) the scalar reference. The
 * SIMD entries exist on x86-64 only, and run only on a CPU with the set's
 * features (device/kernels_select.c). */
void slm_attention_scalar(const slm_attn_args *a);
void slm_attention_avx2(const slm_attn_args *a);
void slm_attention_avx512(const slm_attn_args *a);
/* Plain C, one KV row at a time (any KV type, head_dim <= 512 unless f32):
 * scores capped as cap * tanh(s / cap) when cap > 0 (gemma2), else the
 * scalar set's attention for f16 / q8_0 caches. */
void slm_attention_plain(const slm_attn_args *a, float cap);

/* The kernel sets' KV stores (slm_kernel_set.kv_store): n floats of x as
 * the KV type (SLM_F32, SLM_F16: IEEE half, round to nearest even; SLM_Q8_0:
 * GGML's blocks, n % 32 == 0) at y. The x86 entries convert halves with
 * F16C; q8_0 uses the reference quantizer everywhere. */
void slm_kv_store_scalar(int kv_type, const float *x, void *y, int n);
void slm_kv_store_x86(int kv_type, const float *x, void *y, int n);

#endif
