/* server/embed_parse.c — the body of an embedding request (embed.h): one
 * JSON object whose input is a text, a list of texts, a list of token ids
 * or a list of such lists (every id within the vocabulary, at most
 * SRV_EMBED_MAX_INPUTS inputs); encoding_format float | base64;
 * dimensions only the model's width; embd_normalize -1..64. Any bytes are
 * refused cleanly (tests/fuzz/fuzz_http.c). */
#include "server/embed.h"

#ifdef SLM_HAVE_CJSON

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/common.h"

void srv_embed_free(srv_embed *m) {
    if (!m) return;
    for (int i = 0; i < m->n_in; i++) {
        if (m->text) slm_xfree(m->text[i]);
        if (m->ids) slm_xfree(m->ids[i]);
        if (m->vec) slm_xfree(m->vec[i]);
    }
    slm_xfree(m->text);
    slm_xfree(m->ids);
    slm_xfree(m->n_ids);
    slm_xfree(m->vec);
    slm_xfree(m->n_vec);
    slm_xfree(m->query);
    slm_xfree(m);
}


static int is_id_array(const cJSON *v) {
    if (!cJSON_IsArray(v) || !cJSON_GetArraySize(v)) return 0;
    for (const cJSON *x = v->child; x; x = x->next)
        if (!cJSON_IsNumber(x)) return 0;
    return 1;
}

/* Input k of m from v (a string or an array of ids); NULL or a message. */
static const char *take_input(srv_embed *m, int k, const cJSON *v, int vocab) {
    if (cJSON_IsString(v)) {
        m->text[k] = slm_strdup(v->valuestring);
        return m->text[k] ? NULL : "out of memory";
    }
    if (!is_id_array(v)) return "each input must be a string or a non-empty array of token ids";
    const int n = cJSON_GetArraySize(v);
    if (!(m->ids[k] = slm_malloc((size_t)n * sizeof(int32_t)))) return "out of memory";
    int i = 0;
    for (const cJSON *x = v->child; x; x = x->next, i++) {
        const double d = x->valuedouble;
        if (d != floor(d) || d < 0 || d >= vocab) return "a token id is not an integer within the vocabulary";
        m->ids[k][i] = (int32_t)d;
    }
    m->n_ids[k] = n;
    return NULL;
}

/* The inputs: one string, one array of ids, or an array of those. */
static const char *take_inputs(srv_embed *m, const cJSON *in, int vocab) {
    int n = 1;
    const cJSON *one = in;
    if (cJSON_IsArray(in) && !is_id_array(in)) { /* a list of inputs */
        n = cJSON_GetArraySize(in);
        one = NULL;
    }
    if (n < 1) return "the input is empty";
    if (n > SRV_EMBED_MAX_INPUTS) return "too many inputs (at most 2048 a request)";
    m->text = slm_calloc((size_t)n, sizeof *m->text);
    m->ids = slm_calloc((size_t)n, sizeof *m->ids);
    m->n_ids = slm_calloc((size_t)n, sizeof *m->n_ids);
    m->vec = slm_calloc((size_t)n, sizeof *m->vec);
    m->n_vec = slm_calloc((size_t)n, sizeof *m->n_vec);
    if (!m->text || !m->ids || !m->n_ids || !m->vec || !m->n_vec) return "out of memory";
    m->n_in = n;
    if (one) return take_input(m, 0, one, vocab);
    int k = 0;
    for (const cJSON *x = in->child; x; x = x->next, k++) {
        const char *why = take_input(m, k, x, vocab);
        if (why) return why;
    }
    return NULL;
}

/* A refusal: 400 naming param (500 when out of memory); m freed. */
static int fail(srv_error *e, srv_embed *m, const char *param, const char *why) {
    const int oom = !strcmp(why, "out of memory");
    e->status = oom ? 500 : 400;
    e->type = oom ? "server_error" : "invalid_request_error";
    e->code = oom ? NULL : "invalid_value";
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    snprintf(e->msg, sizeof e->msg, "%s", why);
    srv_embed_free(m);
    return 0;
}

