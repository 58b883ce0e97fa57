/* server/http.c — the HTTP layer of `staticlm serve` on libmicrohttpd.
 *
 * Threads: a few threads poll every socket (epoll); no thread belongs to a
 * connection, so idle or slow clients hold only a socket and their (small,
 * bounded) buffers. Handlers never block: a request waiting for its job is
 * suspended and woken by the worker (http_wake). A monitor thread closes
 * connections whose request has not arrived within the request deadline
 * (slowloris) and cancels the work of clients that left while their
 * connection slept.
 *
 * Limits: connections at once, per client address, idle timeout, request
 * deadline, body size, and the bytes of bodies buffered over all clients.
 * Policy before any body is read: the Host header on an allow-list (DNS
 * rebinding), a foreign Origin refused unless admitted with CORS, browser
 * form bodies (text/plain, multipart) refused, the API key, and the queue
 * (the admit handler). Then the application's handlers answer (http.h): the
 * transport knows no endpoint. Its life (http_new, http_listen, http_stop,
 * http_free) is server.c's to drive. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* POLLRDHUP */
#endif
#include "server/http.h"

#ifdef SLM_HAVE_SERVE

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/common.h"
#include "common/json.h"
#include "common/trace.h"
#include "server/request.h"

#define MAX_NAMES 16 /* Host names allowed */

/* One connection (MHD's socket context), in the server's list. */
typedef struct conn_rec {
    struct conn_rec *prev, *next;
    int fd;
    struct timespec since; /* accepted, or its previous request ended */
    int busy;              /* its request was read in full: no deadline */
    int shut;              /* the monitor shut it down */
    srv_req *req;          /* the request under way, or NULL */
} conn_rec;

struct http_server {
    struct MHD_Daemon *d;
    http_handlers h;       /* the application */
    slm_server_cfg cfg;
    struct sockaddr_in addr; /* cfg's host and port */
    const char *host;      /* that address in words, for messages */
    int port;
    pthread_mutex_t mu;    /* conns, body_bytes, each srv_req's http fields */
    conn_rec *conns;
    size_t body_bytes;     /* reserved by requests being read */
    const char *names[MAX_NAMES];
    int n_names, any_host;
    pthread_t monitor;
    int monitor_started, stopping;
    pthread_cond_t monitor_cv;
};

static double ms_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

/* 1 when the peer of socket fd has closed its end (or the socket failed). */
static int client_gone(int fd) {
    if (fd < 0) return 0;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return 0;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return 1;
    if (p.revents & POLLIN) {
        char c;
        ssize_t k = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (k == 0) return 1;
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return 1;
    }
    return 0;
}

/* ---- sleeping and waking ---------------------------------------------------------- */

/* Suspend r's connection (from its handler or content reader); a wake-up
 * that came meanwhile resumes it at once. */
static void http_suspend(srv_req *r) {
    http_server *s = r->srv;
    MHD_suspend_connection(r->conn);
    pthread_mutex_lock(&s->mu);
    int wake = r->wake;
    r->wake = 0;
    r->suspended = !wake;
    pthread_mutex_unlock(&s->mu);
    if (wake) MHD_resume_connection(r->conn);
}

void http_wake(srv_req *r) {
    http_server *s = r->srv;
    pthread_mutex_lock(&s->mu);
    int resume = r->suspended;
    r->suspended = 0;
    if (!resume) r->wake = 1;
    pthread_mutex_unlock(&s->mu);
    /* resumed only by whoever cleared r->suspended: still suspended here */
    if (resume) MHD_resume_connection(r->conn);
}

/* ---- answers ------------------------------------------------------------------- */

static void free_body(void *p) { slm_xfree(p); }

static void add_cors(srv_req *r, struct MHD_Response *resp) {
    if (!r->cors || !r->origin) return;
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", r->origin);
    MHD_add_response_header(resp, "Vary", "Origin");
}

static int queue(srv_req *r, int status, struct MHD_Response *resp) {
    add_cors(r, resp);
    r->status = status;
    enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ret == MHD_YES;
}

/* body (slm_malloc'd) is consumed. */
static int send_body(srv_req *r, int status, const char *ctype, char *body, const char *hname, const char *hval) {
    struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback(strlen(body), body, free_body);
    if (!resp) { slm_xfree(body); return 0; }
    MHD_add_response_header(resp, "Content-Type", ctype);
    if (hname) MHD_add_response_header(resp, hname, hval);
    return queue(r, status, resp);
}

