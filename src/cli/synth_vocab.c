/* staticlm synth's vocabulary: the first tokens of a SentencePiece (llama)
 * or byte-level BPE (gpt2) GGUF vocabulary, padded with unique normal tokens
 * (synth.c says why).
 *
 * A byte-level BPE vocabulary cut to its first N tokens keeps the merges
 * whose parts and result are all kept (so every merge the loader reads names
 * tokens, and no merge makes a token that is gone), and its special ids
 * (BOS, EOS, EOT, ...) valid: a special token past the cut takes one of the
 * last ids (the tokens before them are cut instead). The single-byte tokens
 * of the bytes UTF-8 text holds must stay, so that any text still encodes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/synth_vocab.h"
#include "common/common.h"
#include "format/gguf.h"

/* ---- the vocabulary ------------------------------------------------------ */

void vocab_free(vocab *v) {
    if (v->str)
        for (int i = 0; i < v->n; i++) slm_xfree(v->str[i]);
    slm_xfree(v->str);
    slm_xfree(v->len);
    slm_xfree(v->score);
    slm_xfree(v->type);
    if (v->merge)
        for (int i = 0; i < v->n_merges; i++) slm_xfree(v->merge[i]);
    slm_xfree(v->merge);
    slm_xfree(v->merge_len);
    slm_xfree(v->pre);
    slm_xfree(v->charsmap);
    memset(v, 0, sizeof *v);
}

const char *default_vocab_file(void) {
    static const char *const cands[] = {"../shared/vocab/ggml-vocab-llama-spm.gguf",
                                        "shared/vocab/ggml-vocab-llama-spm.gguf",
                                        "../../shared/vocab/ggml-vocab-llama-spm.gguf"};
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
        FILE *f = fopen(cands[i], "rb");
        if (f) {
            fclose(f);
            return cands[i];
        }
    }
    return NULL;
}

/* The first min(n, file) tokens of an SPM vocabulary, padded to n. */
static int spm_load(vocab *v, const slm_gguf *g, const char *path, int n) {
    slm_gguf_type et;
    uint64_t n_tok = 0, n_sc = 0, n_ty = 0;
    const void *sc = NULL, *ty = NULL;
    if (!slm_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n_tok, NULL) || et != SLM_GGUF_STRING ||
        !slm_gguf_get_arr(g, "tokenizer.ggml.scores", &et, &n_sc, &sc) || et != SLM_GGUF_F32 || n_sc != n_tok ||
        !slm_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &n_ty, &ty) || et != SLM_GGUF_I32 || n_ty != n_tok ||
        n_tok < SYNTH_SPM_BASE) {
        fprintf(stderr, "staticlm synth: %s: tokens, scores and token_type (at least %d) are needed\n", path,
                SYNTH_SPM_BASE);
        return 0;
    }
    v->bos = 1, v->eos = 2, v->unk = 0;
    slm_gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &v->bos);
    slm_gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &v->eos);
    slm_gguf_get_u32(g, "tokenizer.ggml.unknown_token_id", &v->unk);
    if (v->bos >= (uint32_t)n || v->eos >= (uint32_t)n || v->unk >= (uint32_t)n) {
        fprintf(stderr, "staticlm synth: %s: special token ids beyond the vocabulary size %d\n", path, n);
        return 0;
    }
    v->n = n;
    v->str = slm_calloc((size_t)n, sizeof *v->str);
    v->len = slm_calloc((size_t)n, sizeof *v->len);
    v->score = slm_calloc((size_t)n, sizeof *v->score);
    v->type = slm_calloc((size_t)n, sizeof *v->type);
    if (!v->str || !v->len || !v->score || !v->type) goto nomem;
    float min_score = 0.0f;
    for (int i = 0; i < n; i++) {
        if ((uint64_t)i < n_tok) {
            slm_gguf_str s;
            if (!slm_gguf_arr_str(g, "tokenizer.ggml.tokens", (uint64_t)i, &s)) return 0;
            if (!(v->str[i] = slm_malloc((size_t)s.len + 1))) goto nomem;
            memcpy(v->str[i], s.s, (size_t)s.len);
            v->str[i][s.len] = 0;
            v->len[i] = s.len;
            memcpy(&v->score[i], (const char *)sc + 4 * (size_t)i, 4);
            memcpy(&v->type[i], (const char *)ty + 4 * (size_t)i, 4);
            if (v->score[i] < min_score) min_score = v->score[i];
        } else {
            char buf[32];
            int len = snprintf(buf, sizeof buf, "<synth_%d>", i);
            if (!(v->str[i] = slm_strdup(buf))) goto nomem;
            v->len[i] = (uint64_t)len;
            v->score[i] = min_score - 1.0f - (float)(i - (int)n_tok);
            v->type[i] = 1; /* normal */
        }
    }
    return 1;
