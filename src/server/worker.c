/* server/worker.c — the worker: keeps --parallel slots, each a session (a
 * KV region) of the engine. Between decode steps it drops cancelled jobs and
 * admits queued ones into free slots (continuous batching): renders the chat
 * template, tokenizes, and sets the slot's prompt (rows of a prefix the slot
 * or the prefix cache holds are kept); while other slots decode, prompts go
 * in --prefill-chunk tokens per step (slm_session_begin_prompt /
 * _prompt_step), so a long prompt does not stall their streams for its
 * whole prefill, and the slot joins the steps once its prompt is in. Each
 * step then advances every
 * running slot by one token through slm_session_next_batch (the sessions'
 * tokens decoded together, the weights read once) and publishes the text
 * for the request that waits or streams. The generation loop itself is the
 * session's (engine/session.c); the HTTP side never sees either. */
#include "server/jobs.h"

#ifdef SLM_HAVE_SERVE

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/common.h"
#include "common/trace.h"

static double wall_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void srv_job_changed(srv_api *a, job *j) {
    (void)a;
    if (j->req) http_wake(j->req);
}

void srv_job_unref(job *j) {
    if (--j->refs > 0) return;
    job *first = j->first; /* a later choice lets go of the request it borrowed */
    srv_request_free(&j->q);
    srv_embed_free(j->emb);
    slm_tool_free(&j->tc);
    for (int i = 0; i < j->ncalls; i++) {
        slm_xfree(j->calls[i].name);
        slm_xfree(j->calls[i].args);
    }
    slm_xfree(j->calls);
    slm_xfree(j->lps);
    slm_xfree(j->lptext);
    slm_xfree(j->text);
    slm_xfree(j->rtext);
    slm_xfree(j->pend);
    slm_xfree(j);
    if (first) srv_job_unref(first);
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
    if (status == 499) a->m.cancelled++; /* the client left while its prompt was rendered */
    else a->m.failed++;
    srv_job_changed(a, j);
    pthread_mutex_unlock(&a->mu);
    va_end(ap);
}

/* Append s[0..n) to *p ([*len] + NUL, *cap bytes); 0 when out of memory. */
static int append(char **p, size_t *len, size_t *cap, const char *s, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t nc = *cap ? *cap : 256;
        while (nc < *len + n + 1) nc *= 2;
        char *t = slm_realloc(*p, nc);
        if (!t) return 0;
        *p = t;
        *cap = nc;
    }
    memcpy(*p + *len, s, n);
    *len += n;
    (*p)[*len] = 0;
    return 1;
}

/* Keep the text of token id after prev in j->lptext (under a->mu); 0 when out of memory. */
static int lp_text(srv_api *a, job *j, int prev, int id, float lp, srv_lp_tok *t) {
    const char *piece = slm_token_piece(a->e, prev, id);
    t->lp = lp;
    t->off = (uint32_t)j->lptlen;
    t->len = (uint32_t)strlen(piece);
    return j->lptlen + t->len < UINT32_MAX && append(&j->lptext, &j->lptlen, &j->lptcap, piece, t->len);
}

/* The log-probabilities of the token slot session s just returned, kept for
 * the job (under a->mu). */
static void keep_logprobs(srv_api *a, job *j, slm_session *s) {
    slm_token_logprobs lp;
    if (slm_session_logprobs(s, &lp)) return;
    if (j->nlp == j->clp) {
        const int nc = j->clp ? j->clp * 2 : 64;
        srv_lp *l = slm_realloc(j->lps, (size_t)nc * sizeof *l);
        if (!l) { j->oom = 1; return; }
        j->lps = l;
        j->clp = nc;
    }
    srv_lp *l = &j->lps[j->nlp];
    l->text_offset = lp.text_offset;
    l->n_top = lp.n_top;
    int ok = lp_text(a, j, lp.prev, lp.token.id, lp.token.logprob, &l->tok);
    for (int k = 0; k < lp.n_top && ok; k++) ok = lp_text(a, j, lp.prev, lp.top[k].id, lp.top[k].logprob, &l->top[k]);
    if (!ok) j->oom = 1;
    else j->nlp++;
}

