/* text/grammar_parse.c — GBNF text -> slm_grammar (text/grammar.h).
 *
 * A recursive descent over the text, bounded by its length, the nesting of
 * groups and the element count. Groups and repetitions become rules of
 * their own (named after the rule they appear in, "root_3", in messages):
 * x* is R ::= x R | (nothing); x{m,n} is m copies of x, then n - m nested
 * optional copies (R1 ::= x | ..., Rk ::= x R(k-1) | ...), so that no rule
 * holds more than one copy's alternatives. Then every rule must be defined,
 * `root` among them, and none may reach itself before matching a character
 * (found through the rules that can match nothing). */
#include <stdio.h>
#include <stdlib.h>

#include "text/grammar_internal.h"

#define UNBOUNDED UINT32_MAX

typedef struct evec {
    gelem *e;
    uint32_t n, cap;
} evec;

typedef struct prule {
    const char *name;   /* user rules: in the text; synthetic ones: NULL */
    uint32_t name_len;
    uint32_t parent;    /* synthetic: the rule it was made for, and its number there */
    uint32_t num;
    const char *at;     /* where it was defined, else first referenced */
    int defined;
    evec body;
} prule;

typedef struct gp {
    const char *text, *p, *end;
    slm_err *err;
    prule *r;
    uint32_t nr, capr;
    uint32_t *hash;      /* [hcap] user rule index + 1 by name, 0 = free */
    uint32_t hcap;
    gclass *cls;
    uint32_t ncls, capcls;
    uint32_t *rng;       /* lo, hi pairs */
    uint32_t nrng, caprng;
    uint32_t ascii[128]; /* class index + 1 of single ASCII characters */
    size_t total;        /* elements so far */
    int depth;
    uint32_t nsynth;     /* synthetic rules made for the current rule */
    int oom;
} gp;

/* ---- errors ------------------------------------------------------------------------ */

