/* Tokenizer tests: run.c goldens (tokenize.json, prompt ids), decode round
 * trips, llama.cpp's SPM test vectors (llama-spm, phi-3), malformed
 * tokenizer.bin files, GGUF metadata errors, speed and allocation count. */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "t.h"
#include "format/gguf.h"
#include "text/tokenizer.h"

#define TOK512 T_SHARED("models/tok512.bin")
#define LLAMA2 T_SHARED("models/llama2-tokenizer.bin")

static slm_tokenizer *load_bin(const char *path, int vocab) {
    slm_tokenizer *t = NULL;
    slm_err err = {0};
    slm_status st = slm_tok_load_llama2c(&t, path, vocab, &err);
    CHECKF(st == SLM_OK && t, "%s: %s", path, err.msg);
    return st == SLM_OK ? t : NULL;
}

/* A GGUF vocabulary: the mapping and reader stay open with the tokenizer. */
typedef struct gvocab {
    slm_map map;
    slm_gguf *g;
    slm_tokenizer *t;
} gvocab;

static slm_status load_gguf(gvocab *v, const char *path, slm_err *err) {
    memset(v, 0, sizeof *v);
    slm_status st = slm_map_file(&v->map, path, err);
    if (st != SLM_OK) return st;
    st = slm_gguf_open(&v->g, v->map.data, v->map.size, slm_basename(path), err);
    if (st != SLM_OK) return st;
    return slm_tok_load_gguf(&v->t, v->g, slm_basename(path), err);
}

static void free_gguf(gvocab *v) {
    slm_tok_free(v->t);
    if (v->g) slm_gguf_close(v->g);
    slm_unmap(&v->map);
}

/* Encode into a growing array; returns the count (ids malloc'd). */
static int encode(const slm_tokenizer *t, const char *s, int bos, int eos, int32_t **ids) {
    int cap = 16;
    *ids = malloc(sizeof **ids * (size_t)cap);
    int n = slm_tok_encode(t, s, bos, eos, *ids, cap);
    if (n > cap) {
        free(*ids);
        *ids = malloc(sizeof **ids * (size_t)n);
        int n2 = slm_tok_encode(t, s, bos, eos, *ids, n);
        CHECK(n2 == n);
    }
    return n;
}

static void print_ids(const char *label, const int32_t *ids, int n) {
    fprintf(stderr, "    %s:", label);
    for (int i = 0; i < n; i++) fprintf(stderr, " %d", (int)ids[i]);
    fputc('\n', stderr);
}

static int same_ids(const int32_t *a, int na, const int32_t *b, int nb) {
    if (na != nb) return 0;
    for (int i = 0; i < na; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

/* Parse whitespace-separated integers. */
static int parse_ids(const char *s, int32_t *out, int cap) {
    int n = 0;
    char *end;
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == '\r') s++;
        if (*s == 0 || *s == '\n') break;
        long v = strtol(s, &end, 10);
        if (end == s) break;
        if (n < cap) out[n] = (int32_t)v;
        n++;
        s = end;
    }
    return n;
}

/* ---- a tiny JSON reader for tokenize.json ------------------------------- */

typedef struct jp {
    const char *p;
    int ok;
} jp;

static void j_ws(jp *j) {
    while (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t') j->p++;
}

static int j_lit(jp *j, char c) {
    j_ws(j);
    if (*j->p != c) { j->ok = 0; return 0; }
    j->p++;
    return 1;
}

static int j_hex4(jp *j, unsigned *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = *j->p++;
        unsigned d;
        if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') d = (unsigned)(c - 'A' + 10);
        else return 0;
        *v = *v * 16 + d;
    }
    return 1;
}

static size_t put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | ((cp >> 6) & 63));
        o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | ((cp >> 12) & 63));
    o[2] = (char)(0x80 | ((cp >> 6) & 63)); o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