nomem:
    fprintf(stderr, "staticlm synth: out of memory for %d tokens\n", n);
    return 0;
}

/* ---- byte-level BPE ------------------------------------------------------ */

/* GPT-2's byte-level spelling of byte b (its bytes_to_unicode map: printable
 * bytes stand for themselves, the others, in byte order, for U+0100 on), as
 * UTF-8 into out; returns its length. */
static int byte_spelling(int b, char out[2]) {
    int cp = b, k = 0;
    for (int x = 0; x < 256; x++) {
        const int direct = (x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || x >= 0xae;
        if (x == b) {
            if (!direct) cp = 256 + k;
            break;
        }
        k += !direct;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

/* The set of a vocabulary's first n strings (open addressing, FNV-1a). */
typedef struct strset {
    uint32_t *slot; /* [mask + 1] token id + 1; 0: empty */
    uint32_t mask;
    const vocab *v;
} strset;

static uint32_t str_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static int set_init(strset *h, const vocab *v, int n) {
    uint32_t cap = 16;
    while (cap < 2u * (uint32_t)n) cap <<= 1;
    h->v = v;
    h->mask = cap - 1;
    if (!(h->slot = slm_calloc(cap, sizeof *h->slot))) return 0;
    for (int i = 0; i < n; i++) {
        uint32_t k = str_hash(v->str[i], (size_t)v->len[i]) & h->mask;
        while (h->slot[k]) k = (k + 1) & h->mask;
        h->slot[k] = (uint32_t)i + 1;
    }
    return 1;
}

static int set_has(const strset *h, const char *s, size_t n) {
    for (uint32_t k = str_hash(s, n) & h->mask; h->slot[k]; k = (k + 1) & h->mask) {
        const uint32_t i = h->slot[k] - 1;
        if (h->v->len[i] == n && !memcmp(h->v->str[i], s, n)) return 1;
    }
    return 0;
}

/* The special-id keys llama.cpp's vocabulary loader reads. */
static const char *const k_special_keys[] = {
    "tokenizer.ggml.bos_token_id",     "tokenizer.ggml.eos_token_id",       "tokenizer.ggml.eot_token_id",
    "tokenizer.ggml.eom_token_id",     "tokenizer.ggml.unknown_token_id",   "tokenizer.ggml.seperator_token_id",
    "tokenizer.ggml.padding_token_id", "tokenizer.ggml.mask_token_id",      "tokenizer.ggml.fim_pre_token_id",
    "tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.fim_mid_token_id",   "tokenizer.ggml.fim_pad_token_id",
    "tokenizer.ggml.fim_rep_token_id", "tokenizer.ggml.fim_sep_token_id"};

/* The file's special ids (of n_tok tokens) into v->id_key / id_val and
 * v->eos_ids, not yet remapped. A padding id out of range is dropped (the
 * loader ignores it); the others must be in range. */
static int bpe_specials(vocab *v, const slm_gguf *g, const char *path, uint64_t n_tok) {
    for (size_t i = 0; i < sizeof k_special_keys / sizeof k_special_keys[0]; i++) {
        const char *key = k_special_keys[i];
        int64_t id;
        if (slm_gguf_find(g, key) < 0) continue;
        if (!slm_gguf_get_i64(g, key, &id)) {
            fprintf(stderr, "staticlm synth: %s: %s is not an integer\n", path, key);
            return 0;
        }
        if (id < 0 || (uint64_t)id >= n_tok) {
            if (!strcmp(key, "tokenizer.ggml.padding_token_id")) continue;
            fprintf(stderr, "staticlm synth: %s: %s = %lld is not a token of the file's %llu\n", path, key,
                    (long long)id, (unsigned long long)n_tok);
            return 0;
        }
        v->id_key[v->n_ids] = key;
        v->id_val[v->n_ids++] = (uint32_t)id;
    }
    v->n_eos_ids = -1;
    slm_gguf_type et;
    uint64_t n = 0;
    const void *data = NULL;
    if (slm_gguf_find(g, "tokenizer.ggml.eos_token_ids") < 0) return 1;
    if (!slm_gguf_get_arr(g, "tokenizer.ggml.eos_token_ids", &et, &n, &data) ||
        (et != SLM_GGUF_U32 && et != SLM_GGUF_I32) || n > SYNTH_MAX_SPECIAL) {
        fprintf(stderr, "staticlm synth: %s: tokenizer.ggml.eos_token_ids is not an int32 array of at most %d\n",
                path, SYNTH_MAX_SPECIAL);
        return 0;
    }
    v->n_eos_ids = (int)n;
    for (uint64_t i = 0; i < n; i++) {
        int32_t id;
        memcpy(&id, (const char *)data + 4 * i, 4);
        if (id < 0 || (uint64_t)id >= n_tok) {
            fprintf(stderr, "staticlm synth: %s: tokenizer.ggml.eos_token_ids[%llu] = %d is not a token\n", path,
                    (unsigned long long)i, id);
            return 0;
        }
        v->eos_ids[i] = (uint32_t)id;
    }
    return 1;
}

/* The distinct special ids of v into all[]; returns their count. */
static int special_ids(const vocab *v, uint32_t all[2 * SYNTH_MAX_SPECIAL]) {
    int na = 0;
    for (int i = 0; i < v->n_ids + (v->n_eos_ids > 0 ? v->n_eos_ids : 0); i++) {
        const uint32_t id = i < v->n_ids ? v->id_val[i] : v->eos_ids[i - v->n_ids];
        int dup = 0;
        for (int j = 0; j < na; j++) dup |= all[j] == id;
        if (!dup) all[na++] = id;
    }
    return na;
}

/* Where a cut to n tokens keeps the special ids: the distinct ones at or
 * past the cut, ascending, into rel[] (they take the last ids); returns
 * their count k (the file's first n - k tokens are kept). */
static int bpe_relocate(const vocab *v, int n, uint32_t rel[2 * SYNTH_MAX_SPECIAL]) {
    uint32_t all[2 * SYNTH_MAX_SPECIAL];
    const int na = special_ids(v, all);
    int k = 0;
    for (;;) { /* a special token just below the cut may be cut by the ones moved there */
        int c = 0;
        for (int i = 0; i < na; i++)
            if (all[i] >= (uint32_t)(n - k)) rel[c++] = all[i];
        if (c == k) break;
        k = c;
    }
    for (int i = 1; i < k; i++) /* insertion sort: at most 32 */
        for (int j = i; j > 0 && rel[j - 1] > rel[j]; j--) {
            const uint32_t t = rel[j];
            rel[j] = rel[j - 1];
            rel[j - 1] = t;
        }
    return k;
}

static uint32_t bpe_map(uint32_t id, int kept, const uint32_t *rel, int k) {
    if (id < (uint32_t)kept) return id;
    for (int j = 0; j < k; j++)
        if (rel[j] == id) return (uint32_t)(kept + j);
    return id; /* not reached: every special id past the cut is in rel */
}

/* Every single-byte token the file has for a byte that UTF-8 text holds
 * (not 0xC0, 0xC1, 0xF5..0xFF) is kept (set: the kept tokens). */
static int bpe_bytes_kept(const vocab *v, const slm_gguf *g, const strset *set, const char *path, int n,
                          uint64_t n_tok) {
    char sp[256][2];
    int spl[256], missing = -1;
    int64_t at[256], last = -1; /* at[b]: the file's id of byte b's token, -1: none */
    for (int b = 0; b < 256; b++) spl[b] = byte_spelling(b, sp[b]), at[b] = -1;
    for (uint64_t i = 0; i < n_tok; i++) {
        slm_gguf_str s;
        if (!slm_gguf_arr_str(g, "tokenizer.ggml.tokens", i, &s) || s.len > 2) continue;
        for (int b = 0; b < 256; b++)
            if (s.len == (uint64_t)spl[b] && !memcmp(s.s, sp[b], (size_t)spl[b])) at[b] = (int64_t)i;
    }
    for (int b = 0; b < 256; b++) {
        if (b == 0xC0 || b == 0xC1 || b >= 0xF5) continue;
        if (at[b] > last) last = at[b];
        if (at[b] >= 0 && missing < 0 && !set_has(set, sp[b], (size_t)spl[b])) missing = b;
    }
    if (missing < 0) return 1;
    uint32_t all[2 * SYNTH_MAX_SPECIAL];
    const int na = special_ids(v, all);
    int above = 0; /* the special tokens past the last byte token take ids above it */
    for (int i = 0; i < na; i++) above += (int64_t)all[i] > last;
    fprintf(stderr,
            "staticlm synth: %s: --n-vocab %d cuts the single-byte token of byte 0x%02X (id %lld); a byte-level "
            "BPE vocabulary keeps the bytes of UTF-8 text so that any text encodes (this file: --n-vocab %lld or more)\n",
            path, n, missing, (long long)at[missing], (long long)(last + 1 + above));
    return 0;
}

/* The file's merges; cut (the vocabulary is the file's cut): only those
 * whose parts and result are kept tokens (set). */
static int bpe_merges(vocab *v, const slm_gguf *g, const char *path, const strset *set, int cut) {
    slm_gguf_type et;
    uint64_t n_m = 0;
    if (!slm_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n_m, NULL) || et != SLM_GGUF_STRING ||
        n_m > (uint64_t)INT32_MAX) {
        fprintf(stderr, "staticlm synth: %s: tokenizer.ggml.merges is missing or not a string array\n", path);
        return 0;
    }
    v->merge = slm_calloc((size_t)(n_m ? n_m : 1), sizeof *v->merge);
    v->merge_len = slm_calloc((size_t)(n_m ? n_m : 1), sizeof *v->merge_len);
    char *cat = NULL; /* the result "ab" of merge "a b" */
    size_t cat_cap = 0;
    int ok = 0;
    if (!v->merge || !v->merge_len) goto nomem;
    for (uint64_t m = 0; m < n_m; m++) {
        slm_gguf_str s;
        if (!slm_gguf_arr_str(g, "tokenizer.ggml.merges", m, &s)) goto bad;
        const char *sp = s.len > 1 ? memchr(s.s + 1, ' ', (size_t)s.len - 1) : NULL; /* the loader's split */
        if (!sp) goto bad;
        const size_t ll = (size_t)(sp - s.s), rl = (size_t)s.len - ll - 1;
        if (cut) {
            if (ll + rl > cat_cap) {
                char *c = slm_realloc(cat, ll + rl);
                if (!c) goto nomem;
                cat = c, cat_cap = ll + rl;
            }
            memcpy(cat, s.s, ll);
            memcpy(cat + ll, sp + 1, rl);
            if (!set_has(set, s.s, ll) || !set_has(set, sp + 1, rl) || !set_has(set, cat, ll + rl)) continue;
        }
        char *c = slm_malloc((size_t)s.len + 1);
        if (!c) goto nomem;
        memcpy(c, s.s, (size_t)s.len);
        c[s.len] = 0;
        v->merge[v->n_merges] = c;
        v->merge_len[v->n_merges++] = s.len;
    }
    ok = 1;
    goto done;
bad:
    fprintf(stderr, "staticlm synth: %s: a merge of tokenizer.ggml.merges is unreadable or not two tokens\n", path);
    goto done;
nomem:
    fprintf(stderr, "staticlm synth: out of memory for %llu merges\n", (unsigned long long)n_m);
done:
    slm_xfree(cat);
    return ok;
}

/* n tokens of a byte-level BPE vocabulary: the file's first ones (special
 * tokens past the cut moved to the last ids), padded to n. */
static int bpe_load(vocab *v, const slm_gguf *g, const char *path, int n) {
    slm_gguf_type et;
    uint64_t n_tok = 0, n_x = 0;
    const void *sc = NULL, *ty = NULL;
    if (!slm_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n_tok, NULL) || et != SLM_GGUF_STRING || !n_tok) {
        fprintf(stderr, "staticlm synth: %s: tokenizer.ggml.tokens is missing or not a string array\n", path);
        return 0;
    }
    if (slm_gguf_find(g, "tokenizer.ggml.token_type") >= 0 &&
        (!slm_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &n_x, &ty) ||
         (et != SLM_GGUF_I32 && et != SLM_GGUF_U32) || n_x != n_tok)) {
        fprintf(stderr, "staticlm synth: %s: tokenizer.ggml.token_type is not an int32 array of %llu\n", path,
                (unsigned long long)n_tok);
        return 0;
    }
    if (slm_gguf_find(g, "tokenizer.ggml.scores") >= 0 &&
        (!slm_gguf_get_arr(g, "tokenizer.ggml.scores", &et, &n_x, &sc) || et != SLM_GGUF_F32 || n_x != n_tok)) {
        fprintf(stderr, "staticlm synth: %s: tokenizer.ggml.scores is not an f32 array of %llu\n", path,
                (unsigned long long)n_tok);
        return 0;
    }
    slm_gguf_str pre;
    if (slm_gguf_find(g, "tokenizer.ggml.pre") >= 0) {
        if (!slm_gguf_get_str(g, "tokenizer.ggml.pre", &pre)) {
            fprintf(stderr, "staticlm synth: %s: tokenizer.ggml.pre is not a string\n", path);
            return 0;
        }
        if (!(v->pre = slm_malloc((size_t)pre.len + 1))) goto nomem;
        memcpy(v->pre, pre.s, (size_t)pre.len);
        v->pre[pre.len] = 0;
    }
    v->bpe = 1;
    v->add_bos = v->add_eos = -1;
    int b;
    if (slm_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b)) v->add_bos = b;
    if (slm_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b)) v->add_eos = b;
    if (!bpe_specials(v, g, path, n_tok)) return 0;
    const int cut = (uint64_t)n < n_tok;
    uint32_t rel[2 * SYNTH_MAX_SPECIAL];
    const int k = cut ? bpe_relocate(v, n, rel) : 0;
    const int kept = cut ? n - k : (int)n_tok; /* the file's first tokens kept in place */

    v->n = n;
    v->str = slm_calloc((size_t)n, sizeof *v->str);
    v->len = slm_calloc((size_t)n, sizeof *v->len);
    v->type = slm_calloc((size_t)n, sizeof *v->type);
    if (sc) v->score = slm_calloc((size_t)n, sizeof *v->score);
    if (!v->str || !v->len || !v->type || (sc && !v->score)) goto nomem;
    for (int i = 0; i < kept + k; i++) {
        const uint64_t src = i < kept ? (uint64_t)i : rel[i - kept];
        slm_gguf_str s;
        if (!slm_gguf_arr_str(g, "tokenizer.ggml.tokens", src, &s)) return 0;
        if (!(v->str[i] = slm_malloc((size_t)s.len + 1))) goto nomem;
        memcpy(v->str[i], s.s, (size_t)s.len);
        v->str[i][s.len] = 0;
        v->len[i] = s.len;
        v->type[i] = 1; /* normal */
        if (ty) memcpy(&v->type[i], (const char *)ty + 4 * src, 4);
        if (sc) memcpy(&v->score[i], (const char *)sc + 4 * src, 4);
    }
    strset set;
    if (!set_init(&set, v, kept + k)) goto nomem;
    int ok = 0;
    for (int i = kept + k; i < n; i++) { /* pads: unique normal tokens that no merge makes */
        char buf[32];
        int len = snprintf(buf, sizeof buf, "<synth_%d>", i);
        if (set_has(&set, buf, (size_t)len)) {
            fprintf(stderr, "staticlm synth: %s: has a token '%s' already; cannot pad with it\n", path, buf);
            goto fail_set;
        }
        if (!(v->str[i] = slm_strdup(buf))) goto fail_set_nomem;
        v->len[i] = (uint64_t)len;
        v->type[i] = 1;
    }
    if (!bpe_bytes_kept(v, g, &set, path, n, n_tok) || !bpe_merges(v, g, path, &set, cut)) goto fail_set;
    for (int i = 0; i < v->n_ids; i++) v->id_val[i] = bpe_map(v->id_val[i], kept, rel, k);
    for (int i = 0; i < v->n_eos_ids; i++) v->eos_ids[i] = bpe_map(v->eos_ids[i], kept, rel, k);
    if (k == 1) fprintf(stderr, "synth: a special token past --n-vocab %d moved to id %d\n", n, kept);
    if (k > 1) fprintf(stderr, "synth: %d special tokens past --n-vocab %d moved to ids %d..%d\n", k, n, kept, n - 1);
    ok = 1;
    goto fail_set;
