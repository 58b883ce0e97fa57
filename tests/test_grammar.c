/* GBNF grammars (text/grammar.h): the parser against malformed and hostile
 * texts (each refused with the line and column), the matcher against
 * hand-checked strings that must match or not, text fed in every split
 * (a character cut between pieces), the vocabulary mask against checking
 * each token alone, and JSON schemas converted to grammars matched against
 * valid and invalid documents. */
#include <stdint.h>

#include "text/grammar.h"
#include "t.h"

static slm_grammar *compile(const char *text) {
    slm_grammar *g = NULL;
    slm_err err = {0};
    slm_status st = slm_grammar_compile(text, strlen(text), &g, &err);
    CHECKF(st == SLM_OK, "%s: %s", text, err.msg);
    return g;
}

/* 1 when s matches g (fed whole), with the same answer fed byte by byte and
 * in two pieces at every cut. */
static int match(const slm_grammar *g, const char *s) {
    const size_t n = strlen(s);
    const int whole = slm_grammar_matches(g, s, n);
    slm_gmatch *m = NULL;
    slm_err err = {0};
    CHECK(slm_gmatch_new(g, &m, &err) == SLM_OK);
    if (!m) return -1;
    for (size_t cut = 0; cut <= n; cut++) {
        slm_gmatch_reset(m);
        int ok = 1;
        if (cut && slm_gmatch_check(m, s, cut) != 1) ok = 0;
        if (ok && cut && slm_gmatch_accept(m, s, cut, &err) != SLM_OK) ok = 0;
        if (ok && cut < n && slm_gmatch_check(m, s + cut, n - cut) != 1) ok = 0;
        if (ok && cut < n && slm_gmatch_accept(m, s + cut, n - cut, &err) != SLM_OK) ok = 0;
        if (ok) ok = slm_gmatch_can_end(m);
        CHECKF(ok == whole, "'%s' cut at %zu: %d, whole: %d", s, cut, ok, whole);
    }
    slm_gmatch_reset(m);
    int bytes = 1;
    for (size_t i = 0; bytes && i < n; i++) bytes = slm_gmatch_accept(m, s + i, 1, &err) == SLM_OK;
    if (bytes) bytes = slm_gmatch_can_end(m);
    CHECKF(bytes == whole, "'%s' byte by byte: %d, whole: %d", s, bytes, whole);
    slm_gmatch_free(m);
    return whole;
}

typedef struct gcase {
    const char *grammar;
    const char *yes[8];
    const char *no[8];
} gcase;

static const gcase cases[] = {
    {"root ::= \"yes\" | \"no\"", {"yes", "no"}, {"", "y", "yess", "No", " yes", "yesno"}},
    {"root ::= [a-c]+ \"!\"", {"a!", "abcabc!", "c!"}, {"!", "d!", "a", "ab!!", "A!"}},
    {"root ::= [^a-z\\n]*", {"", "ABC 123", "\xc3\xa9\xe2\x82\xac"}, {"a", "AbC", "x\n", "\n"}},
    {"root ::= \"a\"? \"b\"{2,3} \"c\"{2} \"d\"{1,}",
     {"bbccd", "abbbccdd", "bbbccddd"},
     {"bccd", "bbbbccd", "bbcd", "bbcc", "aabbccd"}},
    {"root ::= x{0,2} \"-\"\nx ::= \"ab\" | \"c\"", {"-", "ab-", "cab-", "cc-"}, {"abc", "ccc-", "a-", "abab ab-"}},
    {"root ::= (\"(\" root \")\")*", {"", "()", "(())()", "((()))"}, {"(", ")", "(()", "())"}},
    {"# a comment\nroot ::= item (\",\" item)*   # trailing\nitem ::= [0-9]+\n", {"1", "12,3", "0,0,0"}, {"", "1,", ",1", "1,,2"}},
    {"root ::= . . \"\\x41\\u00e9\\U0001F600\"",
     {"xyA\xc3\xa9\xf0\x9f\x98\x80", "\xe2\x82\xac\nA\xc3\xa9\xf0\x9f\x98\x80"},
     {"xA\xc3\xa9\xf0\x9f\x98\x80", "xyA\xc3\xa9"}},
    {"root ::= (\n  \"a\" |\n  \"b\"\n) \"\\\"\" [\\]\\[\\\\]", {"a\"]", "b\"[", "a\"\\"}, {"a\"", "c\"]", "a]"}},
    {"root ::= ws \"{\" ws \"}\"\nws ::= [ \\t\\n]*", {"{}", " { }", "\n\t{\n}"}, {"{", "{}}", " {x}"}},
    {"root ::= \"\" | \"a\"", {"", "a"}, {"b", "aa"}},
    {"root ::= [\\x00-\\x7f]+", {"abc", "\x01\x7f"}, {"\xc3\xa9"}},
    {"root ::= [\xce\xb1-\xcf\x89]{3}", {"\xce\xb1\xce\xb2\xce\xb3"}, {"abc", "\xce\xb1\xce\xb2"}},
};

