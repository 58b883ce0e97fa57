/* Qwen3.5 folders (model_type qwen3_5 / qwen3_5_moe: Qwen3_5ForConditionalGeneration
 * and Qwen3_5MoeForConditionalGeneration, their keys under text_config;
 * qwen3_5_text / qwen3_5_moe_text: the text models alone) as the qwen35 and
 * qwen35moe architectures the GGUF loader gives: what config.json says
 * beyond the sizes every family shares, the layer tensors' GGUF names, and
 * the Gated DeltaNet tensors that are made in the loader's anonymous area
 * (format/hf.c) rather than pointed at. What changes, as llama.cpp's
 * converter (Qwen3NextModel, _LinearAttentionVReorderBase) does and as
 * transformers' Qwen3_5GatedDeltaNet computes:
 *
 * - linear_attn.A_log [H_v] becomes ssm_a = -exp(A_log) (f32); dt_bias
 *   becomes ssm_dt.bias (f32); conv1d.weight [conv_dim, 1, K] (depthwise)
 *   becomes ssm_conv1d [conv_dim rows of K] (f32: the conv task reads
 *   floats);
 * - the value heads: transformers' value head h reads key head h / (H_v / H_k)
 *   (grouped: repeat_interleave), the runtime's reads h % H_k (tiled, as
 *   llama.cpp's ggml broadcast does). With H_v > H_k every tensor indexed by
 *   value head is re-ordered, grouped -> tiled (tiled head t is grouped head
 *   (t % H_k) (H_v / H_k) + t / H_k): the V rows of in_proj_qkv (its Q and K
 *   rows stay), the rows of in_proj_z (attn_gate), in_proj_a (ssm_alpha),
 *   in_proj_b (ssm_beta), the entries of A_log and dt_bias, the V channels
 *   of conv1d, the columns of out_proj (ssm_out). With H_v = H_k the
 *   matrices are pointed at as they are;
 * - linear_attn.norm.weight (the gated RMSNorm's gain) is applied as w, every
 *   other norm gain (input_layernorm, post_attention_layernorm, q_norm, k_norm,
 *   model.norm; Qwen3_5RMSNorm) as 1 + w: hf.c adds the 1 in f32, as the
 *   converter stores it.
 *
 * The full attention layers are qwen3's with a gated query: q_proj is
 * [heads x 2 x head_dim, hidden], per head its query rows then its gate's
 * (transformers chunks each head's 2 x head_dim so), the GGUF's attn_q as it
 * is. The MoE FFN: mlp.gate (router), the experts (hf.c's names, per expert
 * or transformers v5's fused stacks), mlp.shared_expert.* and
 * mlp.shared_expert_gate (the shared expert behind its sigmoid gate).
 * model.visual.* (the vision tower) and mtp.* (the multi-token-prediction
 * layer, which transformers does not load either) are skipped.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "format/hf.h"


static uint32_t q35_esize(uint32_t t) { return t == SLM_F32 ? 4 : 2; }


/* The grouped value head that tiled head t holds (kh key heads, vh value heads). */
static int64_t q35_src_head(int64_t t, int64_t kh, int64_t vh) { return (t % kh) * (vh / kh) + t / kh; }

/* One element from src (type st) to dst (type dt: st itself, or F32), negated
 * exp when neg. */
static void q35_put(uint8_t *dst, uint32_t dt, const uint8_t *src, uint32_t st, int neg) {
    if (dt == st && !neg) {
        memcpy(dst, src, q35_esize(st));
        return;
    }
    float v = slm_hf_elem_f32(st, src);
    if (neg) v = -expf(v);
    memcpy(dst, &v, 4);
}

