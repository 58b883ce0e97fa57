/* The trace buffer and its writer (common/trace.h). */
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "common/trace.h"

#define MAX_THREADS 256
#define MAX_NAMES 256

_Atomic int slm_trace_flag;
int slm_trace_tsc;

typedef struct thread_slot {
    char name[40];
    int named;
} thread_slot;

/* The one trace. Chunks are handed out by next_chunk; a thread keeps its
 * chunk and position in thread-local storage, tagged with the trace's
 * generation so that a later trace never writes into a freed buffer. */
static struct {
    slm_trace_ev *ev;           /* [n_chunks * SLM_TRACE_CHUNK], zeroed */
    uint32_t n_chunks;
    _Atomic uint32_t next_chunk;
    _Atomic uint32_t n_threads;
    _Atomic uint64_t dropped;
    thread_slot threads[MAX_THREADS];
    uint64_t tick0, ns0;        /* at start */
    char path[1024];
} g;
static _Atomic uint32_t g_gen; /* bumped per trace (thread-local tags) */
static _Atomic int g_inside;   /* threads between slm_trace_enter and _leave */

static _Thread_local struct {
    uint32_t gen;               /* g_gen when claimed; 0 = none */
    int slot;                   /* thread slot, -1: out of slots */
    slm_trace_ev *pos, *end;    /* the current chunk */
} tl;

static pthread_mutex_t g_names_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_names[MAX_NAMES][32];
static int g_n_names;

uint64_t slm_trace_clock_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CPUID 0x80000007 EDX bit 8: the TSC runs at a constant rate in every
 * power state, so ticks convert to time by one ratio. */
static int invariant_tsc(void) {
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) return 0;
    if (!__get_cpuid(0x80000007u, &a, &b, &c, &d)) return 0;
    return (d >> 8) & 1;
#else
    return 0;
#endif
}

const char *slm_trace_intern(const char *name) {
    const char *r = "?";
    pthread_mutex_lock(&g_names_lock);
    for (int i = 0; i < g_n_names; i++)
        if (!strncmp(g_names[i], name, sizeof g_names[i] - 1)) {
            r = g_names[i];
            goto out;
        }
    if (g_n_names < MAX_NAMES) {
        snprintf(g_names[g_n_names], sizeof g_names[0], "%s", name);
        r = g_names[g_n_names++];
    }
out:
    pthread_mutex_unlock(&g_names_lock);
    return r;
}

slm_status slm_trace_start(const char *path, int buffer_mb, slm_err *err) {
    if (slm_trace_enabled() || g.ev) return slm_errf(err, SLM_ERR_ARG, "a trace is already being recorded");
    if (buffer_mb <= 0) buffer_mb = SLM_TRACE_DEFAULT_MB;
    if (buffer_mb > 1 << 16) return slm_errf(err, SLM_ERR_ARG, "trace buffer of %d MiB is too large", buffer_mb);
    if (strlen(path) >= sizeof g.path) return slm_errf(err, SLM_ERR_ARG, "trace path too long");
    const uint64_t bytes = (uint64_t)buffer_mb << 20;
    uint32_t n_chunks = (uint32_t)(bytes / (SLM_TRACE_CHUNK * sizeof(slm_trace_ev)));
    if (n_chunks == 0) n_chunks = 1;
    /* the file must be writable before anything runs */
    FILE *f = fopen(path, "w");
    if (!f) return slm_errf(err, SLM_ERR_IO, "%s: cannot open trace file for writing", path);
    fclose(f);
    memset(&g, 0, sizeof g);
    /* zeroed, so every page is touched here rather than in the decode loop */
    g.ev = slm_aligned_alloc((size_t)n_chunks * SLM_TRACE_CHUNK * sizeof(slm_trace_ev));
    if (!g.ev) return slm_errf(err, SLM_ERR_NOMEM, "out of memory for a %d MiB trace buffer", buffer_mb);
    g.n_chunks = n_chunks;
    snprintf(g.path, sizeof g.path, "%s", path);
    slm_trace_tsc = invariant_tsc();
    g.ns0 = slm_trace_clock_ns();
    g.tick0 = slm_trace_ticks();
    atomic_fetch_add(&g_gen, 1);
    atomic_store(&slm_trace_flag, 1);
    return SLM_OK;
}

/* Claim a thread slot (first event of this thread in this trace). */
static void claim_thread(uint32_t gen) {
    tl.gen = gen;
    tl.pos = tl.end = NULL;
    uint32_t s = atomic_fetch_add(&g.n_threads, 1);
    tl.slot = s < MAX_THREADS ? (int)s : -1;
}

