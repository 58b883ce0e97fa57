/* WordPiece (BERT) tokenizer: the vocabulary, its lookup table, loaders and
 * the encoder (wpm.h says what it does, as llama.cpp's WPM tokenizer).
 *
 * Longest match: every token's spelling is in an open-addressing table keyed
 * by its FNV-1a hash, and so is every proper prefix of a spelling (a marker
 * with the prefix's hash and no id). The search from a position extends one
 * byte at a time (the hash is incremental), remembers the longest full token
 * and stops as soon as no token starts with what it has read. That gives the
 * same token as trying every length from the longest down, in about as many
 * steps as the match is long. A marker is only a hash, so a collision can
 * make a search go on further than needed, never find a wrong token.
 */
#include <stdio.h>
#include <stdlib.h>

#include "text/bpe.h" /* SLM_TOK_E* */
#include "text/st_partition.h"
#include "text/wpm.h"
#include "text/vocab_keys.h"

#define WPM_MAX_VOCAB (1 << 24) /* tokens */
#define WPM_MAX_LEN 65536       /* bytes of one token */
#define WPM_PROBES_PER_BYTE 256 /* the search's budget, per input byte */
#define WPM_SER_VERSION 1u

/* GGUF token types */
enum { TT_UNDEFINED = 0, TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER_DEFINED = 4, TT_UNUSED = 5, TT_BYTE = 6 };

enum { SLOT_EMPTY = -2, SLOT_PREFIX = -1 };

typedef struct wpm_slot {
    uint32_t hash; /* FNV-1a of the spelling or prefix */
    int32_t id;    /* token id, SLOT_PREFIX (a proper prefix of some token) or SLOT_EMPTY */
} wpm_slot;

struct slm_wpm {
    int n_vocab;             /* tokens */
    int cls, sep, unk, eos;  /* special ids (in range) */
    int lowercase;           /* 1: lowercase the text */
    int strip_accents;       /* 1: first code point of NFD, marks dropped */
    uint32_t max_len;        /* longest spelling, bytes */
    char *blob;              /* every spelling (U+2581 kept), NUL-terminated */
    uint32_t *off;           /* [n_vocab] offset of token i in blob */
    uint32_t *len;           /* [n_vocab] its length, bytes */
    uint8_t *type;           /* [n_vocab] TT_* */
    char *strs;              /* every spelling with U+2581 -> ' ', NUL-terminated */
    uint32_t *str_off;       /* [n_vocab] offset of token i in strs */
    wpm_slot *slot;          /* [slot_mask + 1] lookup table */
    uint32_t slot_mask;      /* table size - 1 (a power of two) */
    int32_t *special;        /* [n_special] control/unknown/user-defined ids, longest first */
    int n_special;
};

static uint32_t fnv_step(uint32_t h, uint8_t b) { return (h ^ b) * 16777619u; }
#define FNV_BASIS 2166136261u

static const char *tok_s(const slm_wpm *w, int id) { return w->blob + w->off[id]; }

void slm_wpm_free(slm_wpm *w) {
    if (!w) return;
    slm_xfree(w->blob);
    slm_xfree(w->off);
    slm_xfree(w->len);
    slm_xfree(w->type);
    slm_xfree(w->strs);
    slm_xfree(w->str_off);
    slm_xfree(w->slot);
    slm_xfree(w->special);
    slm_xfree(w);
}

static slm_wpm *wpm_alloc(int n, uint64_t blob_size) {
    slm_wpm *w = slm_calloc(1, sizeof *w);
    if (!w) return NULL;
    w->n_vocab = n;
    w->blob = slm_malloc((size_t)blob_size);
    w->off = slm_calloc((size_t)n, sizeof *w->off);
    w->len = slm_calloc((size_t)n, sizeof *w->len);
    w->type = slm_calloc((size_t)n, 1);
    w->str_off = slm_calloc((size_t)n, sizeof *w->str_off);
    if (!w->blob || !w->off || !w->len || !w->type || !w->str_off) {
        slm_wpm_free(w);
        return NULL;
    }
    return w;
}

static int is_special_type(int ty) { return ty == TT_CONTROL || ty == TT_UNKNOWN || ty == TT_USER_DEFINED; }

