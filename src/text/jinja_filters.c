/* text/jinja_filters.c — the chat-template library (see
 * jinja_internal.h): tests (`is defined`), filters (`| tojson`) and the
 * methods of strings and mappings (`.strip()`, `.items()`).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "text/jinja_internal.h"

static const char *const known_filters[] = {
    "trim", "length", "count", "tojson", "join", "list", "selectattr", "rejectattr", "select", "reject",
    "map", "items", "string", "first", "last", "lower", "upper", "default", "d", "replace", "int", "float",
    "abs", "capitalize", "title", "safe", "reverse", "unique", "e", "escape", "indent", "sort", "dictsort",
    "sum", "min", "max", "round", "wordcount", "center", "batch", NULL}; /* the last three: parsed, fail when run */
static const char *const known_tests[] = {
    "defined", "undefined", "none", "string", "number", "integer", "float", "mapping", "iterable", "sequence",
    "boolean", "true", "false", "odd", "even", "divisibleby", "equalto", "eq", "ne", "lt", "gt", "le", "ge",
    "in", "sameas", "callable", "lower", "upper", NULL};
static int in_list(const char *const *l, const char *s) {
    for (; *l; l++)
        if (!strcmp(*l, s)) return 1;
    return 0;
}

int jf_known_filter(const char *name) { return in_list(known_filters, name); }
int jf_known_test(const char *name) { return in_list(known_tests, name); }

