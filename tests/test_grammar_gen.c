/* Generation under a grammar, end to end on stories260K + tok512 (the
 * grammar code of engine/gsample.c and text/grammar*.c): at temperature 1
 * over many seeds every reply matches the grammar, checked by plain C (a
 * choice of words) or by cJSON and field checks (a JSON schema), and ends
 * with a stop token; greedy too; a prompt that is only BOS (pieces lose
 * their leading space there); a draft model (speculation is off, the reply
 * still matches); a bad grammar is refused when the session is made; the
 * sampling allocates nothing per token. */
#include <stdint.h>

#include <stdlib.h>

#include "staticlm.h"
#include "t.h"
#include "run_cmd.h"
#include "text/grammar.h"

#ifdef SLM_HAVE_CJSON
#include <cjson/cJSON.h>
#endif

#define M(f) T_SHARED("models/" f)

static slm_engine *load(const char *draft) {
    slm_options o = slm_default_options();
    o.tokenizer_path = M("tok512.bin");
    o.n_threads = 1;
    o.draft_path = draft;
    slm_engine *e = NULL;
    if (slm_load(&e, M("stories260K.bin"), &o)) {
        fprintf(stderr, "  load: %s\n", slm_last_error(e));
        slm_free(e);
        return NULL;
    }
    return e;
}

/* One reply to prompt under grammar: its text into out; the stop reason, or -1. */
static int reply(slm_engine *e, const char *prompt, const char *grammar, float temp, uint64_t seed, int n, char *out,
                 size_t cap, slm_session_stats *stats) {
    slm_session_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.samp.temperature = temp;
    cfg.samp.seed = seed;
    cfg.samp.grammar = grammar;
    cfg.n_predict = n;
    slm_session *s = NULL;
    if (slm_session_new(e, &cfg, &s)) {
        fprintf(stderr, "  session: %s\n", slm_last_error(e));
        return -1;
    }
    int why = -1;
    if (slm_session_feed_text(s, prompt, SLM_FEED_BOS) == SLM_OK) {
        int32_t id = 0;
        while (id >= 0)
            if (slm_session_next(s, &id, NULL)) {
                fprintf(stderr, "  next: %s\n", slm_session_error(s));
                break;
            }
        if (id < 0) why = slm_session_stop_reason(s);
        size_t len;
        const char *t = slm_session_text(s, &len, NULL);
        snprintf(out, cap, "%s", t);
    }
    if (stats) slm_session_get_stats(s, stats);
    slm_session_free(s);
    return why;
}

static void test_words(void) {
    slm_engine *e = load(NULL);
    if (!e) { CHECK(0); return; }
    const char *g = "root ::= \" \" (\"yes\" | \"maybe\" | \"cat\" | \"dog\")";
    int seen[4] = {0}, bad = 0;
    static const char *const words[] = {" yes", " maybe", " cat", " dog"};
    for (uint64_t seed = 1; seed <= 200; seed++) {
        char out[256];
        int why = reply(e, "Once upon a time", g, 1.5f, seed, 50, out, sizeof out, NULL);
        int k = 0;
        while (k < 4 && strcmp(out, words[k])) k++;
        if (k < 4) seen[k]++;
        if (k == 4 || why != SLM_STOP_TOKEN) {
            if (bad++ < 5) fprintf(stderr, "  seed %llu: '%s' (stop %d)\n", (unsigned long long)seed, out, why);
        }
    }
    CHECKF(bad == 0, "%d of 200 replies outside the grammar or not ended by a stop token", bad);
    CHECKF(seen[0] + seen[1] + seen[2] + seen[3] == 200 && (seen[0] > 0) + (seen[1] > 0) + (seen[2] > 0) + (seen[3] > 0) >= 2,
           "yes %d maybe %d cat %d dog %d", seen[0], seen[1], seen[2], seen[3]);
    char out[256];
    CHECK(reply(e, "Once upon a time", g, 0.0f, 0, 50, out, sizeof out, NULL) == SLM_STOP_TOKEN);
    CHECKF(!strcmp(out, " yes") || !strcmp(out, " maybe") || !strcmp(out, " cat") || !strcmp(out, " dog"), "greedy: '%s'", out);
    /* only BOS before the reply: a sentence of lower case words */
    for (uint64_t seed = 1; seed <= 20; seed++) {
        int why = reply(e, "", "root ::= [A-Z] [a-z]+ (\" \" [a-z]+){2,6} \".\"", 1.0f, seed, 100, out, sizeof out, NULL);
        int ok = why == SLM_STOP_TOKEN && out[0] >= 'A' && out[0] <= 'Z', nw = 1;
        size_t n = strlen(out);
        for (size_t i = 1; ok && i + 1 < n; i++) {
            ok = (out[i] >= 'a' && out[i] <= 'z') || (out[i] == ' ' && out[i - 1] != ' ');
            nw += out[i] == ' ';
        }
        ok = ok && n > 2 && out[n - 1] == '.' && out[n - 2] != ' ' && nw >= 3 && nw <= 7;
        CHECKF(ok, "seed %llu after BOS: '%s' (stop %d)", (unsigned long long)seed, out, why);
    }
    slm_free(e);
}

