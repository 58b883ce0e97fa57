/* server/api.c — the OpenAI endpoints: GET /health, GET /v1/models,
 * POST /v1/chat/completions and /v1/completions (and the routing of
 * llama-server's /tokenize and /detokenize: api_tokens.c; /infill: api_infill.c). A completion request is
 * parsed (request.c), admitted to the bounded queue (a full queue answers
 * 503 before any rendering or tokenizing), and answered from what the
 * worker (worker.c) publishes: one JSON object, or server-sent events.
 * The transport (http.c) reaches api_admit, api_handle, api_cancel,
 * api_done and api_stop only as the handlers server.c gives it. */
#include "server/api.h"

#ifdef SLM_HAVE_SERVE

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/common.h"
#include "common/json.h"
#include "engine/chat.h"
#include "engine/engine.h"

/* ---- response bodies ---------------------------------------------------------- */

static cJSON *base_obj(srv_api *a, job *j, const char *object) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)j->created);
    cJSON_AddStringToObject(o, "model", a->model_name);
    return o;
}

/* The request's usage (j: choice 0, all done): the prompt once (choice 0's:
 * every choice's is the same), the completion tokens of all its choices. */
static void add_usage(cJSON *o, const job *j) {
    int ct = 0;
    for (const job *c = j; c; c = c->sib) ct += c->completion_tokens;
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", j->prompt_tokens);
    cJSON_AddNumberToObject(u, "completion_tokens", ct);
    cJSON_AddNumberToObject(u, "total_tokens", j->prompt_tokens + ct);
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", j->cached_tokens);
}

/* ---- log-probabilities ---------------------------------------------------------- */

/* cJSON writes no infinities: -inf (a token the model rules out) as OpenAI's floor */
static double lp_num(float lp) { return lp > -9999.0f ? (double)lp : -9999.0; }

/* chat's {"token", "logprob", "bytes"} of t */
static cJSON *lp_entry(const job *j, const srv_lp_tok *t) {
    cJSON *o = cJSON_CreateObject(), *b;
    char *clean = srv_utf8_clean(j->lptext + t->off, t->len);
    cJSON_AddStringToObject(o, "token", clean ? clean : "");
    slm_xfree(clean);
    cJSON_AddNumberToObject(o, "logprob", lp_num(t->lp));
    b = cJSON_AddArrayToObject(o, "bytes");
    for (uint32_t i = 0; i < t->len; i++) cJSON_AddItemToArray(b, cJSON_CreateNumber((unsigned char)j->lptext[t->off + i]));
    return o;
}

/* The logprobs of the kept tokens [from, to) (under a->mu): chat {"content":
 * [{token, logprob, bytes, top_logprobs}]}, completions {"tokens",
 * "token_logprobs", "top_logprobs" ({text: logprob}), "text_offset"}. */
static cJSON *lp_json(const job *j, int from, int to) {
    cJSON *o = cJSON_CreateObject();
    if (j->q.chat) {
        cJSON *c = cJSON_AddArrayToObject(o, "content");
        for (int i = from; i < to; i++) {
            const srv_lp *l = &j->lps[i];
            cJSON *e = lp_entry(j, &l->tok), *top = cJSON_AddArrayToObject(e, "top_logprobs");
            for (int k = 0; k < l->n_top; k++) cJSON_AddItemToArray(top, lp_entry(j, &l->top[k]));
            cJSON_AddItemToArray(c, e);
        }
        cJSON_AddNullToObject(o, "refusal");
        return o;
    }
    cJSON *tk = cJSON_AddArrayToObject(o, "tokens"), *tl = cJSON_AddArrayToObject(o, "token_logprobs"),
          *tt = cJSON_AddArrayToObject(o, "top_logprobs"), *to_ = cJSON_AddArrayToObject(o, "text_offset");
    for (int i = from; i < to; i++) {
        const srv_lp *l = &j->lps[i];
        char *clean = srv_utf8_clean(j->lptext + l->tok.off, l->tok.len);
        cJSON_AddItemToArray(tk, cJSON_CreateString(clean ? clean : ""));
        slm_xfree(clean);
        cJSON_AddItemToArray(tl, cJSON_CreateNumber(lp_num(l->tok.lp)));
        cJSON *m = cJSON_CreateObject();
        for (int k = 0; k < l->n_top; k++) { /* two ids of one text: the likelier (first) stays */
            char *t = srv_utf8_clean(j->lptext + l->top[k].off, l->top[k].len);
            if (t && !cJSON_GetObjectItemCaseSensitive(m, t)) cJSON_AddNumberToObject(m, t, lp_num(l->top[k].lp));
            slm_xfree(t);
        }
        cJSON_AddItemToArray(tt, m);
        cJSON_AddItemToArray(to_, cJSON_CreateNumber((double)l->text_offset));
    }
    return o;
}

/* The stream's next logprobs: the published tokens not sent yet (under
 * a->mu); NULL when logprobs were not asked. */
static cJSON *lp_next(job *j) {
    if (!j->q.logprobs) return NULL;
    cJSON *o = lp_json(j, j->lp_sent, j->lp_pub);
    j->lp_sent = j->lp_pub;
    return o;
}

/* "data: " + o (consumed) + "\n\n" (slm_xfree); NULL when out of memory. */
static char *sse_event(cJSON *o) {
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!s) return NULL;
    size_t sl = strlen(s);
    char *ev = slm_malloc(sl + 9);
    if (ev) {
        memcpy(ev, "data: ", 6);
        memcpy(ev + 6, s, sl);
        memcpy(ev + 6 + sl, "\n\n", 3);
    }
    cJSON_free(s);
    return ev;
}

