/* BERT Hugging Face folders (sentence-transformers layout: config.json,
 * model.safetensors, tokenizer.json or vocab.txt, modules.json and
 * 1_Pooling/) written here from C, each against a GGUF twin of the same
 * weights and vocabulary written with the GGUF writer the way llama.cpp's
 * converter writes a bert file (its tensor names and phantom-space vocab,
 * spelled out independently here): the same config and tensors, the same
 * token ids (and the ids this file expects by hand), the same embeddings;
 * the "bert."-prefixed variant with old gamma / beta names and the buffers
 * a checkpoint carries (position_ids as I64, the pooler, the MLM head); a
 * vocab.txt-only folder; a cased vocabulary; and the refusals, each naming
 * its key or field. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "t.h"
#include "t_hf_twin.h"
#include "st_write.h"
#include "format/gguf.h"
#include "format/model.h"
#include "staticlm.h"
#include "text/wpm.h"

enum { DIM = 32, HEADS = 2, FF = 48, LAYERS = 2, CTX = 16, TYPES = 2, NV = 36 };

static char root[256];

/* The vocabulary as the folder spells it; ids 0..4 are its special (added) tokens. */
static const char *const vocab[NV] = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat",   "sat",  "on",      "mat",      "##ning", ".",
    ",",     "!",     "hello", "world", "dog",    "##s", "run",   "un",   "##believ", "##able",  "cafe",   "\xe4\xb8\xad",
    "a",     "##b",   "b",     "##e",   "caf",    "x",   "##x",   "Hello", "[unused0]", "##ed",   "walk",   "?",
};

/* ---- the folder ------------------------------------------------------------ */

typedef struct opts {
    int prefix;          /* "bert." before every name, LayerNorm gamma / beta, the checkpoint's extra tensors */
    int vocab_txt;       /* vocab.txt (and tokenizer_config.json) instead of tokenizer.json */
    int cased;           /* the normalizer does not lowercase */
    int cls_pooling;     /* 1_Pooling: cls instead of mean */
    int cross;           /* BertForSequenceClassification: the pooler and classifier kept, no modules.json */
    const char *config;  /* extra config.json keys ("\"k\": v, ") */
    const char *extra;   /* one more tensor, as named */
    const char *extra_dt;/* its dtype (NULL: F32) */
} opts;

/* The GGUF name of a folder tensor (without the prefix, old names already
 * read as new): this test's own table of llama.cpp's mapping. */
static int gguf_of(const char *hf, char *out, size_t cap) {
    static const char *const map[][2] = {
        {"embeddings.word_embeddings.weight", "token_embd.weight"},
        {"embeddings.position_embeddings.weight", "position_embd.weight"},
        {"embeddings.token_type_embeddings.weight", "token_types.weight"},
        {"embeddings.LayerNorm.weight", "token_embd_norm.weight"},
        {"embeddings.LayerNorm.bias", "token_embd_norm.bias"},
        {"pooler.dense.weight", "cls.weight"}, /* a cross-encoder's head */
        {"pooler.dense.bias", "cls.bias"},
        {"classifier.weight", "cls.output.weight"},
        {"classifier.bias", "cls.output.bias"},
    };
    static const char *const lmap[][2] = {
        {"attention.self.query", "attn_q"},  {"attention.self.key", "attn_k"}, {"attention.self.value", "attn_v"},
        {"attention.output.dense", "attn_output"}, {"attention.output.LayerNorm", "attn_output_norm"},
        {"intermediate.dense", "ffn_up"},    {"output.dense", "ffn_down"},     {"output.LayerNorm", "layer_output_norm"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(hf, map[i][0])) return snprintf(out, cap, "%s", map[i][1]), 1;
    int l = -1, k = 0;
    char rest[96];
    if (sscanf(hf, "encoder.layer.%d.%95s%n", &l, rest, &k) != 2) return 0;
    for (size_t i = 0; i < sizeof lmap / sizeof lmap[0]; i++) {
        const size_t n = strlen(lmap[i][0]);
        if (!strncmp(rest, lmap[i][0], n) && rest[n] == '.')
            return snprintf(out, cap, "blk.%d.%s.%s", l, lmap[i][1], rest + n + 1), 1;
    }
    return 0;
}

/* The model's weights under their (unprefixed, new) folder names. */
static void make_weights(weights *w) {
    g_rng = 4242;
    w->n = 0;
    add_w(w, "embeddings.word_embeddings.weight", "F32", NV, DIM, 0.5f, 0);
    add_w(w, "embeddings.position_embeddings.weight", "F32", CTX, DIM, 0.5f, 0);
    add_w(w, "embeddings.token_type_embeddings.weight", "F32", TYPES, DIM, 0.5f, 0);
    add_w(w, "embeddings.LayerNorm.weight", "F32", 0, DIM, 0.1f, 1);
    add_w(w, "embeddings.LayerNorm.bias", "F32", 0, DIM, 0.1f, 0);
    char n[96];
    for (int l = 0; l < LAYERS; l++) {
        static const struct { const char *name; int rows, cols; } t[] = {
            {"attention.self.query", DIM, DIM}, {"attention.self.key", DIM, DIM}, {"attention.self.value", DIM, DIM},
            {"attention.output.dense", DIM, DIM}, {"attention.output.LayerNorm", 0, DIM},
            {"intermediate.dense", FF, DIM},     {"output.dense", DIM, FF},        {"output.LayerNorm", 0, DIM},
        };
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
            const int ln = t[i].rows == 0;
            snprintf(n, sizeof n, "encoder.layer.%d.%s.weight", l, t[i].name);
            add_w(w, n, "F32", t[i].rows, t[i].cols, ln ? 0.1f : 0.2f, ln ? 1.0f : 0.0f);
            snprintf(n, sizeof n, "encoder.layer.%d.%s.bias", l, t[i].name);
            add_w(w, n, "F32", 0, t[i].rows ? t[i].rows : t[i].cols, 0.1f, 0);
        }
    }
}

