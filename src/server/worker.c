/* server/worker.c — the generation worker: takes jobs from the queue one at a
 * time and runs them on the engine (render the chat template, tokenize,
 * prefill, sample until EOS, a stop string, max_tokens or the KV capacity),
 * publishing the text for the request that waits or streams. This file is
 * the generation loop; the HTTP side never sees it. */
#include "server/api.h"

#ifdef SLM_HAVE_SERVE

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/common.h"
#include "common/trace.h"

void srv_job_changed(srv_api *a, job *j) {
    (void)a;
    if (j->req) http_wake(j->req);
}

void srv_job_unref(job *j) {
    if (--j->refs > 0) return;
    srv_request_free(&j->q);
    slm_xfree(j->text);
    slm_xfree(j->pend);
    slm_xfree(j);
}

static void job_fail(srv_api *a, job *j, int status, const char *code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void job_fail(srv_api *a, job *j, int status, const char *code, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&a->mu);
    vsnprintf(j->err, sizeof j->err, fmt, ap);
    j->status = status;
    j->err_code = code;
    j->err_param = param;
    j->state = J_FAILED;
    srv_job_changed(a, j);
    pthread_mutex_unlock(&a->mu);
    va_end(ap);
}

/* Publish text s[0..n) as the job's reply so far (under a->mu). */
static int publish(srv_api *a, job *j, const char *s, size_t n) {
    if (n + 1 > j->tcap) {
        size_t nc = j->tcap ? j->tcap : 256;
        while (nc < n + 1) nc *= 2;
        char *t = slm_realloc(j->text, nc);
        if (!t) return 0;
        j->text = t;
        j->tcap = nc;
    }
    memcpy(j->text, s, n);
    j->text[n] = 0;
    j->tlen = n;
    srv_job_changed(a, j);
    return 1;
}

/* 1 when the job's client has gone or the server stops: the work ends. */
static int job_cancelled(srv_api *a, job *j) {
    pthread_mutex_lock(&a->mu);
    int c = j->cancelled || a->stop;
    pthread_mutex_unlock(&a->mu);
    return c;
}

static void fail_too_long(srv_api *a, job *j, const char *what, long n, int at_least) {
    job_fail(a, j, 400, "context_length_exceeded", j->q.chat ? "messages" : "prompt",
             "This model's maximum context length is %d tokens. However, your %s resulted in %s%ld tokens "
             "(plus at least 1 for the completion).",
             slm_capacity(a->e), what, at_least ? "more than " : "", n);
}

/* Tokenize text (slm_malloc'd ids in *ids); the count, or 0 after job_fail.
 * A text too long to fit in any tokenization is refused untokenized. */
static int tokenize(srv_api *a, job *j, const char *text, int32_t **ids) {
    const srv_request *q = &j->q;
    int n;
    *ids = NULL;
    size_t len = strlen(text);
    if (len > a->max_prompt_bytes) {
        fail_too_long(a, j, q->chat ? "messages" : "prompt", (long)slm_capacity(a->e), 1);
        return 0;
    }
    if (q->chat) {
        n = slm_chat_tokenize(a->tok, text, 1, ids);
    } else {
        n = slm_tokenize(a->e, text, 1, NULL, 0);
        if (n > 0 && (*ids = slm_malloc((size_t)n * sizeof(int32_t)))) slm_tokenize(a->e, text, 1, *ids, n);
        else if (n > 0) n = -1;
    }
    if (n <= 0) {
        slm_xfree(*ids);
        *ids = NULL;
        job_fail(a, j, 500, "internal_error", NULL, "could not tokenize the prompt");
        return 0;
    }
    if (n + 1 > slm_capacity(a->e)) {
        slm_xfree(*ids);
        *ids = NULL;
        fail_too_long(a, j, q->chat ? "messages" : "prompt", n, 0);
        return 0;
    }
    return n;
}

/* The prompt's token ids (slm_xfree'd by the caller); the count, or 0 after
 * job_fail. Chat messages are rendered here, on the worker, after the queue
 * admitted the job: a request the queue turns away costs no rendering. */
static int job_tokens(srv_api *a, job *j, int32_t **ids) {
    const srv_request *q = &j->q;
    *ids = NULL;
    if (q->chat) {
        /* as slm_chat_render, with the job's cancel flag: a client that
         * leaves (or the server stopping) stops the rendering too */
        slm_tmpl_vars v = {0};
        v.bos_token = slm_chat_tok_bos_text(a->tok);
        v.eos_token = slm_chat_tok_eos_text(a->tok);
        v.add_generation_prompt = 1;
        v.cancel = &j->cancelled;
        slm_err terr;
        char *prompt = slm_tmpl_render(a->tm, q->msgs, q->nmsgs, &v, &terr);
        if (job_cancelled(a, j)) {
            int rendered = prompt != NULL;
            slm_xfree(prompt);
            pthread_mutex_lock(&a->mu);
            int stopping = a->stop;
            pthread_mutex_unlock(&a->mu);
            if (stopping) {
                job_fail(a, j, 503, "server_shutting_down", NULL, "the server is shutting down");
                return 0;
            }
            fprintf(stderr, "serve: %s: %s, the client left\n", j->id, rendered ? "rendered" : "rendering stopped");
            job_fail(a, j, 499, "cancelled", NULL, "the client went away");
            return 0;
        }
        if (!prompt) {
            job_fail(a, j, 400, "invalid_value", "messages", "the chat template failed: %s", terr.msg);
            return 0;
        }
        int n = tokenize(a, j, prompt, ids);
        slm_xfree(prompt);
        return n;
    }
    return tokenize(a, j, q->prompt, ids);
}

