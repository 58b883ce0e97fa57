/* Hugging Face Gemma 4 folders (gemma4: Gemma4ForConditionalGeneration with
 * text_config, its text tensors under model.language_model. and vision /
 * audio towers to skip; gemma4_text: Gemma4ForCausalLM), written here with
 * small random weights: the E2B form (per-layer embeddings, KV-shared layers
 * with a double-wide MLP, one KV head, BF16 in shards) and the 26B-A4B form
 * (experts beside the dense MLP as transformers stores them:
 * experts.gate_up_proj [E, 2F, D], experts.down_proj [E, D, F], the router's
 * proj, scale and per_expert_scale; attention_k_eq_v: no v_proj on the
 * global layers; F32, lm_head), and the 31B form (dense, attention_k_eq_v,
 * F16). Each folder is checked against its GGUF
 * twin, written from the same values under the names and keys llama.cpp's
 * converter gives them (this file's own table; the experts as llama.cpp's
 * fused ffn_gate_up_exps / ffn_down_exps stacks, rope_freqs.weight made
 * here from partial_rotary_factor): the config field by field and the
 * logits bit for bit, and both against the double reference. Hostile and
 * unsupported folders are refused with messages naming the file and the
 * key or tensor. */
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
#define ST_MAX_TENSORS 256
#include "st_write.h"
#include "hf_twin.h"

typedef struct g4f {
    const char *type;   /* "gemma4" (text_config, model.language_model.) or "gemma4_text" */
    const char *dt;     /* the matrices' dtype */
    int D, L, H, KV, KVG, hd, ghd, F, wide, ple, shared, period, window, V;
    int k_eq_v, prf4;   /* global layers: V = K; quarters of the pairs rotated */
    int untied, shards;
    int E, K, EF;       /* experts (enable_moe_block) */
    int bad;            /* a hostile folder (see hostile()) */
} g4f;

static int mm(const g4f *s) { return !strcmp(s->type, "gemma4"); }
static int swa(const g4f *s, int l) { return l % s->period < s->period - 1; }
static int own_kv(const g4f *s, int l) { return l < s->L - s->shared; }
static int hd_of(const g4f *s, int l) { return swa(s, l) ? s->hd : s->ghd; }
static int kv_of(const g4f *s, int l) { return !swa(s, l) && s->KVG ? s->KVG : s->KV; }
static int ffn_of(const g4f *s, int l) { return !own_kv(s, l) && s->wide ? 2 * s->F : s->F; }

/* The folder's tensors and, beside each, the GGUF name the converter gives it
 * ("" for a tensor it skips). */
typedef struct g4w {
    weights w;
    char gn[ST_MAX_TENSORS][64];
} g4w;

static float *add(g4w *g, const char *gg, const char *hf, const char *dt, int64_t rows, int64_t cols, float sc, float b) {
    snprintf(g->gn[g->w.n], sizeof g->gn[0], "%s", gg);
    return add_w(&g->w, hf, dt, rows, cols, sc, b);
}

/* Layer l's tensor: hf after the layer prefix, gg after "blk.N.". */
static float *add_l(g4w *g, const g4f *s, int l, const char *gg, const char *hf, const char *dt, int64_t rows,
                    int64_t cols, float sc, float b) {
    char hn[160], gn[64];
    snprintf(hn, sizeof hn, "model.%slayers.%d.%s", mm(s) ? "language_model." : "", l, hf);
    snprintf(gn, sizeof gn, "blk.%d.%s", l, gg);
    return add(g, gn, hn, dt, rows, cols, sc, b);
}

/* A 3-D [E, rows, cols] expert stack (the twin's 3-D ne {cols, rows, E}). */
static void add_stack(g4w *g, const g4f *s, int l, const char *gg, const char *hf, int64_t rows, int64_t cols, float sc) {
    add_l(g, s, l, gg, hf, s->dt, s->E * rows, cols, sc, 0);
    st_item *t = &g->w.it[g->w.n - 1];
    t->n_dims = 3;
    t->shape[0] = s->E;
    t->shape[1] = rows;
    t->shape[2] = cols;
}

