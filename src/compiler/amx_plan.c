/* Tile planning for AMX (compiler/amx_plan.h). */
#include <stdio.h>
#include <string.h>

#include "common/dtype.h"
#include "compiler/amx_plan.h"

/* 8 tiles: mt A tiles + nt B tiles + mt*nt C tiles. 2x2 is the largest
 * square step that fits (2 + 2 + 4) and loads least per product (4 loads
 * for 4 products); 1x3 (1 + 3 + 3) serves three products per A tile when M
 * has one tile. A step narrows to what M and N have. */
int slm_amx_step_ok(int mt, int nt) {
    return mt >= 1 && nt >= 1 && ((mt <= 2 && nt <= 2) || (mt == 1 && nt == 3));
}

int slm_amx_plan_step(int m, int n_groups, int span, int mt, int nt, slm_amx_plan *p) {
    if (m < 1 || n_groups < 1 || (span != 16 && span != 32) || !slm_amx_step_ok(mt, nt)) return 0;
    memset(p, 0, sizeof *p);
    p->tile_rows = m < 16 ? m : 16;
    p->kstep = span;
    p->row_tiles = (m + 15) / 16;
    p->mt = p->row_tiles < mt ? p->row_tiles : mt;
    p->nt = n_groups < nt ? n_groups : nt;
    p->cfg.palette = 1;
    /* every tile configured for its role, used in this step or not: C 0..3,
       A 4, 5 (B of a 1 x 3 step), B 6, 7 */
    const int three = p->nt == 3;
    for (int t = 0; t < 8; t++) {
        const int role = t < SLM_AMX_A0 ? 0 : t == SLM_AMX_A0 || (t == SLM_AMX_A0 + 1 && !three) ? 1 : 2;
        p->cfg.rows[t] = (uint8_t)(role == 2 ? span / 4 : p->tile_rows); /* B, VNNI-4: K/4 rows */
        p->cfg.colsb[t] = (uint16_t)(role == 1 ? span : 64); /* A: span int8 of K; C: 16 int32; B: 16 columns x 4 */
    }
    return 1;
}

int slm_amx_span(uint32_t wtype) {
    switch (wtype) {
    case SLM_Q8_0_R16: case SLM_Q4_0_R16: case SLM_Q5_0_R16: case SLM_IQ4_NL_R16: case SLM_Q4_K_R16: case SLM_Q5_K_R16:
    case SLM_MXFP4_R16:
        return 32;
    case SLM_Q6_K_R16: return 16;
    case SLM_BF16: return 32; /* bf16 elements per TDPBF16PS: 64 bytes of an A row */
    default: return 0;
    }
}

static int n_groups_of(int n0, int n1) { return n1 > n0 ? (n1 + 15) / 16 - n0 / 16 : 0; }
/* the widest column step of a type's kernel: the BF16 kernel has no 1 x 3 */
static int max_nt(uint32_t wtype) { return wtype == SLM_BF16 ? 2 : 3; }

void slm_amx_choose(uint32_t wtype, int m, int n0, int n1, uint8_t tiles[3]) {
    tiles[0] = tiles[1] = tiles[2] = 0;
    const int span = slm_amx_span(wtype), ng = n_groups_of(n0, n1), rt = (m + 15) / 16;
    if (!span || m < 2 || ng < 1) return;
    tiles[0] = (uint8_t)(rt >= 2 ? 2 : 1);
    tiles[1] = (uint8_t)(rt == 1 && ng >= 3 && max_nt(wtype) >= 3 ? 3 : ng >= 2 ? 2 : 1);
    tiles[2] = (uint8_t)span;
}

int slm_amx_tiles_check(uint32_t wtype, int m, int n0, int n1, const uint8_t tiles[3], char *why, size_t len) {
    uint8_t want[3];
    slm_amx_choose(wtype, m, n0, n1, want);
    if (!want[2]) {
        if (tiles[0] | tiles[1] | tiles[2])
            return snprintf(why, len, "tiles %ux%u k=%u on a task the matrix engine takes no part in", tiles[0], tiles[1],
                            tiles[2]), 1;
        return 0;
    }
    const int rt = (m + 15) / 16, ng = n_groups_of(n0, n1);
    if (!slm_amx_step_ok(tiles[0], tiles[1]) || tiles[0] > rt || tiles[1] > ng || tiles[1] > max_nt(wtype))
        return snprintf(why, len, "tiles %ux%u: not a step of %d row tiles x %d column tiles", tiles[0], tiles[1], rt, ng), 1;
    if (tiles[2] != want[2])
        return snprintf(why, len, "tiles k=%u, the weights' scale span is %u", tiles[2], want[2]), 1;
    return 0;
}

int slm_amx_plan_make(int m, int n_groups, int span, slm_amx_plan *p) { return slm_amx_plan_step(m, n_groups, span, 2, 2, p); }

int slm_amx_plan_bf16(int m, int n_groups, int mt, int nt, slm_amx_plan *p) {
    if (nt > 2 || !slm_amx_plan_step(m, n_groups, 32, mt, nt, p)) return 0; /* the steps and row tiles */
    for (int i = 0; i < 2; i++) {
        p->cfg.colsb[SLM_AMX_A0 + i] = 64; /* 32 bf16 of K */
        p->cfg.rows[SLM_AMX_B0 + i] = 16;  /* VNNI-2: K/2 rows */
        p->cfg.colsb[SLM_AMX_B0 + i] = 64; /* of 16 columns x 2 bf16 */
    }
    return 1; /* C tiles: tile_rows x 16 fp32 (64 bytes), as the int32 ones */
}

int slm_amx_row_start(const slm_amx_plan *p, int m, int i) {
    (void)p;
    const int s = 16 * i;
    if (m < 16) return 0;
    return s + 16 > m ? m - 16 : s;
}
