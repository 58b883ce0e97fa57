/* The model from a GGUF file: hyperparameters from the metadata, tensors
 * from the tensor table (format/gguf.c parses and checks the file itself). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "format/model.h"

/* ---- GGUF ----------------------------------------------------------------- */

/* A required or optional integer key into *v, checked to fit 1..INT32_MAX
 * (range checks proper are slm_model_validate's). */
static slm_status get_int(const slm_gguf *g, const char *file, const char *key, int required, int *v,
                          slm_err *err) {
    int64_t i = slm_gguf_find(g, key), x;
    if (i < 0) {
        if (required) return slm_errf(err, SLM_ERR_FORMAT, "%s: missing required key '%s'", file, key);
        return SLM_OK;
    }
    if (!slm_gguf_get_i64(g, key, &x))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected an integer, found %s", file, key,
                        slm_gguf_type_name(slm_gguf_kv_type(g, i)));
    if (x <= 0 || x > INT32_MAX)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %lld is out of range (1..%d)", file, key, (long long)x,
                        INT32_MAX);
    *v = (int)x;
    return SLM_OK;
}

static slm_status get_float(const slm_gguf *g, const char *file, const char *key, float *v, slm_err *err) {
    int64_t i = slm_gguf_find(g, key);
    if (i < 0) return SLM_OK; /* keep the default */
    if (!slm_gguf_get_f32(g, key, v))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected a float, found %s", file, key,
                        slm_gguf_type_name(slm_gguf_kv_type(g, i)));
    return SLM_OK;
}

/* Rows [r0, r0 + n) of matrix t as a tensor of their own, named name. */
static void part_of(slm_tensor *dst, const slm_tensor *t, const char *name, int64_t r0, int64_t n) {
    const uint64_t rb = t->ne[1] ? t->nbytes / (uint64_t)t->ne[1] : 0;
    *dst = *t;
    snprintf(dst->name, sizeof dst->name, "%s", name);
    dst->ne[1] = n;
    dst->data = (const uint8_t *)t->data + (uint64_t)r0 * rb;
    dst->nbytes = (uint64_t)n * rb;
}

/* Fused matrices (phi3) become the separate ones the decoder reads, as
 * row ranges of the same bytes: blk.N.attn_qkv.weight -> attn_q / attn_k /
 * attn_v (Q rows first, then K, then V), its bias (nomic-bert-moe) the same, and an ffn_up.weight of twice the
 * FFN width without an ffn_gate -> ffn_gate (the first half) and ffn_up,
 * its bias of twice the width too (jina-bert-v2).
 * The fused names leave the table (no matrix is listed twice). */
static slm_status split_fused(slm_model_file *m, const char *file, int cap, slm_err *err) {
    const slm_model_config *c = &m->cfg;
    if (c->recur_interval) return SLM_OK; /* qwen35: attn_qkv is the DeltaNet layers' own matrix */
    const int64_t qd = (int64_t)c->n_heads * c->head_dim, kvd = (int64_t)c->n_kv_heads * c->head_dim;
    const int n0 = m->n_tensors; /* walk the file's tensors (not n_layers: the config is not validated yet) */
    for (int i = 0; i < n0; i++) {
        slm_tensor *t = &m->tensors[i];
        int l, end = 0;
        char kind[16];
        if (sscanf(t->name, "blk.%d.ffn_up.bias%n", &l, &end) == 1 && end > 0 && !t->name[end] && l >= 0) {
            /* jina-bert-v2: the fused up's bias [2 x hidden] -> ffn_gate.bias (the first half) and ffn_up.bias */
            char g[64], gb[64];
            snprintf(g, sizeof g, "blk.%d.ffn_gate.weight", l);
            snprintf(gb, sizeof gb, "blk.%d.ffn_gate.bias", l);
            if (slm_gguf_find_tensor(m->gguf, g) || slm_gguf_find_tensor(m->gguf, gb) || t->n_dims != 1 ||
                t->ne[0] != 2 * (int64_t)c->hidden_dim || t->nbytes % 2)
                continue;
            if (m->n_tensors + 1 > cap) return slm_errf(err, SLM_ERR_INTERNAL, "%s: tensor table full", file);
            slm_tensor *d = &m->tensors[m->n_tensors++];
            *d = *t;
            snprintf(d->name, sizeof d->name, "%s", gb);
            d->ne[0] = t->ne[0] = c->hidden_dim;
            d->nbytes = t->nbytes = t->nbytes / 2;
            t->data = (const uint8_t *)t->data + t->nbytes;
            continue;
        }
        if (sscanf(t->name, "blk.%d.attn_qkv.bias%n", &l, &end) == 1 && end > 0 && !t->name[end] && l >= 0) {
            /* nomic-bert-moe: the fused Q/K/V bias -> attn_q.bias, attn_k.bias, attn_v.bias (f32) */
            if (t->n_dims != 1 || t->type != SLM_F32 || t->ne[0] != qd + 2 * kvd || t->nbytes != (uint64_t)t->ne[0] * 4)
                return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': want f32 [%lld] (q + k + v)", file, t->name,
                                (long long)(qd + 2 * kvd));
            if (m->n_tensors + 2 > cap) return slm_errf(err, SLM_ERR_INTERNAL, "%s: tensor table full", file);
            static const char *const part[3] = {"q", "k", "v"};
            const slm_tensor whole = *t;
            for (int j = 0; j < 3; j++) {
                slm_tensor *d = j ? &m->tensors[m->n_tensors++] : t;
                const int64_t r0 = j ? qd + (j - 1) * kvd : 0, n = j ? kvd : qd;
                *d = whole;
                snprintf(d->name, sizeof d->name, "blk.%d.attn_%s.bias", l, part[j]);
                d->ne[0] = n;
                d->data = (const uint8_t *)whole.data + (uint64_t)r0 * 4;
                d->nbytes = (uint64_t)n * 4;
            }
            continue;
        }
        end = 0;
        if (sscanf(t->name, "blk.%d.%15[a-z_].weight%n", &l, kind, &end) != 2 || end == 0 || t->name[end] || l < 0)
            continue;
        const int qkv = !strcmp(kind, "attn_qkv"), up = !strcmp(kind, "ffn_up");
        if (!qkv && !up) continue;
        char name[64], n1[64], n2[64], n3[64];
        snprintf(name, sizeof name, "%s", t->name);
        snprintf(n1, sizeof n1, qkv ? "blk.%d.attn_q.weight" : "blk.%d.ffn_gate.weight", l);
        if (slm_gguf_find_tensor(m->gguf, n1)) continue; /* not fused (the file's own table: O(1)) */
        if (qkv) {
            if (t->n_dims != 2 || t->ne[1] != qd + 2 * kvd || t->nbytes % (uint64_t)t->ne[1])
                return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': %lld rows, the config needs %lld (q + k + v)", file,
                                name, (long long)t->ne[1], (long long)(qd + 2 * kvd));
            if (m->n_tensors + 2 > cap) return slm_errf(err, SLM_ERR_INTERNAL, "%s: tensor table full", file);
            snprintf(n2, sizeof n2, "blk.%d.attn_k.weight", l);
            snprintf(n3, sizeof n3, "blk.%d.attn_v.weight", l);
            const slm_tensor whole = *t;
            m->qkv_fused = 1;
            part_of(t, &whole, n1, 0, qd);
            part_of(&m->tensors[m->n_tensors++], &whole, n2, qd, kvd);
            part_of(&m->tensors[m->n_tensors++], &whole, n3, qd + kvd, kvd);
        } else if (t->n_dims == 2 && t->ne[1] == 2 * (int64_t)c->hidden_dim && t->nbytes % (uint64_t)t->ne[1] == 0) {
            if (m->n_tensors + 1 > cap) return slm_errf(err, SLM_ERR_INTERNAL, "%s: tensor table full", file);
            const slm_tensor whole = *t;
            part_of(t, &whole, name, c->hidden_dim, c->hidden_dim);
            part_of(&m->tensors[m->n_tensors++], &whole, n1, 0, c->hidden_dim);
        }
    }
    return SLM_OK;
}

