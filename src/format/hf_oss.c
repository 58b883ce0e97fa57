/* OpenAI gpt-oss folders (model_type gpt_oss, GptOssForCausalLM): what
 * config.json says beyond the sizes every family shares, the layer
 * tensors' GGUF names, and the experts, which are made in the loader's
 * anonymous area (format/hf.c) rather than pointed at:
 *
 * - the published MXFP4 checkpoints store a layer's experts as
 *   mlp.experts.gate_up_proj_blocks [E, 2F, D/32, 16] and _scales [E, 2F, D/32]
 *   (U8), down_proj_blocks [E, D, F/32, 16] and _scales [E, D, F/32]: row r
 *   of an expert's output, block b of 32 inputs is one E8M0 scale byte and 16
 *   bytes of E2M1 codes, element 2i in byte i's low nibble and 2i + 1 in its
 *   high one (transformers' convert_moe_packed_tensors). GGML's MXFP4 block
 *   is the same scale byte followed by 16 bytes whose low nibbles hold
 *   elements 0..15 and high nibbles 16..31, so each block is re-packed (as
 *   llama.cpp's converter does);
 * - the fused gate_up rows are interleaved: gate row r is row 2r, up row r
 *   is row 2r + 1, in the blocks, the scales and gate_up_proj_bias [E, 2F]
 *   alike (GptOssExperts: gate_up[..., ::2], gate_up[..., 1::2]);
 * - the dequantized (bf16) variant stores gate_up_proj [E, D, 2F] and
 *   down_proj [E, F, D], i.e. [in, out] (hidden @ gate_up_proj): each
 *   expert's matrix is transposed into [out, in] rows here, in its dtype.
 *
 * Each expert becomes blk.N.ffn_{gate,up,down}.E.weight (MXFP4 or the
 * variant's dtype) and blk.N.ffn_{gate,up,down}.E.bias (f32), the names and
 * shapes the GGUF loader gives gpt-oss, so the repacker, the blob and the
 * executor see the same model either way.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "format/hf.h"

#ifdef SLM_HAVE_CJSON

#include <cJSON.h>

/* ---- config.json ------------------------------------------------------------ */

static const cJSON *oss_item(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

/* The window: sliding_window (absent: 128, GptOssConfig's; null or 0: none)
 * on even layers, as llama.cpp runs gpt-oss (its period 2); layer_types, when
 * given, must say the same, else the folder is refused naming the layer. */
static slm_status oss_window(const cJSON *root, const char *file, slm_model_config *c, slm_err *err) {
    int win = 128;
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
    slm_status s;
    if (sw && (cJSON_IsNull(sw) || (cJSON_IsNumber(sw) && sw->valuedouble == 0))) win = 0;
    else if ((s = slm_hf_cfg_int(root, file, "sliding_window", 0, &win, err))) return s;
    c->sliding_window = win;
    c->swa_pattern = win ? 2 : 0;
    const cJSON *lt = oss_item(root, "layer_types");
    if (!lt) return SLM_OK;
    if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != c->n_layers)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'layer_types': expected an array of %d strings", file, c->n_layers);
    int l = 0;
    for (const cJSON *e = lt->child; e; e = e->next, l++) {
        const char *v = cJSON_IsString(e) ? e->valuestring : NULL;
        if (!v || (strcmp(v, "full_attention") && strcmp(v, "sliding_attention")))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'layer_types': element %d is not 'full_attention' or "
                            "'sliding_attention'", file, l);
        if ((v[0] == 's') != slm_layer_swa(c, l))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'layer_types': layer %d is '%s'; gpt-oss runs %s, as "
                            "llama.cpp does, and so does staticlm", file, l, v,
                            win ? "the sliding window on even layers and full attention on odd ones"
                                : "no sliding window when sliding_window is null or 0");
    }
    return SLM_OK;
}

/* quantization_config, when given, must be quant_method mxfp4 (the experts'
 * blocks; the tensors' dtypes say what is quantized, so
 * modules_to_not_convert is checked for form only). */
static slm_status oss_quant(const cJSON *root, const char *file, slm_err *err) {
    const cJSON *q = oss_item(root, "quantization_config");
    if (!q) return SLM_OK;
    if (!cJSON_IsObject(q)) return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'quantization_config': expected an object", file);
    const cJSON *m = oss_item(q, "quant_method"), *nc = oss_item(q, "modules_to_not_convert");
    char b[64];
    if (!m || !cJSON_IsString(m) || !m->valuestring || strcmp(m->valuestring, "mxfp4"))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'quantization_config': quant_method '%s' is not supported "
                        "(mxfp4 only)", file, m && cJSON_IsString(m) && m->valuestring ?
                        slm_hf_pstr(m->valuestring, b, sizeof b) : "?");
    if (nc && !cJSON_IsArray(nc))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'quantization_config': 'modules_to_not_convert' must be a list",
                        file);
    for (const cJSON *e = nc ? nc->child : NULL; e; e = e->next)
        if (!cJSON_IsString(e))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'quantization_config': 'modules_to_not_convert' must list "
                            "strings", file);
    return SLM_OK;
}

