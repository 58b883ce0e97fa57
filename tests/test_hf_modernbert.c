/* ModernBERT and jina-bert-v2 Hugging Face folders written here from C,
 * each against a GGUF twin of the same weights and vocabulary written with
 * the GGUF writer the way llama.cpp's converter writes a modern-bert or
 * jina-bert-v2 file (its keys, its tensor names from this file's own table,
 * the fused attn_qkv and ffn_up left whole): the same config and tensors
 * (name, type, shape, bytes), the same token ids (and ids worked out here by
 * hand), the same embeddings; ModernBERT with and without the "model."
 * prefix and MLM head, in F32 and BF16, with its window layers and with
 * none, its config spelled as transformers 4 and 5 save it; a ModernBERT
 * reranker (ModernBertForSequenceClassification) against its twin's
 * classifier head, score for score; jina-bert-v2 with the GeGLU FFN (WordPiece vocabulary), its code
 * variant (Q/K LayerNorms, layer_norm_1/2, a byte-level BPE vocabulary with
 * RobertaProcessing) and BERT's FFN; and the refusals, each naming its key
 * or tensor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "t.h"
#include "t_hf_twin.h"
#include "st_write.h"
#include "hf_twin.h"
#include "format/gguf.h"
#include "format/model.h"
#include "staticlm.h"

enum { DIM = 32, HEADS = 2, FF = 24, CTX = 32, NB = 52, NW = 16 };

static char root[128];

/* ---- vocabularies ------------------------------------------------------------ */

/* The byte-level BPE vocabulary (ModernBERT's kind): a..z, "Ġ" (the space),
 * punctuation, the tokens the merges make, then the special tokens. */
#define SP "\xc4\xa0"
static const char *const bpe_vocab[NB] = {
    "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t", "u", "v", "w",
    "x", "y", "z", SP, ".", ",", "!", "?", "he", SP "t", SP "the", "at", SP "c", SP "cat", SP "s", SP "sat", "on",
    SP "on", SP "m", SP "mat", "the", "ll", "hell", "hello", "[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]",
};
static const char *const bpe_merges[] = {
    "h e", SP " t", SP "t he", "a t", SP " c", SP "c at", SP " s", SP "s at", "o n", SP " on", SP " m", SP "m at",
    "t he", "l l", "he ll", "hell o",
};
enum { N_MERGES = sizeof bpe_merges / sizeof bpe_merges[0], B_UNK = 47, B_CLS = 48, B_SEP = 49, B_PAD = 50, B_MASK = 51 };

/* The WordPiece vocabulary (jina-embeddings-v2-base-en's kind). */
static const char *const wp_vocab[NW] = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", ".", ",", "!", "hello", "##s", "a",
};

static int put(const char *dir, const char *file, const char *text) {
    char p[1100];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    return t_write_file(p, text, strlen(text));
}

/* tokenizer.json of the BPE vocabulary; roberta: RobertaProcessing, else
 * ModernBERT's TemplateProcessing [CLS] $A [SEP]. */
