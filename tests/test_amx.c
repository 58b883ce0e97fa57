/* AMX: the tile planner, the tile emulation against the Intel SDM's
 * definitions, and the AMX tile kernel (compiled against the emulation, and
 * on AMX hardware where there is some) against the double reference over
 * types, shapes, row tails and column tiles cut inside groups. */
#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "common/cpu.h"
#include "common/dtype.h"
#include "compiler/amx_plan.h"
#include "compiler/compiler.h"
#include "device/amx_emu.h"
#include "device/kernels.h"
#include "device/kernels_amx.h"
#include "quants_rtn.h"
#include "staticlm.h"
#include "t.h"
#include "amx_engine.h"

static uint32_t g_rng = 12345;
static float urand(void) {
    g_rng = g_rng * 1664525u + 1013904223u;
    return (float)(g_rng >> 8) / 16777216.0f;
}
static float nrand(void) { return (urand() + urand() + urand() + urand() - 2.0f) * 1.7f; }

/* ---- the planner ---------------------------------------------------------- */
static void test_plan(void) {
    static const int ms[] = {1, 2, 15, 16, 17, 31, 32, 33, 48, 100, 512};
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
        for (int ng = 1; ng <= 3; ng++)
            for (int span = 16; span <= 32; span += 16) {
                const int m = ms[mi];
                slm_amx_plan p;
                CHECK(slm_amx_plan_make(m, ng, span, &p));
                CHECK(p.tile_rows == (m < 16 ? m : 16) && p.kstep == span);
                CHECK(p.mt * p.nt + p.mt + p.nt <= 8 && p.mt >= 1 && p.mt <= 2 && p.nt >= 1 && p.nt <= 2);
                CHECK(p.nt == (ng >= 2 ? 2 : 1));
                /* every row covered exactly once by the rows each tile stores */
                int *seen = calloc((size_t)m, sizeof *seen);
                for (int i = 0; i < p.row_tiles; i++) {
                    const int s = slm_amx_row_start(&p, m, i);
                    CHECK(s >= 0 && s + p.tile_rows <= m);
                    for (int r = 0; r < p.tile_rows; r++)
                        if (s + r >= 16 * i) seen[s + r]++;
                }
                int bad = 0;
                for (int r = 0; r < m; r++) bad += seen[r] != 1;
                CHECKF(bad == 0, "m=%d: %d rows not covered once", m, bad);
                free(seen);
                /* the configuration: palette 1, A's K / 4 = B's rows, C as wide as B */
                CHECK(p.cfg.palette == 1 && sizeof p.cfg == 64);
                for (int i = 0; i < 2; i++)
                    for (int j = 0; j < 2; j++) {
                        const int c = SLM_AMX_C0 + 2 * i + j, a = SLM_AMX_A0 + i, b = SLM_AMX_B0 + j;
                        CHECK(p.cfg.colsb[a] / 4 == p.cfg.rows[b] && p.cfg.colsb[c] == p.cfg.colsb[b]);
                        CHECK(p.cfg.rows[c] == p.cfg.rows[a]);
                    }
                slm_amx_emu_ldtilecfg(&p.cfg); /* accepted (a bad one aborts) */
                slm_amx_emu_release();
            }
    slm_amx_plan p;
    CHECK(!slm_amx_plan_make(0, 1, 32, &p) && !slm_amx_plan_make(4, 0, 32, &p) && !slm_amx_plan_make(4, 1, 8, &p));
}

/* ---- the emulation against the SDM's definitions --------------------------- */
static void cfg_tiles(slm_amx_cfg *c, int m, int kb, int n) {
    memset(c, 0, sizeof *c);
    c->palette = 1;
    c->rows[0] = (uint8_t)m, c->colsb[0] = (uint16_t)(4 * n); /* C m x n int32 */
    c->rows[1] = (uint8_t)m, c->colsb[1] = (uint16_t)kb;      /* A m x kb bytes */
    c->rows[2] = (uint8_t)(kb / 4), c->colsb[2] = (uint16_t)(4 * n); /* B kb/4 x n*4 */
}

static void test_emu_int8(void) {
    static const int shapes[][3] = {{16, 64, 16}, {3, 12, 5}, {1, 4, 1}, {16, 32, 16}, {7, 64, 9}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int kind = 0; kind < 4; kind++) {
            const int m = shapes[si][0], kb = shapes[si][1], n = shapes[si][2], sa = kind & 1, sb = kind >> 1;
            uint8_t a[16 * 80], b[16 * 72];
            int32_t c0[16 * 16], c[16][16];
            for (size_t i = 0; i < sizeof a; i++) a[i] = (uint8_t)(urand() * 256);
            for (size_t i = 0; i < sizeof b; i++) b[i] = (uint8_t)(urand() * 256);
            for (int i = 0; i < 16 * 16; i++) c0[i] = (int32_t)(urand() * 2e9f) - 1000000000;
            slm_amx_cfg cfg;
            cfg_tiles(&cfg, m, kb, n);
            slm_amx_emu_ldtilecfg(&cfg);
            slm_amx_emu_loadd(0, c0, 64); /* C rows at a 64-byte stride */
            slm_amx_emu_loadd(1, a, 80);  /* A with a stride wider than its rows */
            slm_amx_emu_loadd(2, b, 72);
            slm_amx_emu_dpb(0, 1, 2, sa, sb);
            memset(c, 0x55, sizeof c);
            slm_amx_emu_stored(0, c, 64);
            int bad = 0;
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                    int64_t s = c0[i * 16 + j];
                    for (int e = 0; e < kb; e++) {
                        const int x = sa ? (int8_t)a[i * 80 + e] : a[i * 80 + e];
                        const int y = sb ? (int8_t)b[(e / 4) * 72 + 4 * j + e % 4] : b[(e / 4) * 72 + 4 * j + e % 4];
                        s += x * y;
                    }
                    bad += c[i][j] != (int32_t)(uint32_t)(uint64_t)s; /* wrap-around */
                }
            /* stored bytes past the tile untouched */
            for (int i = 0; i < 16; i++)
                for (int j = 0; j < 16; j++)
                    if (i >= m || j >= n) bad += c[i][j] != 0x55555555;
            CHECKF(bad == 0, "dpb sa=%d sb=%d %dx%dx%d: %d wrong", sa, sb, m, kb, n, bad);
        }
    slm_amx_emu_release();
}

