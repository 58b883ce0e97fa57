/* Prefill attention on AMX-BF16 tiles (device/attention_amx.c): the tile
 * kernel on the emulation (and on AMX where there is some) against a
 * double-precision reference with a bound derived from the split-bf16
 * products (three bf16 pieces per operand, six piece products), over head sizes, GQA groups, row counts with partial
 * tiles, causal limits, sliding windows, masked holes (NaN behind them),
 * rows with no valid KV row, f32 and f16 caches; the shapes it declines;
 * and the whole engine's prefill logits on amx-emu against avx512. */
#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "common/cpu.h"
#include "common/dtype.h"
#include "device/attention.h"
#include "device/kernels.h"
#include "staticlm.h"
#include "t.h"
#include "amx_engine.h"

static uint64_t g_rng = 7;
static float frand(void) { /* uniform in [-1, 1) */
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* u: bf16's unit roundoff (8 significant bits, round to nearest: 2^-8);
 * gamma(n) = n 2^-24 / (1 - n 2^-24): n fp32 roundings. The kernel splits
 * x = x0 + x1 + x2 exactly (|x1| <= u (1+u) |x|, |x2| <= u^2 (1+u) |x|), so
 * sum |x_i| <= SIG |x|, and drops the products x_i y_j with i + j >= 3:
 * at most DROP |x y|. */
static const double U_BF16 = 1.0 / 256;
#define SIG ((1 + U_BF16) * (1 + U_BF16 + U_BF16 * U_BF16))
#define DROP ((2 * U_BF16 * U_BF16 * U_BF16 + U_BF16 * U_BF16 * U_BF16 * U_BF16) * (1 + U_BF16) * (1 + U_BF16))
static double gamma32(int n) { return n * 0x1p-24 / (1 - n * 0x1p-24); }

/* One block as the tests build it: the stored cache (f32 or f16 rows of
 * ld elements, KV head 1 used) and its values as floats. */
typedef struct blk {
    int hd, G, rows, kt, n;  /* n: cache rows allocated (NaN past the last valid one) */
    size_t ld, rb;
    uint8_t *Kt, *Vt;        /* stored */
    float *Kd, *Vd;          /* stored values as floats, [n][ld] */
    float *q, *out;          /* [rows][q_ld], [rows][o_ld] */
    size_t q_ld, o_ld;
    int32_t *mask;
    int first[SLM_ATTN_ROWS_MAX], last[SLM_ATTN_ROWS_MAX];
} blk;

/* The reference for (row i, head g) on the stored values, and the bound of
 * each output element (docs/amx.md, "Prefill attention on BF16 tiles"):
 *   scores: |s~ - s| <= scale (DROP + gamma(6 D) SIG^2) sum_d |q_d k_d|
 *           (Q, K split exactly; the dropped piece products; 6 D exact
 *           piece products added in fp32), plus the fp32 scale, shift and
 *           expf: 2^-22 (|s| + |s - M| + 1); P split exactly;
 *   so each unnormalized weight moves by a factor e^(+-rho), rho the
 *   largest of these, and the normalized weights w^ (l sums the P that
 *   multiplies V) by e^(+-2 rho): |sum (w^ - w) v| <= (e^(2 rho) - 1) A,
 *   A = sum_j w_j |v_jd|; V split exactly, P V's dropped products: DROP
 *   e^(2 rho) A; the fp32 sums of P V (6 x 32 piece products per tile, 2
 *   roundings per tile in o = o corr + PV; l fewer; the division):
 *   gamma(2 (192 + 2 tiles + 2)) SIG^2 e^(2 rho) A. */
static int reference(const blk *b, const slm_attn_rows *a, int i, int g, double *ref, double *bound) {
    const int D = b->hd;
    const float *q = a->q + (size_t)i * a->q_ld + (size_t)g * a->q_stride;
    const size_t off = (size_t)D; /* KV head 1 */
    double M = -INFINITY;
    int any = 0;
    for (int j = a->first[i]; j <= a->last[i]; j++) {
        if (!a->mask[j]) continue;
        double s = 0;
        for (int d = 0; d < D; d++) s += (double)q[d] * b->Kd[(size_t)j * b->ld + off + d];
        s *= a->scale;
        M = s > M ? s : M;
        any = 1;
    }
    for (int d = 0; d < D; d++) ref[d] = 0, bound[d] = 0;
    if (!any) return 0;
    double sum = 0, rho = 0, *A = calloc((size_t)D, sizeof(double));
    for (int j = a->first[i]; j <= a->last[i]; j++) {
        if (!a->mask[j]) continue;
        double s = 0, sa = 0;
        for (int d = 0; d < D; d++) {
            const double x = (double)q[d] * b->Kd[(size_t)j * b->ld + off + d];
            s += x, sa += fabs(x);
        }
        s *= a->scale;
        const double dj = a->scale * (DROP + gamma32(6 * D) * SIG * SIG) * sa + 0x1p-22 * (fabs(s) + fabs(s - M) + 1);
        rho = dj > rho ? dj : rho;
        const double p = exp(s - M);
        sum += p;
        for (int d = 0; d < D; d++) {
            const double v = b->Vd[(size_t)j * b->ld + off + d];
            ref[d] += p * v, A[d] += p * fabs(v);
        }
    }
    const int tiles = (a->last[i] - a->first[i]) / 32 + 2;
    const double e2 = exp(2 * rho);
    for (int d = 0; d < D; d++) {
        ref[d] /= sum, A[d] /= sum;
        bound[d] = (e2 - 1) * A[d] + e2 * (DROP + gamma32(2 * (192 + 2 * tiles + 2)) * SIG * SIG) * A[d] + 1e-30;
    }
    free(A);
    return 1;
}

static void blk_alloc(blk *b, int hd, int G, int rows, int kt, int n) {
    memset(b, 0, sizeof *b);
    b->hd = hd, b->G = G, b->rows = rows, b->kt = kt, b->n = n;
    b->ld = 2 * (size_t)hd; /* two KV heads */
    b->rb = kt == SLM_F32 ? b->ld * 4 : (size_t)slm_row_bytes((uint32_t)kt, b->ld);
    b->Kt = malloc(b->rb * n), b->Vt = malloc(b->rb * n);
    b->Kd = malloc(sizeof(float) * b->ld * n), b->Vd = malloc(sizeof(float) * b->ld * n);
    b->q_ld = (size_t)G * hd + 3, b->o_ld = (size_t)G * hd + 5;
    b->q = malloc(sizeof(float) * b->q_ld * rows), b->out = malloc(sizeof(float) * b->o_ld * rows);
    b->mask = malloc(sizeof(int32_t) * n);
}

static void blk_free(blk *b) {
    free(b->Kt), free(b->Vt), free(b->Kd), free(b->Vd), free(b->q), free(b->out), free(b->mask);
}

/* Cache rows [0, nvalid) valid unless a hole; holes and rows past nvalid
 * hold NaN (the kernel must not read them). */
static void blk_fill(blk *b, int nvalid, int hole0, int hole1) {
    float *row = malloc(sizeof(float) * b->ld);
    for (int j = 0; j < b->n; j++) {
        const int valid = j < nvalid && !(j >= hole0 && j < hole1) && j % 11 != 7;
        b->mask[j] = valid;
        for (int kv = 0; kv < 2; kv++) {
            uint8_t *st = (kv ? b->Vt : b->Kt) + (size_t)j * b->rb;
            float *fd = (kv ? b->Vd : b->Kd) + (size_t)j * b->ld;
            for (size_t d = 0; d < b->ld; d++) row[d] = valid ? frand() : b->kt == SLM_Q8_0 ? 0.0f : NAN;
            slm_quantize_row((uint32_t)b->kt, row, st, (int64_t)b->ld);
            slm_dequantize_row((uint32_t)b->kt, st, fd, (int64_t)b->ld);
        }
    }
    for (size_t i = 0; i < b->q_ld * b->rows; i++) b->q[i] = 2 * frand();
    free(row);
}

static slm_attn_rows blk_args(blk *b) {
    const size_t head1 = b->kt == SLM_F32 ? (size_t)b->hd * 4 : (size_t)slm_row_bytes((uint32_t)b->kt, (uint64_t)b->hd);
    return (slm_attn_rows){.q = b->q, .q_ld = b->q_ld, .q_stride = (size_t)b->hd, .rows = b->rows, .group = b->G,
                           .head_dim = b->hd, .K = b->Kt + head1, .V = b->Vt + head1, .ld = b->ld, .kv_type = b->kt,
                           .mask = b->mask, .first = b->first, .last = b->last, .scale = 1.0f / sqrtf((float)b->hd),
                           .out = b->out, .out_ld = b->o_ld, .out_stride = (size_t)b->hd};
}

/* Runs fn on the block and checks every output against the bound; the
 * worst err / bound into *worst; rows with no valid KV row must be 0. */
static void check_block(blk *b, int (*fn)(const slm_attn_rows *), const char *what, double *worst) {
    slm_attn_rows a = blk_args(b);
    for (size_t i = 0; i < b->o_ld * b->rows; i++) b->out[i] = -12345.0f;
    CHECKF(fn(&a) == 1, "%s declined a block it takes", what);
    double *ref = malloc(sizeof(double) * b->hd), *bd = malloc(sizeof(double) * b->hd), w = 0;
    int bad = 0, empty = 0;
    for (int i = 0; i < b->rows; i++)
        for (int g = 0; g < b->G; g++) {
            const int any = reference(b, &a, i, g, ref, bd);
            const float *o = b->out + (size_t)i * b->o_ld + (size_t)g * b->hd;
            empty += !any;
            for (int d = 0; d < b->hd; d++) {
                if (!any) {
                    bad += o[d] != 0.0f;
                    continue;
                }
                const double r = isnan(o[d]) ? INFINITY : fabs(o[d] - ref[d]) / bd[d];
                if (r > w) w = r;
            }
        }
    /* the padding between rows and heads is left alone */
    for (int i = 0; i < b->rows; i++)
        for (size_t c = (size_t)b->G * b->hd; c < b->o_ld; c++) bad += b->out[(size_t)i * b->o_ld + c] != -12345.0f;
    CHECKF(!bad && w <= 1.0, "%s hd %d group %d rows %d %s: err/bound %.3g, %d bad (empty rows %d)", what, b->hd, b->G,
           b->rows, slm_dtype_name((uint32_t)b->kt), w, bad, empty);
    if (w > *worst) *worst = w;
    free(ref), free(bd);
}

/* Per-row ranges. variant 0: causal after p0 rows of context; 1: a sliding
 * window of 20 and a batch base (first >= 5); 2: a window of 6 over a
 * masked hole, so some rows see nothing (their output must be 0); 3: every
 * row's own limit, out of order, windows of various widths. */
static int set_ranges(blk *b, int variant, int p0, int *hole0, int *hole1) {
    *hole0 = *hole1 = -1;
    int lmax = 0;
    for (int i = 0; i < b->rows; i++) {
        int l = p0 + i, f = 0;
        if (variant == 1) f = l + 1 - 20 > 5 ? l + 1 - 20 : 5;
        if (variant == 2) f = l + 1 - 6 > 0 ? l + 1 - 6 : 0;
        if (variant == 3) l = p0 + (i * 37) % b->rows, f = l - (i % 5) * 9 > 0 ? l - (i % 5) * 9 : 0;
        b->first[i] = f, b->last[i] = l;
        lmax = l > lmax ? l : lmax;
    }
    if (variant == 2) *hole0 = p0 + 3, *hole1 = p0 + 15;
    return lmax + 1;
}

static void test_tiles_vs_reference(void) {
    static const int hds[] = {32, 64, 128}, groups[] = {1, 4}, rowss[] = {16, 17, 33, 64}, p0s[] = {0, 45};
    static const int kts[] = {SLM_F32, SLM_F16};
    const slm_cpu *cpu = slm_cpu_features();
    const int hw = cpu->amx_tile && cpu->amx_bf16 && cpu->amx_os;
    double worst = 0, worst_hw = 0;
    int blocks = 0;
    for (size_t hi = 0; hi < 3; hi++)
        for (size_t gi = 0; gi < 2; gi++)
            for (size_t ri = 0; ri < 4; ri++)
                for (size_t ti = 0; ti < 2; ti++)
                    for (int variant = 0; variant < 4; variant++)
                        for (size_t pi = 0; pi < 2; pi++) {
                            blk b;
                            int h0, h1;
                            blk_alloc(&b, hds[hi], groups[gi], rowss[ri], kts[ti], p0s[pi] + rowss[ri] + 40);
                            const int nvalid = set_ranges(&b, variant, p0s[pi], &h0, &h1);
                            blk_fill(&b, nvalid, h0, h1);
                            check_block(&b, slm_attention_rows_amx_emu, "emulated", &worst);
                            if (hw) check_block(&b, slm_attention_rows_amx, "hardware", &worst_hw);
                            blk_free(&b);
                            blocks++;
                        }
    fprintf(stderr, "  emulated tiles: %d blocks, worst err/bound %.3g\n", blocks, worst);
    /* The bound is a worst case (gamma(6 D) for sums that behave like
     * sqrt(6 D) 2^-24): it catches a dropped piece product of order 1
     * (Q1 K0 or P0 V1: 35-56 times it) but not one of order 2 (Q2 K0, P0
     * V2: 0.036, 0.10). The emulation measures 0.0026; a level of 0.01
     * catches those too (not a proof: a regression check on the emulation's
     * fixed rounding, not applied to the hardware's). */
    CHECKF(worst <= 0.01, "emulated tiles: worst err/bound %.3g above the measured level", worst);
    if (hw) fprintf(stderr, "  AMX hardware: worst err/bound %.3g\n", worst_hw);
    else fprintf(stderr, "  AMX hardware path skipped: %s\n",
                 !cpu->amx_tile || !cpu->amx_bf16 ? "the CPU does not report AMX-TILE and AMX-BF16"
                                                  : "the OS did not grant the tile data state");
}

/* Blocks the kernel does not take are declined with nothing written. */
static void test_declines(void) {
    static const struct { int hd, kt, rows; } c[] = {{48, SLM_F32, 16}, {288, SLM_F32, 16}, {64, SLM_Q8_0, 16},
                                                     {64, SLM_F32, SLM_ATTN_ROWS_MAX + 1}};
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        blk b;
        int h0, h1;
        const int rows = c[k].rows > SLM_ATTN_ROWS_MAX ? SLM_ATTN_ROWS_MAX : c[k].rows;
        blk_alloc(&b, c[k].hd, 1, rows, c[k].kt, rows + 4);
        blk_fill(&b, set_ranges(&b, 0, 0, &h0, &h1), -1, -1);
        slm_attn_rows a = blk_args(&b);
        a.rows = c[k].rows;
        for (size_t i = 0; i < b.o_ld * rows; i++) b.out[i] = 7.0f;
        CHECKF(slm_attention_rows_amx_emu(&a) == 0 && slm_attention_rows_amx(&a) == 0, "hd %d type %d rows %d taken",
               c[k].hd, c[k].kt, c[k].rows);
        int touched = 0;
        for (size_t i = 0; i < b.o_ld * rows; i++) touched += b.out[i] != 7.0f;
        CHECK(!touched);
        blk_free(&b);
    }
}

