/* Kernels: a scalar reference for each, SIMD variants chosen at run time. */
#ifndef SLM_KERNELS_H
#define SLM_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* y = dot(w_row, x) over k elements, w_row of a weight type. */
typedef float (*slm_dot_fn)(const void *w_row, const float *x, int k);

typedef struct slm_kernel_set {
    const char *name;       /* "scalar", "avx2", "avx512" */
    slm_dot_fn dot_f32;
    slm_dot_fn dot_f16;
    slm_dot_fn dot_q8_0;
} slm_kernel_set;

/* The scalar reference set, and the best set this CPU supports. */
const slm_kernel_set *slm_kernels_ref(void);
const slm_kernel_set *slm_kernels_best(void);
/* Force a set by name for tests/benchmarks ("scalar", "avx2", "avx512");
 * returns 0 if the CPU lacks it. NULL restores the best. */
int slm_kernels_select(const char *name);
const slm_kernel_set *slm_kernels_active(void);
slm_dot_fn slm_dot_for(const slm_kernel_set *ks, uint32_t wtype);

/* Per-thread scratch bytes a task needs (e.g. activations quantized for
 * int8 dot products); the runtime allocates the maximum once per thread. */
struct slm_task;
size_t slm_task_scratch_bytes(const struct slm_task *t);

/* Reference vector kernels (shared by all sets for now). */
void slm_k_rmsnorm(const float *x, const float *g, float *y, int n, float eps);
void slm_k_rope(float *x, int heads, int head_dim, const float *cs);
void slm_k_swiglu(const float *gate, const float *up, float *y, int n);
void slm_k_add(float *y, const float *x, int n);
/* One query row against KV rows [0, last] where mask[j] != 0; q and out
 * are [head_dim]; K, V rows have stride ld floats. Online softmax. */
void slm_k_attention_head(const float *q, const float *K, const float *V, int ld, const int32_t *mask,
                          int last, int head_dim, float *out);

#endif
