/* The x86 SIMD kernel sets (AVX2+FMA+F16C; AVX-512F/BW/VL/DQ/VNNI),
 * compiled with target attributes; device/kernels_select.c picks one by the CPU's
 * features. The matrix multiply dispatches by weight type:
 * - F32/F16/BF16: kernels_x86_float.c
 * - quantized, file layout: kernels_x86_dot.c (activations quantized once
 *   per call to int8 blocks in scratch, unless xq_ready)
 * - Q5_0, Q5_1, IQ4_NL, MXFP4, IQ4_XS, Q2_K, Q3_K, the i-quants (IQ2_XXS .. IQ1_M):
 *   kernels_x86_quant2.c (decode;
 *   Q2_K always), else kernels_x86_dot.c's prefill panel
 * - repacked (r16): kernels_x86_r16.c, kernels_x86_r16k.c (Q4_K, Q5_K)
 * The vector kernels are in kernels_x86_vec.c, attention in attention.c. */
#include "device/attention.h"
#include "device/kernels_x86.h"

#ifdef SLM_X86
/* kernels_x86_quant2.c's types at decode (up to SLM_MM_DECODE_ROWS rows:
 * its column kernel gives each row the bits it gets alone), and Q2_K always
 * (its two mins per block do not fit the packed panel); their prefill
 * otherwise runs on kernels_x86_dot.c's panel through slm_qblock_i8. */
static int quant2_direct(const slm_mm *mm) {
    const int kind = slm_quant2_kind(mm->wtype);
    return kind >= 0 && (mm->rows <= SLM_MM_DECODE_ROWS || kind == 3);
}

AVX512 static void matmul_avx512(const slm_mm *mm) {
    if (mm->wtype == SLM_F16_R16) {
        slm_x86_f16r16_matmul_avx512(mm);
        return;
    }
    if (slm_is_r16(mm->wtype)) {
        const qscratch qs = qscratch_split(mm->scratch, mm->rows, mm->k);
        if (!mm->xq_ready) slm_x86_quant_act_avx512(mm->x, mm->ldx, mm->rows, mm->k, 0, qs.q, qs.d, qs.s, qs.hs);
        if (mm->wtype == SLM_Q4_K_R16 || mm->wtype == SLM_Q5_K_R16) slm_x86_r16k_matmul_avx512(mm, &qs);
        else slm_x86_r16_matmul_avx512(mm, &qs);
        return;
    }
    if (slm_qtype_kind(mm->wtype) < 0) {
        slm_x86_fmatmul_avx512(mm);
        return;
    }
    const qscratch qs = qscratch_split(mm->scratch, mm->rows, mm->k);
    if (!mm->xq_ready) slm_x86_quant_act_avx512(mm->x, mm->ldx, mm->rows, mm->k, 128, qs.q, qs.d, qs.s, qs.hs);
    if (quant2_direct(mm)) slm_x86_quant2_matmul_avx512(mm, &qs);
    else slm_x86_qmatmul_avx512(mm, &qs);
}

AVX2 static void matmul_avx2(const slm_mm *mm) {
    if (mm->wtype == SLM_F16_R16) {
        slm_x86_f16r16_matmul_avx2(mm);
        return;
    }
    if (slm_qtype_kind(mm->wtype) < 0 && !slm_is_r16(mm->wtype)) {
        slm_x86_fmatmul_avx2(mm);
        return;
    }
    const qscratch qs = qscratch_split(mm->scratch, mm->rows, mm->k);
    if (!mm->xq_ready) slm_x86_quant_act_avx2(mm->x, mm->ldx, mm->rows, mm->k, qs.q, qs.d, qs.s, qs.hs);
    if (mm->wtype == SLM_Q4_K_R16 || mm->wtype == SLM_Q5_K_R16) slm_x86_r16k_matmul_avx2(mm, &qs);
    else if (slm_is_r16(mm->wtype)) slm_x86_r16_matmul_avx2(mm, &qs);
    else if (quant2_direct(mm)) slm_x86_quant2_matmul_avx2(mm, &qs);
    else slm_x86_qmatmul_avx2(mm, &qs);
}

static const slm_kernel_set k_avx2 = {
    .name = "avx2",
    .dot_f32 = slm_x86_dot_f32_avx2,
    .dot_f16 = slm_x86_dot_f16_avx2,
    .dot_bf16 = slm_x86_dot_bf16_avx2,
    .dot_q8_0 = slm_x86_dot_q8_0_avx2,
    .matmul = matmul_avx2,
    .rmsnorm = slm_x86_rmsnorm_avx2,
    .swiglu = slm_x86_swiglu_avx2,
    .silu = slm_x86_silu_avx2,
    .geglu = slm_x86_geglu_avx2,
    .delta_rule = slm_x86_delta_rule_avx2,
    .attention = slm_attention_avx2,
    .attention_rows = slm_attention_rows_avx2,
    .kv_store = slm_kv_store_x86,
};
static const slm_kernel_set k_avx512 = {
    .name = "avx512",
    .dot_f32 = slm_x86_dot_f32_avx512,
    .dot_f16 = slm_x86_dot_f16_avx512,
    .dot_bf16 = slm_x86_dot_bf16_avx512,
    .dot_q8_0 = slm_x86_dot_q8_0_avx512,
    .matmul = matmul_avx512,
    .rmsnorm = slm_x86_rmsnorm_avx512,
    .swiglu = slm_x86_swiglu_avx512,
    .silu = slm_x86_silu_avx512,
    .geglu = slm_x86_geglu_avx512,
    .delta_rule = slm_x86_delta_rule_avx512,
    .attention = slm_attention_avx512,
    .attention_rows = slm_attention_rows_avx512,
    .kv_store = slm_kv_store_x86,
};

const slm_kernel_set *slm_kernels_avx2(void) { return &k_avx2; }
const slm_kernel_set *slm_kernels_avx512(void) { return &k_avx512; }
#else
const slm_kernel_set *slm_kernels_avx2(void) { return NULL; }
const slm_kernel_set *slm_kernels_avx512(void) { return NULL; }
#endif