static void make_weights(g4w *g, const g4f *s, uint64_t seed) {
    memset(g, 0, sizeof *g);
    g_rng = seed;
    const char *dt = s->dt, *pre = mm(s) ? "model.language_model." : "model.";
    const int D = s->D, P = s->ple, PL = s->ple * s->L;
    char hn[160];
#define TOP(gg, name, d, r, c, sc, b) (snprintf(hn, sizeof hn, "%s%s", pre, name), add(g, gg, hn, d, r, c, sc, b))
    TOP("token_embd.weight", "embed_tokens.weight", dt, s->V, D, 1.0f / sqrtf((float)D), 0);
    if (P) {
        TOP("per_layer_token_embd.weight", "embed_tokens_per_layer.weight", dt, s->V, PL, 1.0f / sqrtf((float)P), 0);
        TOP("per_layer_model_proj.weight", "per_layer_model_projection.weight", dt, PL, D, 1.0f, 0);
        TOP("per_layer_proj_norm.weight", "per_layer_projection_norm.weight", dt, 0, P, 0.2f, 1.0f);
    }
    for (int l = 0; l < s->L; l++) {
        const int h = hd_of(s, l), q = h * s->H, kv = h * kv_of(s, l), F = ffn_of(s, l);
        const float sd = 1.0f / sqrtf((float)D);
        add_l(g, s, l, "attn_norm.weight", "input_layernorm.weight", dt, 0, D, 0.2f, 1.0f);
        add_l(g, s, l, "attn_q.weight", "self_attn.q_proj.weight", dt, q, D, sd, 0);
        /* scores of order 1 (query scale 1: the gains carry it) */
        add_l(g, s, l, "attn_q_norm.weight", "self_attn.q_norm.weight", dt, 0, h, 0.2f / sqrtf((float)h),
              1.0f / sqrtf((float)h));
        if (own_kv(s, l) || s->bad == 12) {
            add_l(g, s, l, "attn_k.weight", "self_attn.k_proj.weight", dt, kv, D, sd, 0);
            add_l(g, s, l, "attn_k_norm.weight", "self_attn.k_norm.weight", dt, 0, h, 0.2f, 1.0f);
            const int v = !(s->k_eq_v && !swa(s, l));
            if (v != (s->bad == 10 && !swa(s, l))) add_l(g, s, l, "attn_v.weight", "self_attn.v_proj.weight", dt, kv, D, sd, 0);
        }
        add_l(g, s, l, "attn_output.weight", "self_attn.o_proj.weight", dt, D, q, 1.0f / sqrtf((float)q), 0);
        add_l(g, s, l, "post_attention_norm.weight", "post_attention_layernorm.weight", dt, 0, D, 0.2f, 1.0f);
        add_l(g, s, l, "ffn_norm.weight", "pre_feedforward_layernorm.weight", dt, 0, D, 0.2f, 1.0f);
        add_l(g, s, l, "ffn_gate.weight", "mlp.gate_proj.weight", dt, F, D, sd, 0);
        add_l(g, s, l, "ffn_up.weight", "mlp.up_proj.weight", dt, F, D, sd, 0);
        add_l(g, s, l, "ffn_down.weight", "mlp.down_proj.weight", dt, D, F, 1.0f / sqrtf((float)F), 0);
        add_l(g, s, l, "post_ffw_norm.weight", "post_feedforward_layernorm.weight", dt, 0, D, 0.2f, 1.0f);
        if (s->E) {
            add_l(g, s, l, "ffn_gate_inp.weight", "router.proj.weight", dt, s->E, D, 2.0f, 0); /* a clear top K */
            add_l(g, s, l, "ffn_gate_inp.scale", "router.scale", dt, 0, D, 0.3f, 1.0f);
            if (s->bad != 14 || l != 1)
                add_l(g, s, l, "ffn_down_exps.scale", "router.per_expert_scale", dt, 0, s->E, 0.3f, 1.0f);
            add_l(g, s, l, "pre_ffw_norm_2.weight", "pre_feedforward_layernorm_2.weight", dt, 0, D, 0.2f, 1.0f);
            add_l(g, s, l, "post_ffw_norm_1.weight", "post_feedforward_layernorm_1.weight", dt, 0, D, 0.2f, 1.0f);
            add_l(g, s, l, "post_ffw_norm_2.weight", "post_feedforward_layernorm_2.weight", dt, 0, D, 0.2f, 1.0f);
            add_stack(g, s, l, "ffn_gate_up_exps.weight", "experts.gate_up_proj", 2 * s->EF, D, sd);
            add_stack(g, s, l, "ffn_down_exps.weight", "experts.down_proj", D, s->EF, 1.0f / sqrtf((float)s->EF));
            if (s->bad == 15 && l == 1) { /* stored [E, in, out] */
                st_item *t = &g->w.it[g->w.n - 1];
                t->shape[1] = s->EF;
                t->shape[2] = D;
            }
        }
        if (P) {
            add_l(g, s, l, "inp_gate.weight", "per_layer_input_gate.weight", dt, P, D, sd, 0);
            add_l(g, s, l, "proj.weight", "per_layer_projection.weight", dt, D, P, 1.0f / sqrtf((float)P), 0);
            add_l(g, s, l, "post_norm.weight", "post_per_layer_input_norm.weight", dt, 0, D, 0.2f, 1.0f);
        }
        if (s->bad != 13 || l != 1) add_l(g, s, l, "layer_output_scale.weight", "layer_scalar", dt, 0, 1, 0.1f, 0.7f);
    }
    TOP("output_norm.weight", "norm.weight", dt, 0, D, 0.2f, 1.0f);
#undef TOP
    if (s->untied) add(g, "output.weight", "lm_head.weight", dt, s->V, D, 1.0f / sqrtf((float)D), 0);
    if (mm(s)) { /* the towers: skipped */
        add(g, "", "model.vision_tower.encoder.layers.0.mlp.up_proj.linear.weight", dt, 8, 8, 1, 0);
        add(g, "", "model.embed_vision.embedding_projection.weight", dt, D, 8, 1, 0);
        add(g, "", "model.audio_tower.layers.0.norm_out.weight", dt, 0, 8, 1, 0);
        add(g, "", "model.embed_audio.embedding_projection.weight", dt, D, 8, 1, 0);
    }
    if (s->bad == 16) add(g, "", "model.vision_tower.patch_embedder.input_proj.weight", dt, 8, 8, 1, 0);
    if (s->bad == 17) add_l(g, s, 0, "", "self_attn.q_proj.bias", dt, 0, s->H * hd_of(s, 0), 1, 0);
}