fail_set_nomem:
    fprintf(stderr, "staticlm synth: out of memory for %d tokens\n", n);
fail_set:
    slm_xfree(set.slot);
    return ok;
nomem:
    fprintf(stderr, "staticlm synth: out of memory for %d tokens\n", n);
    return 0;
}

/* ---- a generated WordPiece vocabulary ------------------------------------ */

/* Common English words (word-start pieces) and suffixes (continuations),
 * so that ordinary text takes whole-word ids as a real BERT vocabulary's. */
static const char *const k_wpm_words[] = {
    "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not",
    "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they", "you", "were",
    "their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when", "will", "would", "who",
    "so", "no", "she", "other", "its", "may", "these", "what", "them", "than", "some", "him", "time", "into", "only",
    "do", "such", "my", "new", "about", "out", "also", "two", "any", "up", "first", "could", "our", "then", "most",
    "see", "me", "should", "after", "said", "your", "very", "between", "many", "over", "like", "those", "did", "now",
    "even", "well", "where", "must", "people", "through", "how", "same", "work", "being", "because", "man", "life",
    "before", "each", "much", "under", "years", "way", "great", "state", "both", "use", "upon", "own", "used",
    "however", "us", "part", "good", "world", "make", "three", "while", "long", "day", "without", "just", "men",
    "general", "during", "another", "little", "found", "here", "system", "does", "de", "down", "number", "case",
    "against", "might", "still", "back", "right", "know", "place", "every", "government", "too", "high", "old",
    "different", "year", "water", "text", "word", "words", "sentence", "document", "query", "search", "answer",
    "question", "model", "embedding", "data", "city", "house", "cat", "dog", "hello", "quick", "brown", "fox",
    "jumps", "lazy", "paris", "france", "capital", "weather", "today", "computer", "science", "language",
};
static const char *const k_wpm_suffixes[] = {"ing", "ed", "er", "ly", "es", "tion", "ment", "ness", "able", "est",
                                             "al", "ity", "ous", "ive", "ful", "less", "ize", "ism", "ist", "ic"};

