/* text/json_schema.c — a JSON schema -> GBNF grammar text (text/grammar.h).
 *
 * Each schema becomes a rule whose sentences are the JSON documents it
 * allows, written the way they are generated: no white space but `space`
 * (nothing, one blank, or a newline and up to 20 blanks or tabs) after each
 * value, ':' and ','; numbers of at most 16 digits in each part. Objects
 * list their properties in the schema's order, the required ones always and
 * the others optionally; keys outside `properties` only when
 * additionalProperties is true or a schema (absent means none when there
 * are properties, as llama.cpp reads it; a schema without properties is any
 * object). oneOf is read as anyOf (the alternatives are not made exclusive).
 * A $ref becomes one rule however often it is used, so recursive schemas
 * work (a reference that reaches itself before any character is refused by
 * the grammar compiler). Keywords that would restrict documents in ways the
 * grammar does not (pattern, format, minimum, allOf, ...) are refused by
 * name; annotations are ignored. The same walk writes Gemma 4's call
 * arguments (slm_gemma4_schema_rules): its own shared rules (gprims), its
 * strings, keys and consts, values counted by nesting level. Last, the
 * texts that avoid words (slm_gbnf_avoid), which Gemma's strings use. */
#include <stdio.h>
#include <stdlib.h>

#include "text/grammar.h"

#ifdef SLM_HAVE_CJSON

#include <cjson/cJSON.h>

#include "common/json.h"

/* The shared rules, each written once when a schema needs it (P_KEY: Gemma 4's only). */
enum { P_SPACE, P_CHAR, P_STRING, P_BOOLEAN, P_NULL, P_INTEGRAL, P_DECIMAL, P_INTEGER, P_NUMBER, P_VALUE, P_OBJECT, P_ARRAY,
       P_KEY, P_N };

static const struct prim {
    const char *name, *body;
    uint32_t needs; /* bits of other P_* */
} prims[P_N] = {
    [P_SPACE] = {"space", "| \" \" | \"\\n\" [ \\t]{0,20}", 0},
    [P_CHAR] = {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})", 0},
    [P_STRING] = {"string", "\"\\\"\" char* \"\\\"\" space", 1u << P_CHAR | 1u << P_SPACE},
    [P_BOOLEAN] = {"boolean", "(\"true\" | \"false\") space", 1u << P_SPACE},
    [P_NULL] = {"null", "\"null\" space", 1u << P_SPACE},
    [P_INTEGRAL] = {"integral-part", "[0] | [1-9] [0-9]{0,15}", 0},
    [P_DECIMAL] = {"decimal-part", "[0-9]{1,16}", 0},
    [P_INTEGER] = {"integer", "\"-\"? integral-part space", 1u << P_INTEGRAL | 1u << P_SPACE},
    [P_NUMBER] = {"number", "\"-\"? integral-part (\".\" decimal-part)? ([eE] [-+]? decimal-part)? space",
                  1u << P_INTEGRAL | 1u << P_DECIMAL | 1u << P_SPACE},
    [P_VALUE] = {"value", "object | array | string | number | boolean | null",
                 1u << P_OBJECT | 1u << P_ARRAY | 1u << P_STRING | 1u << P_NUMBER | 1u << P_BOOLEAN | 1u << P_NULL},
    [P_OBJECT] = {"object", "\"{\" space (string \":\" space value (\",\" space string \":\" space value)*)? \"}\" space",
                  1u << P_STRING | 1u << P_VALUE | 1u << P_SPACE},
    [P_ARRAY] = {"array", "\"[\" space (value (\",\" space value)*)? \"]\" space", 1u << P_VALUE | 1u << P_SPACE},
};

/* Gemma 4's syntax (toolcall_gemma4.c reads it): no white space (space
 * matches nothing); a string between <|"|> quotes, its text without the
 * control texts of g_avoid (string is written apart: gemma_string); a
 * bounded string's characters anything but '<'; numbers as JSON's; a key
 * bare (letters, digits, _ . -) or quoted. Any value, object and array are
 * written per nesting level (generic_rules), as the parser nests at most
 * max_depth deep. */
static const struct prim gprims[P_N] = {
    [P_SPACE] = {"space", "\"\"", 0},
    [P_CHAR] = {"char", "[^<]", 0},
    [P_STRING] = {"string", NULL, 0},
    [P_BOOLEAN] = {"boolean", "\"true\" | \"false\"", 0},
    [P_NULL] = {"null", "\"null\"", 0},
    [P_INTEGRAL] = {"integral-part", "[0] | [1-9] [0-9]{0,15}", 0},
    [P_DECIMAL] = {"decimal-part", "[0-9]{1,16}", 0},
    [P_INTEGER] = {"integer", "\"-\"? integral-part", 1u << P_INTEGRAL},
    [P_NUMBER] = {"number", "\"-\"? integral-part (\".\" decimal-part)? ([eE] [-+]? decimal-part)?", 1u << P_INTEGRAL | 1u << P_DECIMAL},
    [P_KEY] = {"key", "[a-zA-Z0-9_.-]+ | string", 1u << P_STRING},
};

/* What a Gemma 4 string (or quoted key) never holds: its quote, and the
 * thought channel's markers (the reasoning splitter reads them anywhere in
 * the answer). */
static const char *const g_avoid[] = {"<|\"|>", "<|channel>", "<channel|>"};
#define G_QUOTE "\"<|\\\"|>\"" /* the quote as a GBNF literal */

