/* A model run through the runtime against the plain double reference
 * (ref_forward.h), for the tests of the families it covers (qwen35,
 * qwen35moe). Include after t.h, ref_forward.h and rig.h. */
#ifndef SLM_TEST_REF_CHECK_H
#define SLM_TEST_REF_CHECK_H

#include <math.h>
#include <stdlib.h>

/* Worst error relative to the logits' largest of each position: the model
 * at path compiled (prompt programs of mpl rows) and run on n_threads, a
 * prefill of ids[0..first) then decode steps to ids[n - 1], against
 * ref_forward.h's double-precision forward of the same ids; INFINITY (and a
 * failed CHECK) when it cannot run. */
static inline double rig_vs_reference(const char *path, const int32_t *ids, int n, int first, int mpl, int n_threads) {
    rig r;
    memset(&r, 0, sizeof r);
    slm_err err = {0};
    slm_compile_options o = rig_opts(mpl, n);
    if (slm_model_open(&r.m, path, &err) || slm_model_repack(&r.m, &err) || slm_compile(&r.c, &r.m, &o, &err) ||
        slm_rt_init(&r.rt, &r.c, r.m.map.data, n_threads, &err)) {
        CHECKF(0, "%s: %s", path, err.msg);
        slm_compiled_free(&r.c);
        slm_model_close(&r.m);
        return INFINITY;
    }
    r.ok = 1;
    const int V = r.c.cfg.vocab_size;
    float *ref = malloc(sizeof(float) * (size_t)n * V);
    double worst = 0;
    if (!ref_forward_ctx(&r.m, ids, n, ref, r.c.kv_capacity)) worst = INFINITY;
    if (worst == 0 && slm_rt_prefill(&r.rt, ids, first, &err)) worst = INFINITY;
    for (int p = first - 1; worst < INFINITY && p < n; p++) {
        if (p >= first && slm_rt_decode(&r.rt, ids[p], &err)) {
            worst = INFINITY;
            break;
        }
        double md = 0, mr = 1e-6;
        for (int i = 0; i < V; i++) {
            md = fmax(md, fabs((double)r.rt.logits[i] - ref[(size_t)p * V + i]));
            mr = fmax(mr, fabs(ref[(size_t)p * V + i]));
        }
        if (isnan(r.rt.logits[0])) md = INFINITY;
        worst = fmax(worst, md / mr);
    }
    CHECKF(worst < INFINITY, "%s: %s", path, err.msg);
    free(ref);
    rig_close(&r);
    return worst;
}

#endif
