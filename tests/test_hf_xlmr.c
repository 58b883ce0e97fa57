/* XLM-RoBERTa Hugging Face folders (bge-m3, multilingual-e5, bge-reranker-v2-m3
 * as the Hub has them) written here from C: config.json (model_type
 * xlm-roberta, the position table with its pad_token_id + 1 unused rows),
 * model.safetensors, a Unigram tokenizer.json built from the committed
 * tests/corpus/ugm/xlmr.gguf vocabulary (its pieces, scores and nmt_nfkc
 * charsmap, base64-encoded here) and tokenizer_config.json; each against a
 * GGUF twin written the way llama.cpp's converter writes one (the position
 * rows cut, context = max_position_embeddings - 2, the t5 vocabulary with
 * its flags): the same config and tensors, the same token ids (and, for the
 * tokenizer alone, llama.cpp's ids of xlmr.gguf.inp), the same embeddings,
 * and for the cross-encoder the same rerank scores. A "bert" folder with
 * the same tokenizer (multilingual-e5-small's shape) keeps its positions.
 * Then the refusals, each naming its field. */
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
#include "format/gguf.h"
#include "format/model.h"
#include "staticlm.h"
#include "text/tokenizer.h"
#include "text/ugm.h"
#include "vocab_pairs.h"
#include "t_xlmr_vocab.h"

enum { DIM = 32, HEADS = 2, FF = 48, LAYERS = 2, CTX = 64, OFF = 2 };

static char root[256];

/* ---- the folder and its twin ---------------------------------------------------- */

typedef struct opts {
    int cross;          /* XLMRobertaForSequenceClassification: roberta. prefix, classifier.dense / out_proj */
    int bert;           /* model_type bert (multilingual-e5-small): positions from row 0, no cut */
    const char *config; /* config.json instead of the usual */
    int pos_rows;       /* rows of the position table (0: max_position_embeddings) */
} opts;

static int put(const char *dir, const char *file, const char *text) {
    char p[1100];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    return t_write_file(p, text, strlen(text));
}

static void make_weights(weights *w, const opts *o) {
    g_rng = 777;
    w->n = 0;
    add_w(w, "embeddings.word_embeddings.weight", "F32", NV, DIM, 0.5f, 0);
    add_w(w, "embeddings.position_embeddings.weight", "F32", o->pos_rows ? o->pos_rows : CTX + (o->bert ? 0 : OFF), DIM,
          0.5f, 0);
    add_w(w, "embeddings.token_type_embeddings.weight", "F32", 1, DIM, 0.5f, 0);
    add_w(w, "embeddings.LayerNorm.weight", "F32", 0, DIM, 0.1f, 1);
    add_w(w, "embeddings.LayerNorm.bias", "F32", 0, DIM, 0.1f, 0);
    static const struct { const char *name, *gg; int rows, cols; } t[] = {
        {"attention.self.query", "attn_q", DIM, DIM}, {"attention.self.key", "attn_k", DIM, DIM},
        {"attention.self.value", "attn_v", DIM, DIM}, {"attention.output.dense", "attn_output", DIM, DIM},
        {"attention.output.LayerNorm", "attn_output_norm", 0, DIM}, {"intermediate.dense", "ffn_up", FF, DIM},
        {"output.dense", "ffn_down", DIM, FF},        {"output.LayerNorm", "layer_output_norm", 0, DIM},
    };
    char n[96];
    for (int l = 0; l < LAYERS; l++)
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
            const int ln = t[i].rows == 0;
            snprintf(n, sizeof n, "encoder.layer.%d.%s.weight", l, t[i].name);
            add_w(w, n, "F32", t[i].rows, t[i].cols, ln ? 0.1f : 0.2f, ln ? 1.0f : 0.0f);
            snprintf(n, sizeof n, "encoder.layer.%d.%s.bias", l, t[i].name);
            add_w(w, n, "F32", 0, t[i].rows ? t[i].rows : t[i].cols, 0.1f, 0);
        }
    if (o->cross) {
        add_w(w, "classifier.dense.weight", "F32", DIM, DIM, 0.2f, 0);
        add_w(w, "classifier.dense.bias", "F32", 0, DIM, 0.1f, 0);
        add_w(w, "classifier.out_proj.weight", "F32", 1, DIM, 0.5f, 0);
        add_w(w, "classifier.out_proj.bias", "F32", 0, 1, 0.1f, 0);
    }
}

