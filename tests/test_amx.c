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

/* One column tile through fn; returns the bad outputs (columns outside
 * [n0, n1) must stay untouched). */
static int tcase_run(const tcase *c, void (*fn)(const slm_mm *), int n0, int n1, const char *what) {
    const int ldy = c->n + 2;
    float *y = malloc(sizeof(float) * (size_t)ldy * c->rows);
    for (int i = 0; i < ldy * c->rows; i++) y[i] = -12345.0f;
    const size_t need = (slm_matmul_scratch_bytes(c->rt, c->k, c->rows) + 63) & ~(size_t)63;
    void *scratch = aligned_alloc(64, need);
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
    static const uint32_t base[] = {SLM_Q8_0, SLM_Q4_0, SLM_Q4_K, SLM_Q6_K, SLM_Q5_0, SLM_IQ4_NL, SLM_Q5_K};
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
    static const uint32_t base[] = {SLM_Q8_0, SLM_Q4_0, SLM_Q4_K, SLM_Q6_K, SLM_Q5_0, SLM_IQ4_NL, SLM_Q5_K};
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
                    float d[2], m;
                    slm_r16_block_i8(c.rt, grp, 512, col, b, q, d, &m);
                    for (int e = 0; e < 32; e++) bad += bt[(e / 4) * 64 + col * 4 + e % 4] != q[e];
                    bad += wd[0][col] != d[0] || wd[1][col] != d[1] || wm[col] != m;
                }
            }
        CHECKF(bad == 0, "%s: %d bytes or scales differ", slm_dtype_name(c.rt), bad);
        tcase_free(&c);
    }
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
 * q6_k_r16, q5_0_r16 and q8_0_r16 matrices), Q4_0 and Q8_0 models, a
 * prompt's prefill logits on "amx-emu" (the amx set with the emulated
 * tiles) against "avx512" (both int8 activations: within rounding). */
static int prefill_logits(const char *path, const char *set, float *out, int vocab) {
    if (!slm_kernels_select(set)) return 0;
    slm_options opt = slm_default_options();
    opt.max_prompt_len = 40, opt.min_response_len = 8, opt.n_threads = 2;
    opt.kv_type = SLM_KV_F32; /* the matrix kernels alone differ (f16 K/V would round their differences apart) */
    slm_engine *e = NULL;
    int ok = slm_load(&e, path, &opt) == SLM_OK;
    CHECKF(ok, "%s", slm_last_error(e));
    if (ok) {
        int32_t ids[37];
        for (int i = 0; i < 37; i++) ids[i] = i == 0 ? 1 : 3 + (i * 37) % (vocab - 3);
        const float *lg = NULL;
        ok = slm_prefill(e, ids, 37, &lg) == SLM_OK && lg;
        CHECKF(ok, "%s", slm_last_error(e));
        if (ok) memcpy(out, lg, sizeof(float) * vocab);
    }
    slm_free(e);
    slm_kernels_select(NULL);
    return ok;
}

static void test_engine(void) {
    if (!slm_kernels_select("amx-emu")) {
        fprintf(stderr, "  skipped: no AVX-512 set on this CPU (the amx sets delegate decode to it)\n");
        return;
    }
    char dir[128], path[256], cmd[1024];
    snprintf(dir, sizeof dir, "/tmp/slm-test-amx-%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "mkdir -p \"%s\"", dir);
    CHECK(system(cmd) == 0);
    static const char *types[] = {"q4_k_m", "q4_0", "q8_0"};
    const int vocab = 320;
    for (int ti = 0; ti < 3; ti++) {
        snprintf(path, sizeof path, "%s/%s.gguf", dir, types[ti]);
        snprintf(cmd, sizeof cmd,
                 "\"%s\" synth --shape custom --type %s --dim 256 --heads 4 --kv-heads 1 --ffn 512 --layers 2 "
                 "--n-vocab %d --untied --seed 5 -o \"%s\" --vocab-file \"%s\" >/dev/null 2>&1",
                 SLM_CLI_PATH, types[ti], vocab, path, T_SHARED("vocab/ggml-vocab-llama-spm.gguf"));
        if (system(cmd) != 0) {
            CHECKF(0, "synth %s failed", types[ti]);
            continue;
        }
        float *a = malloc(sizeof(float) * vocab), *b = malloc(sizeof(float) * vocab);
        if (prefill_logits(path, "avx512", a, vocab) && prefill_logits(path, "amx-emu", b, vocab)) {
            double amax = 0, dmax = 0;
            for (int i = 0; i < vocab; i++) amax = fmax(amax, fabs(a[i])), dmax = fmax(dmax, fabs((double)a[i] - b[i]));
            CHECKF(amax > 0 && dmax <= 2e-3 * amax, "%s: logits differ by %.3g (max |logit| %.3g)", types[ti], dmax, amax);
            fprintf(stderr, "  %s: amx-emu vs avx512 logits: max diff %.3g of max |logit| %.3g\n", types[ti], dmax, amax);
        }
        free(a), free(b);
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
    T_RUN(test_engine);
    T_DONE();
}
