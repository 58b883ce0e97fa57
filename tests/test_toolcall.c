/* Tool calls apart from the text (text/toolcall.h): every format fed the
 * same replies whole, byte by byte and split at every one and every two
 * points, with the same events; several calls; arguments before the name,
 * as a JSON string, absent, cut off; text that only looks like a call; a
 * prompt that opens a call; auto detection from the templates of
 * ../shared/templates and from a vocabulary. */
#include <stdint.h>

#include "text/toolcall.h"
#include "t.h"

/* The events written as one string: text as is, a call as
 * CALL_ name ARGS_ arguments END_. */
#define CALL_ "\x01"
#define ARGS_ "\x02"
#define END_ "\x03"

typedef struct got {
    char s[16384];
    size_t n;
    int last; /* the last event */
    int bad;  /* an event out of order or empty */
} got;

static void put(got *g, const char *s, size_t n) {
    if (g->n + n < sizeof g->s) {
        memcpy(g->s + g->n, s, n);
        g->n += n;
        g->s[g->n] = 0;
    }
}

static void collect(void *ud, int ev, const char *s, size_t n) {
    got *g = ud;
    if (ev == SLM_TOOL_TEXT) {
        g->bad |= !n || g->last == SLM_TOOL_CALL;
        put(g, s, n);
    } else if (ev == SLM_TOOL_CALL) {
        g->bad |= !n || g->last == SLM_TOOL_CALL || g->last == SLM_TOOL_ARGS || strlen(s) != n;
        put(g, CALL_, 1);
        put(g, s, n);
        put(g, ARGS_, 1);
    } else if (ev == SLM_TOOL_ARGS) {
        g->bad |= !n || !(g->last == SLM_TOOL_CALL || g->last == SLM_TOOL_ARGS);
        put(g, s, n);
    } else {
        g->bad |= n || g->last != SLM_TOOL_ARGS; /* every call has arguments, "{}" at least */
        put(g, END_, 1);
    }
    g->last = ev;
}

/* Feed text in pieces cut at a and b (a <= b <= n). */
static void run_split(int fmt, const char *prompt, const char *text, size_t a, size_t b, got *g) {
    slm_toolcall t;
    memset(g, 0, sizeof *g);
    g->last = -1;
    slm_tool_init(&t, fmt, prompt, collect, g);
    size_t n = strlen(text);
    slm_tool_feed(&t, text, a);
    slm_tool_feed(&t, text + a, b - a);
    slm_tool_feed(&t, text + b, n - b);
    slm_tool_finish(&t);
    CHECK(!t.oom);
    slm_tool_free(&t);
}

static void show(char *o, size_t cap, const char *s) {
    size_t k = 0;
    for (; *s && k + 8 < cap; s++) {
        if (*s == 1) k += (size_t)snprintf(o + k, cap - k, "<CALL>");
        else if (*s == 2) k += (size_t)snprintf(o + k, cap - k, "<ARGS>");
        else if (*s == 3) k += (size_t)snprintf(o + k, cap - k, "<END>");
        else o[k++] = *s;
    }
    o[k] = 0;
}

/* Whole, byte by byte, and at every one and two split points: the same events. */
static void expect(int fmt, const char *prompt, const char *text, const char *want) {
    size_t n = strlen(text);
    got g;
    int bad = 0;
    for (size_t a = 0; a <= n && bad < 3; a++)
        for (size_t b = a; b <= n && bad < 3; b++) {
            run_split(fmt, prompt, text, a, b, &g);
            if (strcmp(g.s, want) || g.bad) {
                bad++;
                char x[8192], y[8192];
                show(x, sizeof x, g.s);
                show(y, sizeof y, want);
                CHECKF(0, "%s, split at %zu and %zu of [%s]:\n got [%s]%s\nwant [%s]", slm_tool_format_name(fmt), a, b,
                       text, x, g.bad ? " (events out of order)" : "", y);
            }
        }
    slm_toolcall t;
    memset(&g, 0, sizeof g);
    g.last = -1;
    slm_tool_init(&t, fmt, prompt, collect, &g);
    for (size_t i = 0; i < n; i++) slm_tool_feed(&t, text + i, 1);
    slm_tool_finish(&t);
    slm_tool_free(&t);
    CHECKF(!strcmp(g.s, want) && !g.bad, "byte by byte [%s]", text);
}

#define C(name) CALL_ name ARGS_

