/* Hugging Face tokenizer.json (model.type "BPE") -> slm_bpe.
 *
 * Supported:
 *  - model: vocab {token: id}, merges as "a b" strings or [a, b] arrays,
 *    unk_token, byte_fallback, ignore_merges;
 *  - added_tokens: special -> CONTROL, others -> USER_DEFINED (split out of
 *    the text before BPE); ids past the model vocabulary extend it;
 *  - pre_tokenizer: ByteLevel (use_regex: the GPT-2 regex; add_prefix_space),
 *    Split (Regex or String pattern, behavior Isolated, not inverted),
 *    Digits, Metaspace (replacement "▁", prepend_scheme, split), Sequence
 *    of those; null;
 *  - normalizer: null, NFC (accepted; the text is assumed to be NFC already,
 *    as llama.cpp assumes), Prepend("▁") and Replace(" " -> "▁") (the Llama 2
 *    SentencePiece-flavoured BPE), Sequence of those;
 *  - BOS/EOS: post_processor TemplateProcessing (a special token before or
 *    after $A) or RobertaProcessing (cls before, sep after), overridden
 *    by tokenizer_config.json beside the file
 *    (bos_token, eos_token, add_bos_token, add_eos_token).
 * Anything else is refused with a message naming it. The parsed document
 * (cJSON, through slm_malloc: common/json.h) lives while loading only.
 */
#include <stdio.h>
#include <stdlib.h>

#include "text/bpe_internal.h"

#ifdef SLM_HAVE_CJSON
#include <cjson/cJSON.h>
#endif

#ifndef SLM_HAVE_CJSON

slm_status slm_bpe_load_hf_json_mem(slm_bpe **out, const char *json, size_t len, const char *config_json,
                                    size_t config_len, const char *name, slm_err *err) {
    (void)json;
    (void)len;
    (void)config_json;
    (void)config_len;
    *out = NULL;
    return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: this build has no JSON support (cJSON not found)",
                    name ? name : "tokenizer.json");
}

#else

#include "common/json.h"

#define GPT2_RE_HF "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define MAX_TOKENS (1 << 24)
#define ID_SLACK 1024 /* unused ids allowed beyond twice the entries */

static const char k_ws[] = "\xe2\x96\x81";

typedef struct jctx {
    slm_bpe *t;
    const char *name;
    slm_err *err;
    int byte_level, spm, prepend, split, add_prefix_space, saw_bl;
} jctx;

static const char *jstr(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int jbool(const cJSON *o, const char *key, int def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v);
    return def;
}

/* a literal string as a PCRE2 pattern */
static slm_status add_literal(jctx *c, const char *s) {
    size_t n = strlen(s);
    char *q = slm_malloc(n * 2 + 1);
    if (!q) return slm_errf(c->err, SLM_ERR_NOMEM, "%s: out of memory", c->name);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (strchr("\\^$.|?*+()[]{}", s[i])) q[k++] = '\\';
        q[k++] = s[i];
    }
    slm_status st = slm_bpe__add_regex(c->t, q, k, c->name, c->err);
    slm_xfree(q);
    return st;
}

