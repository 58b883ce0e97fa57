/* text/jinja_lex.c — the chat-template lexer (see jinja_internal.h).
 *
 * Lexing follows Jinja2 with trim_blocks = lstrip_blocks = True and
 * keep_trailing_newline = False (Hugging Face's settings): a flat token
 * stream of text runs and the tokens inside {{ }} and {% %}; comments and
 * stripped whitespace vanish here.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "text/jinja_internal.h"

void jx_err(P *p, int line, const char *fmt, ...) {
    char msg[SLM_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    slm_errf(p->err, SLM_ERR_FORMAT, "line %d: %s", line, msg);
    longjmp(p->jb, 1);
}

void jx_nomem(P *p) {
    slm_errf(p->err, SLM_ERR_NOMEM, "out of memory");
    longjmp(p->jb, 1);
}

void *jx_alloc(P *p, size_t n) {
    void *m = jv_arena_alloc(p->ar, n);
    if (!m && p->ar->oom) jx_nomem(p);
    if (!m) jx_err(p, 0, "template too large");
    memset(m, 0, n);
    return m;
}

/* ---- lexer ------------------------------------------------------------------ */

static void push_tok(P *p, tok t) {
    if (p->nt == p->cap) {
        int nc = p->cap ? p->cap * 2 : 256;
        if (nc > 4000000) jx_err(p, t.line, "template too large");
        tok *n = slm_realloc(p->t, (size_t)nc * sizeof(tok));
        if (!n) jx_nomem(p);
        p->t = n;
        p->cap = nc;
    }
    p->t[p->nt++] = t;
}

static int is_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_digit(int c) { return c >= '0' && c <= '9'; }

static int count_lines(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == '\n';
    return k;
}

static size_t put_utf8(char *o, unsigned long cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 63)); o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    if (cp > 0x10FFFF) cp = 0xFFFD;
    o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 63));
    o[2] = (char)(0x80 | ((cp >> 6) & 63)); o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Lex the inside of a {{ }} or {% %} tag from *i; stops after the closer.
 * Returns 1 if the closer had '-' (strip following whitespace). */
static int lex_tag(P *p, const char *src, size_t len, size_t *i, int *line, int is_block) {
    const char *closer = is_block ? "%}" : "}}";
    int bal = 0; /* open brackets: '}}' inside a dict literal does not close */
    for (;;) {
        size_t k = *i;
        while (k < len && is_space((unsigned char)src[k])) {
            if (src[k] == '\n') (*line)++;
            k++;
        }
        *i = k;
        if (k >= len) jx_err(p, *line, "unclosed %s tag", is_block ? "{%" : "{{");
        char c = src[k];
        if (bal == 0 && c == '-' && k + 2 < len && src[k + 1] == closer[0] && src[k + 2] == closer[1]) {
            *i = k + 3;
            push_tok(p, (tok){.type = is_block ? TK_BE : TK_VE, .line = *line});
            return 1;
        }
        if (bal == 0 && c == '+' && k + 2 < len && src[k + 1] == closer[0] && src[k + 2] == closer[1]) {
            *i = k + 3;
            push_tok(p, (tok){.type = is_block ? TK_BE : TK_VE, .line = *line});
            return 0;
        }
        if (bal == 0 && k + 1 < len && c == closer[0] && src[k + 1] == closer[1]) {
            *i = k + 2;
            push_tok(p, (tok){.type = is_block ? TK_BE : TK_VE, .line = *line});
            return 0;
        }
        tok t = {.line = *line};
        if (is_alpha((unsigned char)c)) {
            size_t e = k;
            while (e < len && (is_alpha((unsigned char)src[e]) || is_digit((unsigned char)src[e]))) e++;
            t.type = TK_NAME;
            t.s = src + k;
            t.n = e - k;
            *i = e;
        } else if (is_digit((unsigned char)c)) {
            size_t e = k;
            while (e < len && (is_digit((unsigned char)src[e]) || src[e] == '_')) e++;
            int isf = 0;
            if (e + 1 < len && src[e] == '.' && is_digit((unsigned char)src[e + 1])) {
                isf = 1;
                e++;
                while (e < len && is_digit((unsigned char)src[e])) e++;
            }
            if (e < len && (src[e] == 'e' || src[e] == 'E')) {
                size_t f = e + 1;
                if (f < len && (src[f] == '+' || src[f] == '-')) f++;
                if (f < len && is_digit((unsigned char)src[f])) {
                    isf = 1;
                    e = f;
                    while (e < len && is_digit((unsigned char)src[e])) e++;
                }
            }
            char buf[64];
            size_t m = 0;
            for (size_t q = k; q < e && m < sizeof buf - 1; q++)
                if (src[q] != '_') buf[m++] = src[q];
            buf[m] = 0;
            if (isf) {
                t.type = TK_FLOAT;
                t.fv = strtod(buf, NULL);
            } else {
                t.type = TK_INT;
                errno = 0;
                unsigned long long v = strtoull(buf, NULL, 10);
                if (errno == ERANGE || m >= sizeof buf - 1 || v > (unsigned long long)INT64_MAX)
                    jx_err(p, *line, "integer literal too large");
                t.iv = (long long)v;
            }
            *i = e;
        } else if (c == '\'' || c == '"') {
            size_t e = k + 1;
            while (e < len && src[e] != c) {
                if (src[e] == '\\' && e + 1 < len) e++;
                e++;
            }
            if (e >= len) jx_err(p, *line, "unterminated string");
            char *o = jx_alloc(p, e - k + 1);
            size_t m = 0;
            for (size_t q = k + 1; q < e; q++) {
                char ch = src[q];
                if (ch == '\n') (*line)++;
                if (ch != '\\') { o[m++] = ch; continue; }
                char x = src[++q];
                switch (x) {
                case 'n': o[m++] = '\n'; break;
                case 't': o[m++] = '\t'; break;
                case 'r': o[m++] = '\r'; break;
                case '0': o[m++] = '\0'; break;
                case '\\': o[m++] = '\\'; break;
                case '\'': o[m++] = '\''; break;
                case '"': o[m++] = '"'; break;
                case '\n': (*line)++; break; /* line continuation */
                case 'x': case 'u': case 'U': {
                    int nd = x == 'x' ? 2 : x == 'u' ? 4 : 8;
                    unsigned long cp = 0;
                    int ok = q + (size_t)nd < e;
                    for (int d = 1; ok && d <= nd; d++) {
                        int h = hexval((unsigned char)src[q + (size_t)d]);
                        if (h < 0) ok = 0;
                        else cp = cp * 16 + (unsigned long)h;
                    }
                    if (!ok) { o[m++] = '\\'; o[m++] = x; break; }
                    q += (size_t)nd;
                    m += put_utf8(o + m, cp);
                    break;
                }
                default: o[m++] = '\\'; o[m++] = x; break;
                }
            }
            o[m] = 0;
            t.type = TK_STR;
            t.s = o;
            t.n = m;
            *i = e + 1;
        } else {
            static const struct { const char *s; int op; } two[] = {
                {"**", OP_POW}, {"//", OP_FDIV}, {"==", OP_EQ}, {"!=", OP_NE}, {"<=", OP_LE}, {">=", OP_GE}};
            t.type = TK_OP;
            t.op = 0;
            for (size_t q = 0; q < sizeof two / sizeof two[0]; q++)
                if (k + 1 < len && src[k] == two[q].s[0] && src[k + 1] == two[q].s[1]) {
                    t.op = two[q].op;
                    *i = k + 2;
                }
            if (!t.op) {
                if (!strchr("+-*/%~<>=()[]{}.,:|", c) || c == 0) jx_err(p, *line, "unexpected character '%c'", c);
                t.op = c;
                *i = k + 1;
                if (c == '(' || c == '[' || c == '{') bal++;
                if ((c == ')' || c == ']' || c == '}') && bal > 0) bal--;
            }
        }
        push_tok(p, t);
    }
}

