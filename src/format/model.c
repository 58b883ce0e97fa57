/* The model in memory: tensor lookup, closing, and the validation every
 * loader shares (config ranges, required tensors, shapes, types). */
#include <math.h>
#include <stdio.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "format/model.h"

/* ---- close / lookup --------------------------------------------------------- */

void slm_model_close(slm_model_file *m) {
    if (!m) return;
    slm_gguf_close(m->gguf);
    m->gguf = NULL;
    slm_xfree(m->tensors);
    m->tensors = NULL;
    m->n_tensors = 0;
    slm_xfree(m->by_name);
    m->by_name = NULL;
    slm_xfree(m->experts);
    m->experts = NULL;
    m->n_by_name = 0;
    slm_unmap(&m->map);
    slm_unmap(&m->src_map);
}

const slm_tensor *slm_model_tensor(const slm_model_file *m, const char *name) {
    if (m->by_name && m->n_by_name == m->n_tensors) {
        int lo = 0, hi = m->n_by_name; /* bisect [lo, hi) */
        while (lo < hi) {
            const int mid = lo + (hi - lo) / 2;
            const slm_tensor *t = &m->tensors[m->by_name[mid]];
            const int c = strcmp(t->name, name);
            if (c == 0) return t;
            if (c < 0) lo = mid + 1;
            else hi = mid;
        }
        return NULL;
    }
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}

/* ---- the name index and the byte-overlap check ------------------------------ */

/* Sort keys for qsort: tensor indices by name / by data address (stable on
 * the index for equal keys, so messages name the earlier tensor first). */
static _Thread_local const slm_tensor *t_sort_tensors;

static int by_name_cmp(const void *a, const void *b) {
    const int i = *(const int *)a, j = *(const int *)b;
    const int c = strcmp(t_sort_tensors[i].name, t_sort_tensors[j].name);
    return c ? c : (i > j) - (i < j);
}

static int by_addr_cmp(const void *a, const void *b) {
    const int i = *(const int *)a, j = *(const int *)b;
    const uintptr_t x = (uintptr_t)t_sort_tensors[i].data, y = (uintptr_t)t_sort_tensors[j].data;
    if (x != y) return (x > y) - (x < y);
    return (i > j) - (i < j);
}

/* Refuse tensors whose bytes overlap, whatever their kind: sorted by start
 * address, each must end before the next begins. O(n log n). */
static slm_status check_overlap(const slm_model_file *m, const char *file, slm_err *err) {
    const int n = m->n_tensors;
    int *ix = slm_malloc(sizeof *ix * (size_t)(n > 0 ? n : 1));
    if (!ix) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory to sort %d tensors", file, n);
    for (int i = 0; i < n; i++) ix[i] = i;
    t_sort_tensors = m->tensors;
    qsort(ix, (size_t)n, sizeof *ix, by_addr_cmp);
    t_sort_tensors = NULL;
    slm_status s = SLM_OK;
    for (int k = 0; k + 1 < n && !s; k++) {
        const slm_tensor *a = &m->tensors[ix[k]], *b = &m->tensors[ix[k + 1]];
        if (!a->data || !b->data || a->nbytes == 0 || b->nbytes == 0) continue;
        if ((uintptr_t)b->data - (uintptr_t)a->data >= a->nbytes) continue;
        const uint8_t *base = m->map.data;
        const int in_map = base && (const uint8_t *)a->data >= base && (const uint8_t *)b->data >= base;
        s = slm_errf(err, SLM_ERR_FORMAT,
                     "%s: tensors '%s' (%llu bytes at 0x%llx) and '%s' (%llu bytes at 0x%llx) share data bytes", file,
                     a->name, (unsigned long long)a->nbytes,
                     (unsigned long long)(in_map ? (const uint8_t *)a->data - base : 0), b->name,
                     (unsigned long long)b->nbytes, (unsigned long long)(in_map ? (const uint8_t *)b->data - base : 0));
    }
    slm_xfree(ix);
    return s;
}

/* Build m->by_name, refusing duplicate names. O(n log n). */
static slm_status index_tensors(slm_model_file *m, const char *file, slm_err *err) {
    slm_xfree(m->by_name);
    m->by_name = NULL;
    slm_xfree(m->experts);
    m->experts = NULL;
    m->n_by_name = 0;
    const int n = m->n_tensors;
    int *ix = slm_malloc(sizeof *ix * (size_t)(n > 0 ? n : 1));
    if (!ix) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory for the index of %d tensors", file, n);
    for (int i = 0; i < n; i++) ix[i] = i;
    t_sort_tensors = m->tensors;
    qsort(ix, (size_t)n, sizeof *ix, by_name_cmp);
    t_sort_tensors = NULL;
    for (int k = 0; k + 1 < n; k++)
        if (!strcmp(m->tensors[ix[k]].name, m->tensors[ix[k + 1]].name)) {
            slm_status s = slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s' appears twice (tensors #%d and #%d)", file,
                                    m->tensors[ix[k]].name, ix[k], ix[k + 1]);
            slm_xfree(ix);
            return s;
        }
    m->by_name = ix;
    m->n_by_name = n;
    return SLM_OK;
}

