/* Hugging Face folders: config.json + safetensors written here by hand
 * (one file, or shards with model.safetensors.index.json; BF16, F16, F32),
 * loaded with slm_model_open(DIR), against the plain reference forward and
 * against the same weights as a GGUF file whose Q/K rows are permuted to the
 * adjacent-pair RoPE layout (as llama.cpp's converter does) with rope_neox =
 * 0. Malformed safetensors headers, configs and indexes are refused with
 * messages that name the file and the field. */
#include <math.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#include "common/dtype.h"
#include "compiler/compiler.h"
#include "format/gguf.h"
#include "format/model.h"
#include "format/safetensors.h"
#include "ref_forward.h"
#include "runtime/runtime.h"
#include "staticlm.h"
#include "t.h"
#include "rig.h"
#include "st_write.h"
#include "hf_twin.h"

/* ---- synthetic HF models -------------------------------------------------- */

typedef struct hfm {
    const char *type;  /* model_type */
    int D, F, L, H, KV, V, ctx;
    int tied, bias, window, llama3;
    float linear, theta;
    const char *mat, *vec; /* dtypes of matrices and of norm/bias vectors */
    int shards;        /* 0: model.safetensors; n: n shards + index */
    int pad;           /* data area alignment (write_st's pad_to) */
    int peaked;        /* lm_head row r = 4 x embed row perm(r) + noise */
} hfm;

static void make_weights(weights *w, const hfm *s, uint64_t seed) {
    g_rng = seed;
    memset(w, 0, sizeof *w);
    const int hd = s->D / s->H, kvd = hd * s->KV;
    const float sd = 1.0f / sqrtf((float)s->D), sh = 1.0f / sqrtf((float)s->F);
    float *emb = add_w(w, "model.embed_tokens.weight", s->mat, s->V, s->D, 1.0f, 0.0f);
    for (int l = 0; l < s->L; l++) {
        char n[96];
#define NM(x) (snprintf(n, sizeof n, "model.layers.%d." x, l), n)
        add_w(w, NM("input_layernorm.weight"), s->vec, 0, s->D, 0.1f, 1.0f);
        add_w(w, NM("self_attn.q_proj.weight"), s->mat, s->D, s->D, sd, 0.0f);
        add_w(w, NM("self_attn.k_proj.weight"), s->mat, kvd, s->D, sd, 0.0f);
        add_w(w, NM("self_attn.v_proj.weight"), s->mat, kvd, s->D, sd, 0.0f);
        if (s->bias) {
            add_w(w, NM("self_attn.q_proj.bias"), s->vec, 0, s->D, 0.5f, 0.0f);
            add_w(w, NM("self_attn.k_proj.bias"), s->vec, 0, kvd, 0.5f, 0.0f);
            add_w(w, NM("self_attn.v_proj.bias"), s->vec, 0, kvd, 0.5f, 0.0f);
        }
        add_w(w, NM("self_attn.o_proj.weight"), s->mat, s->D, s->D, sd, 0.0f);
        add_w(w, NM("post_attention_layernorm.weight"), s->vec, 0, s->D, 0.1f, 1.0f);
        add_w(w, NM("mlp.gate_proj.weight"), s->mat, s->F, s->D, sd, 0.0f);
        add_w(w, NM("mlp.up_proj.weight"), s->mat, s->F, s->D, sd, 0.0f);
        add_w(w, NM("mlp.down_proj.weight"), s->mat, s->D, s->F, sh, 0.0f);
#undef NM
    }
    add_w(w, "model.norm.weight", s->vec, 0, s->D, 0.1f, 1.0f);
    if (!s->tied) {
        float *head = add_w(w, "lm_head.weight", s->mat, s->V, s->D, 2.0f * sd, 0.0f);
        if (s->peaked)
            for (int r = 0; r < s->V; r++)
                for (int c = 0; c < s->D; c++)
                    head[r * s->D + c] =
                        round_to(s->mat, 4.0f * emb[((r * 37 + 11) % s->V) * s->D + c] + 2.0f * sd * nrand());
    }
}

static void write_config(const char *dir, const hfm *s, const char *extra) {
    char path[512], buf[2048];
    int n = snprintf(buf, sizeof buf,
                     "{\n  \"architectures\": [\"X\"],\n  \"model_type\": \"%s\",\n  \"hidden_size\": %d,\n"
                     "  \"intermediate_size\": %d,\n  \"num_hidden_layers\": %d,\n  \"num_attention_heads\": %d,\n"
                     "  \"num_key_value_heads\": %d,\n  \"vocab_size\": %d,\n  \"max_position_embeddings\": %d,\n"
                     "  \"rope_theta\": %.1f,\n  \"rms_norm_eps\": 1e-05,\n  \"hidden_act\": \"silu\",\n"
                     "  \"torch_dtype\": \"bfloat16\",\n  \"tie_word_embeddings\": %s",
                     s->type, s->D, s->F, s->L, s->H, s->KV, s->V, s->ctx, (double)s->theta, s->tied ? "true" : "false");
    if (!strcmp(s->type, "mistral"))
        n += snprintf(buf + n, sizeof buf - (size_t)n, ",\n  \"sliding_window\": %s", s->window ? "" : "null");
    if (!strcmp(s->type, "mistral") && s->window) n += snprintf(buf + n, sizeof buf - (size_t)n, "%d", s->window);
    if (!strcmp(s->type, "qwen2"))
        n += snprintf(buf + n, sizeof buf - (size_t)n,
                      ",\n  \"use_sliding_window\": %s,\n  \"sliding_window\": %d,\n  \"max_window_layers\": %d",
                      s->window ? "true" : "false", s->window ? s->window : 4096, s->window ? 0 : s->L);
    if (s->llama3)
        n += snprintf(buf + n, sizeof buf - (size_t)n,
                      ",\n  \"rope_scaling\": {\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                      "\"original_max_position_embeddings\": 64, \"rope_type\": \"llama3\"}");
    else if (s->linear > 1.0f)
        n += snprintf(buf + n, sizeof buf - (size_t)n, ",\n  \"rope_scaling\": {\"type\": \"linear\", \"factor\": %.1f}",
                      (double)s->linear);
    if (extra) n += snprintf(buf + n, sizeof buf - (size_t)n, ",\n  %s", extra);
    n += snprintf(buf + n, sizeof buf - (size_t)n, "\n}\n");
    snprintf(path, sizeof path, "%s/config.json", dir);
    t_write_file(path, buf, (size_t)n);
}