static void write_bpe_tokenizer(const char *dir, int roberta) {
    char *j = malloc(16384);
    size_t n = 0;
    n += (size_t)sprintf(j + n, "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null, \"added_tokens\": [");
    for (int i = B_UNK; i < NB; i++)
        n += (size_t)sprintf(j + n, "%s{\"id\": %d, \"content\": \"%s\", \"single_word\": false, \"lstrip\": false, "
                             "\"rstrip\": false, \"normalized\": false, \"special\": true}", i > B_UNK ? ", " : "", i,
                             bpe_vocab[i]);
    n += (size_t)sprintf(j + n, "], \"normalizer\": null, \"pre_tokenizer\": {\"type\": \"ByteLevel\", "
                         "\"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": true}, ");
    if (roberta)
        n += (size_t)sprintf(j + n, "\"post_processor\": {\"type\": \"RobertaProcessing\", \"sep\": [\"[SEP]\", %d], "
                             "\"cls\": [\"[CLS]\", %d], \"trim_offsets\": true, \"add_prefix_space\": false}, ", B_SEP, B_CLS);
    else
        n += (size_t)sprintf(j + n, "\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": ["
                             "{\"SpecialToken\": {\"id\": \"[CLS]\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", "
                             "\"type_id\": 0}}, {\"SpecialToken\": {\"id\": \"[SEP]\", \"type_id\": 0}}], \"pair\": [], "
                             "\"special_tokens\": {\"[CLS]\": {\"id\": \"[CLS]\", \"ids\": [%d], \"tokens\": [\"[CLS]\"]}, "
                             "\"[SEP]\": {\"id\": \"[SEP]\", \"ids\": [%d], \"tokens\": [\"[SEP]\"]}}}, ", B_CLS, B_SEP);
    n += (size_t)sprintf(j + n, "\"decoder\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", \"dropout\": null, "
                         "\"unk_token\": null, \"fuse_unk\": false, \"byte_fallback\": false, \"vocab\": {");
    for (int i = 0; i < B_UNK; i++) n += (size_t)sprintf(j + n, "%s\"%s\": %d", i ? ", " : "", bpe_vocab[i], i);
    n += (size_t)sprintf(j + n, "}, \"merges\": [");
    for (int i = 0; i < N_MERGES; i++) n += (size_t)sprintf(j + n, "%s\"%s\"", i ? ", " : "", bpe_merges[i]);
    n += (size_t)sprintf(j + n, "]}}\n");
    CHECK(put(dir, "tokenizer.json", j));
    CHECK(put(dir, "tokenizer_config.json", "{\"cls_token\": \"[CLS]\", \"sep_token\": \"[SEP]\", \"pad_token\": "
              "\"[PAD]\", \"mask_token\": \"[MASK]\", \"unk_token\": \"[UNK]\", \"tokenizer_class\": "
              "\"PreTrainedTokenizerFast\"}"));
    free(j);
}

static void write_wp_tokenizer(const char *dir) {
    char p[1100];
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    twin_wp_tokenizer(p, wp_vocab, NW, 1);
}

/* The vocabulary as the converter writes it: BPE (gpt2, pre, its merges,
 * [CLS] / [SEP] added around every text), or bert's phantom-space WordPiece. */
static void gguf_vocab(slm_gguf_writer *g, int wordpiece, const char *pre) {
    const char *toks[NB];
    uint64_t lens[NB];
    int32_t types[NB];
    char sp[NW][24];
    const int n = wordpiece ? NW : NB;
    for (int i = 0; i < n; i++) {
        if (wordpiece) {
            if (i < 5) snprintf(sp[i], sizeof sp[i], "%s", wp_vocab[i]);
            else if (!strncmp(wp_vocab[i], "##", 2)) snprintf(sp[i], sizeof sp[i], "%s", wp_vocab[i] + 2);
            else snprintf(sp[i], sizeof sp[i], "\xe2\x96\x81%s", wp_vocab[i]);
        }
        toks[i] = wordpiece ? sp[i] : bpe_vocab[i];
        lens[i] = strlen(toks[i]);
        types[i] = (wordpiece ? i < 5 : i >= B_UNK) ? 3 : 1;
    }
    slm_gguf_set_str(g, "tokenizer.ggml.model", wordpiece ? "bert" : "gpt2");
    slm_gguf_set_str(g, "tokenizer.ggml.pre", pre);
    slm_gguf_set_arr_str(g, "tokenizer.ggml.tokens", toks, lens, (uint64_t)n);
    slm_gguf_set_arr(g, "tokenizer.ggml.token_type", SLM_GGUF_I32, types, (uint64_t)n);
    if (wordpiece) {
        slm_gguf_set_u32(g, "tokenizer.ggml.bos_token_id", 2);
        slm_gguf_set_u32(g, "tokenizer.ggml.unknown_token_id", 1);
        slm_gguf_set_u32(g, "tokenizer.ggml.seperator_token_id", 3);
        slm_gguf_set_u32(g, "tokenizer.ggml.padding_token_id", 0);
        return;
    }
    uint64_t ml[N_MERGES];
    for (int i = 0; i < N_MERGES; i++) ml[i] = strlen(bpe_merges[i]);
    slm_gguf_set_arr_str(g, "tokenizer.ggml.merges", (const char *const *)bpe_merges, ml, N_MERGES);
    slm_gguf_set_u32(g, "tokenizer.ggml.bos_token_id", B_CLS);
    slm_gguf_set_u32(g, "tokenizer.ggml.eos_token_id", B_SEP);
    slm_gguf_set_u32(g, "tokenizer.ggml.unknown_token_id", B_UNK);
    slm_gguf_set_u32(g, "tokenizer.ggml.seperator_token_id", B_SEP);
    slm_gguf_set_u32(g, "tokenizer.ggml.padding_token_id", B_PAD);
    slm_gguf_set_u32(g, "tokenizer.ggml.cls_token_id", B_CLS);
    slm_gguf_set_u32(g, "tokenizer.ggml.mask_token_id", B_MASK);
    slm_gguf_set_bool(g, "tokenizer.ggml.add_bos_token", 1);
    slm_gguf_set_bool(g, "tokenizer.ggml.add_eos_token", 1);
    slm_gguf_set_bool(g, "tokenizer.ggml.add_sep_token", 1);
}

/* ---- a model: its folder tensors and their GGUF names -------------------------- */

typedef struct model {
    weights w;
    char gguf[ST_MAX_TENSORS][64]; /* the converter's name of w.it[i] ("": not written, the MLM head) */
} model;

/* Tensor hf ([rows, cols]; rows 0: a vector) as GGUF name gn: a LayerNorm's
 * gain near 1 (ln 1), else small values. */
static void add_t(model *m, const char *hf, const char *gn, const char *dt, int rows, int cols, int ln) {
    snprintf(m->gguf[m->w.n], sizeof m->gguf[0], "%s", gn);
    add_w(&m->w, hf, rows ? dt : "F32", rows, cols, ln ? 0.1f : 0.2f, ln ? 1.0f : 0.0f);
}

/* ModernBERT's tensors (names after "model."), in dtype dt. */
static void modern_model(model *m, int layers, const char *dt) {
    char h[96], gn[64];
    g_rng = 777;
    m->w.n = 0;
    add_t(m, "embeddings.tok_embeddings.weight", "token_embd.weight", dt, NB, DIM, 0);
    add_t(m, "embeddings.norm.weight", "token_embd_norm.weight", dt, 0, DIM, 1);
    for (int l = 0; l < layers; l++) {
        static const struct { const char *hf, *gg; int rows, cols; } t[] = {
            {"attn_norm", "attn_norm", 0, DIM},     {"attn.Wqkv", "attn_qkv", 3 * DIM, DIM},
            {"attn.Wo", "attn_output", DIM, DIM},   {"mlp_norm", "ffn_norm", 0, DIM},
            {"mlp.Wi", "ffn_up", 2 * FF, DIM},      {"mlp.Wo", "ffn_down", DIM, FF},
        };
        for (size_t i = l == 0; i < sizeof t / sizeof t[0]; i++) { /* layer 0: no attn_norm */
            snprintf(h, sizeof h, "layers.%d.%s.weight", l, t[i].hf);
            snprintf(gn, sizeof gn, "blk.%d.%s.weight", l, t[i].gg);
            add_t(m, h, gn, dt, t[i].rows, t[i].cols, t[i].rows == 0);
        }
    }
    add_t(m, "final_norm.weight", "output_norm.weight", dt, 0, DIM, 1);
}

/* jina-bert-v2's tensors: ffn 2 GeGLU (gated_layers, wo, mlp.layernorm), 3
 * its code variant (Q/K LayerNorms, layer_norm_1, up_gated_layer, down_layer,
 * layer_norm_2), 1 BERT's FFN. */
static void jina_model(model *m, int layers, int ffn) {
    char h[96], gn[64];
    g_rng = 999;
    m->w.n = 0;
    const int nv = ffn == 3 ? NB : NW;
    add_t(m, "embeddings.word_embeddings.weight", "token_embd.weight", "F32", nv, DIM, 0);
    add_t(m, "embeddings.token_type_embeddings.weight", "token_types.weight", "F32", 2, DIM, 0);
    add_t(m, "embeddings.LayerNorm.weight", "token_embd_norm.weight", "F32", 0, DIM, 1);
    add_t(m, "embeddings.LayerNorm.bias", "token_embd_norm.bias", "F32", 0, DIM, 0);
    static const struct { const char *hf, *gg; int rows, cols, bias, ffn; } t[] = {
        /* ffn: 0 every variant, else only that one (4: 2 and 3) */
        {"attention.self.query", "attn_q", DIM, DIM, 1, 0},       {"attention.self.key", "attn_k", DIM, DIM, 1, 0},
        {"attention.self.value", "attn_v", DIM, DIM, 1, 0},
        {"attention.self.layer_norm_q", "attn_q_norm", 0, DIM, 1, 3},
        {"attention.self.layer_norm_k", "attn_k_norm", 0, DIM, 1, 3},
        {"attention.output.dense", "attn_output", DIM, DIM, 1, 0},
        {"attention.output.LayerNorm", "attn_output_norm", 0, DIM, 1, 0},
        {"layer_norm_1", "attn_norm_2", 0, DIM, 1, 3},
        {"mlp.gated_layers", "ffn_up", 2 * FF, DIM, 0, 2},        {"mlp.wo", "ffn_down", DIM, FF, 1, 2},
        {"mlp.layernorm", "layer_output_norm", 0, DIM, 1, 2},
        {"mlp.up_gated_layer", "ffn_up", 2 * FF, DIM, 0, 3},      {"mlp.down_layer", "ffn_down", DIM, FF, 1, 3},
        {"layer_norm_2", "layer_output_norm", 0, DIM, 1, 3},
        {"intermediate.dense", "ffn_up", FF, DIM, 1, 1},          {"output.dense", "ffn_down", DIM, FF, 1, 1},
        {"output.LayerNorm", "layer_output_norm", 0, DIM, 1, 1},
    };
    for (int l = 0; l < layers; l++)
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
            if (t[i].ffn && t[i].ffn != ffn) continue;
            for (int b = 0; b <= t[i].bias; b++) {
                snprintf(h, sizeof h, "encoder.layer.%d.%s.%s", l, t[i].hf, b ? "bias" : "weight");
                snprintf(gn, sizeof gn, "blk.%d.%s.%s", l, t[i].gg, b ? "bias" : "weight");
                const int ln = t[i].rows == 0 && !b;
                add_t(m, h, gn, "F32", b ? 0 : t[i].rows, b ? (t[i].rows ? t[i].rows : t[i].cols) : t[i].cols, ln);
            }
        }
}

