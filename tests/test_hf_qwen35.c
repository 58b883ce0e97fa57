/* Hugging Face folders of Qwen3.5 (model_type qwen3_5: the text part of
 * Qwen3_5ForConditionalGeneration under text_config, tensors
 * model.language_model.X beside a vision tower; qwen3_5_text: the text
 * model alone) and Qwen3.5-MoE (qwen3_5_moe, qwen3_5_moe_text), written
 * here with tiny random weights in the published layout (Gated DeltaNet
 * layers' linear_attn.in_proj_qkv / in_proj_z / in_proj_a / in_proj_b /
 * conv1d [channels, 1, K] / A_log / dt_bias / norm / out_proj with value
 * heads grouped by key head, gated q_proj, zero-centred norm gains, an MTP
 * layer, per-expert or transformers v5's fused experts, a shared expert),
 * loaded with slm_model_open(DIR) and run through the compiled programs. The
 * logits at every position are checked against the same weights written as
 * a GGUF the way llama.cpp's converter writes them (gains 1 + w but the
 * gated norm's, -exp(A_log), the conv taps squeezed to f32, the value heads
 * re-ordered from grouped to tiled, experts stacked), written here from the
 * converter's own description, and against the double-precision reference
 * forward of the loaded model; what the loader made is checked value by
 * value. Hostile and unsupported configs and tensors are refused with
 * messages naming the file and the key or tensor. */
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dtype.h"
#include "compiler/compiler.h"
#include "format/gguf.h"
#include "format/model.h"
#include "ref_forward.h"
#include "runtime/runtime.h"
#include "t.h"
#include "rig.h"
#define ST_MAX_TENSORS 256 /* the MoE folders' per-expert tensors */
#include "st_write.h"
#include "hf_twin.h"
#include "ref_check.h"

/* 4 layers (DeltaNet 0-2, full attention 3), dim 64, 2 query heads of 32 (8
 * rotated), 1 KV head; DeltaNet heads of 16, conv of 4 taps; dense FFN 96;
 * MoE: 8 experts of 32, 3 a token, a shared expert of 64. */
enum { D = 64, HQ = 2, KV = 1, HD = 32, FFN = 96, V = 160, NL = 4, S = 16, CONV = 4, NE = 8, NK = 3, FE = 32, FS = 64,
       CTX = 256 };

typedef struct q35 {
    int moe;         /* qwen3_5_moe */
    int mm;          /* the multimodal model: text_config, model.language_model.X, a vision tower */
    int kh, vh;      /* DeltaNet key and value heads */
    const char *mat; /* the matrices' dtype */
    int shards;      /* 0: model.safetensors; else shards and an index */
    int fused;       /* MoE: transformers v5's fused expert stacks */
    int tied;        /* tie_word_embeddings, no lm_head */
    int layer_types; /* layer_types written (and full_attention_interval not) */
} q35;

static const char *pre(const q35 *q) { return q->mm ? "model.language_model." : "model."; }
static int recurrent(int l) { return (l + 1) % 4 != 0; }

/* ---- the folder ---------------------------------------------------------------- */

static void reshape3(weights *w, int64_t a, int64_t b, int64_t c) {
    st_item *t = &w->it[w->n - 1];
    t->n_dims = 3, t->shape[0] = a, t->shape[1] = b, t->shape[2] = c;
}

