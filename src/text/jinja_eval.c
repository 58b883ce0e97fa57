/* text/jinja_eval.c — the chat-template evaluator (see jinja_internal.h):
 * expressions to values, statements to output, calls of macros and of the
 * globals (raise_exception, namespace, dict, range, strftime_now).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/common.h"
#include "text/jinja_internal.h"

static long long to_index(R *r, const node *n, val v) {
    if (v.t == V_INT || v.t == V_BOOL) return v.u.i;
    jv_err(r, n, "index must be an integer");
}


val je_getattr(R *r, val o, const char *name) {
    if (o.t == V_DICT) {
        val *v = jv_dget(r, o.u.d, name, strlen(name));
        return v ? *v : vundef();
    }
    return vundef();
}

/* byte offsets of the code points of a UTF-8 string (n + 1 entries: the end
 * last); NULL when every byte is one (ASCII) */
static size_t *cp_offsets(R *r, sstr s, long long *count) {
    long long k = 0;
    jv_charge(r, s.n);
    for (size_t i = 0; i < s.n; i++) k += ((unsigned char)s.p[i] & 0xC0) != 0x80 || i == 0;
    *count = k;
    if ((size_t)k == s.n) return NULL;
    jv_charge(r, (uint64_t)k * COST_ITEM);
    size_t *o = jv_alloc(r, ((size_t)k + 1) * sizeof *o);
    long long j = 0;
    for (size_t i = 0; i < s.n; i++)
        if (((unsigned char)s.p[i] & 0xC0) != 0x80 || i == 0) o[j++] = i;
    o[k] = s.n;
    return o;
}

static val getitem(R *r, const node *n, val o, val k) {
    if (o.t == V_DICT) {
        if (k.t != V_STR) return vundef();
        val *v = jv_dget(r, o.u.d, k.u.s.p, k.u.s.n);
        return v ? *v : vundef();
    }
    if (o.t == V_LIST || o.t == V_STR) {
        if (k.t == V_STR) return vundef();
        long long i = to_index(r, n, k), len;
        size_t *cps = NULL;
        if (o.t == V_LIST) len = o.u.l->n;
        else cps = cp_offsets(r, o.u.s, &len);
        if (i < 0) i += len;
        if (i < 0 || i >= len) return vundef();
        if (o.t == V_LIST) return o.u.l->v[i];
        val c = cps ? jv_str(r, o.u.s.p + cps[i], cps[i + 1] - cps[i]) : jv_str(r, o.u.s.p + i, 1);
        return sstr_tainted(o.u.s) ? jv_taint(r, c) : c;
    }
    if (o.t == V_UNDEF) jv_err(r, n, "subscript of an undefined value");
    return vundef();
}

/* Python's slice index adjustment (PySlice_AdjustIndices): clamps start and
 * stop into the sequence and returns how many items the slice takes. No
 * arithmetic here can overflow: len < 2^62 and the count is computed from
 * differences of clamped indices in unsigned arithmetic. */
static long long slice_count(long long len, int has_lo, long long lo, int has_hi, long long hi, long long step,
                             long long *start) {
    if (step > 0) {
        if (!has_lo) lo = 0;
        else if (lo < 0) lo = lo + len < 0 ? 0 : lo + len;
        else if (lo > len) lo = len;
        if (!has_hi) hi = len;
        else if (hi < 0) hi = hi + len < 0 ? 0 : hi + len;
        else if (hi > len) hi = len;
        *start = lo;
        return lo < hi ? (long long)(((uint64_t)(hi - lo) - 1) / (uint64_t)step + 1) : 0;
    }
    if (!has_lo) lo = len - 1;
    else if (lo < 0) lo = lo + len < 0 ? -1 : lo + len;
    else if (lo >= len) lo = len - 1;
    if (!has_hi) hi = -1;
    else if (hi < 0) hi = hi + len < 0 ? -1 : hi + len;
    else if (hi >= len) hi = len - 1;
    *start = lo;
    return hi < lo ? (long long)(((uint64_t)(lo - hi) - 1) / (0 - (uint64_t)step) + 1) : 0;
}

