/* Byte-level BPE tokenizer (see bpe.h for the encoding steps and
 * bpe_internal.h for how the files divide the work): the tables every
 * loader builds (string -> id, (left, right) -> merge rank), finishing a
 * loaded vocabulary (special tokens, byte tokens, decoded pieces, EOT),
 * decoding and the accessors.
 *
 * Facts taken from llama.cpp (src/llama-vocab.cpp; MIT): the last of
 * duplicate spellings wins the string -> id table, the first of duplicate
 * merges wins, EOT detection by text when the metadata names none.
 *
 * Merges are keyed by (left id, right id) in an open-addressing table.
 */
#include <stdio.h>
#include <stdlib.h>

#include "text/bpe_internal.h"

/* ---- GPT-2 byte <-> unicode ------------------------------------------- */

static int g_byte_cp[256];     /* byte -> code point */
int16_t slm_bpe__cp_byte[324];
uint8_t slm_bpe__enc[256][2];
uint8_t slm_bpe__enc_len[256];
static int g_tables_ready;

static void byte_tables(void) {
    if (g_tables_ready) return;
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int direct = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
        g_byte_cp[b] = direct ? b : 256 + n++;
    }
    for (int c = 0; c < 324; c++) slm_bpe__cp_byte[c] = -1;
    for (int b = 0; b < 256; b++) {
        int c = g_byte_cp[b];
        slm_bpe__cp_byte[c] = (int16_t)b;
        if (c < 0x80) {
            slm_bpe__enc[b][0] = (uint8_t)c;
            slm_bpe__enc_len[b] = 1;
        } else {
            slm_bpe__enc[b][0] = (uint8_t)(0xc0 | (c >> 6));
            slm_bpe__enc[b][1] = (uint8_t)(0x80 | (c & 0x3f));
            slm_bpe__enc_len[b] = 2;
        }
    }
    g_tables_ready = 1;
}

/* Length of a valid UTF-8 sequence at s (n bytes left), 0 if invalid
 * (overlong, surrogate, > U+10FFFF, truncated): PCRE2's notion of valid. */
int slm_bpe__utf8_len(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    int k;
    uint32_t v, min;
    if ((c & 0xe0) == 0xc0) { k = 2; v = c & 0x1f; min = 0x80; }
    else if ((c & 0xf0) == 0xe0) { k = 3; v = c & 0x0f; min = 0x800; }
    else if ((c & 0xf8) == 0xf0) { k = 4; v = c & 0x07; min = 0x10000; }
    else return 0;
    if ((size_t)k > n) return 0;
    for (int i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
    *cp = v;
    return k;
}

/* ---- tables ------------------------------------------------------------ */

uint64_t slm_bpe__fnv64(const void *p, size_t n) {
    const uint8_t *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ull;
    }
    return h;
}

int slm_bpe__lookup(const slm_bpe *t, const char *s, size_t n) {
    if (n == 0 || n > t->max_len) return -1;
    uint32_t i = (uint32_t)slm_bpe__fnv64(s, n) & t->hash_mask;
    for (;;) {
        int32_t id = t->hash[i];
        if (id < 0) return -1;
        if (t->len[id] == n && memcmp(slm_bpe__tok(t, id), s, n) == 0) return id;
        i = (i + 1) & t->hash_mask;
    }
}

static uint32_t mix64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (uint32_t)k;
}

int slm_bpe__merge_rank(const slm_bpe *t, int l, int r) {
    if (!t->mkey || l < 0 || r < 0) return -1;
    uint64_t key = (((uint64_t)(uint32_t)l << 32) | (uint32_t)r) + 1;
    uint32_t i = mix64(key) & t->mmask;
    for (;;) {
        uint64_t k = t->mkey[i];
        if (k == 0) return -1;
        if (k == key) return t->mrank[i];
        i = (i + 1) & t->mmask;
    }
}

void slm_bpe_free(slm_bpe *t) {
    if (!t) return;
    slm_xfree(t->blob);
    slm_xfree(t->off);
    slm_xfree(t->len);
    slm_xfree(t->type);
    slm_xfree(t->hash);
    slm_xfree(t->merge_l);
    slm_xfree(t->merge_r);
    slm_xfree(t->merge_res);
    slm_xfree(t->mkey);
    slm_xfree(t->mrank);
    slm_xfree(t->special);
    for (int i = 0; i < t->n_regex; i++) {
        slm_xfree(t->regex[i]);
        if (t->re[i]) pcre2_code_free(t->re[i]);
    }
    if (t->gctx) pcre2_general_context_free(t->gctx);
    slm_xfree(t->dec);
    slm_xfree(t->dec_off);
    slm_xfree(t->dec_len);
    slm_xfree(t);
}