/* The folder: config.json (cfg), the tensors (prefix before each name but
 * a task head's, head.* and classifier.*; the MLM head's extra tensors when
 * head is 1 or 2), modules.json and mean pooling (head 3, a reranker: none). */
static void write_folder(const char *name, const model *m, const char *cfg, const char *prefix, int head,
                         char *dir, size_t cap) {
    snprintf(dir, cap, "%s/%s", root, name);
    mkdir(dir, 0700);
    CHECK(put(dir, "config.json", cfg));
    static st_item it[ST_MAX_TENSORS + 4];
    static float headw[NB * DIM];
    int n = 0;
    for (int i = 0; i < m->w.n; i++) {
        it[n] = m->w.it[i];
        const char *nm = m->w.it[i].name;
        const int task = !strncmp(nm, "head.", 5) || !strncmp(nm, "classifier.", 11);
        snprintf(it[n].name, sizeof it[n].name, "%s%s", task ? "" : prefix, nm);
        n++;
    }
    if (head == 1) { /* ModernBertForMaskedLM: head.dense, head.norm, decoder (unprefixed) */
        it[n++] = (st_item){"head.dense.weight", "F32", 2, {DIM, DIM}, headw};
        it[n++] = (st_item){"head.norm.weight", "F32", 1, {DIM}, headw};
        it[n++] = (st_item){"decoder.bias", "F32", 1, {NB}, headw};
    } else if (head == 2) { /* JinaBertForMaskedLM: the MLM head, position_ids */
        it[n++] = (st_item){"cls.predictions.bias", "F32", 1, {NW}, headw};
        it[n++] = (st_item){"bert.embeddings.position_ids", "I64", 2, {1, CTX}, headw};
    }
    CHECK(st_write_weights(dir, it, n, 0, 0));
    if (head == 3) return;
    CHECK(put(dir, "modules.json", "[{\"idx\": 0, \"name\": \"0\", \"path\": \"\", \"type\": "
              "\"sentence_transformers.models.Transformer\"}, {\"idx\": 1, \"name\": \"1\", \"path\": \"1_Pooling\", "
              "\"type\": \"sentence_transformers.models.Pooling\"}]"));
    char sub[600];
    snprintf(sub, sizeof sub, "%s/1_Pooling", dir);
    mkdir(sub, 0700);
    CHECK(put(sub, "config.json", "{\"word_embedding_dimension\": 32, \"pooling_mode_cls_token\": false, "
              "\"pooling_mode_mean_tokens\": true, \"pooling_mode_max_tokens\": false}"));
}

/* The tensors into g under their GGUF names (2-D in their dtype, vectors
 * f32), then g written to path and freed. */
static void gguf_finish(slm_gguf_writer *g, const model *m, const char *path) {
    void *keep[ST_MAX_TENSORS];
    int nk = 0;
    for (int i = 0; i < m->w.n; i++) {
        const st_item *t = &m->w.it[i];
        const size_t n = (size_t)(t->n_dims == 2 ? t->shape[0] * t->shape[1] : t->shape[0]);
        float *f = malloc(n * sizeof *f);
        memcpy(f, t->f, n * sizeof *f);
        hf_twin_add(g, m->gguf[i], t, f, keep, &nk);
    }
    hf_twin_write(g, path, keep, nk);
}

/* ---- the checks ------------------------------------------------------------------ */

static const char *const texts[] = {
    "the cat sat on the mat.", "hello, the cat!", "a mat on a cat sat? the mat", "zzz qq", "the the the cat cat",
};

/* Token ids and embeddings of the folder against its GGUF twin; want: the
 * first two texts' ids by hand, [CLS] first (the embedding adds [SEP]). */
