/* A Hugging Face folder's WordPiece vocabulary (tokenizer.json or vocab.txt)
 * -> slm_wpm in the GGUF form llama.cpp's converter writes (wpm.h says what
 * is read and what is refused). The converter's rules, as facts: every id
 * below the vocabulary size is a token, a missing one "[PAD<id>]" of type
 * unused; added tokens marked special, and those that look special
 * ("<|...|>"), are control tokens, other added ones user-defined (their
 * U+2581 turned into spaces first); then control tokens stay as they are, a
 * token starting "##" loses it, any other gets U+2581 in front. The parsed
 * JSON (cJSON through slm_malloc) lives while loading only. */
#include <stdio.h>
#include <stdlib.h>

#include "text/wpm.h"
#include "text/vocab_keys.h"

#define WPM_HF_MAX_VOCAB (1 << 24)

enum { TT_NORMAL = 1, TT_CONTROL = 3, TT_USER_DEFINED = 4, TT_UNUSED = 5 };

/* The vocabulary being assembled: raw spellings by id, then the GGUF form. */
typedef struct hf_vocab {
    int n;           /* ids */
    char **raw;      /* [n] slm_malloc'd spelling as the folder gives it, NULL: missing */
    uint8_t *type;   /* [n] TT_* */
    const char *name;
    slm_err *err;
} hf_vocab;

static void hf_vocab_free(hf_vocab *v) {
    for (int i = 0; v->raw && i < v->n; i++) slm_xfree(v->raw[i]);
    slm_xfree(v->raw);
    slm_xfree(v->type);
    v->raw = NULL;
    v->type = NULL;
}

static slm_status vocab_alloc(hf_vocab *v, int n) {
    if (n < 1 || n > WPM_HF_MAX_VOCAB)
        return slm_errf(v->err, SLM_ERR_FORMAT, "%s: %d tokens out of range (1..%d)", v->name, n, WPM_HF_MAX_VOCAB);
    v->n = n;
    v->raw = slm_calloc((size_t)n, sizeof *v->raw);
    v->type = slm_calloc((size_t)n, 1);
    if (!v->raw || !v->type) return slm_errf(v->err, SLM_ERR_NOMEM, "%s: out of memory for the tokenizer", v->name);
    return SLM_OK;
}

/* Token id gets spelling s[0..len) (replacing any earlier one). */
static slm_status vocab_set(hf_vocab *v, int id, const char *s, size_t len, int type) {
    char *c = slm_malloc(len + 1);
    if (!c) return slm_errf(v->err, SLM_ERR_NOMEM, "%s: out of memory for the tokenizer", v->name);
    memcpy(c, s, len);
    c[len] = 0;
    slm_xfree(v->raw[id]);
    v->raw[id] = c;
    v->type[id] = (uint8_t)type;
    return SLM_OK;
}

/* The first id spelled s (a raw spelling), or -1. */
static int vocab_find(const hf_vocab *v, const char *s) {
    for (int i = 0; i < v->n; i++)
        if (v->raw[i] && !strcmp(v->raw[i], s)) return i;
    return -1;
}

static int looks_special(const char *s) {
    const size_t n = strlen(s);
    return n >= 4 && !strncmp(s, "<|", 2) && !strcmp(s + n - 2, "|>");
}

