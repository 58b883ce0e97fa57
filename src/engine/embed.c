/* Embeddings: a text's final-norm hidden states, pooled (slm_session_embed).
 * The embedding programs (compiler: slm_compile_embed) are prefills that
 * keep every row and stop before the LM head; the runtime hands their rows
 * over chunk by chunk (slm_rt_embed), and this file pools them on the host,
 * as the sampler turns logits into a token. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/dtype.h"

#include "engine/engine_internal.h"

/* Tensor `name` of the source model, or of the blob's tensor table (a
 * head it keeps: .slm.embed); NULL when absent. */
static const slm_tensor *head_tensor(const slm_engine *e, const char *name, slm_tensor *tmp) {
    if (!e->from_blob) return slm_model_tensor(&e->model, name);
    return slm_blob_tensor(&e->blob, name, tmp) ? tmp : NULL;
}

/* Matrix `name` [rows][cols] as f32 into *out (NULL when absent). */
static slm_status load_f32(slm_engine *e, const char *path, const char *name, int64_t cols, int64_t rows, float **out) {
    slm_tensor tmp;
    const slm_tensor *w = head_tensor(e, name, &tmp);
    *out = NULL;
    if (!w) return SLM_OK;
    const int64_t r = w->n_dims > 1 ? w->ne[1] : 1;
    const uint64_t rb = slm_row_bytes(w->type, (uint64_t)cols);
    if (w->n_dims > 2 || w->ne[0] != cols || r != rows || !rb || w->nbytes < rb * (uint64_t)rows)
        return slm_errf(&e->err, SLM_ERR_FORMAT, "%s: tensor '%s': want [%lld, %lld]", slm_basename(path), name,
                        (long long)cols, (long long)rows);
    if (!(*out = slm_malloc((size_t)(rows * cols) * sizeof(float)))) return slm_errf(&e->err, SLM_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < rows; i++) /* a quantized matrix may be in the compiler's 16-row layout */
        if (!slm_dequantize_matrix_row(w->type, w->data, cols, rows, i, *out + i * cols))
            return slm_errf(&e->err, SLM_ERR_UNSUPPORTED, "%s: tensor '%s': type %s cannot be read", slm_basename(path),
                            name, slm_dtype_name(w->type));
    return SLM_OK;
}

/* f32 vector `name` [n] (NULL when absent). */
static slm_status load_vec(slm_engine *e, const char *path, const char *name, int64_t n, float **out) {
    slm_tensor tmp;
    const slm_tensor *b = head_tensor(e, name, &tmp);
    *out = NULL;
    if (!b) return SLM_OK;
    if (b->type != SLM_F32 || b->n_dims != 1 || b->ne[0] != n || b->nbytes < (uint64_t)n * sizeof(float))
        return slm_errf(&e->err, SLM_ERR_FORMAT, "%s: tensor '%s': want %lld f32 values", slm_basename(path), name,
                        (long long)n);
    if (!(*out = slm_malloc((size_t)n * sizeof(float)))) return slm_errf(&e->err, SLM_ERR_NOMEM, "out of memory");
    memcpy(*out, b->data, (size_t)n * sizeof(float));
    return SLM_OK;
}

/* A reranker's classifier head, made f32 for the host, as llama.cpp's rank
 * pooling reads it: an optional dense layer cls.weight [dim -> h] (+
 * cls.bias) with tanh (modern-bert: GELU, then the LayerNorm cls.norm),
 * then cls.output.weight [h -> labels] (+ cls.output.bias). BERT / XLM-R
 * cross-encoders have both; Qwen3-Reranker's GGUF holds the "yes" and "no"
 * rows of its LM head in cls.output alone; jina-reranker-v1 has cls alone
 * (one score). At most 64 scores. */
static slm_status load_classifier(slm_engine *e, const char *path) {
    slm_tensor t1, t2;
    const slm_tensor *w1 = head_tensor(e, "cls.weight", &t1), *w2 = head_tensor(e, "cls.output.weight", &t2);
    if (!w1 && !w2) return SLM_OK;
    const int dim = e->cfg.dim;
    const int64_t h = w1 ? (w1->n_dims > 1 ? w1->ne[1] : 1) : dim;
    const int64_t labels = w2 ? (w2->n_dims > 1 ? w2->ne[1] : 1) : h;
    if (!w2 && h > 64) { /* a dense layer alone and wide: a pooler, not scores; the model embeds */
        if (e->opt.verbose)
            fprintf(stderr, "staticlm: note: %s: cls.weight [%d, %lld] without cls.output.weight is not a reranker's "
                            "head (over 64 scores): ignored\n", slm_basename(path), dim, (long long)h);
        return SLM_OK;
    }
    if (h < 1 || h > (1 << 16) || labels < 1 || labels > 64)
        return slm_errf(&e->err, SLM_ERR_FORMAT, "%s: classifier head cls.weight %s [%d, %lld], cls.output.weight %s "
                        "[%lld, %lld]: a reranker gives 1..64 scores", slm_basename(path), w1 ? "" : "(absent)", dim,
                        (long long)h, w2 ? "" : "(absent)", (long long)h, (long long)labels);
    slm_status s;
    if (w1) {
        if ((s = load_f32(e, path, "cls.weight", dim, h, &e->cls1_w)) ||
            (s = load_vec(e, path, "cls.bias", h, &e->cls1_b)) || (s = load_vec(e, path, "cls.norm.weight", h, &e->cls_norm)))
            return s;
        e->n_cls1 = (int)h;
    }
    if (w2 && ((s = load_f32(e, path, "cls.output.weight", h, labels, &e->cls_w)) ||
               (s = load_vec(e, path, "cls.output.bias", labels, &e->cls_b))))
        return s;
    e->n_cls = (int)labels;
    return SLM_OK;
}