/* keys (~len) << 32 | id: ascending = longest first, then by id */
static int u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* After blob/off/len/type: max_len, the " " spellings, the lookup table
 * (token spellings and their prefixes) and the special tokens. */
static slm_status wpm_index(slm_wpm *w, const char *name, slm_err *err) {
    uint64_t entries = 0, blob = 0;
    w->max_len = 0;
    for (int id = 0; id < w->n_vocab; id++) {
        if (w->len[id] > w->max_len) w->max_len = w->len[id];
        entries += w->len[id]; /* the token and its len - 1 proper prefixes */
        blob += w->len[id] + 1;
    }
    uint64_t cap = 16;
    while (cap < 2 * entries) cap <<= 1;
    if (cap > (1u << 28)) return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.tokens: too large to index", name);
    w->slot_mask = (uint32_t)cap - 1;
    w->slot = slm_malloc((size_t)cap * sizeof *w->slot);
    w->strs = slm_malloc((size_t)blob);
    int n_sp = 0;
    for (int id = 0; id < w->n_vocab; id++) n_sp += is_special_type(w->type[id]) && w->len[id] > 0;
    w->special = slm_malloc((size_t)(n_sp ? n_sp : 1) * sizeof *w->special);
    if (!w->slot || !w->strs || !w->special) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory for the tokenizer", name);
    for (uint64_t i = 0; i < cap; i++) w->slot[i] = (wpm_slot){0, SLOT_EMPTY};

    uint32_t so = 0;
    for (int id = 0; id < w->n_vocab; id++) {
        const uint8_t *s = (const uint8_t *)tok_s(w, id);
        uint32_t n = w->len[id];
        /* the " " spelling */
        w->str_off[id] = so;
        for (uint32_t k = 0; k < n; k++) {
            if (k + 2 < n && s[k] == 0xE2 && s[k + 1] == 0x96 && s[k + 2] == 0x81) {
                w->strs[so++] = ' ';
                k += 2;
            } else {
                w->strs[so++] = (char)s[k];
            }
        }
        w->strs[so++] = 0;
        if (is_special_type(w->type[id]) && n > 0) w->special[w->n_special++] = id;
        /* the prefixes, then the token (two tokens spelled the same are
         * refused, as llama.cpp refuses them) */
        uint32_t h = FNV_BASIS;
        for (uint32_t k = 0; k < n; k++) {
            h = fnv_step(h, s[k]);
            uint32_t i = h & w->slot_mask;
            if (k + 1 < n) {
                while (w->slot[i].id != SLOT_EMPTY && !(w->slot[i].id == SLOT_PREFIX && w->slot[i].hash == h))
                    i = (i + 1) & w->slot_mask;
                w->slot[i] = (wpm_slot){h, SLOT_PREFIX};
            } else {
                for (;;) {
                    int32_t o = w->slot[i].id;
                    if (o == SLOT_EMPTY) break;
                    if (o >= 0 && w->slot[i].hash == h && w->len[o] == n && !memcmp(tok_s(w, o), s, n))
                        return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.tokens[%d]: the same spelling as token %d",
                                        name, id, (int)o);
                    i = (i + 1) & w->slot_mask;
                }
                w->slot[i] = (wpm_slot){h, id};
            }
        }
    }
    if (w->n_special > 1) { /* llama.cpp sorts by length only (ties unspecified); ties here by id */
        uint64_t *key = slm_malloc((size_t)w->n_special * sizeof *key);
        if (!key) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory for the tokenizer", name);
        for (int k = 0; k < w->n_special; k++)
            key[k] = (uint64_t)(UINT32_MAX - w->len[w->special[k]]) << 32 | (uint32_t)w->special[k];
        qsort(key, (size_t)w->n_special, sizeof *key, u64_cmp);
        for (int k = 0; k < w->n_special; k++) w->special[k] = (int32_t)(uint32_t)key[k];
        slm_xfree(key);
    }
    return SLM_OK;
}

/* ---- loaders ---------------------------------------------------------- */

