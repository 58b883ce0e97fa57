/* Gemma 4 (general.architecture gemma4): its keys, and the checks of its
 * config and tensors. The two kinds of layer (sliding window and global)
 * differ in head size, KV heads and rotated dimensions; the last
 * shared_kv_layers layers attend over an earlier layer's cache; per-layer
 * embeddings feed every layer (E2B, E4B). Each rule is llama.cpp's
 * (src/models/gemma4.cpp, llama-hparams). */
#include <math.h>
#include <stdio.h>

#include "format/model.h"

/* An integer key (absent: *v unchanged unless required). */
static slm_status key_int(const slm_gguf *g, const char *file, const char *key, int required, int lo, int hi, int *v,
                          slm_err *err) {
    if (slm_gguf_find(g, key) < 0)
        return required ? slm_errf(err, SLM_ERR_FORMAT, "%s: missing required key '%s'", file, key) : SLM_OK;
    int64_t x;
    if (!slm_gguf_get_i64(g, key, &x)) return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected an integer", file, key);
    if (x < lo || x > hi)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %lld is out of range (%d..%d)", file, key, (long long)x, lo, hi);
    *v = (int)x;
    return SLM_OK;
}

/* Element i of an integer array of GGUF type et (0 when not an integer type). */
static int64_t arr_int(slm_gguf_type et, const void *data, uint64_t i, int *ok) {
    *ok = 1;
    switch (et) {
    case SLM_GGUF_U8: return ((const uint8_t *)data)[i];
    case SLM_GGUF_I8: return ((const int8_t *)data)[i];
    case SLM_GGUF_U16: { uint16_t v; memcpy(&v, (const uint8_t *)data + 2 * i, 2); return v; }
    case SLM_GGUF_I16: { int16_t v; memcpy(&v, (const uint8_t *)data + 2 * i, 2); return v; }
    case SLM_GGUF_U32: { uint32_t v; memcpy(&v, (const uint8_t *)data + 4 * i, 4); return v; }
    case SLM_GGUF_I32: { int32_t v; memcpy(&v, (const uint8_t *)data + 4 * i, 4); return v; }
    case SLM_GGUF_U64: { uint64_t v; memcpy(&v, (const uint8_t *)data + 8 * i, 8); return v > INT64_MAX ? -1 : (int64_t)v; }
    case SLM_GGUF_I64: { int64_t v; memcpy(&v, (const uint8_t *)data + 8 * i, 8); return v; }
    default: *ok = 0; return 0;
    }
}

/* A key that is one integer for every layer or a list of one per layer
 * (llama.cpp's get_key_or_arr), whose values may differ only by the kind
 * of layer kind(c, l) says (0 or 1): out[0] and out[1] receive the value of
 * each kind (the same when one integer; a kind no layer has keeps *dflt).
 * A list that differs within a kind is refused naming the layer. */
static slm_status key_by_kind(const slm_gguf *g, const char *file, const char *key, int required, const slm_model_config *c,
                              int (*kind)(const slm_model_config *, int), const char *what, int out[2], slm_err *err) {
    if (slm_gguf_find(g, key) < 0)
        return required ? slm_errf(err, SLM_ERR_FORMAT, "%s: missing required key '%s'", file, key) : SLM_OK;
    int64_t x;
    if (slm_gguf_get_i64(g, key, &x)) {
        if (x < 1 || x > (1 << 22))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %lld is out of range (1..%d)", file, key, (long long)x, 1 << 22);
        out[0] = out[1] = (int)x;
        return SLM_OK;
    }
    slm_gguf_type et;
    uint64_t n;
    const void *data;
    if (!slm_gguf_get_arr(g, key, &et, &n, &data))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected an integer or a list of integers", file, key);
    if (n != (uint64_t)c->n_layers)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %llu entries for %d layers", file, key, (unsigned long long)n,
                        c->n_layers);
    int seen[2] = {0, 0};
    for (int l = 0; l < c->n_layers; l++) {
        int ok;
        const int64_t v = arr_int(et, data, (uint64_t)l, &ok);
        if (!ok) return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected a list of integers", file, key);
        if (v < 1 || v > (1 << 22))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': layer %d: %lld is out of range (1..%d)", file, key, l,
                            (long long)v, 1 << 22);
        const int k = kind(c, l);
        if (seen[k] && out[k] != (int)v)
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': layer %d: %lld where an earlier %s layer has %d "
                            "(staticlm takes one value per kind of layer)", file, key, l, (long long)v, what, out[k]);
        out[k] = (int)v;
        seen[k] = 1;
    }
    if (!seen[0]) out[0] = out[1];
    if (!seen[1]) out[1] = out[0];
    return SLM_OK;
}

