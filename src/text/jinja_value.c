/* text/jinja_value.c — the renderer's memory and values (see
 * jinja_internal.h): the arena, errors and the step count, lists, mappings,
 * scopes, the output buffer, conversions to text (str, repr, JSON),
 * truthiness, equality and ordering.
 */
#define _GNU_SOURCE /* memmem */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <time.h>

#include "common/common.h"
#include "text/jinja_internal.h"

void *jv_arena_alloc(arena *a, size_t n) {
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (n > ARENA_LIMIT) return NULL;
    if (!a->head || a->head->cap - a->head->used < n) {
        size_t cap = n > 32768 ? n : 32768;
        if (a->total + cap > ARENA_LIMIT) return NULL;
        ablk *b = slm_malloc(sizeof(ablk) + cap);
        a->oom = !b;
        if (!b) return NULL;
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        a->head = b;
        a->total += cap;
    }
    void *p = (char *)a->head->data + a->head->used;
    a->head->used += n;
    return p;
}

void jv_arena_free(arena *a) {
    ablk *b = a->head;
    while (b) {
        ablk *n = b->next;
        slm_xfree(b);
        b = n;
    }
    a->head = NULL;
    a->total = 0;
}

/* ---- errors, memory, the step count ------------------------------------------ */

void jv_fail(R *r, const node *n, slm_status s, const char *fmt, ...) {
    char msg[SLM_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!n) n = r->cur;
    if (n) slm_errf(r->err, s, "line %d: %s", n->line, msg);
    else slm_errf(r->err, s, "%s", msg);
    longjmp(r->jb, 1);
}

void *jv_alloc(R *r, size_t n) {
    void *m = jv_arena_alloc(&r->ar, n);
    if (!m && r->ar.oom) jv_fail(r, NULL, SLM_ERR_NOMEM, "out of memory");
    if (!m) jv_fail(r, NULL, SLM_ERR_CAPACITY, "template rendering needs too much memory");
    return m;
}

/* The render thread's CPU time: a render that does little work is not failed
 * because the machine is busy (the server's HTTP threads parsing large
 * bodies, other processes); a template cannot block, so its CPU time is its
 * work. The monotonic clock where the thread clock is missing. */