slm_status slm_hf_oss_config(const cJSON *root, const char *file, slm_model_config *c, slm_err *err) {
    slm_status s;
    int n = 0, used = 0, used2 = 0, bias = 1;
    double limit = 7.0; /* GptOssConfig's swiglu_limit */
    if ((s = slm_hf_cfg_int(root, file, "num_local_experts", 1, &n, err)) ||
        (s = slm_hf_cfg_int(root, file, "num_experts_per_tok", 0, &used, err)) ||
        (s = slm_hf_cfg_int(root, file, "experts_per_token", 0, &used2, err)) ||
        (s = slm_hf_cfg_bool(root, file, "attention_bias", &bias, err)) ||
        (s = slm_hf_cfg_num(root, file, "swiglu_limit", &limit, err)))
        return s;
    if (n > 1024) return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'num_local_experts': %d is out of range (1..1024)", file, n);
    if (used && used2 && used != used2)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: keys 'num_experts_per_tok' (%d) and 'experts_per_token' (%d) disagree",
                        file, used, used2);
    if (!used) used = used2;
    if (!used) return slm_errf(err, SLM_ERR_FORMAT, "%s: missing required key 'num_experts_per_tok'", file);
    if (used > n || used > 64)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'num_experts_per_tok': %d is more than the %d experts (or 64)",
                        file, used, n);
    if (!bias)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'attention_bias' = false: gpt-oss without Q/K/V and output "
                        "biases is not supported", file);
    if (!(limit > 0.0 && limit < 1e6))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'swiglu_limit': %g is out of range (above 0, below 1e6)", file,
                        limit);
    if (!oss_item(root, "rms_norm_eps")) c->norm_eps = 1e-5f; /* GptOssConfig's default */
    c->n_experts = n;
    c->n_experts_used = used;
    c->expert_norm = 1;  /* the softmax of the top-k logits: the softmax renormalized over the k */
    c->expert_bias = 1;
    c->qkv_bias = 1;
    c->o_bias = 1;
    c->attn_sinks = 1;
    c->swiglu_alpha = 1.702f; /* GptOssExperts' alpha */
    c->swiglu_limit = (float)limit;
    if ((s = oss_window(root, file, c, err))) return s;
    return oss_quant(root, file, err);
}

/* ---- tensor names ----------------------------------------------------------- */

int slm_hf_oss_name(const char *p, long n, char *out, size_t cap, int *vec) {
    static const struct { const char *hf, *gg; int vec; } plain[] = {
        {"self_attn.q_proj.bias", "attn_q.bias", 1},  {"self_attn.k_proj.bias", "attn_k.bias", 1},
        {"self_attn.v_proj.bias", "attn_v.bias", 1},  {"self_attn.o_proj.bias", "attn_output.bias", 1},
        {"self_attn.sinks", "attn_sinks.weight", 1},  {"mlp.router.weight", "ffn_gate_inp.weight", 0},
        {"mlp.router.bias", "ffn_gate_inp.bias", 1},
    };
    /* the experts: the name is expert 0's first part */
    static const struct { const char *hf, *gg; } made[] = {
        {"mlp.experts.gate_up_proj_blocks", "ffn_gate.0.weight"}, {"mlp.experts.down_proj_blocks", "ffn_down.0.weight"},
        {"mlp.experts.gate_up_proj_bias", "ffn_gate.0.bias"},     {"mlp.experts.down_proj_bias", "ffn_down.0.bias"},
        {"mlp.experts.gate_up_proj", "ffn_gate.0.weight"},        {"mlp.experts.down_proj", "ffn_down.0.weight"},
    };
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (!strcmp(p, plain[i].hf)) {
            *vec = plain[i].vec;
            snprintf(out, cap, "blk.%ld.%s", n, plain[i].gg);
            return 1;
        }
    for (size_t i = 0; i < sizeof made / sizeof made[0]; i++)
        if (!strcmp(p, made[i].hf)) {
            snprintf(out, cap, "blk.%ld.%s", n, made[i].gg);
            return 4;
        }
    if (!strcmp(p, "mlp.experts.gate_up_proj_scales") || !strcmp(p, "mlp.experts.down_proj_scales")) return 2;
    return 0;
}

/* ---- the experts ------------------------------------------------------------ */

