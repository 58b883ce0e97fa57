/* Single-thread decode attention time per call (not a test; built with
 * `cmake --build build --target bench_attention`): one query row of a group
 * of heads against D keys of one KV head, hot cache, for each KV type, best
 * of several runs in microseconds.
 * Usage: bench_attention [set] [group] [head_dim] [keys]
 *   (set: avx512 | avx2 | scalar; defaults: the active set, 3, 64, 2048) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/dtype.h"
#include "device/attention.h"
#include "device/kernels.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc > 1 && !slm_kernels_select(argv[1])) {
        fprintf(stderr, "kernel set %s not available\n", argv[1]);
        return 1;
    }
    const int G = argc > 2 ? atoi(argv[2]) : 3, hd = argc > 3 ? atoi(argv[3]) : 64, n = argc > 4 ? atoi(argv[4]) : 2048;
    if (G < 1 || G > 64 || hd < 32 || hd % 32 || hd > 256 || n < 1 || n > 1 << 20) {
        fprintf(stderr, "usage: bench_attention [set] [group 1..64] [head_dim: a multiple of 32 up to 256] [keys]\n");
        return 1;
    }
    const slm_kernel_set *ks = slm_kernels_active();
    float *q = malloc(sizeof(float) * (size_t)G * hd), *out = malloc(sizeof(float) * (size_t)G * hd);
    float *row = malloc(sizeof(float) * (size_t)hd);
    int32_t *mask = malloc(sizeof(int32_t) * (size_t)n);
    uint32_t s = 12345;
    for (int i = 0; i < G * hd; i++) { s = s * 1664525u + 1013904223u; q[i] = (float)(s >> 8) / 16777216.0f - 0.5f; }
    for (int j = 0; j < n; j++) mask[j] = 1;
    printf("kernel set: %s (1 thread), group %d, head_dim %d, %d keys\n", ks->name, G, hd, n);
    static const int types[] = {SLM_F32, SLM_F16, SLM_Q8_0};
    for (int ti = 0; ti < 3; ti++) {
        const int t = types[ti];
        const size_t rb = t == SLM_F32 ? (size_t)hd * sizeof(float) : (size_t)slm_row_bytes((uint32_t)t, (uint64_t)hd);
        uint8_t *K = malloc(rb * (size_t)n), *V = malloc(rb * (size_t)n);
        for (int j = 0; j < n; j++)
            for (int c = 0; c < 2; c++) {
                for (int e = 0; e < hd; e++) { s = s * 1664525u + 1013904223u; row[e] = (float)(s >> 8) / 16777216.0f - 0.5f; }
                ks->kv_store(t, row, (c ? V : K) + (size_t)j * rb, hd);
            }
        slm_attn_args a = {.q = q, .q_stride = (size_t)hd, .group = G, .head_dim = hd, .K = K, .V = V,
                           .ld = (size_t)hd, .kv_type = t, .mask = mask, .first = 0, .last = n - 1,
                           .scale = 0.125f, .out = out, .out_stride = (size_t)hd};
        ks->attention(&a); /* warm */
        double best = 1e30;
        for (int r = 0; r < 7; r++) {
            const int reps = 20;
            const double t0 = now_s();
            for (int i = 0; i < reps; i++) ks->attention(&a);
            const double dt = (now_s() - t0) / reps;
            best = dt < best ? dt : best;
        }
        printf("%-5s | %8.1f us | %6.2f ns a key and head\n", slm_dtype_name((uint32_t)t), best * 1e6, best * 1e9 / n / G);
        free(K), free(V);
    }
    free(q), free(out), free(row), free(mask);
    return 0;
}
