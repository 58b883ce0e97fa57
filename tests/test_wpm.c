/* WordPiece (GGUF tokenizer.ggml.model "bert") tests: a small vocabulary
 * written as a GGUF file, encoded case by case against ids worked out by
 * hand from llama.cpp's WPM rules (and checked with llama.cpp's
 * llama-tokenize on the same files: SLM_WPM_KEEP=DIR keeps them); decoding;
 * the normalizer keys; the blob's serialized form; malformed metadata and
 * records; the search budget; allocation failures; the Unicode tables; and,
 * when ../shared/vocab holds it, llama.cpp's bge vocabulary with its test
 * vectors. */
#include <stdint.h>
#include <unistd.h>

#include "t.h"
#include "format/gguf.h"
#include "text/tokenizer.h"
#include "text/wpm.h"

#define W "\xe2\x96\x81" /* U+2581, the word-start mark */

/* Vocabulary A (ids in order); type 3 control unless noted. */
static const char *const VOCAB[] = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",                        /* 0..4 */
    W "hello", W "world", W "!", W ",", W "un", "aff", "able",          /* 5..11 */
    W "cafe", W "naive", W "\xe4\xbd\xa0", W "\xe5\xa5\xbd",            /* 12..15: 你 好 */
    W "the", "s", W "a", W "$", W ".",                                  /* 16..20 */
    W "\xce\xb5\xce\xbb\xce\xbb\xce\xb7\xce\xbd\xce\xb9\xce\xba\xce\xb1", /* 21: ελληνικα */
    W "\xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82",               /* 22: привет */
    W "uber", W "abc", W "ab", "cd", "d", W "[", W "]", W "sep",        /* 23..30 */
    W "b",                                                              /* 31 */
    "<user>",                                                           /* 32: user-defined */
    W "Hello", W "caf\xc3\xa9", W "Cafe",                               /* 33..35 */
};
#define N_VOCAB ((int)(sizeof VOCAB / sizeof VOCAB[0]))

enum { LOWER_DEFAULT = -1 };

/* Write vocabulary A to path; lower / strip: -1 leaves the key out. */
static int write_vocab(const char *path, int lower, int strip) {
    uint64_t lens[N_VOCAB];
    int32_t types[N_VOCAB];
    for (int i = 0; i < N_VOCAB; i++) {
        lens[i] = strlen(VOCAB[i]);
        types[i] = i < 5 ? 3 : i == 32 ? 4 : 1;
    }
    slm_gguf_writer *w = slm_gguf_writer_new();
    slm_gguf_set_str(w, "general.architecture", "bert");
    slm_gguf_set_str(w, "tokenizer.ggml.model", "bert");
    slm_gguf_set_str(w, "tokenizer.ggml.pre", "default");
    slm_gguf_set_arr_str(w, "tokenizer.ggml.tokens", VOCAB, lens, N_VOCAB);
    slm_gguf_set_arr(w, "tokenizer.ggml.token_type", SLM_GGUF_I32, types, N_VOCAB);
    slm_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 2);
    slm_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 1);
    slm_gguf_set_u32(w, "tokenizer.ggml.seperator_token_id", 3);
    slm_gguf_set_u32(w, "tokenizer.ggml.padding_token_id", 0);
    slm_gguf_set_u32(w, "tokenizer.ggml.mask_token_id", 4);
    if (lower >= 0) slm_gguf_set_bool(w, "tokenizer.ggml.normalizer.lowercase", lower);
    if (strip >= 0) slm_gguf_set_bool(w, "tokenizer.ggml.normalizer.strip_accents", strip);
    slm_err err = {0};
    slm_status st = slm_gguf_write(w, path, &err);
    slm_gguf_writer_free(w);
    CHECKF(st == SLM_OK, "%s", err.msg);
    return st == SLM_OK;
}

/* A GGUF vocabulary: the mapping and reader stay open with the tokenizer. */
typedef struct gvocab {
    slm_map map;
    slm_gguf *g;
    slm_tokenizer *t;
} gvocab;

