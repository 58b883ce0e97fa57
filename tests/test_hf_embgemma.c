/* EmbeddingGemma Hugging Face folders (config.json model_type gemma3_text,
 * Gemma3TextModel, use_bidirectional_attention true; modules.json with
 * 1_Pooling, 2_Dense, 3_Dense, 4_Normalize; Gemma's tokenizer.json) written
 * here from C with random weights, each against a GGUF twin written the
 * way llama.cpp's converter writes gemma-embedding (its tensor names, the
 * norm gains stored as 1 + w, dense_2 / dense_3, a SentencePiece vocabulary
 * with scores; spelled out independently here): the same config and
 * tensors, the same token ids (and the ids this file expects by hand), the
 * same embeddings, bit for bit. Then sentence-transformers' Dense modules
 * with a bias and Tanh, checked against the twin without them plus the
 * modules computed here in double, and the refusals, each naming its file
 * and key. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "t.h"
#include "t_hf_twin.h"
#include "t_blob_embed.h"
#include "st_write.h"
#include "hf_twin.h"
#include "format/gguf.h"
#include "format/model.h"
#include "staticlm.h"

enum { D = 64, H = 4, KV = 1, HD = 16, FF = 96, L = 4, WIN = 6, CTX = 16, D2 = 96, NB = 256 };

static char root[256];

/* The vocabulary: <pad> <eos> <bos> <unk>, the 256 byte tokens, then these
 * pieces, each made by one merge of two before it (merges in this order). */
static const char *const pieces[] = {
    "\xe2\x96\x81", "t", "h", "e", "c", "a", "s", "o", "n", "m", ".", "d", "g",
    "\xe2\x96\x81t", "he", "\xe2\x96\x81the", "at", "\xe2\x96\x81" "c", "\xe2\x96\x81" "cat", "\xe2\x96\x81s",
    "\xe2\x96\x81sat", "on", "\xe2\x96\x81on", "\xe2\x96\x81m", "\xe2\x96\x81mat", "\xe2\x96\x81" "d", "og",
    "\xe2\x96\x81" "dog",
};
enum { N_PIECES = sizeof pieces / sizeof pieces[0], P0 = 4 + NB, NV = P0 + N_PIECES, N_BASE = 13 };
/* merge k (rank k) makes piece N_BASE + k from these two pieces */
static const int merges[][2] = {
    {0, 1}, {2, 3}, {13, 14}, {5, 1}, {0, 4}, {17, 16}, {0, 6}, {19, 16}, {7, 8}, {0, 21}, {0, 9}, {23, 16},
    {0, 11}, {7, 12}, {25, 26},
};

typedef struct opts {
    int prefixed;        /* "model." before the names (as a Gemma3ForCausalLM-style checkpoint) */
    const char *mat_dt;  /* matrices' dtype */
    int dense;           /* 1: EmbeddingGemma's 2_Dense / 3_Dense (no bias, Identity); 2: bias and Tanh, then Identity */
    const char *dense2_cfg; /* 2_Dense/config.json in place of the usual (NULL: the usual) */
    const char *modules; /* modules.json in place of the usual */
    int no_dense3_weights; /* 3_Dense without model.safetensors */
} opts;

static int put(const char *dir, const char *file, const char *text) {
    char p[1100];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    return t_write_file(p, text, strlen(text));
}

/* ---- weights ----------------------------------------------------------------- */

typedef struct model {
    weights w;               /* the folder's tensors (names without "model.") */
    float *d2w, *d2b, *d3w, *d3b; /* the Dense modules: [D2][D], [D2], [D][D2], [D] */
} model;