static slm_status pre_tok(jctx *c, const cJSON *p) {
    if (!p || cJSON_IsNull(p)) return SLM_OK;
    const char *ty = jstr(p, "type");
    if (!ty) return slm_errf(c->err, SLM_ERR_FORMAT, "%s: pre_tokenizer without a type", c->name);
    if (!strcmp(ty, "Sequence")) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(p, "pretokenizers");
        if (!cJSON_IsArray(a)) return slm_errf(c->err, SLM_ERR_FORMAT, "%s: Sequence without pretokenizers", c->name);
        const cJSON *e;
        cJSON_ArrayForEach(e, a) {
            slm_status st = pre_tok(c, e);
            if (st) return st;
        }
        return SLM_OK;
    }
    if (!strcmp(ty, "ByteLevel")) {
        c->byte_level = 1;
        c->saw_bl = 1;
        if (jbool(p, "add_prefix_space", 0)) c->add_prefix_space = 1;
        if (jbool(p, "use_regex", 1))
            return slm_bpe__add_regex(c->t, GPT2_RE_HF, strlen(GPT2_RE_HF), c->name, c->err);
        return SLM_OK;
    }
    if (!strcmp(ty, "Split")) {
        const char *beh = jstr(p, "behavior");
        if (beh && strcmp(beh, "Isolated"))
            return slm_errf(c->err, SLM_ERR_UNSUPPORTED, "%s: Split behavior '%s' (only Isolated)", c->name, beh);
        if (jbool(p, "invert", 0))
            return slm_errf(c->err, SLM_ERR_UNSUPPORTED, "%s: inverted Split", c->name);
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(p, "pattern");
        const char *re = jstr(pat, "Regex"), *lit = jstr(pat, "String");
        if (re) return slm_bpe__add_regex(c->t, re, strlen(re), c->name, c->err);
        if (lit) return add_literal(c, lit);
        return slm_errf(c->err, SLM_ERR_FORMAT, "%s: Split without a Regex or String pattern", c->name);
    }
    if (!strcmp(ty, "Digits")) {
        const char *re = jbool(p, "individual_digits", 0) ? "\\p{N}" : "\\p{N}+";
        return slm_bpe__add_regex(c->t, re, strlen(re), c->name, c->err);
    }
    if (!strcmp(ty, "Metaspace")) {
        const char *rep = jstr(p, "replacement");
        if (rep && strcmp(rep, k_ws))
            return slm_errf(c->err, SLM_ERR_UNSUPPORTED, "%s: Metaspace replacement '%s' (only U+2581)", c->name, rep);
        c->spm = 1;
        const char *ps = jstr(p, "prepend_scheme");
        if (ps) c->prepend = !strcmp(ps, "always") ? 1 : !strcmp(ps, "first") ? 2 : 0;
        else c->prepend = jbool(p, "add_prefix_space", 1) ? 1 : 0;
        c->split = jbool(p, "split", 1);
        return SLM_OK;
    }
    return slm_errf(c->err, SLM_ERR_UNSUPPORTED, "%s: pre_tokenizer type '%s' is not supported", c->name, ty);
}

static slm_status normalizer(jctx *c, const cJSON *p) {
    if (!p || cJSON_IsNull(p)) return SLM_OK;
    const char *ty = jstr(p, "type");
    if (!ty) return slm_errf(c->err, SLM_ERR_FORMAT, "%s: normalizer without a type", c->name);
    if (!strcmp(ty, "Sequence")) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(p, "normalizers");
        if (!cJSON_IsArray(a)) return slm_errf(c->err, SLM_ERR_FORMAT, "%s: Sequence without normalizers", c->name);
        const cJSON *e;
        cJSON_ArrayForEach(e, a) {
            slm_status st = normalizer(c, e);
            if (st) return st;
        }
        return SLM_OK;
    }
    if (!strcmp(ty, "NFC")) return SLM_OK;
    if (!strcmp(ty, "Prepend")) {
        const char *s = jstr(p, "prepend");
        if (!s || strcmp(s, k_ws))
            return slm_errf(c->err, SLM_ERR_UNSUPPORTED, "%s: Prepend normalizer other than U+2581", c->name);
        c->spm = 1;
        c->prepend = 1;
        return SLM_OK;
    }
    if (!strcmp(ty, "Replace")) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(p, "pattern");
        const char *from = jstr(pat, "String"), *to = jstr(p, "content");
        if (!from || !to || strcmp(from, " ") || strcmp(to, k_ws))
            return slm_errf(c->err, SLM_ERR_UNSUPPORTED, "%s: Replace normalizer other than \" \" -> U+2581", c->name);
        c->spm = 1;
        return SLM_OK;
    }
    return slm_errf(c->err, SLM_ERR_UNSUPPORTED, "%s: normalizer type '%s' is not supported", c->name, ty);
}

/* the content of a tokenizer_config.json token entry: "x" or {"content": "x"} */
static const char *tok_content(const cJSON *v) {
    if (cJSON_IsString(v)) return v->valuestring;
    if (cJSON_IsObject(v)) return jstr(v, "content");
    return NULL;
}

static int find_str(const slm_bpe *t, const char *s) { return s ? slm_bpe__lookup(t, s, strlen(s)) : -1; }

/* TemplateProcessing: the special token before / after $A in "single";
 * RobertaProcessing: its cls and sep. */
static void template_specials(const slm_bpe *t, const cJSON *pp, int *bos, int *add_bos, int *eos, int *add_eos) {
    if (!pp) return;
    const char *ty = jstr(pp, "type");
    if (!ty) return;
    if (!strcmp(ty, "Sequence")) {
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(pp, "processors"))
            template_specials(t, e, bos, add_bos, eos, add_eos);
        return;
    }
    if (!strcmp(ty, "RobertaProcessing")) { /* cls A sep: cls and sep each [token, id] */
        const cJSON *cls = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(pp, "cls"), 0),
                    *sep = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(pp, "sep"), 0);
        const int a = find_str(t, cJSON_IsString(cls) ? cls->valuestring : NULL),
                  z = find_str(t, cJSON_IsString(sep) ? sep->valuestring : NULL);
        if (a >= 0) *bos = a, *add_bos = 1;
        if (z >= 0) *eos = z, *add_eos = 1;
        return;
    }
    if (strcmp(ty, "TemplateProcessing")) return;
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(pp, "single");
    int seen_a = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, single) {
        if (cJSON_GetObjectItemCaseSensitive(e, "Sequence")) {
            seen_a = 1;
            continue;
        }
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(e, "SpecialToken");
        int id = find_str(t, jstr(st, "id"));
        if (id < 0) continue;
        if (!seen_a) { *bos = id; *add_bos = 1; }
        else { *eos = id; *add_eos = 1; }
    }
}

