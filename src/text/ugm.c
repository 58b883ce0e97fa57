/* Unigram tokenizer: the vocabulary, its tries, the charsmap's checks, the
 * loaders and the serialized form (ugm.h says what the tokenizer does;
 * ugm_encode.c encodes).
 *
 * The charsmap is hostile input: before use, every entry the double array
 * can reach from its root is visited once (darts-clone shares suffixes, so
 * an entry may have several parents); a child or value index beyond the
 * array, a replacement offset beyond the strings or a string without its
 * NUL is refused, so the normalizer's walk stays in bounds. A cycle is
 * harmless: the walk stops after UGM_MAX_CHARSMAP_DEPTH bytes. */
#include <stdio.h>
#include <stdlib.h>

#include "text/ugm_internal.h"
#include "text/vocab_keys.h"

#define UGM_SER_VERSION 1u

static const char *tok_s(const slm_ugm *u, int id) { return u->blob + u->off[id]; }

static void trie_free(ugm_trie *t) {
    slm_xfree(t->first);
    slm_xfree(t->nkid);
    slm_xfree(t->byte);
    slm_xfree(t->value);
    memset(t, 0, sizeof *t);
}

void slm_ugm_free(slm_ugm *u) {
    if (!u) return;
    slm_xfree(u->blob);
    slm_xfree(u->off);
    slm_xfree(u->len);
    slm_xfree(u->score);
    slm_xfree(u->type);
    slm_xfree(u->strs);
    slm_xfree(u->str_off);
    slm_xfree(u->str_len);
    slm_xfree(u->charsmap);
    trie_free(&u->tokens);
    trie_free(&u->user);
    slm_xfree(u->special);
    slm_xfree(u);
}

static slm_ugm *ugm_alloc(int n, uint64_t blob_size) {
    slm_ugm *u = slm_calloc(1, sizeof *u);
    if (!u) return NULL;
    u->n_vocab = n;
    u->blob = slm_malloc((size_t)blob_size);
    u->off = slm_calloc((size_t)n, sizeof *u->off);
    u->len = slm_calloc((size_t)n, sizeof *u->len);
    u->score = slm_calloc((size_t)n, sizeof *u->score);
    u->type = slm_calloc((size_t)n, 1);
    u->str_off = slm_calloc((size_t)n, sizeof *u->str_off);
    u->str_len = slm_calloc((size_t)n, sizeof *u->str_len);
    if (!u->blob || !u->off || !u->len || !u->score || !u->type || !u->str_off || !u->str_len) {
        slm_ugm_free(u);
        return NULL;
    }
    return u;
}

/* ---- tries ------------------------------------------------------------ */

typedef struct ugm_ent {
    const uint8_t *s;
    uint32_t len;
    int32_t id;
} ugm_ent;

static int ent_cmp(const void *a, const void *b) {
    const ugm_ent *x = a, *y = b;
    uint32_t m = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, m);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The trie of e[0, n) (sorted, no two the same): breadth first, so that a
 * node's children are consecutive. 0 when out of memory. */
static int trie_build(ugm_trie *t, const ugm_ent *e, uint32_t n) {
    uint64_t nodes = 1;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t l = 0;
        if (i > 0) {
            uint32_t m = e[i - 1].len < e[i].len ? e[i - 1].len : e[i].len;
            while (l < m && e[i - 1].s[l] == e[i].s[l]) l++;
        }
        nodes += e[i].len - l;
    }
    if (nodes > UINT32_MAX / 2) return 0;
    t->n_nodes = (uint32_t)nodes;
    t->first = slm_calloc((size_t)nodes, sizeof *t->first);
    t->nkid = slm_calloc((size_t)nodes, sizeof *t->nkid);
    t->byte = slm_calloc((size_t)nodes, 1);
    t->value = slm_malloc((size_t)nodes * sizeof *t->value);
    uint32_t *lo = slm_malloc((size_t)nodes * sizeof *lo), *hi = slm_malloc((size_t)nodes * sizeof *hi),
             *depth = slm_malloc((size_t)nodes * sizeof *depth);
    int ok = t->first && t->nkid && t->byte && t->value && lo && hi && depth;
    if (ok) {
        lo[0] = 0, hi[0] = n, depth[0] = 0;
        uint32_t next = 1;
        for (uint32_t v = 0; v < next; v++) { /* the queue is the node array itself */
            uint32_t a = lo[v], b = hi[v], d = depth[v];
            t->value[v] = -1;
            if (a < b && e[a].len == d) t->value[v] = e[a++].id; /* sorted: the shortest first */
            t->first[v] = next;
            while (a < b) {
                const uint8_t c = e[a].s[d];
                uint32_t z = a + 1;
                while (z < b && e[z].s[d] == c) z++;
                t->byte[next] = c;
                lo[next] = a, hi[next] = z, depth[next] = d + 1;
                next++;
                t->nkid[v]++;
                a = z;
            }
        }
    }
    slm_xfree(lo);
    slm_xfree(hi);
    slm_xfree(depth);
    if (!ok) trie_free(t);
    return ok;
}