static long long now_ms(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void jv_budget_start(R *r, const slm_tmpl_vars *vars) {
    r->budget = vars && vars->budget ? vars->budget : SLM_TMPL_BUDGET;
    r->time_ms = vars && vars->time_limit_ms ? vars->time_limit_ms : SLM_TMPL_TIME_MS;
    r->deadline_ms = now_ms() + (long long)r->time_ms;
    r->cancel = vars ? vars->cancel : NULL;
    r->cancel_fn = vars ? vars->cancel_fn : NULL;
    r->cancel_ud = vars ? vars->cancel_ud : NULL;
    r->spent = 0;
    r->check_at = 0; /* the first charge checks the cancel flag */
}

void jv_budget_check(R *r) {
    if (r->spent > r->budget)
        jv_fail(r, NULL, SLM_ERR_CAPACITY, "template exceeds its budget of %llu operations",
                (unsigned long long)r->budget);
    if ((r->cancel && atomic_load(r->cancel)) || (r->cancel_fn && r->cancel_fn(r->cancel_ud))) jv_fail(r, NULL, SLM_ERR_CAPACITY, "template rendering cancelled");
    if (now_ms() > r->deadline_ms)
        jv_fail(r, NULL, SLM_ERR_CAPACITY, "template exceeds its time limit of %u ms", r->time_ms);
    r->check_at = r->spent + BUDGET_CHECK_EVERY;
    if (r->check_at > r->budget) r->check_at = r->budget + 1;
}

/* glibc's memmem is linear for long needles (two-way) and bounded for short
 * ones. Charged for the bytes up to the end of the match (all of hay when
 * absent), once the search is done: one search is at most a string's length,
 * which the arena bounds. */
const char *jv_find(R *r, const char *hay, size_t hn, const char *needle, size_t nn) {
    if (nn == 0) return hay;
    if (nn > hn) return NULL;
    const char *q = memmem(hay, hn, needle, nn);
    jv_charge(r, q ? (size_t)(q - hay) + nn : hn);
    return q;
}

val jv_str(R *r, const char *s, size_t n) {
    if (!n) return vstr_lit(""); /* shared: nothing to allocate */
    jv_charge(r, n);
    char *c = jv_alloc(r, n + 1);
    if (n) memcpy(c, s, n);
    c[n] = 0;
    return (val){.t = V_STR, .u.s = {.p = c, .n = n}};
}

vlist *jv_list(R *r, int cap) {
    vlist *l = jv_alloc(r, sizeof *l);
    l->n = 0;
    l->tuple = 0;
    l->cap = cap > 0 ? cap : 4;
    l->v = jv_alloc(r, (size_t)l->cap * sizeof(val));
    return l;
}
void jv_push(R *r, vlist *l, val x) {
    jv_charge(r, COST_ITEM);
    if (l->n == l->cap) {
        if (l->cap > (1 << 24)) jv_err(r, NULL, "list too long");
        val *nv = jv_alloc(r, (size_t)l->cap * 2 * sizeof(val));
        memcpy(nv, l->v, (size_t)l->n * sizeof(val));
        l->v = nv;
        l->cap *= 2;
    }
    l->v[l->n++] = x;
}
vdict *jv_dict(R *r, int cap) {
    vdict *d = jv_alloc(r, sizeof *d);
    d->n = 0;
    d->ns = 0;
    d->cap = cap > 0 ? cap : 4;
    d->k = jv_alloc(r, (size_t)d->cap * sizeof(sstr));
    d->v = jv_alloc(r, (size_t)d->cap * sizeof(val));
    return d;
}
val *jv_dget(R *r, vdict *d, const char *k, size_t kn) {
    jv_charge(r, (uint64_t)d->n * COST_ITEM);
    for (int i = 0; i < d->n; i++)
        if (sseq(d->k[i], k, kn)) return &d->v[i];
    return NULL;
}
void jv_dset(R *r, vdict *d, sstr k, val x) {
    val *e = jv_dget(r, d, k.p, k.n);
    if (e) { *e = x; return; }
    if (d->n == d->cap) {
        if (d->cap > (1 << 20)) jv_fail(r, NULL, SLM_ERR_CAPACITY, "mapping too large");
        sstr *nk = jv_alloc(r, (size_t)d->cap * 2 * sizeof(sstr));
        val *nv = jv_alloc(r, (size_t)d->cap * 2 * sizeof(val));
        memcpy(nk, d->k, (size_t)d->n * sizeof(sstr));
        memcpy(nv, d->v, (size_t)d->n * sizeof(val));
        d->k = nk;
        d->v = nv;
        d->cap *= 2;
    }
    d->k[d->n] = k;
    d->v[d->n++] = x;
}
void jv_dsetc(R *r, vdict *d, const char *k, val x) { jv_dset(r, d, (sstr){k, strlen(k), NULL}, x); }

/* variables */
frame *jv_frame(R *r, frame *up) {
    frame *f = jv_alloc(r, sizeof *f);
    memset(f, 0, sizeof *f);
    f->up = up;
    return f;
}
static val *fget(R *r, frame *f, const char *k, size_t kn) {
    jv_charge(r, (uint64_t)f->n * COST_ITEM);
    for (int i = 0; i < f->n; i++)
        if (sseq(f->k[i], k, kn)) return &f->v[i];
    return NULL;
}
void jv_fset(R *r, frame *f, const char *k, val x) {
    size_t kn = strlen(k);
    val *e = fget(r, f, k, kn);
    if (e) { *e = x; return; }
    if (f->n == f->cap) {
        int nc = f->cap ? f->cap * 2 : 8;
        sstr *nk = jv_alloc(r, (size_t)nc * sizeof(sstr));
        val *nv = jv_alloc(r, (size_t)nc * sizeof(val));
        if (f->n) {
            memcpy(nk, f->k, (size_t)f->n * sizeof(sstr));
            memcpy(nv, f->v, (size_t)f->n * sizeof(val));
        }
        f->k = nk;
        f->v = nv;
        f->cap = nc;
    }
    f->k[f->n] = (sstr){k, kn, NULL};
    f->v[f->n++] = x;
}

val jv_lookup(R *r, const char *name) {
    for (frame *f = r->top; f; f = f->up) {
        val *v = fget(r, f, name, strlen(name));
        if (v) return *v;
    }
    static const struct { const char *n; int id; } g[] = {
        {"raise_exception", F_RAISE}, {"namespace", F_NAMESPACE}, {"range", F_RANGE},
        {"strftime_now", F_STRFTIME}, {"dict", F_DICT}};
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++)
        if (!strcmp(g[i].n, name)) return (val){.t = V_FUNC, .u.i = g[i].id};
    return vundef();
}