/* o[a:b:c] on a list or a string (by code points, as Python) */
static val do_slice(R *r, const node *n, val o, val a, val b, val c) {
    long long len;
    size_t *cps = NULL;
    if (o.t == V_LIST) len = o.u.l->n;
    else if (o.t == V_STR) cps = cp_offsets(r, o.u.s, &len);
    else if (o.t == V_UNDEF) jv_err(r, n, "slice of an undefined value");
    else return vundef(); /* as Jinja2: a failed subscript is undefined */
    int has_lo = a.t != V_UNDEF && a.t != V_NONE, has_hi = b.t != V_UNDEF && b.t != V_NONE;
    long long stp = c.t == V_UNDEF || c.t == V_NONE ? 1 : to_index(r, n, c);
    if (stp == 0) jv_err(r, n, "slice step cannot be zero");
    long long start, cnt = slice_count(len, has_lo, has_lo ? to_index(r, n, a) : 0, has_hi,
                                       has_hi ? to_index(r, n, b) : 0, stp, &start);
    jv_charge(r, (uint64_t)cnt * COST_ITEM);
    sbuf sb = {0};
    vlist *l = o.t == V_LIST ? jv_list(r, (int)(cnt < 4 ? 4 : cnt)) : NULL;
    for (long long k = 0; k < cnt; k++) {
        /* start + k * stp stays inside [0, len) */
        long long i = (long long)((uint64_t)start + (uint64_t)k * (uint64_t)stp);
        if (l) jv_push(r, l, o.u.l->v[i]);
        else if (!cps) jv_sb_put(r, &sb, o.u.s.p + i, 1);
        else jv_sb_put(r, &sb, o.u.s.p + cps[i], cps[i + 1] - cps[i]);
    }
    if (l) return (val){.t = V_LIST, .u.l = l};
    val res = jv_sb_val(r, &sb);
    return sstr_tainted(o.u.s) ? jv_taint(r, res) : res;
}

/* iterate: a list, a dict's keys, or a string's characters */
vlist *je_iter(R *r, const node *n, val v) {
    if (v.t == V_LIST) return v.u.l;
    if (v.t == V_DICT) {
        vlist *l = jv_list(r, v.u.d->n);
        for (int i = 0; i < v.u.d->n; i++) jv_push(r, l, (val){.t = V_STR, .u.s = v.u.d->k[i]});
        return l;
    }
    if (v.t == V_STR) {
        vlist *l = jv_list(r, (int)(v.u.s.n < 4 ? 4 : v.u.s.n > (1u << 24) ? (1u << 24) : v.u.s.n));
        for (size_t i = 0; i < v.u.s.n;) {
            size_t k = 1;
            while (i + k < v.u.s.n && ((unsigned char)v.u.s.p[i + k] & 0xC0) == 0x80) k++;
            val c = jv_str(r, v.u.s.p + i, k);
            jv_push(r, l, sstr_tainted(v.u.s) ? jv_taint(r, c) : c);
            i += k;
        }
        return l;
    }
    if (v.t == V_UNDEF) return jv_list(r, 1); /* Jinja2: an undefined iterates as empty */
    if (v.t == V_NONE) jv_err(r, n, "cannot iterate over none");
    jv_err(r, n, "value is not iterable");
}
void je_args(R *r, const node *n, args *a) {
    a->np = a->nk = 0;
    for (int i = 0; i < n->n; i++) {
        val v = je_eval(r, n->items[i]);
        if (n->names[i]) {
            if (a->nk == 8) jv_err(r, n, "too many keyword arguments");
            a->kn[a->nk] = n->names[i];
            a->kv[a->nk++] = v;
        } else {
            if (a->np == 8) jv_err(r, n, "too many arguments");
            a->pos[a->np++] = v;
        }
    }
}
val je_karg(const args *a, const char *name, int pos_index) {
    for (int i = 0; i < a->nk; i++)
        if (!strcmp(a->kn[i], name)) return a->kv[i];
    if (pos_index >= 0 && pos_index < a->np) return a->pos[pos_index];
    return vundef();
}

