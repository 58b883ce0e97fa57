/* tool_choice required / a named function (text/toolcall.h's
 * slm_tool_grammar): for every format the grammar takes the calls the
 * family writes, which the parser (toolcall.c) reads back as those calls,
 * and refuses a wrong name, arguments its schema does not allow, text
 * around the calls, a second call when not parallel; a prompt that opens a
 * call, thinking before the calls, a schema keyword the grammar cannot
 * enforce (refused naming the function and the keyword). Then generation
 * on stories260K + tok512 under each format's grammar over seeds and
 * temperatures: every reply that ends is exactly the calls, to a declared
 * function, with arguments that an independent check of the schema
 * (cJSON and plain C) accepts. */
#include <stdint.h>

#include "staticlm.h"
#include "t.h"
#include "text/grammar.h"
#include "text/toolcall.h"

#ifdef SLM_HAVE_CJSON
#include <cjson/cJSON.h>
#endif

static const char k_weather[] = "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 12}, "
                                "\"days\": {\"type\": \"integer\"}, \"unit\": {\"enum\": [\"c\", \"f\"]}}, "
                                "\"required\": [\"city\"], \"additionalProperties\": false}";
static const slm_tool_fn k_fns[] = {{"get_weather", k_weather}, {"tell_story", NULL}};

/* The calls the parser reads: "name(args);" each, and the text apart. */
typedef struct calls {
    char s[8192], text[8192];
    size_t n, nt;
    int ncalls;
} calls;

static void cat(char *d, size_t *n, size_t cap, const char *s, size_t k) {
    if (*n + k < cap) {
        memcpy(d + *n, s, k);
        *n += k;
        d[*n] = 0;
    }
}

static void collect(void *ud, int ev, const char *s, size_t n) {
    calls *c = ud;
    if (ev == SLM_TOOL_TEXT) cat(c->text, &c->nt, sizeof c->text, s, n);
    else if (ev == SLM_TOOL_CALL) { cat(c->s, &c->n, sizeof c->s, s, n); cat(c->s, &c->n, sizeof c->s, "(", 1); c->ncalls++; }
    else if (ev == SLM_TOOL_ARGS) cat(c->s, &c->n, sizeof c->s, s, n);
    else cat(c->s, &c->n, sizeof c->s, ");", 2);
}

static void parse(int fmt, const char *prompt, const char *text, calls *c) {
    memset(c, 0, sizeof *c);
    slm_toolcall t;
    slm_tool_init(&t, fmt, prompt, collect, c);
    slm_tool_feed(&t, text, strlen(text));
    slm_tool_finish(&t);
    slm_tool_free(&t);
}

static slm_grammar *build(int fmt, const slm_tool_fn *fns, int n, int parallel, int think, const char *prompt) {
    char *txt = NULL;
    const char *tokens = NULL;
    int bad = -1;
    slm_err err = {0};
    slm_grammar *g = NULL;
    slm_status st = slm_tool_grammar(fmt, fns, n, parallel, think, prompt, &txt, &tokens, &bad, &err);
    CHECKF(st == SLM_OK, "%s: %s", slm_tool_format_name(fmt), err.msg);
    if (st) return NULL;
    CHECK(tokens != NULL);
    st = slm_grammar_compile(txt, strlen(txt), &g, &err);
    CHECKF(st == SLM_OK, "%s: %s\n%s", slm_tool_format_name(fmt), err.msg, txt);
    slm_xfree(txt);
    return g;
}

/* text is a sentence of g, and parses back as want ("name(args);"...). */
static void takes(const slm_grammar *g, int fmt, const char *prompt, const char *text, const char *want) {
    CHECKF(slm_grammar_matches(g, text, strlen(text)) == 1, "%s: refused [%s]", slm_tool_format_name(fmt), text);
    calls c;
    parse(fmt, prompt, text, &c);
    CHECKF(!strcmp(c.s, want), "%s: [%s] parsed as [%s], not [%s]", slm_tool_format_name(fmt), text, c.s, want);
    const size_t from = !strncmp(text, "<think>", 7) ? (size_t)(strstr(c.text, "</think>") - c.text) + 8 : 0; /* the reasoning's */
    for (size_t i = from; fmt != SLM_TOOL_HARMONY && i < c.nt; i++)
        CHECKF(strchr(" \n", c.text[i]), "%s: text beside the calls: [%s]", slm_tool_format_name(fmt), c.text);
}