static void same_outputs(const char *dir, const char *gguf, const int32_t (*want)[10]) {
    slm_engine *ef = twin_load(dir, CTX, 4), *eg = twin_load(gguf, CTX, 4);
    CHECK(ef && eg);
    double worst = 0;
    int exact = 1;
    for (size_t t = 0; ef && eg && t < sizeof texts / sizeof texts[0]; t++) {
        int32_t a[40], b[40];
        const int na = slm_tokenize(ef, texts[t], 1, a, 40), nb = slm_tokenize(eg, texts[t], 1, b, 40);
        CHECKF(na == nb && na > 2 && !memcmp(a, b, sizeof a[0] * (size_t)na), "%s: '%s': %d ids, the GGUF's %d", dir,
               texts[t], na, nb);
        if (t < 2) {
            int k = 0;
            while (want[t][k] >= 0) k++;
            CHECKF(na == k && !memcmp(a, want[t], sizeof a[0] * (size_t)k), "%s: '%s': ids differ from the expected "
                   "(%d, want %d; first %d %d %d)", dir, texts[t], na, k, a[0], a[1], a[2]);
        }
        float ea[DIM], eb[DIM];
        int ta = 0, tb = 0;
        slm_session *sa = NULL, *sb = NULL;
        CHECK(slm_session_new(ef, NULL, &sa) == SLM_OK && slm_session_new(eg, NULL, &sb) == SLM_OK);
        if (sa && sb) {
            CHECKF(slm_session_embed_text(sa, texts[t], SLM_POOLING_MEAN, ea, DIM, &ta) == SLM_OK, "%s",
                   slm_session_error(sa));
            CHECKF(slm_session_embed_text(sb, texts[t], SLM_POOLING_MEAN, eb, DIM, &tb) == SLM_OK, "%s",
                   slm_session_error(sb));
            CHECKF(ta == na + 1 && tb == ta, "%s: '%s': %d tokens embedded, the GGUF %d (want %d: [SEP] last)", dir,
                   texts[t], ta, tb, na + 1);
            worst = fmax(worst, rel_err(ea, eb, DIM));
            exact &= !memcmp(ea, eb, sizeof ea);
        }
        slm_session_free(sa);
        slm_session_free(sb);
    }
    CHECKF(ef && slm_model_pooling(ef) == SLM_POOLING_MEAN, "%s: pooling", dir);
    CHECKF(worst < 1e-6, "%s: embeddings differ from the GGUF's by %g (relative)", dir, worst);
    fprintf(stderr, "  %s: embeddings against the GGUF: max relative difference %g%s\n", slm_basename(dir), worst,
            exact ? " (bit-exact)" : "");
    slm_free(ef);
    slm_free(eg);
}

/* A GGUF writer with the keys the converter writes for every encoder A:
 * the sizes, the LayerNorm epsilon, attention both ways, the pooling (1
 * mean, 4 rank). */
static slm_gguf_writer *gguf_head(const char *A, int layers, float eps, uint32_t pooling) {
    slm_gguf_writer *g = slm_gguf_writer_new();
    char k[96];
#define K(s) (snprintf(k, sizeof k, "%s." s, A), k)
    slm_gguf_set_str(g, "general.architecture", A);
    slm_gguf_set_u32(g, K("block_count"), (uint32_t)layers);
    slm_gguf_set_u32(g, K("context_length"), CTX);
    slm_gguf_set_u32(g, K("embedding_length"), DIM);
    slm_gguf_set_u32(g, K("feed_forward_length"), FF);
    slm_gguf_set_u32(g, K("attention.head_count"), HEADS);
    slm_gguf_set_f32(g, K("attention.layer_norm_epsilon"), eps);
    slm_gguf_set_bool(g, K("attention.causal"), 0);
    slm_gguf_set_u32(g, K("pooling_type"), pooling);
#undef K
    return g;
}

/* ModernBERT config.json; extra: more keys ("\"k\": v, "). spelling 0:
 * global_attn_every_n_layers, global_rope_theta, local_rope_theta, as
 * transformers 4 saves it; 1: layer_types and rope_parameters beside
 * global_attn_every_n_layers, as transformers 5 saves it; 2: layer_types
 * and rope_parameters alone, the window as sliding_window (half of
 * local_attention). every 0 (spelling 2): every layer slides. */
static void modern_config(char *cfg, size_t cap, const char *arch, int layers, int every, const char *act,
                          const char *extra, int spelling) {
    char attn[1024];
    size_t k = 0;
    if (spelling == 0)
        k += (size_t)snprintf(attn, sizeof attn, "\"global_attn_every_n_layers\": %d, \"local_attention\": 4, "
                              "\"global_rope_theta\": 160000.0, \"local_rope_theta\": 10000.0, ", every);
    else {
        k += (size_t)snprintf(attn, sizeof attn, "\"layer_types\": [");
        for (int l = 0; l < layers; l++)
            k += (size_t)snprintf(attn + k, sizeof attn - k, "%s\"%s_attention\"", l ? ", " : "",
                                  every && l % every == 0 ? "full" : "sliding");
        k += (size_t)snprintf(attn + k, sizeof attn - k, "], \"rope_parameters\": {\"full_attention\": {\"rope_type\": "
                              "\"default\", \"rope_theta\": 160000.0}, \"sliding_attention\": {\"rope_type\": "
                              "\"default\", \"rope_theta\": 10000.0}}, ");
        if (spelling == 1)
            snprintf(attn + k, sizeof attn - k, "\"global_attn_every_n_layers\": %d, \"local_attention\": 4, ", every);
        else
            snprintf(attn + k, sizeof attn - k, "\"sliding_window\": 2, ");
    }
    snprintf(cfg, cap, "{\"architectures\": [\"%s\"], \"model_type\": \"modernbert\", %s\"hidden_size\": %d, "
             "\"intermediate_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d, "
             "\"max_position_embeddings\": %d, \"vocab_size\": %d, %s"
             "\"hidden_activation\": \"%s\", \"norm_eps\": 1e-05, \"layer_norm_eps\": 1e-05, \"norm_bias\": false, "
             "\"attention_bias\": false, \"mlp_bias\": false, \"classifier_pooling\": \"mean\", \"pad_token_id\": %d, "
             "\"bos_token_id\": %d, \"eos_token_id\": %d, \"cls_token_id\": %d, \"sep_token_id\": %d, "
             "\"position_embedding_type\": \"absolute\", \"torch_dtype\": \"float32\"}\n", arch, extra ? extra : "",
             DIM, FF, layers, HEADS, CTX, NB, attn, act, B_PAD, B_CLS, B_SEP, B_CLS, B_SEP);
}

/* The GGUF twin of a ModernBERT folder, as the converter writes it (pooling
 * 4: a reranker's, rank; cls_pool > 0: modern-bert.classifier.pooling_type,
 * the rows its classifier reads). */