static void check_depth(R *r, const node *n) {
    if (r->depth > MAX_DEPTH) jv_err(r, n, "template nested too deeply");
}

static val call_func(R *r, const node *n, val fn, args *a) {
    if (fn.t == V_MACRO) return je_call_macro(r, n, fn.u.m, a);
    if (fn.t != V_FUNC) jv_err(r, n, "call of a value that is not a function");
    switch ((int)fn.u.i) {
    case F_RAISE: {
        val m = a->np ? jv_to_str(r, a->pos[0]) : vstr_lit("");
        /* the template's own words, without a line number */
        slm_errf(r->err, SLM_ERR_ARG, "template raised: %.*s", (int)(m.u.s.n > 400 ? 400 : m.u.s.n), m.u.s.p);
        longjmp(r->jb, 1);
    }
    case F_NAMESPACE: case F_DICT: {
        vdict *d = jv_dict(r, 4);
        d->ns = fn.u.i == F_NAMESPACE;
        if (a->np && a->pos[0].t == V_DICT)
            for (int i = 0; i < a->pos[0].u.d->n; i++) jv_dset(r, d, a->pos[0].u.d->k[i], a->pos[0].u.d->v[i]);
        for (int i = 0; i < a->nk; i++) jv_dsetc(r, d, a->kn[i], a->kv[i]);
        return (val){.t = V_DICT, .u.d = d};
    }
    case F_RANGE: {
        long long lo = 0, hi, st = 1;
        for (int i = 0; i < a->np; i++)
            if (a->pos[i].t != V_INT) jv_err(r, n, "range() needs integers");
        if (a->np == 1) hi = a->pos[0].u.i;
        else if (a->np >= 2) { lo = a->pos[0].u.i; hi = a->pos[1].u.i; if (a->np > 2) st = a->pos[2].u.i; }
        else jv_err(r, n, "range() needs arguments");
        if (st == 0) jv_err(r, n, "range() step cannot be zero");
        /* the count from unsigned differences: no overflow for any bounds and step */
        uint64_t cnt = 0;
        if (st > 0 && lo < hi) cnt = ((uint64_t)hi - (uint64_t)lo - 1) / (uint64_t)st + 1;
        if (st < 0 && lo > hi) cnt = ((uint64_t)lo - (uint64_t)hi - 1) / (0 - (uint64_t)st) + 1;
        jv_charge(r, cnt > UINT64_MAX / COST_ITEM ? UINT64_MAX : cnt * COST_ITEM);
        if (cnt > (1u << 24)) jv_fail(r, n, SLM_ERR_CAPACITY, "range() too long");
        vlist *l = jv_list(r, (int)cnt);
        for (uint64_t k = 0; k < cnt; k++) jv_push(r, l, vint((long long)((uint64_t)lo + k * (uint64_t)st)));
        return (val){.t = V_LIST, .u.l = l};
    }
    case F_STRFTIME: {
        if (r->vars && r->vars->date_string) return vstr_lit(r->vars->date_string);
        val f = a->np ? a->pos[0] : vundef();
        if (f.t != V_STR) jv_err(r, n, "strftime_now() needs a format string");
        time_t now = time(NULL);
        struct tm tmv;
        localtime_r(&now, &tmv);
        char buf[256];
        size_t k = strftime(buf, sizeof buf, f.u.s.p, &tmv);
        return jv_str(r, buf, k);
    }
    default: jv_err(r, n, "unknown function");
    }
}

