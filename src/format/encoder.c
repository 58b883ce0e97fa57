/* Encoders: bert, nomic-bert, nomic-bert-moe, modern-bert and jina-bert-v2
 * GGUF files (embedding models such as bge-small, all-MiniLM,
 * nomic-embed-text v1.5 and v2-moe, modernbert-embed, gte-modernbert), as llama.cpp's converter writes them and its graphs run
 * them (model.h: slm_model_config.encoder). */
#include <stdio.h>
#include <string.h>

#include "format/model.h"

/* An integer key in [lo, hi], or def when absent. */
static slm_status int_key(const slm_gguf *g, const char *file, const char *key, int64_t lo, int64_t hi, int64_t def,
                          int *v, slm_err *err) {
    int64_t x = def;
    if (slm_gguf_find(g, key) >= 0 && !slm_gguf_get_i64(g, key, &x))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected an integer", file, key);
    if (x < lo || x > hi)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s' = %lld is out of range (%lld..%lld)", file, key,
                        (long long)x, (long long)lo, (long long)hi);
    *v = (int)x;
    return SLM_OK;
}

/* nomic-bert-moe's experts, as llama.cpp reads and runs them: layer l
 * has them when moe_every_n_layers > 0 and l % it == 1 (so none for 0 or
 * 1); expert_count and expert_used_count; softmax over every expert, the
 * top K weights as they are (llama.cpp passes no renormalization and no
 * scale for this family, whatever other keys say); each expert up, GELU,
 * down, no gate, no biases (the converter drops the experts' bias). */
static slm_status moe_params(const slm_gguf *g, const char *file, const char *A, slm_model_config *c, slm_err *err) {
    char key[96];
    slm_status s;
    int every = 0, n = 0, used = 0;
    snprintf(key, sizeof key, "%s.moe_every_n_layers", A);
    if ((s = int_key(g, file, key, 0, 255, 0, &every, err))) return s;
    if (every < 2 || c->n_layers < 2) return SLM_OK; /* no layer has experts: bert's GELU FFN on each */
    snprintf(key, sizeof key, "%s.expert_count", A);
    if (slm_gguf_find(g, key) < 0) return slm_errf(err, SLM_ERR_FORMAT, "%s: missing required key '%s'", file, key);
    if ((s = int_key(g, file, key, 1, 1024, 0, &n, err))) return s;
    snprintf(key, sizeof key, "%s.expert_used_count", A);
    if (slm_gguf_find(g, key) < 0) return slm_errf(err, SLM_ERR_FORMAT, "%s: missing required key '%s'", file, key);
    if ((s = int_key(g, file, key, 1, n < 64 ? n : 64, 0, &used, err))) return s;
    c->n_experts = n;
    c->n_experts_used = used;
    c->moe_every = (uint8_t)every;
    c->expert_ungated = 1;
    return SLM_OK;
}

int slm_gguf_bert_family(const char *A) {
    return !strcmp(A, "bert") || !strcmp(A, "nomic-bert") || !strcmp(A, "modern-bert") || !strcmp(A, "jina-bert-v2") ||
           !strcmp(A, "nomic-bert-moe");
}

slm_status slm_gguf_encoder_params(const slm_gguf *g, const char *file, const char *A, slm_model_config *c,
                                   slm_err *err) {
    char key[96];
    int b;
    const int modern = !strcmp(A, "modern-bert"), moe = !strcmp(A, "nomic-bert-moe");
    c->encoder = modern ? 4 : !strcmp(A, "nomic-bert") ? 2 : !strcmp(A, "jina-bert-v2") ? 5 : moe ? 6 : 1;
    c->rope_neox = c->encoder == 2 || modern || moe; /* nomic-bert(-moe), modern-bert rotate Q and K (neox pairs) */
    c->norm_eps = 1e-12f;           /* BERT's LayerNorm epsilon, when the file does not say */
    snprintf(key, sizeof key, "%s.attention.layer_norm_epsilon", A);
    if ((modern || c->encoder == 5 || moe) && slm_gguf_find(g, key) < 0) /* llama.cpp requires it of these */
        return slm_errf(err, SLM_ERR_FORMAT, "%s: missing required key '%s'", file, key);
    if (slm_gguf_find(g, key) >= 0 && !slm_gguf_get_f32(g, key, &c->norm_eps))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected a float", file, key);
    if (modern) { /* the FFN's activation: GeGLU unless hidden_activation names SiLU (llama.cpp's rule) */
        slm_gguf_str act;
        c->ffn_gelu = 1;
        snprintf(key, sizeof key, "%s.hidden_activation", A);
        if (slm_gguf_find(g, key) >= 0 && !slm_gguf_get_str(g, key, &act))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected a string", file, key);
        if (slm_gguf_find(g, key) >= 0) {
            if (slm_gguf_str_eq(act, "silu") || slm_gguf_str_eq(act, "swish") || slm_gguf_str_eq(act, "swiglu"))
                c->ffn_gelu = 0;
            else if (slm_gguf_str_eq(act, "relu") || slm_gguf_str_eq(act, "reglu"))
                return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': a ReLU FFN is not supported (GELU or SiLU)",
                                file, key);
        }
        if (c->sliding_window == 1)
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s.attention.sliding_window' = 1: a window of no "
                            "neighbours is not supported", file, A);
    }
    snprintf(key, sizeof key, "%s.attention.causal", A);
    if (slm_gguf_find(g, key) >= 0 && (!slm_gguf_get_bool(g, key, &b) || b))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': a %s model that attends causally is not supported",
                        file, key, A);
    if (c->n_kv_heads != c->n_heads)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: %d KV heads for %d query heads: %s has one per query head",
                        file, c->n_kv_heads, c->n_heads, A);
    if (modern && slm_gguf_find_tensor(g, "blk.0.attn_qkv.bias")) /* the others' is split at load (gguf_model.c) */
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: tensor 'blk.0.attn_qkv.bias': a fused Q/K/V bias is not "
                        "supported in %s", file, A);
    if (moe) return moe_params(g, file, A, c, err);
    for (int l = 0; l < 2 && l < c->n_layers; l++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.ffn_up_exps.weight", l);
        if (slm_gguf_find_tensor(g, name))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: tensor '%s': %s has no experts (nomic-bert-moe has)", file,
                            name, A);
    }
    return SLM_OK;
}