static void modern_gguf(const model *m, int layers, int every, const char *act, uint32_t pooling, uint32_t cls_pool,
                        const char *path) {
    const char *A = "modern-bert";
    slm_gguf_writer *g = gguf_head(A, layers, 1e-5f, pooling);
    char k[96];
#define K(s) (snprintf(k, sizeof k, "%s." s, A), k)
    slm_gguf_set_f32(g, K("rope.freq_base"), 160000.0f);
    slm_gguf_set_f32(g, K("rope.freq_base_swa"), 10000.0f);
    slm_gguf_set_f32(g, K("attention.layer_norm_rms_epsilon"), 1e-5f); /* norm_eps: the converter's rms key */
    slm_gguf_set_u32(g, K("attention.sliding_window"), 4);
    slm_gguf_set_u32(g, K("attention.sliding_window_pattern"), (uint32_t)every);
    slm_gguf_set_str(g, K("rope.scaling.type"), "none");
    slm_gguf_set_u32(g, K("vocab_size"), NB);
    slm_gguf_set_str(g, K("hidden_activation"), act);
    if (cls_pool) slm_gguf_set_u32(g, K("classifier.pooling_type"), cls_pool);
#undef K
    gguf_vocab(g, 0, "modern-bert");
    gguf_finish(g, m, path);
}

/* A folder (its config spelled as modern_config's spelling) against its
 * GGUF twin, which the converter writes the same whatever the spelling. */
static void check_modern(const char *name, const char *dt, int layers, int every, const char *act, int masked,
                         int spelling) {
    model m;
    modern_model(&m, layers, dt);
    char cfg[3072], dir[300], gguf[400];
    modern_config(cfg, sizeof cfg, masked ? "ModernBertForMaskedLM" : "ModernBertModel", layers, every, act, NULL,
                  spelling);
    write_folder(name, &m, cfg, masked ? "model." : "", masked, dir, sizeof dir);
    write_bpe_tokenizer(dir, 0);
    snprintf(gguf, sizeof gguf, "%s/%s.gguf", root, name);
    modern_gguf(&m, layers, every, act, 1, 0, gguf);
    twin_same_model(dir, gguf);
    static const int32_t want[2][10] = {{B_CLS, 43, 36, 38, 40, 33, 42, 27, -1}, {B_CLS, 46, 28, 33, 36, 29, -1}};
    same_outputs(dir, gguf, want);
    unlink(gguf);
    st_rm_dir(dir);
    free_weights(&m.w);
}

/* ModernBertForMaskedLM in F32 (4 layers: 0 and 3 global, 1 and 2 in a
 * window of 2 rows on either side), ModernBertModel in BF16 with no window
 * layer, and with SiLU (SwiGLU, as llama.cpp reads hidden_act silu). */
static void test_modernbert(void) {
    check_modern("mbert_mlm", "F32", 4, 3, "gelu", 1, 0);
    check_modern("mbert_bf16", "BF16", 3, 1, "gelu", 0, 0);
    check_modern("mbert_silu", "F32", 2, 2, "silu", 0, 0);
}

/* transformers 5's spelling (layer_types, rope_parameters; with and
 * without global_attn_every_n_layers beside them, the window as
 * sliding_window) against the twin the older spelling gives: the same
 * config, tensors and embeddings; and layer_types with every layer in the
 * window (no older key can say it) against a twin whose
 * sliding_window_pattern is 0. */
static void test_v5_spelling(void) {
    check_modern("mbert_v5", "F32", 4, 3, "gelu", 1, 1);
    check_modern("mbert_v5_only", "F32", 5, 2, "gelu", 0, 2);
    check_modern("mbert_v5_none_slide", "BF16", 3, 1, "gelu", 0, 2);
    check_modern("mbert_v5_all_slide", "F32", 3, 0, "gelu", 0, 2);
}

/* A pattern layer_types gives that no period from layer 0 runs (layers 0,
 * 2 and 3 global), in the v5-only spelling: refused naming the key and the
 * layer. */
static void test_v5_pattern_refused(void) {
    model m;
    char cfg[3072], dir[300];
    modern_model(&m, 4, "F32");
    modern_config(cfg, sizeof cfg, "ModernBertModel", 4, 2, "gelu", "\"layer_types\": [\"full_attention\", "
                  "\"sliding_attention\", \"full_attention\", \"full_attention\"], ", 2);
    write_folder("v5_pattern", &m, cfg, "", 0, dir, sizeof dir);
    expect_folder(dir, SLM_ERR_UNSUPPORTED, "'layer_types': layer 3", "every 2");
    st_rm_dir(dir);
    free_weights(&m.w);
}

/* The head of check_reranker's model m (F32) in double on a pooled row x:
 * head.dense (+ bias), GELU (tanh form), LayerNorm without a bias, the
 * classifier; written from transformers' ModernBertPredictionHead. */
static void ref_head(const model *m, const float *x, int labels, double *out) {
    const float *w1 = NULL, *b1 = NULL, *g = NULL, *w2 = NULL, *b2 = NULL;
    for (int i = 0; i < m->w.n; i++) {
        const char *n = m->w.it[i].name;
        const float *f = m->w.it[i].f;
        if (!strcmp(n, "head.dense.weight")) w1 = f;
        else if (!strcmp(n, "head.dense.bias")) b1 = f;
        else if (!strcmp(n, "head.norm.weight")) g = f;
        else if (!strcmp(n, "classifier.weight")) w2 = f;
        else if (!strcmp(n, "classifier.bias")) b2 = f;
    }
    CHECK(w1 && g && w2 && b2);
    if (!w1 || !g || !w2 || !b2) return;
    double h[DIM], mean = 0, var = 0;
    for (int i = 0; i < DIM; i++) {
        double a = b1 ? b1[i] : 0;
        for (int j = 0; j < DIM; j++) a += (double)w1[i * DIM + j] * x[j];
        h[i] = 0.5 * a * (1 + tanh(sqrt(2 / M_PI) * (a + 0.044715 * a * a * a)));
        mean += h[i] / DIM;
    }
    for (int i = 0; i < DIM; i++) var += (h[i] - mean) * (h[i] - mean) / DIM;
    for (int i = 0; i < DIM; i++) h[i] = (h[i] - mean) / sqrt(var + 1e-5) * g[i];
    for (int r = 0; r < labels; r++) {
        out[r] = b2[r];
        for (int j = 0; j < DIM; j++) out[r] += (double)w2[r * DIM + j] * h[j];
    }
}

/* A ModernBertForSequenceClassification folder ("model."-prefixed encoder,
 * the head unprefixed, no modules.json) against its GGUF twin (the head as
 * cls, cls.norm, cls.output; pooling_type rank; cls: classifier_pooling
 * "cls" and modern-bert.classifier.pooling_type 2): the same config and
 * tensors, its pooling rank with `labels` scores, and each text's scores
 * bit for bit the twin's: the same tensors through the same programs and
 * the same host head (engine/embed.c), so nothing may differ. In F32 the
 * scores against the head in double (ref_head) on the text's first row
 * (cls) or mean (else), the embedding of that pooling; with cls, a blob of
 * the folder (cache mode) scores bit for bit as the folder. */
