/* Byte-level BPE vocabularies from GGUF metadata (tokenizer.ggml.model =
 * "gpt2"): tokens, token types, merges, the named pre-tokenizer and the
 * special ids.
 *
 * Facts taken from llama.cpp (src/llama-vocab.cpp; MIT): merges "a b" split
 * at the first space after index 0 with rank = index (the first of
 * duplicates wins), the default BOS/EOS (11), which pre types add BOS.
 */
#include <stdio.h>
#include <stdlib.h>

#include "text/bpe_internal.h"

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

/* tokenizer.ggml.token_type, if present (an unknown type is UNDEFINED) */
static slm_status gguf_types(slm_bpe *t, const slm_gguf *g, const char *name, slm_err *err) {
    for (int i = 0; i < t->n_vocab; i++) t->type[i] = SLM_BPE_TT_NORMAL;
    if (slm_gguf_find(g, "tokenizer.ggml.token_type") < 0) return SLM_OK;
    slm_gguf_type et;
    uint64_t nt;
    const void *data;
    if (!slm_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &nt, &data) ||
        (et != SLM_GGUF_I32 && et != SLM_GGUF_U32))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.token_type is not an int32 array", name);
    if (nt < (uint64_t)t->n_vocab)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.token_type has %llu entries for %d tokens", name,
                        (unsigned long long)nt, t->n_vocab);
    for (int i = 0; i < t->n_vocab; i++) {
        int32_t v;
        memcpy(&v, (const uint8_t *)data + 4 * (size_t)i, 4);
        t->type[i] = (uint8_t)(v >= 0 && v <= 6 ? v : SLM_BPE_TT_UNDEFINED);
    }
    return SLM_OK;
}

/* tokenizer.ggml.merges ("a b", split at the first space after index 0),
 * once the string -> id table is built */
static slm_status gguf_merges(slm_bpe *t, const slm_gguf *g, uint64_t n_merges, const char *name, slm_err *err) {
    t->n_merges = (int)n_merges;
    t->merge_l = slm_malloc((size_t)(n_merges ? n_merges : 1) * sizeof *t->merge_l);
    t->merge_r = slm_malloc((size_t)(n_merges ? n_merges : 1) * sizeof *t->merge_r);
    if (!t->merge_l || !t->merge_r)
        return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory (%llu merges)", name, (unsigned long long)n_merges);
    for (uint64_t m = 0; m < n_merges; m++) {
        slm_gguf_str s;
        if (!slm_gguf_arr_str(g, "tokenizer.ggml.merges", m, &s))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: merge %llu unreadable", name, (unsigned long long)m);
        const char *sp = s.len > 1 ? memchr(s.s + 1, ' ', (size_t)s.len - 1) : NULL;
        if (!sp)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: merge %llu '%.*s' is not two tokens separated by a space", name,
                            (unsigned long long)m, (int)(s.len > 64 ? 64 : s.len), s.s);
        size_t ll = (size_t)(sp - s.s), rl = (size_t)s.len - ll - 1;
        int l = slm_bpe__lookup(t, s.s, ll), r = slm_bpe__lookup(t, sp + 1, rl);
        if (l < 0 || r < 0)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: merge %llu '%.*s' names a string that is not a token", name,
                            (unsigned long long)m, (int)(s.len > 64 ? 64 : s.len), s.s);
        t->merge_l[m] = l;
        t->merge_r[m] = r;
    }
    return SLM_OK;
}

static slm_status gguf_specials(slm_bpe *t, const slm_gguf *g, const char *name, slm_err *err);

/* gemma4 (tokenizer.ggml.model "gemma4", llama.cpp's LLAMA_VOCAB_PRE_TYPE_GEMMA4):
 * BPE merges over the raw UTF-8 text with spaces as "▁", no prefix, pieces
 * split at runs of newlines, <0xXX> byte fallback; BOS always added (llama.cpp
 * overrides the file's add_bos_token for it). */