/* One Dense layer `name`.weight [in -> out] (+ `name`.bias) into e->dense[k]. */
static slm_status load_dense_layer(slm_engine *e, const char *path, int k, const char *name, int in, int act) {
    char wn[48], bn[48];
    snprintf(wn, sizeof wn, "%s.weight", name);
    snprintf(bn, sizeof bn, "%s.bias", name);
    slm_tensor tw;
    const slm_tensor *w = head_tensor(e, wn, &tw);
    if (!w || w->n_dims != 2 || w->ne[1] < 1 || w->ne[1] > (1 << 20))
        return slm_errf(&e->err, SLM_ERR_FORMAT, "%s: tensor '%s': want [%d, width <= 1048576]", slm_basename(path), wn,
                        in);
    struct slm_dense_layer *d = &e->dense[k];
    d->in = in;
    d->out = (int)w->ne[1];
    d->act = act;
    slm_status s = load_f32(e, path, wn, in, d->out, &d->w);
    if (!s) s = load_vec(e, path, bn, d->out, &d->b);
    if (!s) e->n_dense = k + 1;
    return s;
}

/* sentence-transformers' Dense modules, applied to the pooled vector
 * (every row's under pooling none): a folder's list (m->dense: each with
 * its bias and activation, hf_modules.c), a blob's table (.slm.embed), else
 * a GGUF's dense_2 [dim -> d2] (+ dense_2.bias) and dense_3 [d2 -> dim]
 * (+ dense_3.bias), as llama.cpp's converter writes EmbeddingGemma's. The
 * last one must end at dim. */
static slm_status load_dense(slm_engine *e, const char *path) {
    const slm_model_file *m = &e->model;
    const slm_blob_embed *r = e->from_blob ? &e->blob.embed : NULL;
    const int dim = e->cfg.dim, n_list = r ? r->n_dense : m->n_dense;
    slm_status s;
    int in = dim;
    for (int k = 0; k < n_list && k < SLM_MAX_DENSE; k++) {
        char name[16];
        snprintf(name, sizeof name, "dense_%d", r ? r->dense[k].module % 1000 : 0);
        if ((s = load_dense_layer(e, path, k, r ? name : m->dense[k].name, in, r ? r->dense[k].act : m->dense[k].act)))
            return s;
        if (r && (e->dense[k].out != r->dense[k].out || !e->dense[k].b != !r->dense[k].bias))
            return slm_errf(&e->err, SLM_ERR_FORMAT, "%s: section .slm.embed: dense[%d]: %d values%s, its tensors give "
                            "%d%s", slm_basename(path), k, r->dense[k].out, r->dense[k].bias ? " and a bias" : "",
                            e->dense[k].out, e->dense[k].b ? " and a bias" : "");
        in = e->dense[k].out;
    }
    slm_tensor ta, tb;
    const slm_tensor *a = r ? NULL : head_tensor(e, "dense_2.weight", &ta), *b = r ? NULL : head_tensor(e, "dense_3.weight", &tb);
    if (!n_list && (a || b)) {
        if (!a || !b)
            return slm_errf(&e->err, SLM_ERR_FORMAT, "%s: dense_2.weight and dense_3.weight go together, dense_2 [%d, "
                            "width <= 1048576]", slm_basename(path), dim);
        if ((s = load_dense_layer(e, path, 0, "dense_2", dim, SLM_DENSE_IDENTITY)) ||
            (s = load_dense_layer(e, path, 1, "dense_3", e->dense[0].out, SLM_DENSE_IDENTITY)))
            return s;
        in = e->dense[1].out;
    }
    if (in != dim)
        return slm_errf(&e->err, SLM_ERR_FORMAT, "%s: the last dense projection gives %d values, the embeddings are %d "
                        "wide", slm_basename(path), in, dim);
    return SLM_OK;
}

/* The Dense layers on a pooled vector v [dim], in place (double sums). */
static slm_status apply_dense(const slm_engine *e, float *v) {
    int most = e->cfg.dim;
    for (int k = 0; k < e->n_dense; k++) most = e->dense[k].out > most ? e->dense[k].out : most;
    double *x = slm_malloc((size_t)most * 2 * sizeof(double)), *y = x + most;
    if (!x) return SLM_ERR_NOMEM;
    for (int j = 0; j < e->cfg.dim; j++) x[j] = v[j];
    for (int k = 0; k < e->n_dense; k++) {
        const struct slm_dense_layer *d = &e->dense[k];
        for (int i = 0; i < d->out; i++) {
            double acc = d->b ? d->b[i] : 0.0;
            const float *w = d->w + (size_t)i * (size_t)d->in;
            for (int j = 0; j < d->in; j++) acc += (double)w[j] * x[j];
            y[i] = d->act == SLM_DENSE_TANH ? tanh(acc) : acc;
        }
        double *t = x;
        x = y, y = t;
    }
    for (int j = 0; j < e->cfg.dim; j++) v[j] = (float)x[j];
    slm_xfree(x < y ? x : y);
    return SLM_OK;
}

/* The vocabulary's add_bos / add_eos / add_sep and separator as llama.cpp
 * reads them (its defaults by tokenizer type, then the GGUF's keys), for a
 * rerank prompt built without a template; g NULL: the defaults. */