/* s (len bytes, `start`: a word start, "\u2581" before it) as token *at of v
 * unless the vocabulary has it (set); 1 added, 0 had, -1 out of memory. */
static int wpm_push(vocab *v, strset *set, int *at, const char *s, size_t len, int start, int32_t type) {
    char buf[64];
    const size_t pre = start ? 3 : 0;
    if (len + pre >= sizeof buf || *at >= v->n) return 0;
    memcpy(buf, "\xe2\x96\x81", pre);
    memcpy(buf + pre, s, len);
    len += pre;
    buf[len] = 0;
    uint32_t k = str_hash(buf, len) & set->mask;
    for (; set->slot[k]; k = (k + 1) & set->mask) {
        const uint32_t i = set->slot[k] - 1;
        if (v->len[i] == len && !memcmp(v->str[i], buf, len)) return 0;
    }
    if (!(v->str[*at] = slm_strdup(buf))) return -1;
    v->len[*at] = len;
    v->type[*at] = type;
    set->slot[k] = (uint32_t)*at + 1;
    ++*at;
    return 1;
}

int vocab_wpm(vocab *v, int n) {
    enum { NORMAL = 1, CONTROL = 3 };
    static const char *const specials[5] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    static const int special_at[5] = {0, 100, 101, 102, 103};
    memset(v, 0, sizeof *v);
    if (n < SYNTH_WPM_MIN) {
        fprintf(stderr, "staticlm synth: a WordPiece vocabulary needs at least %d tokens, not %d\n", SYNTH_WPM_MIN, n);
        return 0;
    }
    v->wpm = 1;
    v->n = n;
    v->bos = 101, v->eos = 102, v->unk = 100;
    v->str = slm_calloc((size_t)n, sizeof *v->str);
    v->len = slm_calloc((size_t)n, sizeof *v->len);
    v->type = slm_calloc((size_t)n, sizeof *v->type);
    strset set; /* empty, with room for n */
    uint32_t cap = 16;
    while (cap < 2u * (uint32_t)n) cap <<= 1;
    set.v = v;
    set.mask = cap - 1;
    set.slot = slm_calloc(cap, sizeof *set.slot);
    if (!v->str || !v->len || !v->type || !set.slot) goto nomem;
    int at = 0, r = 0;
    for (int i = 0; i < 104 && r >= 0; i++) { /* the specials in their places, [unusedK] between (as the converter: normal words) */
        char u[32];
        int j = 0;
        while (j < 5 && special_at[j] != i) j++;
        if (j < 5) r = wpm_push(v, &set, &at, specials[j], strlen(specials[j]), 0, CONTROL);
        else r = wpm_push(v, &set, &at, u, (size_t)snprintf(u, sizeof u, "[unused%d]", i - 1), 1, NORMAL);
    }
    for (int start = 1; start >= 0 && r >= 0; start--) /* printable ASCII: word starts, then continuations */
        for (char c = '!'; c <= '~' && r >= 0; c++) r = wpm_push(v, &set, &at, &c, 1, start, NORMAL);
    for (size_t i = 0; i < sizeof k_wpm_words / sizeof k_wpm_words[0] && r >= 0; i++)
        r = wpm_push(v, &set, &at, k_wpm_words[i], strlen(k_wpm_words[i]), 1, NORMAL);
    for (size_t i = 0; i < sizeof k_wpm_suffixes / sizeof k_wpm_suffixes[0] && r >= 0; i++)
        r = wpm_push(v, &set, &at, k_wpm_suffixes[i], strlen(k_wpm_suffixes[i]), 0, NORMAL);
    /* the rest: syllable words (consonant + vowel, base 90 digits of j, two or more), word starts and
     * continuations in turn, each distinct */
    static const char cons[] = "bcdfghjklmnprstvwz", vow[] = "aeiou";
    for (int j = 90; at < n && r >= 0; j++) {
        char w[32];
        size_t len = 0;
        for (int x = j; x > 0 && len + 2 < sizeof w; x /= 90) {
            w[len++] = cons[(x % 90) / 5];
            w[len++] = vow[(x % 90) % 5];
        }
        r = wpm_push(v, &set, &at, w, len, j % 2 == 0, NORMAL);
    }
    slm_xfree(set.slot);
    if (r < 0) goto nomem;
    return 1;
nomem:
    slm_xfree(set.slot);
    fprintf(stderr, "staticlm synth: out of memory for %d tokens\n", n);
    vocab_free(v);
    return 0;
}