/* ---- validation ----------------------------------------------------------- */

static const char *const arch_names[SLM_ARCH_COUNT] = {
    [SLM_ARCH_LLAMA] = "llama", [SLM_ARCH_MISTRAL] = "mistral", [SLM_ARCH_QWEN2] = "qwen2",
    [SLM_ARCH_QWEN3] = "qwen3", [SLM_ARCH_GEMMA2] = "gemma2",   [SLM_ARCH_GEMMA3] = "gemma3",
    [SLM_ARCH_PHI3] = "phi3",   [SLM_ARCH_SMOLLM3] = "smollm3", [SLM_ARCH_OLMO2] = "olmo2",
    [SLM_ARCH_GRANITE] = "granite", [SLM_ARCH_EXAONE] = "exaone", [SLM_ARCH_EXAONE4] = "exaone4",
    [SLM_ARCH_QWEN3MOE] = "qwen3moe", [SLM_ARCH_OLMOE] = "olmoe",
    [SLM_ARCH_GRANITEMOE] = "granitemoe", [SLM_ARCH_GPT_OSS] = "gpt-oss", [SLM_ARCH_QWEN2MOE] = "qwen2moe",
    [SLM_ARCH_GLM4MOE] = "glm4moe", [SLM_ARCH_QWEN35] = "qwen35",
    [SLM_ARCH_GEMMA4] = "gemma4", [SLM_ARCH_QWEN35MOE] = "qwen35moe",
    [SLM_ARCH_BERT] = "bert", [SLM_ARCH_NOMIC_BERT] = "nomic-bert", [SLM_ARCH_GEMMA_EMBEDDING] = "gemma-embedding",
    [SLM_ARCH_MODERN_BERT] = "modern-bert", [SLM_ARCH_JINA_BERT_V2] = "jina-bert-v2",
    [SLM_ARCH_NOMIC_BERT_MOE] = "nomic-bert-moe",
};

const char *slm_arch_name(int a) { return a >= 0 && a < SLM_ARCH_COUNT ? arch_names[a] : NULL; }

int slm_arch_find(const char *name, size_t len) {
    for (int a = 0; a < SLM_ARCH_COUNT; a++)
        if (strlen(arch_names[a]) == len && !memcmp(arch_names[a], name, len)) return a;
    return -1;
}

int slm_matrix_type_supported(uint32_t t) {
    switch (t) {
    case SLM_F32: case SLM_F16: case SLM_BF16: case SLM_Q8_0: case SLM_Q4_0: case SLM_Q4_1:
    case SLM_Q5_0: case SLM_Q5_1: case SLM_IQ4_NL: case SLM_Q2_K: case SLM_Q3_K: case SLM_IQ4_XS:
    case SLM_Q4_K: case SLM_Q5_K: case SLM_Q6_K: case SLM_IQ2_XXS: case SLM_IQ2_XS: case SLM_IQ2_S: case SLM_IQ3_XXS:
    case SLM_IQ3_S: case SLM_IQ1_S: case SLM_IQ1_M: case SLM_MXFP4: case SLM_Q4_0_R16: case SLM_Q6_K_R16:
    case SLM_Q8_0_R16: case SLM_F16_R16: case SLM_Q4_K_R16: case SLM_Q5_K_R16: case SLM_Q5_0_R16: case SLM_IQ4_NL_R16:
    case SLM_Q3_K_R16: case SLM_IQ4_XS_R16: case SLM_Q2_K_R16: case SLM_Q4_1_R16: case SLM_Q5_1_R16: case SLM_MXFP4_R16:
        return 1;
    default:
        return 0;
    }
}

const char *slm_fmt_shape(char *buf, size_t cap, const int64_t *ne, uint32_t n_dims) {
    int o = snprintf(buf, cap, "[");
    for (uint32_t d = 0; d < n_dims && o > 0 && (size_t)o < cap; d++)
        o += snprintf(buf + o, cap - (size_t)o, d ? ", %lld" : "%lld", (long long)ne[d]);
    if (o > 0 && (size_t)o < cap) snprintf(buf + o, cap - (size_t)o, "]");
    return buf;
}

/* One required tensor: present, expected shape, a supported type, and its
 * bytes inside the mapping when there is one. */