/* One chunk of choice j with text t[0..n) (role: the chat's first; fin: the
 * last; think: t is reasoning, delta.reasoning_content), or the usage chunk
 * (j: choice 0). */
static char *sse_chunk(srv_api *a, job *j, const char *t, size_t n, int role, const char *fin, int usage_only,
                       int think, cJSON *lp) {
    if (j->native) { /* llama-server's /completion: its own events, the last with the statistics */
        cJSON_Delete(lp);
        return sse_event(fin ? srv_native_result(a, j) : srv_native_chunk(j, t, n));
    }
    cJSON *o = base_obj(a, j, j->q.chat ? "chat.completion.chunk" : "text_completion");
    cJSON *ch = cJSON_AddArrayToObject(o, "choices");
    if (!usage_only) {
        cJSON *c0 = cJSON_CreateObject();
        cJSON_AddNumberToObject(c0, "index", j->choice);
        char *clean = t ? srv_utf8_clean(t, n) : NULL;
        if (j->q.chat) {
            cJSON *d = cJSON_AddObjectToObject(c0, "delta");
            if (role) cJSON_AddStringToObject(d, "role", "assistant");
            if (t) cJSON_AddStringToObject(d, think ? "reasoning_content" : "content", clean ? clean : "");
        } else {
            cJSON_AddStringToObject(c0, "text", clean ? clean : "");
        }
        slm_xfree(clean);
        if (lp) cJSON_AddItemToObject(c0, "logprobs", lp);
        else if (!j->q.chat || j->q.logprobs) cJSON_AddNullToObject(c0, "logprobs");
        lp = NULL;
        if (fin) cJSON_AddStringToObject(c0, "finish_reason", fin);
        else cJSON_AddNullToObject(c0, "finish_reason");
        cJSON_AddItemToArray(ch, c0);
    } else {
        add_usage(o, j);
    }
    cJSON_Delete(lp);
    return sse_event(o);
}

/* One chunk of choice j's tool call idx: its head (id, type, name; args "")
 * or a piece of its arguments, args[0..n). */
static char *sse_call_chunk(srv_api *a, job *j, int idx, const char *id, const char *name, const char *args, size_t n) {
    cJSON *o = base_obj(a, j, "chat.completion.chunk");
    cJSON *ch = cJSON_AddArrayToObject(o, "choices"), *c0 = cJSON_CreateObject();
    cJSON_AddNumberToObject(c0, "index", j->choice);
    cJSON *tc = cJSON_AddArrayToObject(cJSON_AddObjectToObject(c0, "delta"), "tool_calls"), *t = cJSON_CreateObject();
    cJSON_AddNumberToObject(t, "index", idx);
    if (id) {
        cJSON_AddStringToObject(t, "id", id);
        cJSON_AddStringToObject(t, "type", "function");
    }
    cJSON *fn = cJSON_AddObjectToObject(t, "function");
    char *clean = srv_utf8_clean(name ? name : args, name ? strlen(name) : n);
    if (name) cJSON_AddStringToObject(fn, "name", clean ? clean : "");
    cJSON_AddStringToObject(fn, "arguments", name ? "" : clean ? clean : "");
    slm_xfree(clean);
    cJSON_AddItemToArray(tc, t);
    cJSON_AddNullToObject(c0, "finish_reason");
    cJSON_AddItemToArray(ch, c0);
    return sse_event(o);
}

/* The first tool call with something unsent (under a->mu), or -1; *upto:
 * how far its arguments may go (whole UTF-8 until the call is done). */
static int call_pending(const job *j, size_t *upto) {
    for (int i = 0; i < j->ncalls; i++) {
        const srv_call *c = &j->calls[i];
        *upto = c->done || j->state >= J_DONE ? c->alen : srv_utf8_complete(c->args ? c->args : "", c->alen);
        if (!c->head_sent || c->asent < *upto) return i;
    }
    return -1;
}

/* Stream choice j's call idx's next chunk into *pend (called under a->mu,
 * which it releases). */
static int stream_call(srv_api *a, job *j, int idx, size_t upto, char **pend) {
    srv_call *c = &j->calls[idx];
    char id[sizeof c->id], *name = NULL, *args = NULL;
    size_t n = 0;
    int head = !c->head_sent;
    if (head) {
        memcpy(id, c->id, sizeof id);
        name = slm_strdup(c->name);
        c->head_sent = 1;
    } else {
        n = upto - c->asent;
        if ((args = slm_malloc(n + 1))) memcpy(args, c->args + c->asent, n);
        c->asent = upto;
    }
    pthread_mutex_unlock(&a->mu);
    if (head ? !name : !args) return -1;
    *pend = sse_call_chunk(a, j, idx, head ? id : NULL, name, args, n);
    slm_xfree(name);
    slm_xfree(args);
    return *pend ? 1 : -1;
}

static char *sse_error(const char *err) {
    char *msg = srv_utf8_clean(err, strlen(err));
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "message", msg ? msg : "error");
    cJSON_AddStringToObject(e, "type", "server_error");
    slm_xfree(msg);
    return sse_event(o);
}

/* ---- the event stream ---------------------------------------------------------- */

typedef struct stream_ctx {
    srv_api *a;
    job *j;
} stream_ctx;

