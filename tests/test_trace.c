/* The trace file (common/trace.c, device/trace.c): it parses as JSON, holds
 * one slice per work task the executor ran (counted from the programs' task
 * lists times the runs) with its lane, one barrier slice per stage per
 * thread (rendezvous schedule; the counted schedule records the waits it
 * had, and the prefetch tasks it ran), names its threads, and survives a
 * full buffer. */
#include "t.h"
#include "rig.h"

#include "common/trace.h"

#ifdef SLM_HAVE_CJSON
#include <cjson/cJSON.h>
#endif

#define MODEL T_SHARED("models/stories260K.bin")
#define THREADS 3

/* Work tasks (barriers and prefetch tasks excluded) and barriers of a program. */
static void count_program(const slm_program *p, int *tasks, int *barriers) {
    *tasks = *barriers = 0;
    for (int i = 0; i < p->n_tasks; i++) {
        if (p->tasks[i].op == SLM_T_BARRIER) ++*barriers;
        else if (p->tasks[i].op != SLM_T_PREFETCH) ++*tasks;
    }
}

static int open_rt(rig *r, int threads) {
    memset(r, 0, sizeof *r);
    slm_err err = {0};
    slm_compile_options o = rig_opts(16, 16);
    if (slm_model_open(&r->m, MODEL, &err) || slm_model_repack(&r->m, &err) || slm_compile(&r->c, &r->m, &o, &err) ||
        slm_rt_init(&r->rt, &r->c, r->m.map.data, threads, &err)) {
        CHECKF(0, "%s", err.msg);
        slm_compiled_free(&r->c);
        slm_model_close(&r->m);
        return 0;
    }
    return r->ok = 1;
}

/* Prefill 5 ids, then `steps` decode steps. */
static int run_some(rig *r, int steps) {
    slm_err err = {0};
    const int32_t ids[5] = {1, 300, 200, 100, 50};
    slm_rt_reset(&r->rt);
    slm_status s = slm_rt_prefill(&r->rt, ids, 5, &err);
    for (int i = 0; i < steps && !s; i++) s = slm_rt_decode(&r->rt, 7 + i, &err);
    CHECKF(s == SLM_OK, "%s", err.msg);
    return s == SLM_OK;
}

static void test_off_and_misuse(void) {
    slm_err err = {0};
    uint64_t n = 1, d = 1;
    CHECK(!slm_trace_enabled());
    CHECK(slm_trace_next() == NULL); /* off: nothing is recorded */
    CHECK(slm_trace_begin() == 0);
    CHECK(slm_trace_stop(&n, &d, &err) == SLM_OK && n == 0 && d == 0); /* no trace: a no-op */
    CHECK(slm_trace_start("/nonexistent-dir/x.json", 1, &err) == SLM_ERR_IO);
    CHECK(!slm_trace_enabled());
    CHECK(slm_trace_start("trace_misuse.json", 1, &err) == SLM_OK);
    CHECK(slm_trace_start("trace_misuse.json", 1, &err) == SLM_ERR_ARG); /* one at a time */
    CHECK(slm_trace_stop(&n, NULL, &err) == SLM_OK && n == 0);
    remove("trace_misuse.json");
}

#ifdef SLM_HAVE_CJSON
static int str_is(const cJSON *o, const char *key, const char *want) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) && !strcmp(v->valuestring, want);
}

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : -1.0;
}
#endif

