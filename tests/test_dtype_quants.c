/* The weight types of llama-quantize's K-quant mixes beyond the main ones:
 * Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q2_K, Q3_K (its fallbacks for rows that are
 * not a multiple of 256, and the low-bit K-quants), the i-quants, and MXFP4
 * (gpt-oss's expert matrices).
 *  - hand-built blocks: bytes written here from GGML's layouts, the values
 *    computed here element by element, a few checked against numbers worked
 *    out by hand;
 *  - the int8 views of the kernels (slm_qblock2_i8, slm_qblock_i8) against
 *    the dequantizers;
 *  - every kernel set's matmul against a double-precision reference over
 *    shapes, rows, column tiles;
 *  - synthetic GGUF models (the project's writer) whose matrices are of
 *    these types, one type per file and all mixed in one, against the plain
 *    reference forward. */
#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "common/dtype.h"
#include "common/cpu.h"
#include "device/kernels.h"
#include "device/kernels_x86.h"
#include "format/gguf.h"
#include "format/model.h"
#include "t.h"
#include "t_gguf_llama.h"
#include "golden_iq.h"
#include "quants_rtn.h"
#include "ref_forward.h"
#include "runtime/runtime.h"
#include "rig.h"

static const uint32_t k_new[] = {SLM_Q5_0,    SLM_Q5_1,   SLM_IQ4_NL, SLM_IQ4_XS,  SLM_Q2_K,
                                 SLM_Q3_K,    SLM_IQ2_XXS, SLM_IQ2_XS, SLM_IQ2_S, SLM_IQ3_XXS,
                                 SLM_IQ3_S, SLM_IQ1_S,  SLM_IQ1_M, SLM_MXFP4};
#define NNEW (int)(sizeof k_new / sizeof k_new[0])
static const char *k_sets[] = {"scalar", "avx2", "avx512"};

/* The IQ4_NL levels, as GGML's kvalues_iq4nl lists them. */
static const int k_kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static double urand(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) / 9007199254740992.0;
}
static float nrand(void) { return (float)((urand() + urand() + urand() + urand() - 2.0) * 1.7320508); }

/* ---- hand-built blocks -------------------------------------------------- */

static void test_type_table(void) {
    static const struct { uint32_t id; const char *name; uint32_t block, bytes; } want[] = {
        {6, "q5_0", 32, 22},    {7, "q5_1", 32, 24},     {10, "q2_k", 256, 84},
        {11, "q3_k", 256, 110}, {20, "iq4_nl", 32, 18},  {23, "iq4_xs", 256, 136},
        {16, "iq2_xxs", 256, 66}, {17, "iq2_xs", 256, 74}, {22, "iq2_s", 256, 82},
        {18, "iq3_xxs", 256, 98}, {21, "iq3_s", 256, 110}, {19, "iq1_s", 256, 50},
        {29, "iq1_m", 256, 56}, {39, "mxfp4", 32, 17},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const slm_dtype_info *in = slm_dtype_get(want[i].id);
        CHECKF(in && !strcmp(in->name, want[i].name) && in->block == want[i].block && in->bytes == want[i].bytes,
               "type %u", want[i].id);
        CHECK(slm_row_bytes(want[i].id, 768) == (want[i].block == 32 ? 768 / 32 * want[i].bytes : 3 * want[i].bytes));
    }
    CHECK(slm_row_bytes(SLM_Q2_K, 576) == 0);
    for (int i = 0; i < 16; i++) CHECK(slm_kvalues_iq4nl[i] == k_kv[i]);
    const slm_dtype_info *r16 = slm_dtype_get(SLM_MXFP4_R16);
    CHECK(SLM_MXFP4_R16 == 167 && r16 && !strcmp(r16->name, "mxfp4_r16") && r16->block == 32 && r16->bytes == 17);
}

/* The 5-bit code of element e of a Q5 block: nibble e % 16 of qs (low for
 * e < 16), fifth bit e of qh. */
static int q5_code(const uint8_t *qs, const uint8_t *qh, int e) {
    const int nib = e < 16 ? qs[e] & 0xF : qs[e - 16] >> 4;
    return nib | (((qh[e / 8] >> (e % 8)) & 1) << 4);
}

static void test_blocks_q5_iq4nl(void) {
    float y[32];
    slm_block_q5_0 b0;
    b0.d = slm_f32_to_f16(0.5f);
    for (int j = 0; j < 16; j++) b0.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    const uint8_t qh[4] = {0xA5, 0x3C, 0x0F, 0xF0};
    memcpy(b0.qh, qh, 4);
    CHECK(slm_dequantize_row(SLM_Q5_0, &b0, y, 32));
    for (int e = 0; e < 32; e++)
        CHECKF(y[e] == 0.5f * (float)(q5_code(b0.qs, qh, e) - 16), "q5_0 y[%d]=%g", e, y[e]);
    /* by hand: e=1 code 1 (bit 1 of 0xA5 clear); e=16 code 15|16 (bit 0 of 0x0F) */
    CHECK(y[1] == -7.5f && y[16] == 7.5f && y[0] == 0.0f && y[31] == 0.0f);

    slm_block_q5_1 b1;
    b1.d = slm_f32_to_f16(0.25f);
    b1.m = slm_f32_to_f16(-2.0f);
    memcpy(b1.qs, b0.qs, 16);
    memcpy(b1.qh, qh, 4);
    CHECK(slm_dequantize_row(SLM_Q5_1, &b1, y, 32));
    for (int e = 0; e < 32; e++) CHECKF(y[e] == 0.25f * (float)q5_code(b1.qs, qh, e) - 2.0f, "q5_1 y[%d]=%g", e, y[e]);
    CHECK(y[1] == -1.75f && y[16] == 5.75f);

    slm_block_iq4_nl bn;
    bn.d = slm_f32_to_f16(2.0f);
    for (int j = 0; j < 16; j++) bn.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    CHECK(slm_dequantize_row(SLM_IQ4_NL, &bn, y, 32));
    for (int j = 0; j < 16; j++) {
        CHECKF(y[j] == 2.0f * (float)k_kv[j], "iq4_nl y[%d]=%g", j, y[j]);
        CHECKF(y[j + 16] == 2.0f * (float)k_kv[15 - j], "iq4_nl y[%d]=%g", j + 16, y[j + 16]);
    }
    CHECK(y[0] == -254.0f && y[16] == 226.0f);
}

/* ---- MXFP4 ------------------------------------------------------------------ */

/* The levels, as GGML's kvalues_mxfp4 lists them (2 x E2M1). */
static const int k_kv_fp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* The halved E8M0 scale 2^(e - 128), apart from the library: ldexp in
 * double, exact as a float for every e (e = 0, 1: the subnormals). */
static float fp4_scale(int e) { return (float)ldexp(1.0, e - 128); }

