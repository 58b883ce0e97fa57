/* A Jinja subset interpreter for chat templates (see chat_template.h).
 *
 * Lexing follows Jinja2 with trim_blocks = lstrip_blocks = True and
 * keep_trailing_newline = False (Hugging Face's settings). The lexer yields a
 * flat token stream; a recursive-descent parser builds an AST in the
 * template's arena; rendering evaluates it with values allocated in a
 * per-render arena (freed at once, so nothing leaks on an error: errors
 * longjmp to the entry point).
 */
#include "text/chat_template.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/common.h"

#define ARENA_LIMIT (64u << 20) /* bytes per template / per render */
#define OUT_LIMIT (16u << 20)   /* rendered text */
#define MAX_DEPTH 200           /* nesting of expressions, statements, calls */
#define MAX_STEPS 4000000L      /* statements + loop iterations + filter items */

/* ---- arena ---------------------------------------------------------------- */

typedef struct ablk {
    struct ablk *next;
    size_t used, cap;
    max_align_t data[];
} ablk;

typedef struct arena {
    ablk *head;
    size_t total;
} arena;

static void *ar_try(arena *a, size_t n) {
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (n > ARENA_LIMIT) return NULL;
    if (!a->head || a->head->cap - a->head->used < n) {
        size_t cap = n > 32768 ? n : 32768;
        if (a->total + cap > ARENA_LIMIT) return NULL;
        ablk *b = slm_malloc(sizeof(ablk) + cap);
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

static void ar_free(arena *a) {
    ablk *b = a->head;
    while (b) {
        ablk *n = b->next;
        slm_xfree(b);
        b = n;
    }
    a->head = NULL;
    a->total = 0;
}

/* ---- values ----------------------------------------------------------------- */

enum { V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_FUNC, V_MACRO };

typedef struct sstr {
    const char *p;
    size_t n;
} sstr;

typedef struct node node;
typedef struct vlist vlist;
typedef struct vdict vdict;

typedef struct val {
    int t;
    union {
        long long i; /* INT, BOOL, FUNC id */
        double f;
        sstr s;
        vlist *l;
        vdict *d;
        const node *m;
    } u;
} val;

struct vlist {
    int n, cap;
    val *v;
};
struct vdict {
    int n, cap;
    sstr *k;
    val *v;
    int ns; /* a namespace(): attributes may be set */
};

/* ---- tokens and AST ------------------------------------------------------- */

enum { TK_TEXT, TK_VB, TK_VE, TK_BB, TK_BE, TK_NAME, TK_STR, TK_INT, TK_FLOAT, TK_OP, TK_EOF };
enum { OP_POW = 256, OP_FDIV, OP_EQ, OP_NE, OP_LE, OP_GE, OP_IN, OP_NOTIN };

typedef struct tok {
    int type, op, line;
    const char *s;
    size_t n;
    long long iv;
    double fv;
} tok;

enum {
    E_LIT, E_NAME, E_ATTR, E_ITEM, E_SLICE, E_CALL, E_FILTER, E_TEST, E_BIN, E_AND, E_OR, E_NOT,
    E_NEG, E_COND, E_LIST, E_DICT,
    S_TEXT, S_OUT, S_IF, S_BODY, S_FOR, S_SET, S_MACRO, S_BREAK, S_CONTINUE
};

struct node {
    int kind, op, line, neg;
    node *a, *b, *c, *d;
    node **items;
    const char **names; /* kwarg names (NULL = positional), for targets, macro params */
    int n, n_names;
    const char *s, *s2;
    size_t sn;
    val lit;
};

struct slm_tmpl {
    arena ar;
    node *body;
};

/* ---- errors ----------------------------------------------------------------- */

typedef struct P {
    arena *ar;
    tok *t;
    int nt, cap, pos, depth;
    jmp_buf jb;
    char *err;
    size_t errcap;
    const char *src;
} P;

static void perr(P *p, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4), noreturn));
static void perr(P *p, int line, const char *fmt, ...) {
    if (p->err && p->errcap) {
        int k = snprintf(p->err, p->errcap, "line %d: ", line);
        if (k < 0) k = 0;
        if ((size_t)k < p->errcap) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(p->err + k, p->errcap - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    longjmp(p->jb, 1);
}

static void *palloc(P *p, size_t n) {
    void *m = ar_try(p->ar, n);
    if (!m) perr(p, 0, "template too large");
    memset(m, 0, n);
    return m;
}

/* ---- lexer ------------------------------------------------------------------ */

static void push_tok(P *p, tok t) {
    if (p->nt == p->cap) {
        int nc = p->cap ? p->cap * 2 : 256;
        if (nc > 4000000) perr(p, t.line, "template too large");
        tok *n = slm_realloc(p->t, (size_t)nc * sizeof(tok));
        if (!n) perr(p, t.line, "out of memory");
        p->t = n;
        p->cap = nc;
    }
    p->t[p->nt++] = t;
}

static int is_space(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
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
        if (k >= len) perr(p, *line, "unclosed %s tag", is_block ? "{%" : "{{");
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
                char *end;
                unsigned long long v = strtoull(buf, &end, 10);
                (void)end;
                if (m > 18 || v > (unsigned long long)9223372036854775807LL) perr(p, *line, "integer literal too large");
                t.iv = (long long)v;
            }
            *i = e;
        } else if (c == '\'' || c == '"') {
            size_t e = k + 1;
            while (e < len && src[e] != c) {
                if (src[e] == '\\' && e + 1 < len) e++;
                e++;
            }
            if (e >= len) perr(p, *line, "unterminated string");
            char *o = palloc(p, e - k + 1);
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
                if (!strchr("+-*/%~<>=()[]{}.,:|", c) || c == 0) perr(p, *line, "unexpected character '%c'", c);
                t.op = c;
                *i = k + 1;
                if (c == '(' || c == '[' || c == '{') bal++;
                if ((c == ')' || c == ']' || c == '}') && bal > 0) bal--;
            }
        }
        push_tok(p, t);
    }
}

