/* Tile planning for AMX (compiler/amx_plan.h). */
#include <string.h>

#include "compiler/amx_plan.h"

/* 8 tiles: mt A tiles + nt B tiles + mt*nt C tiles. 2x2 is the largest
 * that fits (2 + 2 + 4) and the one that loads least per product (4 loads
 * for 4 products); a step narrows to what M and N have. */
int slm_amx_plan_make(int m, int n_groups, int span, slm_amx_plan *p) {
    if (m < 1 || n_groups < 1 || (span != 16 && span != 32)) return 0;
    memset(p, 0, sizeof *p);
    p->tile_rows = m < 16 ? m : 16;
    p->kstep = span;
    p->row_tiles = (m + 15) / 16;
    p->mt = p->row_tiles >= 2 ? 2 : 1;
    p->nt = n_groups >= 2 ? 2 : 1;
    p->cfg.palette = 1;
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 2; j++) {
            p->cfg.rows[SLM_AMX_C0 + 2 * i + j] = (uint8_t)p->tile_rows;
            p->cfg.colsb[SLM_AMX_C0 + 2 * i + j] = 64; /* 16 int32 columns */
        }
        p->cfg.rows[SLM_AMX_A0 + i] = (uint8_t)p->tile_rows;
        p->cfg.colsb[SLM_AMX_A0 + i] = (uint16_t)span; /* span int8 of K */
        p->cfg.rows[SLM_AMX_B0 + i] = (uint8_t)(span / 4); /* VNNI-4: K/4 rows */
        p->cfg.colsb[SLM_AMX_B0 + i] = 64;                  /* of 16 columns x 4 */
    }
    return 1;
}

int slm_amx_row_start(const slm_amx_plan *p, int m, int i) {
    (void)p;
    const int s = 16 * i;
    if (m < 16) return 0;
    return s + 16 > m ? m - 16 : s;
}