static void test_matcher_cases(void) {
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        slm_grammar *g = compile(cases[c].grammar);
        if (!g) continue;
        for (int i = 0; i < 8 && cases[c].yes[i]; i++)
            CHECKF(match(g, cases[c].yes[i]) == 1, "grammar %zu should match '%s'", c, cases[c].yes[i]);
        for (int i = 0; i < 8 && cases[c].no[i]; i++)
            CHECKF(match(g, cases[c].no[i]) == 0, "grammar %zu should not match '%s'", c, cases[c].no[i]);
        slm_grammar_free(g);
    }
}

/* A malformed grammar is refused, the message naming where. */
static void refused(const char *text, const char *where, const char *what) {
    slm_grammar *g = NULL;
    slm_err err = {0};
    slm_status st = slm_grammar_compile(text, strlen(text), &g, &err);
    CHECKF(st != SLM_OK && !g, "accepted: %s", text);
    CHECKF(strstr(err.msg, where) != NULL, "'%s': '%s' lacks '%s'", text, err.msg, where);
    CHECKF(strstr(err.msg, what) != NULL, "'%s': '%s' lacks '%s'", text, err.msg, what);
    slm_grammar_free(g);
}

static void test_parser_refuses(void) {
    refused("", "line 1, column 1", "no rule 'root'");
    refused("item ::= \"a\"", "line 1", "no rule 'root'");
    refused("root ::= item", "line 1, column 10", "'item' is used but not defined");
    refused("root ::= \"abc", "line 1, column 10", "unterminated string");
    refused("root ::= [abc", "line 1, column 10", "unterminated character class");
    refused("root ::= [z-a]", "column 10", "runs backwards");
    refused("root ::= (\"a\"", "column 10", "not closed");
    refused("root ::= \"a\")", "column 13", "')' without a '('");
    refused("root ::= * \"a\"", "column 10", "nothing before it");
    refused("root ::= \"a\"{3,2}", "column 13", "maximum is below the minimum");
    refused("root ::= \"a\"{99999}", "column 14", "over 10000");
    refused("root ::= \"\\q\"", "column 11", "unknown escape");
    refused("root ::= \"\\x4\"", "column 11", "2 hexadecimal digits");
    refused("root ::= \"\\U00110000\"", "column 11", "past U+10FFFF");
    refused("root ::= \"\xff\"", "column 11", "invalid UTF-8");
    refused("root ::= <[12]>", "column 10", "token references");
    refused("root \"a\"", "column 6", "expected '::='");
    refused("root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1", "defined twice");
    refused("root ::= x\nx ::= x \"a\" | \"b\"", "line 2, column 1", "'x' is left-recursive");
    refused("root ::= a\na ::= b \"x\"\nb ::= \"c\"? a", "line 2, column 1", "left-recursive");
    refused("root ::= (\"\" | \"a\")* \"b\"", "column 20", "'root_2' is left-recursive");
    refused("root ::= \"a\" @", "column 14", "unexpected '@'");
    /* hostile: deep nesting */
    char deep[2 * SLM_GRAMMAR_MAX_DEPTH + 64];
    size_t n = 0;
    n += (size_t)snprintf(deep, sizeof deep, "root ::= ");
    for (int i = 0; i < SLM_GRAMMAR_MAX_DEPTH + 1; i++) deep[n++] = '(';
    deep[n] = 0;
    refused(deep, "column 138", "nested deeper than 128");
    /* hostile: expansion past the element limit, and past the rule limit */
    char big[256];
    n = (size_t)snprintf(big, sizeof big, "root ::= \"");
    for (int i = 0; i < 110; i++) big[n++] = 'a';
    snprintf(big + n, sizeof big - n, "\"{10000}");
    refused(big, "column", "expands to more than");
    refused("root ::= x{0,10000} x{0,10000} x{0,10000} x{0,10000} x{0,10000} x{0,10000} x{0,10000}\nx ::= \"a\"",
            "line 1", "more than 65536 rules");
}

