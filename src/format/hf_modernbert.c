/* ModernBERT folders (model_type "modernbert": ModernBertModel as
 * nomic-ai/modernbert-embed-base and Alibaba-NLP/gte-modernbert-base,
 * ModernBertForMaskedLM as answerdotai/ModernBERT-base): config.json ->
 * the config a GGUF of the same model gives (arch modern-bert, encoder 4;
 * format/encoder.c, gguf_model.c), and the tensors' GGUF names, as
 * llama.cpp's converter maps them:
 *
 *   embeddings.tok_embeddings.weight   token_embd.weight
 *   embeddings.norm.weight             token_embd_norm.weight
 *   final_norm.weight                  output_norm.weight
 *   layers.N.
 *     attn_norm.weight                 blk.N.attn_norm.weight (none on layer 0: x itself)
 *     attn.Wqkv.weight                 blk.N.attn_q / attn_k / attn_v.weight (Q rows, K, V;
 *                                      the converter's attn_qkv, split at load as a GGUF's)
 *     attn.Wo.weight                   blk.N.attn_output.weight
 *     mlp_norm.weight                  blk.N.ffn_norm.weight
 *     mlp.Wi.weight                    blk.N.ffn_gate / ffn_up.weight (the first half of the
 *                                      rows is the activated one: transformers' "input, gate
 *                                      = Wi(x).chunk(2)", act(input) * gate; the converter's
 *                                      ffn_up of 2 x intermediate_size, split so at load)
 *     mlp.Wo.weight                    blk.N.ffn_down.weight
 *
 * after an optional "model." prefix (ModernBertForMaskedLM). Its MLM head
 * (head.dense, head.norm, decoder) is not part of the encoder and is
 * skipped; anything else is refused by the loader. A reranker
 * (ModernBertForSequenceClassification: Alibaba-NLP/gte-reranker-modernbert-base)
 * keeps its head, unprefixed, as the converter maps it:
 *
 *   head.dense.weight (and .bias)      cls.weight (cls.bias: classifier_bias)
 *   head.norm.weight                   cls.norm.weight
 *   classifier.{weight,bias}           cls.output.{weight,bias} (the scores)
 *
 * run as the GGUF path runs a modern-bert classifier (engine/embed.c: rank
 * pooling over the rows classifier_pooling names, dense, GELU (tanh form),
 * LayerNorm, classifier): classifier_pooling "mean" (the mean of the rows,
 * the GGUF path's default, as llama.cpp's) or "cls" (the first row,
 * ModernBertConfig's default; a GGUF says it by
 * modern-bert.classifier.pooling_type 2), classifier_activation a GELU name, the scores id2label's entries (else
 * num_labels, else 2; 1..64), checked against classifier.weight's rows.
 *
 * The config: the sizes (required), max_position_embeddings (8192 when
 * absent, ModernBertConfig's), global_attn_every_n_layers (3: layer l
 * attends globally when l % it == 0, the others within local_attention / 2
 * rows on either side, llama.cpp's reading of the converter's
 * sliding_window and sliding_window_pattern), local_attention (128; or
 * sliding_window, transformers v5's half of it), global_rope_theta (160000:
 * the global layers' RoPE base, neox pairs), local_rope_theta (10000: the
 * window layers'), norm_eps (1e-5: what transformers runs; the converter
 * writes layer_norm_eps, the same in the releases), hidden_activation (gelu:
 * GeGLU, GELU's tanh form as llama.cpp's; silu or swish: SwiGLU, as
 * llama.cpp reads the converter's hidden_act). transformers v5 spells the
 * pattern layer_types (one "full_attention" or "sliding_attention" per
 * layer; ModernBertConfig derives it from global_attn_every_n_layers when
 * absent) and the bases rope_parameters ({"full_attention": {"rope_type":
 * "default", "rope_theta": ...}, "sliding_attention": {...}}; an entry
 * without rope_theta takes the older key's): both are read, and where both
 * spellings are given they must agree. layer_types runs when its global
 * layers are those of a period from layer 0 (or none: every layer slides),
 * the only patterns slm_model_config holds. What the graph does not run is
 * refused by key: norm_bias, attention_bias or mlp_bias true, another
 * activation, a local_attention of 1, a rope_type other than default,
 * rope_scaling, another layer_types pattern, another task head, a width
 * that the heads do not divide.
 */
