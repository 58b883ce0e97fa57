/* Byte-level BPE tokenizer: the ../shared/vocab test vectors of every gpt2
 * vocabulary, special tokens, round trips (UTF-8, invalid bytes), malformed
 * GGUF metadata, tokenizer.json (byte-level and SentencePiece-flavoured)
 * and malformed JSON, serialize -> load_mem round trips and corrupted
 * buffers, and the staticlm tokenize command. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "format/gguf.h"
#include "text/bpe.h"
#include "t.h"
#include "vocab_pairs.h"

/* ---- helpers ------------------------------------------------------------ */

typedef struct vocab {
    char name[64];
    slm_map map;
    slm_gguf *g;
    slm_bpe *t;
} vocab;

static vocab g_vocab[16];
static int g_nvocab;
static char g_tmp[256];

/* every ../shared/vocab/NAME.gguf with tokenizer.ggml.model = gpt2 */
static void load_vocabs(void) {
    DIR *d = opendir(T_SHARED("vocab"));
    if (!d) return;
    struct dirent *de;
    char names[16][64];
    int n = 0;
    while ((de = readdir(d)) && n < 16) {
        size_t l = strlen(de->d_name);
        if (l > 5 && !strcmp(de->d_name + l - 5, ".gguf") && l < 64) memcpy(names[n++], de->d_name, l + 1);
    }
    closedir(d);
    for (int i = 0; i < n; i++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", T_SHARED("vocab"), names[i]);
        vocab *v = &g_vocab[g_nvocab];
        slm_err err = {0};
        if (slm_map_file(&v->map, path, &err)) continue;
        if (slm_gguf_open(&v->g, v->map.data, v->map.size, names[i], &err)) {
            slm_unmap(&v->map);
            continue;
        }
        slm_gguf_str kind;
        if (!slm_gguf_get_str(v->g, "tokenizer.ggml.model", &kind) || !slm_gguf_str_eq(kind, "gpt2")) {
            slm_gguf_close(v->g);
            slm_unmap(&v->map);
            continue;
        }
        memcpy(v->name, names[i], sizeof v->name);
        slm_status s = slm_bpe_load_gguf(&v->t, v->g, names[i], &err);
        CHECKF(s == SLM_OK, "%s: %s", names[i], err.msg);
        if (s) {
            slm_gguf_close(v->g);
            slm_unmap(&v->map);
            continue;
        }
        g_nvocab++;
    }
}

static vocab *find_vocab(const char *sub) {
    for (int i = 0; i < g_nvocab; i++)
        if (strstr(g_vocab[i].name, sub)) return &g_vocab[i];
    return NULL;
}

/* encode into a malloc'd array; *n = count */
static int32_t *enc(const slm_bpe *t, const char *s, size_t len, int add_bos, int special, int *n) {
    int k = slm_bpe_encode(t, s, len, add_bos, add_bos, special, NULL, 0);
    if (k < 0) {
        *n = -1;
        return NULL;
    }
    int32_t *ids = malloc(((size_t)k + 1) * sizeof *ids);
    int k2 = slm_bpe_encode(t, s, len, add_bos, add_bos, special, ids, k);
    CHECK(k2 == k);
    *n = k;
    return ids;
}

static char *dec(const slm_bpe *t, const int32_t *ids, int n, size_t *len) {
    size_t need = slm_bpe_decode(t, ids, n, 0, NULL, 0);
    char *o = malloc(need + 1);
    size_t k = slm_bpe_decode(t, ids, n, 0, o, need + 1);
    CHECK(k == need);
    *len = k;
    return o;
}

