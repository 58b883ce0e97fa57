/* text/jinja_parse.c — the chat-template parser (see jinja_internal.h).
 *
 * Recursive descent over the token stream into an AST allocated in the
 * template's arena. Expression precedence, loosest first: a if c else b,
 * or, and, not, comparisons / in, + -, ~, * / // %, **, unary - +, then
 * filters / tests / postfix (. [] ()). Nesting is bounded by MAX_DEPTH.
 */
#include <string.h>

#include "common/common.h"
#include "text/jinja_internal.h"

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
    if (!accept_op(p, op)) jx_err(p, peek(p)->line, "expected '%c'", op < 256 ? op : '?');
}
static const char *tok_name(P *p, tok *t) {
    char *s = jx_alloc(p, t->n + 1);
    memcpy(s, t->s, t->n);
    return s;
}
static const char *expect_ident(P *p) {
    tok *t = next(p);
    if (t->type != TK_NAME) jx_err(p, t->line, "expected a name");
    return tok_name(p, t);
}

static node *mk(P *p, int kind, int line) {
    node *n = jx_alloc(p, sizeof *n);
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
        node **nn = jx_alloc(p, (size_t)nc * sizeof *nn);
        const char **nm = jx_alloc(p, (size_t)nc * sizeof *nm);
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
    if (++p->depth > MAX_DEPTH) jx_err(p, peek(p)->line, "template nested too deeply");
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
        n->lit.u.s = (sstr){t->s, t->n, NULL};
        /* adjacent string literals concatenate */
        while (peek(p)->type == TK_STR) {
            tok *u = next(p);
            char *c = jx_alloc(p, n->lit.u.s.n + u->n + 1);
            memcpy(c, n->lit.u.s.p, n->lit.u.s.n);
            memcpy(c + n->lit.u.s.n, u->s, u->n);
            n->lit.u.s = (sstr){c, n->lit.u.s.n + u->n, NULL};
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
                n->op = 1; /* a tuple */
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
    jx_err(p, t->line, "unexpected %s in expression", t->type == TK_EOF ? "end of template" : t->type == TK_BE || t->type == TK_VE ? "end of tag" : "token");
}

static node *p_filter(P *p, node *operand) {
    tok *t = peek(p);
    const char *name = expect_ident(p);
    /* dotted filter names are not supported */
    /* as Jinja2 3: an unknown filter inside an if block fails only when run */
    if (!p->in_if && !jf_known_filter(name)) jx_err(p, t->line, "unsupported filter '%s'", name);
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
            else jx_err(p, t->line, "expected an attribute name after '.'");
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
            if (!slice && !idx[0]) jx_err(p, t->line, "empty subscript");
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
            else jx_err(p, u->line, "expected a test name after 'is'");
            if (!p->in_if && !jf_known_test(x->s)) jx_err(p, u->line, "unsupported test '%s'", x->s);
            if (accept_op(p, '(')) {
                p_args(p, x);
            } else {
                /* one bare argument: `is divisibleby 3`, `is sameas none` */
                tok *v = peek(p);
                if (v->type == TK_STR || v->type == TK_INT || v->type == TK_FLOAT || is_op(p, '[') || is_op(p, '{') ||
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
    if (t->type != TK_BE) jx_err(p, t->line, "expected end of tag '%%}'");
}


static node *p_stmt_tag(P *p, int line) {
    tok *kw = next(p);
    if (kw->type != TK_NAME) jx_err(p, kw->line, "expected a tag name");
    const char *k = tok_name(p, kw);
    if (!strcmp(k, "if")) {
        node *n = mk(p, S_IF, line);
        n->a = p_expr(p);
        expect_be(p);
        p->in_if++;
        static const char *const ends[] = {"elif", "else", "endif", NULL};
        const char *w;
        n->b = jp_body(p, ends, &w);
        node *cur = n;
        while (!strcmp(w, "elif")) {
            node *e = mk(p, S_IF, peek(p)->line);
            e->a = p_expr(p);
            expect_be(p);
            e->b = jp_body(p, ends, &w);
            cur->c = e;
            cur = e;
        }
        if (!strcmp(w, "else")) {
            expect_be(p);
            static const char *const ends2[] = {"endif", NULL};
            cur->c = jp_body(p, ends2, &w);
        }
        p->in_if--;
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
        if (!accept_name(p, "in")) jx_err(p, peek(p)->line, "expected 'in' in for");
        n->a = p_or(p); /* not p_expr: `if` here is the loop filter */
        if (accept_name(p, "if")) n->d = p_expr(p);
        if (accept_name(p, "recursive")) jx_err(p, line, "recursive loops are not supported");
        expect_be(p);
        static const char *const ends[] = {"else", "endfor", NULL};
        const char *w;
        n->b = jp_body(p, ends, &w);
        if (!strcmp(w, "else")) {
            expect_be(p);
            static const char *const ends2[] = {"endfor", NULL};
            n->c = jp_body(p, ends2, &w);
        }
        expect_be(p);
        return n;
    }
    if (!strcmp(k, "set")) {
        node *n = mk(p, S_SET, line);
        n->s = expect_ident(p);
        if (accept_op(p, '.')) n->s2 = expect_ident(p);
        if (is_op(p, ',')) jx_err(p, line, "tuple assignment in set is not supported");
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
            n->b = jp_body(p, ends, &w);
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
        n->b = jp_body(p, ends, &w);
        p->depth--;
        expect_be(p);
        return n;
    }
    if (!strcmp(k, "break") || !strcmp(k, "continue")) {
        node *n = mk(p, k[0] == 'b' ? S_BREAK : S_CONTINUE, line);
        expect_be(p);
        return n;
    }
    jx_err(p, kw->line, "unsupported tag '%s'", k);
}

/* Leaves pos after the end tag's name, *which naming it. */
node *jp_body(P *p, const char *const *ends, const char **which) {
    enter(p);
    node *body = mk(p, S_BODY, peek(p)->line);
    nvec v = {0};
    for (;;) {
        tok *t = next(p);
        if (t->type == TK_EOF) {
            if (ends) jx_err(p, t->line, "unexpected end of template (expected {%% %s %%})", ends[0]);
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
            if (e->type != TK_VE) jx_err(p, e->line, "expected '}}'");
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
                    if (is_name(p, stray[i])) jx_err(p, kw->line, "unexpected '%s'", stray[i]);
            }
            nv_push(p, &v, p_stmt_tag(p, t->line), NULL);
        } else {
            jx_err(p, t->line, "unexpected token");
        }
    }
    body->items = v.v;
    body->n = v.n;
    p->depth--;
    return body;
}