static int kind_swa(const slm_model_config *c, int l) { return slm_layer_swa(c, l); }
static int kind_shared(const slm_model_config *c, int l) { return !slm_layer_has_kv(c, l); }
static int kind_none(const slm_model_config *c, int l) { (void)c; (void)l; return 0; }

/* attention.sliding_window_pattern: the per-layer list (true = sliding)
 * llama.cpp reads for gemma4. staticlm runs a period p (the window on layer
 * l when l % p < p - 1): the list must be one, or it is refused naming the
 * layer. */
static slm_status window_list(const slm_gguf *g, const char *file, const char *key, slm_model_config *c, slm_err *err) {
    slm_gguf_type et;
    uint64_t n;
    const void *data;
    if (slm_gguf_find(g, key) < 0) return slm_errf(err, SLM_ERR_FORMAT, "%s: missing required key '%s'", file, key);
    if (!slm_gguf_get_arr(g, key, &et, &n, &data) || (et != SLM_GGUF_BOOL && et != SLM_GGUF_U8))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': expected a list of booleans, one per layer", file, key);
    if (n != (uint64_t)c->n_layers)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %llu entries for %d layers", file, key, (unsigned long long)n,
                        c->n_layers);
    const uint8_t *b = data;
    int first_global = -1;
    for (int l = 0; l < c->n_layers && first_global < 0; l++)
        if (!b[l]) first_global = l;
    if (first_global < 0) c->swa_pattern = 0;         /* every layer slides */
    else if (first_global == 0) c->sliding_window = 0; /* must be none: checked below */
    else c->swa_pattern = first_global + 1;
    for (int l = 0; l < c->n_layers; l++)
        if ((b[l] != 0) != slm_layer_swa(c, l))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': layer %d %s the window; staticlm runs it on %d of "
                            "every %d layers (from the first global layer)", file, key, l, b[l] ? "has" : "has no",
                            c->swa_pattern - 1, c->swa_pattern);
    return SLM_OK;
}

slm_status slm_gguf_gemma4_shape(const slm_gguf *g, const char *file, slm_model_config *c, slm_err *err) {
    char key[96];
    slm_status s;
#define KEY(suffix) (snprintf(key, sizeof key, "gemma4." suffix), key)
    if ((s = key_int(g, file, KEY("block_count"), 1, 1, 1 << 16, &c->n_layers, err))) return s;
    if ((s = key_int(g, file, KEY("attention.sliding_window"), 1, 1, 1 << 24, &c->sliding_window, err))) return s;
    if ((s = window_list(g, file, KEY("attention.sliding_window_pattern"), c, err))) return s;
    if ((s = key_int(g, file, KEY("attention.shared_kv_layers"), 0, 0, c->n_layers, &c->kv_shared, err))) return s;
    int v[2] = {0, 0};
    if ((s = key_by_kind(g, file, KEY("attention.head_count"), 1, c, kind_none, "", v, err))) return s;
    c->n_heads = v[0];
    if ((s = key_by_kind(g, file, KEY("attention.head_count_kv"), 0, c, kind_swa, "window", v, err))) return s;
    c->n_kv_heads = v[0] ? v[0] : c->n_heads;
    c->n_kv_heads_swa = v[1] && v[1] != c->n_kv_heads ? v[1] : 0;
    v[0] = v[1] = 0;
    if ((s = key_by_kind(g, file, KEY("feed_forward_length"), 1, c, kind_shared, "KV-shared", v, err))) return s;
    c->hidden_dim = v[0];
    c->hidden_dim_shared = v[1] != v[0] ? v[1] : 0;
#undef KEY
    return SLM_OK;
}

