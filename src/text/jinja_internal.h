/* text/jinja_internal.h — the parts of the chat-template interpreter (see
 * chat_template.h), shared between its files the way Lua's interpreter is
 * split:
 *   jinja_lex.c     source text -> flat token stream      (jx_)
 *   jinja_parse.c   tokens -> AST in the template's arena (jp_)
 *   jinja_value.c   arena, values, strings, scopes, output (jv_)
 *   jinja_eval.c    expressions and statements            (je_)
 *   jinja_filters.c filters, tests, string / dict methods (jf_)
 *   chat_template.c the public entry points and the built-in templates.
 *
 * Errors in the parser and the renderer longjmp to the entry point (jx_err,
 * jv_err); all memory of a parse or a render lives in one arena that is
 * freed at once, so an error leaks nothing.
 */
#ifndef SLM_JINJA_INTERNAL_H
#define SLM_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stddef.h>
#include <string.h>

#include "common/common.h"
#include "text/chat_template.h"

#define ARENA_LIMIT (64u << 20) /* bytes per template / per render */
#define OUT_LIMIT (16u << 20)   /* rendered text */
#define MAX_DEPTH 200           /* nesting of expressions, statements, calls */
/* The cost of a render, in units charged before the work is done: COST_NODE
 * per expression or statement evaluated, COST_ITEM per list element or
 * mapping entry made, visited or compared, 1 per byte copied, compared or
 * searched. One budget (slm_tmpl_vars.budget, default SLM_TMPL_BUDGET) and a
 * wall-clock limit bound each render; the clock and the cancel flag are read
 * every BUDGET_CHECK_EVERY units. */
#define COST_NODE 32
#define COST_ITEM 16
#define BUDGET_CHECK_EVERY 65536

/* ---- arena ---------------------------------------------------------------- */

typedef struct ablk {
    struct ablk *next;
    size_t used, cap; /* bytes */
    max_align_t data[];
} ablk;

typedef struct arena {
    ablk *head;
    size_t total; /* bytes of all blocks, at most ARENA_LIMIT */
    int oom;      /* 1: the last NULL was the allocator's (out of memory), not the limit */
} arena;

/* n bytes, max_align_t aligned, not zeroed; NULL past ARENA_LIMIT. */
void *jv_arena_alloc(arena *a, size_t n);
void jv_arena_free(arena *a);

/* ---- values ----------------------------------------------------------------- */

enum { V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_FUNC, V_MACRO };

typedef struct sstr {
    const char *p; /* p[n] == 0 always (used as C strings; a suffix may share the bytes) */
    size_t n;      /* bytes */
    /* taint: which bytes derive from message content (chat_template.h's
     * slm_tmpl_render_mask). NULL: none; JV_TAINT_ALL: every byte; else
     * [n] bytes, 1 = tainted. */
    const uint8_t *tm;
} sstr;

extern const uint8_t jv_taint_all_[1];
#define JV_TAINT_ALL (jv_taint_all_)
static inline int sstr_tainted(sstr s) { return s.tm != NULL && s.n > 0; }

typedef struct node node;
typedef struct vlist vlist;
typedef struct vdict vdict;

typedef struct val {
    int t; /* V_* */
    union {
        long long i; /* INT, BOOL, FUNC id */
        double f;
        sstr s;
        vlist *l;
        vdict *d;
        const node *m; /* MACRO: its S_MACRO node */
    } u;
} val;

struct vlist {
    int n, cap; /* elements */
    val *v;
    int tuple; /* printed as a Python tuple: (a, b) */
};
struct vdict { /* insertion-ordered, linear lookup */
    int n, cap;
    sstr *k;
    val *v;
    int ns; /* a namespace(): attributes may be set */
};