static void refuses(const slm_grammar *g, int fmt, const char *text) {
    CHECKF(slm_grammar_matches(g, text, strlen(text)) == 0, "%s: took [%s]", slm_tool_format_name(fmt), text);
}

#define W1 "{\"city\": \"Paris\"}"
#define W2 "{\"city\": \"Oslo\", \"days\": 3, \"unit\": \"c\"}"

static void test_hermes(void) {
    const int F = SLM_TOOL_HERMES;
    slm_grammar *g = build(F, k_fns, 2, 0, 0, "<|im_start|>assistant\n");
    if (!g) return;
    takes(g, F, NULL, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " W1 "}\n</tool_call>", "get_weather(" W1 ");");
    takes(g, F, NULL, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " W2 "}\n</tool_call>", "get_weather(" W2 ");");
    takes(g, F, NULL, "<tool_call>\n{\"name\": \"tell_story\", \"arguments\": {\"x\": [1, {}]}}\n</tool_call>",
          "tell_story({\"x\": [1, {}]});");
    refuses(g, F, "<tool_call>\n{\"name\": \"get_weathe\", \"arguments\": " W1 "}\n</tool_call>");
    refuses(g, F, "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>");
    refuses(g, F, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>");            /* city required */
    refuses(g, F, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": 3}}\n</tool_call>"); /* a string */
    refuses(g, F, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a\", \"days\": 1.5}}\n</tool_call>");
    refuses(g, F, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a\", \"unit\": \"k\"}}\n</tool_call>");
    refuses(g, F, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a\", \"zip\": 1}}\n</tool_call>");
    refuses(g, F, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Llanfairpwllgwyn\"}}\n</tool_call>");
    refuses(g, F, "<tool_call>\n{\"name\": \"tell_story\", \"arguments\": 3}\n</tool_call>");
    refuses(g, F, "Sure. <tool_call>\n{\"name\": \"tell_story\", \"arguments\": {}}\n</tool_call>"); /* text first */
    refuses(g, F, "Once upon a time");
    refuses(g, F, "<tool_call>\n{\"name\": \"tell_story\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": "
                  "\"tell_story\", \"arguments\": {}}\n</tool_call>"); /* one call only */
    slm_grammar_free(g);
    /* parallel: more calls */
    if ((g = build(F, k_fns, 2, 1, 0, NULL))) {
        takes(g, F, NULL,
              "<tool_call>\n{\"name\": \"tell_story\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": "
              "\"get_weather\", \"arguments\": " W1 "}\n</tool_call>",
              "tell_story({});get_weather(" W1 ");");
        slm_grammar_free(g);
    }
    /* a named function: only it */
    if ((g = build(F, k_fns + 1, 1, 0, 0, NULL))) {
        takes(g, F, NULL, "<tool_call>\n{\"name\": \"tell_story\", \"arguments\": {}}\n</tool_call>", "tell_story({});");
        refuses(g, F, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " W1 "}\n</tool_call>");
        slm_grammar_free(g);
    }
    /* a prompt that opened the call */
    const char *open = "<|im_start|>assistant\n<tool_call>\n";
    if ((g = build(F, k_fns, 2, 0, 0, open))) {
        takes(g, F, open, "{\"name\": \"get_weather\", \"arguments\": " W1 "}\n</tool_call>", "get_weather(" W1 ");");
        refuses(g, F, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " W1 "}\n</tool_call>");
        slm_grammar_free(g);
    }
    /* thinking first (deepseek reasoning), or the prompt in it */
    if ((g = build(F, k_fns, 2, 0, 1, "<|im_start|>assistant\n"))) {
        takes(g, F, NULL, "<think>\nRain? a<b.\n</think>\n\n<tool_call>\n{\"name\": \"tell_story\", \"arguments\": {}}\n</tool_call>",
              "tell_story({});");
        takes(g, F, NULL, "<tool_call>\n{\"name\": \"tell_story\", \"arguments\": {}}\n</tool_call>", "tell_story({});");
        slm_grammar_free(g);
    }
    if ((g = build(F, k_fns, 2, 0, 1, "<|im_start|>assistant\n<think>\n"))) {
        refuses(g, F, "<tool_call>\n{\"name\": \"tell_story\", \"arguments\": {}}\n</tool_call>");
        CHECK(slm_grammar_matches(g, "hm</think>\n<tool_call>\n{\"name\": \"tell_story\", \"arguments\": {}}\n</tool_call>",
                                  strlen("hm</think>\n<tool_call>\n{\"name\": \"tell_story\", \"arguments\": {}}\n</tool_call>")) == 1);
        slm_grammar_free(g);
    }
}

static void test_llama3(void) {
    const int F = SLM_TOOL_LLAMA3;
    slm_grammar *g = build(F, k_fns, 2, 1, 0, NULL);
    if (!g) return;
    takes(g, F, NULL, "{\"name\": \"get_weather\", \"parameters\": " W2 "}", "get_weather(" W2 ");");
    takes(g, F, NULL, "{\"name\": \"tell_story\", \"parameters\": {}}; {\"name\": \"get_weather\", \"parameters\": " W1 "}",
          "tell_story({});get_weather(" W1 ");");
    refuses(g, F, "{\"name\": \"get_weather\", \"arguments\": " W1 "}"); /* Llama 3 writes parameters */
    refuses(g, F, "{\"name\": \"get_weather\", \"parameters\": {\"town\": \"x\"}}");
    refuses(g, F, "{\"name\": \"weather\", \"parameters\": " W1 "}");
    slm_grammar_free(g);
    const char *open = "<|start_header_id|>assistant<|end_header_id|>\n\n<|python_tag|>";
    if ((g = build(F, k_fns, 2, 0, 0, open))) {
        takes(g, F, open, "{\"name\": \"tell_story\", \"parameters\": {\"a\": null}}", "tell_story({\"a\": null});");
        refuses(g, F, "{\"name\": \"tell_story\", \"parameters\": {}}; {\"name\": \"tell_story\", \"parameters\": {}}");
        slm_grammar_free(g);
    }
}

static void test_mistral(void) {
    const int F = SLM_TOOL_MISTRAL;
    slm_grammar *g = build(F, k_fns, 2, 1, 0, "[INST]Hi[/INST]");
    if (!g) return;
    takes(g, F, NULL, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": " W1 "}]", "get_weather(" W1 ");");
    takes(g, F, NULL, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": " W2 "}, {\"name\": \"tell_story\", \"arguments\": {}}]",
          "get_weather(" W2 ");tell_story({});");
    refuses(g, F, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": null}}]");
    refuses(g, F, "[TOOL_CALLS]{\"name\": \"tell_story\", \"arguments\": {}}");
    refuses(g, F, "[{\"name\": \"tell_story\", \"arguments\": {}}]");
    slm_grammar_free(g);
    if ((g = build(F, k_fns, 2, 0, 0, "[INST]Hi[/INST][TOOL_CALLS]"))) {
        takes(g, F, "[INST]Hi[/INST][TOOL_CALLS]", "[{\"name\": \"tell_story\", \"arguments\": {}}]", "tell_story({});");
        slm_grammar_free(g);
    }
}

static void test_harmony(void) {
    const int F = SLM_TOOL_HARMONY;
    const char *p = "<|start|>user<|message|>Hi<|end|><|start|>assistant";
    slm_grammar *g = build(F, k_fns, 2, 1, 0, p);
    if (!g) return;
    takes(g, F, p, "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" W1, "get_weather(" W1 ");");
    takes(g, F, p,
          "<|channel|>analysis<|message|>They want weather; a<b.<|end|><|start|>assistant<|channel|>commentary "
          "to=functions.tell_story <|constrain|>json<|message|>{}",
          "tell_story({});");
    refuses(g, F, "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": 1}");
    refuses(g, F, "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{}");
    refuses(g, F, "<|channel|>final<|message|>Hello");
    /* one call even when parallel: its calls end the reply */
    refuses(g, F, "<|channel|>commentary to=functions.tell_story <|constrain|>json<|message|>{}<|call|><|start|>assistant"
                  "<|channel|>commentary to=functions.tell_story <|constrain|>json<|message|>{}");
    slm_grammar_free(g);
    /* a prompt in another message: a new one */
    const char *fin = "<|start|>assistant<|channel|>final<|message|>";
    if ((g = build(F, k_fns, 2, 0, 0, fin))) {
        takes(g, F, fin, "<|start|>assistant<|channel|>commentary to=functions.tell_story <|constrain|>json<|message|>{}",
              "tell_story({});");
        slm_grammar_free(g);
    }
    /* a prompt that opened a call: its arguments; to a function not allowed: refused */
    const char *open = "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>";
    if ((g = build(F, k_fns, 2, 0, 0, open))) {
        takes(g, F, open, W2, "get_weather(" W2 ");");
        refuses(g, F, "{}");
        slm_grammar_free(g);
    }
    char *txt = NULL;
    const char *tokens;
    int bad;
    slm_err err = {0};
    CHECK(slm_tool_grammar(F, k_fns + 1, 1, 0, 0, open, &txt, &tokens, &bad, &err) == SLM_ERR_ARG && !txt);
    CHECKF(strstr(err.msg, "get_weather"), "%s", err.msg);
}

/* Qwen3-Coder / Qwen3.5's XML calls: parameters in the schema's order, strings as text */
#define X_OPEN "<tool_call>\n<function="
#define X_P(k, v) "<parameter=" k ">\n" v "\n</parameter>\n"
#define X_END "</function>\n</tool_call>"
static void test_xml(void) {
    const int F = SLM_TOOL_XML;
    slm_grammar *g = build(F, k_fns, 2, 0, 0, "<|im_start|>assistant\n");
    if (!g) return;
    takes(g, F, NULL, X_OPEN "get_weather>\n" X_P("city", "Paris") X_END, "get_weather({\"city\": \"Paris\"});");
    takes(g, F, NULL, X_OPEN "get_weather>\n" X_P("city", "Oslo") X_P("days", "3") X_P("unit", "c") X_END,
          "get_weather({\"city\": \"Oslo\", \"days\": 3, \"unit\": \"c\"});");
    takes(g, F, NULL, X_OPEN "tell_story>\n" X_P("topic", "a cat\nand a dog") X_END, "tell_story({\"topic\": \"a cat\\nand a dog\"});");
    takes(g, F, NULL, X_OPEN "tell_story>\n" X_END, "tell_story({});");
    refuses(g, F, X_OPEN "get_weather>\n" X_END);                                          /* city required */
    refuses(g, F, X_OPEN "get_weather>\n" X_P("city", "Llanfairpwllgwyn") X_END);          /* maxLength 12 */
    refuses(g, F, X_OPEN "get_weather>\n" X_P("city", "a") X_P("days", "1.5") X_END);      /* an integer */
    refuses(g, F, X_OPEN "get_weather>\n" X_P("city", "a") X_P("unit", "k") X_END);        /* the enum */
    refuses(g, F, X_OPEN "get_weather>\n" X_P("city", "a") X_P("zip", "1") X_END);         /* not a property */
    refuses(g, F, X_OPEN "get_weather>\n" X_P("days", "3") X_P("city", "a") X_END);        /* the schema's order */
    refuses(g, F, X_OPEN "weather>\n" X_P("city", "a") X_END);
    refuses(g, F, "Sure. " X_OPEN "tell_story>\n" X_END);
    refuses(g, F, X_OPEN "tell_story>\n" X_END "\n" X_OPEN "tell_story>\n" X_END); /* one call only */
    slm_grammar_free(g);
    if ((g = build(F, k_fns, 2, 1, 0, NULL))) { /* parallel */
        takes(g, F, NULL, X_OPEN "tell_story>\n" X_END "\n" X_OPEN "get_weather>\n" X_P("city", "Rome") X_END,
              "tell_story({});get_weather({\"city\": \"Rome\"});");
        slm_grammar_free(g);
    }
    const char *open = "<|im_start|>assistant\n<tool_call>\n";
    if ((g = build(F, k_fns, 2, 0, 0, open))) { /* the prompt opened the call */
        takes(g, F, open, "<function=tell_story>\n" X_END, "tell_story({});");
        refuses(g, F, X_OPEN "tell_story>\n" X_END);
        slm_grammar_free(g);
    }
    if ((g = build(F, k_fns, 2, 0, 1, "<|im_start|>assistant\n<think>\n"))) { /* Qwen3.5 thinking first */
        const char *t = "Weather, then.\n</think>\n\n" X_OPEN "get_weather>\n" X_P("city", "Paris") X_END;
        CHECK(slm_grammar_matches(g, t, strlen(t)) == 1);
        slm_grammar_free(g);
    }
    /* what the grammar cannot hold a parameter to is refused, naming the function */
    char *txt = NULL;
    const char *tokens;
    int bad = -1;
    slm_err err = {0};
    const slm_tool_fn pat[] = {{"lookup", "{\"type\": \"object\", \"properties\": {\"q\": {\"type\": \"string\", \"pattern\": \"^a\"}}}"}};
    CHECK(slm_tool_grammar(F, pat, 1, 0, 0, NULL, &txt, &tokens, &bad, &err) == SLM_ERR_ARG && !txt);
    CHECKF(bad == 0 && strstr(err.msg, "'lookup'") && strstr(err.msg, "'pattern'"), "%d %s", bad, err.msg);
    const slm_tool_fn ref[] = {{"r", "{\"type\": \"object\", \"properties\": {\"a\": {\"$ref\": \"#/$defs/x\"}}, \"$defs\": {\"x\": {\"type\": \"integer\"}}}"}};
    CHECK(slm_tool_grammar(F, ref, 1, 0, 0, NULL, &txt, &tokens, &bad, &err) == SLM_ERR_ARG && !txt);
    CHECKF(strstr(err.msg, "$ref"), "%s", err.msg);
}

static void test_refused(void) {
    char *txt = NULL;
    const char *tokens;
    int bad = -1;
    slm_err err = {0};
    const slm_tool_fn fns[] = {{"ok", NULL}, {"lookup", "{\"type\": \"object\", \"properties\": {\"q\": {\"type\": \"string\", \"pattern\": \"^a\"}}}"}};
    CHECK(slm_tool_grammar(SLM_TOOL_HERMES, fns, 2, 0, 0, NULL, &txt, &tokens, &bad, &err) == SLM_ERR_ARG && !txt);
    CHECKF(bad == 1 && strstr(err.msg, "'lookup'") && strstr(err.msg, "'pattern'"), "%d %s", bad, err.msg);
    CHECK(slm_tool_grammar(SLM_TOOL_NONE, fns, 1, 0, 0, NULL, &txt, &tokens, &bad, &err) == SLM_ERR_ARG && !txt);
    const slm_tool_fn odd[] = {{"a b", NULL}};
    CHECK(slm_tool_grammar(SLM_TOOL_HERMES, odd, 1, 0, 0, NULL, &txt, &tokens, &bad, &err) == SLM_ERR_ARG && bad == 0);
    const slm_tool_fn q[] = {{"a\"|x", NULL}};
    CHECK(slm_tool_grammar(SLM_TOOL_HERMES, q, 1, 0, 0, NULL, &txt, &tokens, &bad, &err) == SLM_ERR_ARG && bad == 0);
}

/* ---- generation ------------------------------------------------------------------ */

#ifdef SLM_HAVE_CJSON
/* Code points of a UTF-8 string. */
static size_t utf8_chars(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* An independent check of k_weather (and of any object for tell_story). */
static int args_ok(const char *name, const char *args) {
    cJSON *j = cJSON_Parse(args);
    int ok = cJSON_IsObject(j);
    if (ok && !strcmp(name, "get_weather")) {
        const cJSON *it;
        ok = cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "city"));
        cJSON_ArrayForEach(it, j) {
            if (!strcmp(it->string, "city")) ok = ok && cJSON_IsString(it) && utf8_chars(it->valuestring) <= 12;
            else if (!strcmp(it->string, "days")) ok = ok && cJSON_IsNumber(it) && it->valuedouble == (double)(long long)it->valuedouble;
            else if (!strcmp(it->string, "unit")) ok = ok && cJSON_IsString(it) && (!strcmp(it->valuestring, "c") || !strcmp(it->valuestring, "f"));
            else ok = 0;
        }
    } else if (ok && !strcmp(name, "tell_story")) { /* k_story */
        const cJSON *it;
        cJSON_ArrayForEach(it, j) ok = ok && !strcmp(it->string, "topic") && cJSON_IsString(it) && utf8_chars(it->valuestring) <= 16;
    } else {
        ok = 0;
    }
    cJSON_Delete(j);
    return ok;
}

