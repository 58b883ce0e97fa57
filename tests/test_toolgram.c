/* tool_choice required / a named function (text/toolcall.h's
 * slm_tool_grammar): for every format the grammar takes the calls the
 * family writes, which the parser (toolcall.c) reads back as those calls,
 * and refuses a wrong name, arguments its schema does not allow, text
 * around the calls, a second call when not parallel; a prompt that opens a
 * call, thinking before the calls, a schema keyword the grammar cannot
 * enforce (refused naming the function and the keyword). gemma4: its
 * value syntax, the calls read through its reasoning splitter and parser,
 * what its strings cannot hold, the parser's nesting depth; the text that
 * avoids markers (slm_gbnf_avoid) against a plain search; random sentences
 * of its grammar, each parsed into JSON that an independent check of the
 * schema accepts. Then generation on stories260K + tok512 under each
 * format's grammar over seeds and temperatures: every reply that ends is
 * exactly the calls, to a declared function, with arguments that an
 * independent check of the schema (cJSON and plain C) accepts. */
#include <stdint.h>

#include "staticlm.h"
#include "t.h"
#include "text/grammar.h"
#include "text/reasoning.h"
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

/* gemma4: the reasoning splitter's answer on to the call parser */
static void g4_answer(void *ud, int kind, const char *s, size_t n) {
    if (kind == SLM_REASON_ANSWER) slm_tool_feed(ud, s, n);
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

/* Gemma 4: <|tool_call>call:N{key:VALUE}<tool_call|>, strings between <|"|> */
#define G_Q "<|\"|>"
#define G_CALL(n, a) "<|tool_call>call:" n a "<tool_call|>"

/* text through gemma4's reasoning splitter, its answer through the call
 * parser (as serve and chat run them): the calls, and no other answer */
static void takes_g4(const slm_grammar *g, const char *prompt, const char *text, const char *want) {
    CHECKF(slm_grammar_matches(g, text, strlen(text)) == 1, "gemma4: refused [%s]", text);
    calls c;
    memset(&c, 0, sizeof c);
    slm_toolcall t;
    slm_tool_init(&t, SLM_TOOL_GEMMA4, prompt, collect, &c);
    slm_reason r;
    slm_reason_init(&r, SLM_REASON_GEMMA4, prompt, g4_answer, &t);
    slm_reason_feed(&r, text, strlen(text));
    slm_reason_finish(&r);
    slm_tool_finish(&t);
    slm_tool_free(&t);
    CHECKF(!strcmp(c.s, want), "gemma4: [%s] parsed as [%s], not [%s]", text, c.s, want);
    for (size_t i = 0; i < c.nt; i++) CHECKF(strchr(" \n", c.text[i]), "gemma4: text beside the calls: [%s]", c.text);
}

static void test_gemma4(void) {
    const int F = SLM_TOOL_GEMMA4;
    const char *p = "<start_of_turn>user\nHi<turn|>\n<|turn>model\n";
    slm_grammar *g = build(F, k_fns, 2, 0, 0, p);
    if (!g) return;
    takes_g4(g, p, G_CALL("get_weather", "{city:" G_Q "Paris" G_Q "}"), "get_weather({\"city\":\"Paris\"});");
    takes_g4(g, p, G_CALL("get_weather", "{city:" G_Q "Oslo" G_Q ",days:-3,unit:" G_Q "c" G_Q "}"),
             "get_weather({\"city\":\"Oslo\",\"days\":-3,\"unit\":\"c\"});");
    takes_g4(g, p, G_CALL("tell_story", "{}"), "tell_story({});");
    takes_g4(g, p, G_CALL("tell_story", "{x:[1,{},-0.5e3,true,null],y.z-1:{" G_Q "odd \"key" G_Q ":" G_Q "a\\b\n" G_Q "}}"),
             "tell_story({\"x\":[1,{},-0.5e3,true,null],\"y.z-1\":{\"odd \\\"key\":\"a\\\\b\\n\"}});");
    /* a string holds what only looks like a quote or a marker */
    takes_g4(g, p, G_CALL("tell_story", "{q:" G_Q "<|\"| <channel <|tool_call> <" G_Q "}"),
             "tell_story({\"q\":\"<|\\\"| <channel <|tool_call> <\"});");
    refuses(g, F, G_CALL("get_weathe", "{city:" G_Q "Paris" G_Q "}"));
    refuses(g, F, G_CALL("rm_rf", "{}"));
    refuses(g, F, G_CALL("get_weather", "{}"));                                           /* city required */
    refuses(g, F, G_CALL("get_weather", "{days:3}"));
    refuses(g, F, G_CALL("get_weather", "{city:3}"));                                     /* a string */
    refuses(g, F, G_CALL("get_weather", "{city:\"Paris\"}"));                             /* Gemma's quotes */
    refuses(g, F, G_CALL("get_weather", "{city:" G_Q "a" G_Q ",days:1.5}"));              /* an integer */
    refuses(g, F, G_CALL("get_weather", "{city:" G_Q "a" G_Q ",unit:" G_Q "k" G_Q "}"));  /* the enum */
    refuses(g, F, G_CALL("get_weather", "{city:" G_Q "a" G_Q ",unit:c}"));
    refuses(g, F, G_CALL("get_weather", "{city:" G_Q "a" G_Q ",zip:1}"));                 /* not a property */
    refuses(g, F, G_CALL("get_weather", "{days:3,city:" G_Q "a" G_Q "}"));                /* the schema's order */
    refuses(g, F, G_CALL("get_weather", "{city:" G_Q "Llanfairpwllgwyn" G_Q "}"));        /* maxLength 12 */
    refuses(g, F, G_CALL("get_weather", "{city:" G_Q "a<b" G_Q "}"));                     /* bounded: no '<' */
    refuses(g, F, G_CALL("tell_story", "{q:" G_Q "a" G_Q "b" G_Q "}"));                   /* a quote inside */
    refuses(g, F, G_CALL("tell_story", "{q:" G_Q "a<|channel>b" G_Q "}"));                /* the splitter's markers */
    refuses(g, F, G_CALL("tell_story", "{q:" G_Q "a<channel|>b" G_Q "}"));
    refuses(g, F, G_CALL("tell_story", "{a:True}"));                                      /* JSON's words */
    refuses(g, F, G_CALL("tell_story", "{a:01}"));                                        /* JSON's numbers */
    takes_g4(g, p, G_CALL("tell_story", "{a:-0e1}"), "tell_story({\"a\":-0e1});");
    refuses(g, F, G_CALL("tell_story", "{a: 1}"));
    refuses(g, F, G_CALL("tell_story", "[1]"));
    refuses(g, F, "Sure. " G_CALL("tell_story", "{}"));
    refuses(g, F, G_CALL("tell_story", "{}") G_CALL("tell_story", "{}")); /* one call only */
    refuses(g, F, "<|channel>thought\nhm<channel|>" G_CALL("tell_story", "{}")); /* no thinking asked */
    slm_grammar_free(g);
    if ((g = build(F, k_fns, 2, 1, 0, p))) { /* parallel */
        takes_g4(g, p, G_CALL("tell_story", "{}") G_CALL("get_weather", "{city:" G_Q "Rome" G_Q "}"),
                 "tell_story({});get_weather({\"city\":\"Rome\"});");
        slm_grammar_free(g);
    }
    if ((g = build(F, k_fns + 1, 1, 0, 0, p))) { /* named */
        takes_g4(g, p, G_CALL("tell_story", "{}"), "tell_story({});");
        refuses(g, F, G_CALL("get_weather", "{city:" G_Q "Paris" G_Q "}"));
        slm_grammar_free(g);
    }
    const char *open = "<|turn>model\n<|tool_call>";
    if ((g = build(F, k_fns, 2, 0, 0, open))) { /* the prompt opened the call */
        takes_g4(g, open, "call:tell_story{}<tool_call|>", "tell_story({});");
        refuses(g, F, G_CALL("tell_story", "{}"));
        slm_grammar_free(g);
    }
    if ((g = build(F, k_fns, 2, 0, 1, p))) { /* the thought channel first (gemma4 reasoning) */
        takes_g4(g, p, "<|channel>thought\nRain? a<b <|\"|> <|tool_call>.<channel|>" G_CALL("tell_story", "{}"), "tell_story({});");
        takes_g4(g, p, G_CALL("tell_story", "{}"), "tell_story({});");
        refuses(g, F, "<|channel>thought\na<channel|>b<channel|>" G_CALL("tell_story", "{}"));
        slm_grammar_free(g);
    }
    const char *thinking = "<|turn>model\n<|channel>thought";
    if ((g = build(F, k_fns, 2, 0, 1, thinking))) { /* the prompt opened it */
        takes_g4(g, thinking, "\nhm<channel|>\n" G_CALL("tell_story", "{}"), "tell_story({});");
        refuses(g, F, G_CALL("tell_story", "{}"));
        slm_grammar_free(g);
    }
    const char *off = "<|turn>model\n<|channel>thought\n<channel|>";
    if ((g = build(F, k_fns, 2, 0, 1, off))) { /* the prompt closed an empty one: thinking off */
        takes_g4(g, off, G_CALL("tell_story", "{}"), "tell_story({});");
        refuses(g, F, "<|channel>thought\nhm<channel|>" G_CALL("tell_story", "{}"));
        slm_grammar_free(g);
    }
    /* $ref (inside the arguments) works; what Gemma's calls cannot hold is refused naming the function */
    const slm_tool_fn ref[] = {{"r", "{\"properties\": {\"a\": {\"$ref\": \"#/$defs/x\"}, \"b\": {\"type\": \"array\", "
                                    "\"items\": {\"$ref\": \"#/$defs/x\"}}}, \"$defs\": {\"x\": {\"type\": \"integer\"}}}"}};
    if ((g = build(F, ref, 1, 0, 0, p))) {
        takes_g4(g, p, G_CALL("r", "{a:5,b:[1,2]}"), "r({\"a\":5,\"b\":[1,2]});");
        refuses(g, F, G_CALL("r", "{a:" G_Q "5" G_Q "}"));
        slm_grammar_free(g);
    }
    static const struct { const char *schema, *says; } bad[] = {
        {"{\"type\": \"object\", \"properties\": {\"q\": {\"type\": \"string\", \"pattern\": \"^a\"}}}", "'pattern'"},
        {"{\"type\": \"string\"}", "type object"},
        {"{\"anyOf\": [{\"type\": \"object\"}, {\"type\": \"null\"}]}", "'anyOf'"},
        {"{\"$ref\": \"#/$defs/a\", \"$defs\": {\"a\": {\"type\": \"object\"}}}", "'$ref'"},
        {"{\"properties\": {\"u\": {\"enum\": [\"c\", \"x<|\\\"|>y\"]}}}", "<|\"|>"},
        {"{\"properties\": {\"u\": {\"const\": \"a<channel|>\"}}}", "<channel|>"},
        {"{\"properties\": {\"a<|\\\"|>\": {\"type\": \"integer\"}}}", "<|\"|>"},
        {"{\"properties\": {\"t\": {\"$ref\": \"#/$defs/t\"}}, \"$defs\": {\"t\": {\"type\": \"object\", \"properties\": "
         "{\"kids\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/t\"}}}}}}", "nested deeper than 62"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const slm_tool_fn f[] = {{"ok", NULL}, {"lookup", bad[i].schema}};
        char *txt = NULL;
        const char *tokens;
        int b = -1;
        slm_err err = {0};
        CHECKF(slm_tool_grammar(F, f, 2, 0, 0, p, &txt, &tokens, &b, &err) == SLM_ERR_ARG && !txt, "took %s", bad[i].schema);
        CHECKF(b == 1 && strstr(err.msg, "'lookup'") && strstr(err.msg, bad[i].says), "%d %s", b, err.msg);
    }
    /* nesting to the parser's depth (62 containers, the arguments' the first), not past it */
    for (int levels = 62; levels <= 63; levels++) {
        char deep[4096], call[4096], want[4096];
        size_t k = 0, kc = (size_t)snprintf(call, sizeof call, "<|tool_call>call:deep"), kw = (size_t)snprintf(want, sizeof want, "deep(");
        for (int d = 0; d < levels; d++) {
            k += (size_t)snprintf(deep + k, sizeof deep - k, "{\"properties\": {\"a\": ");
            kc += (size_t)snprintf(call + kc, sizeof call - kc, "{a:");
            kw += (size_t)snprintf(want + kw, sizeof want - kw, "{\"a\":");
        }
        k += (size_t)snprintf(deep + k, sizeof deep - k, "{\"type\": \"integer\"}");
        kc += (size_t)snprintf(call + kc, sizeof call - kc, "7");
        kw += (size_t)snprintf(want + kw, sizeof want - kw, "7");
        for (int d = 0; d < levels; d++) {
            k += (size_t)snprintf(deep + k, sizeof deep - k, "}}");
            kc += (size_t)snprintf(call + kc, sizeof call - kc, "}");
            kw += (size_t)snprintf(want + kw, sizeof want - kw, "}");
        }
        snprintf(call + kc, sizeof call - kc, "<tool_call|>");
        snprintf(want + kw, sizeof want - kw, ");");
        const slm_tool_fn df[] = {{"deep", deep}};
        if (levels == 62 && (g = build(F, df, 1, 0, 0, p))) {
            takes_g4(g, p, call, want);
            slm_grammar_free(g);
        }
        if (levels == 63) {
            char *txt = NULL;
            const char *tokens;
            int b = -1;
            slm_err err = {0};
            CHECK(slm_tool_grammar(F, df, 1, 0, 0, p, &txt, &tokens, &b, &err) == SLM_ERR_ARG && !txt && b == 0);
            CHECKF(strstr(err.msg, "deeper than 62"), "%s", err.msg);
        }
    }
    /* any value: its containers stop at the parser's depth too */
    if ((g = build(F, k_fns + 1, 1, 0, 0, p))) {
        for (int inner = 61; inner <= 62; inner++) {
            char call[512], want[512];
            size_t kc = (size_t)snprintf(call, sizeof call, "<|tool_call>call:tell_story{a:");
            size_t kw = (size_t)snprintf(want, sizeof want, "tell_story({\"a\":");
            for (int d = 0; d < inner; d++) kc += (size_t)snprintf(call + kc, sizeof call - kc, "["), kw += (size_t)snprintf(want + kw, sizeof want - kw, "[");
            for (int d = 0; d < inner; d++) kc += (size_t)snprintf(call + kc, sizeof call - kc, "]"), kw += (size_t)snprintf(want + kw, sizeof want - kw, "]");
            snprintf(call + kc, sizeof call - kc, "}<tool_call|>");
            snprintf(want + kw, sizeof want - kw, "});");
            if (inner == 61) takes_g4(g, p, call, want);
            else refuses(g, F, call);
        }
        slm_grammar_free(g);
    }
}

static uint64_t rng_next(uint64_t *x) {
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

/* slm_gbnf_avoid against a plain search, over texts made of near misses */
static void test_avoid(void) {
    static const char *const words[] = {"<|\"|>", "<|channel>", "<channel|>"};
    static const char *const bits[] = {"<", "|", "\"", ">", "c", "channel", "<|", "<|\"|", "<|\"", "|\"|>", "x", "<channel",
                                       "|>", "hannel|>", "<|channel", "<<", "é", "<|\"|>", "<|channel>", "<channel|>"};
    for (int nw = 1; nw <= 3; nw++) {
        char expr[2048], gtxt[2100];
        const size_t k = slm_gbnf_avoid(words + 3 - nw, nw, expr, sizeof expr);
        CHECK(k > 0 && k == strlen(expr));
        snprintf(gtxt, sizeof gtxt, "root ::= %s\n", expr);
        slm_grammar *g = NULL;
        slm_err err = {0};
        CHECKF(slm_grammar_compile(gtxt, strlen(gtxt), &g, &err) == SLM_OK, "%s\n%s", err.msg, gtxt);
        if (!g) return;
        uint64_t x = 0x9E3779B97F4A7C15ull + (uint64_t)nw;
        int in = 0, out = 0;
        for (int it = 0; it < 20000; it++) {
            char t[256];
            size_t n = 0;
            const int parts = (int)(rng_next(&x) % 7);
            for (int q = 0; q < parts; q++) {
                const char *b = bits[rng_next(&x) % (sizeof bits / sizeof *bits)];
                memcpy(t + n, b, strlen(b));
                n += strlen(b);
            }
            t[n] = 0;
            int has = 0;
            for (int w = 3 - nw; w < 3; w++) has |= strstr(t, words[w]) != NULL;
            const int m = slm_grammar_matches(g, t, n);
            CHECKF(m == !has, "%d words: [%s] %s", nw, t, m ? "taken" : "refused");
            if (m != !has) break;
            in += !has, out += has;
        }
        CHECKF(in > 1000 && out > 1000 * nw, "%d words: %d texts without, %d with", nw, in, out);
        slm_grammar_free(g);
    }
    char tiny[8];
    CHECK(slm_gbnf_avoid(words, 3, tiny, sizeof tiny) == 0); /* no room */
    static const char *const odd[] = {"a<b"}, *const two[] = {"<a<b"};
    CHECK(slm_gbnf_avoid(odd, 1, tiny, sizeof tiny) == 0 && slm_gbnf_avoid(two, 1, tiny, sizeof tiny) == 0);
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

/* Random sentences of a gemma4 grammar (bytes and pieces it allows, drawn
 * at random, closing ones preferred once long): each parses into calls
 * whose arguments are JSON that the schema allows (an independent check). */
static const char k_rich[] =
    "{\"type\": \"object\", \"properties\": {\"q\": {\"type\": \"string\"}, \"n\": {\"type\": \"integer\"}, "
    "\"x\": {\"type\": \"number\"}, \"ok\": {\"type\": \"boolean\"}, \"tag\": {\"enum\": [\"a b\", 2, null, true, {\"k\": [1, \"\\\"\"]}]}, "
    "\"pt\": {\"type\": \"object\", \"properties\": {\"lat\": {\"type\": \"number\"}, \"name\": {\"type\": \"string\", "
    "\"minLength\": 1, \"maxLength\": 4}}, \"required\": [\"lat\"]}, \"ids\": {\"type\": \"array\", \"items\": {\"type\": "
    "\"integer\"}, \"maxItems\": 3}, \"any\": {}, \"odd key\": {\"type\": [\"null\", \"string\"]}, \"more\": {\"type\": "
    "\"object\", \"additionalProperties\": {\"type\": \"integer\"}}}, \"required\": [\"q\", \"n\"]}";
static const char k_tags[] = "[\"a b\", 2, null, true, {\"k\": [1, \"\\\"\"]}]";

static int is_int(const cJSON *v) { return cJSON_IsNumber(v) && v->valuedouble == (double)(long long)v->valuedouble; }

static int rich_ok(const cJSON *a) {
    if (!cJSON_IsObject(a) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(a, "q")) || !is_int(cJSON_GetObjectItemCaseSensitive(a, "n")))
        return 0;
    cJSON *tags = cJSON_Parse(k_tags);
    int ok = tags != NULL;
    const cJSON *it, *e;
    cJSON_ArrayForEach(it, a) {
        const char *k = it->string;
        if (!strcmp(k, "q")) ok &= cJSON_IsString(it);
        else if (!strcmp(k, "n")) ok &= is_int(it);
        else if (!strcmp(k, "x")) ok &= cJSON_IsNumber(it);
        else if (!strcmp(k, "ok")) ok &= cJSON_IsBool(it);
        else if (!strcmp(k, "any") || !strcmp(k, "odd key")) ok &= strcmp(k, "odd key") || cJSON_IsNull(it) || cJSON_IsString(it);
        else if (!strcmp(k, "tag")) {
            int in = 0;
            cJSON_ArrayForEach(e, tags) in |= cJSON_Compare(e, it, 1);
            ok &= in;
        } else if (!strcmp(k, "pt")) {
            ok &= cJSON_IsObject(it) && cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(it, "lat"));
            cJSON_ArrayForEach(e, it) ok &= !strcmp(e->string, "lat") ? cJSON_IsNumber(e) : !strcmp(e->string, "name") && cJSON_IsString(e) &&
                                                utf8_chars(e->valuestring) >= 1 && utf8_chars(e->valuestring) <= 4;
        } else if (!strcmp(k, "ids")) {
            ok &= cJSON_IsArray(it) && cJSON_GetArraySize(it) <= 3;
            cJSON_ArrayForEach(e, it) ok &= is_int(e);
        } else if (!strcmp(k, "more")) {
            ok &= cJSON_IsObject(it);
            cJSON_ArrayForEach(e, it) ok &= is_int(e);
        } else {
            ok = 0;
        }
    }
    cJSON_Delete(tags);
    return ok;
}

/* A random sentence of g into t[cap] (its length), or 0 when it grew too long. */
static size_t walk_sentence(slm_gmatch *m, uint64_t *x, char *t, size_t cap) {
    static const char *const multi[16] = {G_Q, "<|tool_call>", "<tool_call|>", "call:", "rich", "free", "true", "false", "null",
                                        "odd key", "<|channel>", "<channel|>", "é", "\n", "-0", "e+5"};
    static const char *const closing[] = {G_Q, "}", "]", "<tool_call|>", "0", ":"};
    const char *ok[96 + 16 * 12];
    size_t n = 0;
    slm_gmatch_reset(m);
    for (;;) {
        if (slm_gmatch_can_end(m) && (slm_gmatch_done(m) || n > 120 || rng_next(x) % 3 == 0)) return n;
        int nok = 0, nclose = 0;
        const char *close[8];
        static char single[96][2];
        for (int c = 0x20; c < 0x7F; c++) {
            single[c - 0x20][0] = (char)c;
            if (slm_gmatch_check(m, single[c - 0x20], 1) == 1) ok[nok++] = single[c - 0x20];
        }
        for (size_t i = 0; i < sizeof multi / sizeof *multi; i++)
            if (slm_gmatch_check(m, multi[i], strlen(multi[i])) == 1)
                for (int w = 0; w < 12; w++) ok[nok++] = multi[i]; /* weighted: 12 each, 16 of them */
        for (size_t i = 0; i < sizeof closing / sizeof *closing; i++)
            if (slm_gmatch_check(m, closing[i], strlen(closing[i])) == 1) close[nclose++] = closing[i];
        if (!nok) return 0;
        const char *pick = n > 120 && nclose ? close[rng_next(x) % (uint64_t)nclose] : ok[rng_next(x) % (uint64_t)nok];
        const size_t k = strlen(pick);
        if (n + k + 1 > cap) return 0;
        slm_err err = {0};
        if (slm_gmatch_accept(m, pick, k, &err)) return 0;
        memcpy(t + n, pick, k);
        n += k;
        t[n] = 0;
    }
}

static void test_gemma4_walk(void) {
    const slm_tool_fn fns[] = {{"rich", k_rich}, {"free", NULL}};
    for (int parallel = 0; parallel <= 1; parallel++) {
        slm_grammar *g = build(SLM_TOOL_GEMMA4, fns, 2, parallel, 0, NULL);
        slm_gmatch *m = NULL;
        slm_err err = {0};
        if (!g || slm_gmatch_new(g, &m, &err)) {
            CHECKF(0, "%s", err.msg);
            slm_grammar_free(g);
            return;
        }
        uint64_t x = 88172645463325252ull + (uint64_t)parallel;
        int done = 0, rich = 0;
        for (int it = 0; it < 400; it++) {
            char t[4096];
            const size_t n = walk_sentence(m, &x, t, sizeof t);
            if (!n) continue;
            done++;
            gen_calls c;
            memset(&c, 0, sizeof c);
            slm_toolcall tc;
            slm_tool_init(&tc, SLM_TOOL_GEMMA4, NULL, gen_collect, &c);
            slm_tool_feed(&tc, t, n);
            slm_tool_finish(&tc);
            slm_tool_free(&tc);
            CHECKF(c.n >= 1 && c.n <= 4 && (parallel || c.n == 1) && !c.nt, "%d calls, text [%s] in [%s]", c.n, c.text, t);
            for (int k = 0; k < c.n && k < 4; k++) {
                cJSON *a = cJSON_Parse(c.args[k]);
                const int good = !strcmp(c.name[k], "rich") ? rich_ok(a) : !strcmp(c.name[k], "free") && cJSON_IsObject(a);
                rich += !strcmp(c.name[k], "rich");
                CHECKF(good, "call %s(%s) in [%s]", c.name[k], c.args[k], t);
                cJSON_Delete(a);
            }
            if (getenv("SHOW")) fprintf(stderr, "[%s]\n", t);
        }
        fprintf(stderr, "  gemma4%s: %d of 400 random sentences whole, %d calls to rich\n", parallel ? " parallel" : "", done, rich);
        CHECK(done >= 300 && rich >= 100);
        slm_gmatch_free(m);
        slm_grammar_free(g);
    }
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
    gen_format(e, SLM_TOOL_GEMMA4, "<|turn>model\n", fns, 2, 0);
    gen_format(e, SLM_TOOL_GEMMA4, "<|turn>model\n<|tool_call>", fns + 1, 1, 1); /* named, opened, parallel */
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
    T_RUN(test_gemma4);
    T_RUN(test_avoid);
#ifdef SLM_HAVE_CJSON
    T_RUN(test_gemma4_walk);
#endif
    T_RUN(test_refused);
#ifdef SLM_HAVE_CJSON
    T_RUN(test_generate);
#endif
    T_DONE();
}