static void lex(P *p, const char *src) {
    size_t len = strlen(src);
    if (len && src[len - 1] == '\n') len--; /* keep_trailing_newline = False */
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
            char *c = palloc(p, te - ts + 1);
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
            if (e + 1 >= len) perr(p, line, "unclosed comment");
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

static tok *peek(P *p) { return &p->t[p->pos]; }
static tok *next(P *p) {
    tok *t = &p->t[p->pos];
    if (t->type != TK_EOF) p->pos++;
    return t;
}
static int is_op(P *p, int op) { return peek(p)->type == TK_OP && peek(p)->op == op; }
static int is_name(P *p, const char *s) {
    tok *t = peek(p);
    return t->type == TK_NAME && t->n == strlen(s) && !memcmp(t->s, s, t->n);
}
static int accept_op(P *p, int op) {
    if (is_op(p, op)) { next(p); return 1; }
    return 0;
}
static int accept_name(P *p, const char *s) {
    if (is_name(p, s)) { next(p); return 1; }
    return 0;
}
static void expect_op(P *p, int op) {
    if (!accept_op(p, op)) perr(p, peek(p)->line, "expected '%c'", op < 256 ? op : '?');
}
static const char *tok_name(P *p, tok *t) {
    char *s = palloc(p, t->n + 1);
    memcpy(s, t->s, t->n);
    return s;
}
static const char *expect_ident(P *p) {
    tok *t = next(p);
    if (t->type != TK_NAME) perr(p, t->line, "expected a name");
    return tok_name(p, t);
}

static node *mk(P *p, int kind, int line) {
    node *n = palloc(p, sizeof *n);
    n->kind = kind;
    n->line = line;
    return n;
}

typedef struct nvec {
    node **v;
    const char **names;
    int n, cap;
} nvec;
static void nv_push(P *p, nvec *v, node *x, const char *name) {
    if (v->n == v->cap) {
        int nc = v->cap ? v->cap * 2 : 4;
        node **nn = palloc(p, (size_t)nc * sizeof *nn);
        const char **nm = palloc(p, (size_t)nc * sizeof *nm);
        if (v->n) {
            memcpy(nn, v->v, (size_t)v->n * sizeof *nn);
            memcpy(nm, v->names, (size_t)v->n * sizeof *nm);
        }
        v->v = nn;
        v->names = nm;
        v->cap = nc;
    }
    v->names[v->n] = name;
    v->v[v->n++] = x;
}

static node *p_expr(P *p);
static node *p_or(P *p);
static node *p_unary(P *p, int with_filter);

static void enter(P *p) {
    if (++p->depth > MAX_DEPTH) perr(p, peek(p)->line, "template nested too deeply");
}

/* (args) after '(' consumed; fills items/names of n. */
static void p_args(P *p, node *n) {
    nvec v = {0};
    while (!is_op(p, ')')) {
        const char *kw = NULL;
        if (peek(p)->type == TK_NAME && p->t[p->pos + 1].type == TK_OP && p->t[p->pos + 1].op == '=') {
            kw = tok_name(p, next(p));
            next(p);
        }
        nv_push(p, &v, p_expr(p), kw);
        if (!accept_op(p, ',')) break;
    }
    expect_op(p, ')');
    n->items = v.v;
    n->names = v.names;
    n->n = v.n;
}

static node *p_primary(P *p) {
    tok *t = next(p);
    node *n;
    switch (t->type) {
    case TK_STR: {
        n = mk(p, E_LIT, t->line);
        n->lit.t = V_STR;
        n->lit.u.s = (sstr){t->s, t->n};
        /* adjacent string literals concatenate */
        while (peek(p)->type == TK_STR) {
            tok *u = next(p);
            char *c = palloc(p, n->lit.u.s.n + u->n + 1);
            memcpy(c, n->lit.u.s.p, n->lit.u.s.n);
            memcpy(c + n->lit.u.s.n, u->s, u->n);
            n->lit.u.s = (sstr){c, n->lit.u.s.n + u->n};
        }
        return n;
    }
    case TK_INT:
        n = mk(p, E_LIT, t->line);
        n->lit.t = V_INT;
        n->lit.u.i = t->iv;
        return n;
    case TK_FLOAT:
        n = mk(p, E_LIT, t->line);
        n->lit.t = V_FLOAT;
        n->lit.u.f = t->fv;
        return n;
    case TK_NAME: {
        n = mk(p, E_LIT, t->line);
#define NM(w) (t->n == strlen(w) && !memcmp(t->s, w, t->n))
        if (NM("true") || NM("True")) { n->lit.t = V_BOOL; n->lit.u.i = 1; return n; }
        if (NM("false") || NM("False")) { n->lit.t = V_BOOL; n->lit.u.i = 0; return n; }
        if (NM("none") || NM("None")) { n->lit.t = V_NONE; return n; }
#undef NM
        n->kind = E_NAME;
        n->s = tok_name(p, t);
        return n;
    }
    case TK_OP:
        if (t->op == '(') {
            enter(p);
            n = p_expr(p);
            if (is_op(p, ',')) { /* a tuple: treat as a list */
                nvec v = {0};
                nv_push(p, &v, n, NULL);
                while (accept_op(p, ',') && !is_op(p, ')')) nv_push(p, &v, p_expr(p), NULL);
                n = mk(p, E_LIST, t->line);
                n->items = v.v;
                n->n = v.n;
            }
            expect_op(p, ')');
            p->depth--;
            return n;
        }
        if (t->op == '[') {
            enter(p);
            nvec v = {0};
            while (!is_op(p, ']')) {
                nv_push(p, &v, p_expr(p), NULL);
                if (!accept_op(p, ',')) break;
            }
            expect_op(p, ']');
            n = mk(p, E_LIST, t->line);
            n->items = v.v;
            n->n = v.n;
            p->depth--;
            return n;
        }
        if (t->op == '{') {
            enter(p);
            nvec v = {0};
            while (!is_op(p, '}')) {
                nv_push(p, &v, p_expr(p), NULL);
                expect_op(p, ':');
                nv_push(p, &v, p_expr(p), NULL);
                if (!accept_op(p, ',')) break;
            }
            expect_op(p, '}');
            n = mk(p, E_DICT, t->line);
            n->items = v.v;
            n->n = v.n;
            p->depth--;
            return n;
        }
        break;
    default:
        break;
    }
    perr(p, t->line, "unexpected %s in expression", t->type == TK_EOF ? "end of template" : t->type == TK_BE || t->type == TK_VE ? "end of tag" : "token");
}

static const char *const known_filters[] = {
    "trim", "length", "count", "tojson", "join", "list", "selectattr", "rejectattr", "select", "reject",
    "map", "items", "string", "first", "last", "lower", "upper", "default", "d", "replace", "int", "float",
    "abs", "capitalize", "title", "safe", "reverse", "unique", "e", "escape", "indent", "sort", "dictsort",
    "wordcount", "sum", "min", "max", "round", "center", "batch", NULL};
static const char *const known_tests[] = {
    "defined", "undefined", "none", "string", "number", "integer", "float", "mapping", "iterable", "sequence",
    "boolean", "true", "false", "odd", "even", "divisibleby", "equalto", "eq", "ne", "lt", "gt", "le", "ge",
    "in", "sameas", "callable", "lower", "upper", NULL};
static int in_list(const char *const *l, const char *s) {
    for (; *l; l++)
        if (!strcmp(*l, s)) return 1;
    return 0;
}

static node *p_filter(P *p, node *operand) {
    tok *t = peek(p);
    const char *name = expect_ident(p);
    /* dotted filter names are not supported */
    if (!in_list(known_filters, name)) perr(p, t->line, "unsupported filter '%s'", name);
    node *f = mk(p, E_FILTER, t->line);
    f->a = operand;
    f->s = name;
    if (accept_op(p, '(')) p_args(p, f);
    return f;
}

static node *p_postfix(P *p, node *n) {
    for (;;) {
        tok *t = peek(p);
        if (accept_op(p, '.')) {
            tok *u = next(p);
            node *a = mk(p, E_ATTR, t->line);
            a->a = n;
            if (u->type == TK_NAME) a->s = tok_name(p, u);
            else if (u->type == TK_INT) { a->kind = E_ITEM; a->b = mk(p, E_LIT, t->line); a->b->lit.t = V_INT; a->b->lit.u.i = u->iv; }
            else perr(p, t->line, "expected an attribute name after '.'");
            n = a;
        } else if (accept_op(p, '[')) {
            node *idx[3] = {NULL, NULL, NULL};
            int slice = 0;
            if (!is_op(p, ':')) idx[0] = p_expr(p);
            if (accept_op(p, ':')) {
                slice = 1;
                if (!is_op(p, ']') && !is_op(p, ':')) idx[1] = p_expr(p);
                if (accept_op(p, ':') && !is_op(p, ']')) idx[2] = p_expr(p);
            }
            expect_op(p, ']');
            if (!slice && !idx[0]) perr(p, t->line, "empty subscript");
            node *a = mk(p, slice ? E_SLICE : E_ITEM, t->line);
            a->a = n;
            if (slice) { a->b = idx[0]; a->c = idx[1]; a->d = idx[2]; }
            else a->b = idx[0];
            n = a;
        } else if (accept_op(p, '(')) {
            node *c = mk(p, E_CALL, t->line);
            c->a = n;
            p_args(p, c);
            n = c;
        } else {
            return n;
        }
    }
}

static node *p_filter_expr(P *p, node *n) {
    for (;;) {
        tok *t = peek(p);
        if (accept_op(p, '|')) {
            n = p_filter(p, n);
        } else if (accept_name(p, "is")) {
            node *x = mk(p, E_TEST, t->line);
            x->a = n;
            if (accept_name(p, "not")) x->neg = 1;
            tok *u = next(p);
            if (u->type == TK_NAME) x->s = tok_name(p, u);
            else if (u->type == TK_OP && u->op == OP_EQ) x->s = "eq";
            else if (u->type == TK_OP && u->op == OP_NE) x->s = "ne";
            else perr(p, u->line, "expected a test name after 'is'");
            if (!in_list(known_tests, x->s)) perr(p, u->line, "unsupported test '%s'", x->s);
            if (accept_op(p, '(')) {
                p_args(p, x);
            } else {
                /* one bare argument: `is divisibleby 3`, `is sameas none` */
                tok *v = peek(p);
                if (v->type == TK_STR || v->type == TK_INT || v->type == TK_FLOAT ||
                    (v->type == TK_NAME && !is_name(p, "and") && !is_name(p, "or") && !is_name(p, "else") &&
                     !is_name(p, "if") && !is_name(p, "is") && !is_name(p, "in") && !is_name(p, "not"))) {
                    nvec a = {0};
                    nv_push(p, &a, p_postfix(p, p_primary(p)), NULL);
                    x->items = a.v;
                    x->names = a.names;
                    x->n = 1;
                }
            }
            n = x;
        } else if (is_op(p, '(') || is_op(p, '.') || is_op(p, '[')) {
            n = p_postfix(p, n);
        } else {
            return n;
        }
    }
}

static node *p_unary(P *p, int with_filter) {
    tok *t = peek(p);
    node *n;
    enter(p);
    if (accept_op(p, '-')) {
        n = mk(p, E_NEG, t->line);
        n->a = p_unary(p, 0);
    } else if (accept_op(p, '+')) {
        n = p_unary(p, 0);
    } else {
        n = p_postfix(p, p_primary(p));
    }
    p->depth--;
    return with_filter ? p_filter_expr(p, n) : n;
}

static node *bin(P *p, int op, node *a, node *b, int line) {
    node *n = mk(p, E_BIN, line);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static node *p_pow(P *p) {
    node *n = p_unary(p, 1);
    while (is_op(p, OP_POW)) {
        int line = next(p)->line;
        n = bin(p, OP_POW, n, p_unary(p, 1), line);
    }
    return n;
}
static node *p_math2(P *p) {
    node *n = p_pow(p);
    while (is_op(p, '*') || is_op(p, '/') || is_op(p, OP_FDIV) || is_op(p, '%')) {
        tok *t = next(p);
        n = bin(p, t->op, n, p_pow(p), t->line);
    }
    return n;
}
static node *p_concat(P *p) {
    node *n = p_math2(p);
    while (is_op(p, '~')) {
        int line = next(p)->line;
        n = bin(p, '~', n, p_math2(p), line);
    }
    return n;
}
static node *p_math1(P *p) {
    node *n = p_concat(p);
    while (is_op(p, '+') || is_op(p, '-')) {
        tok *t = next(p);
        n = bin(p, t->op, n, p_concat(p), t->line);
    }
    return n;
}
static node *p_compare(P *p) {
    node *n = p_math1(p);
    for (;;) {
        tok *t = peek(p);
        int op = 0;
        if (t->type == TK_OP && (t->op == OP_EQ || t->op == OP_NE || t->op == OP_LE || t->op == OP_GE ||
                                 t->op == '<' || t->op == '>')) {
            op = t->op;
            next(p);
        } else if (is_name(p, "in")) {
            op = OP_IN;
            next(p);
        } else if (is_name(p, "not") && p->t[p->pos + 1].type == TK_NAME && p->t[p->pos + 1].n == 2 &&
                   !memcmp(p->t[p->pos + 1].s, "in", 2)) {
            op = OP_NOTIN;
            next(p);
            next(p);
        } else {
            return n;
        }
        n = bin(p, op, n, p_math1(p), t->line);
    }
}
static node *p_not(P *p) {
    tok *t = peek(p);
    if (accept_name(p, "not")) {
        enter(p);
        node *n = mk(p, E_NOT, t->line);
        n->a = p_not(p);
        p->depth--;
        return n;
    }
    return p_compare(p);
}
static node *p_and(P *p) {
    node *n = p_not(p);
    while (is_name(p, "and")) {
        node *a = mk(p, E_AND, next(p)->line);
        a->a = n;
        a->b = p_not(p);
        n = a;
    }
    return n;
}
static node *p_or(P *p) {
    node *n = p_and(p);
    while (is_name(p, "or")) {
        node *a = mk(p, E_OR, next(p)->line);
        a->a = n;
        a->b = p_and(p);
        n = a;
    }
    return n;
}
static node *p_expr(P *p) {
    enter(p);
    node *n = p_or(p);
    while (is_name(p, "if")) {
        node *c = mk(p, E_COND, next(p)->line);
        c->a = n;
        c->b = p_or(p);
        if (accept_name(p, "else")) c->c = p_expr(p);
        n = c;
    }
    p->depth--;
    return n;
}

/* ---- statements ---------------------------------------------------------- */

static void expect_be(P *p) {
    tok *t = next(p);
    if (t->type != TK_BE) perr(p, t->line, "expected end of tag '%%}'");
}

/* Parse statements until {% <one of ends> %}; leaves pos at that name. */
static node *p_body(P *p, const char *const *ends, const char **which);

static node *p_stmt_tag(P *p, int line) {
    tok *kw = next(p);
    if (kw->type != TK_NAME) perr(p, kw->line, "expected a tag name");
    const char *k = tok_name(p, kw);
    if (!strcmp(k, "if")) {
        node *n = mk(p, S_IF, line);
        n->a = p_expr(p);
        expect_be(p);
        static const char *const ends[] = {"elif", "else", "endif", NULL};
        const char *w;
        n->b = p_body(p, ends, &w);
        node *cur = n;
        while (!strcmp(w, "elif")) {
            node *e = mk(p, S_IF, peek(p)->line);
            e->a = p_expr(p);
            expect_be(p);
            e->b = p_body(p, ends, &w);
            cur->c = e;
            cur = e;
        }
        if (!strcmp(w, "else")) {
            expect_be(p);
            static const char *const ends2[] = {"endif", NULL};
            cur->c = p_body(p, ends2, &w);
        }
        expect_be(p);
        return n;
    }
    if (!strcmp(k, "for")) {
        node *n = mk(p, S_FOR, line);
        nvec tv = {0};
        do {
            nv_push(p, &tv, NULL, expect_ident(p));
        } while (accept_op(p, ','));
        n->names = tv.names;
        n->n_names = tv.n;
        if (!accept_name(p, "in")) perr(p, peek(p)->line, "expected 'in' in for");
        n->a = p_or(p); /* not p_expr: `if` here is the loop filter */
        if (accept_name(p, "if")) n->d = p_expr(p);
        if (accept_name(p, "recursive")) perr(p, line, "recursive loops are not supported");
        expect_be(p);
        static const char *const ends[] = {"else", "endfor", NULL};
        const char *w;
        n->b = p_body(p, ends, &w);
        if (!strcmp(w, "else")) {
            expect_be(p);
            static const char *const ends2[] = {"endfor", NULL};
            n->c = p_body(p, ends2, &w);
        }
        expect_be(p);
        return n;
    }
    if (!strcmp(k, "set")) {
        node *n = mk(p, S_SET, line);
        n->s = expect_ident(p);
        if (accept_op(p, '.')) n->s2 = expect_ident(p);
        if (is_op(p, ',')) perr(p, line, "tuple assignment in set is not supported");
        if (accept_op(p, '=')) {
            n->a = p_expr(p);
            expect_be(p);
        } else {
            /* block set, possibly with a filter: {% set x | trim %} */
            node *f = NULL;
            while (accept_op(p, '|')) f = p_filter(p, f);
            expect_be(p);
            static const char *const ends[] = {"endset", NULL};
            const char *w;
            n->b = p_body(p, ends, &w);
            n->c = f; /* filter chain applied to the rendered block (innermost operand NULL) */
            expect_be(p);
        }
        return n;
    }
    if (!strcmp(k, "macro")) {
        node *n = mk(p, S_MACRO, line);
        n->s = expect_ident(p);
        expect_op(p, '(');
        nvec v = {0};
        while (!is_op(p, ')')) {
            const char *pn = expect_ident(p);
            node *def = NULL;
            if (accept_op(p, '=')) def = p_expr(p);
            nv_push(p, &v, def, pn);
            if (!accept_op(p, ',')) break;
        }
        expect_op(p, ')');
        expect_be(p);
        n->items = v.v;
        n->names = v.names;
        n->n = v.n;
        static const char *const ends[] = {"endmacro", NULL};
        const char *w;
        p->depth++;
        n->b = p_body(p, ends, &w);
        p->depth--;
        expect_be(p);
        return n;
    }
    if (!strcmp(k, "break") || !strcmp(k, "continue")) {
        node *n = mk(p, k[0] == 'b' ? S_BREAK : S_CONTINUE, line);
        expect_be(p);
        return n;
    }
    perr(p, kw->line, "unsupported tag '%s'", k);
}

static node *p_body(P *p, const char *const *ends, const char **which) {
    enter(p);
    node *body = mk(p, S_BODY, peek(p)->line);
    nvec v = {0};
    for (;;) {
        tok *t = next(p);
        if (t->type == TK_EOF) {
            if (ends) perr(p, t->line, "unexpected end of template (expected {%% %s %%})", ends[0]);
            break;
        }
        if (t->type == TK_TEXT) {
            node *n = mk(p, S_TEXT, t->line);
            n->s = t->s;
            n->sn = t->n;
            nv_push(p, &v, n, NULL);
        } else if (t->type == TK_VB) {
            node *n = mk(p, S_OUT, t->line);
            n->a = p_expr(p);
            tok *e = next(p);
            if (e->type != TK_VE) perr(p, e->line, "expected '}}'");
            nv_push(p, &v, n, NULL);
        } else if (t->type == TK_BB) {
            tok *kw = peek(p);
            if (kw->type == TK_NAME) {
                for (int i = 0; ends && ends[i]; i++)
                    if (is_name(p, ends[i])) {
                        next(p);
                        *which = ends[i];
                        body->items = v.v;
                        body->n = v.n;
                        p->depth--;
                        return body;
                    }
                static const char *const stray[] = {"endif", "endfor", "elif", "else", "endset", "endmacro", NULL};
                for (int i = 0; stray[i]; i++)
                    if (is_name(p, stray[i])) perr(p, kw->line, "unexpected '%s'", stray[i]);
            }
            nv_push(p, &v, p_stmt_tag(p, t->line), NULL);
        } else {
            perr(p, t->line, "unexpected token");
        }
    }
    body->items = v.v;
    body->n = v.n;
    p->depth--;
    return body;
}

/* lex + parse; NULL after an error (longjmp lands here, nothing else). */
static node *parse_protected(P *p) {
    if (setjmp(p->jb)) return NULL;
    lex(p, p->src);
    return p_body(p, NULL, NULL);
}

slm_tmpl *slm_tmpl_parse(const char *src, char *err, size_t errcap) {
    if (err && errcap) err[0] = 0;
    if (!src) src = "";
    slm_tmpl *t = slm_calloc(1, sizeof *t);
    if (!t) {
        if (err && errcap) snprintf(err, errcap, "out of memory");
        return NULL;
    }
    P *p = slm_calloc(1, sizeof *p);
    if (!p) {
        slm_xfree(t);
        if (err && errcap) snprintf(err, errcap, "out of memory");
        return NULL;
    }
    p->ar = &t->ar;
    p->err = err;
    p->errcap = errcap;
    p->src = src;
    t->body = parse_protected(p);
    slm_xfree(p->t);
    slm_xfree(p);
    if (!t->body) {
        ar_free(&t->ar);
        slm_xfree(t);
        return NULL;
    }
    return t;
}

void slm_tmpl_free(slm_tmpl *t) {
    if (!t) return;
    ar_free(&t->ar);
    slm_xfree(t);
}

/* ---- rendering ------------------------------------------------------------ */

typedef struct frame {
    struct frame *up;
    int n, cap;
    sstr *k;
    val *v;
} frame;

typedef struct R {
    arena ar;
    jmp_buf jb;
    char *err;
    size_t errcap;
    char *out;
    size_t on, ocap;
    frame *top, *root;
    long steps;
    int depth;
    int ctl; /* 1 break, 2 continue */
    const slm_tmpl_vars *vars;
    struct { char *p; size_t n, cap; } saved[MAX_DEPTH + 1]; /* outputs of enclosing macros / set blocks */
    int nsaved;
    const slm_chat_msg *msgs;
    int n_msgs;
    const slm_tmpl *tm;
} R;

static void rerr(R *r, const node *n, const char *fmt, ...) __attribute__((format(printf, 3, 4), noreturn));
static void rerr(R *r, const node *n, const char *fmt, ...) {
    if (r->err && r->errcap) {
        int k = n ? snprintf(r->err, r->errcap, "line %d: ", n->line) : 0;
        if (k < 0) k = 0;
        if ((size_t)k < r->errcap) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(r->err + k, r->errcap - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    longjmp(r->jb, 1);
}

static void *ralloc(R *r, size_t n) {
    void *m = ar_try(&r->ar, n);
    if (!m) rerr(r, NULL, "template rendering needs too much memory");
    return m;
}

static void step(R *r, const node *n) {
    if (++r->steps > MAX_STEPS) rerr(r, n, "template runs too long");
}

static val mkstr(R *r, const char *s, size_t n) {
    char *c = ralloc(r, n + 1);
    if (n) memcpy(c, s, n);
    c[n] = 0;
    return (val){.t = V_STR, .u.s = {c, n}};
}
static val vstr_lit(const char *s) { return (val){.t = V_STR, .u.s = {s, strlen(s)}}; }
static val vbool(int b) { return (val){.t = V_BOOL, .u.i = b != 0}; }
static val vint(long long i) { return (val){.t = V_INT, .u.i = i}; }
static val vnone(void) { return (val){.t = V_NONE}; }
static val vundef(void) { return (val){.t = V_UNDEF}; }

static vlist *newlist(R *r, int cap) {
    vlist *l = ralloc(r, sizeof *l);
    l->n = 0;
    l->cap = cap > 0 ? cap : 4;
    l->v = ralloc(r, (size_t)l->cap * sizeof(val));
    return l;
}
static void lpush(R *r, vlist *l, val x) {
    if (l->n == l->cap) {
        if (l->cap > (1 << 24)) rerr(r, NULL, "list too long");
        val *nv = ralloc(r, (size_t)l->cap * 2 * sizeof(val));
        memcpy(nv, l->v, (size_t)l->n * sizeof(val));
        l->v = nv;
        l->cap *= 2;
    }
    l->v[l->n++] = x;
}
static vdict *newdict(R *r, int cap) {
    vdict *d = ralloc(r, sizeof *d);
    d->n = 0;
    d->ns = 0;
    d->cap = cap > 0 ? cap : 4;
    d->k = ralloc(r, (size_t)d->cap * sizeof(sstr));
    d->v = ralloc(r, (size_t)d->cap * sizeof(val));
    return d;
}
static int sseq(sstr a, const char *b, size_t bn) { return a.n == bn && !memcmp(a.p, b, bn); }
static val *dget(vdict *d, const char *k, size_t kn) {
    for (int i = 0; i < d->n; i++)
        if (sseq(d->k[i], k, kn)) return &d->v[i];
    return NULL;
}
static void dset(R *r, vdict *d, sstr k, val x) {
    val *e = dget(d, k.p, k.n);
    if (e) { *e = x; return; }
    if (d->n == d->cap) {
        if (d->cap > (1 << 20)) rerr(r, NULL, "mapping too large");
        sstr *nk = ralloc(r, (size_t)d->cap * 2 * sizeof(sstr));
        val *nv = ralloc(r, (size_t)d->cap * 2 * sizeof(val));
        memcpy(nk, d->k, (size_t)d->n * sizeof(sstr));
        memcpy(nv, d->v, (size_t)d->n * sizeof(val));
        d->k = nk;
        d->v = nv;
        d->cap *= 2;
    }
    d->k[d->n] = k;
    d->v[d->n++] = x;
}
static void dset_c(R *r, vdict *d, const char *k, val x) { dset(r, d, (sstr){k, strlen(k)}, x); }

/* variables */
static frame *push_frame(R *r, frame *up) {
    frame *f = ralloc(r, sizeof *f);
    memset(f, 0, sizeof *f);
    f->up = up;
    return f;
}
static val *fget(frame *f, const char *k, size_t kn) {
    for (int i = 0; i < f->n; i++)
        if (sseq(f->k[i], k, kn)) return &f->v[i];
    return NULL;
}
static void fset(R *r, frame *f, const char *k, val x) {
    size_t kn = strlen(k);
    val *e = fget(f, k, kn);
    if (e) { *e = x; return; }
    if (f->n == f->cap) {
        int nc = f->cap ? f->cap * 2 : 8;
        sstr *nk = ralloc(r, (size_t)nc * sizeof(sstr));
        val *nv = ralloc(r, (size_t)nc * sizeof(val));
        if (f->n) {
            memcpy(nk, f->k, (size_t)f->n * sizeof(sstr));
            memcpy(nv, f->v, (size_t)f->n * sizeof(val));
        }
        f->k = nk;
        f->v = nv;
        f->cap = nc;
    }
    f->k[f->n] = (sstr){k, kn};
    f->v[f->n++] = x;
}

enum { F_RAISE = 1, F_NAMESPACE, F_RANGE, F_STRFTIME, F_DICT };
static val lookup(R *r, const char *name) {
    for (frame *f = r->top; f; f = f->up) {
        val *v = fget(f, name, strlen(name));
        if (v) return *v;
    }
    static const struct { const char *n; int id; } g[] = {
        {"raise_exception", F_RAISE}, {"namespace", F_NAMESPACE}, {"range", F_RANGE},
        {"strftime_now", F_STRFTIME}, {"dict", F_DICT}};
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++)
        if (!strcmp(g[i].n, name)) return (val){.t = V_FUNC, .u.i = g[i].id};
    return vundef();
}

/* output */
static void emit(R *r, const char *s, size_t n) {
    if (!n) return;
    if (r->on + n + 1 > OUT_LIMIT) rerr(r, NULL, "rendered text exceeds %u bytes", OUT_LIMIT);
    if (r->on + n + 1 > r->ocap) {
        size_t nc = r->ocap ? r->ocap : 1024;
        while (nc < r->on + n + 1) nc *= 2;
        char *o = slm_realloc(r->out, nc);
        if (!o) rerr(r, NULL, "out of memory");
        r->out = o;
        r->ocap = nc;
    }
    memcpy(r->out + r->on, s, n);
    r->on += n;
    r->out[r->on] = 0;
}

/* macros and set blocks render into a fresh buffer */
static void out_push(R *r) {
    if (r->nsaved >= MAX_DEPTH) rerr(r, NULL, "template nested too deeply");
    r->saved[r->nsaved].p = r->out;
    r->saved[r->nsaved].n = r->on;
    r->saved[r->nsaved].cap = r->ocap;
    r->nsaved++;
    r->out = NULL;
    r->on = r->ocap = 0;
}
static val mkstr(R *r, const char *s, size_t n);
static val out_pop(R *r) {
    val v = mkstr(r, r->out ? r->out : "", r->on);
    slm_xfree(r->out);
    r->nsaved--;
    r->out = r->saved[r->nsaved].p;
    r->on = r->saved[r->nsaved].n;
    r->ocap = r->saved[r->nsaved].cap;
    return v;
}

/* a growable string in the arena */
typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;
static void sb_put(R *r, sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 64;
        while (nc < b->n + n + 1) nc *= 2;
        if (nc > ARENA_LIMIT) rerr(r, NULL, "string too long");
        char *q = ralloc(r, nc);
        if (b->n) memcpy(q, b->p, b->n);
        b->p = q;
        b->cap = nc;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void sb_puts(R *r, sbuf *b, const char *s) { sb_put(r, b, s, strlen(s)); }
static val sb_val(R *r, sbuf *b) {
    if (!b->p) return mkstr(r, "", 0);
    return (val){.t = V_STR, .u.s = {b->p, b->n}};
}

static void fmt_float(char *buf, size_t cap, double f) {
    if (f != f) { snprintf(buf, cap, "nan"); return; }
    if (f > 1e308 || f < -1e308) { snprintf(buf, cap, f > 0 ? "inf" : "-inf"); return; }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, f);
        if (strtod(buf, NULL) == f) break;
    }
    if (!strpbrk(buf, ".e")) {
        size_t n = strlen(buf);
        if (n + 3 <= cap) memcpy(buf + n, ".0", 3);
    }
}

static void repr(R *r, sbuf *b, val v, int depth);
static void str_of(R *r, sbuf *b, val v, int depth) {
    char buf[64];
    switch (v.t) {
    case V_UNDEF: break;
    case V_NONE: sb_puts(r, b, "None"); break;
    case V_BOOL: sb_puts(r, b, v.u.i ? "True" : "False"); break;
    case V_INT: snprintf(buf, sizeof buf, "%lld", v.u.i); sb_puts(r, b, buf); break;
    case V_FLOAT: fmt_float(buf, sizeof buf, v.u.f); sb_puts(r, b, buf); break;
    case V_STR: sb_put(r, b, v.u.s.p, v.u.s.n); break;
    default: repr(r, b, v, depth); break;
    }
}
static void repr(R *r, sbuf *b, val v, int depth) {
    if (depth > MAX_DEPTH) rerr(r, NULL, "value nested too deeply");
    if (v.t == V_STR) {
        sb_put(r, b, "'", 1);
        for (size_t i = 0; i < v.u.s.n; i++) {
            char c = v.u.s.p[i];
            if (c == '\'' || c == '\\') { sb_put(r, b, "\\", 1); sb_put(r, b, &c, 1); }
            else if (c == '\n') sb_puts(r, b, "\\n");
            else sb_put(r, b, &c, 1);
        }
        sb_put(r, b, "'", 1);
    } else if (v.t == V_LIST) {
        sb_put(r, b, "[", 1);
        for (int i = 0; i < v.u.l->n; i++) {
            if (i) sb_puts(r, b, ", ");
            repr(r, b, v.u.l->v[i], depth + 1);
        }
        sb_put(r, b, "]", 1);
    } else if (v.t == V_DICT) {
        sb_put(r, b, "{", 1);
        for (int i = 0; i < v.u.d->n; i++) {
            if (i) sb_puts(r, b, ", ");
            repr(r, b, (val){.t = V_STR, .u.s = v.u.d->k[i]}, depth + 1);
            sb_puts(r, b, ": ");
            repr(r, b, v.u.d->v[i], depth + 1);
        }
        sb_put(r, b, "}", 1);
    } else if (v.t == V_FUNC || v.t == V_MACRO) {
        sb_puts(r, b, "<function>");
    } else {
        str_of(r, b, v, depth);
    }
}
static val to_str(R *r, val v) {
    if (v.t == V_STR) return v;
    sbuf b = {0};
    str_of(r, &b, v, 0);
    return sb_val(r, &b);
}

/* JSON as Python's json.dumps(ensure_ascii=False) */
static void json_of(R *r, sbuf *b, val v, int indent, int level) {
    char buf[64];
    if (level > MAX_DEPTH) rerr(r, NULL, "value nested too deeply");
    switch (v.t) {
    case V_UNDEF: case V_NONE: sb_puts(r, b, "null"); return;
    case V_BOOL: sb_puts(r, b, v.u.i ? "true" : "false"); return;
    case V_INT: snprintf(buf, sizeof buf, "%lld", v.u.i); sb_puts(r, b, buf); return;
    case V_FLOAT:
        if (v.u.f != v.u.f) sb_puts(r, b, "NaN");
        else if (v.u.f > 1e308 || v.u.f < -1e308) sb_puts(r, b, v.u.f > 0 ? "Infinity" : "-Infinity");
        else { fmt_float(buf, sizeof buf, v.u.f); sb_puts(r, b, buf); }
        return;
    case V_STR:
        sb_put(r, b, "\"", 1);
        for (size_t i = 0; i < v.u.s.n; i++) {
            unsigned char c = (unsigned char)v.u.s.p[i];
            if (c == '"') sb_puts(r, b, "\\\"");
            else if (c == '\\') sb_puts(r, b, "\\\\");
            else if (c == '\n') sb_puts(r, b, "\\n");
            else if (c == '\r') sb_puts(r, b, "\\r");
            else if (c == '\t') sb_puts(r, b, "\\t");
            else if (c == '\b') sb_puts(r, b, "\\b");
            else if (c == '\f') sb_puts(r, b, "\\f");
            else if (c < 0x20) { snprintf(buf, sizeof buf, "\\u%04x", c); sb_puts(r, b, buf); }
            else sb_put(r, b, (const char *)&c, 1);
        }
        sb_put(r, b, "\"", 1);
        return;
    case V_LIST: case V_DICT: {
        int isl = v.t == V_LIST, n = isl ? v.u.l->n : v.u.d->n;
        sb_put(r, b, isl ? "[" : "{", 1);
        if (!n) { sb_put(r, b, isl ? "]" : "}", 1); return; }
        for (int i = 0; i < n; i++) {
            if (i) sb_puts(r, b, indent >= 0 ? "," : ", ");
            if (indent >= 0) {
                sb_put(r, b, "\n", 1);
                for (int s = 0; s < indent * (level + 1); s++) sb_put(r, b, " ", 1);
            }
            if (isl) {
                json_of(r, b, v.u.l->v[i], indent, level + 1);
            } else {
                json_of(r, b, (val){.t = V_STR, .u.s = v.u.d->k[i]}, indent, level + 1);
                sb_puts(r, b, ": ");
                json_of(r, b, v.u.d->v[i], indent, level + 1);
            }
        }
        if (indent >= 0) {
            sb_put(r, b, "\n", 1);
            for (int s = 0; s < indent * level; s++) sb_put(r, b, " ", 1);
        }
        sb_put(r, b, isl ? "]" : "}", 1);
        return;
    }
    default: sb_puts(r, b, "null"); return;
    }
}

static int truthy(val v) {
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

static int is_num(val v) { return v.t == V_INT || v.t == V_BOOL || v.t == V_FLOAT; }
static double num(val v) { return v.t == V_FLOAT ? v.u.f : (double)v.u.i; }

static int equal(val a, val b, int depth) {
    if (depth > MAX_DEPTH) return 0;
    if (is_num(a) && is_num(b)) {
        if (a.t != V_FLOAT && b.t != V_FLOAT) return a.u.i == b.u.i;
        return num(a) == num(b);
    }
    if (a.t != b.t) return 0;
    switch (a.t) {
    case V_UNDEF: case V_NONE: return 1;
    case V_STR: return a.u.s.n == b.u.s.n && !memcmp(a.u.s.p, b.u.s.p, a.u.s.n);
    case V_LIST:
        if (a.u.l->n != b.u.l->n) return 0;
        for (int i = 0; i < a.u.l->n; i++)
            if (!equal(a.u.l->v[i], b.u.l->v[i], depth + 1)) return 0;
        return 1;
    case V_DICT:
        if (a.u.d->n != b.u.d->n) return 0;
        for (int i = 0; i < a.u.d->n; i++) {
            val *o = dget(b.u.d, a.u.d->k[i].p, a.u.d->k[i].n);
            if (!o || !equal(a.u.d->v[i], *o, depth + 1)) return 0;
        }
        return 1;
    case V_FUNC: return a.u.i == b.u.i;
    case V_MACRO: return a.u.m == b.u.m;
    default: return 0;
    }
}

static int compare(R *r, const node *n, val a, val b) {
    if (is_num(a) && is_num(b)) {
        if (a.t != V_FLOAT && b.t != V_FLOAT) return (a.u.i > b.u.i) - (a.u.i < b.u.i);
        double x = num(a), y = num(b);
        return (x > y) - (x < y);
    }
    if (a.t == V_STR && b.t == V_STR) {
        size_t m = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        int c = memcmp(a.u.s.p, b.u.s.p, m);
        if (c) return c < 0 ? -1 : 1;
        return (a.u.s.n > b.u.s.n) - (a.u.s.n < b.u.s.n);
    }
    rerr(r, n, "cannot compare these values");
}

static int contains(R *r, const node *n, val hay, val x) {
    if (hay.t == V_STR) {
        if (x.t != V_STR) rerr(r, n, "'in <string>' needs a string on the left");
        if (!x.u.s.n) return 1;
        for (size_t i = 0; i + x.u.s.n <= hay.u.s.n; i++)
            if (!memcmp(hay.u.s.p + i, x.u.s.p, x.u.s.n)) return 1;
        return 0;
    }
    if (hay.t == V_LIST) {
        for (int i = 0; i < hay.u.l->n; i++)
            if (equal(hay.u.l->v[i], x, 0)) return 1;
        return 0;
    }
    if (hay.t == V_DICT) return x.t == V_STR && dget(hay.u.d, x.u.s.p, x.u.s.n) != NULL;
    if (hay.t == V_UNDEF) rerr(r, n, "'in' on an undefined value");
    rerr(r, n, "'in' needs a string, list or mapping on the right");
}

static long long to_index(R *r, const node *n, val v) {
    if (v.t == V_INT || v.t == V_BOOL) return v.u.i;
    rerr(r, n, "index must be an integer");
}

static val eval(R *r, const node *n);

static val getattr_v(val o, const char *name) {
    if (o.t == V_DICT) {
        val *v = dget(o.u.d, name, strlen(name));
        return v ? *v : vundef();
    }
    return vundef();
}

static val getitem(R *r, const node *n, val o, val k) {
    if (o.t == V_DICT) {
        if (k.t != V_STR) return vundef();
        val *v = dget(o.u.d, k.u.s.p, k.u.s.n);
        return v ? *v : vundef();
    }
    if (o.t == V_LIST || o.t == V_STR) {
        if (k.t == V_STR) return vundef();
        long long i = to_index(r, n, k), len = o.t == V_LIST ? o.u.l->n : (long long)o.u.s.n;
        if (i < 0) i += len;
        if (i < 0 || i >= len) return vundef();
        return o.t == V_LIST ? o.u.l->v[i] : mkstr(r, o.u.s.p + i, 1);
    }
    if (o.t == V_UNDEF) rerr(r, n, "subscript of an undefined value");
    return vundef();
}

static val do_slice(R *r, const node *n, val o, val a, val b, val c) {
    long long len;
    if (o.t == V_LIST) len = o.u.l->n;
    else if (o.t == V_STR) len = (long long)o.u.s.n;
    else rerr(r, n, "slice of a value that is not a list or string");
    long long stp = c.t == V_UNDEF || c.t == V_NONE ? 1 : to_index(r, n, c);
    if (stp == 0) rerr(r, n, "slice step cannot be zero");
    long long lo, hi;
    if (stp > 0) {
        lo = a.t == V_UNDEF || a.t == V_NONE ? 0 : to_index(r, n, a);
        hi = b.t == V_UNDEF || b.t == V_NONE ? len : to_index(r, n, b);
        if (lo < 0) lo += len;
        if (hi < 0) hi += len;
        if (lo < 0) lo = 0;
        if (hi > len) hi = len;
    } else {
        lo = a.t == V_UNDEF || a.t == V_NONE ? len - 1 : to_index(r, n, a);
        hi = b.t == V_UNDEF || b.t == V_NONE ? -1 - len : to_index(r, n, b);
        if (lo < 0) lo += len;
        if (hi < 0) hi += len;
        if (lo >= len) lo = len - 1;
        if (hi < -1) hi = -1;
    }
    sbuf sb = {0};
    vlist *l = o.t == V_LIST ? newlist(r, 4) : NULL;
    for (long long i = lo; stp > 0 ? i < hi : i > hi; i += stp) {
        step(r, n);
        if (l) lpush(r, l, o.u.l->v[i]);
        else sb_put(r, &sb, o.u.s.p + i, 1);
    }
    if (l) return (val){.t = V_LIST, .u.l = l};
    return sb_val(r, &sb);
}

/* iterate: a list, a dict's keys, or a string's characters */
static vlist *as_list(R *r, const node *n, val v) {
    if (v.t == V_LIST) return v.u.l;
    if (v.t == V_DICT) {
        vlist *l = newlist(r, v.u.d->n);
        for (int i = 0; i < v.u.d->n; i++) lpush(r, l, (val){.t = V_STR, .u.s = v.u.d->k[i]});
        return l;
    }
    if (v.t == V_STR) {
        vlist *l = newlist(r, (int)(v.u.s.n < 4 ? 4 : v.u.s.n > (1u << 24) ? (1u << 24) : v.u.s.n));
        for (size_t i = 0; i < v.u.s.n;) {
            size_t k = 1;
            while (i + k < v.u.s.n && ((unsigned char)v.u.s.p[i + k] & 0xC0) == 0x80) k++;
            lpush(r, l, mkstr(r, v.u.s.p + i, k));
            i += k;
        }
        return l;
    }
    if (v.t == V_UNDEF || v.t == V_NONE) rerr(r, n, "cannot iterate over %s", v.t == V_NONE ? "none" : "an undefined value");
    rerr(r, n, "value is not iterable");
}

static int run_test(R *r, const node *n, const char *t, val v, val *args, int na) {
    val a0 = na > 0 ? args[0] : vundef();
    if (!strcmp(t, "defined")) return v.t != V_UNDEF;
    if (!strcmp(t, "undefined")) return v.t == V_UNDEF;
    if (!strcmp(t, "none")) return v.t == V_NONE;
    if (!strcmp(t, "string")) return v.t == V_STR;
    if (!strcmp(t, "number")) return v.t == V_INT || v.t == V_FLOAT;
    if (!strcmp(t, "integer")) return v.t == V_INT;
    if (!strcmp(t, "float")) return v.t == V_FLOAT;
    if (!strcmp(t, "mapping")) return v.t == V_DICT;
    if (!strcmp(t, "iterable") || !strcmp(t, "sequence")) return v.t == V_LIST || v.t == V_DICT || v.t == V_STR;
    if (!strcmp(t, "boolean")) return v.t == V_BOOL;
    if (!strcmp(t, "true")) return v.t == V_BOOL && v.u.i;
    if (!strcmp(t, "false")) return v.t == V_BOOL && !v.u.i;
    if (!strcmp(t, "callable")) return v.t == V_FUNC || v.t == V_MACRO;
    if (!strcmp(t, "odd") || !strcmp(t, "even")) {
        if (v.t != V_INT) rerr(r, n, "test '%s' needs an integer", t);
        return (int)(((v.u.i % 2) + 2) % 2) == (t[0] == 'o');
    }
    if (!strcmp(t, "divisibleby")) {
        if (v.t != V_INT || a0.t != V_INT || a0.u.i == 0) rerr(r, n, "test 'divisibleby' needs non-zero integers");
        return a0.u.i == -1 ? 1 : v.u.i % a0.u.i == 0;
    }
    if (!strcmp(t, "equalto") || !strcmp(t, "eq") || !strcmp(t, "sameas")) return equal(v, a0, 0);
    if (!strcmp(t, "ne")) return !equal(v, a0, 0);
    if (!strcmp(t, "lt")) return compare(r, n, v, a0) < 0;
    if (!strcmp(t, "gt")) return compare(r, n, v, a0) > 0;
    if (!strcmp(t, "le")) return compare(r, n, v, a0) <= 0;
    if (!strcmp(t, "ge")) return compare(r, n, v, a0) >= 0;
    if (!strcmp(t, "in")) return contains(r, n, a0, v);
    if (!strcmp(t, "lower") || !strcmp(t, "upper")) {
        if (v.t != V_STR) return 0;
        for (size_t i = 0; i < v.u.s.n; i++) {
            char c = v.u.s.p[i];
            if (t[0] == 'l' ? (c >= 'A' && c <= 'Z') : (c >= 'a' && c <= 'z')) return 0;
        }
        return 1;
    }
    rerr(r, n, "unsupported test '%s'", t);
}

/* arguments evaluated: positional then keyword */
typedef struct args {
    val pos[8];
    int np;
    const char *kn[8];
    val kv[8];
    int nk;
} args;
static void eval_args(R *r, const node *n, args *a) {
    a->np = a->nk = 0;
    for (int i = 0; i < n->n; i++) {
        val v = eval(r, n->items[i]);
        if (n->names[i]) {
            if (a->nk == 8) rerr(r, n, "too many keyword arguments");
            a->kn[a->nk] = n->names[i];
            a->kv[a->nk++] = v;
        } else {
            if (a->np == 8) rerr(r, n, "too many arguments");
            a->pos[a->np++] = v;
        }
    }
}
static val karg(const args *a, const char *name, int pos_index) {
    for (int i = 0; i < a->nk; i++)
        if (!strcmp(a->kn[i], name)) return a->kv[i];
    if (pos_index >= 0 && pos_index < a->np) return a->pos[pos_index];
    return vundef();
}

static int is_ws(char c) { return is_space((unsigned char)c); }
static val strip_str(R *r, val s, val chars, int left, int right) {
    size_t b = 0, e = s.u.s.n;
    const char *p = s.u.s.p;
#define IN_SET(c) (chars.t == V_STR ? memchr(chars.u.s.p, (c), chars.u.s.n) != NULL : is_ws(c))
    if (left) while (b < e && IN_SET(p[b])) b++;
    if (right) while (e > b && IN_SET(p[e - 1])) e--;
#undef IN_SET
    return mkstr(r, p + b, e - b); /* a copy: strings stay NUL-terminated */
}

static val replace_str(R *r, val s, val a, val b, long long count) {
    if (a.t != V_STR || b.t != V_STR) rerr(r, NULL, "replace() needs strings");
    sbuf sb = {0};
    size_t i = 0;
    long long done = 0;
    if (a.u.s.n == 0) {
        /* Python inserts b between characters */
        for (; i <= s.u.s.n; i++) {
            if (count < 0 || done < count) { sb_put(r, &sb, b.u.s.p, b.u.s.n); done++; }
            if (i < s.u.s.n) sb_put(r, &sb, s.u.s.p + i, 1);
        }
        return sb_val(r, &sb);
    }
    while (i < s.u.s.n) {
        if ((count < 0 || done < count) && i + a.u.s.n <= s.u.s.n && !memcmp(s.u.s.p + i, a.u.s.p, a.u.s.n)) {
            sb_put(r, &sb, b.u.s.p, b.u.s.n);
            i += a.u.s.n;
            done++;
        } else {
            sb_put(r, &sb, s.u.s.p + i, 1);
            i++;
        }
    }
    return sb_val(r, &sb);
}

static val case_str(R *r, val s, int mode) { /* 0 lower 1 upper 2 capitalize 3 title */
    val o = mkstr(r, s.u.s.p, s.u.s.n);
    char *p = (char *)o.u.s.p;
    int start = 1;
    for (size_t i = 0; i < o.u.s.n; i++) {
        char c = p[i];
        int up = mode == 1 || ((mode == 2 && i == 0) || (mode == 3 && start));
        if (up && c >= 'a' && c <= 'z') p[i] = (char)(c - 32);
        if (!up && c >= 'A' && c <= 'Z') p[i] = (char)(c + 32);
        start = !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'));
    }
    return o;
}

static val call_macro(R *r, const node *n, const node *m, args *a);
static void exec_body(R *r, const node *b);

static val call_method(R *r, const node *n, val o, const char *name, args *a) {
    val a0 = a->np > 0 ? a->pos[0] : vundef(), a1 = a->np > 1 ? a->pos[1] : vundef();
    if (o.t == V_STR) {
        if (!strcmp(name, "strip")) return strip_str(r, o, a0, 1, 1);
        if (!strcmp(name, "lstrip")) return strip_str(r, o, a0, 1, 0);
        if (!strcmp(name, "rstrip")) return strip_str(r, o, a0, 0, 1);
        if (!strcmp(name, "replace"))
            return replace_str(r, o, a0, a1, a->np > 2 && a->pos[2].t == V_INT ? a->pos[2].u.i : -1);
        if (!strcmp(name, "lower")) return case_str(r, o, 0);
        if (!strcmp(name, "upper")) return case_str(r, o, 1);
        if (!strcmp(name, "capitalize")) return case_str(r, o, 2);
        if (!strcmp(name, "title")) return case_str(r, o, 3);
        if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
            if (a0.t != V_STR) rerr(r, n, "%s() needs a string", name);
            if (a0.u.s.n > o.u.s.n) return vbool(0);
            const char *at = name[0] == 's' ? o.u.s.p : o.u.s.p + o.u.s.n - a0.u.s.n;
            return vbool(!memcmp(at, a0.u.s.p, a0.u.s.n));
        }
        if (!strcmp(name, "split")) {
            vlist *l = newlist(r, 4);
            const char *p = o.u.s.p, *e = p + o.u.s.n;
            if (a0.t != V_STR) { /* whitespace split */
                while (p < e) {
                    while (p < e && is_ws(*p)) p++;
                    const char *q = p;
                    while (q < e && !is_ws(*q)) q++;
                    if (q > p) lpush(r, l, mkstr(r, p, (size_t)(q - p)));
                    p = q;
                }
            } else {
                if (!a0.u.s.n) rerr(r, n, "split(): empty separator");
                for (;;) {
                    const char *q = p;
                    while (q + a0.u.s.n <= e && memcmp(q, a0.u.s.p, a0.u.s.n)) q++;
                    if (q + a0.u.s.n > e) { lpush(r, l, mkstr(r, p, (size_t)(e - p))); break; }
                    lpush(r, l, mkstr(r, p, (size_t)(q - p)));
                    p = q + a0.u.s.n;
                }
            }
            return (val){.t = V_LIST, .u.l = l};
        }
    } else if (o.t == V_DICT) {
        if (!strcmp(name, "items") || !strcmp(name, "keys") || !strcmp(name, "values")) {
            vlist *l = newlist(r, o.u.d->n);
            for (int i = 0; i < o.u.d->n; i++) {
                val k = {.t = V_STR, .u.s = o.u.d->k[i]};
                if (name[0] == 'k') lpush(r, l, k);
                else if (name[0] == 'v') lpush(r, l, o.u.d->v[i]);
                else {
                    vlist *pr = newlist(r, 2);
                    lpush(r, pr, k);
                    lpush(r, pr, o.u.d->v[i]);
                    lpush(r, l, (val){.t = V_LIST, .u.l = pr});
                }
            }
            return (val){.t = V_LIST, .u.l = l};
        }
        if (!strcmp(name, "get")) {
            if (a0.t != V_STR) return a->np > 1 ? a1 : vnone();
            val *v = dget(o.u.d, a0.u.s.p, a0.u.s.n);
            return v ? *v : a->np > 1 ? a1 : vnone();
        }
        /* a macro or function stored in a mapping */
        val *v = dget(o.u.d, name, strlen(name));
        if (v && v->t == V_MACRO) return call_macro(r, n, v->u.m, a);
    }
    rerr(r, n, "unsupported method '%s'", name);
}

static val apply_filter(R *r, const node *n, const char *f, val v, args *a);

static void check_depth(R *r, const node *n) {
    if (r->depth > MAX_DEPTH) rerr(r, n, "template nested too deeply");
}

static val call_func(R *r, const node *n, val fn, args *a) {
    if (fn.t == V_MACRO) return call_macro(r, n, fn.u.m, a);
    if (fn.t != V_FUNC) rerr(r, n, "call of a value that is not a function");
    switch ((int)fn.u.i) {
    case F_RAISE: {
        val m = a->np ? to_str(r, a->pos[0]) : vstr_lit("");
        snprintf(r->err, r->errcap, "template raised: %.*s", (int)(m.u.s.n > 400 ? 400 : m.u.s.n), m.u.s.p);
        longjmp(r->jb, 2);
    }
    case F_NAMESPACE: case F_DICT: {
        vdict *d = newdict(r, 4);
        d->ns = fn.u.i == F_NAMESPACE;
        if (a->np && a->pos[0].t == V_DICT)
            for (int i = 0; i < a->pos[0].u.d->n; i++) dset(r, d, a->pos[0].u.d->k[i], a->pos[0].u.d->v[i]);
        for (int i = 0; i < a->nk; i++) dset_c(r, d, a->kn[i], a->kv[i]);
        return (val){.t = V_DICT, .u.d = d};
    }
    case F_RANGE: {
        long long lo = 0, hi, st = 1;
        for (int i = 0; i < a->np; i++)
            if (a->pos[i].t != V_INT) rerr(r, n, "range() needs integers");
        if (a->np == 1) hi = a->pos[0].u.i;
        else if (a->np >= 2) { lo = a->pos[0].u.i; hi = a->pos[1].u.i; if (a->np > 2) st = a->pos[2].u.i; }
        else rerr(r, n, "range() needs arguments");
        if (st == 0) rerr(r, n, "range() step cannot be zero");
        vlist *l = newlist(r, 8);
        for (long long i = lo; st > 0 ? i < hi : i > hi; i += st) {
            step(r, n);
            lpush(r, l, vint(i));
        }
        return (val){.t = V_LIST, .u.l = l};
    }
    case F_STRFTIME: {
        if (r->vars && r->vars->date_string) return vstr_lit(r->vars->date_string);
        val f = a->np ? a->pos[0] : vundef();
        if (f.t != V_STR) rerr(r, n, "strftime_now() needs a format string");
        time_t now = time(NULL);
        struct tm tmv;
        localtime_r(&now, &tmv);
        char buf[256];
        size_t k = strftime(buf, sizeof buf, f.u.s.p, &tmv);
        return mkstr(r, buf, k);
    }
    default: rerr(r, n, "unknown function");
    }
}

static val call_macro(R *r, const node *n, const node *m, args *a) {
    r->depth++;
    check_depth(r, n);
    frame *f = push_frame(r, r->root);
    for (int i = 0; i < m->n; i++) {
        val v = karg(a, m->names[i], i);
        if (v.t == V_UNDEF && m->items[i]) v = eval(r, m->items[i]);
        fset(r, f, m->names[i], v);
    }
    frame *saved = r->top;
    r->top = f;
    out_push(r);
    exec_body(r, m->b);
    r->ctl = 0;
    val res = out_pop(r);
    r->top = saved;
    r->depth--;
    return res;
}

static val eval(R *r, const node *n) {
    r->depth++;
    check_depth(r, n);
    val res = vundef();
    switch (n->kind) {
    case E_LIT: res = n->lit; break;
    case E_NAME: res = lookup(r, n->s); break;
    case E_ATTR: {
        val o = eval(r, n->a);
        if (o.t == V_UNDEF) rerr(r, n, "'%s' of an undefined value", n->s);
        res = getattr_v(o, n->s);
        break;
    }
    case E_ITEM: {
        val o = eval(r, n->a);
        res = getitem(r, n, o, eval(r, n->b));
        break;
    }
    case E_SLICE: {
        val o = eval(r, n->a);
        val a = n->b ? eval(r, n->b) : vundef(), b = n->c ? eval(r, n->c) : vundef(),
            c = n->d ? eval(r, n->d) : vundef();
        res = do_slice(r, n, o, a, b, c);
        break;
    }
    case E_CALL: {
        args a;
        if (n->a->kind == E_ATTR) {
            val o = eval(r, n->a->a);
            if (o.t == V_STR || (o.t == V_DICT && !o.u.d->ns)) {
                val *mm = o.t == V_DICT ? dget(o.u.d, n->a->s, strlen(n->a->s)) : NULL;
                eval_args(r, n, &a);
                if (mm && mm->t == V_MACRO) res = call_macro(r, n, mm->u.m, &a);
                else res = call_method(r, n, o, n->a->s, &a);
                break;
            }
            val fn = getattr_v(o, n->a->s);
            eval_args(r, n, &a);
            res = call_func(r, n, fn, &a);
            break;
        }
        val fn = eval(r, n->a);
        eval_args(r, n, &a);
        res = call_func(r, n, fn, &a);
        break;
    }
    case E_FILTER: {
        val v = eval(r, n->a);
        args a;
        eval_args(r, n, &a);
        res = apply_filter(r, n, n->s, v, &a);
        break;
    }
    case E_TEST: {
        val v;
        /* `x is defined` must not fail on x.y of undefined x */
        if (!strcmp(n->s, "defined") || !strcmp(n->s, "undefined")) {
            const node *q = n->a;
            int undef = 0;
            if (q->kind == E_ATTR) {
                val o = eval(r, q->a);
                v = o.t == V_UNDEF ? (undef = 1, vundef()) : getattr_v(o, q->s);
            } else {
                v = eval(r, q);
            }
            (void)undef;
        } else {
            v = eval(r, n->a);
        }
        args a;
        eval_args(r, n, &a);
        res = vbool(run_test(r, n, n->s, v, a.pos, a.np) != n->neg);
        break;
    }
    case E_NOT: res = vbool(!truthy(eval(r, n->a))); break;
    case E_AND: {
        val a = eval(r, n->a);
        res = truthy(a) ? eval(r, n->b) : a;
        break;
    }
    case E_OR: {
        val a = eval(r, n->a);
        res = truthy(a) ? a : eval(r, n->b);
        break;
    }
    case E_NEG: {
        val a = eval(r, n->a);
        if (a.t == V_INT || a.t == V_BOOL) {
            if (a.u.i == (-9223372036854775807LL - 1)) rerr(r, n, "integer overflow");
            res = vint(-a.u.i);
        } else if (a.t == V_FLOAT) {
            res = (val){.t = V_FLOAT, .u.f = -a.u.f};
        } else {
            rerr(r, n, "unary '-' needs a number");
        }
        break;
    }
    case E_COND: res = truthy(eval(r, n->b)) ? eval(r, n->a) : n->c ? eval(r, n->c) : vundef(); break;
    case E_LIST: {
        vlist *l = newlist(r, n->n);
        for (int i = 0; i < n->n; i++) lpush(r, l, eval(r, n->items[i]));
        res = (val){.t = V_LIST, .u.l = l};
        break;
    }
    case E_DICT: {
        vdict *d = newdict(r, n->n / 2);
        for (int i = 0; i + 1 < n->n; i += 2) {
            val k = eval(r, n->items[i]);
            if (k.t != V_STR) k = to_str(r, k);
            dset(r, d, k.u.s, eval(r, n->items[i + 1]));
        }
        res = (val){.t = V_DICT, .u.d = d};
        break;
    }
    case E_BIN: {
        val a = eval(r, n->a), b = eval(r, n->b);
        int op = n->op;
        if (op == OP_EQ) { res = vbool(equal(a, b, 0)); break; }
        if (op == OP_NE) { res = vbool(!equal(a, b, 0)); break; }
        if (op == '<') { res = vbool(compare(r, n, a, b) < 0); break; }
        if (op == '>') { res = vbool(compare(r, n, a, b) > 0); break; }
        if (op == OP_LE) { res = vbool(compare(r, n, a, b) <= 0); break; }
        if (op == OP_GE) { res = vbool(compare(r, n, a, b) >= 0); break; }
        if (op == OP_IN) { res = vbool(contains(r, n, b, a)); break; }
        if (op == OP_NOTIN) { res = vbool(!contains(r, n, b, a)); break; }
        if (op == '~') {
            sbuf sb = {0};
            str_of(r, &sb, a, 0);
            str_of(r, &sb, b, 0);
            res = sb_val(r, &sb);
            break;
        }
        if (op == '+' && a.t == V_STR && b.t == V_STR) {
            sbuf sb = {0};
            sb_put(r, &sb, a.u.s.p, a.u.s.n);
            sb_put(r, &sb, b.u.s.p, b.u.s.n);
            res = sb_val(r, &sb);
            break;
        }
        if (op == '+' && a.t == V_LIST && b.t == V_LIST) {
            vlist *l = newlist(r, a.u.l->n + b.u.l->n);
            for (int i = 0; i < a.u.l->n; i++) lpush(r, l, a.u.l->v[i]);
            for (int i = 0; i < b.u.l->n; i++) lpush(r, l, b.u.l->v[i]);
            res = (val){.t = V_LIST, .u.l = l};
            break;
        }
        if (op == '*' && ((a.t == V_STR && b.t == V_INT) || (a.t == V_INT && b.t == V_STR))) {
            val s = a.t == V_STR ? a : b;
            long long k = a.t == V_INT ? a.u.i : b.u.i;
            sbuf sb = {0};
            for (long long i = 0; i < k; i++) {
                step(r, n);
                sb_put(r, &sb, s.u.s.p, s.u.s.n);
            }
            res = sb_val(r, &sb);
            break;
        }
        if (!is_num(a) || !is_num(b)) {
            if (a.t == V_UNDEF || b.t == V_UNDEF) rerr(r, n, "arithmetic on an undefined value");
            rerr(r, n, "unsupported operand types for '%c'", op < 256 ? op : '?');
        }
        if (a.t != V_FLOAT && b.t != V_FLOAT && op != '/') {
            long long x = a.u.i, y = b.u.i, z = 0;
            int ovf = 0;
            switch (op) {
            case '+': ovf = __builtin_add_overflow(x, y, &z); break;
            case '-': ovf = __builtin_sub_overflow(x, y, &z); break;
            case '*': ovf = __builtin_mul_overflow(x, y, &z); break;
            case OP_FDIV: case '%':
                if (y == 0) rerr(r, n, "division by zero");
                if (y == -1) { ovf = x == (-9223372036854775807LL - 1); z = op == '%' ? 0 : -x; break; }
                z = op == '%' ? x % y : x / y;
                if (op == '%' && z != 0 && ((z < 0) != (y < 0))) z += y;
                if (op == OP_FDIV && (x % y != 0) && ((x < 0) != (y < 0))) z -= 1;
                break;
            case OP_POW:
                if (y < 0) { res = (val){.t = V_FLOAT, .u.f = 1.0}; for (long long i = 0; i < -y && i < 2000; i++) res.u.f /= (double)x; goto done; }
                z = 1;
                for (long long i = 0; i < y && !ovf; i++) ovf = __builtin_mul_overflow(z, x, &z);
                break;
            }
            if (ovf) rerr(r, n, "integer overflow");
            res = vint(z);
        } else {
            double x = num(a), y = num(b), z = 0;
            switch (op) {
            case '+': z = x + y; break;
            case '-': z = x - y; break;
            case '*': z = x * y; break;
            case '/': if (y == 0) rerr(r, n, "division by zero"); z = x / y; break;
            case OP_FDIV: if (y == 0) rerr(r, n, "division by zero"); z = __builtin_floor(x / y); break;
            case '%': if (y == 0) rerr(r, n, "division by zero"); z = __builtin_fmod(x, y); if (z != 0 && ((z < 0) != (y < 0))) z += y; break;
            case OP_POW: z = __builtin_pow(x, y); break;
            }
            res = (val){.t = V_FLOAT, .u.f = z};
        }
        break;
    }
    default: rerr(r, n, "bad expression node");
    }
done:
    r->depth--;
    return res;
}

static int attr_test_keep(R *r, const node *n, val item, args *a, int attr_mode, int reject) {
    val x = item;
    int first = 0;
    if (attr_mode) {
        if (a->np < 1 || a->pos[0].t != V_STR) rerr(r, n, "selectattr/rejectattr need an attribute name");
        x = getattr_v(item, a->pos[0].u.s.p);
        first = 1;
    }
    int keep;
    if (a->np <= first) {
        keep = truthy(x);
    } else {
        if (a->pos[first].t != V_STR) rerr(r, n, "test name must be a string");
        const char *t = a->pos[first].u.s.p;
        if (!in_list(known_tests, t) && strcmp(t, "==") && strcmp(t, "!=")) rerr(r, n, "unsupported test '%s'", t);
        if (!strcmp(t, "==")) t = "eq";
        if (!strcmp(t, "!=")) t = "ne";
        keep = run_test(r, n, t, x, a->pos + first + 1, a->np - first - 1);
    }
    return reject ? !keep : keep;
}

static val apply_filter(R *r, const node *n, const char *f, val v, args *a) {
    val a0 = a->np > 0 ? a->pos[0] : vundef();
    if (!strcmp(f, "safe") || !strcmp(f, "e") || !strcmp(f, "escape")) {
        if (f[0] != 's') rerr(r, n, "filter 'escape' is not supported");
        return v;
    }
    if (!strcmp(f, "trim")) {
        if (v.t != V_STR) v = to_str(r, v);
        return strip_str(r, v, a0, 1, 1);
    }
    if (!strcmp(f, "length") || !strcmp(f, "count")) {
        if (v.t == V_STR) {
            long long k = 0;
            for (size_t i = 0; i < v.u.s.n; i++) k += ((unsigned char)v.u.s.p[i] & 0xC0) != 0x80;
            return vint(k);
        }
        if (v.t == V_LIST) return vint(v.u.l->n);
        if (v.t == V_DICT) return vint(v.u.d->n);
        if (v.t == V_UNDEF) return vint(0);
        rerr(r, n, "length of a value without one");
    }
    if (!strcmp(f, "tojson")) {
        val ind = karg(a, "indent", 0);
        sbuf sb = {0};
        json_of(r, &sb, v, ind.t == V_INT ? (int)(ind.u.i < 0 ? 0 : ind.u.i > 16 ? 16 : ind.u.i) : -1, 0);
        return sb_val(r, &sb);
    }
    if (!strcmp(f, "string")) return to_str(r, v);
    if (!strcmp(f, "list")) return (val){.t = V_LIST, .u.l = as_list(r, n, v)};
    if (!strcmp(f, "join")) {
        vlist *l = as_list(r, n, v);
        val sep = a0.t == V_STR ? a0 : vstr_lit("");
        val attr = karg(a, "attribute", 1);
        sbuf sb = {0};
        for (int i = 0; i < l->n; i++) {
            step(r, n);
            if (i) sb_put(r, &sb, sep.u.s.p, sep.u.s.n);
            val x = attr.t == V_STR ? getattr_v(l->v[i], attr.u.s.p) : l->v[i];
            str_of(r, &sb, x, 0);
        }
        return sb_val(r, &sb);
    }
    if (!strcmp(f, "selectattr") || !strcmp(f, "rejectattr") || !strcmp(f, "select") || !strcmp(f, "reject")) {
        vlist *l = as_list(r, n, v), *o = newlist(r, l->n);
        int attr_mode = strstr(f, "attr") != NULL, rej = f[0] == 'r';
        for (int i = 0; i < l->n; i++) {
            step(r, n);
            if (attr_test_keep(r, n, l->v[i], a, attr_mode, rej)) lpush(r, o, l->v[i]);
        }
        return (val){.t = V_LIST, .u.l = o};
    }
    if (!strcmp(f, "map")) {
        vlist *l = as_list(r, n, v), *o = newlist(r, l->n);
        val attr = karg(a, "attribute", -1);
        for (int i = 0; i < l->n; i++) {
            step(r, n);
            if (attr.t == V_STR) {
                val x = getattr_v(l->v[i], attr.u.s.p);
                if (x.t == V_UNDEF) x = karg(a, "default", -1);
                lpush(r, o, x);
            } else if (a0.t == V_STR) {
                args rest = *a;
                rest.np = a->np - 1;
                memmove(rest.pos, a->pos + 1, sizeof(val) * (size_t)rest.np);
                const char *fn = a0.u.s.p;
                if (!in_list(known_filters, fn)) rerr(r, n, "unsupported filter '%s'", fn);
                lpush(r, o, apply_filter(r, n, fn, l->v[i], &rest));
            } else {
                rerr(r, n, "map() needs a filter name or attribute=");
            }
        }
        return (val){.t = V_LIST, .u.l = o};
    }
    if (!strcmp(f, "items")) {
        if (v.t == V_UNDEF || v.t == V_NONE) return (val){.t = V_LIST, .u.l = newlist(r, 1)};
        if (v.t != V_DICT) rerr(r, n, "items needs a mapping");
        args none = {0};
        return call_method(r, n, v, "items", &none);
    }
    if (!strcmp(f, "first") || !strcmp(f, "last")) {
        vlist *l = as_list(r, n, v);
        if (!l->n) return vundef();
        return f[0] == 'f' ? l->v[0] : l->v[l->n - 1];
    }
    if (!strcmp(f, "lower") || !strcmp(f, "upper") || !strcmp(f, "capitalize") || !strcmp(f, "title")) {
        v = to_str(r, v);
        return case_str(r, v, f[0] == 'l' ? 0 : f[0] == 'u' ? 1 : f[0] == 'c' ? 2 : 3);
    }
    if (!strcmp(f, "default") || !strcmp(f, "d")) {
        val boolean = karg(a, "boolean", 1);
        if (v.t == V_UNDEF || (truthy(boolean) && !truthy(v))) return a->np ? a0 : vstr_lit("");
        return v;
    }
    if (!strcmp(f, "replace")) {
        v = to_str(r, v);
        val c = a->np > 2 ? a->pos[2] : vundef();
        return replace_str(r, v, a0, a->np > 1 ? a->pos[1] : vundef(), c.t == V_INT ? c.u.i : -1);
    }
    if (!strcmp(f, "int")) {
        if (v.t == V_INT) return v;
        if (v.t == V_BOOL) return vint(v.u.i);
        if (v.t == V_FLOAT) return vint(v.u.f > 9e18 || v.u.f < -9e18 ? 0 : (long long)v.u.f);
        if (v.t == V_STR) {
            char buf[64];
            size_t k = v.u.s.n < 63 ? v.u.s.n : 63;
            memcpy(buf, v.u.s.p, k);
            buf[k] = 0;
            char *e;
            long long x = strtoll(buf, &e, 10);
            return vint(*e || e == buf ? 0 : x);
        }
        return vint(0);
    }
    if (!strcmp(f, "float")) {
        if (is_num(v)) return (val){.t = V_FLOAT, .u.f = num(v)};
        if (v.t == V_STR) {
            char buf[64];
            size_t k = v.u.s.n < 63 ? v.u.s.n : 63;
            memcpy(buf, v.u.s.p, k);
            buf[k] = 0;
            return (val){.t = V_FLOAT, .u.f = strtod(buf, NULL)};
        }
        return (val){.t = V_FLOAT, .u.f = 0};
    }
    if (!strcmp(f, "abs")) {
        if (v.t == V_INT) return vint(v.u.i < 0 && v.u.i != (-9223372036854775807LL - 1) ? -v.u.i : v.u.i);
        if (v.t == V_FLOAT) return (val){.t = V_FLOAT, .u.f = v.u.f < 0 ? -v.u.f : v.u.f};
        rerr(r, n, "abs needs a number");
    }
    if (!strcmp(f, "reverse")) {
        if (v.t == V_STR) {
            val o = mkstr(r, v.u.s.p, v.u.s.n);
            char *p = (char *)o.u.s.p;
            for (size_t i = 0; i < o.u.s.n / 2; i++) {
                char t = p[i];
                p[i] = p[o.u.s.n - 1 - i];
                p[o.u.s.n - 1 - i] = t;
            }
            return o;
        }
        vlist *l = as_list(r, n, v), *o = newlist(r, l->n);
        for (int i = l->n - 1; i >= 0; i--) lpush(r, o, l->v[i]);
        return (val){.t = V_LIST, .u.l = o};
    }
    if (!strcmp(f, "unique")) {
        vlist *l = as_list(r, n, v), *o = newlist(r, l->n);
        for (int i = 0; i < l->n; i++) {
            step(r, n);
            int seen = 0;
            for (int j = 0; j < o->n && !seen; j++) seen = equal(o->v[j], l->v[i], 0);
            if (!seen) lpush(r, o, l->v[i]);
        }
        return (val){.t = V_LIST, .u.l = o};
    }
    if (!strcmp(f, "sum") || !strcmp(f, "min") || !strcmp(f, "max")) {
        vlist *l = as_list(r, n, v);
        if (f[1] == 'u') {
            long long s = 0;
            for (int i = 0; i < l->n; i++) {
                if (l->v[i].t != V_INT) rerr(r, n, "sum needs integers");
                if (__builtin_add_overflow(s, l->v[i].u.i, &s)) rerr(r, n, "integer overflow");
            }
            return vint(s);
        }
        if (!l->n) return vundef();
        val best = l->v[0];
        for (int i = 1; i < l->n; i++) {
            int c = compare(r, n, l->v[i], best);
            if (f[1] == 'i' ? c < 0 : c > 0) best = l->v[i];
        }
        return best;
    }
    if (!strcmp(f, "indent")) {
        v = to_str(r, v);
        long long w = a0.t == V_INT ? a0.u.i : 4;
        if (w < 0 || w > 64) w = 4;
        val first = karg(a, "first", 1);
        sbuf sb = {0};
        for (size_t i = 0; i < v.u.s.n; i++) {
            if ((i == 0 && truthy(first)) || (i > 0 && v.u.s.p[i - 1] == '\n' && v.u.s.p[i] != '\n'))
                for (long long k = 0; k < w; k++) sb_put(r, &sb, " ", 1);
            sb_put(r, &sb, v.u.s.p + i, 1);
        }
        return sb_val(r, &sb);
    }
    rerr(r, n, "unsupported filter '%s'", f);
}

static void exec_stmt(R *r, const node *n);

static void exec_body(R *r, const node *b) {
    for (int i = 0; i < b->n && !r->ctl; i++) exec_stmt(r, b->items[i]);
}

static void set_var(R *r, const node *n, val v) {
    if (n->s2) {
        val ns = lookup(r, n->s);
        if (ns.t != V_DICT || !ns.u.d->ns) rerr(r, n, "'%s' is not a namespace", n->s);
        dset_c(r, ns.u.d, n->s2, v);
    } else {
        fset(r, r->top, n->s, v);
    }
}

static void exec_stmt(R *r, const node *n) {
    step(r, n);
    r->depth++;
    check_depth(r, n);
    switch (n->kind) {
    case S_TEXT: emit(r, n->s, n->sn); break;
    case S_OUT: {
        val v = eval(r, n->a);
        if (v.t == V_STR) emit(r, v.u.s.p, v.u.s.n);
        else {
            sbuf sb = {0};
            str_of(r, &sb, v, 0);
            emit(r, sb.p ? sb.p : "", sb.n);
        }
        break;
    }
    case S_BODY: exec_body(r, n); break;
    case S_IF: {
        const node *c = n;
        while (c && c->kind == S_IF) {
            if (truthy(eval(r, c->a))) {
                exec_body(r, c->b);
                c = NULL;
                break;
            }
            c = c->c;
        }
        if (c) exec_body(r, c);
        break;
    }
    case S_FOR: {
        vlist *src = as_list(r, n, eval(r, n->a));
        frame *outer = r->top;
        /* bind the targets of one item in frame f */
        vlist *items = src;
        if (n->d) { /* the loop filter runs before loop.* are computed */
            items = newlist(r, src->n);
            for (int i = 0; i < src->n; i++) {
                step(r, n);
                frame *f = push_frame(r, outer);
                r->top = f;
                if (n->n_names == 1) fset(r, f, n->names[0], src->v[i]);
                else {
                    val it = src->v[i];
                    if (it.t != V_LIST || it.u.l->n != n->n_names) { r->top = outer; rerr(r, n, "cannot unpack loop item"); }
                    for (int k = 0; k < n->n_names; k++) fset(r, f, n->names[k], it.u.l->v[k]);
                }
                int keep = truthy(eval(r, n->d));
                r->top = outer;
                if (keep) lpush(r, items, src->v[i]);
            }
        }
        int len = items->n;
        for (int i = 0; i < len; i++) {
            step(r, n);
            frame *f = push_frame(r, outer);
            val it = items->v[i];
            if (n->n_names == 1) fset(r, f, n->names[0], it);
            else {
                if (it.t != V_LIST || it.u.l->n != n->n_names) rerr(r, n, "cannot unpack loop item");
                for (int k = 0; k < n->n_names; k++) fset(r, f, n->names[k], it.u.l->v[k]);
            }
            vdict *lp = newdict(r, 10);
            dset_c(r, lp, "index", vint(i + 1));
            dset_c(r, lp, "index0", vint(i));
            dset_c(r, lp, "revindex", vint(len - i));
            dset_c(r, lp, "revindex0", vint(len - i - 1));
            dset_c(r, lp, "first", vbool(i == 0));
            dset_c(r, lp, "last", vbool(i == len - 1));
            dset_c(r, lp, "length", vint(len));
            if (i > 0) dset_c(r, lp, "previtem", items->v[i - 1]);
            if (i + 1 < len) dset_c(r, lp, "nextitem", items->v[i + 1]);
            fset(r, f, "loop", (val){.t = V_DICT, .u.d = lp});
            r->top = f;
            exec_body(r, n->b);
            r->top = outer;
            if (r->ctl == 1) { r->ctl = 0; break; }
            r->ctl = 0;
        }
        if (len == 0 && n->c) exec_body(r, n->c);
        break;
    }
    case S_SET:
        if (n->a) {
            set_var(r, n, eval(r, n->a));
        } else {
            /* block form: render the body to a string */
            out_push(r);
            exec_body(r, n->b);
            val v = out_pop(r);
            /* apply the filter chain, innermost first */
            const node *chain[32];
            int nc = 0;
            for (const node *f = n->c; f && nc < 32; f = f->a) chain[nc++] = f;
            for (int i = nc - 1; i >= 0; i--) {
                args a;
                eval_args(r, chain[i], &a);
                v = apply_filter(r, chain[i], chain[i]->s, v, &a);
            }
            set_var(r, n, v);
        }
        break;
    case S_MACRO: fset(r, r->top, n->s, (val){.t = V_MACRO, .u.m = n}); break;
    case S_BREAK: r->ctl = 1; break;
    case S_CONTINUE: r->ctl = 2; break;
    default: rerr(r, n, "bad statement node");
    }
    r->depth--;
}

/* render; NULL after an error (longjmp lands here). The caller frees the arena. */
static char *render_protected(R *r) {
    if (setjmp(r->jb)) {
        slm_xfree(r->out);
        r->out = NULL;
        return NULL;
    }
    r->root = r->top = push_frame(r, NULL);
    vlist *ml = newlist(r, r->n_msgs);
    for (int i = 0; i < r->n_msgs; i++) {
        vdict *d = newdict(r, 2);
        dset_c(r, d, "role", vstr_lit(r->msgs[i].role ? r->msgs[i].role : ""));
        dset_c(r, d, "content", vstr_lit(r->msgs[i].content ? r->msgs[i].content : ""));
        lpush(r, ml, (val){.t = V_DICT, .u.d = d});
    }
    const slm_tmpl_vars *vars = r->vars;
    fset(r, r->root, "messages", (val){.t = V_LIST, .u.l = ml});
    fset(r, r->root, "add_generation_prompt", vbool(vars && vars->add_generation_prompt));
    fset(r, r->root, "bos_token", vstr_lit(vars && vars->bos_token ? vars->bos_token : ""));
    fset(r, r->root, "eos_token", vstr_lit(vars && vars->eos_token ? vars->eos_token : ""));
    exec_body(r, r->tm->body);
    char *out = r->out;
    r->out = NULL;
    if (!out) out = slm_strdup("");
    if (!out) snprintf(r->err, r->errcap, "out of memory");
    return out;
}

char *slm_tmpl_render(const slm_tmpl *t, const slm_chat_msg *msgs, int n_msgs, const slm_tmpl_vars *vars,
                      char *err, size_t errcap) {
    char dummy[8];
    if (!err || !errcap) {
        err = dummy;
        errcap = sizeof dummy;
    }
    err[0] = 0;
    if (!t || n_msgs < 0 || (n_msgs > 0 && !msgs)) {
        snprintf(err, errcap, "bad arguments");
        return NULL;
    }
    R *r = slm_calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errcap, "out of memory");
        return NULL;
    }
    r->err = err;
    r->errcap = errcap;
    r->vars = vars;
    r->msgs = msgs;
    r->n_msgs = n_msgs;
    r->tm = t;
    char *out = render_protected(r);
    for (int i = 0; i < r->nsaved; i++) slm_xfree(r->saved[i].p);
    ar_free(&r->ar);
    slm_xfree(r);
    return out;
}

/* ---- built-in templates --------------------------------------------------- */

static const struct {
    const char *name, *src;
} builtins[] = {
    {"chatml",
     "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
     "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"},
    {"llama2",
     "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
     "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}"
     "{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
     "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
     "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
     "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}"
     "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
     "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}"
     "{% endfor %}"},
    {"zephyr",
     "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\\n' + message['content'] + "
     "eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\\n' + message['content'] + eos_token }}\n"
     "{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\\n'  + message['content'] + eos_token }}\n"
     "{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}"},
    {"llama3",
     "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
     "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
     "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
     "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
     "{% endif %}"},
};

const char *slm_tmpl_builtin(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        if (!strcmp(builtins[i].name, name)) return builtins[i].src;
    return NULL;
}

const char *slm_tmpl_builtin_names(void) { return "chatml, llama2, zephyr, llama3"; }
