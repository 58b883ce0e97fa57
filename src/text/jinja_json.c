/* text/jinja_json.c — extra template variables from JSON (see
 * chat_template.h: slm_tmpl_vars.kwargs, slm_tmpl_kwargs_check): a bounded
 * JSON reader that builds renderer values in the render's arena. The text
 * is untrusted (a request's chat_template_kwargs): every value is charged to
 * the render's budget, nesting is bounded, and strings are tainted like
 * message content, so they never become special tokens.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "text/jinja_internal.h"

#define JSON_DEPTH 64

typedef struct jr {
    R *r;
    const char *start, *p, *end;
    const char *what; /* for messages: "chat template kwargs", "tools", ... */
} jr;

static void jbad(jr *j, const char *what) {
    jv_fail(j->r, NULL, SLM_ERR_ARG, "%s: %s at byte %ld", j->what, what, (long)(j->p - j->start));
}

static void skip_ws(jr *j) {
    while (j->p < j->end && is_space((unsigned char)*j->p)) j->p++;
}

static int hex4(jr *j, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = j->p < j->end ? *j->p++ : 0;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return 0;
        v = v * 16 + (unsigned)d;
    }
    *out = v;
    return 1;
}

static void put_utf8(R *r, sbuf *b, unsigned cp) {
    char o[4];
    size_t n;
    if (cp < 0x80) { o[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[2] = (char)(0x80 | (cp & 0x3F)); n = 3;
    } else {
        o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F)); n = 4;
    }
    jv_sb_put(r, b, o, n);
}

/* A \uXXXX escape (j->p after the 'u'), surrogate pairs joined. */
static void unicode_escape(jr *j, sbuf *b) {
    unsigned cp, lo;
    if (!hex4(j, &cp)) jbad(j, "bad \\u escape");
    if (cp >= 0xD800 && cp < 0xDC00) {
        if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u') jbad(j, "lone surrogate");
        j->p += 2;
        if (!hex4(j, &lo) || lo < 0xDC00 || lo >= 0xE000) jbad(j, "bad surrogate pair");
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    } else if (cp >= 0xDC00 && cp < 0xE000) {
        jbad(j, "lone surrogate");
    }
    put_utf8(j->r, b, cp);
}

/* A string (j->p on the opening quote), untainted; the caller taints. */
static sstr read_string(jr *j) {
    sbuf b = {0};
    j->p++;
    for (;;) {
        const char *s = j->p;
        while (j->p < j->end && *j->p != '"' && *j->p != '\\' && (unsigned char)*j->p >= 0x20) j->p++;
        if (j->p > s) jv_sb_put(j->r, &b, s, (size_t)(j->p - s));
        if (j->p >= j->end || (unsigned char)*j->p < 0x20) jbad(j, "unterminated string");
        if (*j->p++ == '"') break;
        char c = j->p < j->end ? *j->p++ : 0;
        static const char esc_in[] = "\"\\/bfnrt", esc_out[] = "\"\\/\b\f\n\r\t";
        const char *k = c ? strchr(esc_in, c) : NULL;
        if (k) jv_sb_put(j->r, &b, esc_out + (k - esc_in), 1);
        else if (c == 'u') unicode_escape(j, &b);
        else jbad(j, "bad escape");
    }
    val v = jv_sb_val(j->r, &b);
    return v.u.s;
}

static val read_number(jr *j) {
    const char *s = j->p;
    int is_float = 0;
    if (j->p < j->end && *j->p == '-') j->p++;
    if (j->p >= j->end || *j->p < '0' || *j->p > '9') jbad(j, "bad value");
    while (j->p < j->end && ((*j->p >= '0' && *j->p <= '9') || strchr(".eE+-", *j->p))) {
        is_float |= *j->p == '.' || *j->p == 'e' || *j->p == 'E';
        j->p++;
    }
    char buf[64];
    size_t n = (size_t)(j->p - s);
    if (n >= sizeof buf) jbad(j, "number too long");
    memcpy(buf, s, n);
    buf[n] = 0;
    char *e;
    if (!is_float) {
        long long i = strtoll(buf, &e, 10);
        if (!*e && (i > -(1ll << 53) && i < (1ll << 53))) return vint(i);
    }
    double f = strtod(buf, &e);
    if (*e) jbad(j, "bad number");
    return (val){.t = V_FLOAT, .u.f = f};
}

static int word(jr *j, const char *w) {
    size_t n = strlen(w);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n)) return 0;
    j->p += n;
    return 1;
}

