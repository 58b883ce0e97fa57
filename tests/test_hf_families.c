/* Hugging Face folders of the qwen3, smollm3, gemma2, gemma3 (gemma3_text,
 * and the text part of Gemma3ForConditionalGeneration), phi3, olmo2
 * (OLMo 2, and Olmo 3 with its window and YaRN), granite and exaone4
 * (EXAONE 4.0, at 64 layers with its window and global layers without
 * RoPE) families and the mixtures of experts qwen3_moe, qwen2_moe (with its
 * gated shared expert and Q/K/V biases), mixtral and olmoe (per-expert
 * tensors, or transformers v5's fused ones; these against
 * their GGUF twin only, the reference forward having no experts), written
 * here with tiny random weights (BF16, F16, F32; one file or shards), loaded
 * with slm_model_open(DIR) and run through the compiled programs; logits at
 * every position against the double-precision reference forward and
 * against the same weights written as a GGUF the way llama.cpp's converter
 * would (gemma gains 1 + w, phi3's fused matrices kept fused, LongRoPE
 * factors as tensors, llama3's rope_freqs, granite's Q/K rows permuted, the
 * family keys). Malformed configs of each family
 * are refused with messages that name the file and the key; every
 * allocation failure while opening a folder is refused cleanly. */
#include <math.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/dtype.h"
#include "compiler/compiler.h"
#include "format/gguf.h"
#include "format/model.h"
#include "ref_forward.h"
#include "runtime/runtime.h"
#include "t.h"
#include "rig.h"
#define ST_MAX_TENSORS 720 /* exaone4 at 64 layers: 11 tensors a layer */
#include "st_write.h"
#include "hf_twin.h"
#include "staticlm.h"

/* ---- a family's folder ------------------------------------------------------ */

typedef struct fam {
    const char *type;   /* model_type */
    int D, F, L, H, KV, hd, V, ctx;
    const char *mat, *vec; /* dtypes of matrices and of norm vectors */
    int shards, pad;    /* as test_hf.c: shards + index; data area at 8k + pad */
    int untied;         /* 1: lm_head.weight written */
    int window;         /* sliding_window (gemma2/3, olmo3, exaone4: written, read at 64 layers only) */
    const char *swp;    /* exaone4: sliding_window_pattern as a string ("LLLG") */
    int pattern;        /* gemma3 sliding_window_pattern (0: not written) */
    int layer_types;    /* 1: layer_types written (from window / pattern) */
    int qpas;           /* query_pre_attn_scalar (gemma) */
    float attn_cap, final_cap; /* gemma2 soft-caps (written) */
    float linear;       /* rope_scaling linear factor (> 1) */
    float llama3;       /* rope_scaling llama3 factor (> 1), over an original context of llama3_orig */
    int llama3_orig;
    float theta;
    int rope_dims;      /* phi3: partial_rotary_factor = rope_dims / hd */
    int orig_ctx;       /* phi3: LongRoPE with this original context */
    float yarn;         /* rope_scaling yarn factor (> 1), with original context yarn_orig */
    int yarn_orig;
    int multimodal;     /* gemma3: 1 language_model.model.X, 2 model.language_model.X */
    int sparse;         /* gemma3 multimodal: only the keys Google's configs give (defaults for the rest) */
    float mul[4];       /* granite: embedding_multiplier, attention_multiplier, residual_multiplier,
                           logits_scaling (0: not written) */
    int gguf;           /* 1: also compared with a GGUF twin */
    int E, K;           /* MoE (qwen3_moe, mixtral, olmoe): experts, experts per token; F is their width */
    int topk_norm;      /* norm_topk_prob: 0 not written (false), 1 false, 2 true */
    int S;              /* qwen2_moe: the shared expert's width (shared_expert_intermediate_size) */
    int fused_exps;     /* 1: the experts as transformers v5 stores them (mlp.experts.gate_up_proj / down_proj) */
    const char *twin;   /* the GGUF twin's architecture when not the folder's own */
    int differ;         /* 1: the twin computes otherwise: its logits must differ */
} fam;

static int is(const fam *s, const char *t) { return !strcmp(s->type, t); }
static int gemma(const fam *s) { return is(s, "gemma2") || is(s, "gemma3") || is(s, "gemma3_text"); }
static int gemma3(const fam *s) { return is(s, "gemma3") || is(s, "gemma3_text"); }
static int phi3(const fam *s) { return is(s, "phi3"); }
static int olmo(const fam *s) { return is(s, "olmo2") || is(s, "olmo3"); }
static int granite(const fam *s) { return is(s, "granite"); }
static int exaone4(const fam *s) { return is(s, "exaone4"); }
/* no pre-norms: the norms after attention and FFN only */
static int post_only(const fam *s) { return olmo(s) || exaone4(s); }
static int moe(const fam *s) { return s->E > 0; }
static int mixtral(const fam *s) { return is(s, "mixtral"); }
static int qwen2_moe(const fam *s) { return is(s, "qwen2_moe"); }
/* Q/K norms over whole q_dim / kv_dim rows */
static int whole_qk(const fam *s) { return olmo(s) || is(s, "olmoe"); }
/* Q/K norms of one head */
static int head_qk(const fam *s) { return is(s, "qwen3") || is(s, "qwen3_moe") || gemma3(s) || exaone4(s); }
/* the architecture the folder loads as */
static const char *arch_of(const fam *s) {
    return gemma3(s) ? "gemma3" : olmo(s) ? "olmo2" : is(s, "qwen3_moe") ? "qwen3moe" : qwen2_moe(s) ? "qwen2moe"
           : mixtral(s) ? "llama" : s->type;
}
/* the top-k routing weights renormalized: mixtral always, the others as norm_topk_prob says */
static int topk_norm(const fam *s) { return mixtral(s) || s->topk_norm == 2; }
static const char *const granite_keys[4] = {"embedding_multiplier", "attention_multiplier", "residual_multiplier",
                                            "logits_scaling"};

/* What the config must say for granite's multiplier i: the value written,
 * else GraniteConfig's 1.0; stored as 0 when 1, but for the query scale
 * (i = 1: 0 would mean 1/sqrt(head_dim)). */
static float granite_want(const fam *s, int i) {
    const float v = s->mul[i] != 0.0f ? s->mul[i] : 1.0f;
    return v == 1.0f && i != 1 ? 0.0f : v;
}

/* The text model's prefix: "model." or a multimodal one. */
static const char *prefix(const fam *s) {
    return s->multimodal == 1 ? "language_model.model." : s->multimodal == 2 ? "model.language_model." : "model.";
}

/* An MoE layer's router and experts: mlp.gate (mixtral: block_sparse_moe.gate)
 * and per expert mlp.experts.E.{gate,up,down}_proj (mixtral:
 * block_sparse_moe.experts.E.w1, w3, w2); or transformers v5's names, the
 * router mlp.gate and the fused mlp.experts.gate_up_proj [E, 2F, D] (each
 * expert's gate rows, then its up rows) and down_proj [E, D, F], written
 * 2-D here ([E * 2F, D], [E * D, F]) and made 3-D by fuse_shapes. */
static void add_experts(weights *w, const fam *s, const char *pre, int l, float sd, float sh) {
    static const char *const hf[3] = {"gate_proj", "up_proj", "down_proj"}, *const mx[3] = {"w1", "w3", "w2"};
    char n[128];
    snprintf(n, sizeof n, "%slayers.%d.%s.gate.weight", pre, l, mixtral(s) && !s->fused_exps ? "block_sparse_moe" : "mlp");
    add_w(w, n, s->mat, s->E, s->D, sd, 0.0f);
    if (s->fused_exps) {
        snprintf(n, sizeof n, "%slayers.%d.mlp.experts.gate_up_proj", pre, l);
        add_w(w, n, s->mat, (int64_t)s->E * 2 * s->F, s->D, sd, 0.0f);
        snprintf(n, sizeof n, "%slayers.%d.mlp.experts.down_proj", pre, l);
        add_w(w, n, s->mat, (int64_t)s->E * s->D, s->F, sh, 0.0f);
        return;
    }
    for (int e = 0; e < s->E; e++)
        for (int j = 0; j < 3; j++) {
            if (mixtral(s)) snprintf(n, sizeof n, "%slayers.%d.block_sparse_moe.experts.%d.%s.weight", pre, l, e, mx[j]);
            else snprintf(n, sizeof n, "%slayers.%d.mlp.experts.%d.%s.weight", pre, l, e, hf[j]);
            add_w(w, n, s->mat, j == 2 ? s->D : s->F, j == 2 ? s->F : s->D, j == 2 ? sh : sd, 0.0f);
        }
}

/* qwen2_moe's shared expert mlp.shared_expert.{gate,up,down}_proj and its
 * gate mlp.shared_expert_gate [1, hidden]. */
static void add_shared(weights *w, const fam *s, const char *pre, int l, float sd) {
    static const char *const part[3] = {"gate_proj", "up_proj", "down_proj"};
    char n[96];
    for (int j = 0; j < 3; j++) {
        snprintf(n, sizeof n, "%slayers.%d.mlp.shared_expert.%s.weight", pre, l, part[j]);
        add_w(w, n, s->mat, j == 2 ? s->D : s->S, j == 2 ? s->S : s->D, j == 2 ? 1.0f / sqrtf((float)s->S) : sd, 0.0f);
    }
    snprintf(n, sizeof n, "%slayers.%d.mlp.shared_expert_gate.weight", pre, l);
    add_w(w, n, s->mat, 1, s->D, 2.0f * sd, 0.0f);
}

static void make_weights(weights *w, const fam *s, uint64_t seed) {
    g_rng = seed;
    memset(w, 0, sizeof *w);
    const int qd = s->hd * s->H, kvd = s->hd * s->KV;
    const float sd = 1.0f / sqrtf((float)s->D), sh = 1.0f / sqrtf((float)s->F), sq = 1.0f / sqrtf((float)qd);
    /* gemma's gains are stored as w around 0 (applied as 1 + w); the others around 1 */
    const float nb = gemma(s) ? 0.0f : 1.0f;
    char n[128];
    const char *pre = prefix(s);
    if (s->multimodal) { /* a vision tower and projector, ignored */
        add_w(w, s->multimodal == 1 ? "vision_tower.vision_model.embeddings.patch_embedding.bias"
                                    : "model.vision_tower.vision_model.embeddings.patch_embedding.bias",
              "F32", 0, 8, 1.0f, 0.0f);
        add_w(w, s->multimodal == 1 ? "multi_modal_projector.mm_input_projection_weight"
                                    : "model.multi_modal_projector.mm_input_projection_weight",
              s->mat, 8, 8, 1.0f, 0.0f);
    }
    snprintf(n, sizeof n, "%sembed_tokens.weight", pre);
    add_w(w, n, s->mat, s->V, s->D, 1.0f, 0.0f);
    for (int l = 0; l < s->L; l++) {
#define NM(x) (snprintf(n, sizeof n, "%slayers.%d." x, pre, l), n)
        if (!post_only(s)) add_w(w, NM("input_layernorm.weight"), s->vec, 0, s->D, 0.1f, nb);
        if (phi3(s)) {
            add_w(w, NM("self_attn.qkv_proj.weight"), s->mat, qd + 2 * kvd, s->D, sd, 0.0f);
        } else {
            add_w(w, NM("self_attn.q_proj.weight"), s->mat, qd, s->D, sd, 0.0f);
            add_w(w, NM("self_attn.k_proj.weight"), s->mat, kvd, s->D, sd, 0.0f);
            add_w(w, NM("self_attn.v_proj.weight"), s->mat, kvd, s->D, sd, 0.0f);
        }
        if (qwen2_moe(s)) { /* Q/K/V biases, always on */
            add_w(w, NM("self_attn.q_proj.bias"), s->vec, 0, qd, 0.2f, 0.0f);
            add_w(w, NM("self_attn.k_proj.bias"), s->vec, 0, kvd, 0.2f, 0.0f);
            add_w(w, NM("self_attn.v_proj.bias"), s->vec, 0, kvd, 0.2f, 0.0f);
        }
        if (head_qk(s) || whole_qk(s)) { /* olmo2, olmoe: over whole rows (q_dim, kv_dim) */
            add_w(w, NM("self_attn.q_norm.weight"), s->vec, 0, whole_qk(s) ? qd : s->hd, 0.2f, nb);
            add_w(w, NM("self_attn.k_norm.weight"), s->vec, 0, whole_qk(s) ? kvd : s->hd, 0.2f, nb);
        }
        add_w(w, NM("self_attn.o_proj.weight"), s->mat, s->D, qd, sq, 0.0f);
        add_w(w, NM("post_attention_layernorm.weight"), s->vec, 0, s->D, 0.1f, nb);
        if (gemma(s)) add_w(w, NM("pre_feedforward_layernorm.weight"), s->vec, 0, s->D, 0.1f, nb);
        if (gemma(s) || post_only(s)) add_w(w, NM("post_feedforward_layernorm.weight"), s->vec, 0, s->D, 0.1f, nb);
        if (qwen2_moe(s)) add_shared(w, s, pre, l, sd);
        if (moe(s)) {
            add_experts(w, s, pre, l, sd, sh);
        } else if (phi3(s)) {
            add_w(w, NM("mlp.gate_up_proj.weight"), s->mat, 2 * s->F, s->D, sd, 0.0f);
        } else {
            add_w(w, NM("mlp.gate_proj.weight"), s->mat, s->F, s->D, sd, 0.0f);
            add_w(w, NM("mlp.up_proj.weight"), s->mat, s->F, s->D, sd, 0.0f);
        }
        if (!moe(s)) add_w(w, NM("mlp.down_proj.weight"), s->mat, s->D, s->F, sh, 0.0f);
#undef NM
    }
    snprintf(n, sizeof n, "%snorm.weight", pre);
    add_w(w, n, s->vec, 0, s->D, 0.1f, nb);
    if (s->untied) add_w(w, s->multimodal == 1 ? "language_model.lm_head.weight" : "lm_head.weight", s->mat, s->V, s->D,
                         2.0f * sd, 0.0f);
}

/* The phi3 attention factor, as transformers and llama.cpp's converter compute it. */
static double longrope_attn(const fam *s) {
    double sc = (double)s->ctx / s->orig_ctx;
    return sc > 1.0 ? sqrt(1.0 + log(sc) / log((double)s->orig_ctx)) : 1.0;
}
static double long_f(int i) { return 1.0 + 0.5 * i; }
static double short_f(int i) { return 1.0 + 0.05 * i; }

/* 1 when the config says layer l slides (gemma2: even layers; gemma3:
 * l % p < p - 1; olmo3: l % 4 < 3; exaone4: as its pattern string, else
 * l % 4 < 3). */
static int cfg_slides(const fam *s, int l) {
    if (!s->window) return 0;
    if (mixtral(s)) return 1; /* as mistral: every layer */
    if (exaone4(s) && s->swp) return s->swp[(size_t)l % strlen(s->swp)] == 'L';
    const int p = is(s, "gemma2") ? 2 : is(s, "olmo3") || exaone4(s) ? 4 : s->pattern ? s->pattern : 6;
    return l % p < p - 1;
}

/* exaone4: the window runs at 64 layers only (llama.cpp's rule) */
static int runs_window(const fam *s) { return s->window && (!exaone4(s) || s->L == 64); }

/* 1 when layer l runs with the window. */
static int layer_slides(const fam *s, int l) { return runs_window(s) && cfg_slides(s, l); }

/* llama3's rope_freqs factor of pair i, as llama.cpp's converter computes it (float32) */
static float llama3_f(const fam *s, int i) {
    const float freq = 1.0f / powf(s->theta, (float)(2 * i) / (float)s->hd), wavelen = 6.2831853071795865f / freq;
    const float old = (float)s->llama3_orig, lo_wl = old / 1.0f, hi_wl = old / 4.0f;
    if (wavelen < hi_wl) return 1.0f;
    if (wavelen > lo_wl) return s->llama3;
    const float smooth = (old / wavelen - 1.0f) / (4.0f - 1.0f);
    return 1.0f / ((1.0f - smooth) / s->llama3 + smooth);
}

/* The text model's keys (text_config for the multimodal one), at o. */
static int text_keys(char *o, size_t cap, const fam *s) {
    int n = 0;
#define P(...) (n += snprintf(o + n, cap - (size_t)n, __VA_ARGS__))
    /* qwen3_moe: intermediate_size is the dense width (unused: every layer is sparse), the experts' moe_intermediate_size */
    P("\"model_type\": \"%s\", \"hidden_size\": %d, \"intermediate_size\": %d, \"num_hidden_layers\": %d",
      s->multimodal ? "gemma3_text" : s->type, s->D, is(s, "qwen3_moe") || qwen2_moe(s) ? 3 * s->F : s->F, s->L);
    if (s->sparse) {
        P(", \"sliding_window\": %d}", s->window);
        return n;
    }
    P(", \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d, \"vocab_size\": %d", s->H, s->KV,
      s->hd, s->V);
    P(", \"max_position_embeddings\": %d, \"rope_theta\": %.1f, \"rms_norm_eps\": 1e-06", s->ctx, (double)s->theta);
    P(", \"tie_word_embeddings\": %s, \"torch_dtype\": \"bfloat16\", \"attention_bias\": false",
      s->untied ? "false" : "true");
    if (gemma(s)) {
        P(", \"hidden_activation\": \"gelu_pytorch_tanh\", \"hidden_act\": \"gelu_pytorch_tanh\"");
        P(", \"query_pre_attn_scalar\": %d, \"sliding_window\": %d", s->qpas, s->window);
    } else {
        P(", \"hidden_act\": \"silu\"");
    }
    if (is(s, "gemma2"))
        P(", \"attn_logit_softcapping\": %.1f, \"final_logit_softcapping\": %.1f", (double)s->attn_cap,
          (double)s->final_cap);
    if (gemma3(s))
        P(", \"attn_logit_softcapping\": null, \"final_logit_softcapping\": null, \"rope_local_base_freq\": 10000.0");
    if (gemma3(s) && s->pattern) P(", \"sliding_window_pattern\": %d", s->pattern);
    if (is(s, "olmo3")) P(", \"sliding_window\": %d", s->window);
    if (exaone4(s)) {
        if (s->window) P(", \"sliding_window\": %d", s->window);
        else P(", \"sliding_window\": null");
        if (s->swp) P(", \"sliding_window_pattern\": \"%s\"", s->swp);
    }
    for (int i = 0; granite(s) && i < 4; i++)
        if (s->mul[i] != 0.0f) P(", \"%s\": %.9g", granite_keys[i], (double)s->mul[i]);
    if (granite(s)) P(", \"mlp_bias\": false, \"attention_dropout\": 0.0");
    if (s->layer_types) {
        P(", \"layer_types\": [");
        for (int l = 0; l < s->L; l++) P("%s\"%s\"", l ? ", " : "", cfg_slides(s, l) ? "sliding_attention" : "full_attention");
        P("]");
    }
    if (is(s, "qwen3")) P(", \"use_sliding_window\": false, \"sliding_window\": null, \"max_window_layers\": %d", s->L);
    if (is(s, "smollm3")) { /* as SmolLM3-3B's config: 1 = the layer rotates, every fourth does not */
        P(", \"use_sliding_window\": false, \"sliding_window\": null, \"no_rope_layer_interval\": 4, \"no_rope_layers\": [");
        for (int l = 0; l < s->L; l++) P("%s%d", l ? ", " : "", (l + 1) % 4 != 0);
        P("]");
    }
    if (moe(s)) { /* the keys of Qwen3-30B-A3B's, Mixtral-8x7B's and OLMoE-1B-7B's configs */
        P(", \"%s\": %d, \"num_experts_per_tok\": %d", mixtral(s) ? "num_local_experts" : "num_experts", s->E, s->K);
        if (s->topk_norm) P(", \"norm_topk_prob\": %s", s->topk_norm == 2 ? "true" : "false");
        P(", \"output_router_logits\": false, \"router_aux_loss_coef\": 0.001");
    }
    if (is(s, "qwen3_moe"))
        P(", \"moe_intermediate_size\": %d, \"decoder_sparse_step\": 1, \"mlp_only_layers\": [], \"use_sliding_window\": "
          "false, \"sliding_window\": null, \"max_window_layers\": %d", s->F, s->L);
    if (qwen2_moe(s)) /* Qwen1.5-MoE-A2.7B's keys (a window that use_sliding_window leaves off) */
        P(", \"moe_intermediate_size\": %d, \"shared_expert_intermediate_size\": %d, \"decoder_sparse_step\": 1, "
          "\"use_sliding_window\": false, \"sliding_window\": 32768, \"max_window_layers\": 21", s->F, s->S);
    if (mixtral(s)) {
        if (s->window) P(", \"sliding_window\": %d", s->window);
        else P(", \"sliding_window\": null");
        P(", \"router_jitter_noise\": 0.0");
    }
    if (is(s, "olmoe")) P(", \"clip_qkv\": null");
    if (s->linear > 1.0f) P(", \"rope_scaling\": {\"factor\": %.1f, \"rope_type\": \"linear\"}", (double)s->linear);
    if (s->llama3 > 1.0f) /* as EXAONE 4.0 32B's */
        P(", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": %.1f, \"low_freq_factor\": 1.0, "
          "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": %d}", (double)s->llama3, s->llama3_orig);
    if (s->yarn > 1.0f) /* as Qwen3's model card says to add for long contexts */
        P(", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": %.1f, \"original_max_position_embeddings\": %d}",
          (double)s->yarn, s->yarn_orig);
    if (phi3(s)) {
        P(", \"sliding_window\": 2047, \"partial_rotary_factor\": %.17g, \"resid_pdrop\": 0.0",
          (double)s->rope_dims / s->hd);
        if (s->orig_ctx) {
            P(", \"original_max_position_embeddings\": %d, \"rope_scaling\": {\"type\": \"longrope\", \"long_factor\": [",
              s->orig_ctx);
            for (int i = 0; i < s->rope_dims / 2; i++) P("%s%.17g", i ? ", " : "", long_f(i));
            P("], \"short_factor\": [");
            for (int i = 0; i < s->rope_dims / 2; i++) P("%s%.17g", i ? ", " : "", short_f(i));
            P("]}");
        }
    }
    P("}");
#undef P
    return n;
}