/* ---- the engine ----------------------------------------------------------- */
/* amx-emu (int8 matmuls on the emulated tiles, attention on the emulated
 * BF16 tiles) against avx512 (the same int8 matmuls, f32 attention). The
 * logits are not a smooth function of the attention: the int8 activations
 * of the next matmuls (and an f16 cache) round, and an output moved by
 * 1e-6 flips some of those roundings, each worth ~0.5-1% of max |logit|
 * here (measured: an exact double attention gives <= 2.3e-6 in test_amx's
 * engine check, the same plus 1e-6 relative noise 0.86%). With an f32
 * cache the split products agree to fp32 rounding and flip nothing here:
 * 5.9e-8 and 4.8e-6 of max |logit| (two pieces instead of three, ~2^-16:
 * 0.72-0.84%; a dropped order-1 piece product 1.2%), tolerance 2e-3. With
 * an f16 cache the per-row path itself differs by 0.75% and 0.84% (tiles
 * declined: f16 rounding flips of the matmuls' 1e-7 differences); the
 * tiles measure 0.75% and 0.81%; tolerance 1.5%. Only the kernel test
 * above checks the precision; this checks the wiring. */
static void test_engine(void) {
    if (!slm_kernels_select("amx-emu")) {
        fprintf(stderr, "  skipped: no AVX-512 set on this CPU (the amx sets delegate decode to it)\n");
        return;
    }
    slm_kernels_select(NULL);
    char dir[128], path[256], cmd[300];
    snprintf(dir, sizeof dir, "/tmp/slm-test-amx-attn-%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "mkdir -p \"%s\"", dir);
    CHECK(system(cmd) == 0);
    static const struct { const char *type, *shape; } m[] = {
        {"q4_0", "--dim 256 --heads 4 --kv-heads 1"}, /* head_dim 64, one head per task */
        {"q8_0", "--dim 512 --heads 8 --kv-heads 2"}, /* head_dim 64, two heads of a KV head per task */
    };
    const int vocab = 320;
    for (int mi = 0; mi < 2; mi++) {
        snprintf(path, sizeof path, "%s/%s.gguf", dir, m[mi].type);
        if (!amx_synth(path, m[mi].type, m[mi].shape, vocab, 5)) continue;
        for (int kv = SLM_KV_F32; kv <= SLM_KV_F16; kv++) {
            float *a = malloc(sizeof(float) * vocab), *b = malloc(sizeof(float) * vocab);
            /* a 45-token prefill (>= 16 rows: the executor runs the tile attention) */
            if (amx_prefill_logits(path, "avx512", 48, kv, 45, a, vocab) &&
                amx_prefill_logits(path, "amx-emu", 48, kv, 45, b, vocab)) {
                double amax;
                const double d = amx_logit_diff(a, b, vocab, &amax), tol = kv == SLM_KV_F32 ? 2e-3 : 1.5e-2;
                CHECKF(d <= tol, "%s kv %d: logits differ by %.3g of max |logit| %.3g", m[mi].type, kv, d, amax);
                fprintf(stderr, "  %s (%s) kv %s: amx-emu vs avx512 logits: max diff %.2g of max |logit| %.3g\n",
                        m[mi].type, m[mi].shape, kv == SLM_KV_F32 ? "f32" : "f16", d, amax);
            }
            free(a), free(b);
        }
    }
    snprintf(cmd, sizeof cmd, "rm -rf \"%s\"", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

int main(void) {
    T_RUN(test_tiles_vs_reference);
    T_RUN(test_declines);
    T_RUN(test_engine);
    T_DONE();
}