static int write_hf(const char *dir, const hfm *s, const weights *w) {
    st_rm_dir(dir);
    mkdir(dir, 0755);
    write_config(dir, s, NULL);
    return st_write_weights(dir, w->it, w->n, s->shards, s->pad);
}

/* Llama 3 factors, independently (double precision). */
static double llama3_ref(int i, int hd, double base, double factor, double lo, double hi, double old) {
    double freq = pow(base, -2.0 * i / hd), wl = 2 * M_PI / freq;
    if (wl < old / hi) return 1.0;
    if (wl > old / lo) return factor;
    double sm = (old / wl - lo) / (hi - lo);
    return 1.0 / ((1 - sm) / factor + sm);
}

/* The same weights as GGUF: Q/K rows (and biases) permuted to adjacent pairs
 * unless neox (qwen2 keeps rotate-half), matrices in the same dtype,
 * vectors f32. */
static int write_gguf(const char *path, const hfm *s, const weights *w) {
    const int hd = s->D / s->H, kvd = hd * s->KV;
    const int neox = !strcmp(s->type, "qwen2");
    slm_gguf_writer *g = slm_gguf_writer_new();
    char k[96];
#define K(x) (snprintf(k, sizeof k, "%s." x, s->type), k)
    slm_gguf_set_str(g, "general.architecture", s->type);
    slm_gguf_set_u32(g, K("embedding_length"), (uint32_t)s->D);
    slm_gguf_set_u32(g, K("feed_forward_length"), (uint32_t)s->F);
    slm_gguf_set_u32(g, K("block_count"), (uint32_t)s->L);
    slm_gguf_set_u32(g, K("attention.head_count"), (uint32_t)s->H);
    slm_gguf_set_u32(g, K("attention.head_count_kv"), (uint32_t)s->KV);
    slm_gguf_set_u32(g, K("context_length"), (uint32_t)s->ctx);
    slm_gguf_set_u32(g, K("vocab_size"), (uint32_t)s->V);
    slm_gguf_set_f32(g, K("rope.freq_base"), s->theta);
    slm_gguf_set_f32(g, K("attention.layer_norm_rms_epsilon"), 1e-5f);
    if (s->window) slm_gguf_set_u32(g, K("attention.sliding_window"), (uint32_t)s->window);
    if (s->linear > 1.0f) {
        slm_gguf_set_str(g, K("rope.scaling.type"), "linear");
        slm_gguf_set_f32(g, K("rope.scaling.factor"), s->linear);
    }
#undef K
    void *keep[256];
    int nk = 0;
    float *rf = NULL;
    if (s->llama3) {
        rf = malloc(sizeof(float) * (size_t)(hd / 2));
        for (int i = 0; i < hd / 2; i++) rf[i] = (float)llama3_ref(i, hd, s->theta, 8, 1, 4, 64);
        int64_t ne[1] = {hd / 2};
        slm_gguf_add_tensor(g, "rope_freqs.weight", SLM_F32, 1, ne, rf, sizeof(float) * (uint64_t)(hd / 2));
    }
    for (int i = 0; i < w->n; i++) {
        const st_item *t = &w->it[i];
        char gn[64];
        int l = -1;
        const char *rest = t->name;
        if (!strncmp(t->name, "model.layers.", 13)) {
            l = atoi(t->name + 13);
            rest = strchr(t->name + 13, '.') + 1;
        }
        static const char *const map[][2] = {
            {"model.embed_tokens.weight", "token_embd.weight"}, {"model.norm.weight", "output_norm.weight"},
            {"lm_head.weight", "output.weight"}, {"input_layernorm.weight", "attn_norm.weight"},
            {"self_attn.q_proj.weight", "attn_q.weight"}, {"self_attn.k_proj.weight", "attn_k.weight"},
            {"self_attn.v_proj.weight", "attn_v.weight"}, {"self_attn.q_proj.bias", "attn_q.bias"},
            {"self_attn.k_proj.bias", "attn_k.bias"}, {"self_attn.v_proj.bias", "attn_v.bias"},
            {"self_attn.o_proj.weight", "attn_output.weight"}, {"post_attention_layernorm.weight", "ffn_norm.weight"},
            {"mlp.gate_proj.weight", "ffn_gate.weight"}, {"mlp.up_proj.weight", "ffn_up.weight"},
            {"mlp.down_proj.weight", "ffn_down.weight"}};
        const char *to = NULL;
        for (size_t j = 0; j < sizeof map / sizeof map[0]; j++)
            if (!strcmp(rest, map[j][0])) to = map[j][1];
        if (l >= 0) snprintf(gn, sizeof gn, "blk.%d.%s", l, to);
        else snprintf(gn, sizeof gn, "%s", to);
        int64_t rows = t->n_dims == 2 ? t->shape[0] : 1, cols = t->n_dims == 2 ? t->shape[1] : t->shape[0];
        float *f = malloc(sizeof(float) * (size_t)(rows * cols));
        memcpy(f, t->f, sizeof(float) * (size_t)(rows * cols));
        int isq = strstr(rest, "q_proj") != NULL, isk = strstr(rest, "k_proj") != NULL;
        if (!neox && (isq || isk)) { /* llama.cpp's permute: row h*hd + 2i + j <- h*hd + j*hd/2 + i */
            int heads = isq ? s->H : s->KV;
            (void)kvd;
            for (int h = 0; h < heads; h++)
                for (int i2 = 0; i2 < hd / 2; i2++)
                    for (int j = 0; j < 2; j++)
                        memcpy(f + ((size_t)h * hd + 2 * i2 + j) * cols, t->f + ((size_t)h * hd + j * hd / 2 + i2) * cols,
                               sizeof(float) * (size_t)cols);
        }
        hf_twin_add(g, gn, t, f, keep, &nk);
    }
    const int ok = hf_twin_write(g, path, keep, nk);
    free(rf);
    return ok;
}

