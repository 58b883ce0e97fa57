/* The matrix engine's tile plan as the compiler records it (docs/amx.md):
 * the step chosen per prefill matrix task (slm_amx_choose), its check
 * (slm_amx_tiles_check), every step's configuration on the emulation, the
 * tile kernel in each step bit-identical to the default step and within
 * rounding of the AVX-512 set, the plan in `--dump-tasks` and in the blob's
 * task records, a blob whose tiles are wrong refused with the field named,
 * and the whole engine on 15-row prefill chunks (1 x 3 steps) through
 * "amx-emu" against "avx512". */
#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "blob/blob.h"
#include "blob/format.h"
#include "blob_image.h"
#include "common/dtype.h"
#include "compiler/amx_plan.h"
#include "compiler/compiler.h"
#include "device/amx_emu.h"
#include "device/kernels.h"
#include "device/kernels_amx.h"
#include "program/task.h"
#include "staticlm.h"
#include "t.h"
#include "run_cmd.h"
#include "amx_engine.h"

static uint32_t g_rng = 777;
static float urand(void) {
    g_rng = g_rng * 1664525u + 1013904223u;
    return (float)(g_rng >> 8) / 16777216.0f;
}
static float nrand(void) { return (urand() + urand() + urand() + urand() - 2.0f) * 1.7f; }

static char g_tmp[256];

/* ---- the choice and its check ----------------------------------------------- */
static void test_choose(void) {
    static const uint32_t types[] = {SLM_Q4_0_R16, SLM_Q8_0_R16, SLM_Q6_K_R16, SLM_Q4_K_R16, SLM_BF16, SLM_F16_R16, SLM_Q4_0, SLM_F32};
    static const int ms[] = {1, 2, 15, 16, 17, 32, 33, 512};
    static const int cols[][2] = {{0, 16}, {0, 32}, {0, 48}, {16, 80}, {3, 40}, {0, 1024}, {5, 9}};
    char why[160];
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
            for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++) {
                const uint32_t t = types[ti];
                const int m = ms[mi], n0 = cols[ci][0], n1 = cols[ci][1];
                const int ng = (n1 + 15) / 16 - n0 / 16, rt = (m + 15) / 16;
                uint8_t tl[3];
                slm_amx_choose(t, m, n0, n1, tl);
                CHECKF(!slm_amx_tiles_check(t, m, n0, n1, tl, why, sizeof why), "%s m=%d: %s", slm_dtype_name(t), m, why);
                if (!slm_amx_span(t) || m < 2) {
                    CHECK(tl[0] == 0 && tl[1] == 0 && tl[2] == 0);
                    const uint8_t some[3] = {1, 1, 32};
                    CHECK(slm_amx_tiles_check(t, m, n0, n1, some, why, sizeof why) && strstr(why, "no part"));
                    continue;
                }
                CHECK(tl[2] == (t == SLM_Q6_K_R16 ? 16 : 32));
                CHECK(slm_amx_step_ok(tl[0], tl[1]) && tl[0] <= rt && tl[1] <= ng);
                /* the widest step M and N allow: 2 x 2, or 1 x 3 with one row tile (not BF16) */
                const int widest = t == SLM_BF16 ? 2 : 3;
                CHECK(tl[0] == (rt >= 2 ? 2 : 1));
                CHECK(tl[1] == (rt == 1 ? (ng >= widest ? widest : ng) : (ng >= 2 ? 2 : 1)));
                if (t == SLM_BF16 && rt == 1 && ng >= 3) {
                    const uint8_t three[3] = {1, 3, 32};
                    CHECK(slm_amx_tiles_check(t, m, n0, n1, three, why, sizeof why));
                }
                /* refused: no plan, a step M or N do not fill, a step that does not fit, a wrong span */
                const uint8_t none[3] = {0, 0, 0}, tall[3] = {(uint8_t)(rt + 1 > 2 ? 3 : rt + 1), 1, tl[2]};
                const uint8_t big[3] = {2, 3, tl[2]}, wide[3] = {1, (uint8_t)(ng + 1), tl[2]}, span[3] = {tl[0], tl[1], 48};
                CHECK(slm_amx_tiles_check(t, m, n0, n1, none, why, sizeof why));
                CHECK(slm_amx_tiles_check(t, m, n0, n1, tall, why, sizeof why));
                CHECK(slm_amx_tiles_check(t, m, n0, n1, big, why, sizeof why));
                if (ng < 3) CHECK(slm_amx_tiles_check(t, m, n0, n1, wide, why, sizeof why));
                CHECK(slm_amx_tiles_check(t, m, n0, n1, span, why, sizeof why) && strstr(why, "span"));
            }
    CHECK(!slm_amx_step_ok(2, 3) && !slm_amx_step_ok(3, 1) && !slm_amx_step_ok(0, 1) && slm_amx_step_ok(1, 3));
}