/* A bias vector of n floats where the file has one. */
static slm_status opt_bias(const slm_model_file *m, const char *file, const char *fmt, int l, int64_t n,
                           slm_err *err) {
    char name[64];
    snprintf(name, sizeof name, fmt, l);
    if (!slm_model_tensor(m, name)) return SLM_OK;
    return slm_model_check_tensor(m, file, name, n, 1, 1, err);
}

/* modern-bert: the norms' gains (no biases), the fused matrices as the
 * loader split them (attn_qkv -> attn_q/k/v; ffn_up [dim, 2 x hidden] ->
 * ffn_gate, ffn_up), output_norm; layer 0 may lack attn_norm. Tensors the
 * graph does not read (a reranker's cls.*) are left to their readers. */
static slm_status modern_tensors(const slm_model_file *m, const char *file, slm_err *err) {
    const slm_model_config *c = &m->cfg;
    const int64_t dim = c->dim, hid = c->hidden_dim;
    slm_status s;
    if ((s = slm_model_check_tensor(m, file, "token_embd.weight", dim, c->vocab_size, 0, err)) ||
        (s = slm_model_check_tensor(m, file, "token_embd_norm.weight", dim, 1, 1, err)) ||
        (s = slm_model_check_tensor(m, file, "output_norm.weight", dim, 1, 1, err)))
        return s;
    for (int l = 0; l < c->n_layers; l++) {
        static const struct { const char *fmt; int ne0, ne1, vec; } k[] = {
            /* ne in units: 0 dim, 1 hidden; -1: a vector */
            {"blk.%d.attn_q.weight", 0, 0, 0},   {"blk.%d.attn_k.weight", 0, 0, 0},
            {"blk.%d.attn_v.weight", 0, 0, 0},   {"blk.%d.attn_output.weight", 0, 0, 0},
            {"blk.%d.ffn_norm.weight", 0, -1, 1}, {"blk.%d.ffn_gate.weight", 0, 1, 0},
            {"blk.%d.ffn_up.weight", 0, 1, 0},   {"blk.%d.ffn_down.weight", 1, 0, 0},
            {"blk.%d.attn_norm.weight", 0, -1, 1}, /* optional on layer 0 */
        };
        const int64_t unit[2] = {dim, hid};
        for (size_t j = 0; j < sizeof k / sizeof k[0]; j++) {
            char name[64];
            snprintf(name, sizeof name, k[j].fmt, l);
            if (l == 0 && j == sizeof k / sizeof k[0] - 1 && !slm_model_tensor(m, name)) continue;
            if ((s = slm_model_check_tensor(m, file, name, unit[k[j].ne0], k[j].ne1 < 0 ? 1 : unit[k[j].ne1], k[j].vec,
                                            err)))
                return s;
        }
    }
    return SLM_OK;
}