/* A folder that slm_model_open refuses with want, and a message holding w1 and w2. */
static void expect_folder(const char *dir, slm_status want, const char *w1, const char *w2) {
    slm_model_file m;
    slm_err err = {0};
    const slm_status s = slm_model_open(&m, dir, &err);
    CHECKF(s == want, "%s: status %d, want %d (%s)", dir, s, want, err.msg);
    CHECKF((!w1 || strstr(err.msg, w1)) && (!w2 || strstr(err.msg, w2)), "%s: message '%s' (want '%s', '%s')", dir,
           err.msg, w1 ? w1 : "", w2 ? w2 : "");
    if (s == SLM_OK) slm_model_close(&m);
}

static int put(const char *dir, const char *file, const char *text) {
    char p[1100];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    return t_write_file(p, text, strlen(text));
}

static void write_tokenizer(const char *dir, const opts *o) {
    char p[1100];
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    twin_wp_tokenizer(p, vocab, NV, !o->cased);
}

static void write_vocab_txt(const char *dir, const opts *o) {
    char t[1024];
    size_t n = 0;
    for (int i = 0; i < NV; i++) n += (size_t)sprintf(t + n, "%s\n", vocab[i]);
    CHECK(put(dir, "vocab.txt", t));
    CHECK(put(dir, "tokenizer_config.json", o->cased ? "{\"do_lower_case\": false}" : "{\"do_lower_case\": true}"));
}