static void print_ids(const char *what, const int32_t *ids, int n) {
    fprintf(stderr, "    %s:", what);
    for (int i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
}

/* ---- the shared test vectors -------------------------------------------- */

typedef struct pair_ctx {
    const slm_bpe *t;
    const char *name;
} pair_ctx;

static int check_pair(void *ud, const char *text, size_t len, const int32_t *exp, int ne) {
    const pair_ctx *c = ud;
    int k;
    int32_t *ids = enc(c->t, text, len, 0, 0, &k);
    int ok = k == ne;
    for (int i = 0; ok && i < k; i++) ok = ids[i] == exp[i];
    if (!ok) {
        fprintf(stderr, "  %s: mismatch for [%.*s]\n", c->name, (int)len, text);
        print_ids("got", ids, k);
        print_ids("expected", exp, ne);
    }
    free(ids);
    return ok;
}

/* Run name.inp / name.out against t; returns passes, sets *total. */
static int run_vectors(const slm_bpe *t, const char *name, int *total) {
    pair_ctx c = {t, name};
    return vocab_pairs(name, check_pair, &c, total);
}

static void test_vocab_vectors(void) {
    CHECKF(g_nvocab >= 4, "expected the gpt-2, starcoder, deepseek-coder and falcon vocabularies, found %d",
           g_nvocab);
    for (int i = 0; i < g_nvocab; i++) {
        int total, pass = run_vectors(g_vocab[i].t, g_vocab[i].name, &total);
        fprintf(stderr, "  %s (pre %s): %d/%d\n", g_vocab[i].name, slm_bpe_pre_name(g_vocab[i].t), pass, total);
        CHECKF(total > 0 && pass == total, "%s: %d of %d test strings match", g_vocab[i].name, pass, total);
    }
}

/* ---- special tokens --------------------------------------------------------- */

static int contains(const int32_t *ids, int n, int id) {
    for (int i = 0; i < n; i++)
        if (ids[i] == id) return 1;
    return 0;
}

static void test_special(void) {
    vocab *v = find_vocab("gpt-2");
    if (v) {
        const slm_bpe *t = v->t;
        int eot = slm_bpe_find(t, "<|endoftext|>", 13);
        CHECK(eot == 50256);
        CHECK(slm_bpe_eos(t) == 50256 && slm_bpe_bos(t) == 50256);
        CHECK(slm_bpe_eot(t) == 50256);
        CHECK(slm_bpe_add_bos(t) == 0);
        const char *s = "Hello<|endoftext|> world";
        int n1, n2;
        int32_t *a = enc(t, s, strlen(s), 0, 1, &n1);
        int32_t *b = enc(t, s, strlen(s), 0, 0, &n2);
        CHECK(n1 == 3 && a[0] == 15496 && a[1] == 50256 && a[2] == 995);
        CHECK(!contains(b, n2, 50256) && n2 > 3);
        size_t l;
        char *d = dec(t, a, n1, &l);
        CHECK(l == strlen(s) && !memcmp(d, s, l));
        free(d);
        free(a);
        free(b);
        /* add_bos is off for gpt-2: asking for BOS adds nothing */
        a = enc(t, "Hi", 2, 1, 0, &n1);
        CHECK(n1 == 1 && a[0] != 50256);
        free(a);
        /* truncated output: the count is still the full count */
        int32_t few[2];
        int full = slm_bpe_encode(t, "Hello world, again", 18, 0, 0, 0, NULL, 0);
        CHECK(full == 4 && slm_bpe_encode(t, "Hello world, again", 18, 0, 0, 0, few, 2) == full);
        CHECK(few[0] == 15496 && few[1] == 995);
    }
    v = find_vocab("starcoder");
    if (v) {
        const char *s = "<fim_prefix>def f():<fim_suffix>\n<fim_middle>";
        int n;
        int32_t *a = enc(v->t, s, strlen(s), 0, 1, &n);
        CHECK(n > 3 && a[0] == 1 && a[n - 1] == 2 && contains(a, n, 3));
        free(a);
        a = enc(v->t, s, strlen(s), 0, 0, &n);
        CHECK(!contains(a, n, 1) && !contains(a, n, 2) && !contains(a, n, 3));
        free(a);
    }
    v = find_vocab("deepseek-coder");
    if (v) {
        const slm_bpe *t = v->t;
        int bos = slm_bpe_bos(t), user = slm_bpe_find(t, "<|User|>", 8);
        CHECK(bos == 32013 && slm_bpe_add_bos(t) == 1 && user == 32019);
        CHECK(slm_bpe_token_type(t, user) == SLM_BPE_TT_USER_DEFINED);
        const char *bs = "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>";
        char s[256];
        snprintf(s, sizeof s, "%s<|User|>hi", bs);
        int n;
        /* user-defined tokens match without parse_special; control ones only with it */
        int32_t *a = enc(t, s, strlen(s), 0, 0, &n);
        CHECK(contains(a, n, user) && !contains(a, n, bos));
        free(a);
        a = enc(t, s, strlen(s), 0, 1, &n);
        CHECK(n >= 3 && a[0] == bos && a[1] == user);
        free(a);
        /* add_bos = true in the file */
        a = enc(t, "hi", 2, 1, 0, &n);
        CHECK(n >= 2 && a[0] == bos);
        free(a);
        /* longest first: "<｜fim▁begin｜>" is not split into shorter specials */
        const char *fb = "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>";
        a = enc(t, fb, strlen(fb), 0, 1, &n);
        CHECK(n == 1 && a[0] == 32016);
        free(a);
    }
}

/* ---- round trips ------------------------------------------------------------ */

static const char *const k_strings[] = {
    "Hello world",
    "  leading and trailing spaces   ",
    "tabs\tand\nnewlines\r\n\n\n",
    "emoji \xf0\x9f\xa6\x99 \xf0\x9f\x98\xb6\xe2\x80\x8d\xf0\x9f\x8c\xab\xef\xb8\x8f family "
    "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7",
    "CJK \xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8" "apple\xe5\xb7\xa5\xe4\xbd\x9c 1314151\xe5\xa4\xa9\xef\xbd\x9e \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4",
    "\xd0\xbd\xd0\xb5\xd1\x89\xd0\xbe \xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\x82\xe0\xa4\xa6\xe0\xa5\x80 \xd8\xa7\xd9\x84\xd8\xb9\xd8\xb1\xd8\xa8\xd9\x8a\xd8\xa9",
    "code: for (int i = 0; i < n; ++i) { x[i] += y[i] * 3.14159; } // it's done'll",
    "numbers 1234567890 0.5 -42 1e10 \xd9\xa3\xd9\xa4",
    "",
    " ",
};

/* invalid UTF-8: lone continuation, truncated sequences, overlong, surrogate,
 * > U+10FFFF, 0xFF/0xFE, NUL in the middle */
static const char k_invalid[] = "a\x80" "b\xc3" " c\xe4\xb8" "d\xf0\x9f\x98" "e\xc0\xaf" "f\xed\xa0\x80"
                                "g\xf4\x90\x80\x80" "h\xff\xfe" "i\0j\xc3\xa9\xc3";

static void byte_char(int b, char out[3]);

/* decode(encode(s)) == s, less the bytes the vocabulary has no token for
 * (falcon lacks a few; llama.cpp drops them too). hf_spm: no filtering. */
static void roundtrip(const slm_bpe *t, const char *name, const char *s, size_t len, int special) {
    int n;
    int32_t *ids = enc(t, s, len, 0, special, &n);
    CHECKF(n >= 0, "%s: encode failed", name);
    int nv = slm_bpe_vocab_size(t);
    for (int i = 0; i < n; i++) CHECKF(ids[i] >= 0 && ids[i] < nv, "%s: id %d out of range", name, ids[i]);
    char *want = malloc(len + 1);
    size_t wl = 0;
    for (size_t i = 0; i < len; i++) {
        char bc[3];
        byte_char((uint8_t)s[i], bc);
        if (strncmp(name, "hf-spm", 6) && slm_bpe_find(t, bc, strlen(bc)) < 0) continue;
        want[wl++] = s[i];
    }
    size_t l;
    char *d = dec(t, ids, n, &l);
    CHECKF(l == wl && !memcmp(d, want, wl), "%s: decode(encode(s)) != s for [%.*s] -> [%.*s]", name, (int)len, s,
           (int)l, d);
    free(want);
    free(d);
    free(ids);
}

static void test_roundtrip(void) {
    for (int i = 0; i < g_nvocab; i++) {
        for (size_t k = 0; k < sizeof k_strings / sizeof k_strings[0]; k++)
            roundtrip(g_vocab[i].t, g_vocab[i].name, k_strings[k], strlen(k_strings[k]), 0);
        roundtrip(g_vocab[i].t, g_vocab[i].name, k_invalid, sizeof k_invalid - 1, 0);
        roundtrip(g_vocab[i].t, g_vocab[i].name, k_invalid, sizeof k_invalid - 1, 1);
        /* every single byte */
        char b[1];
        int missing = 0;
        for (int c = 0; c < 256; c++) {
            char bc[3];
            byte_char(c, bc);
            if (slm_bpe_find(g_vocab[i].t, bc, strlen(bc)) < 0) missing++;
            b[0] = (char)c;
            roundtrip(g_vocab[i].t, g_vocab[i].name, b, 1, 0);
        }
        if (missing) fprintf(stderr, "  %s: %d bytes have no token (dropped)\n", g_vocab[i].name, missing);
        /* a long run (the merge heap, no quadratic blow-up) */
        size_t L = 20000;
        char *big = malloc(L);
        for (size_t j = 0; j < L; j++) big[j] = "ab  \n3\xc3\xa9x"[j % 10];
        roundtrip(g_vocab[i].t, g_vocab[i].name, big, L, 0);
        memset(big, ' ', L);
        roundtrip(g_vocab[i].t, g_vocab[i].name, big, L, 0);
        free(big);
    }
    /* out-of-range ids */
    if (g_nvocab) {
        size_t l;
        CHECK(slm_bpe_piece(g_vocab[0].t, -1, &l) && l == 0);
        CHECK(slm_bpe_piece(g_vocab[0].t, 1 << 30, &l) && l == 0);
    }
}

/* ---- malformed GGUF metadata ------------------------------------------------ */

/* GPT-2's byte-to-unicode char of byte b (UTF-8, NUL-terminated) */
static void byte_char(int b, char out[3]) {
    int n = 0, cp = -1;
    for (int x = 0; x < 256; x++) {
        int direct = (x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || x >= 0xae;
        int c = direct ? x : 256 + n;
        if (!direct) n++;
        if (x == b) cp = c;
    }
    if (cp < 0x80) { out[0] = (char)cp; out[1] = 0; }
    else { out[0] = (char)(0xc0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3f)); out[2] = 0; }
}

typedef struct mini {
    const char *model, *pre;
    int n_extra;          /* extra tokens after the 256 byte chars */
    const char *extra[8];
    int n_merges;
    const char *merges[8];
    int types_short;      /* token_type with fewer entries */
    int64_t bos;          /* -2: none */
    int no_merges, no_tokens;
} mini;

static int write_mini(const mini *m, const char *path) {
    slm_gguf_writer *w = slm_gguf_writer_new();
    char chars[256][3];
    const char *toks[300];
    uint64_t lens[300];
    int n = 0;
    for (int b = 0; b < 256; b++) {
        byte_char(b, chars[b]);
        toks[n] = chars[b];
        lens[n] = strlen(chars[b]);
        n++;
    }
    for (int i = 0; i < m->n_extra; i++) {
        toks[n] = m->extra[i];
        lens[n] = strlen(m->extra[i]);
        n++;
    }
    int32_t types[300];
    for (int i = 0; i < n; i++) types[i] = 1;
    if (m->n_extra && !strcmp(m->extra[m->n_extra - 1], "<|end|>")) types[n - 1] = 3;
    slm_gguf_set_str(w, "tokenizer.ggml.model", m->model ? m->model : "gpt2");
    if (m->pre) slm_gguf_set_str(w, "tokenizer.ggml.pre", m->pre);
    if (!m->no_tokens) slm_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, lens, (uint64_t)n);
    slm_gguf_set_arr(w, "tokenizer.ggml.token_type", SLM_GGUF_I32, types, (uint64_t)(m->types_short ? n - 1 : n));
    if (!m->no_merges) {
        uint64_t ml[8];
        for (int i = 0; i < m->n_merges; i++) ml[i] = strlen(m->merges[i]);
        slm_gguf_set_arr_str(w, "tokenizer.ggml.merges", m->merges, ml, (uint64_t)m->n_merges);
    }
    if (m->bos != -2) slm_gguf_set_i32(w, "tokenizer.ggml.bos_token_id", (int32_t)m->bos);
    slm_err err = {0};
    slm_status s = slm_gguf_write(w, path, &err);
    slm_gguf_writer_free(w);
    return s == SLM_OK;
}

