/* server/jobs.h — the job queue shared by the endpoints (api.c) and the
 * worker (worker.c). One engine, --parallel slots: a request becomes a job,
 * waits in a bounded queue until a slot is free, and the worker thread
 * renders, tokenizes and generates it together with the other slots' jobs,
 * publishing text as it goes. */
#ifndef SLM_SERVER_JOBS_H
#define SLM_SERVER_JOBS_H

#include <pthread.h>
#include <stdatomic.h>

#include "common/common.h"
#include "server/http.h"
#include "server/request.h"
#include "text/chat_template.h"
#include "text/chat_tok.h"
#include "text/reasoning.h"
#include "text/toolcall.h"
#include "staticlm.h"

enum { J_QUEUED, J_RUNNING, J_DONE, J_FAILED };

/* An embedding request's inputs and results (api_embed.c). */
typedef struct srv_embed srv_embed;

#define SRV_MAX_SLOTS 64

/* A tool call the reply made (text/toolcall.h), as it streams. */
typedef struct srv_call {
    char id[40];            /* "call_..." (mistral: 9 letters and digits, as its template wants) */
    char *name;             /* slm_malloc'd */
    char *args;             /* the arguments so far [alen] + NUL (slm_malloc'd) */
    size_t alen, acap;
    int done;               /* SLM_TOOL_END came */
    int head_sent;          /* the stream sent its id and name */
    size_t asent;           /* bytes of args the stream sent */
} srv_call;

/* A token's log-probabilities as the reply shows them (logprobs asked):
 * its text and its alternatives' in the job's lptext. */
typedef struct srv_lp_tok {
    float lp;
    uint32_t off, len;      /* the text in lptext */
} srv_lp_tok;

typedef struct srv_lp {
    srv_lp_tok tok;
    size_t text_offset;     /* where it starts in the session's reply text */
    int n_top;
    srv_lp_tok top[SLM_MAX_TOP_LOGPROBS];
} srv_lp;

typedef struct job {
    int refs;               /* under a->mu: the queue/worker, the request, the stream (and, for
                               choice 0, each later choice: they borrow its request) */
    srv_request q;          /* what was asked (owned; a later choice's borrows choice 0's) */
    /* a request with n > 1 is n jobs, one per choice, queued together: each
       runs on a slot of its own as any job (one after another on one slot,
       side by side on several); the request and its stream hold choice 0 */
    int choice;             /* its index in the answer's choices, 0..n-1 */
    struct job *sib;        /* the request's next choice (NULL: the last) */
    struct job *first;      /* a later choice: choice 0 (a reference held) */
    int role_sent, fin_sent;/* the stream sent this choice's role chunk (chat); its last chunk */
    srv_req *req;           /* the request waiting for it (under a->mu; NULL once it ended) */
    /* progress, under a->mu */
    int state, accepted;
    _Atomic int cancelled;  /* the client left or the server stops; the template
                               renderer reads it too (slm_tmpl_vars.cancel) */
    int status;             /* J_FAILED: the HTTP status */
    char err[512];
    const char *err_code, *err_param;
    char *text;             /* the published reply [tlen] + NUL (complete UTF-8, no stop string):
                               chat, the answer (content) */
    size_t tlen, tcap;
    char *rtext;            /* chat: the published reasoning [rlen] + NUL (reasoning_content) */
    size_t rlen, rcap;
    size_t raw;             /* bytes of the session's text split into text and rtext so far */
    int oom;                /* a piece of the split reply could not be kept: the job fails */
    slm_reason rs;          /* the splitter (format none: all is text) */
    int reasoning;          /* the format it runs (resolved) */
    slm_toolcall tc;        /* chat: the tool call parser (format none: all is text); it reads
                               the answer, or (harmony) the reply before the splitter */
    int tool_fmt;           /* the format it runs (SLM_TOOL_NONE: no tools, or tool_choice none) */
    srv_call *calls;        /* [ncalls] (under a->mu) */
    int ncalls, ccalls;
    int skip_call;          /* parallel_tool_calls false: the current call is a second one, dropped */
    int prompt_tokens, completion_tokens;
    int cached_tokens;      /* prompt tokens whose KV rows were reused (slot or prefix cache) */
    const char *finish;     /* "stop" | "length" | "cancelled" */
    int native;             /* llama-server's POST /completion: its answer's form (api_native.c) */
    int stop_why;           /* the session's stop reason (SLM_STOP_*) */
    int stop_word;          /* SLM_STOP_STRING: 1 + the index in q.stop of the one that ended the reply (0: none) */
    double prompt_ms, predicted_ms; /* the job's prefill and decode time (its session's) */
    srv_lp *lps;            /* logprobs asked: one per token returned [nlp] (under a->mu) */
    int nlp, clp;
    int lp_pub;             /* of them, those whose text is published (not held back, not cut) */
    int lp_sent;            /* ... and sent by the stream */
    char *lptext;           /* their texts [lptlen] */
    size_t lptlen, lptcap;
    srv_embed *emb;         /* an embedding job (api_embed.c), else NULL */
    /* q.n_indent / q.t_max_predict_ms (worker.c line_limits): the reply's bytes scanned, the
       start of its current line after a newline (0: none yet), that line's indent checked,
       when its first token came */
    size_t lim_scan, lim_line;
    int lim_checked;
    double gen_t0;
    struct job *next;
    /* the event stream's writer (one MHD thread at a time) */
    int phase;
    size_t sent, rsent;     /* bytes of text and rtext sent */
    char *pend;
    size_t plen, poff;
    char id[48];
    long created;
} job;

