/* Gemma 4 Hugging Face folders (arch gemma4): model_type gemma4
 * (Gemma4ForConditionalGeneration: the text model's keys under text_config,
 * its tensors under model.language_model., the vision and audio towers
 * skipped) or gemma4_text (Gemma4ForCausalLM). What config.json says, the
 * tensors' GGUF names, and the checks that need the tensors.
 *
 * The facts are llama.cpp's converter's (conversion/gemma.py: Gemma4Model,
 * over Gemma3Model and TextModel; gguf-py's tensor map) checked against
 * transformers' Gemma4 (configuration_gemma4.py, modeling_gemma4.py):
 *
 * - Gemma4RMSNorm multiplies by its gain w (not 1 + w): the converter's
 *   norm_shift is 0 for gemma4, so no gain is changed here.
 * - global layers: global_head_dim, num_global_key_value_heads (with
 *   attention_k_eq_v: no v_proj, V is K's projection), "proportional" RoPE
 *   rotating int(global_head_dim * partial_rotary_factor / 2) of the pairs
 *   with rope_theta over the whole head size; the converter writes that as
 *   rope_freqs.weight (1 for the rotated pairs, 1e30 for the others),
 *   which is made here the same way. Sliding layers: head_dim, "default"
 *   RoPE with their own rope_theta, the window sliding_window.
 * - layer_types gives the kind of each layer; staticlm runs n - 1 window
 *   layers of every n (gemma4.c's rule for the GGUF list), so the list must
 *   be one such period, ending on a full layer (transformers forces the last
 *   layer full; the converter does not).
 * - the last num_kv_shared_layers layers have no K/V (no k_proj, v_proj,
 *   k_norm); use_double_wide_mlp doubles their intermediate_size.
 * - hidden_size_per_layer_input > 0: per-layer embeddings
 *   (embed_tokens_per_layer, per_layer_model_projection,
 *   per_layer_projection_norm; per layer per_layer_input_gate,
 *   per_layer_projection, post_per_layer_input_norm).
 * - layer_scalar [1] -> blk.N.layer_output_scale.weight.
 * - enable_moe_block (26B-A4B): num_experts experts of width
 *   moe_intermediate_size, top_k_experts per row, beside the dense MLP:
 *   router.proj -> ffn_gate_inp.weight, router.scale -> ffn_gate_inp.scale,
 *   router.per_expert_scale -> ffn_down_exps.scale (each expert's output
 *   times it), experts.gate_up_proj [E, 2F, D] (each expert's gate rows,
 *   then its up rows: transformers chunks them so) and experts.down_proj
 *   [E, D, F] as row ranges of their bytes (hf.c), pre_feedforward_layernorm_2,
 *   post_feedforward_layernorm_1 / _2 -> pre_ffw_norm_2, post_ffw_norm_1 / _2.
 *
 * Where the converter and transformers read a key differently, or the
 * converter does not read one that transformers would (the full layers'
 * RoPE factor, the sliding layers' partial_rotary_factor), the folder is
 * refused naming the key rather than run one way silently.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "format/hf.h"

#ifdef SLM_HAVE_CJSON

#include <cJSON.h>

#define pstr slm_hf_pstr

static const cJSON *g4_item(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return v && !cJSON_IsNull(v) ? v : NULL; /* null counts as absent */
}

/* An integer key in lo..hi (absent: *v unchanged unless required). */
static slm_status g4_int(const cJSON *o, const char *file, const char *key, int required, int lo, int hi, int *v,
                         slm_err *err) {
    const cJSON *x = g4_item(o, key);
    if (!x) return required ? slm_errf(err, SLM_ERR_FORMAT, "%s: missing required key '%s'", file, key) : SLM_OK;
    const double d = cJSON_IsNumber(x) ? x->valuedouble : NAN;
    if (!isfinite(d) || floor(d) != d)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected an integer", file, key);
    if (d < lo || d > hi)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %.17g is out of range (%d..%d)", file, key, d, lo, hi);
    *v = (int)d;
    return SLM_OK;
}

