/* Single-thread matmul throughput per weight type (not a test; built with
 * `cmake --build build --target bench_kernels`):
 *   decode  (rows = 1, the stream prefetch of decode programs): GB/s of
 *           weights read, for n x k = 2048x2048,
 *           5632x2048, 32000x2048;
 *   prefill (512 rows, 2048x2048): GOP/s (2 ops per multiply-add), whole
 *           matrix in one call and in the compiler's column tiles (each
 *           tile reusing the quantized activations, as the executor does).
 *   -d: decode only, 5632x2048, best of 7: ns per block of 32 elements.
 *   -c: time by the thread's CPU clock, not the wall clock (on a shared,
 *       busy host the time slices given to others then do not count).
 * Usage: bench_kernels [set] [-d] [-c] [type...]   (set: avx512|avx2|scalar;
 * type names as slm_dtype_name, any case) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/dtype.h"
#include "compiler/compiler.h"
#include "device/kernels.h"
#include "quants_rtn.h"

static int g_cpu_clock; /* -c */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(g_cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *xalloc(size_t n) {
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    return p;
}

/* An i-quant matrix of random bytes (every bit pattern of a block is valid;
 * there is no round-to-nearest quantizer for them), with each super-block's
 * f16 scale set to 1/64 so that no value is infinite or NaN. */
static uint8_t *make_w_iq(uint32_t t, int n, int k) {
    const uint64_t wrow = slm_row_bytes(t, (uint64_t)k), bytes = slm_dtype_get(t)->bytes;
    uint8_t *w = xalloc((size_t)wrow * n);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < (size_t)wrow * n; i++) { s = s * 6364136223846793005ull + 1442695040888963407ull; w[i] = (uint8_t)(s >> 56); }
    const uint16_t d = 0x2400; /* 1/64 */
    for (uint8_t *b = w; b < w + (size_t)wrow * n; b += bytes) {
        if (t == SLM_IQ1_M) { /* the f16 bits in the top nibbles of the four scale words */
            uint8_t *sc = ((slm_block_iq1_m *)b)->scales;
            sc[1] = (uint8_t)((sc[1] & 0x0F) | (d & 0xF) << 4), sc[3] = (uint8_t)((sc[3] & 0x0F) | (d & 0xF0));
            sc[5] = (uint8_t)((sc[5] & 0x0F) | (d >> 8 & 0xF) << 4), sc[7] = (uint8_t)((sc[7] & 0x0F) | (d >> 8 & 0xF0));
        } else memcpy(b, &d, 2); /* the others start with d */
    }
    return w;
}

/* a weight matrix [n][k] of type t with small random values */
static uint8_t *make_w(uint32_t t, int n, int k) {
    if (slm_iq_is(t)) return make_w_iq(t, n, k);
    if (slm_is_r16(t)) { /* the base type, repacked as the compiler does */
        uint8_t *w = make_w(slm_r16_base(t), n, k);
        void *tmp = xalloc(slm_row_bytes(t, (uint64_t)k) * 16);
        slm_repack_r16(slm_r16_base(t), w, k, n, tmp);
        free(tmp);
        return w;
    }
    const uint64_t wrow = slm_row_bytes(t, (uint64_t)k);
    uint8_t *w = xalloc((size_t)wrow * n);
    float *row = malloc(sizeof(float) * k);
    uint32_t s = 12345;
    for (int e = 0; e < k; e++) { s = s * 1664525u + 1013904223u; row[e] = ((float)(s >> 8) / 16777216.0f - 0.5f) * 0.1f; }
    for (int j = 0; j < n; j++) {
        if (j < 64) rtn_quantize_row(t, row, w + (size_t)j * wrow, k);
        else memcpy(w + (size_t)j * wrow, w + (size_t)(j % 64) * wrow, wrow);
    }
    free(row);
    return w;
}