static void check_reranker(const char *name, const char *dt, int labels, int bias, int cls, const char *extra) {
    model m;
    modern_model(&m, 4, dt);
    for (int i = 0; i < m.w.n; i++) /* the encoder under "model.", as the checkpoint has it */
        if (strncmp(m.w.it[i].name, "model.", 6)) {
            char t[sizeof m.w.it[i].name];
            snprintf(t, sizeof t, "model.%s", m.w.it[i].name);
            snprintf(m.w.it[i].name, sizeof m.w.it[i].name, "%s", t);
        }
    add_t(&m, "head.dense.weight", "cls.weight", dt, DIM, DIM, 0);
    if (bias) add_t(&m, "head.dense.bias", "cls.bias", dt, 0, DIM, 0);
    add_t(&m, "head.norm.weight", "cls.norm.weight", dt, 0, DIM, 1);
    add_t(&m, "classifier.weight", "cls.output.weight", dt, labels, DIM, 0);
    add_t(&m, "classifier.bias", "cls.output.bias", dt, 0, labels, 0);
    char cfg[3072], dir[300], gguf[400];
    modern_config(cfg, sizeof cfg, "ModernBertForSequenceClassification", 4, 3, "gelu", extra, 0);
    write_folder(name, &m, cfg, "", 3, dir, sizeof dir);
    write_bpe_tokenizer(dir, 0);
    snprintf(gguf, sizeof gguf, "%s/%s.gguf", root, name);
    modern_gguf(&m, 4, 3, "gelu", 4, cls ? SLM_POOLING_CLS : 0, gguf);
    twin_same_model(dir, gguf);
    slm_engine *ef = twin_load(dir, CTX, 4), *eg = twin_load(gguf, CTX, 4), *ec = NULL;
    slm_session *sa = NULL, *sb = NULL, *sc = NULL;
    CHECK(ef && eg && slm_session_new(ef, NULL, &sa) == SLM_OK && slm_session_new(eg, NULL, &sb) == SLM_OK);
    if (cls) { /* the folder through a blob: .slm.embed keeps the rows the head reads */
        char cdir[400];
        snprintf(cdir, sizeof cdir, "%s/cache_%s", root, name);
        mkdir(cdir, 0700);
        slm_options o = twin_opts(CTX, 4);
        o.cache_dir = cdir;
        ec = t_load(dir, &o);
        CHECK(ec && slm_session_new(ec, NULL, &sc) == SLM_OK);
    }
    int exact = 1, moved = 0, blob_same = 1;
    float first[8] = {0};
    double worst = 0;
    for (size_t t = 0; sa && sb && t < sizeof texts / sizeof texts[0]; t++) {
        float a[8] = {0}, b[8] = {0}, c[8] = {0}, x[DIM];
        int na = 0, nb = 0;
        CHECKF(slm_session_embed_text(sa, texts[t], SLM_POOLING_RANK, a, (size_t)labels, &na) == SLM_OK, "%s",
               slm_session_error(sa));
        CHECKF(slm_session_embed_text(sb, texts[t], SLM_POOLING_RANK, b, (size_t)labels, &nb) == SLM_OK, "%s",
               slm_session_error(sb));
        CHECKF(na == nb && na > 2, "%s: '%s': %d tokens, the GGUF %d", dir, texts[t], na, nb);
        exact &= !memcmp(a, b, sizeof a) && isfinite(a[0]);
        if (!t) memcpy(first, a, sizeof first);
        else moved |= memcmp(first, a, sizeof a) != 0;
        if (sc) {
            CHECKF(slm_session_embed_text(sc, texts[t], SLM_POOLING_RANK, c, (size_t)labels, NULL) == SLM_OK, "%s",
                   slm_session_error(sc));
            blob_same &= !memcmp(a, c, sizeof a);
        }
        if (strcmp(dt, "F32")) continue;
        double r[8];
        CHECKF(slm_session_embed_text(sa, texts[t], cls ? SLM_POOLING_CLS : SLM_POOLING_MEAN, x, DIM, NULL) == SLM_OK,
               "%s", slm_session_error(sa));
        ref_head(&m, x, labels, r);
        for (int k = 0; k < labels; k++) worst = fmax(worst, fabs(r[k] - a[k]) / fmax(1.0, fabs(r[k])));
    }
    CHECKF(worst < 1e-6, "%s: the scores differ from the head on the %s row by %g", dir, cls ? "first" : "mean", worst);
    CHECKF(!sc || blob_same, "%s: the blob's scores differ from the folder's", dir);
    CHECKF(ef && slm_model_pooling(ef) == SLM_POOLING_RANK && slm_model_rank_outputs(ef) == labels,
           "%s: pooling %d, %d scores (want rank, %d)", dir, ef ? slm_model_pooling(ef) : -1,
           ef ? slm_model_rank_outputs(ef) : -1, labels);
    CHECKF(exact, "%s: the scores differ from the GGUF's", dir);
    CHECKF(moved, "%s: every text scores the same", dir);
    /* a query and a document: the folder takes transformers' pair, [CLS] q [SEP] d [SEP] (ModernBERT's
     * template); the twin llama-server's, from the converter's add_bos / add_eos / add_sep, [CLS] q [SEP]
     * [SEP] d [SEP]: the folder's score is the twin's on the folder's ids */
    float r[8] = {0}, q[8] = {0}, c[8] = {0};
    int nr = 0, nq = 0;
    CHECKF(sa && slm_session_rerank(sa, "the cat", "sat on the mat.", r, (size_t)labels, &nr) == SLM_OK, "%s: rerank: %s",
           dir, sa ? slm_session_error(sa) : "");
    CHECKF(sb && slm_session_rerank(sb, "the cat", "sat on the mat.", q, (size_t)labels, &nq) == SLM_OK, "%s: rerank: %s",
           dir, sb ? slm_session_error(sb) : "");
    const int32_t ids[11] = {B_CLS, 43, 36, B_SEP, 18, 34, 40, 33, 42, 27, B_SEP}; /* the, Gcat; s, at, Gon, Gthe, Gmat, . */
    CHECK(sb && slm_session_embed(sb, ids, 11, SLM_POOLING_RANK, c, (size_t)labels) == SLM_OK);
    CHECKF(nr == 11 && nq == 12 && !memcmp(r, c, sizeof r) && memcmp(r, q, sizeof r) && isfinite(r[0]),
           "%s: rerank: %d tokens, %g; the GGUF's on the same ids %g, on its own %d tokens %g", dir, nr, (double)r[0],
           (double)c[0], nq, (double)q[0]);
    fprintf(stderr, "  %s: %d scores against the GGUF's: bit-exact; a pair of %d tokens: %g, the GGUF's on those ids "
            "the same\n", slm_basename(dir), labels, nr, (double)r[0]);
    slm_session_free(sa);
    slm_session_free(sb);
    slm_session_free(sc);
    slm_free(ef);
    slm_free(eg);
    slm_free(ec);
    if (cls) { /* a classifier pooling past rank: refused naming the key */
        modern_gguf(&m, 4, 3, "gelu", 4, 7, gguf);
        const slm_options o = twin_opts(CTX, 4);
        slm_engine *e = NULL;
        const slm_status st = slm_load(&e, gguf, &o);
        CHECKF(st == SLM_ERR_UNSUPPORTED && strstr(slm_last_error(e), "modern-bert.classifier.pooling_type"),
               "%s: classifier.pooling_type 4: status %d, '%s'", gguf, st, slm_last_error(e));
        slm_free(e);
    }
    unlink(gguf);
    /* config.json against the head: the labels it gives must be classifier.weight's rows, head.dense.bias
     * there exactly when classifier_bias is true */
    char wrong[160];
    snprintf(wrong, sizeof wrong, "\"%s\": %s, \"classifier_bias\": %s, ", labels == 1 ? "id2label" : "num_labels",
             labels == 1 ? "{\"0\": \"a\", \"1\": \"b\"}" : "1", bias ? "true" : "false");
    const struct { const char *extra, *w1, *w2; } bad[2] = {
        {wrong, "classifier.weight", labels == 1 ? "id2label" : "num_labels"},
        {bias ? "\"num_labels\": 3, " : "\"id2label\": {\"0\": \"a\"}, \"classifier_bias\": true, ", "head.dense.bias",
         "classifier_bias"},
    };
    for (int i = 0; i < 2; i++) {
        modern_config(cfg, sizeof cfg, "ModernBertForSequenceClassification", 4, 3, "gelu", bad[i].extra, 0);
        CHECK(put(dir, "config.json", cfg));
        expect_folder(dir, SLM_ERR_FORMAT, bad[i].w1, bad[i].w2);
    }
    st_rm_dir(dir);
    free_weights(&m.w);
}