static int n_entries(const cJSON *vocab, const cJSON *added) {
    return cJSON_GetArraySize(vocab) + (cJSON_IsArray(added) ? cJSON_GetArraySize(added) : 0);
}

/* ids must stay below 2 * entries + ID_SLACK (and MAX_TOKENS) */
static double id_bound(const cJSON *vocab, const cJSON *added) {
    double b = 2.0 * n_entries(vocab, added) + ID_SLACK;
    return b < MAX_TOKENS ? b : MAX_TOKENS;
}

/* The tokens: model.vocab {string: id} and added_tokens [{id, content,
 * special}]; the vocabulary size is the largest id + 1 (unnamed ids are
 * empty, unused tokens). Creates c->t. */
static slm_status build_vocab(jctx *c, const cJSON *vocab, const cJSON *added) {
    const char *name = c->name;
    slm_err *err = c->err;
    /* every table is sized by the largest id: an id may leave gaps (unused
     * ids), but not make the vocabulary much larger than its entries */
    const double bound = id_bound(vocab, added);
    double maxid = -1;
    uint64_t blob = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble != (double)(int)e->valuedouble)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: model.vocab entry '%.64s' has a bad id", name, e->string);
        if (e->valuedouble >= bound)
            return slm_errf(err, SLM_ERR_FORMAT,
                            "%s: model.vocab entry '%.64s' has id %.0f, beyond %.0f (the bound for a vocabulary "
                            "of %d entries)", name, e->string, e->valuedouble, bound - 1, n_entries(vocab, added));
        if (e->valuedouble > maxid) maxid = e->valuedouble;
        blob += strlen(e->string) + 1;
    }
    int k = 0;
    cJSON_ArrayForEach(e, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        const char *ct = jstr(e, "content");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble != (double)(int)id->valuedouble || !ct)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: added_tokens[%d] without a valid id and content", name, k);
        if (id->valuedouble >= bound)
            return slm_errf(err, SLM_ERR_FORMAT,
                            "%s: added_tokens[%d] ('%.64s') has id %.0f, beyond %.0f (the bound for a vocabulary "
                            "of %d entries)", name, k, ct, id->valuedouble, bound - 1, n_entries(vocab, added));
        if (id->valuedouble > maxid) maxid = id->valuedouble;
        blob += strlen(ct) + 1;
        k++;
    }
    if (maxid < 0) return slm_errf(err, SLM_ERR_FORMAT, "%s: empty vocabulary", name);
    int n = (int)maxid + 1;
    slm_bpe *t = slm_bpe__alloc(n, blob + 1);
    if (!t) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory (%d tokens)", name, n);
    c->t = t;
    char *bl = slm_bpe__blob(t);
    uint8_t *seen = slm_calloc((size_t)n, 1);
    if (!seen) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", name);
    uint32_t o = 0;
    bl[o] = 0; /* shared "" for ids no entry names */
    uint32_t empty = o++;
    for (int i = 0; i < n; i++) slm_bpe__set_token(t, i, empty, 0, SLM_BPE_TT_UNUSED);
    slm_status st = SLM_OK;
    cJSON_ArrayForEach(e, vocab) {
        int id = (int)e->valuedouble;
        size_t l = strlen(e->string);
        if (seen[id]) {
            st = slm_errf(err, SLM_ERR_FORMAT, "%s: id %d appears twice in the vocabulary", name, id);
            goto done;
        }
        seen[id] = 1;
        memcpy(bl + o, e->string, l + 1);
        slm_bpe__set_token(t, id, o, (uint32_t)l, SLM_BPE_TT_NORMAL);
        o += (uint32_t)l + 1;
    }
    cJSON_ArrayForEach(e, added) {
        int id = (int)cJSON_GetObjectItemCaseSensitive(e, "id")->valuedouble;
        const char *ct = jstr(e, "content");
        size_t l = strlen(ct);
        memcpy(bl + o, ct, l + 1);
        slm_bpe__set_token(t, id, o, (uint32_t)l,
                           jbool(e, "special", 0) ? SLM_BPE_TT_CONTROL : SLM_BPE_TT_USER_DEFINED);
        o += (uint32_t)l + 1;
    }
    st = slm_bpe__index(t, name, err);