/* load a mini vocab; returns the status, message in err */
static slm_status load_mini(const mini *m, slm_bpe **t, slm_err *err) {
    char path[512];
    snprintf(path, sizeof path, "%s/mini.gguf", g_tmp);
    *t = NULL;
    if (!write_mini(m, path)) return slm_errf(err, SLM_ERR_IO, "write failed");
    slm_map map;
    slm_gguf *g;
    slm_status s = slm_map_file(&map, path, err);
    if (s) return s;
    s = slm_gguf_open(&g, map.data, map.size, "mini.gguf", err);
    if (!s) {
        s = slm_bpe_load_gguf(t, g, "mini.gguf", err);
        slm_gguf_close(g);
    }
    slm_unmap(&map);
    return s;
}

static const mini k_good = {NULL, "gpt-2", 5, {"he", "ll", "hell", "hello", "<|end|>"}, 4,
                            {"h e", "l l", "he ll", "hell o"}, 0, -2, 0, 0};

static void expect_error(const mini *m, const char *what, const char *needle) {
    slm_bpe *t;
    slm_err err = {0};
    slm_status s = load_mini(m, &t, &err);
    CHECKF(s != SLM_OK && t == NULL, "%s: loaded", what);
    CHECKF(s == SLM_OK || (err.msg[0] && strstr(err.msg, needle)), "%s: message '%s' lacks '%s'", what, err.msg,
           needle);
    slm_bpe_free(t);
}

