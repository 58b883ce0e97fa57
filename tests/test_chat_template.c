/* Chat templates: every template in ../shared/templates and the built-in
 * classic forms render a fixed conversation (system + user + assistant +
 * user, add_generation_prompt) to the text each template defines. The
 * expected strings below were derived by reading each template under Hugging
 * Face's Jinja settings (trim_blocks, lstrip_blocks). Also: Jinja features
 * one by one, errors, and malformed templates (no crash, no leak). */
#include <dirent.h>
#include <time.h>

#include "engine/chat.h"
#include "text/chat_template.h"
#include "t.h"

static const slm_chat_msg CONV[] = {
    {"system", "You are a helpful assistant."},
    {"user", "Hello!"},
    {"assistant", " Hi there. "},
    {"user", "How are you?"},
};

/* Render src; returns malloc'd text or "ERROR: <message>" (malloc'd). */
static char *render_src(const char *src, const slm_chat_msg *m, int n, int gen, const char *date) {
    slm_err err;
    slm_tmpl *t = slm_tmpl_parse(src, &err);
    if (!t) {
        CHECKF(err.status == SLM_ERR_FORMAT || err.status == SLM_ERR_NOMEM, "status %d", (int)err.status);
        char *o = malloc(strlen(err.msg) + 16);
        sprintf(o, "PARSE: %s", err.msg);
        return o;
    }
    slm_tmpl_vars v = {"<s>", "</s>", gen, date};
    char *r = slm_tmpl_render(t, m, n, &v, &err);
    slm_tmpl_free(t);
    if (!r) {
        CHECKF(err.status != SLM_OK && err.msg[0], "status %d [%s]", (int)err.status, err.msg);
        r = malloc(strlen(err.msg) + 16);
        sprintf(r, "ERROR: %s", err.msg);
    } else {
        /* the renderer's memory is slm_malloc'd; copy into malloc for the callers here */
        char *c = malloc(strlen(r) + 1);
        strcpy(c, r);
        slm_xfree(r);
        r = c;
    }
    return r;
}

static const struct {
    const char *file, *expect;
} SHARED[] = {
    {"HuggingFaceTB-SmolLM3-3B.jinja",
     /* no /think or /no_think in the system prompt: reasoning mode /think;
      * the system text becomes the custom instructions; assistant content
      * is lstrip("\n")-ed only */
     "<|im_start|>system\n"
     "## Metadata\n"
     "\n"
     "Knowledge Cutoff Date: June 2025\n"
     "Reasoning Mode: /think\n"
     "\n"
     "## Custom Instructions\n"
     "\n"
     "You are a helpful assistant.\n"
     "\n"
     "<|im_end|>\n"
     "<|im_start|>user\n"
     "Hello!<|im_end|>\n"
     "<|im_start|>assistant\n"
     " Hi there. <|im_end|>\n"
     "<|im_start|>user\n"
     "How are you?<|im_end|>\n"
     "<|im_start|>assistant\n"},
    {"Qwen-Qwen2.5-7B-Instruct.jinja",
     "<|im_start|>system\n"
     "You are a helpful assistant.<|im_end|>\n"
     "<|im_start|>user\n"
     "Hello!<|im_end|>\n"
     "<|im_start|>assistant\n"
     " Hi there. <|im_end|>\n"
     "<|im_start|>user\n"
     "How are you?<|im_end|>\n"
     "<|im_start|>assistant\n"},
    /* Gemma 2 refuses a system message */
    {"google-gemma-2-2b-it.jinja", "ERROR: template raised: System role not supported"},
    {"meta-llama-Llama-3.1-8B-Instruct.jinja",
     "<s><|start_header_id|>system<|end_header_id|>\n"
     "\n"
     "Cutting Knowledge Date: December 2023\n"
     "Today Date: 26 Jul 2024\n"
     "\n"
     "You are a helpful assistant.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
     "\n"
     "Hello!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
     "\n"
     "Hi there.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
     "\n"
     "How are you?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
     "\n"},
    /* 3.2 takes the date from strftime_now("%d %b %Y"): the test fixes it */
    {"meta-llama-Llama-3.2-3B-Instruct.jinja",
     "<s><|start_header_id|>system<|end_header_id|>\n"
     "\n"
     "Cutting Knowledge Date: December 2023\n"
     "Today Date: 26 Jul 2024\n"
     "\n"
     "You are a helpful assistant.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
     "\n"
     "Hello!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
     "\n"
     "Hi there.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
     "\n"
     "How are you?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
     "\n"},
    {"microsoft-Phi-3.5-mini-instruct.jinja",
     "<|system|>\n"
     "You are a helpful assistant.<|end|>\n"
     "<|user|>\n"
     "Hello!<|end|>\n"
     "<|assistant|>\n"
     " Hi there. <|end|>\n"
     "<|user|>\n"
     "How are you?<|end|>\n"
     "<|assistant|>\n"},
    /* the system message goes in front of the last user message */
    {"mistralai-Mistral-Nemo-Instruct-2407.jinja",
     "<s>[INST]Hello![/INST] Hi there. </s>[INST]You are a helpful assistant.\n"
     "\n"
     "How are you?[/INST]"},
};