/* ---- running ----------------------------------------------------------------- */

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}


/* Logits of a folder and of its GGUF twin at every position, against the
 * reference and against each other; then greedy decoding from both. */
static void check_model(const char *name, const hfm *s, uint64_t seed, int greedy_steps) {
    char dir[256], gg[256];
    snprintf(dir, sizeof dir, "hf_%s", name);
    snprintf(gg, sizeof gg, "hf_%s.gguf", name);
    weights w;
    make_weights(&w, s, seed);
    if (!write_hf(dir, s, &w) || !write_gguf(gg, s, &w)) {
        CHECKF(0, "%s: could not write the test files", name);
        free_weights(&w);
        return;
    }
    enum { N = 24 };
    int32_t ids[N];
    g_rng = seed + 1;
    for (int i = 0; i < N; i++) ids[i] = (int32_t)(urand() * s->V);
    rig a, b;
    int oka = rig_open(&a, dir, 8, N + greedy_steps + 8), okb = oka && rig_open(&b, gg, 8, N + greedy_steps + 8);
    if (oka && okb) {
        const slm_model_config *c = &a.m.cfg;
        CHECKF(c->rope_neox == 1 && b.m.cfg.rope_neox == !strcmp(s->type, "qwen2"), "%s: neox %d / %d", name,
               c->rope_neox, b.m.cfg.rope_neox);
        CHECKF(c->tied_embeddings == s->tied && c->qkv_bias == s->bias && c->sliding_window == s->window &&
                   c->rope_freqs == s->llama3 && c->rope_scale == (s->linear > 1 ? s->linear : 1.0f) &&
                   c->n_kv_heads == s->KV && c->context_len == s->ctx && !strcmp(c->arch, s->type),
               "%s: config not as written", name);
        CHECK(a.m.kind == SLM_MODEL_HF && a.m.gguf == NULL);
        CHECKF(a.m.tokenizer_json[0] == 0, "%s: tokenizer.json '%s'", name, a.m.tokenizer_json);
        if (s->llama3) { /* the factors, as llama.cpp's converter computes them */
            const slm_tensor *rf = slm_model_tensor(&a.m, "rope_freqs.weight");
            const int hd = s->D / s->H;
            CHECK(rf && rf->type == SLM_F32 && rf->ne[0] == hd / 2);
            int n_one = 0, n_full = 0, n_mid = 0;
            for (int i = 0; rf && i < hd / 2; i++) {
                float v;
                memcpy(&v, (const float *)rf->data + i, 4);
                double want = llama3_ref(i, hd, s->theta, 8, 1, 4, 64);
                CHECKF(fabs(v - want) <= 1e-5 * want, "%s: rope_freqs[%d] = %.8g, want %.8g", name, i, (double)v, want);
                n_one += want == 1.0, n_full += want == 8.0, n_mid += want != 1.0 && want != 8.0;
            }
            CHECKF(n_one && n_full && n_mid, "%s: factors %d/%d/%d do not cover the three bands", name, n_one, n_mid,
                   n_full);
        }
        /* the norm vectors are f32 and inside the mapping */
        const slm_tensor *nt = slm_model_tensor(&a.m, "blk.0.attn_norm.weight");
        CHECK(nt && nt->type == SLM_F32 && (const uint8_t *)nt->data >= (const uint8_t *)a.m.map.data &&
              (const uint8_t *)nt->data + nt->nbytes <= (const uint8_t *)a.m.map.data + a.m.map.size);
        const int V = s->V;
        float *ref = malloc(sizeof(float) * (size_t)N * V), *refg = malloc(sizeof(float) * (size_t)N * V);
        CHECK(ref_forward(&a.m, ids, N, ref) && ref_forward(&b.m, ids, N, refg));
        slm_err err = {0};
        double e_ref = 0, e_gg = 0, e_refs = rel_err(ref, refg, N * V);
        CHECK(slm_rt_prefill(&a.rt, ids, 5, &err) == SLM_OK && slm_rt_prefill(&b.rt, ids, 5, &err) == SLM_OK);
        for (int p = 4; p < N; p++) {
            if (p > 4) CHECK(slm_rt_decode(&a.rt, ids[p], &err) == SLM_OK && slm_rt_decode(&b.rt, ids[p], &err) == SLM_OK);
            e_ref = fmax(e_ref, rel_err(a.rt.logits, ref + (size_t)p * V, V));
            e_gg = fmax(e_gg, rel_err(a.rt.logits, b.rt.logits, V));
        }
        /* the references differ only by the llama3 factors (f32 here, f64 in the GGUF twin) */
        CHECKF(e_ref < 1e-4 && e_gg < 1e-4 && e_refs < 1e-6, "%s: logits rel err %.3g vs reference, %.3g vs GGUF, "
               "references %.3g", name, e_ref, e_gg, e_refs);
        fprintf(stderr, "  %s: rel err %.2g vs reference, %.2g vs permuted GGUF\n", name, e_ref, e_gg);
        free(ref);
        free(refg);
        if (greedy_steps) {
            int same = 0, distinct = 0, seen[4096] = {0};
            for (int i = 0; i < greedy_steps; i++) {
                int ta = argmax(a.rt.logits, V), tb = argmax(b.rt.logits, V);
                if (ta != tb) break;
                same++;
                distinct += !seen[ta]++;
                if (slm_rt_decode(&a.rt, ta, &err) || slm_rt_decode(&b.rt, tb, &err)) break;
            }
            CHECKF(same == greedy_steps, "%s: greedy tokens agree for %d of %d steps", name, same, greedy_steps);
            CHECKF(distinct >= 6, "%s: only %d distinct greedy tokens", name, distinct);
        }
    }
    if (oka) rig_close(&a);
    if (okb) rig_close(&b);
    free_weights(&w);
    st_rm_dir(dir);
    unlink(gg);
}

