/* server/api.h — the job queue shared by the endpoints (api.c) and the
 * generation worker (worker.c). One engine, batch 1: a request becomes a
 * job, waits in a bounded queue, and the single worker thread renders,
 * tokenizes and generates it, publishing text as it goes. */
#ifndef SLM_SERVER_API_H
#define SLM_SERVER_API_H

#include <pthread.h>

#include "server/http.h"
#include "server/request.h"

enum { J_QUEUED, J_RUNNING, J_DONE, J_FAILED };

typedef struct job {
    int refs;               /* under a->mu: the queue/worker, the request, the stream */
    srv_request q;          /* what was asked (owned) */
    srv_req *req;           /* the request waiting for it (under a->mu; NULL once it ended) */
    /* progress, under a->mu */
    int state, accepted, cancelled;
    int status;             /* J_FAILED: the HTTP status */
    char err[512];
    const char *err_code, *err_param;
    char *text;             /* the published reply [tlen] + NUL (complete UTF-8, no stop string) */
    size_t tlen, tcap;
    int prompt_tokens, completion_tokens;
    const char *finish;     /* "stop" | "length" | "cancelled" */
    struct job *next;
    /* the event stream's writer (one MHD thread at a time) */
    int phase;
    size_t sent;
    char *pend;
    size_t plen, poff;
    char id[48];
    long created;
} job;

struct srv_api {
    pthread_mutex_t mu;
    pthread_cond_t work;
    job *head, *tail;
    int queued, running, queue_max, stop; /* jobs waiting; 1 while the worker runs one */
    unsigned long next_id;
    slm_engine *e;
    const slm_tmpl *tm;
    slm_chat_tok *tok;
    slm_info info;
    size_t max_prompt_bytes; /* a prompt longer than this cannot fit the KV capacity:
                                refused without tokenizing (capacity x the longest piece x 2) */
    char model_name[128];
    float *logits;          /* [vocab] the sampler's copy */
    void *scratch;          /* slm_sample_scratch_size(vocab) */
    long started;
    pthread_t worker;
    int worker_started;
};

/* worker.c */
void *srv_worker_main(void *api);
/* Drop a reference (under a->mu); frees the job at zero. */
void srv_job_unref(job *j);
/* The job's state or text changed (under a->mu): wake its request. */
void srv_job_changed(srv_api *a, job *j);

#endif