/* Keywords that restrict documents in ways not written into the grammar. */
static const char *const refused_keys[] = {
    "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "allOf", "not",
    "if", "then", "else", "patternProperties", "propertyNames", "dependentRequired", "dependentSchemas", "dependencies",
    "minProperties", "maxProperties", "uniqueItems", "contains", "minContains", "maxContains", "prefixItems",
    "additionalItems", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef"};

typedef struct sbuf {
    char *s;
    size_t n, cap;
} sbuf;

typedef struct ref_rule {
    char *ref;      /* the $ref string */
    char name[48];  /* its rule */
    int level;      /* gemma: the level it was written for */
} ref_rule;

typedef struct js {
    const cJSON *root;
    slm_err *err;
    sbuf out;       /* the rules written so far */
    uint32_t prims; /* P_* bits needed */
    unsigned counter;
    int depth;
    ref_rule *refs;
    int nrefs, caprefs;
    int oom, failed;
    const struct prim *pt; /* prims or gprims */
    int gemma;             /* Gemma 4's syntax (gprims) */
    int level;             /* gemma: containers around the value being written */
    int max_depth;         /* gemma: containers the parser nests */
    int gmin;              /* gemma: the lowest level of generic rules needed (max_depth + 1: none) */
} js;

static int jerr(js *j, slm_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int jerr(js *j, slm_status st, const char *fmt, ...) {
    if (j->failed) return 0;
    j->failed = 1;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    slm_errf(j->err, st, "JSON schema: %s", msg);
    return 0;
}

static int put(js *j, sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > SLM_GRAMMAR_MAX_TEXT)
        return jerr(j, SLM_ERR_ARG, "the grammar would be longer than %u bytes", SLM_GRAMMAR_MAX_TEXT);
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *t = slm_realloc(b->s, nc);
        if (!t) return jerr(j, SLM_ERR_NOMEM, "out of memory");
        b->s = t;
        b->cap = nc;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
    return 1;
}

static int puts_(js *j, sbuf *b, const char *s) { return put(j, b, s, strlen(s)); }

static int putf(js *j, sbuf *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int putf(js *j, sbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    return n >= 0 && (size_t)n < sizeof tmp ? put(j, b, tmp, (size_t)n) : jerr(j, SLM_ERR_ARG, "internal: rule too long");
}

static int need(js *j, int p) {
    uint32_t was;
    j->prims |= 1u << p;
    do { /* and what those need, to a fixed point */
        was = j->prims;
        for (int k = 0; k < P_N; k++)
            if (j->prims & (1u << k)) j->prims |= j->pt[k].needs;
    } while (j->prims != was);
    return 1;
}

/* Whether s[0..n) is UTF-8 (the grammar's literals are code points). */
static int utf8_ok(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        const unsigned char c = (unsigned char)s[i];
        const size_t k = c < 0x80 ? 1 : c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c < 0xF5 ? 4 : 0;
        if (!k || i + k > n) return 0;
        for (size_t q = 1; q < k; q++)
            if (((unsigned char)s[i + q] & 0xC0) != 0x80) return 0;
        const unsigned char c1 = (unsigned char)(k > 1 ? s[i + 1] : 0);
        if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0) || (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 >= 0x90)) return 0;
        i += k;
    }
    return 1;
}

/* A GBNF literal ("...") of the bytes s[0..n), escaped. */
static int literal(js *j, sbuf *b, const char *s, size_t n) {
    if (!utf8_ok(s, n)) return jerr(j, SLM_ERR_ARG, "a string of the schema is not valid UTF-8");
    if (!put(j, b, "\"", 1)) return 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        char e[8];
        if (c == '"' || c == '\\') snprintf(e, sizeof e, "\\%c", c);
        else if (c < 0x20 || c == 0x7f) snprintf(e, sizeof e, "\\x%02X", c);
        else snprintf(e, sizeof e, "%c", c);
        if (!puts_(j, b, e)) return 0;
    }
    return put(j, b, "\"", 1);
}

/* Gemma 4: whether a key is written bare (1+ of a-z A-Z 0-9 _ . -). */
static int bare_key(const char *s) {
    if (!*s) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == '.' || *s == '-'))
            return 0;
    return 1;
}

/* Gemma 4: s between <|"|> quotes; refused when it holds a text of g_avoid. */
static int gemma_quoted(js *j, sbuf *b, const char *s) {
    for (size_t i = 0; i < sizeof g_avoid / sizeof *g_avoid; i++)
        if (strstr(s, g_avoid[i]))
            return jerr(j, SLM_ERR_ARG, "the string '%.64s' holds %s, which Gemma 4's strings cannot", s, g_avoid[i]);
    return puts_(j, b, "<|\"|>") && puts_(j, b, s) && puts_(j, b, "<|\"|>");
}

static int gemma_key(js *j, sbuf *b, const char *key) { return bare_key(key) ? puts_(j, b, key) : gemma_quoted(j, b, key); }