/* A string into a malloc'd buffer (NUL-terminated). */
static char *j_str(jp *j) {
    if (!j_lit(j, '"')) return NULL;
    char *o = malloc(strlen(j->p) + 1), *w = o;
    while (*j->p && *j->p != '"') {
        if (*j->p != '\\') { *w++ = *j->p++; continue; }
        j->p++;
        char c = *j->p++;
        switch (c) {
        case 'n': *w++ = '\n'; break;
        case 't': *w++ = '\t'; break;
        case 'r': *w++ = '\r'; break;
        case 'b': *w++ = '\b'; break;
        case 'f': *w++ = '\f'; break;
        case '/': *w++ = '/'; break;
        case '"': *w++ = '"'; break;
        case '\\': *w++ = '\\'; break;
        case 'u': {
            unsigned cp, lo;
            if (!j_hex4(j, &cp)) { j->ok = 0; break; }
            if (cp >= 0xD800 && cp < 0xDC00 && j->p[0] == '\\' && j->p[1] == 'u') {
                j->p += 2;
                if (!j_hex4(j, &lo) || lo < 0xDC00 || lo >= 0xE000) { j->ok = 0; break; }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            w += put_utf8(w, cp);
            break;
        }
        default: j->ok = 0;
        }
    }
    *w = 0;
    if (*j->p != '"') j->ok = 0;
    else j->p++;
    return o;
}

typedef struct tk_case {
    char *tokenizer; /* "tok512" or "llama2" */
    char *prompt;
    int32_t ids[256];
    int n_ids;
} tk_case;

static int j_case(jp *j, tk_case *c) {
    memset(c, 0, sizeof *c);
    if (!j_lit(j, '{')) return 0;
    for (;;) {
        char *key = j_str(j);
        if (!key || !j_lit(j, ':')) { free(key); return 0; }
        if (!strcmp(key, "ids")) {
            j_lit(j, '[');
            j_ws(j);
            while (j->ok && *j->p != ']') {
                char *end;
                long v = strtol(j->p, &end, 10);
                if (end == j->p) { j->ok = 0; break; }
                if (c->n_ids < 256) c->ids[c->n_ids++] = (int32_t)v;
                j->p = end;
                j_ws(j);
                if (*j->p == ',') { j->p++; j_ws(j); }
            }
            j_lit(j, ']');
        } else if (!strcmp(key, "tokenizer")) {
            c->tokenizer = j_str(j);
        } else if (!strcmp(key, "prompt")) {
            c->prompt = j_str(j);
        } else {
            j->ok = 0;
        }
        free(key);
        j_ws(j);
        if (*j->p == ',') { j->p++; continue; }
        return j_lit(j, '}') && j->ok;
    }
}

static void test_json_reader(void) {
    jp j = {"\"a\\u00e9\\ud83e\\udd99\\n\\t\\\"\\\\z\"", 1};
    char *s = j_str(&j);
    CHECK(j.ok);
    CHECK(s && !strcmp(s, "a\xc3\xa9\xf0\x9f\xa6\x99\n\t\"\\z"));
    free(s);
}

static void test_tokenize_json(void) {
    char *json = t_read_file(T_SHARED("models/golden/tokenize.json"), NULL);
    CHECK(json != NULL);
    if (!json) return;
    slm_tokenizer *t512 = load_bin(TOK512, 512), *tl2 = load_bin(LLAMA2, 32000);
    if (!t512 || !tl2) { free(json); slm_tok_free(t512); slm_tok_free(tl2); return; }
    jp j = {json, 1};
    int n_cases = 0, n_bad = 0;
    j_lit(&j, '[');
    for (;;) {
        tk_case c;
        if (!j_case(&j, &c)) { CHECKF(0, "tokenize.json: parse error near '%.20s'", j.p); break; }
        const slm_tokenizer *t = !strcmp(c.tokenizer, "tok512") ? t512 : tl2;
        CHECK(!strcmp(c.tokenizer, "tok512") || !strcmp(c.tokenizer, "llama2"));
        int32_t *ids;
        int n = encode(t, c.prompt, 1, 0, &ids);
        n_cases++;
        if (!same_ids(ids, n, c.ids, c.n_ids)) {
            n_bad++;
            CHECKF(0, "%s: \"%s\"", c.tokenizer, c.prompt);
            print_ids("want", c.ids, c.n_ids);
            print_ids("got ", ids, n);
        }
        /* EOS goes last */
        int32_t *ide;
        int ne = encode(t, c.prompt, 1, 1, &ide);
        CHECK(ne == n + 1 && ide[n] == slm_tok_eos(t));
        free(ide);
        free(ids);
        free(c.tokenizer);
        free(c.prompt);
        j_ws(&j);
        if (*j.p == ',') { j.p++; continue; }
        CHECK(j_lit(&j, ']'));
        break;
    }
    fprintf(stderr, "  tokenize.json: %d cases, %d mismatches\n", n_cases, n_bad);
    CHECK(n_cases == 14);
    slm_tok_free(t512);
    slm_tok_free(tl2);
    free(json);
}

static void test_golden_prompts(void) {
    slm_tokenizer *t = load_bin(TOK512, 512);
    if (!t) return;
    const char *root = T_SHARED("models/golden");
    DIR *d = opendir(root);
    CHECK(d != NULL);
    int n_files = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char sub[1024];
        snprintf(sub, sizeof sub, "%s/%s", root, e->d_name);
        DIR *d2 = opendir(sub);
        if (!d2) continue;
        struct dirent *f;
        while ((f = readdir(d2))) {
            size_t L = strlen(f->d_name);
            const char *suf = ".prompt.txt";
            if (L <= strlen(suf) || strcmp(f->d_name + L - strlen(suf), suf)) continue;
            char p[1400], q[1400];
            snprintf(p, sizeof p, "%s/%s", sub, f->d_name);
            snprintf(q, sizeof q, "%s/%.*s.prompt_ids.txt", sub, (int)(L - strlen(suf)), f->d_name);
            char *prompt = t_read_file(p, NULL), *want_s = t_read_file(q, NULL);
            CHECKF(prompt && want_s, "%s", p);
            if (prompt && want_s) {
                int32_t want[512];
                int nw = parse_ids(want_s, want, 512);
                int32_t *ids;
                int n = encode(t, prompt, 1, 0, &ids);
                CHECKF(same_ids(ids, n, want, nw), "%s", p);
                if (!same_ids(ids, n, want, nw)) { print_ids("want", want, nw); print_ids("got ", ids, n); }
                free(ids);
                n_files++;
            }
            free(prompt);
            free(want_s);
        }
        closedir(d2);
    }
    if (d) closedir(d);
    fprintf(stderr, "  %d golden prompts\n", n_files);
    CHECK(n_files >= 9);
    slm_tok_free(t);
}

static void test_accessors(void) {
    slm_tokenizer *t = load_bin(TOK512, 512);
    if (!t) return;
    CHECK(slm_tok_vocab_size(t) == 512);
    CHECK(slm_tok_bos(t) == 1 && slm_tok_eos(t) == 2);
    CHECK(!strcmp(slm_tok_str(t, 1), "\n<s>\n"));
    CHECK(!strcmp(slm_tok_str(t, 410), " "));
    CHECK(!strcmp(slm_tok_str(t, 3), "<0x00>"));
    CHECK(!strcmp(slm_tok_str(t, 259), " t"));
    CHECK(slm_tok_score(t, 259) == -0.0f || slm_tok_score(t, 259) < 0);
    CHECK(slm_tok_type(t, 0) == 2 && slm_tok_type(t, 1) == 3 && slm_tok_type(t, 2) == 3);
    CHECK(slm_tok_type(t, 3) == 6 && slm_tok_type(t, 258) == 6 && slm_tok_type(t, 259) == 1);
    CHECK(slm_tok_str(t, -1) == NULL && slm_tok_str(t, 512) == NULL);
    CHECK(slm_tok_type(t, 512) == 0 && slm_tok_score(t, -5) == 0.0f);
    CHECK(!strcmp(slm_tok_decode(t, 0, 512), "") && !strcmp(slm_tok_decode(t, 0, -1), ""));
    /* byte tokens decode to the raw byte, after BOS too */
    CHECK(!strcmp(slm_tok_decode(t, 5, 3 + 'A'), "A"));
    CHECK(!strcmp(slm_tok_decode(t, 1, 3 + 0xE2), "\xE2"));
    CHECK(!strcmp(slm_tok_decode(t, 1, 3 + ' '), " "));
    /* the space after BOS goes, elsewhere it stays */
    CHECK(!strcmp(slm_tok_decode(t, 1, 259), "t"));
    CHECK(!strcmp(slm_tok_decode(t, 300, 259), " t"));
    /* truncated output reports the full count */
    int32_t ids[2];
    int n = slm_tok_encode(t, "Once upon a time", 1, 0, ids, 2);
    CHECK(n == 5 && ids[0] == 1 && ids[1] == 403);
    CHECK(slm_tok_encode(t, "Once upon a time", 1, 1, NULL, 0) == 6);
    CHECK(slm_tok_encode(t, "", 0, 0, ids, 2) == 0);
    CHECK(slm_tok_encode(t, "", 1, 1, ids, 2) == 2 && ids[0] == 1 && ids[1] == 2);
    slm_tok_free(t);
    slm_tok_free(NULL);
}