/* Choice c's next event into j->pend (j: choice 0, whose stream it is;
 * called under a->mu): 0 = nothing from c now (still locked); else the lock
 * is released and 1 = an event, -1 = drop the connection. */
static int stream_choice(srv_api *a, job *j, job *c) {
    size_t upto = 0;
    const int call = call_pending(c, &upto);
    const int think = c->rlen > c->rsent; /* reasoning first: it came first */
    if (think || c->tlen > c->sent) {
        const char *src = think ? c->rtext : c->text;
        size_t *sent = think ? &c->rsent : &c->sent, len = think ? c->rlen : c->tlen;
        size_t from = *sent, cn = len - from;
        char *copy = slm_malloc(cn + 1);
        if (copy) memcpy(copy, src + from, cn);
        *sent = len;
        cJSON *lp = lp_next(c);
        pthread_mutex_unlock(&a->mu);
        if (!copy) {
            cJSON_Delete(lp);
            return -1;
        }
        j->pend = sse_chunk(a, c, copy, cn, 0, NULL, 0, think, lp);
        slm_xfree(copy);
        return j->pend ? 1 : -1;
    }
    if (call >= 0) return stream_call(a, c, call, upto, &j->pend); /* unlocks */
    if (c->state == J_FAILED) {
        char err[sizeof c->err];
        memcpy(err, c->err, sizeof err);
        pthread_mutex_unlock(&a->mu);
        j->pend = sse_error(err);
        j->phase = j->native ? 4 : 3;
        return j->pend ? 1 : -1;
    }
    if (c->state < J_DONE) return 0;
    cJSON *lp = lp_next(c);
    c->fin_sent = 1;
    pthread_mutex_unlock(&a->mu);
    j->pend = sse_chunk(a, c, c->q.chat ? NULL : "", 0, 0, c->finish ? c->finish : "stop", 0, 0, lp);
    return j->pend ? 1 : -1;
}

/* The next event of the stream of choice 0 j into j->pend (phase: 0 the
 * role chunks, 1 text, 2 usage, 3 [DONE], 4 end). The choices' events
 * interleave as their text comes, each naming its choice's index. 0 =
 * nothing yet, 1 = an event (or the end), -1 = drop the connection. Never
 * waits. */
static int stream_next(srv_api *a, job *j) {
    if (j->phase == 0) { /* the role chunks (chat) */
        for (job *c = j; c && j->q.chat; c = c->sib)
            if (!c->role_sent) {
                c->role_sent = 1;
                return (j->pend = sse_chunk(a, c, "", 0, 1, NULL, 0, 0, NULL)) ? 1 : -1;
            }
        j->phase = 1;
        return 1;
    }
    if (j->phase == 1) {
        pthread_mutex_lock(&a->mu);
        int open = 0;
        for (job *c = j; c; c = c->sib) {
            if (c->cancelled) {
                pthread_mutex_unlock(&a->mu);
                return -1;
            }
            if (c->fin_sent) continue;
            open = 1;
            const int r = stream_choice(a, j, c);
            if (r) return r; /* it unlocked */
        }
        pthread_mutex_unlock(&a->mu);
        if (open) return 0;
        j->phase = j->native ? 4 : j->q.include_usage ? 2 : 3; /* every choice ended */
        return 1;
    } else if (j->phase == 2) {
        j->pend = sse_chunk(a, j, NULL, 0, 0, NULL, 1, 0, NULL);
        j->phase = 3;
    } else if (j->phase == 3) {
        j->pend = slm_strdup("data: [DONE]\n\n");
        j->phase = 4;
    } else {
        return 1;
    }
    return j->pend ? 1 : -1;
}

static long stream_read(void *cls, char *buf, size_t max) {
    stream_ctx *sc = cls;
    job *j = sc->j;
    for (;;) {
        if (j->pend && j->poff < j->plen) {
            size_t k = j->plen - j->poff < max ? j->plen - j->poff : max;
            memcpy(buf, j->pend + j->poff, k);
            j->poff += k;
            return (long)k;
        }
        slm_xfree(j->pend);
        j->pend = NULL;
        j->plen = j->poff = 0;
        if (j->phase == 4) return HTTP_STREAM_END;
        int r = stream_next(sc->a, j);
        if (r < 0) return HTTP_STREAM_ERROR;
        if (r == 0) return 0; /* http_wake brings us back */
        if (j->pend) j->plen = strlen(j->pend);
    }
}

/* Let go of the request's choices (under a->mu): cancel those not done
 * (cancel: all of them), drop a reference to each. */
static void release_choices(job *j, int cancel) {
    for (job *c = j->sib, *next; c; c = next) {
        next = c->sib;
        if (c->state < J_DONE || cancel) c->cancelled = 1;
        srv_job_unref(c);
    }
    if (j->state < J_DONE || cancel) j->cancelled = 1;
    srv_job_unref(j); /* last: the later choices' references keep it until they go */
}

static void stream_free(void *cls) {
    stream_ctx *sc = cls;
    srv_api *a = sc->a;
    pthread_mutex_lock(&a->mu);
    release_choices(sc->j, 0);
    pthread_mutex_unlock(&a->mu);
    slm_xfree(sc);
}

/* ---- completions --------------------------------------------------------------- */