static slm_status load(gvocab *v, const char *path, slm_err *err) {
    memset(v, 0, sizeof *v);
    slm_status st = slm_map_file(&v->map, path, err);
    if (!st) st = slm_gguf_open(&v->g, v->map.data, v->map.size, slm_basename(path), err);
    if (!st) st = slm_tok_load_gguf(&v->t, v->g, slm_basename(path), err);
    return st;
}

static void unload(gvocab *v) {
    slm_tok_free(v->t);
    if (v->g) slm_gguf_close(v->g);
    slm_unmap(&v->map);
}

static char g_dir[64];

static void path_of(char *p, size_t n, const char *name) { snprintf(p, n, "%s/%s", g_dir, name); }

/* Encode (plain: every byte marked, so no special-token text matches) and
 * compare with want[0..nw). */
static void expect(const slm_tokenizer *t, const char *text, int plain, int bos, int eos, const int32_t *want,
                   int nw) {
    int32_t got[64];
    size_t n = strlen(text);
    uint8_t *mask = plain ? malloc(n + 1) : NULL;
    if (mask) memset(mask, 1, n + 1);
    int ng = slm_tok_encode_masked(t, text, mask, bos, eos, got, 64);
    free(mask);
    int same = ng == nw;
    for (int i = 0; same && i < nw; i++) same = got[i] == want[i];
    CHECKF(same, "\"%s\" (plain %d): got %d ids", text, plain, ng);
    if (!same) {
        for (int i = 0; i < ng && i < 64; i++) fprintf(stderr, " %d", got[i]);
        fprintf(stderr, "\n");
    }
}
#define EXPECT(t, text, plain, ...)                                                      \
    do {                                                                                 \
        static const int32_t want_[] = {__VA_ARGS__};                                    \
        expect(t, text, plain, 0, 0, want_, (int)(sizeof want_ / sizeof want_[0]));      \
    } while (0)
#define EXPECT_NONE(t, text) expect(t, text, 0, 0, 0, NULL, 0)

/* The cases of vocabulary A (lowercase and strip_accents on by default);
 * each expected list follows from wpm.h's rules by hand. */
