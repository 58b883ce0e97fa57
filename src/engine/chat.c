/* Conversations on the KV cache (see chat.h): the public API, and the
 * engine's tokenizer for text/chat_tok.h. */
#include "engine/chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/common.h"
#include "engine/engine.h"
#include "text/bpe.h"
#include "text/chat_tok.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- template choice -------------------------------------------------------- */

static char *read_text_file(const char *path, size_t limit) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            size_t nc = cap ? cap * 2 : 8192;
            if (nc > limit + 4096 + 1) nc = limit + 4096 + 1;
            char *b = slm_realloc(buf, nc);
            if (!b) { slm_xfree(buf); fclose(f); return NULL; }
            buf = b;
            cap = nc;
        }
        size_t k = fread(buf + n, 1, cap - n - 1, f);
        n += k;
        if (k == 0 || n > limit) break;
    }
    fclose(f);
    if (n > limit) { slm_xfree(buf); return NULL; }
    buf[n] = 0;
    return buf;
}

slm_tmpl *slm_chat_template_open(slm_engine *e, const char *override, char *note, size_t notecap) {
    slm_err perr = {0};
    char *src = NULL;
    const char *what = NULL;
    char dummy[4];
    if (!note || !notecap) { note = dummy; notecap = sizeof dummy; }
    note[0] = 0;
    if (override) {
        const char *b = slm_tmpl_builtin(override);
        if (b) {
            src = slm_strdup(b);
            what = "built-in";
        } else {
            src = read_text_file(override, 1u << 20);
            what = "file";
            if (!src) {
                snprintf(note, notecap,
                         "warning: chat template '%s' is neither a built-in (%s) nor a readable file "
                         "(under 1 MiB); using ChatML",
                         override, slm_tmpl_builtin_names());
            }
        }
    } else if (e) {
        long n = slm_model_meta(e, "tokenizer.chat_template", NULL, 0);
        if (n >= 0 && n < (1 << 20)) {
            src = slm_malloc((size_t)n + 1);
            if (src) slm_model_meta(e, "tokenizer.chat_template", src, (size_t)n + 1);
            what = "model's";
        } else {
            snprintf(note, notecap, "the model has no chat template; using ChatML");
        }
    }
    slm_tmpl *t = NULL;
    if (src) {
        t = slm_tmpl_parse(src, &perr);
        if (!t) snprintf(note, notecap, "warning: unsupported chat template (%s: %s); using ChatML", what, perr.msg);
        else snprintf(note, notecap, "chat template: %s%s%s", what, override ? " " : "", override ? override : "");
        slm_xfree(src);
    }
    if (!t) t = slm_tmpl_parse(slm_tmpl_builtin("chatml"), NULL);
    return t;
}

int slm_chat_reasoning_auto(const slm_engine *e, const slm_tmpl *tm) {
    return slm_reason_detect(slm_engine_tokenizer(e), tm ? slm_tmpl_source(tm) : NULL);
}

/* ---- conversations --------------------------------------------------------- */

static void drop_msgs(slm_chat *c, int at, int k);

struct slm_chat {
    slm_engine *e;
    const slm_tmpl *tm;
    slm_chat_cfg cfg;
    slm_chat_tok *tok;
    slm_session *s;
    slm_chat_msg *m;
    int n, cap;
    char *kv; /* the text the session's rows (and its pending token) stand for */
    size_t kv_len, kv_cap;
    int turn;
    slm_info info;
    int reasoning;          /* SLM_REASON_NONE, _DEEPSEEK or _HARMONY */
    slm_reason_out on_text; /* the reply's text, split */
    void *text_ud;
};

slm_chat *slm_chat_new(slm_engine *e, const slm_tmpl *tm, const slm_chat_cfg *cfg) {
    slm_chat *c = slm_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->e = e;
    c->tm = tm;
    c->cfg = *cfg;
    c->reasoning = cfg->reasoning == SLM_REASON_AUTO ? slm_chat_reasoning_auto(e, tm) : cfg->reasoning;
    slm_get_info(e, &c->info);
    c->tok = slm_chat_tok_new(slm_engine_tokenizer(e));
    slm_session_cfg sc;
    memset(&sc, 0, sizeof sc);
    sc.samp = cfg->samp;
    sc.n_predict = cfg->n_predict;
    if (!c->tok || slm_session_new(e, &sc, &c->s)) {
        slm_chat_free(c);
        return NULL;
    }
    return c;
}