val je_call_macro(R *r, const node *n, const node *m, args *a) {
    r->depth++;
    check_depth(r, n);
    frame *f = jv_frame(r, r->root);
    for (int i = 0; i < m->n; i++) {
        val v = je_karg(a, m->names[i], i);
        if (v.t == V_UNDEF && m->items[i]) v = je_eval(r, m->items[i]);
        jv_fset(r, f, m->names[i], v);
    }
    frame *saved = r->top;
    r->top = f;
    jv_out_push(r);
    je_exec_body(r, m->b);
    r->ctl = 0;
    val res = jv_out_pop(r);
    r->top = saved;
    r->depth--;
    return res;
}

/* a(args): a method of a string or mapping, a macro, or a global function */
static val eval_call(R *r, const node *n) {
    args a;
    if (n->a->kind == E_ATTR) {
        val o = je_eval(r, n->a->a);
        if (o.t == V_STR || (o.t == V_DICT && !o.u.d->ns)) {
            val *mm = o.t == V_DICT ? jv_dget(r, o.u.d, n->a->s, strlen(n->a->s)) : NULL;
            je_args(r, n, &a);
            if (mm && mm->t == V_MACRO) return je_call_macro(r, n, mm->u.m, &a);
            return jf_method(r, n, o, n->a->s, &a);
        }
        val fn = je_getattr(r, o, n->a->s);
        je_args(r, n, &a);
        return call_func(r, n, fn, &a);
    }
    val fn = je_eval(r, n->a);
    je_args(r, n, &a);
    return call_func(r, n, fn, &a);
}

static val eval_test(R *r, const node *n) {
    val v;
    /* `x is defined` must not fail on x.y of undefined x */
    if ((!strcmp(n->s, "defined") || !strcmp(n->s, "undefined")) && n->a->kind == E_ATTR) {
        val o = je_eval(r, n->a->a);
        v = o.t == V_UNDEF ? vundef() : je_getattr(r, o, n->a->s);
    } else {
        v = je_eval(r, n->a);
    }
    args a;
    je_args(r, n, &a);
    return vbool(jf_test(r, n, n->s, v, a.pos, a.np) != n->neg);
}

/* integer arithmetic: + - * // % ** (not /) */
static val arith_int(R *r, const node *n, int op, long long x, long long y) {
    long long z = 0;
    int ovf = 0;
    switch (op) {
    case '+': ovf = __builtin_add_overflow(x, y, &z); break;
    case '-': ovf = __builtin_sub_overflow(x, y, &z); break;
    case '*': ovf = __builtin_mul_overflow(x, y, &z); break;
    case OP_FDIV: case '%':
        if (y == 0) jv_err(r, n, "division by zero");
        if (y == -1) { /* x // -1 overflows for INT64_MIN; x % -1 is 0 */
            ovf = op == OP_FDIV && x == INT64_MIN;
            z = op == '%' || ovf ? 0 : -x;
            break;
        }
        z = op == '%' ? x % y : x / y;
        if (op == '%' && z != 0 && ((z < 0) != (y < 0))) z += y;
        if (op == OP_FDIV && (x % y != 0) && ((x < 0) != (y < 0))) z -= 1;
        break;
    case OP_POW:
        if (y < 0) { /* a float, as Python */
            if (x == 0) jv_err(r, n, "division by zero");
            return (val){.t = V_FLOAT, .u.f = __builtin_pow((double)x, (double)y)};
        }
        /* by squaring: at most 63 rounds before the result overflows (a base
         * that overflows when squared is needed again, so the result would) */
        z = 1;
        for (long long b = x, e = y; e && !ovf; ) {
            if (e & 1) ovf = __builtin_mul_overflow(z, b, &z);
            e >>= 1;
            if (e && !ovf) ovf = __builtin_mul_overflow(b, b, &b);
        }
        break;
    }
    if (ovf) jv_err(r, n, "integer overflow");
    return vint(z);
}