/* Concatenated decode of ids (ids[0] must be BOS). */
static char *decode_all(const slm_tokenizer *t, const int32_t *ids, int n) {
    size_t cap = 64, len = 0;
    char *o = malloc(cap);
    o[0] = 0;
    for (int i = 1; i < n; i++) {
        const char *p = slm_tok_decode(t, ids[i - 1], ids[i]);
        size_t k = strlen(p);
        if (slm_tok_type(t, ids[i]) == 6 && k == 0) k = 1; /* a raw 0x00 */
        while (len + k + 1 > cap) o = realloc(o, cap *= 2);
        memcpy(o + len, p, k);
        len += k;
        o[len] = 0;
    }
    return o;
}

static const char *const round_trip_texts[] = {
    "Once upon a time, there was a little girl named Lily.",
    " leading space",
    "  two leading spaces and trailing  ",
    "tabs\tand\nnewlines\n\n",
    "The caf\xc3\xa9 costs 3.50\xe2\x82\xac \xe2\x80\x94 na\xc3\xafve r\xc3\xa9sum\xc3\xa9",
    "emoji \xf0\x9f\xa6\x99\xf0\x9f\x9a\x80 end",
    "\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8\x61pple\xe5\xb7\xa5\xe4\xbd\x9c",
    "\xd0\xbd\xd0\xb5\xd1\x89\xd0\xbe \xd0\xbd\xd0\xb0",
    "bad utf8: \xff\xfe \x80\x80 \xc3 \xe2\x82 \xf0\x9f\xa6 end\xc3",
    "\x01\x02\x7f control",
    "x",
    " ",
};

static void round_trip(const slm_tokenizer *t, const char *label) {
    for (size_t k = 0; k < sizeof round_trip_texts / sizeof *round_trip_texts; k++) {
        const char *s = round_trip_texts[k];
        int32_t *ids;
        int n = encode(t, s, 1, 0, &ids);
        CHECK(n >= 2 && ids[0] == slm_tok_bos(t));
        char *d = decode_all(t, ids, n);
        CHECKF(!strcmp(d, s), "%s: round trip of \"%s\" gave \"%s\"", label, s, d);
        free(d);
        free(ids);
    }
}

static void test_round_trip(void) {
    slm_tokenizer *t512 = load_bin(TOK512, 512), *tl2 = load_bin(LLAMA2, 32000);
    if (t512) round_trip(t512, "tok512");
    if (tl2) round_trip(tl2, "llama2");
    if (t512) {
        /* byte fallback: every byte of an emoji is a byte token */
        int32_t *ids;
        int n = encode(t512, "\xf0\x9f\xa6\x99", 1, 0, &ids);
        CHECK(n == 6 && ids[2] == 3 + 0xf0 && ids[5] == 3 + 0x99);
        if (n == 6) CHECK(!strcmp(slm_tok_decode(t512, ids[2], ids[3]), "\x9f"));
        free(ids);
    }
    slm_tok_free(t512);
    slm_tok_free(tl2);
}

/* ---- differential test against a direct port of run.c's encode() -------- */

typedef struct ref_vocab {
    const slm_tokenizer *t;
    int n;
    int *sorted; /* ids sorted by string (strcmp) */
} ref_vocab;

static const ref_vocab *g_ref;
static int ref_cmp(const void *a, const void *b) {
    return strcmp(slm_tok_str(g_ref->t, *(const int *)a), slm_tok_str(g_ref->t, *(const int *)b));
}

static int ref_lookup(const ref_vocab *v, const char *s) {
    int lo = 0, hi = v->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strcmp(s, slm_tok_str(v->t, v->sorted[mid]));
        if (c == 0) return v->sorted[mid];
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return -1;
}

/* run.c encode(), O(n^2) scan, bos = 1 */
static int ref_encode(const ref_vocab *v, const char *text, int32_t *tokens) {
    char buf[256];
    size_t str_len = 0;
    int n = 0;
    tokens[n++] = 1;
    if (text[0]) tokens[n++] = ref_lookup(v, " ");
    for (const char *c = text; *c; c++) {
        if ((*c & 0xC0) != 0x80) str_len = 0;
        buf[str_len++] = *c;
        buf[str_len] = 0;
        if ((c[1] & 0xC0) == 0x80 && str_len < 4) continue;
        int id = ref_lookup(v, buf);
        if (id != -1) tokens[n++] = id;
        else
            for (size_t i = 0; i < str_len; i++) tokens[n++] = (unsigned char)buf[i] + 3;
        str_len = 0;
    }
    for (;;) {
        float best_score = -1e10f;
        int best_id = -1, best_idx = -1;
        for (int i = 0; i < n - 1; i++) {
            snprintf(buf, sizeof buf, "%s%s", slm_tok_str(v->t, tokens[i]),
                     slm_tok_str(v->t, tokens[i + 1]));
            int id = ref_lookup(v, buf);
            if (id != -1 && slm_tok_score(v->t, id) > best_score) {
                best_score = slm_tok_score(v->t, id);
                best_id = id;
                best_idx = i;
            }
        }
        if (best_idx == -1) break;
        tokens[best_idx] = best_id;
        for (int i = best_idx + 1; i < n - 1; i++) tokens[i] = tokens[i + 1];
        n--;
    }
    return n;
}