/* ---- the charsmap ------------------------------------------------------ */

static slm_status check_charsmap(slm_ugm *u, const char *name, const char *field, slm_err *err) {
    const size_t size = u->charsmap_len;
    if (size < 4) return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: %zu bytes, too few for the trie's size", name, field, size);
    const uint32_t blob = (uint32_t)u->charsmap[0] | (uint32_t)u->charsmap[1] << 8 | (uint32_t)u->charsmap[2] << 16 |
                          (uint32_t)u->charsmap[3] << 24;
    if ((uint64_t)blob + 4 >= size)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: a trie of %u bytes leaves no replacement strings in %zu bytes",
                        name, field, blob, size);
    u->n_xcda = blob / 4;
    u->repl = u->charsmap + 4 + blob;
    u->repl_len = size - 4 - blob;
    if (u->n_xcda == 0) return SLM_OK;
    const uint32_t n = u->n_xcda;
    uint8_t *seen = slm_calloc((size_t)n / 8 + 1, 1);
    uint32_t *stack = slm_malloc(((size_t)n + 1) * sizeof *stack); /* each entry pushes once */
    slm_status st = SLM_OK;
    if (!seen || !stack) {
        st = slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory checking %s", name, field);
        goto out;
    }
    size_t sp = 0;
    stack[sp++] = ugm_xcda_base(ugm_xcda(u, 0));
    while (sp && !st) {
        const uint32_t t = stack[--sp];
        for (uint32_t c = 1; c < 256 && !st; c++) {
            const uint32_t idx = t ^ c;
            if (idx >= n) {
                st = slm_errf(err, SLM_ERR_FORMAT, "%s: %s: a child index %u beyond the trie's %u entries", name, field,
                              idx, n);
                break;
            }
            const uint32_t e = ugm_xcda(u, idx);
            if (ugm_xcda_lcheck(e) != c || (seen[idx / 8] >> (idx % 8) & 1)) continue; /* shared suffixes: a DAG */
            seen[idx / 8] |= (uint8_t)(1u << (idx % 8));
            const uint32_t nt = idx ^ ugm_xcda_base(e);
            if (ugm_xcda_leaf(e)) {
                if (nt >= n) {
                    st = slm_errf(err, SLM_ERR_FORMAT, "%s: %s: trie entry %u: value index %u beyond the %u entries",
                                  name, field, idx, nt, n);
                    break;
                }
                const uint32_t v = ugm_xcda_value(ugm_xcda(u, nt));
                if (v >= u->repl_len || !memchr(u->repl + v, 0, u->repl_len - v)) {
                    st = slm_errf(err, SLM_ERR_FORMAT,
                                  "%s: %s: trie entry %u: replacement at %u %s the %zu bytes of strings", name, field,
                                  idx, v, v >= u->repl_len ? "beyond" : "not NUL-terminated in", u->repl_len);
                    break;
                }
            }
            stack[sp++] = nt;
        }
    }
out:
    slm_xfree(seen);
    slm_xfree(stack);
    return st;
}

/* ---- the index --------------------------------------------------------- */

static int is_special_type(int ty) { return ty == UGM_CONTROL || ty == UGM_UNKNOWN || ty == UGM_USER; }
static int is_matched_type(int ty) { return ty == UGM_NORMAL || ty == UGM_USER || ty == UGM_UNUSED; }

/* keys (~len) << 32 | id: ascending = longest first, then by id */
static int u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* After blob/off/len/score/type/meta/charsmap: the checks and the derived
 * tables. field: the charsmap's name in messages. */