/* ---- config.json ------------------------------------------------------------------ */

static void write_config(const char *dir, const g4f *s) {
    char o[8192];
    size_t n = 0;
#define P(...) (n += (size_t)snprintf(o + n, sizeof o - n, __VA_ARGS__))
    if (mm(s))
        P("{\"architectures\": [\"%s\"], \"model_type\": \"gemma4\", \"tie_word_embeddings\": %s, \"vision_config\": "
          "{\"model_type\": \"gemma4_vision\", \"hidden_size\": 8}, \"audio_config\": {\"model_type\": \"gemma4_audio\"}, "
          "\"text_config\": {\"model_type\": \"gemma4_text\"", s->bad == 18 ? "Gemma4AssistantForCausalLM" :
          "Gemma4ForConditionalGeneration", s->untied ? "false" : "true");
    else
        P("{\"architectures\": [\"Gemma4ForCausalLM\"], \"model_type\": \"gemma4_text\", \"tie_word_embeddings\": %s",
          s->untied ? "false" : "true");
    P(", \"hidden_size\": %d, \"intermediate_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d, "
      "\"num_key_value_heads\": %d, \"head_dim\": %d, \"global_head_dim\": %d, \"vocab_size\": %d, "
      "\"vocab_size_per_layer_input\": %d, \"max_position_embeddings\": 4096, \"rms_norm_eps\": 1e-06, "
      "\"sliding_window\": %d, \"num_kv_shared_layers\": %d, \"use_double_wide_mlp\": %s, "
      "\"final_logit_softcapping\": 8.0, \"hidden_activation\": \"%s\", \"attention_bias\": false, "
      "\"attention_dropout\": 0.0, \"attention_k_eq_v\": %s, \"use_bidirectional_attention\": %s, \"pad_token_id\": 0, "
      "\"initializer_range\": 0.02, \"use_cache\": true",
      s->D, s->F, s->L, s->H, s->KV, s->hd, s->ghd, s->V, s->V, s->window, s->shared, s->wide ? "true" : "false",
      s->bad == 9 ? "silu" : "gelu_pytorch_tanh", s->k_eq_v ? "true" : "false", s->bad == 7 ? "\"all\"" : "null");
    if (s->bad != 1) P(", \"hidden_size_per_layer_input\": %d", s->ple);
    if (s->KVG || s->bad == 6) P(", \"num_global_key_value_heads\": %d", s->KVG ? s->KVG : s->KV + 1);
    else P(", \"num_global_key_value_heads\": null");
    if (s->bad == 8) P(", \"attn_logit_softcapping\": 50.0");
    P(", \"layer_types\": [");
    for (int l = 0; l < s->L; l++) {
        int sl = swa(s, l);
        if (s->bad == 2 && l == 1) sl = !sl;
        if (s->bad == 3 && l == s->L - 1) sl = 1;
        if (s->bad == 21 && l == 0) sl = 0;
        P("%s\"%s_attention\"", l ? ", " : "", sl ? "sliding" : "full");
    }
    P("], \"rope_parameters\": {\"full_attention\": {\"rope_type\": \"%s\", \"rope_theta\": 1000000.0, "
      "\"partial_rotary_factor\": %g%s}, \"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": 10000.0%s}}",
      s->bad == 4 ? "default" : "proportional", s->prf4 / 4.0, s->bad == 5 ? ", \"factor\": 8.0" : "",
      s->bad == 11 ? ", \"partial_rotary_factor\": 0.5" : "");
    P(", \"enable_moe_block\": %s", s->E || s->bad == 19 ? "true" : "false");
    if (s->E)
        P(", \"num_experts\": %d, \"top_k_experts\": %d, \"moe_intermediate_size\": %d", s->E, s->K, s->EF);
    else P(", \"num_experts\": null, \"top_k_experts\": null, \"moe_intermediate_size\": null");
    if (s->bad == 20) P(", \"num_experts_per_tok\": %d", s->K + 1);
    P(mm(s) ? "}}\n" : "}\n");
