/* Attention kernels: every variant against a double-precision reference,
 * over head sizes, GQA group sizes, masks with holes, windows, and NaN in
 * rows the mask rules out; and over the KV types (f16, q8_0): against the
 * reference on the stored values (tight) and on the f32 values (the type's
 * rounding). */
#include <math.h>
#include <string.h>

#include "common/dtype.h"
#include "device/attention.h"
#include "device/kernels.h"
#include "t.h"

static uint64_t g_rng = 42;
static float frand(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* K and V: the f32 rows (ld floats apart) the cache was made from. */
/* Head g's score of KV row j: q.K scaled, less ALiBi's slope * |qpos - j|
 * where the args carry slopes. */
static double ref_score(const slm_attn_args *a, const float *K, int g, int j) {
    const float *q = a->q + (size_t)g * a->q_stride;
    double s = 0;
    for (int d = 0; d < a->head_dim; d++) s += (double)q[d] * K[(size_t)j * a->ld + d];
    s *= a->scale;
    if (a->alibi) s -= (double)a->alibi[g] * fabs((double)a->qpos - j);
    return s;
}

static void reference(const slm_attn_args *a, const float *K, const float *V, double *out) {
    for (int g = 0; g < a->group; g++) {
        double mx = -INFINITY, sum = 0;
        int any = 0;
        for (int j = a->first; j <= a->last; j++) {
            if (!a->mask[j]) continue;
            const double s = ref_score(a, K, g, j);
            if (s > mx) mx = s;
            any = 1;
        }
        for (int d = 0; d < a->head_dim; d++) out[g * a->head_dim + d] = 0;
        if (!any) continue;
        for (int j = a->first; j <= a->last; j++) {
            if (!a->mask[j]) continue;
            double p = exp(ref_score(a, K, g, j) - mx);
            sum += p;
            for (int d = 0; d < a->head_dim; d++) out[g * a->head_dim + d] += p * V[(size_t)j * a->ld + d];
        }
        for (int d = 0; d < a->head_dim; d++) out[g * a->head_dim + d] /= sum;
    }
}

static void test_variants_match_reference(void) {
    static const char *const sets[] = {"scalar", "avx2", "avx512"};
    /* head_dim: the AVX-512 decode entry's 1, 2, 3, 4 (registers), 5, 8 (registers) and 16
       vectors, the AVX2 entry's head pairs (hd <= 32), 64-dim chunks and their tails (48, 80),
       and the fallbacks; groups: the chunks of 4 heads (hd 64) and 2 (hd 128, AVX2 hd <= 32)
       and their rests */
    static const int hds[] = {8, 16, 32, 48, 64, 80, 128, 256, 6};
    static const int groups[] = {1, 2, 3, 4, 5, 8};
    static const int lens[] = {1, 5, 31, 32, 33, 100, 700};
    const int kvh = 2;
    for (size_t si = 0; si < 3; si++) {
        if (!slm_kernels_select(sets[si])) continue;
        for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++)
            for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++)
                for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
                    for (int variant = 0; variant < 3; variant++) {
                        const int hd = hds[hi], G = groups[gi], n = lens[li];
                        const size_t ld = (size_t)kvh * hd;
                        float *K = malloc(sizeof(float) * ld * n), *V = malloc(sizeof(float) * ld * n);
                        float *q = malloc(sizeof(float) * G * hd), *out = malloc(sizeof(float) * G * hd);
                        int32_t *mask = malloc(sizeof(int32_t) * n);
                        double *ref = malloc(sizeof(double) * G * hd);
                        for (size_t i = 0; i < ld * n; i++) { K[i] = 3 * frand(); V[i] = frand(); }
                        for (int i = 0; i < G * hd; i++) q[i] = 3 * frand();
                        for (int j = 0; j < n; j++) {
                            /* variant 0: all valid; 1: holes (NaN behind them); 2: a window */
                            mask[j] = variant != 1 || (j % 3 != 1 && !(j >= 40 && j < 80));
                            if (!mask[j])
                                for (size_t d = 0; d < ld; d++) K[(size_t)j * ld + d] = V[(size_t)j * ld + d] = NAN;
                        }
                        slm_attn_args a = {.q = q, .q_stride = (size_t)hd, .group = G, .head_dim = hd, .K = K + hd,
                                           .V = V + hd, .ld = ld, .mask = mask,
                                           .first = variant == 2 && n > 10 ? n - 10 : 0, .last = n - 1,
                                           .scale = 1.0f / sqrtf((float)hd), .out = out, .out_stride = (size_t)hd};
                        reference(&a, K + hd, V + hd, ref);
                        slm_kernels_active()->attention(&a);
                        double worst = 0;
                        for (int i = 0; i < G * hd; i++) {
                            double e = fabs(out[i] - ref[i]);
                            if (isnan(out[i])) e = INFINITY;
                            if (e > worst) worst = e;
                        }
                        CHECKF(worst < 2e-5, "%s hd %d group %d len %d variant %d: max err %g", sets[si], hd, G, n,
                               variant, worst);
                        free(K); free(V); free(q); free(out); free(mask); free(ref);
                    }
    }
    slm_kernels_select(NULL);
}

