/* A Hugging Face folder's Unigram tokenizer (tokenizer.json with model.type
 * "Unigram": XLM-RoBERTa, bge-m3, multilingual-e5, bge-reranker-v2-m3) ->
 * slm_ugm in the GGUF form llama.cpp's converter writes for XLM-R, so that
 * it encodes as a GGUF of the same folder does (ugm.h says what is read and
 * what is refused).
 *
 * The converter's rules, as facts: every id below max(config.json's
 * vocab_size, the model's vocabulary) is a token; one the model has not is
 * "[PAD<id>]" of type unused with score -10000; the model's pieces keep
 * their spelling and score; the unknown id is of type unknown, the special
 * added tokens control, other added tokens user-defined, the rest normal.
 * add_space_prefix is the Metaspace's prepend, remove_extra_whitespaces
 * tokenizer_config.json's clean_up_tokenization_spaces (here: when that key
 * is absent, whether the normalizer collapses runs of spaces, which is what
 * the flag does). The special ids and add_bos / add_eos / add_sep are read
 * as gguf-py's SpecialVocab reads them, simplified: the post-processor's
 * template first (its first and last special tokens are BOS and EOS, its
 * pair's second separator the separator), tokenizer_config.json's names for
 * the rest. The parsed JSON lives while loading only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "text/ugm.h"
#include "text/vocab_keys.h"

#define HF_PAD_SCORE (-10000.0f)
enum { T_NORMAL = 1, T_UNKNOWN = 2, T_CONTROL = 3, T_USER = 4, T_UNUSED = 5 };

/* ---- base64 (the charsmap) --------------------------------------------------- */

static int b64_val(unsigned char c) {
    return c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26 : c >= '0' && c <= '9' ? c - '0' + 52
         : c == '+' ? 62 : c == '/' ? 63 : -1;
}

size_t slm_b64_decode(const char *s, size_t n, uint8_t *out, size_t *bad) {
    *bad = SIZE_MAX;
    if (n % 4) {
        *bad = n;
        return 0;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            const unsigned char c = (unsigned char)s[i + k];
            if (c == '=' && i + 4 == n && k >= 2 && (k == 3 || s[i + 3] == '=')) {
                v[k] = 0, pad++;
                continue;
            }
            if ((v[k] = b64_val(c)) < 0 || pad) {
                *bad = i + (size_t)k;
                return 0;
            }
        }
        const uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        if (out) out[o] = (uint8_t)(w >> 16);
        if (out && pad < 2) out[o + 1] = (uint8_t)(w >> 8);
        if (out && pad < 1) out[o + 2] = (uint8_t)w;
        o += (size_t)(3 - pad);
    }
    return o;
}

#ifndef SLM_HAVE_CJSON

slm_status slm_ugm_load_hf_json_mem(slm_ugm **out, const char *json, size_t len, const char *config_json,
                                    size_t config_len, int n_vocab, const char *name, slm_ugm_hf *info, slm_err *err) {
    (void)json, (void)len, (void)config_json, (void)config_len, (void)n_vocab;
    *out = NULL;
    if (info) memset(info, 0, sizeof *info);
    return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: this build has no JSON support (cJSON not found)",
                    name ? name : "tokenizer.json");
}

#else

#include <cJSON.h>

#include "common/json.h"

/* What is being read: the file's name for messages and the error. */
typedef struct hf_ctx {
    const char *name;
    slm_err *err;
    const cJSON *root, *cfg; /* tokenizer.json, tokenizer_config.json (NULL: none) */
    const cJSON *vocab;      /* model.vocab */
    int n_model;             /* its entries */
    const cJSON **piece;     /* [n_model] the pieces (strings) */
} hf_ctx;