static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

static void test_emu_bf16(void) {
    uint16_t a[16][32], b[16][32];
    float c0[16][16], c[16][16];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 32; j++) a[i][j] = to_bf16(nrand()), b[i][j] = to_bf16(nrand());
    a[0][0] = 0x0001;  /* a denormal input: read as zero */
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) c0[i][j] = nrand();
    slm_amx_cfg cfg;
    cfg_tiles(&cfg, 16, 64, 16);
    slm_amx_emu_ldtilecfg(&cfg);
    slm_amx_emu_loadd(0, c0, 64);
    slm_amx_emu_loadd(1, a, 64);
    slm_amx_emu_loadd(2, b, 64);
    slm_amx_emu_dpbf16ps(0, 1, 2);
    slm_amx_emu_stored(0, c, 64);
    int bad = 0;
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            float s = c0[m][n];
            for (int k = 0; k < 16; k++)
                for (int i = 0; i < 2; i++) {
                    uint32_t ua = (uint32_t)a[m][2 * k + i] << 16, ub = (uint32_t)b[k][2 * n + i] << 16;
                    if (!(ua & 0x7F800000u)) ua &= 0x80000000u;
                    float fa, fb;
                    memcpy(&fa, &ua, 4), memcpy(&fb, &ub, 4);
                    s += fa * fb; /* in order, rounded at each add */
                }
            bad += memcmp(&s, &c[m][n], 4) != 0;
        }
    CHECKF(bad == 0, "dpbf16ps: %d differ", bad);
    slm_amx_emu_release();
}

/* ---- the tile kernel against the double reference ------------------------- */
typedef struct tcase {
    uint32_t rt;
    int k, n, rows, ldx;
    uint8_t *w;
    float *x;
    double *ref, *bound;
} tcase;

static void tcase_make(tcase *c, uint32_t t, int k, int n, int rows) {
    c->rt = SLM_R16 | t, c->k = k, c->n = n, c->rows = rows, c->ldx = k + 3;
    const uint64_t wrow = slm_row_bytes(t, (uint64_t)k);
    c->w = malloc((size_t)wrow * n);
    double *wd = malloc(sizeof(double) * k * n);
    float *row = malloc(sizeof(float) * k), *deq = malloc(sizeof(float) * k);
    for (int j = 0; j < n; j++) {
        const float scale = 0.02f * (1.0f + (float)(j % 5));
        for (int e = 0; e < k; e++) row[e] = nrand() * scale;
        rtn_quantize_row(t, row, c->w + (size_t)j * wrow, k);
        slm_dequantize_row(t, c->w + (size_t)j * wrow, deq, k);
        for (int e = 0; e < k; e++) wd[(size_t)j * k + e] = deq[e];
    }
    uint8_t *tmp = malloc((size_t)wrow * 16);
    slm_repack_r16(t, c->w, k, n, tmp);
    free(tmp);
    c->x = malloc(sizeof(float) * (size_t)c->ldx * rows);
    for (int i = 0; i < rows; i++)
        for (int e = 0; e < k; e++) c->x[(size_t)i * c->ldx + e] = nrand() + (e % 61 == 7 ? 6.0f : 0.0f);
    c->ref = malloc(sizeof(double) * rows * n);
    c->bound = malloc(sizeof(double) * rows * n);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < n; j++) {
            const float *x = c->x + (size_t)i * c->ldx;
            const double *w = wd + (size_t)j * k;
            double s = 0, sa = 0, sq = 0;
            for (int e = 0; e < k; e++) s += w[e] * x[e], sa += fabs(w[e] * x[e]);
            for (int b = 0; b < k / 32; b++) { /* int8 activations: dx / 2 per element */
                double amax = 0, wa = 0;
                for (int e = 32 * b; e < 32 * b + 32; e++) amax = fmax(amax, fabs(x[e])), wa += fabs(w[e]);
                sq += amax / 127.0 / 2.0 * wa;
            }
            c->ref[(size_t)i * n + j] = s;
            c->bound[(size_t)i * n + j] = sq * 1.0001 + 2e-5 * sa + 1e-30;
        }
    free(wd), free(row), free(deq);
}

static void tcase_free(tcase *c) { free(c->w), free(c->x), free(c->ref), free(c->bound); }

static double g_worst; /* the largest err / bound of the tcase_run calls since reset */

/* One column tile through fn; returns the bad outputs (columns outside
 * [n0, n1) must stay untouched). */