void jx_lex(P *p, const char *src) {
    /* as Jinja2: \r\n and \r become \n everywhere, then one trailing
     * newline goes (keep_trailing_newline = False) */
    size_t len = strlen(src);
    if (memchr(src, '\r', len)) {
        char *c = jx_alloc(p, len + 1);
        size_t m = 0;
        for (size_t i = 0; i < len; i++) {
            if (src[i] == '\r') {
                c[m++] = '\n';
                if (i + 1 < len && src[i + 1] == '\n') i++;
            } else {
                c[m++] = src[i];
            }
        }
        c[m] = 0;
        src = c;
        len = m;
    }
    if (len && src[len - 1] == '\n') len--;
    size_t i = 0;
    int line = 1, strip_next = 0, line_starting = 1;
    while (i <= len) {
        /* find the next tag opener */
        size_t j = i;
        int kind = 0; /* 1 var, 2 block, 3 comment */
        while (j + 1 < len) {
            if (src[j] == '{' && (src[j + 1] == '{' || src[j + 1] == '%' || src[j + 1] == '#')) {
                kind = src[j + 1] == '{' ? 1 : src[j + 1] == '%' ? 2 : 3;
                break;
            }
            j++;
        }
        if (!kind) j = len;
        size_t ts = i, te = j;
        if (strip_next)
            while (ts < te && is_space((unsigned char)src[ts])) ts++;
        char mod = kind && j + 2 < len ? src[j + 2] : 0;
        if (kind && mod == '-') {
            while (te > ts && is_space((unsigned char)src[te - 1])) te--;
        } else if ((kind == 2 || kind == 3) && mod != '+') {
            /* lstrip_blocks: spaces/tabs between a line start and the tag */
            size_t q = te;
            while (q > ts && (src[q - 1] == ' ' || src[q - 1] == '\t')) q--;
            if ((q > ts && src[q - 1] == '\n') || (q == ts && line_starting)) te = q;
        }
        if (te > ts) { /* copied: the template owns its text, not the caller's source */
            char *c = jx_alloc(p, te - ts + 1);
            memcpy(c, src + ts, te - ts);
            push_tok(p, (tok){.type = TK_TEXT, .s = c, .n = te - ts, .line = line});
        }
        line += count_lines(src + i, j - i);
        if (!kind) break;
        i = j + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
        strip_next = 0;
        if (kind == 3) {
            size_t e = i;
            while (e + 1 < len && !(src[e] == '#' && src[e + 1] == '}')) e++;
            if (e + 1 >= len) jx_err(p, line, "unclosed comment");
            int dash = e > i && src[e - 1] == '-';
            line += count_lines(src + i, e - i);
            i = e + 2;
            if (dash) strip_next = 1;
            else if (i < len && src[i] == '\n') { i++; line++; line_starting = 1; continue; }
            line_starting = 0;
        } else {
            push_tok(p, (tok){.type = kind == 2 ? TK_BB : TK_VB, .line = line});
            int dash = lex_tag(p, src, len, &i, &line, kind == 2);
            line_starting = 0;
            if (dash) strip_next = 1;
            else if (kind == 2 && i < len && src[i] == '\n') { i++; line++; line_starting = 1; continue; }
        }
        if (strip_next) {
            /* line_starting: the stripped whitespace ends with a newline */
            size_t q = i;
            while (q < len && is_space((unsigned char)src[q])) q++;
            line_starting = q > i && src[q - 1] == '\n';
        }
    }
    push_tok(p, (tok){.type = TK_EOF, .line = line});
}

/* ---- parser ----------------------------------------------------------------- */
