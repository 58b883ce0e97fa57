/* staticlm serve: an OpenAI-compatible HTTP server on libmicrohttpd + cJSON.
 *
 * One model, batch 1. Connections are served one thread each (MHD's
 * thread-per-connection mode); a request is validated and rendered on its
 * connection thread, then queued (bounded: a full queue answers 503) for the
 * single worker thread that owns the engine. The connection thread waits for
 * its job (non-stream) or streams its text as server-sent events as the
 * worker publishes it. A client that goes away (seen by peeking at its
 * socket while waiting, or by a failed write) cancels its job, queued or
 * running.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* POLLRDHUP */
#endif
#include "server/server.h"

#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

#ifndef SLM_HAVE_SERVE

int slm_cli_serve(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "staticlm: serve is not available in this build: it needs libmicrohttpd and cJSON at build time\n"
                    "(Debian: apt-get install libmicrohttpd-dev libcjson-dev, then rebuild)\n");
    return 1;
}

#else

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "engine/chat.h"

#define BODY_LIMIT (4u << 20)
#define MAX_STOP 4
#define STOP_LEN 256

enum { J_QUEUED, J_RUNNING, J_DONE, J_FAILED };

typedef struct job {
    int refs; /* under S.mu */
    int chat, stream, include_usage;
    char *prompt;
    int max_tokens; /* 0 = until the KV capacity */
    slm_sampling samp;
    char *stop[MAX_STOP];
    int nstop;
    int fd; /* the client's socket, to notice it leaving */
    /* progress (under S.mu) */
    int state, accepted, cancelled;
    int status;
    char err[512];
    const char *err_code, *err_param;
    char *text;
    size_t tlen, tcap;
    int prompt_tokens, completion_tokens;
    const char *finish;
    struct job *next;
    /* stream writer state (connection thread only) */
    int phase;
    size_t sent;
    char *pend;
    size_t plen, poff;
    char id[48];
    long created;
} job;

typedef struct req {
    char *body;
    size_t len, cap;
    int too_big;
    int status, stream;
    job *j;
    char method[8], path[80];
    struct timespec t0;
} req;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t work, changed;
    job *head, *tail;
    int queued, queue_max, stop;
    unsigned long next_id;
    slm_engine *e;
    slm_tmpl *tm;
    slm_chat_tok *tok;
    slm_info info;
    char model_name[128];
    float *logits;
    void *scratch;
    long started;
} S = {.mu = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};

static double ms_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

static void job_unref(job *j) { /* under S.mu */
    if (--j->refs > 0) return;
    free(j->prompt);
    for (int i = 0; i < j->nstop; i++) free(j->stop[i]);
    free(j->text);
    free(j->pend);
    free(j);
}

/* 1 when the peer has closed its end (or the socket failed). */
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

static void cond_wait_ms(pthread_cond_t *c, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(c, &S.mu, &ts);
}

/* ---- UTF-8 ------------------------------------------------------------------ */

/* Length of s[0..n) without a trailing incomplete UTF-8 sequence. */
static size_t utf8_complete(const char *s, size_t n) {
    size_t i = n, back = 0;
    while (i > 0 && back < 4 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) { i--; back++; }
    if (i == 0) return n;
    unsigned char c = (unsigned char)s[i - 1];
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (need > 1 && back + 1 < need) return i - 1;
    return n;
}

/* A copy with invalid UTF-8 replaced by U+FFFD (for JSON). */
static char *utf8_clean(const char *s, size_t n) {
    char *o = malloc(n * 3 + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : (c >= 0xC2 && c < 0xE0) ? 2 : (c >= 0xE0 && c < 0xF0) ? 3 : (c >= 0xF0 && c < 0xF5) ? 4 : 0;
        int ok = len > 0 && i + len <= n;
        for (size_t q = 1; ok && q < len; q++) ok = ((unsigned char)s[i + q] & 0xC0) == 0x80;
        if (ok && len == 3 && ((c == 0xE0 && (unsigned char)s[i + 1] < 0xA0) || (c == 0xED && (unsigned char)s[i + 1] >= 0xA0))) ok = 0;
        if (ok && len == 4 && ((c == 0xF0 && (unsigned char)s[i + 1] < 0x90) || (c == 0xF4 && (unsigned char)s[i + 1] >= 0x90))) ok = 0;
        if (ok) {
            memcpy(o + k, s + i, len);
            k += len;
            i += len;
        } else {
            memcpy(o + k, "\xEF\xBF\xBD", 3);
            k += 3;
            i++;
        }
    }
    o[k] = 0;
    return o;
}

/* ---- the worker ------------------------------------------------------------- */

static void job_fail(job *j, int status, const char *code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void job_fail(job *j, int status, const char *code, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&S.mu);
    vsnprintf(j->err, sizeof j->err, fmt, ap);
    j->status = status;
    j->err_code = code;
    j->err_param = param;
    j->state = J_FAILED;
    pthread_cond_broadcast(&S.changed);
    pthread_mutex_unlock(&S.mu);
    va_end(ap);
}