/* A string key: *v its value, NULL when absent. */
static slm_status g4_str(const cJSON *o, const char *file, const char *key, const char **v, slm_err *err) {
    const cJSON *x = g4_item(o, key);
    *v = NULL;
    if (!x) return SLM_OK;
    if (!cJSON_IsString(x) || !x->valuestring)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected a string", file, key);
    *v = x->valuestring;
    return SLM_OK;
}

/* Keys that would change the computation in ways gemma4 does not run
 * (gemma3n's, gemma2's score cap, a per-layer override table, groups of
 * experts, a router other than softmax, bidirectional text attention,
 * RoPE keys outside rope_parameters). query_pre_attn_scalar is read by
 * neither transformers' Gemma4 nor llama.cpp (the query scale is 1). */
static slm_status g4_refused_keys(const cJSON *root, const char *file, slm_err *err) {
    static const char *const no[] = {"attn_logit_softcapping", "per_layer_config", "altup_num_inputs", "laurel_rank",
                                     "activation_sparsity_pattern", "rope_scaling", "n_group", "topk_group"};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        const cJSON *x = g4_item(root, no[i]);
        if (!x) continue;
        /* gemma3n's sparsity list all zero changes nothing */
        int zero = i == 4 && cJSON_IsArray(x);
        for (const cJSON *e = zero ? x->child : NULL; e && zero; e = e->next) zero = cJSON_IsNumber(e) && e->valuedouble == 0;
        if (zero) continue;
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': not supported for gemma4 (neither transformers' Gemma4 "
                        "nor llama.cpp's gemma4 runs it)", file, no[i]);
    }
    const char *bi = NULL;
    slm_status s;
    if ((s = g4_str(root, file, "use_bidirectional_attention", &bi, err))) return s;
    if (bi && strcmp(bi, "vision"))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'use_bidirectional_attention': '%s' is not supported (text "
                        "attends causally: null or 'vision')", file, bi[0] == 'a' ? "all" : "?");
    static const char *const top_rope[] = {"rope_theta", "rope_local_base_freq", "partial_rotary_factor"};
    for (size_t i = 0; i < 3; i++)
        if (g4_item(root, top_rope[i]))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': gemma4 takes its RoPE from 'rope_parameters' "
                            "(full_attention, sliding_attention); a top-level value is not read by transformers",
                            file, top_rope[i]);
    static const char *const score[] = {"score_function", "scoring_func", "score_func", "moe_router_activation",
                                        "moe_router_activation_func", "expert_selection_fn"};
    for (size_t i = 0; i < sizeof score / sizeof score[0]; i++) {
        const char *v = NULL;
        if ((s = g4_str(root, file, score[i], &v, err))) return s;
        if (v && strcmp(v, "softmax"))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': gemma4 routes by softmax only", file, score[i]);
    }
    return SLM_OK;
}

/* One entry of rope_parameters: rope_type must be want, rope_theta a
 * positive number, partial_rotary_factor in [0, 1] (*prf; absent: 1),
 * factor 1 when given; any other key is refused. */