/* This file's own table of the converter's names (its XLMRobertaModel: roberta. dropped). */
static int gguf_of(const char *hf, char *out, size_t cap) {
    static const char *const map[][2] = {
        {"embeddings.word_embeddings.weight", "token_embd.weight"}, {"embeddings.position_embeddings.weight", "position_embd.weight"},
        {"embeddings.token_type_embeddings.weight", "token_types.weight"}, {"embeddings.LayerNorm.weight", "token_embd_norm.weight"},
        {"embeddings.LayerNorm.bias", "token_embd_norm.bias"}, {"classifier.dense.weight", "cls.weight"},
        {"classifier.dense.bias", "cls.bias"}, {"classifier.out_proj.weight", "cls.output.weight"},
        {"classifier.out_proj.bias", "cls.output.bias"},
    };
    static const char *const lmap[][2] = {
        {"attention.self.query", "attn_q"}, {"attention.self.key", "attn_k"}, {"attention.self.value", "attn_v"},
        {"attention.output.dense", "attn_output"}, {"attention.output.LayerNorm", "attn_output_norm"},
        {"intermediate.dense", "ffn_up"}, {"output.dense", "ffn_down"}, {"output.LayerNorm", "layer_output_norm"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(hf, map[i][0])) return snprintf(out, cap, "%s", map[i][1]), 1;
    int l = -1;
    char rest[96];
    if (sscanf(hf, "encoder.layer.%d.%95s", &l, rest) != 2) return 0;
    for (size_t i = 0; i < sizeof lmap / sizeof lmap[0]; i++) {
        const size_t n = strlen(lmap[i][0]);
        if (!strncmp(rest, lmap[i][0], n) && rest[n] == '.')
            return snprintf(out, cap, "blk.%d.%s.%s", l, lmap[i][1], rest + n + 1), 1;
    }
    return 0;
}

static void write_folder(const char *name, const weights *w, const opts *o, char *dir, size_t cap) {
    snprintf(dir, cap, "%s/%s", root, name);
    mkdir(dir, 0700);
    char cfg[2048];
    snprintf(cfg, sizeof cfg, "{\"architectures\": [\"%s\"], \"model_type\": \"%s\", \"hidden_size\": %d, "
             "\"intermediate_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d, "
             "\"max_position_embeddings\": %d, \"vocab_size\": %d, \"type_vocab_size\": 1, \"pad_token_id\": %d, "
             "\"bos_token_id\": 0, \"eos_token_id\": 2, \"layer_norm_eps\": 1e-05, \"hidden_act\": \"gelu\", "
             "\"position_embedding_type\": \"absolute\", \"hidden_dropout_prob\": 0.1, \"torch_dtype\": \"float32\"}\n",
             o->cross ? "XLMRobertaForSequenceClassification" : o->bert ? "BertModel" : "XLMRobertaModel",
             o->bert ? "bert" : "xlm-roberta", DIM, FF, LAYERS, HEADS, CTX + (o->bert ? 0 : OFF), NV, o->bert ? 0 : 1);
    CHECK(put(dir, "config.json", o->config ? o->config : cfg));
    st_item it[80];
    for (int i = 0; i < w->n; i++) {
        it[i] = w->it[i];
        if (o->cross && strncmp(w->it[i].name, "classifier.", 11)) /* the head: unprefixed */
            snprintf(it[i].name, sizeof it[i].name, "roberta.%.80s", w->it[i].name);
    }
    CHECK(st_write_weights(dir, it, w->n, 0, 0));
    char *tj = tokenizer_json();
    CHECK(put(dir, "tokenizer.json", tj));
    free(tj);
    CHECK(put(dir, "tokenizer_config.json", TOK_CONFIG));
    if (o->cross) return;
    CHECK(st_write_pooling(dir, DIM, !o->bert));
}

/* The twin as llama.cpp's converter writes it: positions cut, the t5 vocabulary. */
static void write_gguf(const weights *w, const opts *o, const char *path) {
    slm_gguf_writer *g = slm_gguf_writer_new();
    slm_gguf_set_str(g, "general.architecture", "bert");
    slm_gguf_set_u32(g, "bert.context_length", CTX);
    slm_gguf_set_u32(g, "bert.embedding_length", DIM);
    slm_gguf_set_u32(g, "bert.feed_forward_length", FF);
    slm_gguf_set_u32(g, "bert.block_count", LAYERS);
    slm_gguf_set_u32(g, "bert.attention.head_count", HEADS);
    slm_gguf_set_f32(g, "bert.attention.layer_norm_epsilon", 1e-5f);
    slm_gguf_set_bool(g, "bert.attention.causal", 0);
    slm_gguf_set_u32(g, "bert.pooling_type", o->cross ? 4 : o->bert ? 1 : 2);
    xlmr_gguf_vocab(g, NV);
    for (int i = 0; i < w->n; i++) {
        const st_item *t = &w->it[i];
        char gn[64];
        CHECKF(gguf_of(t->name, gn, sizeof gn), "%s: no GGUF name", t->name);
        int64_t rows = t->n_dims == 2 ? t->shape[0] : 1, cols = t->n_dims == 2 ? t->shape[1] : t->shape[0];
        const float *f = t->f;
        if (!o->bert && !strcmp(gn, "position_embd.weight")) f += OFF * cols, rows -= OFF; /* the converter's slice */
        const int64_t ne[2] = {cols, rows};
        slm_gguf_add_tensor(g, gn, SLM_F32, (uint32_t)t->n_dims, ne, f, (uint64_t)(rows * cols) * 4);
    }
    slm_err err = {0};
    CHECKF(slm_gguf_write(g, path, &err) == SLM_OK, "%s", err.msg);
    slm_gguf_writer_free(g);
}

/* ---- the checks ------------------------------------------------------------------ */

static const char *const texts[] = {
    "The quick brown fox jumps over the lazy dog.",
    "Le caf\xc3\xa9 est tr\xc3\xa8s chaud, mais la cr\xc3\xa8me br\xc3\xbbl\xc3\xa9" "e est froide.",
    "\xe6\x88\x91\xe4\xbb\xac\xe4\xbb\x8a\xe5\xa4\xa9\xe5\x8e\xbb\xe5\x8c\x97\xe4\xba\xac\xe7\x9c\x8b\xe9\x95\xbf\xe5\x9f\x8e\xef\xbc\x8c \xe1\x9a\xa0\xe1\x9b\x87\xe1\x9a\xbb",
    "\xef\xbc\xa6\xef\xbd\x95\xef\xbd\x8c\xef\xbd\x8c\xef\xbc\x8d\xef\xbd\x97\xef\xbd\x89\xef\xbd\x84\xef\xbd\x94\xef\xbd\x88 "
    "\xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3\xef\xbc\x91\xef\xbc\x92\xef\xbc\x93\xef\xbc\x81",
    "  na\xc3\xafve   co\xc3\xb6peration fa\xc3\xa7" "ade  ",
    "Der Stra\xc3\x9f" "enbahnfahrer gr\xc3\xbc\xc3\x9ft die Fu\xc3\x9fg\xc3\xa4nger.",
};

/* Token ids and embeddings of the folder against its GGUF twin. */
static void same_outputs(const char *dir, const char *gguf, const opts *o) {
    slm_engine *ef = twin_load(dir, CTX, 8), *eg = twin_load(gguf, CTX, 8);
    CHECK(ef && eg);
    if (!ef || !eg) goto out;
    const int pool = o->bert ? SLM_POOLING_MEAN : SLM_POOLING_CLS;
    CHECKF(slm_model_pooling(ef) == pool && slm_model_pooling(eg) == pool, "%s: pooling %d / %d", dir,
           slm_model_pooling(ef), slm_model_pooling(eg));
    double worst = 0;
    int exact = 1, n_unk = 0;
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
        int32_t a[CTX], b[CTX];
        const int na = slm_tokenize(ef, texts[t], 1, a, CTX), nb = slm_tokenize(eg, texts[t], 1, b, CTX);
        CHECKF(na == nb && na > 2 && na <= CTX && !memcmp(a, b, sizeof a[0] * (size_t)na), "%s: text %zu: %d ids, the "
               "GGUF's %d", dir, t, na, nb);
        CHECKF(na > 1 && a[0] == 0 && a[na - 1] != 2, "%s: text %zu: not <s> first (slm_tokenize adds no </s>)", dir, t);
        for (int i = 0; i < na; i++) n_unk += a[i] == 3;
        float ea[DIM], eb[DIM];
        int ta = 0, tb = 0;
        slm_session *sa = NULL, *sb = NULL;
        CHECK(slm_session_new(ef, NULL, &sa) == SLM_OK && slm_session_new(eg, NULL, &sb) == SLM_OK);
        if (sa && sb) {
            CHECKF(slm_session_embed_text(sa, texts[t], pool, ea, DIM, &ta) == SLM_OK, "%s", slm_session_error(sa));
            CHECKF(slm_session_embed_text(sb, texts[t], pool, eb, DIM, &tb) == SLM_OK, "%s", slm_session_error(sb));
            CHECKF(ta == na + 1 && tb == na + 1, "%s: text %zu: %d / %d tokens embedded, want %d (</s> last)", dir, t, ta,
                   tb, na + 1);
            double big = 1e-30, d = 0;
            for (int i = 0; i < DIM; i++) big = fmax(big, fabs(eb[i])), d = fmax(d, fabs((double)ea[i] - eb[i]));
            worst = fmax(worst, d / big);
            exact &= !memcmp(ea, eb, sizeof ea);
        }
        slm_session_free(sa);
        slm_session_free(sb);
    }
    CHECKF(exact, "%s: embeddings differ from the GGUF's by %g (relative)", dir, worst);
    CHECKF(n_unk > 0, "%s: no text met the unknown token", dir); /* the runes: the small vocabulary lacks them */
    fprintf(stderr, "  %s: ids and embeddings against the GGUF twin: max relative difference %g%s\n", slm_basename(dir),
            worst, exact ? " (bit-exact)" : "");
out:
    slm_free(ef);
    slm_free(eg);
}