#undef P
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    CHECK(t_write_file(path, o, n));
}

static int write_hf(const char *dir, const g4f *s, const g4w *g) {
    st_rm_dir(dir);
    mkdir(dir, 0755);
    write_config(dir, s);
    return st_write_weights(dir, g->w.it, g->w.n, s->shards, 0);
}

/* ---- the GGUF twin ------------------------------------------------------------------ */

/* A 3-D stack as llama.cpp's 3-D tensor ne {cols, rows, E}. */
static void twin_stack(slm_gguf_writer *gw, const char *gn, const st_item *t, float *f, void **keep, int *nk) {
    const uint32_t type = !strcmp(t->dtype, "F32") ? SLM_F32 : !strcmp(t->dtype, "F16") ? SLM_F16 : SLM_BF16;
    const int64_t rows = t->shape[0] * t->shape[1], cols = t->shape[2];
    const uint64_t rb = slm_row_bytes(type, (uint64_t)cols);
    uint8_t *data = malloc((size_t)(rb * (uint64_t)rows));
    for (int64_t r = 0; r < rows; r++) slm_quantize_row(type, f + r * cols, data + (uint64_t)r * rb, cols);
    free(f);
    keep[(*nk)++] = data;
    const int64_t ne[3] = {cols, t->shape[1], t->shape[0]};
    slm_gguf_add_tensor(gw, gn, type, 3, ne, data, rb * (uint64_t)rows);
}