static void differential(const slm_tokenizer *t, const char *label) {
    ref_vocab v = {t, slm_tok_vocab_size(t), NULL};
    v.sorted = malloc(sizeof *v.sorted * (size_t)v.n);
    for (int i = 0; i < v.n; i++) v.sorted[i] = i;
    g_ref = &v;
    qsort(v.sorted, (size_t)v.n, sizeof *v.sorted, ref_cmp);
    static const char *const atoms[] = {
        " ", "  ", "a", "e", "t", "h", "the", "in", "ing", "O", "nce", "up", "on", ".", ",", "\n",
        "\t", "3", "14", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\xa6\x99", "\xe6\x88\x91", "\xff",
        "\x80", "\xc3", "\xe2\x82", "Lily", " Tom", "!!", "''", "\xd0\xbd\xd0\xb5", "<s>", "<0x41>",
        "   ", "    ", "aaaa", "3333", "!!!!!!", "\n\n",
    };
    const int n_atoms = (int)(sizeof atoms / sizeof *atoms);
    uint32_t seed = 777;
    int bad = 0;
    for (int iter = 0; iter < 400; iter++) {
        char text[200] = "";
        size_t len = 0;
        seed = seed * 1664525u + 1013904223u;
        int k = (int)(seed >> 24) % 24;
        for (int j = 0; j < k; j++) {
            seed = seed * 1664525u + 1013904223u;
            const char *a = atoms[(seed >> 16) % (uint32_t)n_atoms];
            if (len + strlen(a) + 1 > sizeof text) break;
            memcpy(text + len, a, strlen(a) + 1);
            len += strlen(a);
        }
        int32_t want[256], got[256];
        int nw = ref_encode(&v, text, want);
        int ng = slm_tok_encode(t, text, 1, 0, got, 256);
        if (!same_ids(want, nw, got, ng) && bad++ < 5) {
            CHECKF(0, "%s: \"%s\"", label, text);
            print_ids("run.c", want, nw);
            print_ids("got  ", got, ng);
        }
    }
    CHECK(bad == 0);
    free(v.sorted);
}

static void test_differential_runc(void) {
    slm_tokenizer *t512 = load_bin(TOK512, 512), *tl2 = load_bin(LLAMA2, 32000);
    if (t512) differential(t512, "tok512");
    if (tl2) differential(tl2, "llama2");
    slm_tok_free(t512);
    slm_tok_free(tl2);
}

/* ---- llama.cpp SPM test vectors ------------------------------------------ */

static void run_vocab_vectors(const char *vocab, int must_pass) {
    char p[512], pi[600], po[600];
    snprintf(p, sizeof p, "%s/vocab/ggml-vocab-%s.gguf", SLM_SHARED_DIR, vocab);
    snprintf(pi, sizeof pi, "%s.inp", p);
    snprintf(po, sizeof po, "%s.out", p);
    gvocab v;
    slm_err err = {0};
    slm_status st = load_gguf(&v, p, &err);
    CHECKF(st == SLM_OK, "%s: %s", vocab, err.msg);
    char *inp = t_read_file(pi, NULL), *out = t_read_file(po, NULL);
    CHECK(inp && out);
    if (st != SLM_OK || !inp || !out) { free(inp); free(out); free_gguf(&v); return; }
    const char *sep = "\n__ggml_vocab_test__\n";
    char *s = inp, *o = out;
    int n_cases = 0, n_bad = 0;
    static int32_t want[4096];
    for (;;) {
        char *e = strstr(s, sep);
        if (!e) break;
        *e = 0;
        char *ol = o, *oe = strchr(o, '\n');
        if (oe) { *oe = 0; o = oe + 1; } else o += strlen(o);
        int nw = parse_ids(ol, want, 4096);
        int32_t *ids;
        int n = encode(v.t, s, 0, 0, &ids);
        n_cases++;
        if (!same_ids(ids, n, want, nw)) {
            n_bad++;
            if (must_pass) CHECKF(0, "%s case %d: \"%s\"", vocab, n_cases, s);
            else fprintf(stderr, "  %s case %d mismatch: \"%s\"\n", vocab, n_cases, s);
            print_ids("want", want, nw);
            print_ids("got ", ids, n);
        }
        /* with BOS: the same ids after BOS */
        int32_t *idb;
        int nb = encode(v.t, s, 1, 0, &idb);
        CHECK(nb == n + 1 && idb[0] == slm_tok_bos(v.t) && same_ids(idb + 1, nb - 1, ids, n));
        free(idb);
        free(ids);
        s = e + strlen(sep);
    }
    fprintf(stderr, "  %s: %d/%d cases match\n", vocab, n_cases - n_bad, n_cases);
    CHECK(n_cases >= 40);
    if (must_pass) CHECK(n_bad == 0);
    free(inp);
    free(out);
    free_gguf(&v);
}

static void test_llama_spm(void) { run_vocab_vectors("llama-spm", 1); }
static void test_phi3(void) { run_vocab_vectors("phi-3", 1); }

static void test_gguf_vocab(void) {
    gvocab v;
    slm_err err = {0};
    CHECK(load_gguf(&v, T_SHARED("vocab/ggml-vocab-llama-spm.gguf"), &err) == SLM_OK);
    if (v.t) {
        const slm_tokenizer *t = v.t;
        CHECK(slm_tok_vocab_size(t) == 32000);
        CHECK(slm_tok_bos(t) == 1 && slm_tok_eos(t) == 2);
        CHECK(!strcmp(slm_tok_str(t, 1), "<s>"));
        CHECK(!strcmp(slm_tok_str(t, 29871), " "));        /* U+2581 -> ' ' */
        CHECK(!strcmp(slm_tok_str(t, 15043), " Hello"));
        CHECK(slm_tok_type(t, 0) == 2 && slm_tok_type(t, 1) == 3 && slm_tok_type(t, 3) == 6);
        CHECK(!strcmp(slm_tok_decode(t, 1, 15043), "Hello"));
        CHECK(!strcmp(slm_tok_decode(t, 5, 3 + 0x41), "A"));
        /* "<s>" in plain text is not the control token */
        int32_t *ids;
        int n = encode(t, "<s>", 0, 0, &ids);
        for (int i = 0; i < n; i++) CHECK(ids[i] != 1);
        free(ids);
        /* U+2581 in the input reads as a space */
        int32_t *a, *b;
        int na = encode(t, "Hello world", 1, 0, &a), nb = encode(t, "Hello\xe2\x96\x81world", 1, 0, &b);
        CHECK(same_ids(a, na, b, nb));
        free(a);
        free(b);
        round_trip(t, "llama-spm");
    }
    free_gguf(&v);

    /* phi-3: "</s>" is a user-defined token, split out of plain text */
    CHECK(load_gguf(&v, T_SHARED("vocab/ggml-vocab-phi-3.gguf"), &err) == SLM_OK);
    if (v.t) {
        CHECK(slm_tok_eos(v.t) == 32000);
        int32_t *ids;
        int n = encode(v.t, "a</s>b", 0, 0, &ids);
        int has = 0;
        for (int i = 0; i < n; i++) has |= ids[i] == 2;
        CHECK(has);
        free(ids);
    }
    free_gguf(&v);

    /* byte-level BPE vocabularies load through the same interface (bpe.c) */
    memset(&err, 0, sizeof err);
    slm_status st = load_gguf(&v, T_SHARED("vocab/ggml-vocab-gpt-2.gguf"), &err);
    CHECKF(st == SLM_OK && v.t && slm_tok_is_bpe(v.t), "%d %s", st, err.msg);
    if (st == SLM_OK && v.t) {
        int32_t ids[8];
        int n = slm_tok_encode(v.t, "Hello world", 0, 0, ids, 8);
        CHECKF(n == 2 && ids[0] == 15496 && ids[1] == 995, "gpt-2 'Hello world' -> %d ids", n);
        CHECK(strcmp(slm_tok_decode(v.t, ids[0], ids[1]), " world") == 0);
        /* through the blob record and back */
        uint8_t *rec = NULL;
        size_t rlen = 0;
        slm_tokenizer *back = NULL;
        CHECK(slm_tok_save(v.t, &rec, &rlen, &err) == SLM_OK);
        CHECK(rec && slm_tok_load_mem(&back, rec, rlen, "record", &err) == SLM_OK);
        if (back) {
            int32_t ids2[8];
            CHECK(slm_tok_encode(back, "Hello world", 0, 0, ids2, 8) == 2 && ids2[1] == 995);
            slm_tok_free(back);
        }
        if (rec && rlen > 10) { /* a damaged record is refused, not trusted */
            rec[rlen / 2] ^= 0x5a;
            back = NULL;
            st = slm_tok_load_mem(&back, rec, rlen, "record", &err);
            CHECK(st != SLM_OK || back != NULL);
            slm_tok_free(back);
        }
        slm_xfree(rec);
    }
    free_gguf(&v);
}