/* The GGUF form of every token, then the tokenizer. special: cls, sep, unk, eos. */
static slm_status vocab_finish(hf_vocab *v, const int special[4], int lower, int strip, slm_wpm **out) {
    char **tok = slm_calloc((size_t)v->n, sizeof *tok);
    uint32_t *len = slm_calloc((size_t)v->n, sizeof *len);
    slm_status st = SLM_OK;
    if (!tok || !len) {
        st = slm_errf(v->err, SLM_ERR_NOMEM, "%s: out of memory for the tokenizer", v->name);
        goto done;
    }
    for (int i = 0; i < v->n && !st; i++) {
        char pad[32];
        const char *r = v->raw[i];
        if (!r) { /* a missing id: unused, as the converter pads */
            snprintf(pad, sizeof pad, "[PAD%d]", i);
            r = pad;
            v->type[i] = TT_UNUSED;
        }
        const size_t rl = strlen(r);
        tok[i] = slm_malloc(rl + 4);
        if (!tok[i]) {
            st = slm_errf(v->err, SLM_ERR_NOMEM, "%s: out of memory for the tokenizer", v->name);
            break;
        }
        size_t o = 0;
        if (v->type[i] == TT_CONTROL) {
            memcpy(tok[i], r, rl), o = rl;
        } else if (v->type[i] != TT_USER_DEFINED && !strncmp(r, "##", 2)) {
            memcpy(tok[i], r + 2, rl - 2), o = rl - 2;
        } else {
            memcpy(tok[i], "\xe2\x96\x81", 3), o = 3;
            for (size_t k = 0; k < rl; k++) { /* user-defined: its U+2581 become spaces first */
                if (v->type[i] == TT_USER_DEFINED && k + 2 < rl && !memcmp(r + k, "\xe2\x96\x81", 3)) {
                    tok[i][o++] = ' ';
                    k += 2;
                } else {
                    tok[i][o++] = r[k];
                }
            }
        }
        if (o > UINT32_MAX) st = slm_errf(v->err, SLM_ERR_FORMAT, "%s: token %d too long", v->name, i);
        len[i] = (uint32_t)o;
    }
    if (!st)
        st = slm_wpm_build(out, (const char *const *)tok, len, v->type, v->n, special, lower, strip, v->name, v->err);
done:
    for (int i = 0; tok && i < v->n; i++) slm_xfree(tok[i]);
    slm_xfree(tok);
    slm_xfree(len);
    return st;
}

#ifndef SLM_HAVE_CJSON

slm_status slm_wpm_load_hf_json_mem(slm_wpm **out, const char *json, size_t len, int n_vocab, const char *name,
                                    slm_err *err) {
    (void)json, (void)len, (void)n_vocab;
    *out = NULL;
    return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: this build has no JSON support (cJSON not found)",
                    name ? name : "tokenizer.json");
}

#else

#include <cJSON.h>

#include "common/json.h"

static const cJSON *jget(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}


/* A JSON integer id in 0..WPM_HF_MAX_VOCAB - 1, or -1. */
static int json_id(const cJSON *v) {
    if (!cJSON_IsNumber(v)) return -1;
    const double d = v->valuedouble;
    return d >= 0 && d < WPM_HF_MAX_VOCAB && (double)(int)d == d ? (int)d : -1;
}

/* A special token of the post-processor: TemplateProcessing's item it
 * ({"SpecialToken": {"id": NAME}}) through its special_tokens map (NAME:
 * {"ids": [ID]}), else NAME in the vocabulary. -1 when it is not one. */
static int template_special(const hf_vocab *v, const cJSON *pp, const cJSON *it) {
    const cJSON *sp = jget(it, "SpecialToken"), *nm = sp ? jget(sp, "id") : NULL;
    if (!cJSON_IsString(nm)) return -1;
    const cJSON *map = jget(pp, "special_tokens"), *e = map ? jget(map, nm->valuestring) : NULL;
    const cJSON *ids = e ? jget(e, "ids") : NULL;
    if (cJSON_IsArray(ids)) return cJSON_GetArraySize(ids) == 1 ? json_id(ids->child) : -1;
    return vocab_find(v, nm->valuestring);
}

/* [CLS] and [SEP] from the post-processor (null: by name). */
static slm_status post_processor(const hf_vocab *v, const cJSON *root, int *cls, int *sep) {
    const cJSON *pp = jget(root, "post_processor");
    const cJSON *ty = pp ? jget(pp, "type") : NULL;
    char b[64];
    *cls = vocab_find(v, "[CLS]");
    *sep = vocab_find(v, "[SEP]");
    if (!pp) {
        if (*cls < 0 || *sep < 0)
            return slm_errf(v->err, SLM_ERR_FORMAT, "%s: no post_processor and no token '%s' to begin each text with",
                            v->name, *cls < 0 ? "[CLS]" : "[SEP]");
        return SLM_OK;
    }
    if (cJSON_IsString(ty) && !strcmp(ty->valuestring, "BertProcessing")) {
        static const char *const keys[2] = {"cls", "sep"};
        for (int k = 0; k < 2; k++) {
            const cJSON *a = jget(pp, keys[k]);
            const int id = cJSON_IsArray(a) && cJSON_GetArraySize(a) == 2 ? json_id(a->child->next) : -1;
            if (id < 0)
                return slm_errf(v->err, SLM_ERR_FORMAT, "%s: post_processor.%s: expected [token, id]", v->name, keys[k]);
            *(k ? sep : cls) = id;
        }
        return SLM_OK;
    }
    if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "TemplateProcessing"))
        return slm_errf(v->err, SLM_ERR_UNSUPPORTED, "%s: post_processor.type '%s' is not supported (TemplateProcessing, "
                        "BertProcessing)", v->name, cJSON_IsString(ty) ? slm_vocab_shown(ty->valuestring, b, sizeof b) : "?");
    const cJSON *single = jget(pp, "single");
    const int n = cJSON_IsArray(single) ? cJSON_GetArraySize(single) : 0;
    const cJSON *mid = n == 3 ? cJSON_GetArrayItem(single, 1) : NULL, *seq = mid ? jget(mid, "Sequence") : NULL,
                *sid = seq ? jget(seq, "id") : NULL;
    const int first = n == 3 ? template_special(v, pp, single->child) : -1,
              last = n == 3 ? template_special(v, pp, cJSON_GetArrayItem(single, 2)) : -1;
    if (first < 0 || last < 0 || !cJSON_IsString(sid) || strcmp(sid->valuestring, "A"))
        return slm_errf(v->err, SLM_ERR_UNSUPPORTED, "%s: post_processor.single: only a special token, $A, a special "
                        "token ([CLS] $A [SEP]) is supported", v->name);
    *cls = first;
    *sep = last;
    return SLM_OK;
}