/* message.tool_calls: [{"id", "type": "function", "function": {"name", "arguments"}}] */
static void add_tool_calls(cJSON *msg, const job *j) {
    cJSON *tcs = cJSON_AddArrayToObject(msg, "tool_calls");
    for (int i = 0; i < j->ncalls; i++) {
        const srv_call *c = &j->calls[i];
        cJSON *t = cJSON_CreateObject(), *fn;
        cJSON_AddStringToObject(t, "id", c->id);
        cJSON_AddStringToObject(t, "type", "function");
        fn = cJSON_AddObjectToObject(t, "function");
        char *name = srv_utf8_clean(c->name, strlen(c->name)), *args = srv_utf8_clean(c->args ? c->args : "", c->alen);
        cJSON_AddStringToObject(fn, "name", name ? name : "");
        cJSON_AddStringToObject(fn, "arguments", args ? args : "");
        slm_xfree(name);
        slm_xfree(args);
        cJSON_AddItemToArray(tcs, t);
    }
}

/* Choice j of a whole answer: {"index", "message" | "text", "logprobs", "finish_reason"}. */
static cJSON *choice_json(const job *j) {
    const int chat = j->q.chat;
    cJSON *c0 = cJSON_CreateObject();
    cJSON_AddNumberToObject(c0, "index", j->choice);
    char *clean = srv_utf8_clean(j->text ? j->text : "", j->tlen);
    if (chat) {
        cJSON *msg = cJSON_AddObjectToObject(c0, "message");
        cJSON_AddStringToObject(msg, "role", "assistant");
        size_t ws = 0;
        while (ws < j->tlen && strchr(" \t\r\n", j->text[ws])) ws++;
        if (j->ncalls && ws == j->tlen) cJSON_AddNullToObject(msg, "content"); /* only calls: null, as OpenAI's */
        else cJSON_AddStringToObject(msg, "content", clean ? clean : "");
        if (j->ncalls) add_tool_calls(msg, j);
        char *rc = j->rlen ? srv_utf8_clean(j->rtext, j->rlen) : NULL;
        if (rc) cJSON_AddStringToObject(msg, "reasoning_content", rc);
        slm_xfree(rc);
    } else {
        cJSON_AddStringToObject(c0, "text", clean ? clean : "");
    }
    slm_xfree(clean);
    if (j->q.logprobs) cJSON_AddItemToObject(c0, "logprobs", lp_json(j, 0, j->lp_pub));
    else if (!chat) cJSON_AddNullToObject(c0, "logprobs");
    cJSON_AddStringToObject(c0, "finish_reason", j->finish ? j->finish : "stop");
    return c0;
}

/* The whole answer of a request whose choices are all done (j: choice 0). */
static int send_result(srv_api *a, srv_req *r, job *j) {
    if (j->native && !j->sib) return http_send_json(r, 200, srv_native_result(a, j));
    if (j->native) { /* n > 1: an array of its answers, as llama-server */
        cJSON *arr = cJSON_CreateArray();
        for (const job *c = j; c; c = c->sib) cJSON_AddItemToArray(arr, srv_native_result(a, c));
        return http_send_json(r, 200, arr);
    }
    cJSON *res = base_obj(a, j, j->q.chat ? "chat.completion" : "text_completion");
    cJSON *ch = cJSON_AddArrayToObject(res, "choices");
    for (const job *c = j; c; c = c->sib) cJSON_AddItemToArray(ch, choice_json(c));
    add_usage(res, j);
    return http_send_json(r, 200, res);
}

static int send_stream(srv_api *a, srv_req *r, job *j) {
    stream_ctx *sc = slm_malloc(sizeof *sc);
    if (!sc) return 0;
    pthread_mutex_lock(&a->mu);
    for (job *c = j; c; c = c->sib) c->refs++; /* the stream's */
    pthread_mutex_unlock(&a->mu);
    sc->a = a;
    sc->j = j;
    r->status = 200;
    return http_send_stream(r, stream_read, sc, stream_free);
}

/* Whether one more request must be turned away (under a->mu): the jobs
 * waiting beyond the free slots fill the queue. */
static int queue_full(const srv_api *a) {
    int free_slots = a->n_slots - a->running;
    if (free_slots < 0) free_slots = 0;
    return a->stop || a->queued >= a->queue_max + free_slots;
}

/* Queue the request's choices j, j->sib, ... (taking the request's
 * reference and the queue's on each; a later choice holds one on choice 0);
 * 0 when the queue is full or the server stops (j untouched). The request
 * is admitted as one: its n choices then wait as n jobs. Choice i samples
 * with seed + i (the request's, serve's --seed, or one drawn here). */
static int enqueue(srv_api *a, srv_req *r, job *j, int *queued) {
    pthread_mutex_lock(&a->mu);
    *queued = a->queued;
    if (queue_full(a)) {
        a->m.rejected++;
        pthread_mutex_unlock(&a->mu);
        return 0;
    }
    snprintf(j->id, sizeof j->id, "%s-%lu", j->emb ? "embd" : j->q.chat ? "chatcmpl" : "cmpl", ++a->next_id);
    if (!j->q.seed_set) j->q.samp.seed = (uint64_t)time(NULL) ^ ((uint64_t)a->next_id << 32);
    for (job *c = j; c; c = c->sib) {
        memcpy(c->id, j->id, sizeof c->id);
        c->q.samp.seed = j->q.samp.seed + (uint64_t)c->choice;
        c->refs += 2; /* the worker and this request */
        if (c != j) j->refs++; /* c borrows j's request */
        c->state = J_QUEUED;
        c->req = r;
        if (a->tail) a->tail->next = c;
        else a->head = c;
        a->tail = c;
        a->queued++;
    }
    r->job = j;
    pthread_cond_signal(&a->work);
    pthread_mutex_unlock(&a->mu);
    return 1;
}