static void cases_a(const slm_tokenizer *t) {
    EXPECT(t, "Hello World!", 0, 5, 6, 7);
    EXPECT(t, "hello,world!", 0, 5, 8, 6, 7);      /* punctuation is a word of its own */
    EXPECT(t, "HELLO", 0, 5);                      /* lowercased */
    EXPECT(t, "Caf\xc3\xa9 na\xc3\xafve", 0, 12, 13); /* é -> e, ï -> i (first code point of NFD) */
    EXPECT(t, "cafe\xcc\x81", 0, 12);             /* a combining mark is dropped */
    EXPECT(t, "\xe4\xbd\xa0\xe5\xa5\xbd", 0, 14, 15);       /* CJK: one word per ideograph */
    EXPECT(t, "hello\xe4\xbd\xa0\xe5\xa5\xbdworld", 0, 5, 14, 15, 6);
    EXPECT(t, "unaffable", 0, 9, 10, 11);          /* continuation pieces */
    EXPECT(t, "thes", 0, 16, 17);
    EXPECT(t, "xyz", 0, 1);                        /* unknown word */
    EXPECT(t, "helloq", 0, 1);                     /* a rest that matches nothing: the whole word */
    EXPECT(t, "hello xyz world", 0, 5, 1, 6);
    EXPECT_NONE(t, "");
    EXPECT_NONE(t, "   \t\n ");
    EXPECT(t, "abcd", 0, 24, 27);                  /* longest first: abc + d, not ab + cd */
    EXPECT(t, "a$b", 0, 18, 19, 31);               /* an ASCII symbol is a word of its own */
    EXPECT(t, "\xce\x95\xce\x9b\xce\x9b\xce\x97\xce\x9d\xce\x99\xce\x9a\xce\x86", 0, 21); /* ΕΛΛΗΝΙΚΆ */
    EXPECT(t, "\xd0\x9f\xd0\xa0\xd0\x98\xd0\x92\xd0\x95\xd0\xa2", 0, 22);                 /* ПРИВЕТ */
    EXPECT(t, "\xc3\x9c" "ber", 0, 23);             /* Über */
    EXPECT(t, "hel\x01lo", 0, 5);                  /* a control character is dropped */
    EXPECT(t, "hel\xe2\x80\x8blo", 0, 5);          /* U+200B (Cf) too */
    EXPECT(t, "hel\xfflo", 0, 5);                  /* a bad byte is U+FFFD, dropped */
    EXPECT(t, "\xc1\x81", 0, 18);                  /* an overlong 'A' decodes as 'A' */
    EXPECT(t, "hello\xe3\x80\x80world", 0, 5, 6);  /* U+3000 is white space */
    EXPECT(t, "hello\xc2\xa0world", 0, 5, 6);      /* so is U+00A0 */
    EXPECT(t, "hello\xef\xbc\x81", 0, 5, 1);       /* U+FF01 is punctuation: a word, unknown here */
    EXPECT(t, "hello [SEP] world", 0, 5, 3, 6);    /* control-token text matches... */
    EXPECT(t, "hello[SEP]world", 0, 5, 3, 6);
    EXPECT(t, "hello [SEP] world", 1, 5, 28, 30, 29, 6); /* ...but not on plain text */
    EXPECT(t, "hello<user>world", 0, 5, 32, 6);    /* user-defined tokens always */
    EXPECT(t, "hello<user>world", 1, 5, 32, 6);
    static const int32_t cls_sep[] = {2, 5, 3}, empty[] = {2, 3};
    expect(t, "hello", 0, 1, 1, cls_sep, 3);        /* add_bos: [CLS], add_eos: [SEP] */
    expect(t, "", 0, 1, 1, empty, 2);
    CHECK(slm_tok_bos(t) == 2 && slm_tok_eos(t) == 3 && slm_tok_sep(t) == 3 && slm_tok_is_wpm(t));

    /* long words: 1 + 3000 pieces; one bad byte at the end makes it [UNK] */
    size_t n = 2 + 3 * 3000;
    char *s = malloc(n + 2);
    memcpy(s, "un", 2);
    for (int i = 0; i < 3000; i++) memcpy(s + 2 + 3 * i, "aff", 3);
    s[n] = 0;
    int32_t *ids = malloc(3100 * sizeof *ids);
    int got = slm_tok_encode(t, s, 0, 0, ids, 3100);
    int ok = got == 3001 && ids[0] == 9;
    for (int i = 1; ok && i < got; i++) ok = ids[i] == 10;
    CHECKF(ok, "long word: %d ids", got);
    s[n] = 'q', s[n + 1] = 0;
    CHECK(slm_tok_encode(t, s, 0, 0, ids, 3100) == 1 && ids[0] == 1);
    /* a short array: the count, and the ids that fit */
    int32_t two[2] = {-7, -7};
    CHECK(slm_tok_encode(t, "Hello World!", 0, 0, two, 2) == 3 && two[0] == 5 && two[1] == 6);
    CHECK(slm_tok_encode(t, "Hello World!", 0, 0, NULL, 0) == 3);
    free(ids);
    free(s);
}

static void test_encode(void) {
    char p[128];
    path_of(p, sizeof p, "vocab-a.gguf");
    if (!write_vocab(p, LOWER_DEFAULT, LOWER_DEFAULT)) return;
    gvocab v;
    slm_err err = {0};
    CHECKF(load(&v, p, &err) == SLM_OK, "%s", err.msg);
    if (v.t) cases_a(v.t);
    unload(&v);
}