/* A plain quantizer for one block, as GGML's reference states it: e from
 * the largest magnitude (floor(log2(amax)) - 2 + 127; 0 for a zero block,
 * and below 2^-125 where GGML's conversion is undefined), then each element
 * the nearest level at that scale, the lowest index on a tie. */
static void ref_quant_fp4(const float *x, uint8_t out[17]) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    int e = amax > 0.0f ? (int)floorf(log2f(amax)) + 125 : 0;
    if (e < 0) e = 0;
    const float d = fp4_scale(e);
    uint8_t code[32];
    for (int j = 0; j < 32; j++) {
        int best = 0;
        for (int i = 1; i < 16; i++)
            if (fabsf((float)k_kv_fp4[i] * d - x[j]) < fabsf((float)k_kv_fp4[best] * d - x[j])) best = i;
        code[j] = (uint8_t)best;
    }
    out[0] = (uint8_t)e;
    for (int j = 0; j < 16; j++) out[1 + j] = (uint8_t)(code[j] | code[j + 16] << 4);
}

/* What GGML's quantize_row_mxfp4_ref wrote (llama.cpp's ggml-base) for the
 * 8 blocks of mx_fixture_x: e = 127, 124, 137, 1 and 0 (subnormal scales,
 * subnormal inputs), 227, 127 (exact midpoints: the ties), 0 (zeros). */
static const uint8_t k_fp4_ggml[8 * 17] = {
    0x7F, 0x6E, 0xEC, 0xB0, 0x24, 0x56, 0xED, 0xB9, 0x14, 0x56, 0xED, 0xC9, 0x13, 0x56, 0xED, 0xCA, 0x03,
    0x7C, 0xB9, 0x14, 0x56, 0xED, 0xC9, 0x13, 0x56, 0xED, 0xCA, 0x03, 0x46, 0x6E, 0xDB, 0x92, 0x45, 0x6E,
    0x89, 0x56, 0xED, 0xCA, 0x03, 0x46, 0x6E, 0xDB, 0x92, 0x45, 0x6E, 0xDB, 0x91, 0x35, 0x6E, 0xDC, 0xA1,
    0x01, 0xDB, 0x92, 0x45, 0x6E, 0xDB, 0x91, 0x35, 0x6E, 0xDC, 0xA1, 0x35, 0x6E, 0xEC, 0xB0, 0x24, 0x56,
    0x00, 0x35, 0x6E, 0xDC, 0xA1, 0x35, 0x6E, 0xEC, 0xB0, 0x24, 0x56, 0xED, 0xB9, 0x14, 0x56, 0xED, 0xC9,
    0xE3, 0xEC, 0xB0, 0x24, 0x56, 0xED, 0xB9, 0x14, 0x56, 0xED, 0xC9, 0x13, 0x56, 0xED, 0xCA, 0x03, 0x46,
    0x7F, 0x7F, 0xFF, 0xFE, 0xEE, 0xED, 0xDC, 0xCB, 0xB9, 0x90, 0x01, 0x13, 0x34, 0x45, 0x56, 0x66, 0x67,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};
static float mx_fixture_x(int b, int j) {
    static const int sh[8] = {0, -3, 10, -126, -127, 100, 0, 0};
    if (b == 7) return 0.0f;
    const float v = b == 6 ? (float)(j % 17 - 8) * 0.75f : (float)((j * 7 + b * 13) % 29 - 14) / 3.0f;
    return ldexpf(v, sh[b]);
}

static void test_block_mxfp4(void) {
    slm_block_mxfp4 b;
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    float y[32];
    static const int es[] = {0, 1, 2, 3, 100, 126, 127, 128, 200, 254, 255};
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++) {
        b.e = (uint8_t)es[i];
        CHECK(slm_dequantize_row(SLM_MXFP4, &b, y, 32));
        CHECKF(slm_e8m0_to_f32_half(b.e) == fp4_scale(es[i]), "e8m0 %d", es[i]);
        for (int j = 0; j < 16; j++) {
            CHECKF(y[j] == (float)k_kv_fp4[j] * fp4_scale(es[i]), "mxfp4 e=%d y[%d]=%g", es[i], j, y[j]);
            CHECKF(y[j + 16] == (float)k_kv_fp4[15 - j] * fp4_scale(es[i]), "mxfp4 e=%d y[%d]=%g", es[i], j + 16, y[j + 16]);
        }
    }
    /* by hand: e = 128 is d = 1 (the levels themselves), e = 127 halves them;
       e = 0 and 1 are GGML's subnormals 0x00200000 and 0x00400000 */
    b.e = 128;
    CHECK(slm_dequantize_row(SLM_MXFP4, &b, y, 32));
    CHECK(y[7] == 12.0f && y[16] == -12.0f && y[5] == 6.0f && y[8] == 0.0f && y[25] == 8.0f);
    b.e = 127;
    CHECK(slm_dequantize_row(SLM_MXFP4, &b, y, 32));
    CHECK(y[7] == 6.0f && y[3] == 1.5f && y[20] == -1.5f && y[29] == 1.0f);
    uint32_t bits;
    b.e = 0;
    CHECK(slm_dequantize_row(SLM_MXFP4, &b, y, 32));
    memcpy(&bits, &y[1], 4);
    CHECKF(bits == 0x00200000u, "e=0: level 1 is %08x", bits);
    b.e = 1;
    CHECK(slm_dequantize_row(SLM_MXFP4, &b, y, 32));
    memcpy(&bits, &y[1], 4);
    CHECKF(bits == 0x00400000u, "e=1: level 1 is %08x", bits);
    /* the quantizer by hand: amax 7 -> e = floor(log2 7) - 2 + 127 = 127, d = 0.5 (x / d = 12, -6, 1, 2, 3);
       0.3 -> 0.6: level 1; -0.25, 2.5, -5 (x / d = -0.5, 5, -10): halfway between two levels, the lower
       index (0, level 4, level -8); 7 -> 14: clamps to 12 */
    float x[32] = {0};
    x[0] = 6.0f, x[1] = -3.0f, x[2] = 0.5f, x[3] = 1.0f, x[4] = 1.5f, x[5] = 0.3f;
    x[16] = -0.25f, x[17] = 2.5f, x[18] = -5.0f, x[19] = 7.0f;
    slm_block_mxfp4 q;
    CHECK(slm_quantize_row(SLM_MXFP4, x, &q, 32));
    CHECK(q.e == 127);
    static const uint8_t want_lo[6] = {7, 13, 1, 2, 3, 1}, want_hi[4] = {0, 4, 14, 7};
    for (int j = 0; j < 6; j++) CHECKF((q.qs[j] & 0xF) == want_lo[j], "code %d: %d", j, q.qs[j] & 0xF);
    for (int j = 0; j < 4; j++) CHECKF((q.qs[j] >> 4) == want_hi[j], "code %d: %d", j + 16, q.qs[j] >> 4);
    for (int j = 6; j < 16; j++) CHECK(q.qs[j] == 0);
}