static void test_mini_and_malformed(void) {
    slm_bpe *t;
    slm_err err = {0};
    CHECKF(load_mini(&k_good, &t, &err) == SLM_OK, "%s", err.msg);
    if (t) {
        int n;
        int32_t *ids = enc(t, "hello hello", 11, 0, 0, &n);
        /* "hello" merges to one token; " hello" has no merge with Ġ */
        CHECK(n == 3 && ids[0] == 259 && ids[1] == slm_bpe_find(t, "\xc4\xa0", 2) && ids[2] == 259);
        free(ids);
        ids = enc(t, "hello<|end|>", 12, 0, 1, &n);
        CHECK(n == 2 && ids[0] == 259 && ids[1] == 260);
        free(ids);
        CHECK(slm_bpe_eot(t) == 260);
        CHECK(slm_bpe_n_merges(t) == 4);
        slm_bpe_free(t);
    }
    /* every supported pre-tokenizer compiles, round-trips, and splits digits
     * as its regexes say: a "3 4" merge only applies where "34" stays in one
     * piece (gpt-2: " ?\p{N}+"; llama-bpe: \p{N}{1,3} -> "123" "45"; qwen2,
     * starcoder, smollm, deepseek-coder: single digits; falcon, default: 3s) */
    static const struct { const char *pre; int n; } k_pres[] = {
        {"gpt-2", 4}, {"llama-bpe", 5}, {"qwen2", 5}, {"smollm", 5}, {"starcoder", 5},
        {"deepseek-coder", 5}, {"deepseek-llm", 4}, {"falcon", 5}, {"default", 5}, {"dbrx", 5},
        {"tekken", 5}, {"gpt-4o", 5}, {"poro-chat", 4}, {"viking", 5}, {"seed-coder", 5},
        {"bailingmoe", 5}, {"qwen35", 5}, {"deepseek-v3", 5}, {"chatglm-bpe", 5}};
    for (size_t i = 0; i < sizeof k_pres / sizeof k_pres[0]; i++) {
        mini d = {NULL, k_pres[i].pre, 2, {"34", "he"}, 2, {"3 4", "h e"}, 0, -2, 0, 0};
        slm_bpe *tp = NULL;
        CHECKF(load_mini(&d, &tp, &err) == SLM_OK, "%s: %s", k_pres[i].pre, err.msg);
        if (!tp) continue;
        int n;
        int32_t *ids = enc(tp, "12345", 5, 0, 0, &n);
        CHECKF(n == k_pres[i].n, "%s: \"12345\" gave %d ids, expected %d", k_pres[i].pre, n, k_pres[i].n);
        free(ids);
        for (size_t k = 0; k < sizeof k_strings / sizeof k_strings[0]; k++)
            roundtrip(tp, k_pres[i].pre, k_strings[k], strlen(k_strings[k]), 0);
        roundtrip(tp, k_pres[i].pre, k_invalid, sizeof k_invalid - 1, 0);
        slm_bpe_free(tp);
    }

    mini m = k_good;
    m.no_merges = 1;
    expect_error(&m, "missing merges", "merges");
    m = k_good;
    m.merges[2] = "he xyz";
    expect_error(&m, "merge naming a non-token", "not a token");
    m = k_good;
    m.merges[1] = "ll";
    expect_error(&m, "merge without a space", "merge 1");
    m = k_good;
    m.merges[1] = " ll";
    expect_error(&m, "merge with a leading space only", "merge 1");
    m = k_good;
    m.bos = 100000;
    expect_error(&m, "bos out of range", "bos_token_id");
    m = k_good;
    m.bos = -5;
    expect_error(&m, "negative bos", "bos_token_id");
    m = k_good;
    m.types_short = 1;
    expect_error(&m, "short token_type", "token_type");
    m = k_good;
    m.pre = "no-such-pre";
    expect_error(&m, "unknown pre", "no-such-pre");
    m = k_good;
    m.model = "llama";
    expect_error(&m, "not gpt2", "gpt2");
    m = k_good;
    m.no_tokens = 1;
    expect_error(&m, "no tokens", "tokens");

    /* a huge token count patched into the file: refused by the reader or the loader */
    char path[512];
    snprintf(path, sizeof path, "%s/mini.gguf", g_tmp);
    CHECK(write_mini(&k_good, path));
    size_t len;
    char *buf = t_read_file(path, &len);
    if (buf) {
        const char *key = "tokenizer.ggml.tokens";
        char *p = NULL;
        for (size_t i = 0; i + strlen(key) < len; i++)
            if (!memcmp(buf + i, key, strlen(key))) { p = buf + i; break; }
        CHECK(p != NULL);
        if (p) {
            uint64_t huge = (uint64_t)1 << 40;
            memcpy(p + strlen(key) + 8, &huge, 8); /* after type u32 and element type u32 */
            slm_gguf *g = NULL;
            slm_bpe *tt = NULL;
            slm_err e2 = {0};
            slm_status s = slm_gguf_open(&g, buf, len, "huge.gguf", &e2);
            if (!s) {
                s = slm_bpe_load_gguf(&tt, g, "huge.gguf", &e2);
                slm_gguf_close(g);
            }
            CHECKF(s != SLM_OK && e2.msg[0], "huge token count accepted");
            slm_bpe_free(tt);
        }
        free(buf);
    }
}