static val arith_float(R *r, const node *n, int op, double x, double y) {
    double z = 0;
    switch (op) {
    case '+': z = x + y; break;
    case '-': z = x - y; break;
    case '*': z = x * y; break;
    case '/': if (y == 0) jv_err(r, n, "division by zero"); z = x / y; break;
    case OP_FDIV: if (y == 0) jv_err(r, n, "division by zero"); z = __builtin_floor(x / y); break;
    case '%': if (y == 0) jv_err(r, n, "division by zero"); z = __builtin_fmod(x, y); if (z != 0 && ((z < 0) != (y < 0))) z += y; break;
    case OP_POW: z = __builtin_pow(x, y); break;
    }
    return (val){.t = V_FLOAT, .u.f = z};
}

/* a op b: comparisons, in, ~, + on strings / lists, * on a string, numbers */
static val eval_bin(R *r, const node *n, val a, val b) {
    int op = n->op;
    switch (op) {
    case OP_EQ: return vbool(jv_equal(r, a, b, 0));
    case OP_NE: return vbool(!jv_equal(r, a, b, 0));
    case '<': return vbool(jv_compare(r, n, a, b) < 0);
    case '>': return vbool(jv_compare(r, n, a, b) > 0);
    case OP_LE: return vbool(jv_compare(r, n, a, b) <= 0);
    case OP_GE: return vbool(jv_compare(r, n, a, b) >= 0);
    case OP_IN: return vbool(jv_contains(r, n, b, a));
    case OP_NOTIN: return vbool(!jv_contains(r, n, b, a));
    case '~': {
        sbuf sb = {0};
        jv_str_of(r, &sb, a, 0);
        jv_str_of(r, &sb, b, 0);
        return jv_sb_val(r, &sb);
    }
    default: break;
    }
    if (op == '+' && a.t == V_STR && b.t == V_STR) {
        sbuf sb = {0};
        jv_sb_put_str(r, &sb, a.u.s);
        jv_sb_put_str(r, &sb, b.u.s);
        return jv_sb_val(r, &sb);
    }
    if (op == '+' && a.t == V_LIST && b.t == V_LIST) {
        vlist *l = jv_list(r, a.u.l->n + b.u.l->n);
        for (int i = 0; i < a.u.l->n; i++) jv_push(r, l, a.u.l->v[i]);
        for (int i = 0; i < b.u.l->n; i++) jv_push(r, l, b.u.l->v[i]);
        return (val){.t = V_LIST, .u.l = l};
    }
    if (op == '*' && ((a.t == V_STR && b.t == V_INT) || (a.t == V_INT && b.t == V_STR))) {
        val s = a.t == V_STR ? a : b;
        long long k = a.t == V_INT ? a.u.i : b.u.i;
        if (k <= 0 || !s.u.s.n) return jv_str(r, "", 0);
        uint64_t total;
        if (!slm_mul_ok((uint64_t)k, s.u.s.n, &total) || total > ARENA_LIMIT)
            jv_fail(r, n, SLM_ERR_CAPACITY, "string too long");
        jv_charge(r, total); /* before the work */
        sbuf sb = {0};
        for (long long i = 0; i < k; i++) jv_sb_put_str(r, &sb, s.u.s);
        return jv_sb_val(r, &sb);
    }
    if (op == '*' && ((a.t == V_LIST && b.t == V_INT) || (a.t == V_INT && b.t == V_LIST))) {
        vlist *s = a.t == V_LIST ? a.u.l : b.u.l;
        long long k = a.t == V_INT ? a.u.i : b.u.i;
        uint64_t total = 0;
        if (k > 0 && (!slm_mul_ok((uint64_t)k, (uint64_t)s->n, &total) || total > (1u << 24)))
            jv_fail(r, n, SLM_ERR_CAPACITY, "list too long");
        vlist *l = jv_list(r, (int)total);
        for (long long i = 0; i < k && total; i++)
            for (int j = 0; j < s->n; j++) jv_push(r, l, s->v[j]);
        return (val){.t = V_LIST, .u.l = l};
    }
    if (!is_num(a) || !is_num(b)) {
        if (a.t == V_UNDEF || b.t == V_UNDEF) jv_err(r, n, "arithmetic on an undefined value");
        jv_err(r, n, "unsupported operand types for '%c'", op < 256 ? op : '?');
    }
    if (a.t != V_FLOAT && b.t != V_FLOAT && op != '/') return arith_int(r, n, op, a.u.i, b.u.i);
    return arith_float(r, n, op, num(a), num(b));
}