/* A GGUF built in memory with the writer, loaded back. */
static slm_status gguf_case(const char *dir, slm_gguf_writer *w, slm_err *err) {
    char p[512];
    snprintf(p, sizeof p, "%s/vocab_case.gguf", dir);
    slm_status st = slm_gguf_write(w, p, err);
    slm_gguf_writer_free(w);
    if (st != SLM_OK) return st;
    gvocab v;
    st = load_gguf(&v, p, err);
    free_gguf(&v);
    return st;
}

static slm_gguf_writer *mini_vocab(int n_scores, int bos) {
    static const char *const toks[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "\xe2\x96\x81\x61"};
    static const uint64_t lens[] = {5, 3, 4, 3, 1, 4};
    float scores[6] = {0, 0, 0, -1, -2, -3};
    int32_t types[6] = {2, 3, 3, 1, 1, 1};
    slm_gguf_writer *w = slm_gguf_writer_new();
    slm_gguf_set_str(w, "tokenizer.ggml.model", "llama");
    slm_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, lens, 6);
    slm_gguf_set_arr(w, "tokenizer.ggml.scores", SLM_GGUF_F32, scores, (uint64_t)n_scores);
    slm_gguf_set_arr(w, "tokenizer.ggml.token_type", SLM_GGUF_I32, types, 6);
    slm_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
    return w;
}

static void test_gguf_errors(void) {
    char dir[] = "/tmp/slm_tok_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    slm_err err = {0};
    CHECKF(gguf_case(dir, mini_vocab(6, 1), &err) == SLM_OK, "%s", err.msg);
    memset(&err, 0, sizeof err);
    CHECK(gguf_case(dir, mini_vocab(5, 1), &err) == SLM_ERR_FORMAT);
    CHECKF(strstr(err.msg, "vocab_case.gguf") && strstr(err.msg, "scores"), "%s", err.msg);
    memset(&err, 0, sizeof err);
    CHECK(gguf_case(dir, mini_vocab(6, 6), &err) == SLM_ERR_FORMAT);
    CHECKF(strstr(err.msg, "bos_token_id"), "%s", err.msg);
    slm_gguf_writer *w = slm_gguf_writer_new();
    slm_gguf_set_str(w, "tokenizer.ggml.model", "llama");
    memset(&err, 0, sizeof err);
    CHECK(gguf_case(dir, w, &err) == SLM_ERR_FORMAT);
    CHECKF(strstr(err.msg, "tokenizer.ggml.tokens"), "%s", err.msg);
    w = slm_gguf_writer_new();
    slm_gguf_set_str(w, "tokenizer.ggml.model", "rwkv");
    memset(&err, 0, sizeof err);
    CHECK(gguf_case(dir, w, &err) == SLM_ERR_UNSUPPORTED);
    CHECKF(strstr(err.msg, "rwkv"), "%s", err.msg);
    w = slm_gguf_writer_new();
    memset(&err, 0, sizeof err);
    slm_gguf_set_u32(w, "general.alignment", 32);
    CHECK(gguf_case(dir, w, &err) == SLM_ERR_FORMAT);
    CHECKF(strstr(err.msg, "tokenizer.ggml.model"), "%s", err.msg);

    /* the mini vocabulary encodes "a a" as "▁a" "▁a" */
    w = mini_vocab(6, 1);
    char p[512];
    snprintf(p, sizeof p, "%s/vocab_case.gguf", dir);
    CHECK(slm_gguf_write(w, p, &err) == SLM_OK);
    slm_gguf_writer_free(w);
    gvocab v;
    if (load_gguf(&v, p, &err) == SLM_OK) {
        int32_t ids[8];
        int n = slm_tok_encode(v.t, "a a", 1, 1, ids, 8);
        CHECK(n == 4 && ids[0] == 1 && ids[1] == 5 && ids[2] == 5 && ids[3] == 2);
        /* no byte tokens at all: unknown bytes become <unk> */
        n = slm_tok_encode(v.t, "b", 0, 0, ids, 8);
        CHECK(n == 2 && ids[0] == 3 && ids[1] == 0);
    }
    free_gguf(&v);
    unlink(p);
    rmdir(dir);
}

/* ---- malformed tokenizer.bin -------------------------------------------- */