#include <stdio.h>
#include <stdlib.h>

#include "format/hf.h"

#ifdef SLM_HAVE_CJSON

#include <cJSON.h>

#define pstr slm_hf_pstr

/* key, null counting as absent */
static const cJSON *mb_item(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

/* A RoPE base: finite and in (0, 1e12). */
static int theta_ok(double t) { return t > 0 && t < 1e12; }

/* rope_parameters' entry for one layer type (kind "full_attention" or
 * "sliding_attention"; old: the older key of its base, "global_rope_theta"
 * or "local_rope_theta", read into *theta when given): rope_type "default"
 * only; its rope_theta, else the older key's, else *theta (ModernBertConfig's
 * default). Both given must agree. */
static slm_status rope_entry(const cJSON *top, const cJSON *rp, const char *file, const char *kind, const char *old,
                             double *theta, slm_err *err) {
    slm_status s;
    char b[64];
    if ((s = slm_hf_cfg_num(top, file, old, theta, err))) return s;
    const cJSON *e = rp ? mb_item(rp, kind) : NULL;
    if (!e) return SLM_OK;
    if (!cJSON_IsObject(e))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'rope_parameters': '%s' must be an object", file, kind);
    const cJSON *t = mb_item(e, "rope_type");
    if (!t) t = mb_item(e, "type");
    if (t && (!cJSON_IsString(t) || strcmp(t->valuestring, "default")))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'rope_parameters': '%s' rope_type '%s' is not supported "
                        "(default: ModernBERT's plain RoPE)", file, kind,
                        cJSON_IsString(t) ? pstr(t->valuestring, b, sizeof b) : "?");
    const cJSON *th = mb_item(e, "rope_theta");
    if (!th) return SLM_OK;
    if (!cJSON_IsNumber(th) || !theta_ok(th->valuedouble))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'rope_parameters': '%s' rope_theta: expected a number in (0, 1e12)",
                        file, kind);
    if (mb_item(top, old) && *theta != th->valuedouble)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: keys 'rope_parameters' ('%s' rope_theta %g) and '%s' (%g) disagree",
                        file, kind, th->valuedouble, old, *theta);
    *theta = th->valuedouble;
    return SLM_OK;
}

/* The RoPE bases: global_rope_theta / local_rope_theta, or transformers
 * v5's rope_parameters keyed by layer type (an entry absent takes the older
 * key's or the default, as ModernBertConfig fills it in). rope_scaling is
 * refused: v5 would fold it into both entries, the older releases ignore it. */
static slm_status mb_rope(const cJSON *top, const char *file, double *g_theta, double *l_theta, slm_err *err) {
    slm_status s;
    char b[64];
    const cJSON *rp = mb_item(top, "rope_parameters");
    if (mb_item(top, "rope_scaling"))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'rope_scaling' is not supported for modernbert (plain RoPE: "
                        "rope_parameters' rope_type default)", file);
    if (rp && !cJSON_IsObject(rp))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'rope_parameters': expected an object", file);
    for (const cJSON *e = rp ? rp->child : NULL; e; e = e->next)
        if (!e->string || (strcmp(e->string, "full_attention") && strcmp(e->string, "sliding_attention")))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'rope_parameters': '%s' is not a layer type "
                            "(full_attention, sliding_attention: ModernBERT's entries)", file,
                            e->string ? pstr(e->string, b, sizeof b) : "?");
    if ((s = rope_entry(top, rp, file, "full_attention", "global_rope_theta", g_theta, err)) ||
        (s = rope_entry(top, rp, file, "sliding_attention", "local_rope_theta", l_theta, err)))
        return s;
    if (!theta_ok(*g_theta) || !theta_ok(*l_theta))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %g is out of range (0..1e12)", file,
                        theta_ok(*g_theta) ? "local_rope_theta" : "global_rope_theta",
                        theta_ok(*g_theta) ? *l_theta : *g_theta);
    return SLM_OK;
}