/* A request whose jobs (its choices, j the first) are queued or running:
 * answer when there is an answer. A choice that failed fails the request;
 * a stream starts once the first choice's prompt is in. */
static int completion_progress(srv_api *a, srv_req *r, job *j) {
    pthread_mutex_lock(&a->mu);
    int cancelled = 0, done = 1, accepted = j->accepted, state = j->state;
    const job *failed = NULL;
    for (const job *c = j; c; c = c->sib) {
        cancelled |= c->cancelled;
        done &= c->state == J_DONE;
        if (c->state == J_FAILED && !failed) failed = c;
    }
    pthread_mutex_unlock(&a->mu);
    if (failed)
        return http_send_error(r, failed->status, failed->status >= 500 ? "server_error" : "invalid_request_error",
                               failed->err_param, failed->err_code, "%s", failed->err) ? HTTP_DONE : HTTP_DROP;
    if (cancelled) return HTTP_DROP; /* the client is gone */
    if (j->q.stream && (accepted || state == J_DONE)) return send_stream(a, r, j) ? HTTP_DONE : HTTP_DROP;
    if (done) return send_result(a, r, j) ? HTTP_DONE : HTTP_DROP;
    return HTTP_WAIT;
}

/* Free the request's choices j, j->sib, ... before they are queued (no one else holds them). */
static void drop_unqueued(job *j) {
    while (j) {
        job *next = j->sib;
        j->first = NULL;
        j->refs = 1;
        srv_job_unref(j);
        j = next;
    }
}

int srv_submit(srv_api *a, srv_req *r, job *j) {
    int q;
    if (enqueue(a, r, j, &q)) return HTTP_WAIT;
    drop_unqueued(j);
    const int ok = http_send_error(r, 503, "server_error", NULL, "queue_full",
                                   "the server is busy: %d requests are waiting (--queue %d); retry later", q,
                                   a->queue_max);
    return ok ? HTTP_DONE : HTTP_DROP;
}

/* The request's later choices (n > 1) after j: each a job of its own that
 * borrows j's request. 0 when out of memory (none made). */
static int make_choices(job *j) {
    job **tail = &j->sib;
    for (int i = 1; i < j->q.n; i++) {
        job *c = slm_calloc(1, sizeof *c);
        if (!c || !srv_request_share(&j->q, &c->q)) {
            slm_xfree(c);
            drop_unqueued(j->sib);
            j->sib = NULL;
            return 0;
        }
        c->choice = i;
        c->native = j->native;
        c->created = j->created;
        c->first = j;
        *tail = c;
        tail = &c->sib;
    }
    return 1;
}

/* chat: /v1/chat/completions; native: llama-server's /completion (else /v1/completions). */
static int handle_completion(srv_api *a, srv_req *r, int chat, int native) {
    if (r->job) return completion_progress(a, r, r->job);
    int ok;
    if (r->too_big) {
        ok = http_send_error(r, 413, "invalid_request_error", NULL, "request_too_large", "the request body exceeds %u bytes",
                             HTTP_BODY_LIMIT);
        return ok ? HTTP_DONE : HTTP_DROP;
    }
    job *j = slm_calloc(1, sizeof *j);
    if (!j) return http_send_error(r, 500, "server_error", NULL, NULL, "out of memory") ? HTTP_DONE : HTTP_DROP;
    srv_error e;
    if (!srv_request_parse(r->body, r->len, chat, &a->samp, &j->q, &e)) {
        slm_xfree(j);
        ok = http_send_error(r, e.status, e.type, e.param[0] ? e.param : NULL, e.code, "%s", e.msg);
        return ok ? HTTP_DONE : HTTP_DROP;
    }
    return srv_completion_submit(a, r, j, native);
}

int srv_completion_submit(srv_api *a, srv_req *r, job *j, int native) {
    int ok;
    for (int i = 0; i < j->q.n_prompt_ids; i++)
        if (j->q.prompt_ids[i] >= a->info.vocab_size) {
            const int id = j->q.prompt_ids[i];
            srv_request_free(&j->q);
            slm_xfree(j);
            ok = http_send_error(r, 400, "invalid_request_error", "prompt", "invalid_value",
                                 "the prompt holds token %d; the vocabulary has %d", id, a->info.vocab_size);
            return ok ? HTTP_DONE : HTTP_DROP;
        }
    for (int i = 0; i < j->q.samp.n_logit_bias; i++)
        if (j->q.samp.logit_bias[i].token >= a->info.vocab_size) {
            const int id = j->q.samp.logit_bias[i].token;
            srv_request_free(&j->q);
            slm_xfree(j);
            ok = http_send_error(r, 400, "invalid_request_error", "logit_bias", "invalid_value",
                                 "logit_bias names token %d; the vocabulary has %d", id, a->info.vocab_size);
            return ok ? HTTP_DONE : HTTP_DROP;
        }
    if (native && j->q.logprobs) { /* its answer has no place for them */
        srv_request_free(&j->q);
        slm_xfree(j);
        ok = http_send_error(r, 400, "invalid_request_error", "logprobs", "unsupported_value",
                             "/completion answers no log-probabilities: ask /v1/completions with logprobs");
        return ok ? HTTP_DONE : HTTP_DROP;
    }
    j->native = native;
    if (native && !j->q.max_tokens_set) j->q.max_tokens = 0; /* llama-server's n_predict -1 */
    if (!j->q.seed_set && a->seed_set) j->q.seed_set = 1; /* serve's --seed (already in samp) */
    j->created = (long)time(NULL);
    r->stream = j->q.stream;
    if (!make_choices(j)) {
        drop_unqueued(j);
        return http_send_error(r, 500, "server_error", NULL, NULL, "out of memory") ? HTTP_DONE : HTTP_DROP;
    }
    return srv_submit(a, r, j); /* the worker wakes the request when it accepted, refused or finished the job */
}