/* Publish text[0..n) (under S.mu). */
static int publish(job *j, const char *s, size_t n) {
    if (n + 1 > j->tcap) {
        size_t nc = j->tcap ? j->tcap : 256;
        while (nc < n + 1) nc *= 2;
        char *t = realloc(j->text, nc);
        if (!t) return 0;
        j->text = t;
        j->tcap = nc;
    }
    memcpy(j->text, s, n);
    j->text[n] = 0;
    j->tlen = n;
    pthread_cond_broadcast(&S.changed);
    return 1;
}

static void run_job(job *j) {
    slm_engine *e = S.e;
    const int cap = slm_capacity(e), V = S.info.vocab_size;
    int32_t *ids = NULL;
    int n;
    if (j->chat) {
        n = slm_chat_tokenize(S.tok, j->prompt, 1, &ids);
    } else {
        n = slm_tokenize(e, j->prompt, 1, NULL, 0);
        if (n > 0 && (ids = malloc((size_t)n * sizeof(int32_t)))) slm_tokenize(e, j->prompt, 1, ids, n);
        else if (n > 0) n = -1;
    }
    if (n <= 0) {
        free(ids);
        job_fail(j, 500, "internal_error", NULL, "could not tokenize the prompt");
        return;
    }
    if (n + 1 > cap) {
        free(ids);
        job_fail(j, 400, "context_length_exceeded", j->chat ? "messages" : "prompt",
                 "This model's maximum context length is %d tokens. However, your %s resulted in %d tokens "
                 "(plus at least 1 for the completion).",
                 cap, j->chat ? "messages" : "prompt", n);
        return;
    }
    int max_gen = cap - n;
    if (j->max_tokens > 0 && j->max_tokens < max_gen) max_gen = j->max_tokens;
    pthread_mutex_lock(&S.mu);
    j->prompt_tokens = n;
    j->accepted = 1;
    pthread_cond_broadcast(&S.changed);
    pthread_mutex_unlock(&S.mu);

    slm_reset(e);
    const float *lg = NULL;
    slm_status s = SLM_OK;
    const int T = S.info.max_prompt_len;
    for (int off = 0; off < n && !s; off += T) s = slm_prefill(e, ids + off, n - off < T ? n - off : T, &lg);
    int prev = ids[n - 1];
    free(ids);
    char *all = NULL;
    size_t alen = 0, acap = 0;
    const char *finish = "length";
    uint64_t rng = j->samp.seed ? j->samp.seed : 0x5eed5eedull;
    int gen = 0, stopped = 0;
    for (int g = 0; g < max_gen && !s && !stopped; g++) {
        pthread_mutex_lock(&S.mu);
        int cancel = j->cancelled || S.stop;
        pthread_mutex_unlock(&S.mu);
        if (cancel) { finish = "cancelled"; break; }
        if (g > 0 && (s = slm_decode(e, prev, &lg))) break;
        memcpy(S.logits, lg, (size_t)V * sizeof(float));
        int tok = slm_sample(S.logits, V, &j->samp, &rng, S.scratch);
        if (tok == S.info.eos_id || tok == S.info.bos_id) { finish = "stop"; break; }
        gen++;
        const char *piece = slm_token_piece(e, prev, tok);
        prev = tok;
        if (!slm_piece_printable(piece)) continue; /* as staticlm run prints */
        size_t pl = strlen(piece), from = alen;
        if (alen + pl + 1 > acap) {
            size_t nc = acap ? acap * 2 : 256;
            while (nc < alen + pl + 1) nc *= 2;
            char *na = realloc(all, nc);
            if (!na) { s = SLM_ERR_NOMEM; break; }
            all = na;
            acap = nc;
        }
        memcpy(all + alen, piece, pl + 1);
        alen += pl;
        /* a stop string ends the text where it starts */
        size_t safe = alen;
        for (int i = 0; i < j->nstop; i++) {
            size_t sl = strlen(j->stop[i]);
            size_t st = from > sl ? from - sl : 0;
            for (size_t p = st; p + sl <= alen; p++)
                if (!memcmp(all + p, j->stop[i], sl)) {
                    if (p < safe) safe = p;
                    stopped = 1;
                    break;
                }
        }
        if (stopped) {
            alen = safe;
            all[alen] = 0;
            finish = "stop";
            break;
        }
        /* hold back a tail that could begin a stop string, and a split character */
        for (int i = 0; i < j->nstop; i++) {
            size_t sl = strlen(j->stop[i]);
            for (size_t k = sl - 1; k > 0; k--)
                if (k <= alen && !memcmp(all + alen - k, j->stop[i], k)) {
                    if (alen - k < safe) safe = alen - k;
                    break;
                }
        }
        safe = utf8_complete(all, safe);
        pthread_mutex_lock(&S.mu);
        j->completion_tokens = gen;
        if (safe > j->tlen) publish(j, all, safe);
        pthread_mutex_unlock(&S.mu);
    }
    if (s) {
        free(all);
        job_fail(j, 500, "internal_error", NULL, "generation failed: %s", slm_last_error(e));
        return;
    }
    pthread_mutex_lock(&S.mu);
    j->completion_tokens = gen;
    j->finish = finish;
    publish(j, all ? all : "", alen);
    j->state = J_DONE;
    pthread_cond_broadcast(&S.changed);
    pthread_mutex_unlock(&S.mu);
    free(all);
}