slm_status slm_wpm_load_gguf(slm_wpm **out, const slm_gguf *g, const char *name, slm_err *err) {
    *out = NULL;
    if (!name) name = "gguf";
    static const char *const K_TOK = "tokenizer.ggml.tokens", *const K_TYPE = "tokenizer.ggml.token_type";
    slm_gguf_type et;
    uint64_t n_tok, cnt;
    const void *unused, *types = NULL;
    if (!slm_gguf_get_arr(g, K_TOK, &et, &n_tok, &unused) || et != SLM_GGUF_STRING)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: missing or not a string array", name, K_TOK);
    if (n_tok < 1 || n_tok > WPM_MAX_VOCAB)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: %llu tokens out of range", name, K_TOK, (unsigned long long)n_tok);
    const int n = (int)n_tok;
    if (slm_gguf_find(g, K_TYPE) >= 0 && (!slm_gguf_get_arr(g, K_TYPE, &et, &cnt, &types) || et != SLM_GGUF_I32 || cnt != n_tok))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: not an i32 array of %d", name, K_TYPE, n);
    int cls, sep, unk, eos, lower = 1, strip;
    slm_status st;
    if ((st = slm_vocab_key_id(g, name, "tokenizer.ggml.bos_token_id", n, 101, 1, &cls, err)) ||
        (st = slm_vocab_key_id(g, name, "tokenizer.ggml.unknown_token_id", n, 100, 1, &unk, err)) ||
        (st = slm_vocab_key_id(g, name, "tokenizer.ggml.seperator_token_id", n, 102, 1, &sep, err)) ||
        (st = slm_vocab_key_id(g, name, "tokenizer.ggml.eos_token_id", n, sep, 1, &eos, err)))
        return st;
    if ((st = slm_vocab_key_flag(g, name, "tokenizer.ggml.normalizer.lowercase", &lower, err))) return st;
    strip = lower;
    if ((st = slm_vocab_key_flag(g, name, "tokenizer.ggml.normalizer.strip_accents", &strip, err))) return st;

    /* an empty spelling becomes "[EMPTY_<id>]" as in llama.cpp */
    char empty[32];
    uint64_t blob = 0;
    for (int i = 0; i < n; i++) {
        slm_gguf_str s;
        if (!slm_gguf_arr_str(g, K_TOK, (uint64_t)i, &s))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: %s[%d]: unreadable", name, K_TOK, i);
        if (s.len > WPM_MAX_LEN)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: %s[%d]: length %llu out of range", name, K_TOK, i,
                            (unsigned long long)s.len);
        blob += (s.len ? s.len : (uint64_t)snprintf(empty, sizeof empty, "[EMPTY_%d]", i)) + 1;
    }
    if (blob > UINT32_MAX) return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: too large", name, K_TOK);
    slm_wpm *w = wpm_alloc(n, blob);
    if (!w) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory for the tokenizer", name);
    w->cls = cls, w->sep = sep, w->unk = unk, w->eos = eos;
    w->lowercase = lower != 0, w->strip_accents = strip != 0;
    uint32_t o = 0;
    for (int i = 0; i < n; i++) {
        slm_gguf_str s;
        slm_gguf_arr_str(g, K_TOK, (uint64_t)i, &s);
        const char *p = s.s;
        size_t len = (size_t)s.len;
        if (!len) len = (size_t)snprintf(empty, sizeof empty, "[EMPTY_%d]", i), p = empty;
        w->off[i] = o;
        w->len[i] = (uint32_t)len;
        memcpy(w->blob + o, p, len);
        w->blob[o + len] = 0;
        o += (uint32_t)len + 1;
        int32_t ty = TT_NORMAL;
        if (types) memcpy(&ty, (const uint8_t *)types + 4 * (size_t)i, 4);
        if (ty < 0 || ty > TT_BYTE) {
            slm_wpm_free(w);
            return slm_errf(err, SLM_ERR_FORMAT, "%s: %s[%d]: %d invalid", name, K_TYPE, i, (int)ty);
        }
        w->type[i] = (uint8_t)ty;
    }
    if ((st = wpm_index(w, name, err))) {
        slm_wpm_free(w);
        return st;
    }
    *out = w;
    return SLM_OK;
}