val je_eval(R *r, const node *n) {
    const node *prev = r->cur;
    r->cur = n;
    r->depth++;
    check_depth(r, n);
    jv_charge(r, COST_NODE);
    val res = vundef();
    switch (n->kind) {
    case E_LIT: res = n->lit; break;
    case E_NAME: res = jv_lookup(r, n->s); break;
    case E_ATTR: {
        val o = je_eval(r, n->a);
        if (o.t == V_UNDEF) jv_err(r, n, "'%s' of an undefined value", n->s);
        res = je_getattr(r, o, n->s);
        break;
    }
    case E_ITEM: {
        val o = je_eval(r, n->a);
        res = getitem(r, n, o, je_eval(r, n->b));
        break;
    }
    case E_SLICE: {
        val o = je_eval(r, n->a);
        val a = n->b ? je_eval(r, n->b) : vundef(), b = n->c ? je_eval(r, n->c) : vundef(),
            c = n->d ? je_eval(r, n->d) : vundef();
        res = do_slice(r, n, o, a, b, c);
        break;
    }
    case E_CALL: res = eval_call(r, n); break;
    case E_FILTER: {
        val v = je_eval(r, n->a);
        args a;
        je_args(r, n, &a);
        res = jf_filter(r, n, n->s, v, &a);
        break;
    }
    case E_TEST: res = eval_test(r, n); break;
    case E_NOT: res = vbool(!jv_truthy(je_eval(r, n->a))); break;
    case E_AND: {
        val a = je_eval(r, n->a);
        res = jv_truthy(a) ? je_eval(r, n->b) : a;
        break;
    }
    case E_OR: {
        val a = je_eval(r, n->a);
        res = jv_truthy(a) ? a : je_eval(r, n->b);
        break;
    }
    case E_NEG: {
        val a = je_eval(r, n->a);
        if (a.t == V_INT || a.t == V_BOOL) {
            if (a.u.i == (-9223372036854775807LL - 1)) jv_err(r, n, "integer overflow");
            res = vint(-a.u.i);
        } else if (a.t == V_FLOAT) {
            res = (val){.t = V_FLOAT, .u.f = -a.u.f};
        } else {
            jv_err(r, n, "unary '-' needs a number");
        }
        break;
    }
    case E_COND: res = jv_truthy(je_eval(r, n->b)) ? je_eval(r, n->a) : n->c ? je_eval(r, n->c) : vundef(); break;
    case E_LIST: {
        vlist *l = jv_list(r, n->n);
        l->tuple = n->op == 1;
        for (int i = 0; i < n->n; i++) jv_push(r, l, je_eval(r, n->items[i]));
        res = (val){.t = V_LIST, .u.l = l};
        break;
    }
    case E_DICT: {
        vdict *d = jv_dict(r, n->n / 2);
        for (int i = 0; i + 1 < n->n; i += 2) {
            val k = je_eval(r, n->items[i]);
            if (k.t != V_STR) k = jv_to_str(r, k);
            jv_dset(r, d, k.u.s, je_eval(r, n->items[i + 1]));
        }
        res = (val){.t = V_DICT, .u.d = d};
        break;
    }
    case E_BIN: res = eval_bin(r, n, je_eval(r, n->a), je_eval(r, n->b)); break;
    default: jv_err(r, n, "bad expression node");
    }
    r->depth--;
    r->cur = prev;
    return res;
}
static void exec_stmt(R *r, const node *n);

void je_exec_body(R *r, const node *b) {
    for (int i = 0; i < b->n && !r->ctl; i++) exec_stmt(r, b->items[i]);
}