int http_send_text(srv_req *r, int status, const char *ctype, char *body) {
    return body ? send_body(r, status, ctype, body, NULL, NULL) : 0;
}

int http_send_json(srv_req *r, int status, cJSON *o) {
    char *s = o ? cJSON_PrintUnformatted(o) : NULL; /* slm_malloc'd (common/json.h) */
    cJSON_Delete(o);
    if (!s) return 0;
    return send_body(r, status, "application/json", s, NULL, NULL);
}

static int send_errorv(srv_req *r, int status, const char *type, const char *param, const char *code,
                       const char *hname, const char *hval, const char *fmt, va_list ap) {
    char msg[600];
    vsnprintf(msg, sizeof msg, fmt, ap);
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    char *clean = srv_utf8_clean(msg, strlen(msg));
    cJSON_AddStringToObject(e, "message", clean ? clean : "error");
    slm_xfree(clean);
    cJSON_AddStringToObject(e, "type", type);
    if (param) cJSON_AddStringToObject(e, "param", param);
    else cJSON_AddNullToObject(e, "param");
    if (code) cJSON_AddStringToObject(e, "code", code);
    else cJSON_AddNullToObject(e, "code");
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) return 0;
    return send_body(r, status, "application/json", s, hname, hval);
}

int http_send_error(srv_req *r, int status, const char *type, const char *param, const char *code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int ok = send_errorv(r, status, type, param, code, NULL, NULL, fmt, ap);
    va_end(ap);
    return ok;
}

/* An error with one extra response header (WWW-Authenticate, Allow). */
static int send_error_h(srv_req *r, int status, const char *code, const char *hname, const char *hval, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static int send_error_h(srv_req *r, int status, const char *code, const char *hname, const char *hval, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int ok = send_errorv(r, status, status >= 500 ? "server_error" : "invalid_request_error", NULL, code, hname, hval,
                         fmt, ap);
    va_end(ap);
    return ok;
}

typedef struct stream_cb {
    srv_req *r;
    http_stream_fn read;
    void *cls;
    void (*free_fn)(void *);
} stream_cb;

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    stream_cb *s = cls;
    (void)pos;
    long k = s->read(s->cls, buf, max);
    if (k == 0) http_suspend(s->r); /* MHD calls again once woken */
    if (k == HTTP_STREAM_END) return MHD_CONTENT_READER_END_OF_STREAM;
    if (k < 0) return MHD_CONTENT_READER_END_WITH_ERROR;
    return (ssize_t)k;
}

static void stream_done(void *cls) {
    stream_cb *s = cls;
    s->free_fn(s->cls);
    slm_xfree(s);
}

int http_send_stream(srv_req *r, http_stream_fn read, void *cls, void (*free_fn)(void *)) {
    stream_cb *s = slm_malloc(sizeof *s);
    if (!s) { free_fn(cls); return 0; }
    *s = (stream_cb){r, read, cls, free_fn};
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_reader, s, stream_done);
    if (!resp) { stream_done(s); return 0; }
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    return queue(r, 200, resp);
}

/* ---- who may ask ---------------------------------------------------------------------- */

/* The Host header: an allowed name, with this server's port (or none for
 * port 80). A request without one (HTTP/1.0) passes: browsers always send it. */
static int host_ok(const http_server *s, const char *h) {
    if (!h || s->any_host) return 1;
    const char *colon;
    size_t nl;
    if (h[0] == '[') {
        const char *rb = strchr(h, ']');
        if (!rb) return 0;
        nl = (size_t)(rb - h) + 1;
        colon = rb[1] ? rb + 1 : NULL;
        if (colon && *colon != ':') return 0;
    } else {
        colon = strchr(h, ':');
        nl = colon ? (size_t)(colon - h) : strlen(h);
    }
    long port = 80;
    if (colon) {
        char *end;
        errno = 0;
        port = strtol(colon + 1, &end, 10);
        if (errno || *end || end == colon + 1) return 0;
    }
    if (port != s->port) return 0;
    for (int i = 0; i < s->n_names; i++)
        if (strlen(s->names[i]) == nl && !strncasecmp(s->names[i], h, nl)) return 1;
    return 0;
}

/* An Origin header (a browser's request): the admitted CORS origin, or
 * this server itself (http:// + its allowed Host). *cors: answer with CORS
 * headers. */