static void make_model(model *m, const char *mat_dt) {
    g_rng = 777;
    weights *w = &m->w;
    w->n = 0;
    add_w(w, "embed_tokens.weight", mat_dt, NV, D, 0.5f, 0);
    add_w(w, "norm.weight", "F32", 0, D, 0.1f, 0);
    char n[96];
    for (int l = 0; l < L; l++) {
        static const struct { const char *name; int rows, cols; } t[] = {
            {"input_layernorm", 0, D},      {"self_attn.q_proj", H * HD, D}, {"self_attn.k_proj", KV * HD, D},
            {"self_attn.v_proj", KV * HD, D}, {"self_attn.o_proj", D, H * HD}, {"self_attn.q_norm", 0, HD},
            {"self_attn.k_norm", 0, HD},    {"post_attention_layernorm", 0, D}, {"pre_feedforward_layernorm", 0, D},
            {"post_feedforward_layernorm", 0, D}, {"mlp.gate_proj", FF, D}, {"mlp.up_proj", FF, D},
            {"mlp.down_proj", D, FF},
        };
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
            snprintf(n, sizeof n, "layers.%d.%s.weight", l, t[i].name);
            add_w(w, n, t[i].rows ? mat_dt : "F32", t[i].rows, t[i].cols, t[i].rows ? 0.15f : 0.1f, 0);
        }
    }
    m->d2w = malloc(sizeof(float) * D2 * D);
    m->d3w = malloc(sizeof(float) * D * D2);
    m->d2b = malloc(sizeof(float) * D2);
    m->d3b = malloc(sizeof(float) * D);
    for (int i = 0; i < D2 * D; i++) m->d2w[i] = 0.15f * nrand(), m->d3w[i] = 0.15f * nrand();
    for (int i = 0; i < D2; i++) m->d2b[i] = 0.3f * nrand();
    for (int i = 0; i < D; i++) m->d3b[i] = 0.3f * nrand();
}

static void free_model(model *m) {
    free_weights(&m->w);
    free(m->d2w), free(m->d2b), free(m->d3w), free(m->d3b);
}

/* The GGUF name of a folder tensor (llama.cpp's mapping, written out here); *norm: a gain stored as 1 + w. */
static int gguf_of(const char *hf, char *out, size_t cap, int *norm) {
    static const char *const lmap[][2] = {
        {"input_layernorm", "attn_norm"},     {"self_attn.q_proj", "attn_q"},   {"self_attn.k_proj", "attn_k"},
        {"self_attn.v_proj", "attn_v"},       {"self_attn.o_proj", "attn_output"}, {"self_attn.q_norm", "attn_q_norm"},
        {"self_attn.k_norm", "attn_k_norm"},  {"post_attention_layernorm", "post_attention_norm"},
        {"pre_feedforward_layernorm", "ffn_norm"}, {"post_feedforward_layernorm", "post_ffw_norm"},
        {"mlp.gate_proj", "ffn_gate"},        {"mlp.up_proj", "ffn_up"},        {"mlp.down_proj", "ffn_down"},
    };
    *norm = strstr(hf, "norm") != NULL;
    if (!strcmp(hf, "embed_tokens.weight")) return snprintf(out, cap, "token_embd.weight"), 1;
    if (!strcmp(hf, "norm.weight")) return snprintf(out, cap, "output_norm.weight"), 1;
    int l = -1;
    char rest[96];
    if (sscanf(hf, "layers.%d.%95s", &l, rest) != 2) return 0;
    for (size_t i = 0; i < sizeof lmap / sizeof lmap[0]; i++) {
        const size_t k = strlen(lmap[i][0]);
        if (!strncmp(rest, lmap[i][0], k) && !strcmp(rest + k, ".weight"))
            return snprintf(out, cap, "blk.%d.%s.weight", l, lmap[i][1]), 1;
    }
    return 0;
}

/* ---- the folder ---------------------------------------------------------------- */

