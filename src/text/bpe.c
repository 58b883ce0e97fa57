/* Byte-level BPE tokenizer (see bpe.h for the encoding steps).
 *
 * Facts taken from llama.cpp (src/llama-vocab.cpp, src/unicode.cpp; MIT):
 * the regex list per tokenizer.ggml.pre, which pre types ignore merges (a
 * pre-token that is itself a token is emitted whole) and add BOS, the
 * special-token partition (longest token first, USER_DEFINED always, CONTROL
 * and UNKNOWN only when parse_special), merges "a b" split at the first space
 * after index 0 with rank = index (the first of duplicates wins), the merge
 * queue order (lowest rank, then leftmost), the fallback for a final symbol
 * that is no token (the token of each single byte of its byte-encoded text,
 * else nothing), the default BOS/EOS (11) and EOT detection by text.
 *
 * Regexes run through PCRE2 in UTF + UCP mode (true Unicode categories, as
 * Hugging Face tokenizers use), not through llama.cpp's category-collapsing
 * std::regex. Each regex splits every piece of the previous step into its
 * matches and the gaps between them (HF "Isolated"); empty matches are
 * ignored. The subject of a match is the piece alone (lookarounds and $ see
 * the piece's ends), as in llama.cpp.
 *
 * The merge engine: one symbol per byte (byte-level) or per character
 * (SentencePiece-flavoured), a doubly linked list, and a binary min-heap of
 * candidate pairs (rank, left position); an entry is stale when either
 * symbol changed since it was pushed (lengths compared). Merges are keyed by
 * (left id, right id) in an open-addressing table.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>

#include "text/bpe.h"

#define BPE_MAX_VOCAB (1 << 24)
#define BPE_MAX_MERGES (1 << 25)
#define BPE_MAX_TOKEN_LEN 65536
#define BPE_MAX_REGEX 16
#define BPE_MAX_REGEX_LEN 8192

enum { PREPEND_NEVER = 0, PREPEND_ALWAYS = 1, PREPEND_FIRST = 2 };

struct slm_bpe {
    int n_vocab;
    char *blob;            /* token strings, each NUL-terminated */
    uint32_t *off, *len;   /* [n_vocab] */
    uint8_t *type;         /* [n_vocab] SLM_BPE_TT_* */
    int32_t *hash;         /* string -> id, open addressing, -1 empty */
    uint32_t hash_mask;
    uint32_t max_len;

    int n_merges;
    int32_t *merge_l, *merge_r; /* [n_merges] ids; rank = index */
    int32_t *merge_res;         /* [n_merges] id of the concatenation, -1 if none */
    uint64_t *mkey;             /* (l << 32 | r) + 1; 0 empty */
    int32_t *mrank;
    uint32_t mmask;

    int bos, eos, eot, unk, pad;
    int add_bos, add_eos;
    int32_t *special; /* ids split out before BPE, longest first */
    int n_special;

    /* pre-tokenizer and mode */
    int byte_level;      /* 1: GPT-2 byte-to-unicode symbols; 0: SentencePiece-flavoured */
    int ignore_merges;   /* emit a pre-token that is a token whole */
    int add_prefix_space;/* byte-level: prepend " " to text not starting with one */
    int spm_prepend;     /* PREPEND_*: "▁" before a fragment */
    int spm_split;       /* Metaspace split: pieces start at each "▁" */
    char pre_name[64];
    int n_regex;
    char *regex[BPE_MAX_REGEX];
    pcre2_code *re[BPE_MAX_REGEX];
    pcre2_general_context *gctx;

    /* decoding */
    char *dec;             /* decoded pieces */
    uint32_t *dec_off, *dec_len;
    int32_t byte_tok[256]; /* byte-level: id of the byte's char; spm: <0xXX> */
};

/* ---- GPT-2 byte <-> unicode ------------------------------------------- */

static int g_byte_cp[256];     /* byte -> code point */
static int16_t g_cp_byte[324]; /* code point (< 0x144) -> byte, -1 none */
static uint8_t g_enc[256][2];  /* UTF-8 of g_byte_cp (1 or 2 bytes) */
static uint8_t g_enc_len[256];
static int g_tables_ready;

static void byte_tables(void) {
    if (g_tables_ready) return;
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int direct = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
        g_byte_cp[b] = direct ? b : 256 + n++;
    }
    for (int c = 0; c < 324; c++) g_cp_byte[c] = -1;
    for (int b = 0; b < 256; b++) {
        int c = g_byte_cp[b];
        g_cp_byte[c] = (int16_t)b;
        if (c < 0x80) {
            g_enc[b][0] = (uint8_t)c;
            g_enc_len[b] = 1;
        } else {
            g_enc[b][0] = (uint8_t)(0xc0 | (c >> 6));
            g_enc[b][1] = (uint8_t)(0x80 | (c & 0x3f));
            g_enc_len[b] = 2;
        }
    }
    g_tables_ready = 1;
}

/* Length of a valid UTF-8 sequence at s (n bytes left), 0 if invalid
 * (overlong, surrogate, > U+10FFFF, truncated): PCRE2's notion of valid. */
