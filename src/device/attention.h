/* Attention for one query row of the query heads that share one KV head. */
#ifndef SLM_ATTENTION_H
#define SLM_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

typedef struct slm_attn_args {
    const float *q;       /* group rows of head_dim queries, q_stride apart */
    size_t q_stride;      /* floats between the group's query heads (head_dim) */
    int group;            /* query heads sharing this KV head */
    int head_dim;
    const float *K, *V;   /* row 0 of this KV head's keys / values */
    size_t ld;            /* floats between KV rows (kv_dim) */
    const int32_t *mask;  /* [>= last + 1] 1 = valid KV row */
    int first, last;      /* KV rows to consider, inclusive (causal limit, window) */
    float scale;          /* 1 / sqrt(head_dim) */
    float *out;           /* group rows of head_dim outputs, out_stride apart */
    size_t out_stride;
} slm_attn_args;

/* The kernel sets' attention entries (slm_kernel_set.attention; call it
 * through the active set). Each takes any head_dim and group: the AVX-512
 * variant runs head_dim % 16 == 0, the AVX2 variant head_dim % 8 == 0, and
 * anything else (or group > 64, head_dim > 512) the scalar reference. The
 * SIMD entries exist on x86-64 only, and run only on a CPU with the set's
 * features (device/kernels_select.c). */
void slm_attention_scalar(const slm_attn_args *a);
void slm_attention_avx2(const slm_attn_args *a);
void slm_attention_avx512(const slm_attn_args *a);

#endif