/* llama, Llama 3 scaling, BF16 everywhere (norms converted), 3 shards */
static void test_llama3_bf16_sharded(void) {
    hfm s = {"llama", 64, 96, 2, 4, 2, 256, 128, 0, 0, 0, 1, 1.0f, 500000.0f, "BF16", "BF16", 3, 0, 1};
    check_model("llama3", &s, 11, 32);
}

/* llama, linear scaling, F16 matrices, F16 norms, single file */
static void test_llama_f16_linear(void) {
    hfm s = {"llama", 64, 128, 2, 4, 4, 200, 128, 0, 0, 0, 0, 4.0f, 10000.0f, "F16", "F16", 0, 0, 1};
    check_model("llama_f16", &s, 12, 32);
}

/* mistral, sliding window 6 over 24 tokens, F16, 2 shards */
static void test_mistral_window(void) {
    hfm s = {"mistral", 64, 96, 2, 8, 2, 256, 128, 0, 0, 6, 0, 1.0f, 10000.0f, "F16", "BF16", 2, 0, 1};
    check_model("mistral", &s, 13, 32);
}

/* qwen2: Q/K/V bias, tied embeddings, F32 with a data area at 8k + 2 (every
 * F32 tensor misaligned: copied) */
static void test_qwen2_bias_tied(void) {
    hfm s = {"qwen2", 64, 96, 2, 4, 1, 160, 128, 1, 1, 0, 0, 1.0f, 1000000.0f, "F32", "F32", 0, 2, 0};
    check_model("qwen2", &s, 14, 0);
    hfm b = {"qwen2", 64, 96, 2, 4, 2, 160, 128, 1, 1, 0, 0, 1.0f, 1000000.0f, "BF16", "BF16", 2, 0, 0};
    check_model("qwen2_bf16", &b, 15, 0);
}

/* The folder's tokenizer.json path is exposed; a trailing slash works. */
static void test_tokenizer_path_and_slash(void) {
    hfm s = {"llama", 32, 64, 1, 2, 2, 64, 64, 1, 0, 0, 0, 1.0f, 10000.0f, "BF16", "BF16", 0, 0, 0};
    weights w;
    make_weights(&w, &s, 5);
    write_hf("hf_tok", &s, &w);
    t_write_file("hf_tok/tokenizer.json", "{}", 2);
    slm_model_file m;
    slm_err err = {0};
    CHECKF(slm_model_open(&m, "hf_tok/", &err) == SLM_OK, "%s", err.msg);
    CHECKF(!strcmp(m.tokenizer_json, "hf_tok/tokenizer.json"), "tokenizer_json '%s'", m.tokenizer_json);
    CHECK(m.cfg.tied_embeddings == 1 && !slm_model_tensor(&m, "output.weight"));
    slm_model_close(&m);
    free_weights(&w);
    st_rm_dir("hf_tok");
}

/* ---- malformed ---------------------------------------------------------------- */

/* A safetensors image from a header string and n data bytes. */
static uint8_t *st_image(const char *header, uint64_t hlen_field, size_t data, size_t *size) {
    size_t hl = strlen(header);
    uint8_t *b = calloc(1, 8 + hl + data);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(hlen_field >> (8 * i));
    memcpy(b + 8, header, hl);
    *size = 8 + hl + data;
    return b;
}

static void expect_st(const char *header, int64_t hlen_field, size_t data, slm_status want, const char *w1,
                      const char *w2) {
    size_t size;
    uint8_t *b = st_image(header, hlen_field < 0 ? strlen(header) : (uint64_t)hlen_field, data, &size);
    slm_st st;
    slm_err err = {0};
    slm_status s = slm_st_parse(&st, b, size, "bad.safetensors", &err);
    CHECKF(s == want, "%s: status %d, want %d (%s)", header, s, want, err.msg);
    CHECKF(s == SLM_OK || (!strncmp(err.msg, "bad.safetensors: ", 17) && (!w1 || strstr(err.msg, w1)) &&
                           (!w2 || strstr(err.msg, w2))),
           "%s: message '%s' (want '%s', '%s')", header, err.msg, w1 ? w1 : "", w2 ? w2 : "");
    if (s == SLM_OK) slm_st_free(&st);
    free(b);
}