static int utf8_valid_len(const uint8_t *s, size_t n, uint32_t *cp) {
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

static uint64_t fnv64(const void *p, size_t n) {
    const uint8_t *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static const char *tok_s(const slm_bpe *t, int id) { return t->blob + t->off[id]; }

static int lookup(const slm_bpe *t, const char *s, size_t n) {
    if (n == 0 || n > t->max_len) return -1;
    uint32_t i = (uint32_t)fnv64(s, n) & t->hash_mask;
    for (;;) {
        int32_t id = t->hash[i];
        if (id < 0) return -1;
        if (t->len[id] == n && memcmp(tok_s(t, id), s, n) == 0) return id;
        i = (i + 1) & t->hash_mask;
    }
}

static uint32_t mix64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (uint32_t)k;
}

static int merge_rank(const slm_bpe *t, int l, int r) {
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

static void *pcre_alloc(size_t n, void *ud) { (void)ud; return slm_malloc(n); }
static void pcre_free(void *p, void *ud) { (void)ud; slm_xfree(p); }

/* A tokenizer with room for n_vocab tokens of blob_size bytes in all
 * (NULs included); the caller fills blob/off/len/type. */
static slm_bpe *bpe_alloc(int n_vocab, uint64_t blob_size) {
    byte_tables();
    slm_bpe *t = slm_calloc(1, sizeof *t);
    if (!t) return NULL;
    t->n_vocab = n_vocab;
    t->bos = t->eos = t->eot = t->unk = t->pad = -1;
    t->byte_level = 1;
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
static slm_status build_hash(slm_bpe *t, const char *name, slm_err *err) {
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
        const char *s = tok_s(t, id);
        uint32_t i = (uint32_t)fnv64(s, n) & t->hash_mask;
        for (;;) {
            int32_t o = t->hash[i];
            if (o < 0 || (t->len[o] == n && memcmp(tok_s(t, o), s, n) == 0)) {
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
        memcpy(buf, tok_s(t, l), t->len[l]);
        memcpy(buf + t->len[l], tok_s(t, r), t->len[r]);
        t->merge_res[m] = lookup(t, buf, (size_t)t->len[l] + t->len[r]);
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
    const char *s = tok_s(t, id);
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
            int l = utf8_valid_len((const uint8_t *)s + i, n - i, &cp);
            if (l == 0 || cp >= 324 || g_cp_byte[cp] < 0) all = 0;
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
        int l = utf8_valid_len((const uint8_t *)s + i, n - i, &cp);
        if (l == 0) { /* not UTF-8: keep the byte */
            o[k++] = s[i++];
            continue;
        }
        if (cp < 324 && g_cp_byte[cp] >= 0) o[k++] = (char)g_cp_byte[cp];
        else put_utf8(o, &k, cp); /* not a byte char: as is */
        i += (size_t)l;
    }
    return k;
}

static slm_status compile_regexes(slm_bpe *t, const char *name, slm_err *err) {
    if (t->n_regex == 0) return SLM_OK;
    t->gctx = pcre2_general_context_create(pcre_alloc, pcre_free, NULL);
    if (!t->gctx) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory (regex)", name);
    pcre2_compile_context *cc = pcre2_compile_context_create(t->gctx);
    if (!cc) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory (regex)", name);
    for (int i = 0; i < t->n_regex; i++) {
        int code;
        PCRE2_SIZE eoff;
        t->re[i] = pcre2_compile((PCRE2_SPTR)t->regex[i], PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY,
                                 &code, &eoff, cc);
        if (!t->re[i]) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(code, msg, sizeof msg);
            pcre2_compile_context_free(cc);
            return slm_errf(err, SLM_ERR_FORMAT, "%s: pre-tokenizer regex %d at offset %zu: %s", name,
                            i, (size_t)eoff, (const char *)msg);
        }
        (void)pcre2_jit_compile(t->re[i], PCRE2_JIT_COMPLETE); /* interpreter if no JIT */
    }
    pcre2_compile_context_free(cc);
    return SLM_OK;
}

/* Everything derived from the tokens, merges and settings: the tables, the
 * special list, byte tokens, decoded pieces, EOT, compiled regexes. */
static slm_status bpe_finish(slm_bpe *t, const char *name, slm_err *err) {
    slm_status s;
    if (!t->hash && (s = build_hash(t, name, err))) return s;
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
            t->byte_tok[b] = lookup(t, (const char *)g_enc[b], g_enc_len[b]);
        } else {
            char hx[7];
            snprintf(hx, sizeof hx, "<0x%02X>", b);
            t->byte_tok[b] = lookup(t, hx, 6);
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
            "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "<end_of_utterance>"};
        for (size_t i = 0; i < sizeof eot_names / sizeof eot_names[0] && t->eot < 0; i++)
            t->eot = lookup(t, eot_names[i], strlen(eot_names[i]));
    }
    return compile_regexes(t, name, err);
}

/* ---- pre-tokenizers ------------------------------------------------------ */

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_CONTR "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3 RE_CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2 RE_CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN35 RE_CONTR "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_PORO " ?[^(\\s|.,!?…。，、।۔،)]+"
#define RE_GPT4O "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+" RE_CONTR "?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*" RE_CONTR "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_TEKKEN "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

typedef struct pre_def {
    const char *names; /* '|'-separated tokenizer.ggml.pre values */
    int ignore_merges, add_bos, no_bos;
    const char *re[7];
} pre_def;

static const pre_def k_pre[] = {
    {"default", 0, 0, 0,
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}},
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2|jina-v5-nano", 1, 1, 0,
     {RE_LLAMA3}},
    {"dbrx|smaug-bpe", 0, 0, 0, {RE_LLAMA3}},
    {"glm4|chatglm-bpe", 0, 0, 1, {RE_LLAMA3}},
    {"deepseek-llm", 0, 0, 0,
     {
      "[\r\n]",
      "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
      "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
      "\\s+$",
      "[一-龥ࠀ-一가-퟿]+",
      "\\p{N}+",
     }},
    {"deepseek-coder", 0, 0, 0,
     {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"}},
    {"deepseek-v3|hunyuan-dense|joyai-llm", 0, 0, 0,
     {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}},
    {"falcon", 0, 0, 0, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}},
    {"starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b|mellum2", 0, 0, 0,
     {"\\p{N}", RE_GPT2}},
    {"gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v2-es|jina-v2-de|a.x-4.0|mellum|modern-bert|mpt|"
     "olmo|jais|trillion|granite-docling|exaone4|jina-v1-en|jina-v2-code|roberta-bpe",
     0, 0, 0, {RE_GPT2}},
    {"qwen2|deepseek-r1-qwen|kormo|f2llmv2|stablelm2|hunyuan|solar-open|megrez|grok-2", 0, 0, 0,
     {RE_QWEN2}},
    {"qwen35", 0, 0, 0, {RE_QWEN35}},
    {"poro-chat|bloom|gpt3-finnish", 0, 0, 0, {RE_PORO}},
    {"viking", 0, 0, 0, {RE_PORO, "\\p{N}"}},
    {"tekken", 1, 1, 0, {RE_TEKKEN}},
    {"gpt-4o|llama4|kanana2|talkie|minimax-m2", 0, 0, 0, {RE_GPT4O}},
    {"seed-coder", 0, 0, 0,
     {RE_CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"bailingmoe|bailingmoe2|llada-moe", 0, 0, 0,
     {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
};

static int name_in_list(const char *list, const char *s, size_t n) {
    const char *p = list;
    for (;;) {
        const char *e = strchr(p, '|');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && memcmp(p, s, n) == 0) return 1;
        if (!e) return 0;
        p = e + 1;
    }
}

static const pre_def *find_pre(const char *s, size_t n) {
    for (size_t i = 0; i < sizeof k_pre / sizeof k_pre[0]; i++)
        if (name_in_list(k_pre[i].names, s, n)) return &k_pre[i];
    return NULL;
}

static slm_status add_regex(slm_bpe *t, const char *re, size_t n, const char *name, slm_err *err) {
    if (t->n_regex >= BPE_MAX_REGEX)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: more than %d pre-tokenizer regexes", name, BPE_MAX_REGEX);
    if (n > BPE_MAX_REGEX_LEN || memchr(re, 0, n))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: pre-tokenizer regex %d is too long or holds NUL", name,
                        t->n_regex);
    char *c = slm_malloc(n + 1);
    if (!c) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", name);
    memcpy(c, re, n);
    c[n] = 0;
    t->regex[t->n_regex++] = c;
    return SLM_OK;
}

static slm_status set_pre(slm_bpe *t, const pre_def *p, const char *pname, size_t pn, const char *name,
                          slm_err *err) {
    snprintf(t->pre_name, sizeof t->pre_name, "%.*s", (int)(pn < 63 ? pn : 63), pname);
    t->ignore_merges = p->ignore_merges;
    for (int i = 0; i < 7 && p->re[i]; i++) {
        slm_status s = add_regex(t, p->re[i], strlen(p->re[i]), name, err);
        if (s) return s;
    }
    return SLM_OK;
}

/* ---- GGUF ---------------------------------------------------------------- */

static slm_status get_special(const slm_gguf *g, const char *key, int n_vocab, int *id, int strict,
                              const char *name, slm_err *err) {
    int64_t v;
    if (slm_gguf_find(g, key) < 0) return SLM_OK;
    if (!slm_gguf_get_i64(g, key, &v))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s is not an integer", name, key);
    if (v < 0 || v >= n_vocab) {
        if (!strict) {
            *id = -1;
            return SLM_OK;
        }
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s = %lld is out of range [0, %d)", name, key,
                        (long long)v, n_vocab);
    }
    *id = (int)v;
    return SLM_OK;
}

slm_status slm_bpe_load_gguf(slm_bpe **out, const slm_gguf *g, const char *name, slm_err *err) {
    *out = NULL;
    if (!name) name = "gguf";
    slm_gguf_str model;
    if (!slm_gguf_get_str(g, "tokenizer.ggml.model", &model))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: no tokenizer.ggml.model", name);
    if (!slm_gguf_str_eq(model, "gpt2"))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: tokenizer.ggml.model '%.*s' is not a byte-level BPE (gpt2)",
                        name, (int)(model.len > 64 ? 64 : model.len), model.s);
    slm_gguf_type et;
    uint64_t n_tok;
    const void *data;
    if (!slm_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n_tok, &data) || et != SLM_GGUF_STRING)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.tokens missing or not a string array", name);
    if (n_tok == 0 || n_tok > BPE_MAX_VOCAB)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries (1..%d allowed)", name,
                        (unsigned long long)n_tok, BPE_MAX_VOCAB);
    int n_vocab = (int)n_tok;
    uint64_t blob = 0;
    for (uint64_t i = 0; i < n_tok; i++) {
        slm_gguf_str s;
        if (!slm_gguf_arr_str(g, "tokenizer.ggml.tokens", i, &s))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: token %llu unreadable", name, (unsigned long long)i);
        if (s.len > BPE_MAX_TOKEN_LEN)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: token %llu is %llu bytes long (max %d)", name,
                            (unsigned long long)i, (unsigned long long)s.len, BPE_MAX_TOKEN_LEN);
        blob += s.len + 1;
    }
    /* merges before allocating: their count is checked */
    uint64_t n_merges = 0;
    if (!slm_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n_merges, &data))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.merges missing (a gpt2 vocabulary needs merges)",
                        name);
    if (et != SLM_GGUF_STRING)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.merges is not a string array", name);
    if (n_merges > BPE_MAX_MERGES)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.merges has %llu entries (max %d)", name,
                        (unsigned long long)n_merges, BPE_MAX_MERGES);

    slm_bpe *t = bpe_alloc(n_vocab, blob);
    if (!t) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory (%d tokens)", name, n_vocab);
    uint64_t o = 0;
    for (int i = 0; i < n_vocab; i++) {
        slm_gguf_str s;
        slm_gguf_arr_str(g, "tokenizer.ggml.tokens", (uint64_t)i, &s);
        t->off[i] = (uint32_t)o;
        t->len[i] = (uint32_t)s.len;
        memcpy(t->blob + o, s.s, (size_t)s.len);
        t->blob[o + s.len] = 0;
        o += s.len + 1;
        t->type[i] = SLM_BPE_TT_NORMAL;
    }
    slm_status st;
    if (slm_gguf_find(g, "tokenizer.ggml.token_type") >= 0) {
        uint64_t nt;
        if (!slm_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &nt, &data) ||
            (et != SLM_GGUF_I32 && et != SLM_GGUF_U32)) {
            st = slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.token_type is not an int32 array", name);
            goto fail;
        }
        if (nt < n_tok) {
            st = slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.token_type has %llu entries for %d tokens", name,
                          (unsigned long long)nt, n_vocab);
            goto fail;
        }
        for (int i = 0; i < n_vocab; i++) {
            int32_t v;
            memcpy(&v, (const uint8_t *)data + 4 * (size_t)i, 4);
            t->type[i] = (uint8_t)(v >= 0 && v <= 6 ? v : SLM_BPE_TT_UNDEFINED);
        }
    }
    if ((st = build_hash(t, name, err))) goto fail;

    t->n_merges = (int)n_merges;
    t->merge_l = slm_malloc((size_t)(n_merges ? n_merges : 1) * sizeof *t->merge_l);
    t->merge_r = slm_malloc((size_t)(n_merges ? n_merges : 1) * sizeof *t->merge_r);
    if (!t->merge_l || !t->merge_r) {
        st = slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory (%llu merges)", name, (unsigned long long)n_merges);
        goto fail;
    }
    for (uint64_t m = 0; m < n_merges; m++) {
        slm_gguf_str s;
        if (!slm_gguf_arr_str(g, "tokenizer.ggml.merges", m, &s)) {
            st = slm_errf(err, SLM_ERR_FORMAT, "%s: merge %llu unreadable", name, (unsigned long long)m);
            goto fail;
        }
        const char *sp = s.len > 1 ? memchr(s.s + 1, ' ', (size_t)s.len - 1) : NULL;
        if (!sp) {
            st = slm_errf(err, SLM_ERR_FORMAT, "%s: merge %llu '%.*s' is not two tokens separated by a space", name,
                          (unsigned long long)m, (int)(s.len > 64 ? 64 : s.len), s.s);
            goto fail;
        }
        size_t ll = (size_t)(sp - s.s), rl = (size_t)s.len - ll - 1;
        int l = lookup(t, s.s, ll), r = lookup(t, sp + 1, rl);
        if (l < 0 || r < 0) {
            st = slm_errf(err, SLM_ERR_FORMAT, "%s: merge %llu '%.*s' names a string that is not a token", name,
                          (unsigned long long)m, (int)(s.len > 64 ? 64 : s.len), s.s);
            goto fail;
        }
        t->merge_l[m] = l;
        t->merge_r[m] = r;
    }

    slm_gguf_str pre = {"default", 7};
    if (slm_gguf_find(g, "tokenizer.ggml.pre") >= 0 && !slm_gguf_get_str(g, "tokenizer.ggml.pre", &pre)) {
        st = slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.pre is not a string", name);
        goto fail;
    }
    const pre_def *pd = find_pre(pre.s, (size_t)pre.len);
    if (!pd) {
        st = slm_errf(err, SLM_ERR_UNSUPPORTED,
                      "%s: unknown pre-tokenizer tokenizer.ggml.pre = '%.*s' (supported: gpt-2, llama-bpe, qwen2, "
                      "smollm, starcoder, deepseek-coder, deepseek-llm, falcon, default and their aliases)",
                      name, (int)(pre.len > 64 ? 64 : pre.len), pre.s);
        goto fail;
    }
    if ((st = set_pre(t, pd, pre.s, (size_t)pre.len, name, err))) goto fail;
    t->add_bos = pd->add_bos;
    t->bos = pd->no_bos ? -1 : (11 < n_vocab ? 11 : -1);
    t->eos = 11 < n_vocab ? 11 : -1;
    if ((st = get_special(g, "tokenizer.ggml.bos_token_id", n_vocab, &t->bos, 1, name, err)) ||
        (st = get_special(g, "tokenizer.ggml.eos_token_id", n_vocab, &t->eos, 1, name, err)) ||
        (st = get_special(g, "tokenizer.ggml.eot_token_id", n_vocab, &t->eot, 1, name, err)) ||
        (st = get_special(g, "tokenizer.ggml.unknown_token_id", n_vocab, &t->unk, 1, name, err)) ||
        (st = get_special(g, "tokenizer.ggml.padding_token_id", n_vocab, &t->pad, 0, name, err)))
        goto fail;
    int b;
    if (slm_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b)) t->add_bos = b;
    if (slm_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b)) t->add_eos = b;
    if (t->add_bos && t->bos < 0) t->add_bos = 0;
    if (t->add_eos && t->eos < 0) t->add_eos = 0;
    if ((st = bpe_finish(t, name, err))) goto fail;
    *out = t;
    return SLM_OK;