static void test_hermes(void) {
    const int H = SLM_TOOL_HERMES;
    expect(H, NULL, "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
           "Let me check.\n" C("get_weather") "{\"city\": \"Paris\"}" END_);
    /* two calls; a brace inside a string; white space between them is text */
    expect(H, NULL,
           "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": "
           "{\"x\": [1, \"}\\\"]\"], \"y\": {\"z\": null}}}\n</tool_call>",
           C("a") "{}" END_ "\n" C("b") "{\"x\": [1, \"}\\\"]\"], \"y\": {\"z\": null}}" END_);
    /* the arguments before the name; other keys skipped */
    expect(H, NULL, "<tool_call>{\"id\": 7, \"arguments\": {\"q\": \"a\\\"b\"}, \"type\": [\"x\"], \"name\": \"search\"}</tool_call>",
           C("search") "{\"q\": \"a\\\"b\"}" END_);
    /* a name with escapes; arguments as a JSON string are its value */
    expect(H, NULL, "<tool_call>{\"name\": \"f\\u00e9\\ud83d\\ude00\", \"arguments\": \"{\\\"a\\\": \\\"\\\\n\\\"}\"}</tool_call>x",
           C("f\xc3\xa9\xf0\x9f\x98\x80") "{\"a\": \"\\n\"}" END_ "x");
    /* no arguments, or an empty string: {} */
    expect(H, NULL, "<tool_call>{\"name\": \"now\"}</tool_call>", C("now") "{}" END_);
    expect(H, NULL, "<tool_call>{\"name\": \"now\", \"arguments\": \"\"}</tool_call>", C("now") "{}" END_);
    /* numbers and words as the arguments */
    expect(H, NULL, "<tool_call>{\"name\": \"n\", \"arguments\": -1.5e3 }</tool_call>", C("n") "-1.5e3" END_);
    /* cut off by the end of the reply: the call still ends */
    expect(H, NULL, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1", C("f") "{\"a\": 1" END_);
    /* not calls: text, unchanged */
    expect(H, NULL, "<tool_call>hello</tool_call> world", "<tool_call>hello</tool_call> world");
    expect(H, NULL, "<tool_call>{\"arguments\": {}}</tool_call>x", "<tool_call>{\"arguments\": {}}</tool_call>x");
    expect(H, NULL, "<tool_call>{\"name\": 3}", "<tool_call>{\"name\": 3}");
    expect(H, NULL, "<tool_call>{\"name\": \"\"}", "<tool_call>{\"name\": \"\"}");
    expect(H, NULL, "a < b <tool_", "a < b <tool_");
    expect(H, NULL, "<<tool_call>{\"name\": \"f\"}</tool_call>", "<" C("f") "{}" END_);
    expect(H, NULL, "<tool_call><tool_call>{\"name\": \"f\"}", "<tool_call>" C("f") "{}" END_);
    /* bytes after the object that are not </tool_call>: text again */
    expect(H, NULL, "<tool_call>{\"name\": \"f\", \"arguments\": {}} junk</tool_call>", C("f") "{}" END_ "junk</tool_call>");
    /* a prompt that opened the call */
    expect(H, "<|im_start|>assistant\n<tool_call>\n", "{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>",
           C("f") "{\"a\": 1}" END_);
    expect(H, "<|im_start|>assistant\n<tool_call>\n", "Once upon a time", "Once upon a time");
    /* a long argument value streams */
    char text[2048], want[2048];
    snprintf(text, sizeof text, "<tool_call>{\"name\": \"w\", \"arguments\": {\"t\": \"%0700d\"}}</tool_call>", 0);
    snprintf(want, sizeof want, C("w") "{\"t\": \"%0700d\"}" END_, 0);
    expect(H, NULL, text, want);
}

static void test_llama3(void) {
    const int L = SLM_TOOL_LLAMA3;
    expect(L, NULL, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", C("get_weather") "{\"city\": \"Paris\"}" END_);
    expect(L, NULL, "{\"type\": \"function\", \"name\": \"f\", \"parameters\": {\"n\": 1.5e3, \"ok\": true}}",
           C("f") "{\"n\": 1.5e3, \"ok\": true}" END_);
    expect(L, NULL, " \n{\"name\": \"f\", \"parameters\": {\"v\": -1}}", " \n" C("f") "{\"v\": -1}" END_);
    expect(L, NULL, "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"x\": null}}",
           C("a") "{}" END_ C("b") "{\"x\": null}" END_);
    expect(L, NULL, "{\"name\": \"f\", \"parameters\": 5}", C("f") "5" END_);
    /* not at the start, or not a call: text */
    expect(L, NULL, "Sure: {\"name\": \"f\", \"parameters\": {}}", "Sure: {\"name\": \"f\", \"parameters\": {}}");
    expect(L, NULL, "{\"answer\": 42} ok", "{\"answer\": 42} ok");
    expect(L, NULL, "{{\"name\": \"f\"}}", "{{\"name\": \"f\"}}");
    expect(L, NULL, "<|python_tag|>brave_search.call(query=\"x\")", "<|python_tag|>brave_search.call(query=\"x\")");
    expect(L, NULL, "{\"name\": \"f\", \"parameters\": {}} Done.", C("f") "{}" END_ "Done.");
    expect(L, "<|start_header_id|>assistant<|end_header_id|>\n\n<|python_tag|>", "{\"name\": \"g\"}", C("g") "{}" END_);
}

static void test_mistral(void) {
    const int M = SLM_TOOL_MISTRAL;
    expect(M, NULL, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abc123def\"}]",
           C("get_weather") "{\"city\": \"Paris\"}" END_);
    expect(M, NULL, "[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {\"k\": \"v\"}}]",
           C("a") "{}" END_ C("b") "{\"k\": \"v\"}" END_);
    expect(M, NULL, "Text [TOOL_CALLS]{\"name\": \"a\", \"arguments\": {}} after", "Text " C("a") "{}" END_ "after");
    expect(M, NULL, "[TOOL_CALLS", "[TOOL_CALLS");
    expect(M, NULL, "[x] [TOOL_CALLS]nope", "[x] [TOOL_CALLS]nope");
    expect(M, NULL, "[TOOL_CALLS][{\"name\": \"a\"}, nope]", C("a") "{}" END_ ", nope]");
    expect(M, "[INST]Hi[/INST][TOOL_CALLS]", "[{\"name\": \"f\", \"arguments\": {\"x\": 1}}]", C("f") "{\"x\": 1}" END_);
}

static void test_harmony(void) {
    const int H = SLM_TOOL_HARMONY;
    expect(H, "<|start|>assistant",
           "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
           "<|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
           "<|channel|>analysis<|message|>Need weather.<|end|>" C("get_weather") "{\"city\":\"Paris\"}" END_);
    expect(H, NULL, "<|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>{\"q\": 1}",
           C("lookup") "{\"q\": 1}" END_);
    /* other messages, other recipients, stray markers: text */
    expect(H, NULL, "<|channel|>final<|message|>Hi <|x|> a<b<|return|>", "<|channel|>final<|message|>Hi <|x|> a<b<|return|>");
    expect(H, NULL, "<|channel|>commentary to=browser.search<|message|>{}", "<|channel|>commentary to=browser.search<|message|>{}");
    expect(H, NULL, "<|channel|>commentary to=functions.<|message|>{}", "<|channel|>commentary to=functions.<|message|>{}");
    /* an empty body; a call that runs into the next message */
    expect(H, NULL, "<|channel|>commentary to=functions.f<|message|><|call|>", C("f") "{}" END_);
    expect(H, NULL, "<|channel|>commentary to=functions.f<|message|>{}<|start|>assistant<|channel|>final<|message|>ok",
           C("f") "{}" END_ "<|start|>assistant<|channel|>final<|message|>ok");
    expect(H, NULL, "<|channel|>commentary to=functions.f<|message|>a<|en", C("f") "a<|en" END_);
    /* a prompt that opened a message to a function: the reply is the arguments */
    expect(H, "<|start|>assistant<|channel|>commentary to=functions.tell <|constrain|>json<|message|>", "Once upon",
           C("tell") "Once upon" END_);
    expect(H, "<|start|>assistant<|channel|>analysis<|message|>", "Once upon", "Once upon");
}

static void test_xml(void) {
    const int X = SLM_TOOL_XML;
    expect(X, NULL,
           "I will check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
           "</parameter>\n</function>\n</tool_call>",
           "I will check.\n" C("get_weather") "{\"city\": \"Paris\", \"days\": 3}" END_);
    /* JSON values as they are, text as strings (escaped; the newlines around a value dropped, those inside kept) */
    expect(X, NULL,
           "<tool_call>\n<function=f>\n<parameter=a>\n{\"x\": [1, 2]}\n</parameter>\n<parameter=b>\ntrue\n</parameter>\n"
           "<parameter=c>\nline \"one\"\n\tline two\n</parameter>\n<parameter=d>\n\"quoted\"\n</parameter>\n"
           "<parameter=e>\n12 apples\n</parameter>\n</function>\n</tool_call>",
           C("f") "{\"a\": {\"x\": [1, 2]}, \"b\": true, \"c\": \"line \\\"one\\\"\\n\\tline two\", \"d\": \"\\\"quoted\\\"\", "
                  "\"e\": \"12 apples\"}" END_);
    /* no parameters; two calls; what follows </tool_call> is text (as hermes) */
    expect(X, NULL, "<tool_call>\n<function=now>\n</function>\n</tool_call>\n<tool_call>\n<function=b>\n<parameter=k>\nv\n"
                    "</parameter>\n</function>\n</tool_call> done",
           C("now") "{}" END_ "\n" C("b") "{\"k\": \"v\"}" END_ " done");
    /* <tool_call> left out; </parameter> left out before </function> */
    expect(X, NULL, "<function=g>\n<parameter=q>\nx\n</function>", C("g") "{\"q\": \"x\"}" END_);
    /* cut off inside a value: the value so far, the call ended */
    expect(X, NULL, "<tool_call>\n<function=w>\n<parameter=t>\nabc", C("w") "{\"t\": \"abc\"}" END_);
    expect(X, NULL, "<tool_call>\n<function=w>\n<param", C("w") "{}" END_);
    /* not calls: text, unchanged */
    expect(X, NULL, "a <tool_call> b", "a <tool_call> b");
    expect(X, NULL, "<tool_call>\n<function=>x", "<tool_call>\n<function=>x");
    expect(X, NULL, "<tool_call>\n<function=bad name>", "<tool_call>\n<function=bad name>");
    expect(X, NULL, "x < y and <tool_", "x < y and <tool_");
    expect(X, NULL, "<<tool_call><function=f></function>", "<" C("f") "{}" END_);
    /* a body that breaks off: the call is closed there, the rest is text */
    expect(X, NULL, "<function=f>\n<parameter=a>\n1\n</parameter>\noops", C("f") "{\"a\": 1}" END_ "oops");
    /* a prompt that opened the call */
    expect(X, "<|im_start|>assistant\n<tool_call>\n", "<function=f>\n</function>\n</tool_call>", C("f") "{}" END_);
    expect(X, "<|im_start|>assistant\n<tool_call>\n", "Once upon a time", "Once upon a time");
}

/* Gemma 4: <|tool_call>call:NAME{key:VALUE,...}<tool_call|>, strings in <|"|> quotes, as JSON */
static void test_gemma4(void) {
    const int G = SLM_TOOL_GEMMA4;
#define Q "<|\"|>"
    expect(G, NULL, "Checking.<|tool_call>call:get_weather{city:" Q "Paris" Q ",days:3}<tool_call|>",
           "Checking." C("get_weather") "{\"city\":\"Paris\",\"days\":3}" END_);
    /* every kind of value; quotes, backslashes and newlines in strings escaped; Python's words as JSON's */
    expect(G, NULL,
           "<|tool_call>call:f{a:{x:[1,-2.5e3," Q "s" Q "]},b:true,c:" Q "say \"hi\"\\\n\tok <b>" Q ",d:None,e:False,"
           "g:[],h:{}," Q "quoted key" Q ":null}<tool_call|>",
           C("f") "{\"a\":{\"x\":[1,-2.5e3,\"s\"]},\"b\":true,\"c\":\"say \\\"hi\\\"\\\\\\n\\tok <b>\",\"d\":null,"
                  "\"e\":false,\"g\":[],\"h\":{},\"quoted key\":null}" END_);
    /* numbers as JSON's: leading zeros dropped, a negative zero kept */
    expect(G, NULL, "<|tool_call>call:n{a:007,b:-01,c:00.5,d:-0e5,e:0,f:-0.0,g:10,h:-00}<tool_call|>",
           C("n") "{\"a\":7,\"b\":-1,\"c\":0.5,\"d\":-0e5,\"e\":0,\"f\":-0.0,\"g\":10,\"h\":-0}" END_);
    /* no arguments; two calls with text between; white space between the parts */
    expect(G, NULL, "<|tool_call>call:now{}<tool_call|> and <|tool_call>call:b{ k : " Q "v" Q " }<tool_call|> done",
           C("now") "{}" END_ " and " C("b") "{\"k\":\"v\"}" END_ " done");
    /* cut off inside a string, a key, a number, an array: closed there */
    expect(G, NULL, "<|tool_call>call:w{t:" Q "abc", C("w") "{\"t\":\"abc\"}" END_);
    expect(G, NULL, "<|tool_call>call:w{t:" Q "ab<|\"", C("w") "{\"t\":\"ab<|\\\"\"}" END_);
    expect(G, NULL, "<|tool_call>call:w{ti", C("w") "{\"ti\":null}" END_);
    expect(G, NULL, "<|tool_call>call:w{n:12", C("w") "{\"n\":12}" END_);
    expect(G, NULL, "<|tool_call>call:w{l:[1,{a:2", C("w") "{\"l\":[1,{\"a\":2}]}" END_);
    expect(G, NULL, "<|tool_call>call:w{k:", C("w") "{\"k\":null}" END_);
    expect(G, NULL, "<|tool_call>call:w{a:1,", C("w") "{\"a\":1}" END_);
    expect(G, NULL, "<|tool_call>call:w{a:[1,", C("w") "{\"a\":[1]}" END_);
    expect(G, NULL, "<|tool_call>call:w{" Q "k" Q, C("w") "{\"k\":null}" END_);
    expect(G, NULL, "<|tool_call>call:w{k:<|\"", C("w") "{\"k\":null}" END_);
    expect(G, NULL, "<|tool_call>call:w{a:[1,\x81]}", C("w") "{\"a\":[1]}" END_ "\x81]}");
    /* <tool_call|> left out: the call ends after its arguments, what follows is text */
    expect(G, NULL, "<|tool_call>call:f{a:1} then", C("f") "{\"a\":1}" END_ "then");
    /* a syntax break: the call closed there, the rest is text */
    expect(G, NULL, "<|tool_call>call:f{a:1;b:2}<tool_call|>", C("f") "{\"a\":1}" END_ ";b:2}<tool_call|>");
    expect(G, NULL, "<|tool_call>call:f{a:nope!}", C("f") "{\"a\":null}" END_ "!}");
    /* not calls: text, unchanged */
    expect(G, NULL, "a <|tool_call> b", "a <|tool_call> b");
    expect(G, NULL, "<|tool_call>call:{x:1}", "<|tool_call>call:{x:1}");
    expect(G, NULL, "<|tool_call>cal:f{}", "<|tool_call>cal:f{}");
    expect(G, NULL, "<|tool_call>call:bad name{}", "<|tool_call>call:bad name{}");
    expect(G, NULL, "x < y and <|tool_", "x < y and <|tool_");
    expect(G, NULL, "<<|tool_call>call:f{}<tool_call|>", "<" C("f") "{}" END_);
    /* a prompt that opened the call */
    expect(G, "<|turn>model\n<|tool_call>", "call:f{a:1}<tool_call|>", C("f") "{\"a\":1}" END_);
    expect(G, "<|turn>model\n<|tool_call>", "Once upon a <time", "Once upon a <time");
#undef Q
}

/* xml: the tools' string parameters stay strings */
static void test_xml_types(void) {
    got g;
    memset(&g, 0, sizeof g);
    g.last = -1;
    slm_toolcall t;
    slm_tool_init(&t, SLM_TOOL_XML, NULL, collect, &g);
    CHECK(slm_tool_xml_types(&t, "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\", "
                                 "\"properties\": {\"zip\": {\"type\": \"string\"}, \"n\": {\"type\": \"integer\"}}}}}]") == SLM_OK);
    const char *r = "<tool_call>\n<function=f>\n<parameter=zip>\n01234\n</parameter>\n<parameter=n>\n7\n</parameter>\n"
                    "<parameter=other>\n8\n</parameter>\n</function>\n</tool_call><function=g>\n<parameter=zip>\n5\n</parameter>\n</function>";
    slm_tool_feed(&t, r, strlen(r));
    slm_tool_finish(&t);
    slm_tool_free(&t);
#ifdef SLM_HAVE_CJSON
    CHECKF(!strcmp(g.s, C("f") "{\"zip\": \"01234\", \"n\": 7, \"other\": 8}" END_ C("g") "{\"zip\": 5}" END_), "%s", g.s);
#endif
}

static void test_none(void) {
    expect(SLM_TOOL_NONE, NULL, "<tool_call>{\"name\": \"f\"}</tool_call>", "<tool_call>{\"name\": \"f\"}</tool_call>");
}

/* Text that cannot begin a call is not held: it comes out before the end. */
static void test_hold_only_calls(void) {
    got g;
    memset(&g, 0, sizeof g);
    g.last = -1;
    slm_toolcall t;
    slm_tool_init(&t, SLM_TOOL_HERMES, NULL, collect, &g);
    slm_tool_feed(&t, "Hello <tool", 11);
    CHECK(!strcmp(g.s, "Hello "));
    slm_tool_feed(&t, "_call>{\"name\": \"f", 17);
    CHECK(!strcmp(g.s, "Hello ")); /* the name is not whole yet */
    slm_tool_feed(&t, "\", \"arguments\": {\"a\"", 20);
    CHECK(!strcmp(g.s, "Hello " C("f") "{\"a\"")); /* the name out, the arguments stream */
    slm_tool_feed(&t, ": 1}}</tool_call> ok", 20);
    CHECK(!strcmp(g.s, "Hello " C("f") "{\"a\": 1}" END_ " ok"));
    slm_tool_finish(&t);
    slm_tool_free(&t);
    /* a call whose name never comes is held up to SLM_TOOL_HOLD_MAX bytes, then text */
    memset(&g, 0, sizeof g);
    g.last = -1;
    slm_tool_init(&t, SLM_TOOL_HERMES, NULL, collect, &g);
    slm_tool_feed(&t, "<tool_call>{\"arguments\": \"", 27);
    for (int i = 0; i < SLM_TOOL_HOLD_MAX; i++) slm_tool_feed(&t, "x", 1);
    CHECK(g.n > SLM_TOOL_HOLD_MAX && !strncmp(g.s, "<tool_call>{", 12));
    slm_tool_finish(&t);
    slm_tool_free(&t);
}

static void test_detect(void) {
    static const struct { const char *file; int fmt; } cases[] = {
        {"Qwen-Qwen2.5-7B-Instruct.jinja", SLM_TOOL_HERMES},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", SLM_TOOL_LLAMA3},
        {"meta-llama-Llama-3.2-3B-Instruct.jinja", SLM_TOOL_LLAMA3},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", SLM_TOOL_MISTRAL},
        {"google-gemma-2-2b-it.jinja", SLM_TOOL_NONE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/templates/%s", SLM_SHARED_DIR, cases[i].file);
        char *src = t_read_file(path, NULL);
        CHECKF(src != NULL, "%s", path);
        if (!src) continue;
        CHECKF(slm_tool_detect(NULL, src) == cases[i].fmt, "%s: %s", cases[i].file, slm_tool_format_name(slm_tool_detect(NULL, src)));
        free(src);
    }
    CHECK(slm_tool_detect(NULL, "{{ '<|start|>assistant<|channel|>final<|message|>' }}") == SLM_TOOL_HARMONY);
    CHECK(slm_tool_detect(NULL, NULL) == SLM_TOOL_NONE);
    /* a template that writes Qwen3-Coder / Qwen3.5's calls (their words) */
    CHECK(slm_tool_detect(NULL, "{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}{{- '<parameter=' + args_name + '>\\n' }}") ==
          SLM_TOOL_XML);
    CHECK(slm_tool_format_parse("xml") == SLM_TOOL_XML && !strcmp(slm_tool_format_name(SLM_TOOL_XML), "xml"));
    /* Gemma 4's template (its words), or its vocabulary's call markers */
    CHECK(slm_tool_detect(NULL, "{{- '<|tool_call>call:' + function['name'] + '{' -}}<tool_call|>") == SLM_TOOL_GEMMA4);
    CHECK(slm_tool_format_parse("gemma4") == SLM_TOOL_GEMMA4 && !strcmp(slm_tool_format_name(SLM_TOOL_GEMMA4), "gemma4"));
    CHECK(slm_tool_format_parse("hermes") == SLM_TOOL_HERMES && slm_tool_format_parse("auto") == SLM_TOOL_AUTO);
    CHECK(slm_tool_format_parse("Hermes") == -1 && slm_tool_format_parse(NULL) == -1);
    CHECK(!strcmp(slm_tool_format_name(SLM_TOOL_MISTRAL), "mistral"));
}

int main(void) {
    T_RUN(test_hermes);
    T_RUN(test_llama3);
    T_RUN(test_mistral);
    T_RUN(test_harmony);
    T_RUN(test_xml);
    T_RUN(test_xml_types);
    T_RUN(test_gemma4);
    T_RUN(test_none);
    T_RUN(test_hold_only_calls);
    T_RUN(test_detect);
    T_DONE();
}