slm_trace_ev *slm_trace_next(void) {
    /* no check of the flag: an executor thread inside a traced run writes
     * its last records after slm_trace_stop has cleared it (the stop waits
     * for them); the generic events check the flag themselves */
    if (!g.ev) return NULL;
    const uint32_t gen = atomic_load_explicit(&g_gen, memory_order_relaxed);
    if (tl.gen != gen) claim_thread(gen);
    if (tl.pos == tl.end) {
        uint32_t c = tl.slot < 0 ? g.n_chunks : atomic_fetch_add_explicit(&g.next_chunk, 1, memory_order_relaxed);
        if (c >= g.n_chunks) {
            atomic_fetch_add_explicit(&g.dropped, 1, memory_order_relaxed);
            return NULL;
        }
        tl.pos = g.ev + (size_t)c * SLM_TRACE_CHUNK;
        tl.end = tl.pos + SLM_TRACE_CHUNK;
    }
    slm_trace_ev *e = tl.pos++;
    e->tid = (uint16_t)tl.slot;
    return e;
}

void slm_trace_enter(void) { atomic_fetch_add_explicit(&g_inside, 1, memory_order_relaxed); }
void slm_trace_leave(void) { atomic_fetch_sub_explicit(&g_inside, 1, memory_order_release); }

int slm_trace_thread_named(void) {
    const uint32_t gen = atomic_load_explicit(&g_gen, memory_order_relaxed);
    return tl.gen == gen && (tl.slot < 0 || g.threads[tl.slot].named);
}

void slm_trace_name_thread(const char *name) {
    if (!slm_trace_enabled()) return;
    const uint32_t gen = atomic_load_explicit(&g_gen, memory_order_relaxed);
    if (tl.gen != gen) claim_thread(gen);
    if (tl.slot < 0 || g.threads[tl.slot].named) return;
    snprintf(g.threads[tl.slot].name, sizeof g.threads[0].name, "%s", name);
    g.threads[tl.slot].named = 1;
}

static void fill_gen(slm_trace_ev *e, const char *cat, const char *name, const slm_trace_args *a) {
    e->name = name;
    e->cat = cat;
    if (!a) return;
    for (int i = 0; i < 3; i++) {
        e->u.gen.k[i] = a->k[i];
        e->u.gen.v[i] = a->v[i];
    }
    if (a->sk && a->s) {
        e->u.gen.sk = a->sk;
        snprintf(e->u.gen.s, sizeof e->u.gen.s, "%s", a->s);
    }
}

void slm_trace_instant(const char *cat, const char *name, const slm_trace_args *a) {
    if (!slm_trace_enabled()) return;
    slm_trace_ev *e = slm_trace_next();
    if (!e) return;
    e->t0 = e->t1 = slm_trace_ticks();
    fill_gen(e, cat, name, a);
    e->type = SLM_TRACE_INSTANT;
}

void slm_trace_end(const char *cat, const char *name, uint64_t t0, const slm_trace_args *a) {
    if (!t0 || !slm_trace_enabled()) return;
    slm_trace_ev *e = slm_trace_next();
    if (!e) return;
    e->t0 = t0;
    e->t1 = slm_trace_ticks();
    fill_gen(e, cat, name, a);
    e->type = SLM_TRACE_SLICE;
}

void slm_trace_end_ns(const char *cat, const char *name, uint64_t t0_ns, const slm_trace_args *a) {
    if (!slm_trace_enabled()) return;
    slm_trace_ev *e = slm_trace_next();
    if (!e) return;
    e->t0 = t0_ns;
    e->t1 = slm_trace_clock_ns();
    e->ns = 1;
    fill_gen(e, cat, name, a);
    e->type = SLM_TRACE_SLICE;
}

/* ---- the writer ---------------------------------------------------------- */

static void put_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f) fprintf(f, "\\u%04x", *p); /* bytes, not UTF-8 decoding */
        else fputc(*p, f);
    }
    fputc('"', f);
}

/* ticks since the start -> microseconds */
static double to_us(uint64_t ticks, double us_per_tick) {
    return ticks > g.tick0 ? (double)(ticks - g.tick0) * us_per_tick : 0.0;
}