static void special_flags(slm_engine *e, const slm_gguf *g) {
    slm_gguf_str pre = {0};
    if (g) slm_gguf_get_str(g, "tokenizer.ggml.pre", &pre);
    const int wpm = slm_tok_is_wpm(e->tok), bpe = slm_tok_is_bpe(e->tok), ugm = slm_tok_is_ugm(e->tok);
    e->sp.add_bos = wpm || (!bpe && !ugm); /* WordPiece ([CLS]) and SentencePiece BPE */
    e->sp.add_eos = ugm;
    e->sp.add_sep = wpm || (bpe && pre.s && (slm_gguf_str_eq(pre, "jina-v1-en") || slm_gguf_str_eq(pre, "jina-v2-code") ||
                                            slm_gguf_str_eq(pre, "roberta-bpe")));
    e->sp.sep = slm_tok_sep(e->tok);
    int b;
    uint32_t v;
    if (g && slm_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b)) e->sp.add_bos = b;
    if (g && slm_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b)) e->sp.add_eos = b;
    if (g && slm_gguf_get_bool(g, "tokenizer.ggml.add_sep_token", &b)) e->sp.add_sep = b;
    if (g && slm_gguf_get_u32(g, "tokenizer.ggml.seperator_token_id", &v) && v < (uint32_t)slm_tok_vocab_size(e->tok))
        e->sp.sep = (int)v;
}

/* The default pooling of a Hugging Face folder (sentence-transformers'
 * 1_Pooling/config.json), and a GGUF's embedding keys: {arch}.pooling_type (the default pooling),
 * {arch}.attention.causal (an encoder's false is refused with embeddings:
 * the programs attend causally), tokenizer.ggml.add_eos_token; with
 * embeddings on, a reranker's classifier. */
/* From a blob: what its .slm.embed record kept (the source's reading of
 * the keys above), and the heads from its weights. */
static slm_status embed_init_blob(slm_engine *e, const char *path) {
    special_flags(e, NULL);
    if (!e->blob.has_embed) {
        if (e->opt.embeddings)
            return slm_errf(&e->err, SLM_ERR_UNSUPPORTED, "--embeddings: the blob %s holds no embedding programs; "
                            "compile it with --embeddings (an encoder's always has them)", slm_basename(path));
        return SLM_OK;
    }
    const slm_blob_embed *r = &e->blob.embed;
    e->pooling = r->pooling;
    e->add_eos = r->add_eos;
    e->sp.add_bos = r->pair_bos;
    e->sp.add_eos = r->pair_eos;
    e->sp.add_sep = r->pair_sep;
    e->sp.sep = r->sep;
    e->cls_pool = r->cls_pool;
    if (!e->opt.embeddings) return SLM_OK;
    slm_status s = load_dense(e, path);
    if (!s) s = load_classifier(e, path);
    if (!s && (e->n_cls != r->n_cls || e->n_cls1 != r->n_cls1 || e->n_dense != r->n_dense))
        s = slm_errf(&e->err, SLM_ERR_FORMAT, "%s: section .slm.embed: heads of %d / %d scores and %d Dense modules, the "
                     "tensors give %d / %d and %d", slm_basename(path), r->n_cls1, r->n_cls, r->n_dense, e->n_cls1, e->n_cls,
                     e->n_dense);
    return s;
}

/* Dense module k's place K (its tensors dense_K.*): a folder's from its
 * name, a blob's from its record, a GGUF's pair 2 and 3. */
static int dense_module(const slm_engine *e, int k) {
    if (e->from_blob) return e->blob.embed.dense[k].module;
    if (k >= e->model.n_dense) return k + 2;
    int K = -1;
    return sscanf(e->model.dense[k].name, "dense_%d", &K) == 1 ? K : -1; /* "dense_K": hf_modules.c */
}

void slm_engine_embed_record(const slm_engine *e, slm_blob_embed *r) {
    memset(r, 0, sizeof *r);
    r->encoder = e->cfg.encoder;
    r->moe_every = e->cfg.moe_every;
    r->expert_ungated = e->cfg.expert_ungated;
    r->pooling = e->pooling;
    r->add_eos = e->add_eos != 0;
    r->pair_bos = e->sp.add_bos != 0;
    r->pair_eos = e->sp.add_eos != 0;
    r->pair_sep = e->sp.add_sep != 0;
    r->sep = e->sp.sep >= 0 ? e->sp.sep : -1;
    r->n_cls1 = e->n_cls1;
    r->n_cls = e->n_cls;
    r->cls_pool = e->n_cls ? e->cls_pool : 0;
    r->heads = (e->cls1_b ? SLM_BLOB_EMBED_CLS1_B : 0) | (e->cls_norm ? SLM_BLOB_EMBED_CLS_NORM : 0) |
               (e->cls_w ? SLM_BLOB_EMBED_CLS_W : 0) | (e->cls_b ? SLM_BLOB_EMBED_CLS_B : 0);
    r->n_dense = e->n_dense;
    for (int k = 0; k < e->n_dense; k++) {
        const struct slm_dense_layer *d = &e->dense[k];
        r->dense[k] = (slm_blob_embed_dense){dense_module(e, k), d->in, d->out, d->act, d->b != NULL};
    }
}