void slm_chat_free(slm_chat *c) {
    if (!c) return;
    drop_msgs(c, 0, c->n);
    slm_xfree(c->m);
    slm_xfree(c->kv);
    slm_chat_tok_free(c->tok);
    slm_session_free(c->s);
    slm_xfree(c);
}

slm_session *slm_chat_session(slm_chat *c) { return c ? c->s : NULL; }
int slm_chat_reasoning(const slm_chat *c) { return c->reasoning; }

void slm_chat_on_text(slm_chat *c, slm_reason_out fn, void *ud) {
    c->on_text = fn;
    c->text_ud = ud;
}

int slm_chat_add(slm_chat *c, const char *role, const char *content) { return slm_chat_add_ex(c, role, content, NULL); }

int slm_chat_add_ex(slm_chat *c, const char *role, const char *content, const char *reasoning) {
    if (c->n == c->cap) {
        int nc = c->cap ? c->cap * 2 : 8;
        slm_chat_msg *nm = slm_realloc(c->m, (size_t)nc * sizeof *nm);
        if (!nm) return 0;
        c->m = nm;
        c->cap = nc;
    }
    char *r = slm_strdup(role ? role : ""), *t = slm_strdup(content ? content : "");
    char *rc = reasoning ? slm_strdup(reasoning) : NULL;
    if (!r || !t || (reasoning && !rc)) {
        slm_xfree(r);
        slm_xfree(t);
        slm_xfree(rc);
        return 0;
    }
    memset(&c->m[c->n], 0, sizeof c->m[c->n]); /* no tool calls */
    c->m[c->n].role = r;
    c->m[c->n].content = t;
    c->m[c->n].reasoning_content = rc;
    c->n++;
    return 1;
}

static void drop_msgs(slm_chat *c, int at, int k) {
    if (k <= 0) return;
    for (int i = at; i < at + k; i++) {
        slm_xfree((void *)c->m[i].role);
        slm_xfree((void *)c->m[i].content);
        slm_xfree((void *)c->m[i].reasoning_content);
    }
    memmove(c->m + at, c->m + at + k, (size_t)(c->n - at - k) * sizeof *c->m);
    c->n -= k;
}

static void kv_forget(slm_chat *c) {
    slm_session_reset(c->s);
    c->kv_len = 0;
    if (c->kv) c->kv[0] = 0;
}

void slm_chat_clear(slm_chat *c, int keep_system) {
    int keep = keep_system && c->n > 0 && !strcmp(c->m[0].role, "system") ? 1 : 0;
    drop_msgs(c, keep, c->n - keep);
    kv_forget(c);
    c->turn = 0;
}

int slm_chat_count(const slm_chat *c) { return c->n; }
const slm_chat_msg *slm_chat_messages(const slm_chat *c) { return c->m; }

static int kv_append(slm_chat *c, const char *s, size_t n) {
    if (c->kv_len + n + 1 > c->kv_cap) {
        size_t nc = c->kv_cap ? c->kv_cap : 1024;
        while (nc < c->kv_len + n + 1) nc *= 2;
        char *k = slm_realloc(c->kv, nc);
        if (!k) return 0;
        c->kv = k;
        c->kv_cap = nc;
    }
    memmove(c->kv + c->kv_len, s, n);
    c->kv_len += n;
    c->kv[c->kv_len] = 0;
    return 1;
}

static int reserve_rows(const slm_chat *c) {
    int r = c->cfg.reserve;
    if (r <= 0) {
        r = c->info.min_response_len;
        if (c->cfg.n_predict > 0 && c->cfg.n_predict < r) r = c->cfg.n_predict;
    }
    return r < 1 ? 1 : r;
}