/* normalizer (BertNormalizer) and pre_tokenizer (BertPreTokenizer). */
static slm_status normalizer(const hf_vocab *v, const cJSON *root, int *lower, int *strip) {
    const cJSON *nz = jget(root, "normalizer"), *ty = nz ? jget(nz, "type") : NULL;
    char b[64];
    if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "BertNormalizer"))
        return slm_errf(v->err, SLM_ERR_UNSUPPORTED, "%s: normalizer.type '%s' is not supported (BertNormalizer)", v->name,
                        !nz ? "null" : cJSON_IsString(ty) ? slm_vocab_shown(ty->valuestring, b, sizeof b) : "?");
    static const char *const always[2] = {"clean_text", "handle_chinese_chars"};
    for (int k = 0; k < 2; k++) {
        const cJSON *f = jget(nz, always[k]);
        if (f && !cJSON_IsTrue(f))
            return slm_errf(v->err, SLM_ERR_UNSUPPORTED, "%s: normalizer.%s: only true is supported", v->name, always[k]);
    }
    const cJSON *lc = jget(nz, "lowercase"), *sa = jget(nz, "strip_accents");
    if ((lc && !cJSON_IsBool(lc)) || (sa && !cJSON_IsBool(sa)))
        return slm_errf(v->err, SLM_ERR_FORMAT, "%s: normalizer.%s: expected true, false or null", v->name,
                        lc && !cJSON_IsBool(lc) ? "lowercase" : "strip_accents");
    *lower = lc ? cJSON_IsTrue(lc) : 1;
    *strip = sa ? cJSON_IsTrue(sa) : *lower;
    const cJSON *pt = jget(root, "pre_tokenizer"), *pty = pt ? jget(pt, "type") : NULL;
    if (!cJSON_IsString(pty) || strcmp(pty->valuestring, "BertPreTokenizer"))
        return slm_errf(v->err, SLM_ERR_UNSUPPORTED, "%s: pre_tokenizer.type '%s' is not supported (BertPreTokenizer)",
                        v->name, !pt ? "null" : cJSON_IsString(pty) ? slm_vocab_shown(pty->valuestring, b, sizeof b) : "?");
    return SLM_OK;
}