slm_status slm_engine_embed_init(slm_engine *e, const char *path) {
    slm_engine_embed_free(e); /* a cache-mode load reads them again from the blob it wrote */
    e->pooling = SLM_POOLING_NONE;
    e->cls_pool = 0;
    if (e->from_blob) return embed_init_blob(e, path);
    const int hf = !e->from_blob && e->model.kind == SLM_MODEL_HF;
    int hf_pool = -1;
    if (hf) { /* sentence-transformers' 1_Pooling */
        hf_pool = slm_hf_pooling(e->model.path);
        if (hf_pool >= 0) e->pooling = hf_pool;
        else if (hf_pool == -2 && e->opt.embeddings)
            fprintf(stderr, "staticlm: note: %s: 1_Pooling/config.json asks for a pooling staticlm has not (max or "
                            "weighted mean); the default is none: choose one (--pooling)\n", slm_basename(path));
    }
    const slm_gguf *g = e->from_blob ? NULL : e->model.gguf;
    e->cls_pool = e->model.cls_pool; /* a folder's (ModernBERT's classifier_pooling) */
    special_flags(e, NULL);
    if (hf && slm_tok_is_wpm(e->tok)) e->sp.add_eos = 1, e->sp.add_sep = 0; /* transformers' pair: [CLS] a [SEP] b [SEP] */
    if (hf) slm_tok_hf_pair(e->tok, &e->sp.add_bos, &e->sp.add_eos, &e->sp.add_sep, &e->sp.sep); /* XLM-R: its template's */
    if (hf && !strcmp(e->cfg.arch, "modern-bert")) /* ModernBERT's template pair: [CLS] a [SEP] b [SEP] */
        e->sp.add_bos = e->sp.add_eos = 1, e->sp.add_sep = 0;
    slm_gguf_str arch;
    if (g && slm_gguf_get_str(g, "general.architecture", &arch) && arch.len <= 64) {
        char key[128];
        uint32_t v;
        int b;
        snprintf(key, sizeof key, "%.*s.pooling_type", (int)arch.len, arch.s);
        if (slm_gguf_get_u32(g, key, &v) && v <= SLM_POOLING_RANK) e->pooling = (int)v;
        snprintf(key, sizeof key, "%.*s.classifier.pooling_type", (int)arch.len, arch.s);
        if (e->opt.embeddings && slm_gguf_find(g, key) >= 0) { /* the rows a classifier head reads (llama.cpp's
                                                                    pooling_type_cls; 0 none or 4 rank: the arch's) */
            if (!slm_gguf_get_u32(g, key, &v) || v > SLM_POOLING_RANK)
                return slm_errf(&e->err, SLM_ERR_UNSUPPORTED, "%s: %s: %s (1 mean, 2 cls or 3 last: the rows the "
                                "classifier head reads)", slm_basename(path), key,
                                slm_gguf_get_u32(g, key, &v) ? "out of range" : "not a u32");
            if (v >= SLM_POOLING_MEAN && v <= SLM_POOLING_LAST) e->cls_pool = (int)v;
        }
        if (slm_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b)) e->add_eos = b;
        special_flags(e, g);
        snprintf(key, sizeof key, "%.*s.attention.causal", (int)arch.len, arch.s);
        if (e->opt.embeddings && !e->cfg.encoder && slm_gguf_get_bool(g, key, &b) && !b)
            return slm_errf(&e->err, SLM_ERR_UNSUPPORTED, "%s: %s is false: the model attends both ways (an "
                            "encoder); staticlm's programs attend causally, so its embeddings would be wrong",
                            slm_basename(path), key);
    }
    if (!e->opt.embeddings) return SLM_OK;
    slm_status s = load_dense(e, path);
    if (!s) s = load_classifier(e, path);
    if (!s && hf && e->n_cls && hf_pool == -1) e->pooling = SLM_POOLING_RANK; /* a cross-encoder folder */
    return s;
}

void slm_engine_embed_free(slm_engine *e) {
    slm_xfree(e->cls1_w);
    slm_xfree(e->cls1_b);
    slm_xfree(e->cls_norm);
    slm_xfree(e->cls_w);
    slm_xfree(e->cls_b);
    e->cls1_w = e->cls1_b = e->cls_norm = e->cls_w = e->cls_b = NULL;
    e->n_cls = e->n_cls1 = 0;
    for (int k = 0; k < SLM_MAX_DENSE; k++) {
        slm_xfree(e->dense[k].w);
        slm_xfree(e->dense[k].b);
        e->dense[k].w = e->dense[k].b = NULL;
    }
    e->n_dense = 0;
}

int slm_model_rank_outputs(const slm_engine *e) { return e && e->loaded ? e->n_cls : 0; }

int slm_model_pooling(const slm_engine *e) { return e && e->loaded ? e->pooling : SLM_POOLING_NONE; }

int slm_model_is_encoder(const slm_engine *e) { return e && e->loaded && e->cfg.encoder ? 1 : 0; }

static const char *const pool_names[] = {"none", "mean", "cls", "last", "rank"};

int slm_pooling_parse(const char *name) {
    if (!name) return -2;
    for (int i = 0; i < 5; i++)
        if (!strcmp(name, pool_names[i])) return i;
    return -2;
}

const char *slm_pooling_name(int pooling) { return pooling >= 0 && pooling < 5 ? pool_names[pooling] : "?"; }

void slm_embed_normalize(float *v, int n, int norm) {
    if (!v || n <= 0 || norm < 0) return;
    double sum = 0.0;
    if (norm == 0) { /* int16 range, as llama.cpp */
        for (int i = 0; i < n; i++) sum = fabs(v[i]) > sum ? fabs(v[i]) : sum;
        sum /= 32760.0;
    } else if (norm == 1) {
        for (int i = 0; i < n; i++) sum += fabs(v[i]);
    } else if (norm == 2) {
        for (int i = 0; i < n; i++) sum += (double)v[i] * v[i];
        sum = sqrt(sum);
    } else {
        for (int i = 0; i < n; i++) sum += pow(fabs(v[i]), norm);
        sum = pow(sum, 1.0 / norm);
    }
    const float k = sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
    for (int i = 0; i < n; i++) v[i] *= k;
}

