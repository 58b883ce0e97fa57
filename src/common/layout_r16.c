/* Repacked matrices (SLM_Q4_0_R16, SLM_Q5_0_R16, SLM_IQ4_NL_R16,
 * SLM_MXFP4_R16, SLM_Q8_0_R16, SLM_Q4_K_R16, SLM_Q5_K_R16, SLM_Q6_K_R16, SLM_Q3_K_R16,
 * SLM_IQ4_XS_R16, SLM_Q2_K_R16, SLM_Q4_1_R16, SLM_Q5_1_R16, SLM_F16_R16): the
 * compiler's kernel-friendly weight layout.
 *
 * Rows 16g .. 16g+15 of a matrix (the 16 output columns c = 0..15 of a
 * matrix multiply) form a group of 16 * row_bytes bytes at offset
 * 16g * row_bytes, the same bytes the rows take in the base type. A group is
 * one sequence of blocks of 32 elements (k / 32 of them), each holding its
 * codes and then its scales, so a kernel reads one stream of memory (a
 * separate stream of scales measured half the DRAM bandwidth: the
 * prefetchers follow one stream per group well, two poorly):
 *
 * Q4_0_R16, 288 bytes per block
 *   u8  codes[4][16][4]  quad g, row c, byte e: the low nibble is the code of
 *                        element 8g + e, the high nibble that of element
 *                        8g + 4 + e (codes 0..15; value = d * (code - 8))
 *   f16 d[16]            the block scales of the 16 rows
 * Q5_0_R16, 352 bytes per block
 *   u8  codes[4][16][4]  the low 4 bits of the codes, as Q4_0's
 *   u8  hb[16][4]        row c, byte e, bit v: bit 4 of the code of element
 *                        4v + e (codes 0..31; value = d * (code - 16))
 *   f16 d[16]
 * Q4_1_R16, 320 bytes per block, and Q5_1_R16, 384: as Q4_0_R16 and
 *   Q5_0_R16 (codes 0..15, 0..31), then
 *   f16 d[16], m[16]     the block scales and mins of the 16 rows (value =
 *                        d * code + m)
 * IQ4_NL_R16, 288 bytes per block: as Q4_0_R16, the codes indices into
 *   slm_kvalues_iq4nl (value = d * kvalues[code])
 * MXFP4_R16, 272 bytes per block
 *   u8  codes[4][16][4]  as Q4_0_R16's, indices into slm_kvalues_mxfp4
 *   u8  e[16]            the block scales of the 16 rows, E8M0 bytes as in
 *                        the file (value = slm_e8m0_to_f32_half(e) *
 *                        kvalues[code])
 * Q8_0_R16, 544 bytes per block
 *   u8  codes[8][16][4]  vector v, row c, byte e: code of element 4v + e plus
 *                        128 (value = d * (code - 128))
 *   f16 d[16]
 * F16_R16
 *   f16 w[k][16]         element e of the 16 rows side by side (one 32-byte load
 *                        is 16 output columns' weights for one input element)
 * Q6_K_R16, per super-block of 256 elements: f16 d[16] (the super-block
 * scales), then 8 blocks of 416 bytes:
 *   u8  lo[4][16][4]     the low 4 bits of the codes, laid out as Q4_0's
 *   u8  hi[2][16][4]     half h, row c, byte e: bits 2s..2s+1 are the high 2
 *                        bits of element 16h + 4s + e (codes 0..63; value =
 *                        d * sc * (code - 32))
 *   i8  sc[2][16]        the scale of elements 16h .. 16h+15 of the block
 * Q4_K_R16 (2304 bytes) and Q5_K_R16 (2816 bytes), per super-block of 256
 * elements: a 256-byte header with the 16 rows' scales, then 8 blocks:
 *   f16 d[16], dmin[16]  the super-block scales and min scales
 *   u8  sm[8][16]        block s, row c: the low 4 bits of its 6-bit scale,
 *                        ORed with the low 4 bits of its 6-bit min << 4
 *   u8  sch[2][16]       bits 2(s % 4) .. +1 of byte [s / 4][c]: the high 2
 *                        bits of block s's scale
 *   u8  mnh[2][16]       the same for the mins
 *   then per block s (elements 32s .. 32s+31):
 *   u8  codes[4][16][4]  as Q4_0's (codes 0..15; value = d * sc * code -
 *                        dmin * min)
 *   u8  hb[16][4]        Q5_K only: row c, byte e, bit v is bit 4 of the
 *                        code of element 4v + e (codes 0..31)
 * Q3_K_R16 (1760 bytes), per super-block of 256 elements: a 96-byte header,
 *   f16 d[16]            the super-block scales
 *   u8  sch[4][16]       byte [j / 4][c], bits 2(j % 4) .. +1: the high 2 bits
 *                        of the 6-bit scale of sub-block j (elements 16j ..
 *                        16j+15) of row c
 *   then 8 blocks of 208 bytes:
 *   u8  lo[2][16][4]     as Q6_K's hi: half h, row c, byte e: bits 2s..2s+1
 *                        are the low 2 bits of the code of element 16h + 4s + e
 *   u8  hb[16][4]        as Q5_0's: row c, byte e, bit v is bit 2 of the code
 *                        of element 4v + e (codes 0..7; value = d * (sc - 32)
 *                        * (code - 4))
 *   u8  scl[16]          row c: the low 4 bits of the scales of the block's
 *                        two halves (the first half in the low nibble)
 * Q2_K_R16 (1344 bytes), per super-block of 256 elements: a 64-byte header,
 *   f16 d[16], dmin[16]  the super-block scales and min scales
 *   then 8 blocks of 160 bytes:
 *   u8  lo[2][16][4]     as Q3_K_R16's (codes 0..3)
 *   u8  sm[2][16]        half h, row c: the 4-bit scale of elements 16h ..
 *                        16h+15, ORed with their 4-bit min << 4 (value =
 *                        d * sc * code - dmin * min)
 * IQ4_XS_R16 (2176 bytes), per super-block of 256 elements: a 128-byte header,
 *   f16 d[16]            the super-block scales
 *   u8  scl[4][16]       byte [s / 2][c], bits 4(s % 2) .. +3: the low 4 bits
 *                        of block s's 6-bit scale ls of row c
 *   u8  sch[2][16]       byte [s / 4][c], bits 2(s % 4) .. +1: its high 2 bits
 *   then 8 blocks of 256 bytes: the codes, as IQ4_NL_R16's (value = d *
 *   (ls - 32) * kvalues[code])
 *
 * So 64 bytes of codes hold 4 consecutive elements of each of the 16 rows:
 * vector v (0..7) of a block, elements 4v .. 4v+3, is the low (v even) or
 * high (v odd) nibble of quad v / 2, ORed for Q6_K with field v % 4 of half
 * v / 4 moved to bits 4..5 (for Q5_0 and Q5_K with bit v of hb moved to
 * bit 4; for IQ4_NL and MXFP4 looked up in their tables); for
 * Q8_0 it is bytes 64v .. 64v+63. One
 * dot-product instruction (VNNI dpbusd) then advances 16 output columns by
 * 4 elements, and the scales of 16 columns are one vector load. */