done:
    slm_xfree(seen);
    return st;
}

/* model.merges: "a b" strings or [a, b] arrays, each naming two tokens. */
static slm_status build_merges(jctx *c, const cJSON *merges) {
    const char *name = c->name;
    slm_bpe *t = c->t;
    int nm = cJSON_GetArraySize(merges);
    int32_t *ml = slm_malloc((size_t)(nm ? nm : 1) * sizeof *ml);
    int32_t *mr = slm_malloc((size_t)(nm ? nm : 1) * sizeof *mr);
    if (!ml || !mr) {
        slm_xfree(ml);
        slm_xfree(mr);
        return slm_errf(c->err, SLM_ERR_NOMEM, "%s: out of memory", name);
    }
    slm_bpe__set_merges(t, ml, mr, nm);
    int m = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, merges) {
        const char *a = NULL, *b = NULL;
        size_t al = 0, blen = 0;
        if (cJSON_IsString(e)) {
            const char *s = e->valuestring;
            size_t sl = strlen(s);
            const char *sp = sl > 1 ? memchr(s + 1, ' ', sl - 1) : NULL;
            if (sp) {
                a = s;
                al = (size_t)(sp - s);
                b = sp + 1;
                blen = sl - al - 1;
            }
        } else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(cJSON_GetArrayItem(e, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(e, 1))) {
            a = cJSON_GetArrayItem(e, 0)->valuestring;
            b = cJSON_GetArrayItem(e, 1)->valuestring;
            al = strlen(a);
            blen = strlen(b);
        }
        if (!a) return slm_errf(c->err, SLM_ERR_FORMAT, "%s: merge %d is neither \"a b\" nor [a, b]", name, m);
        ml[m] = slm_bpe__lookup(t, a, al);
        mr[m] = slm_bpe__lookup(t, b, blen);
        if (ml[m] < 0 || mr[m] < 0)
            return slm_errf(c->err, SLM_ERR_FORMAT, "%s: merge %d ('%.*s' '%.*s') names a string that is not a token",
                            name, m, (int)(al > 48 ? 48 : al), a, (int)(blen > 48 ? 48 : blen), b);
        m++;
    }
    return SLM_OK;
}

/* normalizer, pre_tokenizer, byte_fallback, decoder -> the mode */
static slm_status build_mode(jctx *c, const cJSON *root, const cJSON *model) {
    const char *name = c->name;
    slm_status st;
    if ((st = normalizer(c, cJSON_GetObjectItemCaseSensitive(root, "normalizer")))) return st;
    if ((st = pre_tok(c, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer")))) return st;
    int byte_fallback = jbool(model, "byte_fallback", 0);
    if (byte_fallback) c->spm = 1;
    if (!c->saw_bl) {
        const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decoder");
        const char *dt = jstr(dec, "type");
        if (dt && !strcmp(dt, "ByteLevel")) c->byte_level = 1;
    }
    if (c->spm && c->byte_level)
        return slm_errf(c->err, SLM_ERR_UNSUPPORTED, "%s: ByteLevel combined with SentencePiece-style settings", name);
    if (!c->spm && !c->byte_level)
        return slm_errf(c->err, SLM_ERR_UNSUPPORTED,
                        "%s: neither ByteLevel nor SentencePiece-style (Metaspace / \"▁\" normalizer / byte_fallback)",
                        name);
    slm_bpe__set_mode(c->t, c->byte_level, jbool(model, "ignore_merges", 0), c->add_prefix_space,
                      c->spm ? c->prepend : 0, c->spm ? c->split : 0, c->spm ? "hf-spm" : "hf-json");
    return SLM_OK;
}

/* BOS / EOS / UNK / PAD: post_processor, then tokenizer_config.json */
static void build_specials(jctx *c, const cJSON *root, const cJSON *model, const cJSON *cfg) {
    slm_bpe *t = c->t;
    int bos = -1, eos = -1, add_bos = 0, add_eos = 0;
    int unk = find_str(t, jstr(model, "unk_token"));
    template_specials(t, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), &bos, &add_bos, &eos, &add_eos);
    int pad = -1;
    if (cfg) {
        int id;
        if ((id = find_str(t, tok_content(cJSON_GetObjectItemCaseSensitive(cfg, "bos_token")))) >= 0) bos = id;
        if ((id = find_str(t, tok_content(cJSON_GetObjectItemCaseSensitive(cfg, "eos_token")))) >= 0) eos = id;
        if ((id = find_str(t, tok_content(cJSON_GetObjectItemCaseSensitive(cfg, "unk_token")))) >= 0) unk = id;
        if ((id = find_str(t, tok_content(cJSON_GetObjectItemCaseSensitive(cfg, "pad_token")))) >= 0) pad = id;
        add_bos = jbool(cfg, "add_bos_token", add_bos);
        add_eos = jbool(cfg, "add_eos_token", add_eos);
    }
    if (bos < 0) add_bos = 0;
    if (eos < 0) add_eos = 0;
    slm_bpe__set_specials(t, bos, eos, -1, unk, pad, add_bos, add_eos);
}

static slm_status build(jctx *c, const cJSON *root, const cJSON *cfg) {
    const char *name = c->name;
    slm_err *err = c->err;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model)) return slm_errf(err, SLM_ERR_FORMAT, "%s: no \"model\" object", name);
    const char *mty = jstr(model, "type");
    if (mty && strcmp(mty, "BPE"))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: model type '%s' (only BPE)", name, mty);
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!cJSON_IsObject(vocab)) return slm_errf(err, SLM_ERR_FORMAT, "%s: model.vocab missing or not an object", name);
    if (!cJSON_IsArray(merges)) return slm_errf(err, SLM_ERR_FORMAT, "%s: model.merges missing or not an array", name);
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (added && !cJSON_IsArray(added) && !cJSON_IsNull(added))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: added_tokens is not an array", name);
    slm_status st;
    if ((st = build_vocab(c, vocab, added)) || (st = build_merges(c, merges)) || (st = build_mode(c, root, model)))
        return st;
    build_specials(c, root, model, cfg);
    if ((st = slm_bpe__finish(c->t, name, err))) return st;
    return slm_bpe__probe_regexes(c->t, name, err);
}