typedef struct pool_acc {
    int pooling, n;
    float *out;
    double *sum; /* mean: [dim] */
} pool_acc;

static void take_rows(void *ud, const float *rows, int first, int n_rows, int dim) {
    pool_acc *a = ud;
    switch (a->pooling) {
    case SLM_POOLING_NONE: memcpy(a->out + (size_t)first * (size_t)dim, rows, (size_t)n_rows * (size_t)dim * sizeof(float)); break;
    case SLM_POOLING_CLS:
        if (first == 0) memcpy(a->out, rows, (size_t)dim * sizeof(float));
        break;
    case SLM_POOLING_LAST:
        if (first + n_rows == a->n) memcpy(a->out, rows + (size_t)(n_rows - 1) * (size_t)dim, (size_t)dim * sizeof(float));
        break;
    default: /* mean, in double so that long inputs lose nothing to the order */
        for (int r = 0; r < n_rows; r++)
            for (int j = 0; j < dim; j++) a->sum[j] += rows[(size_t)r * (size_t)dim + (size_t)j];
        break;
    }
}

/* The classifier head on a pooled row: n_cls scores (qwen3: their softmax,
 * as llama.cpp's rank pooling; its first is P("yes") for Qwen3-Reranker).
 * h: scratch of n_cls1 doubles. */
static void classify(const slm_engine *e, const float *row, double *h, float *out) {
    const int dim = e->cfg.dim, n1 = e->n_cls1;
    if (n1) { /* the dense layer, its activation, and modern-bert's norm */
        const int gelu = !strcmp(e->cfg.arch, "modern-bert");
        for (int i = 0; i < n1; i++) {
            double acc = e->cls1_b ? e->cls1_b[i] : 0.0;
            for (int j = 0; j < dim; j++) acc += (double)e->cls1_w[(size_t)i * dim + j] * row[j];
            h[i] = gelu ? 0.5 * acc * (1.0 + tanh(0.7978845608028654 * (acc + 0.044715 * acc * acc * acc))) : tanh(acc);
        }
        if (e->cls_norm) { /* LayerNorm without a bias */
            double mean = 0.0, var = 0.0;
            for (int i = 0; i < n1; i++) mean += h[i];
            mean /= n1;
            for (int i = 0; i < n1; i++) var += (h[i] - mean) * (h[i] - mean);
            const double inv = 1.0 / sqrt(var / n1 + e->cfg.norm_eps);
            for (int i = 0; i < n1; i++) h[i] = (h[i] - mean) * inv * e->cls_norm[i];
        }
    } else
        for (int j = 0; j < dim; j++) h[j] = row[j];
    const int in = n1 ? n1 : dim;
    double z[64], mx = -INFINITY, sum = 0.0;
    for (int r = 0; r < e->n_cls; r++) {
        double acc = h[r]; /* no output layer: the dense layer's values are the scores */
        if (e->cls_w) {
            acc = e->cls_b ? e->cls_b[r] : 0.0;
            for (int j = 0; j < in; j++) acc += (double)e->cls_w[(size_t)r * in + j] * h[j];
        }
        z[r] = acc;
        if (acc > mx) mx = acc;
    }
    if (strcmp(e->cfg.arch, "qwen3")) {
        for (int r = 0; r < e->n_cls; r++) out[r] = (float)z[r];
        return;
    }
    for (int r = 0; r < e->n_cls; r++) sum += (z[r] = exp(z[r] - mx));
    for (int r = 0; r < e->n_cls; r++) out[r] = (float)(z[r] / sum);
}

/* The session's error, cleared for a new call. */
static slm_err *fresh_err(slm_session *s) {
    slm_err *err = slm_session_err(s);
    memset(err, 0, sizeof *err);
    return err;
}

/* The pooling asked for (the model's by default) checked: SLM_OK, else the error in err. */
static slm_status check_pooling(slm_engine *e, slm_err *err, int *pooling) {
    if (!slm_largest(&e->comp, SLM_PROG_EMBED))
        return slm_errf(err, SLM_ERR_ARG, "embeddings are off: load the model with embeddings (--embeddings)");
    if (*pooling == SLM_POOLING_DEFAULT) *pooling = e->pooling;
    if (*pooling < SLM_POOLING_NONE || *pooling > SLM_POOLING_RANK)
        return slm_errf(err, SLM_ERR_ARG, "pooling %d: none, mean, cls, last or rank", *pooling);
    if (*pooling == SLM_POOLING_RANK && !e->n_cls)
        return slm_errf(err, SLM_ERR_ARG, "pooling rank needs a reranker's classifier head (cls.weight, "
                        "cls.output.weight), which this model has not");
    return SLM_OK;
}

/* The rows pooling gathers: the asked-for one; for rank the rows the
 * classifier reads: those the model names (a GGUF's
 * {arch}.classifier.pooling_type, ModernBERT's classifier_pooling), else
 * the last (qwen3), the mean (modern-bert, as llama.cpp) or the first. */
static int rows_pooling(const slm_engine *e, int pooling) {
    if (pooling != SLM_POOLING_RANK) return pooling;
    if (e->cls_pool) return e->cls_pool;
    return !strcmp(e->cfg.arch, "qwen3") ? SLM_POOLING_LAST : !strcmp(e->cfg.arch, "modern-bert") ? SLM_POOLING_MEAN
                                                                                                 : SLM_POOLING_CLS;
}

/* Floats a text of n tokens gives under pooling. */
static size_t pooled_floats(const slm_engine *e, int pooling, int n) {
    return pooling == SLM_POOLING_RANK ? (size_t)e->n_cls : (size_t)e->cfg.dim * (pooling == SLM_POOLING_NONE ? (size_t)n : 1);
}