/* ---- routing -------------------------------------------------------------------- */

static int handle_health(srv_api *a, srv_req *r) {
    pthread_mutex_lock(&a->mu);
    int q = a->queued, run = a->running;
    pthread_mutex_unlock(&a->mu);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", "ok");
    cJSON_AddNumberToObject(o, "queued", q);
    cJSON_AddNumberToObject(o, "running", run);
    return http_send_json(r, 200, o);
}

/* GET /metrics: Prometheus' text format (0.0.4). */
static int handle_metrics(srv_api *a, srv_req *r) {
    pthread_mutex_lock(&a->mu);
    const srv_metrics m = a->m;
    const int q = a->queued, run = a->running;
    pthread_mutex_unlock(&a->mu);
    char *t = slm_malloc(8192);
    if (!t) return http_send_error(r, 500, "server_error", NULL, NULL, "out of memory");
    snprintf(t, 8192,
             "# HELP staticlm_requests_total Completion requests that reached the queue, by how they ended.\n"
             "# TYPE staticlm_requests_total counter\n"
             "staticlm_requests_total{outcome=\"ok\"} %llu\n"
             "staticlm_requests_total{outcome=\"error\"} %llu\n"
             "staticlm_requests_total{outcome=\"cancelled\"} %llu\n"
             "# HELP staticlm_requests_rejected_total Requests answered 503: the queue was full.\n"
             "# TYPE staticlm_requests_rejected_total counter\n"
             "staticlm_requests_rejected_total %llu\n"
             "# HELP staticlm_prompt_tokens_total Prompt tokens of the requests that started generating.\n"
             "# TYPE staticlm_prompt_tokens_total counter\n"
             "staticlm_prompt_tokens_total %llu\n"
             "# HELP staticlm_prompt_tokens_cached_total Of those, tokens whose KV rows were reused (slot or prefix cache).\n"
             "# TYPE staticlm_prompt_tokens_cached_total counter\n"
             "staticlm_prompt_tokens_cached_total %llu\n"
             "# HELP staticlm_prompt_seconds_total Time the prompts took to prefill.\n"
             "# TYPE staticlm_prompt_seconds_total counter\n"
             "staticlm_prompt_seconds_total %.6f\n"
             "# HELP staticlm_tokens_predicted_total Tokens generated.\n"
             "# TYPE staticlm_tokens_predicted_total counter\n"
             "staticlm_tokens_predicted_total %llu\n"
             "# HELP staticlm_decode_steps_total Decode steps (each advances every running slot by a token).\n"
             "# TYPE staticlm_decode_steps_total counter\n"
             "staticlm_decode_steps_total %llu\n"
             "# HELP staticlm_decode_seconds_total Wall time of the decode steps.\n"
             "# TYPE staticlm_decode_seconds_total counter\n"
             "staticlm_decode_seconds_total %.6f\n"
             "# HELP staticlm_embeddings_joined_total Embedding requests answered in one batch call with other clients'.\n"
             "# TYPE staticlm_embeddings_joined_total counter\n"
             "staticlm_embeddings_joined_total %llu\n"
             "# HELP staticlm_requests_processing Requests in a slot.\n"
             "# TYPE staticlm_requests_processing gauge\n"
             "staticlm_requests_processing %d\n"
             "# HELP staticlm_requests_deferred Requests waiting for a slot.\n"
             "# TYPE staticlm_requests_deferred gauge\n"
             "staticlm_requests_deferred %d\n"
             "# HELP staticlm_slots Slots (--parallel).\n"
             "# TYPE staticlm_slots gauge\n"
             "staticlm_slots %d\n"
             "# HELP staticlm_kv_rows KV rows the slots hold (kept for reuse too), after the last step.\n"
             "# TYPE staticlm_kv_rows gauge\n"
             "staticlm_kv_rows %ld\n"
             "# HELP staticlm_kv_capacity KV rows a slot can hold.\n"
             "# TYPE staticlm_kv_capacity gauge\n"
             "staticlm_kv_capacity %d\n",
             m.ok, m.failed, m.cancelled, m.rejected, m.prompt_tokens, m.cached_tokens, m.prompt_s, m.predicted_tokens,
             m.steps, m.step_s, m.embed_joined, run, q, a->n_slots, m.kv_rows, slm_capacity(a->e));
    return http_send_text(r, 200, "text/plain; version=0.0.4; charset=utf-8", t);
}

/* x as the shortest decimal that reads back as the float (0.9, not 0.899999976) */
static double fdec(float x) {
    char b[32];
    for (int p = 1; p <= 9; p++) { /* 9 digits always read back */
        snprintf(b, sizeof b, "%.*g", p, (double)x);
        if ((float)strtod(b, NULL) == x) break;
    }
    return strtod(b, NULL);
}

/* GET /props: llama-server's, the part its clients read (the context, the
 * slots, the sampling defaults, the chat template, no image or audio input). */
