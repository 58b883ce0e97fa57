/* libFuzzer target for the Unigram tokenizer (text/ugm.c, ugm_encode.c).
 * tests/corpus/ugm's vocabularies (t5.gguf: a custom charsmap and
 * user-defined tokens; xlmr.gguf: SentencePiece's nmt_nfkc charsmap) are
 * loaded once; the first input byte picks what the rest is:
 *  0: a text, encoded by both (special-token text matching and not, BOS and
 *     EOS): every id in range, the count the same with a short array, the
 *     first id the same, every id decodes;
 *  1: a serialized Unigram record (slm_tok_load_mem after the "SLPU"
 *     magic): refused cleanly or loaded, and then it encodes and saves back
 *     byte for byte;
 *  2: damage to t5.gguf's charsmap, as (u16 offset, u8 xor) triples: the
 *     vocabulary is built again with it and is refused naming the field, or
 *     loads and encodes a fixed text and the input safely.
 * Built and run by tests/fuzz/run.sh (from the repository's root).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "text/bpe.h"
#include "text/tokenizer.h"
#include "text/ugm.h"

typedef struct vocab {
    slm_map map;
    slm_gguf *g;
    slm_tokenizer *t;
} vocab;

static vocab g_v[2];
static const char *const g_files[2] = {"tests/corpus/ugm/t5.gguf", "tests/corpus/ugm/xlmr.gguf"};
/* t5.gguf's parts for mode 2 */
static int g_n;
static const char **g_tok;
static uint32_t *g_len;
static float *g_score;
static uint8_t *g_type;
static const uint8_t *g_cm;
static size_t g_cm_len;

static void die(const char *what, const slm_err *err) {
    fprintf(stderr, "fuzz_ugm: %s: %s\n", what, err ? err->msg : "");
    abort();
}

static void setup(void) {
    slm_err err = {0};
    for (int k = 0; k < 2; k++)
        if (slm_map_file(&g_v[k].map, g_files[k], &err) ||
            slm_gguf_open(&g_v[k].g, g_v[k].map.data, g_v[k].map.size, g_files[k], &err) ||
            slm_tok_load_gguf(&g_v[k].t, g_v[k].g, g_files[k], &err))
            die("load (run from the repository's root)", &err);
    const slm_gguf *g = g_v[0].g;
    slm_gguf_type et;
    uint64_t n = 0, c;
    const void *d, *sc = NULL, *ty = NULL, *cm = NULL;
    if (!slm_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n, &d) ||
        !slm_gguf_get_arr(g, "tokenizer.ggml.scores", &et, &c, &sc) ||
        !slm_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &c, &ty) ||
        !slm_gguf_get_arr(g, "tokenizer.ggml.precompiled_charsmap", &et, &g_cm_len, &cm))
        die("t5.gguf's arrays", NULL);
    g_cm = cm;
    g_n = (int)n;
    g_tok = malloc(n * sizeof *g_tok);
    g_len = malloc(n * sizeof *g_len);
    g_score = malloc(n * sizeof *g_score);
    g_type = malloc(n);
    for (uint64_t i = 0; i < n; i++) {
        slm_gguf_str s;
        slm_gguf_arr_str(g, "tokenizer.ggml.tokens", i, &s);
        g_tok[i] = s.s, g_len[i] = (uint32_t)s.len;
        memcpy(&g_score[i], (const uint8_t *)sc + 4 * i, 4);
        int32_t t;
        memcpy(&t, (const uint8_t *)ty + 4 * i, 4);
        g_type[i] = (uint8_t)t;
    }
}

static void encode_checked(const slm_tokenizer *t, const char *text, size_t len, const uint8_t *plain) {
    int n = slm_tok_encode_masked(t, text, plain, 1, 1, NULL, 0);
    if (n == SLM_TOK_ENOMEM || n == SLM_TOK_EBUDGET) return;
    if (n < 0 || (size_t)n > 64 * len + 8) abort(); /* normalization may expand a code point (U+FDFA: 18) */
    int32_t *ids = malloc(sizeof *ids * (size_t)(n ? n : 1));
    if (slm_tok_encode_masked(t, text, plain, 1, 1, ids, n) != n) abort();
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= slm_tok_vocab_size(t)) abort();
        (void)strlen(slm_tok_decode(t, i ? ids[i - 1] : -1, ids[i]));
    }
    int32_t one = -1;
    if (slm_tok_encode_masked(t, text, plain, 1, 1, &one, 1) != n || (n && one != ids[0])) abort();
    free(ids);
}

static void ugm_checked(const slm_ugm *u, const char *text, size_t len) {
    int32_t ids[512];
    int n = slm_ugm_encode(u, text, len, NULL, 1, 1, 1, ids, 512);
    if (n == SLM_TOK_ENOMEM || n == SLM_TOK_EBUDGET) return;
    if (n < 0) abort();
    for (int i = 0; i < n && i < 512; i++)
        if (ids[i] < 0 || ids[i] >= slm_ugm_vocab_size(u)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_v[0].t) setup();
    if (size < 1 || size > 1 << 16) return 0;
    const int mode = data[0] % 3;
    data++, size--;
    if (mode == 0) {
        char *text = malloc(size + 1);
        memcpy(text, data, size);
        text[size] = 0;
        size_t len = strlen(text);
        uint8_t *plain = malloc(len + 1);
        memset(plain, 1, len + 1);
        for (int k = 0; k < 2; k++) {
            encode_checked(g_v[k].t, text, len, NULL);
            encode_checked(g_v[k].t, text, len, plain);
        }
        free(plain);
        free(text);
    } else if (mode == 1) {
        uint8_t *rec = malloc(size + 4);
        memcpy(rec, "SLPU", 4);
        memcpy(rec + 4, data, size);
        slm_tokenizer *t = NULL;
        slm_err err = {0};
        if (slm_tok_load_mem(&t, rec, size + 4, "fuzz", &err) == SLM_OK) {
            const char *s = "Hello world! <s> ＡＢＣ caf\xc3\xa9 \xe4\xbd\xa0 \xff";
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
    } else {
        uint8_t *cm = malloc(g_cm_len);
        memcpy(cm, g_cm, g_cm_len);
        for (size_t i = 0; i + 3 <= size; i += 3) {
            const size_t at = ((size_t)data[i] | (size_t)data[i + 1] << 8) % g_cm_len;
            cm[at] ^= data[i + 2];
        }
        static const slm_ugm_meta meta = {-1, 1, 2, 0, -1, 1, 0, 0, 1};
        slm_ugm *u = NULL;
        slm_err err = {0};
        if (slm_ugm_build(&u, g_tok, g_len, g_score, g_type, g_n, &meta, cm, g_cm_len, "fuzz", "charsmap", &err) ==
            SLM_OK) {
            static const char s[] = "\xef\xbc\xa1\xef\xbc\xa2 \xef\xac\x81ne \xe2\x91\xa0 Hello\tworld <ud> x\xc2\xb2";
            ugm_checked(u, s, sizeof s - 1);
            ugm_checked(u, (const char *)data, strnlen((const char *)data, size));
        } else if (u || !strstr(err.msg, "charsmap")) {
            abort();
        }
        slm_ugm_free(u);
        free(cm);
    }
    return 0;
}
