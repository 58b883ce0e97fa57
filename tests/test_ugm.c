/* Unigram (GGUF tokenizer.ggml.model "t5") tests. The three vocabularies in
 * tests/corpus/ugm are SentencePiece unigram models trained on a small
 * multilingual text and converted as llama.cpp's converter does
 * (tools/gen_ugm_vocab.py): xlmr.gguf (nmt_nfkc charsmap, XLM-RoBERTa ids,
 * <s> ... </s>), t5.gguf (a custom charsmap, T5 ids, user-defined tokens,
 * llama.cpp's default add_bos/add_eos) and ident.gguf (no charsmap, no dummy
 * prefix). Their .inp/.out vectors are llama.cpp's llama-tokenize output
 * (special-token text parsed, its default); spm_encode agrees with them
 * except where llama.cpp's user-defined prefix rule differs.
 * Tested: the vectors through GGUF and through the blob's serialized form;
 * special-token text not parsed; BOS/EOS flags and defaults; decoding;
 * long and hostile texts; a damaged charsmap (refused naming the file and
 * field, or, for random damage, refused or loaded and used safely);
 * malformed metadata; allocation failures. */
#include <stdint.h>
#include <unistd.h>

#include "t.h"
#include "format/gguf.h"
#include "text/bpe.h"
#include "text/tokenizer.h"
#include "text/ugm.h"
#include "vocab_pairs.h"

#define DIR SLM_TESTS_DIR "/corpus/ugm"
#define CM_KEY "tokenizer.ggml.precompiled_charsmap"

typedef struct gvocab {
    slm_map m;
    slm_gguf *g;
    slm_tokenizer *t;
} gvocab;

static slm_status load(gvocab *v, const char *path, slm_err *err) {
    memset(v, 0, sizeof *v);
    slm_status st = slm_map_file(&v->m, path, err);
    if (st) return st;
    st = slm_gguf_open(&v->g, v->m.data, v->m.size, slm_basename(path), err);
    if (st) return st;
    return slm_tok_load_gguf(&v->t, v->g, slm_basename(path), err);
}

static void unload(gvocab *v) {
    slm_tok_free(v->t);
    slm_gguf_close(v->g);
    if (v->m.data) slm_unmap(&v->m);
    memset(v, 0, sizeof *v);
}

typedef struct pair_ctx {
    const slm_tokenizer *t;
    int add; /* llama-tokenize's add_special: the vocabulary's add_bos */
} pair_ctx;

static int pair_check(void *ud, const char *text, size_t len, const int32_t *exp, int ne) {
    (void)len;
    const pair_ctx *c = ud;
    int32_t ids[VOCAB_PAIRS_MAX_IDS];
    int n = slm_tok_encode(c->t, text, c->add, c->add, ids, VOCAB_PAIRS_MAX_IDS);
    int ok = n == ne && !memcmp(ids, exp, sizeof *ids * (size_t)(n > 0 ? n : 0));
    if (!ok) {
        fprintf(stderr, "  text '%s': got", text);
        for (int i = 0; i < n && i < VOCAB_PAIRS_MAX_IDS; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, " (n=%d), want", n);
        for (int i = 0; i < ne; i++) fprintf(stderr, " %d", exp[i]);
        fputc('\n', stderr);
    }
    /* a short array: the same count, the same first id */
    int32_t one = -7;
    if (ok && ne > 0) ok = slm_tok_encode(c->t, text, c->add, c->add, &one, 1) == ne && one == exp[0];
    return ok;
}

static const struct {
    const char *file;
    int add;
} VOCABS[] = {{"xlmr.gguf", 1}, {"t5.gguf", 0}, {"ident.gguf", 1}};

static void run_vectors(const slm_tokenizer *t, const char *file, int add) {
    pair_ctx c = {t, add};
    int total = 0, pass = vocab_pairs_at(DIR, file, pair_check, &c, &total);
    CHECKF(total >= 80 && pass == total, "%s: %d of %d vectors", file, pass, total);
    fprintf(stderr, "  %s: %d/%d vectors\n", file, pass, total);
}

