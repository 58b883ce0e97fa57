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

/* A reranker's classifier head (cls.output.weight [labels][dim], and its
 * bias if any: Qwen3-Reranker's GGUF holds the "yes" and "no" rows of its
 * LM head there), made f32 for the host. */
static slm_status load_classifier(slm_engine *e, const char *path) {
    const slm_tensor *w = slm_model_tensor(&e->model, "cls.output.weight");
    if (!w) return SLM_OK;
    const int64_t cols = w->ne[0], rows = w->n_dims > 1 ? w->ne[1] : 1;
    if (w->n_dims > 2 || cols != e->cfg.dim || rows < 1 || rows > 64)
        return slm_errf(&e->err, SLM_ERR_FORMAT, "%s: cls.output.weight is [%lld, %lld]; a classifier head is "
                        "[%d, labels <= 64]", slm_basename(path), (long long)cols, (long long)rows, e->cfg.dim);
    const uint64_t rb = slm_row_bytes(w->type, (uint64_t)cols);
    if (!rb || w->nbytes < rb * (uint64_t)rows)
        return slm_errf(&e->err, SLM_ERR_FORMAT, "%s: cls.output.weight: type %s, %llu bytes for %lld rows",
                        slm_basename(path), slm_dtype_name(w->type), (unsigned long long)w->nbytes, (long long)rows);
    if (!(e->cls_w = slm_malloc((size_t)(rows * cols) * sizeof(float))) ||
        !(e->cls_b = slm_calloc((size_t)rows, sizeof(float))))
        return slm_errf(&e->err, SLM_ERR_NOMEM, "out of memory");
    for (int64_t r = 0; r < rows; r++)
        if (!slm_dequantize_row(w->type, (const uint8_t *)w->data + (uint64_t)r * rb, e->cls_w + r * cols, cols))
            return slm_errf(&e->err, SLM_ERR_UNSUPPORTED, "%s: cls.output.weight: type %s cannot be read",
                            slm_basename(path), slm_dtype_name(w->type));
    const slm_tensor *b = slm_model_tensor(&e->model, "cls.output.bias");
    if (b) {
        if (b->type != SLM_F32 || b->ne[0] != rows || b->nbytes < (uint64_t)rows * sizeof(float))
            return slm_errf(&e->err, SLM_ERR_FORMAT, "%s: cls.output.bias: want %lld f32 values", slm_basename(path),
                            (long long)rows);
        memcpy(e->cls_b, b->data, (size_t)rows * sizeof(float));
    }
    e->n_cls = (int)rows;
    return SLM_OK;
}

/* Matrix `name` [rows][cols] as f32 into *out (NULL when absent). */
static slm_status load_f32(slm_engine *e, const char *path, const char *name, int64_t cols, int64_t rows, float **out) {
    const slm_tensor *w = slm_model_tensor(&e->model, name);
    *out = NULL;
    if (!w) return SLM_OK;
    const int64_t r = w->n_dims > 1 ? w->ne[1] : 1;
    const uint64_t rb = slm_row_bytes(w->type, (uint64_t)cols);
    if (w->n_dims > 2 || w->ne[0] != cols || r != rows || !rb || w->nbytes < rb * (uint64_t)rows)
        return slm_errf(&e->err, SLM_ERR_FORMAT, "%s: tensor '%s': want [%lld, %lld]", slm_basename(path), name,
                        (long long)cols, (long long)rows);
    if (!(*out = slm_malloc((size_t)(rows * cols) * sizeof(float)))) return slm_errf(&e->err, SLM_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < rows; i++)
        if (!slm_dequantize_row(w->type, (const uint8_t *)w->data + (uint64_t)i * rb, *out + i * cols, cols))
            return slm_errf(&e->err, SLM_ERR_UNSUPPORTED, "%s: tensor '%s': type %s cannot be read", slm_basename(path),
                            name, slm_dtype_name(w->type));
    return SLM_OK;
}

/* sentence-transformers' dense projections (dense_2 [dim -> d2], its bias,
 * dense_3 [d2 -> dim]), as llama.cpp's converter writes EmbeddingGemma's:
 * applied to the pooled vector (every row's under pooling none). */
