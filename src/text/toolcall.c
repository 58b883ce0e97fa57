/* text/toolcall — tool calls apart from the text, streaming (toolcall.h).
 *
 * A state machine over the bytes. Outside a call, bytes that may begin a
 * marker wait in hold[] (as in reasoning.c); a marker starts an attempt
 * whose bytes are kept in raw[] until the call's name is known (then the
 * call is committed: its name goes out, and its arguments stream) or the
 * bytes turn out not to be a call (then raw[] goes out as text). The JSON
 * of a call is read by a small scanner: keys, the name (a string, decoded),
 * the arguments (a string, decoded, or any value as raw JSON text), other
 * values skipped.
 */
#include "text/toolcall.h"

#include <string.h>

#include "common/common.h"

enum {
    S_TEXT,   /* outside a call */
    S_MOPEN,  /* mistral, after [TOOL_CALLS]: '[' or '{' */
    S_OPEN,   /* a call's object: '{' */
    S_KEY0,   /* after '{': a key or '}' */
    S_KEY,    /* in a key */
    S_COLON,  /* after a key */
    S_VAL,    /* a value begins */
    S_NAME,   /* in the name string */
    S_ASTR,   /* in the arguments, a string */
    S_RAW,    /* in a raw value (arguments or skipped) */
    S_AFTER,  /* after a value: ',' or '}' */
    S_NEXT,   /* after ',': a key */
    S_HCLOSE, /* hermes, after the object: </tool_call> */
    S_LNEXT,  /* llama3, after the object: ';' and another */
    S_MSEP,   /* mistral list, after an object: ',' or ']' */
    S_HHEAD,  /* harmony: a message header, until <|message|> */
    S_HBODY,  /* harmony: a call's arguments, until <|call|> */
};
enum { V_SKIP, V_ARGS }; /* what a raw value is */

/* markers */
enum { M_TOOL_CALL, M_TOOL_CALL_END, M_PYTHON_TAG, M_TOOL_CALLS, M_START, M_CHANNEL, M_CALL, M_END, M_RETURN, M_NONE = -1 };
static const char *const marker_text[] = {"<tool_call>", "</tool_call>", "<|python_tag|>", "[TOOL_CALLS]", "<|start|>",
                                          "<|channel|>", "<|call|>", "<|end|>", "<|return|>"};
#define HEAD_MAX 512 /* bytes of a harmony header */

static const int *state_markers(const slm_toolcall *t) {
    static const int hermes[] = {M_TOOL_CALL, M_NONE}, llama3[] = {M_PYTHON_TAG, M_NONE}, mistral[] = {M_TOOL_CALLS, M_NONE};
    static const int harmony[] = {M_START, M_CHANNEL, M_NONE}, none[] = {M_NONE}, hclose[] = {M_TOOL_CALL_END, M_NONE};
    static const int hbody[] = {M_CALL, M_END, M_RETURN, M_START, M_CHANNEL, M_NONE};
    if (t->state == S_HCLOSE) return hclose;
    if (t->state == S_HBODY) return hbody;
    if (t->state != S_TEXT) return none;
    switch (t->fmt) {
    case SLM_TOOL_HERMES: return hermes;
    case SLM_TOOL_LLAMA3: return llama3;
    case SLM_TOOL_MISTRAL: return mistral;
    case SLM_TOOL_HARMONY: return harmony;
    default: return none;
    }
}