/* model.vocab and added_tokens into v (sized to the largest id + 1, at least n_vocab). */
static slm_status read_vocab(hf_vocab *v, const cJSON *model, const cJSON *added, int n_vocab) {
    const cJSON *voc = jget(model, "vocab");
    char b[64];
    if (!cJSON_IsObject(voc)) return slm_errf(v->err, SLM_ERR_FORMAT, "%s: model.vocab: expected an object", v->name);
    int n = n_vocab > 0 ? n_vocab : 0;
    for (const cJSON *e = voc->child; e; e = e->next) {
        const int id = json_id(e);
        if (id < 0 || !e->string)
            return slm_errf(v->err, SLM_ERR_FORMAT, "%s: model.vocab: token '%s': not an id below %d", v->name,
                            slm_vocab_shown(e->string, b, sizeof b), WPM_HF_MAX_VOCAB);
        if (id >= n) n = id + 1;
    }
    const cJSON *a;
    cJSON_ArrayForEach(a, added) {
        const int id = json_id(jget(a, "id"));
        if (id < 0 || !cJSON_IsString(jget(a, "content")))
            return slm_errf(v->err, SLM_ERR_FORMAT, "%s: added_tokens: an entry without an id below %d and a content",
                            v->name, WPM_HF_MAX_VOCAB);
        if (id >= n) n = id + 1;
    }
    slm_status st = vocab_alloc(v, n);
    for (const cJSON *e = voc->child; e && !st; e = e->next) {
        const int id = json_id(e);
        if (v->raw[id])
            return slm_errf(v->err, SLM_ERR_FORMAT, "%s: model.vocab: id %d given twice ('%s')", v->name, id,
                            slm_vocab_shown(e->string, b, sizeof b));
        st = vocab_set(v, id, e->string, strlen(e->string), TT_NORMAL);
    }
    cJSON_ArrayForEach(a, added) {
        if (st) break;
        const char *c = jget(a, "content")->valuestring;
        const int special = cJSON_IsTrue(jget(a, "special")) || looks_special(c);
        st = vocab_set(v, json_id(jget(a, "id")), c, strlen(c), special ? TT_CONTROL : TT_USER_DEFINED);
    }
    return st;
}

slm_status slm_wpm_load_hf_json_mem(slm_wpm **out, const char *json, size_t len, int n_vocab, const char *name,
                                    slm_err *err) {
    *out = NULL;
    hf_vocab v = {0, NULL, NULL, name ? name : "tokenizer.json", err};
    char b[64];
    slm_json_init_hooks();
    slm_json_oom_clear();
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root && slm_json_oom()) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory parsing the JSON", v.name);
    slm_status st = SLM_OK;
    const cJSON *model = root ? jget(root, "model") : NULL, *mty = model ? jget(model, "type") : NULL;
    const cJSON *added = root ? jget(root, "added_tokens") : NULL;
    const cJSON *pre = model ? jget(model, "continuing_subword_prefix") : NULL, *unk_t = model ? jget(model, "unk_token") : NULL;
    int special[4], lower = 1, strip = 1;
    if (!cJSON_IsObject(root) || !cJSON_IsObject(model)) {
        st = slm_errf(err, SLM_ERR_FORMAT, "%s: not a tokenizer.json (no 'model' object)", v.name);
        goto done;
    }
    if (!cJSON_IsString(mty) || strcmp(mty->valuestring, "WordPiece")) {
        st = slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: model.type '%s': a BERT folder's tokenizer must be WordPiece",
                      v.name, cJSON_IsString(mty) ? slm_vocab_shown(mty->valuestring, b, sizeof b) : "?");
        goto done;
    }
    if (pre && (!cJSON_IsString(pre) || strcmp(pre->valuestring, "##"))) {
        st = slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: model.continuing_subword_prefix '%s' is not supported ('##')",
                      v.name, cJSON_IsString(pre) ? slm_vocab_shown(pre->valuestring, b, sizeof b) : "?");
        goto done;
    }
    if (added && !cJSON_IsArray(added)) {
        st = slm_errf(err, SLM_ERR_FORMAT, "%s: added_tokens: expected an array", v.name);
        goto done;
    }
    if ((st = read_vocab(&v, model, added, n_vocab)) || (st = normalizer(&v, root, &lower, &strip)) ||
        (st = post_processor(&v, root, &special[0], &special[1])))
        goto done;
    special[2] = cJSON_IsString(unk_t) ? vocab_find(&v, unk_t->valuestring) : -1;
    special[3] = special[1]; /* eos: [SEP] */
    if (special[2] < 0) {
        st = slm_errf(err, SLM_ERR_FORMAT, "%s: model.unk_token '%s' is not a token", v.name,
                      cJSON_IsString(unk_t) ? slm_vocab_shown(unk_t->valuestring, b, sizeof b) : "(missing)");
        goto done;
    }
    st = vocab_finish(&v, special, lower, strip, out);
done:
    hf_vocab_free(&v);
    cJSON_Delete(root);
    return st;
}

#endif

/* tokenizer_config.json's string or {"content": string} value of key, else def. */
static const char *config_token(const void *cfg, const char *key, const char *def) {
#ifdef SLM_HAVE_CJSON
    const cJSON *v = cfg ? cJSON_GetObjectItemCaseSensitive((const cJSON *)cfg, key) : NULL;
    if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
    if (cJSON_IsString(v)) return v->valuestring;
#else
    (void)cfg, (void)key;
#endif
    return def;
}

