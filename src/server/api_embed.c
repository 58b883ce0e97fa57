/* server/api_embed.c — embeddings (serve --embeddings):
 *   POST /v1/embeddings  OpenAI's: {"input": text | [text, ...] | [id, ...] |
 *                        [[id, ...], ...], "encoding_format": "float" |
 *                        "base64", "dimensions" (the model's only)} ->
 *                        {"object": "list", "data": [{"object": "embedding",
 *                        "index", "embedding"}], "model", "usage"}; each
 *                        vector pooled (serve's --pooling, else the model
 *                        file's; none is refused here as llama-server does)
 *                        and normalized (embd_normalize, default 2: unit length)
 *   POST /embedding, /embeddings  llama-server's: {"content" (or "input"),
 *                        "embd_normalize"} -> [{"index", "embedding":
 *                        [vector, ...]}]: one pooled vector, or every
 *                        token's (pooling none, not normalized)
 * A request is a job like a completion's: it waits for a slot, and the
 * worker runs its inputs through the embedding programs on that slot's
 * session (srv_embed_run), between the other slots' decode steps. */
#include "server/api.h"

#ifdef SLM_HAVE_SERVE

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/common.h"

#define MAX_INPUTS 2048

struct srv_embed {
    int oai;          /* /v1/embeddings (else llama-server's form) */
    int base64;       /* encoding_format base64 */
    int normalize;    /* embd_normalize */
    int pooling;      /* resolved: serve's --pooling or the model's */
    int n_in;
    char **text;      /* [n_in]: a text, or NULL where ids holds the input */
    int32_t **ids;    /* [n_in] */
    int *n_ids;       /* [n_in] */
    /* the worker's results */
    float **vec;      /* [n_in]: dim floats, or n_tok * dim (pooling none) */
    int *n_vec;       /* vectors per input */
    int tokens;       /* all inputs' tokens */
};

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
    slm_xfree(m);
}

/* ---- the request ------------------------------------------------------------------ */

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
    if (n > MAX_INPUTS) return "too many inputs (at most 2048 a request)";
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

static int bad(srv_req *r, int status, const char *param, const char *code, const char *msg) {
    return http_send_error(r, status, status >= 500 ? "server_error" : "invalid_request_error", param, code, "%s", msg);
}

/* Parse the body into a new srv_embed; NULL after answering the error. */
static srv_embed *parse(srv_api *a, srv_req *r, int oai, int *ok) {
    *ok = 1;
    if (r->too_big) {
        *ok = http_send_error(r, 413, "invalid_request_error", NULL, "request_too_large",
                              "the request body exceeds %u bytes", HTTP_BODY_LIMIT);
        return NULL;
    }
    srv_error e;
    memset(&e, 0, sizeof e);
    cJSON *o = srv_body_object(r->body, r->len, &e);
    if (!o) {
        *ok = http_send_error(r, e.status, e.type, NULL, e.code, "%s", e.msg);
        return NULL;
    }
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
    else if (dims && !cJSON_IsNull(dims) && !(cJSON_IsNumber(dims) && dims->valuedouble == a->info.dim))
        why = "'dimensions': this model's embeddings have exactly its width; leave it out", param = "dimensions";
    else if (nrm && !cJSON_IsNull(nrm) && !(cJSON_IsNumber(nrm) && nrm->valuedouble == floor(nrm->valuedouble) &&
                                              nrm->valuedouble >= -1 && nrm->valuedouble <= 64))
        why = "'embd_normalize' must be an integer from -1 to 64", param = "embd_normalize";
    else if ((why = take_inputs(m, in, a->info.vocab_size))) param = oai ? "input" : "content";
    if (!why) {
        m->oai = oai;
        m->base64 = fmt && cJSON_IsString(fmt) && !strcmp(fmt->valuestring, "base64");
        m->normalize = nrm && cJSON_IsNumber(nrm) ? (int)nrm->valuedouble : 2;
        m->pooling = a->pooling;
        if (oai && m->pooling == SLM_POOLING_NONE)
            why = "pooling none gives a vector per token, which /v1/embeddings cannot answer; start serve with "
                  "--pooling mean|cls|last, or ask POST /embedding";
    }
    cJSON_Delete(o);
    if (why) {
        *ok = bad(r, strcmp(why, "out of memory") ? 400 : 500, param, "invalid_value", why);
        srv_embed_free(m);
        return NULL;
    }
    return m;
}

/* ---- the worker's part ---------------------------------------------------------------- */

int srv_embed_run(srv_api *a, srv_embed *m, slm_session *s, int *status, char *msg, size_t cap) {
    const int dim = a->info.dim, cap_tok = slm_session_capacity(s);
    for (int k = 0; k < m->n_in; k++) {
        int n = m->n_ids[k];
        slm_status st;
        if (m->text[k]) { /* tokenized here, with BOS (and EOS where the vocabulary asks) */
            n = slm_tokenize(a->e, m->text[k], 1, NULL, 0);
            if (n < 1) {
                *status = 400;
                snprintf(msg, cap, "input %d: %s", k, n == 0 ? "encodes to no tokens" : "could not be tokenized");
                return 0;
            }
        }
        if (n > cap_tok) {
            *status = 400;
            snprintf(msg, cap, "input %d has %d tokens; a slot holds %d (serve's --max-prompt-len + "
                     "--min-response-len)", k, n, cap_tok);
            return 0;
        }
        const size_t floats = (size_t)dim * (m->pooling == SLM_POOLING_NONE ? (size_t)n + 2 : 1);
        if (!(m->vec[k] = slm_malloc(floats * sizeof(float)))) {
            *status = 500;
            snprintf(msg, cap, "out of memory");
            return 0;
        }
        int got = n;
        st = m->text[k] ? slm_session_embed_text(s, m->text[k], m->pooling, m->vec[k], floats, &got)
                        : slm_session_embed(s, m->ids[k], n, m->pooling, m->vec[k], floats);
        if (st) {
            *status = st == SLM_ERR_CAPACITY || st == SLM_ERR_ARG ? 400 : 500;
            snprintf(msg, cap, "input %d: %s", k, slm_session_error(s));
            return 0;
        }
        m->n_vec[k] = m->pooling == SLM_POOLING_NONE ? got : 1;
        if (m->pooling != SLM_POOLING_NONE) slm_embed_normalize(m->vec[k], dim, m->normalize);
        m->tokens += got;
    }
    return 1;
}

