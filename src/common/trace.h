/* common/trace.h — the schedule made visible: a Chrome trace-event file
 * (the "traceEvents" JSON that Perfetto and chrome://tracing open) of
 * every task on every thread, the barrier waits, and what the layers
 * above do (variant switches, prefill chunks, prefix-cache hits,
 * speculative accept/reject, sampling, HTTP requests).
 *
 * Cost model: slm_trace_start allocates (and touches) one buffer of
 * fixed-size records up front; threads claim chunks of it with one atomic
 * add per SLM_TRACE_CHUNK records, so recording takes no lock and no
 * allocation. When tracing is off every hook is one predictable branch on
 * slm_trace_enabled(). When the buffer is full, further events are dropped
 * and counted (the file says how many). slm_trace_stop writes the JSON and
 * frees the buffer; call it while the threads that record are idle (after
 * a generation, before exit). */
#ifndef SLM_COMMON_TRACE_H
#define SLM_COMMON_TRACE_H

#include <stdatomic.h>
#include <stdint.h>

#include "common/common.h"

#define SLM_TRACE_CHUNK 1024 /* records a thread claims at a time */
#define SLM_TRACE_DEFAULT_MB 64

/* What a record is. */
enum {
    SLM_TRACE_EMPTY = 0, /* never written */
    SLM_TRACE_TASK,      /* a task slice (device/): the task union */
    SLM_TRACE_BARRIER,   /* a wait at a stage's barrier: the task union, kind "barrier" */
    SLM_TRACE_SLICE,     /* a generic complete slice [t0, t1): the gen union */
    SLM_TRACE_INSTANT,   /* a generic instant at t0: the gen union */
};

/* One record: 128 bytes (two cache lines), written by its thread only. */
typedef struct slm_trace_ev {
    uint64_t t0, t1;  /* ticks (slm_trace_ticks) */
    const char *name; /* static or interned: the event's name */
    const char *cat;  /* static: "task", "barrier", "engine", "runtime", "http" */
    uint16_t tid;     /* the thread's slot */
    uint8_t type;     /* SLM_TRACE_* */
    uint8_t ns;       /* 1: t0, t1 are CLOCK_MONOTONIC ns, not ticks */
    uint8_t pad[4];
    union {
        struct {
            const char *prog;       /* interned program name */
            int32_t stage, index;   /* stage number, task index in the program */
            int32_t layer, n0, n1;  /* the task's layer and tile [n0, n1) */
            int32_t rows;           /* rows computed */
            uint64_t bytes_read;    /* weights + activations + KV rows */
            uint64_t bytes_written;
            const char *lane;       /* static: "vector", "matrix", "transfer" (tasks) */
        } task;
        struct {
            const char *k[3]; /* static keys of integer args; NULL: unused */
            int64_t v[3];
            const char *sk;   /* static key of the string arg; NULL: none */
            char s[32];       /* the string arg, copied (truncated) */
        } gen;
    } u;
} slm_trace_ev;

/* Integer and string arguments of a generic event (keys must be static). */
typedef struct slm_trace_args {
    const char *k[3];
    int64_t v[3];
    const char *sk, *s;
} slm_trace_args;

extern _Atomic int slm_trace_flag;
extern int slm_trace_tsc; /* 1: ticks are the invariant TSC */

static inline int slm_trace_enabled(void) { return atomic_load_explicit(&slm_trace_flag, memory_order_relaxed); }

uint64_t slm_trace_clock_ns(void);

/* Timestamps: the TSC where it is invariant (a few ns), else
 * CLOCK_MONOTONIC in ns. Converted to microseconds when written. */
static inline uint64_t slm_trace_ticks(void) {
#if defined(__x86_64__)
    if (slm_trace_tsc) return __builtin_ia32_rdtsc();
#endif
    return slm_trace_clock_ns();
}

/* Start recording into a buffer of buffer_mb MiB (<= 0: the default),
 * to be written to path by slm_trace_stop. One trace at a time. */
slm_status slm_trace_start(const char *path, int buffer_mb, slm_err *err);
/* Stop recording and write the file. *events / *dropped (may be NULL)
 * receive the counts. A no-op returning SLM_OK when no trace runs. */
slm_status slm_trace_stop(uint64_t *events, uint64_t *dropped, slm_err *err);

/* This thread's next record (tid set; the caller fills the rest and sets
 * type last), or NULL when no trace runs or the buffer is full. Callers
 * check slm_trace_enabled() first (the executor once per run). */
slm_trace_ev *slm_trace_next(void);
/* A thread that records a run on behalf of another (executor workers)
 * enters before its first record and leaves after its last one;
 * slm_trace_stop waits (up to a second) until no thread is inside. */
void slm_trace_enter(void);
void slm_trace_leave(void);

/* Name this thread in the file (first name wins; copied). */
void slm_trace_name_thread(const char *name);
/* 1 when this thread already has a name (or no slot) in the running trace. */
int slm_trace_thread_named(void);
/* A stable copy of a short name (program names) for records; load time
 * only (takes a lock). Returns "?" when the table is full. */
const char *slm_trace_intern(const char *name);

/* Generic events for the layers above the device. */
void slm_trace_instant(const char *cat, const char *name, const slm_trace_args *a);
/* A slice [t0, now) on this thread: t0 from slm_trace_begin (0 when
 * tracing was off then: nothing is recorded). */
static inline uint64_t slm_trace_begin(void) { return slm_trace_enabled() ? slm_trace_ticks() : 0; }
void slm_trace_end(const char *cat, const char *name, uint64_t t0, const slm_trace_args *a);
/* The same for a span that began at t0_ns on CLOCK_MONOTONIC (timestamps
 * taken for other reasons, e.g. a request's arrival). */
void slm_trace_end_ns(const char *cat, const char *name, uint64_t t0_ns, const slm_trace_args *a);

#endif
