/* Prefill attention on AMX-BF16 tiles, written once (docs/amx.md, "Prefill
 * attention on BF16 tiles"). attention_amx.c includes it twice: with the
 * macros on the intrinsics (AMX hardware) and on the portable emulation
 * (device/amx_emu.h, for tests everywhere). It is written against
 * the tile operations of device/amx_ops.h (AMX_ATTR, AMX_NAME, T_*) and
 * needs from attention_amx.c: ar_block (the block's state), AR_PIECES,
 * AR_TILE_KEYS, and the work around the tiles as AR_NT(step) (the Q split
 * qsplit, the B tiles of K^T and V build_kv, softmax, the output's rescale
 * and the final o / l finish: plain C or AVX-512, attention_amx.c).
 *
 * Every operand is split, x = x0 + x1 + x2 (|x_i| <= 2^-8i |x|), and every
 * product x y is the six tile products x_i y_j with i + j <= 2, smallest
 * first, into one fp32 C tile (AR_DP6; the three dropped, i + j >= 3, are
 * at most ~2^-24 of |x y| together); with an f16 cache K and V have no
 * third piece (ar_kv_pieces) and S and P V the five others (AR_DP5: the
 * one skipped adds zeros). Tiles (every one 16 rows x 64 bytes,
 * one configuration per call), while S = Q K^T:
 *   0, 1     S for keys 0..15 and 16..31 of the KV tile (fp32)
 *   2, 3, 4  Q pieces: 16 query rows x 32 dims of one head (bf16), one k step
 *   5, 6, 7  K^T pieces of keys 0..15, then of 16..31: VNNI-2,
 *            B[r][2c + e] = K[key c (+16)][dim 32 ks + 2r + e]
 * and while P V:
 *   0        P V for 16 dims (fp32), stored and added into the fp32 output
 *   1, 2, 3  P pieces: 16 rows x 32 keys (bf16)
 *   4, 5, 6  V pieces: VNNI-2, B[r][2d + e] = V[key 2r + e][dim 16 dc + d] */

/* C += A B with A in tiles a0..a0+2 and B in b0..b0+2 (the pieces): the
 * six products A_i B_j, i + j <= 2, smallest first. The tile numbers are
 * spelled out: the intrinsics paste them into the instruction. */
#define AR_DP6(c, a0, a1, a2, b0, b1, b2)                                                                              \
    do {                                                                                                               \
        T_DPBF(c, a2, b0);                                                                                               \
        T_DPBF(c, a1, b1);                                                                                               \
        T_DPBF(c, a0, b2);                                                                                               \
        T_DPBF(c, a1, b0);                                                                                               \
        T_DPBF(c, a0, b1);                                                                                               \
        T_DPBF(c, a0, b0);                                                                                               \
    } while (0)

/* AR_DP6 without A_0 B_2 (B_2 = 0: the same sums but for the sign of a
 * zero). */
#define AR_DP5(c, a0, a1, a2, b0, b1)                                                                                  \
    do {                                                                                                               \
        T_DPBF(c, a2, b0);                                                                                               \
        T_DPBF(c, a1, b1);                                                                                               \
        T_DPBF(c, a1, b0);                                                                                               \
        T_DPBF(c, a0, b1);                                                                                               \
        T_DPBF(c, a0, b0);                                                                                               \
    } while (0)

/* One head g (of the pass) against the KV tile in kb / vb: S, softmax, P V
 * into the fp32 output (o = o * corr + P V per 16 dims). */
