/* text/toolcall_gemma4 — Gemma 4's tool call format (toolcall.h, "gemma4"):
 *
 *   <|tool_call>call:NAME{key:VALUE,key:VALUE}<tool_call|>
 *
 * as Gemma 4's chat template renders calls. A VALUE is a string between
 * <|"|> and <|"|> (taken as it is: no escapes), a number, true, false,
 * null, an object {key:VALUE,...} (keys bare, or between <|"|> too) or an
 * array [VALUE,...]. The arguments go out as JSON while they stream: keys
 * and strings quoted and escaped, the rest as written (None, True, False,
 * as Python would print them, read as null, true, false). A call may follow
 * another; text around calls passes. What breaks the syntax ends the call
 * there: its open strings and brackets are closed, so the arguments stay
 * JSON, and the rest is text.
 *
 * Outside a call, bytes that may begin <|tool_call> wait in hold[]; after
 * it the bytes are kept in raw[] until the name is whole (the call goes out)
 * or turn out not to be a call (they go out as text). Inside a string, bytes
 * that may begin <|"|> wait in hold[] too.
 */
#include <string.h>

#include "common/common.h"
#include "text/toolcall.h"

enum {
    G_TEXT, /* outside a call */
    G_KW,   /* after <|tool_call>: "call:" (nname: its bytes read) */
    G_NAME, /* the function's name, until '{' */
    G_ARGS, /* in the arguments (g.* below) */
    G_END,  /* after the arguments: <tool_call|> */
};
/* where the arguments are (t->vkind) */
enum {
    A_KEY0,  /* a key, or the end of an empty object */
    A_KEY,   /* a key, after ',' */
    A_BKEY,  /* in a bare key, until ':' */
    A_SKEY,  /* in a <|"|> key */
    A_COLON, /* after a quoted key: ':' */
    A_VAL0,  /* a value, or the end of an empty array */
    A_VAL,   /* a value */
    A_STR,   /* in a string */
    A_BARE,  /* in a number or a word (xkey[]) */
    A_AFTER, /* after a value: ',' or the container's end */
};

static const char T_OPEN[] = "<|tool_call>", T_CLOSE[] = "<tool_call|>", T_QUOTE[] = "<|\"|>", T_KW[] = "call:";
#define DEPTH_MAX SLM_TOOL_GEMMA4_DEPTH /* nested objects and arrays: bits of t->gstack */

static int is_ws(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static int is_prefix(const char *s, size_t n, const char *tag) { return n <= strlen(tag) && !memcmp(s, tag, n); }

static int is_name_char(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
}

/* ---- output: text and arguments gather in runs (toolcall.c) ------------------ */

#define flush slm_tool__flush
#define emit slm_tool__emit
#define raw_put slm_tool__raw_put

static void args(slm_toolcall *t, const char *s) { emit(t, SLM_TOOL_ARGS, s, strlen(s)); }

/* The ',' before the next key or array value: out when that begins
 * (t->after: one is pending), so a call that breaks off after it stays JSON. */
static void comma(slm_toolcall *t) {
    if (t->after) args(t, ",");
    t->after = 0;
}

/* Bytes of a string or key, JSON-escaped. */
static void args_escaped(slm_toolcall *t, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        char e[8];
        if (c == '"' || c == '\\') {
            e[0] = '\\', e[1] = (char)c, e[2] = 0;
        } else if (c < 0x20) {
            static const char hex[] = "0123456789abcdef";
            const char *named = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : NULL;
            if (named) {
                strcpy(e, named);
            } else {
                memcpy(e, "\\u00", 4);
                e[4] = hex[c >> 4], e[5] = hex[c & 15], e[6] = 0;
            }
        } else {
            e[0] = (char)c, e[1] = 0;
        }
        args(t, e);
    }
}

static void g_step(slm_toolcall *t, int c);

/* Not a call after all (nothing went out): its first byte is text, the
 * rest is read again (a call may begin inside it). */
static void give_up(slm_toolcall *t) {
    char keep[sizeof T_OPEN + sizeof T_KW + SLM_TOOL_NAME_MAX + 8];
    const size_t n = t->nraw < sizeof keep ? t->nraw : sizeof keep;
    memcpy(keep, t->raw, n);
    t->nraw = 0;
    t->state = G_TEXT;
    t->nhold = 0;
    if (!n) return;
    emit(t, SLM_TOOL_TEXT, keep, 1);
    for (size_t i = 1; i < n && !t->oom; i++) g_step(t, (unsigned char)keep[i]);
}