/* Gemma 4: the text a call writes for v, inside level containers. */
static int gemma_text(js *j, sbuf *b, const cJSON *v, int level) {
    if (cJSON_IsString(v)) return gemma_quoted(j, b, v->valuestring);
    if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        if (level >= j->max_depth) return jerr(j, SLM_ERR_ARG, "a value nested deeper than %d levels (Gemma 4's calls)", j->max_depth);
        const int obj = cJSON_IsObject(v);
        int ok = puts_(j, b, obj ? "{" : "[");
        for (const cJSON *c = v->child; ok && c; c = c->next)
            ok = (c == v->child || puts_(j, b, ",")) && (!obj || (gemma_key(j, b, c->string ? c->string : "") && puts_(j, b, ":"))) &&
                 gemma_text(j, b, c, level + 1);
        return ok && puts_(j, b, obj ? "}" : "]");
    }
    char *txt = cJSON_PrintUnformatted(v); /* a number, true, false, null */
    if (!txt) return jerr(j, SLM_ERR_NOMEM, "out of memory");
    int ok = puts_(j, b, txt);
    cJSON_free(txt);
    return ok;
}

/* The JSON text of v as a literal, then space (gemma: its text). */
static int const_value(js *j, sbuf *b, const cJSON *v) {
    if (j->gemma) {
        sbuf g = {0};
        int ok = gemma_text(j, &g, v, j->level) && literal(j, b, g.s, g.n);
        slm_xfree(g.s);
        return ok;
    }
    char *txt = cJSON_PrintUnformatted(v);
    if (!txt) return jerr(j, SLM_ERR_NOMEM, "out of memory");
    int ok = literal(j, b, txt, strlen(txt)) && puts_(j, b, " space") && need(j, P_SPACE);
    cJSON_free(txt);
    return ok;
}

/* A new rule name from a hint (letters, digits and '-' kept) and a number. */
static void rule_name(js *j, const char *hint, char *name, size_t cap) {
    char h[24];
    size_t k = 0;
    for (const char *p = hint; *p && k < sizeof h - 1; p++) {
        const char c = *p;
        h[k++] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ? c : '-';
    }
    h[k] = 0;
    snprintf(name, cap, "%s-%u", k ? h : "r", ++j->counter);
}

static int add_rule(js *j, const char *name, const sbuf *body) {
    return puts_(j, &j->out, name) && puts_(j, &j->out, " ::= ") && put(j, &j->out, body->s ? body->s : "\"\"", body->s ? body->n : 2) &&
           puts_(j, &j->out, "\n");
}

static int gen(js *j, const cJSON *s, const char *hint, char *name, size_t cap);

/* A sub-schema's rule name appended to b. */
static int sub(js *j, sbuf *b, const cJSON *s, const char *hint) {
    char name[64];
    return gen(j, s, hint, name, sizeof name) && puts_(j, b, name);
}

/* Gemma 4: the generic rule (generic_rules) of any value inside level
 * containers, or (obj) of any object that is container number level. */
static int generic(js *j, int obj, int level, char *name, size_t cap) {
    if (level < 1) obj = 1, level = 1; /* the arguments themselves: an object */
    if (level > j->max_depth) return jerr(j, SLM_ERR_ARG, "values nested deeper than %d levels (Gemma 4's calls)", j->max_depth);
    if (level < j->gmin) j->gmin = level;
    need(j, P_STRING), need(j, P_NUMBER), need(j, P_BOOLEAN), need(j, P_NULL), need(j, P_KEY);
    snprintf(name, cap, "%s-d%d", obj ? "object" : "value", level);
    return 1;
}

/* Into a container's values (gemma: refused past the parser's depth); out() leaves it. */
static int into(js *j) {
    if (j->gemma && j->level >= j->max_depth)
        return jerr(j, SLM_ERR_ARG, "values nested deeper than %d levels (Gemma 4's calls)", j->max_depth);
    j->level++;
    return 1;
}

static int out(js *j, int ok) {
    j->level--;
    return ok;
}

static int count_field(js *j, const cJSON *s, const char *key, int dflt, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
    *out = dflt;
    if (!v) return 1;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0)) return jerr(j, SLM_ERR_ARG, "'%s' must be a whole number >= 0", key);
    if (v->valuedouble > SLM_GRAMMAR_MAX_REPEAT) /* before any conversion: 1e70 fits no integer type */
        return jerr(j, SLM_ERR_ARG, "'%s' above %d is not supported", key, SLM_GRAMMAR_MAX_REPEAT);
    if (v->valuedouble != (double)(int)v->valuedouble) return jerr(j, SLM_ERR_ARG, "'%s' must be a whole number >= 0", key);
    *out = (int)v->valuedouble;
    return 1;
}

/* x (sep x){lo,hi} written as GBNF; hi < 0: unbounded. */
static int repeat_list(js *j, sbuf *b, const char *x, const char *sep, int lo, int hi) {
    if (hi == 0) return 1;
    if (lo == 0) {
        if (!putf(j, b, "(%s (%s %s)", x, sep, x)) return 0;
        if (hi < 0 ? !puts_(j, b, "*") : !putf(j, b, "{0,%d}", hi - 1)) return 0;
        return puts_(j, b, ")?");
    }
    if (!putf(j, b, "%s (%s %s)", x, sep, x)) return 0;
    return hi < 0 ? putf(j, b, "{%d,}", lo - 1) : putf(j, b, "{%d,%d}", lo - 1, hi - 1);
}