/* Which layers attend globally: global_attn_every_n_layers (layer l when
 * l % it == 0) or transformers v5's layer_types (one "full_attention" or
 * "sliding_attention" per layer). staticlm runs a fixed period with the
 * global layer first (or every layer in the window): *period is the older
 * key's when given, else layer_types' (0: every layer slides). Both given
 * must name the same layers. */
static slm_status mb_layers(const cJSON *top, const char *file, int n_layers, int *period, slm_err *err) {
    slm_status s;
    int every = 3; /* ModernBertConfig's */
    if ((s = slm_hf_cfg_int(top, file, "global_attn_every_n_layers", 0, &every, err))) return s;
    if (every > 65536)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'global_attn_every_n_layers': %d is out of range (1..65536)", file,
                        every);
    *period = every;
    const cJSON *lt = mb_item(top, "layer_types");
    if (!lt) return SLM_OK;
    if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != n_layers)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'layer_types': expected an array of %d strings (num_hidden_layers)",
                        file, n_layers);
    int l = 0, p = -1; /* p: the period layer_types gives, found at its second global layer */
    for (const cJSON *e = lt->child; e; e = e->next, l++) {
        const char *v = cJSON_IsString(e) ? e->valuestring : NULL;
        if (!v || (strcmp(v, "full_attention") && strcmp(v, "sliding_attention")))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'layer_types': element %d is not 'full_attention' or "
                            "'sliding_attention'", file, l);
        const int full = v[0] == 'f';
        if (l == 0) p = full ? -1 : 0;
        else if (p < 0 && full) p = l;
        const int want = p == 0 ? 0 : p < 0 ? l == 0 : l % p == 0;
        if (full != want && p)
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'layer_types': layer %d is '%s'; staticlm runs the "
                            "full-attention layers at a fixed period from layer 0 (here every %d, as layers 0 and %d "
                            "are), or none", file, l, v, p, p);
        if (full != want)
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'layer_types': layer %d is '%s' but layer 0 slides: "
                            "staticlm runs the full-attention layers at a fixed period from layer 0, or none", file, l, v);
    }
    if (p < 0) p = n_layers; /* layer 0 alone */
    for (l = 0; mb_item(top, "global_attn_every_n_layers") && l < n_layers; l++)
        if ((p == 0 ? 0 : l % p == 0) != (l % every == 0))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: keys 'layer_types' and 'global_attn_every_n_layers' (%d) disagree "
                            "at layer %d", file, every, l);
    if (!mb_item(top, "global_attn_every_n_layers")) *period = p;
    return SLM_OK;
}

/* The window: local_attention (all of it: l - it/2 .. l + it/2), or
 * sliding_window, transformers v5's half of it (setting it sets
 * local_attention to twice it); both given must agree. */
static slm_status mb_window(const cJSON *top, const char *file, int *window, slm_err *err) {
    slm_status s;
    int half = 0;
    if ((s = slm_hf_cfg_int(top, file, "local_attention", 0, window, err)) ||
        (s = slm_hf_cfg_int(top, file, "sliding_window", 0, &half, err)))
        return s;
    if (half > (1 << 24))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'sliding_window': %d is out of range (1..16777216)", file, half);
    if (half && mb_item(top, "local_attention") && *window != 2 * half)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: keys 'sliding_window' (%d) and 'local_attention' (%d) disagree "
                        "(sliding_window is half the window)", file, half, *window);
    if (half) *window = 2 * half;
    if (*window == 1)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'local_attention' = 1: a window of no neighbours is not "
                        "supported", file);
    return SLM_OK;
}