/* Gemma 4 with experts (26B-A4B; llama.cpp's keys and gemma4 graph): the
 * expert_count experts of width expert_feed_forward_length, expert_used_count
 * of them per row, beside the dense FFN of every layer (feed_forward_length,
 * which becomes dense_ffn). llama.cpp's gemma4 graph fixes the routing
 * (softmax, the top K renormalized, no weight scale, no shared experts,
 * no groups): a file that asks for another is refused naming the key. Every
 * layer must have the router (the tensors' check names a missing one). */
static slm_status expert_params(const slm_gguf *g, const char *file, slm_model_config *c, slm_err *err) {
    char key[96];
    slm_status s;
#define KEY(suffix) (snprintf(key, sizeof key, "gemma4." suffix), key)
    int n = 0, used = 0, width = 0;
    const int has_router = slm_gguf_find_tensor(g, "blk.0.ffn_gate_inp.weight") != NULL;
    if ((s = key_int(g, file, KEY("expert_count"), has_router, 0, 1024, &n, err))) return s;
    if (!n) {
        if (has_router)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'gemma4.expert_count' = 0 with a router "
                            "(blk.0.ffn_gate_inp.weight)", file);
        return SLM_OK;
    }
    if ((s = key_int(g, file, KEY("expert_used_count"), 1, 1, n < 64 ? n : 64, &used, err))) return s;
    if ((s = key_int(g, file, KEY("expert_feed_forward_length"), 1, 1, 1 << 18, &width, err))) return s;
    int64_t v;
    if (slm_gguf_find(g, KEY("expert_gating_func")) >= 0 && (!slm_gguf_get_i64(g, key, &v) || v != 1))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': gemma4 routes by softmax (1) only", file, key);
    int norm = 1;
    if (slm_gguf_find(g, KEY("expert_weights_norm")) >= 0 && (!slm_gguf_get_bool(g, key, &norm) || !norm))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': gemma4 renormalizes its top-K weights (true only)",
                        file, key);
    float f = 1.0f;
    if (slm_gguf_find(g, KEY("expert_weights_scale")) >= 0 && (!slm_gguf_get_f32(g, key, &f) || f != 1.0f))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': gemma4's routed weights are not scaled (1 only)", file,
                        key);
    static const char *const none[4] = {"expert_shared_count", "expert_shared_feed_forward_length",
                                        "expert_group_count", "leading_dense_block_count"};
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof key, "gemma4.%s", none[i]);
        if (slm_gguf_find(g, key) >= 0 && (!slm_gguf_get_i64(g, key, &v) || v > (i == 2 ? 1 : 0)))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': gemma4 with experts has none (its dense FFN is "
                            "its shared branch)", file, key);
    }
    /* per-expert scales of the gate and up (llama.cpp's optional *_exps.scale) are not run */
    static const char *const scales[3] = {"blk.0.ffn_gate_exps.scale", "blk.0.ffn_up_exps.scale",
                                          "blk.0.ffn_gate_up_exps.scale"};
    for (int i = 0; i < 3; i++)
        if (slm_gguf_find_tensor(g, scales[i]))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: tensor '%s': per-expert scales of the gate and up are not "
                            "supported (of the down projection they are)", file, scales[i]);
    c->n_experts = n;
    c->n_experts_used = used;
    c->expert_norm = 1;
    c->dense_ffn = c->hidden_dim;
    c->hidden_dim = width;
    c->moe_dense = 1;
    c->expert_down_scale = slm_gguf_find_tensor(g, "blk.0.ffn_down_exps.scale") != NULL;
