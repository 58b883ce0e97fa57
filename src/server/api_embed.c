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
 * session (srv_embed_run), between the other slots' decode steps: all of
 * them in one slm_session_embed_batch (the batch programs hold several
 * texts a call). */
#include "server/api.h"
#include "server/embed.h"

#ifdef SLM_HAVE_SERVE

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/common.h"

/* ---- the request ------------------------------------------------------------------ */

static int bad(srv_req *r, int status, const char *param, const char *code, const char *msg) {
    return http_send_error(r, status, status >= 500 ? "server_error" : "invalid_request_error", param, code, "%s", msg);
}

/* The body as a new srv_embed; NULL after answering the error. */
static srv_embed *parse(srv_api *a, srv_req *r, int oai, int *ok) {
    *ok = 1;
    if (r->too_big) {
        *ok = http_send_error(r, 413, "invalid_request_error", NULL, "request_too_large",
                              "the request body exceeds %u bytes", HTTP_BODY_LIMIT);
        return NULL;
    }
    srv_error e;
    srv_embed *m = NULL;
    if (oai == 2 ? !srv_rerank_parse(r->body, r->len, &m, &e)
                 : !srv_embed_parse(r->body, r->len, oai, a->info.vocab_size, a->info.dim, a->pooling, &m, &e))
        *ok = http_send_error(r, e.status, e.type, e.param[0] ? e.param : NULL, e.code, "%s", e.msg);
    return m;
}

/* ---- the worker's part ---------------------------------------------------------------- */

/* A rerank's documents: each scored against the query by the model's
 * rerank template or a cross-encoder's pair and its classifier head, all
 * through one slm_session_rerank_batch (a cross-encoder packs them into its
 * batch programs); the first score is the relevance. */
static int rerank_run(srv_api *a, srv_embed *m, slm_session *s, int *status, char *msg, size_t cap) {
    const int n_out = slm_model_rank_outputs(a->e), cap_tok = slm_session_capacity(s), k = m->n_in;
    const char **q = slm_calloc((size_t)(k ? k : 1), sizeof *q);
    size_t *caps = slm_calloc((size_t)(k ? k : 1), sizeof *caps);
    int *got = slm_calloc((size_t)(k ? k : 1), sizeof *got), ok = 0;
    *status = 500;
    snprintf(msg, cap, "out of memory");
    if (!q || !caps || !got) goto out;
    for (int t = 0; t < k; t++) {
        if (strlen(m->text[t]) + strlen(m->query) > a->max_prompt_bytes) {
            *status = 400;
            snprintf(msg, cap, "document %d: the query and the document cannot fit a slot's %d tokens", t, cap_tok);
            goto out;
        }
        if (!(m->vec[t] = slm_malloc((size_t)n_out * sizeof(float)))) goto out;
        q[t] = m->query;
        caps[t] = (size_t)n_out;
    }
    const slm_status st = slm_session_rerank_batch(s, k, q, (const char *const *)m->text, m->vec, caps, got);
    if (st) {
        int t = k == 1 ? 0 : -1; /* the pair the error names ("text T: ..."), -1: none */
        const char *e = slm_session_error(s), *colon = strchr(e, ':');
        if (k > 1 && sscanf(e, "text %d:", &t) == 1 && colon && colon[1] == ' ') e = colon + 2;
        *status = st == SLM_ERR_CAPACITY || st == SLM_ERR_ARG ? 400 : st == SLM_ERR_UNSUPPORTED ? 501 : 500;
        if (t < 0 || t >= k) snprintf(msg, cap, "%s", e);
        else if (st == SLM_ERR_CAPACITY && got[t] > cap_tok)
            snprintf(msg, cap, "document %d: %d tokens with the query; a slot holds %d (serve's --max-prompt-len + "
                     "--min-response-len)", t, got[t], cap_tok);
        else snprintf(msg, cap, "document %d: %s", t, e);
        goto out;
    }
    for (int t = 0; t < k; t++) {
        m->n_vec[t] = 1;
        m->tokens += got[t];
    }
    ok = 1;
out:
    slm_xfree(q);
    slm_xfree(caps);
    slm_xfree(got);
    return ok;
}

/* A request's inputs made ready for slm_session_embed_batch: ids (its
 * token lists, or the texts tokenized as slm_session_embed_text does), n,
 * caps, and its vectors allocated. */
typedef struct embed_prep {
    int32_t **tok; /* the texts' ids (owned) */
    const int32_t **ids;
    int *n;
    size_t *caps;
} embed_prep;