/* A text's result from its gathered rows a (a->out: out, or its pooled
 * row under rank): the mean, the classifier's scores (h: scratch of
 * max(n_cls1, dim) doubles), the dense projections (every row's under
 * pooling none, as llama.cpp). */
static slm_status finish_pooled(const slm_engine *e, const pool_acc *a, int pooling, double *h, float *out) {
    const int dim = e->cfg.dim, rank = pooling == SLM_POOLING_RANK;
    if (a->sum)
        for (int j = 0; j < dim; j++) a->out[j] = (float)(a->sum[j] / a->n);
    if (rank) classify(e, a->out, h, out);
    for (int r = 0; e->n_dense && !rank && r < (pooling == SLM_POOLING_NONE ? a->n : 1); r++)
        if (apply_dense(e, out + (size_t)r * (size_t)dim)) return SLM_ERR_NOMEM;
    return SLM_OK;
}

slm_status slm_session_embed(slm_session *s, const int32_t *ids, int n, int pooling, float *out, size_t cap) {
    if (!s) return SLM_ERR_ARG;
    slm_engine *e = slm_session_engine(s);
    slm_err *err = fresh_err(s);
    slm_status st = check_pooling(e, err, &pooling);
    if (st) return st;
    if (!ids || n < 1) return slm_errf(err, SLM_ERR_ARG, "an embedding needs at least one token");
    const int dim = e->cfg.dim, rank = pooling == SLM_POOLING_RANK, src = rows_pooling(e, pooling);
    const size_t need = pooled_floats(e, pooling, n);
    if (!out || cap < need)
        return slm_errf(err, SLM_ERR_ARG, "embedding output of %zu floats, need %zu", out ? cap : 0, need);
    pool_acc a = {src, n, out, NULL};
    float *row = NULL;
    double *h = NULL;
    if ((rank && (!(a.out = row = slm_malloc((size_t)dim * sizeof(float))) ||
                  !(h = slm_malloc((size_t)(e->n_cls1 > dim ? e->n_cls1 : dim) * sizeof(double))))) ||
        (src == SLM_POOLING_MEAN && !(a.sum = slm_calloc((size_t)dim, sizeof *a.sum)))) {
        st = slm_errf(err, SLM_ERR_NOMEM, "out of memory");
        goto out;
    }
    slm_session_reset(s); /* the rows it held, and a prompt in steps, are dropped */
    st = slm_rt_embed(slm_session_rt(s), ids, n, take_rows, &a, err);
    slm_session_reset(s);
    if (!st && finish_pooled(e, &a, pooling, h, out)) st = slm_errf(err, SLM_ERR_NOMEM, "out of memory");
out:
    slm_xfree(h);
    slm_xfree(a.sum);
    slm_xfree(row);
    return st;
}

int slm_embed_tokenize(slm_engine *e, const char *text, int32_t *ids, int cap) {
    if (!e || !e->loaded || !text) return SLM_TOK_ENOMEM;
    /* BOS as the vocabulary adds it; EOS where it asks (a BPE or Unigram
     * vocabulary applies its own add_bos/add_eos flags, WordPiece always ends
     * with [SEP] as llama.cpp's, the others the engine's reading of it) */
    const int add_eos = slm_tok_is_bpe(e->tok) || slm_tok_is_wpm(e->tok) || slm_tok_is_ugm(e->tok) ? 1 : e->add_eos;
    return slm_tok_encode(e->tok, text, 1, add_eos, ids, cap);
}

slm_status slm_session_embed_text(slm_session *s, const char *text, int pooling, float *out, size_t cap,
                                  int *n_tokens) {
    if (n_tokens) *n_tokens = 0;
    if (!s) return SLM_ERR_ARG;
    slm_engine *e = slm_session_engine(s);
    slm_err *err = fresh_err(s);
    if (!text) return slm_errf(err, SLM_ERR_ARG, "no text");
    int n = slm_embed_tokenize(e, text, NULL, 0);
    if (n == SLM_TOK_ETOOLONG)
        return slm_errf(err, SLM_ERR_CAPACITY, "input: %s (%zu bytes; raise max_prompt_bytes)",
                        slm_tok_encode_error(n), slm_tok_max_input(e->tok));
    if (n < 0)
        return slm_errf(err, n == SLM_TOK_ENOMEM ? SLM_ERR_NOMEM : SLM_ERR_CAPACITY, "input: %s",
                        slm_tok_encode_error(n));
    if (n == 0) return slm_errf(err, SLM_ERR_ARG, "the input encodes to no tokens and the vocabulary has no BOS");
    int32_t *ids = slm_malloc((size_t)(n ? n : 1) * sizeof *ids);
    if (!ids) return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    slm_embed_tokenize(e, text, ids, n);
    if (n_tokens) *n_tokens = n;
    const slm_status st = slm_session_embed(s, ids, n, pooling, out, cap);
    slm_xfree(ids);
    return st;
}

/* Every `key` in *s replaced by val (a new slm_malloc'd string; *s freed);
 * 0 when out of memory. */
static int replace_all(char **s, const char *key, const char *val) {
    const size_t kl = strlen(key), vl = strlen(val);
    size_t n = 0;
    for (const char *p = *s; (p = strstr(p, key)); p += kl) n++;
    if (!n) return 1;
    char *o = slm_malloc(strlen(*s) + n * vl + 1), *w = o;
    if (!o) return 0;
    for (const char *p = *s, *q; ; p = q + kl) {
        q = strstr(p, key);
        const size_t l = q ? (size_t)(q - p) : strlen(p);
        memcpy(w, p, l);
        w += l;
        if (!q) break;
        memcpy(w, val, vl);
        w += vl;
    }
    *w = 0;
    slm_xfree(*s);
    *s = o;
    return 1;
}