static int handle_props(srv_api *a, srv_req *r) {
    cJSON *o = cJSON_CreateObject(), *g = cJSON_AddObjectToObject(o, "default_generation_settings");
    cJSON_AddNumberToObject(g, "n_ctx", slm_capacity(a->e));
    cJSON *p = cJSON_AddObjectToObject(g, "params");
    cJSON_AddNumberToObject(p, "temperature", fdec(a->samp.temperature));
    cJSON_AddNumberToObject(p, "top_k", a->samp.top_k);
    cJSON_AddNumberToObject(p, "top_p", fdec(a->samp.top_p));
    cJSON_AddNumberToObject(p, "min_p", fdec(a->samp.min_p));
    cJSON_AddNumberToObject(p, "repeat_penalty", fdec(a->samp.repeat_penalty));
    cJSON_AddNumberToObject(p, "repeat_last_n", a->samp.repeat_last_n);
    cJSON_AddNumberToObject(p, "presence_penalty", fdec(a->samp.presence_penalty));
    cJSON_AddNumberToObject(p, "frequency_penalty", fdec(a->samp.frequency_penalty));
    cJSON_AddNumberToObject(o, "total_slots", a->n_slots);
    cJSON_AddStringToObject(o, "model_path", a->model_name);
    const char *src = a->tm ? slm_tmpl_source(a->tm) : NULL;
    char *clean = src ? srv_utf8_clean(src, strlen(src)) : NULL;
    cJSON_AddStringToObject(o, "chat_template", clean ? clean : "");
    slm_xfree(clean);
    cJSON *m = cJSON_AddObjectToObject(o, "modalities");
    cJSON_AddBoolToObject(m, "vision", 0);
    cJSON_AddBoolToObject(m, "audio", 0);
    cJSON_AddStringToObject(o, "build_info", "staticlm " SLM_VERSION);
    return http_send_json(r, 200, o);
}

static int handle_models(srv_api *a, srv_req *r) {
    cJSON *o = cJSON_CreateObject(), *d = cJSON_AddArrayToObject(o, "data"), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddStringToObject(m, "id", a->model_name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)a->started);
    cJSON_AddStringToObject(m, "owned_by", "staticlm");
    cJSON_AddItemToArray(d, m);
    return http_send_json(r, 200, o);
}

/* llama-server's rerank paths */
static int is_rerank(const char *p) {
    return !strcmp(p, "/rerank") || !strcmp(p, "/reranking") || !strcmp(p, "/v1/rerank") || !strcmp(p, "/v1/reranking");
}

int api_admit(srv_api *a, srv_req *r, char *msg, size_t msgcap) {
    if (strcmp(r->method, "POST") || (strcmp(r->path, "/v1/chat/completions") && strcmp(r->path, "/v1/completions") &&
                                      strcmp(r->path, "/completion") && strcmp(r->path, "/completions") &&
                                      strcmp(r->path, "/v1/embeddings") && strcmp(r->path, "/embedding") &&
                                      strcmp(r->path, "/embeddings") && strcmp(r->path, "/infill") &&
                                      !is_rerank(r->path)))
        return 1;
    pthread_mutex_lock(&a->mu);
    int q = a->queued, full = queue_full(a);
    a->m.rejected += full;
    pthread_mutex_unlock(&a->mu);
    if (full) /* before the body is parsed, rendered or tokenized */
        snprintf(msg, msgcap, "the server is busy: %d requests are waiting (--queue %d); retry later", q, a->queue_max);
    return !full;
}

void api_cancel(srv_api *a, srv_req *r) {
    pthread_mutex_lock(&a->mu);
    for (job *c = r->job; c; c = c->sib) c->cancelled = 1;
    pthread_mutex_unlock(&a->mu);
}

int api_handle(srv_api *a, srv_req *r) {
    const char *url = r->path;
    int get = !strcmp(r->method, "GET"), post = !strcmp(r->method, "POST");
    int ok;
    if (!strcmp(url, "/health") || !strcmp(url, "/v1/health") || !strcmp(url, "/v1/models") || !strcmp(url, "/metrics") ||
        !strcmp(url, "/props")) {
        if (!get) ok = http_send_error(r, 405, "invalid_request_error", NULL, "method_not_allowed", "use GET %s", url);
        else ok = !strcmp(url, "/v1/models") ? handle_models(a, r)
                  : !strcmp(url, "/metrics") ? handle_metrics(a, r)
                  : !strcmp(url, "/props")   ? handle_props(a, r)
                                             : handle_health(a, r);
        return ok ? HTTP_DONE : HTTP_DROP;
    }
    const int tok = !strcmp(url, "/tokenize"), detok = !strcmp(url, "/detokenize");
    if ((tok || detok) && post) return (tok ? api_tokenize(a, r) : api_detokenize(a, r)) ? HTTP_DONE : HTTP_DROP;
    const int oai_emb = !strcmp(url, "/v1/embeddings"), emb = !strcmp(url, "/embedding") || !strcmp(url, "/embeddings");
    const int rerank = is_rerank(url);
    if ((oai_emb || emb || rerank) && post) return api_embeddings(a, r, rerank ? 2 : oai_emb);
    const int infill = !strcmp(url, "/infill"); /* api_infill.c; then a /completion job */
    if (a->encoder && post && !r->job && (infill || !strcmp(url, "/v1/chat/completions") || !strcmp(url, "/v1/completions") ||
                                          !strcmp(url, "/completion") || !strcmp(url, "/completions")))
        return http_send_error(r, 501, "not_supported_error", NULL, "not_supported",
                               "this server does not do completions: its model (%s) is an encoder, which makes "
                               "embeddings only (POST /v1/embeddings)", a->model_name)
                   ? HTTP_DONE
                   : HTTP_DROP;
    if (infill && post) return r->job ? handle_completion(a, r, 0, 1) : api_infill(a, r);
    int chat = !strcmp(url, "/v1/chat/completions"), comp = !strcmp(url, "/v1/completions");
    const int native = !strcmp(url, "/completion") || !strcmp(url, "/completions");
    if (chat || comp || native || tok || detok || oai_emb || emb || rerank || infill) {
        if (post) return handle_completion(a, r, chat, native);
        ok = http_send_error(r, 405, "invalid_request_error", NULL, "method_not_allowed", "use POST %s", url);
    } else {
        ok = http_send_error(r, 404, "invalid_request_error", NULL, "not_found", "unknown endpoint %s %s", r->method, url);
    }
    return ok ? HTTP_DONE : HTTP_DROP;
}

