/* SentencePiece-BPE tokenizer.
 *
 * Two encoding modes share one merge engine; the loader picks the mode:
 *
 *  - TOK_RUNC (llama2.c tokenizer.bin): exactly llama2.c run.c's encode().
 *    BOS (if asked) and, for non-empty text, the id of " " are the first
 *    symbols; then each UTF-8 code point (run.c's byte loop: a lead byte plus
 *    up to 3 continuation bytes) is looked up in the whole vocabulary, else
 *    becomes byte tokens. Then, repeatedly, the adjacent pair whose
 *    concatenated *vocabulary strings* form a token with the highest score
 *    is merged (leftmost on ties; only scores > -1e10, as run.c's initial
 *    best_score; NaN never wins). BOS takes part in the merge scan as in
 *    run.c (its string "\n<s>\n" never merges in practice).
 *
 *  - TOK_SPM (GGUF, tokenizer.ggml.model = "llama"): llama.cpp's
 *    llm_tokenizer_spm, which follows sentencepiece more closely:
 *      * user-defined tokens (type 4) are split out of the text first and
 *        emitted as is; each raw text fragment at the start or after such a
 *        token gets the " " prefix (if add_space_prefix), as llama.cpp does;
 *      * U+2581 in the input counts as a space (llama.cpp escapes spaces to
 *        U+2581; we un-escape the vocabulary instead);
 *      * code points are split by the lead byte's length only (llama.cpp's
 *        unicode_len_utf8); a code point that is not a token stays a symbol
 *        and may still merge with a neighbour; whatever symbol is left that
 *        is not a token at the end becomes byte tokens (<0xXX>);
 *      * only normal tokens (type 1, or 0 undefined) can be produced from
 *        text: control, unknown, unused, byte and user-defined tokens are not
 *        looked up (sentencepiece never emits them from plain text; llama.cpp
 *        itself looks up every token, which gives the same result unless a
 *        pair of pieces concatenates to e.g. "<s>");
 *      * no -1e10 score floor.
 *    Leftmost-longest matching of user-defined tokens differs from
 *    llama.cpp's longest-token-first partition only for overlapping tokens.
 *
 * The merge engine is a linked list of symbols plus a binary max-heap of
 * candidate pairs keyed (score desc, left position asc) with lazy
 * invalidation through per-symbol version counters. At every step the best
 * valid heap entry is exactly the pair run.c's O(n^2) scan would pick, so the
 * results are identical; cost is O(n log n).
 */
#include <math.h>
#include <stdio.h>

#include "text/tok_internal.h"

/* ---- helpers ---------------------------------------------------------- */

static uint32_t tok_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 16777619u;
    }
    return h;
}

/* Id of the token spelled s[0..n) among the tokens text may produce, or -1. */
static int tok_lookup(const slm_tokenizer *t, const char *s, size_t n) {
    if (n == 0 || n > t->max_len) return -1;
    uint32_t i = tok_hash(s, n) & t->hash_mask;
    for (;;) {
        int32_t id = t->hash[i];
        if (id < 0) return -1;
        if (t->len[id] == n && memcmp(slm_tok__s(t, id), s, n) == 0) return id;
        i = (i + 1) & t->hash_mask;
    }
}