static slm_status g4_rope_entry(const cJSON *rp, const char *file, const char *which, const char *want, double *theta,
                                double *prf, slm_err *err) {
    const cJSON *e = g4_item(rp, which);
    if (!e || !cJSON_IsObject(e))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'rope_parameters': '%s' must be an object", file, which);
    char b[64];
    for (const cJSON *k = e->child; k; k = k->next)
        if (!k->string || (strcmp(k->string, "rope_type") && strcmp(k->string, "rope_theta") &&
                           strcmp(k->string, "partial_rotary_factor") && strcmp(k->string, "factor")))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'rope_parameters': '%s' key '%s' is not supported", file,
                            which, k->string ? pstr(k->string, b, sizeof b) : "?");
    const cJSON *t = g4_item(e, "rope_type"), *th = g4_item(e, "rope_theta"), *p = g4_item(e, "partial_rotary_factor"),
                *f = g4_item(e, "factor");
    if (!t || !cJSON_IsString(t) || !t->valuestring || strcmp(t->valuestring, want))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'rope_parameters': '%s' rope_type must be '%s' (have '%s')",
                        file, which, want, t && cJSON_IsString(t) && t->valuestring ? pstr(t->valuestring, b, sizeof b)
                                                                                      : "none");
    if (!th || !cJSON_IsNumber(th) || !(th->valuedouble > 0 && th->valuedouble < 1e30))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'rope_parameters': '%s' needs a positive 'rope_theta'", file, which);
    *theta = th->valuedouble;
    *prf = 1.0;
    if (p && (!cJSON_IsNumber(p) || !(p->valuedouble >= 0.0 && p->valuedouble <= 1.0)))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'rope_parameters': '%s' 'partial_rotary_factor' must be in 0..1",
                        file, which);
    if (p) *prf = p->valuedouble;
    /* transformers divides the frequencies by factor; the converter does not read it */
    if (f && (!cJSON_IsNumber(f) || f->valuedouble != 1.0))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'rope_parameters': '%s' 'factor' other than 1 is not "
                        "supported (llama.cpp's converter does not read it)", file, which);
    return SLM_OK;
}

/* rope_parameters: full_attention "proportional" (its partial_rotary_factor
 * required, as the converter reads it) and sliding_attention "default" (a
 * partial_rotary_factor other than 1 there is read by neither: refused).
 * The global layers' rope_freqs.weight into h. */
static slm_status g4_rope(const cJSON *root, const char *file, slm_model_config *c, slm_hf_info *h, slm_err *err) {
    const cJSON *rp = g4_item(root, "rope_parameters");
    if (!rp || !cJSON_IsObject(rp))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: missing required key 'rope_parameters' (an object with "
                        "'full_attention' and 'sliding_attention')", file);
    char b[64];
    for (const cJSON *k = rp->child; k; k = k->next)
        if (!k->string || (strcmp(k->string, "full_attention") && strcmp(k->string, "sliding_attention")))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'rope_parameters': '%s' beside the per-layer-type entries",
                            file, k->string ? pstr(k->string, b, sizeof b) : "?");
    double theta = 0, prf = 1, theta_l = 0, prf_l = 1;
    slm_status s;
    if ((s = g4_rope_entry(rp, file, "full_attention", "proportional", &theta, &prf, err)) ||
        (s = g4_rope_entry(rp, file, "sliding_attention", "default", &theta_l, &prf_l, err)))
        return s;
    if (!g4_item(g4_item(rp, "full_attention"), "partial_rotary_factor"))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'rope_parameters': 'full_attention' needs "
                        "'partial_rotary_factor' (proportional RoPE)", file);
    if (prf_l != 1.0)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'rope_parameters': 'sliding_attention' "
                        "'partial_rotary_factor' %g is not supported (1 only: neither transformers' default RoPE nor "
                        "llama.cpp's converter reads it)", file, prf_l);
    const int half = c->head_dim / 2, rot = (int)floor((double)c->head_dim * prf / 2.0);
    float *f = slm_malloc(sizeof *f * (size_t)half);
    if (!f) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", file);
    for (int i = 0; i < half; i++) f[i] = i < rot ? 1.0f : 1e30f;
    h->vecs = f;
    h->n_vecs = half;
    c->rope_freqs = 1;
    c->rope_freqs_global = 1;
    c->rope_base = (float)theta;
    c->rope_base_swa = (float)theta_l;
    c->rope_scale_swa = 1.0f;
    return SLM_OK;
}

/* layer_types: the period staticlm runs (n - 1 window layers of every n,
 * counted from the first full layer), the last layer full. */