static int perr(gp *g, const char *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int perr(gp *g, const char *at, const char *fmt, ...) {
    if (g->err && g->err->status) return 0; /* the first error stands */
    int line = 1, col = 1;
    for (const char *q = g->text; q < at && q < g->end; q++) {
        if (*q == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    slm_errf(g->err, g->oom ? SLM_ERR_NOMEM : SLM_ERR_FORMAT, "grammar: line %d, column %d: %s", line, col, msg);
    return 0;
}

static int nomem(gp *g) {
    g->oom = 1;
    return perr(g, g->p, "out of memory");
}

/* The name of rule i for messages (synthetic rules: parent_num). */
static void rule_name(const gp *g, uint32_t i, char *buf, size_t cap) {
    uint32_t num = 0, k = i;
    while (!g->r[k].name && k != g->r[k].parent) {
        if (!num) num = g->r[k].num;
        k = g->r[k].parent;
    }
    const int len = g->r[k].name_len > 64 ? 64 : (int)g->r[k].name_len;
    if (num) snprintf(buf, cap, "%.*s_%u", len, g->r[k].name ? g->r[k].name : "?", num);
    else snprintf(buf, cap, "%.*s", len, g->r[k].name ? g->r[k].name : "?");
}

/* ---- storage ------------------------------------------------------------------------ */

static int grow(void **p, uint32_t *cap, uint32_t need, size_t size) {
    if (need <= *cap) return 1;
    uint32_t nc = *cap ? *cap : 16;
    while (nc < need) {
        if (nc > UINT32_MAX / 2) return 0;
        nc *= 2;
    }
    void *q = slm_realloc(*p, (size_t)nc * size);
    if (!q) return 0;
    *p = q;
    *cap = nc;
    return 1;
}

static int push(gp *g, evec *v, uint32_t type, uint32_t val) {
    if (++g->total > SLM_GRAMMAR_MAX_ELEMS)
        return perr(g, g->p, "the grammar expands to more than %u elements", SLM_GRAMMAR_MAX_ELEMS);
    if (!grow((void **)&v->e, &v->cap, v->n + 1, sizeof(gelem))) return nomem(g);
    v->e[v->n++] = (gelem){type, val};
    return 1;
}

/* A class of n ranges (lo, hi pairs); its index, or -1. */
static int64_t add_class(gp *g, const uint32_t *rng, uint32_t n, int neg) {
    if (n == 1 && !neg && rng[0] == rng[1] && rng[0] < 128 && g->ascii[rng[0]]) return g->ascii[rng[0]] - 1;
    if (!grow((void **)&g->cls, &g->capcls, g->ncls + 1, sizeof(gclass)) ||
        !grow((void **)&g->rng, &g->caprng, 2 * (g->nrng + n) + 2, sizeof(uint32_t)))
        return nomem(g) - 1;
    if (n) memcpy(g->rng + 2 * g->nrng, rng, (size_t)n * 2 * sizeof(uint32_t));
    g->cls[g->ncls] = (gclass){g->nrng, n, (uint32_t)neg};
    g->nrng += n;
    if (n == 1 && !neg && rng[0] == rng[1] && rng[0] < 128) g->ascii[rng[0]] = g->ncls + 1;
    return g->ncls++;
}

static int64_t new_rule(gp *g, const char *name, uint32_t len, uint32_t parent, const char *at) {
    if (g->nr >= SLM_GRAMMAR_MAX_RULES) return perr(g, at, "more than %u rules", SLM_GRAMMAR_MAX_RULES) - 1;
    if (!grow((void **)&g->r, &g->capr, g->nr + 1, sizeof(prule))) return nomem(g) - 1;
    prule *r = &g->r[g->nr];
    memset(r, 0, sizeof *r);
    r->name = name;
    r->name_len = len;
    r->parent = name ? g->nr : parent;
    r->num = name ? 0 : ++g->nsynth;
    r->at = at;
    return g->nr++;
}

static uint32_t name_hash(const char *s, uint32_t n) {
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

/* The user rule named s[0..n), made (undefined) when new; -1 on failure. */
static int64_t lookup(gp *g, const char *s, uint32_t n) {
    if (2 * (g->nr + 1) > g->hcap) { /* rehash the user rules into a larger table */
        uint32_t nc = g->hcap ? g->hcap * 2 : 64;
        while (nc < 2 * (g->nr + 1)) nc *= 2;
        uint32_t *h = slm_calloc(nc, sizeof(uint32_t));
        if (!h) return nomem(g) - 1;
        for (uint32_t i = 0; i < g->nr; i++) {
            if (!g->r[i].name) continue;
            uint32_t k = name_hash(g->r[i].name, g->r[i].name_len) & (nc - 1);
            while (h[k]) k = (k + 1) & (nc - 1);
            h[k] = i + 1;
        }
        slm_xfree(g->hash);
        g->hash = h;
        g->hcap = nc;
    }
    uint32_t k = name_hash(s, n) & (g->hcap - 1);
    for (; g->hash[k]; k = (k + 1) & (g->hcap - 1)) {
        const prule *r = &g->r[g->hash[k] - 1];
        if (r->name_len == n && !memcmp(r->name, s, n)) return g->hash[k] - 1;
    }
    int64_t id = new_rule(g, s, n, 0, s);
    if (id >= 0) g->hash[k] = (uint32_t)id + 1;
    return id;
}

/* ---- lexing ------------------------------------------------------------------------- */

static int is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static void space(gp *g, int newline_ok) {
    while (g->p < g->end) {
        const char c = *g->p;
        if (c == ' ' || c == '\t' || (newline_ok && (c == '\n' || c == '\r'))) {
            g->p++;
        } else if (c == '#') {
            while (g->p < g->end && *g->p != '\n' && *g->p != '\r') g->p++;
        } else {
            break;
        }
    }
}

static int hex_digits(gp *g, int n, uint32_t *cp) {
    const char *at = g->p - 2;
    uint32_t v = 0;
    for (int i = 0; i < n; i++, g->p++) {
        const char c = g->p < g->end ? *g->p : 0;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return perr(g, at, "the escape needs %d hexadecimal digits", n);
        v = v << 4 | (uint32_t)d;
    }
    if (v > 0x10FFFF) return perr(g, at, "code point U+%X is past U+10FFFF", v);
    *cp = v;
    return 1;
}

/* One character of a literal or a class: an escape or a UTF-8 sequence. */
static int parse_char(gp *g, uint32_t *cp) {
    if (g->p >= g->end) return perr(g, g->p, "unexpected end of the grammar");
    const uint8_t c = (uint8_t)*g->p;
    if (c == '\\') {
        if (g->p + 1 >= g->end) return perr(g, g->p, "unexpected end of the grammar after '\\'");
        const char e = g->p[1];
        g->p += 2;
        switch (e) {
        case 'x': return hex_digits(g, 2, cp);
        case 'u': return hex_digits(g, 4, cp);
        case 'U': return hex_digits(g, 8, cp);
        case 't': *cp = '\t'; return 1;
        case 'n': *cp = '\n'; return 1;
        case 'r': *cp = '\r'; return 1;
        case '\\': case '"': case '[': case ']': case '-': case '^': *cp = (uint8_t)e; return 1;
        default: return perr(g, g->p - 2, "unknown escape '\\%c'", e >= 0x20 && e < 0x7f ? e : '?');
        }
    }
    const int n = c < 0x80 ? 1 : c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c < 0xF5 ? 4 : 0;
    if (!n || g->end - g->p < n) return perr(g, g->p, "invalid UTF-8");
    uint32_t v = n == 1 ? c : c & (0x7F >> n);
    for (int i = 1; i < n; i++) {
        const uint8_t b = (uint8_t)g->p[i];
        if ((b & 0xC0) != 0x80) return perr(g, g->p, "invalid UTF-8");
        v = v << 6 | (b & 0x3F);
    }
    if ((n == 3 && v < 0x800) || (n == 4 && (v < 0x10000 || v > 0x10FFFF)) || (v >= 0xD800 && v <= 0xDFFF))
        return perr(g, g->p, "invalid UTF-8");
    if (v == 0) return perr(g, g->p, "a NUL byte in the grammar (write \\x00)");
    g->p += n;
    *cp = v;
    return 1;
}

/* [...] at g->p: one class. */
static int64_t parse_class(gp *g) {
    const char *at = g->p++;
    int neg = 0;
    if (g->p < g->end && *g->p == '^') {
        neg = 1;
        g->p++;
    }
    uint32_t buf[64], *rng = buf, n = 0, cap = 32;
    int64_t id = -1;
    for (;;) {
        if (g->p >= g->end) {
            perr(g, at, "unterminated character class");
            goto out;
        }
        if (*g->p == ']') break;
        uint32_t lo = 0, hi;
        if (!parse_char(g, &lo)) goto out;
        hi = lo;
        if (g->p + 1 < g->end && *g->p == '-' && g->p[1] != ']') {
            g->p++;
            if (!parse_char(g, &hi)) goto out;
            if (hi < lo) {
                perr(g, at, "range U+%X-U+%X in a class runs backwards", lo, hi);
                goto out;
            }
        }
        if (n == cap) {
            uint32_t *nb = slm_malloc((size_t)cap * 4 * sizeof(uint32_t));
            if (!nb) {
                nomem(g);
                goto out;
            }
            memcpy(nb, rng, (size_t)n * 2 * sizeof(uint32_t));
            if (rng != buf) slm_xfree(rng);
            rng = nb;
            cap *= 2;
        }
        rng[2 * n] = lo;
        rng[2 * n + 1] = hi;
        n++;
    }
    g->p++;
    id = add_class(g, rng, n, neg);
out:
    if (rng != buf) slm_xfree(rng);
    return id;
}

/* ---- rules -------------------------------------------------------------------------- */

static int parse_alts(gp *g, uint32_t rule, int nested);

/* Replace out->e[from..) (the last symbol) by its repetition {mn, mx}. */
static int repeat(gp *g, evec *out, uint32_t from, uint32_t mn, uint32_t mx, uint32_t rule, const char *at) {
    const uint32_t n = out->n - from;
    if (n == 0) return 1;
    gelem *s = slm_malloc((size_t)n * sizeof(gelem));
    if (!s) return nomem(g);
    memcpy(s, out->e + from, (size_t)n * sizeof(gelem));
    out->n = from;
    g->total -= n;
    int ok = 1;
    for (uint32_t i = 0; ok && i < mn; i++)
        for (uint32_t k = 0; ok && k < n; k++) ok = push(g, out, s[k].type, s[k].v);
    int64_t prev = -1;
    const uint32_t opt = mx == UNBOUNDED ? 1 : mx - mn;
    for (uint32_t k = 0; ok && k < opt; k++) { /* R ::= x [prev] | (nothing); unbounded: x R */
        int64_t r = new_rule(g, NULL, 0, rule, at);
        if (r < 0) {
            ok = 0;
            break;
        }
        evec b = {0};
        for (uint32_t i = 0; ok && i < n; i++) ok = push(g, &b, s[i].type, s[i].v);
        if (ok && mx == UNBOUNDED) ok = push(g, &b, G_REF, (uint32_t)r);
        else if (ok && prev >= 0) ok = push(g, &b, G_REF, (uint32_t)prev);
        if (ok) ok = push(g, &b, G_ALT, 0) && push(g, &b, G_END, 0);
        g->r[r].body = b;
        g->r[r].defined = 1;
        prev = r;
    }
    if (ok && prev >= 0) ok = push(g, out, G_REF, (uint32_t)prev);
    slm_xfree(s);
    return ok;
}

static int parse_count(gp *g, uint32_t *v) {
    const char *at = g->p;
    uint64_t x = 0;
    if (g->p >= g->end || *g->p < '0' || *g->p > '9') return perr(g, at, "expected a number in {m,n}");
    while (g->p < g->end && *g->p >= '0' && *g->p <= '9') {
        x = x * 10 + (uint64_t)(*g->p++ - '0');
        if (x > SLM_GRAMMAR_MAX_REPEAT) return perr(g, at, "a repetition count is over %d", SLM_GRAMMAR_MAX_REPEAT);
    }
    *v = (uint32_t)x;
    return 1;
}

/* {m}, {m,}, {m,n} at g->p. */
static int parse_braces(gp *g, uint32_t *mn, uint32_t *mx) {
    const char *at = g->p++;
    space(g, 1);
    if (!parse_count(g, mn)) return 0;
    space(g, 1);
    *mx = *mn;
    if (g->p < g->end && *g->p == ',') {
        g->p++;
        space(g, 1);
        *mx = UNBOUNDED;
        if (g->p < g->end && *g->p != '}') {
            if (!parse_count(g, mx)) return 0;
            space(g, 1);
        }
    }
    if (g->p >= g->end || *g->p != '}') return perr(g, at, "expected '}' to close the repetition");
    g->p++;
    if (*mx < *mn) return perr(g, at, "repetition {%u,%u}: the maximum is below the minimum", *mn, *mx);
    return 1;
}

/* One sequence of symbols into out, up to '|', ')', the end of the line (not
 * nested) or the text. */
static int parse_seq(gp *g, evec *out, uint32_t rule, int nested) {
    uint32_t last = out->n;
    int have_last = 0;
    while (g->p < g->end) {
        const char c = *g->p, *at = g->p;
        const uint32_t start = out->n;
        if (c == '"') {
            g->p++;
            while (g->p < g->end && *g->p != '"') {
                uint32_t cp = 0, rr[2];
                if (!parse_char(g, &cp)) return 0;
                rr[0] = rr[1] = cp;
                int64_t k = add_class(g, rr, 1, 0);
                if (k < 0 || !push(g, out, G_CHR, (uint32_t)k)) return 0;
            }
            if (g->p >= g->end) return perr(g, at, "unterminated string literal");
            g->p++;
        } else if (c == '[') {
            int64_t k = parse_class(g);
            if (k < 0 || !push(g, out, G_CHR, (uint32_t)k)) return 0;
        } else if (c == '.') {
            g->p++;
            int64_t k = add_class(g, NULL, 0, 1);
            if (k < 0 || !push(g, out, G_CHR, (uint32_t)k)) return 0;
        } else if (is_name_char(c)) {
            while (g->p < g->end && is_name_char(*g->p)) g->p++;
            if (g->p - at > 256) return perr(g, at, "a rule name longer than 256 bytes");
            int64_t k = lookup(g, at, (uint32_t)(g->p - at));
            if (k < 0 || !push(g, out, G_REF, (uint32_t)k)) return 0;
        } else if (c == '(') {
            if (g->depth >= SLM_GRAMMAR_MAX_DEPTH) return perr(g, at, "groups nested deeper than %d", SLM_GRAMMAR_MAX_DEPTH);
            g->p++;
            space(g, 1);
            int64_t k = new_rule(g, NULL, 0, rule, at);
            if (k < 0) return 0;
            g->r[k].defined = 1;
            g->depth++;
            int ok = parse_alts(g, (uint32_t)k, 1);
            g->depth--;
            if (!ok) return 0;
            if (g->p >= g->end || *g->p != ')') return perr(g, at, "this '(' is not closed");
            g->p++;
            if (!push(g, out, G_REF, (uint32_t)k)) return 0;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (!have_last) return perr(g, at, "'%c' has nothing before it to repeat", c);
            uint32_t mn = c == '+' ? 1 : 0, mx = c == '?' ? 1 : UNBOUNDED;
            if (c == '{') {
                if (!parse_braces(g, &mn, &mx)) return 0;
            } else {
                g->p++;
            }
            if (!repeat(g, out, last, mn, mx, rule, at)) return 0;
            have_last = 0;
            space(g, nested);
            continue;
        } else if (c == '<' || c == '!') {
            return perr(g, at, "token references (<[id]>, <token>, !<...>) are not supported");
        } else {
            break;
        }
        last = start;
        have_last = 1;
        space(g, nested);
    }
    return 1;
}

static int parse_alts(gp *g, uint32_t rule, int nested) {
    evec b = {0};
    int ok = 1;
    for (;;) {
        if (!(ok = parse_seq(g, &b, rule, nested))) break;
        if (g->p < g->end && *g->p == '|') {
            g->p++;
            space(g, 1);
            if (!(ok = push(g, &b, G_ALT, 0))) break;
            continue;
        }
        ok = push(g, &b, G_END, 0);
        break;
    }
    if (!ok) {
        slm_xfree(b.e);
        return 0;
    }
    g->r[rule].body = b;
    return 1;
}

static int parse_rule(gp *g) {
    const char *at = g->p;
    while (g->p < g->end && is_name_char(*g->p)) g->p++;
    if (g->p == at) return perr(g, at, "expected a rule name");
    if (g->p - at > 256) return perr(g, at, "a rule name longer than 256 bytes");
    const uint32_t nlen = (uint32_t)(g->p - at);
    space(g, 0);
    if (g->end - g->p < 3 || memcmp(g->p, "::=", 3))
        return perr(g, g->p, "expected '::=' after the rule name '%.*s'", (int)(nlen > 64 ? 64 : nlen), at);
    g->p += 3;
    space(g, 1);
    int64_t id = lookup(g, at, nlen);
    if (id < 0) return 0;
    if (g->r[id].defined) return perr(g, at, "rule '%.*s' is defined twice", (int)(nlen > 64 ? 64 : nlen), at);
    g->r[id].defined = 1;
    g->r[id].at = at;
    g->nsynth = 0;
    if (!parse_alts(g, (uint32_t)id, 0)) return 0;
    if (g->p < g->end && *g->p != '\n' && *g->p != '\r') {
        const char c = *g->p;
        if (c == ')') return perr(g, g->p, "')' without a '(' before it");
        return perr(g, g->p, "unexpected '%c'", c >= 0x20 && c < 0x7f ? c : '?');
    }
    return 1;
}

/* ---- checks ------------------------------------------------------------------------- */

/* Rules that can match nothing, then a search for a rule that reaches
 * itself through first positions (rules whose every earlier element can
 * match nothing). */
static int check_left_recursion(gp *g, const slm_grammar *gr) {
    const uint32_t R = gr->n_rules, E = gr->n_el;
    int ok = 0;
    uint8_t *nullable = slm_calloc(R, 1), *color = slm_calloc(R, 1);
    uint32_t *alt_rule = slm_malloc((size_t)E * sizeof(uint32_t)), *cnt = slm_malloc((size_t)E * sizeof(uint32_t));
    uint32_t *occ_off = slm_calloc((size_t)R + 1, sizeof(uint32_t)), *occ = slm_malloc((size_t)E * sizeof(uint32_t) + 4);
    uint32_t *queue = slm_malloc((size_t)R * sizeof(uint32_t) + 4), *stk = slm_malloc((size_t)R * 2 * sizeof(uint32_t) + 8);
    uint32_t *edge_off = slm_calloc((size_t)R + 1, sizeof(uint32_t)), *edge = slm_malloc((size_t)E * sizeof(uint32_t) + 4);
    if (!nullable || !color || !alt_rule || !cnt || !occ_off || !occ || !queue || !stk || !edge_off || !edge) {
        nomem(g);
        goto out;
    }
    /* alternatives: numbered by their first element; cnt = REF elements
     * whose rule is not (yet) known to match nothing, UINT32_MAX with a CHR */
    uint32_t na = 0, nq = 0;
    for (uint32_t r = 0; r < R; r++) {
        uint32_t i = gr->rule_start[r];
        for (;;) {
            uint32_t c = 0;
            for (; !g_is_end(&gr->el[i]); i++) {
                if (gr->el[i].type == G_CHR) c = UINT32_MAX;
                else if (c != UINT32_MAX) c++;
                if (gr->el[i].type == G_REF) occ_off[gr->el[i].v]++;
            }
            alt_rule[na] = r;
            cnt[na++] = c;
            if (c == 0 && !nullable[r]) {
                nullable[r] = 1;
                queue[nq++] = r;
            }
            if (gr->el[i].type == G_END) break;
            i++;
        }
    }
    for (uint32_t r = 0, s = 0; r <= R; r++) { /* occurrences of each rule: the alternatives naming it */
        uint32_t c = r < R ? occ_off[r] : 0;
        occ_off[r] = s;
        s += c;
    }
    na = 0;
    for (uint32_t r = 0; r < R; r++) {
        uint32_t i = gr->rule_start[r];
        for (;;) {
            for (; !g_is_end(&gr->el[i]); i++)
                if (gr->el[i].type == G_REF) occ[occ_off[gr->el[i].v] + (edge_off[gr->el[i].v]++)] = na;
            na++;
            if (gr->el[i].type == G_END) break;
            i++;
        }
    }
    for (uint32_t qi = 0; qi < nq; qi++) {
        const uint32_t r = queue[qi];
        for (uint32_t k = occ_off[r]; k < occ_off[r + 1]; k++) {
            const uint32_t a = occ[k];
            if (cnt[a] != UINT32_MAX && --cnt[a] == 0 && !nullable[alt_rule[a]]) {
                nullable[alt_rule[a]] = 1;
                queue[nq++] = alt_rule[a];
            }
        }
    }
    /* first-position edges, as CSR */
    uint32_t ne = 0;
    for (uint32_t r = 0; r < R; r++) {
        edge_off[r] = ne;
        uint32_t i = gr->rule_start[r];
        for (;;) {
            int open = 1;
            for (; !g_is_end(&gr->el[i]); i++) {
                if (!open) continue;
                if (gr->el[i].type == G_CHR) open = 0;
                else {
                    edge[ne++] = gr->el[i].v;
                    if (!nullable[gr->el[i].v]) open = 0;
                }
            }
            if (gr->el[i].type == G_END) break;
            i++;
        }
    }
    edge_off[R] = ne;
    /* depth-first, iteratively: stk holds (rule, next edge) pairs */
    for (uint32_t s = 0; s < R; s++) {
        if (color[s]) continue;
        uint32_t sp = 0;
        stk[sp++] = s;
        stk[sp++] = edge_off[s];
        color[s] = 1;
        while (sp) {
            const uint32_t r = stk[sp - 2];
            if (stk[sp - 1] == edge_off[r + 1]) {
                color[r] = 2;
                sp -= 2;
                continue;
            }
            const uint32_t t = edge[stk[sp - 1]++];
            if (color[t] == 1) {
                char name[96];
                rule_name(g, t, name, sizeof name);
                perr(g, g->r[t].at, "rule '%s' is left-recursive: it can reach itself before matching a character",
                     name);
                goto out;
            }
            if (!color[t]) {
                color[t] = 1;
                stk[sp++] = t;
                stk[sp++] = edge_off[t];
            }
        }
    }
    ok = 1;
out:
    slm_xfree(nullable);
    slm_xfree(color);
    slm_xfree(alt_rule);
    slm_xfree(cnt);
    slm_xfree(occ_off);
    slm_xfree(occ);
    slm_xfree(queue);
    slm_xfree(stk);
    slm_xfree(edge_off);
    slm_xfree(edge);
    return ok;
}

/* Every rule defined, `root` among them; the bodies into one array. */
static int finish(gp *g, slm_grammar *gr) {
    int64_t root = -1;
    for (uint32_t i = 0; i < g->nr; i++) {
        const prule *r = &g->r[i];
        if (!r->defined) return perr(g, r->at, "rule '%.*s' is used but not defined", (int)(r->name_len > 64 ? 64 : r->name_len), r->name);
        if (r->name && r->name_len == 4 && !memcmp(r->name, "root", 4)) root = i;
    }
    if (root < 0) return perr(g, g->end, "the grammar has no rule 'root'");
    gr->root = (uint32_t)root;
    gr->n_rules = g->nr;
    if (!(gr->rule_start = slm_malloc((size_t)g->nr * sizeof(uint32_t))) ||
        !(gr->el = slm_malloc((size_t)g->total * sizeof(gelem) + sizeof(gelem))))
        return nomem(g);
    uint32_t n = 0;
    for (uint32_t i = 0; i < g->nr; i++) {
        gr->rule_start[i] = n;
        memcpy(gr->el + n, g->r[i].body.e, (size_t)g->r[i].body.n * sizeof(gelem));
        n += g->r[i].body.n;
    }
    gr->n_el = n;
    uint32_t na = 0; /* the alternatives: one more than the G_ALT elements of each rule */
    for (uint32_t i = 0; i < n; i++) na += g_is_end(&gr->el[i]);
    if (!(gr->alt_off = slm_malloc(((size_t)g->nr + 1) * sizeof(uint32_t))) || !(gr->alts = slm_malloc((size_t)na * sizeof(uint32_t))))
        return nomem(g);
    gr->n_alts = na;
    na = 0;
    for (uint32_t r = 0; r < g->nr; r++) {
        gr->alt_off[r] = na;
        for (uint32_t i = gr->rule_start[r];; i++) {
            if (i == gr->rule_start[r] || gr->el[i - 1].type == G_ALT) gr->alts[na++] = i;
            if (gr->el[i].type == G_END) break;
        }
    }
    gr->alt_off[g->nr] = na;
    gr->cls = g->cls;
    gr->n_cls = g->ncls;
    gr->rng = g->rng;
    gr->n_rng = g->nrng;
    g->cls = NULL;
    g->rng = NULL;
    return check_left_recursion(g, gr);
}

slm_status slm_grammar_compile(const char *text, size_t len, slm_grammar **out, slm_err *err) {
    *out = NULL;
    if (err) err->status = SLM_OK;
    slm_err local = {0};
    if (!err) err = &local;
    if (!text) return slm_errf(err, SLM_ERR_ARG, "grammar: no text");
    if (len > SLM_GRAMMAR_MAX_TEXT)
        return slm_errf(err, SLM_ERR_FORMAT, "grammar: %zu bytes, more than the %u allowed", len, SLM_GRAMMAR_MAX_TEXT);
    gp g;
    memset(&g, 0, sizeof g);
    g.text = g.p = text;
    g.end = text + len;
    g.err = err;
    slm_grammar *gr = slm_calloc(1, sizeof *gr);
    int ok = gr != NULL;
    if (!ok) nomem(&g);
    for (;;) {
        if (!ok) break;
        space(&g, 1);
        if (g.p >= g.end) break;
        ok = parse_rule(&g);
    }
    if (ok) ok = finish(&g, gr);
    for (uint32_t i = 0; i < g.nr; i++) slm_xfree(g.r[i].body.e);
    slm_xfree(g.r);
    slm_xfree(g.hash);
    slm_xfree(g.cls);
    slm_xfree(g.rng);
    if (!ok) {
        slm_grammar_free(gr);
        return err->status ? err->status : SLM_ERR_FORMAT;
    }
    *out = gr;
    return SLM_OK;
}

void slm_grammar_free(slm_grammar *g) {
    if (!g) return;
    slm_xfree(g->el);
    slm_xfree(g->rule_start);
    slm_xfree(g->alt_off);
    slm_xfree(g->alts);
    slm_xfree(g->cls);
    slm_xfree(g->rng);
    slm_xfree(g);
}