static void write_config(const char *dir, const fam *s) {
    char path[512], buf[8192];
    int n;
    if (s->multimodal) {
        n = snprintf(buf, sizeof buf, "{\"architectures\": [\"Gemma3ForConditionalGeneration\"], \"model_type\": "
                     "\"gemma3\", \"mm_tokens_per_image\": 256, \"vision_config\": {\"model_type\": \"siglip_vision_model\", "
                     "\"hidden_size\": 8}, \"text_config\": {");
        n += text_keys(buf + n, sizeof buf - (size_t)n, s);
        n += snprintf(buf + n, sizeof buf - (size_t)n, "}\n");
    } else {
        n = snprintf(buf, sizeof buf, "{\"architectures\": [\"X\"], ");
        n += text_keys(buf + n, sizeof buf - (size_t)n, s);
        n += snprintf(buf + n, sizeof buf - (size_t)n, "\n");
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    t_write_file(path, buf, (size_t)n);
}

/* transformers v5's fused experts are 3-D: in each of the folder's
 * safetensors headers, the [E * R, C] of every mlp.experts.gate_up_proj /
 * down_proj becomes [E, R, C] (the data stays; the header is padded again
 * as the writer pads it). 1 if done. */
static int fuse_shapes(const char *dir, const fam *s) {
    int ok = 1;
    for (int k = 0; k < (s->shards ? s->shards : 1) && ok; k++) {
        char path[512];
        if (s->shards) snprintf(path, sizeof path, "%s/model-%05d-of-%05d.safetensors", dir, k + 1, s->shards);
        else snprintf(path, sizeof path, "%s/model.safetensors", dir);
        size_t n = 0;
        uint8_t *b = (uint8_t *)t_read_file(path, &n);
        uint64_t hl = 0;
        for (int i = 7; b && n >= 8 && i >= 0; i--) hl = hl << 8 | b[i];
        if (!b || n < 8 || hl > n - 8) {
            free(b);
            return 0;
        }
        const char *h = (const char *)b + 8, *end = h + hl;
        size_t cap = hl + 4096, o = 0;
        char *nh = malloc(cap);
        while (h < end) { /* copy up to the next fused tensor's shape, then the shape made 3-D */
            const char *a = NULL;
            for (const char *q = h; q < end && !a; q++)
                if (!strncmp(q, "experts.gate_up_proj\"", 21) || !strncmp(q, "experts.down_proj\"", 18)) a = q;
            const char *sh = a ? strstr(a, "\"shape\":[") : NULL;
            long long r = 0, c = 0;
            if (!sh || sh >= end || sscanf(sh + 9, "%lld,%lld]", &r, &c) != 2 || r % s->E) {
                memcpy(nh + o, h, (size_t)(end - h));
                o += (size_t)(end - h);
                break;
            }
            memcpy(nh + o, h, (size_t)(sh + 9 - h));
            o += (size_t)(sh + 9 - h);
            o += (size_t)snprintf(nh + o, cap - o, "%d,%lld,%lld]", s->E, r / s->E, c);
            h = strchr(sh, ']') + 1;
        }
        while (o && nh[o - 1] == ' ') o--;
        while ((8 + o) % 8 != (size_t)s->pad) nh[o++] = ' ';
        uint8_t *out = malloc(8 + o + (n - 8 - hl));
        for (int i = 0; i < 8; i++) out[i] = (uint8_t)((uint64_t)o >> (8 * i));
        memcpy(out + 8, nh, o);
        memcpy(out + 8 + o, b + 8 + hl, n - 8 - hl);
        ok = t_write_file(path, out, 8 + o + (n - 8 - hl));
        free(out);
        free(nh);
        free(b);
    }
    return ok;
}

static int write_hf(const char *dir, const fam *s, const weights *w) {
    st_rm_dir(dir);
    mkdir(dir, 0755);
    write_config(dir, s);
    return st_write_weights(dir, w->it, w->n, s->shards, s->pad) && (!s->fused_exps || fuse_shapes(dir, s));
}

/* ---- the GGUF twin ------------------------------------------------------------ */

/* The GGUF name llama.cpp's converter gives an HF tensor (after the text
 * prefix); NULL for the vision tensors. */
static const char *twin_name(const fam *s, const char *hf, char *out, size_t cap) {
    const char *pre = prefix(s);
    if (!strcmp(hf, "lm_head.weight") || !strcmp(hf, "language_model.lm_head.weight")) return "output.weight";
    if (strncmp(hf, pre, strlen(pre))) return NULL;
    hf += strlen(pre);
    if (!strcmp(hf, "embed_tokens.weight")) return "token_embd.weight";
    if (!strcmp(hf, "norm.weight")) return "output_norm.weight";
    int l = atoi(hf + 7); /* "layers.N." */
    const char *rest = strchr(hf + 7, '.') + 1;
    static const char *const map[][2] = {
        {"input_layernorm.weight", "attn_norm"}, {"self_attn.q_proj.weight", "attn_q"},
        {"self_attn.k_proj.weight", "attn_k"}, {"self_attn.v_proj.weight", "attn_v"},
        {"self_attn.qkv_proj.weight", "attn_qkv"}, {"self_attn.q_norm.weight", "attn_q_norm"},
        {"self_attn.k_norm.weight", "attn_k_norm"}, {"self_attn.o_proj.weight", "attn_output"},
        {"pre_feedforward_layernorm.weight", "ffn_norm"}, {"post_feedforward_layernorm.weight", "post_ffw_norm"},
        {"mlp.gate_proj.weight", "ffn_gate"}, {"mlp.up_proj.weight", "ffn_up"}, {"mlp.gate_up_proj.weight", "ffn_up"},
        {"mlp.down_proj.weight", "ffn_down"}, {"mlp.gate.weight", "ffn_gate_inp"},
        {"block_sparse_moe.gate.weight", "ffn_gate_inp"}, {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp"},
        {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp"}, {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp"},
        {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp"}};
    const char *to = NULL;
    if (!strncmp(rest, "self_attn.", 10) && strstr(rest, "_proj.bias")) { /* qwen2_moe's Q/K/V biases */
        snprintf(out, cap, "blk.%d.attn_%c.bias", l, rest[10]);
        return out;
    }
    if (!strcmp(rest, "post_attention_layernorm.weight"))
        to = gemma(s) || post_only(s) ? "post_attention_norm" : "ffn_norm";
    for (size_t j = 0; !to && j < sizeof map / sizeof map[0]; j++)
        if (!strcmp(rest, map[j][0])) to = map[j][1];
    snprintf(out, cap, "blk.%d.%s.weight", l, to ? to : "?");
    return out;
}

/* An expert's matrix (j: 0 gate, 1 up, 2 down) of layer l as the folder
 * holds it: its own tensor, or its rows of v5's fused ones. */
static const float *expert_f(const fam *s, const weights *w, int l, int j, int e) {
    static const char *const hf[3] = {"gate_proj", "up_proj", "down_proj"}, *const mx[3] = {"w1", "w3", "w2"};
    char n[128];
    if (s->fused_exps) snprintf(n, sizeof n, "%slayers.%d.mlp.experts.%s", prefix(s), l, j == 2 ? "down_proj" : "gate_up_proj");
    else if (mixtral(s)) snprintf(n, sizeof n, "%slayers.%d.block_sparse_moe.experts.%d.%s.weight", prefix(s), l, e, mx[j]);
    else snprintf(n, sizeof n, "%slayers.%d.mlp.experts.%d.%s.weight", prefix(s), l, e, hf[j]);
    for (int i = 0; i < w->n; i++)
        if (!strcmp(w->it[i].name, n)) {
            if (!s->fused_exps) return w->f[i];
            return w->f[i] + (j == 2 ? (size_t)e * s->D * s->F : ((size_t)e * 2 + (size_t)j) * s->F * s->D);
        }
    return NULL;
}

struct fam_w {
    const fam *s;
    const weights *w;
};

static const float *twin_expert(const void *ctx, int l, int j, int e) {
    const struct fam_w *c = ctx;
    return expert_f(c->s, c->w, l, j, e);
}

static int write_gguf(const char *path, const fam *s, const weights *w) {
    const char *A = s->twin ? s->twin : arch_of(s);
    slm_gguf_writer *g = slm_gguf_writer_new();
    char k[96];
#define K(x) (snprintf(k, sizeof k, "%s." x, A), k)
    slm_gguf_set_str(g, "general.architecture", A);
    slm_gguf_set_u32(g, K("embedding_length"), (uint32_t)s->D);
    /* qwen3moe: the dense width (the config's intermediate_size) and the experts' own */
    slm_gguf_set_u32(g, K("feed_forward_length"),
                     (uint32_t)((!strcmp(A, "qwen3moe") || !strcmp(A, "qwen2moe")) && (is(s, "qwen3_moe") || qwen2_moe(s))
                                    ? 3 * s->F : s->F));
    if (moe(s)) { /* as llama.cpp's converter writes them */
        slm_gguf_set_u32(g, K("expert_count"), (uint32_t)s->E);
        slm_gguf_set_u32(g, K("expert_used_count"), (uint32_t)s->K);
        if (!strcmp(A, "qwen3moe") || !strcmp(A, "qwen2moe"))
            slm_gguf_set_u32(g, K("expert_feed_forward_length"), (uint32_t)s->F);
        if (!strcmp(A, "qwen2moe")) slm_gguf_set_u32(g, K("expert_shared_feed_forward_length"), (uint32_t)s->S);
    }
    slm_gguf_set_u32(g, K("block_count"), (uint32_t)s->L);
    slm_gguf_set_u32(g, K("attention.head_count"), (uint32_t)s->H);
    slm_gguf_set_u32(g, K("attention.head_count_kv"), (uint32_t)s->KV);
    slm_gguf_set_u32(g, K("attention.key_length"), (uint32_t)s->hd);
    slm_gguf_set_u32(g, K("attention.value_length"), (uint32_t)s->hd);
    slm_gguf_set_u32(g, K("context_length"), (uint32_t)s->ctx);
    slm_gguf_set_u32(g, K("vocab_size"), (uint32_t)s->V);
    slm_gguf_set_f32(g, K("rope.freq_base"), s->theta);
    slm_gguf_set_f32(g, K("attention.layer_norm_rms_epsilon"), 1e-6f);
    if (s->window) slm_gguf_set_u32(g, K("attention.sliding_window"), (uint32_t)s->window);
    if (gemma3(s)) {
        slm_gguf_set_u32(g, K("attention.sliding_window_pattern"), (uint32_t)(s->pattern ? s->pattern : 6));
        slm_gguf_set_f32(g, K("rope.freq_base_swa"), 10000.0f);
    }
    if ((is(s, "olmo3") && s->window) || (exaone4(s) && s->window && (s->layer_types || s->swp))) {
        /* the converter's per-layer list (true: sliding) from layer_types or,
         * for exaone4, the pattern string; written at any depth */
        uint8_t pat[64];
        for (int l = 0; l < s->L && l < 64; l++) pat[l] = (uint8_t)cfg_slides(s, l);
        slm_gguf_set_arr(g, K("attention.sliding_window_pattern"), SLM_GGUF_BOOL, pat, (uint64_t)s->L);
    }
    if (is(s, "gemma2")) {
        slm_gguf_set_f32(g, K("attn_logit_softcapping"), s->attn_cap);
        slm_gguf_set_f32(g, K("final_logit_softcapping"), s->final_cap);
    }
    if (s->linear > 1.0f) {
        slm_gguf_set_str(g, K("rope.scaling.type"), "linear");
        slm_gguf_set_f32(g, K("rope.scaling.factor"), s->linear);
    }
    if (s->yarn > 1.0f) { /* what llama.cpp's converter writes for it */
        slm_gguf_set_str(g, K("rope.scaling.type"), "yarn");
        slm_gguf_set_f32(g, K("rope.scaling.factor"), s->yarn);
        slm_gguf_set_u32(g, K("rope.scaling.original_context_length"), (uint32_t)s->yarn_orig);
    }
    if (phi3(s)) slm_gguf_set_u32(g, K("rope.dimension_count"), (uint32_t)s->rope_dims);
    if (granite(s)) { /* the converter's keys, each written when the config gives it */
        static const char *const gk[4] = {"granite.embedding_scale", "granite.attention.scale", "granite.residual_scale",
                                          "granite.logit_scale"};
        for (int i = 0; i < 4; i++)
            if (s->mul[i] != 0.0f) slm_gguf_set_f32(g, gk[i], s->mul[i]);
    }
    float *lf = NULL, *sf = NULL, *rf = NULL;
    if (s->llama3 > 1.0f) { /* the converter's rope_freqs (exaone4 computes it as llama does) */
        const int h = s->hd / 2;
        rf = malloc(sizeof(float) * (size_t)h);
        for (int i = 0; i < h; i++) rf[i] = llama3_f(s, i);
        int64_t ne[1] = {h};
        slm_gguf_add_tensor(g, "rope_freqs.weight", SLM_F32, 1, ne, rf, sizeof(float) * (uint64_t)h);
    }
    if (s->orig_ctx) {
        slm_gguf_set_u32(g, K("rope.scaling.original_context_length"), (uint32_t)s->orig_ctx);
        slm_gguf_set_f32(g, K("rope.scaling.attn_factor"), (float)longrope_attn(s));
        const int h = s->rope_dims / 2;
        lf = malloc(sizeof(float) * (size_t)h);
        sf = malloc(sizeof(float) * (size_t)h);
        for (int i = 0; i < h; i++) lf[i] = (float)long_f(i), sf[i] = (float)short_f(i);
        int64_t ne[1] = {h};
        slm_gguf_add_tensor(g, "rope_factors_long.weight", SLM_F32, 1, ne, lf, sizeof(float) * (uint64_t)h);
        slm_gguf_add_tensor(g, "rope_factors_short.weight", SLM_F32, 1, ne, sf, sizeof(float) * (uint64_t)h);
    }
#undef K
    void *keep[ST_MAX_TENSORS];
    int nk = 0;
    for (int i = 0; i < w->n; i++) {
        const st_item *t = &w->it[i];
        char buf[64];
        if (moe(s) && strstr(t->name, ".experts.")) continue; /* hf_twin_experts */
        st_item g32;
        if (strstr(t->name, "shared_expert_gate")) { /* the converter keeps this one f32 */
            g32 = *t;
            g32.dtype = "F32";
            t = &g32;
        }
        const char *gn = twin_name(s, t->name, buf, sizeof buf);
        if (!gn) continue;
        int64_t rows = t->n_dims == 2 ? t->shape[0] : 1, cols = t->n_dims == 2 ? t->shape[1] : t->shape[0];
        float *f = malloc(sizeof(float) * (size_t)(rows * cols));
        memcpy(f, t->f, sizeof(float) * (size_t)(rows * cols));
        if (t->n_dims == 1 && gemma(s)) /* the converter's 1 + w */
            for (int64_t j = 0; j < cols; j++) f[j] += 1.0f;
        const int isq = strstr(t->name, "q_proj") != NULL, isk = strstr(t->name, "k_proj") != NULL;
        if ((granite(s) || !strcmp(A, "llama")) && (isq || isk)) /* as llama (mixtral): row h*hd + 2i + j <- h*hd + j*hd/2 + i (GGUF rotates pairs) */
            for (int h = 0; h < (isq ? s->H : s->KV); h++)
                for (int i2 = 0; i2 < s->hd / 2; i2++)
                    for (int j = 0; j < 2; j++)
                        memcpy(f + ((size_t)h * s->hd + 2 * i2 + j) * (size_t)cols,
                               t->f + ((size_t)h * s->hd + (size_t)j * s->hd / 2 + i2) * (size_t)cols,
                               sizeof(float) * (size_t)cols);
        hf_twin_add(g, gn, t, f, keep, &nk);
    }
    if (moe(s)) hf_twin_experts(g, s->mat, s->L, s->D, s->F, s->E, twin_expert, &(struct fam_w){s, w}, keep, &nk);
    const int ok = hf_twin_write(g, path, keep, nk);
    free(lf);
    free(sf);
    free(rf);
    return ok;
}

/* ---- running ------------------------------------------------------------------- */


/* The config the folder must give. */
static void check_config(const char *name, const fam *s, const rig *a) {
    const slm_model_config *c = &a->m.cfg;
    const int g = gemma(s), g3 = gemma3(s), o = olmo(s), e4 = exaone4(s);
    CHECKF(!strcmp(c->arch, arch_of(s)) && c->dim == s->D && c->hidden_dim == s->F && c->n_layers == s->L &&
               c->n_heads == s->H && c->n_kv_heads == s->KV && c->head_dim == s->hd && c->vocab_size == s->V &&
               c->context_len == s->ctx && c->rope_neox == 1 && c->tied_embeddings == !s->untied,
           "%s: sizes not as written (arch %s, head_dim %d, vocab %d, ctx %d)", name, c->arch, c->head_dim,
           c->vocab_size, c->context_len);
    CHECKF(c->qk_norm == (whole_qk(s) ? 2 : head_qk(s)) && c->post_norms == (g || o || e4) && c->ffn_gelu == g &&
               c->no_pre_norms == (o || e4) && c->norm_eps == 1e-6f,
           "%s: family flags (qk_norm %d, post_norms %d, no_pre_norms %d, eps %g)", name, c->qk_norm, c->post_norms,
           c->no_pre_norms, (double)c->norm_eps);
    CHECKF(c->embed_scale == (g ? sqrtf((float)s->D) : granite(s) ? granite_want(s, 0) : 0.0f), "%s: embed_scale %g",
           name, (double)c->embed_scale);
    CHECKF(g ? fabsf(c->attn_scale - 1.0f / sqrtf((float)s->qpas)) < 1e-7f
             : c->attn_scale == (granite(s) ? granite_want(s, 1) : 0.0f),
           "%s: attn_scale %g", name, (double)c->attn_scale);
    CHECKF(c->residual_scale == (granite(s) ? granite_want(s, 2) : 0.0f) &&
               c->logit_scale == (granite(s) ? granite_want(s, 3) : 0.0f),
           "%s: residual_scale %g, logit_scale %g", name, (double)c->residual_scale, (double)c->logit_scale);
    CHECKF(c->sliding_window == (runs_window(s) ? s->window : 0), "%s: sliding_window %d", name, c->sliding_window);
    for (int l = 0; l < s->L; l++) CHECKF(slm_layer_swa(c, l) == layer_slides(s, l), "%s: layer %d window", name, l);
    CHECKF(c->attn_softcap == (is(s, "gemma2") ? s->attn_cap : 0.0f) &&
               c->final_softcap == (is(s, "gemma2") ? s->final_cap : 0.0f),
           "%s: soft-caps %g %g", name, (double)c->attn_softcap, (double)c->final_softcap);
    CHECKF(c->rope_base == s->theta &&
               c->rope_scale == (s->linear > 1.0f ? s->linear : s->yarn > 1.0f ? s->yarn : 1.0f), "%s: rope %g x %g", name,
           (double)c->rope_base, (double)c->rope_scale);
    /* the sliding layers' RoPE: gemma3's own base; olmo3's the global base, both unscaled */
    const int local = (g3 || is(s, "olmo3")) && s->window;
    CHECKF(c->rope_base_swa == (!local ? 0.0f : g3 ? 10000.0f : s->theta) && c->rope_scale_swa == (local ? 1.0f : 0.0f),
           "%s: local rope %g x %g", name, (double)c->rope_base_swa, (double)c->rope_scale_swa);
    CHECKF(slm_rope_dims(c) == (phi3(s) ? s->rope_dims : s->hd), "%s: rope dims %d", name, slm_rope_dims(c));
    CHECKF(c->rope_long == (s->orig_ctx ? 2 : 0) && c->rope_orig_ctx == (s->orig_ctx ? s->orig_ctx : s->yarn_orig) &&
               fabs(c->rope_attn_factor - (s->orig_ctx ? longrope_attn(s) : s->yarn > 1.0f ? 1 + 0.1 * log(s->yarn) : 0.0)) < 1e-6,
           "%s: LongRoPE / YaRN %d %d %g", name, c->rope_long, c->rope_orig_ctx, (double)c->rope_attn_factor);
    CHECKF(c->rope_yarn == (s->yarn > 1.0f) && (!c->rope_yarn || (c->yarn_beta_fast == 32.0f && c->yarn_beta_slow == 1.0f &&
                                                                 c->yarn_ext_factor == 1.0f)),
           "%s: YaRN %d", name, c->rope_yarn);
    /* smollm3, and exaone4 at 64 layers: every fourth layer without RoPE */
    CHECKF(c->nope_step == (is(s, "smollm3") || (e4 && s->L == 64) ? 4 : 0), "%s: nope_step %d", name, c->nope_step);
    for (int l = 0; l < s->L; l++)
        CHECKF(slm_layer_rope(c, l) == !((is(s, "smollm3") || (e4 && s->L == 64)) && l % 4 == 3), "%s: layer %d RoPE",
               name, l);
    CHECKF(c->rope_freqs == (s->llama3 > 1.0f), "%s: rope_freqs %d", name, c->rope_freqs);
    CHECKF(c->n_experts == s->E && c->n_experts_used == (moe(s) ? s->K : 0) && c->expert_norm == (moe(s) && topk_norm(s)),
           "%s: experts %d, used %d, expert_norm %d", name, c->n_experts, c->n_experts_used, c->expert_norm);
    CHECKF(c->shared_ffn == s->S && c->shared_gate == (s->S > 0) && (!qwen2_moe(s) || c->qkv_bias == 1),
           "%s: shared expert %d, gate %d, qkv_bias %d", name, c->shared_ffn, c->shared_gate, c->qkv_bias);
    CHECK(a->m.kind == SLM_MODEL_HF && a->m.gguf == NULL);
}

/* What the loader converted: gemma's gains 1 + w in f32 (inside the
 * mapping); phi3's parts pointing into the fused bytes. */
static void check_tensors(const char *name, const fam *s, const rig *a, const weights *w) {
    const slm_model_file *m = &a->m;
    char hn[128];
    snprintf(hn, sizeof hn, "%slayers.1.post_attention_layernorm.weight", prefix(s));
    const float *src = NULL;
    for (int i = 0; i < w->n; i++)
        if (!strcmp(w->it[i].name, hn)) src = w->f[i];
    const slm_tensor *t =
        slm_model_tensor(m, gemma(s) || post_only(s) ? "blk.1.post_attention_norm.weight" : "blk.1.ffn_norm.weight");
    CHECKF(src && t && t->type == SLM_F32 && t->ne[0] == s->D && (const uint8_t *)t->data >= (const uint8_t *)m->map.data &&
               (const uint8_t *)t->data + t->nbytes <= (const uint8_t *)m->map.data + m->map.size,
           "%s: norm tensor", name);
    for (int i = 0; src && t && i < s->D; i++) {
        float v;
        memcpy(&v, (const float *)t->data + i, 4);
        CHECKF(v == src[i] + (gemma(s) ? 1.0f : 0.0f), "%s: gain %d = %g, stored %g", name, i, (double)v, (double)src[i]);
    }
    if (post_only(s)) { /* olmo2's Q/K norms over whole rows, exaone4's per head; no pre-norms, so no
                           ffn_norm (and no attn_norm) */
        const slm_tensor *qn = slm_model_tensor(m, "blk.1.attn_q_norm.weight"),
                         *kn = slm_model_tensor(m, "blk.1.attn_k_norm.weight"),
                         *pf = slm_model_tensor(m, "blk.1.post_ffw_norm.weight");
        const int qw = olmo(s) ? s->H * s->hd : s->hd, kw = olmo(s) ? s->KV * s->hd : s->hd;
        CHECKF(qn && kn && pf && qn->ne[0] == qw && kn->ne[0] == kw && pf->ne[0] == s->D &&
                   !slm_model_tensor(m, "blk.1.ffn_norm.weight") && !slm_model_tensor(m, "blk.1.attn_norm.weight"),
               "%s: %s norms", name, s->type);
    }
    if (phi3(s)) {
        const slm_tensor *q = slm_model_tensor(m, "blk.0.attn_q.weight"), *k = slm_model_tensor(m, "blk.0.attn_k.weight"),
                         *v = slm_model_tensor(m, "blk.0.attn_v.weight"), *gt = slm_model_tensor(m, "blk.0.ffn_gate.weight"),
                         *up = slm_model_tensor(m, "blk.0.ffn_up.weight");
        const uint64_t rb = slm_row_bytes(q ? q->type : SLM_F16, (uint64_t)s->D);
        CHECKF(q && k && v && gt && up && q->ne[1] == s->H * s->hd && k->ne[1] == s->KV * s->hd &&
                   (const uint8_t *)k->data == (const uint8_t *)q->data + rb * (uint64_t)(s->H * s->hd) &&
                   (const uint8_t *)v->data == (const uint8_t *)k->data + rb * (uint64_t)(s->KV * s->hd) &&
                   (const uint8_t *)up->data == (const uint8_t *)gt->data + rb * (uint64_t)s->F && up->ne[1] == s->F,
               "%s: fused parts", name);
        CHECKF(!slm_model_tensor(m, "blk.0.attn_qkv.weight"), "%s: the fused name stays out", name);
    }
    if (moe(s)) { /* the router, every expert in the table (as repacked); check_expert_views: as loaded */
        const slm_tensor *r = slm_model_tensor(m, "blk.1.ffn_gate_inp.weight");
        CHECKF(r && r->ne[0] == s->D && r->ne[1] == s->E && !slm_model_tensor(m, "blk.1.ffn_gate.weight") &&
                   !slm_model_tensor(m, "blk.1.ffn_down.weight") && m->experts,
               "%s: router", name);
        for (int e = 0; r && m->experts && e < s->E; e++) {
            const slm_tensor *gt = slm_model_expert(m, 1, 0, e), *up = slm_model_expert(m, 1, 1, e),
                             *dn = slm_model_expert(m, 1, 2, e);
            char n[64];
            snprintf(n, sizeof n, "blk.1.ffn_up.%d.weight", e);
            CHECKF(gt && up && dn && up == slm_model_tensor(m, n) && gt->n_dims == 2 && gt->ne[0] == s->D &&
                       gt->ne[1] == s->F && up->ne[0] == s->D && up->ne[1] == s->F && dn->ne[0] == s->F &&
                       dn->ne[1] == s->D,
                   "%s: expert %d", name, e);
        }
    }
    if (qwen2_moe(s)) { /* the shared expert and its gate, a one-row matrix */
        const slm_tensor *gt = slm_model_tensor(m, "blk.1.ffn_gate_shexp.weight"),
                         *dn = slm_model_tensor(m, "blk.1.ffn_down_shexp.weight"),
                         *gi = slm_model_tensor(m, "blk.1.ffn_gate_inp_shexp.weight");
        CHECKF(gt && dn && gi && gt->ne[0] == s->D && gt->ne[1] == s->S && dn->ne[0] == s->S && dn->ne[1] == s->D &&
                   gi->ne[0] == s->D && gi->ne[1] == 1 && slm_model_tensor(m, "blk.1.attn_v.bias"),
               "%s: shared expert", name);
    }
}

/* The experts as the folder loads them (before any repacking): in the
 * mapping, in the folder's dtype, and for v5's fused tensors their rows:
 * expert e's gate at rows 2eF of gate_up_proj, its up F rows on, its down
 * at rows eD of down_proj. */
static void check_expert_views(const char *name, const char *dir, const fam *s) {
    slm_model_file m;
    slm_err err = {0};
    if (slm_model_open(&m, dir, &err) != SLM_OK) {
        CHECKF(0, "%s: %s", name, err.msg);
        return;
    }
    const uint32_t type = !strcmp(s->mat, "F32") ? SLM_F32 : !strcmp(s->mat, "F16") ? SLM_F16 : SLM_BF16;
    const uint64_t rb = slm_row_bytes(type, (uint64_t)s->D), rbd = slm_row_bytes(type, (uint64_t)s->F);
    const uint8_t *lo = m.map.data, *hi = lo + m.map.size;
    for (int l = 0; l < s->L; l++)
        for (int e = 0; e < s->E; e++) {
            const slm_tensor *gt = slm_model_expert(&m, l, 0, e), *up = slm_model_expert(&m, l, 1, e),
                             *dn = slm_model_expert(&m, l, 2, e), *g0 = slm_model_expert(&m, l, 0, 0),
                             *d0 = slm_model_expert(&m, l, 2, 0);
            CHECKF(gt->type == type && up->type == type && dn->type == type && (const uint8_t *)gt->data >= lo &&
                       (const uint8_t *)gt->data + gt->nbytes <= hi && gt->nbytes == (uint64_t)s->F * rb &&
                       dn->nbytes == (uint64_t)s->D * rbd,
                   "%s: layer %d expert %d: type or bytes", name, l, e);
            if (s->fused_exps)
                CHECKF((const uint8_t *)gt->data == (const uint8_t *)g0->data + (uint64_t)e * 2 * (uint64_t)s->F * rb &&
                           (const uint8_t *)up->data == (const uint8_t *)gt->data + (uint64_t)s->F * rb &&
                           (const uint8_t *)dn->data == (const uint8_t *)d0->data + (uint64_t)e * (uint64_t)s->D * rbd,
                       "%s: layer %d expert %d: not the rows of the fused tensors", name, l, e);
        }
    slm_model_close(&m);
}

/* Logits of the folder at every position against the reference forward,
 * and against its GGUF twin. */
static void check_family(const char *name, const fam *s, uint64_t seed) {
    char dir[256], gg[256];
    snprintf(dir, sizeof dir, "hff_%s", name);
    snprintf(gg, sizeof gg, "hff_%s.gguf", name);
    weights w;
    make_weights(&w, s, seed);
    if (!write_hf(dir, s, &w) || (s->gguf && !write_gguf(gg, s, &w))) {
        CHECKF(0, "%s: could not write the test files", name);
        free_weights(&w);
        return;
    }
    enum { N = 24 };
    int32_t ids[N];
    g_rng = seed + 1;
    for (int i = 0; i < N; i++) ids[i] = (int32_t)(urand() * s->V);
    rig a, b;
    int oka = rig_open(&a, dir, 8, N + 8), okb = oka && s->gguf && rig_open(&b, gg, 8, N + 8);
    if (oka && (okb || !s->gguf)) {
        check_config(name, s, &a);
        check_tensors(name, s, &a, &w);
        if (moe(s)) check_expert_views(name, dir, s);
        const int V = s->V;
        float *ref = moe(s) ? NULL : malloc(sizeof(float) * (size_t)N * V); /* the reference has no experts */
        if (ref) CHECK(ref_forward_ctx(&a.m, ids, N, ref, a.c.kv_capacity));
        CHECKF(!s->orig_ctx || a.c.kv_capacity > s->orig_ctx, "%s: capacity %d does not reach the long factors", name,
               a.c.kv_capacity);
        slm_err err = {0};
        double e_ref = 0, e_gg = 0;
        CHECK(slm_rt_prefill(&a.rt, ids, 5, &err) == SLM_OK);
        if (okb) CHECK(slm_rt_prefill(&b.rt, ids, 5, &err) == SLM_OK);
        for (int p = 4; p < N; p++) {
            if (p > 4) CHECK(slm_rt_decode(&a.rt, ids[p], &err) == SLM_OK);
            if (p > 4 && okb) CHECK(slm_rt_decode(&b.rt, ids[p], &err) == SLM_OK);
            if (ref) e_ref = fmax(e_ref, rel_err(a.rt.logits, ref + (size_t)p * V, V));
            if (okb) e_gg = fmax(e_gg, rel_err(a.rt.logits, b.rt.logits, V));
        }
        CHECKF(e_ref < 1e-4 && (s->differ ? e_gg > 1e-2 : e_gg < 1e-4), "%s: logits rel err %.3g vs reference, %.3g vs "
               "GGUF%s", name, e_ref, e_gg, s->differ ? " (must differ)" : "");
        if (okb && !ref) fprintf(stderr, "  %s: rel err %.2g vs GGUF (%s)%s\n", name, e_gg, s->twin ? s->twin : arch_of(s),
                                 s->differ ? ", which computes otherwise" : "");
        else if (okb) fprintf(stderr, "  %s: rel err %.2g vs reference, %.2g vs GGUF\n", name, e_ref, e_gg);
        else fprintf(stderr, "  %s: rel err %.2g vs reference\n", name, e_ref);
        free(ref);
    }
    if (oka) rig_close(&a);
    if (okb) rig_close(&b);
    free_weights(&w);
    st_rm_dir(dir);
    unlink(gg);
}

/* qwen3: head size 24 over a 64-wide residual (Q 96 wide), Q/K norms, tied;
 * BF16 in 3 shards */
static void test_qwen3(void) {
    fam s = {.type = "qwen3", .D = 64, .F = 96, .L = 2, .H = 4, .KV = 2, .hd = 24, .V = 200, .ctx = 128,
             .mat = "BF16", .vec = "BF16", .shards = 3, .theta = 1000000.0f, .gguf = 1};
    check_family("qwen3", &s, 21);
}

/* qwen3 with YaRN factor 4 over an original context of 32 (head size 16:
 * pairs 0-1 keep their angle, 2-3 ramp, 4-7 are interpolated), F16; the
 * GGUF twin carries what llama.cpp's converter writes for it */
static void test_qwen3_yarn(void) {
    fam s = {.type = "qwen3", .D = 64, .F = 96, .L = 2, .H = 4, .KV = 2, .hd = 16, .V = 200, .ctx = 128,
             .mat = "F16", .vec = "F16", .theta = 10000.0f, .yarn = 4.0f, .yarn_orig = 32, .gguf = 1};
    check_family("qwen3-yarn", &s, 23);
}

/* smollm3: llama's tensors, no RoPE on layers 3 and 7 of 8 (no_rope_layers),
 * GQA, BF16, tied; the reference forward takes the loaded config, so the
 * config check above is what holds the no-RoPE layers to the file */
static void test_smollm3(void) {
    fam s = {.type = "smollm3", .D = 64, .F = 96, .L = 8, .H = 4, .KV = 2, .hd = 16, .V = 200, .ctx = 128,
             .mat = "BF16", .vec = "BF16", .theta = 5000000.0f};
    check_family("smollm3", &s, 31);
}

/* gemma2: GeGLU, four norms (1 + w), window 6 on even layers, soft-caps
 * 5 / 3 (small enough to matter), F16, tied */
static void test_gemma2(void) {
    fam s = {.type = "gemma2", .D = 64, .F = 96, .L = 3, .H = 4, .KV = 2, .hd = 32, .V = 256, .ctx = 128,
             .mat = "F16", .vec = "F16", .window = 6, .qpas = 32, .attn_cap = 5.0f, .final_cap = 3.0f,
             .theta = 10000.0f, .gguf = 1};
    check_family("gemma2", &s, 22);
    /* query_pre_attn_scalar other than head_dim (the 27B's rule, by key),
     * layer_types, BF16 (no GGUF key says it: the reference only) */
    fam q = s;
    q.qpas = 20;
    q.layer_types = 1;
    q.mat = q.vec = "BF16";
    q.gguf = 0;
    check_family("gemma2_qpas", &q, 23);
}

/* gemma3_text: Q/K norms, window 5 on 2 of every 3 layers (local RoPE base
 * 10000 unscaled), global base 1e6 with linear scaling 2; BF16 matrices,
 * F32 gains (copied to add 1) */
static void test_gemma3_text(void) {
    fam s = {.type = "gemma3_text", .D = 64, .F = 96, .L = 4, .H = 4, .KV = 1, .hd = 16, .V = 256, .ctx = 128,
             .mat = "BF16", .vec = "F32", .window = 5, .pattern = 3, .qpas = 16, .linear = 2.0f,
             .theta = 1000000.0f, .gguf = 1, .untied = 1};
    check_family("gemma3_text", &s, 24);
}

/* Gemma3ForConditionalGeneration: text_config with only the keys Google's
 * configs give (8 heads, 4 KV heads, head_dim 256, pattern 6, vocab from
 * the embedding: the class defaults), language_model.model.* names, vision
 * tensors beside; F32 at a misaligned data area. Then model.language_model.*
 * names with every key and layer_types. */
static void test_gemma3_multimodal(void) {
    fam s = {.type = "gemma3", .D = 64, .F = 96, .L = 2, .H = 8, .KV = 4, .hd = 256, .V = 128, .ctx = 131072,
             .mat = "F32", .vec = "F32", .pad = 2, .window = 12, .qpas = 256, .theta = 1000000.0f, .multimodal = 1,
             .sparse = 1, .gguf = 1};
    check_family("gemma3_mm", &s, 25);
    fam t = {.type = "gemma3", .D = 64, .F = 96, .L = 3, .H = 2, .KV = 1, .hd = 32, .V = 160, .ctx = 256,
             .mat = "BF16", .vec = "BF16", .shards = 2, .window = 4, .pattern = 2, .layer_types = 1, .qpas = 32,
             .theta = 1000000.0f, .multimodal = 2, .untied = 1, .gguf = 1};
    check_family("gemma3_mm2", &t, 26);
}

/* phi3 (Phi-4-mini-like): fused qkv_proj and gate_up_proj, partial rotary
 * 12 of 16, LongRoPE whose long factors the compiled context selects
 * (original 16 < capacity), attention factor from 128 / 16; F16 matrices,
 * BF16 gains; the config's sliding_window 2047 ignored */
static void test_phi3(void) {
    fam s = {.type = "phi3", .D = 64, .F = 96, .L = 2, .H = 4, .KV = 2, .hd = 16, .V = 200, .ctx = 128,
             .mat = "F16", .vec = "BF16", .untied = 1, .rope_dims = 12, .orig_ctx = 16, .theta = 10000.0f,
             .gguf = 1};
    check_family("phi3", &s, 27);
    fam p = s; /* Phi-3-mini-4k: no rope_scaling, full rotary */
    p.rope_dims = 16;
    p.orig_ctx = 0;
    p.mat = "BF16";
    check_family("phi3_4k", &p, 28);
}

/* OLMo 2: no pre-norms, Q/K norms over the whole 64 / 32 wide rows, the
 * norms after attention and FFN; untied (Olmo2Config's default), BF16 in
 * 2 shards, F32 gains */
static void test_olmo2(void) {
    fam s = {.type = "olmo2", .D = 64, .F = 96, .L = 2, .H = 4, .KV = 2, .hd = 16, .V = 200, .ctx = 128,
             .mat = "BF16", .vec = "F32", .shards = 2, .untied = 1, .theta = 500000.0f, .gguf = 1};
    check_family("olmo2", &s, 51);
}

/* Olmo 3: window 5 on layers 0-2 of 4 (layer_types written; the GGUF twin
 * the converter's per-layer list), layer 3 global with YaRN factor 4 over
 * an original context of 32 while the sliding layers rotate plainly (base
 * 1e5 on both, not gemma3's local 10000); F16,
 * BF16 gains. Then without layer_types (the period-4 default). */
static void test_olmo3(void) {
    fam s = {.type = "olmo3", .D = 64, .F = 96, .L = 4, .H = 4, .KV = 2, .hd = 16, .V = 200, .ctx = 128,
             .mat = "F16", .vec = "BF16", .untied = 1, .window = 5, .layer_types = 1, .theta = 100000.0f, .yarn = 4.0f,
             .yarn_orig = 32, .gguf = 1};
    check_family("olmo3", &s, 52);
    fam t = s; /* no layer_types, tied, BF16: the reference only */
    t.layer_types = 0;
    t.untied = 0;
    t.mat = "BF16";
    t.gguf = 0;
    check_family("olmo3_nolt", &t, 53);
}

/* granite: llama's tensors with muP multipliers (embedding 3, query scale
 * 0.0625 in place of 1/4, residual 0.5, logits / 4: values that move the
 * logits, where Granite's own 12 / 0.22 would leave attention little say),
 * GQA, tied, BF16; the GGUF twin with Q/K rows permuted as llama.cpp's
 * converter does and its four keys. Then F16, untied, 2 shards, linear RoPE
 * scaling. Then no multiplier at all: GraniteConfig's 1.0 each, which for
 * the query scale is 1.0 itself, not 1/sqrt(head_dim) (the reference only:
 * llama.cpp's converter writes no key and llama.cpp then takes
 * 1/sqrt(head_dim)). */
static void test_granite(void) {
    fam s = {.type = "granite", .D = 64, .F = 96, .L = 2, .H = 4, .KV = 2, .hd = 16, .V = 200, .ctx = 128,
             .mat = "BF16", .vec = "BF16", .theta = 10000000.0f, .mul = {3.0f, 0.0625f, 0.5f, 4.0f}, .gguf = 1};
    check_family("granite", &s, 61);
    fam u = s;
    u.mat = "F16";
    u.vec = "F32";
    u.untied = 1;
    u.shards = 2;
    u.linear = 2.0f;
    u.mul[0] = 0.5f, u.mul[1] = 0.125f, u.mul[2] = 1.5f, u.mul[3] = 0.25f;
    check_family("granite_f16", &u, 62);
    fam d = s;
    d.mul[0] = d.mul[1] = d.mul[2] = d.mul[3] = 0.0f;
    d.gguf = 0;
    check_family("granite_defaults", &d, 63);
}

/* EXAONE 4.0 at a shallow depth (the 1.2B's kind): no window and RoPE on
 * every layer, though the config gives sliding_window 5, the pattern
 * "LLLG" and layer_types, which llama.cpp reads at 64 layers only (the
 * GGUF twin carries the converter's keys for them, ignored as well); per
 * head Q/K norms, the norms after attention and FFN only; BF16 in 2 shards,
 * F32 gains, untied. */
static void test_exaone4(void) {
    fam s = {.type = "exaone4", .D = 64, .F = 96, .L = 4, .H = 4, .KV = 2, .hd = 16, .V = 200, .ctx = 128,
             .mat = "BF16", .vec = "F32", .shards = 2, .untied = 1, .window = 5, .swp = "LLLG", .layer_types = 1,
             .theta = 1000000.0f, .gguf = 1};
    check_family("exaone4", &s, 71);
    fam n = s; /* the 1.2B's keys: no window at all; tied, F16 */
    n.window = 0;
    n.swp = NULL;
    n.untied = 0;
    n.shards = 0;
    n.mat = "F16";
    check_family("exaone4_nowin", &n, 72);
}

/* EXAONE 4.0 at 64 layers (the 32B's depth, tiny widths): window 5 on the
 * layers l % 4 < 3 (24 positions cross it), layers 3, 7, ... global and
 * without RoPE; llama3 RoPE scaling over an original context of 32 (head
 * size 16, base 1e4: pair 0 kept, pair 1 ramped, the rest scaled);
 * sliding_window_pattern "LLLG" and layer_types; F16 matrices, F32 gains.
 * The GGUF twin: the converter's per-layer list and rope_freqs. Then the
 * pattern string alone (no layer_types), tied, F32. */
static void test_exaone4_deep(void) {
    fam s = {.type = "exaone4", .D = 32, .F = 64, .L = 64, .H = 2, .KV = 1, .hd = 16, .V = 100, .ctx = 128,
             .mat = "F16", .vec = "F32", .untied = 1, .window = 5, .swp = "LLLG", .layer_types = 1,
             .theta = 10000.0f, .llama3 = 8.0f, .llama3_orig = 32, .gguf = 1};
    check_family("exaone4_64", &s, 73);
    fam t = s;
    t.layer_types = 0;
    t.untied = 0;
    t.mat = "F32";
    t.llama3 = 0.0f;
    check_family("exaone4_64_swp", &t, 74);
}

/* qwen3_moe: 4 experts of width 32 (intermediate_size, the dense width, 96
 * and unused), 2 a token, per-head Q/K norms, head size 24 over a 64-wide
 * residual, norm_topk_prob true (Qwen3-30B-A3B's), BF16 in 3 shards; the
 * GGUF twin qwen3moe as llama.cpp's converter writes it (3-D expert
 * tensors; llama.cpp always renormalizes qwen3moe's top-k). Then
 * norm_topk_prob false, and absent (Qwen3MoeConfig's default: false), with
 * one head of 32, where a per-head Q/K norm is the whole row's: the twin is
 * olmoe, which llama.cpp runs without renormalizing; the same folder
 * against a qwen3moe twin must differ, so the key is seen to be read. Then
 * transformers v5's fused experts, F16 with F32 gains, untied. */
static void test_qwen3_moe(void) {
    fam s = {.type = "qwen3_moe", .D = 64, .F = 32, .L = 2, .H = 4, .KV = 2, .hd = 24, .V = 200, .ctx = 128,
             .mat = "BF16", .vec = "BF16", .shards = 3, .theta = 1000000.0f, .gguf = 1, .E = 4, .K = 2,
             .topk_norm = 2};
    check_family("qwen3_moe", &s, 81);
    fam f = s;
    f.H = f.KV = 1;
    f.hd = 32;
    f.topk_norm = 1;
    f.shards = 0;
    f.twin = "olmoe";
    check_family("qwen3_moe_nonorm", &f, 82);
    fam a = f;
    a.topk_norm = 0;
    check_family("qwen3_moe_default", &a, 83);
    fam d = f;
    d.twin = "qwen3moe";
    d.differ = 1;
    check_family("qwen3_moe_nonorm_vs_norm", &d, 82);
    fam v = s;
    v.fused_exps = 1;
    v.mat = "F16";
    v.vec = "F32";
    v.untied = 1;
    check_family("qwen3_moe_v5", &v, 84);
}

/* mixtral: 4 experts of width 48 (intermediate_size), 2 a token, the top-2
 * weights always renormalized, sliding_window 6 on every layer (the 24
 * positions cross it), GQA, F16, untied, 2 shards; the GGUF twin llama
 * with experts, its Q/K rows permuted as llama.cpp's converter does. Then
 * sliding_window null (none) with transformers v5's names (mlp.gate, fused
 * experts), BF16, tied. */
static void test_mixtral(void) {
    fam s = {.type = "mixtral", .D = 64, .F = 48, .L = 2, .H = 4, .KV = 2, .hd = 16, .V = 200, .ctx = 128,
             .mat = "F16", .vec = "F16", .shards = 2, .untied = 1, .window = 6, .theta = 1000000.0f, .gguf = 1,
             .E = 4, .K = 2};
    check_family("mixtral", &s, 91);
    fam v = s;
    v.window = 0;
    v.fused_exps = 1;
    v.mat = v.vec = "BF16";
    v.untied = 0;
    v.shards = 0;
    check_family("mixtral_v5", &v, 92);
}

/* olmoe: pre-norms and Q/K norms over whole rows (64 and 32 wide), 4
 * experts of width 48, 2 a token, norm_topk_prob false (OLMoE-1B-7B's),
 * untied, BF16 in 2 shards, F32 gains; the GGUF twin olmoe. Then
 * norm_topk_prob true with one head (the whole-row norm is the per-head
 * one) and v5's fused experts: the twin is qwen3moe, renormalized; against
 * an olmoe twin it must differ. */
static void test_olmoe(void) {
    fam s = {.type = "olmoe", .D = 64, .F = 48, .L = 2, .H = 4, .KV = 2, .hd = 16, .V = 200, .ctx = 128,
             .mat = "BF16", .vec = "F32", .shards = 2, .untied = 1, .theta = 10000.0f, .gguf = 1, .E = 4, .K = 2,
             .topk_norm = 1};
    check_family("olmoe", &s, 101);
    fam t = s;
    t.H = t.KV = 1;
    t.hd = 64;
    t.topk_norm = 2;
    t.fused_exps = 1;
    t.shards = 0;
    t.twin = "qwen3moe";
    check_family("olmoe_norm_v5", &t, 102);
    fam d = t;
    d.twin = "olmoe";
    d.differ = 1;
    check_family("olmoe_norm_vs_nonorm", &d, 102);
}

/* qwen2_moe (Qwen1.5-MoE-A2.7B's keys): Q/K/V biases, 4 experts of width
 * 32 (intermediate_size, the dense width, 96 and unused), 2 a token,
 * norm_topk_prob false, a shared expert of width 48 behind its sigmoid
 * gate mlp.shared_expert_gate [1, 64]; BF16 in 2 shards; the GGUF twin
 * qwen2moe as llama.cpp's converter writes it (3-D experts, the gate f32,
 * expert_shared_feed_forward_length). Then norm_topk_prob absent
 * (Qwen2MoeConfig's false), F16 with F32 vectors, untied; then true, which
 * transformers renormalizes and llama.cpp's qwen2moe does not: against
 * that twin the logits must differ, so the key is seen to be read. Then
 * transformers v5's fused experts. */
static void test_qwen2_moe(void) {
    fam s = {.type = "qwen2_moe", .D = 64, .F = 32, .L = 2, .H = 4, .KV = 2, .hd = 16, .V = 200, .ctx = 128,
             .mat = "BF16", .vec = "BF16", .shards = 2, .theta = 1000000.0f, .gguf = 1, .E = 4, .K = 2,
             .topk_norm = 1, .S = 48};
    check_family("qwen2_moe", &s, 111);
    fam a = s;
    a.topk_norm = 0;
    a.mat = "F16";
    a.vec = "F32";
    a.untied = 1;
    a.shards = 0;
    check_family("qwen2_moe_default", &a, 112);
    fam d = s;
    d.topk_norm = 2;
    d.differ = 1;
    check_family("qwen2_moe_norm_vs_nonorm", &d, 111);
    fam v = s;
    v.fused_exps = 1;
    v.shards = 0;
    check_family("qwen2_moe_v5", &v, 113);
}

/* A 128-expert, 48-layer qwen3_moe folder (Qwen3-30B-A3B's counts, tiny
 * widths): 18432 expert matrices over 4 shards are named, indexed and
 * validated; the expert table reaches the last one. */
static void test_moe_many(void) {
    enum { L = 48, E = 128, D = 16, F = 8, V = 32, HD = 16 };
    const char *dir = "hff_moe_many";
    const int cap = 2 + L * (9 + 3 * E);
    st_item *it = calloc((size_t)cap, sizeof *it);
    float *val = malloc(sizeof(float) * E * D);
    for (int i = 0; i < E * D; i++) val[i] = round_to("BF16", 0.01f * (float)(i % 13) + 0.5f);
    int n = 0;
#define ITEM(dt, r, c, ...)                                                   \
    do {                                                                      \
        snprintf(it[n].name, sizeof it[n].name, __VA_ARGS__);                 \
        it[n].dtype = dt;                                                     \
        it[n].n_dims = (r) > 0 ? 2 : 1;                                       \
        it[n].shape[0] = (r) > 0 ? (r) : (c);                                 \
        it[n].shape[1] = (c);                                                 \
        it[n++].f = val;                                                      \
    } while (0)
    ITEM("BF16", V, D, "model.embed_tokens.weight");
    ITEM("BF16", 0, D, "model.norm.weight");
    for (int l = 0; l < L; l++) {
        ITEM("BF16", 0, D, "model.layers.%d.input_layernorm.weight", l);
        ITEM("BF16", 0, D, "model.layers.%d.post_attention_layernorm.weight", l);
        ITEM("BF16", HD, D, "model.layers.%d.self_attn.q_proj.weight", l);
        ITEM("BF16", HD, D, "model.layers.%d.self_attn.k_proj.weight", l);
        ITEM("BF16", HD, D, "model.layers.%d.self_attn.v_proj.weight", l);
        ITEM("BF16", D, HD, "model.layers.%d.self_attn.o_proj.weight", l);
        ITEM("BF16", 0, HD, "model.layers.%d.self_attn.q_norm.weight", l);
        ITEM("BF16", 0, HD, "model.layers.%d.self_attn.k_norm.weight", l);
        ITEM("BF16", E, D, "model.layers.%d.mlp.gate.weight", l);
        for (int e = 0; e < E; e++) {
            ITEM("BF16", F, D, "model.layers.%d.mlp.experts.%d.gate_proj.weight", l, e);
            ITEM("BF16", F, D, "model.layers.%d.mlp.experts.%d.up_proj.weight", l, e);
            ITEM("BF16", D, F, "model.layers.%d.mlp.experts.%d.down_proj.weight", l, e);
        }
    }
#undef ITEM
    st_rm_dir(dir);
    mkdir(dir, 0755);
    char cfg[1024], path[512];
    const int cl = snprintf(cfg, sizeof cfg, "{\"model_type\": \"qwen3_moe\", \"hidden_size\": %d, \"intermediate_size\": "
                            "64, \"num_hidden_layers\": %d, \"num_attention_heads\": 1, \"num_key_value_heads\": 1, "
                            "\"head_dim\": %d, \"vocab_size\": %d, \"max_position_embeddings\": 64, \"num_experts\": %d, "
                            "\"num_experts_per_tok\": 8, \"moe_intermediate_size\": %d, \"norm_topk_prob\": true, "
                            "\"tie_word_embeddings\": true}", D, L, HD, V, E, F);
    snprintf(path, sizeof path, "%s/config.json", dir);
    CHECK(t_write_file(path, cfg, (size_t)cl) && st_write_weights(dir, it, n, 4, 0));
    slm_model_file m;
    slm_err err = {0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const slm_status st = slm_model_open(&m, dir, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECKF(st == SLM_OK, "%s", err.msg);
    if (st == SLM_OK) {
        CHECKF(m.n_tensors == n && m.cfg.n_experts == E && m.cfg.n_experts_used == 8 && m.cfg.expert_norm == 1,
               "%d tensors of %d", m.n_tensors, n);
        const slm_tensor *t = slm_model_expert(&m, L - 1, 2, E - 1);
        CHECKF(t && !strcmp(t->name, "blk.47.ffn_down.127.weight") && t->ne[0] == F && t->ne[1] == D, "last expert %s",
               t ? t->name : "(none)");
        slm_model_close(&m);
    }
    fprintf(stderr, "  %d tensors (%d expert matrices) in 4 shards opened in %.2f s\n", n, L * 3 * E,
            (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    st_rm_dir(dir);
    free(val);
    free(it);
}

/* ---- malformed ------------------------------------------------------------------- */

static void expect_cfg(const char *json, slm_status want, const char *w1, const char *w2) {
    slm_model_config c;
    float *f = NULL;
    slm_err err = {0};
    slm_status s = slm_hf_parse_config(&c, &f, json, strlen(json), "x/config.json", &err);
    CHECKF(s == want && (s == SLM_OK || (strstr(err.msg, "x/config.json: ") == err.msg && (!w1 || strstr(err.msg, w1)) &&
                                         (!w2 || strstr(err.msg, w2)))),
           "%s: status %d (want %d), '%s'", json, s, want, err.msg);
    free(f);
}

static void test_config_malformed(void) {
#define SZ "\"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, " \
           "\"vocab_size\": 100, \"max_position_embeddings\": 128"
    /* qwen3 */
    expect_cfg("{\"model_type\": \"qwen3\", " SZ ", \"head_dim\": 7}", SLM_ERR_FORMAT, "'head_dim'", "even");
    expect_cfg("{\"model_type\": \"qwen3\", " SZ ", \"attention_bias\": true}", SLM_ERR_UNSUPPORTED, "attention_bias", NULL);
    expect_cfg("{\"model_type\": \"qwen3\", " SZ ", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4, "
               "\"truncate\": false}}", SLM_ERR_UNSUPPORTED, "rope_scaling", "truncate false");
    expect_cfg("{\"model_type\": \"qwen3\", " SZ ", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4, "
               "\"extrapolation_factor\": 0.5}}", SLM_ERR_UNSUPPORTED, "rope_scaling", "extrapolation_factor");
    expect_cfg("{\"model_type\": \"qwen3\", " SZ ", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4, "
               "\"finetuned\": true}}", SLM_ERR_UNSUPPORTED, "rope_scaling", "'finetuned'");
    expect_cfg("{\"model_type\": \"qwen3\", " SZ ", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 0.5}}",
               SLM_ERR_FORMAT, "rope_scaling", "1..1024");
    expect_cfg("{\"model_type\": \"qwen3\", " SZ ", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4, "
               "\"beta_fast\": -3}}", SLM_ERR_FORMAT, "rope_scaling", "beta_fast");
    expect_cfg("{\"model_type\": \"qwen3\", " SZ ", \"num_key_value_heads\": 3}", SLM_ERR_FORMAT, "num_key_value_heads",
               "divide");
    /* smollm3: llama.cpp's fixed step of 4 is what runs */
    expect_cfg("{\"model_type\": \"smollm3\", " SZ ", \"no_rope_layer_interval\": 3}", SLM_ERR_UNSUPPORTED,
               "no_rope_layer_interval", "only 4");
    expect_cfg("{\"model_type\": \"smollm3\", " SZ ", \"no_rope_layers\": [1, 0]}", SLM_ERR_UNSUPPORTED, "no_rope_layers",
               "layer 1 has no RoPE");
    expect_cfg("{\"model_type\": \"smollm3\", " SZ ", \"no_rope_layers\": [1]}", SLM_ERR_FORMAT, "no_rope_layers",
               "list of 2");
    expect_cfg("{\"model_type\": \"smollm3\", " SZ ", \"no_rope_layers\": [1, 2]}", SLM_ERR_FORMAT, "no_rope_layers",
               "item 1");
    /* gemma2 */
    expect_cfg("{\"model_type\": \"gemma2\", " SZ ", \"head_dim\": 16}", SLM_ERR_FORMAT, "'query_pre_attn_scalar'",
               "missing");
    expect_cfg("{\"model_type\": \"gemma2\", " SZ ", \"query_pre_attn_scalar\": 16}", SLM_ERR_FORMAT, "'head_dim'",
               "missing");
    expect_cfg("{\"model_type\": \"gemma2\", " SZ ", \"head_dim\": 16, \"query_pre_attn_scalar\": 16, "
               "\"hidden_activation\": \"gelu\"}", SLM_ERR_UNSUPPORTED, "'hidden_activation'", "gelu");
    expect_cfg("{\"model_type\": \"gemma2\", " SZ ", \"head_dim\": 16, \"query_pre_attn_scalar\": 16, "
               "\"final_logit_softcapping\": \"30\"}", SLM_ERR_FORMAT, "'final_logit_softcapping'", NULL);
    expect_cfg("{\"model_type\": \"gemma2\", " SZ ", \"head_dim\": 16, \"query_pre_attn_scalar\": 16, "
               "\"sliding_window\": null, \"layer_types\": [\"sliding_attention\", \"full_attention\"]}",
               SLM_ERR_FORMAT, "'layer_types'", "layer 0 is 'sliding_attention'");
    /* gemma3 */
    expect_cfg("{\"model_type\": \"gemma3\", " SZ "}", SLM_ERR_FORMAT, "'text_config'", NULL);
    expect_cfg("{\"model_type\": \"gemma3\", \"text_config\": {\"model_type\": \"gemma3_vision\", " SZ "}}",
               SLM_ERR_UNSUPPORTED, "text_config", "gemma3_vision");
    expect_cfg("{\"model_type\": \"gemma3\", \"text_config\": {\"hidden_size\": 64, \"num_hidden_layers\": 2}}",
               SLM_ERR_FORMAT, "'intermediate_size'", "missing");
    expect_cfg("{\"model_type\": \"gemma3_text\", " SZ ", \"sliding_window_pattern\": 0}", SLM_ERR_FORMAT,
               "'sliding_window_pattern'", "range");
    expect_cfg("{\"model_type\": \"gemma3_text\", " SZ ", \"layer_types\": [\"full_attention\", "
               "\"sliding_attention\"]}", SLM_ERR_UNSUPPORTED, "'layer_types'", "n - 1");
    expect_cfg("{\"model_type\": \"gemma3_text\", " SZ ", \"sliding_window_pattern\": 2, \"layer_types\": "
               "[\"full_attention\", \"full_attention\"]}", SLM_ERR_FORMAT, "'layer_types'", "layer 0");
    expect_cfg("{\"model_type\": \"gemma3_text\", " SZ ", \"layer_types\": [\"full_attention\"]}", SLM_ERR_FORMAT,
               "'layer_types'", "2 strings");
    expect_cfg("{\"model_type\": \"gemma3_text\", " SZ ", \"layer_types\": [\"chunked_attention\", \"full_attention\"]}",
               SLM_ERR_UNSUPPORTED, "'layer_types'", "element 0");
    /* phi3 (head size 16: 8 pairs; 0.75 -> 12 rotated, 6 pairs) */
#define LR(lf, sf, more) "{\"model_type\": \"phi3\", " SZ ", \"partial_rotary_factor\": 0.75, " \
    "\"original_max_position_embeddings\": 32, \"rope_scaling\": {\"type\": \"longrope\", \"long_factor\": " lf \
    ", \"short_factor\": " sf more "}}"
    expect_cfg(LR("[1, 2, 3, 4, 5, 6]", "[1, 1, 1, 1, 1, 1]", ""), SLM_OK, NULL, NULL);
    expect_cfg(LR("[1, 2, 3, 4, 5]", "[1, 1, 1, 1, 1, 1]", ""), SLM_ERR_FORMAT, "'long_factor'", "6 numbers");
    expect_cfg(LR("[1, 2, 3, 4, 5, 6]", "[1, 1, 1, 1, 1, -1]", ""), SLM_ERR_FORMAT, "'short_factor'[5]", "positive");
    expect_cfg(LR("[1, 2, 3, 4, 5, 6]", "[1, 1, 1, 1, 1, 1]", ", \"long_mscale\": 1.2"), SLM_ERR_UNSUPPORTED,
               "long_mscale", NULL);
    expect_cfg(LR("[1, 2, 3, 4, 5, 6]", "[1, 1, 1, 1, 1, 1]", ", \"original_max_position_embeddings\": 64"),
               SLM_ERR_FORMAT, "disagree", NULL);
    expect_cfg("{\"model_type\": \"phi3\", " SZ ", \"rope_scaling\": {\"type\": \"longrope\", \"long_factor\": "
               "[1, 1, 1, 1, 1, 1, 1, 1], \"short_factor\": [1, 1, 1, 1, 1, 1, 1, 1]}}",
               SLM_ERR_FORMAT, "'original_max_position_embeddings'", NULL);
    expect_cfg("{\"model_type\": \"phi3\", " SZ ", \"partial_rotary_factor\": 0.1}", SLM_ERR_FORMAT,
               "'partial_rotary_factor'", "even");
    expect_cfg("{\"model_type\": \"phi3\", " SZ ", \"hidden_act\": \"gelu\"}", SLM_ERR_UNSUPPORTED, "'hidden_act'", NULL);
    expect_cfg("{\"model_type\": \"llama\", " SZ ", \"rope_scaling\": {\"type\": \"longrope\"}}", SLM_ERR_UNSUPPORTED,
               "longrope", "linear, llama3, yarn)");
#undef LR
    /* olmo2 / olmo3 (4 layers: the window on 0-2) */
    expect_cfg("{\"model_type\": \"olmo\", " SZ "}", SLM_ERR_UNSUPPORTED, "'olmo'", "olmo2, olmo3, granite, exaone4, qwen3_moe, qwen2_moe, mixtral");
    expect_cfg("{\"model_type\": \"olmo2\", " SZ ", \"attention_bias\": true}", SLM_ERR_UNSUPPORTED,
               "'attention_bias' = true", NULL);
    expect_cfg("{\"model_type\": \"olmo3\", " SZ ", \"attention_bias\": true}", SLM_ERR_UNSUPPORTED,
               "'attention_bias' = true", NULL);
    expect_cfg("{\"model_type\": \"olmo2\", " SZ ", \"hidden_act\": \"gelu\"}", SLM_ERR_UNSUPPORTED, "'hidden_act'",
               "silu only");
    expect_cfg("{\"model_type\": \"olmo2\", " SZ ", \"sliding_window\": 4096}", SLM_ERR_UNSUPPORTED,
               "'sliding_window'", "olmo3");
    expect_cfg("{\"model_type\": \"olmo2\", " SZ ", \"sliding_window\": null, \"layer_types\": "
               "[\"full_attention\", \"sliding_attention\"]}", SLM_ERR_FORMAT, "'layer_types'", "layer 1");
#define O3(lt) "{\"model_type\": \"olmo3\", \"hidden_size\": 64, \"intermediate_size\": 96, " \
    "\"num_hidden_layers\": 4, \"num_attention_heads\": 4, \"vocab_size\": 100, \"max_position_embeddings\": 128, " \
    "\"sliding_window\": 16, \"layer_types\": " lt "}"
#define SL "\"sliding_attention\""
#define FU "\"full_attention\""
    expect_cfg(O3("[" SL ", " SL ", " SL ", " FU "]"), SLM_OK, NULL, NULL);
    expect_cfg(O3("[" SL ", " FU ", " SL ", " FU "]"), SLM_ERR_UNSUPPORTED, "'layer_types'", "layer 1 is 'full_attention'");
    expect_cfg(O3("[" SL ", " SL ", " SL ", " SL "]"), SLM_ERR_UNSUPPORTED, "'layer_types'",
               "layer 3 is 'sliding_attention'");
    expect_cfg(O3("[" FU ", " FU ", " FU ", " FU "]"), SLM_ERR_UNSUPPORTED, "'layer_types'", "layer 0");
    expect_cfg(O3("[" SL ", " SL ", " SL "]"), SLM_ERR_FORMAT, "'layer_types'", "4 strings");
#undef FU
#undef SL
#undef O3
    /* granite */
    expect_cfg("{\"model_type\": \"granite\", " SZ ", \"mlp_bias\": true}", SLM_ERR_UNSUPPORTED, "'mlp_bias' = true",
               NULL);
    expect_cfg("{\"model_type\": \"granite\", " SZ ", \"attention_bias\": true}", SLM_ERR_UNSUPPORTED,
               "'attention_bias' = true", NULL);
    expect_cfg("{\"model_type\": \"granite\", " SZ ", \"hidden_act\": \"gelu\"}", SLM_ERR_UNSUPPORTED, "'hidden_act'",
               "silu only");
    expect_cfg("{\"model_type\": \"granite\", " SZ ", \"head_dim\": 32}", SLM_ERR_UNSUPPORTED, "'head_dim' = 32",
               "hidden_size / num_attention_heads");
    expect_cfg("{\"model_type\": \"granite\", " SZ ", \"head_dim\": 16}", SLM_OK, NULL, NULL);
    expect_cfg("{\"model_type\": \"granite\", " SZ ", \"logits_scaling\": 0}", SLM_ERR_FORMAT, "'logits_scaling'",
               "out of range");
    expect_cfg("{\"model_type\": \"granite\", " SZ ", \"attention_multiplier\": -0.5}", SLM_ERR_FORMAT,
               "'attention_multiplier'", "out of range");
    expect_cfg("{\"model_type\": \"granite\", " SZ ", \"embedding_multiplier\": \"12\"}", SLM_ERR_FORMAT,
               "'embedding_multiplier'", "a number");
    expect_cfg("{\"model_type\": \"granite\", " SZ ", \"residual_multiplier\": 1e7}", SLM_ERR_FORMAT,
               "'residual_multiplier'", "out of range");
#undef SZ
}

/* granite configs: Granite 3.x 2B's shape of keys (the multipliers as
 * written, the query scale not 1/sqrt(head_dim)); without them
 * GraniteConfig's defaults (query scale 1.0, the rest none). */
static void test_granite_config(void) {
    const char *j = "{\"architectures\": [\"GraniteForCausalLM\"], \"model_type\": \"granite\", \"hidden_size\": 2048, "
                    "\"intermediate_size\": 8192, \"num_hidden_layers\": 40, \"num_attention_heads\": 32, "
                    "\"num_key_value_heads\": 8, \"vocab_size\": 49159, \"max_position_embeddings\": 131072, "
                    "\"rope_theta\": 10000000.0, \"rope_scaling\": null, \"rms_norm_eps\": 1e-05, "
                    "\"tie_word_embeddings\": true, \"attention_bias\": false, \"mlp_bias\": false, \"hidden_act\": "
                    "\"silu\", \"attention_dropout\": 0.0, \"embedding_multiplier\": 12.0, \"attention_multiplier\": "
                    "0.015625, \"residual_multiplier\": 0.22, \"logits_scaling\": 8.0}";
    slm_model_config c;
    float *f = NULL;
    slm_err err = {0};
    CHECKF(slm_hf_parse_config(&c, &f, j, strlen(j), "g/config.json", &err) == SLM_OK, "%s", err.msg);
    CHECK(!strcmp(c.arch, "granite") && c.dim == 2048 && c.n_heads == 32 && c.n_kv_heads == 8 && c.head_dim == 64 &&
          c.vocab_size == 49159 && c.rope_base == 1e7f && c.norm_eps == 1e-5f && c.tied_embeddings && c.rope_neox == 1 &&
          !c.qkv_bias && !c.qk_norm && !c.post_norms && !c.ffn_gelu && !f);
    CHECKF(c.embed_scale == 12.0f && c.attn_scale == 0.015625f && c.residual_scale == 0.22f && c.logit_scale == 8.0f,
           "granite multipliers %g %g %g %g", (double)c.embed_scale, (double)c.attn_scale, (double)c.residual_scale,
           (double)c.logit_scale);
    const char *d = "{\"model_type\": \"granite\", \"hidden_size\": 64, \"intermediate_size\": 96, "
                    "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 100, "
                    "\"max_position_embeddings\": 128}";
    CHECKF(slm_hf_parse_config(&c, &f, d, strlen(d), "g/config.json", &err) == SLM_OK, "%s", err.msg);
    CHECKF(c.embed_scale == 0.0f && c.attn_scale == 1.0f && c.residual_scale == 0.0f && c.logit_scale == 0.0f &&
               c.head_dim == 16 && c.n_kv_heads == 4 && !f,
           "granite defaults %g %g %g %g", (double)c.embed_scale, (double)c.attn_scale, (double)c.residual_scale,
           (double)c.logit_scale);
    const char *o = "{\"model_type\": \"granite\", \"hidden_size\": 64, \"intermediate_size\": 96, "
                    "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 100, "
                    "\"max_position_embeddings\": 128, \"embedding_multiplier\": 1, \"attention_multiplier\": 1, "
                    "\"residual_multiplier\": 1, \"logits_scaling\": 1}";
    CHECKF(slm_hf_parse_config(&c, &f, o, strlen(o), "g/config.json", &err) == SLM_OK, "%s", err.msg);
    CHECK(c.embed_scale == 0.0f && c.attn_scale == 1.0f && c.residual_scale == 0.0f && c.logit_scale == 0.0f);
}

/* olmo2 / olmo3 configs: Olmo2Config's and Olmo3Config's defaults (eps
 * 1e-5, untied, Olmo 3's window 4096 on three layers of four without
 * layer_types), and the local layers' plain RoPE beside YaRN. */
static void test_olmo_config(void) {
#define SZ "\"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 8, \"num_attention_heads\": 4, " \
           "\"num_key_value_heads\": 2, \"vocab_size\": 100, \"max_position_embeddings\": 128"
    slm_model_config c;
    float *f = NULL;
    slm_err err = {0};
    const char *o2 = "{\"model_type\": \"olmo2\", " SZ ", \"rope_theta\": 500000}";
    CHECKF(slm_hf_parse_config(&c, &f, o2, strlen(o2), "o", &err) == SLM_OK, "%s", err.msg);
    CHECK(!strcmp(c.arch, "olmo2") && c.qk_norm == 2 && c.no_pre_norms == 1 && c.post_norms == 1 && c.rope_neox == 1 &&
          c.norm_eps == 1e-5f && !c.tied_embeddings && c.sliding_window == 0 && c.head_dim == 16 && c.n_kv_heads == 2 &&
          c.rope_base == 500000.0f && c.rope_base_swa == 0.0f && !c.ffn_gelu && c.embed_scale == 0.0f && !f);
    const char *o3 = "{\"model_type\": \"olmo3\", " SZ ", \"rms_norm_eps\": 1e-6, \"rope_scaling\": {\"rope_type\": "
                     "\"yarn\", \"factor\": 8.0, \"original_max_position_embeddings\": 64, \"attention_factor\": 1.2, "
                     "\"beta_fast\": 32, \"beta_slow\": 1}}";
    CHECKF(slm_hf_parse_config(&c, &f, o3, strlen(o3), "o", &err) == SLM_OK, "%s", err.msg);
    CHECK(!strcmp(c.arch, "olmo2") && c.qk_norm == 2 && c.no_pre_norms == 1 && c.post_norms == 1 &&
          c.norm_eps == 1e-6f && c.sliding_window == 4096 && c.swa_pattern == 4 && c.rope_base == 10000.0f &&
          c.rope_base_swa == 10000.0f && c.rope_scale_swa == 1.0f && c.rope_yarn == 1 && c.rope_scale == 8.0f &&
          c.rope_orig_ctx == 64 && c.rope_attn_factor == 1.2f && !f);
    for (int l = 0; l < 8; l++) CHECKF(slm_layer_swa(&c, l) == (l % 4 < 3), "olmo3 layer %d", l);
    const char *o3n = "{\"model_type\": \"olmo3\", " SZ ", \"sliding_window\": null}"; /* no window */
    CHECKF(slm_hf_parse_config(&c, &f, o3n, strlen(o3n), "o", &err) == SLM_OK, "%s", err.msg);
    CHECK(c.sliding_window == 0 && c.rope_base_swa == 0.0f && c.rope_scale_swa == 0.0f);
    for (int l = 0; l < 8; l++) CHECK(!slm_layer_swa(&c, l));
#undef SZ
}

/* exaone4 configs: Exaone4Config's defaults (eps 1e-5, untied; at 64
 * layers the window 4096 with the fourth layers global without RoPE);
 * llama.cpp's window rule (64 layers only: the pattern must be three local
 * layers and one global, repeating, else refused naming the layer; other
 * depths ignore the window keys). */
static void test_exaone4_config(void) {
#define E4(L, more) "{\"model_type\": \"exaone4\", \"hidden_size\": 32, \"intermediate_size\": 64, " \
    "\"num_hidden_layers\": " #L ", \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 16, " \
    "\"vocab_size\": 100, \"max_position_embeddings\": 128" more "}"
    slm_model_config c;
    float *f = NULL;
    slm_err err = {0};
    const char *d = E4(64, "");
    CHECKF(slm_hf_parse_config(&c, &f, d, strlen(d), "e", &err) == SLM_OK, "%s", err.msg);
    CHECK(!strcmp(c.arch, "exaone4") && c.qk_norm == 1 && c.no_pre_norms == 1 && c.post_norms == 1 &&
          c.rope_neox == 1 && c.norm_eps == 1e-5f && !c.tied_embeddings && c.sliding_window == 4096 && c.swa_pattern == 4 &&
          c.nope_step == 4 && c.rope_base_swa == 0.0f && c.rope_scale_swa == 0.0f && !c.ffn_gelu && !f);
    for (int l = 0; l < 64; l++)
        CHECKF(slm_layer_swa(&c, l) == (l % 4 < 3) && slm_layer_rope(&c, l) == (l % 4 < 3), "exaone4 layer %d", l);
    /* as EXAONE 4.0 32B's config says it (null window: llama.cpp's 4096 still) */
    const char *b = E4(64, ", \"sliding_window\": null, \"sliding_window_pattern\": \"LLLG\", \"rope_scaling\": "
                           "{\"factor\": 16.0, \"high_freq_factor\": 4.0, \"low_freq_factor\": 1.0, "
                           "\"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}");
    CHECKF(slm_hf_parse_config(&c, &f, b, strlen(b), "e", &err) == SLM_OK, "%s", err.msg);
    CHECK(c.sliding_window == 4096 && c.nope_step == 4 && c.rope_freqs == 1 && f && f[0] == 1.0f && f[7] == 16.0f);
    free(f);
    f = NULL;
    /* the 1.2B's depth: whatever the window keys say, none runs and every layer rotates */
    const char *s = E4(30, ", \"sliding_window\": 4096, \"sliding_window_pattern\": \"LLGG\", \"layer_types\": "
                           "[\"sliding_attention\"]");
    CHECKF(slm_hf_parse_config(&c, &f, s, strlen(s), "e", &err) == SLM_OK, "%s", err.msg);
    CHECK(c.sliding_window == 0 && c.nope_step == 0 && c.n_layers == 30);
    expect_cfg(E4(30, ", \"sliding_window\": 0, \"sliding_window_pattern\": 1"), SLM_OK, NULL, NULL);
    /* refusals */
    expect_cfg(E4(2, ", \"attention_bias\": true"), SLM_ERR_UNSUPPORTED, "'attention_bias' = true", NULL);
    expect_cfg(E4(64, ", \"attention_bias\": true"), SLM_ERR_UNSUPPORTED, "'attention_bias' = true", NULL);
    expect_cfg(E4(2, ", \"hidden_act\": \"gelu\""), SLM_ERR_UNSUPPORTED, "'hidden_act'", "silu only");
    expect_cfg(E4(64, ", \"sliding_window_pattern\": \"LLGG\""), SLM_ERR_UNSUPPORTED, "'sliding_window_pattern'",
               "layer 2 is global");
    expect_cfg(E4(64, ", \"sliding_window_pattern\": \"LLLLG\""), SLM_ERR_UNSUPPORTED, "'sliding_window_pattern'",
               "layer 3 is local");
    expect_cfg(E4(64, ", \"sliding_window_pattern\": \"LLLGLLLGLLLGLLLL\""), SLM_ERR_UNSUPPORTED,
               "'sliding_window_pattern'", "layer 15 is local");
    expect_cfg(E4(64, ", \"sliding_window_pattern\": 2"), SLM_ERR_UNSUPPORTED, "'sliding_window_pattern'",
               "layer 1 is global");
    expect_cfg(E4(64, ", \"sliding_window_pattern\": 4"), SLM_OK, NULL, NULL);
    expect_cfg(E4(64, ", \"sliding_window_pattern\": \"LLLGLLLG\""), SLM_OK, NULL, NULL);
    expect_cfg(E4(64, ", \"sliding_window_pattern\": \"LLXG\""), SLM_ERR_FORMAT, "'sliding_window_pattern'",
               "letters L");
    expect_cfg(E4(64, ", \"sliding_window_pattern\": \"\""), SLM_ERR_FORMAT, "'sliding_window_pattern'", "letters L");
    expect_cfg(E4(64, ", \"sliding_window_pattern\": 0"), SLM_ERR_FORMAT, "'sliding_window_pattern'", "range");
    expect_cfg(E4(64, ", \"sliding_window\": 0"), SLM_ERR_FORMAT, "'sliding_window'", "range");
    expect_cfg(E4(64, ", \"layer_types\": [\"full_attention\"]"), SLM_ERR_FORMAT, "'layer_types'", "64 strings");
    char lt[4096];
    for (int bad = 0; bad < 2; bad++) { /* layer 41 global (or layer 43 local) where the period says otherwise */
        int n = snprintf(lt, sizeof lt, "{\"model_type\": \"exaone4\", \"hidden_size\": 32, \"intermediate_size\": "
                         "64, \"num_hidden_layers\": 64, \"num_attention_heads\": 2, \"vocab_size\": 100, "
                         "\"max_position_embeddings\": 128, \"sliding_window\": 8, \"layer_types\": [");
        for (int l = 0; l < 64; l++) {
            const int slides = bad == 0 && l == 41 ? 0 : bad == 1 && l == 43 ? 1 : l % 4 < 3;
            n += snprintf(lt + n, sizeof lt - (size_t)n, "%s\"%s\"", l ? ", " : "",
                          slides ? "sliding_attention" : "full_attention");
        }
        snprintf(lt + n, sizeof lt - (size_t)n, "]}");
        expect_cfg(lt, SLM_ERR_UNSUPPORTED, "'layer_types'",
                   bad == 0 ? "layer 41 is 'full_attention'; llama.cpp runs exaone4 at 64 layers"
                            : "layer 43 is 'sliding_attention'");
    }
#undef E4
}

/* transformers v5's rope_parameters in place of rope_theta / rope_scaling
 * (flat, or per layer type for gemma3). */
static void test_rope_parameters(void) {
#define SZ "\"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, " \
           "\"vocab_size\": 100, \"max_position_embeddings\": 128"
    slm_model_config c;
    float *f = NULL;
    slm_err err = {0};
    const char *q = "{\"model_type\": \"qwen3\", " SZ ", \"rope_parameters\": {\"rope_type\": \"default\", "
                    "\"rope_theta\": 500000.0}}";
    CHECKF(slm_hf_parse_config(&c, &f, q, strlen(q), "q", &err) == SLM_OK && c.rope_base == 500000.0f && !f, "%s",
           err.msg);
    const char *g = "{\"model_type\": \"gemma3_text\", " SZ ", \"sliding_window\": 512, \"rope_parameters\": "
                    "{\"full_attention\": {\"rope_type\": \"linear\", \"factor\": 8.0, \"rope_theta\": 1000000.0}, "
                    "\"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": 20000.0}}}";
    CHECKF(slm_hf_parse_config(&c, &f, g, strlen(g), "g", &err) == SLM_OK && c.rope_base == 1e6f && c.rope_scale == 8.0f &&
               c.rope_base_swa == 20000.0f && c.rope_scale_swa == 1.0f && c.sliding_window == 512,
           "%s", err.msg);
    const char *p = "{\"model_type\": \"phi3\", " SZ ", \"original_max_position_embeddings\": 32, "
                    "\"rope_parameters\": {\"rope_type\": \"longrope\", \"rope_theta\": 250000.0, "
                    "\"partial_rotary_factor\": 0.75, \"long_factor\": [1, 2, 3, 4, 5, 6], "
                    "\"short_factor\": [1, 1, 1, 1, 1, 2]}}";
    CHECKF(slm_hf_parse_config(&c, &f, p, strlen(p), "p", &err) == SLM_OK && c.rope_base == 250000.0f &&
               c.rope_dims == 12 && c.rope_long == 2 && f && f[5] == 6.0f && f[11] == 2.0f,
           "%s", err.msg);
    free(f);
    expect_cfg("{\"model_type\": \"qwen3\", " SZ ", \"rope_theta\": 1000000.0, \"rope_parameters\": "
               "{\"rope_type\": \"default\", \"rope_theta\": 500000.0}}", SLM_ERR_FORMAT, "'rope_theta'", "disagree");
    expect_cfg("{\"model_type\": \"qwen3\", " SZ ", \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2}, "
               "\"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 2}}", SLM_ERR_FORMAT, "both", NULL);
    expect_cfg("{\"model_type\": \"qwen3\", " SZ ", \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4, "
               "\"rope_theta\": 1e6, \"original_max_position_embeddings\": 64}}", SLM_OK, NULL, NULL);
    expect_cfg("{\"model_type\": \"qwen3\", " SZ ", \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4, "
               "\"rope_theta\": 1e6, \"low_freq_factor\": 1}}", SLM_ERR_UNSUPPORTED, "'rope_parameters'", "'low_freq_factor'");
    expect_cfg("{\"model_type\": \"qwen3\", " SZ ", \"rope_parameters\": {\"full_attention\": {\"rope_theta\": 1e6}, "
               "\"sliding_attention\": {\"rope_theta\": 1e4}}}", SLM_ERR_UNSUPPORTED, "'rope_parameters'", "gemma3 and olmo3");
    /* Olmo 3 as transformers v5 writes it: YaRN on the full layers, plain RoPE of the same base on the sliding ones */
    const char *o3 = "{\"model_type\": \"olmo3\", " SZ ", \"sliding_window\": 16, \"rope_parameters\": {\"full_attention\": "
                     "{\"rope_type\": \"yarn\", \"factor\": 8.0, \"rope_theta\": 500000.0, "
                     "\"original_max_position_embeddings\": 64}, \"sliding_attention\": {\"rope_type\": \"default\", "
                     "\"rope_theta\": 500000.0}}}";
    CHECKF(slm_hf_parse_config(&c, &f, o3, strlen(o3), "o", &err) == SLM_OK && c.rope_base == 5e5f && c.rope_yarn &&
               c.rope_scale == 8.0f && c.rope_orig_ctx == 64 && c.rope_base_swa == 5e5f && c.rope_scale_swa == 1.0f &&
               c.sliding_window == 16 && c.swa_pattern == 4 && !f,
           "%s", err.msg);
    expect_cfg("{\"model_type\": \"olmo3\", " SZ ", \"rope_parameters\": {\"full_attention\": {\"rope_theta\": 1e6}, "
               "\"sliding_attention\": {\"rope_theta\": 1e4}}}", SLM_ERR_UNSUPPORTED, "'sliding_attention'", "global rope_theta");
    expect_cfg("{\"model_type\": \"olmo3\", " SZ ", \"rope_parameters\": {\"full_attention\": {\"rope_theta\": 1e6}, "
               "\"sliding_attention\": {\"rope_type\": \"yarn\", \"factor\": 2}}}", SLM_ERR_UNSUPPORTED, "'sliding_attention'",
               "'factor'");
    expect_cfg("{\"model_type\": \"gemma3_text\", " SZ ", \"rope_parameters\": {\"full_attention\": {\"rope_theta\": 1e6}, "
               "\"sliding_attention\": {\"rope_type\": \"linear\", \"factor\": 2}}}", SLM_ERR_UNSUPPORTED,
               "'sliding_attention'", "default only");
    expect_cfg("{\"model_type\": \"gemma3_text\", " SZ ", \"rope_local_base_freq\": 10000, \"rope_parameters\": "
               "{\"full_attention\": {\"rope_theta\": 1e6}, \"sliding_attention\": {\"rope_theta\": 2e4}}}",
               SLM_ERR_FORMAT, "'rope_local_base_freq'", "disagree");
    expect_cfg("{\"model_type\": \"gemma3_text\", " SZ ", \"rope_parameters\": {\"full_attention\": {}, "
               "\"chunked\": {}}}", SLM_ERR_FORMAT, "'rope_parameters'", "chunked");
    expect_cfg("{\"model_type\": \"phi3\", " SZ ", \"original_max_position_embeddings\": 32, \"rope_parameters\": "
               "{\"rope_type\": \"longrope\", \"long_factor\": [1, 2, 3, 4, 5, 6, 7, 8], \"short_factor\": "
               "[1, 1, 1, 1, 1, 1, 1, 1], \"long_mscale\": 1}}", SLM_ERR_UNSUPPORTED, "'rope_parameters'", "long_mscale");
#undef SZ
}

/* Gemma 3 4B's text_config as Google ships it: the rest from the defaults. */
static void test_gemma3_sparse_config(void) {
    const char *j = "{\"architectures\": [\"Gemma3ForConditionalGeneration\"], \"model_type\": \"gemma3\", "
                    "\"boi_token_index\": 255999, \"text_config\": {\"hidden_size\": 2560, \"intermediate_size\": 10240, "
                    "\"model_type\": \"gemma3_text\", \"num_hidden_layers\": 34, \"rope_scaling\": {\"factor\": 8.0, "
                    "\"rope_type\": \"linear\"}, \"sliding_window\": 1024}, \"vision_config\": {\"hidden_size\": 1152}}";
    slm_model_config c;
    float *f = NULL;
    slm_err err = {0};
    CHECKF(slm_hf_parse_config(&c, &f, j, strlen(j), "g/config.json", &err) == SLM_OK, "%s", err.msg);
    CHECK(!strcmp(c.arch, "gemma3") && c.dim == 2560 && c.hidden_dim == 10240 && c.n_layers == 34 && c.n_heads == 8 &&
          c.n_kv_heads == 4 && c.head_dim == 256 && c.vocab_size == 0 && c.context_len == 131072 && f == NULL);
    CHECK(c.sliding_window == 1024 && c.swa_pattern == 6 && c.rope_base == 1e6f && c.rope_scale == 8.0f &&
          c.rope_base_swa == 10000.0f && c.rope_scale_swa == 1.0f && c.attn_scale == 1.0f / 16 &&
          c.final_softcap == 0.0f && c.attn_softcap == 0.0f && c.qk_norm && c.post_norms && c.ffn_gelu &&
          c.norm_eps == 1e-6f);
    /* Phi-3-mini-128k's shape of key: LongRoPE of the full head, attn factor from 131072 / 4096 */
    char p[4096];
    int n = snprintf(p, sizeof p, "{\"model_type\": \"phi3\", \"hidden_size\": 3072, \"intermediate_size\": 8192, "
                     "\"num_hidden_layers\": 32, \"num_attention_heads\": 32, \"num_key_value_heads\": 32, "
                     "\"vocab_size\": 32064, \"max_position_embeddings\": 131072, "
                     "\"original_max_position_embeddings\": 4096, \"sliding_window\": 262144, "
                     "\"rope_scaling\": {\"type\": \"su\", \"long_factor\": [");
    for (int i = 0; i < 48; i++) n += snprintf(p + n, sizeof p - (size_t)n, "%s%g", i ? "," : "", 1.0 + i);
    n += snprintf(p + n, sizeof p - (size_t)n, "], \"short_factor\": [");
    for (int i = 0; i < 48; i++) n += snprintf(p + n, sizeof p - (size_t)n, "%s%g", i ? "," : "", 1.0 + 0.01 * i);
    snprintf(p + n, sizeof p - (size_t)n, "]}}");
    CHECKF(slm_hf_parse_config(&c, &f, p, strlen(p), "p/config.json", &err) == SLM_OK, "%s", err.msg);
    CHECK(c.rope_long == 2 && c.rope_orig_ctx == 4096 && c.sliding_window == 0 && c.head_dim == 96 && c.rope_dims == 0 &&
          f && f[0] == 1.0f && f[47] == 48.0f && f[48] == 1.0f && fabsf(f[95] - 1.47f) < 1e-6f &&
          fabsf(c.rope_attn_factor - (float)sqrt(1 + log(32.0) / log(4096.0))) < 1e-6f);
    free(f);
}


/* Drop tensor `name` from w. */
static void drop(weights *w, const char *name) {
    for (int i = 0; i < w->n; i++)
        if (!strcmp(w->it[i].name, name)) {
            free(w->f[i]);
            memmove(&w->it[i], &w->it[i + 1], sizeof w->it[0] * (size_t)(w->n - i - 1));
            memmove(&w->f[i], &w->f[i + 1], sizeof w->f[0] * (size_t)(w->n - i - 1));
            w->n--;
            return;
        }
}

/* Tensors a family lacks, or has in the wrong shape, or of another family. */
static void test_folder_malformed(void) {
    weights w;
    fam q = {.type = "qwen3", .D = 32, .F = 64, .L = 1, .H = 2, .KV = 1, .hd = 16, .V = 64, .ctx = 64,
             .mat = "BF16", .vec = "BF16", .theta = 10000.0f};
    make_weights(&w, &q, 5);
    drop(&w, "model.layers.0.self_attn.k_norm.weight");
    write_hf("hff_bad", &q, &w);
    expect_folder("hff_bad", SLM_ERR_FORMAT, "hff_bad", "blk.0.attn_k_norm.weight");
    free_weights(&w);

    fam l = q;
    l.type = "llama"; /* a qwen3 tensor in a llama folder */
    l.hd = 16;
    make_weights(&w, &q, 5);
    write_hf("hff_bad", &l, &w);
    expect_folder("hff_bad", SLM_ERR_UNSUPPORTED, "model.layers.0.self_attn.q_norm.weight", "not part of a llama model");
    free_weights(&w);

    fam g = {.type = "gemma2", .D = 32, .F = 64, .L = 2, .H = 2, .KV = 1, .hd = 16, .V = 64, .ctx = 64,
             .mat = "F16", .vec = "F16", .window = 4, .qpas = 16, .attn_cap = 50, .final_cap = 30, .theta = 10000.0f};
    make_weights(&w, &g, 6);
    drop(&w, "model.layers.1.pre_feedforward_layernorm.weight");
    write_hf("hff_bad", &g, &w);
    expect_folder("hff_bad", SLM_ERR_FORMAT, "hff_bad", "blk.1.ffn_norm.weight");
    free_weights(&w);

    fam m = {.type = "gemma3", .D = 32, .F = 64, .L = 1, .H = 2, .KV = 1, .hd = 16, .V = 64, .ctx = 64,
             .mat = "BF16", .vec = "BF16", .window = 4, .qpas = 16, .theta = 1e6f, .multimodal = 1, .sparse = 1};
    make_weights(&w, &m, 7); /* the sparse config's 8 heads of 256 do not fit these tensors */
    write_hf("hff_bad", &m, &w);
    expect_folder("hff_bad", SLM_ERR_FORMAT, "blk.0.attn_q.weight", "[32, 2048]");
    drop(&w, "language_model.model.embed_tokens.weight"); /* nor is there a vocabulary */
    write_hf("hff_bad", &m, &w);
    expect_folder("hff_bad", SLM_ERR_FORMAT, "vocab_size", "model.embed_tokens.weight");
    free_weights(&w);
    m.multimodal = 0; /* vision tensors in a text-only folder */
    m.type = "gemma3_text";
    m.sparse = 0;
    fam mm = m;
    mm.multimodal = 2;
    make_weights(&w, &mm, 7);
    write_hf("hff_bad", &m, &w);
    expect_folder("hff_bad", SLM_ERR_UNSUPPORTED, "model.vision_tower", "gemma3");
    free_weights(&w);

    fam p = {.type = "phi3", .D = 32, .F = 64, .L = 1, .H = 2, .KV = 1, .hd = 16, .V = 64, .ctx = 64,
             .mat = "F16", .vec = "F16", .rope_dims = 16, .theta = 10000.0f};
    make_weights(&w, &p, 8);
    for (int i = 0; i < w.n; i++) /* a qkv_proj one KV head short */
        if (strstr(w.it[i].name, "qkv_proj")) w.it[i].shape[0] -= 16;
    write_hf("hff_bad", &p, &w);
    expect_folder("hff_bad", SLM_ERR_FORMAT, "model.layers.0.self_attn.qkv_proj.weight", "q + k + v");
    for (int i = 0; i < w.n; i++)
        if (strstr(w.it[i].name, "qkv_proj")) w.it[i].shape[0] += 16;
    for (int i = 0; i < w.n; i++) /* gate_up_proj of one intermediate_size */
        if (strstr(w.it[i].name, "gate_up_proj")) w.it[i].shape[0] = p.F;
    write_hf("hff_bad", &p, &w);
    expect_folder("hff_bad", SLM_ERR_FORMAT, "gate_up_proj", "2 x intermediate_size");
    free_weights(&w);

    fam o = {.type = "olmo2", .D = 32, .F = 64, .L = 1, .H = 2, .KV = 1, .hd = 16, .V = 64, .ctx = 64,
             .mat = "BF16", .vec = "BF16", .untied = 1, .theta = 10000.0f};
    make_weights(&w, &o, 9);
    add_w(&w, "model.layers.0.input_layernorm.weight", "BF16", 0, o.D, 0.1f, 1.0f); /* llama's pre-norm */
    write_hf("hff_bad", &o, &w);
    expect_folder("hff_bad", SLM_ERR_UNSUPPORTED, "model.layers.0.input_layernorm.weight", "not part of a olmo2 model");
    l.type = "llama"; /* olmo2's post-FFW norm in a llama folder */
    drop(&w, "model.layers.0.self_attn.q_norm.weight");
    drop(&w, "model.layers.0.self_attn.k_norm.weight");
    write_hf("hff_bad", &l, &w);
    expect_folder("hff_bad", SLM_ERR_UNSUPPORTED, "model.layers.0.post_feedforward_layernor",
                  "not part of a llama model");
    free_weights(&w);
    fam oh = o; /* Q norm of one head (qwen3's), where olmo2 norms the whole row */
    oh.type = "qwen3";
    make_weights(&w, &oh, 9);
    drop(&w, "model.layers.0.input_layernorm.weight");
    add_w(&w, "model.layers.0.post_feedforward_layernorm.weight", "BF16", 0, o.D, 0.1f, 1.0f);
    drop(&w, "model.layers.0.self_attn.k_norm.weight");
    add_w(&w, "model.layers.0.self_attn.k_norm.weight", "BF16", 0, o.KV * o.hd, 0.1f, 1.0f);
    write_hf("hff_bad", &o, &w);
    expect_folder("hff_bad", SLM_ERR_FORMAT, "blk.0.attn_q_norm.weight", "[32]");
    drop(&w, "model.layers.0.post_feedforward_layernorm.weight"); /* without the post-FFW norm */
    drop(&w, "model.layers.0.self_attn.q_norm.weight");
    add_w(&w, "model.layers.0.self_attn.q_norm.weight", "BF16", 0, o.H * o.hd, 0.1f, 1.0f);
    write_hf("hff_bad", &o, &w);
    expect_folder("hff_bad", SLM_ERR_FORMAT, "hff_bad", "blk.0.post_ffw_norm.weight");
    free_weights(&w);
    fam e = {.type = "exaone4", .D = 32, .F = 64, .L = 1, .H = 2, .KV = 1, .hd = 16, .V = 64, .ctx = 64,
             .mat = "BF16", .vec = "BF16", .untied = 1, .theta = 10000.0f};
    make_weights(&w, &e, 11);
    add_w(&w, "model.layers.0.input_layernorm.weight", "BF16", 0, e.D, 0.1f, 1.0f); /* llama's pre-norm */
    write_hf("hff_bad", &e, &w);
    expect_folder("hff_bad", SLM_ERR_UNSUPPORTED, "model.layers.0.input_layernorm.weight",
                  "not part of a exaone4 model");
    drop(&w, "model.layers.0.input_layernorm.weight");
    add_w(&w, "model.layers.0.pre_feedforward_layernorm.weight", "BF16", 0, e.D, 0.1f, 1.0f); /* gemma's */
    write_hf("hff_bad", &e, &w);
    expect_folder("hff_bad", SLM_ERR_UNSUPPORTED, "model.layers.0.pre_feedforward_layernor", "not part of a exaone4");
    drop(&w, "model.layers.0.pre_feedforward_layernorm.weight");
    l.type = "llama"; /* exaone4's per-head Q/K norms and post norms in a llama folder */
    write_hf("hff_bad", &l, &w);
    expect_folder("hff_bad", SLM_ERR_UNSUPPORTED, "model.layers.0.self_attn.q_norm.weight",
                  "not part of a llama model");
    drop(&w, "model.layers.0.self_attn.k_norm.weight"); /* olmo2's whole-row K norm */
    add_w(&w, "model.layers.0.self_attn.k_norm.weight", "BF16", 0, e.KV * e.hd * 2, 0.1f, 1.0f);
    write_hf("hff_bad", &e, &w);
    expect_folder("hff_bad", SLM_ERR_FORMAT, "blk.0.attn_k_norm.weight", "[16]");
    drop(&w, "model.layers.0.self_attn.k_norm.weight");
    add_w(&w, "model.layers.0.self_attn.k_norm.weight", "BF16", 0, e.hd, 0.1f, 1.0f);
    drop(&w, "model.layers.0.post_feedforward_layernorm.weight"); /* the post-FFW norm is required */
    write_hf("hff_bad", &e, &w);
    expect_folder("hff_bad", SLM_ERR_FORMAT, "hff_bad", "blk.0.post_ffw_norm.weight");
    free_weights(&w);
    fam gr = {.type = "granite", .D = 32, .F = 64, .L = 1, .H = 2, .KV = 1, .hd = 16, .V = 64, .ctx = 64,
              .mat = "BF16", .vec = "BF16", .theta = 10000.0f, .mul = {2.0f, 0.1f, 0.5f, 2.0f}};
    make_weights(&w, &gr, 10);
    add_w(&w, "model.layers.0.self_attn.q_proj.bias", "BF16", 0, gr.H * gr.hd, 0.1f, 0.0f); /* no biases in granite */
    write_hf("hff_bad", &gr, &w);
    expect_folder("hff_bad", SLM_ERR_UNSUPPORTED, "model.layers.0.self_attn.q_proj.bias", "not part of a granite model");
    drop(&w, "model.layers.0.self_attn.q_proj.bias");
    drop(&w, "model.layers.0.post_attention_layernorm.weight"); /* llama's FFN pre-norm is required */
    write_hf("hff_bad", &gr, &w);
    expect_folder("hff_bad", SLM_ERR_FORMAT, "hff_bad", "blk.0.ffn_norm.weight");
    free_weights(&w);
    st_rm_dir("hff_bad");
}

/* MoE configs: Qwen3-30B-A3B's, Mixtral-8x7B's and OLMoE-1B-7B's keys; the
 * class defaults (norm_topk_prob false; Mixtral's and OLMoE's eps 1e-5);
 * what is refused: a layer with a dense MLP (decoder_sparse_step,
 * mlp_only_layers), clip_qkv, counts out of range. */
static void test_moe_config(void) {
#define QM(moe) "{\"model_type\": \"qwen3_moe\", \"hidden_size\": 64, \"num_hidden_layers\": 2, " \
    "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 16, \"vocab_size\": 100, " \
    "\"max_position_embeddings\": 128, " moe "}"
#define QK "\"num_experts\": 8, \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32"
    slm_model_config c;
    float *f = NULL;
    slm_err err = {0};
    const char *q30 = "{\"architectures\": [\"Qwen3MoeForCausalLM\"], \"model_type\": \"qwen3_moe\", \"hidden_size\": "
                      "2048, \"intermediate_size\": 6144, \"moe_intermediate_size\": 768, \"num_hidden_layers\": 48, "
                      "\"num_attention_heads\": 32, \"num_key_value_heads\": 4, \"head_dim\": 128, \"num_experts\": 128, "
                      "\"num_experts_per_tok\": 8, \"norm_topk_prob\": true, \"decoder_sparse_step\": 1, "
                      "\"mlp_only_layers\": [], \"vocab_size\": 151936, \"max_position_embeddings\": 40960, "
                      "\"rope_theta\": 1000000.0, \"rope_scaling\": null, \"rms_norm_eps\": 1e-06, \"hidden_act\": "
                      "\"silu\", \"attention_bias\": false, \"tie_word_embeddings\": false, \"use_sliding_window\": false, "
                      "\"sliding_window\": null, \"max_window_layers\": 48, \"output_router_logits\": false, "
                      "\"router_aux_loss_coef\": 0.001}";
    CHECKF(slm_hf_parse_config(&c, &f, q30, strlen(q30), "q/config.json", &err) == SLM_OK, "%s", err.msg);
    CHECK(!strcmp(c.arch, "qwen3moe") && c.dim == 2048 && c.hidden_dim == 768 && c.n_layers == 48 && c.n_heads == 32 &&
          c.n_kv_heads == 4 && c.head_dim == 128 && c.n_experts == 128 && c.n_experts_used == 8 && c.expert_norm == 1 &&
          c.qk_norm == 1 && c.rope_neox == 1 && !c.no_pre_norms && !c.post_norms && c.sliding_window == 0 &&
          c.norm_eps == 1e-6f && !c.tied_embeddings && !f);
    const char *qd = QM(QK); /* no intermediate_size (not needed), no norm_topk_prob: Qwen3MoeConfig's false */
    CHECKF(slm_hf_parse_config(&c, &f, qd, strlen(qd), "q/config.json", &err) == SLM_OK, "%s", err.msg);
    CHECK(c.n_experts == 8 && c.n_experts_used == 2 && c.hidden_dim == 32 && c.expert_norm == 0 && c.norm_eps == 1e-6f);
    expect_cfg(QM(QK ", \"norm_topk_prob\": false, \"intermediate_size\": 96"), SLM_OK, NULL, NULL);
    expect_cfg(QM(QK ", \"decoder_sparse_step\": 2"), SLM_ERR_UNSUPPORTED, "'decoder_sparse_step'", "every layer is sparse");
    expect_cfg(QM(QK ", \"decoder_sparse_step\": 0"), SLM_ERR_FORMAT, "'decoder_sparse_step'", "out of range");
    expect_cfg(QM(QK ", \"mlp_only_layers\": [0]"), SLM_ERR_UNSUPPORTED, "'mlp_only_layers'", "layer 0 has a dense MLP");
    expect_cfg(QM(QK ", \"mlp_only_layers\": [1, 0]"), SLM_ERR_UNSUPPORTED, "'mlp_only_layers'", "layer 1 has a dense");
    expect_cfg(QM(QK ", \"mlp_only_layers\": 0"), SLM_ERR_FORMAT, "'mlp_only_layers'", "list of layer indices");
    expect_cfg(QM(QK ", \"mlp_only_layers\": [\"0\"]"), SLM_ERR_FORMAT, "'mlp_only_layers'", "item 0");
    expect_cfg(QM(QK ", \"norm_topk_prob\": 1"), SLM_ERR_FORMAT, "'norm_topk_prob'", "true or false");
    expect_cfg(QM("\"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32"), SLM_ERR_FORMAT, "'num_experts'",
               "missing");
    expect_cfg(QM("\"num_experts\": 8, \"moe_intermediate_size\": 32"), SLM_ERR_FORMAT, "'num_experts_per_tok'",
               "missing");
    expect_cfg(QM("\"num_experts\": 8, \"num_experts_per_tok\": 2"), SLM_ERR_FORMAT, "'moe_intermediate_size'",
               "missing");
    expect_cfg(QM("\"num_experts\": 2, \"num_experts_per_tok\": 3, \"moe_intermediate_size\": 32"), SLM_ERR_FORMAT,
               "'num_experts_per_tok'", "more than the 2 experts");
    expect_cfg(QM("\"num_experts\": 2048, \"num_experts_per_tok\": 3, \"moe_intermediate_size\": 32"), SLM_ERR_FORMAT,
               "'num_experts'", "1..1024");
    expect_cfg(QM("\"num_experts\": 0, \"num_experts_per_tok\": 1, \"moe_intermediate_size\": 32"), SLM_ERR_FORMAT,
               "'num_experts'", "out of range");
#undef QK
#undef QM
    /* Qwen1.5-MoE-A2.7B: 60 experts of 1408, 4 a token, not renormalized, a shared expert of 5632 behind its
     * gate, Q/K/V biases, the window left off; Qwen2-57B-A14B: 64 experts of 2560, 8 a token, shared 20480 */
#define Q2(more) "{\"architectures\": [\"Qwen2MoeForCausalLM\"], \"model_type\": \"qwen2_moe\", \"hidden_size\": 2048, " \
    "\"intermediate_size\": 5632, \"num_hidden_layers\": 24, \"num_attention_heads\": 16, \"num_key_value_heads\": 16, " \
    "\"vocab_size\": 151936, \"max_position_embeddings\": 8192, \"rope_theta\": 1000000.0, \"rms_norm_eps\": 1e-06, " \
    "\"hidden_act\": \"silu\", \"tie_word_embeddings\": false, \"max_window_layers\": 21, \"sliding_window\": 32768, " \
    "\"moe_intermediate_size\": 1408, \"num_experts\": 60, \"num_experts_per_tok\": 4, \"output_router_logits\": false, " \
    "\"router_aux_loss_coef\": 0.001" more "}"
    const char *q15 = Q2(", \"shared_expert_intermediate_size\": 5632, \"use_sliding_window\": false, "
                         "\"decoder_sparse_step\": 1, \"norm_topk_prob\": false");
    CHECKF(slm_hf_parse_config(&c, &f, q15, strlen(q15), "q/config.json", &err) == SLM_OK, "%s", err.msg);
    CHECK(!strcmp(c.arch, "qwen2moe") && c.dim == 2048 && c.hidden_dim == 1408 && c.head_dim == 128 &&
          c.n_experts == 60 && c.n_experts_used == 4 && c.expert_norm == 0 && c.shared_ffn == 5632 && c.shared_gate == 1 &&
          c.qkv_bias == 1 && c.qk_norm == 0 && c.sliding_window == 0 && c.rope_neox == 1 && c.norm_eps == 1e-6f &&
          !c.tied_embeddings && !f);
    const char *q57 = "{\"architectures\": [\"Qwen2MoeForCausalLM\"], \"model_type\": \"qwen2_moe\", \"hidden_size\": "
                      "3584, \"intermediate_size\": 18944, \"num_hidden_layers\": 28, \"num_attention_heads\": 28, "
                      "\"num_key_value_heads\": 4, \"vocab_size\": 151936, \"max_position_embeddings\": 131072, "
                      "\"rope_theta\": 1000000.0, \"rms_norm_eps\": 1e-06, \"use_sliding_window\": false, "
                      "\"sliding_window\": 131072, \"max_window_layers\": 28, \"decoder_sparse_step\": 1, "
                      "\"moe_intermediate_size\": 2560, \"shared_expert_intermediate_size\": 20480, \"num_experts\": 64, "
                      "\"num_experts_per_tok\": 8, \"norm_topk_prob\": false, \"qkv_bias\": true}";
    CHECKF(slm_hf_parse_config(&c, &f, q57, strlen(q57), "q/config.json", &err) == SLM_OK, "%s", err.msg);
    CHECK(c.hidden_dim == 2560 && c.n_experts == 64 && c.n_experts_used == 8 && c.shared_ffn == 20480 &&
          c.n_kv_heads == 4 && c.head_dim == 128 && c.shared_gate == 1);
    const char *qn = Q2(", \"shared_expert_intermediate_size\": 5632, \"norm_topk_prob\": true");
    CHECKF(slm_hf_parse_config(&c, &f, qn, strlen(qn), "q/config.json", &err) == SLM_OK, "%s", err.msg);
    CHECK(c.expert_norm == 1 && c.sliding_window == 0); /* transformers renormalizes; no window without the key */
    expect_cfg(Q2(""), SLM_ERR_FORMAT, "'shared_expert_intermediate_size'", "missing");
    expect_cfg(Q2(", \"shared_expert_intermediate_size\": 0"), SLM_ERR_FORMAT, "'shared_expert_intermediate_size'",
               "out of range");
    expect_cfg(Q2(", \"shared_expert_intermediate_size\": 5632, \"decoder_sparse_step\": 2"), SLM_ERR_UNSUPPORTED,
               "'decoder_sparse_step'", "every layer is sparse");
    expect_cfg(Q2(", \"shared_expert_intermediate_size\": 5632, \"mlp_only_layers\": [3]"), SLM_ERR_UNSUPPORTED,
               "'mlp_only_layers'", "layer 3 has a dense MLP");
    expect_cfg(Q2(", \"shared_expert_intermediate_size\": 5632, \"qkv_bias\": false"), SLM_ERR_UNSUPPORTED, "'qkv_bias'",
               "Q/K/V biases");
    expect_cfg(Q2(", \"shared_expert_intermediate_size\": 5632, \"use_sliding_window\": true"), SLM_ERR_UNSUPPORTED,
               "'use_sliding_window'", "llama.cpp runs qwen2moe without one");
    expect_cfg(Q2(", \"shared_expert_intermediate_size\": 5632, \"layer_types\": [\"sliding_attention\"]"),
               SLM_ERR_FORMAT, "'layer_types'", NULL);
#undef Q2
    /* Mixtral-8x7B: llama with 8 experts of intermediate_size, always renormalized; eps absent: 1e-5 */
#define MX(more) "{\"architectures\": [\"MixtralForCausalLM\"], \"model_type\": \"mixtral\", \"hidden_size\": 4096, " \
    "\"intermediate_size\": 14336, \"num_hidden_layers\": 32, \"num_attention_heads\": 32, \"num_key_value_heads\": 8, " \
    "\"vocab_size\": 32000, \"max_position_embeddings\": 32768, \"rope_theta\": 1000000.0, \"hidden_act\": \"silu\", " \
    "\"router_aux_loss_coef\": 0.02, \"tie_word_embeddings\": false" more "}"
    const char *mx = MX(", \"num_local_experts\": 8, \"num_experts_per_tok\": 2, \"sliding_window\": null");
    CHECKF(slm_hf_parse_config(&c, &f, mx, strlen(mx), "m/config.json", &err) == SLM_OK, "%s", err.msg);
    CHECK(!strcmp(c.arch, "llama") && c.hidden_dim == 14336 && c.head_dim == 128 && c.n_experts == 8 &&
          c.n_experts_used == 2 && c.expert_norm == 1 && c.qk_norm == 0 && c.sliding_window == 0 && c.norm_eps == 1e-5f &&
          c.rope_neox == 1 && !f);
    const char *mw = MX(", \"num_local_experts\": 8, \"num_experts_per_tok\": 2, \"sliding_window\": 4096, "
                        "\"rms_norm_eps\": 1e-6, \"norm_topk_prob\": false");
    CHECKF(slm_hf_parse_config(&c, &f, mw, strlen(mw), "m/config.json", &err) == SLM_OK, "%s", err.msg);
    CHECK(c.sliding_window == 4096 && c.swa_pattern == 0 && c.norm_eps == 1e-6f && c.expert_norm == 1);
    expect_cfg(MX(", \"num_experts\": 8, \"num_experts_per_tok\": 2"), SLM_ERR_FORMAT, "'num_local_experts'", "missing");
#undef MX
    /* OLMoE-1B-7B-0924: whole-row Q/K norms, pre-norms, not renormalized; eps absent: 1e-5 */
#define OE(more) "{\"architectures\": [\"OlmoeForCausalLM\"], \"model_type\": \"olmoe\", \"hidden_size\": 2048, " \
    "\"intermediate_size\": 1024, \"num_hidden_layers\": 16, \"num_attention_heads\": 16, \"num_key_value_heads\": 16, " \
    "\"num_experts\": 64, \"num_experts_per_tok\": 8, \"vocab_size\": 50304, \"max_position_embeddings\": 4096, " \
    "\"rope_theta\": 10000.0, \"rope_scaling\": null, \"attention_bias\": false, \"tie_word_embeddings\": false, " \
    "\"output_router_logits\": false, \"router_aux_loss_coef\": 0.01" more "}"
    const char *oe = OE(", \"norm_topk_prob\": false, \"clip_qkv\": null");
    CHECKF(slm_hf_parse_config(&c, &f, oe, strlen(oe), "o/config.json", &err) == SLM_OK, "%s", err.msg);
    CHECK(!strcmp(c.arch, "olmoe") && c.hidden_dim == 1024 && c.head_dim == 128 && c.n_experts == 64 &&
          c.n_experts_used == 8 && c.expert_norm == 0 && c.qk_norm == 2 && !c.no_pre_norms && !c.post_norms &&
          c.norm_eps == 1e-5f && c.rope_neox == 1 && !c.tied_embeddings && !f);
    const char *on = OE(", \"norm_topk_prob\": true, \"rms_norm_eps\": 1e-6");
    CHECKF(slm_hf_parse_config(&c, &f, on, strlen(on), "o/config.json", &err) == SLM_OK, "%s", err.msg);
    CHECK(c.expert_norm == 1 && c.norm_eps == 1e-6f);
    expect_cfg(OE(", \"clip_qkv\": 8.0"), SLM_ERR_UNSUPPORTED, "'clip_qkv' = 8", "not supported");
    expect_cfg(OE(", \"num_local_experts\": 8"), SLM_OK, NULL, NULL); /* mixtral's key: not olmoe's, ignored */
#undef OE
}

/* MoE folders that are refused: a missing expert (named), one beyond the
 * config's count, a dense MLP or another family's expert names, an expert
 * given twice (alone and in v5's fused tensor), fused tensors of the wrong
 * shape or stored transposed. */
static void test_moe_folder_malformed(void) {
    weights w;
    fam q = {.type = "qwen3_moe", .D = 32, .F = 24, .L = 2, .H = 2, .KV = 1, .hd = 16, .V = 64, .ctx = 64,
             .mat = "BF16", .vec = "BF16", .theta = 10000.0f, .E = 4, .K = 2, .topk_norm = 2};
    make_weights(&w, &q, 12);
    write_hf("hff_bad", &q, &w);
    expect_folder("hff_bad", SLM_OK, NULL, NULL);
    drop(&w, "model.layers.1.mlp.experts.3.up_proj.weight");
    write_hf("hff_bad", &q, &w);
    expect_folder("hff_bad", SLM_ERR_FORMAT, "hff_bad", "missing tensor 'blk.1.ffn_up.3.weight'");
    add_w(&w, "model.layers.1.mlp.experts.3.up_proj.weight", "BF16", q.F, q.D, 0.1f, 0.0f);
    add_w(&w, "model.layers.1.mlp.experts.4.gate_proj.weight", "BF16", q.F, q.D, 0.1f, 0.0f);
    write_hf("hff_bad", &q, &w);
    expect_folder("hff_bad", SLM_ERR_FORMAT, "'model.layers.1.mlp.experts.4.gate_proj.weight'", "beyond the 4 experts");
    drop(&w, "model.layers.1.mlp.experts.4.gate_proj.weight");
    add_w(&w, "model.layers.0.mlp.gate_proj.weight", "BF16", q.F, q.D, 0.1f, 0.0f); /* a dense MLP */
    write_hf("hff_bad", &q, &w);
    expect_folder("hff_bad", SLM_ERR_UNSUPPORTED, "model.layers.0.mlp.gate_proj.weight", "not part of a qwen3moe model");
    drop(&w, "model.layers.0.mlp.gate_proj.weight");
    add_w(&w, "model.layers.0.block_sparse_moe.experts.0.w1.weight", "BF16", q.F, q.D, 0.1f, 0.0f); /* mixtral's */
    write_hf("hff_bad", &q, &w);
    expect_folder("hff_bad", SLM_ERR_UNSUPPORTED, "block_sparse_moe.experts.0.w1.weight", "not part of a qwen3moe");
    drop(&w, "model.layers.0.block_sparse_moe.experts.0.w1.weight");
    fam v = q; /* layer 0's experts also as v5's fused tensors */
    v.fused_exps = 1;
    add_w(&w, "model.layers.0.mlp.experts.gate_up_proj", "BF16", (int64_t)q.E * 2 * q.F, q.D, 0.1f, 0.0f);
    write_hf("hff_bad", &v, &w);
    expect_folder("hff_bad", SLM_ERR_FORMAT, "'model.layers.0.mlp.experts.gate_up_proj' gives 'blk.0.ffn_gate.0.weight'",
                  "model.layers.0.mlp.experts.0.gate_proj.weight");
    write_hf("hff_bad", &q, &w); /* the fused tensor left 2-D */
    expect_folder("hff_bad", SLM_ERR_FORMAT, "'model.layers.0.mlp.experts.gate_up_proj': shape [192, 32]",
                  "needs [4, 48, 32]");
    drop(&w, "model.layers.0.mlp.experts.gate_up_proj"); /* stored [E, in, out] */
    add_w(&w, "model.layers.0.mlp.experts.gate_up_proj", "BF16", (int64_t)q.E * q.D, 2 * q.F, 0.1f, 0.0f);
    write_hf("hff_bad", &v, &w);
    expect_folder("hff_bad", SLM_ERR_UNSUPPORTED, "shape [4, 32, 48]", "stored transposed");
    free_weights(&w);

    fam m = {.type = "mixtral", .D = 32, .F = 24, .L = 1, .H = 2, .KV = 1, .hd = 16, .V = 64, .ctx = 64,
             .mat = "F16", .vec = "F16", .theta = 10000.0f, .E = 3, .K = 2};
    make_weights(&w, &m, 13);
    drop(&w, "model.layers.0.block_sparse_moe.experts.1.w2.weight");
    write_hf("hff_bad", &m, &w);
    expect_folder("hff_bad", SLM_ERR_FORMAT, "hff_bad", "missing tensor 'blk.0.ffn_down.1.weight'");
    drop(&w, "model.layers.0.block_sparse_moe.gate.weight");
    add_w(&w, "model.layers.0.block_sparse_moe.experts.1.w2.weight", "F16", m.D, m.F, 0.1f, 0.0f);
    write_hf("hff_bad", &m, &w);
    expect_folder("hff_bad", SLM_ERR_FORMAT, "hff_bad", "missing tensor 'blk.0.ffn_gate_inp.weight'");
    add_w(&w, "model.layers.0.block_sparse_moe.gate.weight", "F16", m.E, m.D, 0.1f, 0.0f);
    add_w(&w, "model.layers.0.mlp.gate.weight", "F16", m.E, m.D, 0.1f, 0.0f); /* the router under both names */
    write_hf("hff_bad", &m, &w);
    expect_folder("hff_bad", SLM_ERR_FORMAT, "gives 'blk.0.ffn_gate_inp.weight'", NULL);
    drop(&w, "model.layers.0.mlp.gate.weight");
    add_w(&w, "model.layers.0.mlp.experts.0.gate_proj.weight", "F16", m.F, m.D, 0.1f, 0.0f); /* qwen3moe's name */
    write_hf("hff_bad", &m, &w);
    expect_folder("hff_bad", SLM_ERR_UNSUPPORTED, "model.layers.0.mlp.experts.0.gate_proj.weight", "not part of a llama");
    free_weights(&w);

    /* qwen2_moe: the shared expert's gate missing, of the wrong shape; the shared expert of another width; a dense
     * layer 0 (decoder_sparse_step 2); the shared expert's names in a qwen3_moe folder */
    fam q2 = {.type = "qwen2_moe", .D = 32, .F = 24, .L = 2, .H = 2, .KV = 1, .hd = 16, .V = 64, .ctx = 64,
              .mat = "BF16", .vec = "BF16", .theta = 10000.0f, .E = 4, .K = 2, .S = 40};
    make_weights(&w, &q2, 15);
    write_hf("hff_bad", &q2, &w);
    expect_folder("hff_bad", SLM_OK, NULL, NULL);
    drop(&w, "model.layers.1.mlp.shared_expert_gate.weight");
    write_hf("hff_bad", &q2, &w);
    expect_folder("hff_bad", SLM_ERR_FORMAT, "hff_bad", "missing tensor 'blk.1.ffn_gate_inp_shexp.weight'");
    add_w(&w, "model.layers.1.mlp.shared_expert_gate.weight", "BF16", 2, q2.D, 0.1f, 0.0f);
    write_hf("hff_bad", &q2, &w);
    expect_folder("hff_bad", SLM_ERR_FORMAT, "'blk.1.ffn_gate_inp_shexp.weight': shape [32, 2]", "needs [32, 1]");
    drop(&w, "model.layers.1.mlp.shared_expert_gate.weight");
    add_w(&w, "model.layers.1.mlp.shared_expert_gate.weight", "BF16", 1, q2.D, 0.1f, 0.0f);
    drop(&w, "model.layers.0.mlp.shared_expert.up_proj.weight");
    add_w(&w, "model.layers.0.mlp.shared_expert.up_proj.weight", "BF16", q2.F, q2.D, 0.1f, 0.0f);
    write_hf("hff_bad", &q2, &w);
    expect_folder("hff_bad", SLM_ERR_FORMAT, "'blk.0.ffn_up_shexp.weight': shape [32, 24]", "needs [32, 40]");
    drop(&w, "model.layers.0.mlp.shared_expert.up_proj.weight");
    add_w(&w, "model.layers.0.mlp.shared_expert.up_proj.weight", "BF16", q2.S, q2.D, 0.1f, 0.0f);
    write_hf("hff_bad", &q2, &w);
    expect_folder("hff_bad", SLM_OK, NULL, NULL);
    size_t cn = 0;
    char *cj = t_read_file("hff_bad/config.json", &cn), *at = cj ? strstr(cj, "\"decoder_sparse_step\": 1") : NULL;
    CHECK(at != NULL);
    if (at) {
        at[strlen("\"decoder_sparse_step\": ")] = '2';
        t_write_file("hff_bad/config.json", cj, cn);
        expect_folder("hff_bad", SLM_ERR_UNSUPPORTED, "hff_bad/config.json: key 'decoder_sparse_step': 2",
                      "every layer is sparse");
    }
    free(cj);
    fam q3 = q2; /* the same tensors under qwen3_moe (with its Q/K norms): the shared expert is not part of it */
    q3.type = "qwen3_moe";
    q3.S = 0;
    add_w(&w, "model.layers.0.self_attn.q_norm.weight", "BF16", 0, q2.hd, 0.1f, 1.0f);
    write_hf("hff_bad", &q3, &w);
    expect_folder("hff_bad", SLM_ERR_UNSUPPORTED, "model.layers.", "not part of a qwen3moe");
    free_weights(&w);

    fam o = {.type = "olmoe", .D = 32, .F = 24, .L = 1, .H = 2, .KV = 1, .hd = 16, .V = 64, .ctx = 64,
             .mat = "BF16", .vec = "BF16", .untied = 1, .theta = 10000.0f, .E = 2, .K = 1};
    make_weights(&w, &o, 14);
    drop(&w, "model.layers.0.self_attn.k_norm.weight"); /* one head's K norm, where olmoe norms the whole row */
    add_w(&w, "model.layers.0.self_attn.k_norm.weight", "BF16", 0, o.hd / 2, 0.1f, 1.0f);
    write_hf("hff_bad", &o, &w);
    expect_folder("hff_bad", SLM_ERR_FORMAT, "blk.0.attn_k_norm.weight", "[16]");
    free_weights(&w);
    st_rm_dir("hff_bad");
}

/* ---- allocation failure ---------------------------------------------------------- */

static long g_fail_left = -1, g_live; /* allocations before one fails (-1: never); not yet freed */
static int take(void) {
    if (g_fail_left == 0) return 0;
    if (g_fail_left > 0) g_fail_left--;
    return 1;
}
static void *nth_alloc(void *ud, size_t n) {
    (void)ud;
    void *p = take() ? malloc(n) : NULL;
    g_live += p != NULL;
    return p;
}
static void *nth_realloc(void *ud, void *p, size_t n) {
    (void)ud;
    if (!take()) return NULL;
    void *q = realloc(p, n);
    g_live += q && !p;
    return q;
}
static void nth_free(void *ud, void *p) {
    (void)ud;
    g_live -= p != NULL;
    free(p);
}

/* slm_model_open(dir) with allocation N failing, N = 0, 1, ... until it
 * opens: each failure SLM_ERR_NOMEM, nothing left allocated. */
static void open_failing(const char *name, const fam *s) {
    char dir[256];
    snprintf(dir, sizeof dir, "hff_nomem_%s", name);
    weights w;
    make_weights(&w, s, 31);
    CHECK(write_hf(dir, s, &w));
    const slm_allocator a = {nth_alloc, nth_realloc, nth_free, NULL};
    int n, done = 0, failures = 0, before = t_checks_failed_;
    for (n = 0; n < 100000 && !done; n++) {
        g_live = 0;
        slm_set_allocator(&a);
        g_fail_left = n;
        slm_model_file m;
        slm_err err = {0};
        slm_status st = slm_model_open(&m, dir, &err);
        g_fail_left = -1;
        if (st == SLM_OK) {
            done = 1;
            slm_model_close(&m);
        } else {
            failures++;
            CHECKF(st == SLM_ERR_NOMEM && strstr(err.msg, "out of memory"), "%s: allocation %d: %d %s", name, n, (int)st,
                   err.msg);
        }
        slm_set_allocator(NULL);
        CHECKF(g_live == 0, "%s: allocation %d failing: %ld leaked", name, n, g_live);
        if (t_checks_failed_ > before) break;
    }
    fprintf(stderr, "  %s: %d allocation failures refused cleanly, then opened\n", name, failures);
    CHECK(done && failures > 5);
    free_weights(&w);
    st_rm_dir(dir);
}

static void test_open_nomem(void) {
    fam p = {.type = "phi3", .D = 32, .F = 48, .L = 2, .H = 2, .KV = 1, .hd = 16, .V = 64, .ctx = 128,
             .mat = "F16", .vec = "BF16", .untied = 1, .rope_dims = 12, .orig_ctx = 16, .theta = 10000.0f, .shards = 2};
    open_failing("phi3", &p);
    fam g = {.type = "gemma3", .D = 32, .F = 48, .L = 3, .H = 2, .KV = 1, .hd = 16, .V = 64, .ctx = 128,
             .mat = "BF16", .vec = "BF16", .window = 4, .layer_types = 1, .qpas = 16, .theta = 1e6f, .multimodal = 2};
    open_failing("gemma3", &g);
    fam q = {.type = "qwen3_moe", .D = 32, .F = 16, .L = 2, .H = 2, .KV = 1, .hd = 16, .V = 64, .ctx = 128,
             .mat = "BF16", .vec = "BF16", .theta = 1e6f, .shards = 2, .E = 4, .K = 2, .topk_norm = 2, .fused_exps = 1};
    open_failing("qwen3_moe", &q);
}

/* ---- through the public API ------------------------------------------------------ */

/* slm_load(DIR) with the folder's tokenizer.json; its prefill logits
 * against the reference forward; the engine saved as a blob and loaded
 * again gives the same logits (the family fields travel in the blob). */
static void end_to_end(const char *name, const fam *s) {
    char dir[256], tj[300], blob[300];
    snprintf(dir, sizeof dir, "hff_e2e_%s", name);
    snprintf(tj, sizeof tj, "%s/tokenizer.json", dir);
    snprintf(blob, sizeof blob, "hff_e2e_%s.blob", name);
    weights w;
    make_weights(&w, s, 41);
    CHECK(write_hf(dir, s, &w));
    size_t tn = 0;
    char *tb = t_read_file(SLM_TESTS_DIR "/corpus/tokenizers/small_bytelevel.json", &tn);
    CHECK(tb && t_write_file(tj, tb, tn));
    free(tb);
    slm_options o = slm_default_options();
    o.kv_type = SLM_KV_F32; /* against the double reference at 1e-4: an f16 KV rounds to ~2e-4 */
    o.max_prompt_len = 16;
    o.min_response_len = 16;
    o.n_threads = 1;
    slm_engine *e = NULL, *e2 = NULL;
    slm_status st = slm_load(&e, dir, &o);
    CHECKF(st == SLM_OK, "%s: load: %s", name, slm_last_error(e));
    enum { N = 12 };
    int32_t ids[N];
    const int V = s->V;
    float *l1 = malloc(sizeof(float) * (size_t)V), *ref = malloc(sizeof(float) * (size_t)N * V);
    int n = st == SLM_OK ? slm_tokenize(e, "hello hello world, hello", 0, ids, N) : 0;
    CHECKF(n >= 4 && n <= N, "%s: %d tokens", name, n);
    const float *lg = NULL;
    if (n >= 4 && n <= N && slm_prefill(e, ids, n, &lg) == SLM_OK && lg) {
        memcpy(l1, lg, sizeof(float) * (size_t)V);
        slm_model_file m;
        slm_err err = {0};
        double er = INFINITY;
        if (moe(s)) { /* no reference forward for experts: the GGUF twin's logits through the runtime */
            char gg[300];
            snprintf(gg, sizeof gg, "hff_e2e_%s.gguf", name);
            rig b;
            if (write_gguf(gg, s, &w) && rig_open(&b, gg, 16, 16)) {
                CHECK(slm_rt_prefill(&b.rt, ids, n, &err) == SLM_OK);
                er = rel_err(l1, b.rt.logits, V);
                rig_close(&b);
            }
            unlink(gg);
        } else {
            CHECKF(slm_model_open(&m, dir, &err) == SLM_OK, "%s", err.msg);
            CHECK(ref_forward_ctx(&m, ids, n, ref, slm_capacity(e)));
            slm_model_close(&m);
            er = rel_err(l1, ref + (size_t)(n - 1) * V, V);
        }
        CHECKF(er < 1e-4, "%s: engine logits rel err %.3g vs %s", name, er, moe(s) ? "GGUF" : "reference");
        CHECKF(slm_save_blob(e, blob) == SLM_OK, "%s: save: %s", name, slm_last_error(e));
        slm_options ob = slm_default_options();
        ob.n_threads = 1;
        st = slm_load(&e2, blob, &ob);
        CHECKF(st == SLM_OK, "%s: blob load: %s", name, slm_last_error(e2));
        if (st == SLM_OK && slm_prefill(e2, ids, n, &lg) == SLM_OK && lg) {
            const double eb = rel_err(lg, l1, V);
            CHECKF(eb == 0.0, "%s: blob logits differ (rel %.3g)", name, eb);
            fprintf(stderr, "  %s: engine rel err %.2g vs %s; blob identical\n", name, er, moe(s) ? "GGUF" : "reference");
        } else {
            CHECKF(0, "%s: blob prefill failed", name);
        }
    } else {
        CHECKF(0, "%s: prefill failed: %s", name, e ? slm_last_error(e) : "");
    }
    slm_free(e);
    slm_free(e2);
    free(l1);
    free(ref);
    free_weights(&w);
    unlink(blob);
    st_rm_dir(dir);
}

static void test_end_to_end(void) {
    /* 268 tokens: the byte-level tokenizer's */
    fam g = {.type = "gemma3", .D = 64, .F = 96, .L = 3, .H = 2, .KV = 1, .hd = 32, .V = 268, .ctx = 256,
             .mat = "BF16", .vec = "BF16", .window = 4, .pattern = 3, .qpas = 32, .linear = 2.0f,
             .theta = 1000000.0f, .multimodal = 1};
    end_to_end("gemma3", &g);
    fam p = {.type = "phi3", .D = 64, .F = 96, .L = 2, .H = 4, .KV = 2, .hd = 16, .V = 268, .ctx = 128,
             .mat = "F16", .vec = "F16", .untied = 1, .rope_dims = 12, .orig_ctx = 16, .theta = 10000.0f};
    end_to_end("phi3", &p);
    fam g2 = {.type = "gemma2", .D = 64, .F = 96, .L = 2, .H = 4, .KV = 2, .hd = 16, .V = 268, .ctx = 128,
              .mat = "F16", .vec = "F16", .window = 4, .qpas = 24, .attn_cap = 5.0f, .final_cap = 3.0f,
              .theta = 10000.0f};
    end_to_end("gemma2", &g2);
    fam gr = {.type = "granite", .D = 64, .F = 96, .L = 2, .H = 4, .KV = 2, .hd = 16, .V = 268, .ctx = 128,
              .mat = "BF16", .vec = "BF16", .theta = 10000.0f, .mul = {3.0f, 0.0625f, 0.5f, 4.0f}};
    end_to_end("granite", &gr);
    fam q = {.type = "qwen3_moe", .D = 64, .F = 32, .L = 2, .H = 4, .KV = 2, .hd = 16, .V = 268, .ctx = 128,
             .mat = "BF16", .vec = "BF16", .theta = 1e6f, .E = 4, .K = 2, .topk_norm = 2, .fused_exps = 1};
    end_to_end("qwen3_moe", &q);
    fam mx = {.type = "mixtral", .D = 64, .F = 48, .L = 2, .H = 4, .KV = 2, .hd = 16, .V = 268, .ctx = 128,
              .mat = "F16", .vec = "F16", .window = 6, .theta = 1e6f, .untied = 1, .E = 3, .K = 2};
    end_to_end("mixtral", &mx);
    fam q2 = {.type = "qwen2_moe", .D = 64, .F = 32, .L = 2, .H = 4, .KV = 2, .hd = 16, .V = 268, .ctx = 128,
              .mat = "BF16", .vec = "BF16", .theta = 1e6f, .E = 4, .K = 2, .S = 48};
    end_to_end("qwen2_moe", &q2);
}

int main(void) {
    T_RUN(test_config_malformed);
    T_RUN(test_gemma3_sparse_config);
    T_RUN(test_olmo_config);
    T_RUN(test_granite_config);
    T_RUN(test_exaone4_config);
    T_RUN(test_rope_parameters);
    T_RUN(test_folder_malformed);
    T_RUN(test_moe_config);
    T_RUN(test_moe_folder_malformed);
    T_RUN(test_qwen3);
    T_RUN(test_qwen3_yarn);
    T_RUN(test_smollm3);
    T_RUN(test_gemma2);
    T_RUN(test_gemma3_text);
    T_RUN(test_gemma3_multimodal);
    T_RUN(test_phi3);
    T_RUN(test_olmo2);
    T_RUN(test_olmo3);
    T_RUN(test_granite);
    T_RUN(test_exaone4);
    T_RUN(test_exaone4_deep);
    T_RUN(test_qwen3_moe);
    T_RUN(test_mixtral);
    T_RUN(test_olmoe);
    T_RUN(test_qwen2_moe);
    T_RUN(test_moe_many);
    T_RUN(test_open_nomem);
    T_RUN(test_end_to_end);
    T_DONE();
}