/* Byte b if s[0..n) is "<0xXX>" (either hex case), else -1. */
static int parse_byte_token(const char *s, size_t n) {
    if (n != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>') return -1;
    int v = 0;
    for (int k = 3; k < 5; k++) {
        char c = s[k];
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Can text produce token id through lookups and merges? */
static int tok_matchable(const slm_tokenizer *t, int id) {
    if (t->mode == TOK_RUNC) return 1; /* run.c searches the whole vocabulary */
    return t->type[id] == TT_NORMAL || t->type[id] == TT_UNDEFINED;
}

slm_tokenizer *slm_tok__alloc(int n_vocab, uint64_t blob_size) {
    slm_tokenizer *t = slm_calloc(1, sizeof *t);
    if (!t) return NULL;
    t->n_vocab = n_vocab;
    t->max_input = SLM_TOK_DEFAULT_MAX_INPUT;
    uint32_t cap = 16;
    while (cap < (uint32_t)n_vocab * 2u) cap <<= 1;
    t->hash_mask = cap - 1;
    t->blob = slm_malloc((size_t)blob_size);
    t->off = slm_calloc((size_t)n_vocab, sizeof *t->off);
    t->len = slm_calloc((size_t)n_vocab, sizeof *t->len);
    t->score = slm_calloc((size_t)n_vocab, sizeof *t->score);
    t->type = slm_calloc((size_t)n_vocab, sizeof *t->type);
    t->byte_val = slm_calloc((size_t)n_vocab, sizeof *t->byte_val);
    t->hash = slm_calloc(cap, sizeof *t->hash);
    if (!t->blob || !t->off || !t->len || !t->score || !t->type || !t->byte_val || !t->hash) {
        slm_tok_free(t);
        return NULL;
    }
    return t;
}

/* After blob/off/len/score/type are filled: byte values, the lookup table,
 * byte fallback ids, the " " id and the decode byte pieces. */
slm_status slm_tok__index(slm_tokenizer *t, slm_err *err) {
    memset(t->hash, 0xff, (size_t)(t->hash_mask + 1) * sizeof *t->hash);
    for (int b = 0; b < 256; b++) {
        t->byte_id[b] = -1;
        t->byte_piece[b][0] = (char)b;
        t->byte_piece[b][1] = 0;
    }
    t->max_len = 0;
    for (int id = 0; id < t->n_vocab; id++)
        if (t->len[id] > t->max_len) t->max_len = t->len[id];
    for (int id = 0; id < t->n_vocab; id++) {
        const char *s = slm_tok__s(t, id);
        int b = parse_byte_token(s, t->len[id]);
        if (t->mode == TOK_SPM && t->type[id] != TT_BYTE && t->type[id] != TT_UNDEFINED &&
            t->type[id] != TT_NORMAL)
            b = -1; /* a control token spelled "<0x41>" is not a byte */
        t->byte_val[id] = (int16_t)b;
        if (b >= 0 && t->byte_id[b] < 0) t->byte_id[b] = id;
        if (!tok_matchable(t, id) || t->len[id] == 0) continue;
        uint32_t i = tok_hash(s, t->len[id]) & t->hash_mask;
        for (;;) {
            int32_t o = t->hash[i];
            if (o < 0) { t->hash[i] = id; break; }
            if (t->len[o] == t->len[id] && memcmp(slm_tok__s(t, o), s, t->len[id]) == 0) {
                /* duplicate spelling: run.c's bsearch is unspecified, keep the
                 * first; llama.cpp's token_to_id map keeps the last */
                if (t->mode == TOK_SPM) t->hash[i] = id;
                break;
            }
            i = (i + 1) & t->hash_mask;
        }
    }
    for (int b = 0; b < 256; b++) {
        if (t->byte_id[b] >= 0) continue;
        if (t->mode == TOK_RUNC) {
            /* run.c hard-codes byte + 3 */
            t->byte_id[b] = b + 3 < t->n_vocab ? b + 3 : t->unk;
        } else {
            /* llama.cpp falls back to the single-byte token */
            char c = (char)b;
            int id = tok_lookup(t, &c, 1);
            t->byte_id[b] = id >= 0 ? id : t->unk;
        }
    }
    t->space_id = tok_lookup(t, " ", 1);

    if (t->mode == TOK_SPM) {
        int n = 0;
        for (int id = 0; id < t->n_vocab; id++)
            if (t->type[id] == TT_USER_DEFINED && t->len[id] > 0) n++;
        if (n > 0) {
            t->special = slm_calloc((size_t)n, sizeof *t->special);
            if (!t->special) return slm_errf(err, SLM_ERR_NOMEM, "tokenizer: out of memory");
            for (int id = 0; id < t->n_vocab; id++) {
                if (t->type[id] != TT_USER_DEFINED || t->len[id] == 0) continue;
                /* insertion sort, longest first (n is small in practice) */
                int k = t->n_special++;
                while (k > 0 && t->len[t->special[k - 1]] < t->len[id]) {
                    t->special[k] = t->special[k - 1];
                    k--;
                }
                t->special[k] = id;
                t->special_first[(uint8_t)slm_tok__s(t, id)[0]] = 1;
            }
        }
    }
    return SLM_OK;
}

void slm_tok_free(slm_tokenizer *t) {
    if (!t) return;
    slm_bpe_free(t->bpe);
    slm_wpm_free(t->wpm);
    slm_ugm_free(t->ugm);
    slm_xfree(t->pieces);
    slm_xfree(t->piece_off);
    slm_xfree(t->lead_space);
    slm_xfree(t->blob);
    slm_xfree(t->off);
    slm_xfree(t->len);
    slm_xfree(t->score);
    slm_xfree(t->type);
    slm_xfree(t->byte_val);
    slm_xfree(t->hash);
    slm_xfree(t->special);
    slm_xfree(t);
}

/* ---- loaders ---------------------------------------------------------- */

slm_status slm_tok_load_llama2c(slm_tokenizer **out, const char *path, int vocab_size,
                                slm_err *err) {
    *out = NULL;
    const char *name = slm_basename(path);
    if (vocab_size < 3 || vocab_size > TOK_MAX_VOCAB)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: vocab_size %d out of range (3..%d)", name,
                        vocab_size, TOK_MAX_VOCAB);
    slm_map m;
    slm_status st = slm_map_file(&m, path, err);
    if (st != SLM_OK) return st;

    /* pass 1: validate every field and size the string blob */
    slm_rd r = {m.data, m.size, 0};
    int32_t max_token_length;
    uint64_t blob_size = 0;
    if (!slm_rd_i32(&r, &max_token_length)) {
        st = slm_errf(err, SLM_ERR_FORMAT, "%s: max_token_length: beyond end of file", name);
        goto fail;
    }
    if (max_token_length <= 0 || max_token_length > TOK_MAX_LEN) {
        st = slm_errf(err, SLM_ERR_FORMAT, "%s: max_token_length %d out of range (1..%d)", name,
                      (int)max_token_length, TOK_MAX_LEN);
        goto fail;
    }
    for (int i = 0; i < vocab_size; i++) {
        float score;
        int32_t len;
        const uint8_t *p;
        if (!slm_rd_f32(&r, &score)) {
            st = slm_errf(err, SLM_ERR_FORMAT, "%s: token %d: score beyond end of file", name, i);
            goto fail;
        }
        if (!slm_rd_i32(&r, &len)) {
            st = slm_errf(err, SLM_ERR_FORMAT, "%s: token %d: length beyond end of file", name, i);
            goto fail;
        }
        if (len <= 0 || len > TOK_MAX_LEN) {
            st = slm_errf(err, SLM_ERR_FORMAT, "%s: token %d: length %d out of range (1..%d)",
                          name, i, (int)len, TOK_MAX_LEN);
            goto fail;
        }
        if (!slm_rd_ptr(&r, (uint64_t)len, &p)) {
            st = slm_errf(err, SLM_ERR_FORMAT, "%s: token %d: length %d beyond end of file", name,
                          i, (int)len);
            goto fail;
        }
        blob_size += (uint64_t)len + 1;
    }
    if (blob_size > UINT32_MAX) {
        st = slm_errf(err, SLM_ERR_FORMAT, "%s: token strings too large", name);
        goto fail;
    }

    /* pass 2: copy */
    slm_tokenizer *t = slm_tok__alloc(vocab_size, blob_size);
    if (!t) {
        st = slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory for the tokenizer", name);
        goto fail;
    }
    t->mode = TOK_RUNC;
    t->bos = 1;
    t->eos = 2;
    t->unk = 0;
    t->add_space_prefix = 1;
    r.pos = 4;
    uint32_t o = 0;
    for (int i = 0; i < vocab_size; i++) {
        int32_t len = 0;
        const uint8_t *p = NULL;
        slm_rd_f32(&r, &t->score[i]);
        slm_rd_i32(&r, &len);
        slm_rd_ptr(&r, (uint64_t)len, &p);
        memcpy(t->blob + o, p, (size_t)len);
        t->blob[o + (uint32_t)len] = 0;
        t->off[i] = o;
        t->len[i] = (uint32_t)len;
        o += (uint32_t)len + 1;
        /* llama2.c files carry no types: derive them */
        if (i == 0) t->type[i] = TT_UNKNOWN;
        else if (i == 1 || i == 2) t->type[i] = TT_CONTROL;
        else if (parse_byte_token(t->blob + t->off[i], t->len[i]) >= 0) t->type[i] = TT_BYTE;
        else t->type[i] = TT_NORMAL;
    }
    slm_unmap(&m);
    st = slm_tok__index(t, err);
    if (st != SLM_OK) {
        slm_tok_free(t);
        return st;
    }
    *out = t;
    return SLM_OK;
fail:
    slm_unmap(&m);
    return st;
}

/* Get an optional token id key: default when absent; error when present but
 * not an integer in [0, n). */
static slm_status gguf_tok_id(const slm_gguf *g, const char *name, const char *key, int n,
                              int def, int *id, slm_err *err) {
    *id = def;
    if (slm_gguf_find(g, key) < 0) return SLM_OK;
    int64_t v;
    if (!slm_gguf_get_i64(g, key, &v) || v < 0 || v >= n)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: not a token id below %d", name, key, n);
    *id = (int)v;
    return SLM_OK;
}

slm_status slm_tok_load_gguf(slm_tokenizer **out, const slm_gguf *g, const char *name,
                             slm_err *err) {
    *out = NULL;
    if (!name) name = "gguf";
    if (!g) return slm_errf(err, SLM_ERR_ARG, "%s: no GGUF handle", name);
    slm_gguf_str model;
    if (!slm_gguf_get_str(g, "tokenizer.ggml.model", &model))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.model: missing or not a string",
                        name);
    if (slm_gguf_str_eq(model, "gpt2") || slm_gguf_str_eq(model, "gemma4")) { /* gemma4: SentencePiece-style BPE */
        slm_bpe *b = NULL;
        slm_status st = slm_bpe_load_gguf(&b, g, name, err);
        if (st) return st;
        return slm_tok_from_bpe(out, b, err);
    }
    if (slm_gguf_str_eq(model, "bert")) { /* WordPiece */
        slm_wpm *w = NULL;
        slm_status st = slm_wpm_load_gguf(&w, g, name, err);
        if (st) return st;
        return slm_tok__from_wpm(out, w, err);
    }
    if (slm_gguf_str_eq(model, "t5")) { /* SentencePiece Unigram */
        slm_ugm *u = NULL;
        slm_status st = slm_ugm_load_gguf(&u, g, name, err);
        if (st) return st;
        return slm_tok__from_ugm(out, u, err);
    }
    if (!slm_gguf_str_eq(model, "llama")) {
        int n = model.len > 64 ? 64 : (int)model.len;
        return slm_errf(err, SLM_ERR_UNSUPPORTED,
                        "%s: tokenizer.ggml.model '%.*s' is not supported (supported: 'llama' "
                        "(SentencePiece BPE), 'gpt2' (byte-level BPE), 'gemma4' (SentencePiece-style BPE), "
                        "'bert' (WordPiece), 't5' (Unigram))",
                        name, n, model.s);
    }
    slm_gguf_type et;
    uint64_t n_tok;
    const void *unused;
    if (!slm_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n_tok, &unused) ||
        et != SLM_GGUF_STRING)
        return slm_errf(err, SLM_ERR_FORMAT,
                        "%s: tokenizer.ggml.tokens: missing or not a string array", name);
    if (n_tok < 1 || n_tok > TOK_MAX_VOCAB)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.tokens: %llu tokens out of range",
                        name, (unsigned long long)n_tok);
    int n = (int)n_tok;

    const void *scores = NULL, *types = NULL;
    uint64_t cnt;
    if (slm_gguf_find(g, "tokenizer.ggml.scores") >= 0) {
        if (!slm_gguf_get_arr(g, "tokenizer.ggml.scores", &et, &cnt, &scores) ||
            et != SLM_GGUF_F32 || cnt != n_tok)
            return slm_errf(err, SLM_ERR_FORMAT,
                            "%s: tokenizer.ggml.scores: not an f32 array of %d", name, n);
    }
    if (slm_gguf_find(g, "tokenizer.ggml.token_type") >= 0) {
        if (!slm_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &cnt, &types) ||
            et != SLM_GGUF_I32 || cnt != n_tok)
            return slm_errf(err, SLM_ERR_FORMAT,
                            "%s: tokenizer.ggml.token_type: not an i32 array of %d", name, n);
    }
    int bos, eos, unk;
    slm_status st;
    if ((st = gguf_tok_id(g, name, "tokenizer.ggml.bos_token_id", n, 1, &bos, err)) != SLM_OK ||
        (st = gguf_tok_id(g, name, "tokenizer.ggml.eos_token_id", n, 2, &eos, err)) != SLM_OK ||
        (st = gguf_tok_id(g, name, "tokenizer.ggml.unknown_token_id", n, 0, &unk, err)) != SLM_OK)
        return st;
    if (bos >= n || eos >= n || unk >= n) /* the defaults, for a tiny vocabulary */
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer: %d tokens, too few for bos/eos/unk",
                        name, n);
    int add_space = 1;
    if (slm_gguf_find(g, "tokenizer.ggml.add_space_prefix") >= 0 &&
        !slm_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &add_space))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.add_space_prefix: not a bool",
                        name);

    /* size the blob ("\xe2\x96\x81" -> ' ' only shrinks) */
    uint64_t blob_size = 0;
    for (int i = 0; i < n; i++) {
        slm_gguf_str s;
        if (!slm_gguf_arr_str(g, "tokenizer.ggml.tokens", (uint64_t)i, &s))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.tokens[%d]: unreadable", name,
                            i);
        if (s.len > TOK_MAX_LEN)
            return slm_errf(err, SLM_ERR_FORMAT,
                            "%s: tokenizer.ggml.tokens[%d]: length %llu out of range", name, i,
                            (unsigned long long)s.len);
        blob_size += s.len + 1;
    }
    if (blob_size > UINT32_MAX)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.tokens: too large", name);

    slm_tokenizer *t = slm_tok__alloc(n, blob_size);
    if (!t) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory for the tokenizer", name);
    t->mode = TOK_SPM;
    t->bos = bos;
    t->eos = eos;
    t->unk = unk;
    t->add_space_prefix = add_space;
    uint32_t o = 0;
    for (int i = 0; i < n; i++) {
        slm_gguf_str s;
        slm_gguf_arr_str(g, "tokenizer.ggml.tokens", (uint64_t)i, &s);
        t->off[i] = o;
        for (uint64_t k = 0; k < s.len; k++) {
            if (k + 2 < s.len && (uint8_t)s.s[k] == 0xE2 && (uint8_t)s.s[k + 1] == 0x96 &&
                (uint8_t)s.s[k + 2] == 0x81) {
                t->blob[o++] = ' ';
                k += 2;
            } else {
                t->blob[o++] = s.s[k];
            }
        }
        t->len[i] = o - t->off[i];
        t->blob[o++] = 0;
        if (scores) memcpy(&t->score[i], (const uint8_t *)scores + 4 * (size_t)i, 4);
        int32_t ty = TT_NORMAL;
        if (types) memcpy(&ty, (const uint8_t *)types + 4 * (size_t)i, 4);
        if (ty < 0 || ty > TT_BYTE) {
            slm_tok_free(t);
            return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.token_type[%d]: %d invalid",
                            name, i, (int)ty);
        }
        t->type[i] = (uint8_t)ty;
    }
    st = slm_tok__index(t, err);
    if (st != SLM_OK) {
        slm_tok_free(t);
        return st;
    }
    *out = t;
    return SLM_OK;
}

