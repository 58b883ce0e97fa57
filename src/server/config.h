/* server/config.h — slm_server_cfg: how `staticlm serve` was asked to run
 * (cli/serve.c fills it; slm_server_cfg_init in server.h gives the
 * defaults). The transport (http.c) reads the address, the connection
 * limits, deadlines and who may ask; the API (api.c) the queue, the slots
 * and the model's name. */
#ifndef SLM_SERVER_CONFIG_H
#define SLM_SERVER_CONFIG_H

#include <stddef.h>

#include "staticlm.h"

typedef struct slm_server_cfg {
    const char *host;       /* IPv4 address to listen on (default 127.0.0.1) */
    int port;               /* TCP port; 0 = any free port */
    int queue;              /* requests that may wait for a slot; more get 503 */
    int parallel;           /* slots: requests decoded together (at most the engine's n_seqs) */
    int prefill_chunk;      /* while other slots decode, a new prompt goes in this many tokens
                               per decode step (default 128); 0 = whole, before the next step */
    const char *model_name; /* the id /v1/models reports */
    slm_sampling samp;      /* the sampling of a request's missing fields (serve's --temp, --top-p, ...;
                               default OpenAI's: temperature 1, top_p 1, the rest off) */
    int seed_set;           /* samp.seed given (--seed): requests without a seed take it */
    int embeddings;         /* --embeddings: POST /v1/embeddings, /embedding answer (the engine
                               compiled its embedding programs) */
    int pooling;            /* --pooling (slm_pooling; SLM_POOLING_DEFAULT: the model file's) */
    int spm_infill;         /* --spm-infill: /infill's prompt in suffix-prefix-middle order */
    int verbose;
    /* chat replies: reasoning apart from the answer, template variables */
    int reasoning;          /* SLM_REASON_* (text/reasoning.h) a request without
                               reasoning_format gets (default AUTO: by the model) */
    const char *const *kwargs; /* [n_kwargs] checked JSON objects (--chat-template-kwargs,
                               --no-think) under each request's chat_template_kwargs */
    int n_kwargs;
    /* hostile clients: bounded work and memory */
    int max_conn;           /* connections at once (default 512; at most the open-file limit less 64) */
    int max_conn_per_ip;    /* connections at once from one client address (default 64) */
    int idle_timeout_s;     /* a connection silent this long is closed (default 15) */
    int request_timeout_s;  /* a request's headers and body must arrive within this (default 30) */
    int http_threads;       /* threads polling the sockets (default 4) */
    size_t body_budget;     /* bytes of request bodies buffered at once, all clients (default 64 MiB) */
    /* who may ask */
    const char *api_key;    /* NULL: none; else every endpoint but /health needs "Authorization: Bearer KEY" */
    const char *cors_origin;/* NULL: requests with a foreign Origin get 403; else the origin admitted
                               (answers carry CORS headers); "*" admits any */
    const char *allow_hosts[8]; /* Host names accepted besides localhost, 127.0.0.1, [::1] and host */
    int n_allow_hosts;      /* "*" among them accepts any Host */
} slm_server_cfg;

#endif