slm_status slm_wpm_build(slm_wpm **out, const char *const *tok, const uint32_t *len, const uint8_t *type, int n,
                         const int special[4], int lowercase, int strip_accents, const char *name, slm_err *err) {
    *out = NULL;
    if (!name) name = "tokenizer";
    if (n < 1 || n > WPM_MAX_VOCAB)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %d tokens out of range (1..%d)", name, n, WPM_MAX_VOCAB);
    static const char *const idn[4] = {"cls", "sep", "unk", "eos"};
    for (int k = 0; k < 4; k++)
        if (special[k] < 0 || special[k] >= n)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: the %s token id %d is not below the %d tokens", name, idn[k],
                            special[k], n);
    char empty[32];
    uint64_t blob = 0;
    for (int i = 0; i < n; i++) {
        if (len[i] > WPM_MAX_LEN)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: token %d: length %u out of range", name, i, len[i]);
        if (type[i] > TT_BYTE) return slm_errf(err, SLM_ERR_FORMAT, "%s: token %d: type %u invalid", name, i, type[i]);
        blob += (len[i] ? len[i] : (uint64_t)snprintf(empty, sizeof empty, "[EMPTY_%d]", i)) + 1;
    }
    if (blob > UINT32_MAX) return slm_errf(err, SLM_ERR_FORMAT, "%s: token strings too large", name);
    slm_wpm *w = wpm_alloc(n, blob);
    if (!w) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory for the tokenizer", name);
    w->cls = special[0], w->sep = special[1], w->unk = special[2], w->eos = special[3];
    w->lowercase = lowercase != 0, w->strip_accents = strip_accents != 0;
    uint32_t o = 0;
    for (int i = 0; i < n; i++) { /* an empty spelling becomes "[EMPTY_<id>]", as from a GGUF */
        const char *p = tok[i];
        size_t l = len[i];
        if (!l) l = (size_t)snprintf(empty, sizeof empty, "[EMPTY_%d]", i), p = empty;
        w->off[i] = o;
        w->len[i] = (uint32_t)l;
        memcpy(w->blob + o, p, l);
        w->blob[o + l] = 0;
        o += (uint32_t)l + 1;
        w->type[i] = type[i];
    }
    slm_status st = wpm_index(w, name, err);
    if (st) {
        slm_wpm_free(w);
        return st;
    }
    *out = w;
    return SLM_OK;
}

/* Serialized layout, little endian: u32 version (1), u32 n_vocab, u32 cls,
 * sep, unk, eos, u8 lowercase, u8 strip_accents, u16 0; then per token u8
 * type, u8 0, u16 0, u32 len, len bytes. The rest is derived again. */
static void put_u32(uint8_t *p, uint32_t v) {
    for (int k = 0; k < 4; k++) p[k] = (uint8_t)(v >> (8 * k));
}
static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

size_t slm_wpm_serialize(const slm_wpm *w, uint8_t *buf, size_t cap) {
    uint64_t need = 28;
    for (int i = 0; i < w->n_vocab; i++) need += 8 + (uint64_t)w->len[i];
    if (need > SIZE_MAX) return 0;
    if (!buf || cap < need) return (size_t)need;
    put_u32(buf, WPM_SER_VERSION);
    put_u32(buf + 4, (uint32_t)w->n_vocab);
    put_u32(buf + 8, (uint32_t)w->cls);
    put_u32(buf + 12, (uint32_t)w->sep);
    put_u32(buf + 16, (uint32_t)w->unk);
    put_u32(buf + 20, (uint32_t)w->eos);
    buf[24] = (uint8_t)w->lowercase;
    buf[25] = (uint8_t)w->strip_accents;
    buf[26] = buf[27] = 0;
    uint8_t *p = buf + 28;
    for (int i = 0; i < w->n_vocab; i++) {
        p[0] = w->type[i];
        p[1] = p[2] = p[3] = 0;
        put_u32(p + 4, w->len[i]);
        memcpy(p + 8, tok_s(w, i), w->len[i]);
        p += 8 + w->len[i];
    }
    return (size_t)need;
}