static void test_decode(void) {
    char p[128];
    path_of(p, sizeof p, "vocab-a.gguf");
    gvocab v;
    slm_err err = {0};
    CHECKF(load(&v, p, &err) == SLM_OK, "%s", err.msg);
    if (!v.t) {
        unload(&v);
        return;
    }
    const slm_tokenizer *t = v.t;
    /* a word-start piece keeps its space (llama.cpp's token_to_piece), also first */
    CHECK(!strcmp(slm_tok_decode(t, -1, 5), " hello"));
    CHECK(!strcmp(slm_tok_decode(t, 2, 5), " hello"));
    CHECK(!strcmp(slm_tok_decode(t, 9, 10), "aff"));
    CHECK(!strcmp(slm_tok_decode(t, 5, 3), "[SEP]"));  /* specials: their text */
    CHECK(!strcmp(slm_tok_decode(t, 5, 32), "<user>"));
    CHECK(!strcmp(slm_tok_decode(t, 5, N_VOCAB), ""));
    CHECK(!strcmp(slm_tok_str(t, 14), " \xe4\xbd\xa0"));
    CHECK(slm_tok_type(t, 3) == 3 && slm_tok_type(t, 5) == 1 && slm_tok_type(t, 32) == 4);
    CHECK(slm_tok_vocab_size(t) == N_VOCAB && slm_tok_eot(t) == -1);
    unload(&v);
}

/* tokenizer.ggml.normalizer.lowercase / strip_accents */
static void test_normalizer_keys(void) {
    char p[128];
    path_of(p, sizeof p, "vocab-b.gguf"); /* lowercase off: strip_accents follows it */
    gvocab v;
    slm_err err = {0};
    if (write_vocab(p, 0, LOWER_DEFAULT) && load(&v, p, &err) == SLM_OK) {
        EXPECT(v.t, "Hello caf\xc3\xa9", 0, 33, 34);
        EXPECT(v.t, "HELLO", 0, 1);
        EXPECT(v.t, "cafe\xcc\x81", 0, 1); /* the mark stays: "cafe" + U+0301 is no token */
    }
    unload(&v);
    path_of(p, sizeof p, "vocab-c.gguf"); /* lowercase off, strip_accents on */
    if (write_vocab(p, 0, 1) && load(&v, p, &err) == SLM_OK) {
        EXPECT(v.t, "Caf\xc3\xa9", 0, 35);
        EXPECT(v.t, "hello", 0, 5);
    }
    unload(&v);
}

static void test_serialize(void) {
    char p[128];
    path_of(p, sizeof p, "vocab-a.gguf");
    gvocab v;
    slm_err err = {0};
    CHECKF(load(&v, p, &err) == SLM_OK, "%s", err.msg);
    if (!v.t) {
        unload(&v);
        return;
    }
    uint8_t *rec = NULL, *rec2 = NULL;
    size_t n = 0, n2 = 0;
    CHECK(slm_tok_save(v.t, &rec, &n, &err) == SLM_OK && n > 32);
    slm_tokenizer *back = NULL;
    CHECKF(slm_tok_load_mem(&back, rec, n, "section", &err) == SLM_OK, "%s", err.msg);
    if (back) {
        cases_a(back); /* encodes as the original */
        CHECK(!strcmp(slm_tok_decode(back, -1, 5), " hello"));
        CHECK(slm_tok_save(back, &rec2, &n2, &err) == SLM_OK && n2 == n && !memcmp(rec, rec2, n));
    }
    slm_tok_free(back);
    /* every truncation is refused, as is a bad id, flag or type */
    for (size_t cut = 0; cut < n; cut += cut < 64 ? 1 : 97) {
        back = NULL;
        memset(&err, 0, sizeof err);
        CHECKF(slm_tok_load_mem(&back, rec, cut, "section", &err) != SLM_OK && !back && err.msg[0], "cut %zu", cut);
    }
    uint8_t *bad = malloc(n);
    static const struct { size_t off; uint8_t v; const char *want; } flips[] = {
        {4 + 8, 0xFF, "cls id"}, {4 + 16, 0xFF, "unk id"}, {4 + 24, 2, "normalizer"}, {4 + 28, 9, "type"},
        {4 + 0, 7, "version"},
    };
    for (size_t k = 0; k < sizeof flips / sizeof flips[0]; k++) {
        memcpy(bad, rec, n);
        bad[flips[k].off] = flips[k].v;
        back = NULL;
        memset(&err, 0, sizeof err);
        CHECKF(slm_tok_load_mem(&back, bad, n, "section", &err) == SLM_ERR_FORMAT && strstr(err.msg, flips[k].want),
               "%s: %s", flips[k].want, err.msg);
    }
    free(bad);
    slm_xfree(rec);
    slm_xfree(rec2);
    unload(&v);
}