/* The kept tokens whose text is out: before `upto` in the session's reply
 * text; at the end (final) all but those a stop string cut off. */
static void lp_publish(job *j, size_t upto, int final, int cut) {
    int n = j->lp_pub;
    while (n < j->nlp && (j->lps[n].text_offset < upto || (final && !cut))) n++;
    j->lp_pub = n;
}

/* A tool call's id (text/toolcall.h): a counter, the clock and the job mixed. */
static void call_id(job *j, char *id, size_t cap) {
    static _Atomic unsigned long long counter;
    unsigned long long x = ++counter * 0x9E3779B97F4A7C15ull ^ (unsigned long long)time(NULL) ^ (unsigned long long)(uintptr_t)j;
    slm_tool_call_id(j->tool_fmt, x, id, cap);
}

/* The tool call parser's output (under a->mu): text to the answer (harmony:
 * on to the reasoning splitter), calls to j->calls. With
 * parallel_tool_calls false, calls after the first are dropped. */
static void tool_out(void *ud, int ev, const char *s, size_t n) {
    job *j = ud;
    if (ev == SLM_TOOL_TEXT) {
        if (j->tool_fmt == SLM_TOOL_HARMONY) slm_reason_feed(&j->rs, s, n);
        else if (!append(&j->text, &j->tlen, &j->tcap, s, n)) j->oom = 1;
        return;
    }
    if (ev == SLM_TOOL_CALL) {
        j->skip_call = j->ncalls > 0 && !j->q.parallel_tool_calls;
        if (j->skip_call) return;
        if (j->ncalls == j->ccalls) {
            int nc = j->ccalls ? j->ccalls * 2 : 4;
            srv_call *c = slm_realloc(j->calls, (size_t)nc * sizeof *c);
            if (!c) { j->oom = 1; return; }
            j->calls = c;
            j->ccalls = nc;
        }
        srv_call *c = &j->calls[j->ncalls];
        memset(c, 0, sizeof *c);
        call_id(j, c->id, sizeof c->id);
        if (!(c->name = slm_strdup(s))) { j->oom = 1; return; }
        j->ncalls++;
        return;
    }
    if (j->skip_call || !j->ncalls) {
        if (ev == SLM_TOOL_END) j->skip_call = 0;
        return;
    }
    srv_call *c = &j->calls[j->ncalls - 1];
    if (ev == SLM_TOOL_END) c->done = 1;
    else if (!append(&c->args, &c->alen, &c->acap, s, n)) j->oom = 1;
}

/* The splitter's output: the answer to text (or on to the tool call parser),
 * the reasoning to rtext. */
static void split_out(void *ud, int kind, const char *s, size_t n) {
    job *j = ud;
    if (kind == SLM_REASON_ANSWER && j->tool_fmt != SLM_TOOL_NONE && j->tool_fmt != SLM_TOOL_HARMONY) {
        slm_tool_feed(&j->tc, s, n);
        if (j->tc.oom) j->oom = 1;
        return;
    }
    const int ok = kind == SLM_REASON_THINK ? append(&j->rtext, &j->rlen, &j->rcap, s, n)
                                            : append(&j->text, &j->tlen, &j->tcap, s, n);
    if (!ok) j->oom = 1; /* after_step fails the job rather than send a reply with a hole */
}

/* Publish the reply text s[0..n) (under a->mu): what is new since the last
 * call goes through the splitter; end: the reply is complete. */