/* The fused gate and up of the experts (gemma4: llama.cpp's
 * blk.N.ffn_gate_up_exps.weight [dim, 2 * width, n_experts]): in each
 * expert's slice the gate's rows come first, then the up's (llama.cpp's
 * views of the product), so expert e's ffn_gate.E and ffn_up.E are the two
 * halves of its bytes. Tensor i leaves the table. */
static slm_status split_gate_up(slm_model_file *m, const char *file, int i, int l, int cap, slm_err *err) {
    const int E = m->cfg.n_experts;
    const slm_tensor whole = m->tensors[i];
    if (whole.n_dims != 3 || whole.ne[2] != E || whole.ne[1] < 2 || whole.ne[1] % 2 || whole.nbytes % (2 * (uint64_t)E))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': shape [%lld, %lld, %lld] (%llu bytes), the config needs "
                        "[in, 2 x width, %d]", file, whole.name, (long long)whole.ne[0], (long long)whole.ne[1],
                        (long long)whole.ne[2], (unsigned long long)whole.nbytes, E);
    if (m->n_tensors + 2 * E - 1 > cap) return slm_errf(err, SLM_ERR_INTERNAL, "%s: tensor table full", file);
    const uint64_t eb = whole.nbytes / (uint64_t)E;
    for (int e = 0; e < E; e++)
        for (int j = 0; j < 2; j++) {
            slm_tensor *d = e || j ? &m->tensors[m->n_tensors++] : &m->tensors[i];
            *d = whole;
            snprintf(d->name, sizeof d->name, "blk.%d.ffn_%s.%d.weight", l, j ? "up" : "gate", e);
            d->n_dims = 2;
            d->ne[1] = whole.ne[1] / 2;
            d->ne[2] = 1;
            d->data = (const uint8_t *)whole.data + (uint64_t)e * eb + (uint64_t)j * (eb / 2);
            d->nbytes = eb / 2;
        }
    return SLM_OK;
}

/* Expert matrices (MoE): a 3-D blk.N.ffn_{gate,up,down}_exps.weight
 * [in, out, n_experts] becomes n_experts matrices blk.N.ffn_gate.E.weight
 * (the names of the older per-expert files), each a slice of the same
 * bytes; the 3-D name leaves the table. Only with n_experts from the
 * config, and only tensors whose third dimension is that count. A fused
 * blk.N.ffn_gate_up_exps.weight [in, 2 x out, n_experts] (llama.cpp's
 * converters' --fuse-gate-up-exps) becomes each expert's gate (its first
 * out rows) and up (the rest). */
static slm_status split_experts(slm_model_file *m, const char *file, int cap, slm_err *err) {
    const int E = m->cfg.n_experts;
    slm_status s;
    if (E <= 0) return SLM_OK;
    const int n0 = m->n_tensors;
    for (int i = 0; i < n0; i++) {
        slm_tensor *t = &m->tensors[i];
        int l, end = 0;
        char kind[16];
        char what[8] = "weight";
        if (sscanf(t->name, "blk.%d.ffn_gate_up_exps.weight%n", &l, &end) == 1 && end > 0 && !t->name[end] && l >= 0) {
            if ((s = split_gate_up(m, file, i, l, cap, err))) return s;
            continue;
        }
        end = 0;
        if (sscanf(t->name, "blk.%d.ffn_%5[a-z]_exps.%6[a-z]%n", &l, kind, what, &end) != 3 || end == 0 || t->name[end] ||
            l < 0 || (strcmp(what, "weight") && strcmp(what, "bias")))
            continue;
        if (strcmp(kind, "gate") && strcmp(kind, "up") && strcmp(kind, "down")) continue;
        const slm_tensor whole = *t;
        const int bias = !strcmp(what, "bias"); /* gpt-oss: [out, n_experts] */
        if (whole.n_dims != (bias ? 2u : 3u) || whole.ne[bias ? 1 : 2] != E || whole.nbytes % (uint64_t)E)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': shape [%lld, %lld, %lld] (%llu bytes), the config "
                            "needs %d experts", file, whole.name, (long long)whole.ne[0], (long long)whole.ne[1],
                            (long long)whole.ne[2], (unsigned long long)whole.nbytes, E);
        if (m->n_tensors + E - 1 > cap) return slm_errf(err, SLM_ERR_INTERNAL, "%s: tensor table full", file);
        const uint64_t eb = whole.nbytes / (uint64_t)E;
        for (int e = 0; e < E; e++) {
            slm_tensor *d = e ? &m->tensors[m->n_tensors++] : t;
            *d = whole;
            snprintf(d->name, sizeof d->name, "blk.%d.ffn_%s.%d.%s", l, kind, e, what);
            d->n_dims = bias ? 1 : 2;
            d->ne[bias ? 1 : 2] = 1;
            d->data = (const uint8_t *)whole.data + (uint64_t)e * eb;
            d->nbytes = eb;
        }
    }
    return SLM_OK;
}

/* The shared expert (llama.cpp's keys and rules): qwen2moe's and
 * qwen35moe's, of width expert_shared_feed_forward_length (else
 * feed_forward_length) behind its sigmoid gate (qwen35moe: required, as
 * llama.cpp requires its tensors); granitemoe's (GraniteMoeShared) when that key is > 0, no
 * gate. Other families with one (expert_shared_count, the key, or the
 * tensors) are refused. dense_ffn: feed_forward_length. */
