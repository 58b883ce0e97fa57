/* The AMX tile kernel, written once (docs/amx.md). kernels_amx.c includes
 * it twice: with the macros on the intrinsics (AMX hardware) and on the
 * portable emulation (device/amx_emu.h, for tests everywhere). It is written against
 * the tile operations of device/amx_ops.h (AMX_ATTR, AMX_NAME, T_*) and
 * needs besides:
 *   AMX_UNPACK(t, grp, k, b, bt, wd, wm)  block b of a group as a B tile (amx_unpack)
 *   AMX_EPI(acc, ct, wd, dx, wm, sx)  acc[0..15] += ct[c] * wd[c] * dx (+ wm[c] * sx when wm)
 * Per column step (1-2 groups of 16 columns, or 3 when the step is one row
 * tile: the task's tiles, chosen by the compiler) the groups' blocks are
 * unpacked once into the panel (amx_panel, in the scratch: signed VNNI-4 B
 * tiles of 8 rows of 64 bytes, row v = elements 4v..4v+3 of the 16
 * columns, the r16 layout's byte order, and the blocks' scales); then per
 * row step (1-2 tiles of 16 rows) and weight block of 32, per scale span
 * (32, or 16 for Q6_K's per-16 scales) one tile product per C tile, the
 * int32 products scaled into float accumulators. */

AMX_ATTR static void AMX_NAME(tiles)(const slm_mm *mm, const amx_xq *xq, const amx_panel *pn) {
    const int k = mm->k, nb = k / 32, M = mm->rows;
    const int span = slm_amx_span(mm->wtype), halves = 32 / span;
    const int g_first = mm->n0 / 16, g_end = (mm->n1 + 15) / 16;
    const int has_min = mm->wtype == SLM_Q4_K_R16 || mm->wtype == SLM_Q5_K_R16;
    slm_amx_plan pl;
    /* the compiler's step (the task's tiles), narrowed to this call's rows */
    if (mm->tiles[2] == span ? !slm_amx_plan_step(M, g_end - g_first, span, mm->tiles[0], mm->tiles[1], &pl)
                             : !slm_amx_plan_make(M, g_end - g_first, span, &pl))
        return;
    T_CFG(&pl.cfg);
    const uint8_t *w = mm->w;
    _Alignas(64) float acc[2][3][16][16];
    _Alignas(64) int32_t ct[16][16];
    for (int g = g_first; g < g_end; g += pl.nt) {
        const int ngt = g_end - g < pl.nt ? g_end - g : pl.nt;
        for (int j = 0; j < ngt; j++) /* the step's groups, unpacked once for every row step */
            for (int b = 0; b < nb; b++)
                AMX_UNPACK(mm->wtype, w + (size_t)(g + j) * 16 * mm->wrow, k, b, AMX_PT(pn, j, b, nb),
                           AMX_PD(pn, j, b, nb), AMX_PM(pn, j, b, nb));
        for (int rt = 0; rt < pl.row_tiles; rt += pl.mt) {
            const int nrt = pl.row_tiles - rt < pl.mt ? pl.row_tiles - rt : pl.mt;
            int r0[2];
            for (int i = 0; i < nrt; i++) r0[i] = slm_amx_row_start(&pl, M, rt + i);
            memset(acc, 0, sizeof acc);
            for (int b = 0; b < nb; b++) {
                for (int h = 0; h < halves; h++) {
                    T_LOAD(6, AMX_PT(pn, 0, b, nb) + 256 * h, 64);
                    if (ngt > 1) T_LOAD(7, AMX_PT(pn, 1, b, nb) + 256 * h, 64);
                    if (ngt > 2) T_LOAD(5, AMX_PT(pn, 2, b, nb) + 256 * h, 64); /* 1 x 3: tile 5 is the third B */
                    T_LOAD(4, xq->q + (size_t)r0[0] * k + 32 * b + span * h, (size_t)k);
                    if (nrt > 1) T_LOAD(5, xq->q + (size_t)r0[1] * k + 32 * b + span * h, (size_t)k);
                    T_ZERO(0);
                    T_DPBSSD(0, 4, 6);
                    if (ngt > 1) {
                        T_ZERO(1);
                        T_DPBSSD(1, 4, 7);
                    }
                    if (ngt > 2) {
                        T_ZERO(2);
                        T_DPBSSD(2, 4, 5);
                    }
                    if (nrt > 1) {
                        T_ZERO(2);
                        T_DPBSSD(2, 5, 6);
                        if (ngt > 1) {
                            T_ZERO(3);
                            T_DPBSSD(3, 5, 7);
                        }
                    }
                    for (int i = 0; i < nrt; i++)
                        for (int j = 0; j < ngt; j++) {
                            /* C tile 2i + j, a constant per branch as the instruction takes it */
                            if (i == 0 && j == 0) T_STORE(0, ct, 64);
                            else if (i == 0 && j == 1) T_STORE(1, ct, 64);
                            else if (i == 0 || j == 0) T_STORE(2, ct, 64); /* (0, 2) of 1 x 3, (1, 0) */
                            else T_STORE(3, ct, 64);
                            const float *wd = AMX_PD(pn, j, b, nb)[h], *wm = has_min && h == 0 ? AMX_PM(pn, j, b, nb) : NULL;
                            for (int r = 0; r < pl.tile_rows; r++) {
                                const size_t xi = (size_t)(r0[i] + r) * nb + b;
                                AMX_EPI(acc[i][j][r], ct[r], wd, xq->d[xi], wm, xq->s[xi]);
                            }
                        }
                }
            }
            for (int i = 0; i < nrt; i++)
                for (int r = 0; r < pl.tile_rows; r++) {
                    const int row = r0[i] + r;
                    if (row < 16 * (rt + i)) continue; /* the overlapping last tile: stored already */
                    for (int j = 0; j < ngt; j++)
                        for (int c = 0; c < 16; c++) {
                            const int col = 16 * (g + j) + c;
                            if (col >= mm->n0 && col < mm->n1) mm->y[(size_t)row * mm->ldy + col] = acc[i][j][r][c];
                        }
                }
        }
    }
    T_RELEASE();
}