static int ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}


/* t is [want[0], ..., want[nd - 1]] */
static int shape_is(const slm_st_tensor *t, const int64_t *want, uint32_t nd) {
    if (t->n_dims != nd) return 0;
    for (uint32_t d = 0; d < nd; d++)
        if (t->shape[d] != want[d]) return 0;
    return 1;
}

static slm_status bad_shape(const char *shown, const slm_st_tensor *t, const int64_t *want, uint32_t nd,
                            const char *what, const char *dtype, slm_err *err) {
    char b[112], have[96], need[96];
    slm_st_tensor w;
    memset(&w, 0, sizeof w);
    w.n_dims = nd;
    for (uint32_t d = 0; d < nd; d++) w.shape[d] = want[d];
    return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': %s %s, the config needs %s %s (%s)", shown,
                    slm_hf_tname(t->name, b, sizeof b), slm_hf_dtype(t->type),
                    slm_fmt_shape(have, sizeof have, t->shape, t->n_dims), dtype, slm_fmt_shape(need, sizeof need, w.shape, w.n_dims), what);
}

/* For every expert e: gate (rows 2r) and up (rows 2r + 1) of a fused
 * gate_up stack, or down (every row), made by op with the given result. */
slm_status slm_hf_take_parts(const slm_hf_oss_io *io, int i, const slm_model_config *c, int l, int gu, int bias,
                             slm_hf_made mk, slm_err *err) {
    const int64_t F = c->hidden_dim, D = c->dim;
    char name[64];
    slm_status s;
    for (int64_t e = 0; e < c->n_experts; e++)
        for (int part = 0; part < (gu ? 2 : 1); part++) {
            mk.e = e;
            mk.first = gu ? part : 0;
            mk.step = gu ? 2 : 1;
            const int64_t rows = gu ? F : D;
            if (bias) mk.ne0 = rows, mk.ne1 = 1, mk.nbytes = (uint64_t)rows * 4;
            else mk.ne1 = rows, mk.nbytes = (uint64_t)rows * slm_row_bytes(mk.type, (uint64_t)mk.ne0);
            snprintf(name, sizeof name, "blk.%d.ffn_%s.%lld.%s", l, gu ? (part ? "up" : "gate") : "down", (long long)e,
                     bias ? "bias" : "weight");
            if ((s = io->take(io->L, i, name, &mk))) return s;
        }
    return SLM_OK;
}

slm_status slm_hf_oss_plan(const slm_hf_oss_io *io, int i, const char *shown, const slm_st_tensor *t,
                           const char *gn, const slm_model_config *c, slm_err *err) {
    const int64_t E = c->n_experts, F = c->hidden_dim, D = c->dim;
    const int gu = strstr(t->name, "gate_up_proj") != NULL, l = atoi(gn + 4); /* "blk.N." */
    const int64_t R = gu ? 2 * F : D, in = gu ? D : F;
    slm_hf_made mk;
    memset(&mk, 0, sizeof mk);
    mk.src = t;
    char b[112], b2[112];
    if (ends_with(t->name, "_bias")) {
        const int64_t want[2] = {E, R};
        if (!slm_hf_float(t->type) || !shape_is(t, want, 2))
            return bad_shape(shown, t, want, 2, gu ? "experts, 2 x intermediate_size" : "experts, hidden_size",
                             "F32/F16/BF16", err);
        mk.op = SLM_HF_MAKE_VEC, mk.type = SLM_F32, mk.n_dims = 1;
        return slm_hf_take_parts(io, i, c, l, gu, 1, mk, err);
    }
    if (!ends_with(t->name, "_blocks")) { /* the dequantized variant: [E, in, out] */
        const int64_t want[3] = {E, in, R};
        if (!slm_hf_float(t->type) || !shape_is(t, want, 3)) {
            const int64_t other[3] = {E, R, in};
            if (slm_hf_float(t->type) && shape_is(t, other, 3) && R != in)
                return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: tensor '%s': shape [%lld, %lld, %lld] is [experts, out, "
                                "in]; gpt_oss's dequantized experts are [experts, in, out] (GptOssExperts)", shown,
                                slm_hf_tname(t->name, b, sizeof b), (long long)E, (long long)R, (long long)in);
            return bad_shape(shown, t, want, 3, gu ? "experts, hidden_size, 2 x intermediate_size"
                                                   : "experts, intermediate_size, hidden_size", "F32/F16/BF16", err);
        }
        mk.op = SLM_HF_MAKE_T, mk.type = t->type, mk.n_dims = 2, mk.ne0 = in;
        return slm_hf_take_parts(io, i, c, l, gu, 0, mk, err);
    }
    /* MXFP4 blocks and their scales */
    if (in % 32)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': MXFP4 blocks of 32, but the config's %s is %lld", shown,
                        slm_hf_tname(t->name, b, sizeof b), gu ? "hidden_size" : "intermediate_size", (long long)in);
    const int64_t want[4] = {E, R, in / 32, 16};
    const char *what = gu ? "experts, 2 x intermediate_size, hidden_size / 32, 16"
                          : "experts, hidden_size, intermediate_size / 32, 16";
    if (t->type != SLM_I8 || !shape_is(t, want, 4)) return bad_shape(shown, t, want, 4, what, "U8", err);
    char sn[160];
    snprintf(sn, sizeof sn, "%.*s_scales", (int)(strlen(t->name) - 7), t->name);
    const char *sshown = shown;
    const slm_st_tensor *sc = io->find(io->L, sn, &sshown);
    if (!sc)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': its scales '%s' are not in the folder", shown,
                        slm_hf_tname(t->name, b, sizeof b), slm_hf_tname(sn, b2, sizeof b2));
    if (sc->type != SLM_I8 || !shape_is(sc, want, 3))
        return bad_shape(sshown, sc, want, 3, gu ? "experts, 2 x intermediate_size, hidden_size / 32"
                                                 : "experts, hidden_size, intermediate_size / 32", "U8", err);
    mk.scales = sc;
    mk.op = SLM_HF_MAKE_MXFP4, mk.type = SLM_MXFP4, mk.n_dims = 2, mk.ne0 = in;
    return slm_hf_take_parts(io, i, c, l, gu, 0, mk, err);
}