static void check_variant(const char *name, const opts *o) {
    weights w;
    make_weights(&w, o);
    char dir[512], gguf[600];
    write_folder(name, &w, o, dir, sizeof dir);
    snprintf(gguf, sizeof gguf, "%s/%s.gguf", root, name);
    write_gguf(&w, o, gguf);
    twin_same_model(dir, gguf);
    same_outputs(dir, gguf, o);
    const char *keep = getenv("SLM_XLMR_KEEP"); /* local checks against llama.cpp: keep the twin */
    if (keep) {
        char cmd[1400];
        snprintf(cmd, sizeof cmd, "cp -r '%s' '%s' '%s/'", gguf, dir, keep);
        CHECK(system(cmd) == 0);
    }
    unlink(gguf);
    st_rm_dir(dir);
    free_weights(&w);
}

/* The tokenizer alone: llama.cpp's ids of xlmr.gguf.inp (llama-tokenize on
 * the GGUF the vocabulary came from), and the GGUF form the converter writes. */
typedef struct pair_ctx { const slm_tokenizer *t; } pair_ctx;
static int pair_check(void *ud, const char *text, size_t len, const int32_t *exp, int ne) {
    (void)len;
    const pair_ctx *c = ud;
    int32_t ids[VOCAB_PAIRS_MAX_IDS];
    const int n = slm_tok_encode(c->t, text, 1, 1, ids, VOCAB_PAIRS_MAX_IDS);
    return n == ne && !memcmp(ids, exp, sizeof *ids * (size_t)(n > 0 ? n : 0));
}