/* The history as the template renders it, with the generation prompt and
 * the chat's kwargs; *mask as slm_tmpl_render_mask (mask NULL: not wanted). */
static char *render(const slm_chat *c, uint8_t **mask, slm_err *err) {
    slm_tmpl_vars v = {0};
    v.bos_token = slm_chat_tok_bos_text(c->tok);
    v.eos_token = slm_chat_tok_eos_text(c->tok);
    v.add_generation_prompt = 1;
    v.kwargs = c->cfg.kwargs;
    v.n_kwargs = c->cfg.n_kwargs;
    return slm_tmpl_render_mask(c->tm, c->m, c->n, &v, mask, err);
}

/* Rows the session holds, counting a sampled token not yet decoded. */
static int held(const slm_chat *c) { return slm_session_tokens(c->s, NULL, 0); }

/* Render the history (with generation prompt) and tokenize what the session
 * does not hold yet. *fresh = 1 when the whole text must be prefilled. */
static int prepare(slm_chat *c, int force_fresh, char **full, int32_t **ids, int *fresh, slm_err *err) {
    uint8_t *mask = NULL; /* the bytes that come from messages: tokenized as text */
    *full = render(c, &mask, err);
    if (!*full) return -1;
    size_t fl = strlen(*full);
    *fresh = force_fresh || held(c) == 0 || c->kv_len == 0 || c->kv_len > fl || memcmp(*full, c->kv, c->kv_len) != 0;
    int n = *fresh ? slm_chat_tokenize_masked(c->tok, *full, mask, 1, ids)
                   : slm_chat_tokenize_masked(c->tok, *full + c->kv_len, mask ? mask + c->kv_len : NULL, 0, ids);
    slm_xfree(mask);
    if (n < 0) {
        if (n == -1) slm_errf(err, SLM_ERR_NOMEM, "out of memory tokenizing the conversation");
        else slm_errf(err, SLM_ERR_CAPACITY, "tokenizing the conversation: %s", slm_tok_encode_error(n));
        slm_xfree(*full);
        *full = NULL;
    }
    return n;
}

/* ---- the reply ----------------------------------------------------------------- */

typedef struct tbuf {
    char *p; /* [n] + NUL, slm_malloc'd; NULL while empty */
    size_t n, cap;
    int oom; /* an append failed */
} tbuf;