/* cJSON reports an allocation failure as a syntax error: the hooks'
 * out-of-memory flag (common/json.h) tells them apart. *at: where a real
 * syntax error is, -1 if unknown. */
static cJSON *parse_json(const char *s, size_t n, int *oom, long *at) {
    slm_json_oom_clear();
    cJSON *r = cJSON_ParseWithLength(s, n);
    *oom = 0;
    *at = -1;
    if (r) return r;
    const char *e = cJSON_GetErrorPtr();
    if (e && e >= s && e <= s + n) *at = (long)(e - s);
    *oom = slm_json_oom();
    return NULL;
}

slm_status slm_bpe_load_hf_json_mem(slm_bpe **out, const char *json, size_t len, const char *config_json,
                                    size_t config_len, const char *name, slm_err *err) {
    *out = NULL;
    if (!name) name = "tokenizer.json";
    slm_json_init_hooks();
    int oom;
    long at;
    cJSON *root = parse_json(json, len, &oom, &at);
    if (!root) {
        if (oom) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory parsing the JSON", name);
        return slm_errf(err, SLM_ERR_FORMAT, "%s: invalid JSON (near byte %ld)", name, at);
    }
    cJSON *cfg = NULL;
    if (config_json) {
        cfg = parse_json(config_json, config_len, &oom, &at);
        if (!cfg) {
            cJSON_Delete(root);
            if (oom) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory parsing tokenizer_config.json", name);
            return slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer_config.json is not valid JSON (near byte %ld)", name,
                            at);
        }
    }
    jctx c = {0};
    c.name = name;
    c.err = err;
    slm_status st = cJSON_IsObject(root) ? build(&c, root, cfg)
                                         : slm_errf(err, SLM_ERR_FORMAT, "%s: not a JSON object", name);
    cJSON_Delete(root);
    cJSON_Delete(cfg);
    if (st) {
        slm_bpe_free(c.t);
        return st;
    }
    *out = c.t;
    return SLM_OK;
}

#endif /* SLM_HAVE_CJSON */

slm_status slm_bpe_load_hf_json(slm_bpe **out, const char *path, slm_err *err) {
    *out = NULL;
    slm_map m, mc = {0};
    slm_status st = slm_map_file(&m, path, err);
    if (st) return st;
    const int have_cfg = slm_map_beside(&mc, path, "tokenizer_config.json");
    st = slm_bpe_load_hf_json_mem(out, m.data, (size_t)m.size, have_cfg ? mc.data : NULL,
                                  have_cfg ? (size_t)mc.size : 0, slm_basename(path), err);
    if (have_cfg) slm_unmap(&mc);
    slm_unmap(&m);
    return st;
}
