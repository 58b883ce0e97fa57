/* nomic-embed-text folders (model_type "nomic_bert", NomicBertModel:
 * nomic-embed-text-v1.5 and v2-moe as the Hub has them): config.json ->
 * the config a GGUF of the same model gives (arch nomic-bert, or
 * nomic-bert-moe when moe_every_n_layers is set; format/encoder.c), and
 * the tensors' GGUF names, as llama.cpp's converter maps them:
 *
 *   embeddings.word_embeddings.weight        token_embd.weight
 *   embeddings.token_type_embeddings.weight  token_types.weight
 *   emb_ln.{weight,bias}                     token_embd_norm.{weight,bias}
 *   encoder.layers.N.
 *     attn.Wqkv.{weight,bias}                blk.N.attn_{q,k,v}.*  (Q rows, then K, then V: split as
 *                                            the GGUF loader splits attn_qkv)
 *     attn.out_proj.*                        blk.N.attn_output.*
 *     norm1.*                                blk.N.attn_output_norm.*
 *     mlp.fc11.weight, mlp.fc12.weight       blk.N.ffn_up.weight, blk.N.ffn_gate.weight (v1.5's SwiGLU:
 *                                            fc11(x) * silu(fc12(x)))
 *     mlp.fc1.*, mlp.fc2.*                   blk.N.ffn_up.*, blk.N.ffn_down.* (fc2: both variants)
 *     mlp.router.layer.weight                blk.N.ffn_gate_inp.weight   (v2-moe's MoE layers)
 *     mlp.experts.mlp.w1 [E x F, D]          blk.N.ffn_up.E.weight: rows [eF, eF + F), no copy
 *     mlp.experts.mlp.w2 [E x F, D]          blk.N.ffn_down.E.weight: expert e's [F, D] transposed
 *                                            into the anonymous area (SLM_HF_MAKE_T)
 *     norm2.*                                blk.N.layer_output_norm.*
 *
 * after an optional "bert." prefix; the experts may also come as [E, F, D].
 * token_types and the router are kept in f32 (converted when the folder's
 * are F16 / BF16), as the converter writes them.
 * mlp.experts.bias (added after the experts' weighted sum) is skipped, as
 * the converter drops it and llama.cpp's graph runs without it.
 *
 * The config: n_embd, n_inner, n_layer, n_head, vocab_size, n_positions,
 * layer_norm_epsilon and rotary_emb_fraction required; rotary_emb_base
 * (10000 when absent), type_vocab_size (2), max_trained_positions (2048).
 * The context is the converter's: 2048 for n_positions 8192 with 2048
 * trained (v1 and v1.5), 512 for 2048 with 2048 (v2-moe); else the smaller
 * of the two. nomic-bert-moe: num_experts and moe_top_k, experts on layer l
 * when l % moe_every_n_layers == 1 (none for 1), softmax routing, top K
 * weights not renormalized. Refused by key: prenorm, causal,
 * rotary_emb_interleaved, parallel_block or use_rms_norm true;
 * rotary_emb_fraction other than 1; rotary_emb_scale_base set;
 * activation_function other than swiglu (nomic-bert) or gelu (nomic-bert-moe,
 * run as GELU's tanh form); qkv_proj_bias / mlp_fc1_bias / mlp_fc2_bias
 * (NomicBertConfig's default true) other than the converter's (true with
 * experts, false without); moe_normalize_expert_weights or
 * expert_choice_router true; num_shared_experts above 0. The biases the keys
 * promise must be there (slm_hf_nomic_finish) and those they deny absent.
 */
#include <stdio.h>
#include <stdlib.h>

#include "format/hf.h"

#ifdef SLM_HAVE_CJSON

#include <cJSON.h>

#define pstr slm_hf_pstr