/* ModernBertForSequenceClassification's head as the GGUF path runs it
 * (engine/embed.c, llama.cpp's rank pooling): the mean of the rows
 * (classifier_pooling mean) or the first row (cls), head.dense (+ its bias with classifier_bias),
 * GELU (tanh form), the LayerNorm head.norm, then classifier. */
static slm_status mb_head(const cJSON *top, const char *file, slm_hf_info *h, slm_err *err) {
    slm_status s;
    char b[64];
    int gelu = 1;
    const cJSON *pool = mb_item(top, "classifier_pooling"), *labels = mb_item(top, "id2label");
    if (!pool) h->cls_pool = SLM_POOLING_CLS; /* ModernBertConfig's default */
    else if (cJSON_IsString(pool) && !strcmp(pool->valuestring, "mean")) h->cls_pool = SLM_POOLING_MEAN;
    else if (cJSON_IsString(pool) && !strcmp(pool->valuestring, "cls")) h->cls_pool = SLM_POOLING_CLS;
    else
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'classifier_pooling': '%s' is not supported (mean or cls)",
                        file, cJSON_IsString(pool) ? pstr(pool->valuestring, b, sizeof b) : "not a string");
    if ((s = slm_hf_cfg_act(top, file, "classifier_activation", 0, &gelu, err)) ||
        (s = slm_hf_cfg_bool(top, file, "classifier_bias", &h->cls_bias, err)))
        return s;
    h->n_labels = 2; /* PretrainedConfig's */
    if (labels && (!cJSON_IsObject(labels) || cJSON_GetArraySize(labels) < 1 || cJSON_GetArraySize(labels) > 64))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'id2label': expected an object of 1..64 labels (a reranker's "
                        "scores)", file);
    if (labels) h->n_labels = cJSON_GetArraySize(labels);
    else if ((s = slm_hf_cfg_int(top, file, "num_labels", 0, &h->n_labels, err)))
        return s;
    if (h->n_labels > 64)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'num_labels': %d is out of range (1..64 scores)", file,
                        h->n_labels);
    h->classifier = 1;
    return SLM_OK;
}

