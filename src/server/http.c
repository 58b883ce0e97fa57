/* server/http.c — the HTTP layer of `staticlm serve` on libmicrohttpd:
 * the daemon and its limits, reading request bodies (bounded), error
 * bodies, event streams, the log line; api.c answers the requests. */
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
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "common/common.h"
#include "common/json.h"
#include "server/request.h"

struct slm_server {
    struct MHD_Daemon *d;
    srv_api *api;
    int port;
};

static double ms_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

int http_client_gone(int fd) {
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

/* ---- answers ------------------------------------------------------------------- */

static void free_body(void *p) { slm_xfree(p); }

/* body (slm_malloc'd) is consumed. */
static int send_body(srv_req *r, int status, const char *ctype, char *body) {
    struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback(strlen(body), body, free_body);
    if (!resp) { slm_xfree(body); return 0; }
    MHD_add_response_header(resp, "Content-Type", ctype);
    r->status = status;
    enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ret == MHD_YES;
}

int http_send_json(srv_req *r, int status, cJSON *o) {
    char *s = o ? cJSON_PrintUnformatted(o) : NULL; /* slm_malloc'd (common/json.h) */
    cJSON_Delete(o);
    if (!s) return 0;
    return send_body(r, status, "application/json", s);
}

int http_send_error(srv_req *r, int status, const char *type, const char *param, const char *code, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    char *clean = srv_utf8_clean(msg, strlen(msg));
    cJSON_AddStringToObject(e, "message", clean ? clean : "error");
    slm_xfree(clean);
    cJSON_AddStringToObject(e, "type", type);
    if (param) cJSON_AddStringToObject(e, "param", param);
    else cJSON_AddNullToObject(e, "param");
    if (code) cJSON_AddStringToObject(e, "code", code);
    else cJSON_AddNullToObject(e, "code");
    return http_send_json(r, status, o);
}

typedef struct stream_cb {
    http_stream_fn read;
    void *cls;
    void (*free_fn)(void *);
} stream_cb;

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    stream_cb *s = cls;
    (void)pos;
    long k = s->read(s->cls, buf, max);
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
    s->read = read;
    s->cls = cls;
    s->free_fn = free_fn;
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_reader, s, stream_done);
    if (!resp) { stream_done(s); return 0; }
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    r->status = 200;
    enum MHD_Result ret = MHD_queue_response(r->conn, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    return ret == MHD_YES;
}

/* ---- requests --------------------------------------------------------------------- */

/* Append upload bytes to r's body (dropping them past HTTP_BODY_LIMIT). */
static void body_append(srv_req *r, const char *data, size_t n) {
    if (r->too_big || r->len + n > HTTP_BODY_LIMIT) {
        r->too_big = 1;
        return;
    }
    if (r->len + n + 1 > r->cap) {
        size_t nc = r->cap ? r->cap : 4096;
        while (nc < r->len + n + 1) nc *= 2;
        char *b = slm_realloc(r->body, nc);
        if (!b) { r->too_big = 1; return; }
        r->body = b;
        r->cap = nc;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
    r->body[r->len] = 0;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_size, void **con_cls) {
    slm_server *s = cls;
    (void)version;
    srv_req *r = *con_cls;
    if (!r) {
        if (!(r = slm_calloc(1, sizeof *r))) return MHD_NO;
        snprintf(r->method, sizeof r->method, "%s", method);
        snprintf(r->path, sizeof r->path, "%s", url);
        clock_gettime(CLOCK_MONOTONIC, &r->t0);
        r->conn = conn;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        r->fd = ci ? ci->connect_fd : -1;
        *con_cls = r;
        return MHD_YES;
    }
    if (*upload_size) {
        body_append(r, upload_data, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    return api_handle(s->api, r) ? MHD_YES : MHD_NO;
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
    slm_server *s = cls;
    (void)conn;
    srv_req *r = *con_cls;
    if (!r) return;
    *con_cls = NULL;
    int pt, ct, aborted = toe != MHD_REQUEST_TERMINATED_COMPLETED_OK;
    const char *fin;
    api_done(s->api, r, aborted, &pt, &ct, &fin);
    fprintf(stderr, "serve: %s %s %d%s prompt_tokens=%d completion_tokens=%d %.1f ms%s%s%s\n", r->method, r->path,
            r->status, r->stream ? " stream" : "", pt, ct, ms_since(&r->t0), fin ? " finish=" : "", fin ? fin : "",
            aborted ? " (client gone)" : "");
    slm_xfree(r->body);
    slm_xfree(r);
}

/* ---- the server -------------------------------------------------------------------- */

void slm_server_cfg_init(slm_server_cfg *c) {
    memset(c, 0, sizeof *c);
    c->host = "127.0.0.1";
    c->port = 8080;
    c->queue = 8;
    c->parallel = 4;
}

slm_server *slm_server_start(slm_engine *e, const slm_tmpl *tm, const slm_server_cfg *cfg, char *err, size_t errcap) {
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)cfg->port);
    const char *host = cfg->host && strcmp(cfg->host, "localhost") ? cfg->host : "127.0.0.1";
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        snprintf(err, errcap, "--host expects an IPv4 address, got '%s'", host);
        return NULL;
    }
    slm_json_init_hooks();
    slm_server *s = slm_calloc(1, sizeof *s);
    if (!s) { snprintf(err, errcap, "out of memory"); return NULL; }
    if (!(s->api = api_new(e, tm, cfg, err, errcap))) {
        slm_xfree(s);
        return NULL;
    }
    errno = 0;
    s->d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, (uint16_t)cfg->port, NULL,
        NULL, handler, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED, completed, s,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)256, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
        MHD_OPTION_THREAD_STACK_SIZE, (size_t)(1u << 20), MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
        MHD_OPTION_END);
    if (!s->d) {
        snprintf(err, errcap, "cannot listen on %s:%d (%s)", host, cfg->port,
                 errno ? strerror(errno) : "address in use or not available");
        api_free(s->api);
        slm_xfree(s);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? (int)di->port : cfg->port;
    return s;
}

int slm_server_port(const slm_server *s) { return s->port; }

void slm_server_stop(slm_server *s) {
    if (!s) return;
    api_stop(s->api);
    MHD_stop_daemon(s->d);
    api_free(s->api);
    slm_xfree(s);
}

#endif /* SLM_HAVE_SERVE */