static int origin_ok(const http_server *s, const char *origin, const char *host, int *cors) {
    *cors = 0;
    if (!origin) return 1;
    const char *co = s->cfg.cors_origin;
    if (co && (!strcmp(co, "*") || !strcasecmp(origin, co))) {
        *cors = 1;
        return 1;
    }
    return host && !strncasecmp(origin, "http://", 7) && !strcasecmp(origin + 7, host);
}

/* "Bearer KEY", compared in time independent of where it differs. */
static int auth_ok(const http_server *s, const char *h) {
    const char *key = s->cfg.api_key;
    if (!h || strncasecmp(h, "Bearer ", 7)) return 0;
    h += 7;
    while (*h == ' ') h++;
    size_t hl = strlen(h), kl = strlen(key);
    unsigned diff = hl != kl;
    for (size_t i = 0; i < kl; i++) diff |= (unsigned char)(i < hl ? h[i] : 0) ^ (unsigned char)key[i];
    return !diff;
}

static const char *header(struct MHD_Connection *c, const char *name) {
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* A body follows these headers without waiting for a 100 Continue. */
static int body_coming(struct MHD_Connection *c) {
    const char *cl = header(c, "Content-Length"), *te = header(c, "Transfer-Encoding"), *ex = header(c, "Expect");
    if (ex && !strncasecmp(ex, "100-continue", 12)) return 0;
    return te || (cl && strcmp(cl, "0"));
}

/* Refuse r (from admit): now, or when a body is on the way, once it has
 * been read and dropped (answering first makes clients see a reset). 0. */
static int refuse(srv_req *r, int status, const char *code, const char *hname, const char *hval, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static int refuse(srv_req *r, int status, const char *code, const char *hname, const char *hval, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (status != 413 && body_coming(r->conn)) {
        vsnprintf(r->defer_msg, sizeof r->defer_msg, fmt, ap);
        r->defer_status = status;
        r->defer_code = code;
        r->defer_hname = hname;
        r->defer_hval = hval;
    } else {
        send_errorv(r, status, status >= 500 ? "server_error" : "invalid_request_error", NULL, code, hname, hval, fmt, ap);
        r->refused = 1;
    }
    va_end(ap);
    return 0;
}

/* The checks once the headers are in; 1 = go on reading, 0 = refused. */
static int admit(http_server *s, srv_req *r) {
    struct MHD_Connection *c = r->conn;
    const char *host = header(c, "Host"), *origin = header(c, "Origin");
    if (!host_ok(s, host))
        return refuse(r, 403, "host_not_allowed", NULL, NULL,
                             "Host '%.100s' is not served here (allowed: localhost, 127.0.0.1, [::1], --host, --allow-host)",
                             host);
    r->origin = origin;
    if (!origin_ok(s, origin, host, &r->cors))
        return refuse(r, 403, "origin_not_allowed", NULL, NULL,
                             "cross-origin requests from '%.100s' are refused (see --cors-origin)", origin);
    if (!strcmp(r->method, "OPTIONS")) { /* a CORS preflight */
        struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (!resp) return 0;
        MHD_add_response_header(resp, "Allow", "GET, POST, OPTIONS");
        if (r->cors) {
            MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
            MHD_add_response_header(resp, "Access-Control-Allow-Headers", "Authorization, Content-Type");
            MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
        }
        queue(r, 204, resp);
        r->refused = 1;
        return 0;
    }
    if (s->cfg.api_key && strcmp(r->path, "/health") && strcmp(r->path, "/v1/health") &&
        !auth_ok(s, header(c, "Authorization")))
        return refuse(r, 401, "invalid_api_key", "WWW-Authenticate", "Bearer",
                             "a valid API key is required: send 'Authorization: Bearer KEY'");
    const char *ct = header(c, "Content-Type");
    if (ct && (!strncasecmp(ct, "text/plain", 10) || !strncasecmp(ct, "multipart/form-data", 19)))
        return refuse(r, 415, "unsupported_media_type", NULL, NULL,
                             "send the JSON body as application/json (form content types are refused)");
    const char *cl = header(c, "Content-Length");
    unsigned long long n = 0;
    if (cl) {
        char *end;
        errno = 0;
        n = strtoull(cl, &end, 10);
        if (errno || *end || n > HTTP_BODY_LIMIT)
            return refuse(r, 413, "request_too_large", NULL, NULL, "the request body exceeds %u bytes", HTTP_BODY_LIMIT);
    }
    char msg[200];
    if (!s->h.admit(s->h.ud, r, msg, sizeof msg)) return refuse(r, 503, "queue_full", NULL, NULL, "%s", msg);
    if (n) { /* hold the body's bytes in the budget now (a chunked body: as it comes) */
        pthread_mutex_lock(&s->mu);
        int over = s->body_bytes + n > s->cfg.body_budget;
        if (!over) {
            s->body_bytes += n;
            r->reserved = n;
        }
        pthread_mutex_unlock(&s->mu);
        if (over)
            return refuse(r, 503, "server_busy", NULL, NULL, "the server is busy reading other requests' bodies; retry later");
    }
    return 1;
}

/* ---- requests --------------------------------------------------------------------- */

/* Append upload bytes to r's body; past HTTP_BODY_LIMIT or the budget they
 * are dropped (and the request refused once read). */
static void body_append(http_server *s, srv_req *r, const char *data, size_t n) {
    if (r->too_big || r->over_budget) return;
    if (r->len + n > HTTP_BODY_LIMIT) {
        r->too_big = 1;
        return;
    }
    if (r->len + n > r->reserved) { /* no (or a short) Content-Length: reserve as it comes */
        size_t more = r->len + n - r->reserved;
        pthread_mutex_lock(&s->mu);
        int over = s->body_bytes + more > s->cfg.body_budget;
        if (!over) {
            s->body_bytes += more;
            r->reserved += more;
        }
        pthread_mutex_unlock(&s->mu);
        if (over) {
            r->over_budget = 1;
            return;
        }
    }
    if (r->len + n + 1 > r->cap) {
        size_t nc = r->cap ? r->cap : 4096;
        while (nc < r->len + n + 1) nc *= 2;
        char *b = slm_realloc(r->body, nc);
        if (!b) { r->over_budget = 1; return; }
        r->body = b;
        r->cap = nc;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
    r->body[r->len] = 0;
}

/* The body is no longer needed: free it and give its budget back. */
static void body_release(http_server *s, srv_req *r) {
    slm_xfree(r->body);
    r->body = NULL;
    r->len = r->cap = 0;
    pthread_mutex_lock(&s->mu);
    s->body_bytes -= r->reserved;
    r->reserved = 0;
    pthread_mutex_unlock(&s->mu);
}

static conn_rec *rec_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static srv_req *req_new(http_server *s, struct MHD_Connection *conn, const char *url, const char *method) {
    srv_req *r = slm_calloc(1, sizeof *r);
    if (!r) return NULL;
    snprintf(r->method, sizeof r->method, "%s", method);
    snprintf(r->path, sizeof r->path, "%s", url);
    clock_gettime(CLOCK_MONOTONIC, &r->t0);
    r->conn = conn;
    r->srv = s;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    r->fd = ci ? ci->connect_fd : -1;
    conn_rec *rec = rec_of(conn);
    pthread_mutex_lock(&s->mu);
    if (rec) rec->req = r;
    pthread_mutex_unlock(&s->mu);
    return r;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_size, void **con_cls) {
    http_server *s = cls;
    (void)version;
    srv_req *r = *con_cls;
    if (!r) { /* the headers are in */
        if (!(r = req_new(s, conn, url, method))) return MHD_NO;
        *con_cls = r;
        admit(s, r); /* an answer queued now: MHD sends it and closes the connection */
        return MHD_YES;
    }
    if (r->refused) {
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->defer_status) { /* drop the body, then answer */
        if (*upload_size) {
            r->dropped += *upload_size;
            *upload_size = 0;
            return r->dropped > HTTP_BODY_LIMIT ? MHD_NO : MHD_YES;
        }
        return send_error_h(r, r->defer_status, r->defer_code, r->defer_hname, r->defer_hval, "%s", r->defer_msg)
                   ? MHD_YES : MHD_NO;
    }
    if (*upload_size) {
        body_append(s, r, upload_data, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    int first = !r->handled;
    r->handled = 1;
    if (first) {
        conn_rec *rec = rec_of(conn);
        pthread_mutex_lock(&s->mu);
        if (rec) rec->busy = 1; /* read in full: the deadline no longer applies */
        pthread_mutex_unlock(&s->mu);
    }
    int res;
    if (r->over_budget)
        res = send_error_h(r, 503, "server_busy", NULL, NULL,
                           "the server is busy reading other requests' bodies; retry later") ? HTTP_DONE : HTTP_DROP;
    else
        res = s->h.handle(s->h.ud, r);
    if (first) body_release(s, r);
    if (res == HTTP_WAIT) {
        http_suspend(r);
        return MHD_YES;
    }
    return res == HTTP_DONE ? MHD_YES : MHD_NO;
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
    http_server *s = cls;
    srv_req *r = *con_cls;
    if (!r) return;
    *con_cls = NULL;
    int pt, ct, aborted = toe != MHD_REQUEST_TERMINATED_COMPLETED_OK;
    const char *fin;
    s->h.done(s->h.ud, r, aborted, &pt, &ct, &fin);
    if (slm_trace_enabled()) {
        char what[96];
        snprintf(what, sizeof what, "%s %s", r->method, r->path);
        slm_trace_name_thread("http");
        slm_trace_end_ns("http", "http_request", (uint64_t)r->t0.tv_sec * 1000000000u + (uint64_t)r->t0.tv_nsec,
                         &(slm_trace_args){{"status", "prompt_tokens", "completion_tokens"}, {r->status, pt, ct},
                                           "request", what});
    }
    conn_rec *rec = rec_of(conn);
    pthread_mutex_lock(&s->mu);
    if (rec) {
        rec->req = NULL;
        rec->busy = 0;
        clock_gettime(CLOCK_MONOTONIC, &rec->since);
    }
    pthread_mutex_unlock(&s->mu);
    fprintf(stderr, "serve: %s %s %d%s prompt_tokens=%d completion_tokens=%d %.1f ms%s%s%s\n", r->method, r->path,
            r->status, r->stream ? " stream" : "", pt, ct, ms_since(&r->t0), fin ? " finish=" : "", fin ? fin : "",
            aborted ? " (client gone)" : "");
    body_release(s, r);
    slm_xfree(r);
}

static void notify_conn(void *cls, struct MHD_Connection *conn, void **ctx, enum MHD_ConnectionNotificationCode code) {
    http_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        conn_rec *rec = slm_calloc(1, sizeof *rec);
        *ctx = rec;
        if (!rec) return; /* no deadline for this one; the idle timeout still applies */
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        rec->fd = ci ? ci->connect_fd : -1;
        clock_gettime(CLOCK_MONOTONIC, &rec->since);
        pthread_mutex_lock(&s->mu);
        rec->next = s->conns;
        if (s->conns) s->conns->prev = rec;
        s->conns = rec;
        pthread_mutex_unlock(&s->mu);
    } else if (*ctx) { /* closed: MHD closes the socket after this */
        conn_rec *rec = *ctx;
        pthread_mutex_lock(&s->mu);
        if (rec->prev) rec->prev->next = rec->next;
        else s->conns = rec->next;
        if (rec->next) rec->next->prev = rec->prev;
        pthread_mutex_unlock(&s->mu);
        slm_xfree(rec);
        *ctx = NULL;
    }
}

/* ---- the monitor ------------------------------------------------------------------- */

/* Every quarter second: shut down connections whose request is not in
 * after the deadline; cancel and wake sleeping requests whose client left
 * (MHD does not watch a suspended connection). With all = 1 (stopping),
 * wake every sleeping request. */
static void monitor_pass(http_server *s, int all) {
    enum { BATCH = 64 };
    srv_req *gone[BATCH];
    int ng = 0;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&s->mu);
    for (conn_rec *c = s->conns; c; c = c->next) {
        double age = (double)(now.tv_sec - c->since.tv_sec) + (double)(now.tv_nsec - c->since.tv_nsec) / 1e9;
        if (!c->busy && !c->shut && c->fd >= 0 && age > s->cfg.request_timeout_s) {
            shutdown(c->fd, SHUT_RDWR); /* MHD sees the end and closes it */
            c->shut = 1;
        }
        srv_req *r = c->req;
        if (r && r->suspended && ng < BATCH && (all || client_gone(r->fd))) {
            r->suspended = 0; /* ours to resume */
            gone[ng++] = r;
        }
    }
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < ng; i++) { /* still suspended, so still alive */
        s->h.cancel(s->h.ud, gone[i]);
        MHD_resume_connection(gone[i]->conn);
    }
}

static void *monitor_main(void *arg) {
    http_server *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 250000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&s->monitor_cv, &s->mu, &ts);
        if (s->stopping) break;
        pthread_mutex_unlock(&s->mu);
        monitor_pass(s, 0);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- the transport's life ---------------------------------------------------------- */

static void add_name(http_server *s, const char *n) {
    if (!strcmp(n, "*")) s->any_host = 1;
    for (int i = 0; i < s->n_names; i++)
        if (!strcasecmp(s->names[i], n)) return;
    if (s->n_names < MAX_NAMES) s->names[s->n_names++] = n;
}

/* libmicrohttpd's messages (a connection closed early, a limit reached:
 * under attack one a connection) go to stderr with -v only. */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
    const http_server *s = cls;
    if (!s->cfg.verbose) return;
    char line[300];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && line[n - 1] == '\n') line[--n] = 0;
    fprintf(stderr, "serve: http: %s\n", line);
}