/* ---- accessors -------------------------------------------------------- */

int slm_tok_vocab_size(const slm_tokenizer *t) { return t ? t->n_vocab : 0; }
int slm_tok_bos(const slm_tokenizer *t) { return t ? t->bos : -1; }
int slm_tok_eos(const slm_tokenizer *t) { return t ? t->eos : -1; }
int slm_tok_eot(const slm_tokenizer *t) { return t && t->bpe ? t->eot : -1; }
int slm_tok_is_bpe(const slm_tokenizer *t) { return t && t->bpe; }

int slm_tok_fits_vocab(const slm_tokenizer *t, int vocab_size) {
    const int n = slm_tok_vocab_size(t);
    return n == vocab_size || (slm_tok_is_bpe(t) && n < vocab_size);
}
int slm_tok_is_wpm(const slm_tokenizer *t) { return t && t->wpm; }
int slm_tok_is_ugm(const slm_tokenizer *t) { return t && t->ugm; }
int slm_tok_sep(const slm_tokenizer *t) { return t && t->wpm ? slm_wpm_sep(t->wpm) : -1; }

int slm_tok_runc(const slm_tokenizer *t) { return t && !t->bpe && t->mode == TOK_RUNC; }

const char *slm_tok_str(const slm_tokenizer *t, int id) {
    if (!t || id < 0 || id >= t->n_vocab) return NULL;
    if (t->bpe) return t->pieces + t->piece_off[id];
    if (t->wpm) return slm_wpm_str(t->wpm, id);
    if (t->ugm) return slm_ugm_str(t->ugm, id);
    return slm_tok__s(t, id);
}