/* MXFP4's quantizer against GGML's own output on fixed inputs, and against
 * the plain quantizer above (bytes) and dequantizer (values) on random rows
 * of every magnitude from 2^-124 to 2^120. */
static void test_quant_mxfp4(void) {
    float x[256], y[256];
    uint8_t got[8 * 17], want[17];
    for (int b = 0; b < 8; b++)
        for (int j = 0; j < 32; j++) x[32 * b + j] = mx_fixture_x(b, j);
    CHECK(slm_quantize_row(SLM_MXFP4, x, got, 256));
    for (int b = 0; b < 8; b++) CHECKF(!memcmp(got + 17 * b, k_fp4_ggml + 17 * b, 17), "block %d differs from GGML's", b);
    int bad = 0, badv = 0;
    uint64_t rs = 0x6a09e667f3bcc909ull; /* its own generator: the other tests' data stay as they were */
    for (int r = 0; r < 400; r++) {
        const int sh = r % 245 - 124;
        for (int i = 0; i < 256; i++) {
            rs = rs * 6364136223846793005ull + 1442695040888963407ull;
            x[i] = ldexpf((float)((int64_t)(rs >> 11) - (1ll << 52)) / 4503599627370496.0f, sh) * (i % 64 == 3 ? 5.0f : 1.0f);
        }
        CHECK(slm_quantize_row(SLM_MXFP4, x, got, 256));
        CHECK(slm_dequantize_row(SLM_MXFP4, got, y, 256));
        for (int b = 0; b < 8; b++) {
            ref_quant_fp4(x + 32 * b, want);
            bad += memcmp(got + 17 * b, want, 17) != 0;
            const uint8_t *g = got + 17 * b;
            for (int j = 0; j < 32; j++) {
                const int code = j < 16 ? g[1 + j] & 0xF : g[1 + j - 16] >> 4;
                badv += y[32 * b + j] != (float)k_kv_fp4[code] * fp4_scale(g[0]);
            }
        }
    }
    CHECKF(bad == 0 && badv == 0, "mxfp4: %d blocks differ from the plain quantizer, %d values from the plain dequantizer",
           bad, badv);
}

static void test_block_iq4_xs(void) {
    static const int ls[8] = {0, 1, 31, 32, 33, 47, 62, 63};
    slm_block_iq4_xs b;
    b.d = slm_f32_to_f16(0.125f);
    /* by hand: scales_l nibbles (ls & 15) in pairs, scales_h 2 bits (ls >> 4) per sub-block */
    const uint8_t sl[4] = {0x10, 0x0F, 0xF1, 0xFE};
    memcpy(b.scales_l, sl, 4);
    b.scales_h = 0xFA90;
    for (int i = 0; i < 128; i++) b.qs[i] = (uint8_t)(i * 7 + 3);
    float y[256];
    CHECK(slm_dequantize_row(SLM_IQ4_XS, &b, y, 256));
    for (int e = 0; e < 256; e++) {
        const int s = e / 32, j = e % 32;
        const int idx = j < 16 ? b.qs[16 * s + j] & 0xF : b.qs[16 * s + j - 16] >> 4;
        const float want = 0.125f * (float)(ls[s] - 32) * (float)k_kv[idx];
        CHECKF(y[e] == want, "iq4_xs y[%d]=%g want %g", e, y[e], want);
    }
    /* by hand: e=200: sub-block 6 (ls 62), qs[104] = 219 = 0xDB: low nibble 11 -> 38 */
    CHECK(y[200] == 0.125f * 30.0f * 38.0f);
}

/* Q2_K / Q3_K: element e = 128h + 32j + l keeps its 2 low bits at bit 2j of
 * qs[32h + l]; sub-block e / 16. */
static int k2_low(const uint8_t *qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }

static void test_block_q2_K(void) {
    slm_block_q2_K b;
    b.d = slm_f32_to_f16(0.5f);
    b.dmin = slm_f32_to_f16(0.25f);
    for (int s = 0; s < 16; s++) b.scales[s] = (uint8_t)(s | ((15 - s) << 4));
    for (int i = 0; i < 64; i++) b.qs[i] = (uint8_t)(i * 37 + 11);
    float y[256];
    CHECK(slm_dequantize_row(SLM_Q2_K, &b, y, 256));
    for (int e = 0; e < 256; e++) {
        const int s = e / 16;
        const float want = 0.5f * (float)s * (float)k2_low(b.qs, e) - 0.25f * (float)(15 - s);
        CHECKF(y[e] == want, "q2_K y[%d]=%g want %g", e, y[e], want);
    }
    /* by hand: e=200: s 12, h 1, j 2, l 8: qs[40] = 0xD3, bits 4-5 = 1 -> 0.5*12*1 - 0.25*3 */
    CHECK(y[200] == 5.25f);
}

static void test_block_q3_K(void) {
    int u[16]; /* 6-bit scales before the -32 */
    for (int s = 0; s < 16; s++) u[s] = (s * 5 + 7) & 63;
    /* packed by hand: low nibbles of u[0..7] | low nibbles of u[8..15] << 4,
     * then the high 2 bits of u[i], u[i+4], u[i+8], u[i+12] in byte 8 + i */
    static const uint8_t packed[12] = {0xF7, 0x4C, 0x91, 0xE6, 0x3B, 0x80, 0xD5, 0x2A, 0x24, 0x38, 0x39, 0x79};
    for (int s = 0; s < 16; s++) CHECKF(slm_get_scale_q3_k(s, packed) == u[s], "q3_K scale %d", s);
    slm_block_q3_K b;
    b.d = slm_f32_to_f16(0.25f);
    memcpy(b.scales, packed, 12);
    for (int i = 0; i < 32; i++) b.hmask[i] = (uint8_t)(i * 29 + 5);
    for (int i = 0; i < 64; i++) b.qs[i] = (uint8_t)(i * 53 + 1);
    float y[256];
    CHECK(slm_dequantize_row(SLM_Q3_K, &b, y, 256));
    for (int e = 0; e < 256; e++) {
        const int hbit = (b.hmask[e % 32] >> (4 * (e / 128) + (e % 128) / 32)) & 1;
        const int q = k2_low(b.qs, e) - (hbit ? 0 : 4);
        const float want = 0.25f * (float)(u[e / 16] - 32) * (float)q;
        CHECKF(y[e] == want, "q3_K y[%d]=%g want %g", e, y[e], want);
    }
    /* by hand: e=150: s 9 (u 52), qs[54] = 47 -> low bits 3, hmask[22] = 131 bit 4 clear -> q = -1 */
    CHECK(y[150] == -5.0f);
}