#undef KEY
    return SLM_OK;
}

void slm_gemma4_fixed(slm_model_config *c) {
    c->embed_scale = sqrtf((float)c->dim);
    c->ffn_gelu = 1;
    c->post_norms = 1;
    c->qk_norm = 1;
    c->v_norm = 1;
    c->attn_scale = 1.0f;
}

slm_status slm_gguf_gemma4_params(const slm_gguf *g, const char *file, slm_model_config *c, slm_err *err) {
    char key[96];
    slm_status s;
#define KEY(suffix) (snprintf(key, sizeof key, "gemma4." suffix), key)
    int kl = 0, vl = 0, rd = 0, pl = 0;
    if ((s = expert_params(g, file, c, err))) return s;
    if ((s = key_int(g, file, KEY("attention.key_length_swa"), 1, 2, 4096, &kl, err))) return s;
    if ((s = key_int(g, file, KEY("attention.value_length_swa"), 1, 2, 4096, &vl, err))) return s;
    if (vl != kl)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s' = %d: gemma4 needs the value length of the key's (%d)", file,
                        key, vl, kl);
    c->head_dim_swa = kl;
    rd = kl;
    if ((s = key_int(g, file, KEY("rope.dimension_count_swa"), 0, 2, kl, &rd, err))) return s;
    if (rd % 2) return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s' = %d: must be even", file, key, rd);
    c->rope_dims_swa = rd != kl ? rd : 0;
    if ((s = key_int(g, file, KEY("embedding_length_per_layer_input"), 1, 0, 1 << 16, &pl, err))) return s;
    c->ple_dim = pl;
    c->rope_base_swa = 10000.0f; /* llama.cpp's default for the window layers; their scale stays 1 */
    c->rope_scale_swa = 1.0f;
    if (slm_gguf_find(g, KEY("rope.freq_base_swa")) >= 0 && !slm_gguf_get_f32(g, key, &c->rope_base_swa))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected a float", file, key);
    if (!(c->rope_base_swa > 0.0f) || !isfinite(c->rope_base_swa))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %g (must be positive)", file, key, (double)c->rope_base_swa);
    if (slm_gguf_find(g, KEY("final_logit_softcapping")) >= 0 && !slm_gguf_get_f32(g, key, &c->final_softcap))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected a float", file, key);
    if (slm_gguf_find(g, KEY("attn_logit_softcapping")) >= 0)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': gemma4 has no score cap (llama.cpp reads none)", file, key);
    slm_gemma4_fixed(c);
    c->rope_freqs_global = c->rope_freqs;
    c->layer_scale = slm_gguf_find_tensor(g, "blk.0.layer_output_scale.weight") != NULL;
#undef KEY
    return SLM_OK;
}

/* The config's gemma4 fields: in range, zero on other families, and the
 * layers a shared layer attends through of its own kind. */