static int gen_string(js *j, sbuf *b, const cJSON *s) {
    int lo, hi;
    const int has = cJSON_GetObjectItemCaseSensitive(s, "minLength") || cJSON_GetObjectItemCaseSensitive(s, "maxLength");
    if (!count_field(j, s, "minLength", 0, &lo) || !count_field(j, s, "maxLength", -1, &hi)) return 0;
    if (hi >= 0 && hi < lo) return jerr(j, SLM_ERR_ARG, "maxLength %d is below minLength %d", hi, lo);
    if (!has) return need(j, P_STRING) && puts_(j, b, "string");
    need(j, P_CHAR);
    need(j, P_SPACE);
    const char *q = j->gemma ? G_QUOTE : "\"\\\"\"";
    if (hi < 0) return putf(j, b, "%s char{%d,} %s space", q, lo, q);
    return putf(j, b, "%s char{%d,%d} %s space", q, lo, hi, q);
}

static int gen_array(js *j, sbuf *b, const cJSON *s, const char *hint) {
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    int lo, hi;
    if (!count_field(j, s, "minItems", 0, &lo) || !count_field(j, s, "maxItems", -1, &hi)) return 0;
    if (hi >= 0 && hi < lo) return jerr(j, SLM_ERR_ARG, "maxItems %d is below minItems %d", hi, lo);
    if (cJSON_IsArray(items)) return jerr(j, SLM_ERR_ARG, "'items' as an array (tuples) is not supported");
    char item[64] = "value";
    if (!into(j)) return 0;
    if (items && !gen(j, items, hint, item, sizeof item)) return out(j, 0);
    if (!items && !(j->gemma ? generic(j, 0, j->level, item, sizeof item) : need(j, P_VALUE))) return out(j, 0);
    out(j, 1);
    need(j, P_SPACE);
    return puts_(j, b, "\"[\" space ") && repeat_list(j, b, item, "\",\" space", lo, hi) && puts_(j, b, " \"]\" space");
}

/* A JSON string of key as a GBNF literal. */
static int key_literal(js *j, sbuf *b, const char *key) {
    sbuf k = {0};
    if (j->gemma) { /* bare or quoted */
        int ok = gemma_key(j, &k, key) && literal(j, b, k.s, k.n);
        slm_xfree(k.s);
        return ok;
    }
    int ok = put(j, &k, "\"", 1);
    for (const char *p = key; ok && *p; p++) {
        const unsigned char c = (unsigned char)*p;
        char e[8];
        if (c == '"' || c == '\\') snprintf(e, sizeof e, "\\%c", c);
        else if (c < 0x20) snprintf(e, sizeof e, "\\u%04x", c);
        else snprintf(e, sizeof e, "%c", c);
        ok = puts_(j, &k, e);
    }
    ok = ok && put(j, &k, "\"", 1) && literal(j, b, k.s, k.n);
    slm_xfree(k.s);
    return ok;
}

static int is_required(const cJSON *req, const char *key) {
    const cJSON *it;
    cJSON_ArrayForEach(it, req) if (cJSON_IsString(it) && !strcmp(it->valuestring, key)) return 1;
    return 0;
}

/* Properties in order, required ones always, optional ones maybe: rules
 * first-i (no property written yet, from the i-th on) and rest-i (some
 * written: each one more follows a comma). */
static int object_body(js *j, sbuf *b, const cJSON *props, const cJSON *req, const cJSON *add);

static int gen_object(js *j, sbuf *b, const cJSON *s, const char *hint) {
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *add = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    if (props && !cJSON_IsObject(props)) return jerr(j, SLM_ERR_ARG, "'properties' must be an object");
    if (req && !cJSON_IsArray(req)) return jerr(j, SLM_ERR_ARG, "'required' must be an array of names");
    if (add && !cJSON_IsBool(add) && !cJSON_IsObject(add))
        return jerr(j, SLM_ERR_ARG, "'additionalProperties' must be a boolean or a schema");
    if (!props && (!add || cJSON_IsTrue(add))) {
        char any[32];
        if (j->gemma) return generic(j, 1, j->level + 1, any, sizeof any) && puts_(j, b, any);
        return need(j, P_OBJECT) && puts_(j, b, "object");
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, req) {
        if (!cJSON_IsString(it)) return jerr(j, SLM_ERR_ARG, "'required' must be an array of names");
        if (!cJSON_GetObjectItemCaseSensitive(props, it->valuestring))
            return jerr(j, SLM_ERR_ARG, "'required' names '%.64s', which is not in 'properties'", it->valuestring);
    }
    need(j, P_SPACE);
    (void)hint;
    return into(j) && out(j, object_body(j, b, props, req, add));
}