/* The keys and tensors llama.cpp's converter writes for the folder. */
static int write_twin(const char *path, const g4f *s, const g4w *g) {
    slm_gguf_writer *gw = slm_gguf_writer_new();
    const int L = s->L;
    uint8_t pat[64];
    uint32_t kvl[64], ffl[64];
    for (int l = 0; l < L; l++) pat[l] = (uint8_t)swa(s, l), kvl[l] = (uint32_t)kv_of(s, l), ffl[l] = (uint32_t)ffn_of(s, l);
    slm_gguf_set_str(gw, "general.architecture", "gemma4");
    slm_gguf_set_u32(gw, "gemma4.block_count", (uint32_t)L);
    slm_gguf_set_u32(gw, "gemma4.context_length", 4096);
    slm_gguf_set_u32(gw, "gemma4.embedding_length", (uint32_t)s->D);
    slm_gguf_set_u32(gw, "gemma4.embedding_length_per_layer_input", (uint32_t)s->ple);
    if (s->wide) slm_gguf_set_arr(gw, "gemma4.feed_forward_length", SLM_GGUF_U32, ffl, (uint64_t)L);
    else slm_gguf_set_u32(gw, "gemma4.feed_forward_length", (uint32_t)s->F);
    slm_gguf_set_u32(gw, "gemma4.attention.head_count", (uint32_t)s->H);
    if (s->KVG) slm_gguf_set_arr(gw, "gemma4.attention.head_count_kv", SLM_GGUF_U32, kvl, (uint64_t)L);
    else slm_gguf_set_u32(gw, "gemma4.attention.head_count_kv", (uint32_t)s->KV);
    slm_gguf_set_f32(gw, "gemma4.rope.freq_base", 1000000.0f);
    slm_gguf_set_f32(gw, "gemma4.rope.freq_base_swa", 10000.0f);
    slm_gguf_set_f32(gw, "gemma4.attention.layer_norm_rms_epsilon", 1e-6f);
    slm_gguf_set_u32(gw, "gemma4.attention.key_length", (uint32_t)s->ghd);
    slm_gguf_set_u32(gw, "gemma4.attention.value_length", (uint32_t)s->ghd);
    slm_gguf_set_u32(gw, "gemma4.attention.key_length_swa", (uint32_t)s->hd);
    slm_gguf_set_u32(gw, "gemma4.attention.value_length_swa", (uint32_t)s->hd);
    slm_gguf_set_u32(gw, "gemma4.rope.dimension_count", (uint32_t)s->ghd);
    slm_gguf_set_u32(gw, "gemma4.rope.dimension_count_swa", (uint32_t)s->hd);
    slm_gguf_set_u32(gw, "gemma4.attention.sliding_window", (uint32_t)s->window);
    slm_gguf_set_arr(gw, "gemma4.attention.sliding_window_pattern", SLM_GGUF_BOOL, pat, (uint64_t)L);
    slm_gguf_set_u32(gw, "gemma4.attention.shared_kv_layers", (uint32_t)s->shared);
    slm_gguf_set_f32(gw, "gemma4.final_logit_softcapping", 8.0f);
    if (s->E) {
        slm_gguf_set_u32(gw, "gemma4.expert_count", (uint32_t)s->E);
        slm_gguf_set_u32(gw, "gemma4.expert_used_count", (uint32_t)s->K);
        slm_gguf_set_u32(gw, "gemma4.expert_feed_forward_length", (uint32_t)s->EF);
    }
    void *keep[ST_MAX_TENSORS + 1];
    int nk = 0;
    float rf[512]; /* proportional RoPE: the rotated pairs 1, the others 1e30 (generate_extra_tensors) */
    for (int i = 0; i < s->ghd / 2; i++) rf[i] = i < s->ghd * s->prf4 / 8 ? 1.0f : 1e30f;
    const int64_t ne1 = s->ghd / 2;
    slm_gguf_add_tensor(gw, "rope_freqs.weight", SLM_F32, 1, &ne1, rf, (uint64_t)ne1 * 4);
    for (int i = 0; i < g->w.n; i++) {
        const st_item *t = &g->w.it[i];
        if (!g->gn[i][0]) continue;
        if (!s->untied && !strcmp(g->gn[i], "output.weight")) continue;
        const size_t cnt = (size_t)(t->n_dims == 1 ? t->shape[0] : t->n_dims == 2 ? t->shape[0] * t->shape[1]
                                                                                 : t->shape[0] * t->shape[1] * t->shape[2]);
        float *f = malloc(cnt * sizeof(float));
        memcpy(f, t->f, cnt * sizeof(float));
        if (t->n_dims == 3) twin_stack(gw, g->gn[i], t, f, keep, &nk);
        else hf_twin_add(gw, g->gn[i], t, f, keep, &nk);
    }
    return hf_twin_write(gw, path, keep, nk);
}