/* Grammars whose stacks multiply are stopped by the work limits, with a
 * message, not by time or memory. */
static void test_work_limits(void) {
    /* 3^12 ways to match nothing before each character */
    slm_grammar *g = compile("root ::= (e e e e e e e e e e e e \"a\")+\ne ::= \"\" | \"\" | \"\"");
    if (g) {
        slm_gmatch *m = NULL;
        slm_err err = {0};
        slm_status st = slm_gmatch_new(g, &m, &err);
        if (st == SLM_OK) {
            int r = slm_gmatch_check(m, "aaaa", 4);
            CHECKF(r == 1 || r == -1, "r=%d", r);
            slm_gmatch_free(m);
        } else {
            CHECKF(strstr(err.msg, "ambiguous") != NULL, "%s", err.msg);
        }
        slm_grammar_free(g);
    }
    /* nesting deeper than the node buffer */
    g = compile("root ::= \"(\" root \")\" | \"x\"");
    if (g) {
        slm_gmatch *m = NULL;
        slm_err err = {0};
        CHECK(slm_gmatch_new(g, &m, &err) == SLM_OK);
        slm_status st = SLM_OK;
        for (int i = 0; i < 100000 && st == SLM_OK; i++) st = slm_gmatch_accept(m, "(", 1, &err);
        CHECKF(st == SLM_ERR_CAPACITY && strstr(err.msg, "outgrew"), "%d %s", (int)st, err.msg);
        slm_gmatch_free(m);
        slm_grammar_free(g);
    }
}

/* Long texts: the matcher compacts its nodes now and then (every quarter
 * of its buffer); the stacks must come through intact. */
static void test_long_text(void) {
    slm_grammar *g = compile("root ::= (\"(\" root \")\" | [a-z])*");
    if (!g) return;
    slm_gmatch *m = NULL;
    slm_err err = {0};
    CHECK(slm_gmatch_new(g, &m, &err) == SLM_OK);
    int ok = 1, depth = 0;
    for (int i = 0; ok && i < 200000; i++) { /* nest 3000 deep, with letters between, then close */
        const char c = i < 3000 ? '(' : i < 197000 ? "ab()x"[i % 5] : ')';
        ok = slm_gmatch_accept(m, &c, 1, &err) == SLM_OK;
        depth += c == '(' ? 1 : c == ')' ? -1 : 0;
        if (ok && (i % 9973) == 0) ok = slm_gmatch_can_end(m) == (depth == 0) && slm_gmatch_check(m, ")", 1) == (depth > 0);
    }
    CHECKF(ok && depth == 0, "%s (depth %d)", err.msg, depth);
    CHECK(slm_gmatch_can_end(m) && slm_gmatch_check(m, ")", 1) == 0 && slm_gmatch_check(m, "(z)", 3) == 1);
    slm_gmatch_free(m);
    slm_grammar_free(g);
}

/* can_end and done; a partial character at the end of a piece. */
static void test_state(void) {
    slm_grammar *g = compile("root ::= \"ab\" \"c\"? | \"\xc3\xa9\"");
    if (!g) return;
    slm_gmatch *m = NULL;
    slm_err err = {0};
    CHECK(slm_gmatch_new(g, &m, &err) == SLM_OK);
    CHECK(!slm_gmatch_can_end(m) && !slm_gmatch_done(m));
    CHECK(slm_gmatch_check(m, "a", 1) == 1);
    CHECK(slm_gmatch_check(m, "b", 1) == 0);
    CHECK(slm_gmatch_check(m, "\xc3", 1) == 1);  /* é's first byte */
    CHECK(slm_gmatch_check(m, "\xc4", 1) == 0);  /* no class takes U+0100..U+013F */
    CHECK(slm_gmatch_check(m, "\xc3\xa8", 2) == 0);
    CHECK(slm_gmatch_check(m, "\xe0", 1) == 0); /* U+0800.. (not the overlong U+0000..U+07FF) */
    CHECK(slm_gmatch_accept(m, "b", 1, &err) == SLM_ERR_ARG);
    CHECK(slm_gmatch_accept(m, "ab", 2, &err) == SLM_OK);
    CHECK(slm_gmatch_can_end(m) && !slm_gmatch_done(m));
    CHECK(slm_gmatch_accept(m, "c", 1, &err) == SLM_OK);
    CHECK(slm_gmatch_can_end(m) && slm_gmatch_done(m));
    CHECK(slm_gmatch_check(m, "c", 1) == 0);
    slm_gmatch_reset(m);
    CHECK(slm_gmatch_accept(m, "\xc3", 1, &err) == SLM_OK);
    CHECK(!slm_gmatch_can_end(m));
    CHECK(slm_gmatch_check(m, "\xa9", 1) == 1 && slm_gmatch_check(m, "\xa8", 1) == 0 && slm_gmatch_check(m, "a", 1) == 0);
    CHECK(slm_gmatch_accept(m, "\xa9", 1, &err) == SLM_OK);
    CHECK(slm_gmatch_done(m));
    slm_gmatch_free(m);
    slm_grammar_free(g);
}