static void write_tokenizer(const char *dir) {
    size_t cap = 65536, n = 0;
    char *j = malloc(cap);
    static const char *const sp[4] = {"<pad>", "<eos>", "<bos>", "<unk>"};
    n += (size_t)snprintf(j + n, cap - n, "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null, \"added_tokens\": [");
    for (int i = 0; i < 4; i++)
        n += (size_t)snprintf(j + n, cap - n, "%s{\"id\": %d, \"content\": \"%s\", \"single_word\": false, \"lstrip\": "
                              "false, \"rstrip\": false, \"normalized\": false, \"special\": true}", i ? ", " : "", i, sp[i]);
    n += (size_t)snprintf(j + n, cap - n, "], \"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, "
                          "\"content\": \"\xe2\x96\x81\"}, \"pre_tokenizer\": null, "
                          "\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": ["
                          "{\"SpecialToken\": {\"id\": \"<bos>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, "
                          "{\"SpecialToken\": {\"id\": \"<eos>\", \"type_id\": 0}}], \"pair\": [], \"special_tokens\": {"
                          "\"<bos>\": {\"id\": \"<bos>\", \"ids\": [2], \"tokens\": [\"<bos>\"]}, "
                          "\"<eos>\": {\"id\": \"<eos>\", \"ids\": [1], \"tokens\": [\"<eos>\"]}}}, "
                          "\"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": "
                          "{\"String\": \"\xe2\x96\x81\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}]}, "
                          "\"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": \"<unk>\", "
                          "\"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, \"fuse_unk\": true, "
                          "\"byte_fallback\": true, \"ignore_merges\": false, \"vocab\": {");
    for (int i = 0; i < NV; i++) {
        char b[16];
        const char *s = i < 4 ? sp[i] : i < P0 ? (snprintf(b, sizeof b, "<0x%02X>", i - 4), b) : pieces[i - P0];
        n += (size_t)snprintf(j + n, cap - n, "%s\"%s\": %d", i ? ", " : "", s, i);
    }
    n += (size_t)snprintf(j + n, cap - n, "}, \"merges\": [");
    for (size_t k = 0; k < sizeof merges / sizeof merges[0]; k++)
        n += (size_t)snprintf(j + n, cap - n, "%s\"%s %s\"", k ? ", " : "", pieces[merges[k][0]], pieces[merges[k][1]]);
    n += (size_t)snprintf(j + n, cap - n, "]}}\n");
    CHECK(put(dir, "tokenizer.json", j));
    CHECK(put(dir, "tokenizer_config.json", "{\"add_bos_token\": true, \"add_eos_token\": true, \"bos_token\": \"<bos>\", "
              "\"eos_token\": \"<eos>\", \"pad_token\": \"<pad>\", \"unk_token\": \"<unk>\"}"));
    free(j);
}

/* A Dense module folder: config.json and (unless no_weights) model.safetensors. */
static void write_dense(const char *dir, const char *sub, const char *cfg, int in, int out, const float *w,
                        const float *b, int no_weights) {
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, sub);
    mkdir(p, 0700);
    CHECK(put(p, "config.json", cfg));
    if (no_weights) return;
    st_item it[2] = {{"linear.weight", "F32", 2, {out, in}, w}, {"linear.bias", "F32", 1, {out}, b}};
    snprintf(p, sizeof p, "%s/%s/model.safetensors", dir, sub);
    CHECK(write_st(p, it, b ? 2 : 1, 0));
}

static const char *const std_modules =
    "[{\"idx\": 0, \"name\": \"0\", \"path\": \"\", \"type\": \"sentence_transformers.models.Transformer\"}, "
    "{\"idx\": 1, \"name\": \"1\", \"path\": \"1_Pooling\", \"type\": \"sentence_transformers.models.Pooling\"}, "
    "{\"idx\": 2, \"name\": \"2\", \"path\": \"2_Dense\", \"type\": \"sentence_transformers.models.Dense\"}, "
    "{\"idx\": 3, \"name\": \"3\", \"path\": \"3_Dense\", \"type\": \"sentence_transformers.models.Dense\"}, "
    "{\"idx\": 4, \"name\": \"4\", \"path\": \"4_Normalize\", \"type\": \"sentence_transformers.models.Normalize\"}]";