static slm_status check_tensor(const slm_model_file *m, const char *file, const char *name, int64_t ne0,
                               int64_t ne1, int is_vector, slm_err *err) {
    const slm_tensor *t = slm_model_tensor(m, name);
    if (!t) return slm_errf(err, SLM_ERR_FORMAT, "%s: missing tensor '%s'", file, name);
    int64_t want[4] = {ne0, ne1, 1, 1};
    uint32_t want_dims = is_vector ? 1 : 2;
    int ok = t->n_dims >= 1 && t->n_dims <= 4;
    for (uint32_t d = 0; ok && d < 4; d++) ok = (d < t->n_dims ? t->ne[d] : 1) == want[d];
    if (!ok) {
        char have[96], need[96];
        slm_fmt_shape(have, sizeof have, t->ne, t->n_dims >= 1 && t->n_dims <= 4 ? t->n_dims : 4);
        slm_fmt_shape(need, sizeof need, want, want_dims);
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': shape %s but the config needs %s", file, name, have,
                        need);
    }
    if (is_vector && t->type != SLM_F32)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: tensor '%s': type %s is not supported for norm weights (f32 only)",
                        file, name, slm_dtype_name(t->type));
    if (!is_vector && !slm_matrix_type_supported(t->type))
        return slm_errf(err, SLM_ERR_UNSUPPORTED,
                        "%s: tensor '%s': type %s is not supported for matrices (supported: %s)", file, name,
                        slm_dtype_name(t->type), SLM_MATRIX_TYPES);
    uint64_t rows = (uint64_t)ne1, nbytes;
    if (!slm_mul_ok(slm_row_bytes(t->type, (uint64_t)ne0), rows, &nbytes) || nbytes == 0 || nbytes != t->nbytes)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': %llu bytes but a %s tensor of this shape needs %llu",
                        file, name, (unsigned long long)t->nbytes, slm_dtype_name(t->type),
                        (unsigned long long)nbytes);
    if (!t->data) return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': no data", file, name);
    if (m->map.data) {
        const uint8_t *b = m->map.data, *p = t->data;
        if (p < b || (uint64_t)(p - b) > m->map.size || t->nbytes > m->map.size - (uint64_t)(p - b))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': data outside the file", file, name);
    }
    return SLM_OK;
}

slm_status slm_model_check_tensor(const slm_model_file *m, const char *file, const char *name, int64_t ne0,
                                  int64_t ne1, int is_vector, slm_err *err) {
    return check_tensor(m, file, name, ne0, ne1, is_vector, err);
}

/* gemma4's MoE layer l beside its dense FFN: the router's input gains
 * ffn_gate_inp.scale, the experts' norms pre_ffw_norm_2 / post_ffw_norm_2
 * and the dense branch's post_ffw_norm_1 [dim]; the per-expert down scales
 * ffn_down_exps.scale [E] (expert_down_scale), finite numbers. */
static slm_status check_gemma4_experts(const slm_model_file *m, const char *file, int l, slm_err *err) {
    const slm_model_config *c = &m->cfg;
    static const char *const vec[4] = {"blk.%d.ffn_gate_inp.scale", "blk.%d.pre_ffw_norm_2.weight",
                                       "blk.%d.post_ffw_norm_1.weight", "blk.%d.post_ffw_norm_2.weight"};
    char name[64];
    slm_status s;
    for (int j = 0; j < 4; j++) {
        snprintf(name, sizeof name, vec[j], l);
        if ((s = check_tensor(m, file, name, c->dim, 1, 1, err))) return s;
    }
    snprintf(name, sizeof name, "blk.%d.ffn_down_exps.scale", l);
    if (!c->expert_down_scale) {
        if (slm_model_tensor(m, name))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': per-expert scales on a layer after one without", file,
                            name);
        return SLM_OK;
    }
    if ((s = check_tensor(m, file, name, c->n_experts, 1, 1, err))) return s;
    const slm_tensor *t = slm_model_tensor(m, name);
    for (int e = 0; e < c->n_experts; e++) {
        float v;
        memcpy(&v, (const float *)t->data + e, sizeof v);
        if (!isfinite(v) || !(fabsf(v) < 1e6f))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': expert %d's scale %g is out of range", file, name, e,
                            (double)v);
    }
    return SLM_OK;
}

/* MoE layers (after the leading dense ones): the router
 * blk.N.ffn_gate_inp.weight [dim, n_experts], its selection bias
 * blk.N.exp_probs_b.bias [n_experts] (expert_sel_bias) and
 * each expert's gate, up [dim, hidden] and down [hidden, dim], indexed into
 * m->experts; the shared expert's gate, up [dim, shared_ffn], down
 * [shared_ffn, dim] and its sigmoid gate ffn_gate_inp_shexp [dim]. */