/* ---- the arguments ------------------------------------------------------------ */

static int in_object(const slm_toolcall *t) { return t->depth > 0 && (t->gstack >> (t->depth - 1) & 1); }

/* A bare value as JSON: numbers as written (leading zeros dropped), Python's words as JSON's; 0 when it is neither. */
static int bare_out(slm_toolcall *t) {
    static const char *const words[][2] = {{"true", "true"},   {"false", "false"}, {"null", "null"},
                                           {"True", "true"},   {"False", "false"}, {"None", "null"}};
    const char *v = t->xkey;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (!strcmp(v, words[i][0])) {
            comma(t);
            args(t, words[i][1]);
            return 1;
        }
    const char *p = v;
    if (*p == '-') p++;
    if (!(*p >= '0' && *p <= '9')) return 0;
    const char *lead = p; /* the integer part's zeros before another digit: not JSON's, dropped */
    while (lead[0] == '0' && lead[1] >= '0' && lead[1] <= '9') lead++;
    while (*p >= '0' && *p <= '9') p++;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9')) return 0;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return 0;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p) return 0;
    comma(t);
    if (v[0] == '-') args(t, "-");
    args(t, lead); /* 007 -> 7, -00.5 -> -0.5, -0e5 as it is */
    return 1;
}

/* The call ends: open strings and containers closed, the end sent. */
static void end_call(slm_toolcall *t) {
    if (t->vkind == A_STR || t->vkind == A_SKEY || t->vkind == A_BKEY) args(t, "\"");
    if (t->vkind == A_SKEY || t->vkind == A_BKEY) args(t, ":null");
    if (t->vkind == A_BARE && !bare_out(t)) {
        comma(t);
        args(t, "null");
    }
    if (t->vkind == A_COLON) args(t, ":null");
    if (t->vkind == A_VAL && in_object(t)) args(t, "null");
    t->after = 0; /* a pending ',' is dropped */
    for (; t->depth > 0; t->depth--) args(t, (t->gstack >> (t->depth - 1) & 1) ? "}" : "]");
    emit(t, SLM_TOOL_END, "", 0);
    t->nhold = 0;
    t->state = G_TEXT;
}

/* The arguments broke off at byte c: the call ends, c is read as text. */
static void broken(slm_toolcall *t, int c) {
    end_call(t);
    g_step(t, c);
}

static void open_container(slm_toolcall *t, int object) {
    if (t->depth >= DEPTH_MAX) return;
    t->gstack = (t->gstack & ~(1ull << t->depth)) | ((unsigned long long)(object != 0) << t->depth);
    t->depth++;
    comma(t);
    args(t, object ? "{" : "[");
    t->vkind = object ? A_KEY0 : A_VAL0;
}

/* After a value (or a container's end): what its container expects next. */
static void value_done(slm_toolcall *t) {
    t->vkind = A_AFTER;
    if (t->depth == 0) t->state = G_END;
}

static void close_container(slm_toolcall *t) {
    args(t, in_object(t) ? "}" : "]");
    t->depth--;
    value_done(t);
}

/* Inside <|"|>...<|"|> (a string or a key): bytes that may begin <|"|> wait. */
static void quoted_byte(slm_toolcall *t, int c) {
    t->hold[t->nhold++] = (char)c;
    if (is_prefix(t->hold, t->nhold, T_QUOTE)) {
        if (t->nhold < sizeof T_QUOTE - 1) return;
        t->nhold = 0;
        if (t->vkind == A_STR) {
            args(t, "\"");
            value_done(t);
        } else {
            args(t, "\"");
            t->vkind = A_COLON;
        }
        return;
    }
    size_t k = 1; /* what can no longer begin the quote goes out */
    while (k < t->nhold && t->hold[k] != '<') k++;
    args_escaped(t, t->hold, k);
    memmove(t->hold, t->hold + k, t->nhold - k);
    t->nhold -= k;
    if (t->nhold) { /* what is left may begin the quote: check it again */
        const size_t n = t->nhold;
        char rest[sizeof t->hold];
        memcpy(rest, t->hold, n);
        t->nhold = 0;
        for (size_t i = 0; i < n; i++) quoted_byte(t, (unsigned char)rest[i]);
    }
}