static slm_status ugm_index(slm_ugm *u, const char *name, const char *field, slm_err *err) {
    const int n = u->n_vocab;
    const slm_ugm_meta *m = &u->meta;
    const int ids[5] = {m->bos, m->eos, m->unk, m->pad, m->sep};
    static const char *const idn[5] = {"bos", "eos", "unknown", "padding", "separator"};
    for (int k = 0; k < 5; k++)
        if (ids[k] < -1 || ids[k] >= n)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: the %s token id %d is not below the %d tokens", name, idn[k],
                            ids[k], n);
    if (m->unk < 0) return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.unknown_token_id: none (the Unigram tokenizer needs one)", name);
    if (m->add_bos && m->bos < 0)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.add_bos_token is set but there is no BOS id", name);
    if (m->add_eos && m->eos < 0)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.add_eos_token is set but there is no EOS id", name);
    if (u->charsmap) {
        slm_status st = check_charsmap(u, name, field, err);
        if (st) return st;
    }
    /* the " " spellings; the lowest normal score */
    uint64_t blob = 0;
    for (int i = 0; i < n; i++) blob += u->len[i] + 1;
    u->strs = slm_malloc((size_t)blob);
    ugm_ent *e = slm_malloc((size_t)n * sizeof *e);
    int n_sp = 0;
    for (int i = 0; i < n; i++) n_sp += is_special_type(u->type[i]);
    u->special = slm_malloc((size_t)(n_sp ? n_sp : 1) * sizeof *u->special);
    if (!u->strs || !e || !u->special) {
        slm_xfree(e);
        return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory for the tokenizer", name);
    }
    float lo = 3.402823466e+38f;
    uint32_t so = 0;
    for (int i = 0; i < n; i++) {
        const uint8_t *s = (const uint8_t *)tok_s(u, i);
        u->str_off[i] = so;
        for (uint32_t k = 0; k < u->len[i]; k++) {
            if (k + 2 < u->len[i] && s[k] == 0xE2 && s[k + 1] == 0x96 && s[k + 2] == 0x81) {
                u->strs[so++] = ' ';
                k += 2;
            } else {
                u->strs[so++] = (char)s[k];
            }
        }
        u->str_len[i] = so - u->str_off[i];
        u->strs[so++] = 0;
        if (u->type[i] == UGM_NORMAL && u->score[i] < lo) lo = u->score[i]; /* NaN never lowers it */
        if (is_special_type(u->type[i])) u->special[u->n_special++] = i;
        e[i] = (ugm_ent){s, u->len[i], i};
    }
    u->unk_score = lo - 10.0f;
    /* every spelling sorted: duplicates refused (as llama.cpp refuses them) */
    qsort(e, (size_t)n, sizeof *e, ent_cmp);
    for (int i = 1; i < n; i++)
        if (e[i].len == e[i - 1].len && !memcmp(e[i].s, e[i - 1].s, e[i].len)) {
            int a = e[i - 1].id, b = e[i].id;
            slm_xfree(e);
            return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.tokens[%d]: the same spelling as token %d", name, b, a);
        }
    /* the tries: the matched tokens, then (in the same order) the user-defined ones */
    uint32_t k = 0;
    for (int i = 0; i < n; i++)
        if (is_matched_type(u->type[e[i].id])) e[k++] = e[i];
    int ok = trie_build(&u->tokens, e, k);
    uint32_t j = 0;
    for (uint32_t i = 0; i < k; i++)
        if (u->type[e[i].id] == UGM_USER) e[j++] = e[i];
    ok = ok && trie_build(&u->user, e, j);
    slm_xfree(e);
    if (!ok) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory for the tokenizer's trie", name);
    if (u->n_special > 1) { /* llama.cpp sorts by length only (ties unspecified); ties here by id */
        uint64_t *key = slm_malloc((size_t)u->n_special * sizeof *key);
        if (!key) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory for the tokenizer", name);
        for (int q = 0; q < u->n_special; q++)
            key[q] = (uint64_t)(UINT32_MAX - u->len[u->special[q]]) << 32 | (uint32_t)u->special[q];
        qsort(key, (size_t)u->n_special, sizeof *key, u64_cmp);
        for (int q = 0; q < u->n_special; q++) u->special[q] = (int32_t)(uint32_t)key[q];
        slm_xfree(key);
    }
    return SLM_OK;
}