static void publish(srv_api *a, job *j, const char *s, size_t n, int end) {
    const int tools_first = j->tool_fmt == SLM_TOOL_HARMONY; /* harmony: calls out before the splitter */
    if (n > j->raw && tools_first) slm_tool_feed(&j->tc, s + j->raw, n - j->raw);
    else if (n > j->raw) slm_reason_feed(&j->rs, s + j->raw, n - j->raw);
    if (n > j->raw) j->raw = n;
    if (end && tools_first) slm_tool_finish(&j->tc);
    if (end) slm_reason_finish(&j->rs);
    if (end && !tools_first) slm_tool_finish(&j->tc);
    if (j->tc.oom) j->oom = 1;
    srv_job_changed(a, j);
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
static int tokenize(srv_api *a, job *j, const char *text, const uint8_t *plain, int32_t **ids) {
    const srv_request *q = &j->q;
    int n;
    *ids = NULL;
    size_t len = strlen(text);
    if (len > a->max_prompt_bytes) {
        fail_too_long(a, j, q->chat ? "messages" : "prompt", (long)slm_capacity(a->e), 1);
        return 0;
    }
    if (q->chat) {
        n = slm_chat_tokenize_masked(a->tok, text, plain, 1, ids); /* message bytes stay text */
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

/* tool_choice required or named: the reply is the calls, in the model's
 * format, under a grammar made for this prompt (it may open a call or the
 * thinking). 0 after job_fail. */
static int forced_grammar(srv_api *a, job *j, const char *prompt) {
    srv_request *q = &j->q;
    if (j->tool_fmt == SLM_TOOL_NONE) {
        job_fail(a, j, 400, "unsupported_value", "tool_choice",
                 "tool_choice '%s' needs the model's tool call format, and this model's template and vocabulary show "
                 "none that staticlm knows (hermes, llama3, mistral, harmony, xml, gemma4)",
                 q->tool_choice == SLM_TOOL_CHOICE_NAMED ? "function" : "required");
        return 0;
    }
    char *txt = NULL;
    const char *tokens = NULL;
    int bad = -1;
    slm_err err = {0};
    const int think = j->reasoning == (j->tool_fmt == SLM_TOOL_GEMMA4 ? SLM_REASON_GEMMA4 : SLM_REASON_DEEPSEEK);
    slm_status st = slm_tool_grammar(j->tool_fmt, q->tool_fns, q->n_tool_fns, q->parallel_tool_calls, think, prompt, &txt, &tokens,
                                     &bad, &err);
    if (st) {
        job_fail(a, j, st == SLM_ERR_NOMEM ? 500 : 400, st == SLM_ERR_NOMEM ? "server_error" : "invalid_value",
                 st == SLM_ERR_NOMEM ? NULL : bad >= 0 ? "tools" : "tool_choice", "%s", err.msg);
        return 0;
    }
    if (a->verbose) fprintf(stderr, "serve: %s: the tool call grammar (%s):\n%s", j->id, slm_tool_format_name(j->tool_fmt), txt);
    pthread_mutex_lock(&a->mu);
    slm_xfree(q->grammar); /* none came with the request (refused beside tool_choice); serve's --grammar gives way */
    q->grammar = txt;
    q->samp.grammar = txt;
    q->samp.grammar_tokens = tokens;
    pthread_mutex_unlock(&a->mu);
    return 1;
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
        const char *kw[9];
        v.bos_token = slm_chat_tok_bos_text(a->tok);
        v.eos_token = slm_chat_tok_eos_text(a->tok);
        v.add_generation_prompt = 1;
        v.cancel = &j->cancelled;
        v.tools = q->tools; /* rendered with tool_choice none too, as llama.cpp's server does */
        v.kwargs = kw; /* the server's, then the request's */
        for (v.n_kwargs = 0; v.n_kwargs < a->n_kwargs; v.n_kwargs++) kw[v.n_kwargs] = a->kwargs[v.n_kwargs];
        if (q->kwargs) kw[v.n_kwargs++] = q->kwargs;
        slm_err terr;
        uint8_t *mask = NULL; /* the bytes that come from the messages */
        char *prompt = slm_tmpl_render_mask(a->tm, q->msgs, q->nmsgs, &v, &mask, &terr);
        if (job_cancelled(a, j)) {
            int rendered = prompt != NULL;
            slm_xfree(prompt);
            slm_xfree(mask);
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
        if (a->verbose) fprintf(stderr, "serve: %s: the rendered prompt:\n%s\n", j->id, prompt);
        int n = tokenize(a, j, prompt, mask, ids);
        /* the reply continues the prompt: it may start inside the thinking, or a tool call */
        j->reasoning = q->reasoning < 0 ? a->reasoning : q->reasoning == SLM_REASON_AUTO ? a->reasoning_auto : q->reasoning;
        slm_reason_init(&j->rs, j->reasoning, prompt, split_out, j);
        pthread_mutex_lock(&a->mu);
        j->tool_fmt = q->tools && q->tool_choice != SLM_TOOL_CHOICE_NONE ? a->tool_auto : SLM_TOOL_NONE;
        slm_tool_init(&j->tc, j->tool_fmt, prompt, tool_out, j);
        /* xml calls: a string parameter stays a string whatever its text */
        const slm_status xs = j->tool_fmt == SLM_TOOL_XML ? slm_tool_xml_types(&j->tc, q->tools) : SLM_OK;
        pthread_mutex_unlock(&a->mu);
        if (n && xs) {
            job_fail(a, j, 500, "server_error", NULL, "out of memory");
            slm_xfree(*ids);
            *ids = NULL;
            n = 0;
        }
        if (n && q->tool_choice >= SLM_TOOL_CHOICE_REQUIRED && !forced_grammar(a, j, prompt)) {
            slm_xfree(*ids);
            *ids = NULL;
            n = 0;
        }
        slm_xfree(prompt);
        slm_xfree(mask);
        return n;
    }
    slm_reason_init(&j->rs, SLM_REASON_NONE, NULL, split_out, j);
    if (!q->prompt_ids) return tokenize(a, j, q->prompt, NULL, ids);
    const int n = q->n_prompt_ids; /* ids as sent */
    if (n + 1 > slm_capacity(a->e)) {
        fail_too_long(a, j, "prompt", n, 0);
        return 0;
    }
    if (!(*ids = slm_malloc((size_t)n * sizeof **ids))) {
        job_fail(a, j, 500, "server_error", NULL, "out of memory");
        return 0;
    }
    memcpy(*ids, q->prompt_ids, (size_t)n * sizeof **ids);
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
        a->running++;
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
    if (j) {
        a->running--;
        srv_job_unref(j);
    }
    pthread_mutex_unlock(&a->mu);
}

/* Slot i's prompt is in: its job joins the decode steps. */
static void accept_job(srv_api *a, int i) {
    job *j = a->slot_job[i];
    slm_session_stats s1;
    slm_session_get_stats(a->slot_sess[i], &s1);
    a->slot_gen0[i] = s1.n_generated;
    j->gen_t0 = wall_s(); /* t_max_predict_ms counts from here */
    pthread_mutex_lock(&a->mu);
    j->prompt_tokens = a->slot_prompt[i];
    j->cached_tokens = s1.n_reused - a->slot_reused0[i];
    a->m.prompt_tokens += (unsigned long long)j->prompt_tokens;
    a->m.cached_tokens += (unsigned long long)j->cached_tokens;
    j->prompt_ms = s1.prefill_ms - a->slot_prefill0[i];
    a->m.prompt_s += j->prompt_ms / 1e3;
    j->accepted = 1;
    srv_job_changed(a, j);
    pthread_mutex_unlock(&a->mu);
    if (a->verbose && a->slot_pieces[i] > 1)
        fprintf(stderr, "serve: slot %d: a prompt of %d tokens went in in %d pieces between other slots' steps\n", i,
                a->slot_prompt[i], a->slot_pieces[i]);
}

/* Start a job on its slot's session: tokens, sampling, limits, and the
 * prompt (keeping the rows of a prefix the slot or the prefix cache holds),
 * at most *budget of its tokens prefilled now (the rest by prompt_steps;
 * *budget is lowered by what ran). 0 when it failed (the job is failed,
 * the slot freed). */
static void embed_job(srv_api *a, int i);
static int start_job(srv_api *a, int i, int *budget) {
    job *j = a->slot_job[i];
    slm_session *s = a->slot_sess[i];
    if (j->emb) { /* embeddings: done on the spot, between the other slots' steps */
        embed_job(a, i);
        return 0;
    }
    int32_t *ids = NULL;
    pthread_mutex_lock(&a->mu);
    a->current = j; /* server stop cancels its rendering */
    pthread_mutex_unlock(&a->mu);
    int n = job_tokens(a, j, &ids);
    pthread_mutex_lock(&a->mu);
    a->current = NULL;
    pthread_mutex_unlock(&a->mu);
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
    sc.ignore_eos = j->q.ignore_eos;
    sc.logprobs = j->q.logprobs;
    sc.top_logprobs = j->q.top_logprobs;
    slm_session_stats s0, s1;
    slm_session_get_stats(s, &s0);
    a->slot_reused0[i] = s0.n_reused;
    a->slot_prefill0[i] = s0.prefill_ms;
    a->slot_decode0[i] = s0.decode_ms;
    a->slot_prompt[i] = n;
    int left = 0;
    slm_status st = slm_session_configure(s, &sc);
    if (st) { /* the sampling's grammar (checked when parsed: out of memory, or serve's --grammar) */
        slm_xfree(ids);
        job_fail(a, j, st == SLM_ERR_NOMEM ? 500 : 400, st == SLM_ERR_NOMEM ? "server_error" : "invalid_value",
                 st == SLM_ERR_NOMEM ? NULL : "grammar", "%s", slm_session_error(s));
        slm_session_reset(s);
        release(a, i);
        return 0;
    }
    st = slm_session_begin_prompt(s, ids, n, *budget > 0 ? *budget : 1, &left);
    slm_xfree(ids);
    if (st) {
        job_fail(a, j, 500, "internal_error", NULL, "prefill failed: %s", slm_session_error(s));
        slm_session_reset(s);
        release(a, i);
        return 0;
    }
    slm_session_get_stats(s, &s1);
    const int ran = s1.n_prefilled - s0.n_prefilled;
    *budget = *budget - ran > 0 ? *budget - ran : 0;
    a->slot_left[i] = left;
    a->slot_pieces[i] = 1;
    if (!left) accept_job(a, i);
    return 1;
}

/* Slot i's embedding job answered: done, the slot free. */
static void embed_done(srv_api *a, int i) {
    job *j = a->slot_job[i];
    pthread_mutex_lock(&a->mu);
    j->prompt_tokens = srv_embed_tokens(j->emb);
    a->m.prompt_tokens += (unsigned long long)j->prompt_tokens;
    a->m.ok++;
    j->finish = "stop";
    j->state = J_DONE;
    srv_job_changed(a, j);
    pthread_mutex_unlock(&a->mu);
    release(a, i);
}

/* Slot i's embedding job: its inputs through the embedding programs on the
 * slot's session (which keeps no rows after), then done and the slot free. */
static void embed_job(srv_api *a, int i) {
    job *j = a->slot_job[i];
    int status = 500;
    char msg[sizeof j->err];
    if (srv_embed_run(a, j->emb, a->slot_sess[i], &status, msg, sizeof msg)) {
        embed_done(a, i);
        return;
    }
    job_fail(a, j, status, status >= 500 ? "server_error" : "invalid_value", status >= 500 ? NULL : "input", "%s", msg);
    release(a, i);
}

/* The fresh slots' embedding requests (of one pooling; reranks apart) in
 * one batch call on the first one's session: several clients' texts share
 * the batch programs. Their slots are taken out of fresh_slot
 * (-1). When the call does not answer them all, each runs alone, for its
 * own answer or error. */
static void embed_together(srv_api *a, int nf, int *fresh_slot) {
    srv_embed *m[SRV_MAX_SLOTS];
    int slot[SRV_MAX_SLOTS], k = 0;
    for (int f = 0; f < nf; f++) {
        const int i = fresh_slot[f];
        if (i < 0 || !a->slot_job[i]->emb || !srv_embed_joinable(a->slot_job[i]->emb, k ? m[0] : NULL)) continue;
        m[k] = a->slot_job[i]->emb;
        slot[k++] = i;
        fresh_slot[f] = -1;
    }
    if (k >= 2 && srv_embed_run_many(a, m, k, a->slot_sess[slot[0]])) {
        if (a->verbose) fprintf(stderr, "serve: %d embedding requests in one batch\n", k);
        pthread_mutex_lock(&a->mu);
        a->m.embed_joined += (unsigned long long)k;
        pthread_mutex_unlock(&a->mu);
        for (int r = 0; r < k; r++) embed_done(a, slot[r]);
        return;
    }
    for (int r = 0; r < k; r++) embed_job(a, slot[r]);
}

/* The slots whose prompts are still going in, oldest slot first: up to
 * budget more of their tokens. */
static void prompt_steps(srv_api *a, int budget) {
    for (int i = 0; i < a->n_slots && budget > 0; i++) {
        if (!a->slot_job[i] || a->slot_left[i] <= 0) continue;
        slm_session *s = a->slot_sess[i];
        const int m = a->slot_left[i] < budget ? a->slot_left[i] : budget;
        int left = 0;
        slm_status st = slm_session_prompt_step(s, m, &left);
        if (st) {
            a->slot_left[i] = 0;
            job_fail(a, a->slot_job[i], 500, "internal_error", NULL, "prefill failed: %s", slm_session_error(s));
            slm_session_reset(s);
            release(a, i);
            continue;
        }
        budget -= a->slot_left[i] - left;
        a->slot_left[i] = left;
        a->slot_pieces[i]++;
        if (!left) accept_job(a, i);
    }
}

/* llama-server's code-completion limits on the reply text[0..len) after a
 * step: with n_indent, a line after the first newline whose indentation
 * (spaces and tabs before its first other byte, a newline too) is less ends
 * the reply there, the line cut before that byte; with t_max_predict_ms, a
 * newline coming after that long ends it. Returns the length the reply
 * ends at, or (size_t)-1 when it goes on. */
static size_t line_limits(job *j, const char *text, size_t len) {
    const size_t from = j->lim_scan;
    for (; j->q.n_indent > 0 && j->lim_scan < len; j->lim_scan++) {
        const char c = text[j->lim_scan];
        if (j->lim_line && !j->lim_checked && c != ' ' && c != '\t') {
            j->lim_checked = 1;
            if (j->lim_scan - j->lim_line < (size_t)j->q.n_indent) return j->lim_scan;
        }
        if (c == '\n') {
            j->lim_line = j->lim_scan + 1;
            j->lim_checked = 0;
        }
    }
    j->lim_scan = len;
    if (j->q.t_max_predict_ms > 0 && memchr(text + from, '\n', len - from) &&
        (wall_s() - j->gen_t0) * 1e3 > j->q.t_max_predict_ms)
        return len;
    return (size_t)-1;
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
    int done = id < 0 || st, limited = 0;
    if (!done && (j->q.n_indent > 0 || j->q.t_max_predict_ms > 0)) {
        const size_t cut = line_limits(j, text, len);
        if (cut != (size_t)-1) done = limited = 1, len = cut;
    }
    a->m.predicted_tokens += id >= 0;
    if (id >= 0 && j->q.logprobs) keep_logprobs(a, j, s);
    if (!done && safe > j->raw) {
        lp_publish(j, safe, 0, 0);
        publish(a, j, text, safe, 0);
    }
    if (done) {
        const int why = limited ? SLM_STOP_LENGTH : slm_session_stop_reason(s); /* llama-server: "limit" */
        j->finish = why == SLM_STOP_TOKEN || why == SLM_STOP_STRING ? "stop" : "length";
        j->stop_why = why;
        j->stop_word = why == SLM_STOP_STRING ? slm_session_stop_index(s) + 1 : 0; /* which of q.stop */
        j->predicted_ms = ss.decode_ms - a->slot_decode0[i];
        lp_publish(j, len, 1, why == SLM_STOP_STRING || limited);
        publish(a, j, text, len, 1);
        if (j->ncalls && !strcmp(j->finish, "stop")) j->finish = "tool_calls"; /* as OpenAI's */
        if (!j->oom) {
            j->state = J_DONE;
            a->m.ok++;
            /* the slot is free before the answer leaves (same lock): a client that
               sends its next request the moment it has this one is not refused as busy */
            a->slot_job[i] = NULL;
            a->running--;
        }
        srv_job_changed(a, j);
    }
    const int oom = j->oom;
    if (done && !oom) srv_job_unref(j);
    pthread_mutex_unlock(&a->mu);
    if (oom) {
        job_fail(a, j, 500, "server_error", NULL, "out of memory while keeping the reply");
        slm_session_reset(s);
        release(a, i);
        return;
    }
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
                a->m.cancelled++;
                j->finish = "cancelled";
                j->state = J_DONE;
                srv_job_changed(a, j);
                a->slot_job[i] = NULL;
                a->slot_left[i] = 0;
                a->running--;
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
        /* a prompt goes in whole, unless slots are decoding: then --prefill-chunk tokens of
           prompts per step, so that their streams go on while a long prompt is read */
        int decoding = 0;
        for (int i = 0; i < a->n_slots; i++) decoding |= a->slot_job[i] && a->slot_job[i]->accepted;
        int budget = decoding && a->prefill_chunk > 0 ? a->prefill_chunk : INT_MAX;
        int nf = admit(a, fresh, fresh_slot);
        for (int k = 0; k < nf; k++)
            if (fresh[k]->cancelled) { /* gone while it waited */
                a->m.cancelled++;
                fresh[k]->finish = "cancelled";
                fresh[k]->state = J_DONE;
                srv_job_changed(a, fresh[k]);
                a->slot_job[fresh_slot[k]] = NULL;
                a->running--;
                srv_job_unref(fresh[k]);
                fresh_slot[k] = -1;
            }
        pthread_mutex_unlock(&a->mu);
        embed_together(a, nf, fresh_slot);
        for (int k = 0; k < nf; k++)
            if (fresh_slot[k] >= 0) start_job(a, fresh_slot[k], &budget);
        prompt_steps(a, budget);
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
        slm_trace_name_thread("server worker");
        const uint64_t t0 = slm_trace_begin();
        const double w0 = wall_s();
        slm_session_next_batch(ss, n, ids, NULL, sts);
        const double w1 = wall_s();
        slm_trace_end("http", "batch_step", t0, &(slm_trace_args){{"slots"}, {n}, NULL, NULL});
        for (int k = 0; k < n; k++) after_step(a, who[k], ids[k], sts[k]);
        long rows = 0;
        for (int i = 0; i < a->n_slots; i++) rows += slm_session_n_past(a->slot_sess[i]);
        pthread_mutex_lock(&a->mu);
        a->m.steps++;
        a->m.step_s += w1 - w0;
        a->m.kv_rows = rows;
        pthread_mutex_unlock(&a->mu);
    }
    return NULL;
}

#endif /* SLM_HAVE_SERVE */
