/* CPU features: one cpuid pass under pthread_once. */
#include <pthread.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

#include "common/cpu.h"

static slm_cpu g_cpu;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void detect(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    g_cpu.avx2 = __builtin_cpu_supports("avx2") != 0;
    g_cpu.fma = __builtin_cpu_supports("fma") != 0;
    /* F16C: cpuid leaf 1, ECX bit 29 (not a __builtin_cpu_supports name in
       every compiler); usable when AVX state is (as AVX2's check found) */
    unsigned a, b, c, d;
    g_cpu.f16c = g_cpu.avx2 && __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
    g_cpu.avx512f = __builtin_cpu_supports("avx512f") != 0;
    g_cpu.avx512bw = __builtin_cpu_supports("avx512bw") != 0;
    g_cpu.avx512vl = __builtin_cpu_supports("avx512vl") != 0;
    g_cpu.avx512dq = __builtin_cpu_supports("avx512dq") != 0;
    g_cpu.avx512vnni = __builtin_cpu_supports("avx512vnni") != 0;
#endif
}

const slm_cpu *slm_cpu_features(void) {
    pthread_once(&g_once, detect);
    return &g_cpu;
}