/* Text as plain pieces, no BOS / EOS, special-token text not matched (as
 * llama-server's subprompts), appended to ids[*n..]; below zero an
 * SLM_TOK_E* code. */
static int plain_ids(const slm_engine *e, const char *text, int32_t **ids, int *n, int *cap) {
    const size_t len = strlen(text);
    uint8_t *plain = slm_malloc(len + 1);
    if (!plain) return SLM_TOK_ENOMEM;
    memset(plain, 1, len + 1);
    int m = slm_tok_encode_masked(e->tok, text, plain, 0, 0, NULL, 0);
    if (m >= 0 && *n + m + 4 > *cap) {
        int32_t *grown = slm_realloc(*ids, (size_t)(*n + m + 4) * sizeof(int32_t));
        if (!grown) m = SLM_TOK_ENOMEM;
        else *ids = grown, *cap = *n + m + 4;
    }
    if (m > 0) slm_tok_encode_masked(e->tok, text, plain, 0, 0, *ids + *n, m);
    slm_xfree(plain);
    if (m > 0) *n += m;
    return m < 0 ? m : 0;
}

/* A cross-encoder's input without a rerank template, as llama-server builds
 * it from the vocabulary's flags: [BOS] query [EOS] [SEP] document [EOS]
 * (EOS: the separator where the vocabulary has none). */
static int pair_ids(const slm_engine *e, const char *query, const char *document, int32_t **ids) {
    int n = 0, cap = 0, st;
    const int bos = slm_tok_bos(e->tok), eos = slm_tok_eos(e->tok) >= 0 ? slm_tok_eos(e->tok) : e->sp.sep;
    *ids = NULL;
    if ((e->sp.add_bos && bos < 0) || (e->sp.add_eos && eos < 0) || (e->sp.add_sep && e->sp.sep < 0)) return -100;
    if (!(*ids = slm_malloc(4 * sizeof(int32_t)))) return SLM_TOK_ENOMEM;
    cap = 4;
    if (e->sp.add_bos) (*ids)[n++] = bos;
    if ((st = plain_ids(e, query, ids, &n, &cap))) return st;
    if (e->sp.add_eos) (*ids)[n++] = eos;
    if (e->sp.add_sep) (*ids)[n++] = e->sp.sep;
    if ((st = plain_ids(e, document, ids, &n, &cap))) return st;
    if (e->sp.add_eos) (*ids)[n++] = eos;
    return n;
}

static slm_status text_err(slm_err *err, int t, slm_status st);

/* A rerank pair's ids into *ids (slm_malloc'd): the rerank template's
 * text, or a cross-encoder's pair; their count, or -1 with err set. */
static int rerank_ids(slm_engine *e, slm_err *err, const char *query, const char *document, int32_t **ids) {
    *ids = NULL;
    if (!query || !document) return slm_errf(err, SLM_ERR_ARG, "a query and a document"), -1;
    const long tl = slm_model_meta(e, "tokenizer.chat_template.rerank", NULL, 0);
    if (tl > (1 << 20)) return slm_errf(err, SLM_ERR_UNSUPPORTED, "the rerank template is over 1 MiB"), -1;
    if (tl < 0 && !e->n_cls)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "this model is not a reranker: it has no classifier head (cls.weight, "
                        "cls.output.weight) and no rerank template (tokenizer.chat_template.rerank)"), -1;
    int n;
    if (tl < 0) { /* a cross-encoder (BERT, XLM-R): the pair by the vocabulary's flags */
        n = pair_ids(e, query, document, ids);
        if (n == -100) {
            slm_xfree(*ids);
            *ids = NULL;
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "rerank input: the vocabulary asks for a BOS, EOS or separator "
                            "token it does not name"), -1;
        }
    } else {
        char *prompt = slm_malloc((size_t)tl + 1);
        if (!prompt) return slm_errf(err, SLM_ERR_NOMEM, "out of memory"), -1;
        slm_model_meta(e, "tokenizer.chat_template.rerank", prompt, (size_t)tl + 1);
        /* as llama-server: {query}, then {document}, replaced; special-token text parsed, no BOS added */
        if (!replace_all(&prompt, "{query}", query) || !replace_all(&prompt, "{document}", document)) {
            slm_xfree(prompt);
            return slm_errf(err, SLM_ERR_NOMEM, "out of memory"), -1;
        }
        n = slm_engine_tokenize(e, prompt, SLM_FEED_SPECIAL, ids);
        slm_xfree(prompt);
    }
    if (n < 0) {
        slm_xfree(*ids);
        *ids = NULL;
        return slm_errf(err, n == SLM_TOK_ENOMEM ? SLM_ERR_NOMEM : SLM_ERR_CAPACITY, "rerank input: %s",
                        slm_tok_encode_error(n)), -1;
    }
    return n;
}

slm_status slm_session_rerank(slm_session *s, const char *query, const char *document, float *out, size_t cap,
                              int *n_tokens) {
    return slm_session_rerank_batch(s, 1, &query, &document, &out, &cap, n_tokens);
}