static void *worker(void *arg) {
    (void)arg;
    pthread_mutex_lock(&S.mu);
    for (;;) {
        while (!S.head && !S.stop) pthread_cond_wait(&S.work, &S.mu);
        job *j = S.head;
        if (!j) break; /* stopping and nothing queued */
        S.head = j->next;
        if (!S.head) S.tail = NULL;
        S.queued--;
        if (S.stop) {
            pthread_mutex_unlock(&S.mu);
            job_fail(j, 503, "server_shutting_down", NULL, "the server is shutting down");
            pthread_mutex_lock(&S.mu);
            job_unref(j);
            continue;
        }
        j->state = J_RUNNING;
        if (j->cancelled) {
            j->state = J_DONE;
            j->finish = "cancelled";
            pthread_cond_broadcast(&S.changed);
            job_unref(j);
            continue;
        }
        pthread_mutex_unlock(&S.mu);
        run_job(j);
        pthread_mutex_lock(&S.mu);
        job_unref(j);
    }
    pthread_mutex_unlock(&S.mu);
    return NULL;
}

/* ---- responses -------------------------------------------------------------- */

static enum MHD_Result send_text(struct MHD_Connection *c, req *r, int status, const char *ctype, char *body) {
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!resp) { free(body); return MHD_NO; }
    MHD_add_response_header(resp, "Content-Type", ctype);
    r->status = status;
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, req *r, int status, cJSON *o) {
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) return MHD_NO;
    /* cJSON_free is free with the default hooks */
    return send_text(c, r, status, "application/json", s);
}

static enum MHD_Result send_error(struct MHD_Connection *c, req *r, int status, const char *type, const char *param,
                                  const char *code, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static enum MHD_Result send_error(struct MHD_Connection *c, req *r, int status, const char *type, const char *param,
                                  const char *code, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    char *clean = utf8_clean(msg, strlen(msg));
    cJSON_AddStringToObject(e, "message", clean ? clean : "error");
    free(clean);
    cJSON_AddStringToObject(e, "type", type);
    if (param) cJSON_AddStringToObject(e, "param", param);
    else cJSON_AddNullToObject(e, "param");
    if (code) cJSON_AddStringToObject(e, "code", code);
    else cJSON_AddNullToObject(e, "code");
    return send_json(c, r, status, o);
}

#define BAD(param, code, ...) send_error(conn, r, 400, "invalid_request_error", param, code, __VA_ARGS__)

static cJSON *base_obj(job *j, const char *object) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)j->created);
    cJSON_AddStringToObject(o, "model", S.model_name);
    return o;
}

static void add_usage(cJSON *o, job *j) {
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", j->prompt_tokens);
    cJSON_AddNumberToObject(u, "completion_tokens", j->completion_tokens);
    cJSON_AddNumberToObject(u, "total_tokens", j->prompt_tokens + j->completion_tokens);
}