slm_status slm_gemma4_check_config(const slm_model_config *c, const char *file, slm_err *err) {
    const int is_g4 = !strcmp(c->arch, "gemma4");
    if (!is_g4) {
        if (c->head_dim_swa || c->n_kv_heads_swa || c->rope_dims_swa || c->kv_shared || c->hidden_dim_shared || c->ple_dim ||
            c->v_norm || c->rope_freqs_global || c->layer_scale)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: config: gemma4's per-kind layer fields on %.31s", file, c->arch);
        if (c->moe_dense || c->expert_down_scale)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: config: gemma4's expert fields moe_dense %d, expert_down_scale %d on "
                            "%.31s", file, c->moe_dense, c->expert_down_scale, c->arch);
        return SLM_OK;
    }
    if (c->head_dim_swa < 2 || c->head_dim_swa > 4096 || c->head_dim_swa % 2)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config head_dim_swa = %d (must be even, 2..4096)", file, c->head_dim_swa);
    if (c->n_kv_heads_swa < 0 || c->n_kv_heads_swa > c->n_heads || (c->n_kv_heads_swa && c->n_heads % c->n_kv_heads_swa))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config n_kv_heads_swa = %d does not divide n_heads = %d", file,
                        c->n_kv_heads_swa, c->n_heads);
    if (c->rope_dims_swa < 0 || c->rope_dims_swa > c->head_dim_swa || c->rope_dims_swa % 2)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config rope_dims_swa = %d (even, at most %d)", file, c->rope_dims_swa,
                        c->head_dim_swa);
    if (c->hidden_dim_shared < 0 || c->hidden_dim_shared > (1 << 22) || (c->hidden_dim_shared && !c->kv_shared))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config hidden_dim_shared = %d (no KV-shared layers: %d)", file,
                        c->hidden_dim_shared, c->kv_shared);
    if (c->ple_dim < 0 || c->ple_dim > (1 << 16) || (int64_t)c->ple_dim * c->n_layers > (1 << 22))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config ple_dim = %d out of range", file, c->ple_dim);
    if ((c->v_norm | c->rope_freqs_global | c->layer_scale) & ~1 || (c->rope_freqs_global && !c->rope_freqs) ||
        !c->rope_neox)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config: gemma4 flags v_norm %d, rope_freqs_global %d, layer_scale %d, "
                        "neox %d out of range", file, c->v_norm, c->rope_freqs_global, c->layer_scale, c->rope_neox);
    /* with experts: every layer an MoE layer beside its dense FFN, llama.cpp's fixed routing */
    if ((c->moe_dense | c->expert_down_scale) & ~1 || c->moe_dense != (c->n_experts > 0) ||
        (c->expert_down_scale && !c->moe_dense))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config: gemma4 moe_dense %d, expert_down_scale %d with %d experts", file,
                        c->moe_dense, c->expert_down_scale, c->n_experts);
    if (c->n_experts && (c->dense_lead || c->dense_ffn < 1 || c->dense_ffn > (1 << 22) || c->shared_ffn ||
                         c->expert_sigmoid || c->expert_sel_bias || c->expert_bias || c->expert_scale != 0.0f ||
                         c->expert_norm != 1 || !c->ffn_gelu || !c->post_norms || c->swiglu_limit != 0.0f))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config: gemma4's experts with dense_lead %d, dense_ffn %d, shared_ffn %d, "
                        "sigmoid %d, selection bias %d, biases %d, scale %g, norm %d, gelu %d, post norms %d (its routing "
                        "is softmax, top K renormalized, beside a dense FFN)", file, c->dense_lead, c->dense_ffn,
                        c->shared_ffn, c->expert_sigmoid, c->expert_sel_bias, c->expert_bias, (double)c->expert_scale,
                        c->expert_norm, c->ffn_gelu, c->post_norms);
    if (c->recur_interval || c->attn_gate)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config: gemma4 with qwen35's recurrent layers (recur_interval %d) or "
                        "gated query (attn_gate %d)", file, c->recur_interval, c->attn_gate);
    if (c->kv_shared < 0 || c->kv_shared > c->n_layers - 1)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config kv_shared = %d of %d layers (one at least keeps K/V)", file,
                        c->kv_shared, c->n_layers);
    for (int l = c->n_layers - c->kv_shared; l < c->n_layers; l++) {
        const int src = slm_layer_kv_src(c, l);
        if (src < 0 || !slm_layer_has_kv(c, src) || slm_layer_swa(c, src) != slm_layer_swa(c, l))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: layer %d shares the KV cache of layer %d, which is not a %s layer "
                            "with K/V of its own (llama.cpp's rule: the last such layer)", file, l, src,
                            slm_layer_swa(c, l) ? "window" : "global");
    }
    return SLM_OK;
}