/* gte-reranker-modernbert-base's kind (one score, id2label of one label,
 * no classifier_bias, classifier_pooling mean), three labels by num_labels
 * with classifier_bias (head.dense.bias as cls.bias) in BF16, and three
 * labels on the first row (classifier_pooling cls, ModernBertConfig's
 * default) with a bias. */
static void test_reranker(void) {
    check_reranker("mbert_rerank", "F32", 1, 0, 0, "\"id2label\": {\"0\": \"LABEL_0\"}, \"classifier_bias\": false, "
                   "\"classifier_activation\": \"gelu\", ");
    check_reranker("mbert_rerank3", "BF16", 3, 1, 0, "\"num_labels\": 3, \"classifier_bias\": true, ");
    check_reranker("mbert_rerank_cls", "F32", 3, 1, 1, "\"classifier_pooling\": \"cls\", \"num_labels\": 3, \"classifier_bias\": true, ");
}

/* jina-bert-v2 config.json. */
static void jina_config(char *cfg, size_t cap, int layers, const char *ffn, int vocab, const char *extra) {
    snprintf(cfg, cap, "{\"architectures\": [\"JinaBertForMaskedLM\"], \"model_type\": \"bert\", %s\"hidden_size\": %d, "
             "\"intermediate_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d, "
             "\"max_position_embeddings\": %d, \"vocab_size\": %d, \"type_vocab_size\": 2, \"layer_norm_eps\": 1e-12, "
             "\"hidden_act\": \"gelu\", \"position_embedding_type\": \"alibi\", \"feed_forward_type\": \"%s\", "
             "\"emb_pooler\": \"mean\", \"pad_token_id\": 0}\n", extra ? extra : "", DIM, FF, layers, HEADS, CTX, vocab, ffn);
}


static void jina_gguf(const model *m, int layers, int bpe, const char *path) {
    slm_gguf_writer *g = gguf_head("jina-bert-v2", layers, 1e-12f, 1);
    slm_gguf_set_u32(g, "tokenizer.ggml.token_type_count", 2);
    gguf_vocab(g, !bpe, bpe ? "jina-v2-code" : "jina-v2-en");
    gguf_finish(g, m, path);
}

static void check_jina(const char *name, int ffn, const char *prefix) {
    model m;
    jina_model(&m, 2, ffn);
    char cfg[2048], dir[300], gguf[400];
    jina_config(cfg, sizeof cfg, 2, ffn == 1 ? "original" : "geglu", ffn == 3 ? NB : NW, NULL);
    write_folder(name, &m, cfg, prefix, *prefix ? 2 : 0, dir, sizeof dir);
    if (ffn == 3) write_bpe_tokenizer(dir, 1);
    else write_wp_tokenizer(dir);
    snprintf(gguf, sizeof gguf, "%s/%s.gguf", root, name);
    jina_gguf(&m, 2, ffn == 3, gguf);
    twin_same_model(dir, gguf);
    static const int32_t want_wp[2][10] = {{2, 5, 6, 7, 8, 5, 9, 10, -1}, {2, 13, 11, 5, 6, 12, -1}};
    static const int32_t want_bpe[2][10] = {{B_CLS, 43, 36, 38, 40, 33, 42, 27, -1}, {B_CLS, 46, 28, 33, 36, 29, -1}};
    same_outputs(dir, gguf, ffn == 3 ? want_bpe : want_wp);
    unlink(gguf);
    st_rm_dir(dir);
    free_weights(&m.w);
}

/* jina-embeddings-v2-base-en's layout ("bert."-prefixed, with the MLM
 * head), its code variant unprefixed, and BERT's FFN. */
static void test_jina(void) {
    check_jina("jina_geglu", 2, "bert.");
    check_jina("jina_code", 3, "");
    check_jina("jina_original", 1, "");
}