/* ---- the i-quants against GGML's reference (tests/golden_iq.h) ----------- */

/* Blocks llama-quantize wrote, against the values gguf-py's dequantizer (an
 * implementation with its own copy of the grids) gives: the dequantizer, the
 * int8 view of the kernels, and a dot product of every kernel set. */
static void test_golden_iq(void) {
    const int ng = (int)(sizeof g_iq_golden / sizeof g_iq_golden[0]);
    CHECK(ng == 7);
    for (int gi = 0; gi < ng; gi++) {
        const uint32_t t = g_iq_golden[gi].type;
        const float *want = g_iq_golden[gi].vals;
        CHECKF(!strcmp(slm_dtype_name(t), g_iq_golden[gi].name), "type %u", t);
        float y[512];
        CHECK(slm_dequantize_row(t, g_iq_golden[gi].bytes, y, 512));
        double amax = 0;
        for (int e = 0; e < 512; e++) amax = fmax(amax, fabs(want[e]));
        int bad = 0, badv = 0;
        for (int e = 0; e < 512; e++) bad += fabs((double)y[e] - want[e]) > 1e-6 * amax;
        for (int b = 0; b < 16; b++) {
            int8_t q[32];
            float d[2], m[2];
            slm_qblock2_i8(t, g_iq_golden[gi].bytes, b, q, d, m);
            for (int e = 0; e < 32; e++) badv += fabs((double)(d[e / 16] * q[e] + m[e / 16]) - want[32 * b + e]) > 1e-6 * amax;
        }
        CHECKF(bad == 0 && badv == 0, "%s: %d values, %d int8-view values differ from GGML's", g_iq_golden[gi].name, bad,
               badv);
        CHECKF(amax > 0, "%s: an all-zero fixture", g_iq_golden[gi].name);
        /* one matmul column per set over the two blocks (decode, 1 row) */
        float x[512];
        double ref = 0, sa = 0;
        for (int e = 0; e < 512; e++) x[e] = nrand(), ref += (double)want[e] * x[e], sa += fabs((double)want[e] * x[e]);
        for (int si = 0; si < 3; si++) {
            if (!slm_kernels_select(k_sets[si])) continue;
            const size_t need = slm_matmul_scratch_bytes(t, 512, 1);
            uint8_t *scr = aligned_alloc(64, (need + 64) & ~(size_t)63);
            float out[1] = {0};
            slm_mm mm = {.w = g_iq_golden[gi].bytes, .wrow = slm_row_bytes(t, 512), .wtype = t, .k = 512, .n0 = 0,
                         .n1 = 1, .rows = 1, .x = x, .ldx = 512, .y = out, .ldy = 1, .scratch = scr};
            slm_kernels_active()->matmul(&mm);
            /* int8 activations: within 1% of the sum of |w x| */
            const double tol = si == 0 ? 1e-5 * sa : 1e-2 * sa;
            CHECKF(fabs(out[0] - ref) <= tol, "%s %s: dot %.6g vs %.6g", k_sets[si], g_iq_golden[gi].name, out[0], ref);
            free(scr);
        }
        slm_kernels_select(NULL);
    }
}

/* ---- the int8 views and the quantizers ---------------------------------- */

static void test_qblock_views(void) {
    for (int ti = 0; ti < NNEW; ti++) {
        const uint32_t t = k_new[ti];
        const int k = 512;
        float x[512], y[512];
        uint8_t buf[2048];
        for (int i = 0; i < k; i++) x[i] = nrand() + (i % 64 == 5 ? 4.0f : 0.0f);
        CHECK(rtn_quantize_row(t, x, buf, k));
        CHECK(slm_dequantize_row(t, buf, y, k));
        int bad2 = 0, bad1 = 0;
        for (int b = 0; b < k / 32; b++) {
            int8_t q[32];
            float d[2], m[2], m1;
            slm_qblock2_i8(t, buf, b, q, d, m);
            for (int e = 0; e < 32; e++) bad2 += d[e / 16] * q[e] + m[e / 16] != y[32 * b + e];
            slm_qblock_i8(t, buf, b, q, d, &m1);
            if (slm_qtype_kind(t) == 3) continue; /* Q2_K: two mins, not this view */
            for (int e = 0; e < 32; e++) bad1 += d[e / 16] * q[e] + m1 != y[32 * b + e];
        }
        CHECKF(bad2 == 0 && bad1 == 0, "%s: %d / %d elements differ", slm_dtype_name(t), bad2, bad1);
        CHECK(slm_qtype_kind(t) == slm_quant2_kind(t) && slm_qtype_kind(t) >= 0);
        CHECK(slm_matmul_supported(t));
    }
    CHECK(slm_qtype_kind(SLM_Q5_0) == 0 && slm_qtype_kind(SLM_Q3_K) == 1 && slm_qtype_kind(SLM_Q5_1) == 2 &&
          slm_qtype_kind(SLM_Q2_K) == 3 && slm_quant2_kind(SLM_Q4_K) == -1);
}

/* The test quantizers' round-trip error: catches a packing that disagrees
 * with the dequantizers (errors of whole code steps). */