static int expect_bad(const char *path, const void *data, size_t len, int vocab, const char *want) {
    t_write_file(path, data, len);
    slm_tokenizer *t = NULL;
    slm_err err = {0};
    slm_status st = slm_tok_load_llama2c(&t, path, vocab, &err);
    int ok = st != SLM_OK && t == NULL && strstr(err.msg, "bad_tok.bin") != NULL &&
             (!want || strstr(err.msg, want) != NULL);
    CHECKF(ok, "len %zu: status %d msg '%s' (want '%s')", len, st, err.msg, want ? want : "");
    slm_tok_free(t);
    return ok;
}

static void put_i32(uint8_t *p, int32_t v) { memcpy(p, &v, 4); }

static void test_malformed(void) {
    size_t n;
    uint8_t *orig = (uint8_t *)t_read_file(TOK512, &n);
    CHECK(orig != NULL);
    if (!orig) return;
    char dir[] = "/tmp/slm_tok_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/bad_tok.bin", dir);
    uint8_t *buf = malloc(n + 64);

    /* record offsets */
    size_t rec[513];
    size_t pos = 4;
    for (int i = 0; i < 512; i++) {
        rec[i] = pos;
        int32_t len;
        memcpy(&len, orig + pos + 4, 4);
        pos += 8 + (size_t)len;
    }
    rec[512] = pos;
    CHECK(pos <= n);

    /* truncation at every byte of the first 200 and at many later offsets */
    int fails = 0;
    for (size_t cut = 0; cut < pos; cut += cut < 200 ? 1 : 37)
        fails += !expect_bad(path, orig, cut, 512, NULL);
    for (size_t cut = pos - 20; cut < pos; cut++) fails += !expect_bad(path, orig, cut, 512, NULL);
    CHECK(fails == 0);
    /* the exact records load; more tokens than the file holds does not */
    t_write_file(path, orig, pos);
    slm_tokenizer *t = NULL;
    slm_err err = {0};
    CHECKF(slm_tok_load_llama2c(&t, path, 512, &err) == SLM_OK, "%s", err.msg);
    slm_tok_free(t);
    expect_bad(path, orig, pos, 513, "token 512");
    expect_bad(path, orig, pos, 0, "vocab_size");
    expect_bad(path, orig, pos, -7, "vocab_size");

    /* max_token_length */
    static const int32_t bad_max[] = {-1, 0, INT32_MIN, INT32_MAX, 1 << 20};
    for (size_t k = 0; k < sizeof bad_max / sizeof *bad_max; k++) {
        memcpy(buf, orig, n);
        put_i32(buf, bad_max[k]);
        expect_bad(path, buf, n, 512, "max_token_length");
    }
    /* token 37's length */
    static const int32_t bad_len[] = {-5, 0, 99999, INT32_MAX, INT32_MIN, 6000};
    for (size_t k = 0; k < sizeof bad_len / sizeof *bad_len; k++) {
        memcpy(buf, orig, n);
        put_i32(buf + rec[37] + 4, bad_len[k]);
        expect_bad(path, buf, n, 512, "token 37");
    }
    /* the last token's length one past the end */
    memcpy(buf, orig, n);
    {
        int32_t len;
        memcpy(&len, orig + rec[511] + 4, 4);
        put_i32(buf + rec[511] + 4, len + (int32_t)(n - pos) + 1);
        expect_bad(path, buf, n, 512, "beyond end of file");
    }
    /* a NaN score is accepted; the token just never merges */
    memcpy(buf, orig, n);
    float nanv = NAN;
    memcpy(buf + rec[300], &nanv, 4);
    t_write_file(path, buf, n);
    t = NULL;
    CHECKF(slm_tok_load_llama2c(&t, path, 512, &err) == SLM_OK, "%s", err.msg);
    if (t) {
        int32_t ids[64];
        int k = slm_tok_encode(t, "Once upon a time, the cat sat on the mat.", 1, 0, ids, 64);
        CHECK(k > 2 && k <= 64);
        for (int i = 0; i < k && i < 64; i++) CHECK(ids[i] != 300);
        slm_tok_free(t);
    }
    /* missing and empty files */
    err.msg[0] = 0;
    CHECK(slm_tok_load_llama2c(&t, "/nonexistent/bad_tok.bin", 512, &err) == SLM_ERR_IO);
    CHECK(strstr(err.msg, "bad_tok.bin") != NULL);
    expect_bad(path, orig, 0, 512, "empty");

    unlink(path);
    rmdir(dir);
    free(buf);
    free(orig);
}

/* Random garbage and random byte flips never crash the loader or encoder. */
static void test_random_corruption(void) {
    size_t n;
    uint8_t *orig = (uint8_t *)t_read_file(TOK512, &n);
    if (!orig) return;
    char dir[] = "/tmp/slm_tok_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/flip_tok.bin", dir);
    uint8_t *buf = malloc(n);
    uint32_t seed = 12345;
    int loaded = 0;
    for (int iter = 0; iter < 300; iter++) {
        memcpy(buf, orig, n);
        for (int k = 0; k < 4; k++) {
            seed = seed * 1664525u + 1013904223u;
            buf[(seed >> 8) % n] ^= (uint8_t)(1u << (seed & 7));
        }
        t_write_file(path, buf, n);
        slm_tokenizer *t = NULL;
        slm_err err = {0};
        if (slm_tok_load_llama2c(&t, path, 512, &err) == SLM_OK) {
            loaded++;
            int32_t ids[128];
            slm_tok_encode(t, "Once upon a time \xf0\x9f\xa6\x99 there", 1, 1, ids, 128);
            for (int id = -1; id <= 512; id++) (void)slm_tok_decode(t, 1, id);
            slm_tok_free(t);
        } else {
            CHECKF(strstr(err.msg, "flip_tok.bin"), "%s", err.msg);
        }
    }
    fprintf(stderr, "  %d/300 corrupted files still loaded\n", loaded);
    unlink(path);
    rmdir(dir);
    free(buf);
    free(orig);
}

/* ---- speed and allocations ---------------------------------------------- */

static int g_allocs;
static void *count_alloc(void *ud, size_t n) { (void)ud; g_allocs++; return malloc(n); }
static void *count_realloc(void *ud, void *p, size_t n) { (void)ud; g_allocs++; return realloc(p, n); }
static void count_free(void *ud, void *p) { (void)ud; free(p); }
static int g_fail_at;
static void *fail_alloc(void *ud, size_t n) {
    (void)ud;
    return ++g_allocs == g_fail_at ? NULL : malloc(n);
}