#ifdef SLM_HAVE_CJSON
static const char *const k_schema =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":8},\"age\":{\"type\":\"integer\"},"
    "\"happy\":{\"type\":\"boolean\"},\"color\":{\"enum\":[\"red\",\"green\",\"blue\"]},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":4},\"maxItems\":2}},"
    "\"required\":[\"name\",\"age\",\"happy\",\"color\"],\"additionalProperties\":false}";

/* Whether text is a JSON document k_schema allows (checked by cJSON and C). */
static int schema_ok(const char *text) {
    cJSON *o = cJSON_Parse(text);
    int ok = cJSON_IsObject(o);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name"), *age = cJSON_GetObjectItemCaseSensitive(o, "age");
    const cJSON *happy = cJSON_GetObjectItemCaseSensitive(o, "happy"), *color = cJSON_GetObjectItemCaseSensitive(o, "color");
    const cJSON *tags = cJSON_GetObjectItemCaseSensitive(o, "tags"), *it;
    ok = ok && cJSON_IsString(name) && cJSON_IsNumber(age) && age->valuedouble == (double)(long long)age->valuedouble &&
         cJSON_IsBool(happy) && cJSON_IsString(color) &&
         (!strcmp(color->valuestring, "red") || !strcmp(color->valuestring, "green") || !strcmp(color->valuestring, "blue"));
    int keys = 0;
    cJSON_ArrayForEach(it, o) keys++;
    ok = ok && keys == 4 + (tags != NULL);
    if (ok && name) { /* at most 8 characters (code points) */
        int cps = 0;
        for (const unsigned char *p = (const unsigned char *)name->valuestring; *p; p++) cps += (*p & 0xC0) != 0x80;
        ok = cps <= 8;
    }
    if (ok && tags) {
        ok = cJSON_IsArray(tags) && cJSON_GetArraySize(tags) <= 2;
        cJSON_ArrayForEach(it, tags) ok = ok && cJSON_IsString(it) && strlen(it->valuestring) <= 4 * 4;
    }
    cJSON_Delete(o);
    return ok;
}

static void test_json_schema(void) {
    slm_engine *e = load(NULL);
    if (!e) { CHECK(0); return; }
    char *grammar = NULL;
    slm_err err = {0};
    CHECK(slm_json_schema_to_grammar(k_schema, strlen(k_schema), &grammar, &err) == SLM_OK);
    if (!grammar) { slm_free(e); return; }
    /* the independent check refuses what it should */
    CHECK(schema_ok("{\"name\": \"Bo\", \"age\": 3, \"happy\": true, \"color\": \"red\"}"));
    CHECK(!schema_ok("{\"name\": \"Bo\", \"age\": 3.5, \"happy\": true, \"color\": \"red\"}"));
    CHECK(!schema_ok("{\"name\": \"Bo\", \"age\": 3, \"happy\": true, \"color\": \"pink\"}"));
    CHECK(!schema_ok("{\"name\": \"Bo\", \"age\": 3, \"happy\": true}"));
    int bad = 0, stopped = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        char out[4096];
        int why = reply(e, "Once upon a time", grammar, 1.0f, seed, 0, out, sizeof out, NULL);
        stopped += why == SLM_STOP_TOKEN;
        if (why == SLM_STOP_TOKEN && !schema_ok(out) && bad++ < 5) fprintf(stderr, "  seed %llu: %s\n", (unsigned long long)seed, out);
        if (seed == 1) fprintf(stderr, "  seed 1: %s\n", out);
    }
    CHECKF(bad == 0, "%d replies do not match the schema", bad);
    CHECKF(stopped >= 50, "%d of 60 replies ended by a stop token (the rest ran out of KV capacity)", stopped);
    slm_xfree(grammar);
    slm_free(e);
}
#endif

