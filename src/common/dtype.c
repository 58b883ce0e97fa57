#include <math.h>
#include <string.h>

#include "dtype.h"

static const slm_dtype_info k_types[SLM_DTYPE_COUNT] = {
    [SLM_F32] = {"f32", 1, 4},       [SLM_F16] = {"f16", 1, 2},
    [SLM_Q4_0] = {"q4_0", 32, 18},   [SLM_Q4_1] = {"q4_1", 32, 20},
    [SLM_Q5_0] = {"q5_0", 32, 22},   [SLM_Q5_1] = {"q5_1", 32, 24},
    [SLM_Q8_0] = {"q8_0", 32, 34},   [SLM_Q8_1] = {"q8_1", 32, 36},
    [SLM_Q2_K] = {"q2_k", 256, 84},  [SLM_Q3_K] = {"q3_k", 256, 110},
    [SLM_Q4_K] = {"q4_k", 256, 144}, [SLM_Q5_K] = {"q5_k", 256, 176},
    [SLM_Q6_K] = {"q6_k", 256, 210}, [SLM_Q8_K] = {"q8_k", 256, 292},
    [SLM_I8] = {"i8", 1, 1},         [SLM_I16] = {"i16", 1, 2},
    [SLM_I32] = {"i32", 1, 4},       [SLM_I64] = {"i64", 1, 8},
    [SLM_F64] = {"f64", 1, 8},       [SLM_BF16] = {"bf16", 1, 2},
};

const slm_dtype_info *slm_dtype_get(uint32_t t) {
    if (t >= SLM_DTYPE_COUNT || !k_types[t].name) return NULL;
    return &k_types[t];
}

const char *slm_dtype_name(uint32_t t) {
    const slm_dtype_info *i = slm_dtype_get(t);
    return i ? i->name : "unknown";
}

uint64_t slm_row_bytes(uint32_t t, uint64_t n) {
    const slm_dtype_info *i = slm_dtype_get(t);
    if (!i || n % i->block) return 0;
    return n / i->block * i->bytes;
}

float slm_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalize */
            int e = -1;
            do { man <<= 1; e++; } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t slm_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
    if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* overflow -> inf */
    if (absx < 0x38800000u) { /* result is subnormal or zero */
        if (absx < 0x33000000u) return (uint16_t)sign;
        /* value / 2^-24 = m * 2^(e - 126), with e < 113: shift right by 126 - e. */
        uint32_t e = absx >> 23;
        uint32_t m = (absx & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e;
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t e = (absx >> 23) - 127 + 15;
    uint32_t m = absx & 0x7fffff;
    uint32_t h = (e << 10) | (m >> 13);
    uint32_t rem = m & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* may carry into exp: fine */
    return (uint16_t)(sign | h);
}

void slm_quantize_row_q8_0(const float *x, void *vy, int64_t n) {
    slm_block_q8_0 *y = vy;
    for (int64_t b = 0; b < n / SLM_QK8_0; b++) {
        const float *xb = x + b * SLM_QK8_0;
        float amax = 0.0f;
        for (int j = 0; j < SLM_QK8_0; j++) {
            float v = fabsf(xb[j]);
            if (v > amax) amax = v;
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = slm_f32_to_f16(d);
        for (int j = 0; j < SLM_QK8_0; j++) y[b].qs[j] = (int8_t)roundf(xb[j] * id);
    }
}

int slm_dequantize_row(uint32_t t, const void *vx, float *y, int64_t n) {
    switch (t) {
    case SLM_F32:
        memcpy(y, vx, (size_t)n * 4);
        return 1;
    case SLM_F16: {
        const uint16_t *x = vx;
        for (int64_t i = 0; i < n; i++) y[i] = slm_f16_to_f32(x[i]);
        return 1;
    }
    case SLM_BF16: {
        const uint16_t *x = vx;
        for (int64_t i = 0; i < n; i++) {
            uint32_t b = (uint32_t)x[i] << 16;
            memcpy(&y[i], &b, 4);
        }
        return 1;
    }
    case SLM_Q8_0: {
        const slm_block_q8_0 *x = vx;
        for (int64_t b = 0; b < n / SLM_QK8_0; b++) {
            const float d = slm_f16_to_f32(x[b].d);
            for (int j = 0; j < SLM_QK8_0; j++) y[b * SLM_QK8_0 + j] = x[b].qs[j] * d;
        }
        return 1;
    }
    default:
        return 0;
    }
}
