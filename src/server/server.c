/* server/server.c — `staticlm serve`'s start and stop (server.h), the top
 * of server/: it makes the API (api.c, which starts the worker) and the
 * transport (http.c), starts the transport with the API's functions as its
 * handlers (http.h), and stops and frees both in order. */
#include "server/server.h"

#ifdef SLM_HAVE_SERVE

#include <string.h>

#include "common/common.h"
#include "server/api.h"
#include "server/http.h"
#include "text/reasoning.h"

struct slm_server {
    http_server *http;
    srv_api *api;
};

void slm_server_cfg_init(slm_server_cfg *c) {
    memset(c, 0, sizeof *c);
    c->host = "127.0.0.1";
    c->port = 8080;
    c->queue = 8;
    c->parallel = 4;
    c->prefill_chunk = 128;
    c->max_conn = 512;
    c->max_conn_per_ip = 64;
    c->idle_timeout_s = 15;
    c->request_timeout_s = 30;
    c->http_threads = 4;
    c->body_budget = (size_t)64 << 20;
    c->samp.temperature = 1.0f;
    c->samp.top_p = 1.0f;
    c->samp.repeat_penalty = 1.0f;
    c->samp.repeat_last_n = 64;
    c->reasoning = SLM_REASON_AUTO;
    c->pooling = SLM_POOLING_DEFAULT;
}

/* The transport's handlers: the API's functions, with the API as user data. */
static int on_admit(void *a, srv_req *r, char *msg, size_t msgcap) { return api_admit(a, r, msg, msgcap); }
static int on_handle(void *a, srv_req *r) { return api_handle(a, r); }
static void on_cancel(void *a, srv_req *r) { api_cancel(a, r); }
static void on_done(void *a, srv_req *r, int aborted, int *pt, int *ct, const char **fin) {
    api_done(a, r, aborted, pt, ct, fin);
}
static void on_stop(void *a) { api_stop(a); }

slm_server *slm_server_start(slm_engine *e, const slm_tmpl *tm, const slm_server_cfg *cfg, slm_err *err) {
    http_server *http = http_new(cfg, err); /* the address is checked before anything starts */
    if (!http) return NULL;
    slm_server *s = slm_calloc(1, sizeof *s);
    if (!s) {
        slm_errf(err, SLM_ERR_NOMEM, "out of memory");
        http_free(http);
        return NULL;
    }
    s->http = http;
    if ((s->api = api_new(e, tm, cfg, err))) {
        const http_handlers h = {s->api, on_admit, on_handle, on_cancel, on_done, on_stop};
        if (!http_listen(s->http, &h, err)) return s;
    }
    api_free(s->api);
    http_free(s->http);
    slm_xfree(s);
    return NULL;
}

int slm_server_port(const slm_server *s) { return http_port(s->http); }

void slm_server_stop(slm_server *s) {
    if (!s) return;
    /* no new connections; api_stop: queued jobs fail 503, the running one
     * stops, their requests wake; then the transport's threads end */
    http_stop(s->http);
    api_free(s->api);
    http_free(s->http);
    slm_xfree(s);
}

#endif /* SLM_HAVE_SERVE */