static slm_status shared_params(const slm_gguf *g, const char *file, const char *A, int dense_ffn, slm_model_config *c,
                                slm_err *err) {
    char key[96];
    slm_status s;
    const int is_q2 = !strcmp(A, "qwen2moe") || !strcmp(A, "qwen35moe"), is_gmoe = !strcmp(A, "granitemoe");
    int count = 0, width = 0;
    if (!strcmp(A, "glm4moe")) return SLM_OK; /* glm4moe_params */
    snprintf(key, sizeof key, "%s.expert_shared_feed_forward_length", A);
    if ((s = get_int(g, file, key, 0, &width, err))) return s;
    if (is_q2 || (is_gmoe && width)) {
        c->shared_ffn = width ? width : dense_ffn;
        c->shared_gate = is_q2;
        if (!c->shared_ffn)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: the shared expert's width unknown: neither '%s' nor '%s.feed_forward_length'",
                            file, key, A);
        return SLM_OK;
    }
    if (width) return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s' = %d: shared experts of %s models are not "
                               "supported (qwen2moe, qwen35moe and granitemoe have them)", file, key, width, A);
    snprintf(key, sizeof key, "%s.expert_shared_count", A);
    if ((s = get_int(g, file, key, 0, &count, err))) return s;
    if (count) return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s' = %d: shared experts of %s models are not "
                               "supported (qwen2moe, qwen35moe and granitemoe have them)", file, key, count, A);
    static const char *const names[2] = {"blk.0.ffn_gate_inp_shexp.weight", "blk.0.ffn_up_shexp.weight"};
    for (int i = 0; i < 2; i++)
        if (slm_gguf_find_tensor(g, names[i]))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: tensor '%s': shared experts of %s models are not supported "
                            "(qwen2moe, qwen35moe and granitemoe have them)", file, names[i], A);
    return SLM_OK;
}

/* The router's scores (llama.cpp's expert_gating_func: 1 softmax, 2
 * sigmoid; glm4moe's default sigmoid, the others' softmax) and its expert
 * groups (DeepSeek-V3's: expert_group_count / expert_group_used_count,
 * refused above 1). */
static slm_status routing_params(const slm_gguf *g, const char *file, const char *A, slm_model_config *c,
                                 slm_err *err) {
    char key[96];
    const int is_glm = !strcmp(A, "glm4moe");
    int64_t f = is_glm ? 2 : 1;
    snprintf(key, sizeof key, "%s.expert_gating_func", A);
    if (slm_gguf_find(g, key) >= 0 && (!slm_gguf_get_i64(g, key, &f) || (f != 1 && (f != 2 || !is_glm))))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': only softmax gating (1) is supported%s", file, key,
                        is_glm ? ", and sigmoid (2)" : " (sigmoid on glm4moe)");
    c->expert_sigmoid = f == 2;
    static const char *const groups[2] = {"expert_group_count", "expert_group_used_count"};
    for (int i = 0; i < 2; i++) {
        int64_t v = 0;
        snprintf(key, sizeof key, "%s.%s", A, groups[i]);
        if (slm_gguf_find(g, key) < 0) continue;
        if (!slm_gguf_get_i64(g, key, &v))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected an integer", file, key);
        if (v > 1)
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s' = %lld: expert groups are not supported (1 only)",
                            file, key, (long long)v);
    }
    return SLM_OK;
}

/* GLM-4.5 / 4.6 (llama.cpp's glm4moe): the first leading_dense_block_count
 * layers dense (width feed_forward_length: dense_ffn), the others MoE with
 * a selection bias (blk.N.exp_probs_b.bias), top-K weights renormalized
 * when expert_weights_norm, scaled by expert_weights_scale, and
 * expert_shared_count ungated shared experts of the experts' width; the
 * nextn_predict_layers trailing MTP layers are not run (n_layers excludes
 * them); Q/K/V biases and per-head Q/K norms when the file has them; the FFN
 * norm named post_attention_norm (load_tensors). M-RoPE (GLM-4.xV's
 * rope.dimension_sections) is refused. */
static slm_status glm4moe_params(const slm_gguf *g, const char *file, const char *A, int dense_ffn, slm_model_config *c,
                                 slm_err *err) {
    char key[96];
    slm_status s;
    int64_t v = 0;
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, A), key)
    if (slm_gguf_find(g, KEY("nextn_predict_layers")) >= 0 &&
        (!slm_gguf_get_i64(g, key, &v) || v < 0 || v >= c->n_layers))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': not an integer in 0..%d", file, key, c->n_layers - 1);
    c->nextn_layers = (int)v;
    c->n_layers -= c->nextn_layers;
    v = 0;
    if (slm_gguf_find(g, KEY("leading_dense_block_count")) >= 0 &&
        (!slm_gguf_get_i64(g, key, &v) || v < 0 || v > c->n_layers))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': not an integer in 0..%d", file, key, c->n_layers);
    c->dense_lead = (int)v;
    c->dense_ffn = v ? dense_ffn : 0;
    int count = 0, norm = 0;
    if ((s = get_int(g, file, KEY("expert_shared_count"), 0, &count, err))) return s;
    if (count > 64) return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s' = %d is out of range (0..64)", file, key, count);
    c->shared_ffn = count * c->hidden_dim;
    if (slm_gguf_find(g, KEY("expert_weights_norm")) >= 0 && !slm_gguf_get_bool(g, key, &norm))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected a boolean", file, key);
    c->expert_norm = norm != 0;
    float scale = 0.0f;
    if ((s = get_float(g, file, KEY("expert_weights_scale"), &scale, err))) return s;
    if (!(scale >= 0.0f && scale < 1e6f))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %g is out of range (0..1e6)", file, key, (double)scale);
    c->expert_scale = scale == 1.0f ? 0.0f : scale;
    c->expert_sel_bias = 1;
    slm_gguf_type et;
    uint64_t n = 0;
    const void *data;
    if (slm_gguf_get_arr(g, KEY("rope.dimension_sections"), &et, &n, &data))
        for (uint64_t i = 0; i < n && (et == SLM_GGUF_I32 || et == SLM_GGUF_U32); i++) {
            int32_t x;
            memcpy(&x, (const uint8_t *)data + 4 * i, 4);
            if (x != 0)
                return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': multimodal RoPE (M-RoPE) is not supported",
                                file, key);
        }
    c->qkv_bias = slm_gguf_find_tensor(g, "blk.0.attn_q.bias") != NULL;
    c->qk_norm = slm_gguf_find_tensor(g, "blk.0.attn_q_norm.weight") != NULL;
    return SLM_OK;
#undef KEY
}

/* Mixture of experts (llama.cpp's keys and rules): expert_count and
 * expert_used_count; the experts' width expert_feed_forward_length (qwen3moe,
 * qwen2moe, qwen35moe; else feed_forward_length / used, as llama.cpp) or
 * feed_forward_length (llama with experts: Mixtral; olmoe; granitemoe); the
 * top-k weights renormalized except for olmoe and qwen2moe (qwen35moe:
 * always, as llama.cpp's graph does whatever the keys say); the shared
 * expert (shared_params). Other gating functions than softmax are refused. */