static inline val vstr_lit(const char *s) { return (val){.t = V_STR, .u.s = {s, strlen(s), NULL}}; }
static inline val vbool(int b) { return (val){.t = V_BOOL, .u.i = b != 0}; }
static inline val vint(long long i) { return (val){.t = V_INT, .u.i = i}; }
static inline val vnone(void) { return (val){.t = V_NONE}; }
static inline val vundef(void) { return (val){.t = V_UNDEF}; }
static inline int is_num(val v) { return v.t == V_INT || v.t == V_BOOL || v.t == V_FLOAT; }
static inline double num(val v) { return v.t == V_FLOAT ? v.u.f : (double)v.u.i; }
static inline int sseq(sstr a, const char *b, size_t bn) { return a.n == bn && !memcmp(a.p, b, bn); }
static inline int is_space(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* the global functions (V_FUNC ids) */
enum { F_RAISE = 1, F_NAMESPACE, F_RANGE, F_STRFTIME, F_DICT };

/* ---- tokens and AST ------------------------------------------------------- */

enum { TK_TEXT, TK_VB, TK_VE, TK_BB, TK_BE, TK_NAME, TK_STR, TK_INT, TK_FLOAT, TK_OP, TK_EOF };
/* two-character operators; one-character ones are their own character */
enum { OP_POW = 256, OP_FDIV, OP_EQ, OP_NE, OP_LE, OP_GE, OP_IN, OP_NOTIN };

typedef struct tok {
    int type, op, line; /* TK_*, OP_* or a character for TK_OP */
    const char *s;       /* TEXT, NAME, STR: in the arena (STR unescaped) or the source (NAME) */
    size_t n;
    long long iv;
    double fv;
} tok;

enum {
    E_LIT, E_NAME, E_ATTR, E_ITEM, E_SLICE, E_CALL, E_FILTER, E_TEST, E_BIN, E_AND, E_OR, E_NOT,
    E_NEG, E_COND, E_LIST, E_DICT,
    S_TEXT, S_OUT, S_IF, S_BODY, S_FOR, S_SET, S_MACRO, S_BREAK, S_CONTINUE
};

/* One AST node (E_LIST with op 1: a tuple); the meaning of a..d by kind:
 *   E_ATTR a.s   E_ITEM a[b]   E_SLICE a[b:c:d]   E_CALL a(items)   E_FILTER a|s(items)
 *   E_TEST a is [not] s(items)  E_BIN a op b   E_COND a if b else c   E_LIST / E_DICT items
 *   S_IF if a: b else c (c: S_IF for elif, or a body)   S_FOR names in a [if d]: b else c
 *   S_SET s[.s2] = a, or block b with filter chain c   S_MACRO s(names = items): b */
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
    char *src; /* the source text (slm_malloc'd) */
};

/* ---- parser state (jinja_lex.c, jinja_parse.c) ---------------------------- */

typedef struct P {
    arena *ar;
    tok *t; /* slm_realloc'd token array */
    int nt, cap, pos, depth;
    int in_if; /* inside {% if %} bodies: unknown filters / tests fail when run */
    jmp_buf jb;
    slm_err *err; /* may be NULL */
    const char *src;
} P;

void jx_err(P *p, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4), noreturn));
void jx_nomem(P *p) __attribute__((noreturn)); /* SLM_ERR_NOMEM "out of memory" */
void *jx_alloc(P *p, size_t n); /* zeroed, in the template's arena */
void jx_lex(P *p, const char *src);
/* Parse statements until {% <one of ends> %} (ends NULL: to the end). */
node *jp_body(P *p, const char *const *ends, const char **which);

/* ---- renderer state --------------------------------------------------------- */

typedef struct frame { /* one scope: the root, a loop iteration, a macro call */
    struct frame *up;
    int n, cap;
    sstr *k;
    val *v;
} frame;

typedef struct R {
    arena ar;
    jmp_buf jb;
    slm_err *err; /* may be NULL */
    char *out; /* slm_realloc'd text being rendered */
    size_t on, ocap;
    frame *top, *root;
    const node *cur;                 /* the node being evaluated, for messages */
    uint64_t spent, budget, check_at; /* cost units (see COST_NODE) */
    long long deadline_ms;            /* CLOCK_MONOTONIC */
    unsigned time_ms;
    const _Atomic int *cancel;
    int (*cancel_fn)(void *);
    void *cancel_ud;
    int depth;
    int ctl; /* 1 break, 2 continue */
    const slm_tmpl_vars *vars;
    uint8_t *om; /* slm_realloc'd taint of out ([ocap]), NULL while none is tainted */
    struct { char *p; uint8_t *m; size_t n, cap; } saved[MAX_DEPTH + 1]; /* outputs of enclosing macros / set blocks */
    int nsaved;
    const slm_chat_msg *msgs;
    int n_msgs;
    const slm_tmpl *tm;
} R;