void slm_hf_q35_make(const slm_hf_made *mk, void *dst) {
    const slm_st_tensor *t = mk->src;
    const uint8_t *src = t->data;
    uint8_t *out = dst;
    const uint32_t st = t->type, dt = mk->type, ss = q35_esize(st), ds = q35_esize(dt);
    const int64_t L = mk->n_dims == 2 ? mk->ne0 : 1, R = mk->n_dims == 2 ? mk->ne1 : mk->ne0, kh = mk->kh;
    const int neg = mk->op == SLM_HF_MAKE_NEGEXP;
    if (mk->op == SLM_HF_MAKE_VCOLS) { /* each row's columns in heads of step */
        const int64_t vh = L / mk->step;
        for (int64_t r = 0; r < R; r++)
            for (int64_t h = 0; h < vh; h++) {
                const int64_t sh = kh ? q35_src_head(h, kh, vh) : h;
                for (int64_t k = 0; k < mk->step; k++)
                    q35_put(out + ((uint64_t)(r * L + h * mk->step + k)) * ds, dt,
                            src + ((uint64_t)(r * L + sh * mk->step + k)) * ss, st, 0);
            }
        return;
    }
    /* rows [0, first) as they are, then the value heads' rows in heads of step */
    const int64_t vh = (R - mk->first) / mk->step;
    for (int64_t r = 0; r < R; r++) {
        int64_t sr = r;
        if (r >= mk->first && kh) {
            const int64_t h = (r - mk->first) / mk->step, k = (r - mk->first) % mk->step;
            sr = mk->first + q35_src_head(h, kh, vh) * mk->step + k;
        }
        for (int64_t c = 0; c < L; c++)
            q35_put(out + (uint64_t)(r * L + c) * ds, dt, src + (uint64_t)(sr * L + c) * ss, st, neg);
    }
}

int slm_hf_q35_skip(const char *hf) {
    static const char *const pre[] = {"model.visual.", "visual.", "mtp.", "model.mtp."};
    for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++)
        if (!strncmp(hf, pre[i], strlen(pre[i]))) return 1;
    return 0;
}

