/* Kernel selection: which set is active (the best this CPU supports, or one
 * forced by name for tests and benchmarks). Depends on the sets, never the
 * other way round. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "common/cpu.h"
#include "common/dtype.h"
#include "device/kernels.h"
#include "device/kernels_amx.h"

/* The SIMD sets (kernels_x86_sets.c; NULL when not compiled). They run only on a
 * CPU with the features below. */
const slm_kernel_set *slm_kernels_avx2(void);
const slm_kernel_set *slm_kernels_avx512(void);

static const slm_kernel_set *avx2_if_supported(void) {
    const slm_cpu *c = slm_cpu_features();
    return c->avx2 && c->fma && c->f16c ? slm_kernels_avx2() : NULL;
}

static const slm_kernel_set *avx512_if_supported(void) {
    const slm_cpu *c = slm_cpu_features();
    return c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq && c->avx512vnni && c->avx2 && c->fma && c->f16c
               ? slm_kernels_avx512()
               : NULL;
}

/* AMX (kernels_amx.c): the CPU's tiles and the OS's permission for them */
static const slm_kernel_set *amx_if_supported(void) {
    const slm_cpu *c = slm_cpu_features();
    return c->amx_tile && c->amx_int8 && c->amx_os && avx512_if_supported() ? slm_kernels_amx() : NULL;
}

static _Atomic(const slm_kernel_set *) g_active;

const slm_kernel_set *slm_kernels_best(void) {
    const slm_kernel_set *k;
    if ((k = avx512_if_supported())) return k;
    if ((k = avx2_if_supported())) return k;
    return slm_kernels_ref();
}

int slm_kernels_select(const char *name) {
    const slm_kernel_set *k = NULL;
    if (!name) k = slm_kernels_best();
    else if (!strcmp(name, "scalar")) k = slm_kernels_ref();
    else if (!strcmp(name, "avx2")) k = avx2_if_supported();
    else if (!strcmp(name, "avx512")) k = avx512_if_supported();
    else if (!strcmp(name, "amx") && !(k = amx_if_supported())) k = avx512_if_supported(); /* the fall-back */
    else if (!strcmp(name, "amx-emu")) k = avx512_if_supported() ? slm_kernels_amx_emu() : NULL; /* tests */
    if (!k) return 0;
    atomic_store(&g_active, k);
    return 1;
}

void slm_kernels_compiled(char *buf, size_t cap) {
    if (!buf || !cap) return;
    snprintf(buf, cap, "scalar%s%s%s", slm_kernels_avx2() ? " avx2" : "", slm_kernels_avx512() ? " avx512" : "",
             slm_kernels_amx() ? " amx" : "");
}

const slm_kernel_set *slm_kernels_active(void) {
    const slm_kernel_set *k = atomic_load(&g_active);
    if (!k) {
        k = slm_kernels_best();
        atomic_store(&g_active, k);
    }
    return k;
}

slm_dot_fn slm_dot_for(const slm_kernel_set *ks, uint32_t wtype) {
    switch (wtype) {
    case SLM_F32: return ks->dot_f32;
    case SLM_F16: return ks->dot_f16;
    case SLM_BF16: return ks->dot_bf16;
    case SLM_Q8_0: return ks->dot_q8_0;
    default: return slm_dot_ref_for(wtype);
    }
}