/* A value begins with c (or the quote's first byte). */
static void value_start(slm_toolcall *t, int c) {
    if (c == '{' || c == '[') {
        if (t->depth >= DEPTH_MAX) return broken(t, c);
        open_container(t, c == '{');
    } else if (c == '<') {
        t->vkind = A_STR;
        t->hold[0] = '<';
        t->nhold = 1;
        t->esc = 1; /* the opening quote is being read */
    } else if (c == '-' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
        t->vkind = A_BARE;
        t->xkey[0] = (char)c;
        t->xkey[1] = 0;
        t->nxkey = 1;
    } else {
        broken(t, c);
    }
}

static void args_step(slm_toolcall *t, int c) {
    if (t->esc) { /* reading an opening <|"|> */
        t->hold[t->nhold++] = (char)c;
        if (!is_prefix(t->hold, t->nhold, T_QUOTE)) {
            char b[sizeof t->hold];
            const size_t n = t->nhold;
            memcpy(b, t->hold, n);
            t->esc = 0;
            t->nhold = 0;
            t->vkind = t->vkind == A_SKEY ? A_KEY : A_VAL;
            end_call(t);
            for (size_t i = 0; i < n; i++) g_step(t, (unsigned char)b[i]);
            return;
        }
        if (t->nhold == sizeof T_QUOTE - 1) {
            t->esc = 0;
            t->nhold = 0;
            comma(t);
            args(t, "\"");
        }
        return;
    }
    switch (t->vkind) {
    case A_KEY0:
    case A_KEY:
        if (is_ws(c)) return;
        if (c == '}' && t->vkind == A_KEY0) return close_container(t);
        if (c == '<') {
            t->vkind = A_SKEY;
            t->hold[0] = '<';
            t->nhold = 1;
            t->esc = 1;
            return;
        }
        if (c == ':' || c == '}' || c == ',' || c == '{' || c == '[' || c == ']') return broken(t, c);
        comma(t);
        args(t, "\"");
        t->vkind = A_BKEY;
        t->nxkey = 0;
        /* fall through - the key's first byte */
    case A_BKEY: /* white space waits in xkey[nxkey]: kept inside the key, dropped at its end */
        if (c == ':') {
            args(t, "\":");
            t->vkind = A_VAL;
        } else if (c == '}' || c == '\n' || c == '{') {
            broken(t, c);
        } else if (is_ws(c) && t->nxkey + 1 < sizeof t->xkey) {
            t->xkey[t->nxkey++] = (char)c;
        } else {
            const char b = (char)c;
            args_escaped(t, t->xkey, t->nxkey);
            t->nxkey = 0;
            args_escaped(t, &b, 1);
        }
        return;
    case A_SKEY:
    case A_STR: quoted_byte(t, c); return;
    case A_COLON:
        if (is_ws(c)) return;
        if (c != ':') return broken(t, c);
        args(t, ":");
        t->vkind = A_VAL;
        return;
    case A_VAL0:
        if (is_ws(c)) return;
        if (c == ']') return close_container(t);
        return value_start(t, c);
    case A_VAL:
        if (is_ws(c)) return;
        return value_start(t, c);
    case A_BARE:
        if (c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            if (t->nxkey + 1 >= sizeof t->xkey) return broken(t, c);
            t->xkey[t->nxkey++] = (char)c;
            t->xkey[t->nxkey] = 0;
            return;
        }
        if (!bare_out(t)) {
            comma(t);
            args(t, "null");
            t->vkind = A_AFTER;
            return broken(t, c);
        }
        value_done(t);
        if (t->state == G_END) return g_step(t, c);
        /* fall through - c after the value */
    case A_AFTER:
        if (is_ws(c)) return;
        if (c == ',') {
            t->after = 1;
            t->vkind = in_object(t) ? A_KEY : A_VAL;
        } else if (c == (in_object(t) ? '}' : ']')) {
            close_container(t);
        } else {
            broken(t, c);
        }
        return;
    default: broken(t, c);
    }
}

/* ---- the call around them ------------------------------------------------------- */

