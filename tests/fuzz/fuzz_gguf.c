// libFuzzer target for the GGUF reader and the GGUF llama loader.
// Not built by CMake. Build and run (from the repo root):
//   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc
//       tests/fuzz/fuzz_gguf.c src/common/*.c src/format/*.c -lm -o fuzz_gguf
//   ./fuzz_gguf -max_total_time=60 -rss_limit_mb=2048 -malloc_limit_mb=256 CORPUS_DIR
// Seeds: small GGUF files, e.g. `staticlm convert` of a tiny checkpoint.
// Every input must be either accepted or rejected with a message that names
// the file; the sanitizers catch crashes, overreads (libFuzzer passes an
// exact-size heap copy), leaks and huge allocations.
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "format/gguf.h"
#include "format/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    slm_err err = {0};
    slm_gguf *g = NULL;
    if (slm_gguf_open(&g, data, size, "fuzz.gguf", &err) == SLM_OK) {
        /* Touch every query on the accepted file. */
        for (uint64_t i = 0; i < slm_gguf_n_kv(g); i++) {
            slm_gguf_str k = slm_gguf_key(g, (int64_t)i);
            char key[256];
            snprintf(key, sizeof key, "%.*s", (int)(k.len < 255 ? k.len : 255), k.s);
            uint32_t u;
            int64_t i64;
            float f;
            int b;
            slm_gguf_str s;
            slm_gguf_type et;
            uint64_t n;
            const void *d;
            (void)slm_gguf_find(g, key);
            (void)slm_gguf_get_u32(g, key, &u);
            (void)slm_gguf_get_i64(g, key, &i64);
            (void)slm_gguf_get_f32(g, key, &f);
            (void)slm_gguf_get_bool(g, key, &b);
            (void)slm_gguf_get_str(g, key, &s);
            if (slm_gguf_get_arr(g, key, &et, &n, &d) && et == SLM_GGUF_STRING && n)
                (void)slm_gguf_arr_str(g, key, n - 1, &s);
        }
        for (uint64_t i = 0; i < slm_gguf_n_tensors(g); i++) {
            const slm_gguf_tensor *t = slm_gguf_tensor_at(g, i);
            volatile uint8_t sink = 0;
            if (t->nbytes) sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->nbytes - 1];
            (void)sink;
        }
        slm_gguf_close(g);
    } else if (strncmp(err.msg, "fuzz.gguf: ", 11) != 0) {
        __builtin_trap(); /* every message names the file */
    }

    /* The model path: load + validate on the same image. */
    slm_model_file m;
    memset(&m, 0, sizeof m);
    snprintf(m.path, sizeof m.path, "fuzz.gguf");
    m.map.data = (void *)data;
    m.map.size = size;
    slm_status s = slm_gguf_model_load(&m, &err);
    if (s == SLM_OK) s = slm_model_validate(&m, &err);
    if (s != SLM_OK && strncmp(err.msg, "fuzz.gguf: ", 11) != 0) __builtin_trap();
    m.map.data = NULL; /* not ours */
    m.map.size = 0;
    slm_model_close(&m);
    return 0;
}
