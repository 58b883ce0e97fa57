/* An engine for a test: slm_load with the options; NULL, with the error
 * printed naming the model, when it fails. */
#ifndef SLM_T_ENGINE_H
#define SLM_T_ENGINE_H

#include <stdio.h>

#include "staticlm.h"

static inline slm_engine *t_load(const char *model, const slm_options *o) {
    slm_engine *e = NULL;
    if (slm_load(&e, model, o)) {
        fprintf(stderr, "  load %s: %s\n", model, slm_last_error(e));
        slm_free(e);
        return NULL;
    }
    return e;
}

#endif