static void put_event(FILE *f, const slm_trace_ev *e, double upt) {
    double ts = to_us(e->t0, upt), dur = e->t1 > e->t0 ? (double)(e->t1 - e->t0) * upt : 0.0;
    if (e->ns) {
        ts = e->t0 > g.ns0 ? (double)(e->t0 - g.ns0) * 1e-3 : 0.0;
        dur = e->t1 > e->t0 ? (double)(e->t1 - e->t0) * 1e-3 : 0.0;
    }
    fputs(",\n{\"name\":", f);
    put_str(f, e->name ? e->name : "?");
    fputs(",\"cat\":", f);
    put_str(f, e->cat ? e->cat : "?");
    if (e->type == SLM_TRACE_INSTANT) fprintf(f, ",\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f", ts);
    else fprintf(f, ",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f", ts, dur);
    fprintf(f, ",\"pid\":1,\"tid\":%u,\"args\":{", (unsigned)e->tid);
    if (e->type == SLM_TRACE_TASK || e->type == SLM_TRACE_BARRIER) {
        fputs("\"program\":", f);
        put_str(f, e->u.task.prog ? e->u.task.prog : "?");
        fprintf(f, ",\"stage\":%d", (int)e->u.task.stage);
        if (e->type == SLM_TRACE_TASK)
            fprintf(f,
                    ",\"task\":%d,\"layer\":%d,\"n0\":%d,\"n1\":%d,\"rows\":%d,\"bytes_read\":%" PRIu64
                    ",\"bytes_written\":%" PRIu64,
                    (int)e->u.task.index, (int)e->u.task.layer, (int)e->u.task.n0, (int)e->u.task.n1,
                    (int)e->u.task.rows, e->u.task.bytes_read, e->u.task.bytes_written);
        if (e->type == SLM_TRACE_TASK && e->u.task.lane) {
            fputs(",\"lane\":", f);
            put_str(f, e->u.task.lane);
        }
    } else {
        int any = 0;
        for (int i = 0; i < 3; i++)
            if (e->u.gen.k[i]) {
                fprintf(f, "%s", any++ ? "," : "");
                put_str(f, e->u.gen.k[i]);
                fprintf(f, ":%" PRId64, e->u.gen.v[i]);
            }
        if (e->u.gen.sk) {
            fprintf(f, "%s", any++ ? "," : "");
            put_str(f, e->u.gen.sk);
            fputc(':', f);
            char s[sizeof e->u.gen.s + 1];
            memcpy(s, e->u.gen.s, sizeof e->u.gen.s);
            s[sizeof e->u.gen.s] = 0;
            put_str(f, s);
        }
    }
    fputs("}}", f);
}

slm_status slm_trace_stop(uint64_t *events, uint64_t *dropped, slm_err *err) {
    if (events) *events = 0;
    if (dropped) *dropped = 0;
    if (!g.ev) return SLM_OK;
    atomic_store(&slm_trace_flag, 0);
    /* executor workers may still be writing the last records of the run
     * their caller has returned from; one still inside after a second (a
     * badly overloaded machine) keeps the buffer alive: it is left, not freed */
    int inside = 0;
    for (uint64_t t0 = slm_trace_clock_ns(); (inside = atomic_load_explicit(&g_inside, memory_order_acquire) > 0);) {
        if (slm_trace_clock_ns() - t0 > 1000000000u) break;
        sched_yield();
    }
    atomic_thread_fence(memory_order_seq_cst);
    const uint64_t tick1 = slm_trace_ticks(), ns1 = slm_trace_clock_ns();
    double upt = 1e-3; /* clock ticks are ns */
    if (slm_trace_tsc && tick1 > g.tick0 && ns1 > g.ns0) upt = (double)(ns1 - g.ns0) * 1e-3 / (double)(tick1 - g.tick0);
    slm_status st = SLM_OK;
    FILE *f = fopen(g.path, "w");
    uint64_t n = 0;
    if (!f) {
        st = slm_errf(err, SLM_ERR_IO, "%s: cannot write trace file", g.path);
        goto out;
    }
    uint32_t nt = atomic_load(&g.n_threads), used = atomic_load(&g.next_chunk);
    if (nt > MAX_THREADS) nt = MAX_THREADS;
    if (used > g.n_chunks) used = g.n_chunks;
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"clock\":\"%s\",\"dropped\":%" PRIu64 "},\n",
            slm_trace_tsc ? "tsc" : "monotonic", atomic_load(&g.dropped));
    fputs("\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"staticlm\"}}",
          f);
    for (uint32_t t = 0; t < nt; t++) {
        char def[40];
        snprintf(def, sizeof def, "thread %u", (unsigned)t);
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"args\":{\"name\":", (unsigned)t);
        put_str(f, g.threads[t].named ? g.threads[t].name : def);
        fprintf(f, "}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"args\":{\"sort_index\":%u}}",
                (unsigned)t, (unsigned)t);
    }
    for (uint32_t c = 0; c < used; c++)
        for (const slm_trace_ev *e = g.ev + (size_t)c * SLM_TRACE_CHUNK, *end = e + SLM_TRACE_CHUNK; e < end; e++) {
            if (e->type == SLM_TRACE_EMPTY) break; /* the rest of a thread's last chunk */
            put_event(f, e, upt);
            n++;
        }
    fputs("\n]}\n", f);
    if (ferror(f) | fclose(f)) st = slm_errf(err, SLM_ERR_IO, "%s: error writing the trace file", g.path);
out:
    if (events) *events = n;
    if (dropped) *dropped = atomic_load(&g.dropped);
    if (!inside) slm_aligned_free(g.ev); /* else a late writer may still hold a chunk: leaked, never reused */
    g.ev = NULL;
    return st;
}