/* A BERT folder of w at root/name, as o says. */
static void write_folder(const char *name, const weights *w, const opts *o, char *dir, size_t cap) {
    snprintf(dir, cap, "%s/%s", root, name);
    mkdir(dir, 0700);
    char cfg[2048], sub[512];
    snprintf(cfg, sizeof cfg, "{\"architectures\": [\"%s\"], \"model_type\": \"bert\", %s\"hidden_size\": %d, "
             "\"intermediate_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d, "
             "\"max_position_embeddings\": %d, \"vocab_size\": %d, \"type_vocab_size\": %d, %s\"pad_token_id\": 0, "
             "\"torch_dtype\": \"float32\"}\n", o->cross ? "BertForSequenceClassification" : o->prefix ? "BertForMaskedLM" : "BertModel", o->config ? o->config : "",
             DIM, FF, LAYERS, HEADS, CTX, NV, TYPES, o->config ? "" /* the keys it may give */ :
             "\"layer_norm_eps\": 1e-12, \"hidden_act\": \"gelu\", \"position_embedding_type\": \"absolute\", ");
    CHECK(put(dir, "config.json", cfg));
    st_item it[64];
    int n = 0;
    static float pos_ids[CTX], mlm_bias[NV], pooler[DIM * DIM];
    for (int i = 0; i < CTX; i++) pos_ids[i] = (float)i;
    for (int i = 0; i < w->n; i++) {
        it[n] = w->it[i];
        char nm[128] = "";
        if (o->prefix && strncmp(w->it[i].name, "classifier.", 11)) strcpy(nm, "bert."); /* the head: unprefixed */
        strcat(nm, w->it[i].name); /* names of this file: under 64 bytes */
        const size_t k = strlen(nm);
        if (o->prefix && strstr(nm, "LayerNorm")) /* old checkpoints: gamma / beta */
            strcpy(nm + k - (nm[k - 1] == 't' ? 6 : 4), nm[k - 1] == 't' ? "gamma" : "beta");
        memcpy(it[n].name, nm, strlen(nm) + 1);
        n++;
    }
    if (o->prefix) { /* what BertForMaskedLM checkpoints carry beside the encoder */
        it[n++] = (st_item){"bert.embeddings.position_ids", "I64", 2, {1, CTX}, pos_ids};
        if (!o->cross) { /* a cross-encoder's pooler is among the weights */
            it[n++] = (st_item){"bert.pooler.dense.weight", "F32", 2, {DIM, DIM}, pooler};
            it[n++] = (st_item){"bert.pooler.dense.bias", "F32", 1, {DIM}, pooler};
            it[n++] = (st_item){"cls.predictions.bias", "F32", 1, {NV}, mlm_bias};
        }
    }
    if (o->extra) it[n++] = (st_item){"", o->extra_dt ? o->extra_dt : "F32", 2, {2, DIM}, pooler};
    if (o->extra) snprintf(it[n - 1].name, sizeof it[n - 1].name, "%s", o->extra);
    CHECK(st_write_weights(dir, it, n, 0, 0));
    if (o->vocab_txt) write_vocab_txt(dir, o);
    else write_tokenizer(dir, o);
    if (o->cross) return; /* a cross-encoder: no sentence-transformers modules */
    CHECK(put(dir, "modules.json", "[{\"idx\": 0, \"name\": \"0\", \"path\": \"\", \"type\": "
              "\"sentence_transformers.models.Transformer\"}, {\"idx\": 1, \"name\": \"1\", \"path\": \"1_Pooling\", "
              "\"type\": \"sentence_transformers.models.Pooling\"}, {\"idx\": 2, \"name\": \"2\", \"path\": \"2_Normalize\", "
              "\"type\": \"sentence_transformers.models.Normalize\"}]"));
    snprintf(sub, sizeof sub, "%s/1_Pooling", dir);
    mkdir(sub, 0700);
    snprintf(cfg, sizeof cfg, "{\"word_embedding_dimension\": %d, \"pooling_mode_cls_token\": %s, "
             "\"pooling_mode_mean_tokens\": %s, \"pooling_mode_max_tokens\": false, "
             "\"pooling_mode_mean_sqrt_len_tokens\": false}", DIM, o->cls_pooling ? "true" : "false",
             o->cls_pooling ? "false" : "true");
    CHECK(put(sub, "config.json", cfg));
}

/* ---- the GGUF twin ---------------------------------------------------------- */