static slm_status g4_layer_types(const cJSON *root, const char *file, slm_model_config *c, slm_err *err) {
    const cJSON *lt = g4_item(root, "layer_types");
    if (!lt || !cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != c->n_layers)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'layer_types': expected an array of %d strings (required)", file,
                        c->n_layers);
    int l = 0, first_full = -1;
    for (const cJSON *e = lt->child; e; e = e->next, l++) {
        const char *v = cJSON_IsString(e) ? e->valuestring : NULL;
        if (!v || (strcmp(v, "full_attention") && strcmp(v, "sliding_attention")))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'layer_types': element %d is not 'full_attention' or "
                            "'sliding_attention'", file, l);
        if (v[0] == 'f' && first_full < 0) first_full = l;
        if (v[0] == 's' && !e->next)
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'layer_types': the last layer is 'sliding_attention' "
                            "(transformers makes it full, llama.cpp's converter does not)", file);
    }
    if (first_full == 0) c->sliding_window = 0; /* then no layer may slide: checked below */
    else c->swa_pattern = first_full + 1;
    l = 0;
    for (const cJSON *e = lt->child; e; e = e->next, l++)
        if ((e->valuestring[0] == 's') != slm_layer_swa(c, l))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'layer_types': layer %d is '%s'; staticlm runs the "
                            "window on n - 1 of every n layers, n from the first full layer (here %d)", file, l,
                            e->valuestring, first_full + 1);
    return SLM_OK;
}

/* An alias the converter reads before (or after) transformers' key: when
 * both are given they must agree. */
static slm_status g4_alias(const cJSON *root, const char *file, const char *key, const char *alias, int have,
                           slm_err *err) {
    int v = 0;
    slm_status s = g4_int(root, file, alias, 0, 1, 1 << 22, &v, err);
    if (s) return s;
    if (v && v != have)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: keys '%s' (%d) and '%s' (%d) disagree (llama.cpp's converter reads "
                        "one, transformers the other)", file, key, have, alias, v);
    return SLM_OK;
}

/* enable_moe_block: the experts beside every layer's dense MLP. */
static slm_status g4_experts(const cJSON *root, const char *file, slm_model_config *c, slm_err *err) {
    const cJSON *mb = g4_item(root, "enable_moe_block");
    if (mb && !cJSON_IsBool(mb))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'enable_moe_block': expected true or false", file);
    if (!mb || !cJSON_IsTrue(mb)) return SLM_OK; /* num_experts and the rest unread, as transformers */
    int n = 0, used = 0, width = 0;
    slm_status s;
    if ((s = g4_int(root, file, "num_experts", 1, 1, 1024, &n, err)) ||
        (s = g4_int(root, file, "top_k_experts", 1, 1, n < 64 ? n : 64, &used, err)) ||
        (s = g4_int(root, file, "moe_intermediate_size", 1, 1, 1 << 18, &width, err)) ||
        (s = g4_alias(root, file, "num_experts", "num_local_experts", n, err)) ||
        (s = g4_alias(root, file, "num_experts", "n_routed_experts", n, err)) ||
        (s = g4_alias(root, file, "top_k_experts", "num_experts_per_tok", used, err)) ||
        (s = g4_alias(root, file, "top_k_experts", "num_experts_per_token", used, err)) ||
        (s = g4_alias(root, file, "moe_intermediate_size", "expert_intermediate_size", width, err)))
        return s;
    c->n_experts = n;
    c->n_experts_used = used;
    c->expert_norm = 1; /* softmax, the top K renormalized, then times per_expert_scale */
    c->dense_ffn = c->hidden_dim;
    c->hidden_dim = width;
    c->moe_dense = 1;
    return SLM_OK;
}

/* The heads: num_key_value_heads on the window layers; the global ones
 * num_global_key_value_heads with attention_k_eq_v (transformers reads it
 * only then, the converter whenever given: they must then agree). */
