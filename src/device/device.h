/* device/ — the executor that walks task lists, and the kernels it calls.
 * The CPU stands in for the NPU: the task walker is the management core,
 * matrix tasks are the DPU, vector tasks the SHAVE cores. */
#ifndef SLM_DEVICE_H
#define SLM_DEVICE_H

#include "compiler/compiler.h"

/* Resolve the static operand spaces (weights, constants, arena) once, and
 * build the per-I/O relocation index. Allocates (load time only). */
slm_status slm_program_prepare(slm_program *p, const void *weights, const void *consts, void *arena,
                               slm_err *err);
/* Bind I/O tensor `io` to `ptr`: patches every task operand that refers to
 * it (its relocations). Cheap enough to call per step for the few mutable
 * pointers (present.*). Allocates nothing. */
void slm_program_bind(slm_program *p, int io, void *ptr);
/* Worker threads. A pool of n runs programs on the caller plus n - 1
 * workers; workers spin briefly, then sleep on a futex, between calls and
 * at barriers. */
typedef struct slm_pool slm_pool;
/* n_threads <= 0: one per online CPU. */
slm_status slm_pool_create(slm_pool **out, int n_threads, slm_err *err);
void slm_pool_free(slm_pool *pool);
int slm_pool_size(const slm_pool *pool);
/* Give every thread at least `bytes` of scratch (64-byte aligned). Load
 * time only: allocates. */
slm_status slm_pool_reserve_scratch(slm_pool *pool, uint64_t bytes, slm_err *err);

/* Walk the task list once (on the pool's threads, or the caller alone when
 * pool is NULL). Within a stage, threads claim tasks in order; a barrier
 * waits for all. Rows to compute come from cache_position (padding rows,
 * cache_position < 0, are skipped). Allocates nothing. */
slm_status slm_program_run(slm_program *p, slm_pool *pool);

/* Per-kind time accounting (for bench): when enabled, the caller thread's
 * share of each task kind is summed in ns. */
void slm_exec_profile(int enable);
void slm_exec_profile_get(uint64_t ns[SLM_T_OP_COUNT], uint64_t *calls);

#endif