slm_status slm_hf_modernbert_config(const cJSON *top, const char *file, slm_model_config *c, slm_hf_info *h,
                                    slm_err *err) {
    slm_status s;
    double eps = 1e-5, g_theta = 160000.0, l_theta = 10000.0; /* ModernBertConfig's defaults */
    int every = 3, window = 128, gelu = 1;
    char b[64];
    memset(c, 0, sizeof *c);
    memset(h, 0, sizeof *h);
    c->context_len = 8192;
    if ((s = slm_hf_cfg_int(top, file, "hidden_size", 1, &c->dim, err)) ||
        (s = slm_hf_cfg_int(top, file, "intermediate_size", 1, &c->hidden_dim, err)) ||
        (s = slm_hf_cfg_int(top, file, "num_hidden_layers", 1, &c->n_layers, err)) ||
        (s = slm_hf_cfg_int(top, file, "num_attention_heads", 1, &c->n_heads, err)) ||
        (s = slm_hf_cfg_int(top, file, "vocab_size", 1, &c->vocab_size, err)) ||
        (s = slm_hf_cfg_int(top, file, "max_position_embeddings", 0, &c->context_len, err)) ||
        (s = slm_hf_cfg_num(top, file, "norm_eps", &eps, err)) ||
        (s = slm_hf_cfg_act(top, file, "hidden_activation", 1, &gelu, err)))
        return s;
    if ((s = mb_window(top, file, &window, err)) || (s = mb_layers(top, file, c->n_layers, &every, err)) ||
        (s = mb_rope(top, file, &g_theta, &l_theta, err)))
        return s;
    static const char *const biases[3] = {"norm_bias", "attention_bias", "mlp_bias"};
    for (int i = 0; i < 3; i++) {
        int on = 0;
        if ((s = slm_hf_cfg_bool(top, file, biases[i], &on, err))) return s;
        if (on)
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s' = true: staticlm runs ModernBERT without biases "
                            "(as llama.cpp)", file, biases[i]);
    }
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(top, "architectures");
    const cJSON *a0 = cJSON_IsArray(arch) ? cJSON_GetArrayItem(arch, 0) : NULL;
    const int seq = cJSON_IsString(a0) && !strcmp(a0->valuestring, "ModernBertForSequenceClassification");
    if (a0 && !seq && (!cJSON_IsString(a0) || (strcmp(a0->valuestring, "ModernBertModel") &&
                                               strcmp(a0->valuestring, "ModernBertForMaskedLM"))))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'architectures': '%s' is not supported (ModernBertModel, "
                        "ModernBertForMaskedLM: the encoder; ModernBertForSequenceClassification: a reranker; another "
                        "task head is not run)", file, cJSON_IsString(a0) ? pstr(a0->valuestring, b, sizeof b) : "?");
    if (seq && (s = mb_head(top, file, h, err))) return s;
    if (!(eps > 0 && eps < 1))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'norm_eps': %g is out of range (0..1)", file, eps);
    if (c->dim % c->n_heads)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'num_attention_heads' = %d does not divide 'hidden_size' = %d",
                        file, c->n_heads, c->dim);
    snprintf(c->arch, sizeof c->arch, "modern-bert");
    c->encoder = 4;
    c->rope_neox = 1;
    c->n_kv_heads = c->n_heads;
    c->head_dim = c->dim / c->n_heads;
    c->norm_eps = (float)eps;
    c->ffn_gelu = gelu;
    c->rope_base = (float)g_theta;
    c->rope_scale = 1.0f;
    /* the window as a GGUF's gives it (gguf_model.c): a global layer first in every period; a period of 1: none
     * slides; 0 (layer_types all sliding): every layer does */
    c->sliding_window = every == 1 ? 0 : window;
    c->swa_pattern = every == 1 ? 3 : every;
    c->rope_scale_swa = 1.0f;
    c->rope_base_swa = (float)l_theta;
    return SLM_OK;
}

#endif

int slm_hf_modernbert_name(const char *hf, const slm_hf_info *h, char *out, size_t cap, int *kind) {
    static const struct { const char *hf, *gg; int kind; } top[] = {
        {"embeddings.tok_embeddings.weight", "token_embd.weight", SLM_HF_ENC_MAT},
        {"embeddings.norm.weight", "token_embd_norm.weight", SLM_HF_ENC_VEC},
        {"final_norm.weight", "output_norm.weight", SLM_HF_ENC_VEC},
    };
    static const struct { const char *hf, *gg; int kind; } layer[] = {
        {"attn_norm.weight", "attn_norm.weight", SLM_HF_ENC_VEC},
        {"attn.Wqkv.weight", "attn_q.weight", SLM_HF_ENC_QKV},
        {"attn.Wo.weight", "attn_output.weight", SLM_HF_ENC_MAT},
        {"mlp_norm.weight", "ffn_norm.weight", SLM_HF_ENC_VEC},
        {"mlp.Wi.weight", "ffn_gate.weight", SLM_HF_ENC_GATE_UP},
        {"mlp.Wo.weight", "ffn_down.weight", SLM_HF_ENC_MAT},
    };
    static const struct { const char *hf, *gg; int kind; } head[] = { /* ModernBertForSequenceClassification's */
        {"head.dense.weight", "cls.weight", SLM_HF_ENC_MAT},
        {"head.norm.weight", "cls.norm.weight", SLM_HF_ENC_VEC},
        {"classifier.weight", "cls.output.weight", SLM_HF_ENC_MAT},
        {"classifier.bias", "cls.output.bias", SLM_HF_ENC_VEC},
        {"head.dense.bias", "cls.bias", SLM_HF_ENC_VEC}, /* with classifier_bias (checked at finish) */
    };
    *kind = SLM_HF_ENC_MAT;
    for (size_t i = 0; h->classifier && i < sizeof head / sizeof head[0]; i++)
        if (!strcmp(hf, head[i].hf)) {
            *kind = head[i].kind;
            snprintf(out, cap, "%s", head[i].gg);
            return 1;
        }
    if (!h->classifier && (!strncmp(hf, "head.", 5) || !strncmp(hf, "decoder.", 8)))
        return 2; /* ModernBertForMaskedLM's head */
    if (!strncmp(hf, "model.", 6)) hf += 6;
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (!strcmp(hf, top[i].hf)) {
            *kind = top[i].kind;
            snprintf(out, cap, "%s", top[i].gg);
            return 1;
        }
    long n = 0;
    const char *p = slm_hf_layer(hf, "layers.", &n);
    for (size_t i = 0; p && i < sizeof layer / sizeof layer[0]; i++)
        if (!strcmp(p, layer[i].hf)) {
            *kind = layer[i].kind;
            snprintf(out, cap, "blk.%ld.%s", n, layer[i].gg);
            return 1;
        }
    return 0;
}