static slm_status g4_heads(const cJSON *root, const char *file, slm_model_config *c, slm_hf_info *h, slm_err *err) {
    int kv = 0, kvg = 0, hd = 0, ghd = 0;
    slm_status s;
    const cJSON *ke = g4_item(root, "attention_k_eq_v");
    if (ke && !cJSON_IsBool(ke))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'attention_k_eq_v': expected true or false", file);
    h->k_eq_v = ke && cJSON_IsTrue(ke);
    if ((s = g4_int(root, file, "num_attention_heads", 1, 1, 4096, &c->n_heads, err)) ||
        (s = g4_int(root, file, "num_key_value_heads", 1, 1, 4096, &kv, err)) ||
        (s = g4_int(root, file, "num_global_key_value_heads", h->k_eq_v, 1, 4096, &kvg, err)) ||
        (s = g4_int(root, file, "head_dim", 1, 2, 4096, &hd, err)) ||
        (s = g4_int(root, file, "global_head_dim", 1, 2, 4096, &ghd, err)))
        return s;
    if (kvg && !h->k_eq_v && kvg != kv)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'num_global_key_value_heads' = %d without attention_k_eq_v: "
                        "transformers gives the global layers %d KV heads, llama.cpp's converter %d", file, kvg, kv, kvg);
    if (!kvg) kvg = kv;
    if (c->n_heads % kv || c->n_heads % kvg)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: KV heads %d (window) / %d (global) do not divide num_attention_heads "
                        "= %d", file, kv, kvg, c->n_heads);
    if (hd % 2 || ghd % 2)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: keys 'head_dim' (%d) and 'global_head_dim' (%d) must be even", file,
                        hd, ghd);
    c->n_kv_heads = kvg;
    c->n_kv_heads_swa = kv != kvg ? kv : 0;
    c->head_dim = ghd;
    c->head_dim_swa = hd;
    return SLM_OK;
}

/* Sizes, norms, softcap and the per-layer embeddings. */
static slm_status g4_sizes(const cJSON *root, const cJSON *top, const char *file, slm_model_config *c, slm_hf_info *h,
                           slm_err *err) {
    slm_status s;
    double eps = 1e-6, cap = 0;
    int ple = -1, ple_vocab = 0, shared = 0, wide = 0, tie = 1, bias = 0;
    c->context_len = 131072; /* Gemma4TextConfig's, and the converter's default */
    if ((s = g4_int(root, file, "hidden_size", 1, 1, 1 << 20, &c->dim, err)) ||
        (s = g4_int(root, file, "intermediate_size", 1, 1, 1 << 22, &c->hidden_dim, err)) ||
        (s = g4_int(root, file, "num_hidden_layers", 1, 1, 1 << 16, &c->n_layers, err)) ||
        (s = g4_int(root, file, "vocab_size", 0, 1, 1 << 24, &c->vocab_size, err)) ||
        (s = g4_int(root, file, "max_position_embeddings", 0, 1, INT32_MAX, &c->context_len, err)) ||
        (s = g4_int(root, file, "sliding_window", 1, 1, 1 << 24, &c->sliding_window, err)) ||
        (s = g4_int(root, file, "num_kv_shared_layers", 0, 0, 1 << 16, &shared, err)) ||
        (s = g4_int(root, file, "hidden_size_per_layer_input", 0, 0, 1 << 16, &ple, err)) ||
        (s = g4_int(root, file, "vocab_size_per_layer_input", 0, 1, 1 << 24, &ple_vocab, err)) ||
        (s = slm_hf_cfg_num(root, file, "rms_norm_eps", &eps, err)) ||
        (s = slm_hf_cfg_num(root, file, "final_logit_softcapping", &cap, err)) ||
        (s = slm_hf_cfg_bool(root, file, "use_double_wide_mlp", &wide, err)) ||
        (s = slm_hf_cfg_bool(root, file, "attention_bias", &bias, err)))
        return s;
    /* tie_word_embeddings: the text model's, else Gemma4Config's (true by default) */
    if ((s = slm_hf_cfg_bool(top, file, "tie_word_embeddings", &tie, err)) ||
        (root != top && (s = slm_hf_cfg_bool(root, file, "tie_word_embeddings", &tie, err))))
        return s;
    if (!(eps > 0 && eps < 1)) return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'rms_norm_eps': %g is out of range", file, eps);
    if (!(cap >= 0 && cap < 1e6))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'final_logit_softcapping': %g is out of range (0..1e6)", file, cap);
    if (bias) return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'attention_bias' = true: gemma4 has no biases", file);
    if (ple < 0) /* Gemma4TextConfig's default is 256, the converter's 0: not guessed */
        return slm_errf(err, SLM_ERR_FORMAT, "%s: missing required key 'hidden_size_per_layer_input' (0 for none)", file);
    if (shared > c->n_layers - 1)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'num_kv_shared_layers': %d of %d layers (one at least keeps K/V)",
                        file, shared, c->n_layers);
    if (ple && ple_vocab && c->vocab_size && ple_vocab != c->vocab_size)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'vocab_size_per_layer_input' = %d: llama.cpp's per-layer "
                        "embeddings have vocab_size (%d) rows", file, ple_vocab, c->vocab_size);
    const char *act = NULL, *act2 = NULL;
    if ((s = g4_str(root, file, "hidden_activation", &act, err)) || (s = g4_str(root, file, "hidden_act", &act2, err)))
        return s;
    const int bad1 = act && strcmp(act, "gelu_pytorch_tanh"), bad2 = act2 && strcmp(act2, "gelu_pytorch_tanh");
    char b[64];
    if (bad1 || bad2)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': '%s' is not supported (gelu_pytorch_tanh only)", file,
                        bad1 ? "hidden_activation" : "hidden_act", pstr(bad1 ? act : act2, b, sizeof b));
    c->norm_eps = (float)eps;
    c->final_softcap = (float)cap;
    c->kv_shared = shared;
    c->hidden_dim_shared = wide && shared ? 2 * c->hidden_dim : 0;
    c->ple_dim = ple;
    c->tied_embeddings = tie;
    h->vocab_from_embed = c->vocab_size == 0;
    return SLM_OK;
}