/* gen_object's properties (and additional ones) inside it. */
static int object_body(js *j, sbuf *b, const cJSON *props, const cJSON *req, const cJSON *add) {
    /* the additional key-value pair, when allowed */
    char addkv[64] = "";
    if (add && !cJSON_IsFalse(add)) {
        char val[64] = "value";
        if (cJSON_IsObject(add) && !gen(j, add, "additional", val, sizeof val)) return 0;
        if (!cJSON_IsObject(add) && !(j->gemma ? generic(j, 0, j->level, val, sizeof val) : need(j, P_VALUE))) return 0;
        need(j, j->gemma ? P_KEY : P_STRING);
        rule_name(j, "additional-kv", addkv, sizeof addkv);
        sbuf kb = {0};
        int ok = putf(j, &kb, "%s \":\" space %s", j->gemma ? "key" : "string", val) && add_rule(j, addkv, &kb);
        slm_xfree(kb.s);
        if (!ok) return 0;
    }
    const int n = cJSON_GetArraySize(props);
    char next_first[64], next_rest[64];
    rule_name(j, "obj-end", next_first, sizeof next_first);
    rule_name(j, "obj-end", next_rest, sizeof next_rest);
    sbuf t = {0};
    int ok = 1;
    if (addkv[0]) ok = putf(j, &t, "(%s (\",\" space %s)*)?", addkv, addkv);
    ok = ok && add_rule(j, next_first, &t);
    t.n = 0;
    if (ok && addkv[0]) ok = putf(j, &t, "(\",\" space %s)*", addkv);
    ok = ok && add_rule(j, next_rest, &t);
    /* from the last property to the first */
    for (int i = n - 1; ok && i >= 0; i--) {
        const cJSON *p = cJSON_GetArrayItem(props, i);
        char kv[64], first[64], rest[64];
        sbuf kb = {0};
        ok = key_literal(j, &kb, p->string) && puts_(j, &kb, " space \":\" space ") && sub(j, &kb, p, p->string);
        if (ok) {
            rule_name(j, p->string, kv, sizeof kv);
            ok = add_rule(j, kv, &kb);
        }
        slm_xfree(kb.s);
        const int r = is_required(req, p->string);
        rule_name(j, "obj-first", first, sizeof first);
        rule_name(j, "obj-rest", rest, sizeof rest);
        t.n = 0;
        ok = ok && putf(j, &t, "%s %s", kv, next_rest) && (r || putf(j, &t, " | %s", next_first)) && add_rule(j, first, &t);
        t.n = 0;
        ok = ok && putf(j, &t, "\",\" space %s %s", kv, next_rest) && (r || putf(j, &t, " | %s", next_rest)) &&
             add_rule(j, rest, &t);
        memcpy(next_first, first, sizeof first);
        memcpy(next_rest, rest, sizeof rest);
    }
    slm_xfree(t.s);
    return ok && putf(j, b, "\"{\" space %s \"}\" space", next_first);
}

static int gen_type(js *j, sbuf *b, const cJSON *s, const char *type, const char *hint) {
    static const struct { const char *name; int prim; } simple[] = {
        {"integer", P_INTEGER}, {"number", P_NUMBER}, {"boolean", P_BOOLEAN}, {"null", P_NULL}};
    for (size_t i = 0; i < sizeof simple / sizeof *simple; i++)
        if (!strcmp(type, simple[i].name)) return need(j, simple[i].prim) && puts_(j, b, simple[i].name);
    if (!strcmp(type, "string")) return gen_string(j, b, s);
    if (!strcmp(type, "array")) return gen_array(j, b, s, hint);
    if (!strcmp(type, "object")) return gen_object(j, b, s, hint);
    return jerr(j, SLM_ERR_ARG, "unknown type '%.32s'", type);
}

/* The schema a "#..." JSON pointer names. */
static const cJSON *resolve(js *j, const char *ref) {
    if (ref[0] != '#') return jerr(j, SLM_ERR_ARG, "$ref '%.64s': only references inside the schema (#...) are supported", ref), NULL;
    const cJSON *v = j->root;
    const char *p = ref + 1;
    while (*p == '/') {
        char seg[256];
        size_t k = 0;
        for (p++; *p && *p != '/'; p++) {
            char c = *p;
            if (c == '~' && (p[1] == '0' || p[1] == '1')) c = *++p == '0' ? '~' : '/';
            if (k < sizeof seg - 1) seg[k++] = c;
        }
        seg[k] = 0;
        v = cJSON_IsArray(v) ? cJSON_GetArrayItem(v, atoi(seg)) : cJSON_GetObjectItemCaseSensitive(v, seg);
        if (!v) return jerr(j, SLM_ERR_ARG, "$ref '%.64s' names nothing in the schema", ref), NULL;
    }
    if (*p) return jerr(j, SLM_ERR_ARG, "$ref '%.64s' is not a JSON pointer", ref), NULL;
    return v;
}

static int gen_ref(js *j, const char *ref, char *name, size_t cap) {
    for (int i = 0; i < j->nrefs; i++)
        if (!strcmp(j->refs[i].ref, ref) && (!j->gemma || j->refs[i].level == j->level)) { /* gemma: one rule per level */
            snprintf(name, cap, "%s", j->refs[i].name);
            return 1;
        }
    const cJSON *target = resolve(j, ref);
    if (!target) return 0;
    if (j->nrefs == j->caprefs) {
        int nc = j->caprefs ? j->caprefs * 2 : 8;
        ref_rule *t = slm_realloc(j->refs, (size_t)nc * sizeof *t);
        if (!t) return jerr(j, SLM_ERR_NOMEM, "out of memory");
        j->refs = t;
        j->caprefs = nc;
    }
    ref_rule *r = &j->refs[j->nrefs];
    if (!(r->ref = slm_strdup(ref))) return jerr(j, SLM_ERR_NOMEM, "out of memory");
    r->level = j->level;
    const char *last = strrchr(ref, '/');
    rule_name(j, last ? last + 1 : "ref", r->name, sizeof r->name);
    j->nrefs++;
    snprintf(name, cap, "%s", r->name);
    /* the rule is named before its body is written: a recursive reference finds it */
    char body_name[64];
    char alias[64];
    snprintf(alias, sizeof alias, "%s", name);
    if (!gen(j, target, last ? last + 1 : "ref", body_name, sizeof body_name)) return 0;
    sbuf b = {0};
    int ok = puts_(j, &b, body_name) && add_rule(j, alias, &b);
    slm_xfree(b.s);
    return ok;
}