/* Every step's configuration: the emulation accepts it, and the tiles the
 * kernel multiplies have the shapes TDPBSSD asks (A's K / 4 = B's rows, C
 * as wide as B and as tall as A). */
static void test_steps_cfg(void) {
    static const int steps[][2] = {{1, 1}, {1, 2}, {2, 1}, {2, 2}, {1, 3}};
    for (int si = 0; si < 5; si++)
        for (int m = 1; m <= 40; m += 13)
            for (int ng = 1; ng <= 4; ng++)
                for (int span = 16; span <= 32; span += 16) {
                    slm_amx_plan p;
                    CHECK(slm_amx_plan_step(m, ng, span, steps[si][0], steps[si][1], &p));
                    CHECK(p.mt <= steps[si][0] && p.nt <= steps[si][1] && p.mt <= p.row_tiles && p.nt <= ng);
                    for (int i = 0; i < p.mt; i++)
                        for (int j = 0; j < p.nt; j++) {
                            const int c = SLM_AMX_C0 + 2 * i + j, a = SLM_AMX_A0 + i, b = slm_amx_btile(j);
                            CHECK(c != a && c != b && a != b && c < SLM_AMX_A0);
                            CHECK(p.cfg.colsb[a] == span && p.cfg.colsb[a] / 4 == p.cfg.rows[b]);
                            CHECK(p.cfg.colsb[c] == p.cfg.colsb[b] && p.cfg.rows[c] == p.cfg.rows[a]);
                        }
                    slm_amx_emu_ldtilecfg(&p.cfg); /* accepted (a bad one aborts) */
                    slm_amx_emu_release();
                }
    slm_amx_plan p;
    CHECK(!slm_amx_plan_step(16, 3, 32, 2, 3, &p) && !slm_amx_plan_step(16, 3, 32, 3, 1, &p));
}

/* ---- the kernel in every step ------------------------------------------------ */
static void run_emu(uint32_t rt, const uint8_t *w, int k, int n0, int n1, int rows, const float *x, float *y, int ldy,
                    const uint8_t tiles[3], void *scratch) {
    slm_mm mm = {.w = w, .wrow = slm_row_bytes(rt, (uint64_t)k), .wtype = rt, .k = k, .n0 = n0, .n1 = n1, .rows = rows,
                 .x = x, .ldx = (size_t)k, .y = y, .ldy = (size_t)ldy, .scratch = scratch};
    memcpy(mm.tiles, tiles, 3);
    slm_amx_matmul_emu(&mm);
}