static int tcase_run(const tcase *c, void (*fn)(const slm_mm *), int n0, int n1, const char *what) {
    const int ldy = c->n + 2;
    float *y = malloc(sizeof(float) * (size_t)ldy * c->rows);
    for (int i = 0; i < ldy * c->rows; i++) y[i] = -12345.0f;
    const size_t need = (slm_matmul_scratch_bytes(c->rt, c->k, c->rows) + 63) & ~(size_t)63;
    void *scratch = need ? aligned_alloc(64, need) : NULL;
    slm_mm mm = {.w = c->w, .wrow = slm_row_bytes(c->rt, (uint64_t)c->k), .wtype = c->rt, .k = c->k, .n0 = n0, .n1 = n1,
                 .rows = c->rows, .x = c->x, .ldx = (size_t)c->ldx, .y = y, .ldy = (size_t)ldy, .scratch = scratch};
    fn(&mm);
    int fails = 0;
    for (int i = 0; i < c->rows; i++)
        for (int j = 0; j < ldy; j++) {
            const float got = y[(size_t)i * ldy + j];
            if (j < n0 || j >= n1) {
                fails += got != -12345.0f;
                continue;
            }
            const double err = fabs(got - c->ref[(size_t)i * c->n + j]);
            if (err / c->bound[(size_t)i * c->n + j] > g_worst) g_worst = err / c->bound[(size_t)i * c->n + j];
            if (!(err <= c->bound[(size_t)i * c->n + j])) {
                if (fails < 3)
                    fprintf(stderr, "  %s %s k=%d rows=%d [%d,%d) y[%d][%d]=%.8g ref=%.8g\n", what, slm_dtype_name(c->rt), c->k,
                            c->rows, n0, n1, i, j, got, c->ref[(size_t)i * c->n + j]);
                fails++;
            }
        }
    free(y);
    free(scratch);
    return fails;
}

static void amx_hw_matmul(const slm_mm *mm) { slm_kernels_active()->matmul(mm); }

static void test_tile_kernel(void) {
    static const uint32_t base[] = {SLM_Q8_0, SLM_Q4_0, SLM_Q4_K, SLM_Q6_K, SLM_Q5_0, SLM_IQ4_NL, SLM_Q5_K, SLM_MXFP4};
    static const int ks[] = {32, 96, 256, 512};
    static const int rows_[] = {1, 2, 15, 16, 17, 33, 40};
    const slm_cpu *cpu = slm_cpu_features();
    const int hw = slm_kernels_select("amx") && !strcmp(slm_kernels_active()->name, "amx");
    if (!hw)
        fprintf(stderr, "  AMX hardware path skipped: %s\n", cpu->amx_why ? cpu->amx_why : "the amx set is not compiled");
    for (size_t bi = 0; bi < sizeof base / sizeof base[0]; bi++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            const uint32_t t = base[bi];
            const int k = ks[ki], n = 48;
            if (k % (int)slm_dtype_get(t)->block) continue;
            for (size_t ri = 0; ri < sizeof rows_ / sizeof rows_[0]; ri++) {
                tcase c;
                tcase_make(&c, t, k, n, rows_[ri]);
                CHECK(slm_amx_type(c.rt));
                int fails = tcase_run(&c, slm_amx_matmul_emu, 0, n, "emu");
                fails += tcase_run(&c, slm_amx_matmul_emu, 16, n, "emu");
                fails += tcase_run(&c, slm_amx_matmul_emu, 3, n - 5, "emu");  /* cut inside groups */
                fails += tcase_run(&c, slm_amx_matmul_emu, 17, 30, "emu");    /* inside one group */
                if (hw) {
                    fails += tcase_run(&c, amx_hw_matmul, 0, n, "amx");
                    fails += tcase_run(&c, amx_hw_matmul, 3, n - 5, "amx");
                }
                CHECKF(fails == 0, "%s k=%d rows=%d: %d bad outputs", slm_dtype_name(c.rt), k, rows_[ri], fails);
                tcase_free(&c);
            }
        }
    slm_kernels_select(NULL);
}

/* The hardware path's AVX-512 unpacking against the layout's own reading
 * (slm_r16_block_i8), every block of every group. */
