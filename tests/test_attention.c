/* Attention kernels: every variant against a double-precision reference,
 * over head sizes, GQA group sizes, masks with holes, windows, and NaN in
 * rows the mask rules out. */
#include <math.h>

#include "device/attention.h"
#include "device/kernels.h"
#include "t.h"

static uint64_t g_rng = 42;
static float frand(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void reference(const slm_attn_args *a, double *out) {
    for (int g = 0; g < a->group; g++) {
        const float *q = a->q + (size_t)g * a->q_stride;
        double mx = -INFINITY, sum = 0;
        int any = 0;
        for (int j = a->first; j <= a->last; j++) {
            if (!a->mask[j]) continue;
            double s = 0;
            for (int d = 0; d < a->head_dim; d++) s += (double)q[d] * a->K[(size_t)j * a->ld + d];
            s *= a->scale;
            if (s > mx) mx = s;
            any = 1;
        }
        for (int d = 0; d < a->head_dim; d++) out[g * a->head_dim + d] = 0;
        if (!any) continue;
        for (int j = a->first; j <= a->last; j++) {
            if (!a->mask[j]) continue;
            double s = 0;
            for (int d = 0; d < a->head_dim; d++) s += (double)q[d] * a->K[(size_t)j * a->ld + d];
            double p = exp(s * a->scale - mx);
            sum += p;
            for (int d = 0; d < a->head_dim; d++) out[g * a->head_dim + d] += p * a->V[(size_t)j * a->ld + d];
        }
        for (int d = 0; d < a->head_dim; d++) out[g * a->head_dim + d] /= sum;
    }
}

static void test_variants_match_reference(void) {
    static const char *const sets[] = {"scalar", "avx2", "avx512"};
    static const int hds[] = {8, 16, 64, 128, 6};
    static const int groups[] = {1, 2, 4, 8};
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
                        slm_attn_args a = {q, (size_t)hd, G, hd, K + hd, V + hd, ld, mask,
                                           variant == 2 && n > 10 ? n - 10 : 0, n - 1, 1.0f / sqrtf((float)hd),
                                           out, (size_t)hd};
                        reference(&a, ref);
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

int main(void) {
    T_RUN(test_variants_match_reference);
    T_DONE();
}