/* The mask (tokens sharing prefixes) equals checking every token alone. */
static void test_mask(void) {
    static const char *const toks[] = {"", "a", "ab", "abc", "abd", "b", "ba", "\"", "\"a", "{", "{\"", "{\"a", "}", " ",
                                       "  ", "1", "12", "123", ",", ":", "\xc3", "\xc3\xa9", "\xa9", "\xc3\xa9x", "ab",
                                       "true", "tr", "null", "\xff", "\xe2\x82", "\xe2\x82\xac", "x\xc3"};
    enum { N = sizeof toks / sizeof *toks };
    uint32_t len[N];
    for (int i = 0; i < N; i++) len[i] = (uint32_t)strlen(toks[i]);
    slm_gvocab *v = NULL;
    slm_err err = {0};
    CHECK(slm_gvocab_new(N, toks, len, &v, &err) == SLM_OK);
    static const char *const grammars[] = {
        "root ::= \"{\" ws (kv (\",\" ws kv)*)? \"}\"\nkv ::= str \":\" ws val\nval ::= str | [0-9]+ | \"true\" | \"null\"\n"
        "str ::= \"\\\"\" [^\"]* \"\\\"\"\nws ::= \" \"?",
        "root ::= [a-c\xc3\xa9]* x\nx ::= \"x\" | \"\xe2\x82\xac\"",
        "root ::= \"ab\" | \"abd\" | \"b\"+"};
    static const char *const prefixes[] = {"", "{", "{\"a", "{\"a\":", "{\"a\": 1", "a", "ab", "\xc3", "b"};
    for (size_t gi = 0; gi < sizeof grammars / sizeof *grammars; gi++) {
        slm_grammar *g = compile(grammars[gi]);
        if (!g) continue;
        slm_gmatch *m = NULL;
        CHECK(slm_gmatch_new(g, &m, &err) == SLM_OK);
        for (size_t p = 0; m && p < sizeof prefixes / sizeof *prefixes; p++) {
            slm_gmatch_reset(m);
            if (prefixes[p][0] && slm_gmatch_accept(m, prefixes[p], strlen(prefixes[p]), &err) != SLM_OK) continue;
            uint8_t allowed[N];
            int count = slm_gmatch_mask(m, v, allowed), want = 0;
            for (int i = 0; i < N; i++) {
                const int c = len[i] ? slm_gmatch_check(m, toks[i], len[i]) : 0;
                CHECKF(allowed[i] == c, "grammar %zu after '%s': token '%s' mask %d, check %d", gi, prefixes[p], toks[i],
                       allowed[i], c);
                want += c;
            }
            CHECK(count == want);
        }
        slm_gmatch_free(m);
        slm_grammar_free(g);
    }
    slm_gvocab_free(v);
}


/* ---- JSON schemas ----------------------------------------------------------------- */

typedef struct scase {
    const char *schema; /* NULL: json_object */
    const char *yes[8];
    const char *no[8];
} scase;