/* Folders the loader refuses, naming the key or tensor. */
static void test_refusals(void) {
    static const struct { const char *extra, *act, *arch, *tensor; int jina; slm_status want; const char *w1, *w2; } c[] = {
        {"\"norm_bias\": true, ", "gelu", NULL, NULL, 0, SLM_ERR_UNSUPPORTED, "norm_bias", NULL},
        {"\"attention_bias\": true, ", "gelu", NULL, NULL, 0, SLM_ERR_UNSUPPORTED, "attention_bias", NULL},
        {"\"mlp_bias\": true, ", "gelu", NULL, NULL, 0, SLM_ERR_UNSUPPORTED, "mlp_bias", NULL},
        {NULL, "relu", NULL, NULL, 0, SLM_ERR_UNSUPPORTED, "hidden_activation", "relu"},
        {"\"local_attention\": 1, ", "gelu", NULL, NULL, 0, SLM_ERR_UNSUPPORTED, "local_attention", NULL},
        {"\"global_attn_every_n_layers\": 0, ", "gelu", NULL, NULL, 0, SLM_ERR_FORMAT, "global_attn_every_n_layers", NULL},
        {"\"rope_parameters\": {\"rope_theta\": 160000.0}, ", "gelu", NULL, NULL, 0, SLM_ERR_UNSUPPORTED, "rope_parameters",
         "rope_theta"},
        {"\"rope_parameters\": {\"full_attention\": {\"rope_type\": \"linear\", \"factor\": 2.0}}, ", "gelu", NULL, NULL,
         0, SLM_ERR_UNSUPPORTED, "rope_type", "linear"},
        {"\"rope_parameters\": {\"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": 20000.0}}, ", "gelu",
         NULL, NULL, 0, SLM_ERR_FORMAT, "rope_parameters", "local_rope_theta"},
        {"\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2.0}, ", "gelu", NULL, NULL, 0, SLM_ERR_UNSUPPORTED,
         "rope_scaling", NULL},
        {"\"layer_types\": [\"sliding_attention\", \"full_attention\"], ", "gelu", NULL, NULL, 0, SLM_ERR_UNSUPPORTED,
         "layer_types", "layer 1"},
        {"\"layer_types\": [\"full_attention\", \"full_attention\"], ", "gelu", NULL, NULL, 0, SLM_ERR_FORMAT,
         "'layer_types' and 'global_attn_every_n_layers'", "layer 1"},
        {"\"layer_types\": [\"full_attention\", \"chunked_attention\"], ", "gelu", NULL, NULL, 0, SLM_ERR_UNSUPPORTED,
         "layer_types", "element 1"},
        {"\"layer_types\": [\"full_attention\"], ", "gelu", NULL, NULL, 0, SLM_ERR_FORMAT, "layer_types", "2 strings"},
        {"\"sliding_window\": 3, ", "gelu", NULL, NULL, 0, SLM_ERR_FORMAT, "sliding_window", "local_attention"},
        {NULL, "gelu", "ModernBertForTokenClassification", NULL, 0, SLM_ERR_UNSUPPORTED, "architectures", NULL},
        {NULL, "gelu", "ModernBertForSequenceClassification", NULL, 0, SLM_ERR_FORMAT, "head.dense.weight", NULL},
        {"\"classifier_pooling\": \"max\", ", "gelu", "ModernBertForSequenceClassification", NULL, 0,
         SLM_ERR_UNSUPPORTED, "classifier_pooling", "max"},
        {"\"classifier_activation\": \"relu\", ", "gelu", "ModernBertForSequenceClassification", NULL, 0,
         SLM_ERR_UNSUPPORTED, "classifier_activation", "relu"},
        {"\"id2label\": {}, ", "gelu", "ModernBertForSequenceClassification", NULL, 0, SLM_ERR_UNSUPPORTED, "id2label",
         NULL},
        {NULL, "gelu", NULL, "layers.0.attn.Wqkv.bias", 0, SLM_ERR_UNSUPPORTED, "layers.0.attn.Wqkv.bias", NULL},
        {NULL, "gelu", NULL, "embeddings.norm.bias", 0, SLM_ERR_UNSUPPORTED, "embeddings.norm.bias", NULL},
        {NULL, "gelu", NULL, "layers.2.mlp.Wo.weight", 0, SLM_ERR_FORMAT, "num_hidden_layers", NULL},
        {"\"feed_forward_type\": \"reglu\", ", NULL, NULL, NULL, 1, SLM_ERR_UNSUPPORTED, "feed_forward_type", "reglu"},
        {NULL, NULL, NULL, "embeddings.position_embeddings.weight", 1, SLM_ERR_UNSUPPORTED, "position_embeddings", NULL},
        {NULL, NULL, NULL, "encoder.layer.0.intermediate.dense.weight", 1, SLM_ERR_UNSUPPORTED, "intermediate.dense", NULL},
        {NULL, NULL, NULL, "encoder.layer.0.mlp.gated_layers.bias", 1, SLM_ERR_UNSUPPORTED, "gated_layers.bias", NULL},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        model m;
        char cfg[3072], dir[300], name[32];
        snprintf(name, sizeof name, "refuse%zu", i);
        if (c[i].jina) {
            jina_model(&m, 2, 2);
            jina_config(cfg, sizeof cfg, 2, "geglu", NW, c[i].extra); /* a key given twice: the first counts (cJSON) */
        } else {
            modern_model(&m, 2, "F32");
            modern_config(cfg, sizeof cfg, c[i].arch ? c[i].arch : "ModernBertModel", 2, 3, c[i].act, c[i].extra, 0);
        }
        if (c[i].tensor) add_t(&m, c[i].tensor, "", "F32", c[i].tensor[strlen(c[i].tensor) - 1] == 't' ? DIM : 0, DIM, 0);
        write_folder(name, &m, cfg, "", 0, dir, sizeof dir);
        expect_folder(dir, c[i].want, c[i].w1, c[i].w2);
        st_rm_dir(dir);
        free_weights(&m.w);
    }
}

int main(void) {
    snprintf(root, sizeof root, "/tmp/slm_hf_modernbert_%d", (int)getpid());
    mkdir(root, 0700);
    T_RUN(test_modernbert);
    T_RUN(test_v5_spelling);
    T_RUN(test_v5_pattern_refused);
    T_RUN(test_reranker);
    T_RUN(test_jina);
    T_RUN(test_refusals);
    st_rm_dir(root);
    T_DONE();
}