static void test_vectors(void) {
    for (size_t k = 0; k < sizeof VOCABS / sizeof VOCABS[0]; k++) {
        gvocab v;
        slm_err err = {0};
        char p[512];
        snprintf(p, sizeof p, "%s/%s", DIR, VOCABS[k].file);
        slm_status st = load(&v, p, &err);
        CHECKF(st == SLM_OK, "%s", err.msg);
        if (st == SLM_OK) {
            CHECK(slm_tok_is_ugm(v.t) && !slm_tok_is_wpm(v.t) && !slm_tok_is_bpe(v.t));
            run_vectors(v.t, VOCABS[k].file, VOCABS[k].add);
            /* the blob's record: the same ids, and saved back byte for byte */
            uint8_t *rec = NULL, *rec2 = NULL;
            size_t n = 0, n2 = 0;
            slm_tokenizer *t2 = NULL;
            CHECK(slm_tok_save(v.t, &rec, &n, &err) == SLM_OK && n > 4 && !memcmp(rec, "SLPU", 4));
            CHECKF(slm_tok_load_mem(&t2, rec, n, "section", &err) == SLM_OK, "%s", err.msg);
            if (t2) {
                run_vectors(t2, VOCABS[k].file, VOCABS[k].add);
                CHECK(slm_tok_save(t2, &rec2, &n2, &err) == SLM_OK && n2 == n && !memcmp(rec, rec2, n));
                CHECK(slm_tok_bos(t2) == slm_tok_bos(v.t) && slm_tok_eos(t2) == slm_tok_eos(v.t));
            }
            slm_tok_free(t2);
            slm_xfree(rec);
            slm_xfree(rec2);
        }
        unload(&v);
    }
}

static int enc(const slm_tokenizer *t, const char *s, const uint8_t *plain, int add, int32_t *ids, int cap) {
    return slm_tok_encode_masked(t, s, plain, add, add, ids, cap);
}

/* Special-token text left as text (llama-tokenize --no-parse-special), the
 * BOS/EOS flags and defaults, ids of a few texts from llama-tokenize. */
static void test_special_and_flags(void) {
    gvocab x, t5;
    slm_err err = {0};
    CHECKF(load(&x, DIR "/xlmr.gguf", &err) == SLM_OK, "%s", err.msg);
    CHECKF(load(&t5, DIR "/t5.gguf", &err) == SLM_OK, "%s", err.msg);
    if (!x.t || !t5.t) goto out;
    int32_t ids[64];
    uint8_t plain[64];
    memset(plain, 1, sizeof plain);
    /* xlmr: "<s> a </s>" with --no-parse-special */
    static const int32_t want_x[] = {0, 4, 3, 7, 3, 4, 46, 4, 3, 193, 7, 3, 2};
    int n = enc(x.t, "<s> a </s>", plain, 1, ids, 64);
    CHECK(n == 13 && !memcmp(ids, want_x, sizeof want_x));
    /* parsed: <s> and </s> are their tokens (" a " -> "\u2581" "a") */
    static const int32_t want_xp[] = {0, 0, 4, 46, 2, 2};
    n = slm_tok_encode(x.t, "<s> a </s>", 1, 1, ids, 64);
    CHECK(n == 6 && !memcmp(ids, want_xp, sizeof want_xp));
    /* user-defined tokens match either way (t5 no-parse: llama-tokenize gives the same) */
    int a = enc(t5.t, "<extra_id_0>x<ud>y", plain, 0, ids, 64);
    int32_t ids2[64];
    int b = slm_tok_encode(t5.t, "<extra_id_0>x<ud>y", 0, 0, ids2, 64);
    CHECK(a == b && a > 2 && !memcmp(ids, ids2, sizeof *ids * (size_t)a));
    /* t5: no add_bos/add_eos keys: llama.cpp's defaults, no BOS, EOS (</s> = 1) */
    CHECK(slm_tok_bos(t5.t) == -1 && slm_tok_eos(t5.t) == 1);
    n = slm_tok_encode(t5.t, "hello", 1, 1, ids, 64);
    b = slm_tok_encode(t5.t, "hello", 0, 0, ids2, 64);
    CHECK(n == b + 1 && ids[n - 1] == 1 && !memcmp(ids, ids2, sizeof *ids * (size_t)b));
    /* xlmr: empty and all-space texts are <s> </s> (remove_extra_whitespaces) */
    CHECK(slm_tok_encode(x.t, "", 1, 1, ids, 64) == 2 && ids[0] == 0 && ids[1] == 2);
    CHECK(slm_tok_encode(x.t, "   \t\n ", 1, 1, ids, 64) == 2);
    CHECK(slm_tok_encode(x.t, "", 0, 0, ids, 64) == 0);
    CHECK(slm_tok_encode(x.t, "a", 1, 0, ids, 64) == 3 && ids[0] == 0 && ids[1] == 4 && ids[2] == 46);
out:
    unload(&x);
    unload(&t5);
}