/* ---- loading and writing ------------------------------------------------- */

/* A unigram vocabulary's normalizer, flags and special ids (after spm_load
 * took its tokens): copied as they are, ids beyond n refused. */
static int ugm_extras(vocab *v, const slm_gguf *g, const char *path, int n) {
    static const char *const ids[] = {"tokenizer.ggml.bos_token_id",       "tokenizer.ggml.eos_token_id",
                                      "tokenizer.ggml.unknown_token_id",   "tokenizer.ggml.seperator_token_id",
                                      "tokenizer.ggml.padding_token_id",   "tokenizer.ggml.cls_token_id",
                                      "tokenizer.ggml.mask_token_id"};
    v->ugm = 1;
    v->add_bos = v->add_eos = v->add_sep = v->add_space_prefix = v->remove_extra_ws = -1;
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        uint32_t id;
        if (!slm_gguf_get_u32(g, ids[i], &id)) continue;
        if (id >= (uint32_t)n) {
            fprintf(stderr, "staticlm synth: %s: %s %u is beyond the vocabulary size %d\n", path, ids[i], id, n);
            return 0;
        }
        v->id_key[v->n_ids] = ids[i];
        v->id_val[v->n_ids++] = id;
    }
    int b;
    if (slm_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b)) v->add_bos = b;
    if (slm_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b)) v->add_eos = b;
    if (slm_gguf_get_bool(g, "tokenizer.ggml.add_sep_token", &b)) v->add_sep = b;
    if (slm_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &b)) v->add_space_prefix = b;
    if (slm_gguf_get_bool(g, "tokenizer.ggml.remove_extra_whitespaces", &b)) v->remove_extra_ws = b;
    slm_gguf_str pre;
    if (slm_gguf_get_str(g, "tokenizer.ggml.pre", &pre) && pre.len < 64) {
        if (!(v->pre = slm_malloc((size_t)pre.len + 1))) return 0;
        memcpy(v->pre, pre.s, (size_t)pre.len);
        v->pre[pre.len] = 0;
    }
    slm_gguf_type et;
    uint64_t nc = 0;
    const void *cm = NULL;
    if (slm_gguf_get_arr(g, "tokenizer.ggml.precompiled_charsmap", &et, &nc, &cm)) {
        if ((et != SLM_GGUF_U8 && et != SLM_GGUF_I8) || !cm) {
            fprintf(stderr, "staticlm synth: %s: tokenizer.ggml.precompiled_charsmap is not an array of bytes\n", path);
            return 0;
        }
        if (nc && !(v->charsmap = slm_malloc((size_t)nc))) return 0;
        if (nc) memcpy(v->charsmap, cm, (size_t)nc);
        v->n_charsmap = nc;
    }
    return 1;
}

