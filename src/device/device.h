/* device/ — the executor that walks task lists, and the kernels it calls.
 * The CPU stands in for the NPU: the task walker is the management core,
 * matrix tasks are the DPU, vector tasks the SHAVE cores, transfer tasks
 * (copies, weight prefetch) the DMA engine: each task's lane says which. */
#ifndef SLM_DEVICE_H
#define SLM_DEVICE_H

#include <stdatomic.h>

#include "program/program.h"

/* A program made ready to run: the device's own copy of the task list with
 * every operand's address resolved (the program itself stays immutable, so
 * a blob's mapped tasks or one compiled program can back several of these),
 * and the run-time state of the walk. */
typedef struct slm_exec {
    const slm_program *prog; /* not owned */
    slm_task *tasks;         /* [n_tasks] copy of prog->tasks with p[] resolved */
    void **io_ptr;           /* [n_io] bound address of each I/O tensor */
    int32_t *io_reloc;       /* [n_io + 1] first relocation of each I/O tensor */
    int32_t io_cache_pos;    /* I/O index of cache_position */
    int32_t n_stages;        /* stages (runs of tasks closed by a barrier) */
    int32_t *stage_first;    /* [n_stages + 1] first task of each stage; the
                                stage's barrier is task stage_first[s+1] - 1 */
    _Atomic int *stage_next; /* [n_stages] next unclaimed work task of each stage */
    int32_t *stage_prod;     /* [n_stages] its producers: work tasks (its barrier's a); the
                                stage's PREFETCH tasks follow them */
    _Atomic uint32_t *stage_done; /* [n_stages] work tasks finished (counted schedule) */
    _Atomic int *stage_xfer; /* [n_stages] next unclaimed prefetch task (counted schedule) */
    uint64_t scratch_bytes;  /* per-thread scratch the tasks need (max over tasks) */
    const char *trace_name;  /* the program's name, interned for trace records */
} slm_exec;

/* Copy p's tasks, resolve the static operand spaces (weights, constants,
 * arena) once and build the per-I/O relocation index. Allocates (load time
 * only). On failure x is left empty. */
slm_status slm_exec_init(slm_exec *x, const slm_program *p, const void *weights, const void *consts, void *arena,
                         slm_err *err);
void slm_exec_free(slm_exec *x);
/* Bind I/O tensor `io` to `ptr`: patches every task operand that refers to
 * it (its relocations). Cheap enough to call per step for the few mutable
 * pointers (present.*). Allocates nothing. */
void slm_exec_bind(slm_exec *x, int io, void *ptr);
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
/* The schedule of the pool's runs (an slm_schedule_kind; 0: the default,
 * SLM_SCHEDULE_RENDEZVOUS, which measured faster on the 2-core test VM:
 * docs/benchmarks.md). Rendezvous: every thread meets every other at each
 * barrier; prefetch tasks are skipped. Counted: a thread that has no work
 * left in a stage goes on to the next one, where it waits only for the
 * stage's producers (a completion counter per stage, against the barrier's
 * producer count) and meanwhile runs the stage's prefetch tasks; the
 * caller waits, at the end of the run, for the last stage's producers and
 * for the workers inside the run (a worker that wakes after that stays out).
 * Not while a run is going. */
void slm_pool_set_schedule(slm_pool *pool, int schedule);
int slm_pool_schedule(const slm_pool *pool);

/* Walk the task list once (on the pool's threads, or the caller alone when
 * pool is NULL). Within a stage, threads claim tasks in order; the next
 * stage starts when the stage's producers are done (the schedule says how
 * threads wait). One thread: prefetch tasks are skipped. Rows to compute come from cache_position (padding rows,
 * cache_position < 0, are skipped). Allocates nothing. */
slm_status slm_exec_run(slm_exec *x, slm_pool *pool);

/* Per-kind time accounting (for bench): when enabled, the caller thread's
 * share of each task kind is summed in ns. */
void slm_exec_profile(int enable);
void slm_exec_profile_get(uint64_t ns[SLM_T_OP_COUNT], uint64_t *calls);

/* Trace records (device/trace.c; only while slm_trace_enabled()): each
 * returns the time it closes at, the start of what follows. A task of
 * stage `stage` at `index` over rows [row_begin, row_end); a barrier wait. */
uint64_t slm_exec_trace_start(int tid);
uint64_t slm_exec_trace_task(const slm_exec *x, int stage, int index, int row_begin, int row_end, uint64_t t0);
uint64_t slm_exec_trace_barrier(const slm_exec *x, int stage, uint64_t t0);

#endif
