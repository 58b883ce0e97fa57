/* CPU features, detected once (the one place that asks cpuid). */
#ifndef SLM_CPU_H
#define SLM_CPU_H

typedef struct slm_cpu {
    int avx2, fma, f16c;                   /* the AVX2 kernel set needs all three */
    int avx512f, avx512bw, avx512vl;       /* the AVX-512 set needs these, */
    int avx512dq, avx512vnni;              /* and these */
    /* AMX (the matrix engine; the amx set needs all three and amx_os):
       CPUID leaf 7 EDX bits 24 (tile), 25 (int8), 22 (bf16) */
    int amx_tile, amx_int8, amx_bf16;
    int amx_os;          /* 1: the OS granted this process the tile data
                            state (arch_prctl ARCH_REQ_XCOMP_PERM, asked once
                            here, before any thread touches a tile) */
    const char *amx_why; /* why AMX is not usable (NULL when it is) */
} slm_cpu;

/* The running CPU's features: filled on the first call (thread-safe), then
 * the same record. All zero off x86-64 or without the compiler's cpuid
 * support. */
const slm_cpu *slm_cpu_features(void);

#endif