/* A tokenizer with room for n_vocab tokens of blob_size bytes in all
 * (NULs included); the caller fills blob/off/len/type. */
slm_bpe *slm_bpe__alloc(int n_vocab, uint64_t blob_size) {
    byte_tables();
    slm_bpe *t = slm_calloc(1, sizeof *t);
    if (!t) return NULL;
    t->n_vocab = n_vocab;
    t->bos = t->eos = t->eot = t->unk = t->pad = -1;
    t->byte_level = 1;
    t->max_input = SLM_TOK_DEFAULT_MAX_INPUT;
    if (blob_size > SIZE_MAX) {
        slm_xfree(t);
        return NULL;
    }
    t->blob = slm_malloc((size_t)blob_size);
    t->off = slm_calloc((size_t)n_vocab, sizeof *t->off);
    t->len = slm_calloc((size_t)n_vocab, sizeof *t->len);
    t->type = slm_calloc((size_t)n_vocab, sizeof *t->type);
    if (!t->blob || !t->off || !t->len || !t->type) {
        slm_bpe_free(t);
        return NULL;
    }
    return t;
}

/* The string -> id table (the last of duplicate spellings wins, as in
 * llama.cpp's token_to_id). Empty tokens are not indexed. */
slm_status slm_bpe__index(slm_bpe *t, const char *name, slm_err *err) {
    uint32_t cap = 16;
    while (cap < (uint32_t)t->n_vocab * 2u) cap <<= 1;
    t->hash_mask = cap - 1;
    t->hash = slm_malloc((size_t)cap * sizeof *t->hash);
    if (!t->hash) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory (token table)", name);
    memset(t->hash, 0xff, (size_t)cap * sizeof *t->hash);
    t->max_len = 0;
    for (int id = 0; id < t->n_vocab; id++)
        if (t->len[id] > t->max_len) t->max_len = t->len[id];
    for (int id = 0; id < t->n_vocab; id++) {
        uint32_t n = t->len[id];
        if (n == 0) continue;
        const char *s = slm_bpe__tok(t, id);
        uint32_t i = (uint32_t)slm_bpe__fnv64(s, n) & t->hash_mask;
        for (;;) {
            int32_t o = t->hash[i];
            if (o < 0 || (t->len[o] == n && memcmp(slm_bpe__tok(t, o), s, n) == 0)) {
                t->hash[i] = id;
                break;
            }
            i = (i + 1) & t->hash_mask;
        }
    }
    return SLM_OK;
}

/* After merge_l/merge_r are set: check ids, the (l, r) -> rank table and the
 * merge results. */
static slm_status build_merges(slm_bpe *t, const char *name, slm_err *err) {
    uint32_t cap = 16;
    while (cap < (uint32_t)t->n_merges * 2u) cap <<= 1;
    t->mmask = cap - 1;
    t->mkey = slm_calloc(cap, sizeof *t->mkey);
    t->mrank = slm_calloc(cap, sizeof *t->mrank);
    t->merge_res = slm_calloc((size_t)(t->n_merges ? t->n_merges : 1), sizeof *t->merge_res);
    if (!t->mkey || !t->mrank || !t->merge_res)
        return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory (%d merges)", name, t->n_merges);
    char *buf = slm_malloc((size_t)t->max_len * 2 + 1);
    if (!buf) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", name);
    for (int m = 0; m < t->n_merges; m++) {
        int l = t->merge_l[m], r = t->merge_r[m];
        if (l < 0 || l >= t->n_vocab || r < 0 || r >= t->n_vocab) {
            slm_xfree(buf);
            return slm_errf(err, SLM_ERR_FORMAT, "%s: merge %d names token ids %d, %d out of range [0, %d)",
                            name, m, l, r, t->n_vocab);
        }
        memcpy(buf, slm_bpe__tok(t, l), t->len[l]);
        memcpy(buf + t->len[l], slm_bpe__tok(t, r), t->len[r]);
        t->merge_res[m] = slm_bpe__lookup(t, buf, (size_t)t->len[l] + t->len[r]);
        uint64_t key = (((uint64_t)(uint32_t)l << 32) | (uint32_t)r) + 1;
        uint32_t i = mix64(key) & t->mmask;
        for (;;) {
            if (t->mkey[i] == 0) {
                t->mkey[i] = key;
                t->mrank[i] = m;
                break;
            }
            if (t->mkey[i] == key) break; /* the first (lowest rank) wins */
            i = (i + 1) & t->mmask;
        }
    }
    slm_xfree(buf);
    return SLM_OK;
}