/* model_type gemma4 (the text model in text_config) or gemma4_text. */
slm_status slm_hf_gemma4_config(const cJSON *top, const char *file, slm_model_config *c, slm_hf_info *h, slm_err *err) {
    const cJSON *root = top, *mt = g4_item(top, "model_type"), *arch = g4_item(top, "architectures");
    char b[64];
    for (const cJSON *e = arch && cJSON_IsArray(arch) ? arch->child : NULL; e; e = e->next)
        if (cJSON_IsString(e) && e->valuestring && strstr(e->valuestring, "Assistant"))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'architectures': '%s' is llama.cpp's gemma4-assistant "
                            "(a draft model), not supported", file, pstr(e->valuestring, b, sizeof b));
    if (!strcmp(mt->valuestring, "gemma4")) {
        const cJSON *tc = g4_item(top, "text_config"), *tt = tc ? g4_item(tc, "model_type") : NULL;
        if (!tc || !cJSON_IsObject(tc))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: model_type 'gemma4' needs key 'text_config' (an object)", file);
        if (tt && (!cJSON_IsString(tt) || !tt->valuestring || strcmp(tt->valuestring, "gemma4_text")))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'text_config': model_type '%s' is not supported "
                            "(gemma4_text only)", file, cJSON_IsString(tt) && tt->valuestring ?
                            pstr(tt->valuestring, b, sizeof b) : "?");
        root = tc;
        h->multimodal = 1;
    }
    snprintf(c->arch, sizeof c->arch, "gemma4");
    slm_status s;
    if ((s = g4_refused_keys(root, file, err)) || (s = g4_sizes(root, top, file, c, h, err)) ||
        (s = g4_heads(root, file, c, h, err)) || (s = g4_layer_types(root, file, c, err)) ||
        (s = g4_experts(root, file, c, err)) || (s = g4_rope(root, file, c, h, err)))
        return s;
    /* the rest as slm_gguf_gemma4_params sets it for llama.cpp's gemma4 graph */
    c->rope_scale = 1.0f;
    c->rope_neox = 1;
    slm_gemma4_fixed(c);
    return SLM_OK;
}

/* ---- tensor names ----------------------------------------------------------- */