static void write_gguf(const weights *w, const opts *o, const char *path) {
    slm_gguf_writer *g = slm_gguf_writer_new();
    slm_gguf_set_str(g, "general.architecture", "bert");
    slm_gguf_set_u32(g, "bert.context_length", CTX);
    slm_gguf_set_u32(g, "bert.embedding_length", DIM);
    slm_gguf_set_u32(g, "bert.feed_forward_length", FF);
    slm_gguf_set_u32(g, "bert.block_count", LAYERS);
    slm_gguf_set_u32(g, "bert.attention.head_count", HEADS);
    slm_gguf_set_f32(g, "bert.attention.layer_norm_epsilon", 1e-12f);
    slm_gguf_set_bool(g, "bert.attention.causal", 0);
    slm_gguf_set_u32(g, "bert.pooling_type", o->cross ? 4 : o->cls_pooling ? 2 : 1);
    /* the phantom-space vocabulary: control tokens as they are, "##x" -> "x", else U+2581 first */
    char sp[NV][32];
    const char *toks[NV];
    uint64_t lens[NV];
    int32_t types[NV];
    for (int i = 0; i < NV; i++) {
        types[i] = i < 5 ? 3 : 1;
        if (i < 5) snprintf(sp[i], sizeof sp[i], "%s", vocab[i]);
        else if (!strncmp(vocab[i], "##", 2)) snprintf(sp[i], sizeof sp[i], "%s", vocab[i] + 2);
        else snprintf(sp[i], sizeof sp[i], "\xe2\x96\x81%s", vocab[i]);
        toks[i] = sp[i];
        lens[i] = strlen(sp[i]);
    }
    slm_gguf_set_str(g, "tokenizer.ggml.model", "bert");
    slm_gguf_set_arr_str(g, "tokenizer.ggml.tokens", toks, lens, NV);
    slm_gguf_set_arr(g, "tokenizer.ggml.token_type", SLM_GGUF_I32, types, NV);
    slm_gguf_set_u32(g, "tokenizer.ggml.bos_token_id", 2);
    slm_gguf_set_u32(g, "tokenizer.ggml.unknown_token_id", 1);
    slm_gguf_set_u32(g, "tokenizer.ggml.seperator_token_id", 3);
    slm_gguf_set_u32(g, "tokenizer.ggml.padding_token_id", 0);
    if (o->cased) slm_gguf_set_bool(g, "tokenizer.ggml.normalizer.lowercase", 0);
    for (int i = 0; i < w->n; i++) {
        const st_item *t = &w->it[i];
        char gn[64];
        CHECKF(gguf_of(t->name, gn, sizeof gn), "%s: no GGUF name", t->name);
        const int64_t rows = t->n_dims == 2 ? t->shape[0] : 1, cols = t->n_dims == 2 ? t->shape[1] : t->shape[0];
        const int64_t ne[2] = {cols, rows};
        slm_gguf_add_tensor(g, gn, SLM_F32, (uint32_t)t->n_dims, ne, t->f, (uint64_t)(rows * cols) * 4);
    }
    slm_err err = {0};
    CHECKF(slm_gguf_write(g, path, &err) == SLM_OK, "%s", err.msg);
    slm_gguf_writer_free(g);
}

/* ---- the checks ------------------------------------------------------------- */

static const char *const texts[] = {
    "The cat sat on the mat.", "Hello, world!", "dogs running unbelievable", "CAF\xc3\x89 \xe4\xb8\xad" "x!",
    "walked xx zzz", "[SEP] hello", "Hello hello",
};

/* Token ids and embeddings of the folder against its GGUF twin, and the ids by hand. */
static void same_outputs(const char *dir, const char *gguf, const opts *o) {
    slm_engine *ef = twin_load(dir, CTX, 4), *eg = twin_load(gguf, CTX, 4);
    CHECK(ef && eg);
    if (!ef || !eg) goto out;
    const int want_pool = o->cls_pooling ? SLM_POOLING_CLS : SLM_POOLING_MEAN;
    CHECKF(slm_model_pooling(ef) == want_pool, "%s: pooling %d", dir, slm_model_pooling(ef));
    CHECK(slm_model_pooling(eg) == want_pool);
    /* by hand: [CLS] then the pieces (lowercased, accents stripped unless cased) */
    static const int32_t want[][9] = {
        {2, 5, 6, 7, 8, 5, 9, 11, -1}, {2, 14, 12, 15, 13, -1}, {2, 16, 17, 18, 10, 19, 20, 21, -1},
        {2, 22, 23, 29, 13, -1},       {2, 34, 33, 29, 30, 1, -1}, {2, 3, 14, -1}, {2, 14, 14, -1},
    };
    static const int32_t want_cased[][9] = {
        {2, 1, 6, 7, 8, 5, 9, 11, -1}, {2, 31, 12, 15, 13, -1}, {2, 16, 17, 18, 10, 19, 20, 21, -1},
        {2, 1, 23, 29, 13, -1},        {2, 34, 33, 29, 30, 1, -1}, {2, 3, 14, -1}, {2, 31, 14, -1},
    };
    double worst = 0;
    int exact = 1;
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
        int32_t a[32], b[32];
        const int na = slm_tokenize(ef, texts[t], 1, a, 32), nb = slm_tokenize(eg, texts[t], 1, b, 32);
        CHECKF(na == nb && na > 0 && !memcmp(a, b, sizeof a[0] * (size_t)na), "%s: '%s': %d ids, the GGUF's %d", dir,
               texts[t], na, nb);
        const int32_t *w = o->cased ? want_cased[t] : want[t];
        int k = 0;
        while (w[k] >= 0) k++;
        CHECKF(na == k && !memcmp(a, w, sizeof a[0] * (size_t)k), "%s: '%s': ids differ from the expected (%d, want %d; "
               "first %d %d %d)", dir, texts[t], na, k, a[0], na > 1 ? a[1] : -1, na > 2 ? a[2] : -1);
        float ea[DIM], eb[DIM];
        int ta = 0, tb = 0;
        slm_session *sa = NULL, *sb = NULL;
        CHECK(slm_session_new(ef, NULL, &sa) == SLM_OK && slm_session_new(eg, NULL, &sb) == SLM_OK);
        if (sa && sb) {
            CHECKF(slm_session_embed_text(sa, texts[t], want_pool, ea, DIM, &ta) == SLM_OK, "%s", slm_session_error(sa));
            CHECKF(slm_session_embed_text(sb, texts[t], want_pool, eb, DIM, &tb) == SLM_OK, "%s", slm_session_error(sb));
            CHECKF(ta == k + 1 && tb == ta, "%s: '%s': %d tokens embedded, the GGUF %d (want %d: [SEP] last)", dir,
                   texts[t], ta, tb, k + 1);
            double big = 1e-30, d = 0;
            for (int i = 0; i < DIM; i++) big = fmax(big, fabs(eb[i])), d = fmax(d, fabs((double)ea[i] - eb[i]));
            worst = fmax(worst, d / big);
            exact &= !memcmp(ea, eb, sizeof ea);
        }
        slm_session_free(sa);
        slm_session_free(sb);
    }
    CHECKF(worst < 1e-6, "%s: embeddings differ from the GGUF's by %g (relative)", dir, worst);
    fprintf(stderr, "  %s: embeddings against the GGUF: max relative difference %g%s\n", slm_basename(dir), worst,
            exact ? " (bit-exact)" : "");
