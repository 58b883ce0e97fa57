/* Conversations on the KV cache (see chat.h). Public API only. */
#include "engine/chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/common.h"
#include "text/bpe.h"

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

/* ---- tokenization ------------------------------------------------------------ */

struct slm_chat_tok {
    slm_engine *e;
    char bos[64], eos[64];
    int bos_id, eos_id, V;
    /* raw piece -> id, built on first use */
    char *blob;
    uint32_t *off;
    uint32_t *plen;
    int32_t *slot;
    uint32_t nslot;
    int maxlen;
    int built;
};

static void trim_copy(char *dst, size_t cap, const char *s) {
    while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\t' || s[n - 1] == '\r')) n--;
    if (n >= cap) n = 0; /* not a sensible special token text */
    memcpy(dst, s, n);
    dst[n] = 0;
}

slm_chat_tok *slm_chat_tok_new(slm_engine *e) {
    slm_chat_tok *t = slm_calloc(1, sizeof *t);
    if (!t) return NULL;
    slm_info in;
    slm_get_info(e, &in);
    t->e = e;
    t->bos_id = in.bos_id;
    t->eos_id = in.eos_id;
    t->V = in.vocab_size;
    trim_copy(t->bos, sizeof t->bos, slm_token_piece(e, -1, in.bos_id));
    trim_copy(t->eos, sizeof t->eos, slm_token_piece(e, -1, in.eos_id));
    if (!strcmp(t->bos, t->eos)) t->eos[0] = 0;
    return t;
}

void slm_chat_tok_free(slm_chat_tok *t) {
    if (!t) return;
    slm_xfree(t->blob);
    slm_xfree(t->off);
    slm_xfree(t->plen);
    slm_xfree(t->slot);
    slm_xfree(t);
}

const char *slm_chat_tok_bos_text(const slm_chat_tok *t) { return t ? t->bos : ""; }
const char *slm_chat_tok_eos_text(const slm_chat_tok *t) { return t ? t->eos : ""; }