slm_status slm_wpm_load_mem(slm_wpm **out, const void *data, size_t size, const char *name, slm_err *err) {
    *out = NULL;
    if (!name) name = "tokenizer";
    const uint8_t *d = data;
    if (!d || size < 28) return slm_errf(err, SLM_ERR_FORMAT, "%s: WordPiece header: %zu bytes, need 28", name, size);
    if (get_u32(d) != WPM_SER_VERSION)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: WordPiece version %u unsupported (want %u)", name, get_u32(d),
                        WPM_SER_VERSION);
    uint32_t nv = get_u32(d + 4);
    if (nv < 1 || nv > WPM_MAX_VOCAB)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: n_vocab %u out of range (1..%d)", name, nv, WPM_MAX_VOCAB);
    static const char *const idn[4] = {"cls", "sep", "unk", "eos"};
    uint32_t ids[4];
    for (int k = 0; k < 4; k++) {
        ids[k] = get_u32(d + 8 + 4 * k);
        if (ids[k] >= nv) return slm_errf(err, SLM_ERR_FORMAT, "%s: %s id %u not below n_vocab %u", name, idn[k], ids[k], nv);
    }
    if (d[24] > 1 || d[25] > 1) return slm_errf(err, SLM_ERR_FORMAT, "%s: normalizer flags %u/%u not 0/1", name, d[24], d[25]);
    if (d[26] || d[27]) return slm_errf(err, SLM_ERR_FORMAT, "%s: header: reserved bytes not 0", name);
    uint64_t o = 28, blob = 0;
    for (uint32_t i = 0; i < nv; i++) {
        if (size - o < 8) return slm_errf(err, SLM_ERR_FORMAT, "%s: token %u: record beyond end", name, i);
        uint32_t len = get_u32(d + o + 4);
        if (d[o] > TT_BYTE) return slm_errf(err, SLM_ERR_FORMAT, "%s: token %u: type %u invalid", name, i, d[o]);
        if (d[o + 1] || d[o + 2] || d[o + 3]) return slm_errf(err, SLM_ERR_FORMAT, "%s: token %u: reserved bytes not 0", name, i);
        if (len < 1 || len > WPM_MAX_LEN) return slm_errf(err, SLM_ERR_FORMAT, "%s: token %u: length %u out of range", name, i, len);
        if (size - o - 8 < len) return slm_errf(err, SLM_ERR_FORMAT, "%s: token %u: %u bytes beyond end", name, i, len);
        o += 8 + (uint64_t)len;
        blob += (uint64_t)len + 1;
    }
    if (o != size) return slm_errf(err, SLM_ERR_FORMAT, "%s: %llu trailing bytes", name, (unsigned long long)(size - o));
    if (blob > UINT32_MAX) return slm_errf(err, SLM_ERR_FORMAT, "%s: token strings too large", name);
    slm_wpm *w = wpm_alloc((int)nv, blob);
    if (!w) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory for the tokenizer", name);
    w->cls = (int)ids[0], w->sep = (int)ids[1], w->unk = (int)ids[2], w->eos = (int)ids[3];
    w->lowercase = d[24], w->strip_accents = d[25];
    o = 28;
    uint32_t bo = 0;
    for (uint32_t i = 0; i < nv; i++) {
        uint32_t len = get_u32(d + o + 4);
        w->type[i] = d[o];
        w->off[i] = bo;
        w->len[i] = len;
        memcpy(w->blob + bo, d + o + 8, len);
        w->blob[bo + len] = 0;
        bo += len + 1;
        o += 8 + (uint64_t)len;
    }
    slm_status st = wpm_index(w, name, err);
    if (st) {
        slm_wpm_free(w);
        return st;
    }
    *out = w;
    return SLM_OK;
}

/* ---- accessors -------------------------------------------------------- */

int slm_wpm_vocab_size(const slm_wpm *w) { return w ? w->n_vocab : 0; }
int slm_wpm_cls(const slm_wpm *w) { return w ? w->cls : -1; }
int slm_wpm_sep(const slm_wpm *w) { return w ? w->sep : -1; }
int slm_wpm_unk(const slm_wpm *w) { return w ? w->unk : -1; }
int slm_wpm_eos(const slm_wpm *w) { return w ? w->eos : -1; }