static void test_round_trip(void) {
    /* maxrel: the worst |error| / the block's amax; rms: the row's RMS error
       over its RMS (0: not checked), both measured here with some margin */
    static const struct { uint32_t t; int blk; double maxrel, rms; } k_rt[] = {
        /* symmetric types: the side opposite the largest value clamps one step short */
        {SLM_Q5_0, 32, 0.065, 0},  {SLM_Q5_1, 32, 0.035, 0},  {SLM_IQ4_NL, 32, 0.12, 0},
        {SLM_IQ4_XS, 32, 0.2, 0},  {SLM_Q2_K, 16, 0.38, 0},   {SLM_Q3_K, 16, 0.28, 0},
        /* i-quants: a group of 8 takes the nearest of a few hundred grid
           points (no zero level in the IQ2/IQ3 grids), so one element can be
           far off; a packing that disagrees with the dequantizer shows in the RMS */
        {SLM_IQ2_XXS, 32, 1.0, 0.45}, {SLM_IQ2_XS, 16, 1.1, 0.4}, {SLM_IQ2_S, 16, 0.55, 0.35},
        {SLM_IQ3_XXS, 32, 0.9, 0.3}, {SLM_IQ3_S, 32, 0.25, 0.2}, {SLM_IQ1_S, 32, 0.8, 0.72},
        {SLM_IQ1_M, 16, 1.0, 0.6},
        /* x / d in [8, 16) for the largest: 8, 12, then 12 up to 16 (under a quarter of amax) */
        {SLM_MXFP4, 32, 0.25, 0},
    };
    const int n = 4096;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    uint8_t *q = malloc((size_t)n * 4);
    for (size_t ci = 0; ci < sizeof k_rt / sizeof k_rt[0]; ci++) {
        for (int i = 0; i < n; i++) x[i] = nrand() * (i % 512 < 256 ? 1.0f : 0.01f) + (i % 97 == 0 ? 5.0f : 0.0f);
        CHECK(rtn_quantize_row(k_rt[ci].t, x, q, n));
        CHECK(slm_dequantize_row(k_rt[ci].t, q, y, n));
        double worst = 0, se = 0, sx = 0;
        for (int b = 0; b < n / k_rt[ci].blk; b++) {
            double amax = 0;
            for (int e = 0; e < k_rt[ci].blk; e++) amax = fmax(amax, fabs(x[b * k_rt[ci].blk + e]));
            /* a super-block scale shared with larger sub-blocks quantizes a small sub-block's scale coarsely */
            double smax = 0;
            const int sb = slm_dtype_get(k_rt[ci].t)->block, b0 = b * k_rt[ci].blk / sb * sb;
            for (int e = b0; e < b0 + sb; e++) smax = fmax(smax, fabs(x[e]));
            for (int e = 0; e < k_rt[ci].blk; e++) {
                const double err = fabs((double)y[b * k_rt[ci].blk + e] - x[b * k_rt[ci].blk + e]);
                const double ref = fmax(amax, smax / 32.0);
                if (ref > 0) worst = fmax(worst, err / ref);
            }
        }
        /* the RMS over the rows' large-scale half (the small half's scales are coarse) */
        for (int i = 0; i < n; i++)
            if (i % 512 < 256) se += ((double)y[i] - x[i]) * ((double)y[i] - x[i]), sx += (double)x[i] * x[i];
        const double rms = sqrt(se / sx);
        CHECKF(worst <= k_rt[ci].maxrel, "%s: max err / amax %.4g (bound %.4g)", slm_dtype_name(k_rt[ci].t), worst,
               k_rt[ci].maxrel);
        CHECKF(k_rt[ci].rms == 0 || rms <= k_rt[ci].rms, "%s: rms err %.4g (bound %.4g)", slm_dtype_name(k_rt[ci].t),
               rms, k_rt[ci].rms);
        fprintf(stderr, "  %-7s max err/amax %.4f, rms err %.4f\n", slm_dtype_name(k_rt[ci].t), worst, rms);
    }
    free(x);
    free(y);
    free(q);
}

/* ---- matmul against the double reference ---------------------------------- */

typedef struct mcase {
    uint32_t t;
    int k, n, rows, ldx;
    uint8_t *w;
    double *wd, *ref, *bound_f, *bound_q;
    float *x;
} mcase;

static void case_make(mcase *c, uint32_t t, int k, int n, int rows) {
    c->t = t, c->k = k, c->n = n, c->rows = rows, c->ldx = k + 5;
    const uint64_t wrow = slm_row_bytes(t, (uint64_t)k);
    c->w = malloc((size_t)wrow * n);
    c->wd = malloc(sizeof(double) * k * n);
    c->x = malloc(sizeof(float) * (size_t)c->ldx * rows);
    c->ref = malloc(sizeof(double) * rows * n);
    c->bound_f = malloc(sizeof(double) * rows * n);
    c->bound_q = malloc(sizeof(double) * rows * n);
    float *row = malloc(sizeof(float) * k), *deq = malloc(sizeof(float) * k);
    for (int j = 0; j < n; j++) {
        const float scale = 0.02f * (1.0f + (float)(j % 5)), shift = j % 3 == 1 ? 0.01f : 0.0f; /* some rows off zero */
        for (int e = 0; e < k; e++) row[e] = nrand() * scale + shift;
        rtn_quantize_row(t, row, c->w + (size_t)j * wrow, k);
        slm_dequantize_row(t, c->w + (size_t)j * wrow, deq, k);
        for (int e = 0; e < k; e++) c->wd[(size_t)j * k + e] = deq[e];
    }
    for (int i = 0; i < rows; i++)
        for (int e = 0; e < k; e++) c->x[(size_t)i * c->ldx + e] = nrand() + (e % 61 == 7 ? 6.0f : 0.0f) + 0.3f;
    for (int i = 0; i < rows; i++) {
        const float *x = c->x + (size_t)i * c->ldx;
        for (int j = 0; j < n; j++) {
            const double *w = c->wd + (size_t)j * k;
            double s = 0, sa = 0, sq = 0;
            for (int e = 0; e < k; e++) s += w[e] * x[e], sa += fabs(w[e] * x[e]);
            /* int8 activations: |x - dx round(x / dx)| <= dx / 2, dx = amax / 127 per block of 32 */
            for (int b = 0; b < k / 32; b++) {
                double amax = 0, wa = 0;
                for (int e = 32 * b; e < 32 * b + 32; e++) amax = fmax(amax, fabs(x[e])), wa += fabs(w[e]);
                sq += amax / 127.0 / 2.0 * wa;
            }
            c->ref[(size_t)i * n + j] = s;
            c->bound_f[(size_t)i * n + j] = 1e-5 * sa + 1e-30;
            c->bound_q[(size_t)i * n + j] = sq * 1.0001 + 2e-5 * sa + 1e-30;
        }
    }
    free(row);
    free(deq);
}

static void case_free(mcase *c) { free(c->w), free(c->wd), free(c->x), free(c->ref), free(c->bound_f), free(c->bound_q); }

static uint8_t *g_scratch;
static size_t g_scratch_cap;

static int case_run(const mcase *c, int n0, int n1, const char *set, double *worst) {
    const int ldy = c->n + 2;
    float *y = malloc(sizeof(float) * (size_t)ldy * c->rows);
    for (int i = 0; i < ldy * c->rows; i++) y[i] = -12345.0f;
    const size_t need = slm_matmul_scratch_bytes(c->t, c->k, c->rows);
    if (need > g_scratch_cap) {
        free(g_scratch);
        g_scratch = aligned_alloc(64, (need + 63) & ~(size_t)63);
        g_scratch_cap = need;
    }
    slm_mm mm = {.w = c->w, .wrow = slm_row_bytes(c->t, (uint64_t)c->k), .wtype = c->t, .k = c->k, .n0 = n0, .n1 = n1,
                 .rows = c->rows, .x = c->x, .ldx = (size_t)c->ldx, .y = y, .ldy = (size_t)ldy, .scratch = g_scratch};
    slm_kernels_active()->matmul(&mm);
    const int int8 = strcmp(set, "scalar") != 0;
    int fails = 0;
    for (int i = 0; i < c->rows; i++)
        for (int j = 0; j < ldy; j++) {
            const float got = y[(size_t)i * ldy + j];
            if (j < n0 || j >= n1) {
                fails += got != -12345.0f;
                continue;
            }
            const double ref = c->ref[(size_t)i * c->n + j];
            const double bound = int8 ? c->bound_q[(size_t)i * c->n + j] : c->bound_f[(size_t)i * c->n + j];
            const double err = fabs(got - ref);
            if (!(err <= bound)) {
                if (fails < 3)
                    fprintf(stderr, "  %s %s k=%d n=%d rows=%d tile=[%d,%d) y[%d][%d]=%.9g ref=%.9g err=%.3g bound=%.3g\n",
                            set, slm_dtype_name(c->t), c->k, c->n, c->rows, n0, n1, i, j, got, ref, err, bound);
                fails++;
            }
            if (bound > 0 && err / bound > *worst) *worst = err / bound;
        }
    free(y);
    return fails;
}

