/* The executor's thread pool under churn (device/exec.c), the paths a
 * quiet run rarely takes: more threads than cores (a worker woken for a
 * job may run only after its caller has returned), the schedule switched
 * between counted and rendezvous from one run to the next on the same
 * pool (a worker late for a counted job meets a rendezvous one), the LM
 * head on a second pool, the profile and a trace turned on and off
 * between runs (workers write their last trace records after the caller
 * has returned), and pools freed while workers may still be waking. Every
 * run's logits must equal the first run's bit for bit. Built with
 * SLM_SANITIZE_THREAD, this is the test that ThreadSanitizer reads for
 * the pool's happens-before edges (docs/correctness.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "t.h"
#include "rig.h"

#include "common/trace.h"
#include "device/device.h"

#define MODEL T_SHARED("models/stories260K.bin")
#define THREADS 5 /* more than the 2 cores CI machines have */
#define STEPS 6
#define ROUNDS 48

static int open_rt(rig *r, int threads, int head_threads) {
    memset(r, 0, sizeof *r);
    slm_err err = {0};
    slm_compile_options o = rig_opts(16, 16);
    o.lm_head_separate = head_threads > 0;
    if (slm_model_open(&r->m, MODEL, &err) || slm_model_repack(&r->m, &err) || slm_compile(&r->c, &r->m, &o, &err) ||
        slm_rt_init(&r->rt, &r->c, r->m.map.data, threads, &err) ||
        (head_threads > 0 && slm_rt_set_head_threads(&r->rt, head_threads, &err))) {
        CHECKF(0, "%s", err.msg);
        if (r->rt.pool) slm_rt_free(&r->rt);
        slm_compiled_free(&r->c);
        slm_model_close(&r->m);
        return 0;
    }
    return r->ok = 1;
}

/* Prefill 5 ids, then STEPS decode steps; the logits after each call into
 * out[(STEPS + 1) * vocab]. */
static int run_logits(rig *r, float *out) {
    slm_err err = {0};
    const int32_t ids[5] = {1, 300, 200, 100, 50};
    const int V = r->c.cfg.vocab_size;
    slm_rt_reset(&r->rt);
    slm_status s = slm_rt_prefill(&r->rt, ids, 5, &err);
    if (!s) memcpy(out, r->rt.logits, (size_t)V * sizeof(float));
    for (int i = 0; i < STEPS && !s; i++) {
        s = slm_rt_decode(&r->rt, 7 + 13 * i, &err);
        if (!s) memcpy(out + (size_t)(i + 1) * V, r->rt.logits, (size_t)V * sizeof(float));
    }
    CHECKF(s == SLM_OK, "%s", err.msg);
    return s == SLM_OK;
}

static void churn(int head_threads) {
    rig r;
    if (!open_rt(&r, THREADS, head_threads)) return;
    const int V = r.c.cfg.vocab_size;
    const size_t n = (size_t)(STEPS + 1) * V;
    float *want = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    CHECK(want && got);
    slm_pool_set_schedule(r.rt.pool, SLM_SCHEDULE_RENDEZVOUS);
    slm_pool_set_schedule(r.rt.head_pool, SLM_SCHEDULE_RENDEZVOUS);
    if (want && got && run_logits(&r, want)) {
        int same = 0;
        for (int k = 0; k < ROUNDS; k++) {
            /* the schedule flips every round on the body's pool, every other round on the head's */
            const int sch = k & 1 ? SLM_SCHEDULE_COUNTED : SLM_SCHEDULE_RENDEZVOUS;
            slm_pool_set_schedule(r.rt.pool, sch);
            slm_pool_set_schedule(r.rt.head_pool, k & 2 ? SLM_SCHEDULE_COUNTED : SLM_SCHEDULE_RENDEZVOUS);
            const int traced = k % 3 == 1, profiled = k % 4 == 2;
            slm_err err = {0};
            char path[64];
            snprintf(path, sizeof path, "pool_trace_%d.json", head_threads);
            if (traced) CHECKF(slm_trace_start(path, 1, &err) == SLM_OK, "%s", err.msg);
            slm_exec_profile(profiled);
            const int ran = run_logits(&r, got);
            slm_exec_profile(0);
            uint64_t events = 0;
            if (traced) {
                CHECKF(slm_trace_stop(&events, NULL, &err) == SLM_OK, "%s", err.msg);
                CHECKF(events > 0, "round %d: an empty trace", k);
                remove(path);
            }
            const int eq = ran && !memcmp(got, want, n * sizeof(float));
            CHECKF(eq, "round %d (%s, head on %d threads): logits differ from the first run", k,
                   sch == SLM_SCHEDULE_COUNTED ? "counted" : "rendezvous", head_threads);
            same += eq;
        }
        CHECK(same == ROUNDS);
    }
    free(want);
    free(got);
    rig_close(&r); /* frees both pools right after a run: workers may still be on their way back */
}

/* Pools made and freed back to back, each after one short job. */
static void create_free(void) {
    for (int k = 0; k < 4; k++) {
        rig r;
        if (!open_rt(&r, THREADS, 0)) return;
        slm_pool_set_schedule(r.rt.pool, k & 1 ? SLM_SCHEDULE_COUNTED : SLM_SCHEDULE_RENDEZVOUS);
        slm_err err = {0};
        const int32_t id = 1;
        CHECKF(slm_rt_prefill(&r.rt, &id, 1, &err) == SLM_OK, "%s", err.msg);
        rig_close(&r);
    }
}

static void test_churn_one_pool(void) { churn(0); }
static void test_churn_head_pool(void) { churn(3); }
static void test_create_free(void) { create_free(); }

int main(void) {
    T_RUN(test_churn_one_pool);
    T_RUN(test_churn_head_pool);
    T_RUN(test_create_free);
    T_DONE();
}
