/* server/ — `staticlm serve`: an OpenAI-compatible HTTP server for one
 * engine. The CLI (cli/serve.c) parses the options into a slm_server_cfg,
 * opens the engine and the chat template, and starts the server; the
 * server depends on engine/ and below only.
 *
 * Inside, top down: server.c (this header: start and stop) makes the API
 * (api.c: the OpenAI endpoints, JSON responses, the job queue) and the
 * transport (http.c: libmicrohttpd, connection limits, body reading, error
 * bodies, server-sent-event plumbing), and starts the transport with the
 * API's handlers (http.h), so http.c knows no endpoint; api.c starts the
 * worker (worker.c: the generation loop), which wakes requests through
 * http.h. request.c parses request bodies; config.h holds slm_server_cfg. */
#ifndef SLM_SERVER_H
#define SLM_SERVER_H

#include "common/common.h"
#include "server/config.h"
#include "text/chat_template.h"
#include "staticlm.h"

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
