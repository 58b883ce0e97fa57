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

int slm_chat_tool_auto(const slm_engine *e, const slm_tmpl *tm) {
    return slm_tool_detect(slm_engine_tokenizer(e), tm ? slm_tmpl_source(tm) : NULL);
}

/* ---- conversations --------------------------------------------------------- */

static void drop_msgs(slm_chat *c, int at, int k);
static void calls_clear(slm_chat *c);

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
    slm_chat_prompt_fn on_prompt; /* each turn's prompt (and grammar) before its prefill */
    void *prompt_ud;
    int tool_fmt;           /* SLM_TOOL_*: how replies' calls are parsed (NONE: no tools, or choice none) */
    slm_tool_call *calls;   /* the last reply's calls [ncalls] */
    int ncalls, ccalls;
    unsigned long long call_seq; /* calls made so far: their ids */
};

slm_chat *slm_chat_new(slm_engine *e, const slm_tmpl *tm, const slm_chat_cfg *cfg) {
    slm_chat *c = slm_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->e = e;
    c->tm = tm;
    c->cfg = *cfg;
    c->reasoning = cfg->reasoning == SLM_REASON_AUTO ? slm_chat_reasoning_auto(e, tm) : cfg->reasoning;
    c->tool_fmt = cfg->tools && cfg->tool_choice != SLM_TOOL_CHOICE_NONE ? slm_chat_tool_auto(e, tm) : SLM_TOOL_NONE;
    c->call_seq = cfg->samp.seed * 0x9E3779B97F4A7C15ull;
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
    calls_clear(c);
    slm_xfree(c->calls);
    slm_xfree(c->m);
    slm_xfree(c->kv);
    slm_chat_tok_free(c->tok);
    slm_session_free(c->s);
    slm_xfree(c);
}

slm_session *slm_chat_session(slm_chat *c) { return c ? c->s : NULL; }
int slm_chat_reasoning(const slm_chat *c) { return c->reasoning; }
int slm_chat_tool_format(const slm_chat *c) { return c->tool_fmt; }
int slm_chat_n_calls(const slm_chat *c) { return c->ncalls; }
const slm_tool_call *slm_chat_calls(const slm_chat *c) { return c->calls; }

void slm_chat_on_prompt(slm_chat *c, slm_chat_prompt_fn fn, void *ud) {
    c->on_prompt = fn;
    c->prompt_ud = ud;
}

void slm_chat_on_text(slm_chat *c, slm_reason_out fn, void *ud) {
    c->on_text = fn;
    c->text_ud = ud;
}

int slm_chat_add(slm_chat *c, const char *role, const char *content) { return slm_chat_add_ex(c, role, content, NULL); }

int slm_chat_add_ex(slm_chat *c, const char *role, const char *content, const char *reasoning) {
    slm_chat_msg m = {0};
    m.role = role;
    m.content = content;
    m.reasoning_content = reasoning;
    return slm_chat_add_msg(c, &m);
}

int slm_chat_add_tool(slm_chat *c, const char *call_id, const char *name, const char *content) {
    slm_chat_msg m = {0};
    m.role = "tool";
    m.content = content;
    m.tool_call_id = call_id;
    m.name = name;
    return slm_chat_add_msg(c, &m);
}

/* The message's strings, each a copy (NULL stays NULL). */
static void msg_free(slm_chat_msg *m) {
    slm_xfree((void *)m->role);
    slm_xfree((void *)m->content);
    slm_xfree((void *)m->reasoning_content);
    slm_xfree((void *)m->tool_calls);
    slm_xfree((void *)m->tool_call_id);
    slm_xfree((void *)m->name);
}

int slm_chat_add_msg(slm_chat *c, const slm_chat_msg *in) {
    if (c->n == c->cap) {
        int nc = c->cap ? c->cap * 2 : 8;
        slm_chat_msg *nm = slm_realloc(c->m, (size_t)nc * sizeof *nm);
        if (!nm) return 0;
        c->m = nm;
        c->cap = nc;
    }
    slm_chat_msg m = {0};
    const char *const src[6] = {in->role ? in->role : "", in->content ? in->content : "", in->reasoning_content,
                                in->tool_calls, in->tool_call_id, in->name};
    const char **dst[6] = {&m.role, &m.content, &m.reasoning_content, &m.tool_calls, &m.tool_call_id, &m.name};
    for (int i = 0; i < 6; i++)
        if (src[i] && !(*dst[i] = slm_strdup(src[i]))) {
            msg_free(&m);
            return 0;
        }
    c->m[c->n++] = m;
    return 1;
}