fail:
    slm_bpe_free(t);
    return st;
}

/* ---- encoding ------------------------------------------------------------ */

typedef struct sym {
    int32_t start, len; /* bytes of the (normalized) text */
    int32_t prev, next;
    int32_t id;
} sym;

typedef struct cand {
    int32_t rank, left, right, llen, rlen;
} cand;

typedef struct ids_out {
    int32_t *ids;
    int cap, n;
} ids_out;

static void emit(ids_out *o, int id) {
    if (o->n < o->cap) o->ids[o->n] = id;
    o->n++;
}

/* scratch for one encode call */
typedef struct work {
    sym *syms;     /* 3n + 4 */
    cand *heap;    /* 3 * (3n + 4) */
    int nheap;
    char *buf;     /* byte-encoded word: 2n + 4 */
    char *san;     /* sanitized / normalized text: 3n + 8 */
    int32_t *map;  /* sanitized offset -> original offset: 3n + 8 */
    char *pfx;     /* " " + text: n + 1 */
} work;

static int cand_less(const cand *a, const cand *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(work *w, cand c) {
    int i = w->nheap++;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!cand_less(&c, &w->heap[p])) break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = c;
}

static cand heap_pop(work *w) {
    cand top = w->heap[0], last = w->heap[--w->nheap];
    int i = 0, n = w->nheap;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        const cand *best = &last;
        if (l < n && cand_less(&w->heap[l], best)) { m = l; best = &w->heap[l]; }
        if (r < n && cand_less(&w->heap[r], best)) m = r;
        if (m == i) break;
        w->heap[i] = w->heap[m];
        i = m;
    }
    if (n > 0) w->heap[i] = last;
    return top;
}