/* ---- tokenizer.json ------------------------------------------------------- */

static char *json_byte_vocab(char *o, int *next_id) {
    /* the 256 byte chars, ids 0..255 */
    o += sprintf(o, "{");
    for (int b = 0; b < 256; b++) {
        char c[3];
        byte_char(b, c);
        if (c[0] == '"' || c[0] == '\\') o += sprintf(o, "%s\"\\%s\": %d", b ? ", " : "", c, b);
        else o += sprintf(o, "%s\"%s\": %d", b ? ", " : "", c, b);
    }
    *next_id = 256;
    return o;
}

static int write_text(const char *dir, const char *name, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return t_write_file(p, text, strlen(text));
}

static void test_hf_json(void) {
    char *js = malloc(1 << 16);
    char *o = js;
    int id;
    o += sprintf(o, "{\"version\": \"1.0\", \"added_tokens\": ["
                    "{\"id\": 261, \"content\": \"<|endoftext|>\", \"special\": true},"
                    "{\"id\": 262, \"content\": \"<tool>\", \"special\": false},"
                    "{\"id\": 263, \"content\": \"<|begin|>\", \"special\": true}],"
                    "\"normalizer\": null,"
                    "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": ["
                    "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"}, \"behavior\": \"Isolated\", \"invert\": false},"
                    "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": false}]},"
                    "\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<|begin|>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}]},"
                    "\"decoder\": {\"type\": \"ByteLevel\"},"
                    "\"model\": {\"type\": \"BPE\", \"ignore_merges\": false, \"vocab\": ");
    o = json_byte_vocab(o, &id);
    o += sprintf(o, ", \"he\": 256, \"ll\": 257, \"hell\": 258, \"hello\": 259, \"\\u0120hello\": 260},"
                    "\"merges\": [\"h e\", [\"l\", \"l\"], \"he ll\", [\"hell\", \"o\"], \"\\u0120 hello\"]}}");
    char dir[300];
    snprintf(dir, sizeof dir, "%s/hf", g_tmp);
    mkdir(dir, 0755);
    CHECK(write_text(dir, "tokenizer.json", js));
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    slm_bpe *t = NULL;
    slm_err err = {0};
    CHECKF(slm_bpe_load_hf_json(&t, path, &err) == SLM_OK, "%s", err.msg);
    if (t) {
        int n;
        int32_t *ids = enc(t, "hello hello<tool><|endoftext|>", 30, 1, 0, &n);
        /* BOS from the template; " hello" = Ġhello; <tool> matches, <|endoftext|> does not */
        CHECK(n >= 4 && ids[0] == 263 && ids[1] == 259 && ids[2] == 260 && ids[3] == 262);
        CHECK(!contains(ids, n, 261));
        free(ids);
        ids = enc(t, "hello<|endoftext|>", 18, 0, 1, &n);
        CHECK(n == 2 && ids[0] == 259 && ids[1] == 261);
        free(ids);
        CHECK(slm_bpe_eot(t) == 261);
        roundtrip(t, "hf-bytelevel", k_invalid, sizeof k_invalid - 1, 0);
        for (size_t k = 0; k < sizeof k_strings / sizeof k_strings[0]; k++)
            roundtrip(t, "hf-bytelevel", k_strings[k], strlen(k_strings[k]), 0);
        slm_bpe_free(t);
    }
    /* tokenizer_config.json beside it: add_bos_token false wins */
    CHECK(write_text(dir, "tokenizer_config.json", "{\"add_bos_token\": false, \"eos_token\": {\"content\": \"<|endoftext|>\"}}"));
    t = NULL;
    CHECKF(slm_bpe_load_hf_json(&t, path, &err) == SLM_OK, "%s", err.msg);
    if (t) {
        int n;
        int32_t *ids = enc(t, "hello", 5, 1, 0, &n);
        CHECK(n == 1 && ids[0] == 259);
        CHECK(slm_bpe_eos(t) == 261);
        free(ids);
        slm_bpe_free(t);
    }
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    unlink(path);

    /* SentencePiece-flavoured (Llama 2 style) */
    o = js;
    o += sprintf(o, "{\"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true},"
                    "{\"id\": 1, \"content\": \"<s>\", \"special\": true}, {\"id\": 2, \"content\": \"</s>\", \"special\": true}],"
                    "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": \"\\u2581\"},"
                    "{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\\u2581\"}]},"
                    "\"pre_tokenizer\": null,"
                    "\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}]},"
                    "\"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"byte_fallback\": true, \"fuse_unk\": true, \"vocab\": {"
                    "\"<unk>\": 0, \"<s>\": 1, \"</s>\": 2");
    for (int b = 0; b < 256; b++) o += sprintf(o, ", \"<0x%02X>\": %d", b, 3 + b);
    o += sprintf(o, ", \"\\u2581\": 259, \"h\": 260, \"e\": 261, \"l\": 262, \"o\": 263, \"\\u2581h\": 264, \"ll\": 265,"
                    " \"\\u2581he\": 266, \"\\u2581hell\": 267, \"\\u2581hello\": 268, \"w\": 269},"
                    "\"merges\": [\"\\u2581 h\", \"l l\", \"\\u2581h e\", \"\\u2581he ll\", \"\\u2581hell o\"]}}");
    snprintf(dir, sizeof dir, "%s/hf-spm", g_tmp);
    mkdir(dir, 0755);
    CHECK(write_text(dir, "tokenizer.json", js));
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    t = NULL;
    CHECKF(slm_bpe_load_hf_json(&t, path, &err) == SLM_OK, "%s", err.msg);
    if (t) {
        int n;
        const char *s = "hello h\xc3\xa9";
        int32_t *ids = enc(t, s, strlen(s), 1, 0, &n);
        /* <s> ▁hello ▁h <0xC3> <0xA9> */
        CHECK(n == 5 && ids[0] == 1 && ids[1] == 268 && ids[2] == 264 && ids[3] == 3 + 0xc3 && ids[4] == 3 + 0xa9);
        size_t l;
        char *d = dec(t, ids, n, &l);
        CHECKF(l == strlen(s) + 3 && !memcmp(d, "<s>hello h\xc3\xa9", l), "[%.*s]", (int)l, d);
        free(d);
        free(ids);
        roundtrip(t, "hf-spm", "hello world  x", 14, 0);
        slm_bpe_free(t);
    }

    /* malformed */
    static const char *const bad[] = {
        "{",
        "[]",
        "{\"model\": {\"type\": \"BPE\"}}",
        "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}, \"merges\": []}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -1}, \"merges\": []}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a c\"]}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [[\"a\"]]}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"ab\"]}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"}, \"behavior\": \"Isolated\"}, \"decoder\": {\"type\": \"ByteLevel\"}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\"}, \"behavior\": \"Removed\"}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"Whitespace\"}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 99999999999}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
        "{\"added_tokens\": [{\"id\": \"x\"}], \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        slm_bpe *tb = NULL;
        slm_err e = {0};
        slm_status s = slm_bpe_load_hf_json_mem(&tb, bad[i], strlen(bad[i]), NULL, 0, "bad.json", &e);
        CHECKF(s != SLM_OK && tb == NULL && e.msg[0], "bad json %zu accepted", i);
        if (s != SLM_OK) fprintf(stderr, "    bad %zu: %s\n", i, e.msg);
        slm_bpe_free(tb);
    }
    snprintf(path, sizeof path, "%s/no-such.json", g_tmp);
    CHECK(slm_bpe_load_hf_json(&t, path, &err) != SLM_OK);
    free(js);
}