static void drop_msgs(slm_chat *c, int at, int k) {
    if (k <= 0) return;
    for (int i = at; i < at + k; i++) msg_free(&c->m[i]);
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
    calls_clear(c);
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
    v.tools = c->cfg.tools;
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
    tbuf raw;         /* every piece, as the KV holds them */
    tbuf part[2];     /* the printable text split: [SLM_REASON_ANSWER], [SLM_REASON_THINK] */
    slm_reason rs;    /* the splitter into reasoning and answer */
    slm_toolcall tc;  /* the answer's calls apart (harmony: the reply's, before the splitter) */
    int skip_call;    /* one_tool_call: the current call is a second one, dropped */
    int oom;          /* a call could not be kept */
} reply;

static void reply_emit(reply *r, int kind, const char *s, size_t n) {
    tb_put(&r->part[kind], s, n);
    if (r->c->on_text) r->c->on_text(r->c->text_ud, kind, s, n);
}

/* The splitter's output: the answer on to the tool call parser (harmony's
 * calls came out before the splitter), the rest to the reply. */
static void reply_text(void *ud, int kind, const char *s, size_t n) {
    reply *r = ud;
    const int fmt = r->c->tool_fmt;
    if (kind == SLM_REASON_ANSWER && fmt != SLM_TOOL_NONE && fmt != SLM_TOOL_HARMONY) slm_tool_feed(&r->tc, s, n);
    else reply_emit(r, kind, s, n);
}

static void calls_clear(slm_chat *c) {
    for (int i = 0; i < c->ncalls; i++) {
        slm_xfree(c->calls[i].name);
        slm_xfree(c->calls[i].args);
    }
    c->ncalls = 0;
}

/* The tool call parser's output: text to the answer (harmony: on to the
 * splitter), calls to c->calls. */
static void reply_tool(void *ud, int ev, const char *s, size_t n) {
    reply *r = ud;
    slm_chat *c = r->c;
    if (ev == SLM_TOOL_TEXT) {
        if (c->tool_fmt == SLM_TOOL_HARMONY) slm_reason_feed(&r->rs, s, n);
        else reply_emit(r, SLM_REASON_ANSWER, s, n);
        return;
    }
    if (ev == SLM_TOOL_CALL) {
        r->skip_call = c->ncalls > 0 && c->cfg.one_tool_call;
        if (r->skip_call) return;
        if (c->ncalls == c->ccalls) {
            int nc = c->ccalls ? c->ccalls * 2 : 4;
            slm_tool_call *k = slm_realloc(c->calls, (size_t)nc * sizeof *k);
            if (!k) { r->oom = 1; return; }
            c->calls = k;
            c->ccalls = nc;
        }
        slm_tool_call *k = &c->calls[c->ncalls];
        memset(k, 0, sizeof *k);
        slm_tool_call_id(c->tool_fmt, ++c->call_seq, k->id, sizeof k->id);
        if (!(k->name = slm_malloc(n + 1))) { r->oom = 1; return; }
        memcpy(k->name, s, n);
        k->name[n] = 0;
        c->ncalls++;
        return;
    }
    if (r->skip_call || !c->ncalls) {
        if (ev == SLM_TOOL_END) r->skip_call = 0;
        return;
    }
    slm_tool_call *k = &c->calls[c->ncalls - 1];
    if (ev == SLM_TOOL_END) {
        k->done = 1;
        return;
    }
    if (k->alen + n + 1 > k->acap) {
        size_t nc = k->acap ? k->acap * 2 : 64;
        while (nc < k->alen + n + 1) nc *= 2;
        char *a = slm_realloc(k->args, nc);
        if (!a) { r->oom = 1; return; }
        k->args = a;
        k->acap = nc;
    }
    memcpy(k->args + k->alen, s, n);
    k->alen += n;
    k->args[k->alen] = 0;
}

/* The reply becomes an assistant message: as generated (format none, no
 * tools), or the answer as content, the reasoning apart and the calls as
 * its tool_calls (content "" when the rest is white space). */
static void add_reply(slm_chat *c, reply *r) {
    kv_append(c, r->raw.p ? r->raw.p : "", r->raw.n);
    slm_chat_msg m = {0};
    m.role = "assistant";
    const char *ans = r->part[SLM_REASON_ANSWER].p ? r->part[SLM_REASON_ANSWER].p : "";
    m.content = c->reasoning == SLM_REASON_NONE && c->tool_fmt == SLM_TOOL_NONE ? (r->raw.p ? r->raw.p : "") : ans;
    if (c->reasoning != SLM_REASON_NONE) m.reasoning_content = r->part[SLM_REASON_THINK].p;
    char *calls = c->ncalls ? slm_tool_calls_json(c->calls, c->ncalls) : NULL;
    if (calls) {
        m.tool_calls = calls;
        if (!ans[strspn(ans, " \t\r\n")]) m.content = "";
    }
    slm_chat_add_msg(c, &m);
    slm_xfree(calls);
    slm_xfree(r->raw.p);
    slm_xfree(r->part[0].p);
    slm_xfree(r->part[1].p);
}