static void test_shared_templates(void) {
    int seen = 0;
    DIR *d = opendir(T_SHARED("templates"));
    CHECKF(d != NULL, "cannot open %s", T_SHARED("templates"));
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 6 || strcmp(de->d_name + n - 6, ".jinja")) continue;
        int found = 0;
        for (size_t i = 0; i < sizeof SHARED / sizeof SHARED[0]; i++) {
            if (strcmp(SHARED[i].file, de->d_name)) continue;
            found = 1;
            seen++;
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", T_SHARED("templates"), de->d_name);
            char *src = t_read_file(path, NULL);
            CHECKF(src != NULL, "%s", path);
            if (!src) continue;
            char *r = render_src(src, CONV, 4, 1, "26 Jul 2024");
            CHECKF(!strcmp(r, SHARED[i].expect), "%s rendered:\n[%s]\nexpected:\n[%s]", de->d_name, r, SHARED[i].expect);
            free(r);
            free(src);
        }
        CHECKF(found, "template %s has no expected rendering in this test", de->d_name);
    }
    closedir(d);
    CHECK(seen == (int)(sizeof SHARED / sizeof SHARED[0]));
}

/* Gemma without a system message; the date from the clock for Llama 3.2. */
static void test_gemma_and_today(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/google-gemma-2-2b-it.jinja", T_SHARED("templates"));
    char *src = t_read_file(path, NULL);
    CHECK(src != NULL);
    if (src) {
        char *r = render_src(src, CONV + 1, 3, 1, NULL);
        CHECKF(!strcmp(r, "<s><start_of_turn>user\nHello!<end_of_turn>\n<start_of_turn>model\nHi there.<end_of_turn>\n"
                          "<start_of_turn>user\nHow are you?<end_of_turn>\n<start_of_turn>model\n"),
               "[%s]", r);
        free(r);
        /* roles must alternate */
        slm_chat_msg bad[] = {{"user", "a"}, {"user", "b"}};
        r = render_src(src, bad, 2, 1, NULL);
        CHECKF(strstr(r, "roles must alternate") != NULL, "[%s]", r);
        free(r);
        free(src);
    }
    snprintf(path, sizeof path, "%s/meta-llama-Llama-3.2-3B-Instruct.jinja", T_SHARED("templates"));
    src = t_read_file(path, NULL);
    CHECK(src != NULL);
    if (src) {
        char today[64], want[128];
        time_t now = time(NULL);
        struct tm tmv;
        localtime_r(&now, &tmv);
        strftime(today, sizeof today, "%d %b %Y", &tmv);
        snprintf(want, sizeof want, "Today Date: %s\n", today);
        char *r = render_src(src, CONV, 2, 0, NULL);
        CHECKF(strstr(r, want) != NULL, "[%s] lacks [%s]", r, want);
        /* without add_generation_prompt: no assistant header at the end */
        size_t n = strlen(r), k = strlen("<|eot_id|>");
        CHECKF(n >= k && !strcmp(r + n - k, "<|eot_id|>"), "[%s]", r);
        free(r);
        free(src);
    }
}