/* ---- the checks ------------------------------------------------------------------------ */

/* Every config field the two loaders set, compared. */
static void check_config(const char *name, const slm_model_config *a, const slm_model_config *b) {
#define EQ(f) CHECKF(a->f == b->f, "%s: config %s: folder %g, twin %g", name, #f, (double)a->f, (double)b->f)
    EQ(dim); EQ(hidden_dim); EQ(n_layers); EQ(n_heads); EQ(n_kv_heads); EQ(vocab_size); EQ(context_len); EQ(head_dim);
    EQ(rope_base); EQ(norm_eps); EQ(tied_embeddings); EQ(rope_neox); EQ(rope_dims); EQ(rope_freqs); EQ(rope_scale);
    EQ(sliding_window); EQ(swa_pattern); EQ(rope_base_swa); EQ(rope_scale_swa); EQ(final_softcap); EQ(attn_softcap);
    EQ(embed_scale); EQ(attn_scale); EQ(qk_norm); EQ(post_norms); EQ(ffn_gelu); EQ(head_dim_swa); EQ(n_kv_heads_swa);
    EQ(rope_dims_swa); EQ(kv_shared); EQ(hidden_dim_shared); EQ(ple_dim); EQ(v_norm); EQ(rope_freqs_global);
    EQ(layer_scale); EQ(n_experts); EQ(n_experts_used); EQ(expert_norm); EQ(dense_ffn); EQ(moe_dense);
    EQ(expert_down_scale); EQ(qkv_bias); EQ(rope_attn_factor);
#undef EQ
    CHECKF(!strcmp(a->arch, b->arch), "%s: arch %s / %s", name, a->arch, b->arch);
}