/* Feed a printable piece through the parsers: the splitter first, its
 * answer then the tool call parser (harmony: the other way round). */
static void reply_feed(reply *r, const char *piece, size_t n) {
    if (r->c->tool_fmt == SLM_TOOL_HARMONY) slm_tool_feed(&r->tc, piece, n);
    else slm_reason_feed(&r->rs, piece, n);
}

static void reply_finish(reply *r) {
    const int first = r->c->tool_fmt == SLM_TOOL_HARMONY;
    if (first) slm_tool_finish(&r->tc);
    slm_reason_finish(&r->rs);
    if (!first) slm_tool_finish(&r->tc);
    if (r->tc.oom) r->oom = 1;
    slm_tool_free(&r->tc);
}

/* Generate the reply to the prompt now in the KV (c->kv): the session's
 * loop; the reply is every piece it returns, its printable text split by
 * the reasoning parser and its calls taken apart by the tool call parser
 * as it comes. */
static slm_status generate(slm_chat *c, slm_piece_cb cb, void *ud, slm_chat_stats *st, slm_err *err, double t0) {
    reply rp;
    memset(&rp, 0, sizeof rp);
    rp.c = c;
    calls_clear(c);
    slm_reason_init(&rp.rs, c->reasoning, c->kv, reply_text, &rp);
    slm_tool_init(&rp.tc, c->tool_fmt, c->kv, reply_tool, &rp);
    slm_status s = c->tool_fmt == SLM_TOOL_XML ? slm_tool_xml_types(&rp.tc, c->cfg.tools) : SLM_OK;
    if (s) slm_errf(err, s, "out of memory");
    double td = now_ms();
    for (int g = 0; !s; g++) {
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
        if (slm_piece_shown(c->e, piece)) reply_feed(&rp, piece, pl);
        st->n_generated++;
        if (cb && cb(ud, tok, piece, 0)) break;
    }
    reply_finish(&rp);
    if (!s && (rp.oom || rp.raw.oom)) s = slm_errf(err, SLM_ERR_NOMEM, "out of memory keeping the reply");
    st->decode_ms = now_ms() - td;
    add_reply(c, &rp);
    st->n_calls = c->ncalls;
    if (s) kv_forget(c);
    return s;
}

/* The session's sampling: the chat's, with grammar (NULL: the chat's own).
 * A turn under a grammar of its own varies the seed by the turn. */
static slm_status configure(slm_chat *c, const char *grammar, const char *tokens, slm_err *err) {
    slm_session_cfg sc;
    memset(&sc, 0, sizeof sc);
    sc.samp = c->cfg.samp;
    sc.n_predict = c->cfg.n_predict;
    if (grammar) {
        sc.samp.grammar = grammar;
        sc.samp.grammar_tokens = tokens;
        if (sc.samp.seed) sc.samp.seed += (uint64_t)c->turn * 0x9E3779B97F4A7C15ull;
    }
    slm_status s = slm_session_configure(c->s, &sc);
    if (s) slm_errf(err, s, "%s", slm_session_error(c->s));
    return s;
}

/* tool_choice required / named, a reply to a user message: the grammar of
 * a reply that is calls in the model's format, made for this prompt (it
 * may open a call or the thinking); *out its text (slm_xfree). */
static slm_status forced_grammar(slm_chat *c, const char *prompt, char **out, const char **tokens, slm_err *err) {
    int bad = -1;
    const int think = c->reasoning == (c->tool_fmt == SLM_TOOL_GEMMA4 ? SLM_REASON_GEMMA4 : SLM_REASON_DEEPSEEK);
    return slm_tool_grammar(c->tool_fmt, c->cfg.tool_fns, c->cfg.n_tool_fns, !c->cfg.one_tool_call, think, prompt, out, tokens, &bad,
                            err);
}

/* Render and tokenize the history that fits: drop the oldest turns before
 * message cur (the current turn's first) while it does not (truncate
 * policy). *nids: the count of new ids. */
