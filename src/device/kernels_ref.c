/* The scalar reference kernel set: one float dot product per output (the
 * quantized types dequantized a block at a time). */
#include <math.h>
#include <string.h>

#include "common/dtype.h"
#include "device/kernels.h"
#include "device/attention.h"

static float dot_f32_ref(const void *w, const float *x, int k) {
    const float *a = w;
    float s = 0.0f;
    for (int i = 0; i < k; i++) s += a[i] * x[i];
    return s;
}

static float dot_f16_ref(const void *w, const float *x, int k) {
    const uint16_t *a = w;
    float s = 0.0f;
    for (int i = 0; i < k; i++) s += slm_f16_to_f32(a[i]) * x[i];
    return s;
}

static float dot_q8_0_ref(const void *w, const float *x, int k) {
    const slm_block_q8_0 *b = w;
    float s = 0.0f;
    for (int i = 0; i < k / SLM_QK8_0; i++) {
        float bs = 0.0f;
        for (int j = 0; j < SLM_QK8_0; j++) bs += (float)b[i].qs[j] * x[i * SLM_QK8_0 + j];
        s += bs * slm_f16_to_f32(b[i].d);
    }
    return s;
}

static float dot_bf16_ref(const void *w, const float *x, int k) {
    const uint16_t *a = w;
    float s = 0.0f;
    for (int i = 0; i < k; i++) s += slm_bf16_to_f32(a[i]) * x[i];
    return s;
}

/* Any other quantized type: dequantize a block at a time, dot in float. */
#define DOT_REF(name, type)                                                         \
    static float name(const void *w, const float *x, int k) {                       \
        const slm_dtype_info *in = slm_dtype_get(type);                             \
        float buf[SLM_QK_K], s = 0.0f;                                              \
        for (int i = 0; i < k; i += (int)in->block) {                               \
            slm_dequantize_row(type, (const uint8_t *)w + (size_t)(i / in->block) * in->bytes, buf, in->block); \
            float bs = 0.0f;                                                        \
            for (uint32_t j = 0; j < in->block; j++) bs += buf[j] * x[i + j];       \
            s += bs;                                                                \
        }                                                                           \
        return s;                                                                   \
    }
DOT_REF(dot_q4_0_ref, SLM_Q4_0)
DOT_REF(dot_q4_1_ref, SLM_Q4_1)
DOT_REF(dot_q4_k_ref, SLM_Q4_K)
DOT_REF(dot_q5_k_ref, SLM_Q5_K)
DOT_REF(dot_q6_k_ref, SLM_Q6_K)

slm_dot_fn slm_dot_ref_for(uint32_t wtype) {
    switch (wtype) {
    case SLM_F32: return dot_f32_ref;
    case SLM_F16: return dot_f16_ref;
    case SLM_BF16: return dot_bf16_ref;
    case SLM_Q8_0: return dot_q8_0_ref;
    case SLM_Q4_0: return dot_q4_0_ref;
    case SLM_Q4_1: return dot_q4_1_ref;
    case SLM_Q4_K: return dot_q4_k_ref;
    case SLM_Q5_K: return dot_q5_k_ref;
    case SLM_Q6_K: return dot_q6_k_ref;
    default: return slm_quant2_dot_ref(wtype);
    }
}

/* Column j of a repacked matrix: float dot over the blocks' codes. */
static float dot_r16_ref(const slm_mm *mm, int j, const float *x) {
    const uint8_t *group = (const uint8_t *)mm->w + (size_t)(j / 16) * 16 * mm->wrow;
    float s = 0.0f;
    if (mm->wtype == SLM_F16_R16) {
        const uint16_t *g = (const uint16_t *)group;
        for (int e = 0; e < mm->k; e++) s += slm_f16_to_f32(g[(size_t)e * 16 + j % 16]) * x[e];
        return s;
    }
    for (int b = 0; b < mm->k / 32; b++) {
        int8_t q[32];
        float d[2], m[2], h[2] = {0.0f, 0.0f}, sx[2] = {0.0f, 0.0f};
        slm_r16_block_i8(mm->wtype, group, mm->k, j % 16, b, q, d, m);
        for (int e = 0; e < 32; e++) {
            h[e / 16] += (float)q[e] * x[32 * b + e];
            sx[e / 16] += x[32 * b + e];
        }
        s += d[0] * h[0] + d[1] * h[1] + m[0] * sx[0] + m[1] * sx[1];
    }
    return s;
}

/* The reference matmul: one float dot product per output. */
static void matmul_ref(const slm_mm *mm) {
    if (slm_is_r16(mm->wtype)) {
        for (int i = 0; i < mm->rows; i++)
            for (int j = mm->n0; j < mm->n1; j++)
                mm->y[(size_t)i * mm->ldy + j] = dot_r16_ref(mm, j, mm->x + (size_t)i * mm->ldx);
        return;
    }
    slm_dot_fn dot = slm_dot_ref_for(mm->wtype);
    const uint8_t *W = mm->w;
    for (int i = 0; i < mm->rows; i++) {
        const float *x = mm->x + (size_t)i * mm->ldx;
        float *y = mm->y + (size_t)i * mm->ldy;
        for (int j = mm->n0; j < mm->n1; j++) y[j] = dot(W + (size_t)j * mm->wrow, x, mm->k);
    }
}

static const slm_kernel_set k_ref = {
    .name = "scalar",
    .dot_f32 = dot_f32_ref,
    .dot_f16 = dot_f16_ref,
    .dot_bf16 = dot_bf16_ref,
    .dot_q8_0 = dot_q8_0_ref,
    .matmul = matmul_ref,
    .rmsnorm = slm_k_rmsnorm,
    .swiglu = slm_k_swiglu,
    .silu = slm_k_silu,
    .geglu = slm_k_geglu,
    .delta_rule = slm_k_delta_rule,
    .attention = slm_attention_scalar,
    .kv_store = slm_kv_store_scalar,
};

const slm_kernel_set *slm_kernels_ref(void) { return &k_ref; }

int slm_matmul_supported(uint32_t t) {
    switch (t) {
    case SLM_Q4_0_R16: case SLM_Q5_0_R16: case SLM_IQ4_NL_R16: case SLM_Q8_0_R16: case SLM_Q4_K_R16: case SLM_Q5_K_R16:
    case SLM_Q6_K_R16: case SLM_Q3_K_R16: case SLM_IQ4_XS_R16: case SLM_Q2_K_R16:
    case SLM_Q4_1_R16: case SLM_Q5_1_R16: case SLM_F16_R16: case SLM_MXFP4_R16:
        return 1;
    default:
        return slm_is_r16(t) ? 0 : slm_dot_ref_for(t) != NULL;
    }
}