static void test_unpack(void) {
    if (!slm_kernels_select("avx512")) {
        fprintf(stderr, "  skipped: no AVX-512 set on this CPU\n");
        return;
    }
    static const uint32_t base[] = {SLM_Q8_0, SLM_Q4_0, SLM_Q4_K, SLM_Q6_K, SLM_Q5_0, SLM_IQ4_NL, SLM_Q5_K, SLM_MXFP4};
    for (size_t bi = 0; bi < sizeof base / sizeof base[0]; bi++) {
        tcase c;
        tcase_make(&c, base[bi], 512, 32, 1);
        const uint64_t wrow = slm_row_bytes(c.rt, 512);
        int bad = 0;
        for (int g = 0; g < 2; g++)
            for (int b = 0; b < 16; b++) {
                const uint8_t *grp = c.w + (size_t)g * 16 * wrow;
                _Alignas(64) int8_t bt[512];
                float wd[2][16], wm[16];
                slm_amx_unpack_avx512(c.rt, grp, 512, b, bt, wd, wm);
                for (int col = 0; col < 16; col++) {
                    int8_t q[32];
                    float d[2], m[2];
                    slm_r16_block_i8(c.rt, grp, 512, col, b, q, d, m);
                    for (int e = 0; e < 32; e++) bad += bt[(e / 4) * 64 + col * 4 + e % 4] != q[e];
                    bad += wd[0][col] != d[0] || wd[1][col] != d[1] || wm[col] != m[0];
                }
            }
        CHECKF(bad == 0, "%s: %d bytes or scales differ", slm_dtype_name(c.rt), bad);
        tcase_free(&c);
    }
    /* MXFP4: every E8M0 byte 0..255 (e < 2: GGML's subnormals), 16 blocks of 16 rows, random codes */
    {
        const int k = 512, nb = k / 32;
        const uint64_t wrow = slm_row_bytes(SLM_MXFP4, (uint64_t)k);
        uint8_t *w = malloc((size_t)wrow * 16), *tmp = malloc((size_t)wrow * 16);
        for (int c = 0; c < 16; c++)
            for (int b = 0; b < nb; b++) {
                slm_block_mxfp4 *x = (slm_block_mxfp4 *)(w + (size_t)c * wrow) + b;
                x->e = (uint8_t)(16 * b + c);
                for (int i = 0; i < 16; i++) x->qs[i] = (uint8_t)((b * 131 + c * 37 + i * 89) * 2654435761u >> 24);
            }
        slm_repack_r16(SLM_MXFP4, w, k, 16, tmp);
        int bad = 0;
        for (int b = 0; b < nb; b++) {
            _Alignas(64) int8_t bt[512];
            float wd[2][16], wm[16];
            slm_amx_unpack_avx512(SLM_MXFP4_R16, w, k, b, bt, wd, wm);
            for (int col = 0; col < 16; col++) {
                int8_t q[32];
                float d[2], m[2];
                slm_r16_block_i8(SLM_MXFP4_R16, w, k, col, b, q, d, m);
                for (int e = 0; e < 32; e++) bad += bt[(e / 4) * 64 + col * 4 + e % 4] != q[e];
                bad += memcmp(&wd[0][col], &d[0], 4) || memcmp(&wd[1][col], &d[1], 4) || wm[col] != m[0];
                bad += d[0] != slm_e8m0_to_f32_half((uint8_t)(16 * b + col));
            }
        }
        CHECKF(bad == 0, "mxfp4_r16, every E8M0 byte: %d bytes or scales differ", bad);
        free(w), free(tmp);
    }
    slm_kernels_select(NULL);
}

/* ---- AMX-BF16: BF16 matrices on TDPBF16PS ---------------------------------- */

/* The BF16 plan: the int8 plan's steps and row tiles, A tiles of 32 bf16
 * (64 bytes), B tiles of 16 VNNI-2 rows, fp32 C tiles; the emulation takes
 * the configuration and a product on every C tile of a step. */
static void test_plan_bf16(void) {
    static const int ms[] = {1, 2, 15, 16, 17, 31, 32, 33, 40, 100, 512};
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
        for (int ng = 1; ng <= 3; ng++) {
            const int m = ms[mi];
            slm_amx_plan p, q;
            CHECK(slm_amx_plan_bf16(m, ng, 2, 2, &p) && slm_amx_plan_make(m, ng, 32, &q));
            CHECK(p.tile_rows == q.tile_rows && p.mt == q.mt && p.nt == q.nt && p.row_tiles == q.row_tiles && p.kstep == 32);
            CHECK(p.mt * p.nt + p.mt + p.nt <= 8 && p.cfg.palette == 1);
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++) {
                    const int c = SLM_AMX_C0 + 2 * i + j, a = SLM_AMX_A0 + i, b = SLM_AMX_B0 + j;
                    CHECK(p.cfg.rows[a] == p.tile_rows && p.cfg.colsb[a] == 64 && p.cfg.rows[b] == 16 && p.cfg.colsb[b] == 64);
                    CHECK(p.cfg.colsb[a] / 4 == p.cfg.rows[b] && p.cfg.colsb[c] == 64 && p.cfg.rows[c] == p.cfg.rows[a]);
                }
            for (int t = 8; t < 16; t++) CHECK(p.cfg.rows[t] == 0 && p.cfg.colsb[t] == 0);
            slm_amx_emu_ldtilecfg(&p.cfg); /* accepted (a bad one aborts) */
            for (int i = 0; i < p.mt; i++)
                for (int j = 0; j < p.nt; j++) slm_amx_emu_dpbf16ps(SLM_AMX_C0 + 2 * i + j, SLM_AMX_A0 + i, SLM_AMX_B0 + j);
            slm_amx_emu_release();
        }
    slm_amx_plan p;
    CHECK(!slm_amx_plan_bf16(0, 1, 2, 2, &p) && !slm_amx_plan_bf16(4, 0, 2, 2, &p) && !slm_amx_plan_bf16(4, 3, 1, 3, &p));
}

/* A BF16 matrix [n][k] (exactly n rows allocated: ASan sees a read past
 * row n - 1), float activations, the double reference and an honest bound:
 * the activations go in as three bf16 pieces that sum to them exactly, the
 * weights are bf16, so every piece product is exact in fp32 and the error
 * is the fp32 additions of 3k terms in any order: (3k + 1) 2^-24 sum_e
 * |w_e x_e| (a kernel with one piece, plain bf16 activations, is off by
 * up to 2^-8 |w_e x_e| per term and fails it). */