static double run(const slm_mm *mm, int reps) {
    const slm_kernel_set *ks = slm_kernels_active();
    ks->matmul(mm); /* warm */
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        ks->matmul(mm);
        double t = now_s() - t0;
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv) {
    if (argc > 1 && !slm_kernels_select(argv[1])) { fprintf(stderr, "set %s not available\n", argv[1]); return 1; }
    static const uint32_t all[] = {SLM_F32, SLM_F16, SLM_BF16, SLM_Q8_0, SLM_Q4_0, SLM_Q4_1, SLM_Q4_K, SLM_Q5_K, SLM_Q6_K,
                                     SLM_Q4_0_R16, SLM_Q6_K_R16, SLM_Q8_0_R16, SLM_F16_R16, SLM_Q4_K_R16, SLM_Q5_K_R16,
                                     SLM_Q5_0, SLM_Q5_0_R16, SLM_IQ4_NL_R16, SLM_Q2_K, SLM_Q3_K, SLM_IQ4_XS, SLM_Q3_K_R16, SLM_IQ4_XS_R16,
                                     SLM_Q2_K_R16, SLM_Q5_1, SLM_Q4_1_R16, SLM_Q5_1_R16, SLM_IQ2_XXS, SLM_IQ2_XS, SLM_IQ2_S,
                                     SLM_IQ3_XXS, SLM_IQ3_S, SLM_IQ1_S, SLM_IQ1_M, SLM_IQ4_NL, SLM_MXFP4, SLM_MXFP4_R16};
    uint32_t types[64];
    int nt = 0, decode_only = 0;
    for (int i = 2; i < argc && nt < 64; i++) {
        if (!strcmp(argv[i], "-d")) { decode_only = 1; continue; }
        if (!strcmp(argv[i], "-c")) { g_cpu_clock = 1; continue; }
        int found = 0;
        for (size_t j = 0; j < sizeof all / sizeof all[0]; j++)
            if (!strcasecmp(argv[i], slm_dtype_name(all[j]))) types[nt++] = all[j], found = 1;
        if (!found) { fprintf(stderr, "unknown type %s\n", argv[i]); return 1; }
    }
    if (!nt) { memcpy(types, all, sizeof all); nt = (int)(sizeof all / sizeof all[0]); }
    printf("kernel set: %s (1 thread)\n", slm_kernels_active()->name);
    if (decode_only) { /* one activation row, 5632x2048, best of 7 */
        const int k = 2048, n = 5632;
        float *x = xalloc(sizeof(float) * k), *y = xalloc(sizeof(float) * n);
        for (int i = 0; i < k; i++) x[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
        printf("%-10s | decode 5632x2048: ns per block of 32, GB/s\n", "type");
        for (int ti = 0; ti < nt; ti++) {
            const uint32_t t = types[ti];
            const uint64_t wrow = slm_row_bytes(t, (uint64_t)k);
            uint8_t *w = make_w(t, n, k);
            void *scratch = xalloc(slm_matmul_scratch_bytes(t, k, 1) + 64);
            slm_mm mm = {.w = w, .wrow = wrow, .wtype = t, .k = k, .n0 = 0, .n1 = n, .rows = 1, .x = x, .ldx = k,
                         .y = y, .ldy = (size_t)n, .scratch = scratch, .pf = SLM_STREAM_PREFETCH};
            const double s = run(&mm, 7);
            printf("%-10s | %8.2f  %8.1f\n", slm_dtype_name(t), s * 1e9 / ((double)n * k / 32), (double)wrow * n / s / 1e9);
            fflush(stdout);
            free(w);
            free(scratch);
        }
        free(x);
        free(y);
        return 0;
    }
    printf("%-5s | decode GB/s 2048x2048  5632x2048  32000x2048 | prefill 512x2048x2048 GOP/s whole  tiled\n", "type");
    const int k = 2048, rows = 512;
    float *x = xalloc(sizeof(float) * (size_t)rows * k);
    float *y = xalloc(sizeof(float) * (size_t)rows * 32000);
    for (size_t i = 0; i < (size_t)rows * k; i++) x[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    for (int ti = 0; ti < nt; ti++) {
        const uint32_t t = types[ti];
        const uint64_t wrow = slm_row_bytes(t, (uint64_t)k);
        static const int ns[] = {2048, 5632, 32000};
        printf("%-8s |            ", slm_dtype_name(t));
        for (int i = 0; i < 3; i++) {
            uint8_t *w = make_w(t, ns[i], k);
            void *scratch = xalloc(slm_matmul_scratch_bytes(t, k, 1) + 64);
            slm_mm mm = {.w = w, .wrow = wrow, .wtype = t, .k = k, .n0 = 0, .n1 = ns[i], .rows = 1, .x = x, .ldx = k,
                         .y = y, .ldy = (size_t)ns[i], .scratch = scratch, .pf = SLM_STREAM_PREFETCH};
            double bytes = (double)wrow * ns[i];
            double s = run(&mm, bytes > 1e8 ? 3 : 10);
            printf("%9.1f  ", bytes / s / 1e9);
            fflush(stdout);
            free(w);
            free(scratch);
        }
        /* prefill */
        uint8_t *w = make_w(t, 2048, k);
        void *scratch = xalloc(slm_matmul_scratch_bytes(t, k, rows) + 64);
        slm_mm mm = {.w = w, .wrow = wrow, .wtype = t, .k = k, .n0 = 0, .n1 = 2048, .rows = rows, .x = x, .ldx = k,
                     .y = y, .ldy = 2048, .scratch = scratch};
        const double ops = 2.0 * rows * 2048.0 * k;
        double s = run(&mm, 2);
        printf("|                       %8.1f", ops / s / 1e9);
        /* the compiler's tiles: ~256 KiB of weights per task, a multiple of 16 columns */
        int tile = (int)((256u << 10) / wrow);
        tile = tile < 16 ? 16 : (tile + 15) & ~15;
        double t0 = now_s();
        for (int n0 = 0; n0 < 2048; n0 += tile) {
            mm.n0 = n0;
            mm.n1 = n0 + tile < 2048 ? n0 + tile : 2048;
            mm.xq_ready = n0 > 0; /* as the executor: quantized once per thread and stage */
            slm_kernels_active()->matmul(&mm);
        }
        printf(" %6.1f (tile %d)\n", ops / (now_s() - t0) / 1e9, tile);
        free(w);
        free(scratch);
    }
    free(x);
    free(y);
    return 0;
}
