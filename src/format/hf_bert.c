/* BERT folders (model_type "bert": BertModel, BertForMaskedLM and the
 * sentence-transformers embedding models such as all-MiniLM-L6-v2 and
 * bge-small-en-v1.5): config.json -> the config a GGUF of the same model
 * gives (arch bert, encoder 1; format/encoder.c), and the tensors' GGUF
 * names, as llama.cpp's converter maps them:
 *
 *   embeddings.word_embeddings.weight        token_embd.weight
 *   embeddings.position_embeddings.weight    position_embd.weight
 *   embeddings.token_type_embeddings.weight  token_types.weight
 *   embeddings.LayerNorm.{weight,bias}       token_embd_norm.{weight,bias}
 *   encoder.layer.N.
 *     attention.self.{query,key,value}.*     blk.N.attn_{q,k,v}.*
 *     attention.output.dense.*               blk.N.attn_output.*
 *     attention.output.LayerNorm.*           blk.N.attn_output_norm.*
 *     intermediate.dense.*                   blk.N.ffn_up.*
 *     output.dense.*                         blk.N.ffn_down.*
 *     output.LayerNorm.*                     blk.N.layer_output_norm.*
 *
 * after an optional "bert." prefix (BertForX checkpoints), with old
 * checkpoints' LayerNorm gamma / beta read as weight / bias. The pooler,
 * embeddings.position_ids (an integer buffer) and the pre-training heads
 * (cls.predictions, cls.seq_relationship) are not part of the encoder and
 * are skipped; anything else is refused by the loader. A cross-encoder
 * (architectures BertForSequenceClassification: ms-marco-MiniLM,
 * bge-reranker-base's BERT kin) keeps its head as transformers runs it:
 *
 *   pooler.dense.{weight,bias}               cls.{weight,bias}          (dense + tanh)
 *   classifier.{weight,bias}                 cls.output.{weight,bias}   (the scores)
 *
 * (llama.cpp's converter drops the pooler and puts the classifier on the
 * [CLS] row directly; a GGUF it wrote runs as it says.) Its pooling is
 * rank unless 1_Pooling names one.
 *
 * XLM-RoBERTa folders (model_type "xlm-roberta": XLMRobertaModel as bge-m3
 * and multilingual-e5-large, XLMRobertaForSequenceClassification as
 * bge-reranker-v2-m3) are the same encoder: the same keys and names after
 * an optional "roberta." prefix, their tokenizer Unigram (text/ugm_hf.c).
 * Their positions start after the padding id: rows 0..pad_token_id of
 * embeddings.position_embeddings.weight are never used and are cut off at
 * load, and the context is max_position_embeddings - (pad_token_id + 1),
 * as llama.cpp's converter writes them (pad_token_id: XLMRobertaConfig's 1
 * when absent). A cross-encoder's head is its classifier, as transformers
 * runs it and the converter writes it (the pooler is skipped):
 *
 *   classifier.dense.{weight,bias}           cls.{weight,bias}          (dense + tanh)
 *   classifier.out_proj.{weight,bias}        cls.output.{weight,bias}   (the scores)
 *
 * A "bert" folder whose tokenizer.json is Unigram (multilingual-e5-small)
 * is BERT with that tokenizer: positions from row 0.
 *
 * The config: the sizes every BERT gives (required), layer_norm_eps
 * (BertConfig's 1e-12 when absent), type_vocab_size (2 when absent; checked
 * against token_types' rows). What the graph does not run is refused by
 * key: position_embedding_type other than "absolute", hidden_act other than
 * gelu / gelu_new / gelu_pytorch_tanh / gelu_fast (staticlm's GELU is the
 * tanh form, as llama.cpp's; transformers' "gelu" is the erf form, which
 * differs from it by less than 1e-3), is_decoder or add_cross_attention
 * true, a width that the heads do not divide.
 */
#include <stdio.h>
#include <stdlib.h>

#include "format/hf.h"

#ifdef SLM_HAVE_CJSON

