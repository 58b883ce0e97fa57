/* server/worker.c — the worker: keeps --parallel slots, each a session (a
 * KV region) of the engine. Between decode steps it drops cancelled jobs and
 * admits queued ones into free slots (continuous batching): renders the chat
 * template, tokenizes, and sets the slot's prompt (rows of a prefix the slot
 * or the prefix cache holds are kept). Each step then advances every
 * running slot by one token through slm_session_next_batch (the sessions'
 * tokens decoded together, the weights read once) and publishes the text
 * for the request that waits or streams. The generation loop itself is the
 * session's (engine/session.c); the HTTP side never sees either. */
#include "server/api.h"

#ifdef SLM_HAVE_SERVE

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/common.h"

void srv_cond_wait_ms(srv_api *a, pthread_cond_t *c, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(c, &a->mu, &ts);
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
    pthread_cond_broadcast(&a->changed);
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
    pthread_cond_broadcast(&a->changed);
    return 1;
}

/* 1 when the job's client has gone or the server stops: the work ends. */
static int job_cancelled(srv_api *a, job *j) {
    pthread_mutex_lock(&a->mu);
    int c = j->cancelled || a->stop;
    pthread_mutex_unlock(&a->mu);
    return c;
}

/* The prompt's token ids (slm_xfree'd by the caller); the count, or 0 after
 * job_fail. Chat messages are rendered here, on the worker, after the queue
 * admitted the job: a request the queue turns away costs no rendering. */
static int job_tokens(srv_api *a, job *j, int32_t **ids) {
    const srv_request *q = &j->q;
    int n;
    *ids = NULL;
    if (q->chat) {
        char terr[256];
        /* The place for the renderer's cancel hook: when slm_chat_render takes
         * one, pass job_cancelled(a, j) so that a client that leaves stops
         * its rendering too. */
        char *prompt = slm_chat_render(a->tm, a->tok, q->msgs, q->nmsgs, 1, terr, sizeof terr);
        if (!prompt) {
            job_fail(a, j, 400, "invalid_value", "messages", "the chat template failed: %s", terr);
            return 0;
        }
        if (job_cancelled(a, j)) {
            slm_xfree(prompt);
            job_fail(a, j, 499, "cancelled", NULL, "the client went away");
            return 0;
        }
        n = slm_chat_tokenize(a->tok, prompt, 1, ids);
        slm_xfree(prompt);
    } else {
        n = slm_tokenize(a->e, q->prompt, 1, NULL, 0);
        if (n > 0 && (*ids = slm_malloc((size_t)n * sizeof(int32_t)))) slm_tokenize(a->e, q->prompt, 1, *ids, n);
        else if (n > 0) n = -1;
    }
    if (n <= 0) {
        slm_xfree(*ids);
        *ids = NULL;
        job_fail(a, j, 500, "internal_error", NULL, "could not tokenize the prompt");
        return 0;
    }
    int cap = slm_capacity(a->e);
    if (n + 1 > cap) {
        slm_xfree(*ids);
        *ids = NULL;
        job_fail(a, j, 400, "context_length_exceeded", q->chat ? "messages" : "prompt",
                 "This model's maximum context length is %d tokens. However, your %s resulted in %d tokens "
                 "(plus at least 1 for the completion).",
                 cap, q->chat ? "messages" : "prompt", n);
        return 0;
    }
    return n;
}

/* ---- slots: continuous batching ------------------------------------------------ */

/* Admit queued jobs into free slots (under a->mu). Returns how many. */
static int admit(srv_api *a, job **fresh, int *fresh_slot) {
    int n = 0;
    for (int i = 0; i < a->n_slots && a->head; i++) {
        if (a->slot_job[i]) continue;
        job *j = a->head;
        a->head = j->next;
        if (!a->head) a->tail = NULL;
        a->queued--;
        j->next = NULL;
        j->state = J_RUNNING;
        a->slot_job[i] = j;
        fresh[n] = j;
        fresh_slot[n] = i;
        n++;
    }
    return n;
}

/* End slot i's job (it is done, failed or cancelled) and free the slot. */
static void release(srv_api *a, int i) {
    pthread_mutex_lock(&a->mu);
    job *j = a->slot_job[i];
    a->slot_job[i] = NULL;
    if (j) srv_job_unref(j);
    pthread_mutex_unlock(&a->mu);
}

/* Start a job on its slot's session: tokens, sampling, limits, prefill
 * (keeping the rows of a prefix the slot or the prefix cache holds).
 * 0 when it failed (the job is failed, the slot freed). */
