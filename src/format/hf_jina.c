/* jina-bert-v2 folders (model_type "bert" with position_embedding_type
 * "alibi": JinaBertModel / JinaBertForMaskedLM, jinaai's
 * jina-embeddings-v2-small-en, -base-en and -base-code): BERT's keys and
 * names (hf_bert.c reads them and hands over here) without learned
 * positions, ALiBi instead (arch jina-bert-v2, encoder 5: format/encoder.c),
 * and the tensors of its layers as llama.cpp's converter maps them:
 *
 *   encoder.layer.N.
 *     mlp.gated_layers.weight            blk.N.ffn_gate / ffn_up.weight (the first half of the
 *     mlp.up_gated_layer.weight (code)   rows is the activated one; the converter's fused ffn_up
 *                                        of 2 x intermediate_size, split so at load, as a GGUF's)
 *     mlp.wo.{weight,bias}               blk.N.ffn_down.*
 *     mlp.down_layer.{weight,bias} (code)
 *     mlp.layernorm.{weight,bias}        blk.N.layer_output_norm.*
 *     layer_norm_2.{weight,bias} (code)
 *     layer_norm_1.{weight,bias} (code)  blk.N.attn_norm_2.* (LN(that + the layer's input))
 *     attention.self.layer_norm_q.*      blk.N.attn_q_norm.* (code: LayerNorms of Q and K)
 *     attention.self.layer_norm_k.*      blk.N.attn_k_norm.*
 *
 * and BERT's for the rest (embeddings, attention, with the same optional
 * "bert." prefix and skipped pooler and MLM head); a position table is
 * refused. The key that picks the FFN: feed_forward_type "geglu" (the
 * releases: the fused gated matrix above, GeGLU, GELU's tanh form as
 * llama.cpp's) or "original" (JinaBertConfig's default: BERT's
 * intermediate.dense / output.dense / output.LayerNorm, GELU); anything
 * else is refused naming it, as is a tensor of the other FFN's. The code
 * variant's up_gated_layer is split as the converter's GGUF of it is (and
 * as llama.cpp runs it): the first half activated, as in -base-en's
 * gated_layers; that its checkpoints chunk it so is not checked here.
 */
#include <stdio.h>
#include <stdlib.h>

#include "format/hf.h"

#ifdef SLM_HAVE_CJSON

#include <cJSON.h>

slm_status slm_hf_jina_config(const cJSON *top, const char *file, slm_model_config *c, slm_hf_info *h, slm_err *err) {
    const cJSON *ff = cJSON_GetObjectItemCaseSensitive(top, "feed_forward_type");
    char b[64];
    if (ff && !cJSON_IsNull(ff) && (!cJSON_IsString(ff) || (strcmp(ff->valuestring, "geglu") &&
                                                            strcmp(ff->valuestring, "original"))))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'feed_forward_type': '%s' is not supported (geglu, "
                        "original)", file, cJSON_IsString(ff) ? slm_hf_pstr(ff->valuestring, b, sizeof b) : "?");
    if (h->classifier)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'architectures': a jina-bert-v2 classifier is not supported",
                        file);
    h->jina = cJSON_IsString(ff) && !strcmp(ff->valuestring, "geglu") ? 2 : 1;
    snprintf(c->arch, sizeof c->arch, "jina-bert-v2");
    c->encoder = 5;
    return SLM_OK;
}

#endif

int slm_hf_jina_name(const char *hf, const slm_hf_info *h, char *out, size_t cap, int *kind) {
    static const struct { const char *hf, *gg; } layer[] = {
        {"attention.self.layer_norm_q.", "attn_q_norm."}, {"attention.self.layer_norm_k.", "attn_k_norm."},
        {"layer_norm_1.", "attn_norm_2."},                {"layer_norm_2.", "layer_output_norm."},
        {"mlp.layernorm.", "layer_output_norm."},         {"mlp.wo.", "ffn_down."},
        {"mlp.down_layer.", "ffn_down."},
    };
    const char *name = strncmp(hf, "bert.", 5) ? hf : hf + 5;
    long n = 0;
    const char *p = slm_hf_layer(name, "encoder.layer.", &n);
    *kind = SLM_HF_ENC_MAT;
    if (p && (!strcmp(p, "mlp.gated_layers.weight") || !strcmp(p, "mlp.up_gated_layer.weight"))) {
        *kind = SLM_HF_ENC_GATE_UP;
        snprintf(out, cap, "blk.%ld.ffn_gate.weight", n);
        return h->jina == 2;
    }
    for (size_t i = 0; p && i < sizeof layer / sizeof layer[0]; i++) {
        const size_t k = strlen(layer[i].hf);
        if (strncmp(p, layer[i].hf, k) || (strcmp(p + k, "weight") && strcmp(p + k, "bias"))) continue;
        const int bias = p[k] == 'b';
        *kind = bias || strncmp(layer[i].gg, "ffn_down", 8) ? SLM_HF_ENC_VEC : SLM_HF_ENC_MAT;
        snprintf(out, cap, "blk.%ld.%s%s", n, layer[i].gg, bias ? "bias" : "weight");
        return h->jina == 2 || !strncmp(p, "attention.", 10) || !strncmp(p, "layer_norm_1.", 13);
    }
    const int r = slm_hf_bert_name(hf, h, out, cap, kind);
    if (r == 1 && !strcmp(out, "position_embd.weight")) return 0; /* ALiBi: no position table */
    if (r == 1 && h->jina == 2 && (strstr(out, ".ffn_up.") || strstr(out, ".ffn_down.") || strstr(out, "layer_output_norm")))
        return 0; /* bert's FFN in a geglu model */
    return r;
}