float slm_tok_score(const slm_tokenizer *t, int id) {
    if (!t || t->bpe || t->wpm || id < 0 || id >= t->n_vocab) return 0.0f;
    if (t->ugm) return slm_ugm_score(t->ugm, id);
    return t->score[id];
}

int slm_tok_type(const slm_tokenizer *t, int id) {
    if (!t || id < 0 || id >= t->n_vocab) return 0;
    if (t->bpe) return slm_bpe_token_type(t->bpe, id);
    if (t->wpm) return slm_wpm_type(t->wpm, id);
    if (t->ugm) return slm_ugm_type(t->ugm, id);
    return t->type[id];
}

/* Wrap a byte-level BPE tokenizer: decoded pieces as C strings (a piece
 * with a NUL byte is cut there), which leading spaces are dummy prefixes. */
slm_status slm_tok_from_bpe(slm_tokenizer **out, slm_bpe *b, slm_err *err) {
    *out = NULL;
    const int n = slm_bpe_vocab_size(b);
    slm_tokenizer *t = slm_calloc(1, sizeof *t);
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        size_t len;
        slm_bpe_piece(b, i, &len);
        total += len + 1;
    }
    if (t) {
        t->pieces = total <= UINT32_MAX ? slm_malloc((size_t)total + 1) : NULL;
        t->piece_off = slm_calloc((size_t)n + 1, sizeof *t->piece_off);
        t->lead_space = slm_calloc((size_t)n + 1, 1);
    }
    if (!t || !t->pieces || !t->piece_off || !t->lead_space) {
        slm_tok_free(t);
        slm_bpe_free(b);
        return slm_errf(err, SLM_ERR_NOMEM, "tokenizer: out of memory");
    }
    t->bpe = b;
    t->mode = TOK_BPE;
    t->max_input = slm_bpe_max_input(b);
    t->n_vocab = n;
    t->bos = slm_bpe_bos(b);
    t->eos = slm_bpe_eos(b);
    t->eot = slm_bpe_eot(b);
    t->unk = slm_bpe_unk(b);
    uint32_t o = 0;
    for (int i = 0; i < n; i++) {
        size_t len;
        const char *p = slm_bpe_piece(b, i, &len);
        size_t cut = strnlen(p, len);
        t->piece_off[i] = o;
        memcpy(t->pieces + o, p, cut);
        t->pieces[o + cut] = 0;
        o += (uint32_t)cut + 1;
        if (cut > 0 && p[0] == ' ') {
            char one[8];
            int32_t id = i;
            size_t dl = slm_bpe_decode(b, &id, 1, 0, one, sizeof one);
            t->lead_space[i] = dl + 1 == len;
        }
    }
    *out = t;
    return SLM_OK;
}