#include <string.h>

#include "common/dtype.h"

/* Element e (0..31) of a block sits in quad (e / 8), nibble (e / 4) & 1, byte e % 4. */
static inline int get_nibble(const uint8_t *codes, int c, int e) {
    const uint8_t v = codes[(e / 8) * 64 + c * 4 + e % 4];
    return ((e / 4) & 1) ? v >> 4 : v & 0xF;
}

/* Q4_K_R16 / Q5_K_R16: block b's 6-bit scale and min of row c. */
static void k_scale_min(const uint8_t *hdr, int c, int s, int *sc, int *mn) {
    const uint8_t sm = hdr[64 + 16 * s + c];
    *sc = (sm & 0xF) | ((hdr[192 + 16 * (s / 4) + c] >> (2 * (s % 4))) & 3) << 4;
    *mn = (sm >> 4) | ((hdr[224 + 16 * (s / 4) + c] >> (2 * (s % 4))) & 3) << 4;
}

void slm_r16_block_i8(uint32_t rt, const void *group, int64_t k, int c, int64_t b, int8_t q[32], float d[2], float m[2]) {
    const uint8_t *g = group;
    (void)k;
    uint16_t h;
    m[0] = m[1] = 0.0f;
    if (rt == SLM_Q4_K_R16 || rt == SLM_Q5_K_R16) {
        const int five = rt == SLM_Q5_K_R16;
        const uint8_t *sup = g + (b / 8) * (five ? 2816 : 2304), *blk = sup + 256 + (b % 8) * (five ? 320 : 256);
        for (int e = 0; e < 32; e++) {
            int v = get_nibble(blk, c, e);
            if (five) v |= ((blk[256 + c * 4 + e % 4] >> (e / 4)) & 1) << 4;
            q[e] = (int8_t)v;
        }
        int sc, mn;
        k_scale_min(sup, c, (int)(b % 8), &sc, &mn);
        memcpy(&h, sup + 2 * c, 2);
        d[0] = d[1] = slm_f16_to_f32(h) * (float)sc;
        memcpy(&h, sup + 32 + 2 * c, 2);
        m[0] = m[1] = -slm_f16_to_f32(h) * (float)mn;
        return;
    }
    if (rt == SLM_Q3_K_R16) {
        const uint8_t *sup = g + (b / 8) * 1760, *blk = sup + 96 + (b % 8) * 208;
        for (int e = 0; e < 32; e++) {
            const int lo = (blk[(e / 16) * 64 + c * 4 + e % 4] >> (2 * ((e / 4) % 4))) & 3;
            const int hi = (blk[128 + c * 4 + e % 4] >> (e / 4)) & 1;
            q[e] = (int8_t)((lo | hi << 2) - 4);
        }
        memcpy(&h, sup + 2 * c, 2);
        const float dd = slm_f16_to_f32(h);
        const int s = (int)(b % 8);
        for (int i = 0; i < 2; i++) {
            const int j = 2 * s + i;
            const int sc = ((blk[192 + c] >> (4 * i)) & 0xF) | ((sup[32 + 16 * (j / 4) + c] >> (2 * (j % 4))) & 3) << 4;
            d[i] = dd * (float)(sc - 32);
        }
        return;
    }
    if (rt == SLM_Q2_K_R16) {
        const uint8_t *sup = g + (b / 8) * 1344, *blk = sup + 64 + (b % 8) * 160;
        for (int e = 0; e < 32; e++) q[e] = (int8_t)((blk[(e / 16) * 64 + c * 4 + e % 4] >> (2 * ((e / 4) % 4))) & 3);
        memcpy(&h, sup + 2 * c, 2);
        const float dd = slm_f16_to_f32(h);
        memcpy(&h, sup + 32 + 2 * c, 2);
        const float dm = slm_f16_to_f32(h);
        for (int i = 0; i < 2; i++) {
            const uint8_t sm = blk[128 + 16 * i + c];
            d[i] = dd * (float)(sm & 0xF);
            m[i] = -(dm * (float)(sm >> 4));
        }
        return;
    }
    if (rt == SLM_IQ4_XS_R16) {
        const uint8_t *sup = g + (b / 8) * 2176, *blk = sup + 128 + (b % 8) * 256;
        const int s = (int)(b % 8);
        for (int e = 0; e < 32; e++) q[e] = slm_kvalues_iq4nl[get_nibble(blk, c, e)];
        memcpy(&h, sup + 2 * c, 2);
        const int ls = ((sup[32 + 16 * (s / 2) + c] >> (4 * (s % 2))) & 0xF) | ((sup[96 + 16 * (s / 4) + c] >> (2 * (s % 4))) & 3) << 4;
        d[0] = d[1] = slm_f16_to_f32(h) * (float)(ls - 32);
        return;
    }
    if (rt == SLM_Q8_0_R16) {
        const uint8_t *blk = g + b * 544;
        for (int e = 0; e < 32; e++) q[e] = (int8_t)(blk[(e / 4) * 64 + c * 4 + e % 4] ^ 0x80);
        memcpy(&h, blk + 512 + 2 * c, 2);
        d[0] = d[1] = slm_f16_to_f32(h);
        return;
    }
    if (rt == SLM_Q4_1_R16 || rt == SLM_Q5_1_R16) {
        const int five = rt == SLM_Q5_1_R16;
        const uint8_t *blk = g + b * (five ? 384 : 320), *sc = blk + (five ? 320 : 256);
        for (int e = 0; e < 32; e++)
            q[e] = (int8_t)(get_nibble(blk, c, e) | (five ? ((blk[256 + c * 4 + e % 4] >> (e / 4)) & 1) << 4 : 0));
        memcpy(&h, sc + 2 * c, 2);
        d[0] = d[1] = slm_f16_to_f32(h);
        memcpy(&h, sc + 32 + 2 * c, 2);
        m[0] = m[1] = slm_f16_to_f32(h);
        return;
    }
    if (rt == SLM_Q5_0_R16) {
        const uint8_t *blk = g + b * 352;
        for (int e = 0; e < 32; e++)
            q[e] = (int8_t)((get_nibble(blk, c, e) | ((blk[256 + c * 4 + e % 4] >> (e / 4)) & 1) << 4) - 16);
        memcpy(&h, blk + 320 + 2 * c, 2);
        d[0] = d[1] = slm_f16_to_f32(h);
        return;
    }
    if (rt == SLM_IQ4_NL_R16) {
        const uint8_t *blk = g + b * 288;
        for (int e = 0; e < 32; e++) q[e] = slm_kvalues_iq4nl[get_nibble(blk, c, e)];
        memcpy(&h, blk + 256 + 2 * c, 2);
        d[0] = d[1] = slm_f16_to_f32(h);
        return;
    }
    if (rt == SLM_MXFP4_R16) {
        const uint8_t *blk = g + b * 272;
        for (int e = 0; e < 32; e++) q[e] = slm_kvalues_mxfp4[get_nibble(blk, c, e)];
        d[0] = d[1] = slm_e8m0_to_f32_half(blk[256 + c]);
        return;
    }
    if (rt == SLM_Q4_0_R16) {
        const uint8_t *blk = g + b * 288;
        for (int e = 0; e < 32; e++) q[e] = (int8_t)(get_nibble(blk, c, e) - 8);
        memcpy(&h, blk + 256 + 2 * c, 2);
        d[0] = d[1] = slm_f16_to_f32(h);
        return;
    }
    const uint8_t *sup = g + (b / 8) * 3360, *blk = sup + 32 + (b % 8) * 416;
    for (int e = 0; e < 32; e++) {
        const int high = (blk[256 + (e / 16) * 64 + c * 4 + e % 4] >> (2 * ((e / 4) % 4))) & 3;
        q[e] = (int8_t)((get_nibble(blk, c, e) | high << 4) - 32);
    }
    memcpy(&h, sup + 2 * c, 2);
    const float dd = slm_f16_to_f32(h);
    const int8_t *sc = (const int8_t *)(blk + 384);
    d[0] = dd * sc[c];
    d[1] = dd * sc[16 + c];
}