static void bcase_make(tcase *c, int k, int n, int rows) {
    c->rt = SLM_BF16, c->k = k, c->n = n, c->rows = rows, c->ldx = k + 3;
    c->w = malloc((size_t)2 * k * n);
    float *wf = malloc(sizeof(float) * (size_t)k * n);
    for (int j = 0; j < n; j++)
        for (int e = 0; e < k; e++) {
            const uint16_t h = slm_f32_to_bf16(nrand() * 0.05f * (1.0f + (float)(j % 5)));
            memcpy(c->w + 2 * ((size_t)j * k + e), &h, 2);
            wf[(size_t)j * k + e] = slm_bf16_to_f32(h);
        }
    c->x = malloc(sizeof(float) * (size_t)c->ldx * rows);
    for (int i = 0; i < rows; i++)
        for (int e = 0; e < c->ldx; e++) c->x[(size_t)i * c->ldx + e] = nrand() + (e % 61 == 7 ? 6.0f : 0.0f);
    c->ref = malloc(sizeof(double) * rows * n);
    c->bound = malloc(sizeof(double) * rows * n);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < n; j++) {
            const float *x = c->x + (size_t)i * c->ldx, *w = wf + (size_t)j * k;
            double s = 0, sa = 0;
            for (int e = 0; e < k; e++) {
                s += (double)w[e] * x[e];
                sa += fabs((double)w[e] * x[e]);
            }
            c->ref[(size_t)i * n + j] = s;
            c->bound[(size_t)i * n + j] = (3 * k + 1) * ldexp(1.0, -24) * sa * 1.0001 + 1e-30;
        }
    free(wf);
}

/* The plain-C B tile against its definition, the AVX-512 one against the
 * plain-C one (every K step, column ranges cut inside the last, partial
 * group), and the two activation conversions bit for bit (ties, NaN,
 * infinities, denormals, the zero tail). */
static void test_bf16_unpack(void) {
    static const int ks[] = {1, 7, 31, 32, 33, 64, 100};
    static const int cr[][2] = {{0, 16}, {1, 16}, {3, 9}, {0, 1}, {15, 16}};
    const int avx = slm_kernels_select("avx512");
    slm_kernels_select(NULL);
    if (!avx) fprintf(stderr, "  AVX-512 unpacking skipped: no AVX-512 set on this CPU\n");
    int bad = 0, tiles = 0;
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        const int k = ks[ki], n = 40, kpad = (k + 31) & ~31;
        uint16_t *w = malloc((size_t)2 * k * n); /* any bits: the unpacking moves them */
        for (int i = 0; i < k * n; i++) w[i] = (uint16_t)(urand() * 65536.0f);
        for (int g = 0; g < 3; g++)
            for (int k0 = 0; k0 < kpad; k0 += 32)
                for (size_t ci = 0; ci < sizeof cr / sizeof cr[0]; ci++) {
                    const int c0 = cr[ci][0], c1 = cr[ci][1] < n - 16 * g ? cr[ci][1] : n - 16 * g;
                    if (c0 >= c1) continue;
                    _Alignas(64) uint16_t a[512], b[512];
                    memset(a, 0xAB, sizeof a), memset(b, 0xCD, sizeof b);
                    slm_amx_bf16_unpack(w + (size_t)16 * g * k, (uint64_t)2 * k, c0, c1, k, k0, a);
                    for (int r = 0; r < 16; r++)
                        for (int c = 0; c < 16; c++)
                            for (int e = 0; e < 2; e++) {
                                const int kk = k0 + 2 * r + e, in = c >= c0 && c < c1 && kk < k;
                                bad += a[32 * r + 2 * c + e] != (in ? w[(size_t)(16 * g + c) * k + kk] : 0);
                            }
                    if (avx) {
                        slm_amx_bf16_unpack_avx512(w + (size_t)16 * g * k, (uint64_t)2 * k, c0, c1, k, k0, b);
                        bad += memcmp(a, b, sizeof a) != 0;
                    }
                    tiles++;
                }
        free(w);
    }
    CHECKF(bad == 0, "bf16 B tiles: %d wrong (of %d tiles)", bad, tiles);
    static const uint32_t special[] = {0x3F808000u, 0x3F818000u, 0xBF808000u, 0x7FC00000u, 0x7F800001u, 0xFF800000u,
                                       0x7F800000u, 0x80000000u, 0x00000001u, 0x007FFFFFu, 0x7F7FFFFFu, 0xFF7FFFFFu};
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0] && avx; ki++) {
        const int k = ks[ki], kpad = (k + 31) & ~31, rows = 3, ldx = k + 5;
        float *x = malloc(sizeof(float) * (size_t)rows * ldx);
        for (int i = 0; i < rows * ldx; i++) {
            x[i] = nrand();
            if (i % 5 == 0) memcpy(&x[i], &special[(size_t)i / 5 % (sizeof special / sizeof special[0])], 4);
        }
        uint16_t *p = malloc((size_t)6 * rows * kpad), *q = malloc((size_t)6 * rows * kpad);
        memset(p, 0x11, (size_t)6 * rows * kpad), memset(q, 0x22, (size_t)6 * rows * kpad);
        slm_amx_bf16_act(x, (size_t)ldx, rows, k, p);
        slm_amx_bf16_act_avx512(x, (size_t)ldx, rows, k, q);
        int diff = memcmp(p, q, (size_t)6 * rows * kpad) != 0;
        const size_t pl = (size_t)rows * kpad;
        for (int i = 0; i < rows; i++)
            for (int e = 0; e < kpad; e++) { /* p0 the rounded value; the three sum to a finite x exactly */
                const float xv = e < k ? x[(size_t)i * ldx + e] : 0.0f;
                const size_t o = (size_t)i * kpad + e;
                diff += p[o] != slm_f32_to_bf16(xv);
                const float h = slm_bf16_to_f32(p[o]);
                if (isfinite(h)) { /* exact where the pieces are normal numbers (the tiles read bf16 denormals as 0) */
                    if (fabsf(xv) >= 0x1p-100f)
                        diff += (double)h + slm_bf16_to_f32(p[pl + o]) + slm_bf16_to_f32(p[2 * pl + o]) != (double)xv;
                } else
                    diff += p[pl + o] != 0 || p[2 * pl + o] != 0;
            }
        CHECKF(diff == 0, "bf16 activations k=%d: AVX-512 and plain C differ, or the pieces do not sum to x", k);
        free(x), free(p), free(q);
    }
}

