/* server/ — `staticlm serve`: an OpenAI-compatible HTTP server for one
 * engine. The CLI (cli/serve.c) parses the options into a slm_server_cfg,
 * opens the engine and the chat template, and starts the server; the
 * server depends on engine/ and below only.
 *
 * Inside: http.c (libmicrohttpd, connection limits, body reading, error
 * bodies, server-sent-event plumbing) below api.c (the OpenAI endpoints,
 * JSON responses, the job queue) and worker.c (the generation loop);
 * request.c parses request bodies. http.h is the seam between them. */
#ifndef SLM_SERVER_H
#define SLM_SERVER_H

#include <stddef.h>

#include "engine/chat.h"
#include "staticlm.h"

typedef struct slm_server_cfg {
    const char *host;       /* IPv4 address to listen on (default 127.0.0.1) */
    int port;               /* TCP port; 0 = any free port */
    int queue;              /* requests that may wait for a slot; more get 503 */
    int parallel;           /* slots: requests decoded together (at most the engine's n_seqs) */
    const char *model_name; /* the id /v1/models reports */
    int verbose;
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

void slm_server_cfg_init(slm_server_cfg *c);

typedef struct slm_server slm_server;

/* Start serving e (and tm for chat requests) on threads of its own. Neither
 * is owned; both must outlive the server. NULL with err set when the
 * address cannot be bound or memory runs out. */
slm_server *slm_server_start(slm_engine *e, const slm_tmpl *tm, const slm_server_cfg *cfg, slm_err *err);
/* The port it listens on (the one chosen when cfg->port was 0). */
int slm_server_port(const slm_server *s);
/* Stop: waiting requests get 503, the running one is cancelled; joins the
 * threads and frees the server. */
void slm_server_stop(slm_server *s);

#endif