const uint8_t jv_taint_all_[1] = {1};

int jv_has_taint(val v, int depth) {
    if (depth > MAX_DEPTH) return 1;
    if (v.t == V_STR) return sstr_tainted(v.u.s);
    if (v.t == V_LIST)
        for (int i = 0; i < v.u.l->n; i++)
            if (jv_has_taint(v.u.l->v[i], depth + 1)) return 1;
    if (v.t == V_DICT)
        for (int i = 0; i < v.u.d->n; i++)
            if (sstr_tainted(v.u.d->k[i]) || jv_has_taint(v.u.d->v[i], depth + 1)) return 1;
    return 0;
}

/* Strings are marked whole; lists and dicts are marked in place (what they
 * hold derives from tainted input: marking more is the safe direction). */
static void taint_in(R *r, val *v, int depth) {
    if (depth > MAX_DEPTH) return;
    if (v->t == V_STR) {
        if (v->u.s.n) v->u.s.tm = JV_TAINT_ALL;
    } else if (v->t == V_LIST) {
        for (int i = 0; i < v->u.l->n; i++) taint_in(r, &v->u.l->v[i], depth + 1);
    } else if (v->t == V_DICT) {
        for (int i = 0; i < v->u.d->n; i++) {
            if (v->u.d->k[i].n) v->u.d->k[i].tm = JV_TAINT_ALL;
            taint_in(r, &v->u.d->v[i], depth + 1);
        }
    }
}
val jv_taint(R *r, val v) {
    taint_in(r, &v, 0);
    return v;
}

static void out_mark(R *r, size_t from, size_t n, const uint8_t *tm) {
    if (!tm || !n) return;
    if (!r->om) {
        r->om = slm_calloc(r->ocap ? r->ocap : 1, 1);
        if (!r->om) jv_fail(r, NULL, SLM_ERR_NOMEM, "out of memory");
    }
    if (tm == JV_TAINT_ALL) memset(r->om + from, 1, n);
    else memcpy(r->om + from, tm, n);
}

void jv_emit_str(R *r, sstr s) {
    size_t at = r->on;
    jv_emit(r, s.p, s.n);
    out_mark(r, at, s.n, s.tm);
}

/* output */
void jv_emit(R *r, const char *s, size_t n) {
    if (!n) return;
    jv_charge(r, n);
    if (r->on + n + 1 > OUT_LIMIT) jv_fail(r, NULL, SLM_ERR_CAPACITY, "rendered text exceeds %u bytes", OUT_LIMIT);
    if (r->on + n + 1 > r->ocap) {
        size_t nc = r->ocap ? r->ocap : 1024;
        while (nc < r->on + n + 1) nc *= 2;
        char *o = slm_realloc(r->out, nc);
        if (!o) jv_fail(r, NULL, SLM_ERR_NOMEM, "out of memory");
        r->out = o;
        if (r->om) {
            uint8_t *m = slm_realloc(r->om, nc);
            if (!m) jv_fail(r, NULL, SLM_ERR_NOMEM, "out of memory");
            memset(m + r->ocap, 0, nc - r->ocap);
            r->om = m;
        }
        r->ocap = nc;
    }
    memcpy(r->out + r->on, s, n);
    r->on += n;
    r->out[r->on] = 0;
}