/* One tensor of the classifier head: present, [ne1][ne0] (ne1 0: a vector of ne0). */
static slm_status head_tensor(const slm_model_file *m, const char *dir, const char *gn, const char *hf, int64_t ne0,
                              int64_t ne1, const char *why, slm_err *err) {
    const slm_tensor *t = slm_model_tensor(m, gn);
    if (!t)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s' is missing (ModernBertForSequenceClassification's "
                        "head%s)", dir, hf, why);
    if (t->n_dims != (ne1 ? 2u : 1u) || t->ne[0] != ne0 || (ne1 && t->ne[1] != ne1)) {
        char have[48], want[48];
        if (t->n_dims == 2) snprintf(have, sizeof have, "[%lld, %lld]", (long long)t->ne[1], (long long)t->ne[0]);
        else snprintf(have, sizeof have, "%u dimensions, %lld values", t->n_dims, (long long)t->ne[0]);
        if (ne1) snprintf(want, sizeof want, "[%lld, %lld]", (long long)ne1, (long long)ne0);
        else snprintf(want, sizeof want, "[%lld]", (long long)ne0);
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': %s, want %s%s", dir, hf, have, want, why);
    }
    return SLM_OK;
}

slm_status slm_hf_modernbert_finish(slm_model_file *m, const slm_hf_info *h, const char *dir, slm_err *err) {
    if (!h->classifier) return SLM_OK;
    m->cls_pool = h->cls_pool;
    const int64_t D = m->cfg.dim, L = h->n_labels;
    slm_status s;
    if ((s = head_tensor(m, dir, "cls.weight", "head.dense.weight", D, D, "", err)) ||
        (s = head_tensor(m, dir, "cls.norm.weight", "head.norm.weight", D, 0, "", err)) ||
        (s = head_tensor(m, dir, "cls.output.weight", "classifier.weight", D, L,
                         " (config.json's labels: id2label, else num_labels, else 2)", err)) ||
        (s = head_tensor(m, dir, "cls.output.bias", "classifier.bias", L, 0, "", err)) ||
        (h->cls_bias && (s = head_tensor(m, dir, "cls.bias", "head.dense.bias", D, 0, ": classifier_bias is true", err))))
        return s;
    if (!h->cls_bias && slm_model_tensor(m, "cls.bias"))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor 'head.dense.bias', but config.json's 'classifier_bias' is not "
                        "true", dir);
    return SLM_OK;
}