static void test_classic_forms(void) {
    struct {
        const char *name, *expect;
    } cases[] = {
        {"chatml",
         "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n"
         "<|im_start|>assistant\n Hi there. <|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n"
         "<|im_start|>assistant\n"},
        /* Llama 2: system folded into the first user turn, BOS per user turn,
         * content stripped, EOS after each answer */
        {"llama2",
         "<s>[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nHello! [/INST] Hi there. </s>"
         "<s>[INST] How are you? [/INST]"},
        {"zephyr",
         "<|system|>\nYou are a helpful assistant.</s>\n<|user|>\nHello!</s>\n<|assistant|>\n Hi there. </s>\n"
         "<|user|>\nHow are you?</s>\n<|assistant|>\n"},
        {"llama3",
         "<s><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
         "<|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
         "<|start_header_id|>assistant<|end_header_id|>\n\nHi there.<|eot_id|>"
         "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>"
         "<|start_header_id|>assistant<|end_header_id|>\n\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *src = slm_tmpl_builtin(cases[i].name);
        CHECKF(src != NULL, "%s", cases[i].name);
        if (!src) continue;
        char *r = render_src(src, CONV, 4, 1, NULL);
        CHECKF(!strcmp(r, cases[i].expect), "%s rendered:\n[%s]\nexpected:\n[%s]", cases[i].name, r, cases[i].expect);
        free(r);
    }
    CHECK(slm_tmpl_builtin("nope") == NULL);
    /* Llama 2 without a system message, and a wrong role order */
    char *r = render_src(slm_tmpl_builtin("llama2"), CONV + 1, 3, 1, NULL);
    CHECKF(!strcmp(r, "<s>[INST] Hello! [/INST] Hi there. </s><s>[INST] How are you? [/INST]"), "[%s]", r);
    free(r);
    r = render_src(slm_tmpl_builtin("llama2"), CONV + 2, 2, 1, NULL);
    CHECKF(!strncmp(r, "ERROR: template raised: Conversation roles must alternate", 57), "[%s]", r);
    free(r);
}

/* one feature per line: template, expected output */
static void test_features(void) {
    static const struct {
        const char *src, *expect;
    } cases[] = {
        {"{{ 'a' + 'b' ~ 1 }}", "ab1"},
        {"{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1.5 + 1 }}", "3 -4 2 3.5 1024 2.5"},
        {"{{ 'ab' * 3 }}|{{ none }}|{{ true }}|{{ undefined_thing }}|", "ababab|None|True||"},
        {"{% if false %}a{% elif 1 == 1.0 %}b{% else %}c{% endif %}", "b"},
        {"{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }};{% endfor %}",
         "10TrueFalse44;21FalseFalse43;32FalseFalse42;43FalseTrue41;"},
        {"{% for m in messages if m.role == 'user' %}{{ m.content }}{{ ',' if not loop.last }}{% endfor %}", "Hello!,How are you?"},
        {"{% for x in [] %}a{% else %}empty{% endfor %}", "empty"},
        {"{% for k, v in {'a': 1, 'b': 2} | items %}{{ k }}={{ v }} {% endfor %}", "a=1 b=2 "},
        {"{% for i in range(6) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %}", "023"},
        {"{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}", "4"},
        {"{% set x = 1 %}{% for m in messages %}{% set x = 2 %}{% endfor %}{{ x }}", "1"}, /* loop scope */
        {"{{ messages[1:] | length }} {{ messages[-1]['content'] }} {{ 'hello'[1:3] }} {{ 'abc'[::-1] }}", "3 How are you? el cba"},
        {"{{ messages[0].content is string }} {{ foo is defined }} {{ foo is not defined }} {{ none is none }}", "True False True True"},
        {"{{ 'How' in messages[3].content }} {{ 'x' not in 'abc' }} {{ 2 in [1, 2] }} {{ 'role' in messages[0] }}", "True True True True"},
        {"{{ not true or false and true }} {{ 3 > 2 and 'b' >= 'a' }}", "False True"},
        {"{{ '  pad ' | trim }}|{{ 'x\\n' | length }}|{{ [1, 2] | length }}|{{ 'AbC' | lower }}{{ 'x' | upper }}", "pad|2|2|abcX"},
        {"{{ {'a': [1, none, true, 'q\"']} | tojson }}", "{\"a\": [1, null, true, \"q\\\"\"]}"},
        {"{{ [1, {'k': 'v'}] | tojson(indent=2) }}", "[\n  1,\n  {\n    \"k\": \"v\"\n  }\n]"},
        {"{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(' / ') }}", "Hello! / How are you?"},
        {"{{ ['a', 'b', 'c'] | reject('equalto', 'b') | list }} {{ [3, 1, 2] | first }}{{ [3, 1, 2] | last }}", "['a', 'c'] 32"},
        {"{{ x | default('dflt') }} {{ 'a-b-c'.replace('-', '+') }} {{ ' s '.strip() }}{{ 'xxs'.lstrip('x') }}", "dflt a+b+c ss"},
        {"{{ 'a,b'.split(',') }} {{ 'Hi'.startswith('H') }} {{ {'k': 1}.get('k') }} {{ {'k': 1}.get('z', 5) }}", "['a', 'b'] True 1 5"},
        {"{{ 'yes' if 1 else 'no' }} {{ 'yes' if 0 else 'no' }}", "yes no"},
        {"{%- macro f(a, b='B') -%}[{{ a }}{{ b }}]{%- endmacro -%}{{ f(1) }}{{ f(2, b='x') }}", "[1B][2x]"},
        {"{% set blk %} in {{ 1 }} {% endset %}<{{ blk }}>", "< in 1 >"},
        {"{{ raise_exception('boom') }}", "ERROR: template raised: boom"},
        /* whitespace: trim_blocks, lstrip_blocks, - markers, comments, one trailing newline dropped */
        {"a\n  {% if true %}\n  b\n  {% endif %}\nc\n", "a\n  b\nc"},
        {"a  {{- ' b ' -}}  c", "a b c"},
        {"x {#- note -#} y{# c #}\nz", "xyz"},
        {"{%+ if true %}k{% endif %}", "k"},
        {"{{ \"it's\" }} {{ 'tab\\tq\\u00e9' }}", "it's tab\tq\xc3\xa9"},
        {"{{ {'a': {'b': 1}} }}", "{'a': {'b': 1}}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *r = render_src(cases[i].src, CONV, 4, 1, NULL);
        CHECKF(!strcmp(r, cases[i].expect), "case %zu [%s]: got [%s], expected [%s]", i, cases[i].src, r, cases[i].expect);
        free(r);
    }
}

static void test_errors(void) {
    static const char *const bad[] = {
        "{% if x %}", "{% for %}", "{{ 1 +", "{% endif %}", "{{ x | nosuchfilter }}", "{% nosuchtag %}",
        "{{ 'unterminated }}", "{# open comment", "{{ x is nosuchtest }}", "{% for x in y recursive %}{% endfor %}",
        "{{ (((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((1 }}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *r = render_src(bad[i], CONV, 4, 1, NULL);
        CHECKF(!strncmp(r, "PARSE: line", 11), "[%s] parsed: [%s]", bad[i], r);
        free(r);
    }
    static const char *const rt[] = {
        "{{ 1 / 0 }}", "{{ 'a' + 1 }}", "{{ x.y }}", "{% for x in none %}{% endfor %}",
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", "{{ 'x' * 100000000 }}", "{{ 999999999999999999 * 999999999999999999 }}",
    };
    for (size_t i = 0; i < sizeof rt / sizeof rt[0]; i++) {
        char *r = render_src(rt[i], CONV, 4, 1, NULL);
        CHECKF(!strncmp(r, "ERROR: ", 7), "[%s] rendered: [%.80s]", rt[i], r);
        free(r);
    }
    /* random mutations of the shared templates: never a crash */
    char path[1024];
    snprintf(path, sizeof path, "%s/meta-llama-Llama-3.1-8B-Instruct.jinja", T_SHARED("templates"));
    char *src = t_read_file(path, NULL);
    if (src) {
        srand(7);
        size_t n = strlen(src);
        static const char frag[] = "{}%#-()[]'\".|~+*/ ";
        for (int it = 0; it < 400; it++) {
            char *m = malloc(n + 1);
            memcpy(m, src, n + 1);
            for (int k = 0; k < 3; k++) m[(size_t)rand() % n] = frag[rand() % (int)(sizeof frag - 1)];
            free(render_src(m, CONV, 4, 1, NULL));
            free(m);
        }
        free(src);
    }
}

static void test_open_fallback(void) {
    char note[512];
    slm_tmpl *t = slm_chat_template_open(NULL, "/nonexistent/tmpl.jinja", note, sizeof note);
    CHECK(t != NULL);
    CHECKF(strstr(note, "warning") && strstr(note, "ChatML"), "[%s]", note);
    if (t) {
        slm_tmpl_vars v = {0};
        v.add_generation_prompt = 1;
        slm_err err;
        char *r = slm_tmpl_render(t, CONV + 1, 1, &v, &err);
        CHECKF(r && !strcmp(r, "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n"), "[%s]", r ? r : err.msg);
        slm_xfree(r);
        slm_tmpl_free(t);
    }
    t_write_file("/tmp/slm_bad_tmpl.jinja", "{% frobnicate %}", 16);
    t = slm_chat_template_open(NULL, "/tmp/slm_bad_tmpl.jinja", note, sizeof note);
    CHECK(t != NULL);
    CHECKF(strstr(note, "unsupported chat template") && strstr(note, "frobnicate"), "[%s]", note);
    slm_tmpl_free(t);
    t = slm_chat_template_open(NULL, "zephyr", note, sizeof note);
    CHECK(t != NULL);
    CHECKF(!strstr(note, "warning"), "[%s]", note);
    slm_tmpl_free(t);
    remove("/tmp/slm_bad_tmpl.jinja");
}

int main(void) {
    T_RUN(test_shared_templates);
    T_RUN(test_gemma_and_today);
    T_RUN(test_classic_forms);
    T_RUN(test_features);
    T_RUN(test_errors);
    T_RUN(test_open_fallback);
    T_DONE();
}