static void g_step(slm_toolcall *t, int c) {
    switch (t->state) {
    case G_TEXT:
        if (!t->nhold && c != '<') {
            const char b = (char)c;
            emit(t, SLM_TOOL_TEXT, &b, 1);
            return;
        }
        t->hold[t->nhold++] = (char)c;
        if (is_prefix(t->hold, t->nhold, T_OPEN)) {
            if (t->nhold < sizeof T_OPEN - 1) return;
            t->nhold = 0;
            t->nraw = 0;
            t->nname = 0;
            if (raw_put(t, T_OPEN, sizeof T_OPEN - 1)) t->state = G_KW;
            return;
        }
        { /* what can no longer begin the marker is text; the rest is read again */
            const size_t n = t->nhold;
            char b[sizeof t->hold];
            memcpy(b, t->hold, n);
            t->nhold = 0;
            emit(t, SLM_TOOL_TEXT, b, 1);
            for (size_t i = 1; i < n; i++) g_step(t, (unsigned char)b[i]);
        }
        return;
    case G_KW: {
        const char b = (char)c; /* nname: bytes of "call:" read */
        if (!raw_put(t, &b, 1) || (t->nname == 0 && is_ws(c))) return; /* white space before call: */
        if (t->nname >= sizeof T_KW - 1 || c != T_KW[t->nname]) return give_up(t);
        if (++t->nname == sizeof T_KW - 1) {
            t->nname = 0;
            t->state = G_NAME;
        }
        return;
    }
    case G_NAME: {
        const char b = (char)c;
        if (c == '{' && t->nname > 0) {
            t->name[t->nname] = 0;
            t->nraw = 0;
            t->committed = 1;
            t->depth = 0;
            t->esc = 0;
            t->after = 0;
            emit(t, SLM_TOOL_CALL, t->name, t->nname);
            t->state = G_ARGS;
            open_container(t, 1);
            return;
        }
        if (!is_name_char(c) || t->nname >= SLM_TOOL_NAME_MAX || !raw_put(t, &b, 1)) {
            if (!t->oom) {
                raw_put(t, &b, 1);
                give_up(t);
            }
            return;
        }
        t->name[t->nname++] = (char)c;
        return;
    }
    case G_ARGS: args_step(t, c); return;
    case G_END:
        if (!t->nhold && is_ws(c)) return;
        t->hold[t->nhold++] = (char)c;
        if (is_prefix(t->hold, t->nhold, T_CLOSE)) {
            if (t->nhold == sizeof T_CLOSE - 1) {
                t->nhold = 0;
                emit(t, SLM_TOOL_END, "", 0);
                t->state = G_TEXT;
            }
            return;
        }
        { /* no <tool_call|>: the call ends here, these bytes are text */
            const size_t n = t->nhold;
            char b[sizeof t->hold];
            memcpy(b, t->hold, n);
            t->nhold = 0;
            emit(t, SLM_TOOL_END, "", 0);
            t->state = G_TEXT;
            for (size_t i = 0; i < n; i++) g_step(t, (unsigned char)b[i]);
        }
        return;
    }
}

/* ---- entry points (toolcall.c calls these for SLM_TOOL_GEMMA4) ------------------- */

void slm_toolg_init(slm_toolcall *t, int in_call) {
    t->state = in_call ? G_KW : G_TEXT;
    t->nraw = 0;
    t->nname = 0; /* raw[] holds the reply's own bytes: a marker the prompt wrote is not the reply's text */
}

void slm_toolg_feed(slm_toolcall *t, const char *s, size_t n) {
    for (size_t i = 0; i < n && !t->oom; i++) g_step(t, (unsigned char)s[i]);
    flush(t);
}

void slm_toolg_finish(slm_toolcall *t) {
    if (t->state == G_TEXT) {
        if (t->nhold) emit(t, SLM_TOOL_TEXT, t->hold, t->nhold);
    } else if (t->state == G_KW || t->state == G_NAME) {
        if (t->nraw) emit(t, SLM_TOOL_TEXT, t->raw, t->nraw);
    } else if (t->state == G_ARGS) {
        if (t->nhold && t->vkind == A_STR && !t->esc) args_escaped(t, t->hold, t->nhold); /* a quote's beginning that never ended */
        if (t->esc) t->vkind = t->vkind == A_SKEY ? A_KEY : A_VAL; /* an opening quote that never ended: nothing opened */
        t->nhold = 0;
        t->esc = 0;
        end_call(t);
    } else { /* G_END: <tool_call|> never came */
        emit(t, SLM_TOOL_END, "", 0);
    }
    t->nhold = 0;
    t->nraw = 0;
    t->state = G_TEXT;
    flush(t);
}