static slm_status load_dense(slm_engine *e, const char *path) {
    const slm_tensor *a = slm_model_tensor(&e->model, "dense_2.weight"), *b = slm_model_tensor(&e->model, "dense_3.weight");
    if (!a && !b) return SLM_OK;
    if (!a || !b || a->n_dims != 2 || a->ne[1] < 1 || a->ne[1] > (1 << 16))
        return slm_errf(&e->err, SLM_ERR_FORMAT, "%s: dense_2.weight and dense_3.weight go together, dense_2 [%d, "
                        "width <= 65536]", slm_basename(path), e->cfg.dim);
    const int d2 = (int)a->ne[1], dim = e->cfg.dim;
    slm_status s;
    if ((s = load_f32(e, path, "dense_2.weight", dim, d2, &e->dense2)) || (s = load_f32(e, path, "dense_3.weight", d2, dim, &e->dense3)))
        return s;
    const slm_tensor *bias = slm_model_tensor(&e->model, "dense_2.bias");
    if (bias) {
        if (bias->type != SLM_F32 || bias->ne[0] != d2 || bias->nbytes < (uint64_t)d2 * sizeof(float))
            return slm_errf(&e->err, SLM_ERR_FORMAT, "%s: dense_2.bias: want %d f32 values", slm_basename(path), d2);
        if (!(e->dense2_b = slm_malloc((size_t)d2 * sizeof(float)))) return slm_errf(&e->err, SLM_ERR_NOMEM, "out of memory");
        memcpy(e->dense2_b, bias->data, (size_t)d2 * sizeof(float));
    }
    e->d2 = d2;
    return SLM_OK;
}

/* The dense projections on a pooled vector v [dim], in place (double sums). */
static slm_status apply_dense(const slm_engine *e, float *v) {
    const int dim = e->cfg.dim, d2 = e->d2;
    double *h = slm_malloc((size_t)d2 * sizeof(double));
    if (!h) return SLM_ERR_NOMEM;
    for (int i = 0; i < d2; i++) {
        double acc = e->dense2_b ? e->dense2_b[i] : 0.0;
        for (int j = 0; j < dim; j++) acc += (double)e->dense2[(size_t)i * dim + j] * v[j];
        h[i] = acc;
    }
    for (int i = 0; i < dim; i++) {
        double acc = 0.0;
        for (int j = 0; j < d2; j++) acc += (double)e->dense3[(size_t)i * d2 + j] * h[j];
        v[i] = (float)acc;
    }
    slm_xfree(h);
    return SLM_OK;
}

/* The default pooling of a Hugging Face folder (sentence-transformers'
 * 1_Pooling/config.json), and a GGUF's embedding keys: {arch}.pooling_type (the default pooling),
 * {arch}.attention.causal (an encoder's false is refused with embeddings:
 * the programs attend causally), tokenizer.ggml.add_eos_token; with
 * embeddings on, a reranker's classifier. */
slm_status slm_engine_embed_init(slm_engine *e, const char *path) {
    e->pooling = SLM_POOLING_NONE;
    if (!e->from_blob && e->model.kind == SLM_MODEL_HF) { /* sentence-transformers' 1_Pooling */
        const int p = slm_hf_pooling(e->model.path);
        if (p >= 0) e->pooling = p;
        else if (p == -2 && e->opt.embeddings)
            fprintf(stderr, "staticlm: note: %s: 1_Pooling/config.json asks for a pooling staticlm has not (max or "
                            "weighted mean); the default is none: choose one (--pooling)\n", slm_basename(path));
    }
    const slm_gguf *g = e->from_blob ? NULL : e->model.gguf;
    slm_gguf_str arch;
    if (!g || !slm_gguf_get_str(g, "general.architecture", &arch) || arch.len > 64) return SLM_OK;
    char key[128];
    uint32_t v;
    int b;
    snprintf(key, sizeof key, "%.*s.pooling_type", (int)arch.len, arch.s);
    if (slm_gguf_get_u32(g, key, &v) && v <= SLM_POOLING_RANK) e->pooling = (int)v;
    if (slm_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b)) e->add_eos = b;
    snprintf(key, sizeof key, "%.*s.attention.causal", (int)arch.len, arch.s);
    if (e->opt.embeddings && !e->cfg.encoder && slm_gguf_get_bool(g, key, &b) && !b)
        return slm_errf(&e->err, SLM_ERR_UNSUPPORTED, "%s: %s is false: the model attends both ways (an "
                        "encoder); staticlm's programs attend causally, so its embeddings would be wrong",
                        slm_basename(path), key);
    if (!e->opt.embeddings) return SLM_OK;
    slm_status s = load_dense(e, path);
    return s ? s : load_classifier(e, path);
}