#include <cJSON.h>

#define pstr slm_hf_pstr

slm_status slm_hf_bert_config(const cJSON *top, const char *file, slm_model_config *c, slm_hf_info *h, slm_err *err) {
    slm_status s;
    double eps = 1e-12; /* BertConfig's layer_norm_eps */
    int types = 2, dec = 0, cross = 0, pad = 1;
    char b[64];
    memset(c, 0, sizeof *c);
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(top, "model_type");
    h->xlmr = cJSON_IsString(mt) && !strcmp(mt->valuestring, "xlm-roberta");
    if ((s = slm_hf_cfg_int(top, file, "hidden_size", 1, &c->dim, err)) ||
        (s = slm_hf_cfg_int(top, file, "intermediate_size", 1, &c->hidden_dim, err)) ||
        (s = slm_hf_cfg_int(top, file, "num_hidden_layers", 1, &c->n_layers, err)) ||
        (s = slm_hf_cfg_int(top, file, "num_attention_heads", 1, &c->n_heads, err)) ||
        (s = slm_hf_cfg_int(top, file, "vocab_size", 1, &c->vocab_size, err)) ||
        (s = slm_hf_cfg_int(top, file, "max_position_embeddings", 1, &c->context_len, err)) ||
        (s = slm_hf_cfg_int(top, file, "type_vocab_size", 0, &types, err)) ||
        (s = slm_hf_cfg_num(top, file, "layer_norm_eps", &eps, err)) ||
        (s = slm_hf_cfg_bool(top, file, "is_decoder", &dec, err)) ||
        (s = slm_hf_cfg_bool(top, file, "add_cross_attention", &cross, err)))
        return s;
    const cJSON *pj = cJSON_GetObjectItemCaseSensitive(top, "pad_token_id");
    if (h->xlmr && pj && !cJSON_IsNull(pj)) { /* 0 is a valid id: read by hand (cfg_int wants 1..) */
        if (!cJSON_IsNumber(pj) || pj->valuedouble < 0 || pj->valuedouble > 65535 || pj->valuedouble != (int)pj->valuedouble)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'pad_token_id': expected an integer in 0..65535", file);
        pad = (int)pj->valuedouble;
    }
    if (h->xlmr) {
        h->pos_offset = pad + 1;
        if (c->context_len <= h->pos_offset)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'max_position_embeddings' = %d leaves no positions after the "
                            "%d unused ones (pad_token_id + 1)", file, c->context_len, h->pos_offset);
        c->context_len -= h->pos_offset;
    }
    if (!(eps > 0 && eps < 1))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'layer_norm_eps': %g is out of range (0..1)", file, eps);
    if (types > 1024)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'type_vocab_size': %d is out of range (1..1024)", file, types);
    if (dec || cross)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s' = true: staticlm runs BERT as an encoder only", file,
                        dec ? "is_decoder" : "add_cross_attention");
    if (c->dim % c->n_heads)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'num_attention_heads' = %d does not divide 'hidden_size' = %d",
                        file, c->n_heads, c->dim);
    const cJSON *pe = cJSON_GetObjectItemCaseSensitive(top, "position_embedding_type");
    h->jina = !h->xlmr && cJSON_IsString(pe) && !strcmp(pe->valuestring, "alibi"); /* jina-bert-v2: hf_jina.c */
    if (pe && !cJSON_IsNull(pe) && !h->jina && (!cJSON_IsString(pe) || strcmp(pe->valuestring, "absolute")))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'position_embedding_type': '%s' is not supported "
                        "(absolute; alibi: jina-bert-v2)", file, cJSON_IsString(pe) ? pstr(pe->valuestring, b, sizeof b) : "?");
    int gelu = 1;
    if ((s = slm_hf_cfg_act(top, file, "hidden_act", 0, &gelu, err))) return s;
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(top, "architectures");
    const cJSON *a0 = cJSON_IsArray(arch) ? cJSON_GetArrayItem(arch, 0) : NULL;
    h->classifier = !cJSON_IsString(a0) ? 0 : !strcmp(a0->valuestring, "BertForSequenceClassification") ? 1
                    : !strcmp(a0->valuestring, "XLMRobertaForSequenceClassification") ? 2 : 0;
    snprintf(c->arch, sizeof c->arch, "bert");
    c->encoder = 1;
    c->n_kv_heads = c->n_heads;
    c->head_dim = c->dim / c->n_heads;
    c->norm_eps = (float)eps;
    c->rope_base = 10000.0f; /* unused (learned positions); what a bert GGUF without the key gives */
    c->rope_scale = 1.0f;
    h->type_vocab = types;
    return h->jina ? slm_hf_jina_config(top, file, c, h, err) : SLM_OK;
}