static void test_safetensors_malformed(void) {
    const char *ok = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                     "\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[16,22]},\"__metadata__\":{\"x\":\"y\"}}  ";
    expect_st(ok, -1, 22, SLM_OK, NULL, NULL);
    {   /* the good one, parsed: shapes, types, offsets */
        size_t size;
        uint8_t *b = st_image(ok, strlen(ok), 22, &size);
        slm_st st;
        slm_err err = {0};
        CHECK(slm_st_parse(&st, b, size, "ok.safetensors", &err) == SLM_OK);
        const slm_st_tensor *t = slm_st_find(&st, "b");
        CHECK(st.n_tensors == 2 && t && t->type == SLM_BF16 && t->n_dims == 1 && t->shape[0] == 3 &&
              t->data == b + 8 + strlen(ok) + 16);
        slm_st_free(&st);
        free(b);
    }
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]", -1, 16, SLM_ERR_FORMAT, "invalid JSON",
              NULL);
    expect_st("{\"a\":1} x", -1, 0, SLM_ERR_FORMAT, "after the JSON", NULL);
    expect_st("[1,2]", -1, 0, SLM_ERR_FORMAT, "header", NULL);
    expect_st(ok, 100000, 22, SLM_ERR_FORMAT, "header length", "past the end");
    expect_st(ok, (int64_t)1 << 62, 22, SLM_ERR_FORMAT, "header length", NULL);
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}",
              -1, 20, SLM_ERR_FORMAT, "overlaps", "data_offsets");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}", -1, 20, SLM_ERR_FORMAT,
              "tensor 'a'", "beyond the data area");
    expect_st("{\"a\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,16]}}", -1, 20, SLM_ERR_FORMAT,
              "tensor 'a'", "needs 8");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,16]}}", -1, 20,
              SLM_ERR_FORMAT, "tensor 'a'", "overflow");
    expect_st("{\"a\":{\"dtype\":\"Q9\",\"shape\":[4],\"data_offsets\":[0,16]}}", -1, 20, SLM_ERR_FORMAT,
              "tensor 'a'", "dtype");
    expect_st("{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}", -1, 20, SLM_ERR_UNSUPPORTED,
              "tensor 'a'", "F64");
    /* integer buffers (BERT's position_ids) parse, sized 8 bytes an element; a loader skips them */
    expect_st("{\"a\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}", -1, 20, SLM_OK, NULL, NULL);
    expect_st("{\"a\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,8]}}", -1, 20, SLM_ERR_FORMAT,
              "tensor 'a'", NULL);
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}", -1, 20, SLM_ERR_FORMAT, "tensor 'a'",
              "shape");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", -1, 20, SLM_ERR_FORMAT, "tensor 'a'",
              "shape");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4.5,8]}}", -1, 20, SLM_ERR_FORMAT, "tensor 'a'",
              "data_offsets");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", -1, 20, SLM_ERR_FORMAT, "tensor 'a'",
              "data_offsets");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", -1, 20, SLM_ERR_FORMAT, "tensor 'a'", "data_offsets");
    expect_st("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 20, SLM_ERR_FORMAT, "tensor 'a'", "dtype");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]}}", -1, 20, SLM_ERR_UNSUPPORTED,
              "tensor 'a'", "dimensions");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
              -1, 20, SLM_ERR_FORMAT, "tensor 'a'", "twice");
    expect_st("{\"a\":7}", -1, 0, SLM_ERR_FORMAT, "tensor 'a'", "object");
    size_t sz;
    uint8_t *b = st_image("", 0, 0, &sz);
    slm_st st;
    slm_err err = {0};
    CHECK(slm_st_parse(&st, b, 5, "short.safetensors", &err) == SLM_ERR_FORMAT && strstr(err.msg, "short.safetensors"));
    free(b);
}


static void test_folder_malformed(void) {
    hfm s = {"llama", 32, 64, 1, 2, 2, 64, 64, 0, 0, 0, 0, 1.0f, 10000.0f, "BF16", "BF16", 2, 0, 0};
    weights w;
    make_weights(&w, &s, 3);
    const char *d = "hf_bad";
    char p[256];
    write_hf(d, &s, &w);
    expect_folder(d, SLM_OK, NULL, NULL);

    /* config.json */
    char cfg[2048];
    snprintf(p, sizeof p, "%s/config.json", d);
    size_t n;
    char *orig = t_read_file(p, &n);
    snprintf(cfg, sizeof cfg, "%s", orig);
    char *hs = strstr(cfg, "\"hidden_size\"");
    memcpy(hs, "\"hidden_sizX\"", 13);
    t_write_file(p, cfg, strlen(cfg));
    expect_folder(d, SLM_ERR_FORMAT, "hf_bad/config.json", "'hidden_size'");
    snprintf(cfg, sizeof cfg, "%s", orig);
    char *mt = strstr(cfg, "\"llama\"");
    memcpy(mt, "\"gemma\"", 7);
    t_write_file(p, cfg, strlen(cfg));
    expect_folder(d, SLM_ERR_UNSUPPORTED, "'gemma' is not supported", "llama, mistral, qwen2");
    t_write_file(p, "{\"model_type\": \"llama\",", 23);
    expect_folder(d, SLM_ERR_FORMAT, "hf_bad/config.json", "JSON");
    snprintf(cfg, sizeof cfg, "%.*s, \"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 4}}", (int)(strrchr(orig, '}') - orig), orig);
    t_write_file(p, cfg, strlen(cfg));
    expect_folder(d, SLM_ERR_UNSUPPORTED, "rope_scaling", "'dynamic' is not supported");
    /* head_dim other than hidden / heads is read (Mistral-Nemo); these tensors do not fit it */
    snprintf(cfg, sizeof cfg, "%.*s, \"head_dim\": 8}", (int)(strrchr(orig, '}') - orig), orig);
    t_write_file(p, cfg, strlen(cfg));
    expect_folder(d, SLM_ERR_FORMAT, "blk.0.attn_q.weight", "the config needs [32, 16]");
    snprintf(cfg, sizeof cfg, "%.*s, \"head_dim\": 7}", (int)(strrchr(orig, '}') - orig), orig);
    t_write_file(p, cfg, strlen(cfg));
    expect_folder(d, SLM_ERR_FORMAT, "hf_bad/config.json", "'head_dim'");
    snprintf(cfg, sizeof cfg, "%.*s, \"head_dim\": \"16\"}", (int)(strrchr(orig, '}') - orig), orig);
    t_write_file(p, cfg, strlen(cfg));
    expect_folder(d, SLM_ERR_FORMAT, "'head_dim': expected an integer", NULL);
    snprintf(cfg, sizeof cfg, "%s", orig);
    memcpy(strstr(cfg, "\"num_key_value_heads\": 2"), "\"num_key_value_heads\": 0", 24);
    t_write_file(p, cfg, strlen(cfg));
    expect_folder(d, SLM_ERR_FORMAT, "num_key_value_heads", "out of range");
    t_write_file(p, orig, n);
    expect_folder(d, SLM_OK, NULL, NULL);

    /* the index */
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", d);
    char *idx = t_read_file(p, &n);
    char *bad = malloc(n + 64);
    memcpy(bad, idx, n + 1);
    char *sh = strstr(bad, "model-00002-of-00002");
    memcpy(sh, "model-00009", 11);
    t_write_file(p, bad, n);
    expect_folder(d, SLM_ERR_FORMAT, "model.safetensors.index.json", "model-00009-of-00002.safetensors");
    memcpy(bad, idx, n + 1);
    sh = strstr(bad, "model-00002-of-00002");
    memcpy(sh, "../mod", 6); /* a name outside the folder */
    t_write_file(p, bad, n);
    expect_folder(d, SLM_ERR_FORMAT, "weight_map", NULL);
    /* a tensor the index places in the wrong shard */
    memcpy(bad, idx, n + 1);
    sh = strstr(bad, "model-00002-of-00002");
    memcpy(sh, "model-00001", 11);
    t_write_file(p, bad, n);
    expect_folder(d, SLM_ERR_FORMAT, "is not in shard", NULL);
    t_write_file(p, "{\"weight_map\": [1]}", 19);
    expect_folder(d, SLM_ERR_FORMAT, "weight_map", NULL);
    t_write_file(p, idx, n);
    expect_folder(d, SLM_OK, NULL, NULL);

    /* a shard: a bad header; an unknown tensor */
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", d);
    char *st = t_read_file(p, &n);
    char *hb = malloc(n);
    memcpy(hb, st, n);
    hb[8 + 1] = '#';
    t_write_file(p, hb, n);
    expect_folder(d, SLM_ERR_FORMAT, "hf_bad/model-00002-of-00002.safetensors", "JSON");
    unlink(p);
    expect_folder(d, SLM_ERR_FORMAT, "model-00002-of-00002.safetensors", "cannot be opened");

    /* neither file */
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", d);
    unlink(p);
    expect_folder(d, SLM_ERR_FORMAT, "neither model.safetensors", NULL);
    expect_folder("hf_does_not_exist_dir/", SLM_ERR_IO, NULL, NULL);
    mkdir("hf_empty", 0755);
    expect_folder("hf_empty", SLM_ERR_FORMAT, "hf_empty/config.json", NULL);
    rmdir("hf_empty");

    free(orig);
    free(idx);
    free(bad);
    free(st);
    free(hb);
    free_weights(&w);
    st_rm_dir(d);
}