int slm_hf_q35_name(const char *p, long n, int moe, int reorder, char *out, size_t cap, int *what) {
    /* what: 0 a matrix, 1 a vector (f32), 2 a norm gain (1 + w) */
    static const struct { const char *hf, *gg; int what, moe; } plain[] = {
        {"self_attn.q_norm.weight", "attn_q_norm.weight", 2, -1},
        {"self_attn.k_norm.weight", "attn_k_norm.weight", 2, -1},
        {"linear_attn.norm.weight", "ssm_norm.weight", 1, -1},
        {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight", 0, 1},
        {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight", 0, 1},
        {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight", 0, 1},
        {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight", 0, 1},
    };
    /* made unless the value heads keep their order (then the matrices are as they are) */
    static const struct { const char *hf, *gg; int always; } made[] = {
        {"linear_attn.in_proj_qkv.weight", "attn_qkv.weight", 0}, {"linear_attn.in_proj_z.weight", "attn_gate.weight", 0},
        {"linear_attn.in_proj_a.weight", "ssm_alpha.weight", 0},  {"linear_attn.in_proj_b.weight", "ssm_beta.weight", 0},
        {"linear_attn.out_proj.weight", "ssm_out.weight", 0},     {"linear_attn.A_log", "ssm_a", 1},
        {"linear_attn.dt_bias", "ssm_dt.bias", 1},                {"linear_attn.conv1d.weight", "ssm_conv1d.weight", 1},
    };
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (!strcmp(p, plain[i].hf) && (plain[i].moe < 0 || plain[i].moe == moe)) {
            *what = plain[i].what;
            snprintf(out, cap, "blk.%ld.%s", n, plain[i].gg);
            return 1;
        }
    for (size_t i = 0; i < sizeof made / sizeof made[0]; i++)
        if (!strcmp(p, made[i].hf)) {
            *what = 0;
            snprintf(out, cap, "blk.%ld.%s", n, made[i].gg);
            return made[i].always || reorder ? 4 : 1;
        }
    return 0;
}

/* ---- the made tensors -------------------------------------------------------- */

slm_status slm_hf_q35_plan(const slm_hf_oss_io *io, int i, const char *shown, const slm_st_tensor *t, const char *gn,
                           const slm_model_config *c, slm_err *err) {
    const int64_t D = c->dim, S = c->ssm_state, KH = c->ssm_k_heads, VH = c->ssm_v_heads, K = c->ssm_conv;
    const int64_t qk = 2 * KH * S, cd = qk + VH * S, vd = VH * S;
    const char *what = strchr(gn + 4, '.') + 1; /* after "blk.N." */
    slm_hf_made mk;
    memset(&mk, 0, sizeof mk);
    mk.src = t;
    mk.kh = VH > KH ? KH : 0;
    mk.type = t->type;
    mk.step = S;
    int64_t want0 = 0, want1 = 0; /* the HF shape: [want0, want1] (want1 0: a vector) */
    int conv = 0;                 /* the conv taps: [want0, 1, want1] too */
    const char *dims = "";
    if (!strcmp(what, "attn_qkv.weight")) {
        mk.op = SLM_HF_MAKE_VROWS, mk.first = qk, want0 = cd, want1 = D, dims = "Q, K and V channels, hidden_size";
    } else if (!strcmp(what, "attn_gate.weight")) {
        mk.op = SLM_HF_MAKE_VROWS, want0 = vd, want1 = D, dims = "value heads x head size, hidden_size";
    } else if (!strcmp(what, "ssm_alpha.weight") || !strcmp(what, "ssm_beta.weight")) {
        mk.op = SLM_HF_MAKE_VROWS, mk.step = 1, want0 = VH, want1 = D, dims = "value heads, hidden_size";
    } else if (!strcmp(what, "ssm_out.weight")) {
        mk.op = SLM_HF_MAKE_VCOLS, want0 = D, want1 = vd, dims = "hidden_size, value heads x head size";
    } else if (!strcmp(what, "ssm_a") || !strcmp(what, "ssm_dt.bias")) {
        mk.op = what[4] == 'a' ? SLM_HF_MAKE_NEGEXP : SLM_HF_MAKE_VROWS, mk.step = 1, mk.type = SLM_F32;
        want0 = VH, dims = "value heads";
    } else { /* ssm_conv1d.weight: [channels, 1, K] (or [channels, K]) */
        mk.op = SLM_HF_MAKE_VROWS, mk.first = qk, mk.type = SLM_F32, want0 = cd, want1 = K, conv = 1;
        dims = "Q, K and V channels, 1, linear_conv_kernel_dim";
    }
    const int ok = slm_hf_float(t->type) &&
                   (want1 ? (t->n_dims == 2 && t->shape[0] == want0 && t->shape[1] == want1) ||
                                (conv && t->n_dims == 3 && t->shape[0] == want0 && t->shape[1] == 1 && t->shape[2] == want1)
                          : t->n_dims == 1 && t->shape[0] == want0);
    if (!ok) {
        char b[112], sh[96], need[64];
        if (want1) snprintf(need, sizeof need, "[%lld%s%lld]", (long long)want0, conv ? ", 1, " : ", ", (long long)want1);
        else snprintf(need, sizeof need, "[%lld]", (long long)want0);
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': %s %s, the config needs F32/F16/BF16 %s (%s)", shown,
                        slm_hf_tname(t->name, b, sizeof b), slm_hf_dtype(t->type),
                        slm_fmt_shape(sh, sizeof sh, t->shape, t->n_dims), need, dims);
    }
    if (want1) mk.n_dims = 2, mk.ne0 = want1, mk.ne1 = want0;
    else mk.n_dims = 1, mk.ne0 = want0, mk.ne1 = 1;
    mk.nbytes = (uint64_t)want0 * (uint64_t)(want1 ? want1 : 1) * q35_esize(mk.type);
    return io->take(io->L, i, gn, &mk);
}

#ifdef SLM_HAVE_CJSON

#include <cJSON.h>

/* ---- config.json ------------------------------------------------------------- */

static const cJSON *q35_item(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

slm_status slm_hf_q35_root(const cJSON *top, const char *file, const char *model_type, const cJSON **root,
                           slm_hf_info *h, slm_err *err) {
    *root = top;
    const int moe = strstr(model_type, "_moe") != NULL;
    if (strstr(model_type, "_text")) return SLM_OK; /* Qwen3_5(Moe)ForCausalLM: the text model's keys at the top */
    const char *want = moe ? "qwen3_5_moe_text" : "qwen3_5_text";
    const cJSON *tc = q35_item(top, "text_config");
    char b[64];
    if (!tc || !cJSON_IsObject(tc))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: model_type '%s' needs key 'text_config' (an object)", file, model_type);
    const cJSON *tt = q35_item(tc, "model_type");
    if (tt && (!cJSON_IsString(tt) || !tt->valuestring || strcmp(tt->valuestring, want)))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'text_config': model_type '%s' is not supported (%s only)",
                        file, cJSON_IsString(tt) && tt->valuestring ? slm_hf_pstr(tt->valuestring, b, sizeof b) : "?",
                        want);
    *root = tc;
    h->multimodal = 1;
    return SLM_OK;
}

/* layer_types: "linear_attention" / "full_attention" per layer, one full
 * attention layer every interval (the first full layer gives it when
 * full_attention_interval is absent, as transformers reads layer_types
 * first); else the interval's pattern. */
static slm_status q35_layers(const cJSON *root, const char *file, slm_model_config *c, slm_err *err) {
    int interval = 0;
    slm_status s;
    if ((s = slm_hf_cfg_int(root, file, "full_attention_interval", 0, &interval, err))) return s;
    const cJSON *lt = q35_item(root, "layer_types");
    if (!lt) {
        c->recur_interval = interval ? interval : 4; /* Qwen3_5TextConfig's default */
        return SLM_OK;
    }
    if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != c->n_layers)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'layer_types': expected an array of %d strings", file, c->n_layers);
    int l = 0, first = -1;
    for (const cJSON *e = lt->child; e; e = e->next, l++) {
        const char *v = cJSON_IsString(e) ? e->valuestring : NULL;
        if (!v || (strcmp(v, "linear_attention") && strcmp(v, "full_attention")))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'layer_types': element %d is not 'linear_attention' or "
                            "'full_attention'", file, l);
        if (first < 0 && v[0] == 'f') first = l;
    }
    if (first < 0)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'layer_types': no 'full_attention' layer (a model of DeltaNet "
                        "layers only is not supported)", file);
    if (interval && interval != first + 1)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: keys 'full_attention_interval' (%d) and 'layer_types' (first full "
                        "attention layer %d) disagree", file, interval, first);
    c->recur_interval = first + 1;
    l = 0;
    for (const cJSON *e = lt->child; e; e = e->next, l++)
        if ((e->valuestring[0] == 'l') != slm_layer_recurrent(c, l))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'layer_types': layer %d is '%s'; only a full attention "
                            "layer every %d (the first's interval) is supported", file, l, e->valuestring,
                            c->recur_interval);
    return SLM_OK;
}