static void tasks_add_up(int schedule) {
    rig r;
    if (!open_rt(&r, THREADS)) return;
    slm_pool_set_schedule(r.rt.pool, schedule);
    const int counted = schedule == SLM_SCHEDULE_COUNTED;
    const int steps = 6;
    slm_program *pre = slm_largest(&r.c, SLM_PROG_PREFILL), *gen = slm_largest(&r.c, SLM_PROG_GENERATE);
    int pre_tasks, pre_bars, gen_tasks, gen_bars;
    count_program(pre, &pre_tasks, &pre_bars);
    count_program(gen, &gen_tasks, &gen_bars);
    CHECK(pre_tasks > 0 && gen_tasks > 0);
    slm_err err = {0};
    const char *path = "trace_test.json";
    CHECK(slm_trace_start(path, 4, &err) == SLM_OK);
    slm_trace_instant("test", "mark", &(slm_trace_args){{"x"}, {42}, "s", "a \"quoted\" \\ string"});
    int ok = run_some(&r, steps);
    uint64_t n = 0, dropped = 1;
    CHECK(slm_trace_stop(&n, &dropped, &err) == SLM_OK);
    CHECK(dropped == 0);
    CHECK(!slm_trace_enabled());
    /* what ran: prefill once, generate `steps` times, each stage closed by a barrier on every thread */
    const int want_tasks = pre_tasks + steps * gen_tasks, want_bars = THREADS * (pre_bars + steps * gen_bars);
    CHECKF(n >= (uint64_t)(want_tasks + (counted ? 1 : want_bars)), "%llu events", (unsigned long long)n);
    size_t len = 0;
    char *text = t_read_file(path, &len);
    CHECK(text != NULL && len > 0);
#ifdef SLM_HAVE_CJSON
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    CHECKF(root != NULL, "the trace is not JSON");
    const cJSON *evs = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    CHECK(cJSON_IsArray(evs));
    int tasks_pre = 0, tasks_gen = 0, bars = 0, named = 0, marks = 0, decodes = 0, matmuls = 0, bad = 0, prefetches = 0;
    int tids[64] = {0};
    const cJSON *e;
    cJSON_ArrayForEach(e, evs) {
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
        if (str_is(e, "ph", "M")) {
            named += str_is(e, "name", "thread_name");
            continue;
        }
        const int tid = (int)num(e, "tid");
        if (tid < 0 || tid >= 64 || num(e, "ts") < 0 || !cJSON_IsObject(args)) {
            bad++;
            continue;
        }
        tids[tid] = 1;
        if (str_is(e, "cat", "task") && str_is(e, "name", "prefetch")) {
            prefetches++; /* the counted schedule's idle threads only, in generate programs */
            if (!counted || !str_is(args, "program", gen->name) || !str_is(args, "lane", "transfer")) bad++;
        } else if (str_is(e, "cat", "task")) {
            if (!str_is(e, "ph", "X") || num(e, "dur") < 0) bad++;
            if (str_is(args, "program", pre->name)) tasks_pre++;
            else if (str_is(args, "program", gen->name)) tasks_gen++;
            else bad++;
            if (str_is(e, "name", "matmul")) {
                matmuls++;
                if (!str_is(args, "lane", "matrix")) bad++;
                /* the weight tile alone: (n1 - n0) rows of at least k/32 blocks */
                if (num(args, "bytes_read") < (num(args, "n1") - num(args, "n0")) * 8 || num(args, "bytes_written") <= 0)
                    bad++;
            }
        } else if (str_is(e, "cat", "barrier")) {
            bars++;
        } else if (str_is(e, "name", "mark")) {
            marks += num(args, "x") == 42 && str_is(args, "s", "a \"quoted\" \\ string");
        } else if (str_is(e, "name", "decode")) {
            decodes++;
        }
    }
    int n_tids = 0;
    for (int i = 0; i < 64; i++) n_tids += tids[i];
    CHECKF(tasks_pre == pre_tasks, "prefill task slices %d, ran %d", tasks_pre, pre_tasks);
    CHECKF(tasks_gen == steps * gen_tasks, "generate task slices %d, ran %d", tasks_gen, steps * gen_tasks);
    if (counted) /* the waits it had and the last producers' wake-ups (on this tiny model the caller may do it all) */
        CHECKF(bars <= want_bars + prefetches + want_bars / THREADS, "barrier slices %d (%d prefetch slices), at most %d",
               bars, prefetches, want_bars + prefetches + want_bars / THREADS);
    else
        CHECKF(bars == want_bars && prefetches == 0, "barrier slices %d, want %d", bars, want_bars);
    CHECK(matmuls > 0 && bad == 0);
    CHECK(marks == 1);
    CHECK(decodes == steps);
    /* counted: a worker that wakes after the caller has finished a call stays out of it */
    CHECKF(counted ? n_tids >= 1 && n_tids <= THREADS : n_tids == THREADS, "%d threads recorded", n_tids);
    CHECK(named >= (counted ? 1 : THREADS));
    cJSON_Delete(root);
#else
    CHECK(strstr(text ? text : "", "\"traceEvents\"") != NULL);
#endif
    free(text);
    remove(path);
    (void)ok;
    rig_close(&r);
}