static slm_status moe_params(const slm_gguf *g, const char *file, const char *A, slm_model_config *c, slm_err *err) {
    char key[96];
    slm_status s;
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, A), key)
    const int is_qwen3moe = !strcmp(A, "qwen3moe"), is_olmoe = !strcmp(A, "olmoe"), is_gmoe = !strcmp(A, "granitemoe"),
              is_oss = !strcmp(A, "gpt-oss"), is_q2 = !strcmp(A, "qwen2moe");
    const int is_glm = !strcmp(A, "glm4moe"), is_q35m = !strcmp(A, "qwen35moe");
    const int moe_family = is_qwen3moe || is_olmoe || is_gmoe || is_oss || is_q2 || is_glm || is_q35m;
    int n = 0, used = 0;
    if (!strcmp(A, "gemma4") || !strcmp(A, "nomic-bert-moe")) return SLM_OK; /* theirs: gemma4.c, encoder.c */
    if ((s = get_int(g, file, KEY("expert_count"), moe_family, &n, err))) return s;
    if (!n) return SLM_OK;
    if (!moe_family && strcmp(A, "llama"))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s' = %d: mixture-of-experts %s models are not supported "
                        "(llama, qwen3moe, qwen2moe, olmoe, granitemoe, gpt-oss, glm4moe and qwen35moe are)", file, key, n, A);
    if (n > 1024) return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s' = %d is out of range (1..1024)", file, key, n);
    if ((s = get_int(g, file, KEY("expert_used_count"), 1, &used, err))) return s;
    if (used > n || used > 64)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s' = %d: more than the %d experts (or 64)", file, key, used, n);
    if ((s = shared_params(g, file, A, c->hidden_dim, c, err))) return s;
    if ((s = routing_params(g, file, A, c, err))) return s;
    const int dense_ffn = c->hidden_dim;
    if (is_qwen3moe || is_oss || is_q2 || is_glm || is_q35m) { /* gpt-oss, glm4moe: the key is required */
        int w = 0;
        if ((s = get_int(g, file, KEY("expert_feed_forward_length"), is_oss || is_glm, &w, err))) return s;
        c->hidden_dim = w ? w : c->hidden_dim / used;
        if (!c->hidden_dim) /* qwen35moe: feed_forward_length is optional (its converter writes it only when given) */
            return slm_errf(err, SLM_ERR_FORMAT, "%s: the experts' width unknown: neither '%s' nor '%s.feed_forward_length' "
                            "(at least %d)", file, key, A, used);
    }
    if (is_oss) {
        /* the router's softmax over the K chosen logits (llama.cpp's SOFTMAX_WEIGHT) is
         * the softmax over all, renormalized over the K; biases on the router and the
         * experts; the clamped SwiGLU with llama.cpp's constants */
        c->expert_bias = 1;
        c->swiglu_alpha = 1.702f;
        c->swiglu_limit = 7.0f;
    }
    c->n_experts = n;
    c->n_experts_used = used;
    c->expert_norm = !is_olmoe && !is_q2;
    if (is_glm) return glm4moe_params(g, file, A, dense_ffn, c, err);
#undef KEY
    return SLM_OK;
}

/* YaRN (rope.scaling.type "yarn" with a factor above 1): the original
 * context (rope.scaling.original_context_length, else the trained one), the
 * correction range (yarn_beta_fast / yarn_beta_slow rotations, 32 and 1), the
 * ramp's weight (yarn_ext_factor, 1) and the magnitude: yarn_attn_factor,
 * else 0.1 ln(factor) + 1. These are transformers' YaRN parameters, which
 * llama.cpp's converter writes when the model's config gives them; llama.cpp
 * itself reads them for grok only and uses the defaults for these families,
 * so a file that sets them is where the two differ. */
static slm_status yarn_params(const slm_gguf *g, const char *file, const char *A, slm_model_config *c, float *mag,
                              slm_err *err) {
    char key[96];
    slm_status s;
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, A), key)
    c->rope_yarn = 1;
    c->rope_orig_ctx = c->context_len;
    if ((s = get_int(g, file, KEY("rope.scaling.original_context_length"), 0, &c->rope_orig_ctx, err))) return s;
    c->yarn_beta_fast = 32.0f;
    c->yarn_beta_slow = 1.0f;
    c->yarn_ext_factor = 1.0f;
    *mag = 1.0f + 0.1f * logf(c->rope_scale);
    if ((s = get_float(g, file, KEY("rope.scaling.yarn_beta_fast"), &c->yarn_beta_fast, err)) ||
        (s = get_float(g, file, KEY("rope.scaling.yarn_beta_slow"), &c->yarn_beta_slow, err)) ||
        (s = get_float(g, file, KEY("rope.scaling.yarn_ext_factor"), &c->yarn_ext_factor, err)) ||
        (s = get_float(g, file, KEY("rope.scaling.yarn_attn_factor"), mag, err)))
        return s;
    if (!(*mag > 0.0f && *mag < 16.0f))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %g is out of range (0..16)", file, key, (double)*mag);
    if (slm_gguf_find(g, KEY("rope.scaling.yarn_log_multiplier")) >= 0)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': DeepSeek's YaRN magnitude is not supported", file, key);
    return SLM_OK;
}
#undef KEY

/* attention.sliding_window_pattern (key) beside a default period in
 * c->swa_pattern: an integer sets the period (1: no layer slides); a
 * per-layer list (true = sliding), as llama.cpp's converters write it, is
 * not read by llama.cpp, which keeps the default, so it must say the same
 * or the file is refused naming the layer. Absent: the default. */
static slm_status window_pattern(const slm_gguf *g, const char *file, const char *key, slm_model_config *c,
                                 slm_err *err) {
    if (slm_gguf_find(g, key) < 0) return SLM_OK;
    int64_t pat;
    slm_gguf_type et;
    uint64_t n;
    const void *data;
    if (slm_gguf_get_i64(g, key, &pat)) {
        if (pat < 0 || pat > 65536)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %lld is out of range (0..65536)", file, key,
                            (long long)pat);
        if (pat == 1) c->sliding_window = 0; /* no layer slides */
        else c->swa_pattern = (int)pat;
        return SLM_OK;
    }
    if (!slm_gguf_get_arr(g, key, &et, &n, &data) || (et != SLM_GGUF_BOOL && et != SLM_GGUF_U8))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected an integer or a list of booleans", file, key);
    if (n != (uint64_t)c->n_layers)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %llu entries for %d layers", file, key, (unsigned long long)n,
                        c->n_layers);
    for (int l = 0; l < c->n_layers; l++) {
        const int slides = ((const uint8_t *)data)[l] != 0;
        if (slides != slm_layer_swa(c, l))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': layer %d %s the window; llama.cpp runs the "
                            "window on %d of every %d layers, and so does staticlm", file, key, l,
                            slides ? "has" : "has no", c->swa_pattern - 1, c->swa_pattern);
    }
    return SLM_OK;
}

/* The sliding-window layers' RoPE base: rope.freq_base_swa, else dflt
 * (gemma3: 10000; olmo2, exaone4: the model's base). */
static slm_status swa_base(const slm_gguf *g, const char *file, const char *A, float dflt, float *out, slm_err *err) {
    char key[96];
    snprintf(key, sizeof key, "%s.rope.freq_base_swa", A);
    *out = dflt;
    slm_status s = get_float(g, file, key, out, err);
    if (s) return s;
    if (!(*out > 0.0f) || !isfinite(*out))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %g (must be positive)", file, key, (double)*out);
    return SLM_OK;
}

/* EXAONE 4: no pre-norms, per-head Q/K norms, post norms (llama.cpp's
 * exaone4). Its window is llama.cpp's rule for the 64-layer 32B only: three
 * layers of four (an integer attention.sliding_window_pattern must say 4)
 * with RoPE (base rope.freq_base_swa, else the base), every fourth layer
 * global without RoPE; other depths have no window and RoPE everywhere.
 * Multi-token-prediction layers (nextn_predict_layers) are refused. */