static void test_speed_and_allocs(void) {
    slm_tokenizer *t = load_bin(LLAMA2, 32000);
    if (!t) return;
    /* ~4000+ tokens of mixed text */
    const char *chunk = "Once upon a time, in a caf\xc3\xa9 far away \xf0\x9f\xa6\x99, there lived "
                        "a llama named Bob who liked 3.14159 and \xe6\x88\x91\xe6\x83\xb3. ";
    size_t cl = strlen(chunk);
    int reps = 200;
    char *big = malloc(cl * (size_t)reps + 1);
    for (int i = 0; i < reps; i++) memcpy(big + cl * (size_t)i, chunk, cl);
    big[cl * (size_t)reps] = 0;
    static int32_t ids[65536];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int n = slm_tok_encode(t, big, 1, 0, ids, 65536);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
    fprintf(stderr, "  %zu bytes -> %d tokens in %.2f ms\n", strlen(big), n, ms);
    CHECK(n > 4000);
    CHECK(ms < 1000.0);
    /* a long single word of one repeated letter (worst case for merges) */
    memset(big, 'a', cl * (size_t)reps);
    clock_gettime(CLOCK_MONOTONIC, &a);
    n = slm_tok_encode(t, big, 1, 0, ids, 65536);
    clock_gettime(CLOCK_MONOTONIC, &b);
    ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
    fprintf(stderr, "  %zu x 'a' -> %d tokens in %.2f ms\n", strlen(big), n, ms);
    CHECK(n > 1 && ms < 1000.0);
    /* decode of the whole thing round-trips */
    n = slm_tok_encode(t, chunk, 1, 0, ids, 65536);
    char *d = decode_all(t, ids, n);
    CHECK(!strcmp(d, chunk));
    free(d);

    /* exactly one allocation per encode, none per decode */
    slm_allocator counting = {count_alloc, count_realloc, count_free, NULL};
    slm_set_allocator(&counting);
    g_allocs = 0;
    slm_tok_encode(t, chunk, 1, 1, ids, 65536);
    CHECK(g_allocs == 1);
    g_allocs = 0;
    for (int i = 1; i < n; i++) (void)slm_tok_decode(t, ids[i - 1], ids[i]);
    CHECK(g_allocs == 0);
    /* allocation failure: -1 */
    slm_allocator failing = {fail_alloc, count_realloc, count_free, NULL};
    slm_set_allocator(&failing);
    g_allocs = 0;
    g_fail_at = 1;
    CHECK(slm_tok_encode(t, chunk, 1, 1, ids, 65536) == -1);
    slm_set_allocator(NULL);
    slm_tok_free(t);

    /* loader allocation failures at every step: NOMEM, no leak (ASan) */
    slm_set_allocator(&failing);
    int steps = 0;
    for (g_fail_at = 1; g_fail_at < 40; g_fail_at++) {
        g_allocs = 0;
        slm_tokenizer *u = NULL;
        slm_err err = {0};
        slm_status st = slm_tok_load_llama2c(&u, TOK512, 512, &err);
        if (st == SLM_OK) { slm_tok_free(u); break; }
        CHECKF(st == SLM_ERR_NOMEM, "fail at %d: %d %s", g_fail_at, st, err.msg);
        steps++;
    }
    slm_set_allocator(NULL);
    CHECK(steps > 3);
    free(big);
}


/* The input limit: a text longer than max_input is refused unread (the old
 * encoder took 69 s and 2.3 GB for a 50 MB prompt); the limit is settable. */