static void tb_put(tbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *p = slm_realloc(b->p, nc);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

typedef struct reply {
    slm_chat *c;
    tbuf raw;     /* every piece, as the KV holds them */
    tbuf part[2]; /* the printable text split: [SLM_REASON_ANSWER], [SLM_REASON_THINK] */
} reply;

static void reply_text(void *ud, int kind, const char *s, size_t n) {
    reply *r = ud;
    tb_put(&r->part[kind], s, n);
    if (r->c->on_text) r->c->on_text(r->c->text_ud, kind, s, n);
}

/* The reply becomes an assistant message: as generated (format none), or
 * the answer as content and the reasoning apart. */
static void add_reply(slm_chat *c, reply *r) {
    kv_append(c, r->raw.p ? r->raw.p : "", r->raw.n);
    if (c->reasoning == SLM_REASON_NONE)
        slm_chat_add(c, "assistant", r->raw.p ? r->raw.p : "");
    else
        slm_chat_add_ex(c, "assistant", r->part[SLM_REASON_ANSWER].p ? r->part[SLM_REASON_ANSWER].p : "",
                        r->part[SLM_REASON_THINK].p);
    slm_xfree(r->raw.p);
    slm_xfree(r->part[0].p);
    slm_xfree(r->part[1].p);
}

/* Generate the reply to the prompt now in the KV (c->kv): the session's
 * loop; the reply is every piece it returns, its printable text split by
 * the reasoning parser as it comes. */
static slm_status generate(slm_chat *c, slm_piece_cb cb, void *ud, slm_chat_stats *st, slm_err *err, double t0) {
    reply rp = {c, {0}, {{0}, {0}}};
    slm_reason rs;
    slm_reason_init(&rs, c->reasoning, c->kv, reply_text, &rp);
    slm_status s;
    double td = now_ms();
    for (int g = 0;; g++) {
        int32_t tok;
        const char *piece;
        s = slm_session_next(c->s, &tok, &piece);
        if (g == 0) st->ttft_ms = now_ms() - t0;
        if (s) {
            if (slm_session_stop_reason(c->s) == SLM_STOP_CAPACITY) {
                st->cut = 1;
                s = SLM_OK;
            } else {
                slm_errf(err, s, "%s", slm_session_error(c->s));
            }
            break;
        }
        if (tok < 0) break;
        size_t pl = strlen(piece);
        tb_put(&rp.raw, piece, pl);
        if (rp.raw.oom) break;
        if (slm_piece_printable(piece)) slm_reason_feed(&rs, piece, pl);
        st->n_generated++;
        if (cb && cb(ud, tok, piece, 0)) break;
    }
    slm_reason_finish(&rs);
    st->decode_ms = now_ms() - td;
    add_reply(c, &rp);
    if (s) kv_forget(c);
    return s;
}

slm_status slm_chat_turn(slm_chat *c, const char *user, slm_piece_cb cb, void *ud, slm_chat_stats *st,
                         slm_err *err, char *note, size_t notecap) {
    slm_chat_stats dummy;
    if (!st) st = &dummy;
    memset(st, 0, sizeof *st);
    if (note && notecap) note[0] = 0;
    if (!slm_chat_add(c, "user", user)) {
        return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    }
    const int cap = slm_session_capacity(c->s), reserve = reserve_rows(c);
    double t0 = now_ms();
    char *full = NULL;
    int32_t *ids = NULL;
    int fresh = 0, n, dropped = 0, first_need = 0;
    for (;;) {
        n = prepare(c, dropped > 0, &full, &ids, &fresh, err);
        if (n < 0) {
            drop_msgs(c, c->n - 1, 1);
            return SLM_ERR_ARG;
        }
        int base = fresh ? 0 : held(c);
        if (base + n + reserve <= cap) break;
        if (!first_need) first_need = base + n;
        /* does not fit */
        slm_xfree(ids);
        slm_xfree(full);
        ids = NULL;
        full = NULL;
        if (c->cfg.on_overflow == SLM_OVERFLOW_ERROR) {
            slm_errf(err, SLM_ERR_CAPACITY,
                     "the conversation needs %d tokens (%d in the KV cache + %d new) plus %d for the reply, "
                     "but the KV capacity is %d (--on-overflow error; /reset starts over)",
                     base + n, base, n, reserve, cap);
            drop_msgs(c, c->n - 1, 1);
            return SLM_ERR_CAPACITY;
        }
        int i0 = c->n > 0 && !strcmp(c->m[0].role, "system") ? 1 : 0;
        if (c->n - i0 <= 1) {
            slm_errf(err, SLM_ERR_CAPACITY,
                     "the system prompt and this message alone need %d tokens plus %d for the reply, but the KV capacity is %d",
                     n + (fresh ? 0 : base), reserve, cap);
            drop_msgs(c, c->n - 1, 1);
            return SLM_ERR_CAPACITY;
        }
        /* drop the oldest turn: one message, then up to the next user one */
        int k = 1;
        while (i0 + k < c->n - 1 && strcmp(c->m[i0 + k].role, "user") != 0) k++;
        drop_msgs(c, i0, k);
        dropped += k;
    }
    if (dropped && note)
        snprintf(note, notecap,
                 "history of %d tokens plus %d for the reply exceeds the KV capacity %d: dropped the %d oldest "
                 "message(s), re-prefilling %d tokens",
                 first_need, reserve, cap, dropped, n);
    slm_session_stats s0, s1;
    slm_session_get_stats(c->s, &s0);
    st->turn = ++c->turn;
    st->kept = fresh ? 0 : slm_session_n_past(c->s);
    st->full = fresh;
    st->dropped = dropped;
    double tp = now_ms();
    /* a whole re-rendered history keeps the rows of the prefix it shares with
     * what the session holds or the prefix cache has (a system prompt) */
    slm_status s = fresh ? slm_session_set_prompt(c->s, ids, n) : slm_session_feed(c->s, ids, n);
    slm_xfree(ids);
    if (s) {
        slm_errf(err, s, "%s", slm_session_error(c->s));
        slm_xfree(full);
        kv_forget(c);
        drop_msgs(c, c->n - 1, 1);
        return s;
    }
    slm_session_get_stats(c->s, &s1);
    st->cached = s1.n_reused - s0.n_reused - st->kept;
    st->prefilled = s1.n_prefilled - s0.n_prefilled + st->cached;
    st->prefill_ms = now_ms() - tp;
    st->n_stored = slm_session_n_past(c->s);
    c->kv_len = 0;
    kv_append(c, full, strlen(full));
    slm_xfree(full);

    return generate(c, cb, ud, st, err, t0);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Feed ids and sample the first token (what the time to first token covers). */
static slm_status feed_first(slm_chat *c, const int32_t *ids, int n) {
    slm_status s = slm_session_feed(c->s, ids, n);
    if (!s) s = slm_session_next(c->s, NULL, NULL);
    return s;
}

slm_status slm_chat_bench_ttft(slm_chat *c, const char *user, int reps, double *kept_ms, double *full_ms,
                               int *n_new, int *n_full, slm_err *err) {
    if (reps < 1) reps = 1;
    if (reps > 64) reps = 64;
    if (c->kv_len == 0 || held(c) == 0) {
        slm_errf(err, SLM_ERR_ARG, "bench: run a first turn before timing the second");
        return SLM_ERR_ARG;
    }
    if (!slm_chat_add(c, "user", user)) return SLM_ERR_NOMEM;
    char *hist = slm_strdup(c->kv);
    char *full = render(c, NULL, err);
    drop_msgs(c, c->n - 1, 1);
    slm_status s = SLM_OK;
    double tk[64], tf[64];
    if (!hist || !full) { s = SLM_ERR_ARG; goto out; }
    size_t hl = strlen(hist);
    if (strncmp(full, hist, hl) != 0) {
        slm_errf(err, SLM_ERR_UNSUPPORTED, "bench: the template re-renders earlier turns differently; KV reuse does not apply");
        s = SLM_ERR_UNSUPPORTED;
        goto out;
    }
    int32_t *hid = NULL;
    int nh = slm_chat_tokenize(c->tok, hist, 1, &hid);
    if (nh < 0) { s = SLM_ERR_NOMEM; goto out; }
    for (int r = 0; r < reps && !s; r++) {
        /* KV kept: the history is in the KV; tokenize + prefill the new turn */
        slm_session_reset(c->s);
        if ((s = slm_session_feed(c->s, hid, nh))) break;
        double t0 = now_ms();
        int32_t *ids = NULL;
        int n = slm_chat_tokenize(c->tok, full + hl, 0, &ids);
        if (n <= 0) { slm_xfree(ids); s = SLM_ERR_INTERNAL; break; }
        s = feed_first(c, ids, n);
        tk[r] = now_ms() - t0;
        *n_new = n;
        slm_xfree(ids);
        if (s) break;
        /* re-prefill: reset, tokenize and prefill the whole history */
        t0 = now_ms();
        slm_session_reset(c->s);
        n = slm_chat_tokenize(c->tok, full, 1, &ids);
        if (n <= 0) { slm_xfree(ids); s = SLM_ERR_INTERNAL; break; }
        s = feed_first(c, ids, n);
        tf[r] = now_ms() - t0;
        *n_full = n;
        slm_xfree(ids);
    }
    slm_xfree(hid);
    if (s && !err->msg[0]) slm_errf(err, s, "%s", slm_session_error(c->s));
    if (!s) {
        qsort(tk, (size_t)reps, sizeof(double), cmp_d);
        qsort(tf, (size_t)reps, sizeof(double), cmp_d);
        *kept_ms = tk[reps / 2];
        *full_ms = tf[reps / 2];
    }
    kv_forget(c);
out:
    slm_xfree(hist);
    slm_xfree(full);
    return s;
}