static void test_matmul_shapes(void) {
    static const int ks[] = {32, 64, 96, 256, 288, 512, 768, 1536, 2880}; /* 2880: gpt-oss's width, 90 x 32 */
    static const int ns[] = {1, 3, 16, 17, 40};
    static const int rows_[] = {1, 2, 5, 8, 9, 33};
    int have[3];
    for (int si = 0; si < 3; si++)
        if (!(have[si] = slm_kernels_select(k_sets[si]))) fprintf(stderr, "  set %s: not on this CPU, skipped\n", k_sets[si]);
    for (int ti = 0; ti < NNEW; ti++) {
        const uint32_t t = k_new[ti];
        int cases[3] = {0}, fails[3] = {0};
        double worst[3] = {0};
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            if (ks[ki] % (int)slm_dtype_get(t)->block) continue;
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
                for (size_t ri = 0; ri < sizeof rows_ / sizeof rows_[0]; ri++) {
                    const int k = ks[ki], n = ns[ni], rows = rows_[ri];
                    if ((size_t)k * n * rows > 1500000) continue;
                    mcase c; /* made once (the test's quantizers are slow), run on every set */
                    case_make(&c, t, k, n, rows);
                    for (int si = 0; si < 3; si++) {
                        if (!have[si] || !slm_kernels_select(k_sets[si])) continue;
                        fails[si] += case_run(&c, 0, n, k_sets[si], &worst[si]);
                        cases[si]++;
                        if (n >= 3) {
                            fails[si] += case_run(&c, 1, n - 1, k_sets[si], &worst[si]);
                            fails[si] += case_run(&c, n / 2 | 1, n, k_sets[si], &worst[si]);
                            cases[si] += 2;
                        }
                    }
                    case_free(&c);
                }
        }
        for (int si = 0; si < 3; si++) {
            if (!have[si]) continue;
            CHECKF(cases[si] > 0 && fails[si] == 0, "%s %s: %d bad outputs in %d tiles", k_sets[si], slm_dtype_name(t),
                   fails[si], cases[si]);
            fprintf(stderr, "  %-6s %-6s %4d tiles, worst err / bound %.3f\n", k_sets[si], slm_dtype_name(t), cases[si],
                    worst[si]);
        }
    }
    slm_kernels_select(NULL);
}

/* The x86 sets' SIMD panel writer (kernels_x86_quant2.c) against the scalar
 * slm_pack_panel, byte for byte: every type of quant2 kinds 0-2, panels of
 * 8 and 16 columns, whole and cut (valid < nc) at a matrix edge. */
static void test_pack_panel_simd(void) {
#ifdef SLM_X86
    const slm_cpu *cpu = slm_cpu_features();
    if (!(cpu->avx2 && cpu->fma && cpu->f16c)) {
        printf("  skip: no AVX2 (the SIMD panel writer needs it)\n");
        return;
    }
    const int k = 512, n = 19, nb = k / 32;
    float row[512];
    for (int ti = 0; ti < NNEW; ti++) {
        const uint32_t t = k_new[ti];
        const int kind = slm_quant2_kind(t);
        if (kind < 0 || kind > 2) continue;
        const uint64_t wrow = slm_row_bytes(t, (uint64_t)k);
        uint8_t *w = malloc((size_t)wrow * n);
        for (int j = 0; j < n; j++) {
            for (int e = 0; e < k; e++) row[e] = nrand() * 0.02f * (1.0f + (float)(j % 4)) + (j % 3 == 1 ? 0.01f : 0.0f);
            rtn_quantize_row(t, row, w + (size_t)j * wrow, k);
        }
        for (int nc = 8; nc <= 16; nc += 8) {
            const size_t bytes = (size_t)nb * SLM_PANEL_BLOCK_BYTES(nc);
            uint8_t *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes);
            for (int c0 = 0; c0 < n; c0 += nc) {
                const int valid = n - c0 < nc ? n - c0 : nc;
                memset(a, 0xA5, bytes), memset(b, 0x5A, bytes);
                slm_pack_panel(t, w, wrow, c0, valid, nc, nb, a);
                slm_x86_quant2_pack_panel(t, w, wrow, c0, valid, nc, nb, b);
                CHECKF(!memcmp(a, b, bytes), "%s nc=%d c0=%d valid=%d: the SIMD panel differs from slm_pack_panel",
                       slm_dtype_name(t), nc, c0, valid);
            }
            free(a), free(b);
        }
        free(w);
    }
#endif
}

/* The decode kernels (kernels_x86_quant2.c, 1-4 rows) against a reference
 * on the int8 activations they take (slm_x86_quant_act_*: codes
 * round(x * 127 / amax) to nearest even, scale amax / 127 per block of 32),
 * within 1e-5 of the sum of |w x|: the int8 bounds of case_run pass a
 * half-block scale a few % off, this does not. Each row also has the bits
 * of a one-row call on it alone. */