/* macros and set blocks render into a fresh buffer */
void jv_out_push(R *r) {
    if (r->nsaved >= MAX_DEPTH) jv_err(r, NULL, "template nested too deeply");
    r->saved[r->nsaved].p = r->out;
    r->saved[r->nsaved].m = r->om;
    r->om = NULL;
    r->saved[r->nsaved].n = r->on;
    r->saved[r->nsaved].cap = r->ocap;
    r->nsaved++;
    r->out = NULL;
    r->on = r->ocap = 0;
}
val jv_out_pop(R *r) {
    val v = jv_str(r, r->out ? r->out : "", r->on);
    if (r->om && r->on) {
        uint8_t *m = jv_alloc(r, r->on);
        memcpy(m, r->om, r->on);
        v.u.s.tm = m;
    }
    slm_xfree(r->out);
    slm_xfree(r->om);
    r->om = NULL;
    r->nsaved--;
    r->out = r->saved[r->nsaved].p;
    r->om = r->saved[r->nsaved].m;
    r->on = r->saved[r->nsaved].n;
    r->ocap = r->saved[r->nsaved].cap;
    return v;
}

/* a growable string in the arena */
void jv_sb_put(R *r, sbuf *b, const char *s, size_t n) {
    jv_charge(r, n);
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 64;
        while (nc < b->n + n + 1) nc *= 2;
        if (nc > ARENA_LIMIT) jv_fail(r, NULL, SLM_ERR_CAPACITY, "string too long");
        char *q = jv_alloc(r, nc);
        if (b->n) memcpy(q, b->p, b->n);
        b->p = q;
        if (b->m) {
            uint8_t *m = jv_alloc(r, nc);
            memcpy(m, b->m, b->n);
            memset(m + b->n, 0, nc - b->n);
            b->m = m;
        }
        b->cap = nc;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
void jv_sb_puts(R *r, sbuf *b, const char *s) { jv_sb_put(r, b, s, strlen(s)); }
void jv_sb_taint(R *r, sbuf *b, size_t from) {
    if (from >= b->n) return;
    if (!b->m) {
        b->m = jv_alloc(r, b->cap);
        memset(b->m, 0, b->cap);
    }
    memset(b->m + from, 1, b->n - from);
}
void jv_sb_put_str(R *r, sbuf *b, sstr s) {
    size_t at = b->n;
    jv_sb_put(r, b, s.p, s.n);
    if (!sstr_tainted(s)) return;
    if (s.tm == JV_TAINT_ALL) {
        jv_sb_taint(r, b, at);
        return;
    }
    if (!b->m) {
        b->m = jv_alloc(r, b->cap);
        memset(b->m, 0, b->cap);
    }
    memcpy(b->m + at, s.tm, s.n);
}
val jv_sb_val(R *r, sbuf *b) {
    if (!b->p) return jv_str(r, "", 0);
    return (val){.t = V_STR, .u.s = {b->p, b->n, b->m}};
}

/* Python's repr(float): the shortest digits that read back as f, fixed
 * notation for exponents -4..15 (with ".0" on integral values), else d.ddde+XX */
static void fmt_float(char *buf, size_t cap, double f) {
    if (f != f) { snprintf(buf, cap, "nan"); return; }
    if (f > 1.7976931348623157e308 || f < -1.7976931348623157e308) { snprintf(buf, cap, f > 0 ? "inf" : "-inf"); return; }
    char e[48], dg[24];
    for (int prec = 0; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec, f);
        if (strtod(e, NULL) == f) break;
    }
    const char *p = e + (e[0] == '-');
    size_t nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.' && nd < sizeof dg - 1) dg[nd++] = *p;
    dg[nd] = 0;
    int x = atoi(p + 1), neg = e[0] == '-';
    while (nd > 1 && dg[nd - 1] == '0') dg[--nd] = 0; /* %.*e pads no zeros, but be safe */
    if (x < -4 || x >= 16) {
        snprintf(buf, cap, "%s%c%s%s%se%c%02d", neg ? "-" : "", dg[0], nd > 1 ? "." : "", dg + 1, "",
                 x < 0 ? '-' : '+', x < 0 ? -x : x);
    } else if (x >= 0) {
        size_t il = (size_t)x + 1;
        if (nd <= il) snprintf(buf, cap, "%s%s%0*d.0", neg ? "-" : "", dg, (int)(il - nd), 0);
        else snprintf(buf, cap, "%s%.*s.%s", neg ? "-" : "", (int)il, dg, dg + il);
        if (nd <= il && il == nd) snprintf(buf, cap, "%s%s.0", neg ? "-" : "", dg);
    } else {
        snprintf(buf, cap, "%s0.%0*d%s", neg ? "-" : "", -x - 1, 0, dg);
        if (x == -1) snprintf(buf, cap, "%s0.%s", neg ? "-" : "", dg);
    }
}