/* Copy the spellings (an empty one becomes "[EMPTY_<id>]"), scores, types,
 * meta and charsmap into a new vocabulary and index it. */
static slm_status ugm_make(slm_ugm **out, const char *const *tok, const uint32_t *len, const float *score,
                           const uint8_t *type, int n, const slm_ugm_meta *meta, const uint8_t *cm, size_t cm_len,
                           const char *name, const char *field, slm_err *err) {
    *out = NULL;
    if (n < 1 || n > UGM_MAX_VOCAB)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %d tokens out of range (1..%d)", name, n, UGM_MAX_VOCAB);
    char empty[32];
    uint64_t blob = 0;
    for (int i = 0; i < n; i++) {
        if (len[i] > UGM_MAX_LEN)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.tokens[%d]: length %u out of range", name, i, len[i]);
        if (type[i] > UGM_BYTE)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.token_type[%d]: %u invalid", name, i, type[i]);
        blob += (len[i] ? len[i] : (uint64_t)snprintf(empty, sizeof empty, "[EMPTY_%d]", i)) + 1;
    }
    if (blob > UINT32_MAX) return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.tokens: too large", name);
    slm_ugm *u = ugm_alloc(n, blob);
    if (u && cm) {
        u->charsmap = slm_malloc(cm_len ? cm_len : 1);
        if (u->charsmap) memcpy(u->charsmap, cm, cm_len), u->charsmap_len = cm_len;
    }
    if (!u || (cm && !u->charsmap)) {
        slm_ugm_free(u);
        return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory for the tokenizer", name);
    }
    u->meta = *meta;
    uint32_t o = 0;
    for (int i = 0; i < n; i++) {
        const char *p = tok[i];
        size_t l = len[i];
        if (!l) l = (size_t)snprintf(empty, sizeof empty, "[EMPTY_%d]", i), p = empty;
        u->off[i] = o;
        u->len[i] = (uint32_t)l;
        memcpy(u->blob + o, p, l);
        u->blob[o + l] = 0;
        o += (uint32_t)l + 1;
        u->score[i] = score ? score[i] : 0.0f;
        u->type[i] = type[i];
    }
    slm_status st = ugm_index(u, name, field, err);
    if (st) {
        slm_ugm_free(u);
        return st;
    }
    *out = u;
    return SLM_OK;
}

slm_status slm_ugm_build(slm_ugm **out, const char *const *tok, const uint32_t *len, const float *score,
                         const uint8_t *type, int n, const slm_ugm_meta *meta, const uint8_t *charsmap,
                         size_t charsmap_len, const char *name, const char *field, slm_err *err) {
    return ugm_make(out, tok, len, score, type, n, meta, charsmap, charsmap_len, name ? name : "tokenizer",
                    field ? field : "charsmap", err);
}

/* ---- GGUF --------------------------------------------------------------- */