slm_status slm_hf_cfg_act(const cJSON *top, const char *file, const char *key, int silu, int *gelu, slm_err *err) {
    static const char *const acts[] = {"gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "silu", "swish"};
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(top, key);
    char b[64];
    *gelu = 1;
    if (!act || cJSON_IsNull(act)) return SLM_OK;
    size_t i = 0, n = silu ? 6 : 4;
    while (cJSON_IsString(act) && i < n && strcmp(act->valuestring, acts[i])) i++;
    if (!cJSON_IsString(act) || i == n)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': '%s' is not supported (gelu, gelu_new, gelu_pytorch_tanh, "
                        "gelu_fast: run as GELU's tanh form%s)", file, key,
                        cJSON_IsString(act) ? pstr(act->valuestring, b, sizeof b) : "?", silu ? "; silu, swish" : "");
    *gelu = i < 4;
    return SLM_OK;
}

#endif

const char *slm_hf_layer(const char *s, const char *prefix, long *n) {
    const size_t k = strlen(prefix);
    if (strncmp(s, prefix, k)) return NULL;
    const char *p = s + k;
    int digits = 0;
    for (*n = 0; *p >= '0' && *p <= '9' && digits < 6; p++, digits++) *n = *n * 10 + (*p - '0');
    if (!digits || *p != '.' || (digits > 1 && s[k] == '0') || *n > 65535) return NULL;
    return p + 1;
}

/* s without its suffix old (".gamma") and with new (".weight") into buf. */
static int swap_suffix(const char *s, const char *old, const char *new, char *buf, size_t cap) {
    const size_t n = strlen(s), o = strlen(old);
    if (n <= o || strcmp(s + n - o, old) || n - o + strlen(new) >= cap) return 0;
    snprintf(buf, cap, "%.*s%s", (int)(n - o), s, new);
    return 1;
}