static void try_pair(const slm_bpe *t, work *w, int l, int r) {
    if (l < 0 || r < 0) return;
    int rank = merge_rank(t, w->syms[l].id, w->syms[r].id);
    if (rank < 0) return;
    cand c = {rank, l, r, w->syms[l].len, w->syms[r].len};
    heap_push(w, c);
}

/* Merge the symbols [0, n) (already linked) and emit the result. text holds
 * the bytes the symbols span (original bytes in byte-level mode). */
static void bpe_word(const slm_bpe *t, work *w, const char *text, int n, ids_out *o) {
    w->nheap = 0;
    for (int i = 0; i + 1 < n; i++) try_pair(t, w, i, i + 1);
    while (w->nheap > 0) {
        cand c = heap_pop(w);
        sym *L = &w->syms[c.left], *R = &w->syms[c.right];
        if (L->len != c.llen || R->len != c.rlen || L->next != c.right || L->len == 0 || R->len == 0)
            continue;
        L->len += R->len;
        L->id = t->merge_res[c.rank];
        R->len = 0;
        L->next = R->next;
        if (R->next >= 0) w->syms[R->next].prev = c.left;
        try_pair(t, w, L->prev, c.left);
        try_pair(t, w, c.left, L->next);
    }
    for (int i = 0; i >= 0 && i < n; i = w->syms[i].next) {
        sym *s = &w->syms[i];
        if (s->len == 0) continue;
        if (s->id >= 0) {
            emit(o, s->id);
            continue;
        }
        /* not a token: llama.cpp looks up each byte of the (byte-encoded)
         * text as a one-byte token; SentencePiece mode: <0xXX> tokens */
        for (int k = 0; k < s->len; k++) {
            uint8_t b = (uint8_t)text[s->start + k];
            if (t->byte_level) {
                for (int e = 0; e < g_enc_len[b]; e++) {
                    int id = lookup(t, (const char *)&g_enc[b][e], 1);
                    if (id >= 0) emit(o, id);
                }
            } else {
                int id = t->byte_tok[b] >= 0 ? t->byte_tok[b] : t->unk;
                if (id >= 0) emit(o, id);
            }
        }
    }
}