static struct MHD_Daemon *start_daemon(http_server *s, const struct sockaddr_in *addr) {
    const slm_server_cfg *c = &s->cfg;
    unsigned limit = (unsigned)c->max_conn;
    struct rlimit rl;
    if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)limit + 64)
        limit = rl.rlim_cur > 128 ? (unsigned)(rl.rlim_cur - 64) : 64;
    return MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG,
        (uint16_t)c->port, NULL, NULL, handler, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s, MHD_OPTION_SOCK_ADDR, (const struct sockaddr *)addr,
        MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_NOTIFY_CONNECTION, notify_conn, s,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)(c->http_threads > 0 ? c->http_threads : 1),
        MHD_OPTION_CONNECTION_LIMIT, limit, MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)c->max_conn_per_ip,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)c->idle_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64u << 10), /* headers + buffers per connection */
        MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1, MHD_OPTION_END);
}

http_server *http_new(const slm_server_cfg *cfg, slm_err *err) {
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)cfg->port);
    const char *host = cfg->host && strcmp(cfg->host, "localhost") ? cfg->host : "127.0.0.1";
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        slm_errf(err, SLM_ERR_ARG, "--host expects an IPv4 address, got '%s'", host);
        return NULL;
    }
    slm_json_init_hooks();
    http_server *s = slm_calloc(1, sizeof *s);
    if (!s) { slm_errf(err, SLM_ERR_NOMEM, "out of memory"); return NULL; }
    s->cfg = *cfg;
    s->addr = addr;
    s->host = host;
    if (!s->cfg.body_budget) s->cfg.body_budget = HTTP_BODY_LIMIT;
    add_name(s, "localhost");
    add_name(s, "127.0.0.1");
    add_name(s, "[::1]");
    if (cfg->host) add_name(s, cfg->host);
    for (int i = 0; i < cfg->n_allow_hosts && i < 8; i++) add_name(s, cfg->allow_hosts[i]);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->monitor_cv, NULL);
    return s;
}