int srv_embed_parse(const char *body, size_t len, int oai, int vocab, int dim, int pooling, srv_embed **out,
                    srv_error *e) {
    *out = NULL;
    memset(e, 0, sizeof *e);
    cJSON *o = srv_body_object(body, len, e);
    if (!o) return 0;
    srv_embed *m = slm_calloc(1, sizeof *m);
    const char *why = NULL, *param = NULL;
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(o, "input");
    if (!oai && !in) in = cJSON_GetObjectItemCaseSensitive(o, "content");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(o, "encoding_format");
    const cJSON *dims = cJSON_GetObjectItemCaseSensitive(o, "dimensions");
    const cJSON *nrm = cJSON_GetObjectItemCaseSensitive(o, "embd_normalize");
    if (!m) why = "out of memory";
    else if (!in || cJSON_IsNull(in)) why = oai ? "'input' is required" : "'content' (or 'input') is required", param = oai ? "input" : "content";
    else if (fmt && !cJSON_IsNull(fmt) && !(cJSON_IsString(fmt) && (!strcmp(fmt->valuestring, "float") || !strcmp(fmt->valuestring, "base64"))))
        why = "'encoding_format' must be \"float\" or \"base64\"", param = "encoding_format";
    else if (dims && !cJSON_IsNull(dims) && !(cJSON_IsNumber(dims) && dims->valuedouble == dim))
        why = "'dimensions': this model's embeddings have exactly its width; leave it out", param = "dimensions";
    else if (nrm && !cJSON_IsNull(nrm) && !(cJSON_IsNumber(nrm) && nrm->valuedouble == floor(nrm->valuedouble) &&
                                              nrm->valuedouble >= -1 && nrm->valuedouble <= 64))
        why = "'embd_normalize' must be an integer from -1 to 64", param = "embd_normalize";
    else if ((why = take_inputs(m, in, vocab))) param = oai ? "input" : "content";
    if (!why) {
        m->oai = oai;
        m->base64 = fmt && cJSON_IsString(fmt) && !strcmp(fmt->valuestring, "base64");
        m->normalize = nrm && cJSON_IsNumber(nrm) ? (int)nrm->valuedouble : 2;
        m->pooling = pooling;
        if (oai && pooling == 0)
            why = "pooling none gives a vector per token, which /v1/embeddings cannot answer; start serve with "
                  "--pooling mean|cls|last, or ask POST /embedding";
    }
    cJSON_Delete(o);
    if (why) return fail(e, m, param, why);
    *out = m;
    return 1;
}

int srv_rerank_parse(const char *body, size_t len, srv_embed **out, srv_error *e) {
    *out = NULL;
    memset(e, 0, sizeof *e);
    cJSON *o = srv_body_object(body, len, e);
    if (!o) return 0;
    srv_embed *m = slm_calloc(1, sizeof *m);
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(o, "query"), *texts = cJSON_GetObjectItemCaseSensitive(o, "texts");
    const cJSON *docs = texts ? texts : cJSON_GetObjectItemCaseSensitive(o, "documents");
    const cJSON *top = cJSON_GetObjectItemCaseSensitive(o, "top_n"), *rt = cJSON_GetObjectItemCaseSensitive(o, "return_text");
    const char *why = NULL, *param = NULL;
    int n = cJSON_IsArray(docs) ? cJSON_GetArraySize(docs) : 0;
    if (!m) why = "out of memory";
    else if (!cJSON_IsString(q)) why = "'query' must be a string", param = "query";
    else if (n < 1 || n > SRV_EMBED_MAX_INPUTS)
        why = "'documents' must be an array of 1 to 2048 strings", param = texts ? "texts" : "documents";
    else if (top && !cJSON_IsNull(top) && !(cJSON_IsNumber(top) && top->valuedouble == floor(top->valuedouble) &&
                                            top->valuedouble >= 1))
        why = "'top_n' must be a positive integer", param = "top_n";
    else if (rt && !cJSON_IsNull(rt) && !cJSON_IsBool(rt)) why = "'return_text' must be true or false", param = "return_text";
    if (!why) {
        m->rerank = 1;
        m->tei = texts != NULL;
        m->return_text = m->tei && cJSON_IsTrue(rt);
        m->top_n = top && cJSON_IsNumber(top) && top->valuedouble < n ? (int)top->valuedouble : n;
        m->pooling = SLM_POOLING_RANK;
        m->text = slm_calloc((size_t)n, sizeof *m->text);
        m->ids = slm_calloc((size_t)n, sizeof *m->ids);
        m->n_ids = slm_calloc((size_t)n, sizeof *m->n_ids);
        m->vec = slm_calloc((size_t)n, sizeof *m->vec);
        m->n_vec = slm_calloc((size_t)n, sizeof *m->n_vec);
        if (!m->text || !m->ids || !m->n_ids || !m->vec || !m->n_vec || !(m->query = slm_strdup(q->valuestring)))
            why = "out of memory";
        else m->n_in = n;
        int k = 0;
        for (const cJSON *d = docs->child; !why && d; d = d->next, k++) {
            if (!cJSON_IsString(d)) why = "each document must be a string", param = texts ? "texts" : "documents";
            else if (!(m->text[k] = slm_strdup(d->valuestring))) why = "out of memory";
        }
    }
    cJSON_Delete(o);
    if (why) return fail(e, m, param, why);
    *out = m;
    return 1;
}

#endif /* SLM_HAVE_CJSON */