AMX_ATTR static void AMX_NAME(head_tile)(const slm_attn_rows *a, ar_block *b, int g, int j0) {
    const int D = a->head_dim, nks = D / 32, f16 = ar_kv_pieces(a->kv_type) == 2;
    T_ZERO(0);
    T_ZERO(1);
    for (int ks = 0; ks < nks; ks++) {
        const size_t qo = (size_t)(g * nks + ks) * 16 * 32, ko = (size_t)(ks * 2) * 16 * 32;
        T_LOAD(2, b->qb[0] + qo, 64);
        T_LOAD(3, b->qb[1] + qo, 64);
        T_LOAD(4, b->qb[2] + qo, 64);
        if (f16) {
            T_LOAD(5, b->kb[0] + ko, 64); /* keys 0..15 */
            T_LOAD(6, b->kb[1] + ko, 64);
            AR_DP5(0, 2, 3, 4, 5, 6);
            T_LOAD(5, b->kb[0] + ko + 16 * 32, 64); /* keys 16..31 */
            T_LOAD(6, b->kb[1] + ko + 16 * 32, 64);
            AR_DP5(1, 2, 3, 4, 5, 6);
        } else {
            T_LOAD(5, b->kb[0] + ko, 64); /* keys 0..15 */
            T_LOAD(6, b->kb[1] + ko, 64);
            T_LOAD(7, b->kb[2] + ko, 64);
            AR_DP6(0, 2, 3, 4, 5, 6, 7);
            T_LOAD(5, b->kb[0] + ko + 16 * 32, 64); /* keys 16..31 */
            T_LOAD(6, b->kb[1] + ko + 16 * 32, 64);
            T_LOAD(7, b->kb[2] + ko + 16 * 32, 64);
            AR_DP6(1, 2, 3, 4, 5, 6, 7);
        }
    }
    T_STORE(0, b->s, AR_TILE_KEYS * sizeof(float));
    T_STORE(1, b->s + 16, AR_TILE_KEYS * sizeof(float));
    AR_NT(softmax)(a, b, g, j0);
    T_LOAD(1, b->pb[0], 64);
    T_LOAD(2, b->pb[1], 64);
    T_LOAD(3, b->pb[2], 64);
    float *o = b->o + (size_t)g * 16 * D;
    for (int dc = 0; dc < D / 16; dc++) {
        T_LOAD(4, b->vb[0] + (size_t)dc * 16 * 32, 64);
        T_LOAD(5, b->vb[1] + (size_t)dc * 16 * 32, 64);
        T_ZERO(0);
        if (f16) {
            AR_DP5(0, 1, 2, 3, 4, 5);
        } else {
            T_LOAD(6, b->vb[2] + (size_t)dc * 16 * 32, 64);
            AR_DP6(0, 1, 2, 3, 4, 5, 6);
        }
        T_STORE(0, b->pv, 64);
        AR_NT(rescale)(b, o, D, dc);
    }
}

/* Query rows [r0, r0 + nr) (nr <= 16), heads [h0, h0 + nh) of the group:
 * Q split into bf16 pieces, the KV tiles of the rows' ranges, the outputs. */
AMX_ATTR static void AMX_NAME(pass)(const slm_attn_rows *a, ar_block *b, int r0, int h0, int nh) {
    AR_NT(qsplit)(a, b, r0, h0, nh);
    memset(b->o, 0, (size_t)nh * 16 * a->head_dim * sizeof(float));
    for (int g = 0; g < nh; g++)
        for (int i = 0; i < 16; i++) b->m[g][i] = -INFINITY, b->l[g][i] = 0.0f;
    for (int j0 = b->kmin; j0 <= b->kmax; j0 += AR_TILE_KEYS) {
        uint32_t any = 0;
        for (int t = 0; t < AR_TILE_KEYS; t++) {
            const int key = j0 + t;
            int in = 0;
            if (key <= b->kmax && a->mask[key])
                for (int i = 0; i < b->nr && !in; i++) in = key >= b->first[i] && key <= b->last[i];
            b->kv[t] = (uint8_t)in;
            any |= (uint32_t)in << t;
        }
        b->kvm = any;
        if (!any) continue; /* the mask or the ranges rule the whole tile out */
        AR_NT(build_kv)(a, b, j0);
        for (int g = 0; g < nh; g++) AMX_NAME(head_tile)(a, b, g, j0);
    }
    AR_NT(finish)(a, b, r0, h0, nh);
}

AMX_ATTR static void AMX_NAME(rows)(const slm_attn_rows *a, ar_block *b) {
    _Alignas(64) uint8_t cfg[64] = {1}; /* palette 1, every tile 16 rows x 64 bytes */
    for (int t = 0; t < 8; t++) cfg[16 + 2 * t] = 64, cfg[48 + t] = 16;
    T_CFG(cfg);
    const int hc = AR_HEAD_DIMS / a->head_dim; /* heads per pass */
    for (int r0 = 0; r0 < a->rows; r0 += 16) {
        b->nr = a->rows - r0 < 16 ? a->rows - r0 : 16;
        b->kmin = INT32_MAX, b->kmax = -1;
        for (int i = 0; i < b->nr; i++) {
            b->first[i] = a->first[r0 + i] < 0 ? 0 : a->first[r0 + i];
            b->last[i] = a->last[r0 + i];
            if (b->first[i] > b->last[i]) continue;
            b->kmin = b->first[i] < b->kmin ? b->first[i] : b->kmin;
            b->kmax = b->last[i] > b->kmax ? b->last[i] : b->kmax;
        }
        for (int h0 = 0; h0 < a->group; h0 += hc)
            AMX_NAME(pass)(a, b, r0, h0, a->group - h0 < hc ? a->group - h0 : hc);
    }
    T_RELEASE();
}

#undef AR_DP6
#undef AR_DP5