static const scase schemas[] = {
    {"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":5},\"age\":{\"type\":\"integer\"},"
     "\"ok\":{\"type\":\"boolean\"}},\"required\":[\"name\",\"age\"],\"additionalProperties\":false}",
     {"{\"name\": \"Bob\", \"age\": 42}", "{\"name\":\"\",\"age\":-7,\"ok\":true}", "{ \"name\": \"abcde\", \"age\": 0, \"ok\": false }",
      "{\"name\": \"a\\\"b\", \"age\": 1}\n  "},
     {"{\"age\": 42, \"name\": \"Bob\"}", "{\"name\": \"Bob\"}", "{\"name\": \"abcdef\", \"age\": 1}", "{\"name\": \"Bob\", \"age\": 4.5}",
      "{\"name\": \"Bob\", \"age\": 42, \"x\": 1}", "{\"name\": \"Bob\", \"age\": 042}", "{\"name\": \"Bob\", \"age\": 42,}",
      "{\"name\": \"Bob\", \"age\": 42"}},
    {"{\"enum\":[\"red\",\"green\",3,null]}", {"\"red\"", "3", "null", "\"green\" "}, {"\"blue\"", "\"Red\"", "4", "red"}},
    {"{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"minItems\":1,\"maxItems\":3}",
     {"[1]", "[1, 2.5, -3e10]", "[0.5,1,2]", "[ -0.0 ]"},
     {"[]", "[1,2,3,4]", "[1,]", "[\"a\"]", "[01]", "[1.]"}},
    {"{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"next\":{\"anyOf\":[{\"$ref\":"
     "\"#/$defs/node\"},{\"type\":\"null\"}]}},\"required\":[\"v\",\"next\"]}},\"$ref\":\"#/$defs/node\"}",
     {"{\"v\": 1, \"next\": null}", "{\"v\": 1, \"next\": {\"v\": 2, \"next\": {\"v\": 3, \"next\": null}}}"},
     {"{\"v\": 1}", "{\"v\": 1, \"next\": 2}", "{\"v\": 1, \"next\": {\"v\": 2}}"}},
    {NULL, {"{}", "{\"a\": [1, {\"b\": null}], \"c\": \"x\", \"d\": true}", "{ }"}, {"[]", "\"a\"", "{\"a\"}", "{\"a\": }", "1"}},
    {"{\"type\":[\"string\",\"null\"]}", {"\"x\"", "null"}, {"1", "nul"}},
    {"{\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}}}",
     {"{}", "{\"a\": 1}", "{\"b\": 2}", "{\"a\": 1, \"b\": 2}"},
     {"{\"b\": 2, \"a\": 1}", "{\"a\": 1 \"b\": 2}", "{, \"b\": 2}", "{\"a\": 1, \"a\": 1}"}},
    {"{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"}},\"required\":[\"id\"],\"additionalProperties\":{\"type\":\"string\"}}",
     {"{\"id\": 1}", "{\"id\": 1, \"x\": \"y\", \"z\": \"\"}"},
     {"{\"id\": 1, \"x\": 2}", "{\"x\": \"y\", \"id\": 1}", "{}"}},
    {"{\"definitions\":{\"s\":{\"type\":\"string\",\"minLength\":2}},\"type\":\"array\",\"items\":{\"$ref\":\"#/definitions/s\"}}",
     {"[]", "[\"ab\", \"abc\"]", "[\"\\u00e9\\n\"]"}, {"[\"a\"]", "[\"ab\" \"cd\"]"}},
    {"{\"type\":\"string\",\"title\":\"annotations are ignored\",\"description\":\"d\"}",
     {"\"\\u00e9\"", "\"\xc3\xa9\"", "\"\\\\\"", "\"tab\\there\""}, {"\"\\x\"", "\"a", "\"\n\"", "\"\\u12\""}},
    {"{\"const\":{\"a\":[1,\"x\"]}}", {"{\"a\":[1,\"x\"]}"}, {"{\"a\": [1, \"x\"]}", "{}"}},
    {"true", {"1", "[true, false, null]", "\"s\""}, {"nope", "[1 2]"}},
};

static void test_schemas(void) {
    for (size_t c = 0; c < sizeof schemas / sizeof *schemas; c++) {
        const scase *k = &schemas[c];
        char *text = NULL;
        slm_err err = {0};
        slm_status st = slm_json_schema_to_grammar(k->schema, k->schema ? strlen(k->schema) : 0, &text, &err);
        CHECKF(st == SLM_OK, "schema %zu: %s", c, err.msg);
        if (st) continue;
        slm_grammar *g = compile(text);
        if (!g) fprintf(stderr, "%s\n", text);
        for (int i = 0; g && i < 8 && k->yes[i]; i++)
            CHECKF(match(g, k->yes[i]) == 1, "schema %zu should allow %s", c, k->yes[i]);
        for (int i = 0; g && i < 8 && k->no[i]; i++)
            CHECKF(match(g, k->no[i]) == 0, "schema %zu should not allow %s", c, k->no[i]);
        slm_grammar_free(g);
        slm_xfree(text);
    }
}