/* tokenizer_config.json's boolean key: 1, 0, or def when absent or null. */
static int config_flag(const void *cfg, const char *key, int def) {
#ifdef SLM_HAVE_CJSON
    const cJSON *v = cfg ? cJSON_GetObjectItemCaseSensitive((const cJSON *)cfg, key) : NULL;
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v);
#else
    (void)cfg, (void)key;
#endif
    return def;
}

slm_status slm_wpm_load_vocab_txt_mem(slm_wpm **out, const char *txt, size_t len, const char *config_json,
                                      size_t config_len, int n_vocab, const char *name, slm_err *err) {
    *out = NULL;
    hf_vocab v = {0, NULL, NULL, name ? name : "vocab.txt", err};
    void *cfg = NULL;
#ifdef SLM_HAVE_CJSON
    if (config_json) {
        slm_json_init_hooks();
        cfg = cJSON_ParseWithLength(config_json, config_len);
        if (!cJSON_IsObject((cJSON *)cfg))
            return cJSON_Delete(cfg), slm_errf(err, SLM_ERR_FORMAT, "%s: tokenizer_config.json beside it is not a JSON "
                                               "object", v.name);
    }
#else
    (void)config_json, (void)config_len;
#endif
    int lines = 0;
    for (size_t i = 0; i < len; i++) lines += txt[i] == '\n';
    if (len && txt[len - 1] != '\n') lines++;
    slm_status st = vocab_alloc(&v, lines > n_vocab ? lines : n_vocab);
    size_t at = 0;
    for (int id = 0; id < lines && !st; id++) {
        const char *nl = memchr(txt + at, '\n', len - at);
        const size_t l = nl ? (size_t)(nl - (txt + at)) : len - at;
        st = vocab_set(&v, id, txt + at, l, TT_NORMAL);
        at += l + 1;
    }
    /* BertTokenizer's special tokens, by name */
    static const char *const keys[5] = {"cls_token", "sep_token", "unk_token", "pad_token", "mask_token"};
    static const char *const defs[5] = {"[CLS]", "[SEP]", "[UNK]", "[PAD]", "[MASK]"};
    int special[4], ids[5];
    for (int k = 0; k < 5 && !st; k++) {
        const char *nm = config_token(cfg, keys[k], defs[k]);
        ids[k] = vocab_find(&v, nm);
        if (ids[k] >= 0) v.type[ids[k]] = TT_CONTROL;
        else if (k < 3) {
            char b[64];
            const size_t n = strlen(nm) < 40 ? strlen(nm) : 40;
            for (size_t i = 0; i < n; i++) b[i] = (unsigned char)nm[i] >= 0x20 && (unsigned char)nm[i] < 0x7f ? nm[i] : '?';
            b[n] = 0;
            st = slm_errf(err, SLM_ERR_FORMAT, "%s: no token '%s' (%s)", v.name, b, keys[k]);
        }
    }
    const int lower = config_flag(cfg, "do_lower_case", 1), strip = config_flag(cfg, "strip_accents", lower);
    if (!st && !config_flag(cfg, "tokenize_chinese_chars", 1))
        st = slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: tokenizer_config.json: tokenize_chinese_chars false is not "
                      "supported", v.name);
    if (!st) {
        special[0] = ids[0], special[1] = ids[1], special[2] = ids[2], special[3] = ids[1];
        st = vocab_finish(&v, special, lower, strip, out);
    }
    hf_vocab_free(&v);
#ifdef SLM_HAVE_CJSON
    cJSON_Delete(cfg);
#endif
    return st;
}

slm_status slm_wpm_load_hf(slm_wpm **out, const char *path, int n_vocab, slm_err *err) {
    *out = NULL;
    const char *base = slm_basename(path);
    slm_map m, mc = {0};
    slm_status st = slm_map_file(&m, path, err);
    if (st) return st;
    if (strcmp(base, "vocab.txt")) {
        st = slm_wpm_load_hf_json_mem(out, m.data, (size_t)m.size, n_vocab, base, err);
        slm_unmap(&m);
        return st;
    }
    const int have_cfg = slm_map_beside(&mc, path, "tokenizer_config.json");
    st = slm_wpm_load_vocab_txt_mem(out, m.data, (size_t)m.size, have_cfg ? mc.data : NULL,
                                    have_cfg ? (size_t)mc.size : 0, n_vocab, base, err);
    if (have_cfg) slm_unmap(&mc);
    slm_unmap(&m);
    return st;
}