/* What GET /metrics reports (under srv_api.mu). */
typedef struct srv_metrics {
    unsigned long long ok, failed, cancelled, rejected; /* requests that reached the queue, by outcome; 503s */
    unsigned long long prompt_tokens, cached_tokens, predicted_tokens, steps;
    double prompt_s, step_s;    /* prefill time of the prompts; wall time of the decode steps */
    long kv_rows;               /* KV rows the slots' sessions hold after the last step */
    unsigned long long embed_joined; /* embedding requests answered in a batch call with others' */
} srv_metrics;

typedef struct srv_api srv_api;
struct srv_api {
    pthread_mutex_t mu;
    pthread_cond_t work;
    job *head, *tail;
    int queued, running, queue_max, stop; /* jobs waiting for a slot; slots running a job */
    unsigned long next_id;
    slm_engine *e;
    const slm_tmpl *tm;
    slm_chat_tok *tok;
    slm_info info;
    size_t max_prompt_bytes; /* a prompt longer than this cannot fit the KV capacity:
                                refused without tokenizing (capacity x the longest piece x 2) */
    char model_name[128];
    slm_sampling samp;      /* what a request's missing sampling fields take (serve's options) */
    int seed_set;           /* samp.seed is serve's --seed: requests without a seed take it */
    int reasoning;          /* a request's default format (--reasoning-format, AUTO resolved) */
    int reasoning_auto;     /* what auto means for this model */
    int tool_auto;          /* the tool call format of this model (SLM_TOOL_*, by its template and vocabulary) */
    const char *kwargs[8];  /* the server's template kwargs [n_kwargs] */
    int n_kwargs;
    int n_slots;            /* --parallel: sessions decoding together */
    slm_session *slot_sess[SRV_MAX_SLOTS];
    job *slot_job[SRV_MAX_SLOTS]; /* the job each slot runs (NULL: free); under mu */
    int slot_gen0[SRV_MAX_SLOTS]; /* the session's n_generated when the job started */
    int slot_left[SRV_MAX_SLOTS]; /* prompt ids still to prefill (slm_session_prompt_step) */
    int slot_reused0[SRV_MAX_SLOTS]; /* the session's n_reused when the job started */
    int slot_prompt[SRV_MAX_SLOTS];  /* the job's prompt tokens */
    int slot_pieces[SRV_MAX_SLOTS];  /* prefill calls its prompt took so far */
    int prefill_chunk;      /* --prefill-chunk (0: whole prompts) */
    int verbose;
    long started;
    job *current;           /* the job the worker runs, or NULL */
    srv_metrics m;
    double slot_prefill0[SRV_MAX_SLOTS]; /* the session's prefill_ms when the job started */
    double slot_decode0[SRV_MAX_SLOTS];  /* ... and its decode_ms */
    pthread_t worker;
    int worker_started;
    int embeddings;         /* --embeddings: the embedding endpoints answer */
    int encoder;            /* the model is an encoder: the text endpoints answer 501 */
    int pooling;            /* their pooling (--pooling, else the model file's) */
    int spm_infill;         /* --spm-infill: /infill puts the suffix before the prefix */
};

/* api_native.c: llama-server's /completion answer (under a->mu or after
 * the job is done): the whole one, and a stream chunk of text t[0..n). */
cJSON *srv_native_result(const srv_api *a, const job *j);
cJSON *srv_native_chunk(const job *j, const char *t, size_t n);

/* api.c: queue j for the worker (taking the request's reference and the
 * queue's): HTTP_WAIT; when the queue is full or the server stops, j is
 * freed and the request answered 503 (HTTP_DONE, or HTTP_DROP when that
 * failed). */
int srv_submit(srv_api *a, srv_req *r, job *j);
/* api.c: a completion job whose request j->q is parsed (its prompt ids
 * not yet checked against the vocabulary): checked, its choices made and
 * submitted (native: llama-server's /completion answer); handle's return
 * values (j freed on a refusal). */
int srv_completion_submit(srv_api *a, srv_req *r, job *j, int native);
/* api_embed.c: free an embedding job's part; run its inputs on a slot's
 * session (the worker; 0 with *status and msg when one fails); its tokens. */
void srv_embed_free(srv_embed *m);
int srv_embed_run(srv_api *a, srv_embed *m, slm_session *s, int *status, char *msg, size_t cap);
/* Several requests' inputs (embeddings of one pooling, no rerank) through
 * one slm_session_embed_batch on s: 1 when every one is answered; 0 when
 * one is refused or the call failed, and then none is (run each alone
 * with srv_embed_run for its own answer). */
int srv_embed_run_many(srv_api *a, srv_embed *const *m, int k, slm_session *s);
/* 1 when m may join first's srv_embed_run_many (first NULL: may start one). */
int srv_embed_joinable(const srv_embed *m, const srv_embed *first);
int srv_embed_tokens(const srv_embed *m);

/* worker.c */
void *srv_worker_main(void *api);
/* Drop a reference (under a->mu); frees the job at zero. */
void srv_job_unref(job *j);
/* The job's state or text changed (under a->mu): wake its request. */
void srv_job_changed(srv_api *a, job *j);

#endif