static void write_folder(const char *name, const model *m, const opts *o, char *dir, size_t cap) {
    snprintf(dir, cap, "%s/%s", root, name);
    mkdir(dir, 0700);
    char cfg[2048], lt[256] = "";
    for (int l = 0; l < L; l++)
        snprintf(lt + strlen(lt), sizeof lt - strlen(lt), "%s\"%s\"", l ? ", " : "",
                 l % 2 == 0 ? "sliding_attention" : "full_attention");
    snprintf(cfg, sizeof cfg, "{\"architectures\": [\"Gemma3TextModel\"], \"model_type\": \"gemma3_text\", "
             "\"attention_bias\": false, \"attn_logit_softcapping\": null, \"bos_token_id\": 2, \"eos_token_id\": 1, "
             "\"final_logit_softcapping\": null, \"head_dim\": %d, \"hidden_activation\": \"gelu_pytorch_tanh\", "
             "\"hidden_size\": %d, \"intermediate_size\": %d, \"layer_types\": [%s], \"max_position_embeddings\": %d, "
             "\"num_attention_heads\": %d, \"num_hidden_layers\": %d, \"num_key_value_heads\": %d, \"pad_token_id\": 0, "
             "\"query_pre_attn_scalar\": %d, \"rms_norm_eps\": 1e-06, \"rope_local_base_freq\": 10000.0, "
             "\"rope_scaling\": null, \"rope_theta\": 1000000.0, \"sliding_window\": %d, "
             "\"use_bidirectional_attention\": true, \"vocab_size\": %d}\n",
             HD, D, FF, lt, CTX, H, L, KV, HD, WIN, NV);
    CHECK(put(dir, "config.json", cfg));
    st_item *it = malloc(sizeof *it * (size_t)m->w.n);
    for (int i = 0; i < m->w.n; i++) {
        it[i] = m->w.it[i];
        if (o->prefixed) snprintf(it[i].name, sizeof it[i].name, "model.%s", m->w.it[i].name);
    }
    CHECK(st_write_weights(dir, it, m->w.n, 0, 0));
    free(it);
    write_tokenizer(dir);
    CHECK(put(dir, "modules.json", o->modules ? o->modules : std_modules));
    char sub[700];
    snprintf(sub, sizeof sub, "%s/1_Pooling", dir);
    mkdir(sub, 0700);
    CHECK(put(sub, "config.json", "{\"word_embedding_dimension\": 64, \"pooling_mode_cls_token\": false, "
              "\"pooling_mode_mean_tokens\": true, \"pooling_mode_max_tokens\": false, "
              "\"pooling_mode_mean_sqrt_len_tokens\": false, \"pooling_mode_weightedmean_tokens\": false, "
              "\"pooling_mode_lasttoken\": false, \"include_prompt\": true}"));
    snprintf(sub, sizeof sub, "%s/4_Normalize", dir);
    mkdir(sub, 0700);
    char c2[512], c3[512];
    const int tanh2 = o->dense == 2;
    snprintf(c2, sizeof c2, "{\"in_features\": %d, \"out_features\": %d, \"bias\": %s, \"activation_function\": "
             "\"torch.nn.modules.%s\"}", D, D2, tanh2 ? "true" : "false",
             tanh2 ? "activation.Tanh" : "linear.Identity");
    snprintf(c3, sizeof c3, "{\"in_features\": %d, \"out_features\": %d, \"bias\": %s, \"activation_function\": "
             "\"torch.nn.modules.linear.Identity\"}", D2, D, tanh2 ? "true" : "false");
    write_dense(dir, "2_Dense", o->dense2_cfg ? o->dense2_cfg : c2, D, D2, m->d2w, tanh2 ? m->d2b : NULL, 0);
    write_dense(dir, "3_Dense", c3, D2, D, m->d3w, tanh2 ? m->d3b : NULL, o->no_dense3_weights);
}

/* ---- the GGUF twin ---------------------------------------------------------------- */