typedef struct gen_calls {
    char name[4][64];
    char args[4][2048];
    size_t alen[4];
    int n;
    char text[4096];
    size_t nt;
} gen_calls;

static void gen_collect(void *ud, int ev, const char *s, size_t n) {
    gen_calls *c = ud;
    if (ev == SLM_TOOL_TEXT) { cat(c->text, &c->nt, sizeof c->text, s, n); return; }
    if (ev == SLM_TOOL_CALL) {
        if (c->n < 4) snprintf(c->name[c->n], sizeof c->name[0], "%s", s);
        c->n++;
        return;
    }
    if (ev == SLM_TOOL_ARGS && c->n >= 1 && c->n <= 4) cat(c->args[c->n - 1], &c->alen[c->n - 1], sizeof c->args[0], s, n);
}

/* Replies under fmt's grammar: every one that ends holds exactly the calls. */
static void gen_format(slm_engine *e, int fmt, const char *prompt, const slm_tool_fn *fns, int nfns, int parallel) {
    char *txt = NULL;
    const char *tokens = NULL;
    int bad;
    slm_err err = {0};
    if (slm_tool_grammar(fmt, fns, nfns, parallel, 0, prompt, &txt, &tokens, &bad, &err)) {
        CHECKF(0, "%s", err.msg);
        return;
    }
    static const float temps[] = {0.0f, 0.7f, 1.0f, 1.5f};
    int ended = 0, runs = 0;
    for (int ti = 0; ti < 4; ti++)
        for (uint64_t seed = 1; seed <= (ti ? 6u : 1u); seed++) {
            slm_session_cfg cfg;
            memset(&cfg, 0, sizeof cfg);
            cfg.samp.temperature = temps[ti];
            cfg.samp.seed = seed;
            cfg.samp.grammar = txt;
            cfg.samp.grammar_tokens = tokens;
            cfg.n_predict = 400;
            slm_session *s = NULL;
            if (slm_session_new(e, &cfg, &s)) {
                CHECKF(0, "session: %s", slm_last_error(e));
                slm_xfree(txt);
                return;
            }
            runs++;
            int32_t id = 0;
            if (slm_session_feed_text(s, "Once upon a time", SLM_FEED_BOS) == SLM_OK)
                while (id >= 0)
                    if (slm_session_next(s, &id, NULL)) {
                        CHECKF(0, "next: %s", slm_session_error(s));
                        break;
                    }
            size_t len;
            const char *out = slm_session_text(s, &len, NULL);
            if (getenv("SHOW")) fprintf(stderr, "[%s]\n", out);
            if (id < 0 && slm_session_stop_reason(s) == SLM_STOP_TOKEN) {
                ended++;
                gen_calls c;
                memset(&c, 0, sizeof c);
                slm_toolcall t;
                slm_tool_init(&t, fmt, prompt, gen_collect, &c);
                if (fmt == SLM_TOOL_XML) { /* as serve does: the string parameters stay strings */
                    char tools[2048];
                    size_t k = (size_t)snprintf(tools, sizeof tools, "[");
                    for (int f = 0; f < nfns && k < sizeof tools; f++)
                        k += (size_t)snprintf(tools + k, sizeof tools - k, "%s{\"type\": \"function\", \"function\": {\"name\": \"%s\", "
                                              "\"parameters\": %s}}", f ? ", " : "", fns[f].name, fns[f].params ? fns[f].params : "{}");
                    if (k < sizeof tools) snprintf(tools + k, sizeof tools - k, "]");
                    CHECK(slm_tool_xml_types(&t, tools) == SLM_OK);
                }
                slm_tool_feed(&t, out, len);
                slm_tool_finish(&t);
                slm_tool_free(&t);
                CHECKF(c.n >= 1 && c.n <= 4 && (parallel || c.n == 1), "%s: %d calls in [%s]", slm_tool_format_name(fmt), c.n, out);
                for (int k = 0; k < c.n && k < 4; k++) {
                    int known = 0;
                    for (int f = 0; f < nfns; f++) known |= !strcmp(c.name[k], fns[f].name);
                    CHECKF(known && args_ok(c.name[k], c.args[k]), "%s: call %s(%s) in [%s]", slm_tool_format_name(fmt),
                           c.name[k], c.args[k], out);
                }
                for (size_t i = 0; i < c.nt; i++)
                    CHECKF(strchr(" \n", c.text[i]), "%s: text beside the calls: [%s]", slm_tool_format_name(fmt), c.text);
            }
            slm_session_free(s);
        }
    fprintf(stderr, "  %s: %d of %d replies ended (the rest hit the length)\n", slm_tool_format_name(fmt), ended, runs);
    CHECK(ended >= runs / 2);
    slm_xfree(txt);
}