static void test_decode_int8_exact(void) {
    const int k = 768, n = 19, rows = 4;
    for (int si = 1; si < 3; si++) {
        if (!slm_kernels_select(k_sets[si])) continue;
        for (int ti = 0; ti < NNEW; ti++) {
            const uint32_t t = k_new[ti];
            mcase c;
            case_make(&c, t, k, n, rows);
            double *ref = malloc(sizeof(double) * rows * n), *sa = malloc(sizeof(double) * rows * n);
            for (int i = 0; i < rows; i++)
                for (int j = 0; j < n; j++) {
                    const float *x = c.x + (size_t)i * c.ldx;
                    double s = 0, a = 0;
                    for (int b = 0; b < k / 32; b++) {
                        float amax = 0.0f;
                        for (int e = 32 * b; e < 32 * b + 32; e++) amax = fmaxf(amax, fabsf(x[e]));
                        const float id = amax > 0.0f ? 127.0f / amax : 0.0f, dx = amax / 127.0f;
                        double sb = 0, ab = 0;
                        for (int e = 32 * b; e < 32 * b + 32; e++) {
                            const float xs = x[e] * id; /* one rounding, as the kernels' multiply */
                            const double w = c.wd[(size_t)j * k + e], q = (double)nearbyintf(xs);
                            sb += w * q, ab += fabs(w * q);
                        }
                        s += dx * sb, a += dx * ab;
                    }
                    ref[(size_t)i * n + j] = s, sa[(size_t)i * n + j] = a;
                }
            const size_t need = slm_matmul_scratch_bytes(t, k, rows);
            uint8_t *scr = aligned_alloc(64, (need + 64) & ~(size_t)63);
            float y[4 * 19], y1[19];
            int bad = 0, diff = 0;
            double worst = 0;
            for (int nr = 1; nr <= rows; nr++) {
                slm_mm mm = {.w = c.w, .wrow = slm_row_bytes(t, (uint64_t)k), .wtype = t, .k = k, .n0 = 0, .n1 = n,
                             .rows = nr, .x = c.x, .ldx = (size_t)c.ldx, .y = y, .ldy = (size_t)n, .scratch = scr};
                slm_kernels_active()->matmul(&mm);
                for (int i = 0; i < nr; i++) {
                    slm_mm one = mm;
                    one.rows = 1, one.x = c.x + (size_t)i * c.ldx, one.y = y1;
                    slm_kernels_active()->matmul(&one);
                    for (int j = 0; j < n; j++) {
                        const float got = y[(size_t)i * n + j];
                        const double err = fabs(got - ref[(size_t)i * n + j]), tol = 1e-5 * sa[(size_t)i * n + j] + 1e-30;
                        worst = fmax(worst, err / tol);
                        if (!(err <= tol) && bad++ < 3)
                            fprintf(stderr, "  %s %s rows=%d y[%d][%d]=%.9g int8 ref=%.9g\n", k_sets[si], slm_dtype_name(t), nr, i, j,
                                    got, ref[(size_t)i * n + j]);
                        diff += memcmp(&got, &y1[j], sizeof got) != 0;
                    }
                }
            }
            CHECKF(bad == 0 && diff == 0, "%s %s: %d outputs off the int8 reference, %d differ from the row alone", k_sets[si],
                   slm_dtype_name(t), bad, diff);
            fprintf(stderr, "  %-6s %-7s worst err / tol %.3f\n", k_sets[si], slm_dtype_name(t), worst);
            free(scr), free(ref), free(sa);
            case_free(&c);
        }
    }
    slm_kernels_select(NULL);
}

/* ---- models of these types against the reference forward ------------------ */

typedef struct bufs {
    void *p[128];
    int n;
} bufs;

static void add_t(slm_gguf_writer *w, bufs *b, const char *name, int64_t cols, int64_t rows, uint32_t type, float scale,
                  float bias) {
    const size_t n = (size_t)(cols * rows);
    float *f = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) f[i] = bias + scale * nrand();
    const uint64_t rb = slm_row_bytes(type, (uint64_t)cols);
    void *data = f;
    if (type != SLM_F32) {
        data = malloc((size_t)rb * (size_t)rows);
        for (int64_t r = 0; r < rows; r++) CHECK(rtn_quantize_row(type, f + r * cols, (uint8_t *)data + r * rb, cols));
        free(f);
    }
    b->p[b->n++] = data;
    int64_t ne[2] = {cols, rows};
    CHECK(slm_gguf_add_tensor(w, name, type, rows > 1 ? 2 : 1, ne, data, rb * (uint64_t)rows) == SLM_OK);
}

/* A llama model (GQA) of width dim, FFN width hid, vocabulary vocab, with
 * matrices of types[0..8]: token_embd, attn_q, attn_k, attn_v, attn_output,
 * ffn_gate, ffn_up, ffn_down, output (none when tied: the embedding is the
 * LM head). */
typedef struct mdims { int dim, hid, vocab, tied; } mdims;
static int write_model_d(const char *path, const uint32_t types[9], uint64_t seed, mdims md) {
    enum { LAYERS = 2, HEADS = 4, KVH = 2 };
    const int DIM = md.dim, HID = md.hid, VOCAB = md.vocab;
    g_rng = seed;
    slm_gguf_writer *w = slm_gguf_writer_new();
    bufs b = {.n = 0};
    t_gguf_llama_keys(w, DIM, HID, LAYERS, HEADS, KVH, 128);
    const int kvd = DIM / HEADS * KVH;
    const float sd = 1.0f / sqrtf((float)DIM), sh = 1.0f / sqrtf((float)HID);
    add_t(w, &b, "token_embd.weight", DIM, VOCAB, types[0], 1.0f, 0.0f);
    for (int l = 0; l < LAYERS; l++) {
        char n[64];
#define NAME(x) (snprintf(n, sizeof n, "blk.%d." x, l), n)
        add_t(w, &b, NAME("attn_norm.weight"), DIM, 1, SLM_F32, 0.1f, 1.0f);
        add_t(w, &b, NAME("attn_q.weight"), DIM, DIM, types[1], sd, 0.0f);
        add_t(w, &b, NAME("attn_k.weight"), DIM, kvd, types[2], sd, 0.0f);
        add_t(w, &b, NAME("attn_v.weight"), DIM, kvd, types[3], sd, 0.0f);
        add_t(w, &b, NAME("attn_output.weight"), DIM, DIM, types[4], sd, 0.0f);
        add_t(w, &b, NAME("ffn_norm.weight"), DIM, 1, SLM_F32, 0.1f, 1.0f);
        add_t(w, &b, NAME("ffn_gate.weight"), DIM, HID, types[5], sd, 0.0f);
        add_t(w, &b, NAME("ffn_up.weight"), DIM, HID, types[6], sd, 0.0f);
        add_t(w, &b, NAME("ffn_down.weight"), HID, DIM, types[7], sh, 0.0f);
#undef NAME
    }
    add_t(w, &b, "output_norm.weight", DIM, 1, SLM_F32, 0.1f, 1.0f);
    if (!md.tied) add_t(w, &b, "output.weight", DIM, VOCAB, types[8], 2.0f * sd, 0.0f);
    slm_err err = {0};
    const slm_status st = slm_gguf_write(w, path, &err);
    CHECKF(st == SLM_OK, "write %s: %s", path, err.msg);
    slm_gguf_writer_free(w);
    for (int i = 0; i < b.n; i++) free(b.p[i]);
    return st == SLM_OK;
}
static int write_model(const char *path, const uint32_t types[9], uint64_t seed) {
    return write_model_d(path, types, seed, (mdims){256, 512, 96, 0});
}

/* Our logits at every position (prefill of `first` ids through chunks of
 * mpl rows, then decode) against the reference; the worst relative error. */