static void test_kernel_steps(void) {
    static const uint32_t base[] = {SLM_Q4_0, SLM_Q8_0, SLM_Q6_K, SLM_Q4_K, SLM_Q5_0};
    static const int steps[][2] = {{1, 1}, {1, 2}, {2, 1}, {2, 2}, {1, 3}};
    static const int rows_[] = {2, 9, 16, 17, 33};
    const int k = 256, n = 80; /* 5 groups: 1 x 3 steps end in a step of 2 */
    const int have512 = slm_kernels_select("avx512");
    for (size_t bi = 0; bi < sizeof base / sizeof base[0]; bi++) {
        const uint32_t t = base[bi], rt = SLM_R16 | t;
        CHECK(slm_repack_type(t, k, n) == rt);
        const uint64_t wrow = slm_row_bytes(t, (uint64_t)k);
        uint8_t *w = malloc((size_t)wrow * n), *tmp = malloc((size_t)wrow * 16);
        float *row = malloc(sizeof(float) * k);
        for (int j = 0; j < n; j++) {
            for (int e = 0; e < k; e++) row[e] = nrand() * 0.02f;
            CHECK(slm_quantize_row(t, row, w + (size_t)j * wrow, k));
        }
        slm_repack_r16(t, w, k, n, tmp);
        const int rmax = 33, ldy = n + 3;
        float *x = malloc(sizeof(float) * k * rmax), *y0 = malloc(sizeof(float) * ldy * rmax),
              *y1 = malloc(sizeof(float) * ldy * rmax), *yr = malloc(sizeof(float) * ldy * rmax);
        for (int i = 0; i < k * rmax; i++) x[i] = nrand();
        const size_t need = slm_matmul_scratch_bytes(rt, k, rmax);
        void *scratch = aligned_alloc(64, (need + 63) & ~(size_t)63);
        int bad = 0, cases = 0;
        double worst = 0;
        for (size_t ri = 0; ri < sizeof rows_ / sizeof rows_[0]; ri++)
            for (int cut = 0; cut < 2; cut++) {
                const int rows = rows_[ri], n0 = cut ? 5 : 0, n1 = cut ? n - 3 : n;
                const uint8_t none[3] = {0, 0, 0};
                for (int i = 0; i < ldy * rmax; i++) y0[i] = -7.0f;
                run_emu(rt, w, k, n0, n1, rows, x, y0, ldy, none, scratch);
                if (have512) { /* the AVX-512 set: the same int8 activations, another summation order */
                    for (int i = 0; i < ldy * rmax; i++) yr[i] = -7.0f;
                    slm_mm mm = {.w = w, .wrow = slm_row_bytes(rt, (uint64_t)k), .wtype = rt, .k = k, .n0 = n0, .n1 = n1,
                                 .rows = rows, .x = x, .ldx = (size_t)k, .y = yr, .ldy = (size_t)ldy, .scratch = scratch};
                    slm_kernels_active()->matmul(&mm);
                    double ymax = 0;
                    for (int i = 0; i < rows; i++)
                        for (int j = n0; j < n1; j++) ymax = fmax(ymax, fabs(yr[i * ldy + j]));
                    for (int i = 0; i < rows; i++)
                        for (int j = n0; j < n1; j++) { /* float sums of ~k / 32 terms in two orders */
                            const double d = fabs((double)y0[i * ldy + j] - yr[i * ldy + j]) / ymax;
                            worst = fmax(worst, d);
                            bad += !(d < 1e-5);
                        }
                }
                for (int si = 0; si < 5; si++) {
                    const uint8_t tl[3] = {(uint8_t)steps[si][0], (uint8_t)steps[si][1], (uint8_t)(t == SLM_Q6_K ? 16 : 32)};
                    for (int i = 0; i < ldy * rmax; i++) y1[i] = -7.0f;
                    run_emu(rt, w, k, n0, n1, rows, x, y1, ldy, tl, scratch);
                    /* each output's sum runs in the same order in every step: equal bits, and
                       nothing written outside [n0, n1) or past the rows */
                    bad += memcmp(y0, y1, sizeof(float) * ldy * rmax) != 0;
                    cases++;
                }
            }
        CHECKF(bad == 0, "%s: %d of %d step cases differ (worst vs avx512 %.3g)", slm_dtype_name(rt), bad, cases, worst);
        fprintf(stderr, "  %-9s %d step cases equal to the default step; vs avx512 worst rel %.2g\n", slm_dtype_name(rt), cases,
                worst);
        free(w), free(tmp), free(row), free(x), free(y0), free(y1), free(yr), free(scratch);
    }
    slm_kernels_select(NULL);
}

/* The BF16 kernel (TDPBF16PS) in each of its steps: equal bits to its
 * default step (each output sums its K steps in the same order). */
