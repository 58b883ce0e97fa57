/* nomic-embed-text Hugging Face folders (model_type nomic_bert) written
 * here from C: a v1.5-shaped one (fused Wqkv, SwiGLU fc11 / fc12 / fc2, no
 * biases, RoPE base 1000, a BERT WordPiece tokenizer.json, F32) and a
 * v2-moe-shaped one (biases, GELU fc1 / fc2 on the even layers, a router and
 * 4 ungated experts, top 2, on the odd ones as megablocks stores them,
 * w1 / w2 [experts x n_inner, n_embd], or [experts, n_inner, n_embd],
 * XLM-R's Unigram tokenizer.json, BF16), each against a GGUF twin written the way llama.cpp's converter
 * writes one (this file's own table of its names, attn_qkv kept fused, the
 * experts as 3-D stacks with w2 transposed, the experts' bias dropped, the
 * context its rule gives): the same config and tensors, the same token ids,
 * the same embeddings bit for bit, and the folder compiled as a blob giving
 * the folder's. Then the refusals, each naming its key or tensor.
 * SLM_NOMIC_KEEP=DIR keeps the folders and twins (local checks against
 * llama.cpp). */
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
#include "t_xlmr_vocab.h"
#include "format/gguf.h"
#include "format/model.h"
#include "staticlm.h"

/* D width, H heads, F FFN and expert width, E experts (K used); v1.5: 2 layers, a WordPiece vocabulary of WNV
 * pieces padded to WVOCAB; v2-moe: 4 layers (experts on 1 and 3), XLM-R's NV pieces padded to MVOCAB */
enum { D = 32, H = 2, F = 48, E = 4, K = 2, WL = 2, ML = 4, WNV = 36, WVOCAB = 40, MVOCAB = 896, CTX = 32 };

static char root[256];

static const char *const wvocab[WNV] = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "search", "_",    "query", "document", "what", "is",  "a",
    "fox",   "quick", "brown", "jump",  "##ed",   "over",   "the",  "lazy",  "dog",      ".",    "?",   ":",
    "hello", ",",     "world", "!",     "cat",    "##s",    "run",  "##ning", "caf",     "##e",  "x",   "\xe4\xb8\xad",
};

typedef struct opts {
    int moe;            /* v2-moe's shape, else v1.5's */
    const char *config; /* keys put first in config.json (cJSON reads the first of a name: they win) */
    const char *drop;   /* a tensor left out of the folder */
    const char *extra;  /* one more tensor [3 x D] */
    int experts_shape;  /* 1: w1 and w2 as [E, F, D]; 2: w2 as [E, D, F] (refused) */
} opts;

static int put(const char *dir, const char *file, const char *text) {
    char p[1100];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    return t_write_file(p, text, strlen(text));
}

static int layer_moe(const opts *o, int l) { return o->moe && l % 2 == 1; }