/* RoPE: partial_rotary_factor (absent: 0.25) x head_dim rotated dimensions;
 * the M-RoPE keys (mrope_section, mrope_interleaved) in rope_parameters or
 * rope_scaling are read for their form only: text gives the three sections
 * the same position, which is plain RoPE whatever the sections. */
static slm_status q35_rope(const cJSON *root, const cJSON *rp, const char *file, slm_model_config *c, slm_err *err) {
    double prf = 0.25, p2 = NAN;
    slm_status s;
    if ((s = slm_hf_cfg_num(root, file, "partial_rotary_factor", &prf, err)) ||
        (rp && (s = slm_hf_cfg_num(rp, file, "partial_rotary_factor", &p2, err))))
        return s;
    if (!isnan(p2) && q35_item(root, "partial_rotary_factor") && p2 != prf)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: keys 'partial_rotary_factor' (%g) and 'rope_parameters' "
                        "'partial_rotary_factor' (%g) disagree", file, prf, p2);
    if (!isnan(p2)) prf = p2;
    const int rd = prf > 0.0 && prf <= 1.0 ? (int)(prf * c->head_dim) : 0;
    if (rd < 2 || rd % 2)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'partial_rotary_factor': %g x head size %d = %d rotated "
                        "dimensions (must be even, at least 2)", file, prf, c->head_dim, rd);
    c->rope_dims = rd == c->head_dim ? 0 : rd;
    const cJSON *rs = rp ? rp : q35_item(root, "rope_scaling");
    const char *rk = rp ? "rope_parameters" : "rope_scaling";
    const cJSON *ms = rs ? q35_item(rs, "mrope_section") : NULL, *mi = rs ? q35_item(rs, "mrope_interleaved") : NULL;
    if (mi && !cJSON_IsBool(mi))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': 'mrope_interleaved' must be true or false", file, rk);
    int n = 0;
    for (const cJSON *e = ms && cJSON_IsArray(ms) ? ms->child : NULL; e; e = e->next, n++)
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > 4096 || floor(e->valuedouble) != e->valuedouble)
            n = 99;
    if (ms && (!cJSON_IsArray(ms) || n < 1 || n > 3))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': 'mrope_section' must be a list of up to 3 integers in "
                        "0..4096", file, rk);
    return SLM_OK;
}

/* The mixture of experts (qwen3_5_moe): num_experts, num_experts_per_tok,
 * the experts' width moe_intermediate_size, the shared expert's
 * shared_expert_intermediate_size (all required); the top-k softmax weights
 * always renormalized (Qwen3_5MoeTopKRouter; llama.cpp's graph too), so
 * norm_topk_prob false is refused; a dense layer (decoder_sparse_step other
 * than 1, a non-empty mlp_only_layers) is refused. */