static void write_gguf(const model *m, int with_dense, const char *path) {
    const char *A = "gemma-embedding";
    slm_gguf_writer *g = slm_gguf_writer_new();
    char key[96];
#define K(s) (snprintf(key, sizeof key, "%s." s, A), key)
    slm_gguf_set_str(g, "general.architecture", A);
    slm_gguf_set_u32(g, K("context_length"), CTX);
    slm_gguf_set_u32(g, K("embedding_length"), D);
    slm_gguf_set_u32(g, K("feed_forward_length"), FF);
    slm_gguf_set_u32(g, K("block_count"), L);
    slm_gguf_set_u32(g, K("attention.head_count"), H);
    slm_gguf_set_u32(g, K("attention.head_count_kv"), KV);
    slm_gguf_set_u32(g, K("attention.key_length"), HD);
    slm_gguf_set_u32(g, K("attention.value_length"), HD);
    slm_gguf_set_f32(g, K("attention.layer_norm_rms_epsilon"), 1e-6f);
    slm_gguf_set_u32(g, K("attention.sliding_window"), WIN);
    slm_gguf_set_u32(g, K("attention.sliding_window_pattern"), 2);
    slm_gguf_set_f32(g, K("rope.freq_base"), 1000000.0f);
    slm_gguf_set_f32(g, K("rope.freq_base_swa"), 10000.0f);
    slm_gguf_set_u32(g, K("pooling_type"), 1);
    if (with_dense) { /* the converter's keys for its dense modules (llama.cpp needs them; staticlm reads the shapes) */
        slm_gguf_set_u32(g, K("dense_2_feat_in"), D);
        slm_gguf_set_u32(g, K("dense_2_feat_out"), D2);
        slm_gguf_set_u32(g, K("dense_3_feat_in"), D2);
        slm_gguf_set_u32(g, K("dense_3_feat_out"), D);
    }
#undef K
    /* SentencePiece: a piece made by merge k scores -k, the others below every merge */
    static char names[NV][16];
    const char *toks[NV];
    uint64_t lens[NV];
    float scores[NV];
    int32_t types[NV];
    static const char *const sp[4] = {"<pad>", "<eos>", "<bos>", "<unk>"};
    for (int i = 0; i < NV; i++) {
        if (i < 4) snprintf(names[i], sizeof names[i], "%s", sp[i]);
        else if (i < P0) snprintf(names[i], sizeof names[i], "<0x%02X>", i - 4);
        else snprintf(names[i], sizeof names[i], "%s", pieces[i - P0]);
        toks[i] = names[i];
        lens[i] = strlen(names[i]);
        types[i] = i == 3 ? 2 : i < 4 ? 3 : i < P0 ? 6 : 1;
        scores[i] = i - P0 >= N_BASE ? -(float)(i - P0 - N_BASE) : -1000.0f;
    }
    slm_gguf_set_str(g, "tokenizer.ggml.model", "llama");
    slm_gguf_set_arr_str(g, "tokenizer.ggml.tokens", toks, lens, NV);
    slm_gguf_set_arr(g, "tokenizer.ggml.scores", SLM_GGUF_F32, scores, NV);
    slm_gguf_set_arr(g, "tokenizer.ggml.token_type", SLM_GGUF_I32, types, NV);
    slm_gguf_set_u32(g, "tokenizer.ggml.bos_token_id", 2);
    slm_gguf_set_u32(g, "tokenizer.ggml.eos_token_id", 1);
    slm_gguf_set_u32(g, "tokenizer.ggml.unknown_token_id", 3);
    slm_gguf_set_u32(g, "tokenizer.ggml.padding_token_id", 0);
    slm_gguf_set_bool(g, "tokenizer.ggml.add_bos_token", 1);
    slm_gguf_set_bool(g, "tokenizer.ggml.add_eos_token", 1);
    slm_gguf_set_bool(g, "tokenizer.ggml.add_space_prefix", 0);
    void *keep[ST_MAX_TENSORS + 4];
    int nk = 0;
    for (int i = 0; i < m->w.n; i++) {
        const st_item *t = &m->w.it[i];
        char gn[64];
        int norm = 0;
        CHECKF(gguf_of(t->name, gn, sizeof gn, &norm), "%s: no GGUF name", t->name);
        const size_t n = (size_t)(t->n_dims == 2 ? t->shape[0] * t->shape[1] : t->shape[0]);
        float *f = malloc(n * sizeof *f);
        for (size_t k = 0; k < n; k++) f[k] = norm ? t->f[k] + 1.0f : t->f[k];
        hf_twin_add(g, gn, t, f, keep, &nk);
    }
    if (with_dense) {
        const int64_t ne2[2] = {D, D2}, ne3[2] = {D2, D};
        slm_gguf_add_tensor(g, "dense_2.weight", SLM_F32, 2, ne2, m->d2w, sizeof(float) * D * D2);
        slm_gguf_add_tensor(g, "dense_3.weight", SLM_F32, 2, ne3, m->d3w, sizeof(float) * D * D2);
    }
    hf_twin_write(g, path, keep, nk);
}

/* ---- the checks ------------------------------------------------------------------- */

static const char *const texts[] = {"the cat sat on the mat.", "the dog", "x\xc3\xa9", "on the mat the cat sat"};
static const int32_t want_ids[][12] = {
    {2, P0 + 1, P0 + 14, P0 + 18, P0 + 20, P0 + 22, P0 + 15, P0 + 24, P0 + 10, 1, -1},
    {2, P0 + 1, P0 + 14, P0 + 27, 1, -1},
    {2, 4 + 0x78, 4 + 0xC3, 4 + 0xA9, 1, -1},
    {2, P0 + 21, P0 + 15, P0 + 24, P0 + 15, P0 + 18, P0 + 20, 1, -1},
};

/* Each text's ids on the folder and the twin, and the ids by hand; the
 * embeddings (mean pooling; with dense: the twin's own dense_2 / dense_3)
 * of the folder into ef[t], the twin's into eg[t]. */