static void test_tokenizer(void) {
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/tok", root);
    mkdir(dir, 0700);
    char *tj = tokenizer_json();
    CHECK(put(dir, "tokenizer.json", tj) && put(dir, "tokenizer_config.json", TOK_CONFIG));
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    slm_tokenizer *t = NULL;
    slm_err err = {0};
    CHECKF(slm_tok_load_hf_encoder(&t, path, NV, 1, &err) == SLM_OK, "%s", err.msg);
    if (t) {
        pair_ctx c = {t};
        int total = 0;
        const int pass = vocab_pairs_at(UGM_DIR, "xlmr.gguf", pair_check, &c, &total);
        CHECKF(total >= 80 && pass == total, "xlmr.gguf vectors: %d of %d", pass, total);
        fprintf(stderr, "  tokenizer.json: %d/%d of llama.cpp's ids for xlmr.gguf.inp\n", pass, total);
        int ab = -1, ae = -1, as = -1, sep = -1;
        CHECK(slm_tok_is_ugm(t) && slm_tok_bos(t) == 0 && slm_tok_eos(t) == 2);
        CHECK(slm_tok_hf_pair(t, &ab, &ae, &as, &sep) && ab == 1 && ae == 1 && as == 1 && sep == 2);
        slm_tok_free(t);
    }
    /* the GGUF form: pieces, scores and types as the converter writes them */
    slm_ugm *u = NULL;
    CHECKF(slm_ugm_load_hf_json_mem(&u, tj, strlen(tj), TOK_CONFIG, strlen(TOK_CONFIG), NV + 2, "tokenizer.json", NULL,
                                    &err) == SLM_OK, "%s", err.msg);
    if (u) {
        const slm_ugm_meta *m = slm_ugm_get_meta(u);
        CHECK(slm_ugm_vocab_size(u) == NV + 2 && m->bos == 0 && m->eos == 2 && m->unk == 3 && m->sep == 2 && m->pad == 1);
        CHECK(m->add_bos && m->add_eos && m->add_space_prefix && m->remove_extra_ws);
        int same = 1;
        for (int i = 0; i < NV; i++) same &= slm_ugm_type(u, i) == V.type[i] && slm_ugm_score(u, i) == V.score[i];
        CHECK(same);
        CHECK(slm_ugm_type(u, NV + 1) == 5 && slm_ugm_score(u, NV + 1) == -10000.0f && !strcmp(slm_ugm_str(u, NV + 1), "[PAD869]"));
        slm_ugm_free(u);
    }
    /* without tokenizer_config.json: the Replace step still asks for collapsed spaces, the ids are the same */
    CHECKF(slm_ugm_load_hf_json_mem(&u, tj, strlen(tj), NULL, 0, 0, "tokenizer.json", NULL, &err) == SLM_OK, "%s", err.msg);
    if (u) {
        CHECK(slm_ugm_get_meta(u)->remove_extra_ws == 1 && slm_ugm_get_meta(u)->sep == 2);
        slm_ugm_free(u);
    }
    free(tj);
    st_rm_dir(dir);
}