int vocab_load(vocab *v, const char *path, int n) {
    slm_err err;
    memset(&err, 0, sizeof err);
    slm_map map;
    memset(&map, 0, sizeof map);
    slm_gguf *g = NULL;
    int ok = 0;
    memset(v, 0, sizeof *v);
    if (slm_map_file(&map, path, &err) || slm_gguf_open(&g, map.data, map.size, slm_basename(path), &err)) {
        fprintf(stderr, "staticlm synth: %s\n", err.msg);
        goto done;
    }
    slm_gguf_str model;
    if (slm_gguf_get_str(g, "tokenizer.ggml.model", &model) && slm_gguf_str_eq(model, "llama"))
        ok = spm_load(v, g, path, n);
    else if (slm_gguf_get_str(g, "tokenizer.ggml.model", &model) && slm_gguf_str_eq(model, "t5"))
        ok = spm_load(v, g, path, n) && ugm_extras(v, g, path, n);
    else if (slm_gguf_get_str(g, "tokenizer.ggml.model", &model) && slm_gguf_str_eq(model, "gpt2"))
        ok = bpe_load(v, g, path, n);
    else
        fprintf(stderr,
                "staticlm synth: %s: not a SentencePiece (tokenizer.ggml.model = llama), byte-level BPE "
                "(gpt2) or unigram (t5) vocabulary\n",
                path);
done:
    if (!ok) vocab_free(v);
    slm_gguf_close(g);
    slm_unmap(&map);
    return ok;
}