static slm_status exaone4_params(const slm_gguf *g, const char *file, const char *A, slm_model_config *c,
                                 slm_err *err) {
    char key[96];
    slm_status s;
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, A), key)
    c->qk_norm = 1;
    c->no_pre_norms = 1;
    c->post_norms = 1;
    int64_t nextn = 0;
    if (slm_gguf_find(g, KEY("nextn_predict_layers")) >= 0 && !slm_gguf_get_i64(g, key, &nextn))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected an integer", file, key);
    if (nextn != 0)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': multi-token-prediction layers are not supported",
                        file, key);
    if (c->n_layers != 64) {
        c->sliding_window = 0;
        return SLM_OK;
    }
    if (c->sliding_window <= 0) c->sliding_window = 4096;
    c->swa_pattern = 4;
    c->nope_step = 4;
    if ((s = window_pattern(g, file, KEY("attention.sliding_window_pattern"), c, err))) return s;
    if (c->swa_pattern != 4 || c->sliding_window == 0) /* the global layers' missing RoPE follows the period */
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': only a period of 4 is supported", file, key);
    if ((s = swa_base(g, file, A, c->rope_base, &c->rope_base_swa, err))) return s;
    if (c->rope_base_swa == c->rope_base) c->rope_base_swa = 0.0f; /* the global table serves */
    return SLM_OK;
#undef KEY
}

/* Olmo 3's sliding window (olmo2 files with attention.sliding_window):
 * llama.cpp's period of 4 (window on layer l when l % 4 < 3), or an integer
 * attention.sliding_window_pattern; the per-layer list llama.cpp's converter
 * writes (true = sliding) is not read by llama.cpp, which runs period 4, so
 * it must say the same. The sliding layers rotate with rope.freq_base_swa
 * (else the base), unscaled. */
static slm_status olmo2_window(const slm_gguf *g, const char *file, const char *A, slm_model_config *c, slm_err *err) {
    char key[96];
    slm_status s;
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, A), key)
    c->swa_pattern = 4;
    if ((s = window_pattern(g, file, KEY("attention.sliding_window_pattern"), c, err))) return s;
    if (c->sliding_window > 0) {
        c->rope_scale_swa = 1.0f;
        if ((s = swa_base(g, file, A, c->rope_base, &c->rope_base_swa, err))) return s;
    }
    return SLM_OK;
#undef KEY
}

/* An integer attention.sliding_window_pattern (key), when the file has one,
 * over the family's default period (gemma2/3, gpt-oss; a per-layer array is
 * not supported): llama.cpp's set_swa_pattern, 0 = every layer, 1 = none,
 * n = layer l when l % n < n - 1. */
static slm_status int_window_period(const slm_gguf *g, const char *file, const char *key, slm_model_config *c,
                                    slm_err *err) {
    if (slm_gguf_find(g, key) < 0) return SLM_OK;
    int64_t pat;
    if (!slm_gguf_get_i64(g, key, &pat))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': only an integer layer period is supported", file, key);
    if (pat < 0 || pat > 65536)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %lld is out of range (0..65536)", file, key, (long long)pat);
    if (pat == 1) c->sliding_window = 0;
    else c->swa_pattern = (int)pat;
    return SLM_OK;
}

/* What qwen3, gemma2, gemma3, phi3 and smollm3 add to the Llama decoder, from
 * their keys and llama.cpp's rules for what the keys leave out. */