/* Typed caches: rows of ld elements stored as f16 / q8_0; every set reads
 * them as the reference does on their dequantized values (2e-5), and within
 * the type's rounding of the f32 result. */
static void test_kv_types(void) {
    static const char *const sets[] = {"scalar", "avx2", "avx512"};
    static const int types[] = {SLM_F16, SLM_Q8_0};
    static const int hds[] = {32, 64, 128};
    static const int lens[] = {1, 33, 300};
    /* groups: the decode entries read a whole tile of an f16 cache in place up to 8 heads, and
       convert it for more (and for tiles with keys left out) */
    static const int groups[] = {1, 4, 8, 12};
    const int kvh = 2;
    for (size_t si = 0; si < 3; si++) {
        if (!slm_kernels_select(sets[si])) continue;
        for (size_t ti = 0; ti < 2; ti++)
            for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++)
                for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
                    for (int variant = 0; variant < 2 * 4; variant++) {
                        const int kt = types[ti], hd = hds[hi], n = lens[li], G = groups[variant / 2];
                        const size_t ld = (size_t)kvh * hd, rb = (size_t)slm_row_bytes((uint32_t)kt, ld);
                        float *K = malloc(sizeof(float) * ld * n), *V = malloc(sizeof(float) * ld * n);
                        float *Kd = malloc(sizeof(float) * ld * n), *Vd = malloc(sizeof(float) * ld * n);
                        uint8_t *Kt = malloc(rb * n), *Vt = malloc(rb * n);
                        float *q = malloc(sizeof(float) * G * hd), *out = malloc(sizeof(float) * G * hd);
                        int32_t *mask = malloc(sizeof(int32_t) * n);
                        double *ref = malloc(sizeof(double) * G * hd), *ref32 = malloc(sizeof(double) * G * hd);
                        for (size_t i = 0; i < ld * n; i++) { K[i] = 3 * frand(); V[i] = frand(); }
                        for (int i = 0; i < G * hd; i++) q[i] = frand();
                        for (int j = 0; j < n; j++) {
                            mask[j] = variant % 2 == 0 || j % 3 != 1;
                            slm_kernels_active()->kv_store(kt, K + (size_t)j * ld, Kt + (size_t)j * rb, (int)ld);
                            slm_kernels_active()->kv_store(kt, V + (size_t)j * ld, Vt + (size_t)j * rb, (int)ld);
                            CHECK(slm_dequantize_row((uint32_t)kt, Kt + (size_t)j * rb, Kd + (size_t)j * ld, (int64_t)ld));
                            CHECK(slm_dequantize_row((uint32_t)kt, Vt + (size_t)j * rb, Vd + (size_t)j * ld, (int64_t)ld));
                            if (!mask[j]) memset(Kt + (size_t)j * rb, 0xff, rb); /* NaN halves and scales */
                        }
                        const size_t head1 = (size_t)slm_row_bytes((uint32_t)kt, (uint64_t)hd); /* KV head 1 */
                        slm_attn_args a = {.q = q, .q_stride = (size_t)hd, .group = G, .head_dim = hd,
                                           .K = Kt + head1, .V = Vt + head1, .ld = ld, .kv_type = kt, .mask = mask,
                                           .first = 0, .last = n - 1, .scale = 1.0f / sqrtf((float)hd), .out = out,
                                           .out_stride = (size_t)hd};
                        reference(&a, Kd + hd, Vd + hd, ref);
                        reference(&a, K + hd, V + hd, ref32);
                        slm_kernels_active()->attention(&a);
                        double worst = 0, worst32 = 0;
                        for (int i = 0; i < G * hd; i++) {
                            double e = isnan(out[i]) ? INFINITY : fabs(out[i] - ref[i]);
                            double e32 = isnan(out[i]) ? INFINITY : fabs(out[i] - ref32[i]);
                            if (e > worst) worst = e;
                            if (e32 > worst32) worst32 = e32;
                        }
                        /* f16: 2^-11 relative on K (scores up to ~3 x 3 x hd / sqrt(hd)) and V;
                           q8_0: 1/254 of each block's largest magnitude */
                        const double tol32 = kt == SLM_F16 ? 5e-3 : 5e-2;
                        CHECKF(worst < 2e-5 && worst32 < tol32,
                               "%s %s hd %d group %d len %d variant %d: max err %g (stored), %g (f32)", sets[si],
                               slm_dtype_name((uint32_t)kt), hd, G, n, variant, worst, worst32);
                        free(K); free(V); free(Kd); free(Vd); free(Kt); free(Vt); free(q); free(out); free(mask);
                        free(ref); free(ref32);
                    }
    }
    slm_kernels_select(NULL);
}

