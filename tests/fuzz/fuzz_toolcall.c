/* libFuzzer target for the tool call parser (text/toolcall.h) and the JSON
 * a chat template gets as tools and message tool_calls. The first byte
 * picks the format (bits 0-2, modulo 7: none, hermes, llama3, mistral,
 * harmony, xml, gemma4), whether the prompt opens a call (bit 3) and the piece size (bits
 * 4-7, 1..16 bytes); the rest is the reply, fed in pieces of that size.
 * Checks: no crash; events in order (a call's name, then arguments, then its
 * end; text and argument pieces non-empty; a name without NUL, at most
 * SLM_TOOL_NAME_MAX bytes); the same events fed whole; format none returns
 * the input exactly; text never holds more bytes than the input; gemma4's
 * arguments, made by the parser, are JSON (cJSON reads each). The whole
 * input is also rendered as tools and as a message's tool_calls (a bad one
 * fails the render with a message, never crashes). Not part of the default
 * build (tests/fuzz/run.sh builds it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "text/chat_template.h"
#include "text/toolcall.h"

#ifdef SLM_HAVE_CJSON
#include <cjson/cJSON.h>
#endif

typedef struct out {
    char *s;      /* the events written out: text as is, \1 name \2 args \3 */
    size_t n, text;
    int last;
    int json;     /* each call's arguments must be JSON (gemma4: the parser writes them) */
    char *args;   /* the current call's arguments [nargs] */
    size_t nargs;
} out;

static void add(out *o, const char *s, size_t n) {
    char *p = realloc(o->s, o->n + n + 1);
    if (!p) abort();
    memcpy(p + o->n, s, n);
    o->s = p;
    o->n += n;
}

/* A call's arguments, made by the parser, are JSON. */
static void args_are_json(const char *a, size_t n) {
#ifdef SLM_HAVE_CJSON
    cJSON *v = cJSON_ParseWithLength(a, n);
    if (!v) abort();
    cJSON_Delete(v);
#else
    (void)a, (void)n;
#endif
}

static void put(void *ud, int ev, const char *s, size_t n) {
    out *o = ud;
    if (ev == SLM_TOOL_TEXT) {
        if (!n || o->last == SLM_TOOL_CALL) abort();
        o->text += n;
        add(o, s, n);
    } else if (ev == SLM_TOOL_CALL) {
        if (!n || n > SLM_TOOL_NAME_MAX || strlen(s) != n || o->last == SLM_TOOL_CALL || o->last == SLM_TOOL_ARGS) abort();
        add(o, "\1", 1);
        add(o, s, n);
        add(o, "\2", 1);
        o->nargs = 0;
    } else if (ev == SLM_TOOL_ARGS) {
        if (!n || (o->last != SLM_TOOL_CALL && o->last != SLM_TOOL_ARGS)) abort();
        add(o, s, n);
        char *p = realloc(o->args, o->nargs + n + 1);
        if (!p) abort();
        memcpy(p + o->nargs, s, n);
        o->args = p;
        o->nargs += n;
    } else {
        if (n || o->last != SLM_TOOL_ARGS) abort();
        add(o, "\3", 1);
        if (o->json) args_are_json(o->args, o->nargs);
    }
    o->last = ev;
}

static void split(int fmt, const char *prompt, const uint8_t *d, size_t n, size_t piece, out *o) {
    slm_toolcall t;
    memset(o, 0, sizeof *o);
    o->last = -1;
    o->json = fmt == SLM_TOOL_GEMMA4;
    slm_tool_init(&t, fmt, prompt, put, o);
    for (size_t i = 0; i < n; i += piece) slm_tool_feed(&t, (const char *)d + i, n - i < piece ? n - i : piece);
    slm_tool_finish(&t);
    if (t.oom) abort();
    slm_tool_free(&t);
}

static const char *const PROMPTS[] = {NULL, "<|im_start|>assistant\n<tool_call>\n", "<|python_tag|>", "[TOOL_CALLS]",
                                      "<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>",
                                      "<|im_start|>assistant\n<tool_call>\n", "<|turn>model\n<|tool_call>"};
static const int FMTS[] = {SLM_TOOL_NONE, SLM_TOOL_HERMES, SLM_TOOL_LLAMA3, SLM_TOOL_MISTRAL, SLM_TOOL_HARMONY, SLM_TOOL_XML,
                           SLM_TOOL_GEMMA4};


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int k = (data[0] & 7) % 7, fmt = FMTS[k];
    const char *prompt = data[0] & 8 ? PROMPTS[k] : NULL;
    const size_t piece = 1 + (data[0] >> 4);
    out a, b;
    split(fmt, prompt, data + 1, size - 1, piece, &a);
    split(fmt, prompt, data + 1, size - 1, size, &b);
    if (a.n != b.n || (a.n && memcmp(a.s, b.s, a.n))) abort(); /* the events do not depend on pieces */
    if (fmt == SLM_TOOL_NONE && (a.n != size - 1 || (a.n && memcmp(a.s, data + 1, a.n)))) abort();
    if (a.text > size - 1) abort();
    free(a.s);
    free(b.s);
    free(a.args);
    free(b.args);

    /* the input as tools and as tool_calls */
    char *json = malloc(size + 1);
    if (!json) return 0;
    memcpy(json, data, size);
    json[size] = 0;
    slm_err err;
    slm_tmpl *t = slm_tmpl_parse("{{ tools | tojson }}{% for m in messages %}{{ m.tool_calls | tojson }}"
                                 "{% for c in m.tool_calls %}{{ c.function.name }}{{ c.function.arguments | tojson(indent=2) }}"
                                 "{% endfor %}{% endfor %}", &err);
    if (!t) abort();
    slm_chat_msg m = {"assistant", "", NULL, json, "id", "f"};
    slm_tmpl_vars v = {0};
    v.tools = json;
    char *r = slm_tmpl_render(t, &m, 1, &v, &err);
    if (!r && (!err.status || !err.msg[0])) abort();
    slm_xfree(r);
    slm_tmpl_free(t);
    free(json);
    return 0;
}