static slm_status family_params(const slm_gguf *g, const char *file, const char *A, slm_model_config *c, slm_err *err) {
    /* gemma-embedding (EmbeddingGemma): gemma3's graph attending both ways (encoder 3) */
    const int is_qwen3 = !strcmp(A, "qwen3"), is_gemma2 = !strcmp(A, "gemma2"),
              is_gemma3 = !strcmp(A, "gemma3") || !strcmp(A, "gemma-embedding"),
              is_phi3 = !strcmp(A, "phi3");
    char key[96];
    slm_status s;
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, A), key)
    if (is_qwen3 || is_gemma3 || !strcmp(A, "qwen3moe")) c->qk_norm = 1;
    if (!strcmp(A, "olmoe")) c->qk_norm = 2; /* attn_{q,k}_norm over the whole rows */
    /* smollm3: every fourth layer without RoPE (llama.cpp fixes the step at 4; no key says it) */
    if (!strcmp(A, "smollm3")) c->nope_step = 4;
    if (is_gemma2 || is_gemma3) {
        /* llama.cpp: embeddings * sqrt(n_embd); the converter already stores
         * the (1 + w) RMSNorm gains; Q scaled by 1/sqrt(head_dim), but by
         * 1/sqrt(dim / n_heads) for the 27B models (gemma_pytorch) */
        c->post_norms = 1;
        c->ffn_gelu = 1;
        c->embed_scale = sqrtf((float)c->dim);
        const int is_27b = (is_gemma2 && c->n_layers == 46) || (is_gemma3 && c->n_layers == 62);
        const int sd = is_27b ? c->dim / c->n_heads : c->head_dim;
        c->attn_scale = 1.0f / sqrtf((float)sd);
        c->swa_pattern = is_gemma2 ? 2 : 6;
        /* llama.cpp: gemma2's window is 4096 when the file does not say; a
         * file may give the layer period (an integer; a per-layer array is
         * not supported) */
        if (is_gemma2 && slm_gguf_find(g, KEY("attention.sliding_window")) < 0) c->sliding_window = 4096;
        if ((s = int_window_period(g, file, KEY("attention.sliding_window_pattern"), c, err))) return s;
    }
    if (is_gemma2) {
        c->attn_softcap = 50.0f; /* llama.cpp's defaults when the keys are absent */
        c->final_softcap = 30.0f;
        if ((s = get_float(g, file, KEY("attn_logit_softcapping"), &c->attn_softcap, err))) return s;
        if ((s = get_float(g, file, KEY("final_logit_softcapping"), &c->final_softcap, err))) return s;
    }
    if (!strcmp(A, "modern-bert") && c->sliding_window > 0) {
        /* llama.cpp: a global layer first in every period of 3 (or the key's), the others slide (symmetric);
         * those rotate with rope.freq_base_swa, else 10000, unscaled */
        c->encoder = 4; /* slm_layer_swa's rule for a per-layer list */
        c->swa_pattern = 3;
        if ((s = window_pattern(g, file, KEY("attention.sliding_window_pattern"), c, err))) return s;
        c->rope_scale_swa = 1.0f;
        if ((s = swa_base(g, file, A, 10000.0f, &c->rope_base_swa, err))) return s;
    }
    if (!strcmp(A, "gemma-embedding")) {
        c->encoder = 3;
        if (c->sliding_window <= 0)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: missing required key '%s.attention.sliding_window'", file, A);
    }
    if (is_gemma3) {
        if (c->sliding_window > 0) { /* local layers: base 10000 (or the file's), no scaling */
            c->rope_scale_swa = 1.0f;
            if ((s = swa_base(g, file, A, 10000.0f, &c->rope_base_swa, err))) return s;
        } else { /* llama.cpp's non-SWA gemma3 graph caps the logits */
            c->final_softcap = 30.0f;
            if ((s = get_float(g, file, KEY("final_logit_softcapping"), &c->final_softcap, err))) return s;
        }
    }
    if (!strcmp(A, "granite") || !strcmp(A, "granitemoe")) {
        /* IBM Granite (3.x, 4.x dense; granitemoe: 3.x MoE): llama with muP multipliers; llama.cpp
         * requires logit_scale and reads the others when present */
        float es = 0.0f, as = 0.0f, rs = 0.0f, ls = 0.0f;
        int finetuned = 1;
        if ((s = get_float(g, file, KEY("embedding_scale"), &es, err)) ||
            (s = get_float(g, file, KEY("attention.scale"), &as, err)) ||
            (s = get_float(g, file, KEY("residual_scale"), &rs, err)))
            return s;
        if (slm_gguf_find(g, KEY("logit_scale")) < 0)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: missing required key '%s'", file, key);
        if ((s = get_float(g, file, key, &ls, err))) return s;
        const float v[4] = {es, as, rs, ls};
        static const char *const nm[4] = {"embedding_scale", "attention.scale", "residual_scale", "logit_scale"};
        for (int i = 0; i < 4; i++)
            if (!(v[i] >= 0.0f && v[i] < 1e6f) || (i == 3 && !(v[i] > 0.0f)))
                return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s.%s': %g is out of range", file, A, nm[i], (double)v[i]);
        c->embed_scale = es;
        c->attn_scale = as;
        c->residual_scale = rs;
        c->logit_scale = ls == 1.0f ? 0.0f : ls;
        /* llama.cpp: rope.scaling.finetuned false switches RoPE off */
        if (slm_gguf_find(g, KEY("rope.scaling.finetuned")) >= 0) {
            if (!slm_gguf_get_bool(g, key, &finetuned))
                return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected a boolean", file, key);
            if (!finetuned)
                return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': granite without RoPE is not supported", file, key);
        }
    }
    if (!strcmp(A, "exaone4") && (s = exaone4_params(g, file, A, c, err))) return s;
    if (!strcmp(A, "gpt-oss")) {
        /* OpenAI gpt-oss: Q/K/V and output biases, attention sinks, the window on
         * layers l % 2 == 0 (llama.cpp's period 2; an integer
         * attention.sliding_window_pattern sets another) */
        c->attn_sinks = 1;
        c->o_bias = 1;
        if (c->sliding_window > 0) {
            c->swa_pattern = 2;
            if ((s = int_window_period(g, file, KEY("attention.sliding_window_pattern"), c, err))) return s;
        }
    }
    if (!strcmp(A, "olmo2")) {
        /* OLMo 2 / Olmo 3: no pre-norms, Q/K RMSNorm over whole rows, post
         * norms; Olmo 3's window on three layers of every four */
        c->qk_norm = 2;
        c->no_pre_norms = 1;
        c->post_norms = 1;
        if (c->sliding_window > 0 && (s = olmo2_window(g, file, A, c, err))) return s;
    }
    if (is_phi3) {
        /* llama.cpp disables Phi-3's sliding window (its converters do not
         * say which layers use it); so do we, to give the same logits */
        c->sliding_window = 0;
        const slm_gguf_tensor *lf = slm_gguf_find_tensor(g, "rope_factors_long.weight"),
                              *sf = slm_gguf_find_tensor(g, "rope_factors_short.weight");
        if (lf || sf) {
            if (!lf || !sf)
                return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor 'rope_factors_%s.weight' missing (LongRoPE needs both)",
                                file, lf ? "short" : "long");
            c->rope_long = 2; /* short, unless the compiler's context exceeds rope_orig_ctx */
            c->rope_orig_ctx = c->context_len;
            if ((s = get_int(g, file, KEY("rope.scaling.original_context_length"), 0, &c->rope_orig_ctx, err))) return s;
        }
    }
    if (!(c->attn_softcap >= 0.0f && c->attn_softcap < 1e6f) || !(c->final_softcap >= 0.0f && c->final_softcap < 1e6f))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: soft-capping %g / %g out of range", file, (double)c->attn_softcap,
                        (double)c->final_softcap);

#undef KEY
    return SLM_OK;
}

/* Qwen3.5 (llama.cpp's qwen35): hybrid layers, three Gated DeltaNet layers
 * of every full_attention_interval (default 4) and a full attention layer
 * with a gated query, per-head Q/K norms and partial neox RoPE. The keys:
 * ssm.conv_kernel, ssm.state_size (the key and value head size: inner_size
 * must be time_step_rank x state_size, as llama.cpp requires), group_count
 * (key heads), time_step_rank (value heads); a per-layer
 * attention.recurrent_layers list must say what the interval says; the
 * nextn_predict_layers MTP layers after n_layers are skipped. Its RoPE is
 * interleaved M-RoPE (rope.dimension_sections): for text every section
 * takes the token's position except a fourth one (position 0 for text), so
 * it is plain neox RoPE when every rotated pair falls in the first three,
 * which is checked (a pair in the fourth is refused). */
static slm_status qwen35_params(const slm_gguf *g, const char *file, const char *A, slm_model_config *c, slm_err *err) {
    char key[96];
    slm_status s;
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, A), key)
    int inner = 0, interval = 4;
    if ((s = get_int(g, file, KEY("ssm.conv_kernel"), 1, &c->ssm_conv, err)) ||
        (s = get_int(g, file, KEY("ssm.state_size"), 1, &c->ssm_state, err)) ||
        (s = get_int(g, file, KEY("ssm.group_count"), 1, &c->ssm_k_heads, err)) ||
        (s = get_int(g, file, KEY("ssm.time_step_rank"), 1, &c->ssm_v_heads, err)) ||
        (s = get_int(g, file, KEY("ssm.inner_size"), 1, &inner, err)) ||
        (s = get_int(g, file, KEY("full_attention_interval"), 0, &interval, err)))
        return s;
    if ((int64_t)c->ssm_v_heads * c->ssm_state != inner)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s' = %d: value heads of another size than the keys' "
                        "(%d x %d) are not supported", file, KEY("ssm.inner_size"), inner, c->ssm_v_heads, c->ssm_state);
    int64_t v = 0;
    if (slm_gguf_find(g, KEY("nextn_predict_layers")) >= 0 &&
        (!slm_gguf_get_i64(g, key, &v) || v < 0 || v >= c->n_layers))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': not an integer in 0..%d", file, key, c->n_layers - 1);
    c->nextn_layers = (int)v;
    c->n_layers -= c->nextn_layers;
    c->recur_interval = interval;
    slm_gguf_type et;
    uint64_t n = 0;
    const void *data;
    if (slm_gguf_find(g, KEY("attention.recurrent_layers")) >= 0) {
        if (!slm_gguf_get_arr(g, key, &et, &n, &data) || (et != SLM_GGUF_BOOL && et != SLM_GGUF_U8 && et != SLM_GGUF_I8))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected a list of booleans", file, key);
        if (n != (uint64_t)(c->n_layers + c->nextn_layers))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %llu entries for %d layers", file, key,
                            (unsigned long long)n, c->n_layers + c->nextn_layers);
        for (int l = 0; l < c->n_layers; l++)
            if ((((const uint8_t *)data)[l] != 0) != slm_layer_recurrent(c, l))
                return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': layer %d is %s; only a full attention layer "
                                "every %d (full_attention_interval) is supported", file, key, l,
                                ((const uint8_t *)data)[l] ? "recurrent" : "full attention", interval);
    }
    if (slm_gguf_get_arr(g, KEY("rope.dimension_sections"), &et, &n, &data)) {
        int sec[4] = {0, 0, 0, 0}, sum = 0;
        if ((et != SLM_GGUF_I32 && et != SLM_GGUF_U32) || n < 1 || n > 4)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected up to 4 integers", file, key);
        for (uint64_t i = 0; i < n; i++) {
            memcpy(&sec[i], (const uint8_t *)data + 4 * i, 4);
            if (sec[i] < 0 || sec[i] > 4096)
                return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': section %llu = %d out of range", file, key,
                                (unsigned long long)i, sec[i]);
            sum += sec[i];
        }
        const int pairs = (c->rope_dims ? c->rope_dims : c->head_dim) / 2;
        for (int i = 0; i < pairs && sum > 0; i++) { /* ggml's interleaved M-RoPE: the section of pair i */
            const int sector = i % sum;
            const int text = (sector % 3 == 1 && sector < 3 * sec[1]) || (sector % 3 == 2 && sector < 3 * sec[2]) ||
                             (sector % 3 == 0 && sector < 3 * sec[0]);
            if (!text)
                return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': rotated pair %d takes the fourth section's "
                                "position; only sections that reduce to plain RoPE for text are supported", file, key, i);
        }
    }
    c->rope_neox = 1;
    c->qk_norm = 1;
    c->attn_gate = 1;