out:
    slm_free(ef);
    slm_free(eg);
}

static void check_variant(const char *name, const opts *o) {
    weights w;
    make_weights(&w);
    char dir[512], gguf[600];
    write_folder(name, &w, o, dir, sizeof dir);
    snprintf(gguf, sizeof gguf, "%s/%s.gguf", root, name);
    write_gguf(&w, o, gguf);
    twin_same_model(dir, gguf);
    same_outputs(dir, gguf, o);
    unlink(gguf);
    st_rm_dir(dir);
    free_weights(&w);
}

static void test_folder(void) { check_variant("plain", &(opts){0}); }
static void test_prefixed(void) { check_variant("prefixed", &(opts){.prefix = 1, .cls_pooling = 1}); }
static void test_vocab_txt(void) { check_variant("vocabtxt", &(opts){.vocab_txt = 1}); }
static void test_cased(void) {
    check_variant("cased", &(opts){.cased = 1});
    check_variant("cased_txt", &(opts){.cased = 1, .vocab_txt = 1});
}

/* A cross-encoder folder (BertForSequenceClassification: bert.-prefixed
 * encoder and pooler, an unprefixed classifier, no modules.json): the
 * pooler and classifier load as cls and cls.output (the GGUF twin holds
 * them so), its pooling is rank, and its scores are the twin's. */