static int cmp_special(const void *a, const void *b, const slm_bpe *t) {
    int x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (t->len[x] != t->len[y]) return t->len[x] > t->len[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* insertion sort would be O(n^2) for 100k-token vocabularies with many
 * specials; a merge sort with the tokenizer as context */
static void sort_special(slm_bpe *t, int32_t *a, int32_t *tmp, int n) {
    if (n < 2) return;
    int h = n / 2;
    sort_special(t, a, tmp, h);
    sort_special(t, a + h, tmp, n - h);
    int i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = cmp_special(&a[j], &a[i], t) < 0 ? a[j++] : a[i++];
    while (i < h) tmp[k++] = a[i++];
    while (j < n) tmp[k++] = a[j++];
    memcpy(a, tmp, (size_t)n * sizeof *a);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static int byte_token_value(const char *s, size_t n) {
    if (n != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>') return -1;
    int hi = hexval(s[3]), lo = hexval(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

static void put_utf8(char *o, size_t *n, uint32_t c) {
    if (c < 0x80) o[(*n)++] = (char)c;
    else if (c < 0x800) {
        o[(*n)++] = (char)(0xc0 | (c >> 6));
        o[(*n)++] = (char)(0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
        o[(*n)++] = (char)(0xe0 | (c >> 12));
        o[(*n)++] = (char)(0x80 | ((c >> 6) & 0x3f));
        o[(*n)++] = (char)(0x80 | (c & 0x3f));
    } else {
        o[(*n)++] = (char)(0xf0 | (c >> 18));
        o[(*n)++] = (char)(0x80 | ((c >> 12) & 0x3f));
        o[(*n)++] = (char)(0x80 | ((c >> 6) & 0x3f));
        o[(*n)++] = (char)(0x80 | (c & 0x3f));
    }
}

/* Decoded bytes of token id into o (room for len[id] bytes: decoding never
 * grows a token). */
static size_t decode_token(const slm_bpe *t, int id, char *o) {
    const char *s = slm_bpe__tok(t, id);
    size_t n = t->len[id], k = 0;
    int ty = t->type[id];
    if (ty == SLM_BPE_TT_USER_DEFINED && t->byte_level) {
        /* Hugging Face's ByteLevel decoder maps added tokens too: a token
         * made only of byte chars (deepseek-coder's "ÿ" = byte 0xFF) decodes
         * to those bytes; others (with a real space, say) stay as written.
         * ASCII-printable text is the same either way. */
        int all = 1;
        for (size_t i = 0; i < n && all;) {
            uint32_t cp;
            int l = slm_bpe__utf8_len((const uint8_t *)s + i, n - i, &cp);
            if (l == 0 || cp >= 324 || slm_bpe__cp_byte[cp] < 0) all = 0;
            i += l ? (size_t)l : 1;
        }
        if (!all) ty = SLM_BPE_TT_CONTROL; /* raw text below */
        else ty = SLM_BPE_TT_NORMAL;
    }
    if (ty == SLM_BPE_TT_CONTROL || ty == SLM_BPE_TT_USER_DEFINED || ty == SLM_BPE_TT_UNKNOWN) {
        memcpy(o, s, n);
        return n;
    }
    if (ty == SLM_BPE_TT_UNUSED) return 0;
    int bv = byte_token_value(s, n);
    if (bv >= 0 && (ty == SLM_BPE_TT_BYTE || !t->byte_level)) {
        o[0] = (char)bv;
        return 1;
    }
    if (!t->byte_level) { /* "▁" -> " " */
        for (size_t i = 0; i < n;) {
            if (i + 3 <= n && (uint8_t)s[i] == 0xe2 && (uint8_t)s[i + 1] == 0x96 &&
                (uint8_t)s[i + 2] == 0x81) {
                o[k++] = ' ';
                i += 3;
            } else
                o[k++] = s[i++];
        }
        return k;
    }
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int l = slm_bpe__utf8_len((const uint8_t *)s + i, n - i, &cp);
        if (l == 0) { /* not UTF-8: keep the byte */
            o[k++] = s[i++];
            continue;
        }
        if (cp < 324 && slm_bpe__cp_byte[cp] >= 0) o[k++] = (char)slm_bpe__cp_byte[cp];
        else put_utf8(o, &k, cp); /* not a byte char: as is */
        i += (size_t)l;
    }
    return k;
}

/* Everything derived from the tokens, merges and settings: the tables, the
 * special list, byte tokens, decoded pieces, EOT, compiled regexes. */
slm_status slm_bpe__finish(slm_bpe *t, const char *name, slm_err *err) {
    slm_status s;
    if (!t->hash && (s = slm_bpe__index(t, name, err))) return s;
    if ((s = build_merges(t, name, err))) return s;
    int n = 0;
    for (int id = 0; id < t->n_vocab; id++) {
        int ty = t->type[id];
        if ((ty == SLM_BPE_TT_CONTROL || ty == SLM_BPE_TT_USER_DEFINED || ty == SLM_BPE_TT_UNKNOWN) &&
            t->len[id] > 0)
            n++;
    }
    if (n) {
        t->special = slm_malloc((size_t)n * sizeof *t->special);
        int32_t *tmp = slm_malloc((size_t)n * sizeof *tmp);
        if (!t->special || !tmp) {
            slm_xfree(tmp);
            return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", name);
        }
        n = 0;
        for (int id = 0; id < t->n_vocab; id++) {
            int ty = t->type[id];
            if ((ty == SLM_BPE_TT_CONTROL || ty == SLM_BPE_TT_USER_DEFINED || ty == SLM_BPE_TT_UNKNOWN) &&
                t->len[id] > 0)
                t->special[n++] = id;
        }
        sort_special(t, t->special, tmp, n);
        slm_xfree(tmp);
    }
    t->n_special = n;
    for (int b = 0; b < 256; b++) {
        if (t->byte_level) {
            t->byte_tok[b] = slm_bpe__lookup(t, (const char *)slm_bpe__enc[b], slm_bpe__enc_len[b]);
        } else {
            char hx[7];
            snprintf(hx, sizeof hx, "<0x%02X>", b);
            t->byte_tok[b] = slm_bpe__lookup(t, hx, 6);
        }
    }
    /* decoded pieces */
    uint64_t total = 0;
    for (int id = 0; id < t->n_vocab; id++) total += t->len[id];
    t->dec = slm_malloc((size_t)total + 1);
    t->dec_off = slm_calloc((size_t)t->n_vocab, sizeof *t->dec_off);
    t->dec_len = slm_calloc((size_t)t->n_vocab, sizeof *t->dec_len);
    if (!t->dec || !t->dec_off || !t->dec_len) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", name);
    uint64_t o = 0;
    for (int id = 0; id < t->n_vocab; id++) {
        t->dec_off[id] = (uint32_t)o;
        t->dec_len[id] = (uint32_t)decode_token(t, id, t->dec + o);
        o += t->dec_len[id];
    }
    /* EOT by text, as llama.cpp when the metadata names none */
    if (t->eot < 0) {
        static const char *const eot_names[] = {
            "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
            "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
            /* <｜end▁of▁sentence｜>, in octal escapes (a hex escape would run on into "end") */
            "<\357\275\234end\342\226\201of\342\226\201sentence\357\275\234>", "<end_of_utterance>"};
        for (size_t i = 0; i < sizeof eot_names / sizeof eot_names[0] && t->eot < 0; i++)
            t->eot = slm_bpe__lookup(t, eot_names[i], strlen(eot_names[i]));
    }
    return slm_bpe__compile_regexes(t, name, err);
}
/* ---- decoding and accessors ------------------------------------------- */

const char *slm_bpe_piece(const slm_bpe *t, int id, size_t *len) {
    if (!t || id < 0 || id >= t->n_vocab) {
        if (len) *len = 0;
        return "";
    }
    if (len) *len = t->dec_len[id];
    return t->dec + t->dec_off[id];
}

size_t slm_bpe_decode(const slm_bpe *t, const int32_t *ids, int n, int skip_special, char *out, size_t cap) {
    size_t k = 0;
    int at_start = 1;
    for (int i = 0; i < n; i++) {
        int id = ids[i];
        if (id < 0 || id >= t->n_vocab) continue;
        int ty = t->type[id];
        if (skip_special && (ty == SLM_BPE_TT_CONTROL || ty == SLM_BPE_TT_UNKNOWN)) continue;
        size_t pl;
        const char *p = slm_bpe_piece(t, id, &pl);
        if (!t->byte_level && at_start && pl > 0 && ty != SLM_BPE_TT_CONTROL) {
            if (p[0] == ' ') { p++; pl--; }
            at_start = 0;
        }
        for (size_t j = 0; j < pl; j++, k++)
            if (k + 1 < cap) out[k] = p[j];
    }
    if (cap > 0) out[k < cap ? k : cap - 1] = 0;
    return k;
}

const char *slm_bpe_token_text(const slm_bpe *t, int id, size_t *len) {
    if (!t || id < 0 || id >= t->n_vocab) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = t->len[id];
    return slm_bpe__tok(t, id);
}

int slm_bpe_token_type(const slm_bpe *t, int id) {
    return t && id >= 0 && id < t->n_vocab ? t->type[id] : 0;
}
int slm_bpe_find(const slm_bpe *t, const char *s, size_t len) { return t ? slm_bpe__lookup(t, s, len) : -1; }
int slm_bpe_vocab_size(const slm_bpe *t) { return t ? t->n_vocab : 0; }
int slm_bpe_n_merges(const slm_bpe *t) { return t ? t->n_merges : 0; }
int slm_bpe_bos(const slm_bpe *t) { return t ? t->bos : -1; }
int slm_bpe_eos(const slm_bpe *t) { return t ? t->eos : -1; }
int slm_bpe_eot(const slm_bpe *t) { return t ? t->eot : -1; }
int slm_bpe_unk(const slm_bpe *t) { return t ? t->unk : -1; }
int slm_bpe_pad(const slm_bpe *t) { return t ? t->pad : -1; }
int slm_bpe_add_bos(const slm_bpe *t) { return t ? t->add_bos : 0; }
int slm_bpe_add_eos(const slm_bpe *t) { return t ? t->add_eos : 0; }
int slm_bpe_is_control(const slm_bpe *t, int id) {
    int ty = slm_bpe_token_type(t, id);
    return ty == SLM_BPE_TT_CONTROL || ty == SLM_BPE_TT_UNKNOWN;
}
const char *slm_bpe_pre_name(const slm_bpe *t) { return t ? t->pre_name : ""; }

void slm_bpe_set_max_input(slm_bpe *t, size_t bytes) {
    if (bytes > (size_t)(INT32_MAX / 8)) bytes = (size_t)(INT32_MAX / 8); /* ids are counted in an int */
    if (t) t->max_input = bytes ? bytes : SLM_TOK_DEFAULT_MAX_INPUT;
}
size_t slm_bpe_max_input(const slm_bpe *t) { return t ? t->max_input : 0; }

const char *slm_tok_encode_error(int rc) {
    switch (rc) {
    case SLM_TOK_ENOMEM: return "out of memory encoding the text";
    case SLM_TOK_ETOOLONG: return "the text is longer than the tokenizer's input limit (max_prompt_bytes)";
    case SLM_TOK_EBUDGET:
        return "the tokenizer exceeded its work limits on this text (a catastrophically backtracking "
               "pre-tokenizer regex, or a hostile WordPiece vocabulary)";
    default: return rc < 0 ? "encoding failed" : "";
    }
}

/* ---- setters for the loaders -------------------------------------------- */

char *slm_bpe__blob(slm_bpe *t) { return t->blob; }
void slm_bpe__set_token(slm_bpe *t, int id, uint32_t off, uint32_t len, int type) {
    t->off[id] = off;
    t->len[id] = len;
    t->type[id] = (uint8_t)type;
}
slm_status slm_bpe__set_merges(slm_bpe *t, int32_t *l, int32_t *r, int n) {
    t->merge_l = l;
    t->merge_r = r;
    t->n_merges = n;
    return SLM_OK;
}
void slm_bpe__set_specials(slm_bpe *t, int bos, int eos, int eot, int unk, int pad, int add_bos, int add_eos) {
    t->bos = bos; t->eos = eos; t->eot = eot; t->unk = unk; t->pad = pad;
    t->add_bos = add_bos; t->add_eos = add_eos;
}
void slm_bpe__set_mode(slm_bpe *t, int byte_level, int ignore_merges, int add_prefix_space, int spm_prepend,
                       int spm_split, const char *pre_name) {
    t->byte_level = byte_level;
    t->ignore_merges = ignore_merges;
    t->add_prefix_space = add_prefix_space;
    t->spm_prepend = spm_prepend;
    t->spm_split = spm_split;
    snprintf(t->pre_name, sizeof t->pre_name, "%s", pre_name);
}