/* ---- serialization ------------------------------------------------------------ */

static void test_serialize(void) {
    for (int i = 0; i < g_nvocab; i++) {
        const slm_bpe *t = g_vocab[i].t;
        size_t need = slm_bpe_serialize(t, NULL, 0);
        uint8_t *buf = malloc(need);
        CHECK(slm_bpe_serialize(t, buf, need) == need);
        CHECK(slm_bpe_serialize(t, buf, need - 1) == need); /* too small: size only */
        slm_bpe *u = NULL;
        slm_err err = {0};
        CHECKF(slm_bpe_load_mem(&u, buf, need, "mem", &err) == SLM_OK, "%s: %s", g_vocab[i].name, err.msg);
        if (u) {
            CHECK(slm_bpe_vocab_size(u) == slm_bpe_vocab_size(t) && slm_bpe_n_merges(u) == slm_bpe_n_merges(t));
            CHECK(slm_bpe_bos(u) == slm_bpe_bos(t) && slm_bpe_eos(u) == slm_bpe_eos(t) &&
                  slm_bpe_eot(u) == slm_bpe_eot(t) && slm_bpe_add_bos(u) == slm_bpe_add_bos(t));
            int total, pass = run_vectors(u, g_vocab[i].name, &total);
            CHECKF(pass == total && total > 0, "%s reloaded: %d/%d", g_vocab[i].name, pass, total);
            for (size_t k = 0; k < sizeof k_strings / sizeof k_strings[0]; k++) {
                int n1, n2;
                int32_t *a = enc(t, k_strings[k], strlen(k_strings[k]), 1, 1, &n1);
                int32_t *b = enc(u, k_strings[k], strlen(k_strings[k]), 1, 1, &n2);
                CHECK(n1 == n2 && !memcmp(a, b, (size_t)n1 * sizeof *a));
                free(a);
                free(b);
            }
            for (int id = 0; id < slm_bpe_vocab_size(t); id += 97) {
                size_t l1, l2;
                const char *p1 = slm_bpe_piece(t, id, &l1), *p2 = slm_bpe_piece(u, id, &l2);
                CHECK(l1 == l2 && !memcmp(p1, p2, l1));
            }
            slm_bpe_free(u);
        }
        /* corruption: truncations and bit flips are refused (checksum) */
        unsigned seed = 12345u + (unsigned)i;
        for (int k = 0; k < 40; k++) {
            seed = seed * 1103515245u + 12345u;
            size_t cut = (size_t)seed % need;
            u = NULL;
            CHECK(slm_bpe_load_mem(&u, buf, cut, "trunc", &err) != SLM_OK && u == NULL);
            seed = seed * 1103515245u + 12345u;
            size_t at = (size_t)seed % need;
            buf[at] ^= (uint8_t)(1u << (seed >> 28 & 7));
            CHECK(slm_bpe_load_mem(&u, buf, need, "flip", &err) != SLM_OK && u == NULL);
            buf[at] ^= (uint8_t)(1u << (seed >> 28 & 7));
        }
        free(buf);
    }
    /* corruption past the checksum (recomputed): the parser's own checks must
     * hold; small vocabulary so that every byte can be tried */
    slm_bpe *t;
    slm_err err = {0};
    if (load_mini(&k_good, &t, &err) != SLM_OK) return;
    size_t need = slm_bpe_serialize(t, NULL, 0);
    uint8_t *buf = malloc(need), *cp = malloc(need);
    slm_bpe_serialize(t, buf, need);
    int loaded = 0, refused = 0;
    for (size_t at = 8; at + 8 < need; at++) {
        for (int v = 0; v < 3; v++) {
            memcpy(cp, buf, need);
            cp[at] = v == 0 ? 0xff : v == 1 ? 0x00 : (uint8_t)(cp[at] + 1);
            /* FNV-1a like the library */
            uint64_t h = 1469598103934665603ull;
            for (size_t j = 0; j < need - 8; j++) {
                h ^= cp[j];
                h *= 1099511628211ull;
            }
            memcpy(cp + need - 8, &h, 8);
            slm_bpe *u = NULL;
            if (slm_bpe_load_mem(&u, cp, need, "fixed", &err) == SLM_OK) {
                loaded++;
                int32_t ids[64];
                int n = slm_bpe_encode(u, "hello world \xff<|end|>", 18, 1, 1, 1, ids, 64);
                for (int j = 0; j < n && j < 64; j++) CHECK(ids[j] >= 0 && ids[j] < slm_bpe_vocab_size(u));
                slm_bpe_free(u);
            } else
                refused++;
        }
    }
    fprintf(stderr, "  corrupted (checksum fixed): %d loaded, %d refused\n", loaded, refused);
    CHECK(refused > 0);
    free(buf);
    free(cp);
    slm_bpe_free(t);
}