static void test_cross_encoder(void) {
    weights w;
    make_weights(&w);
    add_w(&w, "pooler.dense.weight", "F32", DIM, DIM, 0.2f, 0);
    add_w(&w, "pooler.dense.bias", "F32", 0, DIM, 0.1f, 0);
    add_w(&w, "classifier.weight", "F32", 1, DIM, 0.5f, 0);
    add_w(&w, "classifier.bias", "F32", 0, 1, 0.1f, 0);
    const opts o = {.prefix = 1, .cross = 1};
    char dir[512], gguf[600];
    write_folder("cross", &w, &o, dir, sizeof dir);
    snprintf(gguf, sizeof gguf, "%s/cross.gguf", root);
    write_gguf(&w, &o, gguf);
    twin_same_model(dir, gguf);
    slm_engine *ef = twin_load(dir, CTX, 4), *eg = twin_load(gguf, CTX, 4);
    slm_session *sa = NULL, *sb = NULL;
    CHECK(ef && eg && slm_session_new(ef, NULL, &sa) == SLM_OK && slm_session_new(eg, NULL, &sb) == SLM_OK);
    if (sa && sb) {
        CHECKF(slm_model_pooling(ef) == SLM_POOLING_RANK && slm_model_rank_outputs(ef) == 1, "pooling %d, %d scores",
               slm_model_pooling(ef), slm_model_rank_outputs(ef));
        float a[2] = {0}, b[2] = {0};
        int na = 0, nb = 0;
        CHECKF(slm_session_rerank(sa, "the cat", "sat on the mat.", a, 1, &na) == SLM_OK, "%s", slm_session_error(sa));
        CHECKF(slm_session_rerank(sb, "the cat", "sat on the mat.", b, 1, &nb) == SLM_OK, "%s", slm_session_error(sb));
        /* the folder: transformers' pair, [CLS] the cat [SEP] sat on the mat . [SEP]; the GGUF twin (no
         * add_eos_token key): llama.cpp's WordPiece defaults, without the last [SEP] */
        CHECKF(na == 10 && nb == 9, "%d tokens, the GGUF's %d", na, nb);
        int32_t ids[10] = {2, 5, 6, 3, 7, 8, 5, 9, 11, 3};
        float c[2] = {0};
        slm_session_embed(sb, ids, 10, SLM_POOLING_RANK, c, 1);
        CHECKF(a[0] == c[0] && a[0] != b[0], "score %g, the GGUF's on the same ids %g (on its own %g)", (double)a[0],
               (double)c[0], (double)b[0]);
        CHECK(slm_session_rerank(sa, "hello world", "sat on the mat.", b, 1, NULL) == SLM_OK && b[0] != a[0]);
    }
    slm_session_free(sa);
    slm_session_free(sb);
    slm_free(ef);
    slm_free(eg);
    unlink(gguf);
    st_rm_dir(dir);
    free_weights(&w);
}

/* sentence-transformers' Dense module on a BERT folder (modules.json:
 * Pooling, then 2_Dense [32 -> 32] with a bias and Tanh, then Normalize):
 * the folder's embedding is the twin's (which has no Dense) put through
 * the module here, in double; without the module's weights the folder is
 * refused naming the file. */
static void test_dense(void) {
    weights w;
    make_weights(&w);
    char dir[512], gguf[600], sub[600];
    write_folder("dense", &w, &(opts){0}, dir, sizeof dir);
    snprintf(gguf, sizeof gguf, "%s/dense.gguf", root);
    write_gguf(&w, &(opts){0}, gguf);
    CHECK(put(dir, "modules.json", "[{\"idx\": 0, \"name\": \"0\", \"path\": \"\", \"type\": "
              "\"sentence_transformers.models.Transformer\"}, {\"idx\": 1, \"name\": \"1\", \"path\": \"1_Pooling\", "
              "\"type\": \"sentence_transformers.models.Pooling\"}, {\"idx\": 2, \"name\": \"2\", \"path\": \"2_Dense\", "
              "\"type\": \"sentence_transformers.models.Dense\"}, {\"idx\": 3, \"name\": \"3\", \"path\": "
              "\"3_Normalize\", \"type\": \"sentence_transformers.models.Normalize\"}]"));
    snprintf(sub, sizeof sub, "%s/2_Dense", dir);
    mkdir(sub, 0700);
    CHECK(put(sub, "config.json", "{\"in_features\": 32, \"out_features\": 32, \"bias\": true, "
              "\"activation_function\": \"torch.nn.modules.activation.Tanh\"}"));
    static float dw[DIM * DIM], db[DIM];
    for (int i = 0; i < DIM * DIM; i++) dw[i] = 0.3f * nrand();
    for (int i = 0; i < DIM; i++) db[i] = 0.5f * nrand();
    snprintf(sub, sizeof sub, "%s/2_Dense/model.safetensors", dir);
    const st_item it[2] = {{"linear.weight", "F16", 2, {DIM, DIM}, dw}, {"linear.bias", "F32", 1, {DIM}, db}};
    for (int i = 0; i < DIM * DIM; i++) dw[i] = round_to("F16", dw[i]);
    CHECK(write_st(sub, it, 2, 0));
    slm_engine *ef = twin_load(dir, CTX, 4), *eg = twin_load(gguf, CTX, 4);
    slm_session *sa = NULL, *sb = NULL;
    CHECK(ef && eg && slm_session_new(ef, NULL, &sa) == SLM_OK && slm_session_new(eg, NULL, &sb) == SLM_OK);
    double worst = 0, moved = 0;
    for (size_t t = 0; sa && sb && t < sizeof texts / sizeof texts[0]; t++) {
        float a[DIM], b[DIM], y[DIM];
        CHECKF(slm_session_embed_text(sa, texts[t], SLM_POOLING_DEFAULT, a, DIM, NULL) == SLM_OK, "%s", slm_session_error(sa));
        CHECKF(slm_session_embed_text(sb, texts[t], SLM_POOLING_DEFAULT, b, DIM, NULL) == SLM_OK, "%s", slm_session_error(sb));
        for (int i = 0; i < DIM; i++) {
            double acc = db[i];
            for (int j = 0; j < DIM; j++) acc += (double)dw[i * DIM + j] * b[j];
            y[i] = (float)tanh(acc);
        }
        double big = 1e-30, d = 0, m = 0;
        for (int i = 0; i < DIM; i++)
            big = fmax(big, fabs(y[i])), d = fmax(d, fabs((double)a[i] - y[i])), m = fmax(m, fabs((double)b[i] - y[i]));
        worst = fmax(worst, d / big);
        moved = fmax(moved, m / big);
    }
    CHECKF(worst < 1e-6 && moved > 0.1, "the Dense module: relative error %g (it moves the vector by %g)", worst, moved);
    fprintf(stderr, "  dense: against the module computed here: max relative difference %g (it moves it by %g)\n", worst,
            moved);
    slm_session_free(sa);
    slm_session_free(sb);
    slm_free(ef);
    slm_free(eg);
    unlink(sub);
    expect_folder(dir, SLM_ERR_FORMAT, "dense/2_Dense/model.safetensors", "not found");
    unlink(gguf);
    st_rm_dir(dir);
    free_weights(&w);
}

