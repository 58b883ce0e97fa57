/* Prefill attention on AMX-BF16 tiles, written once (docs/amx.md, "Prefill
 * attention on BF16 tiles"). attention_amx.c includes it twice: with the
 * macros on the intrinsics (AMX hardware) and on the portable emulation
 * (device/amx_emu.h, for tests everywhere). It is written against
 * the tile operations of device/amx_ops.h (AMX_ATTR, AMX_NAME, T_*) and
 * needs from attention_amx.c: ar_block (the block's state), bf16_split (x
 * as three bf16 pieces), kv_split (one cache element split), AR_PIECES,
 * AR_TILE_KEYS.
 *
 * Every operand is split, x = x0 + x1 + x2 (|x_i| <= 2^-8i |x|), and every
 * product x y is the six tile products x_i y_j with i + j <= 2, smallest
 * first, into one fp32 C tile (AR_DP6; the three dropped, i + j >= 3, are
 * at most ~2^-24 of |x y| together). Tiles (every one 16 rows x 64 bytes,
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

/* K^T and V of KV tile [j0, j0 + 32) as B tiles: keys the block does not
 * take (kv[t] == 0: masked, past the end, outside every row's range) are
 * zeros and are never read. */
AMX_ATTR static void AMX_NAME(build_kv)(const slm_attn_rows *a, ar_block *b, int j0) {
    const int D = a->head_dim;
    const size_t rb = a->kv_type == SLM_F32 ? a->ld * sizeof(float) : (size_t)slm_row_bytes((uint32_t)a->kv_type, a->ld);
    for (int x = 0; x < AR_PIECES; x++) {
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
            for (int x = 0; x < AR_PIECES; x++) b->kb[x][ki] = kp[x], b->vb[x][vi] = vp[x];
        }
    }
}

/* One head's scores of the KV tile (s: [16][32] fp32, unscaled) into P
 * (split bf16) and the online softmax's state: keys outside a row's range
 * or masked are -inf; corr[i] rescales row i's output before this tile's
 * P V is added. The normalizer sums the P (its pieces' sum) that
 * multiplies V. */
AMX_ATTR static void AMX_NAME(softmax)(const slm_attn_rows *a, ar_block *b, int g, int j0) {
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
            sum += bf16_split(expf(s[t] - mnew), pp);
            for (int x = 0; x < AR_PIECES; x++) b->pb[x][i * AR_TILE_KEYS + t] = pp[x];
        }
        b->l[g][i] = b->l[g][i] * b->corr[i] + sum;
    }
}

/* One head g (of the pass) against the KV tile in kb / vb: S, softmax, P V
 * into the fp32 output (o = o * corr + P V per 16 dims). */
AMX_ATTR static void AMX_NAME(head_tile)(const slm_attn_rows *a, ar_block *b, int g, int j0) {
    const int D = a->head_dim, nks = D / 32;
    T_ZERO(0);
    T_ZERO(1);
    for (int ks = 0; ks < nks; ks++) {
        const size_t qo = (size_t)(g * nks + ks) * 16 * 32, ko = (size_t)(ks * 2) * 16 * 32;
        T_LOAD(2, b->qb[0] + qo, 64);
        T_LOAD(3, b->qb[1] + qo, 64);
        T_LOAD(4, b->qb[2] + qo, 64);
        T_LOAD(5, b->kb[0] + ko, 64); /* keys 0..15 */
        T_LOAD(6, b->kb[1] + ko, 64);
        T_LOAD(7, b->kb[2] + ko, 64);
        AR_DP6(0, 2, 3, 4, 5, 6, 7);
        T_LOAD(5, b->kb[0] + ko + 16 * 32, 64); /* keys 16..31 */
        T_LOAD(6, b->kb[1] + ko + 16 * 32, 64);
        T_LOAD(7, b->kb[2] + ko + 16 * 32, 64);
        AR_DP6(1, 2, 3, 4, 5, 6, 7);
    }
    T_STORE(0, b->s, AR_TILE_KEYS * sizeof(float));
    T_STORE(1, b->s + 16, AR_TILE_KEYS * sizeof(float));
    AMX_NAME(softmax)(a, b, g, j0);
    T_LOAD(1, b->pb[0], 64);
    T_LOAD(2, b->pb[1], 64);
    T_LOAD(3, b->pb[2], 64);
    float *o = b->o + (size_t)g * 16 * D;
    for (int dc = 0; dc < D / 16; dc++) {
        T_LOAD(4, b->vb[0] + (size_t)dc * 16 * 32, 64);
        T_LOAD(5, b->vb[1] + (size_t)dc * 16 * 32, 64);
        T_LOAD(6, b->vb[2] + (size_t)dc * 16 * 32, 64);
        T_ZERO(0);
        AR_DP6(0, 1, 2, 3, 4, 5, 6);
        T_STORE(0, b->pv, 64);
        for (int i = 0; i < b->nr; i++)
            for (int c = 0; c < 16; c++) {
                float *x = &o[(size_t)i * D + 16 * dc + c];
                *x = *x * b->corr[i] + b->pv[i * 16 + c];
            }
    }
}

/* Query rows [r0, r0 + nr) (nr <= 16), heads [h0, h0 + nh) of the group:
 * Q split into bf16 pieces, the KV tiles of the rows' ranges, the outputs. */
AMX_ATTR static void AMX_NAME(pass)(const slm_attn_rows *a, ar_block *b, int r0, int h0, int nh) {
    const int D = a->head_dim, nks = D / 32;
    for (int x = 0; x < AR_PIECES; x++) memset(b->qb[x], 0, (size_t)nh * 16 * D * sizeof(uint16_t));
    for (int g = 0; g < nh; g++)
        for (int i = 0; i < b->nr; i++) {
            const float *q = a->q + (size_t)(r0 + i) * a->q_ld + (size_t)(h0 + g) * a->q_stride;
            for (int d = 0; d < D; d++) {
                const size_t qi = ((size_t)(g * nks + d / 32) * 16 + i) * 32 + d % 32;
                uint16_t qp[AR_PIECES];
                (void)bf16_split(q[d], qp);
                for (int x = 0; x < AR_PIECES; x++) b->qb[x][qi] = qp[x];
            }
        }
    memset(b->o, 0, (size_t)nh * 16 * D * sizeof(float));
    for (int g = 0; g < nh; g++)
        for (int i = 0; i < 16; i++) b->m[g][i] = -INFINITY, b->l[g][i] = 0.0f;
    for (int j0 = b->kmin; j0 <= b->kmax; j0 += AR_TILE_KEYS) {
        int any = 0;
        for (int t = 0; t < AR_TILE_KEYS; t++) {
            const int key = j0 + t;
            int in = 0;
            if (key <= b->kmax && a->mask[key])
                for (int i = 0; i < b->nr && !in; i++) in = key >= b->first[i] && key <= b->last[i];
            b->kv[t] = (uint8_t)in;
            any |= in;
        }
        if (!any) continue; /* the mask or the ranges rule the whole tile out */
        AMX_NAME(build_kv)(a, b, j0);
        for (int g = 0; g < nh; g++) AMX_NAME(head_tile)(a, b, g, j0);
    }
    for (int g = 0; g < nh; g++)
        for (int i = 0; i < b->nr; i++) {
            float *out = a->out + (size_t)(r0 + i) * a->out_ld + (size_t)(h0 + g) * a->out_stride;
            const float *o = b->o + ((size_t)g * 16 + i) * D, l = b->l[g][i];
            for (int d = 0; d < D; d++) out[d] = l > 0.0f ? o[d] / l : 0.0f;
        }
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