slm_status slm_ugm_load_gguf(slm_ugm **out, const slm_gguf *g, const char *name, slm_err *err) {
    *out = NULL;
    if (!name) name = "gguf";
    static const char *const K_TOK = "tokenizer.ggml.tokens", *const K_TYPE = "tokenizer.ggml.token_type",
                             *const K_SCORE = "tokenizer.ggml.scores", *const K_CM = "tokenizer.ggml.precompiled_charsmap";
    slm_gguf_type et;
    uint64_t n_tok, cnt;
    const void *unused, *types = NULL, *scores = NULL, *cm = NULL;
    if (!slm_gguf_get_arr(g, K_TOK, &et, &n_tok, &unused) || et != SLM_GGUF_STRING)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: missing or not a string array", name, K_TOK);
    if (n_tok < 1 || n_tok > UGM_MAX_VOCAB)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: %llu tokens out of range", name, K_TOK, (unsigned long long)n_tok);
    const int n = (int)n_tok;
    if (slm_gguf_find(g, K_TYPE) >= 0 && (!slm_gguf_get_arr(g, K_TYPE, &et, &cnt, &types) || et != SLM_GGUF_I32 || cnt != n_tok))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: not an i32 array of %d", name, K_TYPE, n);
    if (slm_gguf_find(g, K_SCORE) >= 0 && (!slm_gguf_get_arr(g, K_SCORE, &et, &cnt, &scores) || et != SLM_GGUF_F32 || cnt != n_tok))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: not an f32 array of %d", name, K_SCORE, n);
    uint64_t cm_len = 0;
    if (slm_gguf_find(g, K_CM) >= 0 &&
        (!slm_gguf_get_arr(g, K_CM, &et, &cm_len, &cm) || (et != SLM_GGUF_U8 && et != SLM_GGUF_I8) || cm_len > SIZE_MAX))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: not a u8 or i8 array", name, K_CM);
    slm_ugm_meta m = {-1, -1, -1, -1, -1, 0, 0, 0, 1};
    slm_status st;
    if ((st = slm_vocab_key_id(g, name, "tokenizer.ggml.bos_token_id", n, -1, 0, &m.bos, err)) ||
        (st = slm_vocab_key_id(g, name, "tokenizer.ggml.eos_token_id", n, 1, 0, &m.eos, err)) ||
        (st = slm_vocab_key_id(g, name, "tokenizer.ggml.unknown_token_id", n, 2, 0, &m.unk, err)) ||
        (st = slm_vocab_key_id(g, name, "tokenizer.ggml.padding_token_id", n, 0, 0, &m.pad, err)) ||
        (st = slm_vocab_key_id(g, name, "tokenizer.ggml.seperator_token_id", n, -1, 0, &m.sep, err)) ||
        (st = slm_vocab_key_flag(g, name, "tokenizer.ggml.add_space_prefix", &m.add_space_prefix, err)) ||
        (st = slm_vocab_key_flag(g, name, "tokenizer.ggml.remove_extra_whitespaces", &m.remove_extra_ws, err)) ||
        (st = slm_vocab_key_flag(g, name, "tokenizer.ggml.add_bos_token", &m.add_bos, err)) ||
        (st = slm_vocab_key_flag(g, name, "tokenizer.ggml.add_eos_token", &m.add_eos, err)))
        return st;
    const char **tok = slm_malloc((size_t)n * sizeof *tok);
    uint32_t *len = slm_malloc((size_t)n * sizeof *len);
    float *score = slm_calloc((size_t)n, sizeof *score);
    uint8_t *type = slm_malloc((size_t)n);
    if (!tok || !len || !score || !type) {
        st = slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory for the tokenizer", name);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        slm_gguf_str s;
        if (!slm_gguf_arr_str(g, K_TOK, (uint64_t)i, &s)) {
            st = slm_errf(err, SLM_ERR_FORMAT, "%s: %s[%d]: unreadable", name, K_TOK, i);
            goto out;
        }
        if (s.len > UGM_MAX_LEN) {
            st = slm_errf(err, SLM_ERR_FORMAT, "%s: %s[%d]: length %llu out of range", name, K_TOK, i,
                          (unsigned long long)s.len);
            goto out;
        }
        tok[i] = s.s;
        len[i] = (uint32_t)s.len;
        int32_t ty = UGM_NORMAL;
        if (types) memcpy(&ty, (const uint8_t *)types + 4 * (size_t)i, 4);
        if (ty < 0 || ty > UGM_BYTE) {
            st = slm_errf(err, SLM_ERR_FORMAT, "%s: %s[%d]: %d invalid", name, K_TYPE, i, (int)ty);
            goto out;
        }
        type[i] = (uint8_t)ty;
        if (scores) memcpy(&score[i], (const uint8_t *)scores + 4 * (size_t)i, 4);
    }
    st = ugm_make(out, tok, len, score, type, n, &m, cm, (size_t)cm_len, name, K_CM, err);
out:
    slm_xfree(tok);
    slm_xfree(len);
    slm_xfree(score);
    slm_xfree(type);
    return st;
}

/* ---- serialization ------------------------------------------------------ */

/* Layout, little endian: u32 version (1), u32 n_vocab, i32 bos, eos, unk,
 * pad, sep (-1: none), u8 add_space_prefix, remove_extra_ws, add_bos,
 * add_eos, u8 has_charsmap, u8 0, u16 0, u32 charsmap length, its bytes;
 * then per token f32 score, u8 type, u8 0, u16 0, u32 len (>= 1), len bytes. */