/* The x86 stores write what the reference conversions write (f16: round to
 * nearest even, both ways). */
static void test_kv_store_matches_reference(void) {
    float x[96];
    for (int i = 0; i < 96; i++) x[i] = 100 * frand();
    x[5] = 65504.0f * 2; /* overflow to inf */
    x[6] = 1e-8f;        /* subnormal half */
    static const int types[] = {SLM_F32, SLM_F16, SLM_Q8_0};
    if (!slm_kernels_select("avx2")) return; /* the x86 stores need F16C */
    slm_kernels_select(NULL);
    for (int ti = 0; ti < 3; ti++) {
        uint8_t a[96 * 4], b[96 * 4];
        memset(a, 0, sizeof a);
        memset(b, 0, sizeof b);
        slm_kv_store_scalar(types[ti], x, a, 96);
        slm_kv_store_x86(types[ti], x, b, 96);
        CHECKF(!memcmp(a, b, sizeof a), "kv_store %s differs from the reference", slm_dtype_name((uint32_t)types[ti]));
    }
}

/* The block entries (slm_kernel_set.attention_rows of the avx512 and avx2 sets): rows
 * with their own KV ranges (causal after some context, a window, rows that
 * see nothing), holes with NaN behind them, f32 / f16 / q8_0 caches, head
 * sizes the kernel keeps in registers and others; each row and head against
 * the double reference on the stored values; variant 3 adds ALiBi (jina-bert-v2's
 * slopes, each row's position its own KV row) to the holes. Blocks it declines
 * leave the output alone. */