/* Pieces as llama.cpp's token_to_piece gives them; the first piece loses
 * the dummy prefix's space, one after BOS keeps it. */
static void test_decode(void) {
    gvocab x;
    slm_err err = {0};
    CHECKF(load(&x, DIR "/xlmr.gguf", &err) == SLM_OK, "%s", err.msg);
    if (!x.t) goto out;
    int32_t ids[64];
    int n = slm_tok_encode(x.t, "Hello world! Le café", 1, 1, ids, 64);
    CHECK(n > 4);
    char s[256] = "";
    for (int i = 1; i < n - 1; i++) strcat(s, slm_tok_decode(x.t, i > 1 ? ids[i - 1] : -1, ids[i]));
    CHECKF(!strcmp(s, "Hello world! Le café"), "'%s'", s);
    CHECK(slm_tok_decode(x.t, 0, ids[1])[0] == ' ');    /* after <s>: the space stays */
    CHECK(!strcmp(slm_tok_decode(x.t, -1, 0), "<s>"));  /* control: as spelled */
    CHECK(!strcmp(slm_tok_decode(x.t, -1, 3), "<unk>")); /* unknown: as spelled */
    CHECK(!strcmp(slm_tok_decode(x.t, -1, slm_tok_vocab_size(x.t) - 1), "")); /* unused [PAD..] */
    CHECK(!strcmp(slm_tok_decode(x.t, -1, -1), "") && !strcmp(slm_tok_decode(x.t, -1, 1 << 30), ""));
    CHECK(slm_tok_type(x.t, 0) == 3 && slm_tok_type(x.t, 3) == 2 && slm_tok_type(x.t, 10) == 1);
    CHECK(!strcmp(slm_tok_str(x.t, 0), "<s>") && slm_tok_score(x.t, 10) < 0.0f);
out:
    unload(&x);
}

/* Long texts: a 200 KB word, a long run of unknown code points (merged into
 * one <unk>), bad UTF-8 throughout; counts consistent with a short array. */
static void test_long(void) {
    gvocab x;
    slm_err err = {0};
    CHECKF(load(&x, DIR "/xlmr.gguf", &err) == SLM_OK, "%s", err.msg);
    if (!x.t) goto out;
    const size_t L = 200000;
    char *s = malloc(L + 1);
    memset(s, 'x', L);
    s[L] = 0;
    int n = slm_tok_encode(x.t, s, 1, 1, NULL, 0);
    int32_t one;
    CHECK(n > 2 && n <= (int)L + 3 && slm_tok_encode(x.t, s, 1, 1, &one, 1) == n && one == 0);
    /* U+10FFFF (no token, no charsmap entry) repeated: <s> ▁ <unk> </s> */
    for (size_t i = 0; i + 4 <= L; i += 4) memcpy(s + i, "\xf4\x8f\xbf\xbf", 4);
    s[L - L % 4] = 0;
    int32_t ids[8];
    n = slm_tok_encode(x.t, s, 1, 1, ids, 8);
    CHECKF(n == 4 && ids[1] == 4 && ids[2] == 3, "n=%d", n);
    /* bytes 0x80..0xFF cycling: each invalid byte is U+FFFD, all one <unk> run */
    for (size_t i = 0; i < L; i++) s[i] = (char)(0x80 | (i & 0x7F));
    s[L] = 0;
    n = slm_tok_encode(x.t, s, 1, 1, ids, 8);
    CHECKF(n >= 3 && n <= 8, "n=%d", n);
    free(s);
out:
    unload(&x);
}