static void make_weights(weights *w, const q35 *q, uint64_t seed) {
    g_rng = seed;
    memset(w, 0, sizeof *w);
    const int cd = (2 * q->kh + q->vh) * S, vd = q->vh * S;
    const float sd = 1.0f / sqrtf((float)D);
    char n[128];
    if (q->mm) add_w(w, "model.visual.patch_embed.proj.weight", "F32", 8, 8, 1.0f, 0.0f); /* skipped */
    add_w(w, "mtp.fc.weight", q->mat, D, 2 * D, sd, 0.0f);                               /* skipped */
    add_w(w, "mtp.layers.0.input_layernorm.weight", "BF16", 0, D, 0.1f, 0.0f);
    snprintf(n, sizeof n, "%sembed_tokens.weight", pre(q));
    add_w(w, n, q->mat, V, D, 1.0f, 0.0f);
    for (int l = 0; l < NL; l++) {
#define NM(x) (snprintf(n, sizeof n, "%slayers.%d." x, pre(q), l), n)
        add_w(w, NM("input_layernorm.weight"), "BF16", 0, D, 0.1f, 0.0f); /* zero-centred: applied as 1 + w */
        if (recurrent(l)) {
            add_w(w, NM("linear_attn.in_proj_qkv.weight"), q->mat, cd, D, sd, 0.0f);
            add_w(w, NM("linear_attn.in_proj_z.weight"), q->mat, vd, D, sd, 0.0f);
            add_w(w, NM("linear_attn.in_proj_b.weight"), q->mat, q->vh, D, sd, 0.0f);
            add_w(w, NM("linear_attn.in_proj_a.weight"), q->mat, q->vh, D, sd, 0.0f);
            add_w(w, NM("linear_attn.conv1d.weight"), "BF16", cd, CONV, 0.5f, 0.0f);
            reshape3(w, cd, 1, CONV);
            add_w(w, NM("linear_attn.dt_bias"), "BF16", 0, q->vh, 0.5f, 0.0f);
            add_w(w, NM("linear_attn.A_log"), "F32", 0, q->vh, 0.4f, 0.3f);
            add_w(w, NM("linear_attn.norm.weight"), "F32", 0, S, 0.1f, 1.0f); /* applied as w */
            add_w(w, NM("linear_attn.out_proj.weight"), q->mat, D, vd, 1.0f / sqrtf((float)vd), 0.0f);
        } else {
            add_w(w, NM("self_attn.q_proj.weight"), q->mat, 2 * HQ * HD, D, sd, 0.0f);
            add_w(w, NM("self_attn.k_proj.weight"), q->mat, KV * HD, D, sd, 0.0f);
            add_w(w, NM("self_attn.v_proj.weight"), q->mat, KV * HD, D, sd, 0.0f);
            add_w(w, NM("self_attn.q_norm.weight"), "BF16", 0, HD, 0.2f, 0.0f);
            add_w(w, NM("self_attn.k_norm.weight"), "BF16", 0, HD, 0.2f, 0.0f);
            add_w(w, NM("self_attn.o_proj.weight"), q->mat, D, HQ * HD, 1.0f / sqrtf((float)(HQ * HD)), 0.0f);
        }
        add_w(w, NM("post_attention_layernorm.weight"), "BF16", 0, D, 0.1f, 0.0f);
        if (!q->moe) {
            add_w(w, NM("mlp.gate_proj.weight"), q->mat, FFN, D, sd, 0.0f);
            add_w(w, NM("mlp.up_proj.weight"), q->mat, FFN, D, sd, 0.0f);
            add_w(w, NM("mlp.down_proj.weight"), q->mat, D, FFN, 1.0f / sqrtf((float)FFN), 0.0f);
            continue;
        }
        add_w(w, NM("mlp.gate.weight"), q->mat, NE, D, 3.0f * sd, 0.0f);
        if (q->fused) {
            add_w(w, NM("mlp.experts.gate_up_proj"), q->mat, NE * 2 * FE, D, sd, 0.0f);
            reshape3(w, NE, 2 * FE, D);
            add_w(w, NM("mlp.experts.down_proj"), q->mat, NE * D, FE, 1.0f / sqrtf((float)FE), 0.0f);
            reshape3(w, NE, D, FE);
        } else {
            static const char *const part[3] = {"gate_proj", "up_proj", "down_proj"};
            for (int e = 0; e < NE; e++)
                for (int j = 0; j < 3; j++) {
                    snprintf(n, sizeof n, "%slayers.%d.mlp.experts.%d.%s.weight", pre(q), l, e, part[j]);
                    add_w(w, n, q->mat, j == 2 ? D : FE, j == 2 ? FE : D, j == 2 ? 1.0f / sqrtf((float)FE) : sd, 0.0f);
                }
        }
        add_w(w, NM("mlp.shared_expert.gate_proj.weight"), q->mat, FS, D, sd, 0.0f);
        add_w(w, NM("mlp.shared_expert.up_proj.weight"), q->mat, FS, D, sd, 0.0f);
        add_w(w, NM("mlp.shared_expert.down_proj.weight"), q->mat, D, FS, 1.0f / sqrtf((float)FS), 0.0f);
        add_w(w, NM("mlp.shared_expert_gate.weight"), q->mat, 1, D, 2.0f * sd, 0.0f);
#undef NM
    }
    snprintf(n, sizeof n, "%snorm.weight", pre(q));
    add_w(w, n, "BF16", 0, D, 0.1f, 0.0f);
    if (!q->tied) add_w(w, "lm_head.weight", q->mat, V, D, 2.0f * sd, 0.0f);
}

/* The text model's keys; the key named drop is left out, extra (", ...") added. */
static int text_keys(char *o, size_t cap, const q35 *q, const char *drop, const char *extra) {
    char lt[200];
    int k = snprintf(lt, sizeof lt, "[");
    for (int l = 0; l < NL; l++)
        k += snprintf(lt + k, sizeof lt - (size_t)k, "%s\"%s\"", l ? ", " : "", recurrent(l) ? "linear_attention" : "full_attention");
    snprintf(lt + k, sizeof lt - (size_t)k, "]");
    char vals[24][300];
    const char *keys[24];
    int nk = 0;
#define KV_(key, ...) (keys[nk] = key, snprintf(vals[nk++], sizeof vals[0], __VA_ARGS__))
    KV_("model_type", "\"%s\"", q->moe ? "qwen3_5_moe_text" : "qwen3_5_text");
    KV_("hidden_size", "%d", D);
    if (!q->moe) KV_("intermediate_size", "%d", FFN);
    KV_("num_hidden_layers", "%d", NL);
    KV_("num_attention_heads", "%d", HQ);
    KV_("num_key_value_heads", "%d", KV);
    KV_("head_dim", "%d", HD);
    KV_("vocab_size", "%d", V);
    KV_("max_position_embeddings", "%d", CTX);
    KV_("rms_norm_eps", "1e-06");
    KV_("hidden_act", "\"silu\"");
    KV_("attn_output_gate", "true");
    KV_("linear_conv_kernel_dim", "%d", CONV);
    KV_("linear_key_head_dim", "%d", S);
    KV_("linear_value_head_dim", "%d", S);
    KV_("linear_num_key_heads", "%d", q->kh);
    KV_("linear_num_value_heads", "%d", q->vh);
    if (q->layer_types) KV_("layer_types", "%s", lt);
    else KV_("full_attention_interval", "4");
    KV_("mtp_num_hidden_layers", "1");
    KV_("rope_parameters", "{\"rope_type\": \"default\", \"rope_theta\": 10000000, \"partial_rotary_factor\": 0.25, "
                           "\"mrope_section\": [11, 11, 10], \"mrope_interleaved\": true}");
    if (q->moe) {
        KV_("num_experts", "%d", NE);
        KV_("num_experts_per_tok", "%d", NK);
        KV_("moe_intermediate_size", "%d", FE);
        KV_("shared_expert_intermediate_size", "%d", FS);
        KV_("mlp_only_layers", "[]");
    }
#undef KV_
    int n = 0;
    for (int i = 0; i < nk; i++)
        if (!drop || strcmp(drop, keys[i])) n += snprintf(o + n, cap - (size_t)n, "%s\"%s\": %s", n ? ", " : "", keys[i], vals[i]);
    if (extra) n += snprintf(o + n, cap - (size_t)n, "%s", extra);
    return n;
}