/* Where the text all[0..alen) may be published up to: a stop string ends
 * it (*stopped = 1); a tail that could begin one, or a split UTF-8
 * character, is held back. `from` is where the newest piece began. */
static size_t stop_scan(const srv_request *q, const char *all, size_t alen, size_t from, int *stopped) {
    size_t safe = alen;
    for (int i = 0; i < q->nstop; i++) {
        size_t sl = strlen(q->stop[i]);
        size_t st = from > sl ? from - sl : 0;
        for (size_t p = st; p + sl <= alen; p++)
            if (!memcmp(all + p, q->stop[i], sl)) {
                if (p < safe) safe = p;
                *stopped = 1;
                break;
            }
    }
    if (*stopped) return safe;
    for (int i = 0; i < q->nstop; i++) {
        size_t sl = strlen(q->stop[i]);
        for (size_t k = sl - 1; k > 0; k--)
            if (k <= alen && !memcmp(all + alen - k, q->stop[i], k)) {
                if (alen - k < safe) safe = alen - k;
                break;
            }
    }
    return srv_utf8_complete(all, safe);
}

static void run_job(srv_api *a, job *j) {
    slm_engine *e = a->e;
    const int V = a->info.vocab_size;
    int32_t *ids = NULL;
    int n = job_tokens(a, j, &ids);
    if (!n) return;
    int max_gen = slm_capacity(e) - n;
    if (j->q.max_tokens > 0 && j->q.max_tokens < max_gen) max_gen = j->q.max_tokens;
    pthread_mutex_lock(&a->mu);
    j->prompt_tokens = n;
    j->accepted = 1;
    srv_job_changed(a, j);
    pthread_mutex_unlock(&a->mu);

    slm_reset(e);
    const float *lg = NULL;
    slm_status s = SLM_OK;
    const int T = a->info.max_prompt_len;
    for (int off = 0; off < n && !s && !job_cancelled(a, j); off += T)
        s = slm_prefill(e, ids + off, n - off < T ? n - off : T, &lg);
    int prev = ids[n - 1];
    slm_xfree(ids);
    char *all = NULL;
    size_t alen = 0, acap = 0;
    const char *finish = "length";
    uint64_t rng = j->q.samp.seed ? j->q.samp.seed : 0x5eed5eedull;
    int gen = 0, stopped = 0;
    for (int g = 0; g < max_gen && !s && !stopped; g++) {
        if (job_cancelled(a, j)) { finish = "cancelled"; break; }
        if (g > 0 && (s = slm_decode(e, prev, &lg))) break;
        memcpy(a->logits, lg, (size_t)V * sizeof(float));
        int tok = slm_sample(a->logits, V, &j->q.samp, &rng, a->scratch);
        if (tok == a->info.eos_id || tok == a->info.bos_id) { finish = "stop"; break; }
        gen++;
        const char *piece = slm_token_piece(e, prev, tok);
        prev = tok;
        if (!slm_piece_printable(piece)) continue; /* as staticlm run prints */
        size_t pl = strlen(piece), from = alen;
        if (alen + pl + 1 > acap) {
            size_t nc = acap ? acap * 2 : 256;
            while (nc < alen + pl + 1) nc *= 2;
            char *na = slm_realloc(all, nc);
            if (!na) { s = SLM_ERR_NOMEM; break; }
            all = na;
            acap = nc;
        }
        memcpy(all + alen, piece, pl + 1);
        alen += pl;
        size_t safe = stop_scan(&j->q, all, alen, from, &stopped);
        if (stopped) {
            alen = safe;
            all[alen] = 0;
            finish = "stop";
            break;
        }
        pthread_mutex_lock(&a->mu);
        j->completion_tokens = gen;
        if (safe > j->tlen) publish(a, j, all, safe);
        pthread_mutex_unlock(&a->mu);
    }
    if (s) {
        slm_xfree(all);
        job_fail(a, j, 500, "internal_error", NULL, "generation failed: %s", slm_last_error(e));
        return;
    }
    pthread_mutex_lock(&a->mu);
    j->completion_tokens = gen;
    j->finish = finish;
    publish(a, j, all ? all : "", alen);
    j->state = J_DONE;
    srv_job_changed(a, j);
    pthread_mutex_unlock(&a->mu);
    slm_xfree(all);
}

void *srv_worker_main(void *arg) {
    srv_api *a = arg;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (!a->head && !a->stop) pthread_cond_wait(&a->work, &a->mu);
        job *j = a->head;
        if (!j) break; /* stopping and nothing queued */
        a->head = j->next;
        if (!a->head) a->tail = NULL;
        a->queued--;
        if (a->stop) {
            pthread_mutex_unlock(&a->mu);
            job_fail(a, j, 503, "server_shutting_down", NULL, "the server is shutting down");
            pthread_mutex_lock(&a->mu);
            srv_job_unref(j);
            continue;
        }
        j->state = J_RUNNING;
        a->current = j;
        if (j->cancelled) {
            j->state = J_DONE;
            j->finish = "cancelled";
            a->current = NULL;
            srv_job_changed(a, j);
            srv_job_unref(j);
            continue;
        }
        a->running = 1;
        pthread_mutex_unlock(&a->mu);
        slm_trace_name_thread("server worker");
        const uint64_t t0 = slm_trace_begin();
        run_job(a, j);
        slm_trace_end("http", "job", t0,
                      &(slm_trace_args){{"prompt_tokens", "completion_tokens"}, {j->prompt_tokens, j->completion_tokens},
                                        "finish", j->finish});
        pthread_mutex_lock(&a->mu);
        a->running = 0;
        a->current = NULL;
        srv_job_unref(j);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

#endif /* SLM_HAVE_SERVE */
