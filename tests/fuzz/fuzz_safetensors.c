// libFuzzer target for the safetensors header reader and the Hugging Face
// config.json and generation_config.json parsers (tests/fuzz/run.sh builds
// and runs it).
// Every input is either accepted or refused with a message that names the
// file; the sanitizers catch crashes, overreads (libFuzzer passes an
// exact-size heap copy), leaks and huge allocations. An accepted file's
// tensors are touched at both ends, so a bounds slip shows up under ASan.
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/common.h"
#include "format/hf.h"
#include "format/model.h"
#include "format/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    slm_err err = {0};
    slm_st st;
    if (slm_st_parse(&st, data, size, "fuzz.safetensors", &err) == SLM_OK) {
        volatile uint8_t sink = 0;
        for (int i = 0; i < st.n_tensors; i++) {
            const slm_st_tensor *t = &st.tensors[i];
            uint64_t n = t->end - t->begin;
            if (n) sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[n - 1];
            if (slm_st_find(&st, t->name) == NULL) __builtin_trap();
        }
        (void)sink;
        slm_st_free(&st);
    } else if (strncmp(err.msg, "fuzz.safetensors: ", 18) != 0) {
        __builtin_trap(); /* every message names the file */
    }

    /* The same bytes as config.json. */
    slm_model_config c;
    float *freqs = NULL;
    memset(&err, 0, sizeof err);
    if (slm_hf_parse_config(&c, &freqs, (const char *)data, size, "config.json", &err) == SLM_OK) {
        if (c.rope_freqs && !freqs) __builtin_trap();
        slm_xfree(freqs);
    } else if (strncmp(err.msg, "config.json: ", 13) != 0 || freqs) {
        __builtin_trap();
    }

    /* And as generation_config.json: each kept value NUL-terminated text, none on a refusal. */
    static slm_model_file m;
    memset(&err, 0, sizeof err);
    if (slm_hf_generation_parse(&m, (const char *)data, size, "generation_config.json", &err) == SLM_OK) {
        if (m.n_meta < 0 || m.n_meta > SLM_MAX_FOLDER_META) __builtin_trap();
        for (int i = 0; i < m.n_meta; i++)
            if (!memchr(m.meta[i].val, 0, sizeof m.meta[i].val) || strncmp(m.meta[i].key, "general.sampling.", 17))
                __builtin_trap();
    } else if (strncmp(err.msg, "generation_config.json: ", 24) != 0 || m.n_meta) {
        __builtin_trap();
    }
    return 0;
}