int slm_hf_gemma4_name(const char *hf, int multimodal, int n_experts, char *out, size_t cap, int *kind) {
    static const char *const skip[] = {"vision_tower.", "audio_tower.", "embed_vision.", "embed_audio.",
                                       "multi_modal_projector."};
    static const struct { const char *hf, *gg; int kind; } top[] = {
        {"embed_tokens.weight", "token_embd.weight", SLM_HF_G4_MAT},
        {"norm.weight", "output_norm.weight", SLM_HF_G4_VEC},
        {"embed_tokens_per_layer.weight", "per_layer_token_embd.weight", SLM_HF_G4_MAT},
        {"per_layer_model_projection.weight", "per_layer_model_proj.weight", SLM_HF_G4_MAT},
        {"per_layer_projection_norm.weight", "per_layer_proj_norm.weight", SLM_HF_G4_VEC},
    };
    /* moe: 1 only with experts */
    static const struct { const char *hf, *gg; int kind, moe; } layer[] = {
        {"input_layernorm.weight", "attn_norm.weight", SLM_HF_G4_VEC, 0},
        {"self_attn.q_proj.weight", "attn_q.weight", SLM_HF_G4_MAT, 0},
        {"self_attn.k_proj.weight", "attn_k.weight", SLM_HF_G4_MAT, 0},
        {"self_attn.v_proj.weight", "attn_v.weight", SLM_HF_G4_MAT, 0},
        {"self_attn.o_proj.weight", "attn_output.weight", SLM_HF_G4_MAT, 0},
        {"self_attn.q_norm.weight", "attn_q_norm.weight", SLM_HF_G4_VEC, 0},
        {"self_attn.k_norm.weight", "attn_k_norm.weight", SLM_HF_G4_VEC, 0},
        {"post_attention_layernorm.weight", "post_attention_norm.weight", SLM_HF_G4_VEC, 0},
        {"pre_feedforward_layernorm.weight", "ffn_norm.weight", SLM_HF_G4_VEC, 0},
        {"post_feedforward_layernorm.weight", "post_ffw_norm.weight", SLM_HF_G4_VEC, 0},
        {"mlp.gate_proj.weight", "ffn_gate.weight", SLM_HF_G4_MAT, 0},
        {"mlp.up_proj.weight", "ffn_up.weight", SLM_HF_G4_MAT, 0},
        {"mlp.down_proj.weight", "ffn_down.weight", SLM_HF_G4_MAT, 0},
        {"per_layer_input_gate.weight", "inp_gate.weight", SLM_HF_G4_MAT, 0},
        {"per_layer_projection.weight", "proj.weight", SLM_HF_G4_MAT, 0},
        {"post_per_layer_input_norm.weight", "post_norm.weight", SLM_HF_G4_VEC, 0},
        {"layer_scalar", "layer_output_scale.weight", SLM_HF_G4_VEC, 0},
        {"router.proj.weight", "ffn_gate_inp.weight", SLM_HF_G4_MAT, 1},
        {"router.scale", "ffn_gate_inp.scale", SLM_HF_G4_VEC, 1},
        {"router.per_expert_scale", "ffn_down_exps.scale", SLM_HF_G4_VEC, 1},
        {"experts.gate_up_proj", "ffn_gate.0.weight", SLM_HF_G4_EXPS_GATE_UP, 1},
        {"experts.down_proj", "ffn_down.0.weight", SLM_HF_G4_EXPS_DOWN, 1},
        {"pre_feedforward_layernorm_2.weight", "pre_ffw_norm_2.weight", SLM_HF_G4_VEC, 1},
        {"post_feedforward_layernorm_1.weight", "post_ffw_norm_1.weight", SLM_HF_G4_VEC, 1},
        {"post_feedforward_layernorm_2.weight", "post_ffw_norm_2.weight", SLM_HF_G4_VEC, 1},
    };
    *kind = SLM_HF_G4_MAT;
    if (!strcmp(hf, "lm_head.weight")) {
        snprintf(out, cap, "output.weight");
        return 1;
    }
    /* Gemma4ForConditionalGeneration: model.language_model.X; its towers are skipped */
    const char *p = hf;
    if (multimodal) {
        if (!strncmp(p, "model.", 6))
            for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
                if (!strncmp(p + 6, skip[i], strlen(skip[i]))) return 2;
        if (strncmp(p, "model.language_model.", 21)) return 0;
        p += 21;
    } else {
        if (strncmp(p, "model.", 6)) return 0;
        p += 6;
    }
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (!strcmp(p, top[i].hf)) {
            *kind = top[i].kind;
            snprintf(out, cap, "%s", top[i].gg);
            return 1;
        }
    if (strncmp(p, "layers.", 7)) return 0;
    p += 7;
    long n = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 6; p++, digits++) n = n * 10 + (*p - '0');
    if (!digits || *p != '.' || (digits > 1 && p[-digits] == '0') || n > 65535) return 0;
    p++;
    for (size_t i = 0; i < sizeof layer / sizeof layer[0]; i++)
        if ((!layer[i].moe || n_experts) && !strcmp(p, layer[i].hf)) {
            *kind = layer[i].kind;
            snprintf(out, cap, "blk.%ld.%s", n, layer[i].gg);
            return 1;
        }
    return 0;
}