static void test_xlmr(void) { check_variant("xlmr", &(opts){0}); }
static void test_e5_bert(void) { check_variant("e5bert", &(opts){.bert = 1}); }

/* bge-reranker-v2-m3's shape: the classifier head, rerank scores as the twin's. */
static void test_cross_encoder(void) {
    const opts o = {.cross = 1};
    weights w;
    make_weights(&w, &o);
    char dir[512], gguf[600];
    write_folder("cross", &w, &o, dir, sizeof dir);
    snprintf(gguf, sizeof gguf, "%s/cross.gguf", root);
    write_gguf(&w, &o, gguf);
    twin_same_model(dir, gguf);
    slm_engine *ef = twin_load(dir, CTX, 8), *eg = twin_load(gguf, CTX, 8);
    slm_session *sa = NULL, *sb = NULL;
    CHECK(ef && eg && slm_session_new(ef, NULL, &sa) == SLM_OK && slm_session_new(eg, NULL, &sb) == SLM_OK);
    if (sa && sb) {
        CHECKF(slm_model_pooling(ef) == SLM_POOLING_RANK && slm_model_rank_outputs(ef) == 1, "pooling %d, %d scores",
               slm_model_pooling(ef), slm_model_rank_outputs(ef));
        static const char *const q[2] = {"what is a fox?", "caf\xc3\xa9 cr\xc3\xa8me"};
        static const char *const d[2] = {"The quick brown fox jumps over the lazy dog.", "Le caf\xc3\xa9 est tr\xc3\xa8s chaud."};
        for (int k = 0; k < 2; k++) {
            float a = 0, b = 0, c = 0;
            int na = 0, nb = 0;
            CHECKF(slm_session_rerank(sa, q[k], d[k], &a, 1, &na) == SLM_OK, "%s", slm_session_error(sa));
            CHECKF(slm_session_rerank(sb, q[k], d[k], &b, 1, &nb) == SLM_OK, "%s", slm_session_error(sb));
            /* transformers' pair by hand: <s> q </s></s> d </s> */
            int32_t ids[CTX], x[CTX];
            const int nq = slm_tokenize(eg, q[k], 0, x, CTX);
            int n = 0;
            ids[n++] = 0;
            for (int i = 0; i < nq; i++) ids[n++] = x[i];
            ids[n++] = 2, ids[n++] = 2;
            const int nd = slm_tokenize(eg, d[k], 0, x, CTX);
            for (int i = 0; i < nd; i++) ids[n++] = x[i];
            ids[n++] = 2;
            CHECK(slm_session_embed(sb, ids, n, SLM_POOLING_RANK, &c, 1) == SLM_OK);
            CHECKF(na == n && nb == n && a == b && a == c, "pair %d: %d / %d tokens (want %d), scores %.9g / %.9g / by "
                   "hand %.9g", k, na, nb, n, (double)a, (double)b, (double)c);
            fprintf(stderr, "  cross: pair %d: %d tokens, score %.7g (the twin's %.7g)\n", k, na, (double)a, (double)b);
        }
    }
    slm_session_free(sa);
    slm_session_free(sb);
    slm_free(ef);
    slm_free(eg);
    { /* the folder as a blob: its pooling, the pair of its post-processor and its head kept */
        const slm_options bo = twin_opts(CTX, 8);
        int32_t bid[12];
        for (int i = 0; i < 12; i++) bid[i] = i ? 3 + (i * 5) % 20 : 0;
        static const int lens[] = {4, 10, 2};
        char blob[640];
        snprintf(blob, sizeof blob, "%s/cross.slmblob", root);
        t_blob_embed_check(dir, &bo, blob, bid, 12, lens, 3);
    }
    const char *keep = getenv("SLM_XLMR_KEEP");
    if (keep) {
        char cmd[1400];
        snprintf(cmd, sizeof cmd, "cp -r '%s' '%s' '%s/'", gguf, dir, keep);
        CHECK(system(cmd) == 0);
    }
    unlink(gguf);
    st_rm_dir(dir);
    free_weights(&w);
}