static void put_u32(uint8_t *p, uint32_t v) {
    for (int k = 0; k < 4; k++) p[k] = (uint8_t)(v >> (8 * k));
}
static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
#define UGM_HDR 40

size_t slm_ugm_serialize(const slm_ugm *u, uint8_t *buf, size_t cap) {
    uint64_t need = UGM_HDR + (uint64_t)u->charsmap_len;
    for (int i = 0; i < u->n_vocab; i++) need += 12 + (uint64_t)u->len[i];
    if (need > SIZE_MAX || u->charsmap_len > UINT32_MAX) return 0;
    if (!buf || cap < need) return (size_t)need;
    const slm_ugm_meta *m = &u->meta;
    put_u32(buf, UGM_SER_VERSION);
    put_u32(buf + 4, (uint32_t)u->n_vocab);
    const int ids[5] = {m->bos, m->eos, m->unk, m->pad, m->sep};
    for (int k = 0; k < 5; k++) put_u32(buf + 8 + 4 * k, (uint32_t)ids[k]);
    buf[28] = (uint8_t)(m->add_space_prefix != 0);
    buf[29] = (uint8_t)(m->remove_extra_ws != 0);
    buf[30] = (uint8_t)(m->add_bos != 0);
    buf[31] = (uint8_t)(m->add_eos != 0);
    buf[32] = u->charsmap != NULL;
    buf[33] = buf[34] = buf[35] = 0;
    put_u32(buf + 36, (uint32_t)u->charsmap_len);
    uint8_t *p = buf + UGM_HDR;
    if (u->charsmap_len) memcpy(p, u->charsmap, u->charsmap_len);
    p += u->charsmap_len;
    for (int i = 0; i < u->n_vocab; i++) {
        uint32_t sc;
        memcpy(&sc, &u->score[i], 4);
        put_u32(p, sc);
        p[4] = u->type[i];
        p[5] = p[6] = p[7] = 0;
        put_u32(p + 8, u->len[i]);
        memcpy(p + 12, tok_s(u, i), u->len[i]);
        p += 12 + u->len[i];
    }
    return (size_t)need;
}