int slm_hf_bert_name(const char *hf, const slm_hf_info *h, char *out, size_t cap, int *vec) {
    static const struct { const char *hf, *gg; } top[] = {
        {"embeddings.word_embeddings.weight", "token_embd.weight"},
        {"embeddings.position_embeddings.weight", "position_embd.weight"},
        {"embeddings.token_type_embeddings.weight", "token_types.weight"},
        {"embeddings.LayerNorm.weight", "token_embd_norm.weight"},
        {"embeddings.LayerNorm.bias", "token_embd_norm.bias"},
    };
    static const struct { const char *hf, *gg; } layer[] = {
        {"attention.self.query.", "attn_q."},       {"attention.self.key.", "attn_k."},
        {"attention.self.value.", "attn_v."},       {"attention.output.dense.", "attn_output."},
        {"attention.output.LayerNorm.", "attn_output_norm."}, {"intermediate.dense.", "ffn_up."},
        {"output.dense.", "ffn_down."},             {"output.LayerNorm.", "layer_output_norm."},
    };
    char buf[160];
    *vec = 0;
    const char *pre = h->xlmr ? "roberta." : "bert.";
    if (!strncmp(hf, pre, strlen(pre))) hf += strlen(pre);
    static const struct { const char *hf, *gg; } head[2][4] = {
        {{"pooler.dense.weight", "cls.weight"}, {"pooler.dense.bias", "cls.bias"},
         {"classifier.weight", "cls.output.weight"}, {"classifier.bias", "cls.output.bias"}},
        {{"classifier.dense.weight", "cls.weight"}, {"classifier.dense.bias", "cls.bias"},
         {"classifier.out_proj.weight", "cls.output.weight"}, {"classifier.out_proj.bias", "cls.output.bias"}},
    };
    for (size_t i = 0; h->classifier && i < 4; i++)
        if (!strcmp(hf, head[h->classifier - 1][i].hf)) {
            *vec = i % 2;
            snprintf(out, cap, "%s", head[h->classifier - 1][i].gg);
            return 1;
        }
    if (!strcmp(hf, "embeddings.position_ids") || !strncmp(hf, "pooler.", 7) || !strncmp(hf, "cls.predictions.", 16) ||
        !strncmp(hf, "cls.seq_relationship.", 21) || (h->xlmr && !strncmp(hf, "lm_head.", 8)))
        return 2;
    if (swap_suffix(hf, ".gamma", ".weight", buf, sizeof buf) || swap_suffix(hf, ".beta", ".bias", buf, sizeof buf))
        hf = buf;
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (!strcmp(hf, top[i].hf)) {
            *vec = i >= 3;
            snprintf(out, cap, "%s", top[i].gg);
            return 1;
        }
    long n = 0;
    const char *p = slm_hf_layer(hf, "encoder.layer.", &n);
    if (!p) return 0;
    for (size_t i = 0; i < sizeof layer / sizeof layer[0]; i++) {
        const size_t k = strlen(layer[i].hf);
        if (strncmp(p, layer[i].hf, k) || (strcmp(p + k, "weight") && strcmp(p + k, "bias"))) continue;
        const int bias = p[k] == 'b';
        *vec = bias || strstr(layer[i].hf, "LayerNorm") != NULL;
        snprintf(out, cap, "blk.%ld.%s%s", n, layer[i].gg, bias ? "bias" : "weight");
        return 1;
    }
    return 0;
}

slm_status slm_hf_bert_positions(const slm_hf_info *h, const slm_model_config *c, const slm_st_tensor *t,
                                 const char *shown, int64_t *row0, int64_t *rows, slm_err *err) {
    const int64_t have = t->n_dims == 2 ? t->shape[0] : 0, want = (int64_t)c->context_len + h->pos_offset;
    if (t->n_dims != 2 || have != want || t->shape[1] != c->dim)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%sembeddings.position_embeddings.weight': %lld rows of %lld, "
                        "want %lld of %d (max_position_embeddings; the first %d, pad_token_id + 1, are not used)%s", shown,
                        strncmp(t->name, "roberta.", 8) ? "" : "roberta.",
                        (long long)have, (long long)(t->n_dims == 2 ? t->shape[1] : 0), (long long)want, c->dim,
                        h->pos_offset, have <= h->pos_offset ? ": none left" : "");
    *row0 = h->pos_offset;
    *rows = have - h->pos_offset;
    return SLM_OK;
}

slm_status slm_hf_bert_finish(slm_model_file *m, const slm_hf_info *h, const char *dir, slm_err *err) {
    const slm_tensor *tt = slm_model_tensor(m, "token_types.weight");
    if (tt && tt->n_dims == 2 && tt->ne[1] != h->type_vocab)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor 'embeddings.token_type_embeddings.weight': %lld rows, "
                        "config.json's 'type_vocab_size' is %d", dir, (long long)tt->ne[1], h->type_vocab);
    for (int i = 0; i < m->n_tensors; i++) {
        const char *name = m->tensors[i].name;
        if (strncmp(name, "blk.", 4)) continue;
        const long l = strtol(name + 4, NULL, 10);
        if (l >= m->cfg.n_layers)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: tensors of layer %ld, config.json's 'num_hidden_layers' is %d",
                            dir, l, m->cfg.n_layers);
    }
    return SLM_OK;
}