/* A missing norm: validation names the GGUF tensor. */
static void test_missing_tensor(void) {
    hfm s = {"qwen2", 32, 64, 1, 2, 2, 64, 64, 1, 1, 0, 0, 1.0f, 10000.0f, "BF16", "BF16", 0, 0, 0};
    weights w;
    make_weights(&w, &s, 4);
    for (int i = 0; i < w.n; i++) /* drop k_proj.bias */
        if (strstr(w.it[i].name, "k_proj.bias")) {
            free(w.f[i]);
            memmove(&w.it[i], &w.it[i + 1], sizeof w.it[0] * (size_t)(w.n - i - 1));
            memmove(&w.f[i], &w.f[i + 1], sizeof w.f[0] * (size_t)(w.n - i - 1));
            w.n--;
            break;
        }
    write_hf("hf_miss", &s, &w);
    expect_folder("hf_miss", SLM_ERR_FORMAT, "hf_miss", "blk.0.attn_k.bias");
    /* a tensor we would ignore at our peril (an output projection bias) */
    add_w(&w, "model.layers.0.self_attn.o_proj.bias", "BF16", 0, 32, 1.0f, 0.0f);
    write_hf("hf_miss", &s, &w);
    expect_folder("hf_miss", SLM_ERR_UNSUPPORTED, "hf_miss/model.safetensors", "model.layers.0.self_attn.o_proj.bias");
    free_weights(&w);
    st_rm_dir("hf_miss");
}

/* config.json alone */
static void expect_cfg(const char *json, slm_status want, const char *w1) {
    slm_model_config c;
    float *f = NULL;
    slm_err err = {0};
    slm_status s = slm_hf_parse_config(&c, &f, json, strlen(json), "x/config.json", &err);
    CHECKF(s == want && (s == SLM_OK || (strstr(err.msg, "x/config.json: ") == err.msg && (!w1 || strstr(err.msg, w1)))),
           "%s: status %d (want %d), '%s'", json, s, want, err.msg);
    free(f);
}