static void set_var(R *r, const node *n, val v) {
    if (n->s2) {
        val ns = jv_lookup(r, n->s);
        if (ns.t != V_DICT || !ns.u.d->ns) jv_err(r, n, "'%s' is not a namespace", n->s);
        jv_dsetc(r, ns.u.d, n->s2, v);
    } else {
        jv_fset(r, r->top, n->s, v);
    }
}

/* bind a loop item to the targets in frame f (reset first: each iteration
 * starts with no variables of its own) */
static void bind_targets(R *r, const node *n, frame *f, val it) {
    f->n = 0;
    if (n->n_names == 1) {
        jv_fset(r, f, n->names[0], it);
        return;
    }
    if (it.t != V_LIST || it.u.l->n != n->n_names) jv_err(r, n, "cannot unpack loop item");
    for (int k = 0; k < n->n_names; k++) jv_fset(r, f, n->names[k], it.u.l->v[k]);
}

/* {% for names in a [if d] %} b {% else %} c {% endfor %}. One frame and one
 * `loop` mapping serve every iteration (Jinja2 also keeps one loop object),
 * so a long loop costs budget, not memory. */
static void exec_for(R *r, const node *n) {
    vlist *src = je_iter(r, n, je_eval(r, n->a));
    frame *outer = r->top, *f = jv_frame(r, outer);
    vlist *items = src;
    if (n->d) { /* the loop filter runs before loop.* are computed */
        items = jv_list(r, src->n);
        for (int i = 0; i < src->n; i++) {
            jv_charge(r, COST_ITEM);
            bind_targets(r, n, f, src->v[i]);
            r->top = f;
            int keep = jv_truthy(je_eval(r, n->d));
            r->top = outer;
            if (keep) jv_push(r, items, src->v[i]);
        }
    }
    int len = items->n;
    vdict *lp = jv_dict(r, 10);
    for (int i = 0; i < len; i++) {
        jv_charge(r, COST_ITEM);
        bind_targets(r, n, f, items->v[i]);
        jv_dsetc(r, lp, "index", vint(i + 1));
        jv_dsetc(r, lp, "index0", vint(i));
        jv_dsetc(r, lp, "revindex", vint(len - i));
        jv_dsetc(r, lp, "revindex0", vint(len - i - 1));
        jv_dsetc(r, lp, "first", vbool(i == 0));
        jv_dsetc(r, lp, "last", vbool(i == len - 1));
        jv_dsetc(r, lp, "length", vint(len));
        jv_dsetc(r, lp, "previtem", i > 0 ? items->v[i - 1] : vundef());
        jv_dsetc(r, lp, "nextitem", i + 1 < len ? items->v[i + 1] : vundef());
        jv_fset(r, f, "loop", (val){.t = V_DICT, .u.d = lp});
        r->top = f;
        je_exec_body(r, n->b);
        r->top = outer;
        if (r->ctl == 1) { r->ctl = 0; break; }
        r->ctl = 0;
    }
    if (len == 0 && n->c) je_exec_body(r, n->c);
}