/* ---- damaged charsmaps ----------------------------------------------- */

typedef struct parts {
    int n;
    const char **tok;
    uint32_t *len;
    float *score;
    uint8_t *type;
    uint8_t *cm;
    size_t cm_len;
} parts;

static int get_parts(parts *p, const slm_gguf *g) {
    memset(p, 0, sizeof *p);
    slm_gguf_type et;
    uint64_t n, c;
    const void *d, *sc, *ty, *cm;
    if (!slm_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n, &d) ||
        !slm_gguf_get_arr(g, "tokenizer.ggml.scores", &et, &c, &sc) ||
        !slm_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &c, &ty) || !slm_gguf_get_arr(g, CM_KEY, &et, &c, &cm))
        return 0;
    p->n = (int)n;
    p->tok = malloc(n * sizeof *p->tok);
    p->len = malloc(n * sizeof *p->len);
    p->score = malloc(n * sizeof *p->score);
    p->type = malloc(n);
    for (uint64_t i = 0; i < n; i++) {
        slm_gguf_str s;
        slm_gguf_arr_str(g, "tokenizer.ggml.tokens", i, &s);
        p->tok[i] = s.s;
        p->len[i] = (uint32_t)s.len;
        memcpy(&p->score[i], (const uint8_t *)sc + 4 * i, 4);
        int32_t t;
        memcpy(&t, (const uint8_t *)ty + 4 * i, 4);
        p->type[i] = (uint8_t)t;
    }
    p->cm_len = (size_t)c;
    p->cm = malloc(p->cm_len);
    memcpy(p->cm, cm, p->cm_len);
    return 1;
}

static void free_parts(parts *p) {
    free(p->tok);
    free(p->len);
    free(p->score);
    free(p->type);
    free(p->cm);
}

static const slm_ugm_meta XLMR_META = {0, 2, 3, 1, 2, 1, 1, 1, 1};

/* Build from parts with charsmap cm; SLM_OK or the status (err filled). */
static slm_status build(const parts *p, const uint8_t *cm, size_t cm_len, slm_ugm **u, slm_err *err) {
    return slm_ugm_build(u, p->tok, p->len, p->score, p->type, p->n, &XLMR_META, cm, cm_len, "xlmr.gguf", CM_KEY, err);
}

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static void wr32(uint8_t *p, uint32_t v) {
    for (int k = 0; k < 4; k++) p[k] = (uint8_t)(v >> (8 * k));
}
static uint32_t base_of(uint32_t e) { return (e >> 10) << ((e & (1u << 9)) >> 6); }

/* Walk the double array along key; the entry of its last byte (the leaf),
 * or -1. */
static int64_t walk(const uint8_t *cm, const char *key) {
    const uint32_t n = rd32(cm) / 4;
    uint32_t t = base_of(rd32(cm + 4));
    int64_t last = -1;
    for (const uint8_t *k = (const uint8_t *)key; *k; k++) {
        const uint32_t idx = t ^ *k;
        if (idx >= n) return -1;
        const uint32_t e = rd32(cm + 4 + 4 * (size_t)idx);
        if ((e & ((1u << 31) | 0xFF)) != *k) return -1;
        last = idx;
        t = idx ^ base_of(e);
    }
    return last;
}