int slm_dequantize_matrix_row(uint32_t t, const void *base, int64_t k, int64_t n, int64_t j, float *y) {
    const uint64_t wrow = slm_row_bytes(t, (uint64_t)k);
    if (!wrow) return 0;
    if (!slm_is_r16(t) || j >= n / 16 * 16) /* a repacked matrix's last n % 16 rows: the base layout */
        return slm_dequantize_row(slm_r16_base(t), (const uint8_t *)base + (size_t)j * wrow, y, k);
    const uint8_t *group = (const uint8_t *)base + (size_t)(j / 16) * 16 * wrow;
    if (t == SLM_F16_R16) {
        const uint16_t *g = (const uint16_t *)group;
        for (int64_t e = 0; e < k; e++) y[e] = slm_f16_to_f32(g[e * 16 + j % 16]);
        return 1;
    }
    switch (t) {
    case SLM_Q4_0_R16: case SLM_Q5_0_R16: case SLM_IQ4_NL_R16: case SLM_Q8_0_R16: case SLM_Q4_K_R16: case SLM_Q5_K_R16:
    case SLM_Q6_K_R16: case SLM_Q3_K_R16: case SLM_IQ4_XS_R16: case SLM_Q2_K_R16:
    case SLM_Q4_1_R16: case SLM_Q5_1_R16: case SLM_MXFP4_R16: break;
    default: return 0;
    }
    for (int64_t b = 0; b < k / 32; b++) {
        int8_t q[32];
        float d[2], m[2];
        slm_r16_block_i8(t, group, k, (int)(j % 16), b, q, d, m);
        for (int e = 0; e < 32; e++) y[32 * b + e] = d[e / 16] * (float)q[e] + m[e / 16];
    }
    return 1;
}