static void prep_free(embed_prep *p, int n_in) {
    for (int k = 0; p->tok && k < n_in; k++) slm_xfree(p->tok[k]);
    slm_xfree(p->tok);
    slm_xfree(p->ids);
    slm_xfree(p->n);
    slm_xfree(p->caps);
    memset(p, 0, sizeof *p);
}

/* m's vectors dropped (a failed call: nothing answered yet). */
static void drop_vecs(srv_embed *m) {
    for (int k = 0; k < m->n_in; k++) {
        slm_xfree(m->vec[k]);
        m->vec[k] = NULL;
    }
}

/* m's inputs checked against a slot and tokenized into p; 0 with *status
 * and msg when one is refused (p freed). */
static int prep(srv_api *a, srv_embed *m, int cap_tok, embed_prep *p, int *status, char *msg, size_t cap) {
    const int dim = a->info.dim;
    memset(p, 0, sizeof *p);
    p->tok = slm_calloc((size_t)m->n_in, sizeof *p->tok);
    p->ids = slm_calloc((size_t)m->n_in, sizeof *p->ids);
    p->n = slm_calloc((size_t)m->n_in, sizeof *p->n);
    p->caps = slm_calloc((size_t)m->n_in, sizeof *p->caps);
    *status = 500;
    snprintf(msg, cap, "out of memory");
    if (!p->tok || !p->ids || !p->n || !p->caps) goto fail;
    for (int k = 0; k < m->n_in; k++) {
        *status = 400;
        if (m->text[k] && strlen(m->text[k]) > a->max_prompt_bytes) { /* cannot fit: refused untokenized */
            snprintf(msg, cap, "input %d: %zu bytes cannot fit a slot's %d tokens", k, strlen(m->text[k]), cap_tok);
            goto fail;
        }
        p->n[k] = m->n_ids[k];
        p->ids[k] = m->ids[k];
        if (m->text[k]) { /* BOS, and EOS where the vocabulary asks, as llama-server */
            const int want = slm_embed_tokenize(a->e, m->text[k], NULL, 0);
            if (want < 1) {
                snprintf(msg, cap, "input %d: could not be tokenized", k);
                goto fail;
            }
            if (want <= cap_tok && !(p->ids[k] = p->tok[k] = slm_malloc((size_t)want * sizeof **p->tok))) {
                *status = 500;
                snprintf(msg, cap, "out of memory");
                goto fail;
            }
            p->n[k] = want;
            if (want <= cap_tok) slm_embed_tokenize(a->e, m->text[k], p->tok[k], want);
        }
        if (p->n[k] > cap_tok) {
            snprintf(msg, cap, "input %d has %d tokens; a slot holds %d (serve's --max-prompt-len + "
                     "--min-response-len)", k, p->n[k], cap_tok);
            goto fail;
        }
        p->caps[k] = (size_t)dim * (m->pooling == SLM_POOLING_NONE ? (size_t)p->n[k] : 1);
        if (!(m->vec[k] = slm_malloc(p->caps[k] * sizeof(float)))) {
            *status = 500;
            snprintf(msg, cap, "out of memory");
            goto fail;
        }
    }
    return 1;
fail:
    drop_vecs(m);
    prep_free(p, m->n_in);
    return 0;
}

/* m answered from its vectors: counts, normalization, tokens. */
static void finish(srv_api *a, srv_embed *m, const embed_prep *p) {
    for (int k = 0; k < m->n_in; k++) {
        m->n_vec[k] = m->pooling == SLM_POOLING_NONE ? p->n[k] : 1;
        if (m->pooling != SLM_POOLING_NONE) slm_embed_normalize(m->vec[k], a->info.dim, m->normalize);
        m->tokens += p->n[k];
    }
}

/* The inputs' ids (texts tokenized as slm_session_embed_text does), each
 * checked against a slot, then all of them through one
 * slm_session_embed_batch: packed into the batch programs. */
int srv_embed_run(srv_api *a, srv_embed *m, slm_session *s, int *status, char *msg, size_t cap) {
    if (m->rerank) return rerank_run(a, m, s, status, msg, cap);
    embed_prep p;
    if (!prep(a, m, slm_session_capacity(s), &p, status, msg, cap)) return 0;
    const slm_status st = slm_session_embed_batch(s, m->n_in, p.ids, p.n, m->pooling, m->vec, p.caps);
    if (st) {
        *status = st == SLM_ERR_CAPACITY || st == SLM_ERR_ARG ? 400 : 500;
        snprintf(msg, cap, "%s", slm_session_error(s));
        drop_vecs(m);
    } else {
        finish(a, m, &p);
    }
    prep_free(&p, m->n_in);
    return st == SLM_OK;
}