static slm_status check_experts(slm_model_file *m, const char *file, slm_err *err) {
    const slm_model_config *c = &m->cfg;
    const int E = c->n_experts;
    slm_status s;
    slm_xfree(m->experts);
    m->experts = slm_calloc((size_t)c->n_layers * 6 * (size_t)E, sizeof *m->experts);
    if (!m->experts) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory for the expert table", file);
    static const char *const kind[3] = {"gate", "up", "down"};
    for (int l = c->dense_lead; l < c->n_layers; l++) {
        char name[64];
        if (!slm_layer_moe(c, l)) continue; /* nomic-bert-moe: every moe_every-th layer */
        snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.weight", l);
        if ((s = check_tensor(m, file, name, c->dim, E, 0, err))) return s;
        snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.bias", l);
        if (c->expert_bias && (s = check_tensor(m, file, name, E, 1, 1, err))) return s;
        snprintf(name, sizeof name, "blk.%d.exp_probs_b.bias", l);
        if (c->expert_sel_bias && (s = check_tensor(m, file, name, E, 1, 1, err))) return s;
        for (int j = c->expert_ungated ? 1 : 0; j < 3; j++) /* ungated: up and down only */
            for (int e = 0; e < E; e++) {
                snprintf(name, sizeof name, "blk.%d.ffn_%s.%d.weight", l, kind[j], e);
                const int64_t in = j == 2 ? c->hidden_dim : c->dim, out = j == 2 ? c->dim : c->hidden_dim;
                if ((s = check_tensor(m, file, name, in, out, 0, err))) return s;
                slm_model_expert(m, l, j, e) = slm_model_tensor(m, name);
                if (!c->expert_bias) continue;
                snprintf(name, sizeof name, "blk.%d.ffn_%s.%d.bias", l, kind[j], e);
                if ((s = check_tensor(m, file, name, out, 1, 1, err))) return s;
                slm_model_expert(m, l, 3 + j, e) = slm_model_tensor(m, name);
            }
        if (c->moe_dense && (s = check_gemma4_experts(m, file, l, err))) return s;
        for (int j = 0; j < 4 && c->shared_ffn; j++) { /* the shared expert; its gate a matrix of one row */
            static const char *const sh[4] = {"gate", "up", "down", "gate_inp"};
            const int64_t in = j == 2 ? c->shared_ffn : c->dim, out = j == 3 ? 1 : j == 2 ? c->dim : c->shared_ffn;
            if (j == 3 && !c->shared_gate) break;
            snprintf(name, sizeof name, "blk.%d.ffn_%s_shexp.weight", l, sh[j]);
            if ((s = check_tensor(m, file, name, in, out, 0, err))) return s;
        }
    }
    return SLM_OK;
}

/* What the families add to each layer: Q/K norms (per head or whole rows),
 * post norms, gpt-oss's sinks and output bias. */
static slm_status check_family_tensors(const slm_model_file *m, const char *file, slm_err *err) {
    const slm_model_config *c = &m->cfg;
    const int64_t dim = c->dim, kv_dim = (int64_t)c->head_dim * c->n_kv_heads, q_dim = (int64_t)c->head_dim * c->n_heads;
    slm_status s;
    for (int l = 0; l < c->n_layers; l++) {
        static const char *const qk[2] = {"blk.%d.attn_q_norm.weight", "blk.%d.attn_k_norm.weight"};
        static const char *const post[2] = {"blk.%d.post_attention_norm.weight", "blk.%d.post_ffw_norm.weight"};
        for (int j = 0; j < 2; j++) {
            char name[64];
            snprintf(name, sizeof name, qk[j], l);
            const int64_t qk_len = c->qk_norm == 2 ? (j ? kv_dim : q_dim) : slm_layer_head_dim(c, l);
            if (c->qk_norm && !slm_layer_recurrent(c, l) && (j == 0 || slm_layer_has_kv(c, l)) &&
                (s = check_tensor(m, file, name, qk_len, 1, 1, err)))
                return s;
            snprintf(name, sizeof name, post[j], l);
            if (c->post_norms && (s = check_tensor(m, file, name, dim, 1, 1, err))) return s;
        }
    }
    return SLM_OK;
}

/* gemma4's per-layer embeddings (per_layer_token_embd [ple * layers, vocab],
 * per_layer_model_proj [dim, ple * layers], per_layer_proj_norm [ple]; per
 * layer inp_gate [dim, ple], proj [ple, dim], post_norm [dim]) and each
 * layer's output scale [1], a finite number. */