static void embed_both(const char *dir, const char *gguf, float ef[][D], float eg[][D]) {
    slm_engine *a = twin_load(dir, CTX, 4), *b = twin_load(gguf, CTX, 4);
    slm_session *sa = NULL, *sb = NULL;
    CHECK(a && b && slm_session_new(a, NULL, &sa) == SLM_OK && slm_session_new(b, NULL, &sb) == SLM_OK);
    if (!sa || !sb) goto out;
    CHECKF(slm_model_pooling(a) == SLM_POOLING_MEAN && slm_model_is_encoder(a), "%s: pooling %d, encoder %d", dir,
           slm_model_pooling(a), slm_model_is_encoder(a));
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
        int32_t ia[32], ib[32];
        const int na = slm_embed_tokenize(a, texts[t], ia, 32), nb = slm_embed_tokenize(b, texts[t], ib, 32);
        int k = 0;
        while (want_ids[t][k] >= 0) k++;
        CHECKF(na == k && !memcmp(ia, want_ids[t], sizeof ia[0] * (size_t)k), "%s: '%s': %d ids (want %d; %d %d %d %d)",
               dir, texts[t], na, k, ia[0], na > 1 ? ia[1] : -1, na > 2 ? ia[2] : -1, na > 3 ? ia[3] : -1);
        CHECKF(nb == na && !memcmp(ia, ib, sizeof ia[0] * (size_t)(na > 0 ? na : 0)), "'%s': the GGUF's ids differ (%d)",
               texts[t], nb);
        int ta = 0, tb = 0;
        CHECKF(slm_session_embed_text(sa, texts[t], SLM_POOLING_DEFAULT, ef[t], D, &ta) == SLM_OK, "%s",
               slm_session_error(sa));
        CHECKF(slm_session_embed_text(sb, texts[t], SLM_POOLING_DEFAULT, eg[t], D, &tb) == SLM_OK, "%s",
               slm_session_error(sb));
        CHECK(ta == k && tb == k);
    }
out:
    slm_session_free(sa);
    slm_session_free(sb);
    slm_free(a);
    slm_free(b);
}

/* The folder against its twin: config, tensors, ids, embeddings bit for bit. */
static void check_twin(const char *name, const opts *o) {
    model m;
    make_model(&m, o->mat_dt);
    char dir[512], gguf[600];
    write_folder(name, &m, o, dir, sizeof dir);
    snprintf(gguf, sizeof gguf, "%s/%s.gguf", root, name);
    write_gguf(&m, 1, gguf);
    twin_same_model(dir, gguf);
    static float ef[4][D], eg[4][D];
    memset(ef, 0, sizeof ef);
    memset(eg, 1, sizeof eg);
    embed_both(dir, gguf, ef, eg);
    double worst = 0;
    for (int t = 0; t < 4; t++) worst = fmax(worst, rel_err(ef[t], eg[t], D));
    CHECKF(!memcmp(ef, eg, sizeof ef), "%s: embeddings differ from the GGUF's (relative %g)", name, worst);
    fprintf(stderr, "  %s: embeddings against the GGUF twin: max relative difference %g%s\n", name, worst,
            memcmp(ef, eg, sizeof ef) ? "" : " (bit-exact)");
    { /* the folder as a blob: its programs, pooling and the dense pair kept, bit for bit */
        const slm_options bo = twin_opts(CTX, 4);
        int32_t bid[12];
        for (int i = 0; i < 12; i++) bid[i] = i ? P0 + (i * 5) % 20 : 2;
        static const int lens[] = {4, 10, 2};
        char blob[640];
        snprintf(blob, sizeof blob, "%s/%s.slmblob", root, name);
        t_blob_embed_check(dir, &bo, blob, bid, 12, lens, 3);
    }
    unlink(gguf);
    st_rm_dir(dir);
    free_model(&m);
}

static void test_twin(void) { check_twin("embgemma", &(opts){.mat_dt = "BF16", .dense = 1}); }
static void test_twin_prefixed(void) { check_twin("embgemma_f32", &(opts){.mat_dt = "F32", .prefixed = 1, .dense = 1}); }

/* Dense modules with a bias and Tanh (2_Dense), then a bias (3_Dense): the
 * folder's embedding against the twin's pooled vector (the twin without
 * dense tensors) put through both modules here, in double. */
