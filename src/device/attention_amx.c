/* Prefill attention on AMX-BF16 tiles (device/attention.h,
 * slm_attn_rows; docs/amx.md, "Prefill attention on BF16 tiles"): per
 * block of 16 query rows and pass of group heads, the KV tiles of 32 keys
 * of the rows' ranges, S = Q K^T and P V by TDPBF16PS on operands split
 * into three bf16 pieces (x = x0 + x1 + x2, exact for an fp32 or f16
 * value; each product the six piece products x_i y_j, i + j <= 2, into one
 * fp32 tile: fp32 accuracy), the scaling, masking and online softmax in
 * fp32. The body (attention_amx_body.h) is compiled twice: on the AMX
 * intrinsics and on the portable emulation (device/amx_emu.c), which
 * test_amx_attention checks against a double-precision reference. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common/cpu.h"
#include "common/dtype.h"
#include "device/amx_emu.h"
#include "device/attention.h"

#define AR_TILE_KEYS 32   /* keys per KV tile: the K of one P V product */
#define AR_MAX_HD 256    /* head_dim bound (K^T and V of one tile: 16 KiB per piece each) */
#define AR_HEAD_DIMS 512 /* group heads x head_dim per pass (Q 16 KiB per piece, O fp32 32 KiB) */
#define AR_PIECES 3      /* bf16 pieces per operand */

/* The state of one block of <= 16 query rows and one pass of heads; on
 * the caller's stack (about 184 KiB), nothing allocated. Every operand is
 * held as its bf16 pieces [0] (largest), [1], [2] (bf16_split). */
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
    uint8_t kv[AR_TILE_KEYS];                              /* key t of the tile taken by some row */
} ar_block;

/* x as x0 + x1 + x2, three bf16 rounded to nearest even in turn
 * (common/dtype.h): each remainder is exact in fp32 and each piece takes 8
 * of its bits, so the sum is x exactly for |x| >= 2^-100 (below, the
 * bf16 subnormals lose the last bits); |x1| <= 2^-8 |x|, |x2| <= 2^-16 |x|
 * (x2 = 0 for the 11 bits of an f16). Returns the sum (exact in fp32). A
 * NaN or infinity stays in x0, with x1 = x2 = 0. */
static inline float bf16_split(float x, uint16_t p[AR_PIECES]) {
    float sum = 0.0f, r = x;
    for (int i = 0; i < AR_PIECES; i++) {
        p[i] = isfinite(r) || i == 0 ? slm_f32_to_bf16(r) : 0;
        const float f = slm_bf16_to_f32(p[i]);
        sum += f, r -= f;
    }
    return sum;
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
    (void)bf16_split(f, p);
}

/* 1 if the tile kernel takes the block. */
static int ar_takes(const slm_attn_rows *a) {
    return a->head_dim > 0 && a->head_dim % 32 == 0 && a->head_dim <= AR_MAX_HD && a->group >= 1 &&
           (a->kv_type == SLM_F32 || a->kv_type == SLM_F16) && a->rows >= 1 && a->rows <= SLM_ATTN_ROWS_MAX;
}

/* ---- on the emulation (every machine) -------------------------------------- */
#define AMX_OPS_EMU
#include "device/amx_ops.h"
#include "device/attention_amx_body.h"
#define AMX_OPS_DONE
#include "device/amx_ops.h"


int slm_attention_rows_amx_emu(const slm_attn_rows *a) {
    if (!ar_takes(a)) return 0;
    ar_block b;
    emu_rows(a, &b);
    return 1;
}

/* ---- on AMX ---------------------------------------------------------------- */
#if defined(__x86_64__) && defined(__GNUC__) && (__GNUC__ >= 11 || defined(__clang__))
#include <immintrin.h>

#include "device/amx_ops.h"
#include "device/attention_amx_body.h"

int slm_attention_rows_amx(const slm_attn_rows *a) {
    const slm_cpu *c = slm_cpu_features();
    if (!(c->amx_tile && c->amx_bf16 && c->amx_os) || !ar_takes(a)) return 0;
    ar_block b;
    hw_rows(a, &b);
    return 1;
}
#else
int slm_attention_rows_amx(const slm_attn_rows *a) {
    (void)a;
    return 0;
}
#endif
