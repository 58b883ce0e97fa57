/* CPU features, detected once (the one place that asks cpuid). */
#ifndef SLM_CPU_H
#define SLM_CPU_H

typedef struct slm_cpu {
    int avx2, fma, f16c;                   /* the AVX2 kernel set needs all three */
    int avx512f, avx512bw, avx512vl;       /* the AVX-512 set needs these, */
    int avx512dq, avx512vnni;              /* and these */
} slm_cpu;

/* The running CPU's features: filled on the first call (thread-safe), then
 * the same record. All zero off x86-64 or without the compiler's cpuid
 * support. */
const slm_cpu *slm_cpu_features(void);

#endif
