/* sentence-transformers' modules in a Hugging Face folder: modules.json
 * lists them in the order they run, e.g. EmbeddingGemma's
 *
 *   0 Transformer (path "")      the model itself
 *   1 Pooling     (1_Pooling)    mean / cls / last token: slm_hf_pooling
 *   2 Dense       (2_Dense)      768 -> 3072, no bias, Identity
 *   3 Dense       (3_Dense)      3072 -> 768, no bias, Identity
 *   4 Normalize   (4_Normalize)  L2
 *
 * A Dense module is y = act(W x + b) on the pooled vector: its folder's
 * config.json gives in_features, out_features (required), bias (true when
 * absent) and activation_function ("torch.nn.modules.linear.Identity" or
 * "torch.nn.modules.activation.Tanh"; Tanh when absent, the default of
 * sentence-transformers' Dense), and its model.safetensors holds
 * linear.weight [out, in] and linear.bias [out]. staticlm runs them after
 * pooling (engine/embed.c), in order; their tensors are dense_K.weight and
 * dense_K.bias, K the module's place in modules.json (2 and 3 for
 * EmbeddingGemma: the names llama.cpp's converter gives them). Refused,
 * naming the file and key: a module type other than these four, a Dense
 * module before Pooling (on the token embeddings) or after Normalize, any
 * other activation, a module_input_name other than sentence_embedding, a
 * missing config.json or model.safetensors (pytorch_model.bin is not
 * read), a chain that does not end at hidden_size (staticlm's embeddings
 * are that wide). A Normalize module changes nothing: staticlm's embed
 * and serve normalize (L2) by default anyway (--embd-normalize).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/hf.h"

#ifndef SLM_HAVE_CJSON

int slm_hf_pooling(const char *dir) {
    (void)dir;
    return -1;
}

#else

#include <cJSON.h>

#include "common/json.h"

#define pstr slm_hf_pstr

/* A module's folder as modules.json names it: a plain relative path, no "..". */
static int module_path_ok(const char *v, size_t cap) {
    return v[0] && v[0] != '/' && !strstr(v, "..") && strlen(v) < cap;
}

/* The type's last component: "sentence_transformers.models.Dense" -> "Dense". */
static const char *type_tail(const char *t) {
    const char *d = strrchr(t, '.');
    return d ? d + 1 : t;
}

/* Dense module d's config.json (dir/d->path/config.json). */
static slm_status dense_config(const char *path, const char *dir, slm_hf_dense *d, slm_err *err) {
    char file[1400], shown[400], *buf = NULL, b[64];
    size_t len = 0;
    snprintf(file, sizeof file, "%s/%s/config.json", path, d->path);
    snprintf(shown, sizeof shown, "%s/%s/config.json", dir, pstr(d->path, b, sizeof b));
    slm_status s = slm_hf_read_small(file, shown, 1, &buf, &len, err);
    if (s) return s;
    cJSON *o = cJSON_ParseWithLength(buf, len);
    slm_xfree(buf);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return slm_errf(err, slm_json_oom() ? SLM_ERR_NOMEM : SLM_ERR_FORMAT, "%s: %s", shown,
                        slm_json_oom() ? "out of memory parsing the JSON" : "invalid JSON (an object expected)");
    }
    d->bias = 1;
    d->in = d->out = 0;
    if ((s = slm_hf_cfg_int(o, shown, "in_features", 1, &d->in, err)) ||
        (s = slm_hf_cfg_int(o, shown, "out_features", 1, &d->out, err)) ||
        (s = slm_hf_cfg_bool(o, shown, "bias", &d->bias, err)))
        goto out;
    if (d->in < 1 || d->in > (1 << 20) || d->out < 1 || d->out > (1 << 20)) {
        s = slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %d is out of range (1..1048576)", shown,
                     d->in < 1 || d->in > (1 << 20) ? "in_features" : "out_features",
                     d->in < 1 || d->in > (1 << 20) ? d->in : d->out);
        goto out;
    }
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "activation_function");
    d->act = SLM_DENSE_TANH; /* sentence-transformers' Dense default */
    if (a && !cJSON_IsNull(a)) {
        const char *v = cJSON_IsString(a) && a->valuestring ? a->valuestring : NULL;
        const char *tail = v ? type_tail(v) : "";
        if (v && !strcmp(tail, "Identity") && (v == tail || !strncmp(v, "torch.nn.", 9))) d->act = SLM_DENSE_IDENTITY;
        else if (v && !strcmp(tail, "Tanh") && (v == tail || !strncmp(v, "torch.nn.", 9))) d->act = SLM_DENSE_TANH;
        else {
            s = slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'activation_function': '%s' is not supported "
                         "(torch.nn.modules.linear.Identity, torch.nn.modules.activation.Tanh)", shown,
                         v ? pstr(v, b, sizeof b) : "?");
            goto out;
        }
    }
    const cJSON *mi = cJSON_GetObjectItemCaseSensitive(o, "module_input_name");
    if (mi && !cJSON_IsNull(mi) && !(cJSON_IsString(mi) && !strcmp(mi->valuestring, "sentence_embedding")))
        s = slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'module_input_name': '%s' is not supported (a Dense module "
                     "on the pooled vector: sentence_embedding)", shown,
                     cJSON_IsString(mi) ? pstr(mi->valuestring, b, sizeof b) : "?");