static int is_ws(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static const char *const format_names[] = {"none", "hermes", "llama3", "mistral", "harmony", "xml", "auto", "gemma4"};

int slm_tool_format_parse(const char *s) {
    for (int i = 0; s && i < 8; i++)
        if (!strcmp(s, format_names[i])) return i;
    return -1;
}

const char *slm_tool_format_name(int fmt) { return fmt >= 0 && fmt < 8 ? format_names[fmt] : "?"; }

int slm_tool_detect(const slm_tokenizer *tok, const char *tmpl_src) {
    int channel = 0, calls = 0, tag = 0, python = 0, xml = 0, g4 = 0, g4end = 0;
    const int n = tok ? slm_tok_vocab_size(tok) : 0;
    for (int id = 0; id < n; id++) {
        const char *s = slm_tok_str(tok, id);
        if (!s || (s[0] != '<' && s[0] != '[')) continue;
        channel |= !strcmp(s, "<|channel|>");
        calls |= !strcmp(s, "[TOOL_CALLS]");
        tag |= !strcmp(s, "<tool_call>");
        python |= !strcmp(s, "<|python_tag|>");
        g4 |= !strcmp(s, "<|tool_call>");
        g4end |= !strcmp(s, "<tool_call|>");
    }
    g4 &= g4end;
    if (tmpl_src) {
        channel |= strstr(tmpl_src, "<|channel|>") != NULL;
        calls |= strstr(tmpl_src, "[TOOL_CALLS]") != NULL;
        tag |= strstr(tmpl_src, "<tool_call>") != NULL;
        python |= strstr(tmpl_src, "<|python_tag|>") != NULL || strstr(tmpl_src, "ipython") != NULL;
        xml = strstr(tmpl_src, "<function=") && strstr(tmpl_src, "<parameter=");
        g4 |= strstr(tmpl_src, "<|tool_call>call:") != NULL;
    }
    if (g4) return SLM_TOOL_GEMMA4;
    return channel ? SLM_TOOL_HARMONY : calls ? SLM_TOOL_MISTRAL : xml ? SLM_TOOL_XML : tag ? SLM_TOOL_HERMES : python ? SLM_TOOL_LLAMA3 : SLM_TOOL_NONE;
}

/* ---- output ------------------------------------------------------------------- */

#define flush slm_tool__flush
#define emit slm_tool__emit

void slm_tool__flush(slm_toolcall *t) {
    if (t->nrun) t->out(t->ud, t->run_ev, t->run, t->nrun);
    t->nrun = 0;
}

/* Text and argument bytes gather into runs; a call's start and end go at once. */
void slm_tool__emit(slm_toolcall *t, int ev, const char *s, size_t n) {
    if (ev == SLM_TOOL_CALL || ev == SLM_TOOL_END) {
        flush(t);
        t->out(t->ud, ev, s, n);
        return;
    }
    if (ev == SLM_TOOL_TEXT)
        for (size_t i = 0; t->at_start && i < n; i++) t->at_start = is_ws((unsigned char)s[i]);
    while (n) {
        if (t->nrun && (t->run_ev != ev || t->nrun == sizeof t->run)) flush(t);
        t->run_ev = ev;
        size_t k = sizeof t->run - t->nrun < n ? sizeof t->run - t->nrun : n;
        memcpy(t->run + t->nrun, s, k);
        t->nrun += k;
        s += k;
        n -= k;
    }
}

/* Append to a growable buffer; 0 when out of memory (t->oom). */
static int grow_put(slm_toolcall *t, char **p, size_t *len, size_t *cap, const char *s, size_t n) {
    if (!n) return 1;
    if (*len + n > *cap) {
        size_t nc = *cap ? *cap : 64;
        while (nc < *len + n) nc *= 2;
        char *q = slm_realloc(*p, nc);
        if (!q) {
            t->oom = 1;
            return 0;
        }
        *p = q;
        *cap = nc;
    }
    memcpy(*p + *len, s, n);
    *len += n;
    return 1;
}

int slm_tool__raw_put(slm_toolcall *t, const char *s, size_t n) { return grow_put(t, &t->raw, &t->nraw, &t->craw, s, n); }

/* Argument bytes: out once the name is, held before. */
static void args_out(slm_toolcall *t, const char *s, size_t n) {
    t->args_any = 1;
    t->args_bytes |= n > 0;
    if (t->committed) emit(t, SLM_TOOL_ARGS, s, n);
    else grow_put(t, &t->args, &t->nargs, &t->cargs, s, n);
}

static void end_call(slm_toolcall *t) {
    if (!t->args_bytes) emit(t, SLM_TOOL_ARGS, "{}", 2); /* none, or "" */
    emit(t, SLM_TOOL_END, "", 0);
    t->committed = t->args_any = t->args_bytes = 0;
    t->nraw = t->nargs = t->nname = 0;
}

static void commit(slm_toolcall *t) {
    t->name[t->nname] = 0;
    emit(t, SLM_TOOL_CALL, t->name, t->nname);
    t->committed = 1;
    if (t->nargs) emit(t, SLM_TOOL_ARGS, t->args, t->nargs);
    t->nargs = t->nraw = 0;
}

/* Not a call after all: what was held goes out as text. */
static void release(slm_toolcall *t) {
    if (t->nraw) emit(t, SLM_TOOL_TEXT, t->raw, t->nraw);
    t->nraw = t->nargs = t->nname = 0;
    t->args_any = t->args_bytes = 0;
}

static void step(slm_toolcall *t, int c);

/* The byte c (-1: none) does not fit the call: end it (committed) or let
 * its bytes go as text, then read c as text. */
static void fail(slm_toolcall *t, int c) {
    if (!t->committed && c >= 0 && t->nraw) t->nraw--; /* c was kept last in raw[] */
    if (t->committed) end_call(t);
    else release(t);
    t->state = S_TEXT;
    t->nhold = 0;
    if (c >= 0) step(t, c);
}

/* An attempt begins with the bytes s[0..n) (a marker, a separator). */
static void begin(slm_toolcall *t, int state, const char *s, size_t n) {
    t->nraw = t->nargs = t->nname = 0;
    t->committed = t->args_any = t->args_bytes = 0;
    t->state = state;
    grow_put(t, &t->raw, &t->nraw, &t->craw, s, n);
}

/* ---- JSON -------------------------------------------------------------------- */

static void put_utf8(char *o, size_t *n, unsigned cp) {
    if (cp < 0x80) {
        o[(*n)++] = (char)cp;
    } else if (cp < 0x800) {
        o[(*n)++] = (char)(0xC0 | (cp >> 6));
        o[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        o[(*n)++] = (char)(0xE0 | (cp >> 12));
        o[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        o[(*n)++] = (char)(0xF0 | (cp >> 18));
        o[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        o[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[(*n)++] = (char)(0x80 | (cp & 0x3F));
    }
}

/* Decoded string bytes to the name or the arguments; 0: they do not fit. */
static int str_put(slm_toolcall *t, const char *s, size_t n) {
    if (t->state == S_ASTR) {
        args_out(t, s, n);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20) return 0; /* a name is printable */
    if (t->nname + n > SLM_TOOL_NAME_MAX) return 0;
    memcpy(t->name + t->nname, s, n);
    t->nname += n;
    return 1;
}

/* One byte of a JSON string (the name or the arguments): 1 = consumed, 0 =
 * malformed, 2 = the closing quote. */
static int str_byte(slm_toolcall *t, int c) {
    char o[8];
    size_t n = 0;
    if (t->esc == 2) { /* \uXXXX */
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return 0;
        t->ucp = t->ucp * 16 + (unsigned)d;
        if (++t->ucount < 4) return 1;
        t->esc = 0;
        unsigned cp = t->ucp;
        if (cp >= 0xD800 && cp < 0xDC00) { /* wait for its low half */
            if (t->uhigh) put_utf8(o, &n, 0xFFFD);
            t->uhigh = cp;
            return n ? str_put(t, o, n) : 1;
        }
        if (cp >= 0xDC00 && cp < 0xE000) {
            cp = t->uhigh ? 0x10000 + ((t->uhigh - 0xD800) << 10) + (cp - 0xDC00) : 0xFFFD;
        } else if (t->uhigh) {
            put_utf8(o, &n, 0xFFFD);
        }
        t->uhigh = 0;
        put_utf8(o, &n, cp);
        return str_put(t, o, n);
    }
    if (t->esc == 1) {
        static const char in[] = "\"\\/bfnrt", out[] = "\"\\/\b\f\n\r\t";
        const char *k = strchr(in, c);
        t->esc = 0;
        if (c == 'u') {
            t->esc = 2;
            t->ucount = 0;
            t->ucp = 0;
            return 1;
        }
        if (!c || !k) return 0;
        o[n++] = out[k - in];
    } else if (c == '\\') {
        t->esc = 1;
        return 1;
    } else {
        if (c != '"') o[n++] = (char)c;
    }
    if (t->uhigh) { /* a high surrogate not followed by a low one */
        char f[4];
        size_t fn = 0;
        put_utf8(f, &fn, 0xFFFD);
        t->uhigh = 0;
        if (!str_put(t, f, fn)) return 0;
    }
    if (c == '"' && !n) return 2;
    return str_put(t, o, n);
}

/* One byte of a raw value: 1 = consumed, 0 = the value ended before c
 * (read c as what follows it), 2 = c ended it. */
static int raw_byte(slm_toolcall *t, int c) {
    char ch = (char)c;
    int done = 0;
    if (t->in_str) {
        if (t->esc) t->esc = 0;
        else if (c == '\\') t->esc = 1;
        else if (c == '"') { t->in_str = 0; done = t->depth == 0; }
    } else if (c == '"') {
        t->in_str = 1;
    } else if (c == '{' || c == '[') {
        t->depth++;
    } else if (c == '}' || c == ']') {
        if (!t->depth) return 0;
        done = --t->depth == 0;
    } else if (!t->depth && (is_ws(c) || c == ',')) {
        return 0;
    }
    if (t->vkind == V_ARGS) args_out(t, &ch, 1);
    return done ? 2 : 1;
}

static int key_is(const slm_toolcall *t, const char *k) { return t->nkey == strlen(k) && !memcmp(t->key, k, t->nkey); }

/* A value begins with c (not white space). */
static void value_start(slm_toolcall *t, int c) {
    t->esc = t->in_str = t->depth = 0;
    t->ucount = 0;
    t->uhigh = 0;
    if (key_is(t, "name") && !t->nname && !t->committed) {
        if (c != '"') {
            fail(t, c);
            return;
        }
        t->state = S_NAME;
        return;
    }
    const int args = (key_is(t, "arguments") || key_is(t, "parameters")) && !t->args_any;
    if (args && c == '"') {
        t->args_any = 1;
        t->state = S_ASTR;
        return;
    }
    t->vkind = args ? V_ARGS : V_SKIP;
    t->state = S_RAW;
    int r = raw_byte(t, c);
    if (r == 0) fail(t, c); /* '}', ']', ',' where a value was due */
    else if (r == 2) t->state = S_AFTER;
}

static void object_end(slm_toolcall *t) {
    if (!t->committed) {
        release(t);
        t->state = S_TEXT;
        return;
    }
    end_call(t);
    t->state = t->after;
}

/* A byte inside a call's JSON (states S_MOPEN .. S_MSEP). */
static void json_step(slm_toolcall *t, int c) {
    const char ch = (char)c;
    if (!t->committed && t->state != S_LNEXT && t->state != S_MSEP) {
        grow_put(t, &t->raw, &t->nraw, &t->craw, &ch, 1);
        if (t->nraw > SLM_TOOL_HOLD_MAX) { /* too long to be a call whose name is still to come */
            fail(t, c);
            return;
        }
    }
    switch (t->state) {
    case S_MOPEN:
        if (is_ws(c)) return;
        t->in_list = c == '[';
        t->state = S_OPEN;
        if (c == '[') return;
        /* '{' or another byte: as S_OPEN */
        /* fall through */
    case S_OPEN:
        if (is_ws(c)) return;
        if (c != '{') { fail(t, c); return; }
        t->state = S_KEY0;
        return;
    case S_KEY0:
    case S_NEXT:
        if (is_ws(c)) return;
        if (c == '}' && t->state == S_KEY0) { object_end(t); return; }
        if (c != '"') { fail(t, c); return; }
        t->nkey = 0;
        t->esc = 0;
        t->state = S_KEY;
        return;
    case S_KEY:
        if (t->esc) t->esc = 0;
        else if (c == '\\') t->esc = 1;
        else if (c == '"') { t->state = S_COLON; return; }
        if (t->nkey < sizeof t->key) t->key[t->nkey] = ch;
        t->nkey++;
        return;
    case S_COLON:
        if (is_ws(c)) return;
        if (c != ':') { fail(t, c); return; }
        t->state = S_VAL;
        return;
    case S_VAL:
        if (!is_ws(c)) value_start(t, c);
        return;
    case S_NAME:
    case S_ASTR: {
        const int was_name = t->state == S_NAME, r = str_byte(t, c);
        if (!r) { fail(t, c); return; }
        if (r == 2) {
            t->state = S_AFTER;
            if (was_name && !t->nname) { fail(t, -1); return; }
            if (was_name) commit(t);
        }
        return;
    }
    case S_RAW: {
        const int r = raw_byte(t, c);
        if (r == 2) t->state = S_AFTER;
        if (r) return;
        t->state = S_AFTER; /* the byte after a number or a word: as S_AFTER */
    }
        /* fall through */
    case S_AFTER:
        if (is_ws(c)) return;
        if (c == ',') t->state = S_NEXT;
        else if (c == '}') object_end(t);
        else fail(t, c);
        return;
    case S_LNEXT:
        if (is_ws(c)) return;
        if (c == ';') { begin(t, S_OPEN, ";", 1); return; }
        t->state = S_TEXT;
        step(t, c);
        return;
    case S_MSEP:
        if (is_ws(c)) return;
        if (c == ',') { begin(t, S_OPEN, ",", 1); return; }
        t->state = S_TEXT;
        if (c != ']') step(t, c);
        return;
    default: return;
    }
}

/* ---- markers and harmony --------------------------------------------------------- */

/* The marker hold[] is, M_NONE - 1 while it is only a marker's beginning,
 * M_NONE when it cannot become one. */
static int match(const slm_toolcall *t) {
    int prefix = 0;
    for (const int *m = state_markers(t); *m != M_NONE; m++) {
        size_t len = strlen(marker_text[*m]);
        if (t->nhold <= len && !memcmp(t->hold, marker_text[*m], t->nhold)) {
            if (t->nhold == len) return *m;
            prefix = 1;
        }
    }
    return prefix ? M_NONE - 1 : M_NONE;
}

/* The function a harmony header h[0..n) addresses ("to=functions.NAME"):
 * the name, *len bytes, or NULL. */
static const char *recipient(const char *h, size_t n, size_t *len) {
    static const char to[] = "to=functions.";
    const char *p = NULL;
    for (size_t i = 0; i + sizeof to - 1 <= n && !p; i++)
        if (!memcmp(h + i, to, sizeof to - 1)) p = h + i + sizeof to - 1;
    size_t k = 0;
    while (p && p + k < h + n && !is_ws((unsigned char)p[k]) && p[k] != '<' && (unsigned char)p[k] >= 0x20) k++;
    *len = k;
    return k && k <= SLM_TOOL_NAME_MAX ? p : NULL;
}

/* A harmony call to name[0..n) begins: its message body is the arguments. */
static void harmony_call(slm_toolcall *t, const char *name, size_t n) {
    memmove(t->name, name, n);
    t->nname = n;
    commit(t);
    t->state = S_HBODY;
}

/* The header in raw[] is whole: a message to a function is a call. */
static void harmony_header(slm_toolcall *t) {
    size_t n;
    const char *p = recipient(t->raw, t->nraw, &n);
    if (p) {
        harmony_call(t, p, n);
        return;
    }
    release(t);
    t->state = S_TEXT;
}

static void marker_found(slm_toolcall *t, int m) {
    const char *s = marker_text[m];
    t->nhold = 0;
    switch (m) {
    case M_TOOL_CALL: begin(t, S_OPEN, s, strlen(s)); t->after = S_HCLOSE; break;
    case M_PYTHON_TAG: begin(t, S_OPEN, s, strlen(s)); t->after = S_LNEXT; break;
    case M_TOOL_CALLS: begin(t, S_MOPEN, s, strlen(s)); t->after = S_MSEP; break;
    case M_TOOL_CALL_END: t->state = S_TEXT; break;
    case M_START:
    case M_CHANNEL:
        if (t->state == S_HBODY) { /* a new message: the call ended without <|call|> */
            end_call(t);
            t->state = S_TEXT;
        }
        begin(t, S_HHEAD, s, strlen(s));
        break;
    default: /* <|call|>, <|end|>, <|return|> */
        end_call(t);
        t->state = S_TEXT;
        break;
    }
}

/* Bytes let go from hold[]: text, arguments, or (after a hermes call) the
 * start of the text that follows. */
static void let_go(slm_toolcall *t, const char *s, size_t n) {
    if (t->state == S_HBODY) {
        args_out(t, s, n);
    } else if (t->state == S_HCLOSE) {
        t->state = S_TEXT;
        for (size_t i = 0; i < n; i++) step(t, (unsigned char)s[i]);
    } else {
        emit(t, SLM_TOOL_TEXT, s, n);
    }
}

static void marker_step(slm_toolcall *t, int c) {
    if (t->nhold == 0 && !(c == '<' || c == '[')) {
        char ch = (char)c;
        if (t->state == S_HCLOSE && is_ws(c)) return;
        if (t->state == S_TEXT && t->fmt == SLM_TOOL_LLAMA3 && t->at_start && c == '{') {
            begin(t, S_OPEN, "", 0);
            t->after = S_LNEXT;
            json_step(t, c);
            return;
        }
        let_go(t, &ch, 1);
        return;
    }
    t->hold[t->nhold++] = (char)c;
    int m = match(t);
    if (m >= 0) {
        marker_found(t, m);
        return;
    }
    if (m != M_NONE) return;
    /* the first byte cannot begin a marker: it goes; the rest is read again */
    char rest[sizeof t->hold];
    const size_t k = t->nhold - 1;
    memcpy(rest, t->hold + 1, k);
    t->nhold = 0;
    let_go(t, t->hold, 1);
    for (size_t i = 0; i < k; i++) step(t, (unsigned char)rest[i]);
}

static void step(slm_toolcall *t, int c) {
    if (t->state == S_TEXT || t->state == S_HCLOSE || t->state == S_HBODY) {
        marker_step(t, c);
    } else if (t->state == S_HHEAD) {
        const char ch = (char)c;
        static const char msg[] = "<|message|>";
        grow_put(t, &t->raw, &t->nraw, &t->craw, &ch, 1);
        if (t->nraw >= sizeof msg - 1 && !memcmp(t->raw + t->nraw - (sizeof msg - 1), msg, sizeof msg - 1))
            harmony_header(t);
        else if (t->nraw > HEAD_MAX)
            fail(t, -1);
    } else {
        json_step(t, c);
    }
}

/* ---- entry points ---------------------------------------------------------------- */

void slm_tool_feed(slm_toolcall *t, const char *s, size_t n) {
    if (t->fmt == SLM_TOOL_NONE) {
        if (n) t->out(t->ud, SLM_TOOL_TEXT, s, n);
        return;
    }
    if (t->fmt == SLM_TOOL_XML || t->fmt == SLM_TOOL_GEMMA4) {
        (t->fmt == SLM_TOOL_XML ? slm_toolx_feed : slm_toolg_feed)(t, s, n);
        return;
    }
    for (size_t i = 0; i < n && !t->oom; i++) step(t, (unsigned char)s[i]);
    flush(t);
}

void slm_tool_finish(slm_toolcall *t) {
    if (t->fmt == SLM_TOOL_NONE) return;
    if (t->fmt == SLM_TOOL_XML || t->fmt == SLM_TOOL_GEMMA4) {
        (t->fmt == SLM_TOOL_XML ? slm_toolx_finish : slm_toolg_finish)(t);
        return;
    }
    if (t->state == S_HBODY) {
        if (t->nhold) args_out(t, t->hold, t->nhold);
        end_call(t);
    } else if (t->state == S_TEXT || t->state == S_HCLOSE) {
        if (t->nhold) emit(t, SLM_TOOL_TEXT, t->hold, t->nhold);
    } else if (t->state != S_LNEXT && t->state != S_MSEP) {
        if (t->committed) end_call(t);
        else release(t);
    }
    t->nhold = 0;
    t->state = S_TEXT;
    flush(t);
}

void slm_tool_free(slm_toolcall *t) {
    slm_xfree(t->xstr);
    t->xstr = NULL;
    slm_xfree(t->raw);
    slm_xfree(t->args);
    t->raw = t->args = NULL;
    t->nraw = t->craw = t->nargs = t->cargs = 0;
}

/* Whether prompt ends with tag, white space after it allowed. */
static int ends_with(const char *prompt, const char *tag, size_t *at) {
    size_t n = prompt ? strlen(prompt) : 0, tl = strlen(tag);
    while (n && is_ws((unsigned char)prompt[n - 1])) n--;
    if (n < tl || memcmp(prompt + n - tl, tag, tl)) return 0;
    if (at) *at = n - tl;
    return 1;
}

int slm_tool_prompt_opens(int fmt, const char *prompt, const char **name, size_t *len) {
    static const char *const opener[] = {[SLM_TOOL_HERMES] = "<tool_call>", [SLM_TOOL_LLAMA3] = "<|python_tag|>",
                                         [SLM_TOOL_MISTRAL] = "[TOOL_CALLS]", [SLM_TOOL_XML] = "<tool_call>",
                                         [SLM_TOOL_GEMMA4] = "<|tool_call>"};
    size_t at;
    *name = NULL;
    *len = 0;
    if (fmt == SLM_TOOL_HERMES || fmt == SLM_TOOL_LLAMA3 || fmt == SLM_TOOL_MISTRAL || fmt == SLM_TOOL_XML || fmt == SLM_TOOL_GEMMA4)
        return ends_with(prompt, opener[fmt], NULL);
    if (fmt != SLM_TOOL_HARMONY || !ends_with(prompt, "<|message|>", &at)) return 0;
    /* the last message header of the prompt, from its <|start|> or <|channel|> */
    const char *h = NULL;
    for (const char *p = prompt; (p = strstr(p, "<|start|>")) && (size_t)(p - prompt) < at; p++) h = p;
    if (!h)
        for (const char *p = prompt; (p = strstr(p, "<|channel|>")) && (size_t)(p - prompt) < at; p++) h = p;
    *name = h ? recipient(h, (size_t)(prompt + at - h), len) : NULL;
    return *name != NULL;
}

void slm_tool_init(slm_toolcall *t, int fmt, const char *prompt, slm_tool_out out, void *ud) {
    memset(t, 0, sizeof *t);
    t->fmt = (fmt >= SLM_TOOL_NONE && fmt <= SLM_TOOL_XML) || fmt == SLM_TOOL_GEMMA4 ? fmt : SLM_TOOL_NONE;
    t->out = out;
    t->ud = ud;
    t->state = S_TEXT;
    t->at_start = 1;
    const char *name;
    size_t n;
    if (!slm_tool_prompt_opens(t->fmt, prompt, &name, &n)) {
        if (t->fmt == SLM_TOOL_XML) slm_toolx_init(t, 0);
        if (t->fmt == SLM_TOOL_GEMMA4) slm_toolg_init(t, 0);
        return;
    }
    if (t->fmt == SLM_TOOL_XML || t->fmt == SLM_TOOL_GEMMA4) {
        (t->fmt == SLM_TOOL_XML ? slm_toolx_init : slm_toolg_init)(t, 1);
    } else if (t->fmt == SLM_TOOL_HERMES) {
        t->state = S_OPEN;
        t->after = S_HCLOSE;
    } else if (t->fmt == SLM_TOOL_LLAMA3) {
        t->state = S_OPEN;
        t->after = S_LNEXT;
    } else if (t->fmt == SLM_TOOL_MISTRAL) {
        t->state = S_MOPEN;
        t->after = S_MSEP;
    } else {
        harmony_call(t, name, n); /* the reply is the arguments: the call goes out now */
    }
}