void slm_engine_embed_free(slm_engine *e) {
    slm_xfree(e->cls_w);
    slm_xfree(e->cls_b);
    e->cls_w = e->cls_b = NULL;
    e->n_cls = 0;
    slm_xfree(e->dense2);
    slm_xfree(e->dense2_b);
    slm_xfree(e->dense3);
    e->dense2 = e->dense2_b = e->dense3 = NULL;
    e->d2 = 0;
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

/* The classifier head on a row: n_cls scores (qwen3: their softmax, as
 * llama.cpp's rank pooling; its first is P("yes") for Qwen3-Reranker). */
static void classify(const slm_engine *e, const float *row, float *out) {
    const int dim = e->cfg.dim;
    double z[64], mx = -INFINITY, sum = 0.0;
    for (int r = 0; r < e->n_cls; r++) {
        double acc = e->cls_b[r];
        for (int j = 0; j < dim; j++) acc += (double)e->cls_w[(size_t)r * dim + j] * row[j];
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

slm_status slm_session_embed(slm_session *s, const int32_t *ids, int n, int pooling, float *out, size_t cap) {
    if (!s) return SLM_ERR_ARG;
    slm_engine *e = slm_session_engine(s);
    slm_err *err = fresh_err(s);
    if (!slm_largest(&e->comp, SLM_PROG_EMBED))
        return slm_errf(err, SLM_ERR_ARG, "embeddings are off: load the model with embeddings (--embeddings)");
    if (pooling == SLM_POOLING_DEFAULT) pooling = e->pooling;
    if (pooling < SLM_POOLING_NONE || pooling > SLM_POOLING_RANK)
        return slm_errf(err, SLM_ERR_ARG, "pooling %d: none, mean, cls, last or rank", pooling);
    if (pooling == SLM_POOLING_RANK && !e->n_cls)
        return slm_errf(err, SLM_ERR_ARG, "pooling rank needs a reranker's classifier head (cls.output.weight), "
                        "which this model has not");
    if (!ids || n < 1) return slm_errf(err, SLM_ERR_ARG, "an embedding needs at least one token");
    const int dim = e->cfg.dim, rank = pooling == SLM_POOLING_RANK;
    const size_t need = rank ? (size_t)e->n_cls : (size_t)dim * (pooling == SLM_POOLING_NONE ? (size_t)n : 1);
    if (!out || cap < need)
        return slm_errf(err, SLM_ERR_ARG, "embedding output of %zu floats, need %zu", out ? cap : 0, need);
    /* rank: the classifier reads the last row (qwen3, as llama.cpp) or the first */
    const int rank_last = rank && !strcmp(e->cfg.arch, "qwen3");
    pool_acc a = {rank ? (rank_last ? SLM_POOLING_LAST : SLM_POOLING_CLS) : pooling, n, out, NULL};
    float *row = NULL;
    if (rank && !(a.out = row = slm_malloc((size_t)dim * sizeof(float))))
        return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    if (pooling == SLM_POOLING_MEAN && !(a.sum = slm_calloc((size_t)dim, sizeof *a.sum)))
        return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    slm_session_reset(s); /* the rows it held, and a prompt in steps, are dropped */
    slm_status st = slm_rt_embed(slm_session_rt(s), ids, n, take_rows, &a, err);
    slm_session_reset(s);
    if (!st && a.sum)
        for (int j = 0; j < dim; j++) out[j] = (float)(a.sum[j] / n);
    if (!st && rank) classify(e, row, out);
    /* the dense projections on the pooled vector, or on every row under pooling none (as llama.cpp) */
    for (int r = 0; !st && e->d2 && !rank && r < (pooling == SLM_POOLING_NONE ? n : 1); r++)
        if (apply_dense(e, out + (size_t)r * (size_t)dim)) st = slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    slm_xfree(a.sum);
    slm_xfree(row);
    return st;
}

slm_status slm_session_embed_text(slm_session *s, const char *text, int pooling, float *out, size_t cap,
                                  int *n_tokens) {
    if (n_tokens) *n_tokens = 0;
    if (!s) return SLM_ERR_ARG;
    slm_engine *e = slm_session_engine(s);
    slm_err *err = fresh_err(s);
    if (!text) return slm_errf(err, SLM_ERR_ARG, "no text");
    /* BOS as the vocabulary adds it; EOS where it asks (a BPE vocabulary
     * applies its own add_eos flag, WordPiece always ends with [SEP] as
     * llama.cpp's, the others the engine's reading of it) */
    const int add_eos = slm_tok_is_bpe(e->tok) || slm_tok_is_wpm(e->tok) ? 1 : e->add_eos; /* WordPiece: [SEP] */
    int n = slm_tok_encode(e->tok, text, 1, add_eos, NULL, 0);
    if (n == SLM_TOK_ETOOLONG)
        return slm_errf(err, SLM_ERR_CAPACITY, "input: %s (%zu bytes; raise max_prompt_bytes)",
                        slm_tok_encode_error(n), slm_tok_max_input(e->tok));
    if (n < 0)
        return slm_errf(err, n == SLM_TOK_ENOMEM ? SLM_ERR_NOMEM : SLM_ERR_CAPACITY, "input: %s",
                        slm_tok_encode_error(n));
    if (n == 0) return slm_errf(err, SLM_ERR_ARG, "the input encodes to no tokens and the vocabulary has no BOS");
    int32_t *ids = slm_malloc((size_t)(n ? n : 1) * sizeof *ids);
    if (!ids) return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    slm_tok_encode(e->tok, text, 1, add_eos, ids, n);
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

slm_status slm_session_rerank(slm_session *s, const char *query, const char *document, float *out, size_t cap,
                              int *n_tokens) {
    if (n_tokens) *n_tokens = 0;
    if (!s) return SLM_ERR_ARG;
    slm_engine *e = slm_session_engine(s);
    slm_err *err = fresh_err(s);
    if (!query || !document) return slm_errf(err, SLM_ERR_ARG, "a query and a document");
    const long tl = slm_model_meta(e, "tokenizer.chat_template.rerank", NULL, 0);
    if (tl < 0 || tl > (1 << 20))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "this model has no rerank template (tokenizer.chat_template.rerank, "
                        "as llama.cpp's converter writes for Qwen3-Reranker)");
    char *prompt = slm_malloc((size_t)tl + 1);
    if (!prompt) return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    slm_model_meta(e, "tokenizer.chat_template.rerank", prompt, (size_t)tl + 1);
    /* as llama-server: {query}, then {document}, replaced; special-token text parsed, no BOS added */
    if (!replace_all(&prompt, "{query}", query) || !replace_all(&prompt, "{document}", document)) {
        slm_xfree(prompt);
        return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    }
    int32_t *ids = NULL;
    const int n = slm_engine_tokenize(e, prompt, SLM_FEED_SPECIAL, &ids);
    slm_xfree(prompt);
    if (n < 0) {
        slm_xfree(ids);
        return slm_errf(err, n == SLM_TOK_ENOMEM ? SLM_ERR_NOMEM : SLM_ERR_CAPACITY, "rerank input: %s",
                        slm_tok_encode_error(n));
    }
    if (n_tokens) *n_tokens = n;
    const slm_status st = slm_session_embed(s, ids, n, SLM_POOLING_RANK, out, cap);
    slm_xfree(ids);
    return st;
}

/* ---- several texts at once (slm_session_embed_batch) ---------------------- */

int slm_embed_tokenize(slm_engine *e, const char *text, int32_t *ids, int cap) {
    if (!e || !e->loaded || !text) return SLM_TOK_ENOMEM;
    /* as slm_session_embed_text: BOS, and EOS as the vocabulary asks (WordPiece: [SEP]) */
    const int add_eos = slm_tok_is_bpe(e->tok) || slm_tok_is_wpm(e->tok) ? 1 : e->add_eos;
    return slm_tok_encode(e->tok, text, 1, add_eos, ids, cap);
}

typedef struct batch_acc {
    pool_acc *acc;    /* [k]: each text's pooling */
    const int *order; /* [k]: the runtime's text q is the caller's order[q] */
} batch_acc;

static void take_text(void *ud, int text, const float *rows, int n_rows, int dim) {
    const batch_acc *b = ud;
    take_rows(&b->acc[b->order[text]], rows, 0, n_rows, dim);
}

/* A text's pooled result (its mean, its classifier's scores, the dense
 * projections), as slm_session_embed finishes one. */
static slm_status finish_text(const slm_engine *e, const pool_acc *a, int pooling, float *out) {
    const int dim = e->cfg.dim, rank = pooling == SLM_POOLING_RANK;
    if (a->sum)
        for (int j = 0; j < dim; j++) out[j] = (float)(a->sum[j] / a->n);
    if (rank) classify(e, a->out, out);
    for (int r = 0; e->d2 && !rank && r < (pooling == SLM_POOLING_NONE ? a->n : 1); r++)
        if (apply_dense(e, out + (size_t)r * (size_t)dim)) return SLM_ERR_NOMEM;
    return SLM_OK;
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
    if (!slm_largest(&e->comp, SLM_PROG_EMBED))
        return slm_errf(err, SLM_ERR_ARG, "embeddings are off: load the model with embeddings (--embeddings)");
    if (pooling == SLM_POOLING_DEFAULT) pooling = e->pooling;
    if (pooling < SLM_POOLING_NONE || pooling > SLM_POOLING_RANK)
        return slm_errf(err, SLM_ERR_ARG, "pooling %d: none, mean, cls, last or rank", pooling);
    if (pooling == SLM_POOLING_RANK && !e->n_cls)
        return slm_errf(err, SLM_ERR_ARG, "pooling rank needs a reranker's classifier head (cls.output.weight), "
                        "which this model has not");
    if (k < 0 || (k && (!ids || !n || !out || !cap))) return slm_errf(err, SLM_ERR_ARG, "batch embeddings: %d texts", k);
    const int dim = e->cfg.dim, rank = pooling == SLM_POOLING_RANK;
    for (int t = 0; t < k; t++) {
        if (!ids[t] || n[t] < 1) return slm_errf(err, SLM_ERR_ARG, "text %d: an embedding needs at least one token", t);
        for (int i = 0; i < n[t]; i++)
            if (ids[t][i] < 0 || ids[t][i] >= e->cfg.vocab_size)
                return slm_errf(err, SLM_ERR_ARG, "text %d: token id %d at %d is outside the vocabulary (%d)", t,
                                ids[t][i], i, e->cfg.vocab_size);
        const size_t need = rank ? (size_t)e->n_cls : (size_t)dim * (pooling == SLM_POOLING_NONE ? (size_t)n[t] : 1);
        if (!out[t] || cap[t] < need)
            return slm_errf(err, SLM_ERR_ARG, "text %d: embedding output of %zu floats, need %zu", t, out[t] ? cap[t] : 0,
                            need);
    }
    /* the texts a region holds, longest first (the calls waste the fewest rows); the others alone */
    const int most = slm_rt_embed_region_max(slm_session_rt(s));
    int *order = slm_malloc((size_t)(k ? k : 1) * 2 * sizeof *order), *sn = order + k, m = 0;
    const int32_t **sids = slm_malloc((size_t)(k ? k : 1) * sizeof *sids);
    pool_acc *acc = slm_calloc((size_t)(k ? k : 1), sizeof *acc);
    double *sums = pooling == SLM_POOLING_MEAN ? slm_calloc((size_t)(k ? k : 1) * (size_t)dim, sizeof *sums) : NULL;
    float *rows = rank ? slm_malloc((size_t)(k ? k : 1) * (size_t)dim * sizeof *rows) : NULL;
    slm_status st = SLM_OK;
    if (!order || !sids || !acc || (pooling == SLM_POOLING_MEAN && !sums) || (rank && !rows)) {
        st = slm_errf(err, SLM_ERR_NOMEM, "out of memory");
        goto done;
    }
    const int rank_last = rank && !strcmp(e->cfg.arch, "qwen3");
    for (int t = 0; t < k; t++) {
        acc[t] = (pool_acc){rank ? (rank_last ? SLM_POOLING_LAST : SLM_POOLING_CLS) : pooling, n[t],
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
        } else if (finish_text(e, &acc[t], pooling, out[t])) {
            st = slm_errf(err, SLM_ERR_NOMEM, "out of memory");
        }
    }
done:
    slm_xfree(order);
    slm_xfree(sids);
    slm_xfree(acc);
    slm_xfree(sums);
    slm_xfree(rows);
    return st;
}