static slm_status q35_moe(const cJSON *root, const char *file, slm_model_config *c, slm_err *err) {
    int n = 0, used = 0, width = 0, shared = 0, norm = 1, step = 1;
    slm_status s;
    if ((s = slm_hf_cfg_int(root, file, "num_experts", 1, &n, err)) ||
        (s = slm_hf_cfg_int(root, file, "num_experts_per_tok", 1, &used, err)) ||
        (s = slm_hf_cfg_int(root, file, "moe_intermediate_size", 1, &width, err)) ||
        (s = slm_hf_cfg_int(root, file, "shared_expert_intermediate_size", 1, &shared, err)) ||
        (s = slm_hf_cfg_bool(root, file, "norm_topk_prob", &norm, err)) ||
        (s = slm_hf_cfg_int(root, file, "decoder_sparse_step", 0, &step, err)))
        return s;
    if (n > 1024) return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'num_experts': %d is out of range (1..1024)", file, n);
    if (used > n || used > 64)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'num_experts_per_tok': %d is more than the %d experts (or 64)",
                        file, used, n);
    if (!norm)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'norm_topk_prob' = false: Qwen3.5's router always "
                        "renormalizes the top-k weights (transformers and llama.cpp alike)", file);
    if (step != 1)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'decoder_sparse_step': %d; only models whose every layer is "
                        "sparse (1) are supported", file, step);
    const cJSON *mo = q35_item(root, "mlp_only_layers");
    if (mo && (!cJSON_IsArray(mo) || mo->child))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'mlp_only_layers': only an empty list (every layer sparse) "
                        "is supported", file);
    c->n_experts = n;
    c->n_experts_used = used;
    c->hidden_dim = width;
    c->expert_norm = 1;
    c->shared_ffn = shared;
    c->shared_gate = 1;
    return SLM_OK;
}

slm_status slm_hf_q35_config(const cJSON *top, const cJSON *root, const cJSON *rp, const char *file,
                             slm_model_config *c, slm_hf_info *h, slm_err *err) {
    slm_status s;
    int conv = 4, kd = 128, vdim = 128, kh = 16, vh = 32, gate = 1, mtp = 0, tie = 0;
    if ((s = slm_hf_cfg_int(root, file, "num_key_value_heads", 1, &c->n_kv_heads, err)) ||
        (s = slm_hf_cfg_int(root, file, "linear_conv_kernel_dim", 0, &conv, err)) ||
        (s = slm_hf_cfg_int(root, file, "linear_key_head_dim", 0, &kd, err)) ||
        (s = slm_hf_cfg_int(root, file, "linear_value_head_dim", 0, &vdim, err)) ||
        (s = slm_hf_cfg_int(root, file, "linear_num_key_heads", 0, &kh, err)) ||
        (s = slm_hf_cfg_int(root, file, "linear_num_value_heads", 0, &vh, err)) ||
        (s = slm_hf_cfg_bool(root, file, "attn_output_gate", &gate, err)) ||
        (s = slm_hf_cfg_bool(top, file, "tie_word_embeddings", &tie, err)))
        return s;
    const cJSON *m = q35_item(root, "mtp_num_hidden_layers");
    if (m && (!cJSON_IsNumber(m) || m->valuedouble < 0 || m->valuedouble > 64 || floor(m->valuedouble) != m->valuedouble))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'mtp_num_hidden_layers': expected an integer in 0..64", file);
    mtp = m ? (int)m->valuedouble : 0;
    if (!gate)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'attn_output_gate' = false: Qwen3.5's full attention "
                        "without the output gate is not supported", file);
    if (vdim != kd)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'linear_value_head_dim' = %d: value heads of another size "
                        "than the keys' (%d) are not supported", file, vdim, kd);
    if (vh < kh || vh % kh)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'linear_num_value_heads' = %d is not a multiple of "
                        "'linear_num_key_heads' = %d", file, vh, kh);
    if (c->n_kv_heads > c->n_heads || c->n_heads % c->n_kv_heads)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'num_key_value_heads' = %d does not divide "
                        "'num_attention_heads' = %d", file, c->n_kv_heads, c->n_heads);
    if (!q35_item(root, "head_dim")) c->head_dim = 256; /* Qwen3_5TextConfig's default */
    c->ssm_conv = conv;
    c->ssm_state = kd;
    c->ssm_k_heads = kh;
    c->ssm_v_heads = vh;
    c->nextn_layers = mtp; /* in the checkpoint (mtp.*), skipped: not run, as transformers does not load them */
    c->rope_neox = 1;
    c->qk_norm = 1;
    c->attn_gate = 1;
    if (tie) c->tied_embeddings = 1;
    h->norm_plus_one = 1;
    if ((s = q35_layers(root, file, c, err)) || (s = q35_rope(root, rp, file, c, err))) return s;
    return !strcmp(c->arch, "qwen35moe") ? q35_moe(root, file, c, err) : SLM_OK;
}

#endif