/* An integer key in lo..hi (absent or null: *v kept). */
static slm_status cfg_range(const cJSON *o, const char *file, const char *key, int lo, int hi, int *v, slm_err *err) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!x || cJSON_IsNull(x)) return SLM_OK;
    if (!cJSON_IsNumber(x) || x->valuedouble < lo || x->valuedouble > hi || x->valuedouble != (int)x->valuedouble)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected an integer in %d..%d", file, key, lo, hi);
    *v = (int)x->valuedouble;
    return SLM_OK;
}

/* Keys that must be false (or absent / null), then those that must be null. */
static slm_status refused_keys(const cJSON *top, const char *file, slm_err *err) {
    static const char *const falses[] = {"prenorm", "causal", "rotary_emb_interleaved", "parallel_block", "use_rms_norm",
                                         "moe_normalize_expert_weights", "expert_choice_router"};
    static const char *const why[] = {"the norms come after each block (post-norm) only", "an encoder attends both ways",
                                      "RoPE on halves (neox) only", "attention and MLP one after the other only",
                                      "LayerNorm only", "the top K weights are used as they are (llama.cpp)",
                                      "tokens choose their experts only"};
    slm_status s;
    for (size_t i = 0; i < sizeof falses / sizeof falses[0]; i++) {
        int v = 0;
        if (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(top, falses[i]))) continue;
        if ((s = slm_hf_cfg_bool(top, file, falses[i], &v, err))) return s;
        if (v) return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s' = true is not supported (%s)", file, falses[i], why[i]);
    }
    const cJSON *sb = cJSON_GetObjectItemCaseSensitive(top, "rotary_emb_scale_base");
    if (sb && !cJSON_IsNull(sb))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'rotary_emb_scale_base': xPos scaling is not supported (null only)",
                        file);
    int shared = 0;
    if ((s = cfg_range(top, file, "num_shared_experts", 0, 1024, &shared, err))) return s;
    if (shared)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'num_shared_experts' = %d: shared experts are not supported", file,
                        shared);
    return SLM_OK;
}

/* The context: the converter's rule (see above). */
static slm_status context(const cJSON *top, const char *file, slm_model_config *c, slm_err *err) {
    int npos = 0, trained = 2048;
    slm_status s;
    if ((s = slm_hf_cfg_int(top, file, "n_positions", 1, &npos, err)) ||
        (s = slm_hf_cfg_int(top, file, "max_trained_positions", 0, &trained, err)))
        return s;
    c->context_len = npos == 8192 && trained == 2048 ? 2048 : npos == 2048 && trained == 2048 ? 512
                     : npos < trained ? npos : trained;
    return SLM_OK;
}

/* activation_function: swiglu without experts, gelu with them (the converter's and the graph's). */
static slm_status activation(const cJSON *top, const char *file, int moe, slm_err *err) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(top, "activation_function");
    const char *want = moe ? "gelu" : "swiglu";
    char b[64];
    if (!a) return slm_errf(err, SLM_ERR_FORMAT, "%s: missing required key 'activation_function'", file);
    if (!cJSON_IsString(a) || strcmp(a->valuestring, want))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'activation_function': '%s' is not supported (%s: %s)", file,
                        cJSON_IsString(a) ? pstr(a->valuestring, b, sizeof b) : "?",
                        moe ? "with experts (moe_every_n_layers)" : "without experts", want);
    return SLM_OK;
}

/* qkv_proj_bias, mlp_fc1_bias, mlp_fc2_bias (NomicBertConfig's default true): as the converter wants them. */
static slm_status biases(const cJSON *top, const char *file, int moe, slm_hf_info *h, slm_err *err) {
    static const char *const keys[3] = {"qkv_proj_bias", "mlp_fc1_bias", "mlp_fc2_bias"};
    slm_status s;
    h->nomic_bias = 0;
    for (int i = 0; i < 3; i++) {
        int v = 1;
        if ((s = slm_hf_cfg_bool(top, file, keys[i], &v, err))) return s;
        if (v != moe)
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s' = %s%s: nomic-bert%s runs %s", file, keys[i],
                            v ? "true" : "false", cJSON_GetObjectItemCaseSensitive(top, keys[i]) ? "" : " (absent: the default)",
                            moe ? "-moe" : "", moe ? "with biases (true)" : "without biases (false)");
        h->nomic_bias |= v << i;
    }
    return SLM_OK;
}

