/* Hugging Face gpt_oss folders (OpenAI gpt-oss-20b / 120b as published),
 * written here with tiny random weights in the published layout: BF16
 * attention, router, biases and sinks, and MXFP4 experts as
 * mlp.experts.{gate_up,down}_proj_blocks (U8, [E, rows, in/32, 16], element
 * 2i in byte i's low nibble, 2i + 1 in its high one) and _scales (E8M0, [E,
 * rows, in/32]), gate and up rows interleaved (gate even, up odd) in the
 * blocks, the scales and gate_up_proj_bias. Each folder is checked against
 * its GGUF twin written as llama.cpp's converter writes gpt-oss (3-D MXFP4
 * ffn_*_exps stacks in GGML's nibble order, gate and up apart, f32 biases
 * [out, E], post_attention_norm) and against the double-precision reference:
 * logits at every position through the window; the experts as loaded are
 * checked value by value against the folder's blocks dequantized the way
 * transformers does (convert_moe_packed_tensors). The dequantized (bf16)
 * variant, gate_up_proj [E, hidden, 2F] and down_proj [E, F, hidden], is
 * checked against a twin with BF16 expert stacks. Hostile folders (a
 * truncated or misshapen blocks tensor, missing or misshapen scales, U8
 * elsewhere, keys gpt-oss cannot run) are refused with messages naming the
 * file and the tensor or key. */
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
#include "st_write.h"
#include "hf_twin.h"

enum { D = 64, F = 32, L = 2, H = 4, KV = 2, HD = 16, V = 160, E = 4, K = 2, WIN = 6, CTX = 128 };
#define YARN 4.0f
#define YARN_ORIG 32

/* ---- the folder's tensors --------------------------------------------------- */

/* A raw safetensors tensor (any dtype, up to 4 dims). */
typedef struct raw {
    char name[96];
    const char *dtype;
    int n_dims;
    int64_t shape[4];
    uint8_t *bytes;
    size_t nbytes;
} raw;

typedef struct oss {
    raw t[64];
    int n;
    weights w;  /* the float tensors, as st_write.h keeps them (values as rounded to BF16) */
    /* the experts, per layer: codes and scales [E][rows][blocks] as the folder holds them */
    uint8_t *gu_codes[L], *gu_scales[L], *dn_codes[L], *dn_scales[L];
    float *gu_bias[L], *dn_bias[L]; /* [E][2F], [E][D] */
} oss;