void vocab_put(slm_gguf_writer *w, const vocab *v) {
    if (v->wpm) { /* as conversion/bert.py and gguf-py's SpecialVocab write BERT's (bos = [CLS], eos = [SEP]) */
        slm_gguf_set_str(w, "tokenizer.ggml.model", "bert");
        slm_gguf_set_str(w, "tokenizer.ggml.pre", "bert-bge");
        slm_gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->str, v->len, (uint64_t)v->n);
        slm_gguf_set_arr(w, "tokenizer.ggml.token_type", SLM_GGUF_I32, v->type, (uint64_t)v->n);
        slm_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 101);
        slm_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 102);
        slm_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 100);
        slm_gguf_set_u32(w, "tokenizer.ggml.seperator_token_id", 102);
        slm_gguf_set_u32(w, "tokenizer.ggml.padding_token_id", 0);
        slm_gguf_set_u32(w, "tokenizer.ggml.mask_token_id", 103);
        slm_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", 1);
        slm_gguf_set_bool(w, "tokenizer.ggml.add_eos_token", 1);
        slm_gguf_set_bool(w, "tokenizer.ggml.add_sep_token", 0);
        slm_gguf_set_bool(w, "tokenizer.ggml.normalizer.lowercase", 1);
        return;
    }
    if (v->ugm) { /* as the file had it */
        slm_gguf_set_str(w, "tokenizer.ggml.model", "t5");
        if (v->pre) slm_gguf_set_str(w, "tokenizer.ggml.pre", v->pre);
        slm_gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->str, v->len, (uint64_t)v->n);
        slm_gguf_set_arr(w, "tokenizer.ggml.scores", SLM_GGUF_F32, v->score, (uint64_t)v->n);
        slm_gguf_set_arr(w, "tokenizer.ggml.token_type", SLM_GGUF_I32, v->type, (uint64_t)v->n);
        if (v->charsmap) slm_gguf_set_arr(w, "tokenizer.ggml.precompiled_charsmap", SLM_GGUF_U8, v->charsmap, v->n_charsmap);
        for (int i = 0; i < v->n_ids; i++) slm_gguf_set_u32(w, v->id_key[i], v->id_val[i]);
        if (v->add_space_prefix >= 0) slm_gguf_set_bool(w, "tokenizer.ggml.add_space_prefix", v->add_space_prefix);
        if (v->remove_extra_ws >= 0) slm_gguf_set_bool(w, "tokenizer.ggml.remove_extra_whitespaces", v->remove_extra_ws);
        if (v->add_bos >= 0) slm_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", v->add_bos);
        if (v->add_eos >= 0) slm_gguf_set_bool(w, "tokenizer.ggml.add_eos_token", v->add_eos);
        if (v->add_sep >= 0) slm_gguf_set_bool(w, "tokenizer.ggml.add_sep_token", v->add_sep);
        return;
    }
    if (!v->bpe) {
        slm_gguf_set_str(w, "tokenizer.ggml.model", "llama");
        slm_gguf_set_str(w, "tokenizer.ggml.pre", "default");
        slm_gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->str, v->len, (uint64_t)v->n);
        slm_gguf_set_arr(w, "tokenizer.ggml.scores", SLM_GGUF_F32, v->score, (uint64_t)v->n);
        slm_gguf_set_arr(w, "tokenizer.ggml.token_type", SLM_GGUF_I32, v->type, (uint64_t)v->n);
        slm_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", v->bos);
        slm_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", v->eos);
        slm_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", v->unk);
        slm_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", 1);
        slm_gguf_set_bool(w, "tokenizer.ggml.add_eos_token", 0);
        return;
    }
    slm_gguf_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (v->pre) slm_gguf_set_str(w, "tokenizer.ggml.pre", v->pre);
    slm_gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->str, v->len, (uint64_t)v->n);
    if (v->score) slm_gguf_set_arr(w, "tokenizer.ggml.scores", SLM_GGUF_F32, v->score, (uint64_t)v->n);
    slm_gguf_set_arr(w, "tokenizer.ggml.token_type", SLM_GGUF_I32, v->type, (uint64_t)v->n);
    slm_gguf_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v->merge, v->merge_len,
                         (uint64_t)v->n_merges);
    for (int i = 0; i < v->n_ids; i++) slm_gguf_set_u32(w, v->id_key[i], v->id_val[i]);
    if (v->n_eos_ids >= 0)
        slm_gguf_set_arr(w, "tokenizer.ggml.eos_token_ids", SLM_GGUF_U32, v->eos_ids, (uint64_t)v->n_eos_ids);
    if (v->add_bos >= 0) slm_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", v->add_bos);
    if (v->add_eos >= 0) slm_gguf_set_bool(w, "tokenizer.ggml.add_eos_token", v->add_eos);
}