static slm_status check_gemma4_tensors(const slm_model_file *m, const char *file, slm_err *err) {
    const slm_model_config *c = &m->cfg;
    const int64_t P = c->ple_dim, PL = (int64_t)c->ple_dim * c->n_layers;
    slm_status s;
    if (P && ((s = check_tensor(m, file, "per_layer_token_embd.weight", PL, c->vocab_size, 0, err)) ||
              (s = check_tensor(m, file, "per_layer_model_proj.weight", c->dim, PL, 0, err)) ||
              (s = check_tensor(m, file, "per_layer_proj_norm.weight", P, 1, 1, err))))
        return s;
    for (int l = 0; l < c->n_layers; l++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.inp_gate.weight", l);
        if (P && (s = check_tensor(m, file, name, c->dim, P, 0, err))) return s;
        snprintf(name, sizeof name, "blk.%d.proj.weight", l);
        if (P && (s = check_tensor(m, file, name, P, c->dim, 0, err))) return s;
        snprintf(name, sizeof name, "blk.%d.post_norm.weight", l);
        if (P && (s = check_tensor(m, file, name, c->dim, 1, 1, err))) return s;
        snprintf(name, sizeof name, "blk.%d.layer_output_scale.weight", l);
        if (!c->layer_scale) continue;
        if ((s = check_tensor(m, file, name, 1, 1, 1, err))) return s;
        float v;
        memcpy(&v, slm_model_tensor(m, name)->data, sizeof v);
        if (!isfinite(v) || !(fabsf(v) < 1e6f))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': %g is out of range", file, name, (double)v);
    }
    return SLM_OK;
}

/* A Gated DeltaNet layer's tensors (qwen35): attn_qkv [dim, conv_dim],
 * attn_gate [dim, H_v x S], ssm_beta / ssm_alpha [dim, H_v], ssm_out
 * [H_v x S, dim]; the conv taps ssm_conv1d [conv, conv_dim] (f32: the conv
 * task reads them as floats), ssm_dt.bias and ssm_a [H_v], ssm_norm [S]. */
static slm_status check_recurrent(const slm_model_file *m, const char *file, int l, slm_err *err) {
    const slm_model_config *c = &m->cfg;
    const int64_t dim = c->dim, cd = slm_conv_dim(c), vd = (int64_t)c->ssm_v_heads * c->ssm_state, hv = c->ssm_v_heads;
    static const struct { const char *fmt; int kind; } k[] = {
        /* kind: 0 [dim, conv_dim], 1 [dim, vd], 2 [dim, H_v], 3 [vd, dim], 4 conv taps, 5 [H_v] vector, 6 [S] vector */
        {"blk.%d.attn_qkv.weight", 0}, {"blk.%d.attn_gate.weight", 1}, {"blk.%d.ssm_beta.weight", 2},
        {"blk.%d.ssm_alpha.weight", 2}, {"blk.%d.ssm_out.weight", 3}, {"blk.%d.ssm_conv1d.weight", 4},
        {"blk.%d.ssm_dt.bias", 5}, {"blk.%d.ssm_a", 5}, {"blk.%d.ssm_norm.weight", 6},
    };
    slm_status s;
    for (size_t j = 0; j < sizeof k / sizeof k[0]; j++) {
        char name[64];
        snprintf(name, sizeof name, k[j].fmt, l);
        const int64_t ne0[7] = {dim, dim, dim, vd, c->ssm_conv, hv, c->ssm_state}, ne1[7] = {cd, vd, hv, dim, cd, 1, 1};
        if ((s = check_tensor(m, file, name, ne0[k[j].kind], ne1[k[j].kind], k[j].kind >= 5, err))) return s;
        if (k[j].kind == 4 && slm_model_tensor(m, name)->type != SLM_F32)
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: tensor '%s': type %s is not supported for the conv taps (f32 "
                            "only)", file, name, slm_dtype_name(slm_model_tensor(m, name)->type));
    }
    return SLM_OK;
}

/* Llama 3's rope_freqs and LongRoPE's factor tensors: present, of the
 * rotated pairs, every factor positive. */
static slm_status check_rope_factors(const slm_model_file *m, const char *file, slm_err *err) {
    const slm_model_config *c = &m->cfg;
    slm_status s;
    if (c->rope_long)
        for (int j = 0; j < 2; j++) {
            const char *name = j ? "rope_factors_short.weight" : "rope_factors_long.weight";
            if ((s = check_tensor(m, file, name, slm_rope_dims(c) / 2, 1, 1, err))) return s;
            const float *f = slm_model_tensor(m, name)->data;
            for (int i = 0; i < slm_rope_dims(c) / 2; i++) {
                float v;
                memcpy(&v, f + i, sizeof v);
                if (!(v > 0.0f) || !isfinite(v))
                    return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': element %d = %g (must be positive)", file, name, i,
                                    (double)v);
            }
        }
    if (c->rope_freqs && (s = check_tensor(m, file, "rope_freqs.weight", slm_rope_dims(c) / 2, 1, 1, err))) return s;
    if (c->rope_freqs) {
        const float *f = slm_model_tensor(m, "rope_freqs.weight")->data;
        for (int i = 0; i < slm_rope_dims(c) / 2; i++) {
            float v;
            memcpy(&v, f + i, sizeof v);
            if (!(v > 0.0f) || !isfinite(v))
                return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor 'rope_freqs.weight': element %d = %g (must be positive)",
                                file, i, (double)v);
        }
    }
    return SLM_OK;
}

