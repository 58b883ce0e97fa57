/* text/toolcall_xml — the XML tool call format (toolcall.h, "xml"):
 *
 *   <tool_call>
 *   <function=NAME>
 *   <parameter=KEY>
 *   VALUE
 *   </parameter>
 *   ...
 *   </function>
 *   </tool_call>
 *
 * as Qwen3-Coder, Qwen3.5 and Nemotron Nano 3 write it (their templates
 * render calls so). <tool_call> may be missing (the call starts at
 * <function=). The arguments go out as a JSON object, one key per
 * parameter in the order written: a value that is JSON text (a number,
 * true, an object, ...) as it is, anything else as a JSON string (the one
 * newline after <parameter=KEY> and before </parameter> dropped). Without
 * the function's schema a string parameter that looks like a number goes
 * out as the number; say so to a client that cares (docs/templates.md).
 *
 * Outside a call, bytes that may begin <tool_call> or <function= wait in
 * hold[]; after a marker the bytes are kept in raw[] until the name is
 * whole (then the call goes out), or go out as text when they turn out not
 * to be a call. A call that breaks off in its body is closed there and the
 * rest is text. A parameter's value is held until its </parameter>.
 */
#include <stdio.h>
#include <string.h>

#include "common/common.h"
#include "text/toolcall.h"

#ifdef SLM_HAVE_CJSON
#include <cjson/cJSON.h>
#endif

enum {
    X_TEXT,  /* outside a call */
    X_OPEN,  /* after <tool_call>: white space, then <function= */
    X_NAME,  /* the function's name, until '>' */
    X_BODY,  /* in the call: <parameter= or </function> */
    X_KEY,   /* a parameter's name, until '>' */
    X_VAL,   /* a parameter's value, until </parameter> (or </function>) */
    X_AFTER, /* after </function>: </tool_call> may follow */
};

static const char T_CALL[] = "<tool_call>", T_FUNC[] = "<function=", T_PARAM[] = "<parameter=", T_PEND[] = "</parameter>",
                  T_FEND[] = "</function>", T_CEND[] = "</tool_call>";
#define OPEN_WS_MAX 64 /* white space between <tool_call> and <function= */