static raw *add_raw(oss *o, const char *name, const char *dt, int nd, const int64_t *shape) {
    raw *r = &o->t[o->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->dtype = dt;
    r->n_dims = nd;
    size_t cnt = 1;
    for (int d = 0; d < nd; d++) cnt *= (size_t)(r->shape[d] = shape[d]);
    r->nbytes = cnt * (!strcmp(dt, "U8") ? 1 : !strcmp(dt, "F32") ? 4 : 2);
    r->bytes = calloc(1, r->nbytes);
    return r;
}

/* A float tensor of o->w as a raw one in its dtype. */
static void raw_of_item(oss *o, const st_item *it) {
    raw *r = add_raw(o, it->name, it->dtype, it->n_dims, it->shape);
    put_elems(r->bytes, it->dtype, it->f, r->nbytes / dsize(it->dtype));
}

/* The HF bytes of one MXFP4 block: codes c[0..31] -> byte i = c[2i] | c[2i+1] << 4. */
static void hf_block(const uint8_t *c, uint8_t *out) {
    for (int i = 0; i < 16; i++) out[i] = (uint8_t)(c[2 * i] | c[2 * i + 1] << 4);
}

/* GGML's: qs[j] = c[j] | c[j + 16] << 4 after the scale byte. */
static void ggml_block(const uint8_t *c, uint8_t e, uint8_t *out) {
    out[0] = e;
    for (int j = 0; j < 16; j++) out[1 + j] = (uint8_t)(c[j] | c[j + 16] << 4);
}

/* transformers' FP4_VALUES times 2^(scale - 127) */
static float hf_value(uint8_t code, uint8_t scale) {
    static const float lut[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
    return ldexpf(lut[code & 15], (int)scale - 127);
}

/* Random codes [E][rows][in] and scales [E][rows][in/32] (values of about
 * 2^(s-127) x 3: scales 120..123 keep the activations near 1). */
static void rand_experts(uint8_t **codes, uint8_t **scales, int64_t rows, int64_t in) {
    const size_t n = (size_t)(E * rows * in);
    *codes = malloc(n);
    *scales = malloc(n / 32);
    for (size_t i = 0; i < n; i++) (*codes)[i] = (uint8_t)(urand() * 16) & 15;
    for (size_t i = 0; i < n / 32; i++) (*scales)[i] = (uint8_t)(120 + (int)(urand() * 4));
}

#define NM(x) (snprintf(n, sizeof n, "model.layers.%d." x, l), n)

/* Tensors of a gpt_oss folder; bf16: the dequantized variant (gate_up_proj
 * [E, D, 2F], down_proj [E, F, D]) in place of blocks and scales. */
static void make_oss(oss *o, uint64_t seed, int bf16) {
    memset(o, 0, sizeof *o);
    g_rng = seed;
    weights *w = &o->w;
    char n[96];
    add_w(w, "model.embed_tokens.weight", "BF16", V, D, 1.0f, 0.0f);
    for (int l = 0; l < L; l++) {
        add_w(w, NM("input_layernorm.weight"), "BF16", 0, D, 0.1f, 1.0f);
        add_w(w, NM("self_attn.q_proj.weight"), "BF16", H * HD, D, 0.15f, 0.0f);
        add_w(w, NM("self_attn.k_proj.weight"), "BF16", KV * HD, D, 0.15f, 0.0f);
        add_w(w, NM("self_attn.v_proj.weight"), "BF16", KV * HD, D, 0.15f, 0.0f);
        add_w(w, NM("self_attn.q_proj.bias"), "BF16", 0, H * HD, 0.1f, 0.0f);
        add_w(w, NM("self_attn.k_proj.bias"), "BF16", 0, KV * HD, 0.1f, 0.0f);
        add_w(w, NM("self_attn.v_proj.bias"), "BF16", 0, KV * HD, 0.1f, 0.0f);
        add_w(w, NM("self_attn.o_proj.weight"), "BF16", D, H * HD, 0.15f, 0.0f);
        add_w(w, NM("self_attn.o_proj.bias"), "BF16", 0, D, 0.1f, 0.0f);
        add_w(w, NM("self_attn.sinks"), "BF16", 0, H, 1.0f, 0.5f);
        add_w(w, NM("post_attention_layernorm.weight"), "BF16", 0, D, 0.1f, 1.0f);
        add_w(w, NM("mlp.router.weight"), "BF16", E, D, 0.3f, 0.0f);
        add_w(w, NM("mlp.router.bias"), "BF16", 0, E, 0.3f, 0.0f);
        o->gu_bias[l] = add_w(w, NM("mlp.experts.gate_up_proj_bias"), "BF16", E, 2 * F, 0.3f, 0.0f);
        o->dn_bias[l] = add_w(w, NM("mlp.experts.down_proj_bias"), "BF16", E, D, 0.1f, 0.0f);
        rand_experts(&o->gu_codes[l], &o->gu_scales[l], 2 * F, D);
        rand_experts(&o->dn_codes[l], &o->dn_scales[l], D, F);
    }
    add_w(w, "model.norm.weight", "BF16", 0, D, 0.1f, 1.0f);
    add_w(w, "lm_head.weight", "BF16", V, D, 0.3f, 0.0f);
    for (int i = 0; i < w->n; i++) raw_of_item(o, &w->it[i]);
    for (int l = 0; l < L; l++)
        for (int j = 0; j < 2; j++) { /* gate_up, then down */
            const int64_t R = j ? D : 2 * F, in = j ? F : D, nb = in / 32;
            const uint8_t *codes = j ? o->dn_codes[l] : o->gu_codes[l], *sc = j ? o->dn_scales[l] : o->gu_scales[l];
            if (bf16) { /* [E, in, R]: hidden @ W */
                snprintf(n, sizeof n, "model.layers.%d.mlp.experts.%s", l, j ? "down_proj" : "gate_up_proj");
                raw *t = add_raw(o, n, "BF16", 3, (int64_t[]){E, in, R});
                for (int64_t e = 0; e < E; e++)
                    for (int64_t r = 0; r < R; r++)
                        for (int64_t k = 0; k < in; k++) {
                            const uint16_t h = slm_f32_to_bf16(hf_value(codes[(e * R + r) * in + k], sc[(e * R + r) * nb + k / 32]));
                            memcpy(t->bytes + ((e * in + k) * R + r) * 2, &h, 2);
                        }
                continue;
            }
            snprintf(n, sizeof n, "model.layers.%d.mlp.experts.%s_blocks", l, j ? "down_proj" : "gate_up_proj");
            raw *b = add_raw(o, n, "U8", 4, (int64_t[]){E, R, nb, 16});
            for (int64_t rb = 0; rb < E * R * nb; rb++) hf_block(codes + rb * 32, b->bytes + rb * 16);
            snprintf(n, sizeof n, "model.layers.%d.mlp.experts.%s_scales", l, j ? "down_proj" : "gate_up_proj");
            raw *s = add_raw(o, n, "U8", 3, (int64_t[]){E, R, nb});
            memcpy(s->bytes, sc, s->nbytes);
        }
}

static void free_oss(oss *o) {
    for (int i = 0; i < o->n; i++) free(o->t[i].bytes);
    for (int l = 0; l < L; l++) free(o->gu_codes[l]), free(o->gu_scales[l]), free(o->dn_codes[l]), free(o->dn_scales[l]);
    free_weights(&o->w);
    o->n = 0;
}

static raw *find_raw(oss *o, const char *name) {
    for (int i = 0; i < o->n; i++)
        if (!strcmp(o->t[i].name, name)) return &o->t[i];
    return NULL;
}

/* dir/model.safetensors from o's tensors; short_by: the last data_offsets
 * of tensor `cut` that many bytes short (a truncated tensor). */
static int write_raw(const char *dir, const oss *o, const char *cut, size_t short_by) {
    size_t cap = 256 + (size_t)o->n * 256, hl = 0, off = 0;
    char *h = malloc(cap);
    hl += (size_t)snprintf(h + hl, cap - hl, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < o->n; i++) {
        const raw *r = &o->t[i];
        const size_t nb = r->nbytes - (cut && !strcmp(cut, r->name) ? short_by : 0);
        hl += (size_t)snprintf(h + hl, cap - hl, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", r->name, r->dtype);
        for (int d = 0; d < r->n_dims; d++) hl += (size_t)snprintf(h + hl, cap - hl, d ? ",%lld" : "%lld", (long long)r->shape[d]);
        hl += (size_t)snprintf(h + hl, cap - hl, "],\"data_offsets\":[%zu,%zu]}", off, off + nb);
        off += nb;
    }
    hl += (size_t)snprintf(h + hl, cap - hl, "}");
    while ((8 + hl) % 8) h[hl++] = ' ';
    uint8_t *buf = calloc(1, 8 + hl + off);
    for (int b = 0; b < 8; b++) buf[b] = (uint8_t)((uint64_t)hl >> (8 * b));
    memcpy(buf + 8, h, hl);
    size_t p = 8 + hl;
    for (int i = 0; i < o->n; i++) {
        const raw *r = &o->t[i];
        const size_t nb = r->nbytes - (cut && !strcmp(cut, r->name) ? short_by : 0);
        memcpy(buf + p, r->bytes, nb);
        p += nb;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    const int ok = t_write_file(path, buf, p);
    free(buf);
    free(h);
    return ok;
}

/* config.json as gpt-oss-20b's (its keys, tiny sizes); extra: more keys
 * (", \"k\": v" form) that replace the defaults when given twice (cJSON
 * takes the first: extra goes first). */
static int write_config(const char *dir, const char *extra) {
    char cfg[4096], lt[512] = "";
    size_t o = 0;
    for (int l = 0; l < L; l++)
        o += (size_t)snprintf(lt + o, sizeof lt - o, "%s\"%s\"", l ? ", " : "", l % 2 ? "full_attention" : "sliding_attention");
    const int n = snprintf(cfg, sizeof cfg,
        "{\"architectures\": [\"GptOssForCausalLM\"]%s, \"model_type\": \"gpt_oss\", \"attention_bias\": true, "
        "\"attention_dropout\": 0.0, \"eos_token_id\": 2, \"experts_per_token\": %d, \"head_dim\": %d, "
        "\"hidden_act\": \"silu\", \"hidden_size\": %d, \"initial_context_length\": %d, \"initializer_range\": 0.02, "
        "\"intermediate_size\": %d, \"layer_types\": [%s], \"max_position_embeddings\": %d, "
        "\"num_attention_heads\": %d, \"num_experts_per_tok\": %d, \"num_hidden_layers\": %d, "
        "\"num_key_value_heads\": %d, \"num_local_experts\": %d, \"output_router_logits\": false, "
        "\"pad_token_id\": 1, \"quantization_config\": {\"modules_to_not_convert\": [\"model.layers.*.self_attn\", "
        "\"model.layers.*.mlp.router\", \"model.embed_tokens\", \"lm_head\"], \"quant_method\": \"mxfp4\"}, "
        "\"rms_norm_eps\": 1e-05, \"rope_scaling\": {\"beta_fast\": 32.0, \"beta_slow\": 1.0, \"factor\": %.1f, "
        "\"original_max_position_embeddings\": %d, \"rope_type\": \"yarn\", \"truncate\": false}, "
        "\"rope_theta\": 150000, \"router_aux_loss_coef\": 0.9, \"sliding_window\": %d, \"swiglu_limit\": 7.0, "
        "\"tie_word_embeddings\": false, \"transformers_version\": \"4.55.0.dev0\", \"use_cache\": true, "
        "\"vocab_size\": %d}\n",
        extra ? extra : "", K, HD, D, YARN_ORIG, F, lt, CTX, H, K, L, KV, E, (double)YARN, YARN_ORIG, WIN, V);
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    return n > 0 && (size_t)n < sizeof cfg && t_write_file(path, cfg, (size_t)n);
}

static int write_folder(const char *dir, const oss *o, const char *extra) {
    mkdir(dir, 0755);
    return write_config(dir, extra) && write_raw(dir, o, NULL, 0);
}

/* ---- the GGUF twin -------------------------------------------------------------- */

/* The experts as llama.cpp's converter writes gpt-oss: ffn_{gate,up,down}_exps.weight
 * {in, out, E} (MXFP4 in GGML's order, or BF16 for the dequantized variant),
 * gate from the even rows and up from the odd ones; the biases {out, E} f32. */
static void twin_experts(slm_gguf_writer *g, const oss *o, int bf16, void **keep, int *nk) {
    static const char *const kind[3] = {"gate", "up", "down"};
    for (int l = 0; l < L; l++)
        for (int j = 0; j < 3; j++) {
            const int64_t rows = j == 2 ? D : F, in = j == 2 ? F : D, nb = in / 32, R = j == 2 ? D : 2 * F;
            const uint8_t *codes = j == 2 ? o->dn_codes[l] : o->gu_codes[l], *sc = j == 2 ? o->dn_scales[l] : o->gu_scales[l];
            const uint32_t type = bf16 ? SLM_BF16 : SLM_MXFP4;
            const uint64_t rb = slm_row_bytes(type, (uint64_t)in), nbytes = rb * (uint64_t)(rows * E);
            uint8_t *d = calloc(1, (size_t)nbytes);
            float *bias = malloc(sizeof(float) * (size_t)(rows * E));
            for (int64_t e = 0; e < E; e++)
                for (int64_t r = 0; r < rows; r++) {
                    const int64_t src = j == 2 ? r : 2 * r + j; /* the HF row */
                    uint8_t *dst = d + (uint64_t)(e * rows + r) * rb;
                    for (int64_t b = 0; b < nb; b++) {
                        const uint8_t *c = codes + ((e * R + src) * in + b * 32);
                        const uint8_t s = sc[(e * R + src) * nb + b];
                        if (!bf16) ggml_block(c, s, dst + b * 17);
                        for (int k = 0; bf16 && k < 32; k++) {
                            const uint16_t h = slm_f32_to_bf16(hf_value(c[k], s));
                            memcpy(dst + (b * 32 + k) * 2, &h, 2);
                        }
                    }
                    bias[e * rows + r] = j == 2 ? o->dn_bias[l][e * D + r] : o->gu_bias[l][e * 2 * F + src];
                }
            keep[(*nk)++] = d;
            keep[(*nk)++] = bias;
            char n[64];
            snprintf(n, sizeof n, "blk.%d.ffn_%s_exps.weight", l, kind[j]);
            slm_gguf_add_tensor(g, n, type, 3, (int64_t[]){in, rows, E}, d, nbytes);
            snprintf(n, sizeof n, "blk.%d.ffn_%s_exps.bias", l, kind[j]);
            slm_gguf_add_tensor(g, n, SLM_F32, 2, (int64_t[]){rows, E}, bias, sizeof(float) * (uint64_t)(rows * E));
        }
}

/* A float tensor's GGUF name (NULL: an expert tensor, written by twin_experts). */
static const char *twin_name(const char *hf, char *out, size_t cap) {
    static const char *const map[][2] = {
        {"input_layernorm.weight", "attn_norm.weight"},  {"self_attn.q_proj.weight", "attn_q.weight"},
        {"self_attn.k_proj.weight", "attn_k.weight"},    {"self_attn.v_proj.weight", "attn_v.weight"},
        {"self_attn.q_proj.bias", "attn_q.bias"},        {"self_attn.k_proj.bias", "attn_k.bias"},
        {"self_attn.v_proj.bias", "attn_v.bias"},        {"self_attn.o_proj.weight", "attn_output.weight"},
        {"self_attn.o_proj.bias", "attn_output.bias"},   {"self_attn.sinks", "attn_sinks.weight"},
        {"post_attention_layernorm.weight", "post_attention_norm.weight"},
        {"mlp.router.weight", "ffn_gate_inp.weight"},    {"mlp.router.bias", "ffn_gate_inp.bias"},
    };
    if (!strcmp(hf, "model.embed_tokens.weight")) return "token_embd.weight";
    if (!strcmp(hf, "model.norm.weight")) return "output_norm.weight";
    if (!strcmp(hf, "lm_head.weight")) return "output.weight";
    int l, end = 0;
    if (sscanf(hf, "model.layers.%d.%n", &l, &end) != 1 || !end) return NULL;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(hf + end, map[i][0])) {
            snprintf(out, cap, "blk.%d.%s", l, map[i][1]);
            return out;
        }
    return NULL;
}

static int write_twin(const char *path, const oss *o, int bf16) {
    slm_gguf_writer *g = slm_gguf_writer_new();
    const char *A = "gpt-oss";
    char k[96];
#define KEY(x) (snprintf(k, sizeof k, "%s." x, A), k)
    slm_gguf_set_str(g, "general.architecture", A);
    slm_gguf_set_u32(g, KEY("embedding_length"), D);
    slm_gguf_set_u32(g, KEY("feed_forward_length"), F);
    slm_gguf_set_u32(g, KEY("expert_feed_forward_length"), F);
    slm_gguf_set_u32(g, KEY("expert_count"), E);
    slm_gguf_set_u32(g, KEY("expert_used_count"), K);
    slm_gguf_set_u32(g, KEY("block_count"), L);
    slm_gguf_set_u32(g, KEY("attention.head_count"), H);
    slm_gguf_set_u32(g, KEY("attention.head_count_kv"), KV);
    slm_gguf_set_u32(g, KEY("attention.key_length"), HD);
    slm_gguf_set_u32(g, KEY("attention.value_length"), HD);
    slm_gguf_set_u32(g, KEY("context_length"), CTX);
    slm_gguf_set_u32(g, KEY("vocab_size"), V);
    slm_gguf_set_f32(g, KEY("rope.freq_base"), 150000.0f);
    slm_gguf_set_f32(g, KEY("attention.layer_norm_rms_epsilon"), 1e-5f);
    slm_gguf_set_u32(g, KEY("attention.sliding_window"), WIN);
    slm_gguf_set_str(g, KEY("rope.scaling.type"), "yarn");
    slm_gguf_set_f32(g, KEY("rope.scaling.factor"), YARN);
    slm_gguf_set_u32(g, KEY("rope.scaling.original_context_length"), YARN_ORIG);
#undef KEY
    void *keep[ST_MAX_TENSORS];
    int nk = 0;
    for (int i = 0; i < o->w.n; i++) {
        const st_item *t = &o->w.it[i];
        char buf[64];
        if (strstr(t->name, ".experts.")) continue;
        const char *gn = twin_name(t->name, buf, sizeof buf);
        if (!gn) continue;
        const size_t cnt = (size_t)(t->n_dims == 2 ? t->shape[0] * t->shape[1] : t->shape[0]);
        float *f = malloc(sizeof(float) * cnt);
        memcpy(f, t->f, sizeof(float) * cnt);
        hf_twin_add(g, gn, t, f, keep, &nk);
    }
    twin_experts(g, o, bf16, keep, &nk);
    return hf_twin_write(g, path, keep, nk);
}

/* ---- the checks ------------------------------------------------------------------ */

/* The folder as loaded (before repacking): the config, and every expert's
 * rows and biases against the folder's values dequantized as transformers
 * does. */
static void check_loaded(const char *dir, const oss *o, int bf16) {
    slm_model_file m;
    slm_err err = {0};
    if (slm_model_open(&m, dir, &err) != SLM_OK) {
        CHECKF(0, "%s: %s", dir, err.msg);
        return;
    }
    const slm_model_config *c = &m.cfg;
    CHECKF(!strcmp(c->arch, "gpt-oss") && c->n_experts == E && c->n_experts_used == K && c->expert_norm &&
           c->expert_bias && c->qkv_bias && c->o_bias && c->attn_sinks && c->hidden_dim == F && c->head_dim == HD &&
           c->sliding_window == WIN && c->swa_pattern == 2 && c->rope_yarn && c->rope_scale == YARN &&
           c->rope_orig_ctx == YARN_ORIG && c->swiglu_alpha == 1.702f && c->swiglu_limit == 7.0f &&
           c->norm_eps == 1e-5f && c->rope_neox && !c->tied_embeddings,
           "%s: config (arch %s, experts %d/%d, window %d/%d, yarn %d %g %d)", dir, c->arch, c->n_experts,
           c->n_experts_used, c->sliding_window, c->swa_pattern, c->rope_yarn, (double)c->rope_scale, c->rope_orig_ctx);
    int bad = 0;
    float row[64];
    for (int l = 0; l < L && !bad; l++)
        for (int e = 0; e < E && !bad; e++)
            for (int j = 0; j < 3 && !bad; j++) {
                const slm_tensor *t = slm_model_expert(&m, l, j, e), *bt = slm_model_expert(&m, l, 3 + j, e);
                const int64_t rows = j == 2 ? D : F, in = j == 2 ? F : D, R = j == 2 ? D : 2 * F, nb = in / 32;
                if (!t || !bt || t->type != (bf16 ? SLM_BF16 : SLM_MXFP4) || t->ne[0] != in || t->ne[1] != rows ||
                    bt->type != SLM_F32 || bt->ne[0] != rows) {
                    CHECKF(0, "%s: layer %d expert %d part %d: type or shape", dir, l, e, j);
                    bad = 1;
                    break;
                }
                const uint8_t *codes = j == 2 ? o->dn_codes[l] : o->gu_codes[l], *sc = j == 2 ? o->dn_scales[l] : o->gu_scales[l];
                for (int64_t r = 0; r < rows && !bad; r++) {
                    const int64_t src = j == 2 ? r : 2 * r + j;
                    CHECK(slm_dequantize_row(t->type, (const uint8_t *)t->data + r * slm_row_bytes(t->type, (uint64_t)in),
                                             row, in));
                    for (int64_t k = 0; k < in; k++)
                        if (row[k] != hf_value(codes[(e * R + src) * in + k], sc[(e * R + src) * nb + k / 32])) bad = 1;
                    const float want = j == 2 ? o->dn_bias[l][e * D + r] : o->gu_bias[l][e * 2 * F + src];
                    if (((const float *)bt->data)[r] != want) bad = 2;
                    CHECKF(!bad, "%s: layer %d expert %d %s row %lld: %s differs from the folder's", dir, l, e,
                           j == 2 ? "down" : j ? "up" : "gate", (long long)r, bad == 2 ? "the bias" : "a value");
                }
            }
    slm_model_close(&m);
}

/* Logits of the folder at every position (prefill 5, then decode past the
 * window) against its GGUF twin and, when tol_ref > 0, the reference
 * forward. MXFP4's matmuls take the activations quantized to 8 bits (1e-2
 * of the logits here with every expert used), enough to flip a near tie of
 * the router's top 2 of random weights, so the MXFP4 folder is held to its
 * twin only; its experts are checked value by value (check_loaded), and the
 * bf16 variant, the same values, against the reference. */
static void check_logits(const char *name, const char *dir, const char *gg, double tol_ref) {
    enum { N = 24 };
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = (int32_t)(urand() * V);
    rig a, b;
    const int oka = rig_open(&a, dir, 8, N + 8), okb = oka && rig_open(&b, gg, 8, N + 8);
    if (oka && okb) {
        float *ref = malloc(sizeof(float) * (size_t)N * V);
        if (tol_ref > 0) CHECK(ref_forward_ctx(&a.m, ids, N, ref, a.c.kv_capacity));
        slm_err err = {0};
        double e_ref = 0, e_gg = 0;
        CHECK(slm_rt_prefill(&a.rt, ids, 5, &err) == SLM_OK);
        CHECK(slm_rt_prefill(&b.rt, ids, 5, &err) == SLM_OK);
        for (int p = 4; p < N; p++) {
            if (p > 4) CHECK(slm_rt_decode(&a.rt, ids[p], &err) == SLM_OK && slm_rt_decode(&b.rt, ids[p], &err) == SLM_OK);
            if (tol_ref > 0) e_ref = fmax(e_ref, rel_err(a.rt.logits, ref + (size_t)p * V, V));
            e_gg = fmax(e_gg, rel_err(a.rt.logits, b.rt.logits, V));
        }
        CHECKF(e_gg < 1e-5 && (tol_ref <= 0 || e_ref < tol_ref), "%s: logits rel err %.3g vs GGUF, %.3g vs reference",
               name, e_gg, e_ref);
        if (tol_ref > 0) fprintf(stderr, "  %s: rel err %.2g vs GGUF, %.2g vs reference\n", name, e_gg, e_ref);
        else fprintf(stderr, "  %s: rel err %.2g vs GGUF\n", name, e_gg);
        free(ref);
    }
    if (oka) rig_close(&a);
    if (okb) rig_close(&b);
}

static void check_folder(const char *name, uint64_t seed, int bf16) {
    char dir[128], gg[128];
    snprintf(dir, sizeof dir, "hfo_%s", name);
    snprintf(gg, sizeof gg, "hfo_%s.gguf", name);
    oss o;
    make_oss(&o, seed, bf16);
    if (!write_folder(dir, &o, NULL) || !write_twin(gg, &o, bf16)) CHECKF(0, "%s: could not write the test files", name);
    else {
        check_loaded(dir, &o, bf16);
        check_logits(name, dir, gg, bf16 ? 1e-4 : 0);
    }
    free_oss(&o);
    st_rm_dir(dir);
    unlink(gg);
}

/* MXFP4 experts as published: 2 layers (the window on layer 0), 4 experts of
 * width 32, 2 a token, YaRN 4 over 32 positions, sinks, every bias. */
static void test_mxfp4(void) { check_folder("mxfp4", 11, 0); }

/* The dequantized variant: BF16 [E, in, out] expert stacks, transposed. */
static void test_bf16(void) { check_folder("bf16", 12, 1); }

/* ---- refusals ------------------------------------------------------------------- */

/* A folder of o's tensors with one changed by edit (NULL: none) and config
 * keys extra, refused with want and a message holding w1 and w2. */
static void refuse(const char *what, const char *extra, void (*edit)(oss *), const char *cut, size_t short_by,
                   slm_status want, const char *w1, const char *w2) {
    char dir[128];
    snprintf(dir, sizeof dir, "hfo_bad_%s", what);
    oss o;
    make_oss(&o, 21, 0);
    if (edit) edit(&o);
    mkdir(dir, 0755);
    if (!write_config(dir, extra) || !write_raw(dir, &o, cut, short_by)) CHECKF(0, "%s: could not write", what);
    else expect_folder(dir, want, w1, w2);
    free_oss(&o);
    st_rm_dir(dir);
}

/* r's bytes for its (changed) dtype and shape, so that the safetensors
 * header stays consistent and the loader itself must refuse it */
static raw *resize(raw *r) {
    size_t cnt = 1;
    for (int d = 0; d < r->n_dims; d++) cnt *= (size_t)r->shape[d];
    const size_t nb = cnt * (!strcmp(r->dtype, "U8") ? 1 : !strcmp(r->dtype, "F32") ? 4 : 2);
    if (nb > r->nbytes) {
        free(r->bytes);
        r->bytes = calloc(1, nb);
    }
    r->nbytes = nb;
    return r;
}

/* tensor name's dimension d set to v */
static void set_dim(oss *o, const char *name, int d, int64_t v) {
    raw *r = find_raw(o, name);
    r->shape[d] = v;
    resize(r);
}
static void fewer_blocks(oss *o) { set_dim(o, "model.layers.1.mlp.experts.gate_up_proj_blocks", 2, 1); }
static void fewer_bytes(oss *o) { set_dim(o, "model.layers.1.mlp.experts.down_proj_blocks", 3, 15); }
static void no_scales(oss *o) { find_raw(o, "model.layers.0.mlp.experts.down_proj_scales")->name[40] = 'X'; }
static void odd_scales(oss *o) { set_dim(o, "model.layers.0.mlp.experts.gate_up_proj_scales", 1, F); }
static void bias_shape(oss *o) { set_dim(o, "model.layers.0.mlp.experts.gate_up_proj_bias", 1, F); }
static void blocks_bf16(oss *o) {
    raw *r = find_raw(o, "model.layers.0.mlp.experts.down_proj_blocks");
    r->dtype = "BF16";
    r->shape[3] = 8;
}
static void embed_u8(oss *o) {
    raw *r = find_raw(o, "model.embed_tokens.weight");
    r->dtype = "U8";
    r->shape[1] *= 2;
}
/* layer 0's gate_up blocks first in the file (read before the biases, whose
 * shapes would be refused first) */
static void blocks_first(oss *o) {
    raw *r = find_raw(o, "model.layers.0.mlp.experts.gate_up_proj_blocks"), t = o->t[0];
    o->t[0] = *r;
    *r = t;
}
static void qwen_expert(oss *o) {
    raw *r = find_raw(o, "model.layers.0.mlp.router.weight");
    snprintf(r->name, sizeof r->name, "model.layers.0.mlp.experts.0.gate_proj.weight");
}
/* the bf16 variant stored [E, out, in] (down_proj [E, D, F]) */
static void transposed(oss *o) {
    raw *r = find_raw(o, "model.layers.0.mlp.experts.down_proj_blocks");
    if (!r) return;
    snprintf(r->name, sizeof r->name, "model.layers.0.mlp.experts.down_proj");
    r->dtype = "BF16";
    r->n_dims = 3;
    r->shape[2] = F;
    resize(r);
}

static void test_refused(void) {
    refuse("fewer_blocks", NULL, fewer_blocks, NULL, 0, SLM_ERR_FORMAT, "model.layers.1.mlp.experts.gate_up_proj_blocks",
           "[4, 64, 2, 16]");
    refuse("fewer_bytes", NULL, fewer_bytes, NULL, 0, SLM_ERR_FORMAT, "down_proj_blocks", "U8 [4, 64, 1, 15]");
    refuse("truncated", NULL, NULL, "model.layers.1.mlp.experts.down_proj_blocks", 16, SLM_ERR_FORMAT,
           "hfo_bad_truncated/model.safetensors", "model.layers.1.mlp.experts.down_proj_blocks");
    refuse("no_scales", NULL, no_scales, NULL, 0, SLM_ERR_FORMAT, "its scales", "down_proj_scales");
    refuse("odd_scales", NULL, odd_scales, NULL, 0, SLM_ERR_FORMAT, "gate_up_proj_scales", "[4, 64, 2]");
    refuse("bias_shape", NULL, bias_shape, NULL, 0, SLM_ERR_FORMAT, "gate_up_proj_bias", "[4, 64]");
    refuse("blocks_bf16", NULL, blocks_bf16, NULL, 0, SLM_ERR_FORMAT, "down_proj_blocks", "bf16 [4, 64, 1, 8]");
    refuse("embed_u8", NULL, embed_u8, NULL, 0, SLM_ERR_UNSUPPORTED, "model.embed_tokens.weight", "U8");
    refuse("qwen_expert", NULL, qwen_expert, NULL, 0, SLM_ERR_UNSUPPORTED, "experts.0.gate_proj", "gpt-oss");
    refuse("transposed", NULL, transposed, NULL, 0, SLM_ERR_UNSUPPORTED, "down_proj", "[experts, in, out]");
    refuse("hidden48", ", \"hidden_size\": 48", blocks_first, NULL, 0, SLM_ERR_FORMAT, "blocks of 32", "hidden_size");
    refuse("layer_types", ", \"layer_types\": [\"full_attention\", \"sliding_attention\"]", NULL, NULL, 0,
           SLM_ERR_UNSUPPORTED, "config.json: key 'layer_types'", "layer 0");
    refuse("quant", ", \"quantization_config\": {\"quant_method\": \"bitsandbytes\"}", NULL, NULL, 0, SLM_ERR_UNSUPPORTED,
           "quantization_config", "bitsandbytes");
    refuse("no_bias", ", \"attention_bias\": false", NULL, NULL, 0, SLM_ERR_UNSUPPORTED, "attention_bias", "biases");
    refuse("per_token", ", \"experts_per_token\": 3", NULL, NULL, 0, SLM_ERR_FORMAT, "experts_per_token", "disagree");
    refuse("limit", ", \"swiglu_limit\": -1", NULL, NULL, 0, SLM_ERR_FORMAT, "swiglu_limit", "out of range");
    refuse("extrapolation", ", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, \"extrapolation_factor\": 2}",
           NULL, NULL, 0, SLM_ERR_UNSUPPORTED, "rope_scaling", "extrapolation_factor");
}

int main(void) {
    (void)st_write_weights;
    T_RUN(test_mxfp4);
    T_RUN(test_bf16);
    T_RUN(test_refused);
    T_DONE();
}