static uint32_t hash_bytes(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static int build_map(slm_chat_tok *t) {
    if (t->built) return t->built > 0;
    t->built = -1;
    int V = t->V;
    size_t total = 0;
    for (int i = 0; i < V; i++) total += strlen(slm_token_piece(t->e, -1, i));
    t->blob = slm_malloc(total + 1);
    t->off = slm_malloc((size_t)V * sizeof(uint32_t));
    t->plen = slm_malloc((size_t)V * sizeof(uint32_t));
    t->nslot = 1;
    while (t->nslot < (uint32_t)V * 2) t->nslot <<= 1;
    t->slot = slm_malloc((size_t)t->nslot * sizeof(int32_t));
    if (!t->blob || !t->off || !t->plen || !t->slot || total > UINT32_MAX) return 0;
    for (uint32_t i = 0; i < t->nslot; i++) t->slot[i] = -1;
    size_t o = 0;
    for (int i = 0; i < V; i++) {
        const char *p = slm_token_piece(t->e, -1, i);
        size_t n = strlen(p);
        memcpy(t->blob + o, p, n);
        t->off[i] = (uint32_t)o;
        t->plen[i] = (uint32_t)n;
        o += n;
        if ((int)n > t->maxlen) t->maxlen = (int)n;
    }
    /* highest id first, first insert wins: char pieces beat byte tokens */
    for (int i = V - 1; i >= 0; i--) {
        if (!t->plen[i] || i == t->bos_id || i == t->eos_id) continue;
        uint32_t h = hash_bytes(t->blob + t->off[i], t->plen[i]) & (t->nslot - 1);
        int dup = 0;
        while (t->slot[h] >= 0) {
            int j = t->slot[h];
            if (t->plen[j] == t->plen[i] && !memcmp(t->blob + t->off[j], t->blob + t->off[i], t->plen[i])) { dup = 1; break; }
            h = (h + 1) & (t->nslot - 1);
        }
        if (!dup) t->slot[h] = i;
    }
    t->built = 1;
    return 1;
}

static int lookup_piece(const slm_chat_tok *t, const char *s, size_t n) {
    uint32_t h = hash_bytes(s, n) & (t->nslot - 1);
    while (t->slot[h] >= 0) {
        int j = t->slot[h];
        if (t->plen[j] == n && !memcmp(t->blob + t->off[j], s, n)) return j;
        h = (h + 1) & (t->nslot - 1);
    }
    return -1;
}

typedef struct ivec {
    int32_t *v;
    int n, cap;
    int oom;
} ivec;
static void iv_push(ivec *v, int32_t x) {
    if (v->oom) return;
    if (v->n == v->cap) {
        int nc = v->cap ? v->cap * 2 : 64;
        int32_t *nv = slm_realloc(v->v, (size_t)nc * sizeof(int32_t));
        if (!nv) { v->oom = 1; return; }
        v->v = nv;
        v->cap = nc;
    }
    v->v[v->n++] = x;
}

/* slm_tokenize of a NUL-terminated segment, appended to out; special-token
 * text on bytes marked in plain (NULL: none) stays text. */
static int tok_segment(slm_chat_tok *t, const char *seg, const uint8_t *plain, int add_bos, int32_t **ids) {
    int n = slm_tokenize_masked(t->e, seg, plain, add_bos, NULL, 0);
    if (n < 0) return -1;
    *ids = slm_malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    if (!*ids) return -1;
    slm_tokenize_masked(t->e, seg, plain, add_bos, *ids, n);
    return n;
}

/* A continuation segment: tokens whose pieces concatenate to exactly seg
 * (SentencePiece would add a dummy-prefix space; take it out again). */
static int tok_continue(slm_chat_tok *t, const char *seg, const uint8_t *plain, ivec *out) {
    int32_t *ids = NULL;
    int n = tok_segment(t, seg, plain, 0, &ids);
    if (n < 0) return -1;
    size_t sl = strlen(seg), cl = 0;
    for (int i = 0; i < n; i++) cl += strlen(slm_token_piece(t->e, -1, ids[i]));
    int start = 0, save = out->n;
    if (cl == sl + 1 && n > 0 && build_map(t)) {
        const char *p0 = slm_token_piece(t->e, -1, ids[0]);
        if (p0[0] == ' ') {
            /* first piece " xyz": replace it with a greedy tokenization of "xyz" */
            size_t rl = strlen(p0 + 1);
            const char *rest = p0 + 1;
            size_t i = 0;
            while (i < rl) {
                size_t k = rl - i < (size_t)t->maxlen ? rl - i : (size_t)t->maxlen;
                int id = -1;
                for (; k > 0; k--)
                    if ((id = lookup_piece(t, rest + i, k)) >= 0) break;
                if (id < 0) break; /* no token for this byte: keep the original */
                iv_push(out, id);
                i += k;
            }
            if (i == rl) start = 1;
            else out->n = save;
        }
    }
    for (int i = start; i < n; i++) iv_push(out, ids[i]);
    slm_xfree(ids);
    return out->oom ? -1 : 0;
}

/* 1 when any of plain[0, n) is set. */
static int marked(const uint8_t *plain, size_t n) {
    for (size_t i = 0; plain && i < n; i++)
        if (plain[i]) return 1;
    return 0;
}

/* The first BOS / EOS text in s whose bytes are not marked in plain (s's
 * mask; NULL: none): message content never becomes BOS / EOS. */
static const char *find_special(const slm_chat_tok *t, const char *s, const uint8_t *plain, int *id, size_t *len) {
    const char *best = NULL;
    const char *texts[2] = {t->bos, t->eos};
    int ids[2] = {t->bos_id, t->eos_id};
    for (int k = 0; k < 2; k++) {
        if (!texts[k][0]) continue;
        const size_t tl = strlen(texts[k]);
        const char *p = strstr(s, texts[k]);
        while (p && plain && marked(plain + (p - s), tl)) p = strstr(p + 1, texts[k]);
        if (p && (!best || p < best)) {
            best = p;
            *id = ids[k];
            *len = strlen(texts[k]);
        }
    }
    return best;
}

static int tokenize_core(slm_chat_tok *t, const char *text, const uint8_t *plain, int start, int special,
                         int32_t **ids_out);

int slm_chat_tokenize(slm_chat_tok *t, const char *text, int start, int32_t **ids_out) {
    return tokenize_core(t, text, NULL, start, 1, ids_out);
}

int slm_chat_tokenize_ex(slm_chat_tok *t, const char *text, int start, int special, int32_t **ids_out) {
    return tokenize_core(t, text, NULL, start, special, ids_out);
}

int slm_chat_tokenize_masked(slm_chat_tok *t, const char *text, const uint8_t *plain, int start, int32_t **ids_out) {
    return tokenize_core(t, text, plain, start, 1, ids_out);
}

/* special = 0: BOS / EOS text is not split out; plain: see slm_chat_tokenize_masked. */
static int tokenize_core(slm_chat_tok *t, const char *text, const uint8_t *plain, int start, int special,
                         int32_t **ids_out) {
    *ids_out = NULL;
    if (!t || !text) return -1;
    ivec out = {0};
    size_t bl = strlen(t->bos);
    if (start && bl && !strncmp(text, t->bos, bl) && !marked(plain, bl)) {
        text += bl;
        if (plain) plain += bl;
    }
    char *buf = slm_strdup(text);
    if (!buf) return -1;
    char *s = buf;
    int first = 1;
    while (!out.oom) {
        int sid = -1;
        size_t slen = 0;
        const uint8_t *sm = plain ? plain + (s - buf) : NULL; /* s's mask */
        char *sp = special ? (char *)find_special(t, s, sm, &sid, &slen) : NULL;
        if (sp) *sp = 0;
        if (first && start) {
            int32_t *ids = NULL;
            int n = *s ? tok_segment(t, s, sm, 1, &ids) : 0;
            if (n < 0) { out.oom = 1; break; }
            if (!*s) iv_push(&out, t->bos_id);
            for (int i = 0; i < n; i++) iv_push(&out, ids[i]);
            slm_xfree(ids);
        } else if (*s) {
            if (tok_continue(t, s, sm, &out)) { out.oom = 1; break; }
        }
        first = 0;
        if (!sp) break;
        iv_push(&out, sid);
        s = sp + slen;
    }
    slm_xfree(buf);
    if (out.oom) {
        slm_xfree(out.v);
        return -1;
    }
    if (!out.v) out.v = slm_malloc(sizeof(int32_t));
    *ids_out = out.v;
    return out.n;
}

char *slm_chat_render(const slm_tmpl *tm, const slm_chat_tok *t, const slm_chat_msg *msgs, int n,
                      int add_generation_prompt, slm_err *err) {
    return slm_chat_render_mask(tm, t, msgs, n, add_generation_prompt, NULL, err);
}

char *slm_chat_render_mask(const slm_tmpl *tm, const slm_chat_tok *t, const slm_chat_msg *msgs, int n,
                           int add_generation_prompt, uint8_t **mask, slm_err *err) {
    slm_tmpl_vars v = {0};
    v.bos_token = t ? t->bos : "";
    v.eos_token = t ? t->eos : "";
    v.add_generation_prompt = add_generation_prompt;
    slm_err e;
    char *out = slm_tmpl_render_mask(tm, msgs, n, &v, mask, &e);
    if (!out && err) *err = e;
    return out;
}

/* ---- conversations --------------------------------------------------------- */

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
};