slm_status slm_tok__from_wpm(slm_tokenizer **out, slm_wpm *w, slm_err *err) {
    *out = NULL;
    slm_tokenizer *t = slm_calloc(1, sizeof *t);
    if (!t) {
        slm_wpm_free(w);
        return slm_errf(err, SLM_ERR_NOMEM, "tokenizer: out of memory");
    }
    t->wpm = w;
    t->mode = TOK_WPM;
    t->max_input = SLM_TOK_DEFAULT_MAX_INPUT;
    t->n_vocab = slm_wpm_vocab_size(w);
    t->bos = slm_wpm_cls(w);
    t->eos = slm_wpm_eos(w);
    t->unk = slm_wpm_unk(w);
    t->eot = -1;
    *out = t;
    return SLM_OK;
}

slm_status slm_tok__from_ugm(slm_tokenizer **out, slm_ugm *u, slm_err *err) {
    *out = NULL;
    slm_tokenizer *t = slm_calloc(1, sizeof *t);
    if (!t) {
        slm_ugm_free(u);
        return slm_errf(err, SLM_ERR_NOMEM, "tokenizer: out of memory");
    }
    const slm_ugm_meta *m = slm_ugm_get_meta(u);
    t->ugm = u;
    t->mode = TOK_UGM;
    t->max_input = SLM_TOK_DEFAULT_MAX_INPUT;
    t->n_vocab = slm_ugm_vocab_size(u);
    t->bos = m->bos;
    t->eos = m->eos;
    t->unk = m->unk;
    t->add_space_prefix = m->add_space_prefix;
    t->eot = -1;
    *out = t;
    return SLM_OK;
}

