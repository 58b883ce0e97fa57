/* Tile planning for the CPU's matrix engine (AMX): how a matrix multiply's
 * M rows, N columns and K are cut into tiles, given 8 tile registers of
 * 16 rows x 64 bytes. Plain C (no AMX needed): the kernels (device/) take
 * their shapes and their LDTILECFG bytes from here, and the tests check it
 * everywhere. See docs/amx.md. */
#ifndef SLM_AMX_PLAN_H
#define SLM_AMX_PLAN_H

#include <stddef.h>
#include <stdint.h>

/* The palette-1 tile configuration LDTILECFG reads (64 bytes). */
typedef struct slm_amx_cfg {
    uint8_t palette;      /* 1 */
    uint8_t start_row;    /* 0 */
    uint8_t reserved[14]; /* 0 */
    uint16_t colsb[16];   /* bytes per row of tile t (tiles 8..15: 0) */
    uint8_t rows[16];     /* rows of tile t */
} slm_amx_cfg;

/* The tile registers of a plan: C (int32 accumulators) 0..3, A
 * (activations) 4..5, B (weights, VNNI-4) 6..7. C tile 2i + j is A tile
 * 4 + i times B tile 6 + j; in a 1 x 3 step C tile 2 is A tile 4 times
 * B tile 5 (slm_amx_btile). */
enum { SLM_AMX_C0 = 0, SLM_AMX_A0 = 4, SLM_AMX_B0 = 6 };

typedef struct slm_amx_plan {
    int tile_rows; /* rows of every A and C tile: min(M, 16) */
    int kstep;     /* K bytes (int8 elements) per tile product: the span of
                      one weight scale, 32 (a block) or 16 (per-16 scales) */
    int mt, nt;    /* row tiles and 16-column tiles per step: C tiles mt*nt */
    int row_tiles; /* row tiles over M (the last overlaps when 16 ∤ M) */
    slm_amx_cfg cfg;
} slm_amx_plan;

/* Plans M rows (>= 1) against n_groups (>= 1) groups of 16 columns over K
 * in scale spans of `span` elements (16 or 32), in 2 x 2 steps narrowed to
 * what M and N have (the step of a call whose task carries no plan).
 * Returns 0 on a shape it cannot plan. */
int slm_amx_plan_make(int m, int n_groups, int span, slm_amx_plan *p);
/* The same with a given step of mt row tiles x nt column tiles (one of
 * slm_amx_step_ok's), narrowed to what M and n_groups have. In a 1 x 3 step
 * tile 5 is the third B tile (C 0..2, A 4, B 6, 7, 5). */
int slm_amx_plan_step(int m, int n_groups, int span, int mt, int nt, slm_amx_plan *p);
/* The steps a kernel runs: 1x1, 1x2, 2x1, 2x2 and 1x3 (C + A + B <= 8). */
int slm_amx_step_ok(int mt, int nt);
/* The B tile of column tile j of a step (6, 7, then 5). */
static inline int slm_amx_btile(int j) { return j < 2 ? SLM_AMX_B0 + j : SLM_AMX_A0 + 1; }

/* ---- the plan of a matrix task, chosen by the compiler (lower.c) and kept
 * in the task record (slm_task.tiles, blob format 9) ---------------------- */
/* K elements per tile product of a weight type on the tiles: 32 (a block;
 * BF16: 32 bf16), 16 (Q6_K's per-16 scales); 0 for a type the matrix
 * engine does not take. */
int slm_amx_span(uint32_t wtype);
/* A prefill matrix task's tiles {mt, nt, kstep} for weights of wtype, m
 * rows, columns [n0, n1): 2 x 2 where M and N have two tiles each, 1 x 3
 * where M is one tile (the A tile serves three products; not BF16, whose
 * kernel goes to 2 columns), narrower where they have less; {0, 0, 0} where the matrix engine takes no part (a type
 * it does not take, one row). */
void slm_amx_choose(uint32_t wtype, int m, int n0, int n1, uint8_t tiles[3]);
/* 0 if `tiles` is what a task of (wtype, m, [n0, n1)) may carry: zeros
 * where slm_amx_choose gives zeros, else a step of slm_amx_step_ok that M
 * and N fill and the type's span; 1 and the reason in why otherwise. */
int slm_amx_tiles_check(uint32_t wtype, int m, int n0, int n1, const uint8_t tiles[3], char *why, size_t len);
/* First row of row tile i: 16 i, except the last, which ends at row M (it
 * overlaps the one before when 16 does not divide M; its rows below
 * 16 i were stored already). */
int slm_amx_row_start(const slm_amx_plan *p, int m, int i);
/* Plans M rows (>= 1) against n_groups (>= 1) groups of 16 columns for
 * the AMX-BF16 kernel (TDPBF16PS, docs/amx.md): C tiles fp32 (16 columns,
 * 64 bytes), A tiles min(M, 16) rows of 32 bf16 (64 bytes), B tiles 16
 * rows of 64 bytes (VNNI-2: row r holds elements 2r, 2r+1 of each of the 16
 * columns); kstep 32 (bf16 elements per product). Same tile registers
 * and row tiles as slm_amx_plan_step (slm_amx_row_start applies), steps
 * of up to 2 x 2 (mt x nt, narrowed to M and n_groups). Returns 0 on a
 * shape it cannot plan. */
int slm_amx_plan_bf16(int m, int n_groups, int mt, int nt, slm_amx_plan *p);

#endif
