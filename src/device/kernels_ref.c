/* Scalar reference kernels and run-time selection of SIMD variants. */
#include <math.h>
#include <string.h>

#include "common/dtype.h"
#include "device/kernels.h"
#include "device/task.h"

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

static const slm_kernel_set k_ref = {"scalar", dot_f32_ref, dot_f16_ref, dot_q8_0_ref};

/* SIMD sets live in kernels_x86.c; NULL when not compiled. */
const slm_kernel_set *slm_kernels_avx2(void);
const slm_kernel_set *slm_kernels_avx512(void);

static const slm_kernel_set *g_active;

const slm_kernel_set *slm_kernels_ref(void) { return &k_ref; }

const slm_kernel_set *slm_kernels_best(void) {
    const slm_kernel_set *k;
    if ((k = slm_kernels_avx512())) return k;
    if ((k = slm_kernels_avx2())) return k;
    return &k_ref;
}

int slm_kernels_select(const char *name) {
    if (!name) {
        g_active = slm_kernels_best();
        return 1;
    }
    const slm_kernel_set *k = NULL;
    if (!strcmp(name, "scalar")) k = &k_ref;
    else if (!strcmp(name, "avx2")) k = slm_kernels_avx2();
    else if (!strcmp(name, "avx512")) k = slm_kernels_avx512();
    if (!k) return 0;
    g_active = k;
    return 1;
}

const slm_kernel_set *slm_kernels_active(void) {
    if (!g_active) g_active = slm_kernels_best();
    return g_active;
}

slm_dot_fn slm_dot_for(const slm_kernel_set *ks, uint32_t wtype) {
    switch (wtype) {
    case SLM_F32: return ks->dot_f32;
    case SLM_F16: return ks->dot_f16;
    case SLM_Q8_0: return ks->dot_q8_0;
    default: return NULL;
    }
}

/* As run.c: o = g * (x / sqrt(mean(x^2) + eps)). */
void slm_k_rmsnorm(const float *x, const float *g, float *y, int n, float eps) {
    float ss = 0.0f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    ss /= (float)n;
    ss += eps;
    ss = 1.0f / sqrtf(ss);
    for (int i = 0; i < n; i++) y[i] = g[i] * (ss * x[i]);
}

/* Rotate adjacent pairs (2i, 2i+1) of each head; cs = [head_dim/2][cos, sin]. */
void slm_k_rope(float *x, int heads, int head_dim, const float *cs) {
    for (int h = 0; h < heads; h++) {
        float *v = x + (size_t)h * head_dim;
        for (int i = 0; i < head_dim / 2; i++) {
            float c = cs[2 * i], s = cs[2 * i + 1];
            float v0 = v[2 * i], v1 = v[2 * i + 1];
            v[2 * i] = v0 * c - v1 * s;
            v[2 * i + 1] = v0 * s + v1 * c;
        }
    }
}

void slm_k_swiglu(const float *gate, const float *up, float *y, int n) {
    for (int i = 0; i < n; i++) {
        float g = gate[i];
        y[i] = g * (1.0f / (1.0f + expf(-g))) * up[i];
    }
}

void slm_k_add(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] += x[i];
}

void slm_k_attention_head(const float *q, const float *K, const float *V, int ld, const int32_t *mask,
                          int last, int head_dim, float *out) {
    const float scale = 1.0f / sqrtf((float)head_dim);
    float m = -INFINITY, l = 0.0f;
    for (int d = 0; d < head_dim; d++) out[d] = 0.0f;
    for (int j = 0; j <= last; j++) {
        if (!mask[j]) continue;
        const float *k = K + (size_t)j * ld;
        const float *v = V + (size_t)j * ld;
        float s = 0.0f;
        for (int d = 0; d < head_dim; d++) s += q[d] * k[d];
        s *= scale;
        if (s > m) {
            float corr = expf(m - s); /* 0 on the first valid row */
            l = l * corr + 1.0f;
            for (int d = 0; d < head_dim; d++) out[d] = out[d] * corr + v[d];
            m = s;
        } else {
            float w = expf(s - m);
            l += w;
            for (int d = 0; d < head_dim; d++) out[d] += w * v[d];
        }
    }
    if (l > 0.0f) {
        float inv = 1.0f / l;
        for (int d = 0; d < head_dim; d++) out[d] *= inv;
    }
}

size_t slm_task_scratch_bytes(const struct slm_task *t) {
    (void)t;
    return 0;
}