/* The experts (moe_every_n_layers > 0: arch nomic-bert-moe). */
static slm_status experts(const cJSON *top, const char *file, slm_model_config *c, slm_err *err) {
    int every = 0, n = 0, used = 0;
    slm_status s;
    if ((s = cfg_range(top, file, "moe_every_n_layers", 0, 255, &every, err))) return s;
    if (!every) return SLM_OK;
    snprintf(c->arch, sizeof c->arch, "nomic-bert-moe");
    c->encoder = 6;
    if (every < 2 || c->n_layers < 2) return SLM_OK; /* no layer has experts (l % every == 1 never holds) */
    if ((s = slm_hf_cfg_int(top, file, "num_experts", 1, &n, err)) || (s = slm_hf_cfg_int(top, file, "moe_top_k", 1, &used, err)))
        return s;
    if (n > 1024) return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'num_experts' = %d is out of range (1..1024)", file, n);
    if (used > n || used > 64)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'moe_top_k' = %d: more than the %d experts (or 64)", file, used, n);
    c->n_experts = n;
    c->n_experts_used = used;
    c->moe_every = (uint8_t)every;
    c->expert_ungated = 1;
    return SLM_OK;
}

slm_status slm_hf_nomic_config(const cJSON *top, const char *file, slm_model_config *c, slm_hf_info *h, slm_err *err) {
    slm_status s;
    double eps = 0, base = 10000.0, frac = 0;
    int types = 2;
    memset(c, 0, sizeof *c);
    snprintf(c->arch, sizeof c->arch, "nomic-bert");
    c->encoder = 2;
    if ((s = slm_hf_cfg_int(top, file, "n_embd", 1, &c->dim, err)) ||
        (s = slm_hf_cfg_int(top, file, "n_inner", 1, &c->hidden_dim, err)) ||
        (s = slm_hf_cfg_int(top, file, "n_layer", 1, &c->n_layers, err)) ||
        (s = slm_hf_cfg_int(top, file, "n_head", 1, &c->n_heads, err)) ||
        (s = slm_hf_cfg_int(top, file, "vocab_size", 1, &c->vocab_size, err)) ||
        (s = slm_hf_cfg_int(top, file, "type_vocab_size", 0, &types, err)) || (s = context(top, file, c, err)) ||
        (s = slm_hf_cfg_num(top, file, "rotary_emb_base", &base, err)) || (s = refused_keys(top, file, err)) ||
        (s = experts(top, file, c, err)) || (s = activation(top, file, c->encoder == 6, err)) ||
        (s = biases(top, file, c->encoder == 6, h, err)))
        return s;
    static const char *const req[2] = {"layer_norm_epsilon", "rotary_emb_fraction"};
    for (int i = 0; i < 2; i++)
        if (!cJSON_GetObjectItemCaseSensitive(top, req[i]) || cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(top, req[i])))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: missing required key '%s'", file, req[i]);
    if ((s = slm_hf_cfg_num(top, file, "layer_norm_epsilon", &eps, err)) ||
        (s = slm_hf_cfg_num(top, file, "rotary_emb_fraction", &frac, err)))
        return s;
    if (frac != 1.0)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'rotary_emb_fraction' = %g: RoPE over part of each head is not "
                        "supported (1.0 only)", file, frac);
    if (!(eps > 0 && eps < 1))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'layer_norm_epsilon': %g is out of range (0..1)", file, eps);
    if (!(base > 0 && base < 1e12))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'rotary_emb_base': %g is out of range (0..1e12)", file, base);
    if (types > 1024)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'type_vocab_size': %d is out of range (1..1024)", file, types);
    if (c->dim % c->n_heads || (c->dim / c->n_heads) % 2)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'n_head' = %d does not divide 'n_embd' = %d into even heads", file,
                        c->n_heads, c->dim);
    c->n_kv_heads = c->n_heads;
    c->head_dim = c->dim / c->n_heads;
    c->norm_eps = (float)eps;
    c->rope_base = (float)base;
    c->rope_scale = 1.0f;
    c->rope_neox = 1;
    h->type_vocab = types;
    return SLM_OK;
}

