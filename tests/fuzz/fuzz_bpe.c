/* libFuzzer target for the byte-level BPE tokenizer: encodes the input bytes
 * (any bytes: invalid UTF-8, NULs) with every gpt2 vocabulary in
 * ../shared/vocab, with and without parse_special and BOS, checks that every
 * id is in range and the count is stable, decodes every id, and checks
 * decode(encode(s)) == s when the vocabulary has a token for every byte of s
 * and no user-defined token matched.
 * Also loads the input as a serialized tokenizer and as tokenizer.json (must
 * not crash). Not part of the default build:
 *   clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined \
 *     -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -DSLM_HAVE_CJSON -Iinclude -Isrc \
 *     -DSLM_SHARED_DIR='"../shared"' tests/fuzz/fuzz_bpe.c src/text/bpe*.c \
 *     src/common/[a-z]*.c src/format/gguf.c -lpcre2-8 -lcjson -lm -o fuzz_bpe
 * (tests/fuzz/run.sh builds it with the whole library.) A tokenizer.json
 * from the input encodes under the same bounds as any other: its regexes
 * cannot make one run slow (bpe.h).
 *   ./fuzz_bpe -max_total_time=60 -max_len=4096
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "text/bpe.h"

#ifndef SLM_SHARED_DIR
#define SLM_SHARED_DIR "../shared"
#endif

#define MAXV 8
static slm_bpe *g_t[MAXV];
static int g_n;
static int g_has_byte[MAXV][256];

static void setup(void) {
    DIR *d = opendir(SLM_SHARED_DIR "/vocab");
    if (!d) {
        fprintf(stderr, "fuzz_bpe: no %s/vocab\n", SLM_SHARED_DIR);
        abort();
    }
    struct dirent *de;
    while ((de = readdir(d)) && g_n < MAXV) {
        size_t l = strlen(de->d_name);
        if (l < 6 || strcmp(de->d_name + l - 5, ".gguf")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/vocab/%s", SLM_SHARED_DIR, de->d_name);
        slm_map m;
        slm_gguf *g;
        slm_err err = {0};
        slm_gguf_str kind;
        if (slm_map_file(&m, path, &err)) continue;
        if (slm_gguf_open(&g, m.data, m.size, path, &err) == SLM_OK) {
            if (slm_gguf_get_str(g, "tokenizer.ggml.model", &kind) && slm_gguf_str_eq(kind, "gpt2")) {
                if (slm_bpe_load_gguf(&g_t[g_n], g, de->d_name, &err)) {
                    fprintf(stderr, "fuzz_bpe: %s\n", err.msg);
                    abort();
                }
                g_n++;
            }
            slm_gguf_close(g);
        }
        slm_unmap(&m); /* the tokenizer copies what it needs */
    }
    closedir(d);
    if (g_n == 0) abort();
    /* which bytes have a token (a byte without one is dropped, as in llama.cpp) */
    for (int v = 0; v < g_n; v++) {
        for (int b = 0; b < 256; b++) {
            int32_t id;
            char c = (char)b;
            int n = slm_bpe_encode(g_t[v], &c, 1, 0, 0, 0, &id, 1);
            size_t pl = 0;
            const char *p = n == 1 ? slm_bpe_piece(g_t[v], id, &pl) : NULL;
            g_has_byte[v][b] = n == 1 && pl == 1 && (uint8_t)p[0] == b;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_n) setup();
    if (size > 1 << 16) return 0;
    const char *s = (const char *)data;
    int32_t *ids = malloc((size * 3 + 8) * sizeof *ids);
    char *out = malloc(size * 4 + 64);
    if (!ids || !out) abort();
    for (int v = 0; v < g_n; v++) {
        const slm_bpe *t = g_t[v];
        int nv = slm_bpe_vocab_size(t);
        for (int mode = 0; mode < 4; mode++) {
            int special = mode & 1, bos = mode >> 1;
            int n = slm_bpe_encode(t, s, size, bos, bos, special, NULL, 0);
            if (n < 0) abort();
            if ((size_t)n > size * 3 + 8) abort(); /* at most one id per byte + BOS/EOS */
            int n2 = slm_bpe_encode(t, s, size, bos, bos, special, ids, n);
            if (n2 != n) abort();
            for (int i = 0; i < n; i++) {
                if (ids[i] < 0 || ids[i] >= nv) abort();
                size_t pl;
                const char *p = slm_bpe_piece(t, ids[i], &pl);
                if (pl && !p) abort();
            }
            if (mode == 0) { /* plain text: the bytes come back */
                int all = 1;
                for (size_t i = 0; i < size && all; i++) all = g_has_byte[v][data[i]];
                /* a user-defined token made of byte chars (deepseek-coder's
                 * "õ") decodes to its byte, as Hugging Face decodes it */
                for (int i = 0; i < n && all; i++) all = slm_bpe_token_type(t, ids[i]) != SLM_BPE_TT_USER_DEFINED;
                size_t k = slm_bpe_decode(t, ids, n, 0, out, size * 4 + 64);
                if (all && (k != size || memcmp(out, s, size) != 0)) abort();
            }
        }
    }
    /* the same bytes as untrusted tokenizer data */
    slm_bpe *u = NULL;
    slm_err err = {0};
    if (slm_bpe_load_mem(&u, data, size, "fuzz", &err) == SLM_OK) slm_bpe_free(u);
    u = NULL;
    if (slm_bpe_load_hf_json_mem(&u, s, size, NULL, 0, "fuzz", &err) == SLM_OK) {
        int n = slm_bpe_encode(u, "hello world", 11, 1, 1, 1, ids, 8);
        if (n < 0 && n != SLM_TOK_EBUDGET) abort(); /* only its regexes may fail it */
        slm_bpe_free(u);
    }
    free(ids);
    free(out);
    return 0;
}
