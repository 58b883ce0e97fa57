/* Shared by the AMX tests (test_amx, test_amx_plan, test_amx_attention):
 * a small synthetic GGUF model written by the CLI's synth, the last row's
 * logits of a prefill through a named kernel set, and how far two logit
 * rows are apart. */
#ifndef SLM_TESTS_AMX_ENGINE_H
#define SLM_TESTS_AMX_ENGINE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/kernels.h"
#include "staticlm.h"
#include "t.h"

/* A 2-layer custom model of `type` (synth --type) and `dims` (e.g. "--dim
 * 256 --heads 4 --kv-heads 1"), ffn 512, `vocab` tokens, untied, at path. */
static int amx_synth(const char *path, const char *type, const char *dims, int vocab, int seed) {
    char cmd[1400];
    snprintf(cmd, sizeof cmd,
             "\"%s\" synth --shape custom --type %s %s --ffn 512 --layers 2 --n-vocab %d --untied --seed %d -o \"%s\" "
             "--vocab-file \"%s\" >/dev/null 2>&1",
             SLM_CLI_PATH, type, dims, vocab, seed, path, T_SHARED("vocab/ggml-vocab-llama-spm.gguf"));
    const int ok = system(cmd) == 0;
    CHECKF(ok, "synth %s %s failed", type, dims);
    return ok;
}

/* The last row's logits of an n-token prefill (n <= 64; prompts longer
 * than max_prompt_len run in chunks) through kernel set `set`, with the KV
 * cache of kv_type, into out[vocab]; 0 when the set is not here or a step
 * failed (reported). */
static int amx_prefill_logits(const char *path, const char *set, int max_prompt_len, int kv_type, int n, float *out,
                              int vocab) {
    if (!slm_kernels_select(set)) return 0;
    slm_options opt = slm_default_options();
    opt.max_prompt_len = max_prompt_len, opt.min_response_len = 64, opt.n_threads = 2;
    opt.kv_type = kv_type;
    slm_engine *e = NULL;
    int ok = slm_load(&e, path, &opt) == SLM_OK;
    CHECKF(ok, "%s", slm_last_error(e));
    if (ok) {
        int32_t ids[64];
        for (int i = 0; i < n && i < 64; i++) ids[i] = i == 0 ? 1 : 3 + (i * 37) % (vocab - 3);
        const float *lg = NULL;
        ok = slm_prefill(e, ids, n < 64 ? n : 64, &lg) == SLM_OK && lg;
        CHECKF(ok, "%s", slm_last_error(e));
        if (ok) memcpy(out, lg, sizeof(float) * vocab);
    }
    slm_free(e);
    slm_kernels_select(NULL);
    return ok;
}

/* max |a - b| over max |a| (*amax: max |a|) */
static inline double amx_logit_diff(const float *a, const float *b, int n, double *amax) {
    double am = 0, dm = 0;
    for (int i = 0; i < n; i++) am = fmax(am, fabs(a[i])), dm = fmax(dm, fabs((double)a[i] - b[i]));
    *amax = am;
    return am > 0 ? dm / am : INFINITY;
}

#endif