/* qwen35's config: the DeltaNet shapes the runtime sizes its state by, only
 * with recurrent layers; no whole-row Q/K norms or missing pre-norms beside
 * them (experts are fine: qwen35moe). */
static slm_status check_recurrent_config(const slm_model_config *c, const char *file, slm_err *err) {
#define RANGE(field, lo, hi)                                                                               \
    if (c->field < (lo) || c->field > (hi))                                                                \
    return slm_errf(err, SLM_ERR_FORMAT, "%s: config " #field " = %d is out of range (%d..%d)", file, c->field, \
                    (int)(lo), (int)(hi))
    RANGE(recur_interval, 0, 1 << 16);
    RANGE(attn_gate, 0, 1);
    if (c->recur_interval) { /* qwen35: the DeltaNet shapes (the runtime's state is sized by them) */
        RANGE(ssm_conv, 2, 16);
        RANGE(ssm_state, 1, 512);
        RANGE(ssm_k_heads, 1, 1 << 12);
        RANGE(ssm_v_heads, c->ssm_k_heads, 1 << 12);
        if (c->ssm_v_heads % c->ssm_k_heads)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: config ssm_v_heads = %d is not a multiple of ssm_k_heads = %d",
                            file, c->ssm_v_heads, c->ssm_k_heads);
        if (c->qk_norm == 2 || c->no_pre_norms)
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: config: recurrent layers with whole-row Q/K norms or "
                            "without pre-norms", file);
    } else {
        RANGE(ssm_conv, 0, 0);
        RANGE(ssm_state, 0, 0);
        RANGE(ssm_k_heads, 0, 0);
        RANGE(ssm_v_heads, 0, 0);
    }
#undef RANGE
    return SLM_OK;
}

/* YaRN's parameters: only with YaRN, in range (the sliding layers' own
 * table stays plain RoPE: olmo3, as llama.cpp runs it). */
static slm_status check_yarn_config(const slm_model_config *c, const char *file, slm_err *err) {
    if (c->rope_yarn) {
        if (c->rope_yarn != 1 || c->rope_long || c->rope_freqs || !(c->rope_scale > 1.0f))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: YaRN RoPE scaling with a factor of 1, with rope_freqs or "
                            "with LongRoPE factors", file);
        if (c->rope_scale_swa != 0.0f && c->rope_scale_swa != 1.0f)
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: YaRN RoPE scaling with scaled RoPE on sliding layers", file);
        if (c->rope_orig_ctx < 1)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: YaRN RoPE scaling without the original context length", file);
        if (!(c->yarn_beta_fast > 0.0f && c->yarn_beta_fast < 1e6f) ||
            !(c->yarn_beta_slow > 0.0f && c->yarn_beta_slow < 1e6f) ||
            !(c->yarn_ext_factor >= 0.0f && c->yarn_ext_factor <= 1.0f))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: YaRN beta_fast %g, beta_slow %g (must be positive), "
                            "extrapolation factor %g (0..1)", file, (double)c->yarn_beta_fast,
                            (double)c->yarn_beta_slow, (double)c->yarn_ext_factor);
    } else if (c->yarn_beta_fast != 0.0f || c->yarn_beta_slow != 0.0f || c->yarn_ext_factor != 0.0f)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: YaRN parameters without YaRN", file);
    return SLM_OK;
}

slm_status slm_model_validate(slm_model_file *m, slm_err *err) {
    const char *file = slm_basename(m->path);
    const slm_model_config *c = &m->cfg;
    slm_status s;

    if ((s = index_tensors(m, file, err))) return s;
    if (slm_arch_find(c->arch, strnlen(c->arch, sizeof c->arch)) < 0)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: architecture '%.31s' is not supported (supported: %s)", file,
                        c->arch, SLM_SUPPORTED_ARCHS);