int slm_wpm_type(const slm_wpm *w, int id) {
    return w && id >= 0 && id < w->n_vocab ? w->type[id] : 0;
}

const char *slm_wpm_str(const slm_wpm *w, int id) {
    return w && id >= 0 && id < w->n_vocab ? w->strs + w->str_off[id] : NULL;
}

const char *slm_wpm_piece(const slm_wpm *w, int id) {
    if (!w || id < 0 || id >= w->n_vocab) return "";
    int ty = w->type[id];
    if (ty == TT_NORMAL) return w->strs + w->str_off[id];
    if (is_special_type(ty)) return tok_s(w, id);
    return ""; /* undefined, unused, byte: llama.cpp writes nothing */
}

/* ---- encoder ---------------------------------------------------------- */

/* A special token's text and kind for the partition. */
static int wpm_special(const void *vocab, int32_t id, const char **s, size_t *len) {
    const slm_wpm *w = vocab;
    *s = tok_s(w, id);
    *len = w->len[id];
    return w->type[id] == TT_CONTROL || w->type[id] == TT_UNKNOWN;
}

typedef struct wpm_out {
    int32_t *ids;   /* the caller's array */
    int cap;        /* its capacity */
    int n;          /* ids produced (may exceed cap) */
    int64_t budget; /* probes left for the longest-match search */
} wpm_out;

static void emit(wpm_out *o, int32_t id) {
    if (o->n < o->cap) o->ids[o->n] = id;
    o->n++;
}

/* Split one word (starting with U+2581) greedily, longest token first; the
 * whole word is [UNK] when some rest of it matches no token. 0, or
 * SLM_TOK_EBUDGET. */
static int word_tokens(const slm_wpm *w, const uint8_t *s, size_t m, wpm_out *o) {
    const int start = o->n;
    size_t i = 0;
    while (i < m) {
        uint32_t h = FNV_BASIS;
        int32_t best = -1;
        size_t best_len = 0, lim = m - i < w->max_len ? m - i : w->max_len;
        for (size_t k = 1; k <= lim; k++) {
            h = fnv_step(h, s[i + k - 1]);
            if (--o->budget < 0) return SLM_TOK_EBUDGET;
            int more = 0;
            for (uint32_t j = h & w->slot_mask; w->slot[j].id != SLOT_EMPTY; j = (j + 1) & w->slot_mask) {
                const wpm_slot *sl = &w->slot[j];
                if (sl->hash != h) continue;
                if (sl->id == SLOT_PREFIX) more = 1;
                else if (w->len[sl->id] == k && !memcmp(tok_s(w, sl->id), s + i, k)) best = sl->id, best_len = k;
            }
            if (!more) break;
        }
        if (best < 0) {
            o->n = start; /* discard the word's tokens */
            break;
        }
        emit(o, best);
        i += best_len;
    }
    if (o->n == start) emit(o, w->unk);
    return 0;
}

/* llama.cpp's unicode_cpt_from_utf8: no overlong or range checks; a bad
 * lead byte or a missing continuation byte gives U+FFFD and moves 1 byte. */
static uint32_t next_cpt(const uint8_t *s, size_t n, size_t *i) {
    const uint8_t b = s[*i];
    const size_t left = n - *i;
    if (b < 0x80) return (*i)++, b;
    size_t k = (b & 0x40) == 0 ? 0 : (b & 0x20) == 0 ? 2 : (b & 0x10) == 0 ? 3 : (b & 0x08) == 0 ? 4 : 0;
    int ok = k > 0 && left >= k;
    for (size_t j = 1; ok && j < k; j++) ok = (s[*i + j] & 0xC0) == 0x80;
    if (!ok) return (*i)++, 0xFFFD;
    uint32_t c = b & (0x7F >> k);
    for (size_t j = 1; j < k; j++) c = c << 6 | (s[*i + j] & 0x3F);
    *i += k;
    return c;
}