static void expect_refused(const parts *p, const uint8_t *cm, size_t len, const char *what, const char *needle) {
    slm_ugm *u = NULL;
    slm_err err = {0};
    slm_status st = build(p, cm, len, &u, &err);
    CHECKF(st == SLM_ERR_FORMAT && !u && strstr(err.msg, "xlmr.gguf") && strstr(err.msg, CM_KEY) &&
               strstr(err.msg, needle),
           "%s: %d '%s'", what, st, err.msg);
    slm_ugm_free(u);
}

static void test_charsmap_damage(void) {
    gvocab x;
    slm_err err = {0};
    CHECKF(load(&x, DIR "/xlmr.gguf", &err) == SLM_OK, "%s", err.msg);
    parts p;
    if (!x.t || !get_parts(&p, x.g)) {
        CHECK(0);
        unload(&x);
        return;
    }
    slm_ugm *u = NULL;
    CHECKF(build(&p, p.cm, p.cm_len, &u, &err) == SLM_OK, "%s", err.msg); /* the intact one */
    slm_ugm_free(u);
    uint8_t *cm = malloc(p.cm_len);
    const uint32_t blob = rd32(p.cm), repl_len = (uint32_t)(p.cm_len - 4 - blob);
    /* sizes */
    expect_refused(&p, p.cm, 3, "3 bytes", "too few");
    memcpy(cm, p.cm, p.cm_len);
    wr32(cm, (uint32_t)p.cm_len - 4);
    expect_refused(&p, cm, p.cm_len, "trie fills all", "no replacement strings");
    wr32(cm, 0xFFFFFFF0u);
    expect_refused(&p, cm, p.cm_len, "trie size huge", "no replacement strings");
    /* "ﬁ" (U+FB01) maps to "fi": its leaf and value entry */
    const int64_t leaf = walk(p.cm, "\xef\xac\x81");
    CHECK(leaf >= 0);
    if (leaf >= 0) {
        const uint32_t e = rd32(p.cm + 4 + 4 * (size_t)leaf);
        CHECK(e >> 8 & 1);
        const uint32_t vidx = (uint32_t)leaf ^ base_of(e);
        /* a value beyond the strings */
        memcpy(cm, p.cm, p.cm_len);
        wr32(cm + 4 + 4 * (size_t)vidx, (1u << 31) | (repl_len + 5));
        expect_refused(&p, cm, p.cm_len, "value beyond", "beyond");
        /* a value at the last byte, made not NUL */
        memcpy(cm, p.cm, p.cm_len);
        wr32(cm + 4 + 4 * (size_t)vidx, (1u << 31) | (repl_len - 1));
        cm[p.cm_len - 1] = 'x';
        expect_refused(&p, cm, p.cm_len, "no NUL", "not NUL-terminated");
        /* the leaf's base made huge: its value index beyond the array */
        memcpy(cm, p.cm, p.cm_len);
        wr32(cm + 4 + 4 * (size_t)leaf, (e & 0x1FF) | (1u << 9) | (0x1FFFFFu << 10));
        expect_refused(&p, cm, p.cm_len, "base huge", "beyond");
        /* the trie cut short: entries beyond it */
        memcpy(cm, p.cm, p.cm_len);
        const uint32_t cut = (uint32_t)(leaf / 2) * 4;
        wr32(cm, cut);
        memmove(cm + 4 + cut, p.cm + 4 + blob, repl_len);
        expect_refused(&p, cm, 4 + cut + repl_len, "trie cut", "beyond");
    }
    /* random damage: refused, or loaded and encoding stays in bounds (ASan) */
    uint32_t rng = 12345;
    int loaded = 0;
    for (int it = 0; it < 300; it++) {
        memcpy(cm, p.cm, p.cm_len);
        for (int k = 0; k < 1 + it % 8; k++) {
            rng = rng * 1103515245u + 12345u;
            const size_t at = 4 + (rng >> 8) % (blob < 4096 ? blob : 4096);
            rng = rng * 1103515245u + 12345u;
            cm[at] ^= (uint8_t)(1u << (rng >> 28 & 7));
        }
        u = NULL;
        slm_err e2 = {0};
        if (build(&p, cm, p.cm_len, &u, &e2) == SLM_OK) {
            loaded++;
            static const char text[] = "Ｆｕｌｌ ﬁne ① x² café \xff Straße 東京 😀 ";
            int32_t ids[256];
            const int n = slm_ugm_encode(u, text, sizeof text - 1, NULL, 1, 1, 1, ids, 256);
            CHECK(n >= 2 || n == SLM_TOK_EBUDGET);
            for (int i = 0; i < n && i < 256; i++) CHECK(ids[i] >= 0 && ids[i] < p.n);
        } else {
            CHECK(strstr(e2.msg, CM_KEY) != NULL);
        }
        slm_ugm_free(u);
    }
    fprintf(stderr, "  random damage: %d of 300 loaded\n", loaded);
    free(cm);
    free_parts(&p);
    unload(&x);
}