static void check_folder(const char *name, const g4f *s, uint64_t seed) {
    char dir[256], gg[256];
    snprintf(dir, sizeof dir, "hfg4_%s", name);
    snprintf(gg, sizeof gg, "hfg4_%s.gguf", name);
    g4w *g = calloc(1, sizeof *g);
    make_weights(g, s, seed);
    if (!write_hf(dir, s, g) || !write_twin(gg, s, g)) {
        CHECKF(0, "%s: could not write the test files", name);
        free_weights(&g->w);
        free(g);
        return;
    }
    enum { N = 24 };
    int32_t ids[N];
    g_rng = seed + 1;
    for (int i = 0; i < N; i++) ids[i] = (int32_t)(urand() * s->V);
    rig a, b;
    const int oka = rig_open(&a, dir, 8, N + 8), okb = oka && rig_open(&b, gg, 8, N + 8);
    if (okb) {
        check_config(name, &a.m.cfg, &b.m.cfg);
        const int V = s->V;
        float *ref = malloc(sizeof(float) * (size_t)N * V);
        CHECK(ref_forward_ctx(&a.m, ids, N, ref, a.c.kv_capacity));
        slm_err err = {0};
        double e_ref = 0;
        int same = 1;
        CHECK(slm_rt_prefill(&a.rt, ids, 5, &err) == SLM_OK);
        CHECK(slm_rt_prefill(&b.rt, ids, 5, &err) == SLM_OK);
        for (int p = 4; p < N; p++) {
            if (p > 4) CHECK(slm_rt_decode(&a.rt, ids[p], &err) == SLM_OK && slm_rt_decode(&b.rt, ids[p], &err) == SLM_OK);
            e_ref = fmax(e_ref, rel_err(a.rt.logits, ref + (size_t)p * V, V));
            same &= !memcmp(a.rt.logits, b.rt.logits, sizeof(float) * (size_t)V);
        }
        CHECKF(same, "%s: the folder's logits differ from its GGUF twin's", name);
        CHECKF(e_ref < 1e-4, "%s: logits rel err %.3g vs the reference", name, e_ref);
        fprintf(stderr, "  %s: logits bit for bit as the GGUF twin's: %s; rel err %.2g vs the reference\n", name,
                same ? "yes" : "NO", e_ref);
        free(ref);
    }
    if (okb) rig_close(&b);
    if (oka) rig_close(&a);
    free_weights(&g->w);
    free(g);
    st_rm_dir(dir);
    unlink(gg);
}

/* E2B's form: text in a Gemma4ForConditionalGeneration folder, per-layer
 * embeddings, the last three layers KV-shared with a double-wide MLP (the
 * last layer with K/V of each kind their source, as in E2B), one KV head,
 * global heads twice the window's with a quarter of the pairs rotated,
 * window 6 on two of three layers; BF16 in three shards, tied */
static const g4f k_e2b = {.type = "gemma4", .dt = "BF16", .D = 64, .L = 6, .H = 2, .KV = 1, .hd = 32, .ghd = 64, .F = 96,
                          .wide = 1, .ple = 32, .shared = 3, .period = 3, .window = 6, .V = 160, .prf4 = 1, .shards = 3};
/* 26B-A4B's form as Gemma4ForCausalLM: 8 experts of width 32 (2 a row)
 * beside the dense MLP, per-expert scales, attention_k_eq_v with one
 * global KV head, half the pairs rotated, window 5 on two of three layers;
 * F32, lm_head */
static const g4f k_26b = {.type = "gemma4_text", .dt = "F32", .D = 64, .L = 6, .H = 4, .KV = 2, .KVG = 1, .hd = 16,
                          .ghd = 32, .F = 96, .period = 3, .window = 5, .V = 160, .k_eq_v = 1, .prf4 = 2, .untied = 1,
                          .E = 8, .K = 2, .EF = 32};

static void test_e2b(void) { check_folder("e2b", &k_e2b, 41); }
static void test_26b(void) { check_folder("26b", &k_26b, 42); }

/* The same 26B form as Gemma4ForConditionalGeneration in BF16 shards. */
static void test_26b_mm(void) {
    g4f s = k_26b;
    s.type = "gemma4";
    s.dt = "BF16";
    s.shards = 2;
    s.untied = 0;
    check_folder("26b_mm", &s, 43);
}

/* 31B's form: dense, attention_k_eq_v, F16, lm_head */
static void test_31b(void) {
    g4f s = k_26b;
    s.E = s.K = s.EF = 0;
    s.dt = "F16";
    check_folder("31b", &s, 44);
}

/* ---- refused ----------------------------------------------------------------------- */