static const cJSON *jget(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static int jis(const cJSON *v, const char *s) { return cJSON_IsString(v) && !strcmp(v->valuestring, s); }


static const char *type_of(const cJSON *o, char *buf, size_t cap) {
    const cJSON *t = jget(o, "type");
    return !o ? "null" : cJSON_IsString(t) ? slm_vocab_shown(t->valuestring, buf, cap) : "?";
}

/* A JSON integer id in 0..lim - 1, or -1. */
static int json_id(const cJSON *v, int lim) {
    if (!cJSON_IsNumber(v)) return -1;
    const double d = v->valuedouble;
    return d >= 0 && d < lim && (double)(int)d == d ? (int)d : -1;
}

/* The id of the token spelled s: an added token's, else the model's piece; -1: none. */
static int find_token(const hf_ctx *c, const char *s) {
    const cJSON *a;
    cJSON_ArrayForEach(a, jget(c->root, "added_tokens"))
        if (jis(jget(a, "content"), s)) return json_id(jget(a, "id"), c->n_model);
    for (int i = 0; i < c->n_model; i++)
        if (!strcmp(c->piece[i]->valuestring, s)) return i;
    return -1;
}

/* tokenizer_config.json's token name for key (a string or {"content": s}), or NULL. */
static const char *config_name(const hf_ctx *c, const char *key) {
    const cJSON *v = jget(c->cfg, key);
    if (cJSON_IsObject(v)) v = jget(v, "content");
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ---- the pieces --------------------------------------------------------------- */

/* model: Unigram, its vocab [[piece, score], ...], unk_id, byte_fallback. */
static slm_status read_model(hf_ctx *c, int *unk) {
    const cJSON *model = jget(c->root, "model"), *mty = jget(model, "type");
    char b[64];
    if (!jis(mty, "Unigram"))
        return slm_errf(c->err, SLM_ERR_UNSUPPORTED, "%s: model.type '%s': an XLM-RoBERTa tokenizer is Unigram", c->name,
                        cJSON_IsString(mty) ? slm_vocab_shown(mty->valuestring, b, sizeof b) : "?");
    const cJSON *bf = jget(model, "byte_fallback");
    if (bf && !cJSON_IsFalse(bf))
        return slm_errf(c->err, SLM_ERR_UNSUPPORTED, "%s: model.byte_fallback: only false is supported", c->name);
    c->vocab = jget(model, "vocab");
    const int n = cJSON_IsArray(c->vocab) ? cJSON_GetArraySize(c->vocab) : -1;
    if (n < 1 || n > (1 << 24))
        return slm_errf(c->err, SLM_ERR_FORMAT, "%s: model.vocab: expected an array of 1..%d [piece, score] pairs",
                        c->name, 1 << 24);
    c->n_model = n;
    c->piece = slm_malloc((size_t)n * sizeof *c->piece);
    if (!c->piece) return slm_errf(c->err, SLM_ERR_NOMEM, "%s: out of memory for the tokenizer", c->name);
    int i = 0;
    for (const cJSON *e = c->vocab->child; e; e = e->next, i++) {
        const cJSON *p = cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 ? e->child : NULL, *s = p ? p->next : NULL;
        if (!cJSON_IsString(p) || !cJSON_IsNumber(s) || !(fabs(s->valuedouble) <= 3.0e38))
            return slm_errf(c->err, SLM_ERR_FORMAT, "%s: model.vocab[%d]: expected [piece, score] (a finite score)",
                            c->name, i);
        c->piece[i] = p;
    }
    const cJSON *u = jget(model, "unk_id");
    *unk = json_id(u, n);
    if (*unk < 0)
        return slm_errf(c->err, SLM_ERR_FORMAT, "%s: model.unk_id: %s (the Unigram tokenizer needs an unknown token "
                        "among the %d pieces)", c->name, u ? "not an id of the vocabulary" : "none", n);
    return SLM_OK;
}

/* normalizer: Precompiled (its charsmap, base64), alone or in a Sequence
 * with the space steps SentencePiece's converters add (Replace of runs of
 * spaces, Strip on the right). *cm: the charsmap (NULL: none). */
static slm_status read_normalizer(const hf_ctx *c, uint8_t **cm, size_t *cm_len, int *collapse) {
    const cJSON *nz = jget(c->root, "normalizer");
    char b[64];
    *cm = NULL, *cm_len = 0, *collapse = 0;
    if (!nz) return SLM_OK; /* none: the identity */
    const cJSON *list = jis(jget(nz, "type"), "Sequence") ? jget(nz, "normalizers") : NULL;
    if (jis(jget(nz, "type"), "Sequence") && !cJSON_IsArray(list))
        return slm_errf(c->err, SLM_ERR_FORMAT, "%s: normalizer.normalizers: expected an array", c->name);
    const int n = list ? cJSON_GetArraySize(list) : 1;
    int k = 0, seen_pc = 0;
    for (const cJSON *s = list ? list->child : nz; s && k < n; s = list ? s->next : NULL, k++) {
        char where[48];
        if (list) snprintf(where, sizeof where, "normalizer.normalizers[%d]", k);
        else snprintf(where, sizeof where, "normalizer");
        const cJSON *ty = jget(s, "type");
        if (jis(ty, "Precompiled") && !seen_pc) {
            seen_pc = 1;
            const cJSON *m = jget(s, "precompiled_charsmap");
            if (!m) continue;
            if (!cJSON_IsString(m))
                return slm_errf(c->err, SLM_ERR_FORMAT, "%s: %s.precompiled_charsmap: expected a base64 string", c->name, where);
            const size_t sl = strlen(m->valuestring);
            size_t bad;
            const size_t need = slm_b64_decode(m->valuestring, sl, NULL, &bad);
            if (bad != SIZE_MAX)
                return slm_errf(c->err, SLM_ERR_FORMAT, "%s: %s.precompiled_charsmap: invalid base64 %s %zu (of %zu)",
                                c->name, where, bad == sl ? "length" : "character at", bad, sl);
            if (!need) continue;
            if (!(*cm = slm_malloc(need))) return slm_errf(c->err, SLM_ERR_NOMEM, "%s: out of memory", c->name);
            *cm_len = slm_b64_decode(m->valuestring, sl, *cm, &bad);
            continue;
        }
        if (jis(ty, "Replace")) { /* SentencePiece's converters: Replace(Regex(" {2,}"), " " or U+2581) */
            const cJSON *pat = jget(s, "pattern"), *re = jget(pat, "Regex"), *to = jget(s, "content");
            if (jis(re, " {2,}") && (jis(to, " ") || jis(to, "\xe2\x96\x81"))) {
                *collapse = 1;
                continue;
            }
            return slm_errf(c->err, SLM_ERR_UNSUPPORTED, "%s: %s: a Replace other than of runs of spaces (Regex ' {2,}') "
                            "is not supported", c->name, where);
        }
        if (jis(ty, "Strip") && cJSON_IsFalse(jget(s, "left")) && cJSON_IsTrue(jget(s, "right"))) {
            *collapse = 1; /* trailing spaces: what remove_extra_whitespaces drops */
            continue;
        }
        return slm_errf(c->err, SLM_ERR_UNSUPPORTED, "%s: %s.type '%s' is not supported (Precompiled, with a Replace of "
                        "runs of spaces and a right Strip)", c->name, where, type_of(s, b, sizeof b));
    }
    return SLM_OK;
}

/* pre_tokenizer: Metaspace with U+2581; its prepend (prepend_scheme always /
 * never, or the older add_prefix_space) is add_space_prefix. */
static slm_status read_pretok(const hf_ctx *c, int *prefix) {
    const cJSON *pt = jget(c->root, "pre_tokenizer");
    char b[64];
    if (!jis(jget(pt, "type"), "Metaspace"))
        return slm_errf(c->err, SLM_ERR_UNSUPPORTED, "%s: pre_tokenizer.type '%s' is not supported (Metaspace)", c->name,
                        type_of(pt, b, sizeof b));
    const cJSON *r = jget(pt, "replacement"), *ps = jget(pt, "prepend_scheme"), *ap = jget(pt, "add_prefix_space");
    if (r && !jis(r, "\xe2\x96\x81"))
        return slm_errf(c->err, SLM_ERR_UNSUPPORTED, "%s: pre_tokenizer.replacement: only U+2581 is supported", c->name);
    if (ps) {
        if (!jis(ps, "always") && !jis(ps, "never"))
            return slm_errf(c->err, SLM_ERR_UNSUPPORTED, "%s: pre_tokenizer.prepend_scheme '%s' is not supported (always, "
                            "never)", c->name, cJSON_IsString(ps) ? slm_vocab_shown(ps->valuestring, b, sizeof b) : "?");
        *prefix = jis(ps, "always");
    } else {
        if (ap && !cJSON_IsBool(ap))
            return slm_errf(c->err, SLM_ERR_FORMAT, "%s: pre_tokenizer.add_prefix_space: expected true or false", c->name);
        *prefix = ap ? cJSON_IsTrue(ap) : 1;
    }
    return SLM_OK;
}

/* A TemplateProcessing item's special token id ({"SpecialToken": {"id":
 * NAME}} through special_tokens' NAME: {"ids": [ID]}, else NAME's token);
 * -1 when it is not a special token, -2 when it names none. */
static int template_special(const hf_ctx *c, const cJSON *pp, const cJSON *it) {
    const cJSON *sp = jget(it, "SpecialToken"), *nm = jget(sp, "id");
    if (!sp) return -1;
    if (!cJSON_IsString(nm)) return -2;
    const cJSON *ids = jget(jget(jget(pp, "special_tokens"), nm->valuestring), "ids");
    int id = cJSON_IsArray(ids) ? (cJSON_GetArraySize(ids) == 1 ? json_id(ids->child, c->n_model) : -1)
                                : find_token(c, nm->valuestring);
    return id < 0 ? -2 : id;
}

static int template_seq(const cJSON *it, const char *which) { return jis(jget(jget(it, "Sequence"), "id"), which); }

/* post_processor: RobertaProcessing (cls, sep: <s> A </s>, pairs <s> A
 * </s></s> B </s>), TemplateProcessing (single: [special] A [special]; pair:
 * its separators), or none. ids: bos, eos, sep as the template gives them
 * (-1: not given); flags: add_bos, add_eos, add_sep. */
static slm_status read_post(const hf_ctx *c, int ids[3], int flags[3]) {
    const cJSON *pp = jget(c->root, "post_processor");
    char b[64];
    ids[0] = ids[1] = ids[2] = -1;
    flags[0] = flags[1] = flags[2] = 0;
    if (!pp) return SLM_OK;
    if (jis(jget(pp, "type"), "RobertaProcessing")) {
        static const char *const keys[2] = {"cls", "sep"};
        for (int k = 0; k < 2; k++) {
            const cJSON *a = jget(pp, keys[k]);
            const int id = cJSON_IsArray(a) && cJSON_GetArraySize(a) == 2 ? json_id(a->child->next, c->n_model) : -1;
            if (id < 0)
                return slm_errf(c->err, SLM_ERR_FORMAT, "%s: post_processor.%s: expected [token, id] of the vocabulary",
                                c->name, keys[k]);
            ids[k] = id;
        }
        ids[2] = ids[1];
        flags[0] = flags[1] = flags[2] = 1;
        return SLM_OK;
    }
    if (!jis(jget(pp, "type"), "TemplateProcessing"))
        return slm_errf(c->err, SLM_ERR_UNSUPPORTED, "%s: post_processor.type '%s' is not supported (TemplateProcessing, "
                        "RobertaProcessing)", c->name, type_of(pp, b, sizeof b));
    const cJSON *single = jget(pp, "single"), *pair = jget(pp, "pair");
    const int n = cJSON_IsArray(single) ? cJSON_GetArraySize(single) : -1;
    const cJSON *it = n > 0 ? single->child : NULL;
    const int first = it ? template_special(c, pp, it) : -1;
    if (first >= 0) it = it->next;
    const int has_a = it && template_seq(it, "A");
    const int last = has_a && it->next ? template_special(c, pp, it->next) : -1;
    if (first == -2 || last == -2 || !has_a || n != 1 + (first >= 0) + (last >= 0))
        return slm_errf(c->err, SLM_ERR_UNSUPPORTED, "%s: post_processor.single: only [special] $A [special] with special "
                        "tokens of the vocabulary is supported", c->name);
    ids[0] = first, ids[1] = last;
    flags[0] = first >= 0, flags[1] = last >= 0;
    /* pair: [first] A s1 [s2] B [last]: a second separator is add_sep (gguf-py's reading) */
    const int np = cJSON_IsArray(pair) ? cJSON_GetArraySize(pair) : 0;
    const cJSON *p = np ? pair->child : NULL;
    if (p && first >= 0 && template_special(c, pp, p) == first) p = p->next;
    if (p && template_seq(p, "A")) {
        const cJSON *s1 = p->next, *s2 = s1 ? s1->next : NULL;
        const int i1 = s1 ? template_special(c, pp, s1) : -1, i2 = s2 ? template_special(c, pp, s2) : -1;
        if (i1 >= 0 && i2 >= 0 && s2->next && template_seq(s2->next, "B")) flags[2] = 1, ids[2] = i2;
    }
    return SLM_OK;
}

/* added_tokens: ids of the model's vocabulary; special: control, else user-defined. */
static slm_status read_added(const hf_ctx *c, uint8_t *type, int unk) {
    const cJSON *added = jget(c->root, "added_tokens"), *a;
    if (added && !cJSON_IsArray(added))
        return slm_errf(c->err, SLM_ERR_FORMAT, "%s: added_tokens: expected an array", c->name);
    int k = 0;
    cJSON_ArrayForEach(a, added) {
        const int id = json_id(jget(a, "id"), 1 << 24);
        if (id < 0 || !cJSON_IsString(jget(a, "content")))
            return slm_errf(c->err, SLM_ERR_FORMAT, "%s: added_tokens[%d]: expected an id and a content", c->name, k);
        if (id >= c->n_model)
            return slm_errf(c->err, SLM_ERR_UNSUPPORTED, "%s: added_tokens[%d]: id %d beyond the model's %d pieces is "
                            "not supported", c->name, k, id, c->n_model);
        if (id != unk) type[id] = cJSON_IsTrue(jget(a, "special")) ? T_CONTROL : T_USER;
        k++;
    }
    return SLM_OK;
}

/* The special ids: the template's, else tokenizer_config.json's names. */
static slm_status special_ids(const hf_ctx *c, const int tmpl[3], slm_ugm_meta *m) {
    static const char *const keys[4] = {"bos_token", "eos_token", "sep_token", "pad_token"};
    static const char *const alt[4] = {"cls_token", "sep_token", "eos_token", NULL};
    int *dst[4] = {&m->bos, &m->eos, &m->sep, &m->pad};
    for (int k = 0; k < 4; k++) {
        *dst[k] = k < 3 ? tmpl[k] : -1;
        if (*dst[k] >= 0) continue;
        const char *nm = config_name(c, keys[k]);
        if (!nm && alt[k]) nm = config_name(c, alt[k]);
        if (!nm) continue;
        *dst[k] = find_token(c, nm);
        char b[64];
        if (*dst[k] < 0)
            return slm_errf(c->err, SLM_ERR_FORMAT, "%s: tokenizer_config.json's %s '%s' is not a token", c->name, keys[k],
                            slm_vocab_shown(nm, b, sizeof b));
    }
    return SLM_OK;
}

slm_status slm_ugm_load_hf_json_mem(slm_ugm **out, const char *json, size_t len, const char *config_json,
                                    size_t config_len, int n_vocab, const char *name, slm_ugm_hf *info, slm_err *err) {
    *out = NULL;
    slm_ugm_hf dummy;
    if (!info) info = &dummy;
    memset(info, 0, sizeof *info);
    hf_ctx c = {name ? name : "tokenizer.json", err, NULL, NULL, NULL, 0, NULL};
    slm_json_init_hooks();
    slm_json_oom_clear();
    cJSON *root = cJSON_ParseWithLength(json, len), *cfg = NULL;
    slm_status st = SLM_OK;
    const char **tok = NULL;
    uint32_t *tlen = NULL;
    float *score = NULL;
    uint8_t *type = NULL, *cm = NULL;
    char (*pad)[24] = NULL;
    if (!root && slm_json_oom()) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory parsing the JSON", c.name);
    if (!cJSON_IsObject(root) || !cJSON_IsObject(jget(root, "model"))) {
        st = slm_errf(err, SLM_ERR_FORMAT, "%s: not a tokenizer.json (no 'model' object)", c.name);
        goto done;
    }
    c.root = root;
    if (config_json) {
        cfg = cJSON_ParseWithLength(config_json, config_len);
        if (!cJSON_IsObject(cfg)) {
            st = slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer_config.json beside it is not a JSON object", c.name);
            goto done;
        }
        c.cfg = cfg;
    }
    info->wordpiece = jis(jget(jget(root, "model"), "type"), "WordPiece");
    info->bpe = jis(jget(jget(root, "model"), "type"), "BPE");
    int unk = -1, collapse = 0, tmpl[3], flags[3];
    size_t cm_len = 0;
    slm_ugm_meta m = {-1, -1, -1, -1, -1, 0, 0, 0, 0};
    if ((st = read_model(&c, &unk)) || (st = read_normalizer(&c, &cm, &cm_len, &collapse)) ||
        (st = read_pretok(&c, &m.add_space_prefix)) || (st = read_post(&c, tmpl, flags)) ||
        (st = special_ids(&c, tmpl, &m)))
        goto done;
    const int n = n_vocab > c.n_model ? n_vocab : c.n_model;
    if (n_vocab > (1 << 24)) {
        st = slm_errf(err, SLM_ERR_FORMAT, "%s: vocab_size %d out of range", c.name, n_vocab);
        goto done;
    }
    tok = slm_malloc((size_t)n * sizeof *tok);
    tlen = slm_malloc((size_t)n * sizeof *tlen);
    score = slm_malloc((size_t)n * sizeof *score);
    type = slm_malloc((size_t)n);
    pad = n > c.n_model ? slm_malloc((size_t)(n - c.n_model) * sizeof *pad) : NULL;
    if (!tok || !tlen || !score || !type || (n > c.n_model && !pad)) {
        st = slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory for the tokenizer", c.name);
        goto done;
    }
    int i = 0;
    for (const cJSON *e = c.vocab->child; e; e = e->next, i++) {
        tok[i] = c.piece[i]->valuestring;
        const size_t l = strlen(tok[i]);
        if (l > 65536) {
            st = slm_errf(err, SLM_ERR_FORMAT, "%s: model.vocab[%d]: a piece of %zu bytes", c.name, i, l);
            goto done;
        }
        tlen[i] = (uint32_t)l;
        score[i] = (float)e->child->next->valuedouble;
        type[i] = i == unk ? T_UNKNOWN : T_NORMAL;
    }
    for (; i < n; i++) { /* the converter pads to config.json's vocab_size */
        tlen[i] = (uint32_t)snprintf(pad[i - c.n_model], sizeof pad[0], "[PAD%d]", i);
        tok[i] = pad[i - c.n_model];
        score[i] = HF_PAD_SCORE;
        type[i] = T_UNUSED;
    }
    if ((st = read_added(&c, type, unk))) goto done;
    m.unk = unk;
    m.add_bos = flags[0], m.add_eos = flags[1];
    info->add_sep = flags[2];
    int b;
    const cJSON *v = jget(cfg, "add_bos_token"); /* SpecialVocab: tokenizer_config.json's flags win */
    if (cJSON_IsBool(v)) m.add_bos = cJSON_IsTrue(v);
    if (cJSON_IsBool(v = jget(cfg, "add_eos_token"))) m.add_eos = cJSON_IsTrue(v);
    v = jget(cfg, "clean_up_tokenization_spaces");
    b = cJSON_IsBool(v) ? cJSON_IsTrue(v) : collapse;
    m.remove_extra_ws = b;
    st = slm_ugm_build(out, tok, tlen, score, type, n, &m, cm, cm_len, c.name, "normalizer's precompiled_charsmap", err);
done:
    slm_xfree(tok);
    slm_xfree(tlen);
    slm_xfree(score);
    slm_xfree(type);
    slm_xfree(pad);
    slm_xfree(cm);
    slm_xfree(c.piece);
    cJSON_Delete(cfg);
    cJSON_Delete(root);
    return st;
}

#endif

slm_status slm_ugm_load_hf(slm_ugm **out, const char *path, int n_vocab, slm_ugm_hf *info, slm_err *err) {
    *out = NULL;
    if (info) memset(info, 0, sizeof *info);
    const char *base = slm_basename(path);
    if (!strcmp(base, "sentencepiece.bpe.model"))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: SentencePiece's model file is not read: staticlm reads the "
                        "folder's tokenizer.json (Unigram)", base);
    slm_map m, mc = {0};
    slm_status st = slm_map_file(&m, path, err);
    if (st) return st;
    const int have_cfg = slm_map_beside(&mc, path, "tokenizer_config.json");
    st = slm_ugm_load_hf_json_mem(out, m.data, (size_t)m.size, have_cfg ? mc.data : NULL, have_cfg ? (size_t)mc.size : 0,
                                  n_vocab, base, info, err);
    if (have_cfg) slm_unmap(&mc);
    slm_unmap(&m);
    return st;
}