#undef KEY
    return SLM_OK;
}

/* The tensor table: every tensor of the file, by its GGUF name; fused and
 * expert matrices split into the ones the decoder reads; gpt-oss's FFN norm
 * under the name the decoder reads. */
static slm_status load_tensors(slm_model_file *m, const slm_gguf *g, const char *file, const char *A, slm_err *err) {
    const slm_model_config *c = &m->cfg;
    slm_status s;
    uint64_t nt = slm_gguf_n_tensors(g);
    if (nt > INT32_MAX) return slm_errf(err, SLM_ERR_FORMAT, "%s: n_tensors: %llu tensors", file, (unsigned long long)nt);
    /* room for the parts of fused matrices (split below) */
    uint64_t cap = nt + 1;
    for (uint64_t i = 0; i < nt; i++) {
        const slm_gguf_str nm = slm_gguf_tensor_at(g, i)->name;
        if ((nm.len >= 15 && !memcmp(nm.s + nm.len - 15, "attn_qkv.weight", 15)) ||
            (nm.len >= 13 && !memcmp(nm.s + nm.len - 13, "attn_qkv.bias", 13)))
            cap += 2;
        if (nm.len >= 13 && !memcmp(nm.s + nm.len - 13, "ffn_up.weight", 13)) cap += 1;
        if (nm.len >= 11 && !memcmp(nm.s + nm.len - 11, "ffn_up.bias", 11)) cap += 1;
        if (c->n_experts && ((nm.len >= 12 && !memcmp(nm.s + nm.len - 12, "_exps.weight", 12)) ||
                             (nm.len >= 10 && !memcmp(nm.s + nm.len - 10, "_exps.bias", 10))))
            cap += (uint64_t)c->n_experts;
        if (c->n_experts && nm.len >= 19 && !memcmp(nm.s + nm.len - 19, "gate_up_exps.weight", 19))
            cap += (uint64_t)c->n_experts; /* two matrices per expert */
    }
    if (cap > (1u << 24))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: n_tensors: %llu tensors after splitting fused and expert matrices", file,
                        (unsigned long long)cap);
    m->tensors = slm_calloc((size_t)cap, sizeof *m->tensors);
    if (!m->tensors) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory for %llu tensors", file, (unsigned long long)nt);
    for (uint64_t i = 0; i < nt; i++) {
        const slm_gguf_tensor *gt = slm_gguf_tensor_at(g, i);
        slm_tensor *t = &m->tensors[i];
        memcpy(t->name, gt->name.s, (size_t)gt->name.len); /* the reader keeps names < 64 bytes */
        t->name[gt->name.len] = 0;
        t->type = gt->type;
        t->n_dims = gt->n_dims;
        memcpy(t->ne, gt->ne, sizeof t->ne);
        t->data = gt->data;
        t->nbytes = gt->nbytes;
    }
    m->n_tensors = (int)nt;
    if ((s = split_fused(m, file, (int)cap, err))) return s;
    if ((s = split_experts(m, file, (int)cap, err))) return s;
    if (!strcmp(A, "gpt-oss") || !strcmp(A, "glm4moe") || !strcmp(A, "qwen35") || !strcmp(A, "qwen35moe")) /* their FFN norm: post_attention_norm */
        for (int i = 0; i < m->n_tensors; i++) {
            int l, end = 0;
            if (sscanf(m->tensors[i].name, "blk.%d.post_attention_norm.weight%n", &l, &end) == 1 && end > 0 &&
                !m->tensors[i].name[end])
                snprintf(m->tensors[i].name, sizeof m->tensors[i].name, "blk.%d.ffn_norm.weight", l);
        }
    return SLM_OK;
}

