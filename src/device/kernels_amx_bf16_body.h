/* The AMX-BF16 tile kernel for BF16 weight matrices, written once
 * (docs/amx.md). kernels_amx.c includes it twice, like kernels_amx_body.h:
 * with the macros on the intrinsics (AMX hardware) and on the portable
 * emulation (device/amx_emu.h, for tests everywhere). It is written against
 * the tile operations of device/amx_ops.h (AMX_ATTR, AMX_NAME, T_*) and
 * needs besides:
 *   BF16_UNPACK(grp, wrow, c0, c1, k, k0, bt)  the VNNI-2 B tile of elements
 *                                 k0 .. k0+31 of columns c0..c1-1 of the
 *                                 16 at grp (slm_amx_bf16_unpack)
 * xb holds the activations as three planes of bf16 pieces, [3][rows][kpad]
 * (kpad: k rounded up to 32, the tail zero; x = p0 + p1 + p2, so with the
 * weights exact in bf16 the three products per K step give the fp32
 * product). Per column step (1-2 groups of 16 columns) and row
 * step (1-2 tiles of 16 rows): the C tiles zeroed, then per K step of 32
 * the groups' B tiles built on the stack (16 rows of 64 bytes: row r holds
 * elements 2r, 2r+1 of each column; columns outside [n0, n1) and elements
 * past k zero), three TDPBF16PS per C tile (pieces 2, 1, 0: the smallest
 * first), and at the end each C tile
 * stored once and its rows' columns in [n0, n1) copied to y. No per-block
 * scales: the fp32 accumulators stay in the tiles over all of K. */

AMX_ATTR static void AMX_NAME(bf16_tiles)(const slm_mm *mm, const uint16_t *xb) {
    const int k = mm->k, kpad = (k + 31) & ~31, M = mm->rows;
    const size_t lda = (size_t)kpad * 2, plane = (size_t)M * kpad; /* bytes per activation row; elements per piece */
    const int g_first = mm->n0 / 16, g_end = (mm->n1 + 15) / 16;
    slm_amx_plan pl;
    /* the compiler's step (the task's tiles) narrowed to this call, else 2 x 2 */
    const int own = mm->tiles[2] == 32;
    if (!slm_amx_plan_bf16(M, g_end - g_first, own ? mm->tiles[0] : 2, own ? mm->tiles[1] : 2, &pl)) return;
    T_CFG(&pl.cfg);
    const uint8_t *w = mm->w;
    _Alignas(64) float ct[16][16];
    _Alignas(64) uint16_t bt[2][512];
    for (int rt = 0; rt < pl.row_tiles; rt += pl.mt) {
        const int nrt = pl.row_tiles - rt < pl.mt ? pl.row_tiles - rt : pl.mt;
        int r0[2] = {0, 0};
        for (int i = 0; i < nrt; i++) r0[i] = slm_amx_row_start(&pl, M, rt + i);
        const uint16_t *a0 = xb + (size_t)r0[0] * kpad, *a1 = xb + (size_t)r0[nrt - 1] * kpad;
        for (int g = g_first; g < g_end; g += pl.nt) {
            const int ngt = g_end - g < pl.nt ? g_end - g : pl.nt;
            int c0[2] = {0, 0}, c1[2] = {0, 0}; /* the columns of group g + j inside [n0, n1), 0..16 */
            for (int j = 0; j < ngt; j++) {
                const int base = 16 * (g + j);
                c0[j] = mm->n0 > base ? mm->n0 - base : 0;
                c1[j] = mm->n1 - base < 16 ? mm->n1 - base : 16;
            }
            T_ZERO(0);
            if (ngt > 1) T_ZERO(1);
            if (nrt > 1) {
                T_ZERO(2);
                if (ngt > 1) T_ZERO(3);
            }
            for (int k0 = 0; k0 < kpad; k0 += 32) {
                for (int j = 0; j < ngt; j++)
                    BF16_UNPACK(w + (size_t)(g + j) * 16 * mm->wrow, mm->wrow, c0[j], c1[j], k, k0, bt[j]);
                T_LOAD(6, bt[0], 64);
                if (ngt > 1) T_LOAD(7, bt[1], 64);
                for (int q = 2; q >= 0; q--) { /* the activations' pieces, smallest first */
                    T_LOAD(4, a0 + q * plane + k0, lda);
                    if (nrt > 1) T_LOAD(5, a1 + q * plane + k0, lda);
                    T_DPBF(0, 4, 6);
                    if (ngt > 1) T_DPBF(1, 4, 7);
                    if (nrt > 1) {
                        T_DPBF(2, 5, 6);
                        if (ngt > 1) T_DPBF(3, 5, 7);
                    }
                }
            }
            for (int i = 0; i < nrt; i++)
                for (int j = 0; j < ngt; j++) {
                    /* tile 2i + j, constant per branch */
                    if (i == 0 && j == 0) T_STORE(0, ct, 64);
                    else if (i == 0) T_STORE(1, ct, 64);
                    else if (j == 0) T_STORE(2, ct, 64);
                    else T_STORE(3, ct, 64);
                    for (int r = 0; r < pl.tile_rows; r++) {
                        const int row = r0[i] + r;
                        if (row < 16 * (rt + i)) continue; /* the overlapping last tile: stored already */
                        memcpy(mm->y + (size_t)row * mm->ldy + 16 * (g + j) + c0[j], &ct[r][c0[j]],
                               sizeof(float) * (size_t)(c1[j] - c0[j]));
                    }
                }
        }
    }
    T_RELEASE();
}