static void test_bf16_steps(void) {
    static const int steps[][2] = {{1, 1}, {1, 2}, {2, 1}, {2, 2}};
    const int k = 100, n = 48, rmax = 33, ldy = n + 1;
    uint16_t *w = malloc(sizeof(uint16_t) * k * n);
    for (int i = 0; i < k * n; i++) w[i] = slm_f32_to_bf16(nrand() * 0.05f);
    float *x = malloc(sizeof(float) * k * rmax), *y0 = malloc(sizeof(float) * ldy * rmax),
          *y1 = malloc(sizeof(float) * ldy * rmax);
    for (int i = 0; i < k * rmax; i++) x[i] = nrand();
    const size_t need = slm_matmul_scratch_bytes(SLM_BF16, k, rmax);
    CHECK(need > 0);
    void *scratch = aligned_alloc(64, (need + 63) & ~(size_t)63);
    int bad = 0, cases = 0;
    static const int rows_[] = {2, 16, 17, 33};
    for (size_t ri = 0; ri < sizeof rows_ / sizeof rows_[0]; ri++) {
        const int rows = rows_[ri];
        slm_mm mm = {.w = w, .wrow = (uint64_t)k * 2, .wtype = SLM_BF16, .k = k, .n0 = 3, .n1 = n, .rows = rows, .x = x,
                     .ldx = (size_t)k, .y = y0, .ldy = (size_t)ldy, .scratch = scratch};
        for (int i = 0; i < ldy * rmax; i++) y0[i] = y1[i] = -7.0f;
        slm_amx_matmul_bf16_emu(&mm);
        for (int si = 0; si < 4; si++) {
            mm.y = y1;
            mm.tiles[0] = (uint8_t)steps[si][0], mm.tiles[1] = (uint8_t)steps[si][1], mm.tiles[2] = 32;
            slm_amx_matmul_bf16_emu(&mm);
            bad += memcmp(y0, y1, sizeof(float) * ldy * rmax) != 0;
            cases++;
        }
        int touched = 0;
        for (int i = 0; i < rows; i++) touched += y0[i * ldy + 3] != -7.0f && y0[i * ldy + 2] == -7.0f;
        CHECK(touched == rows);
    }
    CHECKF(bad == 0, "bf16: %d of %d step cases differ", bad, cases);
    fprintf(stderr, "  bf16      %d step cases equal to the default step\n", cases);
    free(w), free(x), free(y0), free(y1), free(scratch);
}

/* ---- the compiler's plan in the dump, the blob and the engine ----------------- */
static char g_gguf[320], g_blob[320];

static int make_model(void) {
    snprintf(g_gguf, sizeof g_gguf, "%s/q4_0.gguf", g_tmp);
    snprintf(g_blob, sizeof g_blob, "%s/q4_0.blob", g_tmp);
    return amx_synth(g_gguf, "q4_0", "--dim 256 --heads 4 --kv-heads 1", 320, 9);
}

static void test_dump(void) {
    char *argv[] = {"staticlm", "compile", "-m", g_gguf, "--max-prompt-len", "16", "--dump-tasks", "-o", g_blob, NULL};
    char *out = NULL;
    CHECK(t_run_capture(g_tmp, SLM_CLI_PATH, argv, &out, NULL) == 0);
    CHECK(out != NULL);
    if (!out) return;
    /* prefill (16 rows: one row tile): the q4_0 matrices in 1 x 3 steps; decode: none */
    const char *gen = strstr(out, "generate");
    const char *hit = strstr(out, "tiles=1x3,k32");
    CHECKF(hit && (!gen || hit < gen), "no 1x3 step in the prefill dump");
    CHECKF(gen && !strstr(gen, "tiles="), "a decode task carries tiles");
    free(out);
}