/* Generation: schemas that bound the arguments (stories260K writes a story
 * into any string it may) */
static const char k_story[] = "{\"type\": \"object\", \"properties\": {\"topic\": {\"type\": \"string\", \"maxLength\": 16}}, "
                              "\"additionalProperties\": false}";

static void test_generate(void) {
    const slm_tool_fn fns[] = {{"get_weather", k_weather}, {"tell_story", k_story}};
    slm_options o = slm_default_options();
    o.tokenizer_path = T_SHARED("models/tok512.bin");
    o.n_threads = 1;
    slm_engine *e = NULL;
    if (slm_load(&e, T_SHARED("models/stories260K.bin"), &o)) {
        CHECKF(0, "load: %s", slm_last_error(e));
        slm_free(e);
        return;
    }
    gen_format(e, SLM_TOOL_HERMES, "<|im_start|>assistant\n", fns, 2, 0);
    gen_format(e, SLM_TOOL_HERMES, "<|im_start|>assistant\n", fns + 1, 1, 1); /* named: tell_story */
    gen_format(e, SLM_TOOL_LLAMA3, NULL, fns, 2, 1);
    gen_format(e, SLM_TOOL_XML, "<|im_start|>assistant\n", fns, 2, 0);
    gen_format(e, SLM_TOOL_MISTRAL, "[INST]Hi[/INST]", fns, 2, 0); /* parallel: stories260K lists calls to the length */
    gen_format(e, SLM_TOOL_HARMONY, "<|start|>assistant<|channel|>final<|message|>", fns, 2, 0);
    gen_format(e, SLM_TOOL_HARMONY, "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>",
               fns, 2, 0);
    slm_free(e);
}
#endif

int main(void) {
    T_RUN(test_hermes);
    T_RUN(test_llama3);
    T_RUN(test_mistral);
    T_RUN(test_harmony);
    T_RUN(test_xml);
    T_RUN(test_refused);
#ifdef SLM_HAVE_CJSON
    T_RUN(test_generate);
#endif
    T_DONE();
}
