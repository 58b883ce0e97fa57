/* Embeddings: a text's final-norm hidden states, pooled (slm_session_embed).
 * The embedding programs (compiler: slm_compile_embed) are prefills that
 * keep every row and stop before the LM head; the runtime hands their rows
 * over chunk by chunk (slm_rt_embed), and this file pools them on the host,
 * as the sampler turns logits into a token. */
#include <math.h>
#include <string.h>

#include "engine/engine_internal.h"

int slm_model_pooling(const slm_engine *e) { return e && e->loaded ? e->pooling : SLM_POOLING_NONE; }

static const char *const pool_names[] = {"none", "mean", "cls", "last"};

int slm_pooling_parse(const char *name) {
    if (!name) return -2;
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, pool_names[i])) return i;
    return -2;
}

const char *slm_pooling_name(int pooling) { return pooling >= 0 && pooling < 4 ? pool_names[pooling] : "?"; }

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

slm_status slm_session_embed(slm_session *s, const int32_t *ids, int n, int pooling, float *out, size_t cap) {
    if (!s) return SLM_ERR_ARG;
    slm_engine *e = slm_session_engine(s);
    slm_err *err = slm_session_err(s);
    memset(err, 0, sizeof *err);
    if (!slm_largest(&e->comp, SLM_PROG_EMBED))
        return slm_errf(err, SLM_ERR_ARG, "embeddings are off: load the model with embeddings (--embeddings)");
    if (pooling == SLM_POOLING_DEFAULT) pooling = e->pooling;
    if (pooling < SLM_POOLING_NONE || pooling > SLM_POOLING_LAST)
        return slm_errf(err, SLM_ERR_ARG, "pooling %d: none, mean, cls or last", pooling);
    if (!ids || n < 1) return slm_errf(err, SLM_ERR_ARG, "an embedding needs at least one token");
    const int dim = e->cfg.dim;
    const size_t need = (size_t)dim * (pooling == SLM_POOLING_NONE ? (size_t)n : 1);
    if (!out || cap < need)
        return slm_errf(err, SLM_ERR_ARG, "embedding output of %zu floats, need %zu", out ? cap : 0, need);
    pool_acc a = {pooling, n, out, NULL};
    if (pooling == SLM_POOLING_MEAN && !(a.sum = slm_calloc((size_t)dim, sizeof *a.sum)))
        return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    slm_session_reset(s); /* the rows it held, and a prompt in steps, are dropped */
    slm_status st = slm_rt_embed(slm_session_rt(s), ids, n, take_rows, &a, err);
    slm_session_reset(s);
    if (!st && a.sum)
        for (int j = 0; j < dim; j++) out[j] = (float)(a.sum[j] / n);
    slm_xfree(a.sum);
    return st;
}

slm_status slm_session_embed_text(slm_session *s, const char *text, int pooling, float *out, size_t cap,
                                  int *n_tokens) {
    if (n_tokens) *n_tokens = 0;
    if (!s) return SLM_ERR_ARG;
    slm_engine *e = slm_session_engine(s);
    slm_err *err = slm_session_err(s);
    memset(err, 0, sizeof *err);
    if (!text) return slm_errf(err, SLM_ERR_ARG, "no text");
    /* BOS as the vocabulary adds it; EOS where it asks (a BPE vocabulary
     * applies its own add_eos flag, the others the engine's reading of it) */
    const int add_eos = slm_tok_is_bpe(e->tok) ? 1 : e->add_eos;
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