int srv_embed_tokens(const srv_embed *m) { return m ? m->tokens : 0; }

/* ---- the answer ------------------------------------------------------------------------ */

static cJSON *vec_json(const float *v, int n) {
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < n; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber((double)v[i]));
    return arr;
}

/* base64 of the vector's little-endian float32 bytes (OpenAI's form) */
static cJSON *vec_b64(const float *v, int n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const size_t nb = (size_t)n * 4;
    uint8_t *b = slm_malloc(nb);
    char *s = slm_malloc((nb + 2) / 3 * 4 + 1);
    cJSON *o = NULL;
    if (b && s) {
        for (int i = 0; i < n; i++) { /* little-endian whatever the host */
            uint32_t u;
            memcpy(&u, &v[i], 4);
            for (int k = 0; k < 4; k++) b[4 * i + k] = (uint8_t)(u >> (8 * k));
        }
        size_t o_ = 0;
        for (size_t i = 0; i < nb; i += 3) {
            const uint32_t w = (uint32_t)b[i] << 16 | (i + 1 < nb ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < nb ? b[i + 2] : 0);
            s[o_++] = tab[w >> 18 & 63];
            s[o_++] = tab[w >> 12 & 63];
            s[o_++] = i + 1 < nb ? tab[w >> 6 & 63] : '=';
            s[o_++] = i + 2 < nb ? tab[w & 63] : '=';
        }
        s[o_] = 0;
        o = cJSON_CreateString(s);
    }
    slm_xfree(b);
    slm_xfree(s);
    return o;
}

static int answer(srv_api *a, srv_req *r, const srv_embed *m) {
    const int dim = a->info.dim;
    cJSON *res = m->oai ? cJSON_CreateObject() : cJSON_CreateArray(), *data = res;
    if (m->oai) {
        cJSON_AddStringToObject(res, "object", "list");
        data = cJSON_AddArrayToObject(res, "data");
    }
    for (int k = 0; k < m->n_in; k++) {
        cJSON *d = cJSON_CreateObject();
        if (m->oai) cJSON_AddStringToObject(d, "object", "embedding");
        cJSON_AddNumberToObject(d, "index", k);
        if (m->oai) {
            cJSON_AddItemToObject(d, "embedding", m->base64 ? vec_b64(m->vec[k], dim) : vec_json(m->vec[k], dim));
        } else { /* llama-server's: a list of vectors */
            cJSON *vs = cJSON_AddArrayToObject(d, "embedding");
            for (int t = 0; t < m->n_vec[k]; t++) cJSON_AddItemToArray(vs, vec_json(m->vec[k] + (size_t)t * dim, dim));
        }
        cJSON_AddItemToArray(data, d);
    }
    if (m->oai) {
        cJSON_AddStringToObject(res, "model", a->model_name);
        cJSON *u = cJSON_AddObjectToObject(res, "usage");
        cJSON_AddNumberToObject(u, "prompt_tokens", m->tokens);
        cJSON_AddNumberToObject(u, "total_tokens", m->tokens);
    }
    return http_send_json(r, 200, res);
}

int api_embeddings(srv_api *a, srv_req *r, int oai) {
    job *j = r->job;
    if (j) { /* queued or running: answer when there is an answer */
        pthread_mutex_lock(&a->mu);
        const int state = j->state, cancelled = j->cancelled;
        pthread_mutex_unlock(&a->mu);
        if (state == J_FAILED)
            return http_send_error(r, j->status, j->status >= 500 ? "server_error" : "invalid_request_error",
                                   j->err_param, j->err_code, "%s", j->err) ? HTTP_DONE : HTTP_DROP;
        if (cancelled) return HTTP_DROP;
        if (state == J_DONE) return answer(a, r, j->emb) ? HTTP_DONE : HTTP_DROP;
        return HTTP_WAIT;
    }
    if (!a->embeddings) /* as llama-server answers it */
        return http_send_error(r, 501, "not_supported_error", NULL, "not_supported",
                               "this server does not do embeddings: start it with --embeddings") ? HTTP_DONE : HTTP_DROP;
    int ok;
    srv_embed *m = parse(a, r, oai, &ok);
    if (!m) return ok ? HTTP_DONE : HTTP_DROP;
    if (!(j = slm_calloc(1, sizeof *j))) {
        srv_embed_free(m);
        return bad(r, 500, NULL, NULL, "out of memory") ? HTTP_DONE : HTTP_DROP;
    }
    j->emb = m;
    j->created = (long)time(NULL);
    return srv_submit(a, r, j);
}

#endif /* SLM_HAVE_SERVE */