int srv_embed_joinable(const srv_embed *m, const srv_embed *first) {
    return m && !m->rerank && (!first || m->pooling == first->pooling);
}

int srv_embed_run_many(srv_api *a, srv_embed *const *m, int k, slm_session *s) {
    const int cap_tok = slm_session_capacity(s);
    embed_prep *p = slm_calloc((size_t)k, sizeof *p);
    int total = 0, ready = 0, ok = 0, status;
    char msg[256];
    if (!p) return 0;
    for (; ready < k; ready++) {
        if (!srv_embed_joinable(m[ready], m[0]) ||
            !prep(a, m[ready], cap_tok, &p[ready], &status, msg, sizeof msg))
            goto out;
        total += m[ready]->n_in;
    }
    const int32_t **ids = slm_malloc((size_t)total * sizeof *ids);
    int *n = slm_malloc((size_t)total * sizeof *n);
    float **out = slm_malloc((size_t)total * sizeof *out);
    size_t *caps = slm_malloc((size_t)total * sizeof *caps);
    if (ids && n && out && caps) {
        for (int r = 0, t = 0; r < k; r++)
            for (int i = 0; i < m[r]->n_in; i++, t++) {
                ids[t] = p[r].ids[i];
                n[t] = p[r].n[i];
                out[t] = m[r]->vec[i];
                caps[t] = p[r].caps[i];
            }
        ok = slm_session_embed_batch(s, total, ids, n, m[0]->pooling, out, caps) == SLM_OK;
    }
    slm_xfree(ids);
    slm_xfree(n);
    slm_xfree(out);
    slm_xfree(caps);
out:
    for (int r = 0; r < ready; r++) {
        if (ok) finish(a, m[r], &p[r]);
        else drop_vecs(m[r]);
        prep_free(&p[r], m[r]->n_in);
    }
    slm_xfree(p);
    return ok;
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

/* llama-server's rerank answer: the results by relevance (the first
 * score), best first, the top_n of them; TEI's form an array of
 * {index, score, text?}. */

static int answer_rerank(srv_api *a, srv_req *r, const srv_embed *m) {
    int *order = slm_malloc((size_t)m->n_in * sizeof *order);
    if (!order) return http_send_error(r, 500, "server_error", NULL, NULL, "out of memory");
    for (int k = 0; k < m->n_in; k++) order[k] = k;
    for (int i = 1; i < m->n_in; i++) /* insertion sort: stable, at most 2048 */
        for (int j = i; j > 0 && m->vec[order[j - 1]][0] < m->vec[order[j]][0]; j--) { /* ties keep their order */
            const int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    cJSON *res = cJSON_CreateArray();
    for (int i = 0; i < m->top_n && i < m->n_in; i++) {
        const int k = order[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "index", k);
        cJSON_AddNumberToObject(o, m->tei ? "score" : "relevance_score", (double)m->vec[k][0]);
        if (m->return_text) cJSON_AddStringToObject(o, "text", m->text[k]);
        cJSON_AddItemToArray(res, o);
    }
    slm_xfree(order);
    if (m->tei) return http_send_json(r, 200, res);
    cJSON *top = cJSON_CreateObject();
    cJSON_AddStringToObject(top, "model", a->model_name);
    cJSON_AddStringToObject(top, "object", "list");
    cJSON *u = cJSON_AddObjectToObject(top, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", m->tokens);
    cJSON_AddNumberToObject(u, "total_tokens", m->tokens);
    cJSON_AddItemToObject(top, "results", res);
    return http_send_json(r, 200, top);
}

static int answer(srv_api *a, srv_req *r, const srv_embed *m) {
    if (m->rerank) return answer_rerank(a, r, m);
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
    if (!a->embeddings || (oai == 2 && a->pooling != SLM_POOLING_RANK)) /* as llama-server answers it */
        return http_send_error(r, 501, "not_supported_error", NULL, "not_supported",
                               oai == 2 ? "this server does not rerank: start it with --reranking (a reranker model)"
                                        : "this server does not do embeddings: start it with --embeddings")
                   ? HTTP_DONE
                   : HTTP_DROP;
    if (oai != 2 && a->pooling == SLM_POOLING_RANK)
        return http_send_error(r, 400, "invalid_request_error", NULL, "not_supported",
                               "this server reranks (--reranking): ask POST /v1/rerank") ? HTTP_DONE : HTTP_DROP;
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
