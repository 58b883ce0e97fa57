/* Tile planning for the CPU's matrix engine (AMX): how a matrix multiply's
 * M rows, N columns and K are cut into tiles, given 8 tile registers of
 * 16 rows x 64 bytes. Plain C (no AMX needed): the kernels (device/) take
 * their shapes and their LDTILECFG bytes from here, and the tests check it
 * everywhere. See docs/amx.md. */
#ifndef SLM_AMX_PLAN_H
#define SLM_AMX_PLAN_H

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
 * 4 + i times B tile 6 + j. */
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
 * in scale spans of `span` elements (16 or 32). Returns 0 on a shape it
 * cannot plan. */
int slm_amx_plan_make(int m, int n_groups, int span, slm_amx_plan *p);
/* First row of row tile i: 16 i, except the last, which ends at row M (it
 * overlaps the one before when 16 does not divide M; its rows below
 * 16 i were stored already). */
int slm_amx_row_start(const slm_amx_plan *p, int m, int i);

#endif