slm_status slm_session_rerank_batch(slm_session *s, int k, const char *const *query, const char *const *document,
                                    float *const *out, const size_t *cap, int *n_tokens) {
    if (!s) return SLM_ERR_ARG;
    slm_engine *e = slm_session_engine(s);
    slm_err *err = fresh_err(s);
    if (k < 0 || (k && (!query || !document || !out || !cap))) return slm_errf(err, SLM_ERR_ARG, "rerank: %d pairs", k);
    int32_t **ids = slm_calloc((size_t)(k ? k : 1), sizeof *ids);
    int *n = slm_calloc((size_t)(k ? k : 1), sizeof *n);
    slm_status st = ids && n ? SLM_OK : slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    for (int t = 0; !st && t < k; t++) {
        if ((n[t] = rerank_ids(e, err, query[t], document[t], &ids[t])) < 0) st = k > 1 ? text_err(err, t, err->status) : err->status;
        else if (n_tokens) n_tokens[t] = n[t];
    }
    if (!st) st = slm_session_embed_batch(s, k, (const int32_t *const *)ids, n, SLM_POOLING_RANK, out, cap);
    for (int t = 0; ids && t < k; t++) slm_xfree(ids[t]);
    slm_xfree(ids);
    slm_xfree(n);
    return st;
}

/* ---- several texts at once (slm_session_embed_batch) ---------------------- */

typedef struct batch_acc {
    pool_acc *acc;    /* [k]: each text's pooling */
    const int *order; /* [k]: the runtime's text q is the caller's order[q] */
} batch_acc;

static void take_text(void *ud, int text, const float *rows, int n_rows, int dim) {
    const batch_acc *b = ud;
    take_rows(&b->acc[b->order[text]], rows, 0, n_rows, dim);
}

/* The session error's message behind "text t: ". */
static slm_status text_err(slm_err *err, int t, slm_status st) {
    char m[SLM_ERRLEN];
    snprintf(m, sizeof m, "%s", err->msg);
    return slm_errf(err, st, "text %d: %s", t, m);
}

slm_status slm_session_embed_batch(slm_session *s, int k, const int32_t *const *ids, const int *n, int pooling,
                                   float *const *out, const size_t *cap) {
    if (!s) return SLM_ERR_ARG;
    slm_engine *e = slm_session_engine(s);
    slm_err *err = fresh_err(s);
    slm_status st = check_pooling(e, err, &pooling);
    if (st) return st;
    if (k < 0 || (k && (!ids || !n || !out || !cap))) return slm_errf(err, SLM_ERR_ARG, "batch embeddings: %d texts", k);
    const int dim = e->cfg.dim, rank = pooling == SLM_POOLING_RANK;
    for (int t = 0; t < k; t++) {
        if (!ids[t] || n[t] < 1) return slm_errf(err, SLM_ERR_ARG, "text %d: an embedding needs at least one token", t);
        for (int i = 0; i < n[t]; i++)
            if (ids[t][i] < 0 || ids[t][i] >= e->cfg.vocab_size)
                return slm_errf(err, SLM_ERR_ARG, "text %d: token id %d at %d is outside the vocabulary (%d)", t,
                                ids[t][i], i, e->cfg.vocab_size);
        const size_t need = pooled_floats(e, pooling, n[t]);
        if (!out[t] || cap[t] < need)
            return slm_errf(err, SLM_ERR_ARG, "text %d: embedding output of %zu floats, need %zu", t, out[t] ? cap[t] : 0,
                            need);
    }
    /* the texts a region holds, longest first (the calls waste the fewest rows); the others alone */
    const int most = slm_rt_embed_region_max(slm_session_rt(s));
    int *order = slm_malloc((size_t)(k ? k : 1) * 2 * sizeof *order), *sn = order + k, m = 0;
    const int32_t **sids = slm_malloc((size_t)(k ? k : 1) * sizeof *sids);
    pool_acc *acc = slm_calloc((size_t)(k ? k : 1), sizeof *acc);
    const int src = rows_pooling(e, pooling);
    double *sums = src == SLM_POOLING_MEAN ? slm_calloc((size_t)(k ? k : 1) * (size_t)dim, sizeof *sums) : NULL;
    float *rows = rank ? slm_malloc((size_t)(k ? k : 1) * (size_t)dim * sizeof *rows) : NULL;
    double *h = rank ? slm_malloc((size_t)(e->n_cls1 > dim ? e->n_cls1 : dim) * sizeof *h) : NULL;
    if (!order || !sids || !acc || (src == SLM_POOLING_MEAN && !sums) || (rank && (!rows || !h))) {
        st = slm_errf(err, SLM_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int t = 0; t < k; t++) {
        acc[t] = (pool_acc){src, n[t],
                            rank ? rows + (size_t)t * (size_t)dim : out[t], sums ? sums + (size_t)t * (size_t)dim : NULL};
        if (n[t] > most) continue;
        int i = m++;
        for (; i > 0 && n[order[i - 1]] < n[t]; i--) order[i] = order[i - 1]; /* stable: equal lengths keep their order */
        order[i] = t;
    }
    if (m) {
        for (int q = 0; q < m; q++) {
            sids[q] = ids[order[q]];
            sn[q] = n[order[q]];
        }
        batch_acc b = {acc, order};
        slm_session_reset(s); /* the rows it held, and a prompt in steps, are dropped */
        st = slm_rt_embed_batch(slm_session_rt(s), m, sids, sn, take_text, &b, err);
    }
    for (int t = 0; !st && t < k; t++) {
        if (n[t] > most) {
            if ((st = slm_session_embed(s, ids[t], n[t], pooling, out[t], cap[t]))) st = text_err(err, t, st);
        } else if (finish_pooled(e, &acc[t], pooling, h, out[t])) {
            st = slm_errf(err, SLM_ERR_NOMEM, "out of memory");
        }
    }
done:
    slm_xfree(order);
    slm_xfree(sids);
    slm_xfree(acc);
    slm_xfree(sums);
    slm_xfree(rows);
    slm_xfree(h);
    return st;
}