/* An enum of 3000 strings: 3000 parse stacks open at once, then one. */
static void test_big_enum(void) {
    size_t cap = 3000 * 16 + 64, n = 0;
    char *schema = malloc(cap);
    if (!schema) return;
    n += (size_t)snprintf(schema + n, cap - n, "{\"enum\":[");
    for (int i = 0; i < 3000; i++) n += (size_t)snprintf(schema + n, cap - n, "%s\"v%d\"", i ? "," : "", i * 7);
    snprintf(schema + n, cap - n, "]}");
    char *text = NULL;
    slm_err err = {0};
    CHECKF(slm_json_schema_to_grammar(schema, strlen(schema), &text, &err) == SLM_OK, "%s", err.msg);
    slm_grammar *g = text ? compile(text) : NULL;
    if (g) {
        CHECK(slm_grammar_matches(g, "\"v0\"", 4) == 1);
        CHECK(slm_grammar_matches(g, "\"v20993\"", 8) == 1);
        CHECK(slm_grammar_matches(g, "\"v20994\"", 8) == 0);
        CHECK(slm_grammar_matches(g, "\"v1\"", 4) == 0);
    }
    slm_grammar_free(g);
    slm_xfree(text);
    free(schema);
}

static void schema_refused(const char *schema, const char *what) {
    char *text = NULL;
    slm_err err = {0};
    slm_status st = slm_json_schema_to_grammar(schema, strlen(schema), &text, &err);
    if (st == SLM_OK) { /* some are refused by the grammar compiler */
        slm_grammar *g = NULL;
        st = slm_grammar_compile(text, strlen(text), &g, &err);
        slm_grammar_free(g);
        slm_xfree(text);
    }
    CHECKF(st != SLM_OK, "accepted: %s", schema);
    CHECKF(strstr(err.msg, what) != NULL, "%s: '%s' lacks '%s'", schema, err.msg, what);
}

static void test_schemas_refused(void) {
    schema_refused("{\"type\":\"string\",\"pattern\":\"a+\"}", "'pattern' is not supported");
    schema_refused("{\"type\":\"integer\",\"minimum\":0}", "'minimum' is not supported");
    schema_refused("{\"allOf\":[{}]}", "'allOf' is not supported");
    schema_refused("{\"$ref\":\"http://example.com/s.json\"}", "only references inside the schema");
    schema_refused("{\"$ref\":\"#/$defs/missing\"}", "names nothing");
    schema_refused("{\"type\":\"foo\"}", "unknown type 'foo'");
    schema_refused("{\"type\":", "not valid JSON");
    schema_refused("{} x", "bytes after");
    schema_refused("{\"properties\":{},\"required\":[\"x\"]}", "'x', which is not in 'properties'");
    schema_refused("{\"type\":\"array\",\"maxItems\":99999}", "'maxItems' above 10000");
    schema_refused("{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", "below minItems");
    schema_refused("{\"type\":\"string\",\"minLength\":-1}", "whole number");
    schema_refused("{\"type\":\"string\",\"minLength\":2.5}", "whole number");
    schema_refused("{\"type\":\"array\",\"maxItems\":7e69}", "'maxItems' above 10000"); /* found by fuzz_http: no conversion first */
    schema_refused("{\"type\":\"array\",\"maxItems\":1e999}", "'maxItems' above 10000");
    schema_refused("false", "allows nothing");
    schema_refused("{\"enum\":[\"a\xff\"]}", "not valid UTF-8"); /* found by fuzz_grammar */
    schema_refused("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}", "left-recursive");
    char deep[2048];
    size_t n = 0;
    for (int i = 0; i < 200; i++) n += (size_t)snprintf(deep + n, sizeof deep - n, "{\"items\":");
    n += (size_t)snprintf(deep + n, sizeof deep - n, "{}");
    for (int i = 0; i < 200; i++) deep[n++] = '}';
    deep[n] = 0;
    schema_refused(deep, "nested deeper than");
}

int main(void) {
    T_RUN(test_matcher_cases);
    T_RUN(test_parser_refuses);
    T_RUN(test_work_limits);
    T_RUN(test_state);
    T_RUN(test_long_text);
    T_RUN(test_mask);
    T_RUN(test_schemas);
    T_RUN(test_schemas_refused);
    T_RUN(test_big_enum);
    T_DONE();
}