/* One pre-token text[0, n) in byte-level mode. */
static void encode_word_bytes(const slm_bpe *t, work *w, const char *text, int n, ids_out *o) {
    if (n <= 0) return;
    if (t->ignore_merges) {
        int k = 0;
        for (int i = 0; i < n; i++) {
            uint8_t b = (uint8_t)text[i];
            for (int e = 0; e < g_enc_len[b]; e++) w->buf[k++] = (char)g_enc[b][e];
        }
        int id = lookup(t, w->buf, (size_t)k);
        if (id >= 0) {
            emit(o, id);
            return;
        }
    }
    for (int i = 0; i < n; i++) {
        sym *s = &w->syms[i];
        s->start = i;
        s->len = 1;
        s->prev = i - 1;
        s->next = i + 1 < n ? i + 1 : -1;
        s->id = t->byte_tok[(uint8_t)text[i]];
    }
    bpe_word(t, w, text, n, o);
}

/* One piece of normalized text in SentencePiece-flavoured mode: symbols are
 * characters (an invalid byte is one symbol); a character that is no token
 * becomes its bytes' <0xXX> tokens (byte_fallback), else unk. */
static void encode_word_spm(const slm_bpe *t, work *w, const char *text, int n, ids_out *o) {
    if (n <= 0) return;
    if (t->ignore_merges) {
        int id = lookup(t, text, (size_t)n);
        if (id >= 0) {
            emit(o, id);
            return;
        }
    }
    int ns = 0;
    for (int i = 0; i < n;) {
        uint32_t cp;
        int l = utf8_valid_len((const uint8_t *)text + i, (size_t)(n - i), &cp);
        if (l == 0) l = 1;
        int id = lookup(t, text + i, (size_t)l);
        if (id >= 0) {
            sym *s = &w->syms[ns++];
            s->start = i;
            s->len = l;
            s->id = id;
        } else {
            for (int k = 0; k < l; k++) {
                sym *s = &w->syms[ns++];
                s->start = i + k;
                s->len = 1;
                s->id = -1; /* resolved to <0xXX> / unk by bpe_word */
                int bt = t->byte_tok[(uint8_t)text[i + k]];
                if (bt >= 0) s->id = bt;
            }
        }
        i += l;
    }
    for (int i = 0; i < ns; i++) {
        w->syms[i].prev = i - 1;
        w->syms[i].next = i + 1 < ns ? i + 1 : -1;
    }
    bpe_word(t, w, text, ns, o);
}

/* A piece list: [start, end) offsets. */
typedef struct pieces {
    int32_t *a; /* pairs */
    int n, cap;
} pieces;

static int pieces_add(pieces *p, int32_t s, int32_t e) {
    if (s >= e) return 1;
    if (p->n == p->cap) {
        int nc = p->cap ? p->cap * 2 : 64;
        int32_t *na = slm_realloc(p->a, (size_t)nc * 2 * sizeof *na);
        if (!na) return 0;
        p->a = na;
        p->cap = nc;
    }
    p->a[2 * p->n] = s;
    p->a[2 * p->n + 1] = e;
    p->n++;
    return 1;
}

/* Pre-tokenize text[0, n) (valid UTF-8) into pieces with the regex list. */
static int pretokenize(const slm_bpe *t, const char *text, int n, pieces *out, pcre2_match_data *md) {
    pieces cur = {0}, nxt = {0};
    if (!pieces_add(&cur, 0, n)) return 0;
    for (int r = 0; r < t->n_regex; r++) {
        nxt.n = 0;
        for (int p = 0; p < cur.n; p++) {
            int32_t ps = cur.a[2 * p], pe = cur.a[2 * p + 1];
            PCRE2_SPTR subj = (PCRE2_SPTR)text + ps;
            PCRE2_SIZE slen = (PCRE2_SIZE)(pe - ps), pos = 0, last = 0;
            while (pos <= slen) {
                int rc = pcre2_match(t->re[r], subj, slen, pos, PCRE2_NO_UTF_CHECK, md, NULL);
                if (rc < 0) break; /* no match (or a limit hit): the rest is one piece */
                PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
                PCRE2_SIZE ms = ov[0], me = ov[1];
                if (me <= ms) { /* empty match: step one character */
                    if (ms >= slen) break;
                    pos = ms + 1;
                    while (pos < slen && (subj[pos] & 0xc0) == 0x80) pos++;
                    continue;
                }
                if (!pieces_add(&nxt, ps + (int32_t)last, ps + (int32_t)ms) ||
                    !pieces_add(&nxt, ps + (int32_t)ms, ps + (int32_t)me))
                    goto oom;
                last = pos = me;
            }
            if (!pieces_add(&nxt, ps + (int32_t)last, pe)) goto oom;
        }
        pieces tmp = cur;
        cur = nxt;
        nxt = tmp;
    }
    slm_xfree(nxt.a);
    *out = cur;
    return 1;
oom:
    slm_xfree(cur.a);
    slm_xfree(nxt.a);
    return 0;
}