slm_status slm_encoder_check_tensors(const slm_model_file *m, const char *file, slm_err *err) {
    const slm_model_config *c = &m->cfg;
    const int64_t dim = c->dim, hid = c->hidden_dim, qd = (int64_t)c->n_heads * c->head_dim;
    slm_status s;
    if (qd != dim)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %d heads of %d make %lld, not the width %d", file, c->n_heads,
                        c->head_dim, (long long)qd, c->dim);
    if (c->encoder == 4) return modern_tensors(m, file, err);
    if ((s = slm_model_check_tensor(m, file, "token_embd.weight", dim, c->vocab_size, 0, err)) ||
        (s = slm_model_check_tensor(m, file, "token_embd_norm.weight", dim, 1, 1, err)) ||
        (s = slm_model_check_tensor(m, file, "token_embd_norm.bias", dim, 1, 1, err)))
        return s;
    const slm_tensor *tt = slm_model_tensor(m, "token_types.weight"); /* optional: row 0 is added */
    const int64_t types = tt && tt->n_dims == 2 ? tt->ne[1] : 1; /* one type ([dim, 1]) may be written 1-D */
    if (tt && (tt->n_dims < 1 || tt->n_dims > 2 || types < 1 || types > 1024))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor 'token_types.weight': want [%lld, types 1..1024]", file,
                        (long long)dim);
    if (tt && (s = slm_model_check_tensor(m, file, "token_types.weight", dim, types, 0, err))) return s;
    if (c->encoder == 1 && (s = slm_model_check_tensor(m, file, "position_embd.weight", dim, c->context_len, 0, err)))
        return s;
    if (c->encoder == 5 && !tt) /* llama.cpp requires jina-bert-v2's */
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor 'token_types.weight' missing", file);
    for (int l = 0; l < c->n_layers; l++) {
        static const struct { const char *fmt; int ne0, ne1, vec; } k[] = {
            /* ne in units: 0 dim, 1 hidden; -1: a vector */
            {"blk.%d.attn_q.weight", 0, 0, 0},          {"blk.%d.attn_k.weight", 0, 0, 0},
            {"blk.%d.attn_v.weight", 0, 0, 0},          {"blk.%d.attn_output.weight", 0, 0, 0},
            {"blk.%d.attn_output_norm.weight", 0, -1, 1}, {"blk.%d.attn_output_norm.bias", 0, -1, 1},
            {"blk.%d.ffn_up.weight", 0, 1, 0},          {"blk.%d.ffn_down.weight", 1, 0, 0},
            {"blk.%d.layer_output_norm.weight", 0, -1, 1}, {"blk.%d.layer_output_norm.bias", 0, -1, 1},
            {"blk.%d.ffn_gate.weight", 0, 1, 0}, /* nomic-bert only */
        };
        const int64_t unit[2] = {dim, hid};
        char gname[64];
        snprintf(gname, sizeof gname, "blk.%d.ffn_gate.weight", l); /* jina-bert-v2: a gate where the file has one */
        const size_t nk = sizeof k / sizeof k[0] - (c->encoder == 2 || (c->encoder == 5 && slm_model_tensor(m, gname)) ? 0 : 1);
        const int moe = slm_layer_moe(c, l); /* nomic-bert-moe: its experts in place of up and down (model.c) */
        for (size_t j = 0; j < nk; j++) {
            char name[64];
            if (moe && (j == 6 || j == 7)) continue;
            snprintf(name, sizeof name, k[j].fmt, l);
            if ((s = slm_model_check_tensor(m, file, name, unit[k[j].ne0], k[j].ne1 < 0 ? 1 : unit[k[j].ne1], k[j].vec,
                                            err)))
                return s;
        }
        static const char *const bias[6] = {"blk.%d.attn_q.bias", "blk.%d.attn_k.bias", "blk.%d.attn_v.bias",
                                            "blk.%d.attn_output.bias", "blk.%d.ffn_up.bias", "blk.%d.ffn_down.bias"};
        for (int j = 0; j < (moe ? 4 : 6); j++)
            if ((s = opt_bias(m, file, bias[j], l, j == 4 ? hid : dim, err))) return s;
        if (c->encoder != 5) continue;
        /* jina-bert-v2: the gate's bias, Q / K LayerNorms and the second attention LayerNorm, where present */
        static const char *const opt[7] = {"blk.%d.ffn_gate.bias", "blk.%d.attn_q_norm.weight", "blk.%d.attn_q_norm.bias",
                                           "blk.%d.attn_k_norm.weight", "blk.%d.attn_k_norm.bias",
                                           "blk.%d.attn_norm_2.weight", "blk.%d.attn_norm_2.bias"};
        for (int j = 0; j < 7; j++)
            if ((s = opt_bias(m, file, opt[j], l, j == 0 ? hid : dim, err))) return s;
        for (int j = 1; j < 7; j += 2) { /* a norm's gain and bias both, or neither */
            char w[64], b[64];
            snprintf(w, sizeof w, opt[j], l);
            snprintf(b, sizeof b, opt[j + 1], l);
            if (!slm_model_tensor(m, w) != !slm_model_tensor(m, b))
                return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s' without '%s'", file,
                                slm_model_tensor(m, w) ? w : b, slm_model_tensor(m, w) ? b : w);
        }
    }
    return SLM_OK;
}