static void test_config_keys(void) {
#define BASE "\"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, " \
             "\"vocab_size\": 100, \"max_position_embeddings\": 128"
    slm_model_config c;
    float *f = NULL;
    slm_err err = {0};
    const char *q = "{\"model_type\": \"qwen2\", " BASE ", \"use_sliding_window\": true, \"sliding_window\": 16, "
                    "\"max_window_layers\": 0}";
    CHECK(slm_hf_parse_config(&c, &f, q, strlen(q), "q", &err) == SLM_OK && c.sliding_window == 16 && c.qkv_bias &&
          c.rope_neox && c.n_kv_heads == 4 && c.rope_base == 10000.0f && f == NULL);
    const char *m = "{\"model_type\": \"mistral\", " BASE ", \"sliding_window\": 0, \"rms_norm_eps\": 1e-5}";
    CHECK(slm_hf_parse_config(&c, &f, m, strlen(m), "m", &err) == SLM_OK && c.sliding_window == 0 && !c.qkv_bias &&
          c.norm_eps == 1e-5f);
    /* llama3 with the converter's defaults (factor 8, 1, 4, 8192) */
    const char *l = "{\"model_type\": \"llama\", " BASE ", \"rope_theta\": 500000, \"rope_scaling\": {\"rope_type\": \"llama3\"}}";
    CHECK(slm_hf_parse_config(&c, &f, l, strlen(l), "l", &err) == SLM_OK && c.rope_freqs && f);
    for (int i = 0; f && i < 8; i++)
        CHECKF(fabs(f[i] - llama3_ref(i, 16, 500000, 8, 1, 4, 8192)) < 1e-5 * f[i], "factor %d: %g", i, (double)f[i]);
    free(f);
    expect_cfg("{\"model_type\": \"qwen2\", " BASE ", \"use_sliding_window\": true, \"sliding_window\": 16, "
               "\"max_window_layers\": 1}", SLM_ERR_UNSUPPORTED, "max_window_layers");
    expect_cfg("{\"model_type\": \"llama\", " BASE ", \"hidden_act\": \"gelu\"}", SLM_ERR_UNSUPPORTED, "hidden_act");
    expect_cfg("{\"model_type\": \"llama\", " BASE ", \"attention_bias\": true}", SLM_ERR_UNSUPPORTED, "attention_bias");
    expect_cfg("{\"model_type\": \"llama\", " BASE ", \"tie_word_embeddings\": 1}", SLM_ERR_FORMAT, "tie_word_embeddings");
    expect_cfg("{\"model_type\": \"llama\", " BASE ", \"rope_scaling\": {\"type\": \"dynamic\"}}", SLM_ERR_UNSUPPORTED,
               "dynamic");
    expect_cfg("{\"model_type\": \"llama\", " BASE ", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 0.5}}",
               SLM_ERR_FORMAT, "factor");
    expect_cfg("{\"model_type\": \"llama\", " BASE ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"low_freq_factor\": 4}}",
               SLM_ERR_FORMAT, "llama3");
    expect_cfg("{\"model_type\": \"llama\", " BASE ", \"rms_norm_eps\": -1}", SLM_ERR_FORMAT, "rms_norm_eps");
    expect_cfg("{\"model_type\": 3, " BASE "}", SLM_ERR_FORMAT, "model_type");
    expect_cfg("{" BASE "}", SLM_ERR_FORMAT, "model_type");
    expect_cfg("{\"model_type\": \"llama\", \"vocab_size\": 1e12, " BASE "}", SLM_ERR_FORMAT, "vocab_size");
    expect_cfg("[]", SLM_ERR_FORMAT, "object");
#undef BASE
}

/* GPT-2's bytes-to-unicode map: the character of byte b, UTF-8. */
static void byte_char_utf8(int b, char out[3]) {
    int cp = b;
    if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) {
        int n = 0;
        for (int x = 0; x < b; x++)
            if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) n++;
        cp = 256 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        out[2] = 0;
    }
}

/* The prompt pieces slm_generate echoes, appended to ud (64 bytes). */
static int collect_prompt(void *ud, int id, const char *piece, int is_prompt) {
    (void)id;
    if (is_prompt == 1 && strlen((char *)ud) + strlen(piece) < 64) strcat((char *)ud, piece);
    return 0;
}

/* A folder run through the public API: slm_load(DIR) takes the weights
 * from safetensors and the tokenizer from tokenizer.json. */