slm_status slm_tok_load_hf_json(slm_tokenizer **out, const char *path, slm_err *err) {
    *out = NULL;
    slm_bpe *b = NULL;
    slm_status st = slm_bpe_load_hf_json(&b, path, err);
    if (st) return st;
    return slm_tok_from_bpe(out, b, err);
}

slm_status slm_tok_load_hf_wpm(slm_tokenizer **out, const char *path, int n_vocab, slm_err *err) {
    *out = NULL;
    slm_wpm *w = NULL;
    slm_status st = slm_wpm_load_hf(&w, path, n_vocab, err);
    if (st) return st;
    return slm_tok__from_wpm(out, w, err);
}

slm_status slm_tok_load_hf_encoder(slm_tokenizer **out, const char *path, int n_vocab, int unigram, slm_err *err) {
    *out = NULL;
    const char *base = slm_basename(path);
    if (strcmp(base, "vocab.txt")) {
        slm_ugm *u = NULL;
        slm_ugm_hf info;
        slm_status st = slm_ugm_load_hf(&u, path, n_vocab, &info, err);
        if (st == SLM_OK) {
            if ((st = slm_tok__from_ugm(out, u, err))) return st;
            (*out)->hf_pair = 1 + info.add_sep;
            return SLM_OK;
        }
        if (info.bpe && !unigram) return slm_tok_load_hf_json(out, path, err); /* ModernBERT: byte-level BPE */
        if (!info.wordpiece) return st;
    }
    if (unigram)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: an XLM-RoBERTa folder's tokenizer must be Unigram (tokenizer.json's "
                        "model.type), not WordPiece", base);
    return slm_tok_load_hf_wpm(out, path, n_vocab, err);
}

int slm_tok_hf_pair(const slm_tokenizer *t, int *add_bos, int *add_eos, int *add_sep, int *sep) {
    if (!t || !t->ugm || !t->hf_pair) return 0;
    const slm_ugm_meta *m = slm_ugm_get_meta(t->ugm);
    *add_bos = m->add_bos;
    *add_eos = m->add_eos;
    *add_sep = t->hf_pair - 1;
    *sep = m->sep;
    return 1;
}

const char *slm_tok_decode(const slm_tokenizer *t, int prev, int id) {
    if (!t || id < 0 || id >= t->n_vocab) return "";
    if (t->bpe) {
        const char *p = t->pieces + t->piece_off[id];
        if ((prev < 0 || prev == t->bos) && t->lead_space[id]) p++;
        return p;
    }
    if (t->wpm) return slm_wpm_piece(t->wpm, id); /* llama.cpp keeps a word's leading space */
    if (t->ugm) { /* llama.cpp's detokenize drops the dummy prefix's space of a first piece only */
        const char *p = slm_ugm_piece(t->ugm, id, NULL);
        return prev < 0 && t->add_space_prefix && p[0] == ' ' ? p + 1 : p;
    }
    const char *piece = slm_tok__s(t, id);
    /* after BOS, sentencepiece's decoder strips the dummy prefix's space */
    if (prev == t->bos && t->add_space_prefix && piece[0] == ' ') piece++;
    if (t->byte_val[id] >= 0) piece = t->byte_piece[t->byte_val[id]];
    return piece;
}

/* ---- encoder ---------------------------------------------------------- */

typedef struct tok_sym {
    const char *s;  /* spelling: a token string (or input bytes when id < 0) */
    uint32_t n;     /* length of s, bytes; 0 once merged into its left neighbour */
    int32_t id;     /* token id; -1: not a token (TOK_SPM), emitted as bytes */
    int32_t prev;   /* index of the previous live symbol, -1 at the start */
    int32_t next;   /* index of the next live symbol, -1 at the end */
    uint32_t ver;   /* bumped whenever the symbol changes */
} tok_sym;

typedef struct tok_pair {
    float score;    /* score of the merged token */
    int32_t left;   /* index of the left symbol (its position) */
    int32_t right;  /* index of the right symbol */
    int32_t id;     /* merged token id */
    uint32_t lver;  /* versions of left/right when the pair was queued */
    uint32_t rver;
} tok_pair;

/* Per-call scratch, carved out of one allocation. */
typedef struct tok_work {
    tok_sym *sym;   /* symbols of the current fragment */
    int n_sym;
    tok_pair *heap; /* candidate pairs, binary max-heap */
    int n_heap;
    char *cat;      /* 2 * max_len bytes for concatenations */
    char *text;     /* TOK_SPM: the fragment being tokenized, n + 8 bytes */
    int32_t *ids;   /* output array (caller's) */
    int cap;        /* its capacity */
    int count;      /* ids produced so far (may exceed cap) */
} tok_work;

static void emit(tok_work *w, int32_t id) {
    if (w->count < w->cap) w->ids[w->count] = id;
    w->count++;
}

/* a ranks before b: higher score, then further left */
static int pair_before(const tok_pair *a, const tok_pair *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(tok_work *w, tok_pair p) {
    int i = w->n_heap++;
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (!pair_before(&p, &w->heap[parent])) break;
        w->heap[i] = w->heap[parent];
        i = parent;
    }
    w->heap[i] = p;
}