int jf_test(R *r, const node *n, const char *t, val v, val *argv, int na) {
    val a0 = na > 0 ? argv[0] : vundef();
    if (!strcmp(t, "defined")) return v.t != V_UNDEF;
    if (!strcmp(t, "undefined")) return v.t == V_UNDEF;
    if (!strcmp(t, "none")) return v.t == V_NONE;
    if (!strcmp(t, "string")) return v.t == V_STR;
    if (!strcmp(t, "number")) return is_num(v); /* a bool is a number in Python; not an integer */
    if (!strcmp(t, "integer")) return v.t == V_INT;
    if (!strcmp(t, "float")) return v.t == V_FLOAT;
    if (!strcmp(t, "mapping")) return v.t == V_DICT;
    /* an undefined is iterable and a sequence in Jinja2 (it has __iter__ and __len__) */
    if (!strcmp(t, "iterable") || !strcmp(t, "sequence"))
        return v.t == V_LIST || v.t == V_DICT || v.t == V_STR || v.t == V_UNDEF;
    if (!strcmp(t, "boolean")) return v.t == V_BOOL;
    if (!strcmp(t, "true")) return v.t == V_BOOL && v.u.i;
    if (!strcmp(t, "false")) return v.t == V_BOOL && !v.u.i;
    if (!strcmp(t, "callable")) return v.t == V_FUNC || v.t == V_MACRO;
    if (!strcmp(t, "odd") || !strcmp(t, "even")) {
        if (v.t != V_INT) jv_err(r, n, "test '%s' needs an integer", t);
        return (int)(((v.u.i % 2) + 2) % 2) == (t[0] == 'o');
    }
    if (!strcmp(t, "divisibleby")) {
        if (v.t != V_INT || a0.t != V_INT || a0.u.i == 0) jv_err(r, n, "test 'divisibleby' needs non-zero integers");
        return a0.u.i == -1 ? 1 : v.u.i % a0.u.i == 0;
    }
    if (!strcmp(t, "equalto") || !strcmp(t, "eq") || !strcmp(t, "sameas")) return jv_equal(r, v, a0, 0);
    if (!strcmp(t, "ne")) return !jv_equal(r, v, a0, 0);
    if (!strcmp(t, "lt")) return jv_compare(r, n, v, a0) < 0;
    if (!strcmp(t, "gt")) return jv_compare(r, n, v, a0) > 0;
    if (!strcmp(t, "le")) return jv_compare(r, n, v, a0) <= 0;
    if (!strcmp(t, "ge")) return jv_compare(r, n, v, a0) >= 0;
    if (!strcmp(t, "in")) return jv_contains(r, n, a0, v);
    if (!strcmp(t, "lower") || !strcmp(t, "upper")) {
        /* Python's islower / isupper: no cased letter of the other case, and at least one */
        if (v.t != V_STR) return 0;
        jv_charge(r, v.u.s.n);
        int cased = 0;
        for (size_t i = 0; i < v.u.s.n; i++) {
            char c = v.u.s.p[i];
            if (t[0] == 'l' ? (c >= 'A' && c <= 'Z') : (c >= 'a' && c <= 'z')) return 0;
            cased |= (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
        }
        return cased;
    }
    jv_err(r, n, "unsupported test '%s'", t);
}

static int is_ws(char c) { return is_space((unsigned char)c); }
static val strip_str(R *r, val s, val chars, int left, int right) {
    size_t b = 0, e = s.u.s.n;
    const char *p = s.u.s.p;
    unsigned char set[256] = {0}; /* the bytes to strip */
    if (chars.t == V_STR) {
        jv_charge(r, chars.u.s.n);
        for (size_t i = 0; i < chars.u.s.n; i++) set[(unsigned char)chars.u.s.p[i]] = 1;
    } else {
        for (int c = 0; c < 256; c++) set[c] = (unsigned char)is_ws((char)c);
    }
    jv_charge(r, s.u.s.n);
    if (left) while (b < e && set[(unsigned char)p[b]]) b++;
    if (right) while (e > b && set[(unsigned char)p[e - 1]]) e--;
    return jv_str(r, p + b, e - b); /* a copy: strings stay NUL-terminated */
}

static val replace_str(R *r, val s, val a, val b, long long count) {
    if (a.t != V_STR || b.t != V_STR) jv_err(r, NULL, "replace() needs strings");
    sbuf sb = {0};
    size_t i = 0;
    long long done = 0;
    if (a.u.s.n == 0) {
        /* Python inserts b between characters */
        for (; i <= s.u.s.n; i++) {
            if (count < 0 || done < count) { jv_sb_put(r, &sb, b.u.s.p, b.u.s.n); done++; }
            if (i < s.u.s.n) jv_sb_put(r, &sb, s.u.s.p + i, 1);
        }
        return jv_sb_val(r, &sb);
    }
    /* each byte of s is searched once (jv_find charges it) */
    while (i < s.u.s.n && (count < 0 || done < count)) {
        const char *q = jv_find(r, s.u.s.p + i, s.u.s.n - i, a.u.s.p, a.u.s.n);
        if (!q) break;
        size_t at = (size_t)(q - s.u.s.p);
        jv_sb_put(r, &sb, s.u.s.p + i, at - i);
        jv_sb_put(r, &sb, b.u.s.p, b.u.s.n);
        i = at + a.u.s.n;
        done++;
    }
    jv_sb_put(r, &sb, s.u.s.p + i, s.u.s.n - i);
    return jv_sb_val(r, &sb);
}

/* s.split(sep=None, maxsplit=-1), as Python */
static val split_str(R *r, const node *n, val s, val sep, val maxsplit) {
    vlist *l = jv_list(r, 4);
    const char *p = s.u.s.p, *e = p + s.u.s.n;
    long long left = maxsplit.t == V_INT && maxsplit.u.i >= 0 ? maxsplit.u.i : -1;
    jv_charge(r, s.u.s.n);
    if (sep.t != V_STR) { /* runs of whitespace; none at the ends */
        while (p < e && is_ws(*p)) p++;
        while (p < e) {
            const char *q = p;
            if (left != 0) while (q < e && !is_ws(*q)) q++;
            else q = e;
            jv_push(r, l, jv_str(r, p, (size_t)(q - p))); /* the rest keeps trailing space */
            if (left > 0) left--;
            p = q;
            while (p < e && is_ws(*p)) p++;
        }
        return (val){.t = V_LIST, .u.l = l};
    }
    if (!sep.u.s.n) jv_err(r, n, "split(): empty separator");
    for (;;) {
        const char *q = left != 0 ? jv_find(r, p, (size_t)(e - p), sep.u.s.p, sep.u.s.n) : NULL;
        if (!q) { /* a suffix of s: NUL-terminated already, no copy */
            jv_push(r, l, (val){.t = V_STR, .u.s = {.p = p, .n = (size_t)(e - p)}});
            break;
        }
        jv_push(r, l, jv_str(r, p, (size_t)(q - p)));
        p = q + sep.u.s.n;
        if (left > 0) left--;
    }
    return (val){.t = V_LIST, .u.l = l};
}

/* ASCII case mapping. mode 0 lower, 1 upper, 2 capitalize, 3 Python's
 * str.title (a word starts after any non-letter), 4 Jinja2's title filter (a
 * word starts after whitespace or one of -({[<) */
static val case_str(R *r, val s, int mode) {
    val o = jv_str(r, s.u.s.p, s.u.s.n);
    char *p = (char *)o.u.s.p;
    int start = 1;
    for (size_t i = 0; i < o.u.s.n; i++) {
        char c = p[i];
        int up = mode == 1 || ((mode == 2 && i == 0) || (mode >= 3 && start));
        if (up && c >= 'a' && c <= 'z') p[i] = (char)(c - 32);
        if (!up && c >= 'A' && c <= 'Z') p[i] = (char)(c + 32);
        if (mode == 4) start = is_ws(c) || (c && strchr("-({[<", c));
        else start = !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
    }
    return o;
}


static val method_impl(R *r, const node *n, val o, const char *name, args *a);

/* Whatever a filter or method makes from tainted input is tainted. */
static int args_tainted(val v, const args *a) {
    if (jv_has_taint(v, 0)) return 1;
    for (int i = 0; i < a->np; i++)
        if (jv_has_taint(a->pos[i], 0)) return 1;
    for (int i = 0; i < a->nk; i++)
        if (jv_has_taint(a->kv[i], 0)) return 1;
    return 0;
}

val jf_method(R *r, const node *n, val o, const char *name, args *a) {
    const int t = args_tainted(o, a);
    val res = method_impl(r, n, o, name, a);
    return t ? jv_taint(r, res) : res;
}

static val method_impl(R *r, const node *n, val o, const char *name, args *a) {
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
            /* a string or a tuple (list) of strings */
            int na = a0.t == V_LIST ? a0.u.l->n : 1;
            for (int i = 0; i < na; i++) {
                val x = a0.t == V_LIST ? a0.u.l->v[i] : a0;
                if (x.t != V_STR) jv_err(r, n, "%s() needs a string", name);
                if (x.u.s.n > o.u.s.n) continue;
                jv_charge(r, x.u.s.n);
                const char *at = name[0] == 's' ? o.u.s.p : o.u.s.p + o.u.s.n - x.u.s.n;
                if (!memcmp(at, x.u.s.p, x.u.s.n)) return vbool(1);
            }
            return vbool(0);
        }
        if (!strcmp(name, "split")) return split_str(r, n, o, a0, a1);

    } else if (o.t == V_DICT) {
        if (!strcmp(name, "items") || !strcmp(name, "keys") || !strcmp(name, "values")) {
            vlist *l = jv_list(r, o.u.d->n);
            for (int i = 0; i < o.u.d->n; i++) {
                val k = {.t = V_STR, .u.s = o.u.d->k[i]};
                if (name[0] == 'k') jv_push(r, l, k);
                else if (name[0] == 'v') jv_push(r, l, o.u.d->v[i]);
                else {
                    vlist *pr = jv_list(r, 2);
                    pr->tuple = 1;
                    jv_push(r, pr, k);
                    jv_push(r, pr, o.u.d->v[i]);
                    jv_push(r, l, (val){.t = V_LIST, .u.l = pr});
                }
            }
            return (val){.t = V_LIST, .u.l = l};
        }
        if (!strcmp(name, "get")) {
            if (a0.t != V_STR) return a->np > 1 ? a1 : vnone();
            val *v = jv_dget(r, o.u.d, a0.u.s.p, a0.u.s.n);
            return v ? *v : a->np > 1 ? a1 : vnone();
        }
        /* a macro or function stored in a mapping */
        val *v = jv_dget(r, o.u.d, name, strlen(name));
        if (v && v->t == V_MACRO) return je_call_macro(r, n, v->u.m, a);
    }
    jv_err(r, n, "unsupported method '%s'", name);
}