slm_status http_listen(http_server *s, const http_handlers *h, slm_err *err) {
    s->h = *h;
    errno = 0;
    if (!(s->d = start_daemon(s, &s->addr)))
        return slm_errf(err, SLM_ERR_IO, "cannot listen on %s:%d (%s)", s->host, s->cfg.port,
                        errno ? strerror(errno) : "address in use or not available");
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? (int)di->port : s->cfg.port;
    if (pthread_create(&s->monitor, NULL, monitor_main, s)) {
        slm_errf(err, SLM_ERR_INTERNAL, "cannot start the monitor thread");
        s->h.stop(s->h.ud); /* the application first, as in http_stop */
        MHD_stop_daemon(s->d);
        s->d = NULL;
        return SLM_ERR_INTERNAL;
    }
    s->monitor_started = 1;
    return SLM_OK;
}

int http_port(const http_server *s) { return s->port; }

static int n_suspended(http_server *s) {
    int n = 0;
    pthread_mutex_lock(&s->mu);
    for (conn_rec *c = s->conns; c; c = c->next) n += c->req && c->req->suspended;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void http_stop(http_server *s) {
    MHD_socket lfd = MHD_quiesce_daemon(s->d); /* no new connections */
    s->h.stop(s->h.ud);       /* the application answers what waits: those requests wake */
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_signal(&s->monitor_cv);
    pthread_mutex_unlock(&s->mu);
    if (s->monitor_started) pthread_join(s->monitor, NULL);
    /* MHD must not stop with suspended connections: wake any still asleep */
    for (int i = 0; i < 200 && n_suspended(s); i++) {
        monitor_pass(s, 1);
        usleep(10000);
    }
    MHD_stop_daemon(s->d);
    s->d = NULL;
    if (lfd != MHD_INVALID_SOCKET) close(lfd); /* quiesce handed it to us */
}

void http_free(http_server *s) {
    if (!s) return;
    pthread_cond_destroy(&s->monitor_cv);
    pthread_mutex_destroy(&s->mu);
    slm_xfree(s);
}

#endif /* SLM_HAVE_SERVE */
