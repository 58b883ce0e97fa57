/* A model opened, compiled and given a runtime through the internal API,
 * for tests that drive the runtime directly. Include after t.h. */
#ifndef SLM_TEST_RIG_H
#define SLM_TEST_RIG_H

#include "compiler/compiler.h"
#include "format/model.h"
#include "runtime/runtime.h"

typedef struct rig {
    slm_model_file m;
    slm_compiled c;
    slm_runtime rt;
    int ok;
} rig;

/* Open path (repacking its weights as the engine does), compile with o,
 * start a one-thread runtime. 1 on success. */
static inline int rig_open_opts(rig *r, const char *path, slm_compile_options o) {
    memset(r, 0, sizeof *r);
    slm_err err = {0};
    if (slm_model_open(&r->m, path, &err) || slm_model_repack(&r->m, &err) || slm_compile(&r->c, &r->m, &o, &err) ||
        slm_rt_init(&r->rt, &r->c, r->m.map.data, 1, &err)) {
        CHECKF(0, "%s: %s", path, err.msg);
        slm_compiled_free(&r->c);
        slm_model_close(&r->m);
        return 0;
    }
    return r->ok = 1;
}

static inline slm_compile_options rig_opts(int mpl, int mrl) {
    slm_compile_options o;
    memset(&o, 0, sizeof o);
    o.max_prompt_len = mpl;
    o.min_response_len = mrl;
    return o;
}

static inline int rig_open(rig *r, const char *path, int mpl, int mrl) {
    return rig_open_opts(r, path, rig_opts(mpl, mrl));
}

static inline void rig_close(rig *r) {
    if (r->ok) slm_rt_free(&r->rt);
    slm_compiled_free(&r->c);
    slm_model_close(&r->m);
    r->ok = 0;
}

#endif