static slm_status gemma4_specials(slm_bpe *t, const slm_gguf *g, const char *name, slm_err *err) {
    slm_bpe__set_mode(t, 0, 0, 0, PREPEND_NEVER, 0, "gemma4");
    t->nl_split = 1;
    t->bos = t->eos = -1;
    slm_status st = gguf_specials(t, g, name, err);
    if (!st && t->bos >= 0) t->add_bos = 1;
    return st;
}

/* tokenizer.ggml.pre, the special ids and add_bos / add_eos */
static slm_status gguf_pre_specials(slm_bpe *t, const slm_gguf *g, const char *name, slm_err *err) {
    slm_gguf_str pre = {"default", 7};
    if (slm_gguf_find(g, "tokenizer.ggml.pre") >= 0 && !slm_gguf_get_str(g, "tokenizer.ggml.pre", &pre))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer.ggml.pre is not a string", name);
    const slm_bpe_pre *pd = slm_bpe__find_pre(pre.s, (size_t)pre.len);
    if (!pd)
        return slm_errf(err, SLM_ERR_UNSUPPORTED,
                        "%s: unknown pre-tokenizer tokenizer.ggml.pre = '%.*s' (supported: gpt-2, llama-bpe, qwen2, "
                        "smollm, starcoder, deepseek-coder, deepseek-llm, falcon, default and their aliases)",
                        name, (int)(pre.len > 64 ? 64 : pre.len), pre.s);
    slm_status st;
    if ((st = slm_bpe__set_pre(t, pd, pre.s, (size_t)pre.len, name, err))) return st;
    const int n_vocab = t->n_vocab;
    t->add_bos = pd->add_bos;
    t->bos = pd->no_bos ? -1 : (11 < n_vocab ? 11 : -1);
    t->eos = 11 < n_vocab ? 11 : -1;
    return gguf_specials(t, g, name, err);
}

/* The special ids and add_bos / add_eos from the keys (defaults already set). */
static slm_status gguf_specials(slm_bpe *t, const slm_gguf *g, const char *name, slm_err *err) {
    const int n_vocab = t->n_vocab;
    slm_status st;
    if ((st = get_special(g, "tokenizer.ggml.bos_token_id", n_vocab, &t->bos, 1, name, err)) ||
        (st = get_special(g, "tokenizer.ggml.eos_token_id", n_vocab, &t->eos, 1, name, err)) ||
        (st = get_special(g, "tokenizer.ggml.eot_token_id", n_vocab, &t->eot, 1, name, err)) ||
        (st = get_special(g, "tokenizer.ggml.unknown_token_id", n_vocab, &t->unk, 1, name, err)) ||
        (st = get_special(g, "tokenizer.ggml.padding_token_id", n_vocab, &t->pad, 0, name, err)))
        return st;
    int b;
    if (slm_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b)) t->add_bos = b;
    if (slm_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b)) t->add_eos = b;
    if (t->add_bos && t->bos < 0) t->add_bos = 0;
    if (t->add_eos && t->eos < 0) t->add_eos = 0;
    return SLM_OK;
}

slm_status slm_bpe_load_gguf(slm_bpe **out, const slm_gguf *g, const char *name, slm_err *err) {
    *out = NULL;
    if (!name) name = "gguf";
    slm_gguf_str model;
    if (!slm_gguf_get_str(g, "tokenizer.ggml.model", &model))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: no tokenizer.ggml.model", name);
    const int g4 = slm_gguf_str_eq(model, "gemma4");
    if (!slm_gguf_str_eq(model, "gpt2") && !g4)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: tokenizer.ggml.model '%.*s' is not a byte-level BPE (gpt2) or gemma4's",
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

    slm_bpe *t = slm_bpe__alloc(n_vocab, blob);
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
    }
    slm_status st;
    if ((st = gguf_types(t, g, name, err)) || (st = slm_bpe__index(t, name, err)) ||
        (st = gguf_merges(t, g, n_merges, name, err)) ||
        (st = g4 ? gemma4_specials(t, g, name, err) : gguf_pre_specials(t, g, name, err)) ||
        (st = slm_bpe__finish(t, name, err))) {
        slm_bpe_free(t);
        return st;
    }
    *out = t;
    return SLM_OK;
}