/* Metadata errors name the file and the key. */
static void test_gguf_errors(void) {
    char p[128];
    path_of(p, sizeof p, "bad.gguf");
    static const char *const toks[] = {"[UNK]", W "a"};
    static const uint64_t lens[] = {5, 4};
    static const int32_t types3[] = {3, 1, 1};
    static const char *const dup[] = {"[UNK]", W "a", W "a"};
    static const uint64_t dup_lens[] = {5, 4, 4};
    for (int k = 0; k < 4; k++) {
        slm_gguf_writer *w = slm_gguf_writer_new();
        slm_gguf_set_str(w, "tokenizer.ggml.model", "bert");
        slm_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, lens, 2);
        const char *want = NULL;
        if (k == 0) want = "bos_token_id"; /* the default 101 is not a token */
        if (k == 1) {
            slm_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 0);
            slm_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 5);
            want = "unknown_token_id";
        }
        if (k == 2) {
            slm_gguf_set_arr(w, "tokenizer.ggml.token_type", SLM_GGUF_I32, types3, 3);
            want = "token_type";
        }
        if (k == 3) { /* two tokens spelled the same (llama.cpp asserts) */
            slm_gguf_writer_free(w);
            w = slm_gguf_writer_new();
            slm_gguf_set_str(w, "tokenizer.ggml.model", "bert");
            slm_gguf_set_arr_str(w, "tokenizer.ggml.tokens", dup, dup_lens, 3);
            slm_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 0);
            slm_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
            slm_gguf_set_u32(w, "tokenizer.ggml.seperator_token_id", 0);
            want = "tokens[2]: the same spelling as token 1";
        }
        slm_err err = {0};
        CHECK(slm_gguf_write(w, p, &err) == SLM_OK);
        slm_gguf_writer_free(w);
        gvocab v;
        CHECK(load(&v, p, &err) == SLM_ERR_FORMAT && !v.t);
        CHECKF(strstr(err.msg, "bad.gguf") && strstr(err.msg, want), "%s", err.msg);
        unload(&v);
    }
    unlink(p);
}

/* A vocabulary made to defeat the longest-match search: "a" and a 20000-byte
 * token starting with "a"s make every position of a long word of "a"s read
 * 20000 bytes; the budget (256 probes per input byte) stops it cleanly. */
static void test_budget(void) {
    char p[128];
    path_of(p, sizeof p, "hostile.gguf");
    char *longtok = malloc(20002);
    memset(longtok, 'a', 20000);
    longtok[20000] = 'b', longtok[20001] = 0;
    const char *toks[] = {"[UNK]", "[CLS]", "[SEP]", W "a", "a", longtok};
    uint64_t lens[6];
    for (int i = 0; i < 6; i++) lens[i] = strlen(toks[i]);
    slm_gguf_writer *w = slm_gguf_writer_new();
    slm_gguf_set_str(w, "tokenizer.ggml.model", "bert");
    slm_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, lens, 6);
    slm_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    slm_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    slm_gguf_set_u32(w, "tokenizer.ggml.seperator_token_id", 2);
    slm_err err = {0};
    CHECK(slm_gguf_write(w, p, &err) == SLM_OK);
    slm_gguf_writer_free(w);
    gvocab v;
    CHECKF(load(&v, p, &err) == SLM_OK, "%s", err.msg);
    if (v.t) {
        char *text = malloc(30001);
        memset(text, 'a', 30000);
        text[30000] = 0;
        CHECK(slm_tok_encode(v.t, text, 0, 0, NULL, 0) == SLM_TOK_EBUDGET);
        CHECK(slm_tok_encode(v.t, "aaaa", 0, 0, NULL, 0) == 4); /* a short one is fine */
        free(text);
    }
    unload(&v);
    unlink(p);
    free(longtok);
}

/* ---- allocation failures ------------------------------------------------ */