static double compare(const char *path, const int32_t *ids, int n, int first, int mpl) {
    rig r;
    if (!rig_open(&r, path, mpl, n)) return INFINITY;
    const int V = r.c.cfg.vocab_size;
    float *ref = malloc(sizeof(float) * (size_t)n * V);
    double worst = 0;
    slm_err err = {0};
    if (!ref_forward(&r.m, ids, n, ref)) {
        CHECKF(0, "reference forward failed on %s", path);
        worst = INFINITY;
    } else if (slm_rt_prefill(&r.rt, ids, first, &err)) {
        CHECKF(0, "prefill: %s", err.msg);
        worst = INFINITY;
    } else {
        for (int p = first - 1; p < n; p++) {
            if (p >= first && slm_rt_decode(&r.rt, ids[p], &err)) {
                CHECKF(0, "decode: %s", err.msg);
                worst = INFINITY;
                break;
            }
            double maxd = 0, maxr = 1e-6;
            for (int i = 0; i < V; i++) {
                maxd = fmax(maxd, fabs((double)r.rt.logits[i] - ref[(size_t)p * V + i]));
                maxr = fmax(maxr, fabs(ref[(size_t)p * V + i]));
            }
            if (isnan(r.rt.logits[0])) maxd = INFINITY;
            worst = fmax(worst, maxd / maxr);
        }
    }
    free(ref);
    rig_close(&r);
    return worst;
}

static void test_models_vs_reference(void) {
    int32_t ids[24];
    for (int i = 0; i < 24; i++) ids[i] = (int32_t)(urand() * 90);
    /* one file per type (all nine matrices of it), then a Q4_K_M-like mix
     * where Q, K, V (and gate, up) share their quantized input across types */
    uint32_t files[NNEW + 2][9];
    for (int ti = 0; ti < NNEW; ti++)
        for (int m = 0; m < 9; m++) files[ti][m] = k_new[ti];
    const uint32_t mix[9] = {SLM_Q5_0, SLM_Q5_1, SLM_Q2_K, SLM_IQ4_NL, SLM_Q3_K, SLM_IQ4_XS, SLM_Q2_K, SLM_Q4_K, SLM_Q6_K};
    memcpy(files[NNEW], mix, sizeof mix);
    /* an IQ2_M / IQ1_M-like mix of the i-quants */
    const uint32_t imix[9] = {SLM_IQ3_S, SLM_IQ2_S, SLM_IQ3_XXS, SLM_IQ4_XS, SLM_IQ2_XS, SLM_IQ1_M, SLM_IQ1_S, SLM_IQ2_XXS, SLM_Q5_K};
    memcpy(files[NNEW + 1], imix, sizeof imix);
    for (int f = 0; f <= NNEW + 1; f++) {
        char path[64];
        snprintf(path, sizeof path, "quants_%d.gguf", f);
        if (!write_model(path, files[f], 4321 + (uint64_t)f)) continue; /* written once, run on every set */
        const char *what = f < NNEW ? slm_dtype_name(k_new[f]) : f == NNEW ? "mix" : "imix";
        for (int si = 0; si < 3; si++) {
            if (!slm_kernels_select(k_sets[si])) continue;
            const double e1 = compare(path, ids, 24, 5, 64); /* prefill 5, decode 19 */
            const double e2 = compare(path, ids, 24, 20, 8); /* 20 ids through chunks of 8 rows */
            /* scalar: float dots (summation order only); SIMD: int8 activations */
            const double tol = si == 0 ? 1e-4 : 5e-2;
            CHECKF(e1 < tol && e2 < tol, "%s %s: logits rel err %.3g / %.3g vs reference", k_sets[si], what, e1, e2);
            fprintf(stderr, "  %-6s %-6s logits rel err %.2e / %.2e\n", k_sets[si], what, e1, e2);
        }
        unlink(path);
    }
    slm_kernels_select(NULL);
}

/* MXFP4 models at a width a multiple of 32 but not of 256 (288 = 9 x 32, FFN
 * 480; gpt-oss's 2880 is 90 x 32) and a vocabulary of 100 (6 groups of 16
 * repacked, 4 rows after them in the file layout), its LM head separate or
 * the embedding's (tied: the embedding rows then read out of mxfp4_r16),
 * every matrix MXFP4, against the reference forward on every set. */
static void test_models_mxfp4(void) {
    int32_t ids[24];
    for (int i = 0; i < 24; i++) ids[i] = (int32_t)(urand() * 100);
    uint32_t types[9];
    for (int m = 0; m < 9; m++) types[m] = SLM_MXFP4;
    for (int tied = 0; tied < 2; tied++) {
        const char *path = "quants_mxfp4.gguf";
        if (!write_model_d(path, types, 977 + (uint64_t)tied, (mdims){288, 480, 100, tied})) continue;
        { /* the layouts the run reads: the LM head (and a tied embedding) repacked with 4 rows after the groups */
            slm_model_file m;
            slm_err err = {0};
            CHECKF(!slm_model_open(&m, path, &err) && !slm_model_repack(&m, &err), "%s", err.msg);
            const slm_tensor *emb = slm_model_tensor(&m, "token_embd.weight"), *out = slm_model_tensor(&m, "output.weight");
            CHECK(m.cfg.tied_embeddings == tied && emb && emb->type == (tied ? SLM_MXFP4_R16 : SLM_MXFP4));
            CHECK(tied ? !out : out && out->type == SLM_MXFP4_R16);
            const slm_tensor *down = slm_model_tensor(&m, "blk.1.ffn_down.weight");
            CHECK(down && down->type == SLM_MXFP4_R16 && down->ne[0] == 480);
            slm_model_close(&m);
        }
        for (int si = 0; si < 3; si++) {
            if (!slm_kernels_select(k_sets[si])) continue;
            const double e1 = compare(path, ids, 24, 5, 64), e2 = compare(path, ids, 24, 20, 8);
            const double tol = si == 0 ? 1e-4 : 5e-2;
            CHECKF(e1 < tol && e2 < tol, "%s mxfp4 %s: logits rel err %.3g / %.3g vs reference", k_sets[si],
                   tied ? "tied" : "untied", e1, e2);
            fprintf(stderr, "  %-6s mxfp4 %-6s logits rel err %.2e / %.2e\n", k_sets[si], tied ? "tied" : "untied", e1, e2);
        }
        unlink(path);
    }
    slm_kernels_select(NULL);
}

int main(void) {
    T_RUN(test_type_table);
    T_RUN(test_blocks_q5_iq4nl);
    T_RUN(test_block_mxfp4);
    T_RUN(test_quant_mxfp4);
    T_RUN(test_block_iq4_xs);
    T_RUN(test_block_q2_K);
    T_RUN(test_block_q3_K);
    T_RUN(test_golden_iq);
    T_RUN(test_qblock_views);
    T_RUN(test_round_trip);
    T_RUN(test_matmul_shapes);
    T_RUN(test_decode_int8_exact);
    T_RUN(test_pack_panel_simd);
    T_RUN(test_models_vs_reference);
    T_RUN(test_models_mxfp4);
    free(g_scratch);
    T_DONE();
}