/* One SSE event with text t[0..n) (or the final chunk when fin). */
static char *sse_chunk(job *j, const char *t, size_t n, int role, const char *fin, int usage_only) {
    cJSON *o = base_obj(j, j->chat ? "chat.completion.chunk" : "text_completion");
    cJSON *ch = cJSON_AddArrayToObject(o, "choices");
    if (!usage_only) {
        cJSON *c0 = cJSON_CreateObject();
        cJSON_AddNumberToObject(c0, "index", 0);
        char *clean = t ? utf8_clean(t, n) : NULL;
        if (j->chat) {
            cJSON *d = cJSON_AddObjectToObject(c0, "delta");
            if (role) cJSON_AddStringToObject(d, "role", "assistant");
            if (t) cJSON_AddStringToObject(d, "content", clean ? clean : "");
        } else {
            cJSON_AddStringToObject(c0, "text", clean ? clean : "");
            cJSON_AddNullToObject(c0, "logprobs");
        }
        free(clean);
        if (fin) cJSON_AddStringToObject(c0, "finish_reason", fin);
        else cJSON_AddNullToObject(c0, "finish_reason");
        cJSON_AddItemToArray(ch, c0);
    } else {
        add_usage(o, j);
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) return NULL;
    size_t sl = strlen(s);
    char *ev = malloc(sl + 9);
    if (ev) {
        memcpy(ev, "data: ", 6);
        memcpy(ev + 6, s, sl);
        memcpy(ev + 6 + sl, "\n\n", 3);
    }
    free(s);
    return ev;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    job *j = cls;
    (void)pos;
    for (;;) {
        if (j->pend && j->poff < j->plen) {
            size_t k = j->plen - j->poff < max ? j->plen - j->poff : max;
            memcpy(buf, j->pend + j->poff, k);
            j->poff += k;
            return (ssize_t)k;
        }
        free(j->pend);
        j->pend = NULL;
        j->plen = j->poff = 0;
        if (j->phase == 0) { /* the role chunk (chat) */
            j->phase = 1;
            if (j->chat) j->pend = sse_chunk(j, "", 0, 1, NULL, 0);
        } else if (j->phase == 1) {
            pthread_mutex_lock(&S.mu);
            while (j->tlen <= j->sent && j->state < J_DONE && !j->cancelled) {
                cond_wait_ms(&S.changed, 200);
                if (j->tlen <= j->sent && j->state < J_DONE && client_gone(j->fd)) j->cancelled = 1;
            }
            if (j->cancelled) {
                pthread_mutex_unlock(&S.mu);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
            if (j->tlen > j->sent) {
                size_t from = j->sent;
                j->sent = j->tlen;
                char *copy = malloc(j->tlen - from + 1);
                if (copy) memcpy(copy, j->text + from, j->tlen - from);
                size_t cn = j->tlen - from;
                pthread_mutex_unlock(&S.mu);
                if (!copy) return MHD_CONTENT_READER_END_WITH_ERROR;
                j->pend = sse_chunk(j, copy, cn, 0, NULL, 0);
                free(copy);
            } else if (j->state == J_FAILED) {
                char *msg = utf8_clean(j->err, strlen(j->err));
                pthread_mutex_unlock(&S.mu);
                cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
                cJSON_AddStringToObject(e, "message", msg ? msg : "error");
                cJSON_AddStringToObject(e, "type", "server_error");
                free(msg);
                char *s = cJSON_PrintUnformatted(o);
                cJSON_Delete(o);
                size_t sl = s ? strlen(s) : 0;
                j->pend = malloc(sl + 9);
                if (j->pend) {
                    memcpy(j->pend, "data: ", 6);
                    if (s) memcpy(j->pend + 6, s, sl);
                    memcpy(j->pend + 6 + sl, "\n\n", 3);
                }
                free(s);
                j->phase = 3;
            } else { /* done */
                pthread_mutex_unlock(&S.mu);
                j->pend = sse_chunk(j, j->chat ? NULL : "", 0, 0, j->finish ? j->finish : "stop", 0);
                j->phase = j->include_usage ? 2 : 3;
            }
        } else if (j->phase == 2) {
            j->pend = sse_chunk(j, NULL, 0, 0, NULL, 1);
            j->phase = 3;
        } else if (j->phase == 3) {
            j->pend = strdup("data: [DONE]\n\n");
            j->phase = 4;
        } else {
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        if (!j->pend) {
            if (j->phase == 1) continue;
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        j->plen = strlen(j->pend);
    }
}

static void stream_free(void *cls) {
    job *j = cls;
    pthread_mutex_lock(&S.mu);
    if (j->state < J_DONE) j->cancelled = 1;
    job_unref(j);
    pthread_mutex_unlock(&S.mu);
}

/* ---- request parsing ---------------------------------------------------------- */

static int is_int(const cJSON *v) { return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) && fabs(v->valuedouble) < 9e15; }

typedef struct params {
    slm_sampling samp;
    int max_tokens, stream, include_usage;
    char *stop[MAX_STOP];
    int nstop;
} params;

/* Common fields; returns NULL when fine, else sends the 400 itself via *ret. */
static int parse_common(struct MHD_Connection *conn, req *r, const cJSON *o, params *p, int chat, enum MHD_Result *ret) {
    memset(p, 0, sizeof *p);
    p->samp.temperature = 1.0f;
    p->samp.top_p = 1.0f;
    p->samp.seed = (uint64_t)time(NULL) ^ ((uint64_t)S.next_id << 32);
    p->max_tokens = chat ? 0 : 16;
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "model")) && !cJSON_IsString(v) && !cJSON_IsNull(v)) {
        *ret = BAD("model", "invalid_type", "'model' must be a string");
        return 0;
    }
    const char *mt = cJSON_GetObjectItemCaseSensitive(o, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if ((v = cJSON_GetObjectItemCaseSensitive(o, mt)) && !cJSON_IsNull(v)) {
        if (!is_int(v) || v->valuedouble < 1) {
            *ret = BAD(mt, "invalid_type", "'%s' must be an integer >= 1", mt);
            return 0;
        }
        p->max_tokens = v->valuedouble > 1e9 ? 1000000000 : (int)v->valuedouble;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "temperature")) && !cJSON_IsNull(v)) {
        if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 2)) {
            *ret = BAD("temperature", "invalid_type", "'temperature' must be a number in [0, 2]");
            return 0;
        }
        p->samp.temperature = (float)v->valuedouble;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "top_p")) && !cJSON_IsNull(v)) {
        if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 1)) {
            *ret = BAD("top_p", "invalid_type", "'top_p' must be a number in [0, 1]");
            return 0;
        }
        p->samp.top_p = (float)v->valuedouble;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "top_k")) && !cJSON_IsNull(v)) {
        if (!is_int(v) || v->valuedouble < 0 || v->valuedouble > 1e9) {
            *ret = BAD("top_k", "invalid_type", "'top_k' must be an integer >= 0");
            return 0;
        }
        p->samp.top_k = (int)v->valuedouble;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "seed")) && !cJSON_IsNull(v)) {
        if (!is_int(v)) {
            *ret = BAD("seed", "invalid_type", "'seed' must be an integer");
            return 0;
        }
        p->samp.seed = (uint64_t)(int64_t)v->valuedouble;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "n")) && !cJSON_IsNull(v) && !(is_int(v) && v->valuedouble == 1)) {
        *ret = BAD("n", "unsupported_value", "only n = 1 is supported");
        return 0;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "stream")) && !cJSON_IsNull(v)) {
        if (!cJSON_IsBool(v)) {
            *ret = BAD("stream", "invalid_type", "'stream' must be a boolean");
            return 0;
        }
        p->stream = cJSON_IsTrue(v);
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "stream_options")) && !cJSON_IsNull(v)) {
        const cJSON *iu = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "include_usage") : NULL;
        if (!cJSON_IsObject(v) || (iu && !cJSON_IsBool(iu))) {
            *ret = BAD("stream_options", "invalid_type", "'stream_options' must be an object {\"include_usage\": bool}");
            return 0;
        }
        p->include_usage = cJSON_IsTrue(iu);
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "stop")) && !cJSON_IsNull(v)) {
        if (cJSON_IsString(v)) {
            if (v->valuestring[0] && strlen(v->valuestring) <= STOP_LEN) p->stop[p->nstop++] = strdup(v->valuestring);
            else if (v->valuestring[0]) {
                *ret = BAD("stop", "invalid_value", "a stop string may have at most %d bytes", STOP_LEN);
                return 0;
            }
        } else if (cJSON_IsArray(v)) {
            const cJSON *it;
            int k = 0;
            cJSON_ArrayForEach(it, v) {
                if (!cJSON_IsString(it) || k >= MAX_STOP || strlen(it->valuestring) > STOP_LEN) {
                    for (int i = 0; i < p->nstop; i++) free(p->stop[i]);
                    p->nstop = 0;
                    *ret = BAD("stop", "invalid_type", "'stop' must be a string or an array of at most %d strings of at most %d bytes", MAX_STOP, STOP_LEN);
                    return 0;
                }
                if (it->valuestring[0]) p->stop[p->nstop++] = strdup(it->valuestring);
                k++;
            }
        } else {
            *ret = BAD("stop", "invalid_type", "'stop' must be a string or an array of strings");
            return 0;
        }
    }
    return 1;
}