static void repr(R *r, sbuf *b, val v, int depth);
void jv_str_of(R *r, sbuf *b, val v, int depth) {
    char buf[64];
    switch (v.t) {
    case V_UNDEF: break;
    case V_NONE: jv_sb_puts(r, b, "None"); break;
    case V_BOOL: jv_sb_puts(r, b, v.u.i ? "True" : "False"); break;
    case V_INT: snprintf(buf, sizeof buf, "%lld", v.u.i); jv_sb_puts(r, b, buf); break;
    case V_FLOAT: fmt_float(buf, sizeof buf, v.u.f); jv_sb_puts(r, b, buf); break;
    case V_STR: jv_sb_put_str(r, b, v.u.s); break;
    default: {
        size_t at = b->n;
        repr(r, b, v, depth);
        if (jv_has_taint(v, 0)) jv_sb_taint(r, b, at);
        break;
    }
    }
}
static void repr(R *r, sbuf *b, val v, int depth) {
    if (depth > MAX_DEPTH) jv_err(r, NULL, "value nested too deeply");
    if (v.t == V_STR) { /* as Python: '...' unless it holds ' and no " */
        const char *p = v.u.s.p;
        size_t n = v.u.s.n;
        jv_charge(r, n);
        char q = memchr(p, '\'', n) && !memchr(p, '"', n) ? '"' : '\'';
        jv_sb_put(r, b, &q, 1);
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)p[i];
            char esc[8];
            if (c == q || c == '\\') { esc[0] = '\\'; esc[1] = (char)c; jv_sb_put(r, b, esc, 2); }
            else if (c == '\n') jv_sb_puts(r, b, "\\n");
            else if (c == '\r') jv_sb_puts(r, b, "\\r");
            else if (c == '\t') jv_sb_puts(r, b, "\\t");
            else if (c < 0x20 || c == 0x7f) { snprintf(esc, sizeof esc, "\\x%02x", c); jv_sb_puts(r, b, esc); }
            else jv_sb_put(r, b, (const char *)&c, 1);
        }
        jv_sb_put(r, b, &q, 1);
    } else if (v.t == V_LIST) {
        int tup = v.u.l->tuple;
        jv_sb_put(r, b, tup ? "(" : "[", 1);
        for (int i = 0; i < v.u.l->n; i++) {
            if (i) jv_sb_puts(r, b, ", ");
            repr(r, b, v.u.l->v[i], depth + 1);
        }
        if (tup && v.u.l->n == 1) jv_sb_put(r, b, ",", 1);
        jv_sb_put(r, b, tup ? ")" : "]", 1);
    } else if (v.t == V_DICT) {
        jv_sb_put(r, b, "{", 1);
        for (int i = 0; i < v.u.d->n; i++) {
            if (i) jv_sb_puts(r, b, ", ");
            repr(r, b, (val){.t = V_STR, .u.s = v.u.d->k[i]}, depth + 1);
            jv_sb_puts(r, b, ": ");
            repr(r, b, v.u.d->v[i], depth + 1);
        }
        jv_sb_put(r, b, "}", 1);
    } else if (v.t == V_FUNC || v.t == V_MACRO) {
        jv_sb_puts(r, b, "<function>");
    } else {
        jv_str_of(r, b, v, depth);
    }
}
val jv_to_str(R *r, val v) {
    if (v.t == V_STR) return v;
    sbuf b = {0};
    jv_str_of(r, &b, v, 0);
    return jv_sb_val(r, &b);
}