/* With a draft model the session does not speculate under a grammar. */
static void test_draft(void) {
    slm_engine *e = load(M("stories260K.bin"));
    if (!e) { CHECK(0); return; }
    char out[256];
    slm_session_stats st;
    for (uint64_t seed = 1; seed <= 10; seed++) {
        int why = reply(e, "Once upon a time", "root ::= \" \" [a-z]+ \" \" [a-z]+ \".\"", 1.0f, seed, 60, out, sizeof out, &st);
        CHECKF(why == SLM_STOP_TOKEN && st.n_drafted == 0, "seed %llu: '%s' stop %d drafted %d", (unsigned long long)seed, out, why,
               st.n_drafted);
    }
    reply(e, "Once upon a time", NULL, 1.0f, 1, 20, out, sizeof out, &st);
    CHECKF(st.n_drafted > 0, "without a grammar the draft proposes (%d)", st.n_drafted);
    slm_free(e);
}

static void test_refused(void) {
    slm_engine *e = load(NULL);
    if (!e) { CHECK(0); return; }
    slm_session_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.samp.grammar = "root ::= \"a\"\nroot ::= \"b\"";
    slm_session *s = NULL;
    CHECK(slm_session_new(e, &cfg, &s) != SLM_OK && !s);
    CHECKF(strstr(slm_last_error(e), "line 2, column 1") && strstr(slm_last_error(e), "defined twice"), "%s", slm_last_error(e));
    slm_free(e);
}

static long g_allocs;
static void *count_alloc(void *ud, size_t n) { (void)ud; g_allocs++; return malloc(n); }
static void *count_realloc(void *ud, void *p, size_t n) { (void)ud; g_allocs++; return realloc(p, n); }
static void count_free(void *ud, void *p) { (void)ud; free(p); }

static void test_no_allocation(void) {
    slm_engine *e = load(NULL);
    if (!e) { CHECK(0); return; }
    slm_session_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.samp.temperature = 1.0f;
    cfg.samp.seed = 3;
    cfg.samp.grammar = "root ::= \" \" [a-z ]{1,60} \".\"";
    slm_session *s = NULL;
    CHECK(slm_session_new(e, &cfg, &s) == SLM_OK);
    if (!s) { slm_free(e); return; }
    CHECK(slm_session_feed_text(s, "Once upon a time", SLM_FEED_BOS) == SLM_OK);
    int32_t id;
    CHECK(slm_session_next(s, &id, NULL) == SLM_OK); /* the reply's text buffer */
    const slm_allocator a = {count_alloc, count_realloc, count_free, NULL};
    slm_set_allocator(&a);
    int n = 1;
    while (id >= 0 && slm_session_next(s, &id, NULL) == SLM_OK) n++;
    slm_set_allocator(NULL);
    CHECKF(g_allocs == 0 && n > 3, "%ld allocations in %d tokens", g_allocs, n);
    slm_session_free(s);
    slm_free(e);
}


/* The CLI's options: --grammar-file, --json-schema @FILE, one grammar only,
 * a bad grammar or schema refused before the model loads. */