/* The weights under the folder's names. */
static void make_weights(weights *w, const opts *o) {
    const char *dt = o->moe ? "BF16" : "F32";
    const int L = o->moe ? ML : WL;
    g_rng = o->moe ? 2025 : 1515;
    w->n = 0;
    add_w(w, "embeddings.word_embeddings.weight", dt, o->moe ? MVOCAB : WVOCAB, D, 0.5f, 0);
    add_w(w, "embeddings.token_type_embeddings.weight", dt, o->moe ? 1 : 2, D, 0.5f, 0);
    add_w(w, "emb_ln.weight", dt, 0, D, 0.1f, 1);
    add_w(w, "emb_ln.bias", dt, 0, D, 0.1f, 0);
    char n[96];
#define W(rows, cols, sc, b, ...) (snprintf(n, sizeof n, __VA_ARGS__), add_w(w, n, dt, rows, cols, sc, b))
    for (int l = 0; l < L; l++) {
        W(3 * D, D, 0.2f, 0, "encoder.layers.%d.attn.Wqkv.weight", l);
        if (o->moe) W(0, 3 * D, 0.1f, 0, "encoder.layers.%d.attn.Wqkv.bias", l);
        W(D, D, 0.2f, 0, "encoder.layers.%d.attn.out_proj.weight", l);
        if (o->moe) W(0, D, 0.1f, 0, "encoder.layers.%d.attn.out_proj.bias", l);
        W(0, D, 0.1f, 1, "encoder.layers.%d.norm1.weight", l);
        W(0, D, 0.1f, 0, "encoder.layers.%d.norm1.bias", l);
        if (!o->moe) {
            W(F, D, 0.2f, 0, "encoder.layers.%d.mlp.fc11.weight", l);
            W(F, D, 0.2f, 0, "encoder.layers.%d.mlp.fc12.weight", l);
            W(D, F, 0.2f, 0, "encoder.layers.%d.mlp.fc2.weight", l);
        } else if (layer_moe(o, l)) {
            W(E, D, 0.5f, 0, "encoder.layers.%d.mlp.router.layer.weight", l);
            W(E * F, D, 0.2f, 0, "encoder.layers.%d.mlp.experts.mlp.w1", l);
            W(E * F, D, 0.2f, 0, "encoder.layers.%d.mlp.experts.mlp.w2", l);
            W(0, D, 0.1f, 0, "encoder.layers.%d.mlp.experts.bias", l);
        } else {
            W(F, D, 0.2f, 0, "encoder.layers.%d.mlp.fc1.weight", l);
            W(0, F, 0.1f, 0, "encoder.layers.%d.mlp.fc1.bias", l);
            W(D, F, 0.2f, 0, "encoder.layers.%d.mlp.fc2.weight", l);
            W(0, D, 0.1f, 0, "encoder.layers.%d.mlp.fc2.bias", l);
        }
        W(0, D, 0.1f, 1, "encoder.layers.%d.norm2.weight", l);
        W(0, D, 0.1f, 0, "encoder.layers.%d.norm2.bias", l);
    }
#undef W
}

/* The GGUF name llama.cpp's converter gives a folder tensor: this file's own table. 2: the experts (written as
 * stacks), 3: dropped (the experts' bias). */