/* Encode one fragment (no special tokens in it). first: the fragment starts
 * the text (SentencePiece "first" prepend scheme, ByteLevel add_prefix_space). */
static int encode_fragment(const slm_bpe *t, work *w, const char *text, int n, int first, ids_out *o) {
    if (n <= 0) return 1;
    static const char ws[3] = {(char)0xe2, (char)0x96, (char)0x81}; /* U+2581 */
    if (!t->byte_level) {
        /* normalize: " " -> "▁", prepend "▁" */
        int pre = t->spm_prepend == PREPEND_ALWAYS || (t->spm_prepend == PREPEND_FIRST && first);
        char *norm = w->san;
        int k = 0;
        if (pre) {
            memcpy(norm, ws, 3);
            k = 3;
        }
        for (int i = 0; i < n; i++) {
            if (text[i] == ' ') {
                memcpy(norm + k, ws, 3);
                k += 3;
            } else
                norm[k++] = text[i];
        }
        if (!t->spm_split) {
            encode_word_spm(t, w, norm, k, o);
            return 1;
        }
        /* Metaspace split: a piece starts at each "▁" */
        int s = 0;
        for (int i = 1; i <= k; i++) {
            if (i == k || (i + 3 <= k && memcmp(norm + i, ws, 3) == 0)) {
                encode_word_spm(t, w, norm + s, i - s, o);
                s = i;
            }
        }
        return 1;
    }
    const char *src = text;
    if (t->add_prefix_space && first && text[0] != ' ') {
        w->pfx[0] = ' ';
        memcpy(w->pfx + 1, text, (size_t)n);
        src = w->pfx;
        n++;
    }
    /* a valid UTF-8 copy (invalid bytes -> U+FFFD) for the regexes, with a
     * map from its offsets back to the original bytes */
    char *san = w->san;
    int32_t *map = w->map;
    int k = 0;
    for (int i = 0; i < n;) {
        uint32_t cp;
        int l = utf8_valid_len((const uint8_t *)src + i, (size_t)(n - i), &cp);
        map[k] = i;
        if (l == 0) {
            san[k++] = (char)0xef;
            san[k++] = (char)0xbf;
            san[k++] = (char)0xbd;
            i++;
        } else {
            memcpy(san + k, src + i, (size_t)l);
            k += l;
            i += l;
        }
    }
    map[k] = n;
    pieces pc = {0};
    int ok = 1;
    pcre2_match_data *md = NULL;
    if (t->n_regex) {
        md = pcre2_match_data_create(1, t->gctx);
        if (!md) ok = 0;
    }
    if (ok) ok = pretokenize(t, san, k, &pc, md);
    if (ok) {
        for (int p = 0; p < pc.n; p++) {
            int32_t a = map[pc.a[2 * p]], b = map[pc.a[2 * p + 1]];
            encode_word_bytes(t, w, src + a, b - a, o);
        }
    }
    if (md) pcre2_match_data_free(md);
    slm_xfree(pc.a);
    return ok;
}

/* A fragment of the text: raw [start, start+len) or a token. */
typedef struct frag {
    int32_t id; /* -1: raw text */
    int32_t start, len;
} frag;

typedef struct frags {
    frag *a;
    int n, cap;
} frags;

static int frags_add(frags *f, int32_t id, int32_t s, int32_t l) {
    if (f->n == f->cap) {
        int nc = f->cap ? f->cap * 2 : 16;
        frag *na = slm_realloc(f->a, (size_t)nc * sizeof *na);
        if (!na) return 0;
        f->a = na;
        f->cap = nc;
    }
    f->a[f->n++] = (frag){id, s, l};
    return 1;
}

static const char *find_bytes(const char *h, size_t hn, const char *nd, size_t nn) {
    if (nn == 0 || nn > hn) return NULL;
    const char *end = h + hn - nn;
    for (const char *p = h; p <= end; p++) {
        p = memchr(p, nd[0], (size_t)(end - p) + 1);
        if (!p) return NULL;
        if (memcmp(p, nd, nn) == 0) return p;
    }
    return NULL;
}

/* llama.cpp's tokenizer_st_partition. */
static int partition(const slm_bpe *t, const char *text, int n, int parse_special, frags *out) {
    frags cur = {0}, nxt = {0};
    if (n > 0 && !frags_add(&cur, -1, 0, n)) return 0;
    for (int si = 0; si < t->n_special; si++) {
        int id = t->special[si];
        int ty = t->type[id];
        if (!parse_special && (ty == SLM_BPE_TT_CONTROL || ty == SLM_BPE_TT_UNKNOWN)) continue;
        const char *tx = tok_s(t, id);
        size_t tl = t->len[id];
        if (tl > (size_t)n) continue;
        int any = 0;
        for (int f = 0; f < cur.n && !any; f++)
            if (cur.a[f].id < 0 && find_bytes(text + cur.a[f].start, (size_t)cur.a[f].len, tx, tl)) any = 1;
        if (!any) continue;
        nxt.n = 0;
        for (int f = 0; f < cur.n; f++) {
            frag fr = cur.a[f];
            if (fr.id >= 0) {
                if (!frags_add(&nxt, fr.id, 0, 0)) goto oom;
                continue;
            }
            int32_t s = fr.start, e = fr.start + fr.len;
            for (;;) {
                const char *m = find_bytes(text + s, (size_t)(e - s), tx, tl);
                if (!m) {
                    if (e > s && !frags_add(&nxt, -1, s, e - s)) goto oom;
                    break;
                }
                int32_t ms = (int32_t)(m - text);
                if (ms > s && !frags_add(&nxt, -1, s, ms - s)) goto oom;
                if (!frags_add(&nxt, id, 0, 0)) goto oom;
                s = ms + (int32_t)tl;
            }
        }
        frags tmp = cur;
        cur = nxt;
        nxt = tmp;
    }
    slm_xfree(nxt.a);
    *out = cur;
    return 1;
oom:
    slm_xfree(cur.a);
    slm_xfree(nxt.a);
    return 0;
}