static void test_tasks_add_up(void) { tasks_add_up(SLM_SCHEDULE_RENDEZVOUS); }
static void test_tasks_add_up_counted(void) { tasks_add_up(SLM_SCHEDULE_COUNTED); }

/* A buffer too small for the run: events are dropped and counted, and the
 * file is still whole. Then a second trace in the same process works. */
static void test_full_buffer(void) {
    rig r;
    if (!open_rt(&r, 2)) return;
    slm_err err = {0};
    uint64_t n = 0, dropped = 0;
    CHECK(slm_trace_start("trace_full.json", 1, &err) == SLM_OK); /* 8192 records */
    for (int i = 0; i < 4; i++) run_some(&r, 25);
    CHECK(slm_trace_stop(&n, &dropped, &err) == SLM_OK);
    CHECKF(dropped > 0 && n > 0 && n <= 8192, "%llu events, %llu dropped", (unsigned long long)n,
           (unsigned long long)dropped);
    char *text = t_read_file("trace_full.json", NULL);
#ifdef SLM_HAVE_CJSON
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    CHECK(root != NULL);
    const cJSON *other = cJSON_GetObjectItemCaseSensitive(root, "otherData");
    CHECK(num(other, "dropped") == (double)dropped);
    cJSON_Delete(root);
#endif
    free(text);
    remove("trace_full.json");
    /* again, one step: the threads claim fresh slots in the new buffer */
    CHECK(slm_trace_start("trace_again.json", 1, &err) == SLM_OK);
    run_some(&r, 1);
    CHECK(slm_trace_stop(&n, &dropped, &err) == SLM_OK);
    CHECK(n > 0 && dropped == 0);
    remove("trace_again.json");
    rig_close(&r);
}

/* The commands: run --trace writes the file at exit, trace summarizes it and draws it. */
static void test_cli(void) {
    remove("trace_cli.json");
    remove("trace_cli.svg");
    int rc = system(SLM_CLI_PATH " run -m " MODEL " -z " T_SHARED("models/tok512.bin")
                                 " -n 4 --temp 0 -t 2 --schedule rendezvous --max-prompt-len 16 --trace trace_cli.json > /dev/null 2>&1");
    CHECK(rc == 0);
#ifdef SLM_HAVE_CJSON /* the trace command reads the file with cJSON */
    rc = system(SLM_CLI_PATH " trace trace_cli.json --svg trace_cli.svg > trace_cli.txt 2>&1");
    CHECK(rc == 0);
    char *svg = t_read_file("trace_cli.svg", NULL), *txt = t_read_file("trace_cli.txt", NULL);
    CHECK(svg && strstr(svg, "<svg") && strstr(svg, "</svg>") && strstr(svg, "matmul"));
    CHECK(txt && strstr(txt, "| matmul |") && strstr(txt, "critical stage: ") && strstr(txt, "exec worker 1"));
    free(svg);
    free(txt);
    /* a file that is not a trace is refused */
    t_write_file("trace_bad.json", "{\"x\": 1}", 8);
    rc = system(SLM_CLI_PATH " trace trace_bad.json > /dev/null 2>&1");
    CHECK(rc != 0);
#endif
    remove("trace_cli.json");
    remove("trace_cli.svg");
    remove("trace_cli.txt");
    remove("trace_bad.json");
}

int main(void) {
    T_RUN(test_off_and_misuse);
    T_RUN(test_tasks_add_up);
    T_RUN(test_tasks_add_up_counted);
    T_RUN(test_full_buffer);
    T_RUN(test_cli);
    T_DONE();
}