static int gguf_of(const char *hf, char *out, size_t cap) {
    static const char *const map[][2] = {
        {"embeddings.word_embeddings.weight", "token_embd.weight"}, {"embeddings.token_type_embeddings.weight", "token_types.weight"},
        {"emb_ln.weight", "token_embd_norm.weight"},                 {"emb_ln.bias", "token_embd_norm.bias"},
    };
    static const char *const lmap[][2] = {
        {"attn.Wqkv", "attn_qkv"}, {"attn.out_proj", "attn_output"}, {"norm1", "attn_output_norm"},
        {"norm2", "layer_output_norm"}, {"mlp.fc11", "ffn_up"}, {"mlp.fc12", "ffn_gate"}, {"mlp.fc1", "ffn_up"},
        {"mlp.fc2", "ffn_down"}, {"mlp.router.layer", "ffn_gate_inp"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(hf, map[i][0])) return snprintf(out, cap, "%s", map[i][1]), 1;
    int l = -1;
    char rest[96];
    if (sscanf(hf, "encoder.layers.%d.%95s", &l, rest) != 2) return 0;
    if (!strcmp(rest, "mlp.experts.bias")) return 3;
    if (!strncmp(rest, "mlp.experts.mlp.w", 17)) return 2;
    for (size_t i = 0; i < sizeof lmap / sizeof lmap[0]; i++) {
        const size_t k = strlen(lmap[i][0]);
        if (!strncmp(rest, lmap[i][0], k) && rest[k] == '.')
            return snprintf(out, cap, "blk.%d.%s.%s", l, lmap[i][1], rest + k + 1), 1;
    }
    return 0;
}

/* v1.5's tokenizer.json: BertNormalizer (lowercase), BertPreTokenizer, [CLS] $A [SEP], WordPiece. */
static void write_wordpiece(const char *dir) {
    char *j = malloc(8192), *p = j;
    p += sprintf(p, "{\"version\": \"1.0\", \"added_tokens\": [");
    for (int i = 0; i < 5; i++)
        p += sprintf(p, "%s{\"id\": %d, \"content\": \"%s\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
                     "\"normalized\": false, \"special\": true}", i ? ", " : "", i, wvocab[i]);
    p += sprintf(p, "], \"normalizer\": {\"type\": \"BertNormalizer\", \"clean_text\": true, \"handle_chinese_chars\": true, "
                 "\"strip_accents\": null, \"lowercase\": true}, \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}, "
                 "\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"[CLS]\", "
                 "\"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, {\"SpecialToken\": {\"id\": \"[SEP]\", "
                 "\"type_id\": 0}}], \"pair\": [], \"special_tokens\": {\"[CLS]\": {\"id\": \"[CLS]\", \"ids\": [2], "
                 "\"tokens\": [\"[CLS]\"]}, \"[SEP]\": {\"id\": \"[SEP]\", \"ids\": [3], \"tokens\": [\"[SEP]\"]}}}, "
                 "\"decoder\": {\"type\": \"WordPiece\", \"prefix\": \"##\", \"cleanup\": true}, \"model\": {\"type\": "
                 "\"WordPiece\", \"unk_token\": \"[UNK]\", \"continuing_subword_prefix\": \"##\", "
                 "\"max_input_chars_per_word\": 100, \"vocab\": {");
    for (int i = 0; i < WNV; i++) p += sprintf(p, "%s\"%s\": %d", i ? ", " : "", wvocab[i], i);
    sprintf(p, "}}}\n");
    CHECK(put(dir, "tokenizer.json", j));
    free(j);
}

/* config.json as the Hub has it (the keys that matter; o->config's first). */
static void write_config(const char *dir, const opts *o) {
    char cfg[3000];
    if (!o->moe)
        snprintf(cfg, sizeof cfg, "{%s\"architectures\": [\"NomicBertModel\"], \"model_type\": \"nomic_bert\", "
                 "\"auto_map\": {\"AutoConfig\": \"nomic-ai/nomic-bert-2048--configuration_hf_nomic_bert.NomicBertConfig\"}, "
                 "\"activation_function\": \"swiglu\", \"attn_pdrop\": 0.0, \"bos_token_id\": null, \"causal\": false, "
                 "\"dense_seq_output\": true, \"embd_pdrop\": 0.0, \"fused_bias_fc\": true, \"layer_norm_epsilon\": 1e-12, "
                 "\"max_trained_positions\": 2048, \"mlp_fc1_bias\": false, \"mlp_fc2_bias\": false, \"n_embd\": %d, "
                 "\"n_head\": %d, \"n_inner\": %d, \"n_layer\": %d, \"n_positions\": 8192, \"pad_vocab_size_multiple\": 64, "
                 "\"parallel_block\": false, \"parallel_block_tied_norm\": false, \"prenorm\": false, \"qkv_proj_bias\": false, "
                 "\"rotary_emb_base\": 1000, \"rotary_emb_fraction\": 1.0, \"rotary_emb_interleaved\": false, "
                 "\"rotary_emb_scale_base\": null, \"rotary_scaling_factor\": null, \"torch_dtype\": \"float32\", "
                 "\"type_vocab_size\": 2, \"use_flash_attn\": true, \"use_rms_norm\": false, \"vocab_size\": %d}\n",
                 o->config ? o->config : "", D, H, F, WL, WVOCAB);
    else
        snprintf(cfg, sizeof cfg, "{%s\"architectures\": [\"NomicBertModel\"], \"model_type\": \"nomic_bert\", "
                 "\"activation_function\": \"gelu\", \"add_pooling_layer\": false, \"causal\": false, "
                 "\"expert_choice_router\": false, \"ffn_div\": 1, \"layer_norm_epsilon\": 1e-05, "
                 "\"max_trained_positions\": 2048, \"mlp_fc1_bias\": true, \"mlp_fc2_bias\": true, \"moe_every_n_layers\": 2, "
                 "\"moe_impl\": \"megablocks\", \"moe_normalize_expert_weights\": false, \"moe_top_k\": %d, \"n_embd\": %d, "
                 "\"n_head\": %d, \"n_inner\": %d, \"n_layer\": %d, \"n_positions\": 2048, \"num_experts\": %d, "
                 "\"num_shared_experts\": 0, \"pad_token_id\": 1, \"parallel_block\": false, \"prenorm\": false, "
                 "\"qkv_proj_bias\": true, \"rotary_emb_base\": 10000, \"rotary_emb_fraction\": 1.0, "
                 "\"rotary_emb_interleaved\": false, \"rotary_emb_scale_base\": null, \"rotary_scaling_factor\": null, "
                 "\"router_aux_loss_coef\": 0.1, \"torch_dtype\": \"bfloat16\", \"type_vocab_size\": 1, "
                 "\"use_rms_norm\": null, \"vocab_size\": %d}\n", o->config ? o->config : "", K, D, H, F, ML, E, MVOCAB);
    CHECK(put(dir, "config.json", cfg));
}

static void write_folder(const char *name, const weights *w, const opts *o, char *dir, size_t cap) {
    snprintf(dir, cap, "%s/%s", root, name);
    mkdir(dir, 0700);
    write_config(dir, o);
    st_item it[ST_MAX_TENSORS + 1];
    static float extra[3 * D];
    int n = 0;
    for (int i = 0; i < w->n; i++) {
        if (o->drop && !strcmp(w->it[i].name, o->drop)) continue;
        it[n] = w->it[i];
        if ((o->experts_shape == 1 && strstr(it[n].name, "experts.mlp.w")) ||
            (o->experts_shape == 2 && strstr(it[n].name, "experts.mlp.w2"))) { /* the same bytes as [E, F, D] / [E, D, F] */
            it[n].n_dims = 3, it[n].shape[0] = E;
            it[n].shape[1] = o->experts_shape == 1 ? F : D, it[n].shape[2] = o->experts_shape == 1 ? D : F;
        }
        n++;
    }
    if (o->extra) {
        it[n] = (st_item){"", o->moe ? "BF16" : "F32", 1, {3 * D}, extra};
        snprintf(it[n++].name, sizeof it[0].name, "%s", o->extra);
    }
    CHECK(st_write_weights(dir, it, n, 0, 0));
    if (o->moe) {
        char *tj = tokenizer_json();
        CHECK(put(dir, "tokenizer.json", tj) && put(dir, "tokenizer_config.json", TOK_CONFIG));
        free(tj);
    } else {
        write_wordpiece(dir);
    }
    CHECK(st_write_pooling(dir, D, 0));
}

/* ---- the GGUF twin --------------------------------------------------------------- */

/* The experts as the converter stacks them: w1 viewed [E, F, D]; w2 viewed [E, F, D], each expert transposed to [D, F]. */
typedef struct experts_ctx {
    const float *w1[ML];
    float *w2t[ML];
} experts_ctx;

static const float *expert_of(const void *ctx, int l, int j, int e) {
    const experts_ctx *x = ctx;
    if (j == 0 || !x->w1[l]) return NULL; /* ungated; a dense layer */
    return j == 1 ? x->w1[l] + (size_t)e * F * D : x->w2t[l] + (size_t)e * D * F;
}

/* The converter's bert vocabulary: control tokens as they are, "##x" -> "x", else U+2581 first; [PADi] after. */
static void wordpiece_gguf_vocab(slm_gguf_writer *g) {
    char sp[WVOCAB][32];
    const char *toks[WVOCAB];
    uint64_t lens[WVOCAB];
    int32_t types[WVOCAB];
    for (int i = 0; i < WVOCAB; i++) {
        types[i] = i < 5 ? 3 : i < WNV ? 1 : 5;
        if (i >= WNV) snprintf(sp[i], sizeof sp[i], "\xe2\x96\x81[PAD%d]", i);
        else if (i < 5) snprintf(sp[i], sizeof sp[i], "%s", wvocab[i]);
        else if (!strncmp(wvocab[i], "##", 2)) snprintf(sp[i], sizeof sp[i], "%s", wvocab[i] + 2);
        else snprintf(sp[i], sizeof sp[i], "\xe2\x96\x81%s", wvocab[i]);
        toks[i] = sp[i];
        lens[i] = strlen(sp[i]);
    }
    slm_gguf_set_u32(g, "tokenizer.ggml.token_type_count", 2);
    slm_gguf_set_str(g, "tokenizer.ggml.model", "bert");
    slm_gguf_set_str(g, "tokenizer.ggml.pre", "jina-v2-en");
    slm_gguf_set_arr_str(g, "tokenizer.ggml.tokens", toks, lens, WVOCAB);
    slm_gguf_set_arr(g, "tokenizer.ggml.token_type", SLM_GGUF_I32, types, WVOCAB);
    slm_gguf_set_u32(g, "tokenizer.ggml.bos_token_id", 2);
    slm_gguf_set_u32(g, "tokenizer.ggml.unknown_token_id", 1);
    slm_gguf_set_u32(g, "tokenizer.ggml.seperator_token_id", 3);
    slm_gguf_set_u32(g, "tokenizer.ggml.padding_token_id", 0);
    slm_gguf_set_u32(g, "tokenizer.ggml.mask_token_id", 4);
}

static void write_gguf(const weights *w, const opts *o, const char *path) {
    const char *A = o->moe ? "nomic-bert-moe" : "nomic-bert";
    char k[96];
#define KEY(s) (snprintf(k, sizeof k, "%s." s, A), k)
    slm_gguf_writer *g = slm_gguf_writer_new();
    slm_gguf_set_str(g, "general.architecture", A);
    slm_gguf_set_u32(g, KEY("block_count"), o->moe ? ML : WL);
    slm_gguf_set_u32(g, KEY("context_length"), o->moe ? 512 : 2048); /* the converter's: n_positions 2048 / 8192 */
    slm_gguf_set_u32(g, KEY("embedding_length"), D);
    slm_gguf_set_u32(g, KEY("feed_forward_length"), F);
    slm_gguf_set_u32(g, KEY("attention.head_count"), H);
    slm_gguf_set_f32(g, KEY("rope.freq_base"), o->moe ? 10000.0f : 1000.0f);
    slm_gguf_set_f32(g, KEY("attention.layer_norm_epsilon"), o->moe ? 1e-5f : 1e-12f);
    if (o->moe) {
        slm_gguf_set_u32(g, KEY("expert_count"), E);
        slm_gguf_set_u32(g, KEY("moe_every_n_layers"), 2);
        slm_gguf_set_u32(g, KEY("expert_used_count"), K);
    }
    slm_gguf_set_bool(g, KEY("attention.causal"), 0);
    slm_gguf_set_u32(g, KEY("pooling_type"), 1);
#undef KEY
    if (o->moe) xlmr_gguf_vocab(g, MVOCAB);
    else wordpiece_gguf_vocab(g);
    void *keep[ST_MAX_TENSORS];
    int nk = 0;
    experts_ctx x;
    memset(&x, 0, sizeof x);
    for (int i = 0; i < w->n; i++) {
        const st_item *t = &w->it[i];
        char gn[64];
        const int r = gguf_of(t->name, gn, sizeof gn);
        CHECKF(r > 0, "%s: no GGUF name", t->name);
        int l = -1;
        sscanf(t->name, "encoder.layers.%d.", &l);
        if (r == 2 && l >= 0 && l < ML && strstr(t->name, "w1")) x.w1[l] = t->f;
        if (r == 2 && l >= 0 && l < ML && strstr(t->name, "w2")) { /* expert e's [F, D] rows -> [D, F] */
            float *tr = x.w2t[l] = malloc(sizeof *tr * E * F * D);
            for (int e = 0; e < E; e++)
                for (int a = 0; a < F; a++)
                    for (int b = 0; b < D; b++) tr[((size_t)e * D + b) * F + a] = t->f[((size_t)e * F + a) * D + b];
            keep[nk++] = tr;
        }
        if (r != 1) continue;
        const size_t n = (size_t)(t->n_dims == 2 ? t->shape[0] * t->shape[1] : t->shape[0]);
        float *f = malloc(n * sizeof *f);
        memcpy(f, t->f, n * sizeof *f);
        st_item t32 = *t; /* the converter keeps token_types and the router in f32 */
        t32.dtype = "F32";
        hf_twin_add(g, gn, strstr(gn, "token_types") || strstr(gn, "ffn_gate_inp") ? &t32 : t, f, keep, &nk);
    }
    if (o->moe) hf_twin_experts(g, "BF16", ML, D, F, E, expert_of, &x, keep, &nk);
    hf_twin_write(g, path, keep, nk);
}

/* ---- the checks -------------------------------------------------------------------- */

static const char *const wtexts[] = {
    "search_query: What is a fox?", "search_document: The quick brown fox jumped over the lazy dog.",
    "Hello, world!", "cats running", "CAF\xc3\x89 \xe4\xb8\xad" "x?", "zzz unknown words",
};
static const char *const mtexts[] = {
    "search_query: What is a fox?",
    "Le caf\xc3\xa9 est tr\xc3\xa8s chaud, mais la cr\xc3\xa8me br\xc3\xbbl\xc3\xa9" "e est froide.",
    "\xe6\x88\x91\xe4\xbb\xac\xe4\xbb\x8a\xe5\xa4\xa9\xe5\x8e\xbb\xe5\x8c\x97\xe4\xba\xac",
    "  na\xc3\xafve   co\xc3\xb6peration  ",
    "Der Stra\xc3\x9f" "enbahnfahrer gr\xc3\xbc\xc3\x9ft die Fu\xc3\x9fg\xc3\xa4nger.",
};

/* Token ids and mean-pooled embeddings of the folder against its twin's. */
static void same_outputs(const char *dir, const char *gguf, const opts *o) {
    slm_engine *ef = twin_load(dir, CTX, 8), *eg = twin_load(gguf, CTX, 8);
    CHECK(ef && eg);
    if (!ef || !eg) goto out;
    CHECKF(slm_model_pooling(ef) == SLM_POOLING_MEAN && slm_model_pooling(eg) == SLM_POOLING_MEAN, "%s: pooling %d / %d",
           dir, slm_model_pooling(ef), slm_model_pooling(eg));
    const char *const *texts = o->moe ? mtexts : wtexts;
    const int nt = o->moe ? (int)(sizeof mtexts / sizeof *mtexts) : (int)(sizeof wtexts / sizeof *wtexts);
    const int32_t first = o->moe ? 0 : 2; /* <s> / [CLS] */
    double worst = 0;
    int exact = 1;
    for (int t = 0; t < nt; t++) {
        int32_t a[CTX], b[CTX];
        const int na = slm_tokenize(ef, texts[t], 1, a, CTX), nb = slm_tokenize(eg, texts[t], 1, b, CTX);
        CHECKF(na == nb && na > 2 && na < CTX && !memcmp(a, b, sizeof a[0] * (size_t)na) && a[0] == first,
               "%s: text %d: %d ids, the GGUF's %d", dir, t, na, nb);
        float ea[D], eb[D];
        int ta = 0, tb = 0;
        slm_session *sa = NULL, *sb = NULL;
        CHECK(slm_session_new(ef, NULL, &sa) == SLM_OK && slm_session_new(eg, NULL, &sb) == SLM_OK);
        if (sa && sb) {
            CHECKF(slm_session_embed_text(sa, texts[t], SLM_POOLING_MEAN, ea, D, &ta) == SLM_OK, "%s", slm_session_error(sa));
            CHECKF(slm_session_embed_text(sb, texts[t], SLM_POOLING_MEAN, eb, D, &tb) == SLM_OK, "%s", slm_session_error(sb));
            CHECKF(ta == na + 1 && tb == ta, "%s: text %d: %d / %d tokens embedded, want %d", dir, t, ta, tb, na + 1);
            worst = fmax(worst, rel_err(ea, eb, D));
            exact &= !memcmp(ea, eb, sizeof ea) && isfinite(ea[0]) && fabs(ea[0]) + fabs(ea[1]) > 1e-4;
        }
        slm_session_free(sa);
        slm_session_free(sb);
    }
    CHECKF(exact, "%s: embeddings differ from the GGUF's by %g (relative)", dir, worst);
    fprintf(stderr, "  %s: ids and embeddings of %d texts against the GGUF twin: max relative difference %g%s\n",
            slm_basename(dir), nt, worst, exact ? " (bit-exact)" : "");
out:
    slm_free(ef);
    slm_free(eg);
}

static void keep_copy(const char *dir, const char *gguf) {
    const char *keep = getenv("SLM_NOMIC_KEEP");
    if (!keep) return;
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s' '%s/'", gguf, dir, keep);
    CHECK(system(cmd) == 0);
}

static void check_variant(const char *name, const opts *o) {
    weights w;
    make_weights(&w, o);
    char dir[512], gguf[600], blob[640];
    write_folder(name, &w, o, dir, sizeof dir);
    snprintf(gguf, sizeof gguf, "%s/%s.gguf", root, name);
    write_gguf(&w, o, gguf);
    twin_same_model(dir, gguf);
    same_outputs(dir, gguf, o);
    /* compiled as a blob (staticlm compile's path): the folder's embeddings, the batch path */
    const slm_options bo = twin_opts(CTX, 8);
    int32_t ids[12];
    for (int i = 0; i < 12; i++) ids[i] = i ? 5 + (i * 7) % (o->moe ? 800 : WNV - 5) : o->moe ? 0 : 2;
    static const int lens[] = {4, 10, 2};
    snprintf(blob, sizeof blob, "%s/%s.slmblob", root, name);
    t_blob_embed_check(dir, &bo, blob, ids, 12, lens, 3);
    keep_copy(dir, gguf);
    unlink(gguf);
    st_rm_dir(dir);
    free_weights(&w);
}

static void test_v15(void) { check_variant("nomic15", &(opts){0}); }
static void test_v2_moe(void) {
    check_variant("nomic2moe", &(opts){.moe = 1});
    check_variant("nomic2moe3d", &(opts){.moe = 1, .experts_shape = 1}); /* the experts as [E, F, D] */
}

/* A folder of o refused by slm_model_open with want and a message holding w1 and w2. */
static void refused(const char *name, const opts *o, slm_status want, const char *w1, const char *w2) {
    weights w;
    make_weights(&w, o);
    char dir[512];
    write_folder(name, &w, o, dir, sizeof dir);
    expect_folder(dir, want, w1, w2);
    slm_model_file m;
    slm_err err = {0};
    if (slm_model_open(&m, dir, &err) == SLM_OK) slm_model_close(&m);
    fprintf(stderr, "  %s\n", err.msg);
    st_rm_dir(dir);
    free_weights(&w);
}

static void test_refusals(void) {
    const slm_status U = SLM_ERR_UNSUPPORTED, FM = SLM_ERR_FORMAT;
    refused("r_prenorm", &(opts){.config = "\"prenorm\": true, "}, U, "config.json: key 'prenorm'", "post-norm");
    refused("r_causal", &(opts){.moe = 1, .config = "\"causal\": true, "}, U, "key 'causal'", "both ways");
    refused("r_frac", &(opts){.config = "\"rotary_emb_fraction\": 0.5, "}, U, "key 'rotary_emb_fraction' = 0.5", NULL);
    refused("r_frac0", &(opts){.config = "\"rotary_emb_fraction\": null, "}, FM, "'rotary_emb_fraction'", "missing");
    refused("r_inter", &(opts){.config = "\"rotary_emb_interleaved\": true, "}, U, "'rotary_emb_interleaved'", NULL);
    refused("r_xpos", &(opts){.config = "\"rotary_emb_scale_base\": 512, "}, U, "'rotary_emb_scale_base'", NULL);
    refused("r_act", &(opts){.config = "\"activation_function\": \"gelu\", "}, U, "'activation_function'", "swiglu");
    refused("r_act2", &(opts){.moe = 1, .config = "\"activation_function\": \"swiglu\", "}, U, "'activation_function'",
            "gelu");
    refused("r_qkvb", &(opts){.config = "\"qkv_proj_bias\": true, "}, U, "'qkv_proj_bias' = true", NULL);
    refused("r_fc1b", &(opts){.moe = 1, .config = "\"mlp_fc1_bias\": false, "}, U, "'mlp_fc1_bias' = false", NULL);
    refused("r_rms", &(opts){.moe = 1, .config = "\"use_rms_norm\": true, "}, U, "'use_rms_norm'", NULL);
    refused("r_norm", &(opts){.moe = 1, .config = "\"moe_normalize_expert_weights\": true, "}, U,
            "'moe_normalize_expert_weights'", NULL);
    refused("r_topk", &(opts){.moe = 1, .config = "\"moe_top_k\": 5, "}, FM, "'moe_top_k' = 5", NULL);
    refused("r_shared", &(opts){.moe = 1, .config = "\"num_shared_experts\": 1, "}, U, "'num_shared_experts'", NULL);
    refused("r_eps", &(opts){.config = "\"layer_norm_epsilon\": \"x\", "}, FM, "'layer_norm_epsilon'", NULL);
    /* tensors */
    refused("r_w2", &(opts){.moe = 1, .experts_shape = 2}, FM, "'encoder.layers.1.mlp.experts.mlp.w2'", "num_experts x n_inner");
    refused("r_router", &(opts){.moe = 1, .drop = "encoder.layers.3.mlp.router.layer.weight"}, FM,
            "'encoder.layers.3.mlp.router.layer.weight' missing", "MoE layer");
    refused("r_norm2", &(opts){.drop = "encoder.layers.1.norm2.weight"}, FM, "blk.1.layer_output_norm.weight", NULL);
    refused("r_w1", &(opts){.moe = 1, .drop = "encoder.layers.1.mlp.experts.mlp.w1"}, FM, "blk.1.ffn_up.0.weight", NULL);
    refused("r_bias", &(opts){.extra = "encoder.layers.0.attn.Wqkv.bias"}, FM, "'encoder.layers.0.attn.Wqkv.bias' present",
            "'qkv_proj_bias' is false");
    refused("r_fc1b2", &(opts){.moe = 1, .drop = "encoder.layers.2.mlp.fc1.bias"}, FM,
            "'encoder.layers.2.mlp.fc1.bias' missing", "'mlp_fc1_bias' is true");
    refused("r_router0", &(opts){.extra = "encoder.layers.0.mlp.router.layer.weight"}, U, "router.layer.weight",
            "not part of a nomic-bert model");
}

int main(void) {
    snprintf(root, sizeof root, "/tmp/slm_hf_nomic_%d", (int)getpid());
    mkdir(root, 0700);
    if (!xlmr_load_vocab()) {
        fprintf(stderr, "cannot read %s/xlmr.gguf\n", UGM_DIR);
        return 1;
    }
    T_RUN(test_v15);
    T_RUN(test_v2_moe);
    T_RUN(test_refusals);
    xlmr_vocab_free();
    st_rm_dir(root);
    T_DONE();
}