static void write_config(const char *dir, const q35 *q, const char *drop, const char *extra) {
    char path[512], buf[8192];
    int n;
    if (q->mm) {
        n = snprintf(buf, sizeof buf, "{\"architectures\": [\"%s\"], \"model_type\": \"%s\", \"tie_word_embeddings\": %s, "
                     "\"vision_config\": {\"model_type\": \"%s\", \"depth\": 1}, \"text_config\": {",
                     q->moe ? "Qwen3_5MoeForConditionalGeneration" : "Qwen3_5ForConditionalGeneration",
                     q->moe ? "qwen3_5_moe" : "qwen3_5", q->tied ? "true" : "false", q->moe ? "qwen3_5_moe" : "qwen3_5");
        n += text_keys(buf + n, sizeof buf - (size_t)n, q, drop, extra);
        n += snprintf(buf + n, sizeof buf - (size_t)n, "}}\n");
    } else {
        n = snprintf(buf, sizeof buf, "{\"architectures\": [\"%s\"], \"tie_word_embeddings\": %s, ",
                     q->moe ? "Qwen3_5MoeForCausalLM" : "Qwen3_5ForCausalLM", q->tied ? "true" : "false");
        n += text_keys(buf + n, sizeof buf - (size_t)n, q, drop, extra);
        n += snprintf(buf + n, sizeof buf - (size_t)n, "}\n");
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    t_write_file(path, buf, (size_t)n);
}

static int write_hf(const char *dir, const q35 *q, const weights *w, const char *drop, const char *extra) {
    st_rm_dir(dir);
    mkdir(dir, 0755);
    write_config(dir, q, drop, extra);
    return st_write_weights(dir, w->it, w->n, q->shards, 0);
}

/* ---- the GGUF twin, as llama.cpp's converter writes it ---------------------------- */

/* _reorder_v_heads: rows [first, first + kh x r x hd) of f ([rows][cols]), seen as
 * [kh][r][hd] rows, become [r][kh][hd] (by_cols: the columns of every row instead). */
static void reorder(float *f, int64_t rows, int64_t cols, int64_t first, int kh, int r, int hd, int by_cols) {
    const size_t n = (size_t)(rows * cols);
    float *c = malloc(n * sizeof *c);
    memcpy(c, f, n * sizeof *c);
    for (int k = 0; k < kh; k++)
        for (int j = 0; j < r; j++)
            for (int d = 0; d < hd; d++) {
                const int64_t to = first + ((int64_t)j * kh + k) * hd + d, from = first + ((int64_t)k * r + j) * hd + d;
                if (by_cols)
                    for (int64_t x = 0; x < rows; x++) f[x * cols + to] = c[x * cols + from];
                else
                    memcpy(f + to * cols, c + from * cols, (size_t)cols * sizeof *f);
            }
    free(c);
}

static const float *find_w(const weights *w, const char *name) {
    for (int i = 0; i < w->n; i++)
        if (!strcmp(w->it[i].name, name)) return w->f[i];
    return NULL;
}

/* Expert e's matrix j (0 gate, 1 up, 2 down) of layer l as the folder holds it. */
static const float *expert_f(const q35 *q, const weights *w, int l, int j, int e) {
    static const char *const part[3] = {"gate_proj", "up_proj", "down_proj"};
    char n[128];
    if (!q->fused) {
        snprintf(n, sizeof n, "%slayers.%d.mlp.experts.%d.%s.weight", pre(q), l, e, part[j]);
        return find_w(w, n);
    }
    snprintf(n, sizeof n, "%slayers.%d.mlp.experts.%s", pre(q), l, j == 2 ? "down_proj" : "gate_up_proj");
    const float *f = find_w(w, n);
    return !f ? NULL : f + (j == 2 ? (size_t)e * D * FE : ((size_t)e * 2 + (size_t)j) * FE * D);
}

/* The GGUF name the converter gives layer tensor rest (NULL: not one). */
static const char *twin_layer_name(const char *rest) {
    static const char *const map[][2] = {
        {"input_layernorm.weight", "attn_norm.weight"}, {"post_attention_layernorm.weight", "post_attention_norm.weight"},
        {"self_attn.q_proj.weight", "attn_q.weight"}, {"self_attn.k_proj.weight", "attn_k.weight"},
        {"self_attn.v_proj.weight", "attn_v.weight"}, {"self_attn.o_proj.weight", "attn_output.weight"},
        {"self_attn.q_norm.weight", "attn_q_norm.weight"}, {"self_attn.k_norm.weight", "attn_k_norm.weight"},
        {"linear_attn.in_proj_qkv.weight", "attn_qkv.weight"}, {"linear_attn.in_proj_z.weight", "attn_gate.weight"},
        {"linear_attn.in_proj_a.weight", "ssm_alpha.weight"}, {"linear_attn.in_proj_b.weight", "ssm_beta.weight"},
        {"linear_attn.conv1d.weight", "ssm_conv1d.weight"}, {"linear_attn.dt_bias", "ssm_dt.bias"},
        {"linear_attn.A_log", "ssm_a"}, {"linear_attn.norm.weight", "ssm_norm.weight"},
        {"linear_attn.out_proj.weight", "ssm_out.weight"}, {"mlp.gate_proj.weight", "ffn_gate.weight"},
        {"mlp.up_proj.weight", "ffn_up.weight"}, {"mlp.down_proj.weight", "ffn_down.weight"},
        {"mlp.gate.weight", "ffn_gate_inp.weight"}, {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
        {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
        {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
        {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"}};
    for (size_t j = 0; j < sizeof map / sizeof map[0]; j++)
        if (!strcmp(rest, map[j][0])) return map[j][1];
    return NULL;
}

static void twin_keys(slm_gguf_writer *g, const q35 *q) {
    const char *A = q->moe ? "qwen35moe" : "qwen35";
    char k[96];
#define K(x) (snprintf(k, sizeof k, "%s." x, A), k)
    slm_gguf_set_str(g, "general.architecture", A);
    slm_gguf_set_u32(g, K("embedding_length"), D);
    if (!q->moe) slm_gguf_set_u32(g, K("feed_forward_length"), FFN);
    slm_gguf_set_u32(g, K("block_count"), NL);
    slm_gguf_set_u32(g, K("attention.head_count"), HQ);
    slm_gguf_set_u32(g, K("attention.head_count_kv"), KV);
    slm_gguf_set_u32(g, K("attention.key_length"), HD);
    slm_gguf_set_u32(g, K("attention.value_length"), HD);
    slm_gguf_set_u32(g, K("context_length"), CTX);
    slm_gguf_set_u32(g, K("vocab_size"), V);
    slm_gguf_set_f32(g, K("rope.freq_base"), 1e7f);
    slm_gguf_set_u32(g, K("rope.dimension_count"), HD / 4);
    const int32_t sec[4] = {11, 11, 10, 0};
    slm_gguf_set_arr(g, K("rope.dimension_sections"), SLM_GGUF_I32, sec, 4);
    slm_gguf_set_f32(g, K("attention.layer_norm_rms_epsilon"), 1e-6f);
    slm_gguf_set_u32(g, K("ssm.conv_kernel"), CONV);
    slm_gguf_set_u32(g, K("ssm.state_size"), S);
    slm_gguf_set_u32(g, K("ssm.group_count"), (uint32_t)q->kh);
    slm_gguf_set_u32(g, K("ssm.time_step_rank"), (uint32_t)q->vh);
    slm_gguf_set_u32(g, K("ssm.inner_size"), (uint32_t)(q->vh * S));
    slm_gguf_set_u32(g, K("full_attention_interval"), 4);
    if (q->moe) {
        slm_gguf_set_u32(g, K("expert_count"), NE);
        slm_gguf_set_u32(g, K("expert_used_count"), NK);
        slm_gguf_set_u32(g, K("expert_feed_forward_length"), FE);
        slm_gguf_set_u32(g, K("expert_shared_feed_forward_length"), FS);
    }
#undef K
}

struct q35_w {
    const q35 *q;
    const weights *w;
};

static const float *twin_expert(const void *ctx, int l, int j, int e) {
    const struct q35_w *c = ctx;
    return expert_f(c->q, c->w, l, j, e);
}

static int write_twin(const char *path, const q35 *q, const weights *w) {
    slm_gguf_writer *g = slm_gguf_writer_new();
    twin_keys(g, q);
    void *keep[ST_MAX_TENSORS];
    int nk = 0;
    const int r = q->vh / q->kh, qk = 2 * q->kh * S, cd = qk + q->vh * S;
    const size_t np = strlen(pre(q));
    for (int i = 0; i < w->n; i++) {
        st_item t = w->it[i];
        const char *gn = NULL, *rest = "";
        char buf[64];
        int l = -1;
        if (!strcmp(t.name, "lm_head.weight")) gn = "output.weight";
        else if (strncmp(t.name, pre(q), np)) continue; /* the vision tower, the MTP layer */
        else if (!strcmp(t.name + np, "embed_tokens.weight")) gn = "token_embd.weight";
        else if (!strcmp(t.name + np, "norm.weight")) gn = "output_norm.weight";
        else if (strstr(t.name, ".experts.")) continue; /* hf_twin_experts */
        else {
            l = atoi(t.name + np + 7); /* "layers.N." */
            rest = strchr(t.name + np + 7, '.') + 1;
            const char *to = twin_layer_name(rest);
            CHECKF(to != NULL, "twin: no name for %s", t.name);
            snprintf(buf, sizeof buf, "blk.%d.%s", l, to ? to : "?");
            gn = buf;
        }
        const int64_t rows = t.n_dims == 1 ? 1 : t.shape[0], cols = t.n_dims == 1 ? t.shape[0] : t.shape[t.n_dims - 1];
        float *f = malloc(sizeof(float) * (size_t)(rows * cols));
        memcpy(f, w->f[i], sizeof(float) * (size_t)(rows * cols));
        if (strstr(t.name, "norm.weight") && !strstr(t.name, "linear_attn.norm")) /* Qwen3NextModel: norm.weight + 1 */
            for (int64_t j = 0; j < cols; j++) f[j] += 1.0f;
        if (!strcmp(rest, "linear_attn.A_log"))
            for (int64_t j = 0; j < cols; j++) f[j] = -expf(f[j]);
        if (!strcmp(rest, "linear_attn.conv1d.weight")) { /* squeezed to [channels, K], f32 */
            t.n_dims = 2, t.shape[0] = cd, t.shape[1] = CONV, t.dtype = "F32";
        }
        if (!strcmp(rest, "mlp.gate.weight") || !strcmp(rest, "mlp.shared_expert_gate.weight")) t.dtype = "F32";
        if (r > 1 && !strncmp(rest, "linear_attn.", 12)) { /* _LinearAttentionVReorderBase */
            if (strstr(rest, "in_proj_qkv") || strstr(rest, "conv1d")) reorder(f, rows, cols, qk, q->kh, r, S, 0);
            else if (strstr(rest, "in_proj_z")) reorder(f, rows, cols, 0, q->kh, r, S, 0);
            else if (strstr(rest, "in_proj_a") || strstr(rest, "in_proj_b")) reorder(f, rows, cols, 0, q->kh, r, 1, 0);
            else if (strstr(rest, "A_log") || strstr(rest, "dt_bias")) reorder(f, cols, 1, 0, q->kh, r, 1, 0);
            else if (strstr(rest, "out_proj")) reorder(f, rows, cols, 0, q->kh, r, S, 1);
        }
        hf_twin_add(g, gn, &t, f, keep, &nk);
    }
    if (q->moe) hf_twin_experts(g, q->mat, NL, D, FE, NE, twin_expert, &(struct q35_w){q, w}, keep, &nk);
    return hf_twin_write(g, path, keep, nk);
}

/* ---- checks ---------------------------------------------------------------------- */

static void check_config(const char *name, const q35 *q, const slm_model_config *c) {
    CHECKF(!strcmp(c->arch, q->moe ? "qwen35moe" : "qwen35") && c->dim == D && c->n_layers == NL && c->n_heads == HQ &&
               c->n_kv_heads == KV && c->head_dim == HD && c->vocab_size == V && c->context_len == CTX &&
               c->hidden_dim == (q->moe ? FE : FFN) && c->tied_embeddings == q->tied,
           "%s: sizes (arch %s, ffn %d, tied %d)", name, c->arch, c->hidden_dim, c->tied_embeddings);
    CHECKF(c->recur_interval == 4 && c->ssm_conv == CONV && c->ssm_state == S && c->ssm_k_heads == q->kh &&
               c->ssm_v_heads == q->vh && c->nextn_layers == 1,
           "%s: DeltaNet (interval %d, conv %d, state %d, heads %d / %d, mtp %d)", name, c->recur_interval, c->ssm_conv,
           c->ssm_state, c->ssm_k_heads, c->ssm_v_heads, c->nextn_layers);
    CHECKF(c->rope_neox == 1 && slm_rope_dims(c) == HD / 4 && c->rope_base == 1e7f && c->qk_norm == 1 && c->attn_gate == 1 &&
               c->norm_eps == 1e-6f && c->sliding_window == 0,
           "%s: attention (rope dims %d, base %g, qk_norm %d, gate %d)", name, slm_rope_dims(c), (double)c->rope_base,
           c->qk_norm, c->attn_gate);
    CHECKF(c->n_experts == (q->moe ? NE : 0) && c->n_experts_used == (q->moe ? NK : 0) && c->expert_norm == q->moe &&
               c->shared_ffn == (q->moe ? FS : 0) && c->shared_gate == q->moe,
           "%s: experts %d / %d, norm %d, shared %d gate %d", name, c->n_experts, c->n_experts_used, c->expert_norm,
           c->shared_ffn, c->shared_gate);
}

/* What the loader made of layer 0's DeltaNet and the gains, value by value,
 * against the folder's values read the grouped way: tiled head t is the
 * value head that key head t % kh serves as its (t / kh)-th. */
static void check_made(const char *name, const q35 *q, const slm_model_file *m, const weights *w) {
    char n[128];
    const int kh = q->kh, r = q->vh / q->kh, qk = 2 * kh * S;
#define SRC(x) (snprintf(n, sizeof n, "%slayers.0." x, pre(q)), find_w(w, n))
    const float *alog = SRC("linear_attn.A_log"), *dt = SRC("linear_attn.dt_bias"), *cv = SRC("linear_attn.conv1d.weight"),
                *qkv = SRC("linear_attn.in_proj_qkv.weight"), *out = SRC("linear_attn.out_proj.weight"),
                *g = SRC("input_layernorm.weight"), *sn = SRC("linear_attn.norm.weight");
#undef SRC
    const slm_tensor *ta = slm_model_tensor(m, "blk.0.ssm_a"), *td = slm_model_tensor(m, "blk.0.ssm_dt.bias"),
                     *tc = slm_model_tensor(m, "blk.0.ssm_conv1d.weight"), *tq = slm_model_tensor(m, "blk.0.attn_qkv.weight"),
                     *to = slm_model_tensor(m, "blk.0.ssm_out.weight"), *tg = slm_model_tensor(m, "blk.0.attn_norm.weight"),
                     *ts = slm_model_tensor(m, "blk.0.ssm_norm.weight");
    if (!(alog && dt && cv && qkv && out && g && sn && ta && td && tc && tq && to && tg && ts)) {
        CHECKF(0, "%s: a tensor is missing", name);
        return;
    }
    CHECKF(ta->type == SLM_F32 && td->type == SLM_F32 && tc->type == SLM_F32 && tc->ne[0] == CONV && tg->type == SLM_F32 &&
               ts->type == SLM_F32,
           "%s: made types", name);
    int bad = 0;
    for (int t = 0; t < q->vh; t++) {
        const int src = (t % kh) * r + t / kh;
        float a, b;
        memcpy(&a, (const float *)ta->data + t, 4);
        memcpy(&b, (const float *)td->data + t, 4);
        bad += a != -expf(alog[src]) || b != dt[src];
        for (int k = 0; k < CONV; k++) {
            float c;
            memcpy(&c, (const float *)tc->data + (qk + t * S) * CONV + k, 4);
            bad += c != cv[(qk + src * S) * CONV + k];
        }
        /* row qk + t*S of attn_qkv and column t*S of ssm_out, element 0, as f32 */
        const uint32_t type = tq->type;
        const uint64_t rb = slm_row_bytes(type, D);
        float row[D], orow[256];
        slm_dequantize_row(type, (const uint8_t *)tq->data + (uint64_t)(qk + t * S) * rb, row, D);
        bad += row[0] != qkv[(size_t)(qk + src * S) * D];
        slm_dequantize_row(type, to->data, orow, q->vh * S);
        bad += orow[t * S] != out[src * S];
    }
    for (int i = 0; i < D; i++) {
        float v;
        memcpy(&v, (const float *)tg->data + i, 4);
        bad += v != g[i] + 1.0f;
    }
    for (int i = 0; i < S; i++) {
        float v;
        memcpy(&v, (const float *)ts->data + i, 4);
        bad += v != sn[i];
    }
    CHECKF(bad == 0, "%s: %d made values differ from the folder's", name, bad);
    /* without re-ordering (H_v = H_k) the matrices are the folder's bytes, not copies: the
     * anonymous area (after every shard) starts at the lowest made tensor's data */
    const uint8_t *anon = ta->data;
    for (int l = 0; l < NL; l++)
        for (int j = 0; j < 3 && recurrent(l); j++) {
            snprintf(n, sizeof n, j == 0 ? "blk.%d.ssm_a" : j == 1 ? "blk.%d.ssm_dt.bias" : "blk.%d.ssm_conv1d.weight", l);
            const slm_tensor *x = slm_model_tensor(m, n);
            if (x && (const uint8_t *)x->data < anon) anon = x->data;
        }
    /* re-ordered: made after every shard (above tensors the folder's bytes always hold) */
    const uint8_t *top = NULL;
    const char *const resident[3] = {"token_embd.weight", "blk.3.attn_q.weight", "blk.3.attn_output.weight"};
    for (int j = 0; j < 3; j++) {
        const slm_tensor *x = slm_model_tensor(m, resident[j]);
        if (x && (!top || (const uint8_t *)x->data > top)) top = x->data;
    }
    CHECKF(r == 1 ? (const uint8_t *)tq->data < anon : top && (const uint8_t *)tq->data > top, "%s: attn_qkv %s", name,
           r == 1 ? "copied though no head moves" : "not made after the shards");
}

/* Logits of the folder at every position against its GGUF twin and the reference forward. */
static void check_folder(const char *name, const q35 *q, uint64_t seed) {
    char dir[256], gg[256];
    snprintf(dir, sizeof dir, "hfq_%s", name);
    snprintf(gg, sizeof gg, "hfq_%s.gguf", name);
    weights w;
    make_weights(&w, q, seed);
    if (!write_hf(dir, q, &w, NULL, NULL) || !write_twin(gg, q, &w)) {
        CHECKF(0, "%s: could not write the test files", name);
        free_weights(&w);
        return;
    }
    enum { N = 20 };
    int32_t ids[N];
    g_rng = seed + 1;
    for (int i = 0; i < N; i++) ids[i] = (int32_t)(urand() * V);
    rig a, b;
    const int oka = rig_open(&a, dir, 8, N + 8), okb = oka && rig_open(&b, gg, 8, N + 8);
    if (oka && okb) {
        check_config(name, q, &a.m.cfg);
        slm_model_file raw;
        slm_err err = {0};
        if (slm_model_open(&raw, dir, &err) == SLM_OK) { /* before repacking */
            check_made(name, q, &raw, &w);
            slm_model_close(&raw);
        } else CHECKF(0, "%s: %s", name, err.msg);
        double e_gg = 0, md = 0;
        CHECK(slm_rt_prefill(&a.rt, ids, 5, &err) == SLM_OK && slm_rt_prefill(&b.rt, ids, 5, &err) == SLM_OK);
        for (int p = 4; p < N; p++) {
            if (p > 4) CHECK(slm_rt_decode(&a.rt, ids[p], &err) == SLM_OK && slm_rt_decode(&b.rt, ids[p], &err) == SLM_OK);
            e_gg = fmax(e_gg, rel_err(a.rt.logits, b.rt.logits, V));
            for (int i = 0; i < V; i++) md = fmax(md, fabs((double)a.rt.logits[i] - b.rt.logits[i]));
        }
        const double e_ref = rig_vs_reference(dir, ids, N, 5, 8, 1);
        CHECKF(e_gg < 1e-6 && e_ref < 1e-4, "%s: logits rel err %.3g vs GGUF twin, %.3g vs reference", name, e_gg, e_ref);
        fprintf(stderr, "  %s: vs GGUF twin max |diff| %.3g (%s), vs reference rel err %.2g\n", name, md,
                md == 0 ? "bit for bit" : "not bit for bit", e_ref);
    }
    if (oka) rig_close(&a);
    if (okb) rig_close(&b);
    free_weights(&w);
    st_rm_dir(dir);
    unlink(gg);
}

static const q35 k_dense = {0, 1, 2, 4, "BF16", 2, 0, 0, 0};
static const q35 k_moe = {1, 1, 2, 4, "BF16", 0, 0, 0, 0};

/* Qwen3_5ForConditionalGeneration: 2 key, 4 value heads (re-ordered), BF16, two shards. */
static void test_dense(void) { check_folder("dense", &k_dense, 11); }

/* qwen3_5_text alone, 2 key and 2 value heads (nothing moves: the matrices
 * are pointed at), F32 matrices, tied, layer_types in place of the interval. */
static void test_dense_text(void) {
    const q35 q = {0, 0, 2, 2, "F32", 0, 0, 1, 1};
    check_folder("dense_text", &q, 12);
}

/* Qwen3_5MoeForConditionalGeneration: per-expert tensors, 2 key heads and 8 value heads. */
static void test_moe(void) {
    q35 q = k_moe;
    q.vh = 8;
    check_folder("moe", &q, 13);
}

/* qwen3_5_moe_text: transformers v5's fused experts, F16, shards. */
static void test_moe_fused(void) {
    const q35 q = {1, 0, 2, 4, "F16", 3, 1, 0, 0};
    check_folder("moe_fused", &q, 14);
}

/* ---- refusals ------------------------------------------------------------------- */

/* A folder of q with its config changed (drop, extra) or a tensor changed
 * (tweak: 1 conv taps [cd, 2, K], 2 an A_log of one entry too few, 3 a
 * conv1d bias, 4 in_proj_qkv without its V rows, 5 no dt_bias in layer 1,
 * 6 the safetensors cut short) that slm_model_open refuses. */
static void refuse(const char *name, const q35 *q, const char *drop, const char *extra, int tweak, slm_status want,
                   const char *w1, const char *w2) {
    char dir[256], path[512];
    snprintf(dir, sizeof dir, "hfq_bad_%s", name);
    weights w;
    make_weights(&w, q, 99);
    for (int i = 0; i < w.n; i++) {
        st_item *t = &w.it[i];
        if (strncmp(t->name, pre(q), strlen(pre(q))) || strncmp(t->name + strlen(pre(q)), "layers.1.", 9)) continue;
        const char *rest = t->name + strlen(pre(q)) + 9;
        if (tweak == 1 && !strcmp(rest, "linear_attn.conv1d.weight")) t->shape[1] = 2, t->shape[0] /= 2;
        if (tweak == 2 && !strcmp(rest, "linear_attn.A_log")) t->shape[0] -= 1;
        if (tweak == 3 && !strcmp(rest, "linear_attn.norm.weight")) {
            snprintf(t->name, sizeof t->name, "%slayers.1.linear_attn.conv1d.bias", pre(q));
        }
        if (tweak == 4 && !strcmp(rest, "linear_attn.in_proj_qkv.weight")) t->shape[0] = 2 * q->kh * S;
        if (tweak == 5 && !strcmp(rest, "linear_attn.dt_bias")) snprintf(t->name, sizeof t->name, "unused.dt_bias");
    }
    if (tweak == 5) /* a tensor the family does not have would be refused first: drop it */
        for (int i = 0; i < w.n; i++)
            if (!strcmp(w.it[i].name, "unused.dt_bias")) {
                free(w.f[i]);
                w.it[i] = w.it[w.n - 1], w.f[i] = w.f[w.n - 1], w.n--;
            }
    CHECKF(write_hf(dir, q, &w, drop, extra), "%s: could not write the folder", name);
    if (tweak == 6) {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        size_t len = 0;
        char *b = t_read_file(path, &len);
        CHECK(b && len > 64 && t_write_file(path, b, len - 64));
        free(b);
    }
    expect_folder(dir, want, w1, w2);
    free_weights(&w);
    st_rm_dir(dir);
}

static void test_refused(void) {
    const q35 d = k_dense, m = k_moe;
    q35 t = k_dense;
    t.mm = 0, t.shards = 0;
    refuse("gate", &d, "attn_output_gate", ", \"attn_output_gate\": false", 0, SLM_ERR_UNSUPPORTED,
           "config.json: key 'attn_output_gate'", "output gate");
    refuse("vdim", &d, "linear_value_head_dim", ", \"linear_value_head_dim\": 32", 0, SLM_ERR_UNSUPPORTED,
           "key 'linear_value_head_dim' = 32", "another size");
    refuse("vheads", &d, "linear_num_value_heads", ", \"linear_num_value_heads\": 3", 0, SLM_ERR_FORMAT,
           "key 'linear_num_value_heads' = 3", "multiple");
    refuse("types", &d, "full_attention_interval",
           ", \"layer_types\": [\"linear_attention\", \"full_attention\", \"linear_attention\", \"linear_attention\"]", 0,
           SLM_ERR_UNSUPPORTED, "key 'layer_types': layer 3", "every 2");
    refuse("types_none", &d, "full_attention_interval",
           ", \"layer_types\": [\"linear_attention\", \"linear_attention\", \"linear_attention\", \"linear_attention\"]", 0,
           SLM_ERR_UNSUPPORTED, "key 'layer_types'", "no 'full_attention' layer");
    refuse("types_kind", &d, "full_attention_interval",
           ", \"layer_types\": [\"linear_attention\", \"sliding_attention\", \"linear_attention\", \"full_attention\"]", 0,
           SLM_ERR_UNSUPPORTED, "key 'layer_types': element 1", NULL);
    refuse("interval", &d, NULL,
           ", \"layer_types\": [\"linear_attention\", \"full_attention\", \"linear_attention\", \"full_attention\"]", 0,
           SLM_ERR_FORMAT, "'full_attention_interval' (4) and 'layer_types'", "disagree");
    refuse("rotary", &d, "rope_parameters", ", \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000000, "
           "\"partial_rotary_factor\": 0.1}", 0, SLM_ERR_FORMAT, "key 'partial_rotary_factor': 0.1", "rotated");
    refuse("mrope", &d, "rope_parameters", ", \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000000, "
           "\"mrope_section\": [11, -1, 10]}", 0, SLM_ERR_FORMAT, "key 'rope_parameters': 'mrope_section'", NULL);
    refuse("kv", &d, "num_key_value_heads", NULL, 0, SLM_ERR_FORMAT, "missing required key 'num_key_value_heads'", NULL);
    refuse("text_type", &d, "model_type", ", \"model_type\": \"qwen3_next\"", 0, SLM_ERR_UNSUPPORTED,
           "key 'text_config': model_type 'qwen3_next'", "qwen3_5_text only");
    refuse("topk", &m, NULL, ", \"norm_topk_prob\": false", 0, SLM_ERR_UNSUPPORTED, "key 'norm_topk_prob' = false",
           "renormalizes");
    refuse("dense_layer", &m, "mlp_only_layers", ", \"mlp_only_layers\": [0]", 0, SLM_ERR_UNSUPPORTED,
           "key 'mlp_only_layers'", NULL);
    refuse("experts", &m, "num_experts", NULL, 0, SLM_ERR_FORMAT, "missing required key 'num_experts'", NULL);
    refuse("shared", &m, "shared_expert_intermediate_size", NULL, 0, SLM_ERR_FORMAT,
           "missing required key 'shared_expert_intermediate_size'", NULL);
    refuse("conv_shape", &t, NULL, NULL, 1, SLM_ERR_FORMAT, "hfq_bad_conv_shape/model.safetensors: tensor "
           "'model.layers.1.linear_attn.conv1d.weight'", "[64, 2, 4]");
    refuse("alog_len", &t, NULL, NULL, 2, SLM_ERR_FORMAT, "tensor 'model.layers.1.linear_attn.A_log': f32 [3]",
           "[4] (value heads)");
    refuse("conv_bias", &t, NULL, NULL, 3, SLM_ERR_UNSUPPORTED, "tensor 'model.layers.1.linear_attn.conv1d.bias'",
           "not part of a qwen35 model");
    refuse("qkv_rows", &t, NULL, NULL, 4, SLM_ERR_FORMAT, "tensor 'model.layers.1.linear_attn.in_proj_qkv.weight'",
           "(Q, K and V channels, hidden_size)");
    refuse("no_dt", &t, NULL, NULL, 5, SLM_ERR_FORMAT, "missing tensor 'blk.1.ssm_dt.bias'", NULL);
    refuse("truncated", &t, NULL, NULL, 6, SLM_ERR_FORMAT, "hfq_bad_truncated/model.safetensors", NULL);
}

int main(void) {
    T_RUN(test_dense);
    T_RUN(test_dense_text);
    T_RUN(test_moe);
    T_RUN(test_moe_fused);
    T_RUN(test_refused);
    T_DONE();
}