static void test_cli(void) {
    char dir[] = "/tmp/slm_grammar_cli.XXXXXX";
    if (!mkdtemp(dir)) { CHECK(0); return; }
    char gfile[300], sfile[300], sarg[310];
    snprintf(gfile, sizeof gfile, "%s/g.gbnf", dir);
    snprintf(sfile, sizeof sfile, "%s/s.json", dir);
    snprintf(sarg, sizeof sarg, "@%s", sfile);
    FILE *f = fopen(gfile, "w");
    if (f) { fputs("# a comment\nroot ::= \" \" word \".\"\nword ::= [a-z]+\n", f); fclose(f); }
    f = fopen(sfile, "w");
    if (f) { fputs("{\"type\":\"array\",\"items\":{\"enum\":[1,2,3]},\"minItems\":2,\"maxItems\":2}", f); fclose(f); }
    const char *model = M("stories260K.bin"), *tok = M("tok512.bin");
    char *out = NULL, *err = NULL;
    char *a1[] = {"staticlm", "run", "-m", (char *)model, "-z", (char *)tok, "-p", "Once upon a time", "-n", "40", "--temp", "1",
                  "--seed", "2", "--grammar-file", gfile, NULL};
    int rc = t_run_capture(dir, SLM_CLI_PATH, a1, &out, &err);
    const char *r = out ? strstr(out, "Once upon a time") : NULL;
    int ok = rc == 0 && r;
    if (ok) {
        r += strlen("Once upon a time");
        ok = r[0] == ' ' && r[1] >= 'a' && r[1] <= 'z';
        size_t i = 1;
        while (r[i] >= 'a' && r[i] <= 'z') i++;
        ok = ok && r[i] == '.' && (r[i + 1] == '\n' || !r[i + 1]);
    }
    CHECKF(ok, "--grammar-file: rc %d, '%s' %s", rc, out ? out : "", err ? err : "");
    free(out);
    free(err);
    char *a2[] = {"staticlm", "run", "-m", (char *)model, "-z", (char *)tok, "-p", "Hi", "-n", "40", "--temp", "1",
                  "--json-schema", sarg, NULL};
    rc = t_run_capture(dir, SLM_CLI_PATH, a2, &out, &err);
    ok = rc == 0 && out && strstr(out, "Hi[");
    if (ok) { /* [a, b] with a, b in 1..3 and the white space the grammar allows */
        int n = 0, v[2] = {0};
        for (const char *p = strstr(out, "Hi[") + 3; *p && *p != ']'; p++)
            if (*p >= '1' && *p <= '3' && n < 2) v[n++] = *p - '0';
            else if (*p != ' ' && *p != ',' && *p != '\n' && *p != '\t') ok = 0;
        ok = ok && n == 2 && v[0] && v[1];
    }
    CHECKF(ok, "--json-schema @FILE: rc %d, '%s' %s", rc, out ? out : "", err ? err : "");
    free(out);
    free(err);
    char *a3[] = {"staticlm", "run", "-m", (char *)model, "-p", "Hi", "--grammar", "root ::= \"a\"", "--json-schema", "{}", NULL};
    rc = t_run_capture(dir, SLM_CLI_PATH, a3, NULL, &err);
    CHECKF(rc != 0 && err && strstr(err, "one of them"), "two grammars: rc %d %s", rc, err ? err : "");
    free(err);
    char *a4[] = {"staticlm", "run", "-m", (char *)model, "-p", "Hi", "--json-schema", "{\"type\":\"string\",\"format\":\"date\"}", NULL};
    rc = t_run_capture(dir, SLM_CLI_PATH, a4, NULL, &err);
    CHECKF(rc != 0 && err && strstr(err, "--json-schema: JSON schema: 'format' is not supported"), "format: rc %d %s", rc, err ? err : "");
    free(err);
    char *a5[] = {"staticlm", "chat", "-m", (char *)model, "--grammar", "root ::= [a-", NULL};
    rc = t_run_capture(dir, SLM_CLI_PATH, a5, NULL, &err);
    CHECKF(rc != 0 && err && strstr(err, "--grammar: grammar: line 1, column 10: unterminated character class"), "chat: rc %d %s", rc,
           err ? err : "");
    free(err);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

int main(void) {
    T_RUN(test_words);
#ifdef SLM_HAVE_CJSON
    T_RUN(test_json_schema);
#endif
    T_RUN(test_draft);
    T_RUN(test_refused);
    T_RUN(test_no_allocation);
    T_RUN(test_cli);
    T_DONE();
}
