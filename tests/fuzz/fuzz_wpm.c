/* libFuzzer target for the WordPiece tokenizer (text/wpm.c). A small BERT
 * vocabulary is written as a GGUF file once and loaded; each input is
 *  - encoded as text (special-token text matching and not, with [CLS] and
 *    [SEP]): every id in range, the count the same with a short array, every
 *    id decodes;
 *  - read as a serialized WordPiece record (slm_tok_load_mem after the
 *    "SLPW" magic): refused cleanly or loaded, and then it encodes and
 *    saves back byte for byte.
 * Built and run by tests/fuzz/run.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/gguf.h"
#include "text/tokenizer.h"

#define W "\xe2\x96\x81"

static slm_tokenizer *g_tok;
static slm_map g_map;
static slm_gguf *g_gguf;

static void die(const char *what, const slm_err *err) {
    fprintf(stderr, "fuzz_wpm: %s: %s\n", what, err->msg);
    abort();
}

static void setup(void) {
    static const char *const toks[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", W "hello", W "world", W "!", "s",
                                       W "a",   "a",     "ab",    W "\xe4\xbd\xa0", "<u>", W "caf\xc3\xa9"};
    enum { N = sizeof toks / sizeof toks[0] };
    uint64_t lens[N];
    int32_t types[N];
    for (int i = 0; i < N; i++) lens[i] = strlen(toks[i]), types[i] = i < 4 ? 3 : i == 12 ? 4 : 1;
    char path[] = "/tmp/fuzz_wpm_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) abort();
    close(fd);
    slm_gguf_writer *w = slm_gguf_writer_new();
    slm_gguf_set_str(w, "tokenizer.ggml.model", "bert");
    slm_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, lens, N);
    slm_gguf_set_arr(w, "tokenizer.ggml.token_type", SLM_GGUF_I32, types, N);
    slm_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 2);
    slm_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 1);
    slm_gguf_set_u32(w, "tokenizer.ggml.seperator_token_id", 3);
    slm_err err = {0};
    if (slm_gguf_write(w, path, &err)) die("write", &err);
    slm_gguf_writer_free(w);
    if (slm_map_file(&g_map, path, &err) || slm_gguf_open(&g_gguf, g_map.data, g_map.size, "wpm.gguf", &err) ||
        slm_tok_load_gguf(&g_tok, g_gguf, "wpm.gguf", &err))
        die("load", &err);
    unlink(path);
}

static void encode_checked(const slm_tokenizer *t, const char *text, size_t len, const uint8_t *plain) {
    int n = slm_tok_encode_masked(t, text, plain, 1, 1, NULL, 0);
    if (n == -1 || n == -3) return; /* out of memory, budget */
    if (n < 2 || (size_t)n > 3 * len + 2) abort();
    int32_t *ids = malloc(sizeof *ids * (size_t)n);
    if (slm_tok_encode_masked(t, text, plain, 1, 1, ids, n) != n) abort();
    if (ids[0] != slm_tok_bos(t) || ids[n - 1] != slm_tok_sep(t)) abort();
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= slm_tok_vocab_size(t)) abort();
        (void)strlen(slm_tok_decode(t, i ? ids[i - 1] : -1, ids[i]));
    }
    int32_t one;
    if (slm_tok_encode_masked(t, text, plain, 1, 1, &one, 1) != n || one != ids[0]) abort();
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_tok) setup();
    if (size > 1 << 16) return 0;
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    size_t len = strlen(text);
    uint8_t *plain = malloc(len + 1);
    memset(plain, 1, len + 1);
    encode_checked(g_tok, text, len, NULL);
    encode_checked(g_tok, text, len, plain);
    /* the input as a serialized record */
    uint8_t *rec = malloc(size + 4);
    memcpy(rec, "SLPW", 4);
    memcpy(rec + 4, data, size);
    slm_tokenizer *t = NULL;
    slm_err err = {0};
    if (slm_tok_load_mem(&t, rec, size + 4, "fuzz", &err) == SLM_OK) {
        const char *s = "Hello world! [SEP] caf\xc3\xa9 \xe4\xbd\xa0";
        encode_checked(t, s, strlen(s), NULL);
        uint8_t *back = NULL;
        size_t n = 0;
        if (slm_tok_save(t, &back, &n, &err) || n != size + 4 || memcmp(back, rec, n)) abort();
        slm_xfree(back);
    } else if (t || !err.msg[0]) {
        abort();
    }
    slm_tok_free(t);
    free(rec);
    free(plain);
    free(text);
    return 0;
}