/* ---- the CLI ----------------------------------------------------------------- */

static char *run_cli(const char *args) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s tokenize %s 2>&1", SLM_CLI_PATH, args);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    static char out[8192];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int rc = pclose(p);
    if (rc != 0 && !strstr(args, "no-such")) fprintf(stderr, "    '%s' exited with %d: %s", cmd, rc, out);
    return rc == 0 ? out : NULL;
}

static void test_cli(void) {
    char a[1024];
    const char *gpt2 = T_SHARED("vocab/ggml-vocab-gpt-2.gguf");
    snprintf(a, sizeof a, "-m %s -p 'Hello world<|endoftext|>'", gpt2);
    char *o = run_cli(a);
    CHECKF(o && !strcmp(o, "15496 995 27 91 437 1659 5239 91 29\n"), "[%s]", o ? o : "");
    snprintf(a, sizeof a, "-m %s -p 'Hello world<|endoftext|>' --special", gpt2);
    o = run_cli(a);
    CHECKF(o && !strcmp(o, "15496 995 50256\n"), "[%s]", o ? o : "");
    snprintf(a, sizeof a, "-m %s -p 'Hello world'", T_SHARED("vocab/ggml-vocab-deepseek-coder.gguf"));
    o = run_cli(a);
    CHECKF(o && !strcmp(o, "32013 17535 1835\n"), "[%s]", o ? o : "");
    snprintf(a, sizeof a, "-m %s -p 'Hello world' --no-bos", T_SHARED("vocab/ggml-vocab-deepseek-coder.gguf"));
    o = run_cli(a);
    CHECKF(o && !strcmp(o, "17535 1835\n"), "[%s]", o ? o : "");
    snprintf(a, sizeof a, "-m %s -p 'Hello world'", T_SHARED("vocab/ggml-vocab-llama-spm.gguf"));
    o = run_cli(a);
    CHECKF(o && !strcmp(o, "1 15043 3186\n"), "[%s]", o ? o : "");
    snprintf(a, sizeof a, "-m %s -p 'Hello world' --no-bos", T_SHARED("vocab/ggml-vocab-llama-spm.gguf"));
    o = run_cli(a);
    CHECKF(o && !strcmp(o, "15043 3186\n"), "[%s]", o ? o : "");
    snprintf(a, sizeof a, "-m %s -z %s -p 'Hello world'", T_SHARED("models/stories260K.bin"),
             T_SHARED("models/tok512.bin"));
    o = run_cli(a);
    CHECKF(o && !strncmp(o, "1 ", 2), "[%s]", o ? o : "");
    snprintf(a, sizeof a, "-m %s/hf/tokenizer.json -p 'hello hello'", g_tmp);
    o = run_cli(a);
    CHECKF(o && !strcmp(o, "263 259 260\n"), "[%s]", o ? o : "");
    snprintf(a, sizeof a, "-m %s/no-such.gguf -p x", g_tmp);
    CHECK(run_cli(a) == NULL);
}


/* ---- hostile tokenizers and texts: bounded work, bounded memory ---------- */

/* this thread's CPU time, the clock of the budget (load does not count) */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static slm_bpe *load_corpus(const char *file, slm_err *err) {
    char path[1024];
    snprintf(path, sizeof path, "%s/corpus/tokenizers/%s", SLM_TESTS_DIR, file);
    slm_bpe *t = NULL;
    if (slm_bpe_load_hf_json(&t, path, err)) return NULL;
    return t;
}