/* A folder that slm_model_open (load: slm_load) refuses with a message holding w1 and w2. */
static void expect_refused(const char *dir, int load_it, const char *w1, const char *w2) {
    const char *msg;
    slm_engine *e = NULL;
    slm_model_file m;
    slm_err err = {0};
    slm_status s;
    if (load_it) {
        slm_options o = slm_default_options();
        o.embeddings = 1;
        s = slm_load(&e, dir, &o);
        msg = slm_last_error(e);
    } else {
        s = slm_model_open(&m, dir, &err);
        msg = err.msg;
        if (s == SLM_OK) slm_model_close(&m);
    }
    CHECKF(s != SLM_OK && msg && strstr(msg, w1) && (!w2 || strstr(msg, w2)), "%s: status %d, '%s' (want '%s', '%s')",
           dir, s, msg ? msg : "", w1, w2 ? w2 : "");
    slm_free(e);
}

static void test_refusals(void) {
    char *tj = tokenizer_json();
    static const struct { const char *from, *to, *w1; } c[] = {
        {"\"precompiled_charsmap\": \"", "\"precompiled_charsmap\": \"QUJD", "precompiled_charsmap"}, /* 3 bytes too many: truncated */
        {"\"precompiled_charsmap\": \"", "\"precompiled_charsmap\": \"//8AAA==", "precompiled_charsmap"}, /* a bad charsmap */
        {"\"precompiled_charsmap\": \"", "\"precompiled_charsmap\": \"QU*D", "precompiled_charsmap"},
        {"\"type\": \"Unigram\"", "\"type\": \"BPE\"", "model.type"},
        {"\"unk_id\": 3", "\"unk_id\": 99999", "model.unk_id"},
        {"\"Regex\": \" {2,}\"", "\"Regex\": \"a+\"", "normalizer.normalizers[1]"},
        {"{\"type\": \"Precompiled\"", "{\"type\": \"NFKC\"}, {\"type\": \"Precompiled\"", "normalizer.normalizers[0]"},
        {"\"prepend_scheme\": \"always\"}, \"post", "\"prepend_scheme\": \"first\"}, \"post", "prepend_scheme"},
        {"\"type\": \"Metaspace\", \"replacement\": \"\xe2\x96\x81\", \"add_prefix_space\": true, \"prepend_scheme\": "
         "\"always\"}, \"post", "\"type\": \"Whitespace\"}, \"post", "pre_tokenizer.type"},
        {"\"type\": \"TemplateProcessing\"", "\"type\": \"BertProcessing\"", "post_processor.type"},
        {"{\"id\": 867, \"content\"", "{\"id\": 900, \"content\"", "added_tokens[4]"},
        {"[\"<s>\", 0]", "[\"<s>\", \"x\"]", "model.vocab[0]"},
        {"\"byte_fallback\": false", "\"byte_fallback\": true", "byte_fallback"},
    };
    const size_t len = strlen(tj);
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        const char *at = strstr(tj, c[i].from);
        CHECKF(at != NULL, "case %zu: '%s' not in the file", i, c[i].from);
        if (!at) continue;
        char *bad = malloc(len + 256);
        const size_t pre = (size_t)(at - tj);
        memcpy(bad, tj, pre);
        strcpy(bad + pre, c[i].to);
        strcat(bad, at + strlen(c[i].from));
        if (i < 2) { /* the charsmap replaced whole: cut what followed up to its closing quote */
            char *s = bad + pre + strlen(c[i].to), *q = strchr(s, '"');
            memmove(s, q, strlen(q) + 1);
        }
        slm_ugm *u = NULL;
        slm_err err = {0};
        const slm_status s = slm_ugm_load_hf_json_mem(&u, bad, strlen(bad), NULL, 0, NV, "tokenizer.json", NULL, &err);
        CHECKF(s != SLM_OK && strstr(err.msg, c[i].w1) && strstr(err.msg, "tokenizer.json"), "case %zu: status %d, "
               "message '%s' (want '%s')", i, s, err.msg, c[i].w1);
        slm_ugm_free(u);
        free(bad);
    }
    free(tj);
    /* whole folders */
    weights w;
    const opts o0 = {0};
    make_weights(&w, &o0);
    char dir[512];
    /* a WordPiece tokenizer.json in an xlm-roberta folder */
    write_folder("r_wpm", &w, &o0, dir, sizeof dir);
    CHECK(put(dir, "tokenizer.json", "{\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", \"vocab\": "
              "{\"[UNK]\": 0, \"[CLS]\": 1, \"[SEP]\": 2}}, \"normalizer\": {\"type\": \"BertNormalizer\"}, "
              "\"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}, \"post_processor\": null}"));
    expect_refused(dir, 1, "must be Unigram", "WordPiece");
    /* sentencepiece.bpe.model alone */
    char p[700];
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    unlink(p);
    CHECK(put(dir, "sentencepiece.bpe.model", "x"));
    expect_refused(dir, 1, "no tokenizer.json", "sentencepiece.bpe.model");
    st_rm_dir(dir);
    free_weights(&w);
    /* a position table with fewer rows than the offset; one that disagrees with the config */
    make_weights(&w, &(opts){.pos_rows = 2});
    write_folder("r_pos", &w, &(opts){.pos_rows = 2}, dir, sizeof dir);
    expect_refused(dir, 0, "position_embeddings", "none left");
    st_rm_dir(dir);
    free_weights(&w);
    make_weights(&w, &(opts){.pos_rows = CTX});
    write_folder("r_pos2", &w, &(opts){.pos_rows = CTX}, dir, sizeof dir);
    expect_refused(dir, 0, "position_embeddings", "pad_token_id + 1");
    st_rm_dir(dir);
    /* max_position_embeddings not beyond the offset */
    char cfg[600];
    snprintf(cfg, sizeof cfg, "{\"model_type\": \"xlm-roberta\", \"hidden_size\": %d, \"intermediate_size\": %d, "
             "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"max_position_embeddings\": 2, \"vocab_size\": %d, "
             "\"type_vocab_size\": 1, \"pad_token_id\": 1}", DIM, FF, LAYERS, HEADS, NV);
    write_folder("r_cfg", &w, &(opts){.pos_rows = CTX, .config = cfg}, dir, sizeof dir);
    expect_refused(dir, 0, "max_position_embeddings", "leaves no positions");
    st_rm_dir(dir);
    free_weights(&w);
}

int main(void) {
    snprintf(root, sizeof root, "/tmp/slm_hf_xlmr_%d", (int)getpid());
    mkdir(root, 0700);
    if (!xlmr_load_vocab()) {
        fprintf(stderr, "cannot read %s/xlmr.gguf\n", UGM_DIR);
        return 1;
    }
    T_RUN(test_tokenizer);
    T_RUN(test_xlmr);
    T_RUN(test_e5_bert);
    T_RUN(test_cross_encoder);
    T_RUN(test_refusals);
    xlmr_vocab_free();
    st_rm_dir(root);
    T_DONE();
}