static void test_folder_end_to_end(void) {
    hfm s = {"llama", 32, 64, 1, 2, 2, 300, 128, 1, 0, 0, 0, 1.0f, 10000.0f, "BF16", "BF16", 0, 0, 0};
    weights w;
    make_weights(&w, &s, 9);
    CHECK(write_hf("hf_e2e", &s, &w));
    /* byte-level BPE: 256 byte tokens, merges to "hello", an end token */
    char *js = malloc(1 << 16), *o = js;
    o += sprintf(o, "{\"version\": \"1.0\", \"added_tokens\": [{\"id\": 261, \"content\": \"<|end|>\", "
                    "\"special\": true}], \"normalizer\": null, \"pre_tokenizer\": {\"type\": \"ByteLevel\", "
                    "\"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": true}, \"decoder\": "
                    "{\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {");
    for (int b = 0; b < 256; b++) {
        char c[3];
        byte_char_utf8(b, c);
        o += sprintf(o, "%s\"%s%s\": %d", b ? ", " : "", (c[0] == '"' || c[0] == '\\') ? "\\" : "", c, b);
    }
    o += sprintf(o, ", \"he\": 256, \"ll\": 257, \"hell\": 258, \"hello\": 259, \"\\u0120hello\": 260}, "
                    "\"merges\": [\"h e\", \"l l\", \"he ll\", \"hell o\", \"\\u0120 hello\"]}}");
    CHECK(t_write_file("hf_e2e/tokenizer.json", js, strlen(js)));
    free(js);
    slm_options opt = slm_default_options();
    opt.max_prompt_len = 16;
    opt.min_response_len = 16;
    slm_engine *e = NULL;
    slm_status st = slm_load(&e, "hf_e2e", &opt);
    CHECKF(st == SLM_OK, "load: %s", slm_last_error(e));
    if (st == SLM_OK) {
        int32_t ids[8];
        int n = slm_tokenize(e, "hello hello", 0, ids, 8);
        CHECKF(n == 2 && ids[0] == 259 && ids[1] == 260, "tokenize: %d ids", n);
        CHECK(strcmp(slm_token_piece(e, ids[0], ids[1]), " hello") == 0);
        slm_sampling g = {0};
        slm_gen_stats gs;
        CHECK(slm_generate(e, "hello", 8, &g, 1, NULL, NULL, &gs) == SLM_OK);
        CHECK(gs.n_generated == 8);
        /* no BOS in this vocabulary: the echo starts at the first token */
        char echo[64] = "";
        CHECK(slm_generate(e, "hello hello", 1, &g, 1, collect_prompt, echo, &gs) == SLM_OK);
        CHECKF(!strcmp(echo, "hello hello"), "prompt echoed as '%s'", echo);
        CHECK(slm_is_stop_token(e, 261)); /* <|end|> ends the turn (Phi-3) */
    }
    slm_free(e);
    /* with <|return|> in the vocabulary (gpt-oss's harmony), <|end|> only
     * ends a message (the analysis): the reply goes on */
    char *tj = t_read_file("hf_e2e/tokenizer.json", NULL), *at = tj ? strstr(tj, "\"special\": true}]") : NULL;
    if (at) {
        char *js2 = malloc(strlen(tj) + 128);
        sprintf(js2, "%.*s\"special\": true}, {\"id\": 262, \"content\": \"<|return|>\", \"special\": true}%s",
                (int)(at - tj), tj, at + strlen("\"special\": true}"));
        CHECK(t_write_file("hf_e2e/tokenizer.json", js2, strlen(js2)));
        free(js2);
        e = NULL;
        CHECKF(slm_load(&e, "hf_e2e", &opt) == SLM_OK, "load: %s", slm_last_error(e));
        CHECK(e && !slm_is_stop_token(e, 261));
        slm_free(e);
    }
    CHECK(at != NULL);
    /* Gemma 4: <turn|> ends the turn, <|tool_response>
     * (after a call) the reply; </s> (here the EOS) is then an ordinary
     * token, as llama.cpp makes it; without <|tool_response> it stops */
    for (int g4 = 1; tj && at && g4 >= 0; g4--) {
        char *js3 = malloc(strlen(tj) + 256);
        sprintf(js3, "%.*s\"special\": true}, {\"id\": 262, \"content\": \"</s>\", \"special\": true}, "
                     "{\"id\": 263, \"content\": \"<turn|>\", \"special\": true}%s%s",
                (int)(at - tj), tj, g4 ? ", {\"id\": 264, \"content\": \"<|tool_response>\", \"special\": true}" : "",
                at + strlen("\"special\": true}"));
        const char *cfg = "{\"eos_token\": \"</s>\"}";
        CHECK(t_write_file("hf_e2e/tokenizer.json", js3, strlen(js3)) &&
              t_write_file("hf_e2e/tokenizer_config.json", cfg, strlen(cfg)));
        free(js3);
        e = NULL;
        CHECKF(slm_load(&e, "hf_e2e", &opt) == SLM_OK, "load: %s", slm_last_error(e));
        CHECKF(e && slm_is_stop_token(e, 263) && slm_is_stop_token(e, 264) == g4 && slm_is_stop_token(e, 262) == !g4,
               "gemma4 stops (with <|tool_response>: %d)", g4);
        slm_free(e);
    }
    free(tj);
    /* generation_config.json: the sampling values the converter copies as general.sampling.*, from the folder
     * and from the blob cache mode writes of it; one of the wrong type refused naming the file and key */
    const char *gen = "{\"do_sample\": true, \"temperature\": 0.6, \"top_k\": 20, \"top_p\": 0.95, "
                      "\"repetition_penalty\": 1.1, \"bos_token_id\": 1}";
    CHECK(t_write_file("hf_e2e/generation_config.json", gen, strlen(gen)));
    mkdir("hf_e2e_cache", 0700);
    for (int blob = 0; blob < 2; blob++) {
        slm_options oc = opt;
        oc.cache_dir = blob ? "hf_e2e_cache" : NULL;
        e = NULL;
        CHECKF(slm_load(&e, "hf_e2e", &oc) == SLM_OK, "load: %s", slm_last_error(e));
        char v[64] = "", t[64] = "";
        CHECKF(e && slm_model_meta(e, "general.sampling.temp", t, sizeof t) == 3 && !strcmp(t, "0.6") &&
               slm_model_meta(e, "general.sampling.top_k", v, sizeof v) == 2 && !strcmp(v, "20"),
               "%s: temp '%s', top_k '%s'", blob ? "blob" : "folder", t, v);
        CHECKF(e && slm_model_meta(e, "general.sampling.top_p", v, sizeof v) > 0 && !strcmp(v, "0.95"),
               "top_p '%s' (the f32 the converter writes, shortest)", v);
        CHECK(e && slm_model_meta(e, "general.sampling.penalty_repeat", v, sizeof v) == -1); /* not the converter's name */
        slm_free(e);
    }
    /* the blob opens by itself: its BPE vocabulary (264 tokens) is shorter than the embedding (300 rows),
     * as the source's (the reader once wanted them equal, so cache mode recompiled every time) */
    DIR *cd = opendir("hf_e2e_cache");
    struct dirent *de;
    char bp[600] = "";
    while (cd && (de = readdir(cd)))
        if (strstr(de->d_name, ".slmblob")) snprintf(bp, sizeof bp, "hf_e2e_cache/%s", de->d_name);
    if (cd) closedir(cd);
    e = NULL;
    CHECKF(bp[0] && slm_load(&e, bp, &opt) == SLM_OK, "%s: %s", bp, slm_last_error(e));
    slm_free(e);
    st_rm_dir("hf_e2e_cache");
    gen = "{\"temperature\": \"hot\"}";
    CHECK(t_write_file("hf_e2e/generation_config.json", gen, strlen(gen)));
    e = NULL;
    CHECK(slm_load(&e, "hf_e2e", &opt) == SLM_ERR_FORMAT);
    CHECKF(strstr(slm_last_error(e), "generation_config.json") && strstr(slm_last_error(e), "'temperature'"), "%s",
           slm_last_error(e));
    slm_free(e);
    free_weights(&w);
    st_rm_dir("hf_e2e");
}

int main(void) {
    T_RUN(test_config_keys);
    T_RUN(test_safetensors_malformed);
    T_RUN(test_folder_malformed);
    T_RUN(test_missing_tensor);
    T_RUN(test_tokenizer_path_and_slash);
    T_RUN(test_llama3_bf16_sharded);
    T_RUN(test_llama_f16_linear);
    T_RUN(test_mistral_window);
    T_RUN(test_qwen2_bias_tied);
    T_RUN(test_folder_end_to_end);
    T_DONE();
}