static void test_hostile(void) {
    slm_err err = {0};
    /* ids far beyond the entries: refused before any table is sized by them
     * (the old loader allocated ~431 MB for id 16777215) */
    CHECK(load_corpus("vocab_huge_id.json", &err) == NULL);
    CHECKF(strstr(err.msg, "vocab_huge_id.json") && strstr(err.msg, "model.vocab") && strstr(err.msg, "16777215"),
           "%s", err.msg);
    CHECK(load_corpus("added_huge_id.json", &err) == NULL);
    CHECKF(strstr(err.msg, "added_huge_id.json") && strstr(err.msg, "added_tokens[0]") && strstr(err.msg, "16777215"),
           "%s", err.msg);

    /* crafted Split regexes, refused at load by the probe: the message
     * names the file and the pattern */
    CHECK(load_corpus("split_rescan.json", &err) == NULL);
    CHECKF(strstr(err.msg, "split_rescan.json") && strstr(err.msg, ".(?=.*$)") && strstr(err.msg, "refused"), "%s",
           err.msg);
    CHECK(load_corpus("split_backtrack.json", &err) == NULL);
    CHECKF(strstr(err.msg, "split_backtrack.json") && strstr(err.msg, "(?:a|a)+b|."), "%s", err.msg);

    /* the same regexes keyed on a character the probe does not try load,
     * and a 250 KB text of that character is stopped at encode */
    size_t n = 250000;
    char *a = malloc(n + 1);
    a[n] = 0;
    /* a lookahead that rescans the rest of the text at every position:
     * quadratic (the old code took minutes); stopped by the CPU budget */
    memset(a, 'x', n);
    slm_bpe *t = load_corpus("split_rescan_hidden.json", &err);
    CHECKF(t != NULL, "%s", err.msg);
    if (t) {
        double t0 = now_s();
        int k = slm_bpe_encode(t, a, n, 0, 0, 0, NULL, 0);
        double dt = now_s() - t0;
        CHECKF(k == SLM_TOK_EBUDGET, "encode gave %d", k);
        double budget = SLM_BPE_PRETOK_BASE_MS * 1e-3 + n * SLM_BPE_PRETOK_NS_PER_BYTE * 1e-9;
        CHECKF(dt < budget + 1.0, "%.2f s for a budget of %.2f s", dt, budget);
        /* a short text is well within the budget and splits per character */
        CHECK(slm_bpe_encode(t, "xyz", 3, 0, 0, 0, NULL, 0) == 3);
        slm_bpe_free(t);
    }
    /* exponential backtracking inside one match: stopped by the match limit */
    memset(a, 'q', n);
    t = load_corpus("split_backtrack_hidden.json", &err);
    CHECKF(t != NULL, "%s", err.msg);
    if (t) {
        int k = slm_bpe_encode(t, a, n, 0, 0, 0, NULL, 0);
        CHECKF(k == SLM_TOK_EBUDGET, "encode gave %d", k);
        CHECK(slm_bpe_encode(t, "qqw", 3, 0, 0, 0, NULL, 0) == 3); /* one piece of 3 byte tokens */
        slm_bpe_free(t);
    }
    free(a);

    /* the input limit: refused before any work, settable */
    vocab *v = find_vocab("gpt-2");
    if (v) {
        CHECK(slm_bpe_max_input(v->t) == SLM_TOK_DEFAULT_MAX_INPUT);
        size_t big = SLM_TOK_DEFAULT_MAX_INPUT + 1;
        char *b = malloc(big);
        memset(b, ' ', big);
        double t0 = now_s();
        CHECK(slm_bpe_encode(v->t, b, big, 0, 0, 0, NULL, 0) == SLM_TOK_ETOOLONG);
        CHECK(now_s() - t0 < 0.5);
        slm_bpe_set_max_input(v->t, 10);
        CHECK(slm_bpe_encode(v->t, b, 11, 0, 0, 0, NULL, 0) == SLM_TOK_ETOOLONG);
        CHECK(slm_bpe_encode(v->t, b, 10, 0, 0, 0, NULL, 0) > 0);
        CHECK(strstr(slm_tok_encode_error(SLM_TOK_ETOOLONG), "max_prompt_bytes") != NULL);
        slm_bpe_set_max_input(v->t, 0);
        CHECK(slm_bpe_max_input(v->t) == SLM_TOK_DEFAULT_MAX_INPUT);
        free(b);
    }

    /* the limits never refuse ordinary text, however long its runs: 1 MiB
     * of each kind through every vocabulary's pre-tokenizer */
    static const char *const unit[] = {" ", "a", "7", "\n", " \n", "\xe4\xb8\xad", "Hello, world! ", "\xf0\x9f\xa6\x99"};
    size_t m = 1 << 20;
    char *text = malloc(m + 8);
    for (size_t u = 0; u < sizeof unit / sizeof unit[0]; u++) {
        size_t ul = strlen(unit[u]), k = 0;
        while (k + ul <= m) {
            memcpy(text + k, unit[u], ul);
            k += ul;
        }
        for (int i = 0; i < g_nvocab; i++) {
            int r = slm_bpe_encode(g_vocab[i].t, text, k, 0, 0, 0, NULL, 0);
            CHECKF(r > 0, "%s: unit %zu: encode gave %d", g_vocab[i].name, u, r);
        }
    }
    free(text);
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/slm_test_bpe_XXXXXX");
    if (!mkdtemp(g_tmp)) {
        perror("mkdtemp");
        return 1;
    }
    T_RUN(load_vocabs);
    T_RUN(test_vocab_vectors);
    T_RUN(test_special);
    T_RUN(test_roundtrip);
    T_RUN(test_mini_and_malformed);
    T_RUN(test_hf_json);
    T_RUN(test_serialize);
    T_RUN(test_cli);
    T_RUN(test_hostile);
    for (int i = 0; i < g_nvocab; i++) {
        slm_bpe_free(g_vocab[i].t);
        slm_gguf_close(g_vocab[i].g);
        slm_unmap(&g_vocab[i].map);
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
    T_DONE();
}