/* ---- malformed metadata and records ---------------------------------- */

static const char *const MINI[] = {"<pad>", "</s>", "<unk>", "\xe2\x96\x81" "a", "b", "\xe2\x96\x81" "ab"};
#define N_MINI 6

/* A small t5 GGUF at path; what: the damage (0 none). */
static int write_mini(const char *path, int what) {
    uint64_t lens[N_MINI];
    int32_t types[N_MINI] = {3, 3, 2, 1, 1, 1};
    float scores[N_MINI] = {0, 0, 0, -1, -2, -1.5f};
    const char *toks[N_MINI];
    for (int i = 0; i < N_MINI; i++) toks[i] = MINI[i], lens[i] = strlen(MINI[i]);
    if (what == 1) toks[4] = MINI[3], lens[4] = lens[3]; /* a duplicate */
    if (what == 2) types[4] = 9;
    slm_gguf_writer *w = slm_gguf_writer_new();
    slm_gguf_set_str(w, "tokenizer.ggml.model", "t5");
    slm_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, lens, N_MINI);
    slm_gguf_set_arr(w, "tokenizer.ggml.token_type", SLM_GGUF_I32, types, N_MINI);
    slm_gguf_set_arr(w, "tokenizer.ggml.scores", SLM_GGUF_F32, scores, what == 3 ? N_MINI - 1 : N_MINI);
    if (what == 4) slm_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 60);
    if (what == 5) slm_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", 1); /* and no BOS id */
    if (what == 6) slm_gguf_set_arr(w, CM_KEY, SLM_GGUF_I32, types, N_MINI);
    if (what == 7) slm_gguf_set_arr(w, CM_KEY, SLM_GGUF_U8, "\x10\0\0\0abc", 7);
    if (what == 8) slm_gguf_set_u32(w, "tokenizer.ggml.add_space_prefix", 1);
    slm_err err = {0};
    slm_status st = slm_gguf_write(w, path, &err);
    slm_gguf_writer_free(w);
    return st == SLM_OK;
}