/* JSON as Python's json.dumps(ensure_ascii=False) */
void jv_json(R *r, sbuf *b, val v, int indent, int level) {
    char buf[64];
    if (level > MAX_DEPTH) jv_err(r, NULL, "value nested too deeply");
    switch (v.t) {
    case V_UNDEF: jv_err(r, NULL, "Object of type Undefined is not JSON serializable");
    case V_NONE: jv_sb_puts(r, b, "null"); return;
    case V_BOOL: jv_sb_puts(r, b, v.u.i ? "true" : "false"); return;
    case V_INT: snprintf(buf, sizeof buf, "%lld", v.u.i); jv_sb_puts(r, b, buf); return;
    case V_FLOAT:
        if (v.u.f != v.u.f) jv_sb_puts(r, b, "NaN");
        else if (v.u.f > 1e308 || v.u.f < -1e308) jv_sb_puts(r, b, v.u.f > 0 ? "Infinity" : "-Infinity");
        else { fmt_float(buf, sizeof buf, v.u.f); jv_sb_puts(r, b, buf); }
        return;
    case V_STR:
        jv_sb_put(r, b, "\"", 1);
        for (size_t i = 0; i < v.u.s.n; i++) {
            unsigned char c = (unsigned char)v.u.s.p[i];
            if (c == '"') jv_sb_puts(r, b, "\\\"");
            else if (c == '\\') jv_sb_puts(r, b, "\\\\");
            else if (c == '\n') jv_sb_puts(r, b, "\\n");
            else if (c == '\r') jv_sb_puts(r, b, "\\r");
            else if (c == '\t') jv_sb_puts(r, b, "\\t");
            else if (c == '\b') jv_sb_puts(r, b, "\\b");
            else if (c == '\f') jv_sb_puts(r, b, "\\f");
            else if (c < 0x20) { snprintf(buf, sizeof buf, "\\u%04x", c); jv_sb_puts(r, b, buf); }
            else jv_sb_put(r, b, (const char *)&c, 1);
        }
        jv_sb_put(r, b, "\"", 1);
        return;
    case V_LIST: case V_DICT: {
        int isl = v.t == V_LIST, n = isl ? v.u.l->n : v.u.d->n;
        jv_sb_put(r, b, isl ? "[" : "{", 1);
        if (!n) { jv_sb_put(r, b, isl ? "]" : "}", 1); return; }
        for (int i = 0; i < n; i++) {
            if (i) jv_sb_puts(r, b, indent >= 0 ? "," : ", ");
            if (indent >= 0) {
                jv_sb_put(r, b, "\n", 1);
                for (int s = 0; s < indent * (level + 1); s++) jv_sb_put(r, b, " ", 1);
            }
            if (isl) {
                jv_json(r, b, v.u.l->v[i], indent, level + 1);
            } else {
                jv_json(r, b, (val){.t = V_STR, .u.s = v.u.d->k[i]}, indent, level + 1);
                jv_sb_puts(r, b, ": ");
                jv_json(r, b, v.u.d->v[i], indent, level + 1);
            }
        }
        if (indent >= 0) {
            jv_sb_put(r, b, "\n", 1);
            for (int s = 0; s < indent * level; s++) jv_sb_put(r, b, " ", 1);
        }
        jv_sb_put(r, b, isl ? "]" : "}", 1);
        return;
    }
    default: jv_sb_puts(r, b, "null"); return;
    }
}