int slm_bpe_encode(const slm_bpe *t, const char *text, size_t len, int add_bos, int add_eos,
                   int parse_special, int32_t *ids, int cap) {
    if (!t) return -1;
    if (!text) len = 0;
    if (len > (size_t)(INT32_MAX / 8)) return -1;
    int n = (int)len;
    ids_out o = {ids, ids ? cap : 0, 0};
    if (add_bos && t->add_bos && t->bos >= 0) emit(&o, t->bos);
    frags fr = {0};
    if (!partition(t, text, n, parse_special, &fr)) return -1;
    work w = {0};
    int maxlen = 0;
    for (int f = 0; f < fr.n; f++)
        if (fr.a[f].id < 0 && fr.a[f].len > maxlen) maxlen = fr.a[f].len;
    int ok = 1;
    if (maxlen > 0) {
        size_t m = (size_t)maxlen + 1; /* + add_prefix_space */
        w.syms = slm_malloc((3 * m + 4) * sizeof *w.syms);
        w.heap = slm_malloc(3 * (3 * m + 4) * sizeof *w.heap);
        w.buf = slm_malloc(2 * m + 4);
        w.san = slm_malloc(3 * m + 8);
        w.map = slm_malloc((3 * m + 8) * sizeof *w.map);
        w.pfx = slm_malloc(m + 1);
        if (!w.syms || !w.heap || !w.buf || !w.san || !w.map || !w.pfx) ok = 0;
    }
    int first = 1;
    for (int f = 0; ok && f < fr.n; f++) {
        if (fr.a[f].id >= 0) emit(&o, fr.a[f].id);
        else ok = encode_fragment(t, &w, text + fr.a[f].start, fr.a[f].len, first && fr.a[f].start == 0, &o);
        first = 0;
    }
    slm_xfree(w.syms);
    slm_xfree(w.heap);
    slm_xfree(w.buf);
    slm_xfree(w.san);
    slm_xfree(w.map);
    slm_xfree(w.pfx);
    slm_xfree(fr.a);
    if (!ok) return -1;
    if (add_eos && t->add_eos && t->eos >= 0) emit(&o, t->eos);
    return o.n;
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
    return tok_s(t, id);
}

int slm_bpe_token_type(const slm_bpe *t, int id) {
    return t && id >= 0 && id < t->n_vocab ? t->type[id] : 0;
}
int slm_bpe_find(const slm_bpe *t, const char *s, size_t len) { return t ? lookup(t, s, len) : -1; }
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

/* ---- serialization --------------------------------------------------------
 * "SLMBPE\0\1", u32 version, u32 n_vocab, u32 n_merges, i32 bos eos eot unk
 * pad, u8 add_bos add_eos byte_level ignore_merges add_prefix_space
 * spm_prepend spm_split 0, u32 pre_name length + bytes, u32 n_regex + (u32
 * length + bytes) each, per token u32 length, the token bytes, per token u8
 * type, per merge i32 left i32 right, u64 FNV-1a of everything before. */

#define SER_MAGIC "SLMBPE\0\1"
#define SER_VERSION 1u

typedef struct wbuf {
    uint8_t *p;
    size_t cap, n;
} wbuf;

static void wb(wbuf *w, const void *d, size_t n) {
    if (w->p && w->n + n <= w->cap) memcpy(w->p + w->n, d, n);
    w->n += n;
}
static void wb32(wbuf *w, uint32_t v) { wb(w, &v, 4); }

size_t slm_bpe_serialize(const slm_bpe *t, void *buf, size_t cap) {
    wbuf w = {buf, cap, 0};
    /* first pass sizes, second writes */
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            if (!buf || w.n > cap) return w.n;
            w.n = 0;
        } else
            w.p = NULL;
        if (pass == 1) w.p = buf;
        wb(&w, SER_MAGIC, 8);
        wb32(&w, SER_VERSION);
        wb32(&w, (uint32_t)t->n_vocab);
        wb32(&w, (uint32_t)t->n_merges);
        int32_t sp[5] = {t->bos, t->eos, t->eot, t->unk, t->pad};
        wb(&w, sp, sizeof sp);
        uint8_t fl[8] = {(uint8_t)t->add_bos, (uint8_t)t->add_eos, (uint8_t)t->byte_level,
                         (uint8_t)t->ignore_merges, (uint8_t)t->add_prefix_space, (uint8_t)t->spm_prepend,
                         (uint8_t)t->spm_split, 0};
        wb(&w, fl, 8);
        uint32_t pl = (uint32_t)strlen(t->pre_name);
        wb32(&w, pl);
        wb(&w, t->pre_name, pl);
        wb32(&w, (uint32_t)t->n_regex);
        for (int i = 0; i < t->n_regex; i++) {
            uint32_t l = (uint32_t)strlen(t->regex[i]);
            wb32(&w, l);
            wb(&w, t->regex[i], l);
        }
        wb(&w, t->len, (size_t)t->n_vocab * 4);
        for (int i = 0; i < t->n_vocab; i++) wb(&w, tok_s(t, i), t->len[i]);
        wb(&w, t->type, (size_t)t->n_vocab);
        for (int m = 0; m < t->n_merges; m++) {
            wb32(&w, (uint32_t)t->merge_l[m]);
            wb32(&w, (uint32_t)t->merge_r[m]);
        }
        uint64_t h = w.p ? fnv64(w.p, w.n) : 0;
        wb(&w, &h, 8);
    }
    return w.n;
}