/* One HF MXFP4 block (16 bytes: element 2i in byte i's low nibble, 2i + 1
 * in its high one) as GGML's qs (element j low, j + 16 high). */
static void repack_block(const uint8_t *hf, uint8_t *qs) {
    for (int j = 0; j < 16; j++) {
        const int lo = j & 1 ? hf[j / 2] >> 4 : hf[j / 2] & 15;
        const int hi = j & 1 ? hf[8 + j / 2] >> 4 : hf[8 + j / 2] & 15;
        qs[j] = (uint8_t)(lo | hi << 4);
    }
}

float slm_hf_elem_f32(uint32_t type, const uint8_t *p) {
    if (type == SLM_F32) {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    const uint16_t h = (uint16_t)(p[0] | p[1] << 8);
    return type == SLM_BF16 ? slm_bf16_to_f32(h) : slm_f16_to_f32(h);
}

void slm_hf_make(const slm_hf_made *mk, void *dst) {
    if (mk->op >= SLM_HF_MAKE_VROWS) { /* qwen35's DeltaNet tensors */
        slm_hf_q35_make(mk, dst);
        return;
    }
    const slm_st_tensor *t = mk->src;
    const uint8_t *src = t->data;
    uint8_t *out = dst;
    const uint64_t R = (uint64_t)t->shape[mk->op == SLM_HF_MAKE_T ? t->n_dims - 1 : 1], e = (uint64_t)mk->e;
    if (mk->op == SLM_HF_MAKE_MXFP4) {
        const uint64_t nb = (uint64_t)mk->ne0 / 32;
        const uint8_t *sc = mk->scales->data;
        for (int64_t r = 0; r < mk->ne1; r++) {
            const uint64_t row = e * R + (uint64_t)(mk->first + r * mk->step);
            for (uint64_t b = 0; b < nb; b++) {
                slm_block_mxfp4 *o = (slm_block_mxfp4 *)(out + ((uint64_t)r * nb + b) * sizeof *o);
                o->e = sc[row * nb + b];
                repack_block(src + (row * nb + b) * 16, o->qs);
            }
        }
    } else if (mk->op == SLM_HF_MAKE_VEC) {
        const uint64_t es = t->type == SLM_F32 ? 4 : 2;
        for (int64_t k = 0; k < mk->ne0; k++) {
            const float v = slm_hf_elem_f32(t->type, src + (e * R + (uint64_t)(mk->first + k * mk->step)) * es);
            memcpy(out + 4 * (uint64_t)k, &v, 4);
        }
    } else { /* SLM_HF_MAKE_T: out[r][c] = src[e][c][first + r step] (src [E, in, R], or [E x in, R]) */
        const uint64_t es = t->type == SLM_F32 ? 4 : 2, in = (uint64_t)mk->ne0;
        for (int64_t r = 0; r < mk->ne1; r++) {
            const uint64_t col = (uint64_t)(mk->first + r * mk->step);
            for (uint64_t k = 0; k < in; k++)
                memcpy(out + ((uint64_t)r * in + k) * es, src + ((e * in + k) * R + col) * es, es);
        }
    }
}

#endif