static void test_dense_tanh(void) {
    model m;
    make_model(&m, "F32");
    char dir[512], gguf[600];
    write_folder("dense_tanh", &m, &(opts){.mat_dt = "F32", .dense = 2}, dir, sizeof dir);
    snprintf(gguf, sizeof gguf, "%s/dense_tanh.gguf", root);
    write_gguf(&m, 0, gguf);
    slm_model_file mf;
    slm_err err = {0};
    CHECKF(slm_model_open(&mf, dir, &err) == SLM_OK, "%s", err.msg);
    if (!err.status) {
        CHECK(mf.n_dense == 2 && !strcmp(mf.dense[0].name, "dense_2") && mf.dense[0].act == SLM_DENSE_TANH &&
              !strcmp(mf.dense[1].name, "dense_3") && mf.dense[1].act == SLM_DENSE_IDENTITY);
        CHECK(slm_model_tensor(&mf, "dense_2.bias") && slm_model_tensor(&mf, "dense_3.bias"));
        slm_model_close(&mf);
    }
    static float ef[4][D], eg[4][D];
    embed_both(dir, gguf, ef, eg);
    double worst = 0, moved = 0;
    for (int t = 0; t < 4; t++) {
        double h[D2], y[D];
        for (int i = 0; i < D2; i++) {
            double acc = m.d2b[i];
            for (int j = 0; j < D; j++) acc += (double)m.d2w[i * D + j] * eg[t][j];
            h[i] = tanh(acc);
        }
        float yf[D];
        for (int i = 0; i < D; i++) {
            double acc = m.d3b[i];
            for (int j = 0; j < D2; j++) acc += (double)m.d3w[i * D2 + j] * h[j];
            y[i] = acc;
            yf[i] = (float)acc;
        }
        worst = fmax(worst, rel_err(ef[t], yf, D));
        moved = fmax(moved, rel_err(eg[t], yf, D));
        (void)y;
    }
    CHECKF(worst < 1e-5, "Dense modules (bias, Tanh): relative error %g", worst);
    CHECKF(moved > 0.1, "the Dense modules change nothing here (%g): the check cannot fail", moved);
    { /* the folder as a blob: the Tanh module and both biases kept, bit for bit */
        const slm_options bo = twin_opts(CTX, 4);
        int32_t bid[12];
        for (int i = 0; i < 12; i++) bid[i] = i ? P0 + (i * 5) % 20 : 2;
        static const int lens[] = {4, 10, 2};
        char blob[640];
        snprintf(blob, sizeof blob, "%s/dense_tanh.slmblob", root);
        t_blob_embed_check(dir, &bo, blob, bid, 12, lens, 3);
    }
    fprintf(stderr, "  dense_tanh: against the modules computed here: max relative difference %g (they move it by %g)\n",
            worst, moved);
    unlink(gguf);
    st_rm_dir(dir);
    free_model(&m);
}

static void refuse(const char *name, const opts *o, slm_status want, const char *w1, const char *w2) {
    model m;
    make_model(&m, "F32");
    char dir[512];
    write_folder(name, &m, o, dir, sizeof dir);
    expect_folder(dir, want, w1, w2);
    st_rm_dir(dir);
    free_model(&m);
}