#define RANGE(field, lo, hi)                                                                               \
    if (c->field < (lo) || c->field > (hi))                                                                \
    return slm_errf(err, SLM_ERR_FORMAT, "%s: config " #field " = %d is out of range (%d..%d)", file, c->field, \
                    (int)(lo), (int)(hi))
    RANGE(dim, 1, 1 << 20);
    RANGE(hidden_dim, 1, 1 << 22);
    RANGE(n_layers, 1, 1 << 16);
    RANGE(n_heads, 1, 1 << 16);
    RANGE(n_kv_heads, 1, c->n_heads);
    RANGE(vocab_size, 1, 1 << 24);
    RANGE(context_len, 1, 1 << 24);
    RANGE(sliding_window, 0, 1 << 24);
    RANGE(swa_pattern, 0, 1 << 16);
    RANGE(rope_orig_ctx, 0, 1 << 24);
    RANGE(nope_step, 0, 1 << 16);
    RANGE(qk_norm, 0, 2);
    RANGE(no_pre_norms, 0, 1);
    RANGE(n_experts, 0, 1024);
    RANGE(n_experts_used, c->n_experts ? 1 : 0, c->n_experts < 64 ? c->n_experts : 64);
    RANGE(expert_norm, 0, 1);
    RANGE(attn_sinks, 0, 1);
    RANGE(o_bias, 0, 1);
    RANGE(expert_bias, 0, c->n_experts ? 1 : 0);
    RANGE(shared_ffn, 0, c->n_experts ? 1 << 22 : 0);
    RANGE(shared_gate, 0, c->shared_ffn ? 1 : 0);
    RANGE(dense_lead, 0, c->n_experts ? c->n_layers : 0);
    /* the leading dense layers' width (glm4moe), or the dense branch of every MoE layer (gemma4) */
    RANGE(dense_ffn, c->n_experts && (c->dense_lead || c->moe_dense) ? 1 : 0,
          c->n_experts && (c->dense_lead || c->moe_dense) ? 1 << 22 : 0);
    RANGE(expert_sigmoid, 0, c->n_experts ? 1 : 0);
    RANGE(expert_sel_bias, 0, c->n_experts ? 1 : 0);
    RANGE(nextn_layers, 0, 1 << 16);
    RANGE(encoder, 0, 6);
    RANGE(moe_every, 0, c->n_experts ? 255 : 0);
    RANGE(expert_ungated, 0, c->n_experts ? 1 : 0);
    if (c->moe_every == 1 || ((c->moe_every || c->expert_ungated) && (c->moe_dense || c->expert_bias || c->dense_lead)))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config: experts every %d layers (ungated %d) beside another layout",
                        file, c->moe_every, c->expert_ungated);