/* The text of a message's content: a string or an array of text parts. */
static char *content_text(const cJSON *c, int *bad) {
    *bad = 0;
    if (cJSON_IsString(c)) return strdup(c->valuestring);
    if (!c || cJSON_IsNull(c)) return strdup("");
    if (!cJSON_IsArray(c)) { *bad = 1; return NULL; }
    size_t n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, c) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(it, "type"), *tx = cJSON_GetObjectItemCaseSensitive(it, "text");
        if (!cJSON_IsObject(it) || !cJSON_IsString(ty) || strcmp(ty->valuestring, "text") || !cJSON_IsString(tx)) { *bad = 1; return NULL; }
        n += strlen(tx->valuestring);
    }
    char *o = malloc(n + 1);
    if (!o) return NULL;
    n = 0;
    cJSON_ArrayForEach(it, c) {
        const char *t = cJSON_GetObjectItemCaseSensitive(it, "text")->valuestring;
        size_t l = strlen(t);
        memcpy(o + n, t, l);
        n += l;
    }
    o[n] = 0;
    return o;
}

static enum MHD_Result handle_completion(struct MHD_Connection *conn, req *r, int chat) {
    if (r->too_big)
        return send_error(conn, r, 413, "invalid_request_error", NULL, "request_too_large",
                          "the request body exceeds %u bytes", BODY_LIMIT);
    cJSON *o = cJSON_ParseWithLength(r->body ? r->body : "", r->len);
    if (!o) return BAD(NULL, "invalid_json", "could not parse the request body as JSON");
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return BAD(NULL, "invalid_json", "the request body must be a JSON object");
    }
    params p;
    enum MHD_Result ret = MHD_NO;
    if (!parse_common(conn, r, o, &p, chat, &ret)) {
        cJSON_Delete(o);
        return ret;
    }
    char *prompt = NULL;
    char perr[400] = "", param[48] = "";
    int status = 0;
    if (chat) {
        const cJSON *ms = cJSON_GetObjectItemCaseSensitive(o, "messages");
        int n = cJSON_IsArray(ms) ? cJSON_GetArraySize(ms) : -1;
        if (n <= 0 || n > 100000) {
            snprintf(perr, sizeof perr, ms ? "'messages' must be a non-empty array" : "'messages' is required");
            snprintf(param, sizeof param, "messages");
            status = 400;
        } else {
            slm_chat_msg *m = calloc((size_t)n, sizeof *m);
            int k = 0;
            const cJSON *it;
            cJSON_ArrayForEach(it, ms) {
                if (!m) break;
                const cJSON *role = cJSON_GetObjectItemCaseSensitive(it, "role");
                int bad = 0;
                if (!cJSON_IsObject(it) || !cJSON_IsString(role) ||
                    (strcmp(role->valuestring, "system") && strcmp(role->valuestring, "user") &&
                     strcmp(role->valuestring, "assistant") && strcmp(role->valuestring, "developer") &&
                     strcmp(role->valuestring, "tool"))) {
                    snprintf(perr, sizeof perr, "messages[%d] must be an object with a role (system, user, assistant, developer or tool)", k);
                    snprintf(param, sizeof param, "messages[%d].role", k);
                    status = 400;
                    break;
                }
                char *txt = content_text(cJSON_GetObjectItemCaseSensitive(it, "content"), &bad);
                if (bad || !txt) {
                    free(txt);
                    snprintf(perr, sizeof perr, bad ? "messages[%d].content must be a string or an array of text parts" : "out of memory", k);
                    snprintf(param, sizeof param, "messages[%d].content", k);
                    status = bad ? 400 : 500;
                    break;
                }
                m[k].role = !strcmp(role->valuestring, "developer") ? "system" : role->valuestring;
                m[k].content = txt;
                k++;
            }
            if (!m) {
                snprintf(perr, sizeof perr, "out of memory");
                status = 500;
            }
            if (!status) {
                char terr[256];
                prompt = slm_chat_render(S.tm, S.tok, m, n, 1, terr, sizeof terr);
                if (!prompt) {
                    snprintf(perr, sizeof perr, "the chat template failed: %s", terr);
                    snprintf(param, sizeof param, "messages");
                    status = 400;
                }
            }
            for (int i = 0; i < k; i++) free((void *)m[i].content);
            free(m);
        }
    } else {
        const cJSON *pr = cJSON_GetObjectItemCaseSensitive(o, "prompt");
        if (cJSON_IsArray(pr) && cJSON_GetArraySize(pr) == 1 && cJSON_IsString(cJSON_GetArrayItem(pr, 0)))
            pr = cJSON_GetArrayItem(pr, 0);
        if (!cJSON_IsString(pr)) {
            snprintf(perr, sizeof perr, pr ? "'prompt' must be a string" : "'prompt' is required");
            snprintf(param, sizeof param, "prompt");
            status = 400;
        } else {
            prompt = strdup(pr->valuestring);
        }
    }
    cJSON_Delete(o);
    if (status || !prompt) {
        for (int i = 0; i < p.nstop; i++) free(p.stop[i]);
        free(prompt);
        if (status == 400) return BAD(param[0] ? param : NULL, param[0] ? "invalid_value" : NULL, "%s", perr);
        return send_error(conn, r, 500, "server_error", NULL, NULL, "%s", perr[0] ? perr : "out of memory");
    }
    job *j = calloc(1, sizeof *j);
    if (!j) {
        free(prompt);
        for (int i = 0; i < p.nstop; i++) free(p.stop[i]);
        return send_error(conn, r, 500, "server_error", NULL, NULL, "out of memory");
    }
    j->chat = chat;
    j->stream = p.stream;
    j->include_usage = p.include_usage;
    j->prompt = prompt;
    j->max_tokens = p.max_tokens;
    j->samp = p.samp;
    memcpy(j->stop, p.stop, sizeof p.stop);
    j->nstop = p.nstop;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    j->fd = ci ? ci->connect_fd : -1;
    j->created = (long)time(NULL);
    r->stream = p.stream;

    pthread_mutex_lock(&S.mu);
    if (S.stop || S.queued >= S.queue_max) {
        int q = S.queued;
        pthread_mutex_unlock(&S.mu);
        j->refs = 1;
        job_unref(j);
        return send_error(conn, r, 503, "server_error", NULL, "queue_full",
                          "the server is busy: %d requests are waiting (--queue %d); retry later", q, S.queue_max);
    }
    snprintf(j->id, sizeof j->id, "%s-%lu", chat ? "chatcmpl" : "cmpl", ++S.next_id);
    j->refs = 2; /* the worker and this request */
    j->state = J_QUEUED;
    if (S.tail) S.tail->next = j;
    else S.head = j;
    S.tail = j;
    S.queued++;
    r->j = j;
    pthread_cond_signal(&S.work);
    /* wait until the worker accepted (or refused) the job */
    while ((j->state == J_QUEUED || (j->state == J_RUNNING && !j->accepted)) && !j->cancelled) {
        cond_wait_ms(&S.changed, 200);
        if ((j->state == J_QUEUED || (j->state == J_RUNNING && !j->accepted)) && client_gone(j->fd)) j->cancelled = 1;
    }
    if (!j->stream) {
        while (j->state < J_DONE && !j->cancelled) {
            cond_wait_ms(&S.changed, 200);
            if (j->state < J_DONE && client_gone(j->fd)) j->cancelled = 1;
        }
    }
    int cancelled = j->cancelled, state = j->state;
    pthread_mutex_unlock(&S.mu);
    if (state == J_FAILED)
        return send_error(conn, r, j->status, j->status >= 500 ? "server_error" : "invalid_request_error", j->err_param,
                          j->err_code, "%s", j->err);
    if (cancelled) return MHD_NO; /* the client is gone */
    if (j->stream) {
        pthread_mutex_lock(&S.mu);
        j->refs++; /* the response's */
        pthread_mutex_unlock(&S.mu);
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_reader, j, stream_free);
        if (!resp) {
            stream_free(j);
            return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        r->status = 200;
        ret = MHD_queue_response(conn, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return ret;
    }
    cJSON *res = base_obj(j, chat ? "chat.completion" : "text_completion");
    cJSON *ch = cJSON_AddArrayToObject(res, "choices"), *c0 = cJSON_CreateObject();
    cJSON_AddNumberToObject(c0, "index", 0);
    char *clean = utf8_clean(j->text ? j->text : "", j->tlen);
    if (chat) {
        cJSON *msg = cJSON_AddObjectToObject(c0, "message");
        cJSON_AddStringToObject(msg, "role", "assistant");
        cJSON_AddStringToObject(msg, "content", clean ? clean : "");
    } else {
        cJSON_AddStringToObject(c0, "text", clean ? clean : "");
        cJSON_AddNullToObject(c0, "logprobs");
    }
    free(clean);
    cJSON_AddStringToObject(c0, "finish_reason", j->finish ? j->finish : "stop");
    cJSON_AddItemToArray(ch, c0);
    add_usage(res, j);
    return send_json(conn, r, 200, res);
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_size, void **con_cls) {
    (void)cls;
    (void)version;
    req *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        snprintf(r->method, sizeof r->method, "%s", method);
        snprintf(r->path, sizeof r->path, "%s", url);
        clock_gettime(CLOCK_MONOTONIC, &r->t0);
        *con_cls = r;
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (r->too_big || r->len + n > BODY_LIMIT) {
            r->too_big = 1;
            return MHD_YES;
        }
        if (r->len + n + 1 > r->cap) {
            size_t nc = r->cap ? r->cap : 4096;
            while (nc < r->len + n + 1) nc *= 2;
            char *b = realloc(r->body, nc);
            if (!b) { r->too_big = 1; return MHD_YES; }
            r->body = b;
            r->cap = nc;
        }
        memcpy(r->body + r->len, upload_data, n);
        r->len += n;
        r->body[r->len] = 0;
        return MHD_YES;
    }
    int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (!strcmp(url, "/health") || !strcmp(url, "/v1/health")) {
        if (!get) return send_error(conn, r, 405, "invalid_request_error", NULL, "method_not_allowed", "use GET %s", url);
        pthread_mutex_lock(&S.mu);
        int q = S.queued;
        pthread_mutex_unlock(&S.mu);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", "ok");
        cJSON_AddNumberToObject(o, "queued", q);
        return send_json(conn, r, 200, o);
    }
    if (!strcmp(url, "/v1/models")) {
        if (!get) return send_error(conn, r, 405, "invalid_request_error", NULL, "method_not_allowed", "use GET %s", url);
        cJSON *o = cJSON_CreateObject(), *d = cJSON_AddArrayToObject(o, "data"), *m = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "object", "list");
        cJSON_AddStringToObject(m, "id", S.model_name);
        cJSON_AddStringToObject(m, "object", "model");
        cJSON_AddNumberToObject(m, "created", (double)S.started);
        cJSON_AddStringToObject(m, "owned_by", "staticlm");
        cJSON_AddItemToArray(d, m);
        return send_json(conn, r, 200, o);
    }
    int chat = !strcmp(url, "/v1/chat/completions"), comp = !strcmp(url, "/v1/completions");
    if (chat || comp) {
        if (!post) return send_error(conn, r, 405, "invalid_request_error", NULL, "method_not_allowed", "use POST %s", url);
        return handle_completion(conn, r, chat);
    }
    return send_error(conn, r, 404, "invalid_request_error", NULL, "not_found", "unknown endpoint %s %s", method, url);
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)conn;
    req *r = *con_cls;
    if (!r) return;
    *con_cls = NULL;
    int pt = 0, ct = 0, aborted = toe != MHD_REQUEST_TERMINATED_COMPLETED_OK;
    const char *fin = NULL;
    if (r->j) {
        pthread_mutex_lock(&S.mu);
        if (r->j->state < J_DONE || aborted) r->j->cancelled = 1;
        pt = r->j->prompt_tokens;
        ct = r->j->completion_tokens;
        fin = r->j->finish;
        job_unref(r->j);
        pthread_mutex_unlock(&S.mu);
    }
    fprintf(stderr, "serve: %s %s %d%s prompt_tokens=%d completion_tokens=%d %.1f ms%s%s%s\n", r->method, r->path,
            r->status, r->stream ? " stream" : "", pt, ct, ms_since(&r->t0), fin ? " finish=" : "", fin ? fin : "",
            aborted ? " (client gone)" : "");
    free(r->body);
    free(r);
}

