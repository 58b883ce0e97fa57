/* server/api.h — the OpenAI endpoints (api.c) as server.c sees them: make
 * the API (the job queue, the slots' sessions, the worker thread), then
 * hand its functions to the transport (http.h) as the handlers. */
#ifndef SLM_SERVER_API_H
#define SLM_SERVER_API_H

#include <stddef.h>

#include "common/common.h"
#include "server/config.h"
#include "server/http.h"
#include "server/jobs.h"
#include "text/chat_template.h"
#include "staticlm.h"

/* The API of one engine: the slots' sessions, the worker thread started.
 * NULL with err set. */
srv_api *api_new(slm_engine *e, const slm_tmpl *tm, const slm_server_cfg *cfg, slm_err *err);
/* http_handlers' admit, handle, cancel and done (http.h says when each is
 * called and what it answers): the queue's check, the endpoints, the
 * job's cancel flag, the job let go. */
int api_admit(srv_api *a, srv_req *r, char *msg, size_t msgcap);
int api_handle(srv_api *a, srv_req *r);
void api_cancel(srv_api *a, srv_req *r);
void api_done(srv_api *a, srv_req *r, int aborted, int *pt, int *ct, const char **fin);
/* POST /tokenize and /detokenize (api_tokens.c): answered on the calling
 * thread; HTTP_DONE or HTTP_DROP as handle's. */
int api_tokenize(srv_api *a, srv_req *r);
int api_detokenize(srv_api *a, srv_req *r);
/* POST /v1/embeddings (oai 1), llama-server's /embedding, /embeddings (0)
 * and /v1/rerank (2) (api_embed.c): a job for the worker; handle's return
 * values. */
int api_embeddings(srv_api *a, srv_req *r, int oai);
/* POST /infill (api_infill.c): llama-server's fill in the middle, its
 * prompt built from the model's FIM tokens and submitted as a /completion
 * job; handle's return values. */
int api_infill(srv_api *a, srv_req *r);
/* ... and stop: refuse new work, cancel the running job, answer waiting
 * ones 503; joins the worker. */
void api_stop(srv_api *a);
/* Stop (if not yet) and free. */
void api_free(srv_api *a);

#endif