static int g_allocs, g_fail_at;
static void *inj_alloc(void *ud, size_t n) { (void)ud; return ++g_allocs == g_fail_at ? NULL : malloc(n); }
static void *inj_realloc(void *ud, void *q, size_t n) { (void)ud; return ++g_allocs == g_fail_at ? NULL : realloc(q, n); }
static void inj_free(void *ud, void *q) { (void)ud; free(q); }

/* Fail the loader's allocations one by one (then the encoder's): each ends
 * in SLM_ERR_NOMEM / SLM_TOK_ENOMEM and frees what it took (ASan checks). */
static void test_alloc_failures(void) {
    char p[128];
    path_of(p, sizeof p, "vocab-a.gguf");
    gvocab v;
    slm_err err = {0};
    if (load(&v, p, &err) != SLM_OK) {
        unload(&v);
        return;
    }
    uint8_t *rec = NULL;
    size_t n = 0;
    CHECK(slm_tok_save(v.t, &rec, &n, &err) == SLM_OK);
    slm_allocator inj = {inj_alloc, inj_realloc, inj_free, NULL};
    for (int mode = 0; mode < 2; mode++) {
        int failures = 0;
        for (g_fail_at = 1;; g_fail_at++) {
            slm_tokenizer *t = NULL;
            g_allocs = 0;
            slm_set_allocator(&inj);
            slm_status st = mode ? slm_tok_load_mem(&t, rec, n, "section", &err)
                                 : slm_tok_load_gguf(&t, v.g, "vocab-a.gguf", &err);
            slm_set_allocator(NULL);
            if (st == SLM_OK) {
                CHECK(g_fail_at > g_allocs); /* no failure was injected */
                slm_tok_free(t);
                break;
            }
            CHECKF(st == SLM_ERR_NOMEM && !t, "mode %d at %d: %d %s", mode, g_fail_at, st, err.msg);
            failures++;
        }
        CHECK(failures >= 5);
    }
    int32_t ids[8];
    for (g_fail_at = 1; g_fail_at < 4; g_fail_at++) {
        g_allocs = 0;
        slm_set_allocator(&inj);
        int r = slm_tok_encode(v.t, "hello [SEP] world", 0, 0, ids, 8);
        slm_set_allocator(NULL);
        CHECK(r == SLM_TOK_ENOMEM || r == 3);
    }
    slm_xfree(rec);
    unload(&v);
}

/* ---- the Unicode tables ------------------------------------------------- */

static void test_unicode(void) {
    CHECK(slm_wpm_lower('A') == 'a' && slm_wpm_lower('a') == 'a' && slm_wpm_lower('[') == '[');
    CHECK(slm_wpm_lower(0xC9) == 0xE9 && slm_wpm_lower(0xD7) == 0xD7);      /* É; × has none */
    CHECK(slm_wpm_lower(0x100) == 0x101 && slm_wpm_lower(0x101) == 0x101);  /* Latin Extended-A pairs */
    CHECK(slm_wpm_lower(0x130) == 0x69);                                    /* İ: simple mapping */
    CHECK(slm_wpm_lower(0x23A) == 0x2C65);                                  /* 2 -> 3 UTF-8 bytes */
    CHECK(slm_wpm_lower(0x391) == 0x3B1 && slm_wpm_lower(0x3A3) == 0x3C3);  /* Greek */
    CHECK(slm_wpm_lower(0x410) == 0x430 && slm_wpm_lower(0x401) == 0x451);  /* Cyrillic */
    CHECK(slm_wpm_lower(0x10400) == 0x10428 && slm_wpm_lower(0x1E9E) == 0xDF); /* Deseret; ẞ */
    CHECK(slm_wpm_nfd_first(0xE9) == 'e' && slm_wpm_nfd_first(0x1EA5) == 'a'); /* é; ấ */
    CHECK(slm_wpm_nfd_first(0xAC00) == 0x1100 && slm_wpm_nfd_first(0x2126) == 0x3A9); /* 가; Ω sign */
    CHECK(slm_wpm_nfd_first('e') == 'e' && slm_wpm_nfd_first(0x10FFFF) == 0x10FFFF);
    CHECK(slm_wpm_class('!') == SLM_WPM_PUNCT && slm_wpm_class('$') == SLM_WPM_OTHER);
    CHECK(slm_wpm_class(0x301) == SLM_WPM_MARK && slm_wpm_class(0x903) == SLM_WPM_MARK); /* Mn, Mc */
    CHECK(slm_wpm_class(0x200B) == SLM_WPM_CONTROL && slm_wpm_class(0xE000) == SLM_WPM_CONTROL); /* Cf, Co */
    CHECK(slm_wpm_class(0x378) == SLM_WPM_OTHER);             /* unassigned (Cn) is no control */
    CHECK(slm_wpm_class(0x11B00) == SLM_WPM_PUNCT);           /* a Unicode 15.0 addition */
    CHECK(slm_wpm_class(0x3002) == SLM_WPM_PUNCT && slm_wpm_class(0x110000) == SLM_WPM_OTHER);
    CHECK(slm_wpm_is_space(0x3000) && slm_wpm_is_space(0x85) && !slm_wpm_is_space(0x200B));
    CHECK(slm_wpm_is_cjk(0x4E00) && !slm_wpm_is_cjk(0x3042) && !slm_wpm_is_cjk(0x2B820));
}