#undef RANGE
    if ((s = check_recurrent_config(c, file, err))) return s;
    if ((c->swiglu_limit != 0.0f || c->swiglu_alpha != 0.0f) && (!c->n_experts || !(c->swiglu_limit > 0.0f)))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: config: the clamped SwiGLU only on experts, with a positive limit", file);
    if (c->attn_sinks && c->attn_softcap > 0.0f)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: config: attention sinks with capped scores", file);
    if (c->no_pre_norms && !c->post_norms)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config: no pre-norms and no post norms", file);
    if (!(c->rope_scale >= 1.0f && c->rope_scale <= 1024.0f))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config rope_scale = %g is out of range (1..1024)", file,
                        (double)c->rope_scale);
    if (c->n_heads % c->n_kv_heads)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config n_kv_heads = %d does not divide n_heads = %d", file,
                        c->n_kv_heads, c->n_heads);
    if (c->head_dim < 2 || c->head_dim > 4096 || c->head_dim % 2 || (int64_t)c->head_dim * c->n_heads > (1 << 22))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config head_dim = %d (must be even, 2..4096)", file, c->head_dim);
    if (c->rope_dims < 0 || c->rope_dims > c->head_dim || c->rope_dims % 2 || (c->rope_dims && c->rope_dims < 2))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config rope_dims = %d (must be even, at most head_dim %d)", file,
                        c->rope_dims, c->head_dim);
    if (slm_rope_dims(c) != c->head_dim && !c->rope_neox)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: partial RoPE only with the neox layout", file);
    if (c->rope_long && c->rope_freqs)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: both rope_freqs.weight and LongRoPE factors", file);
    if ((s = check_yarn_config(c, file, err))) return s;
    {
        const float f[] = {c->embed_scale, c->attn_scale, c->attn_softcap, c->final_softcap, c->rope_base_swa,
                           c->rope_scale_swa, c->rope_attn_factor, c->residual_scale, c->logit_scale,
                           c->swiglu_alpha, c->swiglu_limit, c->expert_scale};
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
            if (!(f[i] >= 0.0f && f[i] < 1e9f))
                return slm_errf(err, SLM_ERR_FORMAT, "%s: config: a family parameter (#%zu) = %g is out of range", file, i,
                                (double)f[i]);
    }
    if (!(c->rope_base > 0.0f) || !isfinite(c->rope_base))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config rope_base = %g (must be positive)", file, (double)c->rope_base);
    if (!(c->norm_eps > 0.0f) || !(c->norm_eps < 1.0f))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config norm_eps = %g (must be in (0, 1))", file, (double)c->norm_eps);

    if (c->expert_scale != 0.0f && !c->n_experts)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config: an expert weight scale without experts", file);
    if ((s = slm_gemma4_check_config(c, file, err))) return s;
    if (slm_encoder_graph(c)) { /* bert, nomic-bert, modern-bert: their own tensors (encoder.c) */
        if ((s = slm_encoder_check_tensors(m, file, err))) return s;
        if (c->n_experts && (s = check_experts(m, file, err))) return s; /* nomic-bert-moe */
        return check_overlap(m, file, err);
    }
    int64_t dim = c->dim, kv_dim = (int64_t)c->head_dim * c->n_kv_heads, voc = c->vocab_size,
            q_dim = (int64_t)c->head_dim * c->n_heads;
    if ((s = check_tensor(m, file, "token_embd.weight", dim, voc, 0, err))) return s;
    for (int l = 0; l < c->n_layers; l++) {
        /* this layer's shape (gemma4's kinds of layer; the config's elsewhere) */
        const int64_t hid = slm_layer_ffn(c, l), hd = slm_layer_head_dim(c, l), kvd = hd * slm_layer_kv_heads(c, l),
                      qd = hd * c->n_heads;
        static const struct { const char *fmt; int ne0, ne1, vec; } k[] = {
            /* ne in units: 0 dim, 1 kv_dim, 2 hidden, 3 q_dim, 4 2 x q_dim (a gated query) */
            {"blk.%d.attn_norm.weight", 0, -1, 1}, {"blk.%d.attn_q.weight", 0, 3, 0},
            {"blk.%d.attn_k.weight", 0, 1, 0},     {"blk.%d.attn_v.weight", 0, 1, 0},
            {"blk.%d.attn_output.weight", 3, 0, 0}, {"blk.%d.ffn_norm.weight", 0, -1, 1},
            {"blk.%d.ffn_gate.weight", 0, 2, 0},   {"blk.%d.ffn_down.weight", 2, 0, 0},
            {"blk.%d.ffn_up.weight", 0, 2, 0},
        };
        const int64_t unit[5] = {dim, kvd, hid, qd, 2 * qd};
        const int recur = slm_layer_recurrent(c, l);
        if (recur && (s = check_recurrent(m, file, l, err))) return s;
        for (size_t j = 0; j < sizeof k / sizeof k[0]; j++) {
            char name[64];
            if (c->no_pre_norms && k[j].vec) continue;
            if (recur && j >= 1 && j <= 4) continue; /* no attention: its DeltaNet above */
            const int ne1 = j == 1 && c->attn_gate ? 4 : k[j].ne1; /* the gated query: query and gate rows */
            if (slm_layer_moe(c, l) && !c->moe_dense && j >= 6) continue; /* the experts below */
            snprintf(name, sizeof name, k[j].fmt, l);
            /* gemma4: a KV-shared layer's K/V are not read; V is K where attn_v is absent */
            if ((j == 2 || j == 3) && !slm_layer_has_kv(c, l)) continue;
            if (j == 3 && c->v_norm && !slm_model_tensor(m, name)) continue;
            if ((s = check_tensor(m, file, name, unit[k[j].ne0], ne1 < 0 ? 1 : unit[ne1], k[j].vec, err)))
                return s;
        }
    }
    if ((s = check_family_tensors(m, file, err))) return s;
    for (int l = 0; l < c->n_layers && (c->attn_sinks || c->o_bias); l++) { /* gpt-oss */
        char name[64];
        snprintf(name, sizeof name, "blk.%d.attn_sinks.weight", l);
        if (c->attn_sinks && (s = check_tensor(m, file, name, c->n_heads, 1, 1, err))) return s;
        snprintf(name, sizeof name, "blk.%d.attn_output.bias", l);
        if (c->o_bias && (s = check_tensor(m, file, name, dim, 1, 1, err))) return s;
    }
    if (c->qkv_bias)
        for (int l = 0; l < c->n_layers; l++) {
            static const char *const bias[3] = {"blk.%d.attn_q.bias", "blk.%d.attn_k.bias", "blk.%d.attn_v.bias"};
            for (int j = 0; j < 3; j++) {
                char name[64];
                snprintf(name, sizeof name, bias[j], l);
                if ((s = check_tensor(m, file, name, j ? kv_dim : q_dim, 1, 1, err))) return s;
            }
        }
    if ((s = check_rope_factors(m, file, err))) return s;
    if ((s = check_gemma4_tensors(m, file, err))) return s;
    if (c->n_experts && (s = check_experts(m, file, err))) return s;
    if ((s = check_tensor(m, file, "output_norm.weight", dim, 1, 1, err))) return s;
    if (!c->tied_embeddings && (s = check_tensor(m, file, "output.weight", dim, voc, 0, err))) return s;
    return check_overlap(m, file, err);
}