static void hostile_one(const char *name, g4f s, int bad, slm_status want, const char *w1, const char *w2) {
    char dir[256];
    snprintf(dir, sizeof dir, "hfg4_bad_%s", name);
    s.bad = bad;
    g4w *g = calloc(1, sizeof *g);
    make_weights(g, &s, 7);
    if (write_hf(dir, &s, g)) expect_folder(dir, want, w1, w2);
    free_weights(&g->w);
    free(g);
    st_rm_dir(dir);
}

static void test_hostile(void) {
    const slm_status U = SLM_ERR_UNSUPPORTED, F = SLM_ERR_FORMAT;
    hostile_one("ple", k_e2b, 1, F, "config.json", "'hidden_size_per_layer_input'");
    hostile_one("period", k_e2b, 2, U, "'layer_types'", "staticlm runs the window");
    hostile_one("last", k_e2b, 3, U, "'layer_types'", "last layer");
    hostile_one("ropetype", k_e2b, 4, U, "'rope_parameters'", "proportional");
    hostile_one("ropefactor", k_e2b, 5, U, "'rope_parameters'", "'factor'");
    hostile_one("kvg", k_e2b, 6, U, "'num_global_key_value_heads'", "attention_k_eq_v");
    hostile_one("bidir", k_e2b, 7, U, "'use_bidirectional_attention'", "all");
    hostile_one("softcap", k_e2b, 8, U, "config.json", "'attn_logit_softcapping'");
    hostile_one("act", k_e2b, 9, U, "'hidden_activation'", "silu");
    hostile_one("nov", k_e2b, 10, F, "model.language_model.layers.2.self_attn.v_proj.weight", "missing");
    hostile_one("veqk", k_26b, 10, F, "model.layers.2.self_attn.v_proj.weight", "attention_k_eq_v");
    hostile_one("swaprf", k_e2b, 11, U, "'sliding_attention'", "'partial_rotary_factor'");
    hostile_one("sharedk", k_e2b, 12, F, "layers.3.self_attn.k_proj.weight", "num_kv_shared_layers");
    hostile_one("scalar", k_e2b, 13, F, "model.language_model.layers.1.layer_scalar", "missing");
    hostile_one("pes", k_26b, 14, F, "model.layers.1.router.per_expert_scale", "missing");
    hostile_one("transposed", k_26b, 15, U, "model.layers.1.experts.down_proj", "transposed");
    hostile_one("tower", k_26b, 16, U, "model.vision_tower.patch_embedder", "not part of a gemma4 model");
    hostile_one("bias", k_26b, 17, U, "model.layers.0.self_attn.q_proj.bias", "not part of a gemma4 model");
    hostile_one("assistant", k_e2b, 18, U, "'architectures'", "Assistant");
    hostile_one("moekeys", k_e2b, 19, F, "config.json", "'num_experts'");
    hostile_one("alias", k_26b, 20, F, "'num_experts_per_tok'", "disagree");
    hostile_one("first", k_e2b, 21, U, "'layer_types': layer 1", "(here 1)");
}

/* A shard cut short: refused naming it. */
static void test_truncated(void) {
    const char *dir = "hfg4_trunc";
    g4w *g = calloc(1, sizeof *g);
    make_weights(g, &k_26b, 9);
    if (write_hf(dir, &k_26b, g)) {
        char path[256];
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        size_t n = 0;
        char *b = t_read_file(path, &n);
        CHECK(b && n > 100 && t_write_file(path, b, n - 100));
        free(b);
        expect_folder(dir, SLM_ERR_FORMAT, "hfg4_trunc/model.safetensors", NULL);
    }
    free_weights(&g->w);
    free(g);
    st_rm_dir(dir);
}

int main(void) {
    T_RUN(test_e2b);
    T_RUN(test_26b);
    T_RUN(test_26b_mm);
    T_RUN(test_31b);
    T_RUN(test_hostile);
    T_RUN(test_truncated);
    T_DONE();
}