/* The prefill task section of the blob, and the first matrix task with tiles. */
static void test_blob_tiles(void) {
    size_t n = 0;
    uint8_t *img = (uint8_t *)t_read_file(g_blob, &n);
    CHECK(img != NULL);
    if (!img) return;
    uint64_t len = 0;
    uint8_t *tasks = t_blob_section(img, n, ".slm.tasks.prefill.16", &len);
    CHECK(tasks && len % BLOB_TASK_SIZE == 0);
    char msg[512];
    CHECKF(t_blob_opens(img, n, "tiles.blob", msg, sizeof msg), "pristine: %s", msg);
    int mm = -1, other = -1, with = 0;
    for (uint64_t i = 0; tasks && i < len / BLOB_TASK_SIZE; i++) {
        const uint8_t *e = tasks + i * BLOB_TASK_SIZE;
        if (e[0] == SLM_T_MATMUL && e[155]) {
            with++;
            if (mm < 0) mm = (int)i;
            CHECK(e[153] == 1 && e[155] == 32); /* one row tile; q4_0 and q8_0 spans */
        }
        if (e[0] != SLM_T_MATMUL && other < 0) other = (int)i;
    }
    CHECKF(mm >= 0 && other >= 0, "no matrix task with tiles (%d) or no other task (%d)", mm, other);
    if (mm < 0 || other < 0) {
        free(img);
        return;
    }
    uint8_t *e = tasks + (size_t)mm * BLOB_TASK_SIZE;
    static const uint8_t bad[][3] = {{2, 2, 32}, {1, 3, 16}, {0, 0, 0}, {2, 3, 32}, {1, 9, 32}};
    uint8_t keep[3];
    memcpy(keep, e + 153, 3);
    for (size_t bi = 0; bi < sizeof bad / sizeof bad[0]; bi++) {
        memcpy(e + 153, bad[bi], 3);
        CHECKF(!t_blob_opens(img, n, "tiles.blob", msg, sizeof msg) && strstr(msg, "tiles") && strstr(msg, "matmul"),
               "tiles %u %u %u: %s", bad[bi][0], bad[bi][1], bad[bi][2], msg);
    }
    memcpy(e + 153, keep, 3);
    e = tasks + (size_t)other * BLOB_TASK_SIZE;
    e[154] = 2;
    CHECKF(!t_blob_opens(img, n, "tiles.blob", msg, sizeof msg) && strstr(msg, "not a matrix multiply"), "tiles on a non-matmul: %s", msg);
    e[154] = 0;
    e[159] = 1; /* f2 (bytes 156..159) on a task without the output-scale flag */
    CHECKF(!t_blob_opens(img, n, "tiles.blob", msg, sizeof msg) && strstr(msg, "scale f2"), "f2 without its flag: %s", msg);
    e[159] = 0;
    char ok_msg[512];
    CHECKF(t_blob_opens(img, n, "tiles.blob", ok_msg, sizeof ok_msg), "restored: %s", ok_msg);
    fprintf(stderr, "  %d prefill matrix tasks carry tiles; wrong tiles refused (last: \"%s\")\n", with, msg);
    free(img);
}

/* 37 tokens in 15-row chunks (one row tile: 1 x 3 steps; a last chunk of 7
 * rows; below the 16 rows where prefill attention goes to tiles, so the
 * matrix kernels alone differ: the same int8 products summed in another
 * order, which an int8 activation rounding in the next layer can turn into
 * a jump of ~0.5% of max |logit|, measured 0.46% on this file; test_amx's
 * test_engine says more). Tolerance 1.5%: a broken tile layout moves the
 * logits by 10-20%. */
static void test_engine_chunks(void) {
    if (!slm_kernels_select("amx-emu")) {
        fprintf(stderr, "  skipped: no AVX-512 set on this CPU (the amx sets delegate decode to it)\n");
        return;
    }
    slm_kernels_select(NULL);
    const int vocab = 320;
    float *a = malloc(sizeof(float) * vocab), *b = malloc(sizeof(float) * vocab);
    if (amx_prefill_logits(g_gguf, "avx512", 15, SLM_KV_F32, 37, a, vocab) &&
        amx_prefill_logits(g_gguf, "amx-emu", 15, SLM_KV_F32, 37, b, vocab)) {
        double amax;
        const double d = amx_logit_diff(a, b, vocab, &amax);
        CHECKF(d <= 1.5e-2, "logits differ by %.3g of max |logit| %.3g", d, amax);
        fprintf(stderr, "  15-row chunks: amx-emu vs avx512 logits: max diff %.2g of max |logit| %.3g\n", d, amax);
    }
    free(a), free(b);
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/slm-test-amx-plan-%d", (int)getpid());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf \"%s\" && mkdir -p \"%s\"", g_tmp, g_tmp);
    if (system(cmd) != 0) return 1;
    T_RUN(test_choose);
    T_RUN(test_steps_cfg);
    T_RUN(test_kernel_steps);
    T_RUN(test_bf16_steps);
    if (make_model()) {
        T_RUN(test_dump);
        T_RUN(test_blob_tiles);
        T_RUN(test_engine_chunks);
    } else {
        CHECKF(0, "synth failed");
    }
    snprintf(cmd, sizeof cmd, "rm -rf \"%s\"", g_tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
    T_DONE();
}