/* Folders the loader refuses, naming the key or tensor. */
static void test_refusals(void) {
    weights w;
    make_weights(&w);
    static const struct { const char *config, *extra; slm_status want; const char *w1, *w2; int i64; } c[] = {
        {"\"position_embedding_type\": \"relative_key\", ", NULL, SLM_ERR_UNSUPPORTED, "position_embedding_type", "relative_key", 0},
        {"\"hidden_act\": \"relu\", ", NULL, SLM_ERR_UNSUPPORTED, "hidden_act", "relu", 0},
        {"\"is_decoder\": true, ", NULL, SLM_ERR_UNSUPPORTED, "is_decoder", NULL, 0},
        {"\"add_cross_attention\": true, ", NULL, SLM_ERR_UNSUPPORTED, "add_cross_attention", NULL, 0},
        {NULL, "classifier.weight", SLM_ERR_UNSUPPORTED, "classifier.weight", "bert", 0},
        {NULL, "encoder.layer.2.output.dense.weight", SLM_ERR_FORMAT, "num_hidden_layers", NULL, 0},
        {NULL, "bert.encoder.layer.0.output.dense.bias", SLM_ERR_UNSUPPORTED, "dtype I64", "output.dense.bias", 1},
        {"\"layer_norm_eps\": 2, ", NULL, SLM_ERR_FORMAT, "layer_norm_eps", NULL, 0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char dir[512], name[32];
        snprintf(name, sizeof name, "refuse%zu", i);
        const char *cfg = c[i].config;
        if (!cfg && !c[i].extra) continue;
        write_folder(name, &w, &(opts){.config = cfg, .extra = c[i].extra, .extra_dt = c[i].i64 ? "I64" : NULL}, dir,
                     sizeof dir);
        expect_folder(dir, c[i].want, c[i].w1, c[i].w2);
        st_rm_dir(dir);
    }
    /* a key that disagrees with the tensors: token_types with 1 row, type_vocab_size 2 */
    {
        char dir[512];
        weights w3;
        make_weights(&w3);
        w3.it[2].shape[0] = 1; /* token_types with 1 row: config says 2 */
        write_folder("refuse_types", &w3, &(opts){0}, dir, sizeof dir);
        expect_folder(dir, SLM_ERR_FORMAT, "type_vocab_size", NULL);
        st_rm_dir(dir);
        free_weights(&w3);
    }
    free_weights(&w);
}

/* tokenizer.json fields the WordPiece loader refuses, naming the field. */
static void test_tokenizer_refusals(void) {
    char dir[512];
    weights w;
    make_weights(&w);
    write_folder("tok", &w, &(opts){0}, dir, sizeof dir);
    char path[600];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    size_t len = 0;
    char *good = t_read_file(path, &len);
    CHECK(good != NULL);
    static const struct { const char *from, *to, *w1; } c[] = {
        {"\"type\": \"BertNormalizer\"", "\"type\": \"Lowercase\"", "normalizer.type"},
        {"\"clean_text\": true", "\"clean_text\": false", "normalizer.clean_text"},
        {"\"handle_chinese_chars\": true", "\"handle_chinese_chars\": false", "normalizer.handle_chinese_chars"},
        {"\"BertPreTokenizer\"", "\"Whitespace\"", "pre_tokenizer.type"},
        {"\"type\": \"TemplateProcessing\"", "\"type\": \"RobertaProcessing\"", "post_processor.type"},
        {"{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, ", "", "post_processor.single"},
        {"\"continuing_subword_prefix\": \"##\"", "\"continuing_subword_prefix\": \"@@\"", "continuing_subword_prefix"},
        {"\"unk_token\": \"[UNK]\"", "\"unk_token\": \"<unk>\"", "model.unk_token"},
        {"\"model\": {\"type\": \"WordPiece\"", "\"model\": {\"type\": \"BPE\"", "model.type"},
        {"\"the\": 5", "\"the\": -5", "model.vocab"},
    };
    for (size_t i = 0; good && i < sizeof c / sizeof c[0]; i++) {
        const char *at = strstr(good, c[i].from);
        CHECKF(at != NULL, "case %zu: '%s' not in the file", i, c[i].from);
        if (!at) continue;
        char *bad = malloc(len + 64);
        const size_t pre = (size_t)(at - good);
        memcpy(bad, good, pre);
        strcpy(bad + pre, c[i].to);
        strcat(bad, at + strlen(c[i].from));
        slm_wpm *t = NULL;
        slm_err err = {0};
        const slm_status s = slm_wpm_load_hf_json_mem(&t, bad, strlen(bad), NV, "tokenizer.json", &err);
        CHECKF(s != SLM_OK && strstr(err.msg, c[i].w1), "case %zu: status %d, message '%s' (want '%s')", i, s, err.msg,
               c[i].w1);
        slm_wpm_free(t);
        if (i == 0) { /* through the engine: slm_load says it */
            CHECK(t_write_file(path, bad, strlen(bad)));
            slm_options o = slm_default_options();
            o.embeddings = 1;
            slm_engine *e = NULL;
            CHECK(slm_load(&e, dir, &o) != SLM_OK);
            CHECKF(strstr(slm_last_error(e), "normalizer.type") != NULL, "%s", slm_last_error(e));
            slm_free(e);
        }
        free(bad);
    }
    /* padded to config.json's vocab_size: ids beyond the vocabulary are unused "[PAD<id>]" */
    slm_wpm *t = NULL;
    slm_err err = {0};
    CHECKF(good && slm_wpm_load_hf_json_mem(&t, good, len, NV + 3, "tokenizer.json", &err) == SLM_OK, "%s", err.msg);
    if (t) {
        CHECK(slm_wpm_vocab_size(t) == NV + 3);
        CHECK(slm_wpm_type(t, NV + 1) == 5 && !strcmp(slm_wpm_str(t, NV + 1), " [PAD37]"));
        CHECK(slm_wpm_type(t, 2) == 3 && !strcmp(slm_wpm_str(t, 2), "[CLS]") && slm_wpm_cls(t) == 2);
        CHECK(!strcmp(slm_wpm_str(t, 10), "ning") && !strcmp(slm_wpm_str(t, 5), " the"));
        slm_wpm_free(t);
    }
    /* no tokenizer at all */
    unlink(path);
    slm_options o = slm_default_options();
    o.embeddings = 1;
    slm_engine *e = NULL;
    CHECK(slm_load(&e, dir, &o) != SLM_OK);
    CHECKF(strstr(slm_last_error(e), "vocab.txt") != NULL, "%s", slm_last_error(e));
    slm_free(e);
    free(good);
    st_rm_dir(dir);
    free_weights(&w);
}

int main(void) {
    snprintf(root, sizeof root, "/tmp/slm_hf_bert_%d", (int)getpid());
    mkdir(root, 0700);
    T_RUN(test_folder);
    T_RUN(test_prefixed);
    T_RUN(test_vocab_txt);
    T_RUN(test_cased);
    T_RUN(test_cross_encoder);
    T_RUN(test_dense);
    T_RUN(test_refusals);
    T_RUN(test_tokenizer_refusals);
    st_rm_dir(root);
    T_DONE();
}