static void test_input_limit(void) {
    slm_tokenizer *t = load_bin(TOK512, 512);
    if (!t) return;
    CHECK(slm_tok_max_input(t) == SLM_TOK_DEFAULT_MAX_INPUT);
    size_t big = SLM_TOK_DEFAULT_MAX_INPUT + 1;
    char *s = malloc(big + 1);
    memset(s, 'a', big);
    s[big] = 0;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    CHECK(slm_tok_encode(t, s, 1, 0, NULL, 0) == SLM_TOK_ETOOLONG);
    clock_gettime(CLOCK_MONOTONIC, &b);
    CHECK((double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9 < 0.5);
    slm_tok_set_max_input(t, 100);
    CHECK(slm_tok_max_input(t) == 100);
    s[101] = 0;
    CHECK(slm_tok_encode(t, s, 1, 0, NULL, 0) == SLM_TOK_ETOOLONG);
    s[100] = 0;
    CHECK(slm_tok_encode(t, s, 1, 0, NULL, 0) > 1);
    slm_tok_set_max_input(t, 0);
    CHECK(slm_tok_max_input(t) == SLM_TOK_DEFAULT_MAX_INPUT);
    CHECK(strstr(slm_tok_encode_error(SLM_TOK_ETOOLONG), "max_prompt_bytes") != NULL);
    slm_tok_free(t);
    /* the byte-level wrapper passes the limit on */
    gvocab v;
    slm_err err = {0};
    if (load_gguf(&v, T_SHARED("vocab/ggml-vocab-gpt-2.gguf"), &err) == SLM_OK) {
        slm_tok_set_max_input(v.t, 5);
        CHECK(slm_tok_encode(v.t, "hello world", 0, 0, NULL, 0) == SLM_TOK_ETOOLONG);
        CHECK(slm_tok_encode(v.t, "hello", 0, 0, NULL, 0) == 1);
    }
    free_gguf(&v);
    free(s);
}


/* ---- allocation failure in every loader -------------------------------- */

/* fails the g_fail_at-th allocation (alloc or realloc) of the loader */
static void *inj_alloc(void *ud, size_t n) {
    (void)ud;
    return ++g_allocs == g_fail_at ? NULL : malloc(n);
}
static void *inj_realloc(void *ud, void *p, size_t n) {
    (void)ud;
    return ++g_allocs == g_fail_at ? NULL : realloc(p, n);
}

typedef slm_status (*loader_fn)(slm_tokenizer **out, const void *arg, slm_err *err);

static slm_status ld_llama2c(slm_tokenizer **out, const void *arg, slm_err *err) {
    (void)arg;
    return slm_tok_load_llama2c(out, TOK512, 512, err);
}
static slm_status ld_gguf(slm_tokenizer **out, const void *arg, slm_err *err) {
    return slm_tok_load_gguf(out, (const slm_gguf *)arg, "vocab.gguf", err);
}
static slm_status ld_json(slm_tokenizer **out, const void *arg, slm_err *err) {
    return slm_tok_load_hf_json(out, (const char *)arg, err);
}
typedef struct blob_arg {
    const uint8_t *p;
    size_t n;
} blob_arg;
static slm_status ld_mem(slm_tokenizer **out, const void *arg, slm_err *err) {
    const blob_arg *b = arg;
    return slm_tok_load_mem(out, b->p, b->n, "tokenizer section", err);
}

/* Load once with no failure (the reference ids of `text`, the allocation
 * count K), then fail allocation 1, 2, ..., K in turn: each load ends in
 * SLM_ERR_NOMEM with a message and frees what it took (ASan checks), or
 * (an allocation with a fallback, such as the JIT's) succeeds and encodes
 * as the reference. */
static void fail_each_allocation(const char *what, loader_fn ld, const void *arg, const char *text) {
    slm_allocator inj = {inj_alloc, inj_realloc, count_free, NULL};
    slm_tokenizer *t = NULL;
    slm_err err = {0};
    g_fail_at = 0;
    g_allocs = 0;
    slm_set_allocator(&inj);
    slm_status st = ld(&t, arg, &err);
    slm_set_allocator(NULL);
    int total = g_allocs;
    CHECKF(st == SLM_OK, "%s: %s", what, err.msg);
    if (st) return;
    int32_t ref[64], got[64];
    int nref = slm_tok_encode(t, text, 1, 0, ref, 64);
    CHECK(nref > 1 && nref <= 64);
    slm_tok_free(t);
    int nomem = 0, ok = 0;
    for (g_fail_at = 1; g_fail_at <= total; g_fail_at++) {
        g_allocs = 0;
        t = NULL;
        memset(&err, 0, sizeof err);
        slm_set_allocator(&inj);
        st = ld(&t, arg, &err);
        slm_set_allocator(NULL);
        if (st == SLM_OK) {
            ok++;
            int n = slm_tok_encode(t, text, 1, 0, got, 64);
            CHECKF(n == nref && !memcmp(got, ref, (size_t)n * sizeof *got), "%s: fail at %d: loaded but encodes differently",
                   what, g_fail_at);
            slm_tok_free(t);
            continue;
        }
        nomem++;
        CHECKF(st == SLM_ERR_NOMEM && err.msg[0] && !t, "%s: fail at %d of %d: status %d '%s'", what, g_fail_at, total,
               st, err.msg);
    }
    fprintf(stderr, "  %s: %d allocations, each failed in turn: %d out of memory, %d recovered\n", what, total, nomem,
            ok);
    CHECK(nomem >= 3);
}

static void test_loader_alloc_failures(void) {
    const char *text = "Hello world, hello <tool> again \xc3\xa9 42";
    fail_each_allocation("llama2.c tokenizer.bin", ld_llama2c, NULL, text);
    static const char *const ggufs[] = {"vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-gpt-2.gguf"};
    for (size_t i = 0; i < sizeof ggufs / sizeof ggufs[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", SLM_SHARED_DIR, ggufs[i]);
        slm_map m;
        slm_gguf *g = NULL;
        slm_err err = {0};
        if (slm_map_file(&m, path, &err)) continue;
        if (slm_gguf_open(&g, m.data, m.size, ggufs[i], &err) == SLM_OK) {
            fail_each_allocation(ggufs[i], ld_gguf, g, text);
            /* and the blob's serialized form of the same vocabulary */
            slm_tokenizer *t = NULL;
            if (slm_tok_load_gguf(&t, g, ggufs[i], &err) == SLM_OK) {
                blob_arg b = {NULL, 0};
                uint8_t *buf = NULL;
                if (slm_tok_save(t, &buf, &b.n, &err) == SLM_OK) {
                    b.p = buf;
                    fail_each_allocation("slm_tok_load_mem", ld_mem, &b, text);
                    slm_xfree(buf);
                }
                slm_tok_free(t);
            }
            slm_gguf_close(g);
        }
        slm_unmap(&m);
    }
#ifdef SLM_HAVE_CJSON
    /* tokenizer.json: cJSON's parse tree goes through slm_malloc too */
    fail_each_allocation("small_bytelevel.json", ld_json, SLM_TESTS_DIR "/corpus/tokenizers/small_bytelevel.json", text);
    fail_each_allocation("small_spm.json", ld_json, SLM_TESTS_DIR "/corpus/tokenizers/small_spm.json", text);
#endif
}

/* slm_options.max_prompt_bytes reaches the engine's tokenizer: a longer
 * prompt is SLM_ERR_CAPACITY with a message naming the option; 0 is 8 MiB */
static void test_engine_prompt_limit(void) {
    slm_options o = slm_default_options();
    CHECK(o.max_prompt_bytes == 0);
    o.tokenizer_path = TOK512;
    o.max_prompt_bytes = 64;
    slm_engine *e = NULL;
    slm_status st = slm_load(&e, T_SHARED("models/stories260K.bin"), &o);
    CHECKF(st == SLM_OK, "%s", slm_last_error(e));
    if (st == SLM_OK) {
        char p[80];
        memset(p, 'a', 65);
        p[65] = 0;
        st = slm_generate(e, p, 1, NULL, 1, NULL, NULL, NULL);
        CHECKF(st == SLM_ERR_CAPACITY && strstr(slm_last_error(e), "max_prompt_bytes"), "%d %s", st,
               slm_last_error(e));
        CHECK(slm_tokenize(e, p, 1, NULL, 0) == SLM_TOK_ETOOLONG);
        p[64] = 0;
        CHECK(slm_generate(e, p, 1, NULL, 1, NULL, NULL, NULL) == SLM_OK);
    }
    slm_free(e);
}

int main(void) {
    T_RUN(test_json_reader);
    T_RUN(test_tokenize_json);
    T_RUN(test_golden_prompts);
    T_RUN(test_accessors);
    T_RUN(test_round_trip);
    T_RUN(test_differential_runc);
    T_RUN(test_llama_spm);
    T_RUN(test_phi3);
    T_RUN(test_gguf_vocab);
    T_RUN(test_gguf_errors);
    T_RUN(test_malformed);
    T_RUN(test_random_corruption);
    T_RUN(test_speed_and_allocs);
    T_RUN(test_input_limit);
    T_RUN(test_loader_alloc_failures);
    T_RUN(test_engine_prompt_limit);
    T_DONE();
}
