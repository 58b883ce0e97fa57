/* CPU features: one cpuid pass under pthread_once. */
#include <pthread.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "common/cpu.h"

static slm_cpu g_cpu;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) && defined(__GNUC__)
/* AMX: the CPUID bits, then the OS's permission for the tile data state
 * (Linux 5.16+: XFEATURE_XTILEDATA is off until the process asks; a tile
 * instruction before that faults). Asked once per process, from the one
 * detection pass that every kernel selection goes through. */
static void detect_amx(void) {
    unsigned a, b, c, d;
    if (__get_cpuid_max(0, NULL) < 7) {
        g_cpu.amx_why = "no CPUID leaf 7";
        return;
    }
    __cpuid_count(7, 0, a, b, c, d);
    g_cpu.amx_tile = d >> 24 & 1;
    g_cpu.amx_int8 = d >> 25 & 1;
    g_cpu.amx_bf16 = d >> 22 & 1;
    if (!g_cpu.amx_tile || !g_cpu.amx_int8) {
        g_cpu.amx_why = "the CPU does not report AMX-TILE and AMX-INT8";
        return;
    }
#if defined(__linux__)
    /* ARCH_REQ_XCOMP_PERM (0x1023) for XFEATURE_XTILEDATA (18) */
    if (syscall(SYS_arch_prctl, 0x1023, 18) == 0) g_cpu.amx_os = 1;
    else g_cpu.amx_why = "the OS refused the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM)";
#else
    g_cpu.amx_why = "no way to ask this OS for the tile data state";
#endif
}
#endif

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
    detect_amx();
#else
    g_cpu.amx_why = "not an x86-64 build";
#endif
}

const slm_cpu *slm_cpu_features(void) {
    pthread_once(&g_once, detect);
    return &g_cpu;
}