out:
    cJSON_Delete(o);
    return s;
}

/* Dense module d's weights file: model.safetensors, present and regular. */
static slm_status dense_weights(const char *path, const char *dir, const slm_hf_dense *d, slm_err *err) {
    char file[1400], b[64];
    struct stat st;
    snprintf(file, sizeof file, "%s/%s/model.safetensors", path, d->path);
    if (stat(file, &st) == 0 && S_ISREG(st.st_mode)) return SLM_OK;
    snprintf(file, sizeof file, "%s/%s/pytorch_model.bin", path, d->path);
    const int pt = stat(file, &st) == 0;
    return slm_errf(err, SLM_ERR_FORMAT, "%s/%s/model.safetensors: %s", dir, pstr(d->path, b, sizeof b),
                    pt ? "not found (pytorch_model.bin beside it is not read: save the module as safetensors)"
                       : "not found (the Dense module's weights)");
}

slm_status slm_hf_modules_read(const char *path, const char *dir, slm_hf_modules *mods, slm_err *err) {
    char file[1400], shown[400], *buf = NULL, b[64];
    size_t len = 0;
    memset(mods, 0, sizeof *mods);
    snprintf(file, sizeof file, "%s/modules.json", path);
    snprintf(shown, sizeof shown, "%s/modules.json", dir);
    slm_status s = slm_hf_read_small(file, shown, 0, &buf, &len, err);
    if (s || !buf) return s;
    slm_json_init_hooks();
    slm_json_oom_clear();
    cJSON *o = cJSON_ParseWithLength(buf, len);
    slm_xfree(buf);
    if (!cJSON_IsArray(o)) {
        cJSON_Delete(o);
        return slm_errf(err, slm_json_oom() ? SLM_ERR_NOMEM : SLM_ERR_FORMAT, "%s: %s", shown,
                        slm_json_oom() ? "out of memory parsing the JSON" : "invalid JSON (a list of modules expected)");
    }
    int k = 0, pooled = 0;
    for (const cJSON *e = o->child; e && !s; e = e->next, k++) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "type"), *p = cJSON_GetObjectItemCaseSensitive(e, "path");
        if (!cJSON_IsString(t) || !t->valuestring || (p && !cJSON_IsString(p))) {
            s = slm_errf(err, SLM_ERR_FORMAT, "%s: module %d: expected an object with a string 'type' and 'path'", shown, k);
            break;
        }
        if (k >= 64) {
            s = slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: more than 64 modules", shown);
            break;
        }
        const char *tail = type_tail(t->valuestring);
        if (!strcmp(tail, "Transformer")) continue;
        if (mods->normalize) {
            s = slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: module %d (%s) after Normalize is not supported", shown, k,
                         pstr(t->valuestring, b, sizeof b));
        } else if (!strcmp(tail, "Pooling")) {
            pooled = 1;
        } else if (!strcmp(tail, "Normalize")) {
            mods->normalize = 1;
        } else if (strcmp(tail, "Dense")) {
            s = slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: module %d: type '%s' is not supported (Transformer, Pooling, "
                         "Dense, Normalize)", shown, k, pstr(t->valuestring, b, sizeof b));
        } else if (!pooled) {
            s = slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: module %d: a Dense module before Pooling (on the token "
                         "embeddings) is not supported", shown, k);
        } else if (mods->n_dense == SLM_MAX_DENSE) {
            s = slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: more than %d Dense modules", shown, SLM_MAX_DENSE);
        } else if (!p || !module_path_ok(p->valuestring, sizeof mods->dense[0].path)) {
            s = slm_errf(err, SLM_ERR_FORMAT, "%s: module %d: key 'path': expected a folder inside the model's", shown, k);
        } else {
            slm_hf_dense *d = &mods->dense[mods->n_dense++];
            snprintf(d->path, sizeof d->path, "%s", p->valuestring);
            snprintf(d->name, sizeof d->name, "dense_%u", (unsigned)k % 1000u); /* k < 64 */
            if (!(s = dense_config(path, dir, d, err))) s = dense_weights(path, dir, d, err);
        }
    }
    cJSON_Delete(o);
    return s;
}

int slm_hf_dense_name(const slm_hf_dense *d, const char *hf, char *out, size_t cap, int *vec) {
    *vec = !strcmp(hf, "linear.bias");
    if (!*vec && strcmp(hf, "linear.weight")) return 0;
    snprintf(out, cap, "%s.%s", d->name, *vec ? "bias" : "weight");
    return 1;
}