int slm_hf_nomic_name(const char *hf, int moe, char *out, size_t cap, int *what) {
    static const struct { const char *hf, *gg; } top[] = {
        {"embeddings.word_embeddings.weight", "token_embd.weight"},
        {"embeddings.token_type_embeddings.weight", "token_types.weight"},
        {"emb_ln.weight", "token_embd_norm.weight"},
        {"emb_ln.bias", "token_embd_norm.bias"},
    };
    /* what: 0 a matrix (its bias a vector), 1 f32 (the router: as the converter keeps it), 2 the fused Q/K/V;
     * arch: 0 both, 1 nomic-bert only, 2 -moe only */
    static const struct { const char *hf, *gg; int what, arch; } layer[] = {
        {"attn.Wqkv.", "attn_q.", 2, 0},       {"attn.out_proj.", "attn_output.", 0, 0},
        {"norm1.", "attn_output_norm.", 0, 0}, {"norm2.", "layer_output_norm.", 0, 0},
        {"mlp.fc11.", "ffn_up.", 0, 1},        {"mlp.fc12.", "ffn_gate.", 0, 1},
        {"mlp.fc1.", "ffn_up.", 0, 2},         {"mlp.fc2.", "ffn_down.", 0, 0},
        {"mlp.router.layer.", "ffn_gate_inp.", 1, 2},
    };
    *what = 0;
    if (!strncmp(hf, "bert.", 5)) hf += 5;
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (!strcmp(hf, top[i].hf)) {
            *what = i >= 1; /* token_types: f32, as the converter keeps it */
            snprintf(out, cap, "%s", top[i].gg);
            return 1;
        }
    const char *p = hf + 15;
    if (strncmp(hf, "encoder.layers.", 15)) return 0;
    long n = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 6; p++, digits++) n = n * 10 + (*p - '0');
    if (!digits || *p != '.' || (digits > 1 && p[-digits] == '0') || n > 65535) return 0;
    p++;
    if (moe && !strcmp(p, "mlp.experts.bias")) return 2; /* dropped, as the converter drops it */
    if (moe && (!strcmp(p, "mlp.experts.mlp.w1") || !strcmp(p, "mlp.experts.mlp.w2"))) {
        *what = 3;
        snprintf(out, cap, "blk.%ld.ffn_%s_exps.weight", n, p[17] == '1' ? "up" : "down");
        return 1;
    }
    for (size_t i = 0; i < sizeof layer / sizeof layer[0]; i++) {
        const size_t k = strlen(layer[i].hf);
        if (strncmp(p, layer[i].hf, k) || (strcmp(p + k, "weight") && strcmp(p + k, "bias")) ||
            (layer[i].arch && layer[i].arch != 1 + moe))
            continue;
        const int bias = p[k] == 'b';
        if (bias && i == sizeof layer / sizeof layer[0] - 1) return 0; /* the router (last) has no bias */
        *what = layer[i].what ? layer[i].what : bias || !strncmp(layer[i].hf, "norm", 4);
        snprintf(out, cap, "blk.%ld.%s%s", n, layer[i].gg, bias ? "bias" : "weight");
        return 1;
    }
    return 0;
}