static slm_status fit(slm_chat *c, int cur, char **full, int32_t **ids, int *nids, int *fresh, int *dropped, char *note,
                      size_t notecap, slm_err *err) {
    const int cap = slm_session_capacity(c->s), reserve = reserve_rows(c);
    int n, first_need = 0;
    for (;;) {
        n = prepare(c, *dropped > 0, full, ids, fresh, err);
        if (n < 0) return SLM_ERR_ARG;
        int base = *fresh ? 0 : held(c);
        if (base + n + reserve <= cap) break;
        if (!first_need) first_need = base + n;
        /* does not fit */
        slm_xfree(*ids);
        slm_xfree(*full);
        *ids = NULL;
        *full = NULL;
        if (c->cfg.on_overflow == SLM_OVERFLOW_ERROR) {
            return slm_errf(err, SLM_ERR_CAPACITY,
                            "the conversation needs %d tokens (%d in the KV cache + %d new) plus %d for the reply, "
                            "but the KV capacity is %d (--on-overflow error; /reset starts over)",
                            base + n, base, n, reserve, cap);
        }
        int i0 = c->n > 0 && !strcmp(c->m[0].role, "system") ? 1 : 0;
        if (cur <= i0) {
            return slm_errf(err, SLM_ERR_CAPACITY,
                            "the system prompt and this %s alone need %d tokens plus %d for the reply, but the KV "
                            "capacity is %d", cur == c->n - 1 ? "message" : "turn", n + (*fresh ? 0 : base), reserve, cap);
        }
        /* drop the oldest turn: one message, then up to the next user one */
        int k = 1;
        while (i0 + k < cur && strcmp(c->m[i0 + k].role, "user") != 0) k++;
        drop_msgs(c, i0, k);
        cur -= k;
        *dropped += k;
    }
    if (*dropped && note)
        snprintf(note, notecap,
                 "history of %d tokens plus %d for the reply exceeds the KV capacity %d: dropped the %d oldest "
                 "message(s), re-prefilling %d tokens",
                 first_need, reserve, cap, *dropped, n);
    *nids = n;
    return SLM_OK;
}

slm_status slm_chat_turn(slm_chat *c, const char *user, slm_piece_cb cb, void *ud, slm_chat_stats *st,
                         slm_err *err, char *note, size_t notecap) {
    slm_chat_stats dummy;
    if (!st) st = &dummy;
    memset(st, 0, sizeof *st);
    if (note && notecap) note[0] = 0;
    int cur = c->n; /* the current turn's first message */
    if (user && !slm_chat_add(c, "user", user)) return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    if (!user) {
        while (cur > 0 && strcmp(c->m[cur - 1].role, "user")) cur--;
        cur = cur > 0 ? cur - 1 : 0;
        if (!c->n || !strcmp(c->m[c->n - 1].role, "assistant"))
            return slm_errf(err, SLM_ERR_ARG, "nothing to reply to: the conversation ends with %s",
                            c->n ? "the assistant's message" : "no message");
    }
    double t0 = now_ms();
    char *full = NULL, *gram = NULL;
    const char *gtok = NULL;
    int32_t *ids = NULL;
    int fresh = 0, dropped = 0, n = 0;
    slm_status s = fit(c, cur, &full, &ids, &n, &fresh, &dropped, note, notecap, err);
    if (!s && user && c->cfg.tool_choice >= SLM_TOOL_CHOICE_REQUIRED) {
        s = forced_grammar(c, full, &gram, &gtok, err);
        if (!s) s = configure(c, gram, gtok, err);
    }
    if (!s && c->on_prompt) c->on_prompt(c->prompt_ud, full, gram);
    if (s) goto fail;
    slm_session_stats s0, s1;
    slm_session_get_stats(c->s, &s0);
    st->turn = ++c->turn;
    st->kept = fresh ? 0 : slm_session_n_past(c->s);
    st->full = fresh;
    st->dropped = dropped;
    double tp = now_ms();
    /* a whole re-rendered history keeps the rows of the prefix it shares with
     * what the session holds or the prefix cache has (a system prompt) */
    s = fresh ? slm_session_set_prompt(c->s, ids, n) : slm_session_feed(c->s, ids, n);
    slm_xfree(ids);
    ids = NULL;
    if (s) {
        slm_errf(err, s, "%s", slm_session_error(c->s));
        kv_forget(c);
        goto fail;
    }
    slm_session_get_stats(c->s, &s1);
    st->cached = s1.n_reused - s0.n_reused - st->kept;
    st->prefilled = s1.n_prefilled - s0.n_prefilled + st->cached;
    st->prefill_ms = now_ms() - tp;
    st->n_stored = slm_session_n_past(c->s);
    c->kv_len = 0;
    kv_append(c, full, strlen(full));
    slm_xfree(full);
    s = generate(c, cb, ud, st, err, t0);
    if (gram) {
        slm_err e2 = {0};
        slm_status r = configure(c, NULL, NULL, &e2); /* back to the chat's own sampling */
        if (r && !s) s = slm_errf(err, r, "%s", e2.msg);
        slm_xfree(gram);
    }
    return s;
fail:
    if (gram) configure(c, NULL, NULL, &(slm_err){0});
    slm_xfree(gram);
    slm_xfree(ids);
    slm_xfree(full);
    if (user) drop_msgs(c, c->n - 1, 1);
    return s;
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