/* ---- llama.cpp's bge vocabulary and its test vectors, when present ------ */

static void test_bge_vectors(void) {
    char p[512], pi[600], po[600];
    snprintf(p, sizeof p, "%s/vocab/ggml-vocab-bert-bge.gguf", SLM_SHARED_DIR);
    snprintf(pi, sizeof pi, "%s.inp", p);
    snprintf(po, sizeof po, "%s.out", p);
    char *inp = t_read_file(pi, NULL), *out = t_read_file(po, NULL);
    gvocab v;
    slm_err err = {0};
    if (!inp || !out || load(&v, p, &err) != SLM_OK) {
        fprintf(stderr, "  skipped: %s (with .inp/.out) not loadable\n", p);
        free(inp);
        free(out);
        if (inp && out) unload(&v);
        return;
    }
    const char *sep = "\n__ggml_vocab_test__\n";
    char *s = inp, *o = out;
    int cases = 0, bad = 0;
    for (char *e; (e = strstr(s, sep)); s = e + strlen(sep)) {
        *e = 0;
        char *ol = o, *oe = strchr(o, '\n');
        if (oe) *oe = 0, o = oe + 1;
        else o += strlen(o);
        int32_t want[512], got[512];
        int nw = 0;
        for (char *q = ol; *q && nw < 512;) {
            char *end;
            long x = strtol(q, &end, 10);
            if (end == q) break;
            want[nw++] = (int32_t)x;
            q = end;
        }
        int ng = slm_tok_encode_masked(v.t, s, NULL, 0, 0, got, 512); /* no specials in these texts */
        cases++;
        if (ng != nw || memcmp(got, want, (size_t)nw * sizeof *got)) {
            bad++;
            CHECKF(0, "bge case %d: \"%s\"", cases, s);
        }
    }
    fprintf(stderr, "  bge: %d of %d cases match\n", cases - bad, cases);
    CHECK(cases >= 40);
    free(inp);
    free(out);
    unload(&v);
}

int main(void) {
    const char *keep = getenv("SLM_WPM_KEEP");
    if (keep) snprintf(g_dir, sizeof g_dir, "%s", keep);
    else if (!mkdtemp(strcpy(g_dir, "/tmp/slm_wpm_XXXXXX"))) return 1;
    T_RUN(test_unicode);
    T_RUN(test_encode);
    T_RUN(test_decode);
    T_RUN(test_normalizer_keys);
    T_RUN(test_serialize);
    T_RUN(test_gguf_errors);
    T_RUN(test_budget);
    T_RUN(test_alloc_failures);
    T_RUN(test_bge_vectors);
    if (!keep) {
        static const char *const names[] = {"vocab-a.gguf", "vocab-b.gguf", "vocab-c.gguf"};
        char p[128];
        for (size_t i = 0; i < 3; i++) path_of(p, sizeof p, names[i]), unlink(p);
        rmdir(g_dir);
    }
    T_DONE();
}
