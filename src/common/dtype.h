/* Element types. Numbering follows GGML's type ids so GGUF tensors map 1:1. */
#ifndef SLM_DTYPE_H
#define SLM_DTYPE_H

#include <stdint.h>
#include <stddef.h>

typedef enum slm_dtype {
    SLM_F32 = 0,
    SLM_F16 = 1,
    SLM_Q4_0 = 2,
    SLM_Q4_1 = 3,
    SLM_Q5_0 = 6,
    SLM_Q5_1 = 7,
    SLM_Q8_0 = 8,
    SLM_Q8_1 = 9,
    SLM_Q2_K = 10,
    SLM_Q3_K = 11,
    SLM_Q4_K = 12,
    SLM_Q5_K = 13,
    SLM_Q6_K = 14,
    SLM_Q8_K = 15,
    SLM_I8 = 24,
    SLM_I16 = 25,
    SLM_I32 = 26,
    SLM_I64 = 27,
    SLM_F64 = 28,
    SLM_BF16 = 30,
    SLM_DTYPE_COUNT = 40
} slm_dtype;

typedef struct slm_dtype_info {
    const char *name;  /* "q8_0"; NULL for ids we do not know */
    uint32_t block;    /* elements per block (1 for plain types) */
    uint32_t bytes;    /* bytes per block */
} slm_dtype_info;

/* NULL when the id is unknown. */
const slm_dtype_info *slm_dtype_get(uint32_t t);
const char *slm_dtype_name(uint32_t t);
/* Bytes of a row of n elements; 0 when n is not a multiple of the block
 * size or the type is unknown. */
uint64_t slm_row_bytes(uint32_t t, uint64_t n);

/* IEEE half <-> float (exact, round-to-nearest-even). */
float slm_f16_to_f32(uint16_t h);
uint16_t slm_f32_to_f16(float f);

/* Q8_0: 32 int8 with one f16 scale, as GGML lays it out. */
#define SLM_QK8_0 32
typedef struct { uint16_t d; int8_t qs[SLM_QK8_0]; } slm_block_q8_0;

/* Reference (scalar) conversions of one row of n elements. */
void slm_quantize_row_q8_0(const float *x, void *y, int64_t n);
/* Dequantize a row of any supported type to float; returns 0 if unsupported. */
int slm_dequantize_row(uint32_t t, const void *x, float *y, int64_t n);

#endif