/* UTF-8 of c (up to 0x1FFFFF in 4 bytes) into p; its length. */
static size_t put_utf8(uint8_t *p, uint32_t c) {
    if (c < 0x80) return p[0] = (uint8_t)c, 1;
    if (c < 0x800) return p[0] = (uint8_t)(0xC0 | c >> 6), p[1] = (uint8_t)(0x80 | (c & 0x3F)), 2;
    if (c < 0x10000) {
        p[0] = (uint8_t)(0xE0 | c >> 12);
        p[1] = (uint8_t)(0x80 | (c >> 6 & 0x3F));
        p[2] = (uint8_t)(0x80 | (c & 0x3F));
        return 3;
    }
    p[0] = (uint8_t)(0xF0 | (c >> 18 & 0x07));
    p[1] = (uint8_t)(0x80 | (c >> 12 & 0x3F));
    p[2] = (uint8_t)(0x80 | (c >> 6 & 0x3F));
    p[3] = (uint8_t)(0x80 | (c & 0x3F));
    return 4;
}

/* One text fragment: normalize, split into words, tokenize each. word is
 * scratch of at least 3 + 2 * n + 8 bytes (a code point of k bytes becomes
 * at most k + 1 after lowercasing, e.g. U+023A -> U+2C65). */
static int fragment_tokens(const slm_wpm *w, const uint8_t *s, size_t n, uint8_t *word, wpm_out *o) {
    size_t m = 3, i = 0;
    word[0] = 0xE2, word[1] = 0x96, word[2] = 0x81; /* U+2581 */
    int rc = 0;
    while (i < n && !rc) {
        uint32_t c = next_cpt(s, n, &i);
        if (w->strip_accents) c = slm_wpm_nfd_first(c);
        if (slm_wpm_is_space(c)) {
            if (m > 3) rc = word_tokens(w, word, m, o);
            m = 3;
            continue;
        }
        const int cl = slm_wpm_class(c);
        if (c == 0 || c == 0xFFFD || cl == SLM_WPM_CONTROL) continue;
        if (w->strip_accents && cl == SLM_WPM_MARK) continue;
        const uint32_t lc = w->lowercase ? slm_wpm_lower(c) : c;
        /* the ASCII symbols (general category S) are $ + < = > ^ ` | ~ */
        const int ascii_sym = c < 0x7F && c > 0 && strchr("$+<=>^`|~", (int)c) != NULL;
        if (cl == SLM_WPM_PUNCT || ascii_sym || slm_wpm_is_cjk(c)) {
            if (m > 3 && (rc = word_tokens(w, word, m, o))) break;
            m = 3 + put_utf8(word + 3, lc);
            rc = word_tokens(w, word, m, o);
            m = 3;
        } else {
            m += put_utf8(word + m, lc);
        }
    }
    if (!rc && m > 3) rc = word_tokens(w, word, m, o);
    return rc;
}

int slm_wpm_encode(const slm_wpm *w, const char *text, size_t n, const uint8_t *plain, int add_cls, int add_sep,
                   int parse_special, int32_t *ids, int cap) {
    if (!w) return SLM_TOK_ENOMEM;
    if (!text) n = 0;
    if (n > (size_t)(INT32_MAX / 8)) return SLM_TOK_ETOOLONG;
    wpm_out o = {ids, ids && cap > 0 ? cap : 0, 0, (int64_t)n * WPM_PROBES_PER_BYTE + 65536};
    if (add_cls) emit(&o, w->cls);
    slm_st_frags fr = {0};
    if (!slm_st_partition(text, (int32_t)n, parse_special, plain, w->special, w->n_special, wpm_special, w, &fr))
        return SLM_TOK_ENOMEM;
    int32_t longest = 0;
    for (int f = 0; f < fr.n; f++)
        if (fr.a[f].id < 0 && fr.a[f].len > longest) longest = fr.a[f].len;
    uint8_t *word = longest ? slm_malloc(3 + 2 * (size_t)longest + 8) : NULL;
    int rc = longest && !word ? SLM_TOK_ENOMEM : 0;
    for (int f = 0; !rc && f < fr.n; f++) {
        if (fr.a[f].id >= 0) emit(&o, fr.a[f].id);
        else rc = fragment_tokens(w, (const uint8_t *)text + fr.a[f].start, (size_t)fr.a[f].len, word, &o);
    }
    slm_xfree(word);
    slm_xfree(fr.a);
    if (rc) return rc;
    if (add_sep) emit(&o, w->sep);
    return o.n;
}