slm_status slm_hf_dense_finish(slm_model_file *m, const slm_hf_modules *mods, const char *dir, slm_err *err) {
    int width = m->cfg.dim;
    char b[64];
    for (int k = 0; k < mods->n_dense; k++) {
        const slm_hf_dense *d = &mods->dense[k];
        char n[40];
        snprintf(n, sizeof n, "%s.weight", d->name);
        const slm_tensor *w = slm_model_tensor(m, n);
        snprintf(n, sizeof n, "%s.bias", d->name);
        const slm_tensor *bs = slm_model_tensor(m, n);
        const char *ps = pstr(d->path, b, sizeof b);
        if (!w || w->n_dims != 2 || w->ne[0] != d->in || w->ne[1] != d->out)
            return slm_errf(err, SLM_ERR_FORMAT, "%s/%s/model.safetensors: tensor 'linear.weight': %s, config.json "
                            "says [%d, %d] (out_features, in_features)", dir, ps, w ? "another shape" : "missing",
                            d->out, d->in);
        if (!bs != !d->bias || (bs && (bs->n_dims != 1 || bs->ne[0] != d->out)))
            return slm_errf(err, SLM_ERR_FORMAT, "%s/%s/model.safetensors: tensor 'linear.bias': %s, config.json "
                            "says bias %s (out_features %d)", dir, ps, bs ? "present" : "missing",
                            d->bias ? "true" : "false", d->out);
        if (d->in != width)
            return slm_errf(err, SLM_ERR_FORMAT, "%s/%s/config.json: key 'in_features': %d, the vector before it is "
                            "%d wide", dir, ps, d->in, width);
        width = d->out;
        m->dense[k].act = d->act;
        memcpy(m->dense[k].name, d->name, sizeof m->dense[k].name);
    }
    if (mods->n_dense && width != m->cfg.dim)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s/%s/config.json: key 'out_features': %d; staticlm's embeddings "
                        "are hidden_size (%d) wide, so the last Dense module must end there", dir,
                        pstr(mods->dense[mods->n_dense - 1].path, b, sizeof b), width, m->cfg.dim);
    m->n_dense = mods->n_dense;
    return SLM_OK;
}

/* The Pooling module's folder from modules.json (sentence-transformers:
 * [{"type": "...Pooling", "path": "1_Pooling"}, ...]): a plain relative
 * name, else "1_Pooling". */
static void pooling_dir(const char *dir, char *out, size_t cap) {
    char path[1100], *buf = NULL;
    size_t len = 0;
    slm_err err = {0};
    snprintf(out, cap, "1_Pooling");
    snprintf(path, sizeof path, "%s/modules.json", dir);
    if (slm_hf_read_small(path, "modules.json", 0, &buf, &len, &err) || !buf) return;
    cJSON *o = cJSON_ParseWithLength(buf, len);
    slm_xfree(buf);
    const cJSON *m, *arr = cJSON_IsArray(o) ? o : NULL;
    cJSON_ArrayForEach(m, arr) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(m, "type"), *p = cJSON_GetObjectItemCaseSensitive(m, "path");
        const size_t tl = cJSON_IsString(t) ? strlen(t->valuestring) : 0;
        if (tl < 7 || strcmp(t->valuestring + tl - 7, "Pooling") || !cJSON_IsString(p)) continue;
        if (module_path_ok(p->valuestring, cap)) snprintf(out, cap, "%s", p->valuestring);
        break;
    }
    cJSON_Delete(o);
}

int slm_hf_pooling(const char *dir) {
    char sub[256], path[1400];
    pooling_dir(dir, sub, sizeof sub);
    snprintf(path, sizeof path, "%s/%s/config.json", dir, sub);
    char *buf = NULL;
    size_t len = 0;
    slm_err err = {0};
    if (slm_hf_read_small(path, "the Pooling module's config.json", 0, &buf, &len, &err) || !buf) return -1;
    cJSON *o = cJSON_ParseWithLength(buf, len);
    slm_xfree(buf);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return -1;
    }
    /* the order llama.cpp's converter reads them in */
    static const struct { const char *key; int pooling; } modes[] = {
        {"pooling_mode_mean_tokens", 1}, {"pooling_mode_cls_token", 2}, {"pooling_mode_lasttoken", 3}};
    int p = -2; /* max, weighted mean, sqrt-length mean: not staticlm's */
    for (size_t i = 0; i < sizeof modes / sizeof modes[0] && p == -2; i++)
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, modes[i].key))) p = modes[i].pooling;
    const cJSON *pm = cJSON_GetObjectItemCaseSensitive(o, "pooling_mode");
    if (p == -2 && cJSON_IsString(pm))
        p = !strcmp(pm->valuestring, "mean") ? 1 : !strcmp(pm->valuestring, "cls") ? 2 : !strcmp(pm->valuestring, "lasttoken") ? 3 : -2;
    cJSON_Delete(o);
    return p;
}

#endif