/* ---- after the tensors --------------------------------------------------------- */

/* A layer's HF tensor name for messages. */
static const char *g4_hf(const slm_hf_info *h, int l, const char *what, char *buf, size_t cap) {
    snprintf(buf, cap, "model.%slayers.%d.%s", h->multimodal ? "language_model." : "", l, what);
    return buf;
}

slm_status slm_hf_gemma4_finish(slm_model_file *m, const slm_hf_info *h, const char *dir, slm_err *err) {
    slm_model_config *c = &m->cfg;
    char name[64], hb[128];
    /* layer_scalar and per_expert_scale: read when layer 0 has them, then every layer must */
    c->layer_scale = slm_model_tensor(m, "blk.0.layer_output_scale.weight") != NULL;
    c->expert_down_scale = c->n_experts && slm_model_tensor(m, "blk.0.ffn_down_exps.scale") != NULL;
    for (int l = 0; l < c->n_layers; l++) {
        snprintf(name, sizeof name, "blk.%d.layer_output_scale.weight", l);
        if (!slm_model_tensor(m, name) != !c->layer_scale)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': %s, but layer 0 %s (every layer or none)", dir,
                            g4_hf(h, l, "layer_scalar", hb, sizeof hb), c->layer_scale ? "missing" : "present",
                            c->layer_scale ? "has one" : "has none");
        snprintf(name, sizeof name, "blk.%d.ffn_down_exps.scale", l);
        if (c->n_experts && !slm_model_tensor(m, name) != !c->expert_down_scale)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': %s, but layer 0 %s (every layer or none)", dir,
                            g4_hf(h, l, "router.per_expert_scale", hb, sizeof hb),
                            c->expert_down_scale ? "missing" : "present", c->expert_down_scale ? "has one" : "has none");
        static const char *const kv[3][2] = {{"attn_k.weight", "self_attn.k_proj.weight"},
                                             {"attn_v.weight", "self_attn.v_proj.weight"},
                                             {"attn_k_norm.weight", "self_attn.k_norm.weight"}};
        for (int j = 0; j < 3; j++) {
            snprintf(name, sizeof name, "blk.%d.%s", l, kv[j][0]);
            const int have = slm_model_tensor(m, name) != NULL;
            /* V is K's projection on the global layers with attention_k_eq_v */
            const int want = slm_layer_has_kv(c, l) && !(j == 1 && h->k_eq_v && !slm_layer_swa(c, l));
            if (have == want) continue;
            return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': %s (%s)", dir, g4_hf(h, l, kv[j][1], hb, sizeof hb),
                            have ? "present" : "missing",
                            !slm_layer_has_kv(c, l) ? "a layer of num_kv_shared_layers has no K/V of its own"
                            : j == 1 && h->k_eq_v   ? "attention_k_eq_v: a global layer's V is its K"
                            : j == 1                ? "attention_k_eq_v is false"
                                                    : "a layer with K/V of its own");
        }
    }
    return SLM_OK;
}

#endif
