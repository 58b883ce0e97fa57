/* What tracing costs the executor: one program (the generate program after
 * a 3-token prefill) run again and again, in blocks that alternate trace
 * off and on, each run timed alone; the minimum and the median per mode.
 *
 *   cmake --build build --target bench_trace
 *   build/tests/bench_trace MODEL [THREADS [RUNS_PER_BLOCK]]
 */
#include <time.h>

#include "t.h"
#include "rig.h"

#include "common/trace.h"

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    (void)t_tests_passed_; /* t.h is here for rig.h's CHECKF */
    (void)t_tests_failed_;
    if (argc < 2) {
        fprintf(stderr, "usage: bench_trace MODEL [THREADS [RUNS_PER_BLOCK]]\n");
        return 2;
    }
    const int threads = argc > 2 ? atoi(argv[2]) : 1, reps = argc > 3 ? atoi(argv[3]) : 500, blocks = 8;
    rig r;
    memset(&r, 0, sizeof r);
    slm_err err = {0};
    slm_compile_options o = rig_opts(16, 64);
    if (slm_model_open(&r.m, argv[1], &err) || slm_model_repack(&r.m, &err) || slm_compile(&r.c, &r.m, &o, &err) ||
        slm_rt_init(&r.rt, &r.c, r.m.map.data, threads, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const int32_t ids[3] = {1, 2, 3};
    if (slm_rt_prefill(&r.rt, ids, 3, &err) || slm_rt_decode(&r.rt, 5, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    slm_exec *x = &r.rt.exec[r.rt.gen - r.c.progs];
    int n_tasks = 0;
    for (int i = 0; i < r.rt.gen->n_tasks; i++) n_tasks += r.rt.gen->tasks[i].op != SLM_T_BARRIER;
    double *off = calloc((size_t)reps * blocks, sizeof *off), *on = calloc((size_t)reps * blocks, sizeof *on);
    int n_off = 0, n_on = 0;
    uint64_t events = 0, dropped = 0;
    for (int b = 0; b < blocks; b++)
        for (int traced = 0; traced < 2; traced++) {
            if (traced && slm_trace_start("bench_trace.json", 16, &err)) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
            }
            for (int i = 0; i < reps; i++) {
                const double t0 = now_us();
                slm_exec_run(x, r.rt.pool);
                const double d = now_us() - t0;
                if (traced) on[n_on++] = d;
                else off[n_off++] = d;
            }
            if (traced) {
                uint64_t n = 0, dr = 0;
                slm_trace_stop(&n, &dr, &err);
                events += n;
                dropped += dr;
            }
        }
    remove("bench_trace.json");
    qsort(off, (size_t)n_off, sizeof *off, cmp_d);
    qsort(on, (size_t)n_on, sizeof *on, cmp_d);
    printf("%s: %s, %d tasks, %d threads, %d runs per mode (%llu events, %llu dropped)\n", argv[1], r.rt.gen->name,
           n_tasks, threads, n_off, (unsigned long long)events, (unsigned long long)dropped);
    printf("trace off: min %.2f us, median %.2f us\ntrace on:  min %.2f us, median %.2f us\n", off[0], off[n_off / 2],
           on[0], on[n_on / 2]);
    printf("overhead: min %+.1f%%, median %+.1f%%; %.1f ns per recorded event (medians)\n", 100 * (on[0] / off[0] - 1),
           100 * (on[n_on / 2] / off[n_off / 2] - 1),
           events ? (on[n_on / 2] - off[n_off / 2]) * 1e3 / ((double)events / n_on) : 0.0);
    free(off);
    free(on);
    rig_close(&r);
    return 0;
}