/* The emulated BF16 tile kernel (and the hardware one where there is AMX)
 * against the double reference over K tails, row tails and column ranges
 * cut inside groups; the amx-emu set routes prefill to it bit for bit and
 * decode to the AVX-512 set; the int8 activations' region of the scratch
 * is left alone. */
static void test_bf16_kernel(void) {
    static const int ks[] = {1, 7, 31, 32, 33, 64, 100, 256, 576};
    static const int rows_[] = {2, 15, 16, 17, 33, 40};
    static const int ns[] = {1, 16, 17, 48};
    const slm_cpu *cpu = slm_cpu_features();
    const int hw = slm_kernels_select("amx") && !strcmp(slm_kernels_active()->name, "amx") && cpu->amx_bf16;
    const char *why = cpu->amx_why                ? cpu->amx_why
                      : !cpu->amx_bf16            ? "the CPU does not report AMX-BF16"
                                                  : "the amx set is not compiled";
    if (!hw) fprintf(stderr, "  AMX-BF16 hardware path skipped: %s\n", why);
    double worst_all = 0;
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        g_worst = 0;
        for (size_t ri = 0; ri < sizeof rows_ / sizeof rows_[0]; ri++)
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
                const int k = ks[ki], n = ns[ni];
                tcase c;
                bcase_make(&c, k, n, rows_[ri]);
                int fails = tcase_run(&c, slm_amx_matmul_bf16_emu, 0, n, "emu");
                if (n > 1) fails += tcase_run(&c, slm_amx_matmul_bf16_emu, 1, n, "emu");
                if (n > 8) fails += tcase_run(&c, slm_amx_matmul_bf16_emu, 3, n - 5, "emu"); /* cut inside groups */
                if (n > 30) fails += tcase_run(&c, slm_amx_matmul_bf16_emu, 17, 30, "emu"); /* inside one group */
                if (hw) {
                    fails += tcase_run(&c, amx_hw_matmul, 0, n, "amx");
                    if (n > 8) fails += tcase_run(&c, amx_hw_matmul, 3, n - 5, "amx");
                }
                CHECKF(fails == 0, "bf16 k=%d n=%d rows=%d: %d bad outputs", k, n, rows_[ri], fails);
                tcase_free(&c);
            }
        fprintf(stderr, "  bf16 k=%d: worst err/bound %.3f\n", ks[ki], g_worst);
        worst_all = fmax(worst_all, g_worst);
    }
    fprintf(stderr, "  bf16 tile kernel: worst err/bound %.3f over all cases\n", worst_all);
    slm_kernels_select(NULL);
    /* the amx-emu set: prefill on the emulated tiles, decode on AVX-512 */
    if (!slm_kernels_select("amx-emu")) {
        fprintf(stderr, "  amx-emu routing skipped: no AVX-512 set on this CPU\n");
        return;
    }
    const slm_kernel_set *ks_emu = slm_kernels_active();
    tcase c;
    bcase_make(&c, 100, 48, 17);
    const size_t need = slm_matmul_scratch_bytes(SLM_BF16, 100, 17), xq = slm_matmul_scratch_bytes(SLM_Q8_0_R16, 100, 17);
    CHECK(need >= xq + (size_t)3 * 17 * 128 * 2 && slm_matmul_scratch_bytes(SLM_BF16, 100, 1) == 0);
    uint8_t *scratch = aligned_alloc(64, (need + 63) & ~(size_t)63);
    memset(scratch, 0x5A, need);
    float *y0 = calloc((size_t)17 * 48, sizeof(float)), *y1 = calloc((size_t)17 * 48, sizeof(float));
    slm_mm mm = {.w = c.w, .wrow = 200, .wtype = SLM_BF16, .k = 100, .n0 = 0, .n1 = 48, .rows = 17, .x = c.x,
                 .ldx = (size_t)c.ldx, .y = y0, .ldy = 48, .scratch = scratch};
    slm_amx_matmul_bf16_emu(&mm);
    int kept = 1;
    for (size_t i = 0; i < xq; i++) kept &= scratch[i] == 0x5A;
    CHECKF(kept, "the bf16 path wrote into the int8 activations' region of the scratch");
    mm.y = y1;
    ks_emu->matmul(&mm);
    CHECKF(!memcmp(y0, y1, sizeof(float) * 17 * 48), "amx-emu's matmul did not take the BF16 tile path");
    mm.rows = 1, mm.scratch = NULL; /* decode: the AVX-512 set's exact float path */
    ks_emu->matmul(&mm);
    double dmax = 0; /* err / the fp32 summation bound alone (the activations not rounded) */
    for (int j = 0; j < 48; j++) {
        double sa = 0;
        for (int e = 0; e < 100; e++) {
            uint16_t h;
            memcpy(&h, c.w + 2 * ((size_t)j * 100 + e), 2);
            sa += fabs((double)slm_bf16_to_f32(h) * c.x[e]);
        }
        dmax = fmax(dmax, fabs(y1[j] - c.ref[j]) / (101 * ldexp(1.0, -24) * sa + 1e-30));
    }
    CHECKF(dmax <= 1, "amx-emu decode of BF16: not the exact float path (%.3g of its bound)", dmax);
    free(scratch), free(y0), free(y1);
    tcase_free(&c);
    slm_kernels_select(NULL);
}

