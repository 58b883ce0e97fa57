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
 * skipped; anything else is refused by the loader.
 *
 * The config: the sizes (required), max_position_embeddings (8192 when
 * absent, ModernBertConfig's), global_attn_every_n_layers (3: layer l
 * attends globally when l % it == 0, the others within local_attention / 2
 * rows on either side, llama.cpp's reading of the converter's
 * sliding_window and sliding_window_pattern), local_attention (128),
 * global_rope_theta (160000: the global layers' RoPE base, neox pairs),
 * local_rope_theta (10000: the window layers'), norm_eps (1e-5: what
 * transformers runs; the converter writes layer_norm_eps, the same in the
 * releases), hidden_activation (gelu: GeGLU, GELU's tanh form as
 * llama.cpp's; silu or swish: SwiGLU, as llama.cpp reads the converter's
 * hidden_act). What the graph does not run is refused by key: norm_bias,
 * attention_bias or mlp_bias true, another activation, a local_attention
 * of 1, rope_parameters (newer transformers' spelling of the thetas), an
 * architecture with a task head (ModernBertForSequenceClassification and
 * the like), a width that the heads do not divide.
 */
#include <stdio.h>
#include <stdlib.h>

#include "format/hf.h"

#ifdef SLM_HAVE_CJSON

#include <cJSON.h>

#define pstr slm_hf_pstr

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
        (s = slm_hf_cfg_int(top, file, "global_attn_every_n_layers", 0, &every, err)) ||
        (s = slm_hf_cfg_int(top, file, "local_attention", 0, &window, err)) ||
        (s = slm_hf_cfg_num(top, file, "norm_eps", &eps, err)) ||
        (s = slm_hf_cfg_num(top, file, "global_rope_theta", &g_theta, err)) ||
        (s = slm_hf_cfg_num(top, file, "local_rope_theta", &l_theta, err)) ||
        (s = slm_hf_cfg_act(top, file, "hidden_activation", 1, &gelu, err)))
        return s;
    static const char *const biases[3] = {"norm_bias", "attention_bias", "mlp_bias"};
    for (int i = 0; i < 3; i++) {
        int on = 0;
        if ((s = slm_hf_cfg_bool(top, file, biases[i], &on, err))) return s;
        if (on)
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s' = true: staticlm runs ModernBERT without biases "
                            "(as llama.cpp)", file, biases[i]);
    }
    if (cJSON_GetObjectItemCaseSensitive(top, "rope_parameters"))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'rope_parameters' is not read for modernbert (give "
                        "global_rope_theta and local_rope_theta)", file);
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(top, "architectures");
    const cJSON *a0 = cJSON_IsArray(arch) ? cJSON_GetArrayItem(arch, 0) : NULL;
    if (a0 && (!cJSON_IsString(a0) || (strcmp(a0->valuestring, "ModernBertModel") &&
                                       strcmp(a0->valuestring, "ModernBertForMaskedLM"))))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'architectures': '%s' is not supported (ModernBertModel, "
                        "ModernBertForMaskedLM: the encoder; a task head is not run)", file,
                        cJSON_IsString(a0) ? pstr(a0->valuestring, b, sizeof b) : "?");
    if (!(eps > 0 && eps < 1))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'norm_eps': %g is out of range (0..1)", file, eps);
    if (!(g_theta > 0 && g_theta < 1e12) || !(l_theta > 0 && l_theta < 1e12))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %g is out of range (0..1e12)", file,
                        g_theta > 0 && g_theta < 1e12 ? "local_rope_theta" : "global_rope_theta",
                        g_theta > 0 && g_theta < 1e12 ? l_theta : g_theta);
    if (window == 1)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'local_attention' = 1: a window of no neighbours is not "
                        "supported", file);
    if (every > 65536)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'global_attn_every_n_layers': %d is out of range (1..65536)", file,
                        every);
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
    /* the window as a GGUF's gives it (gguf_model.c): a global layer first in every period; a period of 1: none slides */
    c->sliding_window = every == 1 ? 0 : window;
    c->swa_pattern = every == 1 ? 3 : every;
    c->rope_scale_swa = 1.0f;
    c->rope_base_swa = (float)l_theta;
    return SLM_OK;
}

#endif

int slm_hf_modernbert_name(const char *hf, char *out, size_t cap, int *kind) {
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
    *kind = SLM_HF_ENC_MAT;
    if (!strncmp(hf, "head.", 5) || !strncmp(hf, "decoder.", 8)) return 2; /* ModernBertForMaskedLM's head */
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