/* The rule for schema s: its name into name[cap]. */
static int gen(js *j, const cJSON *s, const char *hint, char *name, size_t cap) {
    if (j->failed) return 0;
    if (cJSON_IsTrue(s)) return j->gemma ? generic(j, 0, j->level, name, cap) : need(j, P_VALUE) && snprintf(name, cap, "value") > 0;
    if (cJSON_IsFalse(s)) return jerr(j, SLM_ERR_ARG, "the schema false allows nothing");
    if (!cJSON_IsObject(s)) return jerr(j, SLM_ERR_ARG, "a schema must be an object or a boolean");
    if (j->depth >= SLM_GRAMMAR_MAX_DEPTH) return jerr(j, SLM_ERR_ARG, "schemas nested deeper than %d", SLM_GRAMMAR_MAX_DEPTH);
    for (size_t i = 0; i < sizeof refused_keys / sizeof *refused_keys; i++)
        if (cJSON_GetObjectItemCaseSensitive(s, refused_keys[i]))
            return jerr(j, SLM_ERR_ARG, "'%s' is not supported", refused_keys[i]);
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (ref) {
        if (!cJSON_IsString(ref)) return jerr(j, SLM_ERR_ARG, "'$ref' must be a string");
        j->depth++;
        int ok = gen_ref(j, ref->valuestring, name, cap);
        j->depth--;
        return ok;
    }
    j->depth++;
    sbuf b = {0};
    int ok = 1;
    const cJSON *v, *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "const"))) {
        ok = const_value(j, &b, v);
    } else if ((v = cJSON_GetObjectItemCaseSensitive(s, "enum"))) {
        if (!cJSON_IsArray(v) || !cJSON_GetArraySize(v)) ok = jerr(j, SLM_ERR_ARG, "'enum' must be a non-empty array");
        const cJSON *it;
        int k = 0;
        cJSON_ArrayForEach(it, v) if (ok) ok = (!k++ || puts_(j, &b, " | ")) && const_value(j, &b, it);
    } else if ((v = cJSON_GetObjectItemCaseSensitive(s, "anyOf")) || (v = cJSON_GetObjectItemCaseSensitive(s, "oneOf"))) {
        if (!cJSON_IsArray(v) || !cJSON_GetArraySize(v)) ok = jerr(j, SLM_ERR_ARG, "'%s' must be a non-empty array", v->string);
        const cJSON *it;
        int k = 0;
        cJSON_ArrayForEach(it, v) if (ok) ok = (!k++ || puts_(j, &b, " | ")) && sub(j, &b, it, hint);
    } else if (cJSON_IsString(type)) {
        ok = gen_type(j, &b, s, type->valuestring, hint);
    } else if (cJSON_IsArray(type)) {
        const cJSON *it;
        int k = 0;
        if (!cJSON_GetArraySize(type)) ok = jerr(j, SLM_ERR_ARG, "'type' must not be an empty list");
        cJSON_ArrayForEach(it, type) {
            if (!ok) break;
            if (!cJSON_IsString(it)) ok = jerr(j, SLM_ERR_ARG, "'type' must be a name or a list of names");
            else ok = (!k++ || puts_(j, &b, " | ")) && gen_type(j, &b, s, it->valuestring, hint);
        }
    } else if (type) {
        ok = jerr(j, SLM_ERR_ARG, "'type' must be a name or a list of names");
    } else if (cJSON_GetObjectItemCaseSensitive(s, "properties") || cJSON_GetObjectItemCaseSensitive(s, "additionalProperties")) {
        ok = gen_type(j, &b, s, "object", hint);
    } else if (cJSON_GetObjectItemCaseSensitive(s, "items")) {
        ok = gen_type(j, &b, s, "array", hint);
    } else {
        char any[32] = "value";
        ok = (j->gemma ? generic(j, 0, j->level, any, sizeof any) : need(j, P_VALUE)) && puts_(j, &b, any);
    }
    j->depth--;
    if (ok) {
        rule_name(j, hint, name, cap);
        ok = add_rule(j, name, &b);
    }
    slm_xfree(b.s);
    return ok;
}

/* Gemma 4: a call's arguments are an object, so the schema's top must be
 * one (a schema without a type is given type object). */
static int gemma_top(js *j, cJSON *doc) {
    static const char *const no[] = {"enum", "const", "anyOf", "oneOf", "$ref"};
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(doc, "type");
    if (!cJSON_IsObject(doc) || (type && !(cJSON_IsString(type) && !strcmp(type->valuestring, "object"))))
        return jerr(j, SLM_ERR_ARG, "Gemma 4's calls take an object of arguments: the schema must be of type object");
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        if (cJSON_GetObjectItemCaseSensitive(doc, no[i]))
            return jerr(j, SLM_ERR_ARG, "'%s' at the schema's top is not supported with Gemma 4's calls (their arguments are "
                        "an object of the schema's properties)", no[i]);
    if (!type && !cJSON_AddStringToObject(doc, "type", "object")) return jerr(j, SLM_ERR_NOMEM, "out of memory");
    return 1;
}

/* Schema text[0..len) (NULL: any object) as the rule `rule` in j->out; j's
 * $ref table is the schema's own and emptied after. */