/* Selection: "amx" is the amx set where the CPU and the OS allow it, else
 * the AVX-512 set (the fall-back), else refused; the peak is 0 without AMX. */
static void test_select(void) {
    const slm_cpu *c = slm_cpu_features();
    const int amx = c->amx_tile && c->amx_int8 && c->amx_os;
    CHECK(amx == (c->amx_why == NULL));
    const int ok = slm_kernels_select("amx");
    if (amx && ok) CHECK(!strcmp(slm_kernels_active()->name, "amx"));
    if (!amx) {
        CHECK(slm_amx_int8_peak(0.01) == 0);
        if (ok) CHECK(!strcmp(slm_kernels_active()->name, "avx512"));
        fprintf(stderr, "  no AMX here: %s\n", c->amx_why);
    } else {
        const double p = slm_amx_int8_peak(0.05);
        fprintf(stderr, "  AMX int8 peak: %.1f Tops/s per core\n", p / 1e12);
        CHECK(p > 0);
    }
    slm_kernels_select(NULL);
}

/* The whole engine through the tile path: synthetic Q4_K_M (q4_k_r16,
 * q6_k_r16, q5_0_r16 and q8_0_r16 matrices), Q4_0 and Q8_0 models, the
 * last row's logits of an n-token prefill (40-row programs) on "amx-emu"
 * (the amx set with the emulated tiles) against "avx512" (both int8
 * activations; an f32 KV cache: the kernels alone differ), and where the
 * CPU has AMX on "amx" (the hardware tiles) with the same tolerances. */
/* Two prefills per model. 15 tokens (< 16 rows: both sets' attention is
 * avx512's block entry, the int8 tile matmuls alone) and 37 tokens (40
 * rows planned: the 2x2 matmul steps and the split-bf16 tile attention).
 * The tile matmuls sum the same int8 products as avx512's in another
 * order (test_kernel_steps holds them to 1.2e-7 relative), and the
 * attention agrees with avx512's block entry to fp32 rounding, not bit for
 * bit; the next layer's int8 activation rounding can turn such a 1e-7 move
 * into a jump of ~0.5-1% of max |logit| wherever a value sits on a
 * rounding edge, which depends on the weights: with synth's files since
 * its Q4_0 / Q5_0 quantizers took GGML's arithmetic, 15 tokens measure
 * 0.69% (q4_k_m), 0.59% (q4_0), 1.8e-7 (q8_0); 37 tokens 6.8e-7, 0.78%,
 * 5e-6; every set, avx2 and avx512 too, is 0.7-1.3% from the scalar set's
 * f32 activations. Tolerance 1.5% for both, which still catches a broken
 * tile layout (10-20%, test_amx_attention). */