void api_done(srv_api *a, srv_req *r, int aborted, int *pt, int *ct, const char **fin) {
    *pt = *ct = 0;
    *fin = NULL;
    job *j = r->job;
    if (!j) return;
    pthread_mutex_lock(&a->mu);
    *pt = j->prompt_tokens;
    for (job *c = j; c; c = c->sib) {
        c->req = NULL;
        *ct += c->completion_tokens;
    }
    *fin = j->finish; /* a static string */
    release_choices(j, aborted);
    pthread_mutex_unlock(&a->mu);
    r->job = NULL;
}

/* ---- life ------------------------------------------------------------------------- */

srv_api *api_new(slm_engine *e, const slm_tmpl *tm, const slm_server_cfg *cfg, slm_err *err) {
    slm_json_init_hooks();
    srv_api *a = slm_calloc(1, sizeof *a);
    if (!a) { slm_errf(err, SLM_ERR_NOMEM, "out of memory"); return NULL; }
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->work, NULL);
    a->e = e;
    a->tm = tm;
    a->queue_max = cfg->queue;
    a->prefill_chunk = cfg->prefill_chunk;
    a->verbose = cfg->verbose;
    a->samp = cfg->samp;
    a->seed_set = cfg->seed_set;
    a->embeddings = cfg->embeddings;
    a->encoder = slm_model_is_encoder(e);
    a->spm_infill = cfg->spm_infill;
    a->pooling = cfg->pooling == SLM_POOLING_DEFAULT ? slm_model_pooling(e) : cfg->pooling;
    a->started = (long)time(NULL);
    snprintf(a->model_name, sizeof a->model_name, "%s", cfg->model_name ? cfg->model_name : "staticlm");
    slm_get_info(e, &a->info);
    size_t longest = 16;
    for (int id = 0; id < a->info.vocab_size; id++) {
        size_t l = strlen(slm_token_piece(e, a->info.bos_id == 0 ? 1 : 0, id));
        if (l > longest) longest = l;
    }
    a->max_prompt_bytes = (size_t)slm_capacity(e) * longest * 2;
    a->tok = slm_chat_tok_new(slm_engine_tokenizer(e));
    a->reasoning_auto = slm_chat_reasoning_auto(e, tm);
    a->reasoning = cfg->reasoning == SLM_REASON_AUTO ? a->reasoning_auto : cfg->reasoning;
    a->tool_auto = slm_tool_detect(slm_engine_tokenizer(e), tm ? slm_tmpl_source(tm) : NULL);
    for (int i = 0; i < cfg->n_kwargs && a->n_kwargs < (int)(sizeof a->kwargs / sizeof *a->kwargs); i++)
        a->kwargs[a->n_kwargs++] = cfg->kwargs[i];
    a->n_slots = cfg->parallel > 0 ? cfg->parallel : 1;
    if (a->n_slots > SRV_MAX_SLOTS) a->n_slots = SRV_MAX_SLOTS;
    if (a->n_slots > a->info.n_seqs) a->n_slots = a->info.n_seqs;
    if (!a->tok) {
        slm_errf(err, SLM_ERR_NOMEM, "out of memory");
        api_free(a);
        return NULL;
    }
    for (int i = 0; i < a->n_slots; i++)
        if (slm_session_new(e, NULL, &a->slot_sess[i])) {
            slm_errf(err, SLM_ERR_INTERNAL, "slot %d: %s", i, slm_last_error(e));
            api_free(a);
            return NULL;
        }
    if (pthread_create(&a->worker, NULL, srv_worker_main, a)) {
        slm_errf(err, SLM_ERR_INTERNAL, "cannot start the worker thread");
        api_free(a);
        return NULL;
    }
    a->worker_started = 1;
    return a;
}

void api_stop(srv_api *a) {
    pthread_mutex_lock(&a->mu);
    a->stop = 1;
    if (a->current) a->current->cancelled = 1; /* stops its rendering too */
    pthread_cond_broadcast(&a->work);
    pthread_mutex_unlock(&a->mu);
    if (a->worker_started) pthread_join(a->worker, NULL);
    a->worker_started = 0;
}

void api_free(srv_api *a) {
    if (!a) return;
    api_stop(a);
    for (int i = 0; i < SRV_MAX_SLOTS; i++) slm_session_free(a->slot_sess[i]);
    slm_chat_tok_free(a->tok);
    pthread_cond_destroy(&a->work);
    pthread_mutex_destroy(&a->mu);
    slm_xfree(a);
}

#endif /* SLM_HAVE_SERVE */