slm_status slm_gguf_model_load(slm_model_file *m, slm_err *err) {
    const char *file = slm_basename(m->path);
    slm_model_config *c = &m->cfg;
    slm_status s;

    if ((s = slm_gguf_open(&m->gguf, m->map.data, m->map.size, file, err))) return s;
    const slm_gguf *g = m->gguf;

    slm_gguf_str arch;
    if (slm_gguf_find(g, "general.architecture") < 0)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: missing required key 'general.architecture'", file);
    if (!slm_gguf_get_str(g, "general.architecture", &arch))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'general.architecture': expected a string, found %s", file,
                        slm_gguf_type_name(slm_gguf_kv_type(g, slm_gguf_find(g, "general.architecture"))));
    const char *A = slm_arch_name(slm_arch_find(arch.s, arch.len));
    if (!A) {
        char a[40];
        size_t n = 0;
        for (; n < arch.len && n < sizeof a - 1; n++) {
            unsigned char ch = (unsigned char)arch.s[n];
            a[n] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
        }
        a[n] = 0;
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: architecture '%s%s' is not supported (supported: %s)", file,
                        a, arch.len > n ? "..." : "", SLM_SUPPORTED_ARCHS);
    }

    memset(c, 0, sizeof *c);
    snprintf(c->arch, sizeof c->arch, "%s", A);
    c->rope_base = 10000.0f;
    c->norm_eps = 1e-5f;
    c->rope_scale = 1.0f;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, A), key)
    const int is_gemma4 = !strcmp(A, "gemma4");
    if ((s = get_int(g, file, KEY("embedding_length"), 1, &c->dim, err))) return s;
    if (is_gemma4) { /* per-layer lists of head counts and FFN widths, the window list */
        if ((s = slm_gguf_gemma4_shape(g, file, c, err))) return s;
    } else {
        /* qwen35moe: optional (the experts' and the shared expert's widths have keys of their own) */
        if ((s = get_int(g, file, KEY("feed_forward_length"), strcmp(A, "qwen35moe") != 0, &c->hidden_dim, err))) return s;
        if ((s = get_int(g, file, KEY("block_count"), 1, &c->n_layers, err))) return s;
        if ((s = get_int(g, file, KEY("attention.head_count"), 1, &c->n_heads, err))) return s;
        c->n_kv_heads = c->n_heads;
        if ((s = get_int(g, file, KEY("attention.head_count_kv"), 0, &c->n_kv_heads, err))) return s;
        if ((s = get_int(g, file, KEY("attention.sliding_window"), 0, &c->sliding_window, err))) return s;
    }
    if ((s = get_int(g, file, KEY("context_length"), 1, &c->context_len, err))) return s;
    if ((s = get_float(g, file, KEY("rope.freq_base"), &c->rope_base, err))) return s;
    if ((s = get_float(g, file, KEY("attention.layer_norm_rms_epsilon"), &c->norm_eps, err))) return s;
    slm_gguf_str stype;
    /* llama.cpp reads rope.scaling.factor whatever the type (absent: linear) */
    const int has_type = slm_gguf_get_str(g, KEY("rope.scaling.type"), &stype);
    float mag = 1.0f; /* the cos/sin magnitude */
    if (!has_type || slm_gguf_str_eq(stype, "linear") || slm_gguf_str_eq(stype, "yarn")) {
        float f = 1.0f;
        /* the 2023 converters' key for it: rope.scale_linear (llama.cpp reads it where the other is absent) */
        const char *fk = slm_gguf_find(g, KEY("rope.scaling.factor")) < 0 && slm_gguf_find(g, KEY("rope.scale_linear")) >= 0
                             ? "rope.scale_linear" : "rope.scaling.factor";
        snprintf(key, sizeof key, "%s.%s", A, fk);
        if ((s = get_float(g, file, key, &f, err))) return s;
        if (f == 0.0f) f = 1.0f; /* llama.cpp: 0 is none */
        if (!(f >= 1.0f && f <= 1024.0f))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %g is out of range (1..1024)", file, key, (double)f);
        c->rope_scale = f;
        if (has_type && slm_gguf_str_eq(stype, "yarn") && f > 1.0f && (s = yarn_params(g, file, A, c, &mag, err)))
            return s;
    }
    {   /* every family: cos and sin times rope.scaling.attn_factor (LongRoPE's magnitude), as llama.cpp */
        float af = 1.0f;
        if ((s = get_float(g, file, KEY("rope.scaling.attn_factor"), &af, err))) return s;
        if (!(af > 0.0f && af < 16.0f))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %g is out of range (0..16)", file, key, (double)af);
        mag *= af;
        c->rope_attn_factor = mag == 1.0f ? 0.0f : mag;
    }
    const int is_qwen3 = !strcmp(A, "qwen3"), is_gemma2 = !strcmp(A, "gemma2"),
              is_gemma3 = !strcmp(A, "gemma3") || !strcmp(A, "gemma-embedding"),
              is_phi3 = !strcmp(A, "phi3");
    const int is_qwen2 = !strcmp(A, "qwen2") || !strcmp(A, "qwen2moe");
    c->rope_neox = is_qwen2 || is_qwen3 || is_gemma2 || is_gemma3 || is_gemma4 || is_phi3 || !strcmp(A, "olmo2") ||
                   !strcmp(A, "exaone") || !strcmp(A, "exaone4") || !strcmp(A, "qwen3moe") || !strcmp(A, "olmoe") ||
                   !strcmp(A, "gpt-oss") || !strcmp(A, "glm4moe") || !strcmp(A, "qwen35") || !strcmp(A, "qwen35moe");
    c->qkv_bias = is_qwen2 || !strcmp(A, "gpt-oss");
    c->rope_freqs = slm_gguf_find_tensor(g, "rope_freqs.weight") != NULL;

    /* The head size: the key length when the file gives one (gemma, qwen3:
     * n_heads * head_dim may differ from dim), else dim / n_heads. */
    c->head_dim = c->n_heads && c->dim % c->n_heads == 0 ? c->dim / c->n_heads : 0;
    int key_len = 0, val_len = 0, rope_dims = 0;
    if ((s = get_int(g, file, KEY("attention.key_length"), 0, &key_len, err))) return s;
    if (key_len) c->head_dim = key_len;
    if ((s = get_int(g, file, KEY("attention.value_length"), 0, &val_len, err))) return s;
    if (val_len && val_len != c->head_dim)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s' = %d: value heads other than the key length %d are not supported",
                        file, key, val_len, c->head_dim);
    if (!c->head_dim)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: n_heads = %d does not divide dim = %d and no '%s.attention.key_length'",
                        file, c->n_heads, c->dim, A);
    if ((s = get_int(g, file, KEY("rope.dimension_count"), 0, &rope_dims, err))) return s;
    if (rope_dims && (rope_dims > c->head_dim || rope_dims % 2))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s' = %d: must be even and at most the head size %d", file, key,
                        rope_dims, c->head_dim);
    if (rope_dims && rope_dims != c->head_dim) {
        if (!c->rope_neox)
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s' = %d: partial RoPE only with the neox layout", file,
                            key, rope_dims);
        c->rope_dims = rope_dims;
    }

    if ((s = family_params(g, file, A, c, err))) return s;
    if (slm_gguf_bert_family(A) && (s = slm_gguf_encoder_params(g, file, A, c, err)))
        return s;
    if (is_gemma4 && (s = slm_gguf_gemma4_params(g, file, c, err))) return s;
    if ((s = moe_params(g, file, A, c, err))) return s;
    if ((!strcmp(A, "qwen35") || !strcmp(A, "qwen35moe")) && (s = qwen35_params(g, file, A, c, err))) return s;

    /* The vocabulary size: the key, else the token list, else token_embd. */
    uint64_t n_tok = 0;
    slm_gguf_type et;
    const slm_gguf_tensor *emb = slm_gguf_find_tensor(g, "token_embd.weight");
    if (slm_gguf_find(g, KEY("vocab_size")) >= 0) {
        if ((s = get_int(g, file, key, 1, &c->vocab_size, err))) return s;
    } else if (slm_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n_tok, NULL) && et == SLM_GGUF_STRING) {
        if (n_tok == 0 || n_tok > INT32_MAX)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'tokenizer.ggml.tokens': %llu tokens", file,
                            (unsigned long long)n_tok);
        c->vocab_size = (int)n_tok;
    } else if (emb && emb->n_dims >= 2 && emb->ne[1] <= INT32_MAX) {
        c->vocab_size = (int)emb->ne[1];
    } else {
        return slm_errf(err, SLM_ERR_FORMAT,
                        "%s: vocabulary size unknown (no 'llama.vocab_size', 'tokenizer.ggml.tokens' or 'token_embd.weight')",
                        file);
    }
    /* the encoder graph has no LM head; gemma-embedding's is the tied embedding (dropped by the embed programs) */
    c->tied_embeddings = !slm_encoder_graph(c) && slm_gguf_find_tensor(g, "output.weight") == NULL;

    if ((s = load_tensors(m, g, file, A, err))) return s;
    m->kind = SLM_MODEL_GGUF;
    return SLM_OK;
#undef KEY
}