static void test_engine(void) {
    if (!slm_kernels_select("amx-emu")) {
        fprintf(stderr, "  skipped: no AVX-512 set on this CPU (the amx sets delegate decode to it)\n");
        return;
    }
    char dir[128], path[256], cmd[300];
    snprintf(dir, sizeof dir, "/tmp/slm-test-amx-%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "mkdir -p \"%s\"", dir);
    CHECK(system(cmd) == 0);
    /* where the CPU and the OS allow AMX, the hardware set too, same tolerances */
    const int hw = slm_kernels_select("amx") && !strcmp(slm_kernels_active()->name, "amx");
    slm_kernels_select(NULL);
    const char *why = slm_cpu_features()->amx_why;
    if (!hw) fprintf(stderr, "  AMX hardware path skipped: %s\n", why ? why : "the amx set is not compiled");
    static const char *types[] = {"q4_k_m", "q4_0", "q8_0"};
    const int vocab = 320;
    for (int ti = 0; ti < 3; ti++) {
        snprintf(path, sizeof path, "%s/%s.gguf", dir, types[ti]);
        if (!amx_synth(path, types[ti], "--dim 256 --heads 4 --kv-heads 1", vocab, 5)) continue;
        float *a = malloc(sizeof(float) * vocab), *b = malloc(sizeof(float) * vocab);
        for (int n = 15; n <= 37; n += 22) {
            if (!amx_prefill_logits(path, "avx512", 40, SLM_KV_F32, n, a, vocab)) continue;
            for (int s = 0; s < 1 + hw; s++) {
                const char *set = s ? "amx" : "amx-emu";
                if (!amx_prefill_logits(path, set, 40, SLM_KV_F32, n, b, vocab)) continue;
                double amax;
                const double d = amx_logit_diff(a, b, vocab, &amax), tol = 1.5e-2;
                CHECKF(d <= tol, "%s, %d tokens: %s's logits differ by %.3g of max |logit| %.3g", types[ti], n, set, d, amax);
                fprintf(stderr, "  %s, %d tokens: %s vs avx512 logits: max diff %.2g of max |logit| %.3g\n", types[ti], n, set,
                        d, amax);
            }
        }
        free(a), free(b);
    }
    snprintf(cmd, sizeof cmd, "rm -rf \"%s\"", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* A BF16 model through the BF16 tile path: synth --type bf16 (every matrix
 * BF16, norms f32, as llama.cpp's bf16 files), the same 2-layer shape as
 * above, the last row's logits of a 15- and a 37-token prefill (40-row
 * programs, f32 KV cache) on "amx-emu" against "avx512" and against
 * "scalar" (the plain C reference set: an independent float matmul and
 * attention). All of them keep fp32 numerics here: the tile kernel feeds
 * the activations as three bf16 pieces (their products exact), and with
 * no int8 activations in the model no rounding downstream can flip, so
 * unlike the quantized models above 37 tokens (the split-bf16 tile
 * attention too) is as tight as 15 (the matmuls alone). Measured, of max
 * |logit|: amx-emu vs avx512 5.8e-7 (15 tokens) and 5.3e-7 (37), amx-emu vs
 * scalar 8.2e-7 and 9.6e-7; the two references differ by 9.1e-7 and 7.1e-7
 * between themselves (fp32 summation order: the scale of every pair).
 * Tolerance 2e-6, twice the largest pair: the kernel with its smallest
 * piece dropped moves the logits by 3.0e-6 to 3.8e-6 and fails it, with
 * the middle one dropped by 2.4e-3. At 15 tokens the attention (the
 * avx512 block entry) and every other kernel are avx512's, so amx-emu's logits differing from
 * avx512's at all shows the BF16 matmuls took the tile kernel (equal bits
 * when they go to the AVX-512 path). Where the machine has AMX-BF16 the
 * "amx" set (the hardware tiles) is held to the same tolerance. */
static void test_engine_bf16(void) {
    if (!slm_kernels_select("amx-emu")) {
        fprintf(stderr, "  skipped: no AVX-512 set on this CPU (the amx sets delegate decode to it)\n");
        return;
    }
    const slm_cpu *cpu = slm_cpu_features();
    const int hw = slm_kernels_select("amx") && !strcmp(slm_kernels_active()->name, "amx") && cpu->amx_bf16;
    slm_kernels_select(NULL);
    if (!hw)
        fprintf(stderr, "  AMX-BF16 hardware path skipped: %s\n",
                cpu->amx_why    ? cpu->amx_why
                : !cpu->amx_bf16 ? "the CPU does not report AMX-BF16"
                                 : "the amx set is not compiled");
    char dir[128], path[256], cmd[300];
    snprintf(dir, sizeof dir, "/tmp/slm-test-amx-bf16-%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "mkdir -p \"%s\"", dir);
    CHECK(system(cmd) == 0);
    snprintf(path, sizeof path, "%s/bf16.gguf", dir);
    const int vocab = 320;
    const double tol = 2e-6;
    if (amx_synth(path, "bf16", "--dim 256 --heads 4 --kv-heads 1", vocab, 5)) {
        float *a = malloc(sizeof(float) * vocab), *r = malloc(sizeof(float) * vocab), *b = malloc(sizeof(float) * vocab);
        for (int n = 15; n <= 37; n += 22) {
            if (!amx_prefill_logits(path, "avx512", 40, SLM_KV_F32, n, a, vocab) ||
                !amx_prefill_logits(path, "scalar", 40, SLM_KV_F32, n, r, vocab))
                continue;
            double amax;
            const double dref = amx_logit_diff(a, r, vocab, &amax);
            fprintf(stderr, "  bf16, %d tokens: avx512 vs scalar %.2g of max |logit| %.3g\n", n, dref, amax);
            for (int s = 0; s < 1 + hw; s++) {
                const char *set = s ? "amx" : "amx-emu";
                if (!amx_prefill_logits(path, set, 40, SLM_KV_F32, n, b, vocab)) continue;
                const double da = amx_logit_diff(a, b, vocab, &amax), dr = amx_logit_diff(r, b, vocab, &amax);
                CHECKF(da <= tol && dr <= tol, "bf16, %d tokens: %s's logits differ from avx512's by %.3g, from scalar's by %.3g of max |logit| %.3g (tolerance %.0e)",
                       n, set, da, dr, amax, tol);
                if (n < 16)
                    CHECKF(memcmp(a, b, sizeof(float) * vocab) != 0,
                           "bf16, %d tokens: %s's logits are avx512's bit for bit: the BF16 matmuls did not take the tile kernel", n, set);
                fprintf(stderr, "  bf16, %d tokens: %s vs avx512 %.2g, vs scalar %.2g of max |logit|\n", n, set, da, dr);
            }
        }
        free(a), free(r), free(b);
    }
    snprintf(cmd, sizeof cmd, "rm -rf \"%s\"", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

int main(void) {
    T_RUN(test_plan);
    T_RUN(test_emu_int8);
    T_RUN(test_emu_bf16);
    T_RUN(test_select);
    T_RUN(test_unpack);
    T_RUN(test_tile_kernel);
    T_RUN(test_plan_bf16);
    T_RUN(test_bf16_unpack);
    T_RUN(test_bf16_kernel);
    T_RUN(test_engine);
    T_RUN(test_engine_bf16);
    T_DONE();
}