slm_status slm_hf_nomic_plan(const slm_hf_oss_io *io, int i, const char *shown, const slm_st_tensor *t, const char *gn,
                             const slm_model_config *c, slm_err *err) {
    const int64_t E = c->n_experts, F = c->hidden_dim, D = c->dim;
    const int l = atoi(gn + 4), up = strstr(gn, "_up_") != NULL; /* "blk.N.ffn_{up,down}_exps.weight" */
    char b[112], sh[96];
    if (!slm_layer_moe(c, l))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': layer %d has no experts (moe_every_n_layers = %d: layers "
                        "l %% %d == 1)", shown, slm_hf_tname(t->name, b, sizeof b), l, c->moe_every, c->moe_every);
    const int flat = t->n_dims == 2 && t->shape[0] == E * F && t->shape[1] == D;
    if (!slm_hf_float(t->type) || !(flat || (t->n_dims == 3 && t->shape[0] == E && t->shape[1] == F && t->shape[2] == D))) {
        slm_fmt_shape(sh, sizeof sh, t->shape, t->n_dims);
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': %s %s, the config needs F32/F16/BF16 [%lld, %lld] or [%lld, "
                        "%lld, %lld] (num_experts x n_inner, n_embd)", shown, slm_hf_tname(t->name, b, sizeof b),
                        slm_hf_dtype(t->type), sh, (long long)(E * F), (long long)D, (long long)E, (long long)F, (long long)D);
    }
    char name[64];
    slm_status s;
    if (up) { /* expert e's up: rows [eF, eF + F) as they are */
        for (int64_t e = 0; e < E; e++) {
            snprintf(name, sizeof name, "blk.%d.ffn_up.%lld.weight", l, (long long)e);
            if ((s = io->take_range(io->L, i, t, name, 0, e * F, F))) return s;
        }
        return SLM_OK;
    }
    slm_hf_made mk; /* expert e's down [D, F]: the transpose of its [F, D] rows */
    memset(&mk, 0, sizeof mk);
    mk.src = t, mk.op = SLM_HF_MAKE_T, mk.type = t->type, mk.n_dims = 2, mk.ne0 = F;
    return slm_hf_take_parts(io, i, c, l, 0, 0, mk, err);
}

slm_status slm_hf_nomic_finish(slm_model_file *m, const slm_hf_info *h, const char *dir, slm_err *err) {
    const slm_model_config *c = &m->cfg;
    /* per layer: the GGUF name, the HF name, the bias key saying whether it is there (bit of nomic_bias;
     * -1: the layer's kind says), on which layers (0 dense, 1 MoE, 2 both) */
    static const struct { const char *gg, *hf; int key, where; } k[] = {
        {"attn_q.bias", "attn.Wqkv.bias", 0, 2},     {"attn_output.bias", "attn.out_proj.bias", 0, 2},
        {"ffn_up.bias", "mlp.fc1.bias", 1, 0},       {"ffn_down.bias", "mlp.fc2.bias", 2, 0},
        {"ffn_gate_inp.weight", "mlp.router.layer.weight", -1, 1}, {"ffn_up.weight", "mlp.fc1.weight", -1, 0},
        {"ffn_down.weight", "mlp.fc2.weight", -1, 0},
    };
    static const char *const keys[3] = {"qkv_proj_bias", "mlp_fc1_bias", "mlp_fc2_bias"};
    for (int l = 0; l < c->n_layers; l++)
        for (size_t j = 0; j < sizeof k / sizeof k[0]; j++) {
            char name[64];
            const int moe = slm_layer_moe(c, l), here = k[j].where == 2 || k[j].where == moe;
            const int want = here && (k[j].key < 0 || (h->nomic_bias >> k[j].key & 1));
            snprintf(name, sizeof name, "blk.%d.%s", l, k[j].gg);
            const int has = slm_model_tensor(m, name) != NULL;
            if (has == want || (!has && k[j].key < 0 && j > 4)) continue; /* a dense layer's own: the encoder's checks */
            if (k[j].key >= 0 && here)
                return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor 'encoder.layers.%d.%s' %s, config.json's '%s' is %s", dir,
                                l, k[j].hf, has ? "present" : "missing", keys[k[j].key], want ? "true" : "false");
            return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor 'encoder.layers.%d.%s' %s: layer %d is %s", dir, l, k[j].hf,
                            has ? "present" : "missing", l, moe ? "an MoE layer (moe_every_n_layers)" : "a dense layer");
        }
    return SLM_OK;
}

#endif