static tok_pair heap_pop(tok_work *w) {
    tok_pair top = w->heap[0];
    tok_pair last = w->heap[--w->n_heap];
    int n = w->n_heap, i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && pair_before(&w->heap[c + 1], &w->heap[c])) c++;
        if (!pair_before(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n > 0) w->heap[i] = last;
    return top;
}

/* Queue the pair (l, r) if their concatenation is a token that may merge. */
static void try_pair(const slm_tokenizer *t, tok_work *w, int l, int r) {
    if (l < 0 || r < 0) return;
    const tok_sym *a = &w->sym[l], *b = &w->sym[r];
    uint64_t n = (uint64_t)a->n + b->n;
    if (n > t->max_len) return;
    memcpy(w->cat, a->s, a->n);
    memcpy(w->cat + a->n, b->s, b->n);
    int id = tok_lookup(t, w->cat, (size_t)n);
    if (id < 0) return;
    float sc = t->score[id];
    if (isnan(sc)) return;                             /* never wins a > comparison */
    if (t->mode == TOK_RUNC && !(sc > -1e10f)) return; /* run.c's best_score floor */
    tok_pair p = {sc, l, r, id, a->ver, b->ver};
    heap_push(w, p);
}

/* Append a symbol to the fragment's list. */
static void add_sym(tok_work *w, const char *s, uint32_t n, int32_t id) {
    int i = w->n_sym++;
    w->sym[i] = (tok_sym){s, n, id, i - 1, -1, 0};
    if (i > 0) w->sym[i - 1].next = i;
}

/* Merge to a fixed point, then emit the fragment's ids. */
static void merge_and_emit(const slm_tokenizer *t, tok_work *w) {
    w->n_heap = 0;
    for (int i = 1; i < w->n_sym; i++) try_pair(t, w, i - 1, i);
    while (w->n_heap > 0) {
        tok_pair p = heap_pop(w);
        tok_sym *a = &w->sym[p.left], *b = &w->sym[p.right];
        if (a->n == 0 || b->n == 0 || a->ver != p.lver || b->ver != p.rver || a->next != p.right)
            continue; /* stale */
        a->id = p.id;
        a->s = slm_tok__s(t, p.id);
        a->n = t->len[p.id];
        a->ver++;
        a->next = b->next;
        if (b->next >= 0) w->sym[b->next].prev = p.left;
        b->n = 0;
        b->ver++;
        try_pair(t, w, a->prev, p.left);
        try_pair(t, w, p.left, a->next);
    }
    for (int i = w->n_sym > 0 ? 0 : -1; i >= 0; i = w->sym[i].next) {
        const tok_sym *s = &w->sym[i];
        if (s->id >= 0) {
            emit(w, s->id);
        } else {
            for (uint32_t k = 0; k < s->n; k++) emit(w, t->byte_id[(uint8_t)s->s[k]]);
        }
    }
    w->n_sym = 0;
}

/* run.c's encode() on NUL-terminated text. */
static void encode_runc(const slm_tokenizer *t, tok_work *w, const char *text, int add_bos) {
    if (add_bos) add_sym(w, slm_tok__s(t, t->bos), t->len[t->bos], t->bos);
    if (text[0] != '\0' && t->add_space_prefix) {
        if (t->space_id >= 0) {
            add_sym(w, slm_tok__s(t, t->space_id), t->len[t->space_id], t->space_id);
        } else {
            int id = t->byte_id[' '];
            add_sym(w, slm_tok__s(t, id), t->len[id], id);
        }
    }
    const char *c = text;
    while (*c) {
        /* a lead (or stray) byte plus up to 3 continuation bytes */
        size_t n = 1;
        while (n < 4 && ((uint8_t)c[n] & 0xC0) == 0x80) n++;
        int id = tok_lookup(t, c, n);
        if (id >= 0) {
            add_sym(w, slm_tok__s(t, id), t->len[id], id);
        } else {
            for (size_t k = 0; k < n; k++) {
                int b = t->byte_id[(uint8_t)c[k]];
                add_sym(w, slm_tok__s(t, b), t->len[b], b);
            }
        }
        c += n;
    }
    merge_and_emit(t, w);
}

/* llama.cpp's llm_tokenizer_spm_session::tokenize on one raw fragment
 * (already prefixed and with U+2581 turned into spaces). */
static void encode_spm_fragment(const slm_tokenizer *t, tok_work *w, const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t b = (uint8_t)s[i];
        size_t len = b < 0xC0 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
        if (len > n - i) len = n - i;
        add_sym(w, s + i, (uint32_t)len, tok_lookup(t, s + i, len));
        i += len;
    }
    merge_and_emit(t, w);
}

/* The user-defined token starting at s (longest), or -1. */
static int match_special(const slm_tokenizer *t, const char *s, size_t n) {
    if (!t->special_first[(uint8_t)s[0]]) return -1;
    for (int k = 0; k < t->n_special; k++) {
        int id = t->special[k];
        if (t->len[id] <= n && memcmp(slm_tok__s(t, id), s, t->len[id]) == 0) return id;
    }
    return -1;
}