slm_status slm_ugm_load_mem(slm_ugm **out, const void *data, size_t size, const char *name, slm_err *err) {
    *out = NULL;
    if (!name) name = "tokenizer";
    const uint8_t *d = data;
    if (!d || size < UGM_HDR) return slm_errf(err, SLM_ERR_FORMAT, "%s: Unigram header: %zu bytes, need %d", name, size, UGM_HDR);
    if (get_u32(d) != UGM_SER_VERSION)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: Unigram version %u unsupported (want %u)", name, get_u32(d), UGM_SER_VERSION);
    const uint32_t nv = get_u32(d + 4);
    if (nv < 1 || nv > UGM_MAX_VOCAB)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: n_vocab %u out of range (1..%d)", name, nv, UGM_MAX_VOCAB);
    int ids[5];
    for (int k = 0; k < 5; k++) {
        const uint32_t v = get_u32(d + 8 + 4 * k);
        if (v != UINT32_MAX && v >= nv)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: special id %u (#%d) not below n_vocab %u", name, v, k, nv);
        ids[k] = v == UINT32_MAX ? -1 : (int)v;
    }
    for (int k = 28; k < 33; k++)
        if (d[k] > 1) return slm_errf(err, SLM_ERR_FORMAT, "%s: Unigram flag at byte %d: %u not 0/1", name, k, d[k]);
    if (d[33] || d[34] || d[35]) return slm_errf(err, SLM_ERR_FORMAT, "%s: Unigram header: reserved bytes not 0", name);
    const uint32_t cm_len = get_u32(d + 36);
    if (!d[32] && cm_len) return slm_errf(err, SLM_ERR_FORMAT, "%s: charsmap: %u bytes but none flagged", name, cm_len);
    if (size - UGM_HDR < cm_len) return slm_errf(err, SLM_ERR_FORMAT, "%s: charsmap: %u bytes beyond end", name, cm_len);
    uint64_t o = UGM_HDR + (uint64_t)cm_len;
    for (uint32_t i = 0; i < nv; i++) { /* bounds of every record first */
        if (size - o < 12) return slm_errf(err, SLM_ERR_FORMAT, "%s: token %u: record beyond end", name, i);
        const uint32_t len = get_u32(d + o + 8);
        if (d[o + 4] > UGM_BYTE) return slm_errf(err, SLM_ERR_FORMAT, "%s: token %u: type %u invalid", name, i, d[o + 4]);
        if (d[o + 5] || d[o + 6] || d[o + 7]) return slm_errf(err, SLM_ERR_FORMAT, "%s: token %u: reserved bytes not 0", name, i);
        if (len < 1 || len > UGM_MAX_LEN) return slm_errf(err, SLM_ERR_FORMAT, "%s: token %u: length %u out of range", name, i, len);
        if (size - o - 12 < len) return slm_errf(err, SLM_ERR_FORMAT, "%s: token %u: %u bytes beyond end", name, i, len);
        o += 12 + (uint64_t)len;
    }
    if (o != size) return slm_errf(err, SLM_ERR_FORMAT, "%s: %llu trailing bytes", name, (unsigned long long)(size - o));
    const char **tok = slm_malloc((size_t)nv * sizeof *tok);
    uint32_t *len = slm_malloc((size_t)nv * sizeof *len);
    float *score = slm_malloc((size_t)nv * sizeof *score);
    uint8_t *type = slm_malloc((size_t)nv);
    slm_status st;
    if (!tok || !len || !score || !type) {
        st = slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory for the tokenizer", name);
    } else {
        o = UGM_HDR + (uint64_t)cm_len;
        for (uint32_t i = 0; i < nv; i++) {
            const uint32_t sc = get_u32(d + o);
            memcpy(&score[i], &sc, 4);
            type[i] = d[o + 4];
            len[i] = get_u32(d + o + 8);
            tok[i] = (const char *)d + o + 12;
            o += 12 + (uint64_t)len[i];
        }
        const slm_ugm_meta m = {ids[0], ids[1], ids[2], ids[3], ids[4], d[28], d[29], d[30], d[31]};
        st = ugm_make(out, tok, len, score, type, (int)nv, &m, d[32] ? d + UGM_HDR : NULL, cm_len, name, "charsmap", err);
    }
    slm_xfree(tok);
    slm_xfree(len);
    slm_xfree(score);
    slm_xfree(type);
    return st;
}

/* ---- accessors ---------------------------------------------------------- */

int slm_ugm_vocab_size(const slm_ugm *u) { return u ? u->n_vocab : 0; }
const slm_ugm_meta *slm_ugm_get_meta(const slm_ugm *u) { return u ? &u->meta : NULL; }
int slm_ugm_type(const slm_ugm *u, int id) { return u && id >= 0 && id < u->n_vocab ? u->type[id] : 0; }
float slm_ugm_score(const slm_ugm *u, int id) { return u && id >= 0 && id < u->n_vocab ? u->score[id] : 0.0f; }

const char *slm_ugm_str(const slm_ugm *u, int id) {
    return u && id >= 0 && id < u->n_vocab ? u->strs + u->str_off[id] : NULL;
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* byte b and a NUL at [2 * b] */
#define P1(b) (char)(b), 0
#define P4(b) P1(b), P1((b) + 1), P1((b) + 2), P1((b) + 3)
#define P16(b) P4(b), P4((b) + 4), P4((b) + 8), P4((b) + 12)
#define P64(b) P16(b), P16((b) + 16), P16((b) + 32), P16((b) + 48)
static const char byte_pieces[512] = {P64(0), P64(64), P64(128), P64(192)};

const char *slm_ugm_piece(const slm_ugm *u, int id, size_t *len) {
    if (len) *len = 0;
    if (!u || id < 0 || id >= u->n_vocab) return "";
    const int ty = u->type[id];
    if (ty == UGM_NORMAL) {
        if (len) *len = u->str_len[id];
        return u->strs + u->str_off[id];
    }
    if (is_special_type(ty)) {
        if (len) *len = u->len[id];
        return tok_s(u, id);
    }
    if (ty == UGM_BYTE) { /* llama.cpp reads two hex digits after "<0x" (strtol: fewer when not hex) */
        const char *s = tok_s(u, id);
        int v = 0;
        for (uint32_t k = 3; k < 5 && k < u->len[id] && hexval(s[k]) >= 0; k++) v = v * 16 + hexval(s[k]);
        if (len) *len = 1;
        return byte_pieces + 2 * v;
    }
    return ""; /* unused, undefined */
}