static int attr_test_keep(R *r, const node *n, val item, args *a, int attr_mode, int reject) {
    val x = item;
    int first = 0;
    if (attr_mode) {
        if (a->np < 1 || a->pos[0].t != V_STR) jv_err(r, n, "selectattr/rejectattr need an attribute name");
        x = je_getattr(r, item, a->pos[0].u.s.p);
        first = 1;
    }
    int keep;
    if (a->np <= first) {
        keep = jv_truthy(x);
    } else {
        if (a->pos[first].t != V_STR) jv_err(r, n, "test name must be a string");
        const char *t = a->pos[first].u.s.p;
        if (!jf_known_test(t) && strcmp(t, "==") && strcmp(t, "!=")) jv_err(r, n, "unsupported test '%s'", t);
        if (!strcmp(t, "==")) t = "eq";
        if (!strcmp(t, "!=")) t = "ne";
        keep = jf_test(r, n, t, x, a->pos + first + 1, a->np - first - 1);
    }
    return reject ? !keep : keep;
}

/* ---- filters: one function each, found by name in FILTERS ------------------ */

#define FILTER(name) static val name(R *r, const node *n, const char *f, val v, args *a)
#define A0 (a->np > 0 ? a->pos[0] : vundef())

FILTER(f_safe) {
    (void)a;
    if (f[0] != 's') jv_err(r, n, "filter 'escape' is not supported");
    return v;
}
FILTER(f_trim) {
    (void)f;
    if (v.t != V_STR) v = jv_to_str(r, v);
    return strip_str(r, v, A0, 1, 1);
}
FILTER(f_length) {
    (void)f, (void)a;
    if (v.t == V_STR) {
        long long k = 0;
        jv_charge(r, v.u.s.n);
        for (size_t i = 0; i < v.u.s.n; i++) k += ((unsigned char)v.u.s.p[i] & 0xC0) != 0x80;
        return vint(k);
    }
    if (v.t == V_LIST) return vint(v.u.l->n);
    if (v.t == V_DICT) return vint(v.u.d->n);
    if (v.t == V_UNDEF) return vint(0);
    jv_err(r, n, "length of a value without one");
}
FILTER(f_tojson) {
    (void)f, (void)n;
    val ind = je_karg(a, "indent", 0);
    sbuf sb = {0};
    jv_json(r, &sb, v, ind.t == V_INT ? (int)(ind.u.i < 0 ? 0 : ind.u.i > 16 ? 16 : ind.u.i) : -1, 0);
    return jv_sb_val(r, &sb);
}
FILTER(f_string) {
    (void)f, (void)n, (void)a;
    return jv_to_str(r, v);
}
FILTER(f_list) {
    (void)f, (void)a;
    return (val){.t = V_LIST, .u.l = je_iter(r, n, v)};
}
FILTER(f_join) {
    (void)f;
    vlist *l = je_iter(r, n, v);
    val sep = A0.t == V_STR ? A0 : vstr_lit("");
    val attr = je_karg(a, "attribute", 1);
    sbuf sb = {0};
    for (int i = 0; i < l->n; i++) {
        jv_charge(r, COST_ITEM);
        if (i) jv_sb_put(r, &sb, sep.u.s.p, sep.u.s.n);
        val x = attr.t == V_STR ? je_getattr(r, l->v[i], attr.u.s.p) : l->v[i];
        jv_str_of(r, &sb, x, 0);
    }
    return jv_sb_val(r, &sb);
}
FILTER(f_select) { /* select, reject, selectattr, rejectattr */
    vlist *l = je_iter(r, n, v), *o = jv_list(r, l->n);
    int attr_mode = strstr(f, "attr") != NULL, rej = f[0] == 'r';
    for (int i = 0; i < l->n; i++) {
        jv_charge(r, COST_ITEM);
        if (attr_test_keep(r, n, l->v[i], a, attr_mode, rej)) jv_push(r, o, l->v[i]);
    }
    return (val){.t = V_LIST, .u.l = o};
}
FILTER(f_map) {
    (void)f;
    vlist *l = je_iter(r, n, v), *o = jv_list(r, l->n);
    val attr = je_karg(a, "attribute", -1), a0 = A0;
    for (int i = 0; i < l->n; i++) {
        jv_charge(r, COST_ITEM);
        if (attr.t == V_STR) {
            val x = je_getattr(r, l->v[i], attr.u.s.p);
            if (x.t == V_UNDEF) x = je_karg(a, "default", -1);
            jv_push(r, o, x);
        } else if (a0.t == V_STR) {
            args rest = *a;
            rest.np = a->np - 1;
            memmove(rest.pos, a->pos + 1, sizeof(val) * (size_t)rest.np);
            const char *fn = a0.u.s.p;
            if (!jf_known_filter(fn)) jv_err(r, n, "unsupported filter '%s'", fn);
            jv_push(r, o, jf_filter(r, n, fn, l->v[i], &rest));
        } else {
            jv_err(r, n, "map() needs a filter name or attribute=");
        }
    }
    return (val){.t = V_LIST, .u.l = o};
}
FILTER(f_items) {
    (void)f, (void)a;
    if (v.t == V_UNDEF || v.t == V_NONE) return (val){.t = V_LIST, .u.l = jv_list(r, 1)};
    if (v.t != V_DICT) jv_err(r, n, "items needs a mapping");
    args none = {0};
    return jf_method(r, n, v, "items", &none);
}
FILTER(f_first) { /* first, last */
    (void)a;
    vlist *l = je_iter(r, n, v);
    if (!l->n) return vundef();
    return f[0] == 'f' ? l->v[0] : l->v[l->n - 1];
}
FILTER(f_case) { /* lower, upper, capitalize, title */
    (void)n, (void)a;
    v = jv_to_str(r, v);
    return case_str(r, v, f[0] == 'l' ? 0 : f[0] == 'u' ? 1 : f[0] == 'c' ? 2 : 4);
}
FILTER(f_default) {
    (void)r, (void)n, (void)f;
    val boolean = je_karg(a, "boolean", 1);
    if (v.t == V_UNDEF || (jv_truthy(boolean) && !jv_truthy(v))) return a->np ? A0 : vstr_lit("");
    return v;
}
FILTER(f_replace) {
    (void)n, (void)f;
    v = jv_to_str(r, v);
    val c = a->np > 2 ? a->pos[2] : vundef();
    return replace_str(r, v, A0, a->np > 1 ? a->pos[1] : vundef(), c.t == V_INT ? c.u.i : -1);
}
/* float -> int as Python's int(): NaN has no value (*ok = 0), infinities and
 * values past the int64 range overflow (an error: Python would make a big int) */