static void test_malformed(void) {
    char dir[] = "/tmp/slm_ugm_XXXXXX";
    if (!mkdtemp(dir)) return;
    char path[64];
    snprintf(path, sizeof path, "%s/mini.gguf", dir);
    static const char *const want[] = {NULL, "the same spelling", "token_type[4]", "scores", "unknown_token_id",
                                       "add_bos_token", CM_KEY, CM_KEY, "add_space_prefix"};
    for (int what = 0; what < 9; what++) {
        CHECK(write_mini(path, what));
        gvocab v;
        slm_err err = {0};
        slm_status st = load(&v, path, &err);
        if (!what) {
            CHECKF(st == SLM_OK, "%s", err.msg);
            int32_t ids[8];
            /* no dummy prefix (the key's default): "a" is no token (<unk> = 2), "b" = 4; then </s> */
            int n = slm_tok_encode(v.t, "ab", 1, 1, ids, 8);
            CHECK(n == 3 && ids[0] == 2 && ids[1] == 4 && ids[2] == 1);
        } else {
            CHECKF(st != SLM_OK && !v.t && strstr(err.msg, "mini.gguf") && strstr(err.msg, want[what]), "case %d: %s",
                   what, err.msg);
        }
        unload(&v);
    }
    unlink(path);
    rmdir(dir);
    /* serialized records: every truncation refused; a bad flag refused */
    gvocab x;
    slm_err err = {0};
    if (load(&x, DIR "/t5.gguf", &err) == SLM_OK) {
        uint8_t *rec = NULL;
        size_t n = 0;
        CHECK(slm_tok_save(x.t, &rec, &n, &err) == SLM_OK);
        int refused = 0;
        for (size_t cut = 0; cut < n; cut += 1 + cut / 16) {
            slm_tokenizer *t = NULL;
            refused += slm_tok_load_mem(&t, rec, cut, "section", &err) != SLM_OK && !t;
            slm_tok_free(t);
        }
        size_t tries = 0;
        for (size_t cut = 0; cut < n; cut += 1 + cut / 16) tries++;
        CHECK(refused == (int)tries);
        rec[4 + 28] = 2; /* add_space_prefix 2 */
        slm_tokenizer *t = NULL;
        CHECK(slm_tok_load_mem(&t, rec, n, "section", &err) != SLM_OK && strstr(err.msg, "flag"));
        slm_tok_free(t);
        slm_xfree(rec);
    }
    unload(&x);
}

/* ---- allocation failures ---------------------------------------------- */

static int g_fail_at, g_allocs;
static void *inj_alloc(void *ud, size_t n) {
    (void)ud;
    return ++g_allocs == g_fail_at ? NULL : malloc(n ? n : 1);
}
static void *inj_realloc(void *ud, void *p, size_t n) {
    (void)ud;
    return ++g_allocs == g_fail_at ? NULL : realloc(p, n ? n : 1);
}
static void inj_free(void *ud, void *p) {
    (void)ud;
    free(p);
}

static void test_alloc_failures(void) {
    gvocab v;
    slm_err err = {0};
    if (load(&v, DIR "/t5.gguf", &err) != SLM_OK) {
        CHECK(0);
        unload(&v);
        return;
    }
    uint8_t *rec = NULL;
    size_t n = 0;
    CHECK(slm_tok_save(v.t, &rec, &n, &err) == SLM_OK);
    slm_allocator inj = {inj_alloc, inj_realloc, inj_free, NULL};
    for (int mode = 0; mode < 3; mode++) {
        int failures = 0;
        for (g_fail_at = 1;; g_fail_at++) {
            slm_tokenizer *t = NULL;
            int32_t ids[64];
            int rc = 0;
            g_allocs = 0;
            slm_set_allocator(&inj);
            slm_status st = mode == 1 ? slm_tok_load_mem(&t, rec, n, "section", &err)
                            : mode == 0 ? slm_tok_load_gguf(&t, v.g, "t5.gguf", &err)
                                        : SLM_OK;
            if (mode == 2) rc = slm_tok_encode(v.t, "Hello <ud> world ＡＢＣ", 1, 1, ids, 64);
            slm_set_allocator(NULL);
            if (mode == 2) {
                if (rc >= 0) break;
                CHECK(rc == SLM_TOK_ENOMEM);
                failures++;
                continue;
            }
            if (st == SLM_OK) {
                CHECK(g_fail_at > g_allocs);
                slm_tok_free(t);
                break;
            }
            CHECKF(st == SLM_ERR_NOMEM && !t, "mode %d at %d: %d %s", mode, g_fail_at, st, err.msg);
            failures++;
        }
        CHECK(failures >= 3);
    }
    slm_xfree(rec);
    unload(&v);
}

int main(void) {
    T_RUN(test_vectors);
    T_RUN(test_special_and_flags);
    T_RUN(test_decode);
    T_RUN(test_long);
    T_RUN(test_charsmap_damage);
    T_RUN(test_malformed);
    T_RUN(test_alloc_failures);
    T_DONE();
}