int jv_truthy(val v) {
    switch (v.t) {
    case V_BOOL: case V_INT: return v.u.i != 0;
    case V_FLOAT: return v.u.f != 0.0;
    case V_STR: return v.u.s.n > 0;
    case V_LIST: return v.u.l->n > 0;
    case V_DICT: return v.u.d->n > 0;
    case V_FUNC: case V_MACRO: return 1;
    default: return 0;
    }
}


int jv_equal(R *r, val a, val b, int depth) {
    if (depth > MAX_DEPTH) return 0;
    jv_charge(r, COST_ITEM);
    if (is_num(a) && is_num(b)) {
        if (a.t != V_FLOAT && b.t != V_FLOAT) return a.u.i == b.u.i;
        return num(a) == num(b);
    }
    if (a.t != b.t) return 0;
    switch (a.t) {
    case V_UNDEF: case V_NONE: return 1;
    case V_STR:
        if (a.u.s.n != b.u.s.n) return 0;
        jv_charge(r, a.u.s.n);
        return !memcmp(a.u.s.p, b.u.s.p, a.u.s.n);
    case V_LIST:
        if (a.u.l->n != b.u.l->n) return 0;
        for (int i = 0; i < a.u.l->n; i++)
            if (!jv_equal(r, a.u.l->v[i], b.u.l->v[i], depth + 1)) return 0;
        return 1;
    case V_DICT:
        if (a.u.d->n != b.u.d->n) return 0;
        for (int i = 0; i < a.u.d->n; i++) {
            val *o = jv_dget(r, b.u.d, a.u.d->k[i].p, a.u.d->k[i].n);
            if (!o || !jv_equal(r, a.u.d->v[i], *o, depth + 1)) return 0;
        }
        return 1;
    case V_FUNC: return a.u.i == b.u.i;
    case V_MACRO: return a.u.m == b.u.m;
    default: return 0;
    }
}

int jv_compare(R *r, const node *n, val a, val b) {
    if (is_num(a) && is_num(b)) {
        if (a.t != V_FLOAT && b.t != V_FLOAT) return (a.u.i > b.u.i) - (a.u.i < b.u.i);
        double x = num(a), y = num(b);
        return (x > y) - (x < y);
    }
    if (a.t == V_STR && b.t == V_STR) {
        size_t m = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        jv_charge(r, m);
        int c = memcmp(a.u.s.p, b.u.s.p, m);
        if (c) return c < 0 ? -1 : 1;
        return (a.u.s.n > b.u.s.n) - (a.u.s.n < b.u.s.n);
    }
    jv_err(r, n, "cannot compare these values");
}

int jv_contains(R *r, const node *n, val hay, val x) {
    if (hay.t == V_STR) {
        if (x.t != V_STR) jv_err(r, n, "'in <string>' needs a string on the left");
        return jv_find(r, hay.u.s.p, hay.u.s.n, x.u.s.p, x.u.s.n) != NULL;
    }
    if (hay.t == V_LIST) {
        for (int i = 0; i < hay.u.l->n; i++)
            if (jv_equal(r, hay.u.l->v[i], x, 0)) return 1;
        return 0;
    }
    if (hay.t == V_DICT) return x.t == V_STR && jv_dget(r, hay.u.d, x.u.s.p, x.u.s.n) != NULL;
    if (hay.t == V_UNDEF) return 0; /* Jinja2: an undefined iterates as empty */
    jv_err(r, n, "'in' needs a string, list or mapping on the right");
}