slm_chat *slm_chat_new(slm_engine *e, const slm_tmpl *tm, const slm_chat_cfg *cfg) {
    slm_chat *c = slm_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->e = e;
    c->tm = tm;
    c->cfg = *cfg;
    slm_get_info(e, &c->info);
    c->tok = slm_chat_tok_new(e);
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
    for (int i = 0; i < c->n; i++) {
        slm_xfree((void *)c->m[i].role);
        slm_xfree((void *)c->m[i].content);
    }
    slm_xfree(c->m);
    slm_xfree(c->kv);
    slm_chat_tok_free(c->tok);
    slm_session_free(c->s);
    slm_xfree(c);
}

slm_session *slm_chat_session(slm_chat *c) { return c ? c->s : NULL; }

int slm_chat_add(slm_chat *c, const char *role, const char *content) {
    if (c->n == c->cap) {
        int nc = c->cap ? c->cap * 2 : 8;
        slm_chat_msg *nm = slm_realloc(c->m, (size_t)nc * sizeof *nm);
        if (!nm) return 0;
        c->m = nm;
        c->cap = nc;
    }
    char *r = slm_strdup(role ? role : ""), *t = slm_strdup(content ? content : "");
    if (!r || !t) {
        slm_xfree(r);
        slm_xfree(t);
        return 0;
    }
    c->m[c->n].role = r;
    c->m[c->n].content = t;
    c->n++;
    return 1;
}

static void drop_msgs(slm_chat *c, int at, int k) {
    if (k <= 0) return;
    for (int i = at; i < at + k; i++) {
        slm_xfree((void *)c->m[i].role);
        slm_xfree((void *)c->m[i].content);
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

/* Rows the session holds, counting a sampled token not yet decoded. */
static int held(const slm_chat *c) { return slm_session_tokens(c->s, NULL, 0); }

/* Render the history (with generation prompt) and tokenize what the session
 * does not hold yet. *fresh = 1 when the whole text must be prefilled. */
static int prepare(slm_chat *c, int force_fresh, char **full, int32_t **ids, int *fresh, slm_err *err) {
    uint8_t *mask = NULL; /* the bytes that come from messages: tokenized as text */
    *full = slm_chat_render_mask(c->tm, c->tok, c->m, c->n, 1, &mask, err);
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

    /* generate: the session's loop; the reply is every piece it returns */
    char *reply = NULL;
    size_t rl = 0, rc = 0;
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
        if (rl + pl + 1 > rc) {
            size_t nc = rc ? rc * 2 : 256;
            while (nc < rl + pl + 1) nc *= 2;
            char *nr = slm_realloc(reply, nc);
            if (!nr) break;
            reply = nr;
            rc = nc;
        }
        memcpy(reply + rl, piece, pl + 1);
        rl += pl;
        st->n_generated++;
        if (cb && cb(ud, tok, piece, 0)) break;
    }
    st->decode_ms = now_ms() - td;
    kv_append(c, reply ? reply : "", rl);
    slm_chat_add(c, "assistant", reply ? reply : "");
    slm_xfree(reply);
    if (s) {
        kv_forget(c);
        return s;
    }
    return SLM_OK;
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
    char *full = slm_chat_render(c->tm, c->tok, c->m, c->n, 1, err);
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