/* Folders refused, naming the file and key or tensor. */
static void test_refusals(void) {
    refuse("r_act", &(opts){.mat_dt = "F32", .dense2_cfg = "{\"in_features\": 64, \"out_features\": 96, \"bias\": false, "
           "\"activation_function\": \"torch.nn.modules.activation.ReLU\"}"}, SLM_ERR_UNSUPPORTED,
           "2_Dense/config.json", "'activation_function'");
    refuse("r_in", &(opts){.mat_dt = "F32", .dense2_cfg = "{\"in_features\": 64, \"bias\": false}"}, SLM_ERR_FORMAT,
           "2_Dense/config.json", "out_features");
    refuse("r_shape", &(opts){.mat_dt = "F32", .dense2_cfg = "{\"in_features\": 64, \"out_features\": 95, \"bias\": "
           "false, \"activation_function\": \"torch.nn.modules.linear.Identity\"}"}, SLM_ERR_FORMAT,
           "2_Dense/model.safetensors", "linear.weight");
    refuse("r_bias", &(opts){.mat_dt = "F32", .dense2_cfg = "{\"in_features\": 64, \"out_features\": 96, "
           "\"activation_function\": \"torch.nn.modules.linear.Identity\"}"}, SLM_ERR_FORMAT,
           "2_Dense/model.safetensors", "linear.bias");
    refuse("r_input", &(opts){.mat_dt = "F32", .dense2_cfg = "{\"in_features\": 64, \"out_features\": 96, \"bias\": "
           "false, \"module_input_name\": \"token_embeddings\"}"}, SLM_ERR_UNSUPPORTED, "2_Dense/config.json",
           "module_input_name");
    refuse("r_noweights", &(opts){.mat_dt = "F32", .no_dense3_weights = 1}, SLM_ERR_FORMAT, "3_Dense/model.safetensors",
           "not found");
    refuse("r_order", &(opts){.mat_dt = "F32", .modules = "[{\"path\": \"\", \"type\": \"sentence_transformers.models."
           "Transformer\"}, {\"path\": \"2_Dense\", \"type\": \"sentence_transformers.models.Dense\"}, {\"path\": "
           "\"1_Pooling\", \"type\": \"sentence_transformers.models.Pooling\"}]"}, SLM_ERR_UNSUPPORTED, "modules.json",
           "before Pooling");
    refuse("r_type", &(opts){.mat_dt = "F32", .modules = "[{\"path\": \"\", \"type\": \"sentence_transformers.models."
           "Transformer\"}, {\"path\": \"1_Pooling\", \"type\": \"sentence_transformers.models.Pooling\"}, {\"path\": "
           "\"2_LayerNorm\", \"type\": \"sentence_transformers.models.LayerNorm\"}]"}, SLM_ERR_UNSUPPORTED, "modules.json",
           "LayerNorm");
    refuse("r_width", &(opts){.mat_dt = "F32", .modules = "[{\"path\": \"\", \"type\": \"sentence_transformers.models."
           "Transformer\"}, {\"path\": \"1_Pooling\", \"type\": \"sentence_transformers.models.Pooling\"}, {\"path\": "
           "\"2_Dense\", \"type\": \"sentence_transformers.models.Dense\"}]"}, SLM_ERR_UNSUPPORTED, "2_Dense/config.json",
           "hidden_size (64)");
    refuse("r_path", &(opts){.mat_dt = "F32", .modules = "[{\"path\": \"1_Pooling\", \"type\": \"sentence_transformers."
           "models.Pooling\"}, {\"path\": \"../2_Dense\", \"type\": \"sentence_transformers.models.Dense\"}]"},
           SLM_ERR_FORMAT, "modules.json", "'path'");
    refuse("r_json", &(opts){.mat_dt = "F32", .modules = "[{\"path\": "}, SLM_ERR_FORMAT, "modules.json", "invalid JSON");
}

/* config.json alone: use_bidirectional_attention on gemma3_text only, with its window. */
static void test_config(void) {
    static const struct { const char *json; slm_status want; const char *w1; } c[] = {
        {"{\"model_type\": \"gemma2\", \"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2, "
         "\"num_attention_heads\": 4, \"head_dim\": 16, \"vocab_size\": 300, \"max_position_embeddings\": 64, "
         "\"use_bidirectional_attention\": true}", SLM_ERR_UNSUPPORTED, "'use_bidirectional_attention'"},
        {"{\"model_type\": \"gemma3_text\", \"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2, "
         "\"vocab_size\": 300, \"use_bidirectional_attention\": true}", SLM_ERR_FORMAT, "'sliding_window'"},
        {"{\"model_type\": \"gemma3_text\", \"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2, "
         "\"vocab_size\": 300, \"sliding_window\": 512, \"use_bidirectional_attention\": true}", SLM_OK, NULL},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        slm_model_config cfg;
        float *rf = NULL;
        slm_err err = {0};
        const slm_status s = slm_hf_parse_config(&cfg, &rf, c[i].json, strlen(c[i].json), "config.json", &err);
        CHECKF(s == c[i].want && (!c[i].w1 || strstr(err.msg, c[i].w1)), "case %zu: status %d, '%s'", i, s, err.msg);
        if (s == SLM_OK)
            CHECKF(!strcmp(cfg.arch, "gemma-embedding") && cfg.encoder == 3 && cfg.sliding_window == 512 &&
                   cfg.swa_pattern == 6 && cfg.final_softcap == 0.0f, "arch %s, encoder %d, window %d / %d", cfg.arch,
                   cfg.encoder, cfg.sliding_window, cfg.swa_pattern);
        free(rf);
    }
}

int main(void) {
    snprintf(root, sizeof root, "/tmp/slm_hf_embgemma_%d", (int)getpid());
    mkdir(root, 0700);
    T_RUN(test_twin);
    T_RUN(test_twin_prefixed);
    T_RUN(test_dense_tanh);
    T_RUN(test_refusals);
    T_RUN(test_config);
    st_rm_dir(root);
    T_DONE();
}
