/* Single-thread matmul throughput per weight type (not a test; built with
 * `cmake --build build --target bench_kernels`):
 *   decode  (rows = 1, the stream prefetch of decode programs): GB/s of
 *           weights read, for n x k = 2048x2048,
 *           5632x2048, 32000x2048;
 *   prefill (512 rows, 2048x2048): GOP/s (2 ops per multiply-add), whole
 *           matrix in one call and in the compiler's column tiles (each
 *           tile reusing the quantized activations, as the executor does).
 * Usage: bench_kernels [set] [type...]   (set: avx512|avx2|scalar) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/dtype.h"
#include "compiler/compiler.h"
#include "device/kernels.h"
#include "quants_rtn.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *xalloc(size_t n) {
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    return p;
}

/* a weight matrix [n][k] of type t with small random values */
static uint8_t *make_w(uint32_t t, int n, int k) {
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
                                     SLM_Q2_K_R16, SLM_Q5_1, SLM_Q4_1_R16, SLM_Q5_1_R16};
    uint32_t types[32];
    int nt = 0;
    for (int i = 2; i < argc && nt < 32; i++)
        for (size_t j = 0; j < sizeof all / sizeof all[0]; j++)
            if (!strcmp(argv[i], slm_dtype_name(all[j]))) types[nt++] = all[j];
    if (!nt) { memcpy(types, all, sizeof all); nt = (int)(sizeof all / sizeof all[0]); }
    printf("kernel set: %s (1 thread)\n", slm_kernels_active()->name);
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