/* a growable string in the render arena */
typedef struct sbuf {
    char *p;
    size_t n, cap;
    uint8_t *m; /* taint of [n] bytes (arena), NULL while none is tainted */
} sbuf;

/* call arguments, evaluated: positional then keyword */
typedef struct args {
    val pos[8];
    int np;
    const char *kn[8];
    val kv[8];
    int nk;
} args;

/* jinja_value.c */
/* Fail the render: "line N: message" (n NULL: no line) with status s. */
void jv_fail(R *r, const node *n, slm_status s, const char *fmt, ...) __attribute__((format(printf, 4, 5), noreturn));
#define jv_err(r, n, ...) jv_fail(r, n, SLM_ERR_FORMAT, __VA_ARGS__)
void *jv_alloc(R *r, size_t n);
void jv_budget_start(R *r, const slm_tmpl_vars *vars);
void jv_budget_check(R *r); /* fails past the budget, the deadline, or when cancelled */
static inline void jv_charge(R *r, uint64_t units) {
    r->spent = units > UINT64_MAX - r->spent ? UINT64_MAX : r->spent + units;
    if (r->spent >= r->check_at) jv_budget_check(r);
}
/* memmem, charged for the bytes searched; NULL if absent */
const char *jv_find(R *r, const char *hay, size_t hn, const char *needle, size_t nn);
val jv_str(R *r, const char *s, size_t n); /* a NUL-terminated copy */
vlist *jv_list(R *r, int cap);
void jv_push(R *r, vlist *l, val x);
vdict *jv_dict(R *r, int cap);
val *jv_dget(R *r, vdict *d, const char *k, size_t kn);
void jv_dset(R *r, vdict *d, sstr k, val x);
void jv_dsetc(R *r, vdict *d, const char *k, val x);
frame *jv_frame(R *r, frame *up);
void jv_fset(R *r, frame *f, const char *k, val x);
val jv_lookup(R *r, const char *name);
void jv_emit(R *r, const char *s, size_t n);
void jv_emit_str(R *r, sstr s); /* with its taint */
/* taint: a tainted copy of a string / of every string inside v (conservative:
 * whatever derives from tainted input is tainted); 1 when v holds taint. */
val jv_taint(R *r, val v);
int jv_has_taint(val v, int depth);
void jv_sb_put_str(R *r, sbuf *b, sstr s); /* with its taint */
void jv_sb_taint(R *r, sbuf *b, size_t from); /* mark [from, n) tainted */
void jv_out_push(R *r);
val jv_out_pop(R *r);
void jv_sb_put(R *r, sbuf *b, const char *s, size_t n);
void jv_sb_puts(R *r, sbuf *b, const char *s);
val jv_sb_val(R *r, sbuf *b);
void jv_str_of(R *r, sbuf *b, val v, int depth);
val jv_to_str(R *r, val v);
void jv_json(R *r, sbuf *b, val v, int indent, int level);
int jv_truthy(val v);
int jv_equal(R *r, val a, val b, int depth);
int jv_compare(R *r, const node *n, val a, val b);
int jv_contains(R *r, const node *n, val hay, val x);

/* jinja_eval.c */
val je_eval(R *r, const node *n);
void je_args(R *r, const node *n, args *a);
val je_karg(const args *a, const char *name, int pos_index);
vlist *je_iter(R *r, const node *n, val v);
val je_getattr(R *r, val o, const char *name);
val je_call_macro(R *r, const node *n, const node *m, args *a);
void je_exec_body(R *r, const node *b);
char *je_render(R *r); /* r->om: the output's taint (NULL: none), the caller's */

/* jinja_json.c: json's members become root variables (slm_tmpl_vars.kwargs) */
void jv_set_kwargs(R *r, const char *json);
/* One JSON value (tools, a message's tool_calls), tainted; what names it in
 * messages. Fails the render (SLM_ERR_ARG) when json is malformed. */
val jv_json_value(R *r, const char *json, const char *what);

/* jinja_filters.c */
int jf_known_filter(const char *name);
int jf_known_test(const char *name);
int jf_test(R *r, const node *n, const char *t, val v, val *argv, int na);
val jf_method(R *r, const node *n, val o, const char *name, args *a);
val jf_filter(R *r, const node *n, const char *f, val v, args *a);

#endif