static long long float_to_int(R *r, const node *n, double f, int *ok) {
    *ok = f == f;
    if (!*ok) return 0;
    if (!(f > -9223372036854775808.0 - 1024 && f < 9223372036854775808.0)) jv_err(r, n, "integer overflow");
    return (long long)f; /* truncates; |f| < 2^63 here */
}

/* the int filter: Jinja2's do_int(value, default=0): int(value), else
 * int(float(value)), else the default */
FILTER(f_int) {
    (void)f;
    if (v.t == V_UNDEF) jv_err(r, n, "int of an undefined value");
    val dflt = je_karg(a, "default", 0);
    if (dflt.t == V_UNDEF) dflt = vint(0);
    int ok;
    if (v.t == V_INT) return v;
    if (v.t == V_BOOL) return vint(v.u.i);
    if (v.t == V_FLOAT) {
        long long x = float_to_int(r, n, v.u.f, &ok);
        return ok ? vint(x) : dflt;
    }
    if (v.t != V_STR || v.u.s.n > 62) return dflt;
    /* int(): optional whitespace and sign, digits with single '_' between them */
    char buf[64];
    size_t k = 0, i = 0, e = v.u.s.n;
    const char *p = v.u.s.p;
    while (i < e && is_ws(p[i])) i++;
    while (e > i && is_ws(p[e - 1])) e--;
    for (size_t q = i; q < e; q++) {
        if (p[q] == '_' && q > i && q + 1 < e && p[q - 1] >= '0' && p[q - 1] <= '9' && p[q + 1] >= '0' && p[q + 1] <= '9')
            continue;
        buf[k++] = p[q];
    }
    buf[k] = 0;
    char *end;
    errno = 0;
    long long x = strtoll(buf, &end, 10);
    if (k && !*end && end != buf && buf[0] != ' ') {
        if (errno == ERANGE) jv_err(r, n, "integer overflow");
        return vint(x);
    }
    if (strpbrk(buf, "xXpP")) return dflt; /* strtod's hex floats are not Python's */
    double d = strtod(buf, &end);
    if (!k || *end || end == buf) return dflt;
    x = float_to_int(r, n, d, &ok);
    return ok ? vint(x) : dflt;
}
FILTER(f_float) {
    (void)f, (void)a;
    if (v.t == V_UNDEF) jv_err(r, n, "float of an undefined value");
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
FILTER(f_abs) {
    (void)f, (void)a;
    if (v.t == V_INT) {
        if (v.u.i == INT64_MIN) jv_err(r, n, "integer overflow");
        return vint(v.u.i < 0 ? -v.u.i : v.u.i);
    }
    if (v.t == V_FLOAT) return (val){.t = V_FLOAT, .u.f = v.u.f < 0 ? -v.u.f : v.u.f};
    jv_err(r, n, "abs needs a number");
}
FILTER(f_reverse) {
    (void)f, (void)a;
    if (v.t == V_STR) {
        val o = jv_str(r, v.u.s.p, v.u.s.n);
        char *p = (char *)o.u.s.p;
        for (size_t i = 0; i < o.u.s.n / 2; i++) {
            char t = p[i];
            p[i] = p[o.u.s.n - 1 - i];
            p[o.u.s.n - 1 - i] = t;
        }
        return o;
    }
    vlist *l = je_iter(r, n, v), *o = jv_list(r, l->n);
    for (int i = l->n - 1; i >= 0; i--) jv_push(r, o, l->v[i]);
    return (val){.t = V_LIST, .u.l = o};
}
FILTER(f_unique) {
    (void)f, (void)a;
    vlist *l = je_iter(r, n, v), *o = jv_list(r, l->n);
    for (int i = 0; i < l->n; i++) {
        jv_charge(r, COST_ITEM);
        int seen = 0;
        for (int j = 0; j < o->n && !seen; j++) seen = jv_equal(r, o->v[j], l->v[i], 0);
        if (!seen) jv_push(r, o, l->v[i]);
    }
    return (val){.t = V_LIST, .u.l = o};
}
FILTER(f_sum) { /* sum, min, max */
    (void)a;
    vlist *l = je_iter(r, n, v);
    if (f[1] == 'u') {
        long long s = 0;
        for (int i = 0; i < l->n; i++) {
            if (l->v[i].t != V_INT) jv_err(r, n, "sum needs integers");
            if (__builtin_add_overflow(s, l->v[i].u.i, &s)) jv_err(r, n, "integer overflow");
        }
        return vint(s);
    }
    if (!l->n) return vundef();
    val best = l->v[0];
    for (int i = 1; i < l->n; i++) {
        int c = jv_compare(r, n, l->v[i], best);
        if (f[1] == 'i' ? c < 0 : c > 0) best = l->v[i];
    }
    return best;
}
FILTER(f_indent) {
    (void)n, (void)f;
    v = jv_to_str(r, v);
    long long w = A0.t == V_INT ? A0.u.i : 4;
    if (w < 0 || w > 64) w = 4;
    val first = je_karg(a, "first", 1);
    sbuf sb = {0};
    for (size_t i = 0; i < v.u.s.n; i++) {
        if ((i == 0 && jv_truthy(first)) || (i > 0 && v.u.s.p[i - 1] == '\n' && v.u.s.p[i] != '\n'))
            for (long long k = 0; k < w; k++) jv_sb_put(r, &sb, " ", 1);
        jv_sb_put(r, &sb, v.u.s.p + i, 1);
    }
    return jv_sb_val(r, &sb);
}

/* sorting: a stable merge sort; keys compared with jv_compare, strings
 * without case unless case_sensitive (Jinja2's default) */
typedef struct sortkey {
    val key, item;
} sortkey;

static int key_cmp(R *r, const node *n, val a, val b, int case_sensitive) {
    if (case_sensitive || a.t != V_STR || b.t != V_STR) return jv_compare(r, n, a, b);
    size_t m = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
    jv_charge(r, m);
    for (size_t i = 0; i < m; i++) {
        int x = (unsigned char)a.u.s.p[i], y = (unsigned char)b.u.s.p[i];
        if (x >= 'A' && x <= 'Z') x += 32;
        if (y >= 'A' && y <= 'Z') y += 32;
        if (x != y) return x < y ? -1 : 1;
    }
    return (a.u.s.n > b.u.s.n) - (a.u.s.n < b.u.s.n);
}

static void merge_sort(R *r, const node *n, sortkey *v, sortkey *tmp, int len, int cs, int rev) {
    if (len < 2) return;
    int h = len / 2;
    merge_sort(r, n, v, tmp, h, cs, rev);
    merge_sort(r, n, v + h, tmp, len - h, cs, rev);
    int i = 0, j = h, k = 0;
    while (i < h && j < len) {
        jv_charge(r, COST_ITEM);
        int c = key_cmp(r, n, v[j].key, v[i].key, cs);
        if (rev ? c > 0 : c < 0) tmp[k++] = v[j++];
        else tmp[k++] = v[i++];
    }
    while (i < h) tmp[k++] = v[i++];
    while (j < len) tmp[k++] = v[j++];
    memcpy(v, tmp, (size_t)len * sizeof *v);
}

/* sort items by key (-1: the item; 0/1: element of a pair; attr: an attribute) */
static vlist *sort_items(R *r, const node *n, vlist *l, int elem, val attr, int cs, int rev) {
    sortkey *v = jv_alloc(r, ((size_t)l->n + 1) * sizeof *v), *tmp = jv_alloc(r, ((size_t)l->n + 1) * sizeof *tmp);
    for (int i = 0; i < l->n; i++) {
        val it = l->v[i], k = it;
        if (attr.t == V_STR) k = je_getattr(r, it, attr.u.s.p);
        else if (elem >= 0 && it.t == V_LIST && it.u.l->n > elem) k = it.u.l->v[elem];
        v[i] = (sortkey){k, it};
    }
    merge_sort(r, n, v, tmp, l->n, cs, rev);
    vlist *o = jv_list(r, l->n);
    for (int i = 0; i < l->n; i++) jv_push(r, o, v[i].item);
    return o;
}
FILTER(f_sort) {
    (void)f;
    vlist *l = je_iter(r, n, v);
    int rev = jv_truthy(je_karg(a, "reverse", 0)), cs = jv_truthy(je_karg(a, "case_sensitive", 1));
    return (val){.t = V_LIST, .u.l = sort_items(r, n, l, -1, je_karg(a, "attribute", 2), cs, rev)};
}
FILTER(f_dictsort) {
    (void)f;
    if (v.t != V_DICT) jv_err(r, n, "dictsort needs a mapping");
    args none = {0};
    vlist *l = jf_method(r, n, v, "items", &none).u.l;
    int cs = jv_truthy(je_karg(a, "case_sensitive", 0)), rev = jv_truthy(je_karg(a, "reverse", 2));
    val by = je_karg(a, "by", 1);
    int elem = by.t == V_STR && sseq(by.u.s, "value", 5) ? 1 : 0;
    return (val){.t = V_LIST, .u.l = sort_items(r, n, l, elem, vundef(), cs, rev)};
}
FILTER(f_round) { /* round(precision=0, method='common'): a float, ties to even as Python */
    (void)f;
    if (!is_num(v)) jv_err(r, n, "round needs a number");
    val pv = je_karg(a, "precision", 0), mv = je_karg(a, "method", 1);
    long long p = pv.t == V_INT ? pv.u.i : 0;
    if (p < 0 || p > 15) p = p < 0 ? 0 : 15;
    double s = 1, x = num(v);
    for (long long i = 0; i < p; i++) s *= 10;
    if (mv.t == V_STR && sseq(mv.u.s, "floor", 5)) x = __builtin_floor(x * s) / s;
    else if (mv.t == V_STR && sseq(mv.u.s, "ceil", 4)) x = __builtin_ceil(x * s) / s;
    else x = __builtin_nearbyint(x * s) / s;
    return (val){.t = V_FLOAT, .u.f = x};
}

static const struct {
    const char *name;
    val (*fn)(R *, const node *, const char *, val, args *);
} FILTERS[] = {
    {"safe", f_safe}, {"e", f_safe}, {"escape", f_safe}, {"trim", f_trim}, {"length", f_length},
    {"count", f_length}, {"tojson", f_tojson}, {"string", f_string}, {"list", f_list}, {"join", f_join},
    {"select", f_select}, {"reject", f_select}, {"selectattr", f_select}, {"rejectattr", f_select},
    {"map", f_map}, {"items", f_items}, {"first", f_first}, {"last", f_first}, {"lower", f_case},
    {"upper", f_case}, {"capitalize", f_case}, {"title", f_case}, {"default", f_default}, {"d", f_default},
    {"replace", f_replace}, {"int", f_int}, {"float", f_float}, {"abs", f_abs}, {"reverse", f_reverse},
    {"unique", f_unique}, {"sum", f_sum}, {"min", f_sum}, {"max", f_sum}, {"indent", f_indent},
    {"sort", f_sort}, {"dictsort", f_dictsort}, {"round", f_round},
};

val jf_filter(R *r, const node *n, const char *f, val v, args *a) {
    for (size_t i = 0; i < sizeof FILTERS / sizeof FILTERS[0]; i++)
        if (!strcmp(FILTERS[i].name, f)) {
            const int t = args_tainted(v, a);
            val res = FILTERS[i].fn(r, n, f, v, a);
            return t ? jv_taint(r, res) : res;
        }
    jv_err(r, n, "unsupported filter '%s'", f);
}