slm_status slm_bpe_load_mem(slm_bpe **out, const void *data, size_t size, const char *name, slm_err *err) {
    *out = NULL;
    if (!name) name = "tokenizer";
    if (!data || size < 8 + 8 || memcmp(data, SER_MAGIC, 8) != 0)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: not a serialized BPE tokenizer (bad magic or size)", name);
    uint64_t h;
    memcpy(&h, (const uint8_t *)data + size - 8, 8);
    if (h != fnv64(data, size - 8))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE tokenizer checksum mismatch (corrupted)", name);
    slm_rd r = {data, size - 8, 8};
    uint32_t ver, nv, nm, pl, nr;
    int32_t sp[5];
    uint8_t fl[8];
    if (!slm_rd_u32(&r, &ver) || ver != SER_VERSION)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE tokenizer version unsupported", name);
    if (!slm_rd_u32(&r, &nv) || !slm_rd_u32(&r, &nm) || !slm_rd_bytes(&r, sp, sizeof sp) ||
        !slm_rd_bytes(&r, fl, 8))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE tokenizer header truncated", name);
    if (nv == 0 || nv > BPE_MAX_VOCAB || nm > BPE_MAX_MERGES)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE tokenizer counts out of range (%u tokens, %u merges)", name,
                        nv, nm);
    for (int i = 0; i < 5; i++)
        if (sp[i] < -1 || sp[i] >= (int32_t)nv)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE special id %d out of range", name, sp[i]);
    for (int i = 0; i < 8; i++)
        if (fl[i] > (i == 5 ? 2 : 1))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE flag %d has value %u", name, i, fl[i]);
    const uint8_t *pn;
    if (!slm_rd_u32(&r, &pl) || pl > 63 || !slm_rd_ptr(&r, pl, &pn) || !slm_rd_u32(&r, &nr) ||
        nr > BPE_MAX_REGEX)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE pre-tokenizer record malformed", name);
    /* token lengths: bounds before allocation */
    if (!slm_rd_need(&r, (uint64_t)nv * 4)) return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE token table truncated", name);
    slm_rd rr = r;
    for (uint32_t i = 0; i < nr; i++) {
        uint32_t l;
        const uint8_t *p;
        if (!slm_rd_u32(&rr, &l) || l > BPE_MAX_REGEX_LEN || !slm_rd_ptr(&rr, l, &p))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE regex %u truncated", name, i);
    }
    const uint8_t *lens;
    if (!slm_rd_ptr(&rr, (uint64_t)nv * 4, &lens))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE token table truncated", name);
    uint64_t blob = 0;
    for (uint32_t i = 0; i < nv; i++) {
        uint32_t l;
        memcpy(&l, lens + 4 * (size_t)i, 4);
        if (l > BPE_MAX_TOKEN_LEN) return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE token %u too long", name, i);
        blob += l;
    }
    if (!slm_rd_need(&rr, blob + nv + (uint64_t)nm * 8))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE tokenizer truncated (tokens/merges)", name);
    slm_bpe *t = bpe_alloc((int)nv, blob + nv);
    if (!t) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", name);
    slm_status st;
    t->bos = sp[0]; t->eos = sp[1]; t->eot = sp[2]; t->unk = sp[3]; t->pad = sp[4];
    t->add_bos = fl[0]; t->add_eos = fl[1]; t->byte_level = fl[2]; t->ignore_merges = fl[3];
    t->add_prefix_space = fl[4]; t->spm_prepend = fl[5]; t->spm_split = fl[6];
    memcpy(t->pre_name, pn, pl);
    t->pre_name[pl] = 0;
    for (uint32_t i = 0; i < nr; i++) {
        uint32_t l = 0;
        const uint8_t *p = NULL;
        slm_rd_u32(&r, &l);
        slm_rd_ptr(&r, l, &p); /* checked above */
        if ((st = add_regex(t, (const char *)p, l, name, err))) goto fail;
    }
    r.pos += (uint64_t)nv * 4;
    uint64_t o = 0;
    for (uint32_t i = 0; i < nv; i++) {
        uint32_t l;
        const uint8_t *p = NULL;
        memcpy(&l, lens + 4 * (size_t)i, 4);
        slm_rd_ptr(&r, l, &p); /* checked above */
        t->off[i] = (uint32_t)o;
        t->len[i] = l;
        memcpy(t->blob + o, p, l);
        t->blob[o + l] = 0;
        o += l + 1;
    }
    slm_rd_bytes(&r, t->type, nv);
    for (uint32_t i = 0; i < nv; i++)
        if (t->type[i] > 6) {
            st = slm_errf(err, SLM_ERR_FORMAT, "%s: BPE token %u has type %u", name, i, t->type[i]);
            goto fail;
        }
    t->n_merges = (int)nm;
    t->merge_l = slm_malloc((size_t)(nm ? nm : 1) * sizeof *t->merge_l);
    t->merge_r = slm_malloc((size_t)(nm ? nm : 1) * sizeof *t->merge_r);
    if (!t->merge_l || !t->merge_r) {
        st = slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", name);
        goto fail;
    }
    for (uint32_t m = 0; m < nm; m++) {
        slm_rd_i32(&r, &t->merge_l[m]);
        slm_rd_i32(&r, &t->merge_r[m]);
    }
    if (r.pos != r.len) {
        st = slm_errf(err, SLM_ERR_FORMAT, "%s: %llu trailing bytes after the BPE tokenizer", name,
                      (unsigned long long)(r.len - r.pos));
        goto fail;
    }
    if ((st = bpe_finish(t, name, err))) goto fail;
    *out = t;
    return SLM_OK;
fail:
    slm_bpe_free(t);
    return st;
}

/* ---- shared with bpe_json.c ------------------------------------------- */
#include "text/bpe_internal.h"

slm_bpe *slm_bpe__alloc(int n_vocab, uint64_t blob_size) { return bpe_alloc(n_vocab, blob_size); }
char *slm_bpe__blob(slm_bpe *t) { return t->blob; }
void slm_bpe__set_token(slm_bpe *t, int id, uint32_t off, uint32_t len, int type) {
    t->off[id] = off;
    t->len[id] = len;
    t->type[id] = (uint8_t)type;
}
slm_status slm_bpe__index(slm_bpe *t, const char *name, slm_err *err) { return build_hash(t, name, err); }
int slm_bpe__lookup(const slm_bpe *t, const char *s, size_t n) { return lookup(t, s, n); }
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
slm_status slm_bpe__add_regex(slm_bpe *t, const char *re, size_t n, const char *name, slm_err *err) {
    return add_regex(t, re, n, name, err);
}
slm_status slm_bpe__add_pre(slm_bpe *t, const char *pre, const char *name, slm_err *err) {
    const pre_def *p = find_pre(pre, strlen(pre));
    if (!p) return slm_errf(err, SLM_ERR_INTERNAL, "%s: no pre-tokenizer '%s'", name, pre);
    for (int i = 0; i < 7 && p->re[i]; i++) {
        slm_status s = add_regex(t, p->re[i], strlen(p->re[i]), name, err);
        if (s) return s;
    }
    return SLM_OK;
}
slm_status slm_bpe__finish(slm_bpe *t, const char *name, slm_err *err) { return bpe_finish(t, name, err); }