static int one_schema(js *j, const char *schema, size_t len, const char *rule) {
    cJSON *doc = NULL;
    if (schema) {
        const char *end = NULL;
        doc = cJSON_ParseWithLengthOpts(schema, len, &end, 0);
        if (!doc) {
            if (slm_json_oom()) return jerr(j, SLM_ERR_NOMEM, "out of memory");
            return jerr(j, SLM_ERR_ARG, "not valid JSON (near byte %zu)", end && end >= schema ? (size_t)(end - schema) : (size_t)0);
        }
        while (end && end < schema + len && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')) end++;
        if (end != schema + len) {
            cJSON_Delete(doc);
            return jerr(j, SLM_ERR_ARG, "bytes after the JSON value");
        }
    }
    j->root = doc;
    char name[64] = "object";
    int ok = !doc || !j->gemma || gemma_top(j, doc);
    if (ok) ok = doc ? gen(j, doc, "root", name, sizeof name) : j->gemma ? generic(j, 1, 1, name, sizeof name) : need(j, P_OBJECT);
    ok = ok && putf(j, &j->out, "%s ::= %s\n", rule, name);
    for (int i = 0; i < j->nrefs; i++) slm_xfree(j->refs[i].ref);
    j->nrefs = 0;
    j->root = NULL;
    cJSON_Delete(doc);
    return ok;
}

/* Gemma 4: any value, object and array at each level from j->gmin to
 * j->max_depth (value-dL: inside L containers, one only a scalar at the
 * deepest; object-dL, array-dL: container number L); the string rule. */
static int gemma_rules(js *j) {
    for (int l = j->gmin; l <= j->max_depth; l++) {
        int ok = putf(j, &j->out, "value-d%d ::= ", l);
        if (ok && l < j->max_depth) ok = putf(j, &j->out, "object-d%d | array-d%d | ", l + 1, l + 1);
        ok = ok && putf(j, &j->out, "string | number | boolean | null\nobject-d%d ::= \"{\" (key \":\" value-d%d (\",\" key \":\" value-d%d)*)? \"}\"\n",
                        l, l, l) &&
             putf(j, &j->out, "array-d%d ::= \"[\" (value-d%d (\",\" value-d%d)*)? \"]\"\n", l, l, l);
        if (!ok) return 0;
    }
    if (!(j->prims & 1u << P_STRING)) return 1;
    char text[1024];
    if (!slm_gbnf_avoid(g_avoid, (int)(sizeof g_avoid / sizeof *g_avoid), text, sizeof text))
        return jerr(j, SLM_ERR_ARG, "internal: the string rule");
    return puts_(j, &j->out, "string ::= " G_QUOTE " ") && puts_(j, &j->out, text) && puts_(j, &j->out, " " G_QUOTE "\n");
}

/* Schemas 0..n) as rules; the shared rules once, after them. gemma: in
 * Gemma 4's syntax, containers nested at most max_depth deep. */
static slm_status schema_rules(int n, const char *const *schema, const size_t *len, const char *const *rule, int gemma,
                               int max_depth, char **out, int *bad, slm_err *err) {
    *out = NULL;
    if (bad) *bad = -1;
    js j;
    memset(&j, 0, sizeof j);
    j.err = err;
    j.gemma = gemma;
    j.pt = gemma ? gprims : prims;
    j.max_depth = max_depth;
    j.gmin = max_depth + 1;
    slm_json_init_hooks();
    slm_json_oom_clear();
    int ok = 1;
    for (int i = 0; ok && i < n; i++) {
        ok = one_schema(&j, schema[i], len[i], rule[i]);
        if (!ok && bad) *bad = i;
    }
    if (ok && gemma) ok = gemma_rules(&j);
    for (int p = 0; ok && p < P_N; p++)
        if (j.prims & (1u << p) && j.pt[p].body)
            ok = putf(&j, &j.out, "%s ::= ", j.pt[p].name) && puts_(&j, &j.out, j.pt[p].body) && puts_(&j, &j.out, "\n");
    slm_xfree(j.refs);
    if (!ok) {
        slm_xfree(j.out.s);
        return err && err->status ? err->status : SLM_ERR_ARG;
    }
    *out = j.out.s;
    return SLM_OK;
}

slm_status slm_json_schema_to_grammar(const char *schema, size_t len, char **out, slm_err *err) {
    const char *rule = "root";
    return schema_rules(1, &schema, &len, &rule, 0, 0, out, NULL, err);
}

slm_status slm_json_schema_rules(int n, const char *const *schema, const char *const *rule, char **out, int *bad, slm_err *err) {
    size_t lens[SLM_SCHEMA_RULES_MAX];
    *out = NULL;
    if (bad) *bad = -1;
    if (n < 0 || n > SLM_SCHEMA_RULES_MAX) return slm_errf(err, SLM_ERR_ARG, "JSON schema: more than %d schemas", SLM_SCHEMA_RULES_MAX);
    for (int i = 0; i < n; i++) lens[i] = schema[i] ? strlen(schema[i]) : 0;
    return schema_rules(n, schema, lens, rule, 0, 0, out, bad, err);
}

slm_status slm_gemma4_schema_rules(int n, const char *const *schema, const char *const *rule, int max_depth, char **out, int *bad,
                                   slm_err *err) {
    size_t lens[SLM_SCHEMA_RULES_MAX];
    *out = NULL;
    if (bad) *bad = -1;
    if (n < 0 || n > SLM_SCHEMA_RULES_MAX) return slm_errf(err, SLM_ERR_ARG, "JSON schema: more than %d schemas", SLM_SCHEMA_RULES_MAX);
    if (max_depth < 1 || max_depth > SLM_GRAMMAR_MAX_DEPTH)
        return slm_errf(err, SLM_ERR_ARG, "JSON schema: a nesting depth of 1 to %d, not %d", SLM_GRAMMAR_MAX_DEPTH, max_depth);
    for (int i = 0; i < n; i++) lens[i] = schema[i] ? strlen(schema[i]) : 0;
    return schema_rules(n, schema, lens, rule, 1, max_depth, out, bad, err);
}

#else

slm_status slm_json_schema_to_grammar(const char *schema, size_t len, char **out, slm_err *err) {
    (void)schema;
    (void)len;
    *out = NULL;
    return slm_errf(err, SLM_ERR_UNSUPPORTED, "JSON schema: this build has no JSON reader (cJSON)");
}

slm_status slm_json_schema_rules(int n, const char *const *schema, const char *const *rule, char **out, int *bad, slm_err *err) {
    (void)n;
    (void)schema;
    (void)rule;
    *out = NULL;
    if (bad) *bad = -1;
    return slm_errf(err, SLM_ERR_UNSUPPORTED, "JSON schema: this build has no JSON reader (cJSON)");
}

slm_status slm_gemma4_schema_rules(int n, const char *const *schema, const char *const *rule, int max_depth, char **out, int *bad,
                                   slm_err *err) {
    (void)max_depth;
    return slm_json_schema_rules(n, schema, rule, out, bad, err);
}

#endif

/* ---- texts that avoid words ------------------------------------------------------ */

typedef struct wbuf {
    char *s;
    size_t n, cap;
    int over; /* out of room */
} wbuf;

static void wput(wbuf *w, const char *s) {
    const size_t k = strlen(s);
    if (w->over || w->n + k + 1 > w->cap) {
        w->over = 1;
        return;
    }
    memcpy(w->s + w->n, s, k + 1);
    w->n += k;
}

/* Byte c in a literal, or (cls) in a character class. */
static void wbyte(wbuf *w, char c, int cls) {
    char e[3] = {c, 0, 0};
    if (cls ? c == '\\' || c == ']' || c == '^' || c == '-' : c == '"' || c == '\\') e[0] = '\\', e[1] = c;
    wput(w, e);
}

#define AVOID_MAX 16 /* words */

/* The bytes that follow words[at][0..k) in the words (c[], distinct), each
 * with a word it continues (src[]) and whether it ends one (leaf[]). */
static int next_bytes(const char *const *words, int n, int at, size_t k, char *c, int *src, int *leaf) {
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (strlen(words[i]) <= k || memcmp(words[i], words[at], k)) continue;
        int x = 0;
        while (x < m && c[x] != words[i][k]) x++;
        if (x == m) c[m] = words[i][k], src[m] = i, leaf[m++] = 0;
        leaf[x] |= strlen(words[i]) == k + 1;
    }
    return m;
}