static int is_ws(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static int is_prefix(const char *s, size_t n, const char *tag) { return n <= strlen(tag) && !memcmp(s, tag, n); }

static int is_tag(const char *s, size_t n, const char *tag) { return n == strlen(tag) && !memcmp(s, tag, n); }

static void out(slm_toolcall *t, int ev, const char *s, size_t n) {
    if (n || ev == SLM_TOOL_END) t->out(t->ud, ev, s, n);
}

#define raw_put slm_tool__raw_put

static void x_step(slm_toolcall *t, int c);

/* Bytes read again from the text state. */
static void rescan(slm_toolcall *t, const char *s, size_t n) {
    t->state = X_TEXT;
    t->nhold = 0;
    for (size_t i = 0; i < n && !t->oom; i++) x_step(t, (unsigned char)s[i]);
}

/* Not a call after all (nothing went out yet): its first byte is text, the
 * rest is read again (a marker may begin inside it). raw[] is short here:
 * the marker, some white space, a name. */
static void give_up(slm_toolcall *t) {
    char keep[sizeof T_CALL + OPEN_WS_MAX + sizeof T_FUNC + SLM_TOOL_NAME_MAX + 8];
    size_t n = t->nraw < sizeof keep ? t->nraw : sizeof keep;
    memcpy(keep, t->raw, n);
    t->nraw = 0;
    if (!n) {
        t->state = X_TEXT;
        t->nhold = 0;
        return;
    }
    out(t, SLM_TOOL_TEXT, keep, 1);
    rescan(t, keep + 1, n - 1);
}

/* ---- is a value JSON text: a bounded recursive reader ------------------------ */

#define JSON_DEPTH 32

static const char *j_value(const char *p, const char *e, int depth);

static const char *j_ws(const char *p, const char *e) {
    while (p < e && is_ws((unsigned char)*p)) p++;
    return p;
}

static const char *j_string(const char *p, const char *e) { /* at '"' */
    for (p++; p < e; p++) {
        const unsigned char c = (unsigned char)*p;
        if (c == '"') return p + 1;
        if (c < 0x20) return NULL;
        if (c == '\\') {
            if (++p >= e) return NULL;
            if (*p == 'u') {
                for (int k = 0; k < 4; k++)
                    if (++p >= e || !((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F'))) return NULL;
            } else if (!strchr("\"\\/bfnrt", *p)) {
                return NULL;
            }
        }
    }
    return NULL;
}

static const char *j_digits(const char *p, const char *e) {
    const char *q = p;
    while (q < e && *q >= '0' && *q <= '9') q++;
    return q > p ? q : NULL;
}

static const char *j_number(const char *p, const char *e) {
    if (p < e && *p == '-') p++;
    if (p < e && *p == '0') p++;
    else if (!(p = j_digits(p, e))) return NULL;
    if (p < e && *p == '.' && !(p = j_digits(p + 1, e))) return NULL;
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        if (!(p = j_digits(p, e))) return NULL;
    }
    return p;
}

static const char *j_list(const char *p, const char *e, int depth, char close, int keys) { /* after '[' or '{' */
    p = j_ws(p, e);
    if (p < e && *p == close) return p + 1;
    for (;;) {
        if (keys) {
            if (p >= e || *p != '"' || !(p = j_string(p, e))) return NULL;
            p = j_ws(p, e);
            if (p >= e || *p != ':') return NULL;
            p++;
        }
        if (!(p = j_value(p, e, depth + 1))) return NULL;
        if (p < e && *p == close) return p + 1;
        if (p >= e || *p != ',') return NULL;
        p = j_ws(p + 1, e);
    }
}

/* The end of the JSON value at p (white space around it taken), or NULL. */
static const char *j_value(const char *p, const char *e, int depth) {
    if (depth > JSON_DEPTH) return NULL;
    p = j_ws(p, e);
    if (p >= e) return NULL;
    const char *q;
    switch (*p) {
    case '{': q = j_list(p + 1, e, depth, '}', 1); break;
    case '[': q = j_list(p + 1, e, depth, ']', 0); break;
    case '"': q = j_string(p, e); break;
    case 't': q = e - p >= 4 && !memcmp(p, "true", 4) ? p + 4 : NULL; break;
    case 'f': q = e - p >= 5 && !memcmp(p, "false", 5) ? p + 5 : NULL; break;
    case 'n': q = e - p >= 4 && !memcmp(p, "null", 4) ? p + 4 : NULL; break;
    default: q = j_number(p, e); break;
    }
    return q ? j_ws(q, e) : NULL;
}

/* A JSON string of s[0..n) as argument bytes. */
static void args_string(slm_toolcall *t, const char *s, size_t n) {
    char b[256];
    size_t k = 0;
    b[k++] = '"';
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (k + 8 > sizeof b) {
            out(t, SLM_TOOL_ARGS, b, k);
            k = 0;
        }
        if (c == '"' || c == '\\') {
            b[k++] = '\\';
            b[k++] = (char)c;
        } else if (c == '\n') {
            b[k++] = '\\', b[k++] = 'n';
        } else if (c == '\t') {
            b[k++] = '\\', b[k++] = 't';
        } else if (c == '\r') {
            b[k++] = '\\', b[k++] = 'r';
        } else if (c < 0x20) {
            static const char hex[] = "0123456789abcdef";
            memcpy(b + k, "\\u00", 4);
            k += 4;
            b[k++] = hex[c >> 4];
            b[k++] = hex[c & 15];
        } else {
            b[k++] = (char)c;
        }
    }
    b[k++] = '"';
    out(t, SLM_TOOL_ARGS, b, k);
}

/* Whether the current call's parameter xkey is a string (slm_tool_xml_types). */
static int string_param(const slm_toolcall *t) {
    const size_t nn = t->nname, nk = t->nxkey;
    for (const char *p = t->xstr; p && *p;) {
        const char *us = strchr(p, '\x1f'), *rs = us ? strchr(us, '\x1e') : NULL;
        if (!rs) break;
        if ((size_t)(us - p) == nn && !memcmp(p, t->name, nn) && (size_t)(rs - us - 1) == nk && !memcmp(us + 1, t->xkey, nk))
            return 1;
        p = rs + 1;
    }
    return 0;
}

/* A parameter, its value raw[0..n): `"KEY": VALUE` into the arguments. */
static void param_out(slm_toolcall *t, size_t n) {
    const char *v = t->raw;
    if (n && v[0] == '\n') v++, n--;
    if (n && v[n - 1] == '\n') n--;
    if (t->xparams++) out(t, SLM_TOOL_ARGS, ", ", 2);
    args_string(t, t->xkey, t->nxkey);
    out(t, SLM_TOOL_ARGS, ": ", 2);
    size_t a = 0, b = n;
    while (a < b && is_ws((unsigned char)v[a])) a++;
    while (b > a && is_ws((unsigned char)v[b - 1])) b--;
    /* JSON text other than a string: as it is */
    const int json = b > a && v[a] != '"' && !string_param(t) && j_value(v + a, v + b, 0) == v + b;
    if (json) out(t, SLM_TOOL_ARGS, v + a, b - a);
    else args_string(t, v, n);
    t->nraw = 0;
}

static void close_call(slm_toolcall *t) {
    out(t, SLM_TOOL_ARGS, "}", 1);
    out(t, SLM_TOOL_END, "", 0);
    t->committed = 0;
    t->nraw = 0;
}

/* The call breaks off in its body: closed here; the held bytes are text. */
static void break_off(slm_toolcall *t) {
    char keep[sizeof t->hold];
    const size_t n = t->nhold;
    memcpy(keep, t->hold, n);
    close_call(t);
    rescan(t, keep, n);
}

/* Outside a call: hold what may begin a marker. */
static void text_byte(slm_toolcall *t, int c) {
    if (t->nhold == 0 && c != '<') {
        const char ch = (char)c;
        out(t, SLM_TOOL_TEXT, &ch, 1);
        return;
    }
    t->hold[t->nhold++] = (char)c;
    if (is_tag(t->hold, t->nhold, T_CALL) || is_tag(t->hold, t->nhold, T_FUNC)) {
        const int func = t->hold[1] == 'f';
        t->nraw = 0;
        raw_put(t, t->hold, t->nhold);
        t->nhold = 0;
        t->nname = 0;
        t->state = func ? X_NAME : X_OPEN;
        return;
    }
    if (is_prefix(t->hold, t->nhold, T_CALL) || is_prefix(t->hold, t->nhold, T_FUNC)) return;
    char rest[sizeof t->hold];
    const size_t k = t->nhold - 1;
    memcpy(rest, t->hold + 1, k);
    t->nhold = 0;
    out(t, SLM_TOOL_TEXT, t->hold, 1);
    for (size_t i = 0; i < k; i++) x_step(t, (unsigned char)rest[i]);
}

static void x_step(slm_toolcall *t, int c) {
    const char ch = (char)c;
    switch (t->state) {
    case X_TEXT:
        text_byte(t, c);
        return;
    case X_OPEN:
        raw_put(t, &ch, 1);
        if (t->nhold == 0 && is_ws(c)) {
            if (t->nraw > sizeof T_CALL + OPEN_WS_MAX) give_up(t);
            return;
        }
        t->hold[t->nhold++] = ch;
        if (is_tag(t->hold, t->nhold, T_FUNC)) {
            t->nhold = 0;
            t->nname = 0;
            t->state = X_NAME;
        } else if (!is_prefix(t->hold, t->nhold, T_FUNC)) {
            t->nhold = 0;
            give_up(t);
        }
        return;
    case X_NAME:
        raw_put(t, &ch, 1);
        if (c == '>' && t->nname) {
            t->name[t->nname] = 0;
            out(t, SLM_TOOL_CALL, t->name, t->nname);
            out(t, SLM_TOOL_ARGS, "{", 1);
            t->committed = 1;
            t->xparams = 0;
            t->nraw = 0;
            t->nhold = 0;
            t->state = X_BODY;
        } else if (t->nname >= SLM_TOOL_NAME_MAX || c < 0x20 || c == ' ' || c == '<' || c == '>' || c == '"') {
            give_up(t);
        } else {
            t->name[t->nname++] = ch;
        }
        return;
    case X_BODY:
        if (t->nhold == 0 && is_ws(c)) return;
        t->hold[t->nhold++] = ch;
        if (is_tag(t->hold, t->nhold, T_PARAM)) {
            t->nhold = 0;
            t->nxkey = 0;
            t->state = X_KEY;
        } else if (is_tag(t->hold, t->nhold, T_FEND)) {
            t->nhold = 0;
            close_call(t);
            t->state = X_AFTER;
        } else if (!is_prefix(t->hold, t->nhold, T_PARAM) && !is_prefix(t->hold, t->nhold, T_FEND)) {
            break_off(t);
        }
        return;
    case X_KEY:
        if (c == '>' && t->nxkey) {
            t->nraw = 0;
            t->state = X_VAL;
        } else if (t->nxkey >= sizeof t->xkey || c < 0x20 || c == '<' || c == '>') {
            memcpy(t->hold, &ch, 1); /* the byte that broke it is text */
            t->nhold = 1;
            break_off(t);
        } else {
            t->xkey[t->nxkey++] = ch;
        }
        return;
    case X_VAL: {
        if (!raw_put(t, &ch, 1)) return;
        const size_t lp = sizeof T_PEND - 1, lf = sizeof T_FEND - 1;
        if (t->nraw >= lp && !memcmp(t->raw + t->nraw - lp, T_PEND, lp)) {
            param_out(t, t->nraw - lp);
            t->state = X_BODY;
        } else if (t->nraw >= lf && !memcmp(t->raw + t->nraw - lf, T_FEND, lf)) { /* </parameter> left out */
            param_out(t, t->nraw - lf);
            close_call(t);
            t->state = X_AFTER;
        }
        return;
    }
    case X_AFTER:
        if (t->nhold == 0 && is_ws(c)) return;
        t->hold[t->nhold++] = ch;
        if (is_tag(t->hold, t->nhold, T_CEND)) {
            t->nhold = 0;
            t->state = X_TEXT;
        } else if (!is_prefix(t->hold, t->nhold, T_CEND)) {
            char keep[sizeof t->hold];
            const size_t n = t->nhold;
            memcpy(keep, t->hold, n);
            rescan(t, keep, n);
        }
        return;
    }
}

void slm_toolx_feed(slm_toolcall *t, const char *s, size_t n) {
    for (size_t i = 0; i < n && !t->oom; i++) x_step(t, (unsigned char)s[i]);
}

void slm_toolx_finish(slm_toolcall *t) {
    switch (t->state) {
    case X_TEXT:
    case X_AFTER:
        out(t, SLM_TOOL_TEXT, t->hold, t->nhold);
        break;
    case X_OPEN:
    case X_NAME:
        out(t, SLM_TOOL_TEXT, t->raw, t->nraw);
        break;
    case X_VAL:
        param_out(t, t->nraw);
        close_call(t);
        break;
    default: /* X_BODY, X_KEY: cut off in the call */
        close_call(t);
        break;
    }
    t->nhold = t->nraw = 0;
    t->state = X_TEXT;
}

void slm_toolx_init(slm_toolcall *t, int in_call) {
    t->state = in_call ? X_OPEN : X_TEXT;
}

#ifdef SLM_HAVE_CJSON
slm_status slm_tool_xml_types(slm_toolcall *t, const char *tools_json) {
    cJSON *tl = tools_json ? cJSON_Parse(tools_json) : NULL;
    const cJSON *it;
    size_t n = 0, cap = 0;
    slm_status st = SLM_OK;
    const cJSON *arr = cJSON_IsArray(tl) ? tl : NULL;
    cJSON_ArrayForEach(it, arr) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(it, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name"), *pa = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(pa, "properties"), *p;
        if (!cJSON_IsString(name) || !cJSON_IsObject(props)) continue;
        cJSON_ArrayForEach(p, props) {
            const cJSON *ty = cJSON_GetObjectItemCaseSensitive(p, "type");
            if (!p->string || !cJSON_IsString(ty) || strcmp(ty->valuestring, "string")) continue;
            const size_t need = strlen(name->valuestring) + strlen(p->string) + 3;
            if (n + need > cap) {
                size_t nc = cap ? cap * 2 : 256;
                while (nc < n + need) nc *= 2;
                char *q = slm_realloc(t->xstr, nc);
                if (!q) {
                    st = SLM_ERR_NOMEM;
                    break;
                }
                t->xstr = q;
                cap = nc;
            }
            n += (size_t)sprintf(t->xstr + n, "%s\x1f%s\x1e", name->valuestring, p->string);
        }
        if (st) break;
    }
    cJSON_Delete(tl);
    return st;
}
#else
slm_status slm_tool_xml_types(slm_toolcall *t, const char *tools_json) {
    (void)t, (void)tools_json;
    return SLM_OK;
}
#endif
