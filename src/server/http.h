/* server/http.h — the transport of `staticlm serve` (http.c: libmicrohttpd,
 * connections, limits, bodies, error bodies, event streams) and the seam
 * to the application above it (api.c: endpoints, jobs; worker.c:
 * generation).
 *
 * http.c knows no endpoint: it calls the application only through the
 * http_handlers it is given at http_listen. It reads a request's body
 * (bounded), then calls handle; the application answers through the
 * http_send_* functions. Nothing above this line knows libmicrohttpd. */
#ifndef SLM_SERVER_HTTP_H
#define SLM_SERVER_HTTP_H

#include <stddef.h>
#include <time.h>

#include "common/common.h"
#include "server/config.h"

#define HTTP_BODY_LIMIT (4u << 20) /* bytes of a request body */

struct MHD_Connection;
typedef struct cJSON cJSON;

struct http_server;

/* One request, as the application sees it. Owned by http.c. */
typedef struct srv_req {
    char method[8], path[80];
    char *body;             /* [len] + NUL; NULL when empty */
    size_t len, cap;
    int too_big;            /* the body passed HTTP_BODY_LIMIT (the rest was dropped) */
    int status, stream;     /* for the log line: the status sent, a stream */
    void *job;              /* the application's state for this request, or NULL */
    int fd;                 /* the client's socket (to notice it leaving) */
    struct MHD_Connection *conn;
    struct http_server *srv;
    struct timespec t0;
    /* http.c's (under the server's lock) */
    int suspended, wake;    /* the connection is suspended; a wake-up came while it was not */
    int cors;               /* answers carry Access-Control-Allow-Origin */
    const char *origin;     /* the request's Origin (valid while it runs) */
    size_t reserved;        /* bytes of the body budget held */
    int over_budget;
    int refused, handled;   /* answered once the headers were in; handle called */
    /* refused while its body is on the way: the body is read and dropped,
     * then this answer goes (an answer before the body makes clients see a reset) */
    int defer_status;
    const char *defer_code, *defer_hname, *defer_hval;
    char defer_msg[200];
    size_t dropped;         /* body bytes dropped */
} srv_req;

/* What the handle handler answers. */
enum { HTTP_DROP = 0, HTTP_DONE = 1, HTTP_WAIT = 2 };

/* ---- answers (http.c); each returns 1 when queued, 0 to drop the connection */

/* Send o (consumed) as application/json. */
int http_send_json(srv_req *r, int status, cJSON *o);
/* Send body (slm_malloc'd, consumed) as ctype. */
int http_send_text(srv_req *r, int status, const char *ctype, char *body);
/* An OpenAI error body {"error": {"message", "type", "param", "code"}}. */
int http_send_error(srv_req *r, int status, const char *type, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* A text/event-stream answer whose bytes come from read(cls, buf, max):
 * > 0 bytes written, 0 = nothing yet (the connection sleeps until
 * http_wake), HTTP_STREAM_END, or HTTP_STREAM_ERROR (drops the
 * connection). free_fn(cls) runs when the answer is done with. */
enum { HTTP_STREAM_END = -1, HTTP_STREAM_ERROR = -2 };
typedef long (*http_stream_fn)(void *cls, char *buf, size_t max);
int http_send_stream(srv_req *r, http_stream_fn read, void *cls, void (*free_fn)(void *cls));
/* Wake r (from any thread): a request that handle answered HTTP_WAIT gets
 * handle again, a stream that had nothing gets read again. */
void http_wake(srv_req *r);

/* ---- the application: what the transport calls (ud: its state) */

typedef struct http_handlers {
    void *ud;
    /* Once the headers are in, before the body is read: 1 = go on; 0 = the
     * queue is full (msg says so; the transport answers 503 queue_full).
     * Nothing costly. */
    int (*admit)(void *ud, srv_req *r, char *msg, size_t msgcap);
    /* Answer r (its body read in full): HTTP_DONE (answered), HTTP_DROP
     * (drop the connection) or HTTP_WAIT (nothing yet: called again after
     * http_wake). Never blocks: it runs on the threads that poll sockets. */
    int (*handle)(void *ud, srv_req *r);
    /* The client of r is gone (seen while its connection slept): stop its work. */
    void (*cancel)(void *ud, srv_req *r);
    /* r is finished (aborted: the client went away): release the
     * application's state; the token counts and finish reason for the log
     * line go to *pt, *ct, *fin. */
    void (*done)(void *ud, srv_req *r, int aborted, int *pt, int *ct, const char **fin);
    /* Refuse new work and answer what waits, so that every sleeping request
     * wakes (the transport is stopping). */
    void (*stop)(void *ud);
} http_handlers;

/* ---- the transport's life (server.c) */

typedef struct http_server http_server;
/* Check cfg's address and set up (cfg is copied; its strings must outlive
 * the transport); nothing listens yet. NULL with err set. */
http_server *http_new(const slm_server_cfg *cfg, slm_err *err);
/* Listen and serve through h (copied): SLM_OK, or err set and nothing
 * listening (h->stop has run when the daemon had started). */
slm_status http_listen(http_server *s, const http_handlers *h, slm_err *err);
/* The port it listens on (the one chosen when cfg->port was 0). */
int http_port(const http_server *s);
/* Stop: no new connections, h->stop, the monitor joined, every sleeping
 * request woken, the daemon stopped (its threads joined). */
void http_stop(http_server *s);
/* Free s (stopped, or never listening). */
void http_free(http_server *s);

#endif