enum { W_EXIT, W_LOOP, W_END };
/* From the trie node words[at][0..k) (a '<' read, and bytes that may go
 * on to a word): W_EXIT, bytes on the trie then one that leaves it (not
 * '<': back to plain text); W_LOOP, bytes on the trie then '<' (a new
 * node one); W_END, bytes on the trie (the text may end there). */
static void walk(wbuf *w, const char *const *words, int n, int at, size_t k, int kind) {
    char c[AVOID_MAX];
    int src[AVOID_MAX], leaf[AVOID_MAX], inner = 0;
    const int m = next_bytes(words, n, at, k, c, src, leaf);
    for (int i = 0; i < m; i++) inner += !leaf[i];
    if (kind == W_END && !inner) return;
    wput(w, "(");
    if (kind == W_EXIT) {
        wput(w, "[^<");
        for (int i = 0; i < m; i++) wbyte(w, c[i], 1);
        wput(w, "]");
    }
    if (kind == W_LOOP) wput(w, "\"<\"");
    int first = kind == W_END;
    for (int i = 0; i < m; i++) {
        if (leaf[i]) continue;
        wput(w, first ? "\"" : " | \"");
        first = 0;
        wbyte(w, c[i], 0);
        wput(w, "\" ");
        walk(w, words, n, src[i], k + 1, kind);
    }
    wput(w, kind == W_END ? ")?" : ")");
}

size_t slm_gbnf_avoid(const char *const *words, int n, char *out, size_t cap) {
    if (n < 1 || n > AVOID_MAX || !cap) return 0;
    for (int i = 0; i < n; i++) {
        const size_t k = strlen(words[i]);
        if (k < 2 || words[i][0] != '<' || memchr(words[i] + 1, '<', k - 1)) return 0;
        for (size_t q = 0; q < k; q++)
            if ((unsigned char)words[i][q] < 0x20 || (unsigned char)words[i][q] >= 0x7F) return 0;
    }
    wbuf w = {out, 0, cap, 0};
    out[0] = 0;
    /* plain bytes, or a '<' and bytes on the trie that leave it; at the end, a '<' and bytes on it */
    wput(&w, "([^<] | \"<\" ");
    walk(&w, words, n, 0, 1, W_LOOP);
    wput(&w, "* ");
    walk(&w, words, n, 0, 1, W_EXIT);
    wput(&w, ")* (\"<\" ");
    walk(&w, words, n, 0, 1, W_LOOP);
    wput(&w, "* ");
    walk(&w, words, n, 0, 1, W_END);
    wput(&w, ")?");
    return w.over ? 0 : w.n;
}