static int start_job(srv_api *a, int i) {
    job *j = a->slot_job[i];
    slm_session *s = a->slot_sess[i];
    int32_t *ids = NULL;
    int n = job_tokens(a, j, &ids);
    if (!n) {
        release(a, i);
        return 0;
    }
    slm_session_cfg sc;
    memset(&sc, 0, sizeof sc);
    sc.samp = j->q.samp;
    int max_gen = slm_capacity(a->e) - n;
    sc.n_predict = j->q.max_tokens > 0 && j->q.max_tokens < max_gen ? j->q.max_tokens : max_gen;
    sc.stop = (const char *const *)j->q.stop;
    sc.n_stop = j->q.nstop;
    slm_session_stats s0, s1;
    slm_session_get_stats(s, &s0);
    slm_status st = slm_session_configure(s, &sc);
    if (!st) st = slm_session_set_prompt(s, ids, n);
    slm_xfree(ids);
    if (st) {
        job_fail(a, j, 500, "internal_error", NULL, "prefill failed: %s", slm_session_error(s));
        slm_session_reset(s);
        release(a, i);
        return 0;
    }
    slm_session_get_stats(s, &s1);
    a->slot_gen0[i] = s1.n_generated;
    pthread_mutex_lock(&a->mu);
    j->prompt_tokens = n;
    j->cached_tokens = s1.n_reused - s0.n_reused;
    j->accepted = 1;
    pthread_cond_broadcast(&a->changed);
    pthread_mutex_unlock(&a->mu);
    return 1;
}

/* After a step: publish slot i's new text; finish it when its reply ended. */
static void after_step(srv_api *a, int i, int32_t id, slm_status st) {
    job *j = a->slot_job[i];
    slm_session *s = a->slot_sess[i];
    slm_session_stats ss;
    slm_session_get_stats(s, &ss);
    size_t len, safe;
    const char *text = slm_session_text(s, &len, &safe);
    if (st && slm_session_stop_reason(s) != SLM_STOP_CAPACITY) {
        job_fail(a, j, 500, "internal_error", NULL, "generation failed: %s", slm_session_error(s));
        slm_session_reset(s);
        release(a, i);
        return;
    }
    pthread_mutex_lock(&a->mu);
    j->completion_tokens = ss.n_generated - a->slot_gen0[i];
    if (safe > j->tlen) publish(a, j, text, safe);
    int done = id < 0 || st;
    if (done) {
        int why = slm_session_stop_reason(s);
        j->finish = why == SLM_STOP_TOKEN || why == SLM_STOP_STRING ? "stop" : "length";
        publish(a, j, text, len);
        j->state = J_DONE;
        pthread_cond_broadcast(&a->changed);
    }
    pthread_mutex_unlock(&a->mu);
    if (done) release(a, i);
}

void *srv_worker_main(void *arg) {
    srv_api *a = arg;
    job *fresh[SRV_MAX_SLOTS];
    int fresh_slot[SRV_MAX_SLOTS];
    for (;;) {
        /* between steps: drop cancelled jobs, admit queued ones into free slots */
        pthread_mutex_lock(&a->mu);
        int active = 0;
        for (int i = 0; i < a->n_slots; i++) {
            job *j = a->slot_job[i];
            if (j && (j->cancelled || a->stop)) {
                j->finish = "cancelled";
                j->state = J_DONE;
                pthread_cond_broadcast(&a->changed);
                a->slot_job[i] = NULL;
                srv_job_unref(j);
            }
            active += a->slot_job[i] != NULL;
        }
        if (a->stop) {
            /* waiting requests get 503 */
            while (a->head) {
                job *j = a->head;
                a->head = j->next;
                a->queued--;
                pthread_mutex_unlock(&a->mu);
                job_fail(a, j, 503, "server_shutting_down", NULL, "the server is shutting down");
                pthread_mutex_lock(&a->mu);
                srv_job_unref(j);
            }
            a->tail = NULL;
            pthread_mutex_unlock(&a->mu);
            break;
        }
        while (!active && !a->head && !a->stop) pthread_cond_wait(&a->work, &a->mu);
        if (a->stop) {
            pthread_mutex_unlock(&a->mu);
            continue;
        }
        int nf = admit(a, fresh, fresh_slot);
        for (int k = 0; k < nf; k++)
            if (fresh[k]->cancelled) { /* gone while it waited */
                fresh[k]->finish = "cancelled";
                fresh[k]->state = J_DONE;
                pthread_cond_broadcast(&a->changed);
                a->slot_job[fresh_slot[k]] = NULL;
                srv_job_unref(fresh[k]);
                fresh_slot[k] = -1;
            }
        pthread_mutex_unlock(&a->mu);
        for (int k = 0; k < nf; k++)
            if (fresh_slot[k] >= 0) start_job(a, fresh_slot[k]);
        /* one step for every running slot: their pending tokens in one batch program */
        slm_session *ss[SRV_MAX_SLOTS];
        int who[SRV_MAX_SLOTS], n = 0;
        for (int i = 0; i < a->n_slots; i++)
            if (a->slot_job[i] && a->slot_job[i]->accepted) {
                ss[n] = a->slot_sess[i];
                who[n++] = i;
            }
        if (!n) continue;
        int32_t ids[SRV_MAX_SLOTS];
        slm_status sts[SRV_MAX_SLOTS];
        slm_session_next_batch(ss, n, ids, NULL, sts);
        for (int k = 0; k < n; k++) after_step(a, who[k], ids[k], sts[k]);
    }
    return NULL;
}

#endif /* SLM_HAVE_SERVE */