static void exec_stmt(R *r, const node *n) {
    const node *prev = r->cur;
    r->cur = n;
    jv_charge(r, COST_NODE);
    r->depth++;
    check_depth(r, n);
    switch (n->kind) {
    case S_TEXT: jv_emit(r, n->s, n->sn); break;
    case S_OUT: {
        val v = je_eval(r, n->a);
        if (v.t == V_STR) jv_emit_str(r, v.u.s);
        else {
            sbuf sb = {0};
            jv_str_of(r, &sb, v, 0);
            jv_emit_str(r, (sstr){sb.p ? sb.p : "", sb.n, sb.m});
        }
        break;
    }
    case S_BODY: je_exec_body(r, n); break;
    case S_IF: {
        const node *c = n;
        while (c && c->kind == S_IF) {
            if (jv_truthy(je_eval(r, c->a))) {
                je_exec_body(r, c->b);
                c = NULL;
                break;
            }
            c = c->c;
        }
        if (c) je_exec_body(r, c);
        break;
    }
    case S_FOR: exec_for(r, n); break;
    case S_SET:
        if (n->a) {
            set_var(r, n, je_eval(r, n->a));
        } else {
            /* block form: render the body to a string */
            jv_out_push(r);
            je_exec_body(r, n->b);
            val v = jv_out_pop(r);
            /* apply the filter chain, innermost first */
            const node *chain[32];
            int nc = 0;
            for (const node *f = n->c; f && nc < 32; f = f->a) chain[nc++] = f;
            for (int i = nc - 1; i >= 0; i--) {
                args a;
                je_args(r, chain[i], &a);
                v = jf_filter(r, chain[i], chain[i]->s, v, &a);
            }
            set_var(r, n, v);
        }
        break;
    case S_MACRO: jv_fset(r, r->top, n->s, (val){.t = V_MACRO, .u.m = n}); break;
    case S_BREAK: r->ctl = 1; break;
    case S_CONTINUE: r->ctl = 2; break;
    default: jv_err(r, n, "bad statement node");
    }
    r->depth--;
    r->cur = prev;
}

/* render; NULL after an error (longjmp lands here). The caller frees the arena. */
char *je_render(R *r) {
    if (setjmp(r->jb)) {
        slm_xfree(r->out);
        r->out = NULL;
        slm_xfree(r->om);
        r->om = NULL;
        return NULL;
    }
    jv_budget_start(r, r->vars);
    r->root = r->top = jv_frame(r, NULL);
    vlist *ml = jv_list(r, r->n_msgs);
    for (int i = 0; i < r->n_msgs; i++) {
        vdict *d = jv_dict(r, 2);
        /* the caller's messages are the tainted input */
        jv_dsetc(r, d, "role", jv_taint(r, vstr_lit(r->msgs[i].role ? r->msgs[i].role : "")));
        jv_dsetc(r, d, "content", jv_taint(r, vstr_lit(r->msgs[i].content ? r->msgs[i].content : "")));
        if (r->msgs[i].reasoning_content)
            jv_dsetc(r, d, "reasoning_content", jv_taint(r, vstr_lit(r->msgs[i].reasoning_content)));
        if (r->msgs[i].tool_calls) jv_dsetc(r, d, "tool_calls", jv_json_value(r, r->msgs[i].tool_calls, "tool_calls"));
        if (r->msgs[i].tool_call_id) jv_dsetc(r, d, "tool_call_id", jv_taint(r, vstr_lit(r->msgs[i].tool_call_id)));
        if (r->msgs[i].name) jv_dsetc(r, d, "name", jv_taint(r, vstr_lit(r->msgs[i].name)));
        jv_push(r, ml, (val){.t = V_DICT, .u.d = d});
    }
    const slm_tmpl_vars *vars = r->vars;
    jv_fset(r, r->root, "messages", (val){.t = V_LIST, .u.l = ml});
    jv_fset(r, r->root, "add_generation_prompt", vbool(vars && vars->add_generation_prompt));
    jv_fset(r, r->root, "bos_token", vstr_lit(vars && vars->bos_token ? vars->bos_token : ""));
    jv_fset(r, r->root, "eos_token", vstr_lit(vars && vars->eos_token ? vars->eos_token : ""));
    /* as Hugging Face's apply_chat_template: tools none unless given; no documents */
    jv_fset(r, r->root, "tools", vars && vars->tools ? jv_json_value(r, vars->tools, "tools") : vnone());
    jv_fset(r, r->root, "documents", vnone());
    for (int i = 0; vars && i < vars->n_kwargs; i++)
        if (vars->kwargs[i]) jv_set_kwargs(r, vars->kwargs[i]);
    je_exec_body(r, r->tm->body);
    char *out = r->out;
    r->out = NULL;
    if (!out) out = slm_strdup("");
    if (!out) slm_errf(r->err, SLM_ERR_NOMEM, "out of memory");
    return out;
}