static void encode_spm(const slm_tokenizer *t, tok_work *w, const char *text, size_t n) {
    int prev_special = 1; /* the start counts as "after a special token" */
    size_t i = 0;
    while (i < n) {
        /* find the raw fragment [i, j) and the special token ending it */
        size_t j = i;
        int sp = -1;
        while (j < n && (t->n_special == 0 || (sp = match_special(t, text + j, n - j)) < 0)) j++;
        if (j > i) {
            size_t m = 0;
            if (t->add_space_prefix && prev_special) w->text[m++] = ' ';
            for (size_t k = i; k < j; k++) {
                if (k + 2 < j && (uint8_t)text[k] == 0xE2 && (uint8_t)text[k + 1] == 0x96 &&
                    (uint8_t)text[k + 2] == 0x81) {
                    w->text[m++] = ' ';
                    k += 2;
                } else {
                    w->text[m++] = text[k];
                }
            }
            encode_spm_fragment(t, w, w->text, m);
            prev_special = 0;
        }
        if (sp >= 0) {
            emit(w, sp);
            prev_special = 1;
            j += t->len[sp];
        }
        i = j;
    }
}

void slm_tok_set_max_input(slm_tokenizer *t, size_t bytes) {
    if (!t) return;
    if (bytes > (size_t)(INT32_MAX / 8)) bytes = (size_t)(INT32_MAX / 8); /* ids are counted in an int */
    t->max_input = bytes ? bytes : SLM_TOK_DEFAULT_MAX_INPUT;
    if (t->bpe) slm_bpe_set_max_input(t->bpe, t->max_input);
}

size_t slm_tok_max_input(const slm_tokenizer *t) { return t ? t->max_input : 0; }

int slm_tok_encode_masked(const slm_tokenizer *t, const char *text, const uint8_t *plain, int add_bos, int add_eos,
                          int32_t *ids, int cap) {
    if (!t) return SLM_TOK_ENOMEM;
    if ((!t->bpe && !t->wpm && !t->ugm) || !plain) return slm_tok_encode(t, text, add_bos, add_eos, ids, cap);
    if (!text) text = "";
    size_t n = strnlen(text, t->max_input + 1);
    if (n > t->max_input || n > (size_t)(INT32_MAX / 8)) return SLM_TOK_ETOOLONG;
    if (t->wpm) return slm_wpm_encode(t->wpm, text, n, plain, add_bos, add_eos, 1, ids, cap);
    if (t->ugm) return slm_ugm_encode(t->ugm, text, n, plain, add_bos, add_eos, 1, ids, cap);
    return slm_bpe_encode_masked(t->bpe, text, n, plain, add_bos, add_eos, ids, cap);
}

int slm_tok_encode(const slm_tokenizer *t, const char *text, int add_bos, int add_eos,
                   int32_t *ids, int cap) {
    if (!t) return SLM_TOK_ENOMEM;
    if (!text) text = "";
    /* the length up to the limit only: a longer text is refused unread */
    size_t n = strnlen(text, t->max_input + 1);
    if (n > t->max_input || n > (size_t)(INT32_MAX / 8)) return SLM_TOK_ETOOLONG; /* ids are counted in an int */
    if (t->bpe) /* special-token text matches its token, as llama.cpp's prompts do */
        return slm_bpe_encode(t->bpe, text, n, add_bos, add_eos, 1, ids, cap);
    if (t->wpm) /* add_bos: [CLS], add_eos: [SEP]; special-token text matches as for BPE */
        return slm_wpm_encode(t->wpm, text, n, NULL, add_bos, add_eos, 1, ids, cap);
    if (t->ugm) /* BOS / EOS where the vocabulary's add_bos / add_eos ask; special-token text matches */
        return slm_ugm_encode(t->ugm, text, n, NULL, add_bos, add_eos, 1, ids, cap);
    if (!ids || cap < 0) cap = 0;

    /* one scratch block: symbols, heap (<= 3 pushes per symbol), the
     * concatenation buffer, and (TOK_SPM) a copy of one fragment */
    size_t max_sym = n + 2;
    size_t sz_sym = max_sym * sizeof(tok_sym);
    size_t sz_heap = 3 * max_sym * sizeof(tok_pair);
    size_t sz_cat = 2 * (size_t)t->max_len + 8;
    size_t sz_text = n + 8;
    uint64_t total = (uint64_t)max_sym * (sizeof(tok_sym) + 3 * sizeof(tok_pair)) + sz_cat + sz_text;
    if (total > SIZE_MAX) return SLM_TOK_ENOMEM; /* 32-bit hosts */
    char *mem = slm_malloc((size_t)total);
    if (!mem) return SLM_TOK_ENOMEM;
    tok_work w = {0};
    w.sym = (tok_sym *)mem;
    w.heap = (tok_pair *)(mem + sz_sym);
    w.cat = mem + sz_sym + sz_heap;
    w.text = w.cat + sz_cat;
    w.ids = ids;
    w.cap = cap;

    if (t->mode == TOK_RUNC) {
        encode_runc(t, &w, text, add_bos);
    } else {
        if (add_bos) emit(&w, t->bos);
        encode_spm(t, &w, text, n);
    }
    if (add_eos) emit(&w, t->eos);
    slm_xfree(mem);
    return w.count;
}