static val read_value(jr *j, int depth);

static val read_array(jr *j, int depth) {
    vlist *l = jv_list(j->r, 4);
    j->p++;
    skip_ws(j);
    if (j->p < j->end && *j->p == ']') { j->p++; return (val){.t = V_LIST, .u.l = l}; }
    for (;;) {
        jv_push(j->r, l, read_value(j, depth + 1));
        skip_ws(j);
        char c = j->p < j->end ? *j->p++ : 0;
        if (c == ']') break;
        if (c != ',') jbad(j, "expected ',' or ']'");
    }
    return (val){.t = V_LIST, .u.l = l};
}

static val read_object(jr *j, int depth) {
    vdict *d = jv_dict(j->r, 4);
    j->p++;
    skip_ws(j);
    if (j->p < j->end && *j->p == '}') { j->p++; return (val){.t = V_DICT, .u.d = d}; }
    for (;;) {
        skip_ws(j);
        if (j->p >= j->end || *j->p != '"') jbad(j, "expected a string key");
        sstr k = read_string(j);
        skip_ws(j);
        if (j->p >= j->end || *j->p++ != ':') jbad(j, "expected ':'");
        jv_dset(j->r, d, k, read_value(j, depth + 1));
        skip_ws(j);
        char c = j->p < j->end ? *j->p++ : 0;
        if (c == '}') break;
        if (c != ',') jbad(j, "expected ',' or '}'");
    }
    return (val){.t = V_DICT, .u.d = d};
}

static val read_value(jr *j, int depth) {
    if (depth > JSON_DEPTH) jbad(j, "nested too deeply");
    jv_charge(j->r, COST_ITEM);
    skip_ws(j);
    char c = j->p < j->end ? *j->p : 0;
    if (c == '{') return read_object(j, depth);
    if (c == '[') return read_array(j, depth);
    if (c == '"') return (val){.t = V_STR, .u.s = read_string(j)};
    if (word(j, "true")) return vbool(1);
    if (word(j, "false")) return vbool(0);
    if (word(j, "null")) return vnone();
    return read_number(j);
}

static int reserved(sstr k) {
    static const char *const names[] = {"messages", "add_generation_prompt", "bos_token", "eos_token", "tools", "documents"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (sseq(k, names[i], strlen(names[i]))) return 1;
    return 0;
}

/* One JSON object's members become variables of the root scope (a later
 * object overrides an earlier one's names); fails the render otherwise. */
void jv_set_kwargs(R *r, const char *json) {
    jr j = {r, json, json, json + strlen(json), "chat template kwargs"};
    jv_charge(r, (uint64_t)(j.end - j.p));
    skip_ws(&j);
    if (j.p >= j.end || *j.p != '{') jbad(&j, "expected a JSON object");
    val o = jv_taint(r, read_object(&j, 0));
    skip_ws(&j);
    if (j.p != j.end) jbad(&j, "bytes after the object");
    vdict *d = o.u.d;
    for (int i = 0; i < d->n; i++) {
        if (reserved(d->k[i]))
            jv_fail(r, NULL, SLM_ERR_ARG, "chat template kwargs: '%s' is set by the chat itself", d->k[i].p);
        if (memchr(d->k[i].p, 0, d->k[i].n)) jbad(&j, "a key holds a NUL");
        jv_fset(r, r->root, d->k[i].p, d->v[i]);
    }
}

val jv_json_value(R *r, const char *json, const char *what) {
    jr j = {r, json, json, json + strlen(json), what};
    jv_charge(r, (uint64_t)(j.end - j.p));
    val v = jv_taint(r, read_value(&j, 0));
    skip_ws(&j);
    if (j.p != j.end) jbad(&j, "bytes after the value");
    return v;
}

int slm_tmpl_kwargs_check(const char *json, slm_err *err) {
    R *r = slm_calloc(1, sizeof *r);
    if (!r) {
        slm_errf(err, SLM_ERR_NOMEM, "out of memory");
        return 0;
    }
    slm_err dummy;
    r->err = err ? err : &dummy;
    int ok = 0;
    if (!setjmp(r->jb)) {
        jv_budget_start(r, NULL);
        r->root = r->top = jv_frame(r, NULL);
        jv_set_kwargs(r, json ? json : "");
        ok = 1;
    }
    jv_arena_free(&r->ar);
    slm_xfree(r->om);
    slm_xfree(r->out);
    slm_xfree(r);
    return ok;
}