static void rows_match_reference(const char *set) {
    if (!slm_kernels_select(set)) {
        fprintf(stderr, "  %s skipped: not on this CPU\n", set);
        return;
    }
    const int lanes = strcmp(set, "avx2") ? 16 : 8; /* head_dim a multiple of this */
    const slm_kernel_set *ks = slm_kernels_active();
    CHECK(ks->attention_rows != NULL);
    if (!ks->attention_rows) return;
    static const int types[] = {SLM_F32, SLM_F16, SLM_Q8_0};
    static const int hds[] = {8, 16, 24, 32, 64, 80, 128, 256};
    static const int groups[] = {1, 3, 8};
    static const int nrows[] = {1, 16, 17, 64};
    static const int ctxs[] = {0, 45, 100};
    const int kvh = 2;
    int cases = 0;
    for (size_t ti = 0; ti < 3; ti++)
        for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++)
            for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++)
                for (size_t ri = 0; ri < sizeof nrows / sizeof nrows[0]; ri++)
                    for (size_t ci = 0; ci < sizeof ctxs / sizeof ctxs[0]; ci++)
                        for (int variant = 0; variant < 4; variant++) {
                            const int kt = types[ti], hd = hds[hi], G = groups[gi], R = nrows[ri], c0 = ctxs[ci];
                            if ((kt == SLM_Q8_0 && hd % 32) || hd % lanes) continue;
                            const int n = c0 + R; /* KV rows: the context, then the block's own */
                            const size_t ld = (size_t)kvh * hd;
                            const size_t rb = kt == SLM_F32 ? ld * sizeof(float) : (size_t)slm_row_bytes((uint32_t)kt, ld);
                            float *K = malloc(sizeof(float) * ld * n), *V = malloc(sizeof(float) * ld * n);
                            float *Kd = malloc(sizeof(float) * ld * n), *Vd = malloc(sizeof(float) * ld * n);
                            uint8_t *Kt = malloc(rb * n), *Vt = malloc(rb * n);
                            const size_t qld = (size_t)G * hd + 5; /* rows apart by more than the heads */
                            float *q = malloc(sizeof(float) * qld * R), *out = malloc(sizeof(float) * qld * R);
                            int32_t *mask = malloc(sizeof(int32_t) * n);
                            double *ref = malloc(sizeof(double) * G * hd);
                            int first[SLM_ATTN_ROWS_MAX], last[SLM_ATTN_ROWS_MAX];
                            for (size_t i = 0; i < ld * n; i++) { K[i] = 3 * frand(); V[i] = frand(); }
                            for (size_t i = 0; i < qld * R; i++) q[i] = frand();
                            for (size_t i = 0; i < qld * R; i++) out[i] = 7.0f;
                            for (int j = 0; j < n; j++) {
                                /* variants 1 and 3: holes, a run of them too */
                                mask[j] = (variant != 1 && variant != 3) || (j % 3 != 1 && !(j >= 20 && j < 60));
                                if (kt == SLM_F32) {
                                    memcpy(Kt + (size_t)j * rb, K + (size_t)j * ld, rb);
                                    memcpy(Vt + (size_t)j * rb, V + (size_t)j * ld, rb);
                                } else {
                                    ks->kv_store(kt, K + (size_t)j * ld, Kt + (size_t)j * rb, (int)ld);
                                    ks->kv_store(kt, V + (size_t)j * ld, Vt + (size_t)j * rb, (int)ld);
                                }
                                CHECK(slm_dequantize_row((uint32_t)kt, Kt + (size_t)j * rb, Kd + (size_t)j * ld, (int64_t)ld));
                                CHECK(slm_dequantize_row((uint32_t)kt, Vt + (size_t)j * rb, Vd + (size_t)j * ld, (int64_t)ld));
                                if (!mask[j]) { /* NaN behind the mask, in every type */
                                    memset(Kt + (size_t)j * rb, 0xff, rb);
                                    memset(Vt + (size_t)j * rb, 0xff, rb);
                                }
                            }
                            int32_t qpos[SLM_ATTN_ROWS_MAX];
                            float slope[8];
                            for (int g = 0; g < G; g++) slope[g] = slm_alibi_slope(kvh * G / 2 + g, kvh * G, 8.0f);
                            for (int i = 0; i < R; i++) {
                                qpos[i] = c0 + i;
                                last[i] = c0 + i; /* causal */
                                first[i] = variant == 2 ? (last[i] - 37 > 0 ? last[i] - 37 : 0) : 0; /* a window */
                                if (variant == 2 && i % 5 == 3) first[i] = last[i] + 1; /* sees nothing */
                            }
                            const size_t head1 = kt == SLM_F32 ? (size_t)hd * sizeof(float) : (size_t)slm_row_bytes((uint32_t)kt, (uint64_t)hd);
                            const slm_attn_rows ar = {.q = q, .q_ld = qld, .q_stride = (size_t)hd, .rows = R, .group = G,
                                                      .head_dim = hd, .K = Kt + head1, .V = Vt + head1, .ld = ld,
                                                      .kv_type = kt, .mask = mask, .first = first, .last = last,
                                                      .scale = 1.0f / sqrtf((float)hd), .out = out, .out_ld = qld,
                                                      .out_stride = (size_t)hd, .alibi = variant == 3 ? slope : NULL,
                                                      .qpos = qpos};
                            CHECKF(ks->attention_rows(&ar) == 1, "declined hd %d", hd);
                            double worst = 0;
                            for (int i = 0; i < R; i++) {
                                slm_attn_args a = {.q = q + (size_t)i * qld, .q_stride = (size_t)hd, .group = G,
                                                   .head_dim = hd, .ld = ld, .mask = mask, .first = first[i],
                                                   .last = last[i], .scale = ar.scale, .alibi = ar.alibi,
                                                   .qpos = qpos[i]};
                                reference(&a, Kd + hd, Vd + hd, ref);
                                for (int e = 0; e < G * hd; e++) {
                                    const float y = out[(size_t)i * qld + e];
                                    const double d = isnan(y) ? INFINITY : fabs(y - ref[e]);
                                    if (d > worst) worst = d;
                                }
                                for (size_t e = (size_t)G * hd; e < qld; e++) CHECK(out[(size_t)i * qld + e] == 7.0f);
                            }
                            CHECKF(worst < 2e-5, "%s %s hd %d group %d rows %d ctx %d variant %d: max err %g", set,
                                   slm_dtype_name((uint32_t)kt), hd, G, R, c0, variant, worst);
                            cases++;
                            free(K); free(V); free(Kd); free(Vd); free(Kt); free(Vt); free(q); free(out); free(mask);
                            free(ref);
                        }
    CHECK(cases > 400);
    /* declined: head_dim not a multiple of the lanes, or past 256; nothing written */
    const int bad[] = {lanes / 2, lanes + 4, 256 + lanes};
    for (int b = 0; b < 3; b++) {
        const int hd = bad[b];
        float q[272] = {0}, out[272], kv[272] = {0};
        for (int i = 0; i < 272; i++) out[i] = 7.0f;
        int32_t mask[1] = {1};
        int first[1] = {0}, last[1] = {0};
        const slm_attn_rows ar = {.q = q, .q_ld = 272, .q_stride = (size_t)hd, .rows = 1, .group = 1, .head_dim = hd,
                                  .K = kv, .V = kv, .ld = (size_t)hd, .kv_type = SLM_F32, .mask = mask, .first = first,
                                  .last = last, .scale = 1.0f, .out = out, .out_ld = 272, .out_stride = (size_t)hd};
        CHECKF(ks->attention_rows(&ar) == 0, "%s hd %d taken", set, hd);
        for (int i = 0; i < 272; i++) CHECK(out[i] == 7.0f);
    }
    slm_kernels_select(NULL);
}

static void test_rows_match_reference(void) {
    rows_match_reference("avx512");
    rows_match_reference("avx2");
}

int main(void) {
    T_RUN(test_variants_match_reference);
    T_RUN(test_kv_types);
    T_RUN(test_kv_store_matches_reference);
    T_RUN(test_rows_match_reference);
    T_DONE();
}