static void usage_serve(FILE *f) {
    fprintf(f,
            "usage: staticlm serve [-m MODEL] [-z TOKENIZER] [--host ADDR] [--port N] [--queue N] [options]\n"
            "\n"
            "An OpenAI-compatible HTTP server for one model, one request at a time:\n"
            "  POST /v1/chat/completions   chat (the chat template renders the messages)\n"
            "  POST /v1/completions        raw prompt (with BOS); default max_tokens 16\n"
            "  GET  /v1/models, GET /health\n"
            "Requests take model, max_tokens, temperature, top_p, top_k, seed, stop (a string\n"
            "or up to 4), stream (server-sent events) and stream_options.include_usage.\n"
            "One line per request goes to stderr.\n"
            "\n"
            "      --host ADDR           IPv4 address to listen on (default 127.0.0.1)\n"
            "      --port N              TCP port; 0 = any free port (default 8080); the\n"
            "                            address is printed on stderr\n"
            "      --queue N             requests that may wait behind the running one; more\n"
            "                            get 503 (default 8)\n"
            "%s"
            "  -h, --help                this text\n",
            slm_cli_common_help);
}

int slm_cli_serve(int argc, char **argv) {
    slm_cli_common cc;
    slm_cli_common_init(&cc);
    const char *host = "127.0.0.1";
    int port = 8080, queue = 8;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        int r = slm_cli_common_opt(&cc, argc, argv, &i);
        if (r < 0) return 2;
        if (r) continue;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) { usage_serve(stdout); return 0; }
        int has = i + 1 < argc;
        if (!strcmp(o, "--host") && has) host = argv[++i];
        else if (!strcmp(o, "--port") && has) { if (!slm_cli_parse_int(argv[++i], o, 0, 65535, &port)) return 2; }
        else if (!strcmp(o, "--queue") && has) { if (!slm_cli_parse_int(argv[++i], o, 0, 4096, &queue)) return 2; }
        else {
            fprintf(stderr, "staticlm: unknown option or missing value '%s' (see staticlm serve --help)\n", o);
            return 2;
        }
    }
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    if (!strcmp(host, "localhost")) host = "127.0.0.1";
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        fprintf(stderr, "staticlm: --host expects an IPv4 address, got '%s'\n", host);
        return 2;
    }
    slm_engine *e = slm_cli_common_load(&cc);
    if (!e) return 1;
    char note[512];
    S.e = e;
    S.tm = slm_chat_template_open(e, cc.chat_template, note, sizeof note);
    S.tok = slm_chat_tok_new(e);
    slm_get_info(e, &S.info);
    S.logits = malloc((size_t)S.info.vocab_size * sizeof(float));
    S.scratch = malloc(slm_sample_scratch_size(S.info.vocab_size));
    S.queue_max = queue;
    S.started = (long)time(NULL);
    const char *base = strrchr(cc.model, '/');
    snprintf(S.model_name, sizeof S.model_name, "%s", base ? base + 1 : cc.model);
    int rc = 0;
    if (!S.tm || !S.tok || !S.logits || !S.scratch) {
        fprintf(stderr, "staticlm: out of memory\n");
        rc = 1;
        goto out;
    }
    if (!strncmp(note, "warning", 7)) fprintf(stderr, "staticlm: %s\n", note);
    else if (cc.verbose) fprintf(stderr, "serve: %s\n", note);

    /* signals are taken by sigwait below; threads inherit the mask */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    pthread_t wt;
    if (pthread_create(&wt, NULL, worker, NULL)) {
        fprintf(stderr, "staticlm: cannot start the worker thread\n");
        rc = 1;
        goto out;
    }
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, (uint16_t)port, NULL,
        NULL, handler, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED, completed,
        NULL, MHD_OPTION_CONNECTION_LIMIT, (unsigned)256, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
        MHD_OPTION_THREAD_STACK_SIZE, (size_t)(1u << 20), MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
        MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "staticlm: cannot listen on %s:%d (%s)\n", host, port,
                errno ? strerror(errno) : "address in use or not available");
        rc = 1;
    } else {
        const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
        int bound = di ? (int)di->port : port;
        fprintf(stderr, "serve: listening on http://%s:%d (model %s, KV capacity %d, queue %d)\n", host, bound,
                S.model_name, slm_capacity(e), queue);
        int sig = 0;
        sigwait(&set, &sig);
        fprintf(stderr, "serve: signal %d, shutting down\n", sig);
    }
    pthread_mutex_lock(&S.mu);
    S.stop = 1;
    pthread_cond_broadcast(&S.work);
    pthread_cond_broadcast(&S.changed);
    pthread_mutex_unlock(&S.mu);
    pthread_join(wt, NULL);
    if (d) MHD_stop_daemon(d);
out:
    free(S.logits);
    free(S.scratch);
    slm_chat_tok_free(S.tok);
    slm_tmpl_free(S.tm);
    slm_free(e);
    return rc;
}

#endif
