/* text/toolgram.c — the grammar of a reply that must be tool calls
 * (OpenAI's tool_choice "required" or a named function), per format
 * (toolcall.h).
 *
 * The grammar is not lazy (llama.cpp's server waits for a trigger word
 * before it applies one): the whole reply is the call(s), from its first
 * byte, written the way each family writes them and the way toolcall.c
 * parses them back:
 *   hermes   <tool_call>\n{"name": "N", "arguments": ARGS}\n</tool_call>,
 *            more of them after "\n" when parallel;
 *   llama3   {"name": "N", "parameters": ARGS}, more after "; ";
 *   mistral  [TOOL_CALLS][{"name": "N", "arguments": ARGS}, ...];
 *   harmony  <|channel|>commentary to=functions.N <|constrain|>json
 *            <|message|>ARGS after the prompt's <|start|>assistant (an
 *            analysis message may come first), or <|start|>assistant and
 *            that after a prompt that ends elsewhere;
 *   xml      <tool_call>\n<function=N>\n<parameter=K>\nVALUE\n</parameter>\n
 *            ...</function>\n</tool_call>, more after "\n" when parallel:
 *            the schema's properties in its order (the required ones
 *            always, the others optional), a string's VALUE as text (no
 *            "</" in it), a string enum's as one of its strings, any other
 *            VALUE as its JSON by the property's schema; a function whose
 *            schema has no properties takes any parameters as text;
 *   gemma4   <|tool_call>call:N ARGS<tool_call|>, more of them right after
 *            when parallel, ARGS in Gemma 4's syntax ({key:VALUE,...},
 *            strings between <|"|> quotes: slm_gemma4_schema_rules); a
 *            thought channel may come first.
 * ARGS is rule fK-args of function K, from its parameters' schema
 * (json_schema.c, all functions in one grammar). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "text/grammar.h"
#include "text/toolcall.h"

#ifdef SLM_HAVE_CJSON
#include <cjson/cJSON.h>
#endif

typedef struct gbuf {
    char *s;
    size_t n, cap;
    int oom;
} gbuf;

static void gput(gbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void gput(gbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (k < 0) {
        b->oom = 1;
        return;
    }
    if (b->n + (size_t)k + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + (size_t)k + 1) nc *= 2;
        char *t = slm_realloc(b->s, nc);
        if (!t) {
            b->oom = 1;
            return;
        }
        b->s = t;
        b->cap = nc;
        va_start(ap, fmt);
        vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
    }
    b->n += (size_t)k;
}

static int good_name(const char *s, size_t n) {
    if (!n || n > SLM_TOOL_NAME_MAX) return 0;
    for (size_t i = 0; i < n; i++) {
        const char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.'))
            return 0;
    }
    return 1;
}

/* The rule `call`: one call's body (after its opener) to any function of fns. */
static void call_rule(gbuf *b, int fmt, const slm_tool_fn *fns, int n) {
    gput(b, "call ::= ");
    for (int k = 0; k < n; k++) {
        const char *nm = fns[k].name, *sep = k ? " | " : "";
        if (fmt == SLM_TOOL_XML) gput(b, "%sf%d-x", sep, k);
        else if (fmt == SLM_TOOL_GEMMA4) gput(b, "%s\"call:%s\" f%d-args", sep, nm, k);
        else if (fmt == SLM_TOOL_HARMONY) gput(b, "%s\"%s <|constrain|>json<|message|>\" f%d-args", sep, nm, k);
        else gput(b, "%s\"{\\\"name\\\": \\\"%s\\\", \\\"%s\\\": \" f%d-args \"}\"", sep, nm,
                  fmt == SLM_TOOL_LLAMA3 ? "parameters" : "arguments", k);
    }
    gput(b, "\n");
}

/* Whether prompt ends in tag, white space aside. */
static int ends_in(const char *prompt, const char *tag) {
    size_t n = prompt ? strlen(prompt) : 0;
    const size_t k = strlen(tag);
    while (n && (prompt[n - 1] == ' ' || prompt[n - 1] == '\n' || prompt[n - 1] == '\t' || prompt[n - 1] == '\r')) n--;
    return n >= k && !memcmp(prompt + n - k, tag, k);
}

/* The thinking before the calls: a prompt that ends in <think> starts in
 * it. gemma4: the thought channel, its text without <channel|>; a prompt
 * that opened it starts in it (one that closed an empty one, thinking
 * off, has no thinking: slm_tool_grammar). */
static void think_rule(gbuf *b, int fmt, const char *prompt) {
    if (fmt == SLM_TOOL_GEMMA4) {
        static const char *const end[] = {"<channel|>"};
        char text[512];
        if (!slm_gbnf_avoid(end, 1, text, sizeof text)) b->oom = 1; /* cannot happen: the word is fixed */
        const int in = ends_in(prompt, "<|channel>thought");
        gput(b, "think ::= %s%s \"<channel|>\" [ \\n]{0,4}%s\n", in ? "" : "(\"<|channel>thought\" ", text, in ? "" : ")?");
        return;
    }
    static const char body[] = "([^<] | \"<\" [^/])* \"</think>\" [ \\n]{0,4}";
    if (ends_in(prompt, "<think>")) gput(b, "think ::= %s\n", body);
    else gput(b, "think ::= (\"<think>\" %s)?\n", body);
}

/* The function named name[0..len) among fns, or -1. */
static int find_fn(const slm_tool_fn *fns, int n, const char *name, size_t len) {
    for (int k = 0; k < n; k++)
        if (strlen(fns[k].name) == len && !memcmp(fns[k].name, name, len)) return k;
    return -1;
}

/* An error of function bad's schema (bad < 0: none) named with the function. */
static slm_status fn_error(slm_status st, const slm_tool_fn *fns, int bad, slm_err *err) {
    if (bad >= 0) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        slm_errf(err, st, "tools: function '%s': %s", fns[bad].name, msg);
    }
    return st;
}

/* root for fmt (the call rule and the schemas' rules are written apart);
 * think: the rule `think` is written. */
static void root_rule(gbuf *b, int fmt, int parallel, int think, int opened, int opened_fn, const char *prompt) {
    const char *th = think && !opened ? "think " : "";
    switch (fmt) {
    case SLM_TOOL_HERMES:
    case SLM_TOOL_XML:
        gput(b, "root ::= %s\"%s\" call \"\\n</tool_call>\"", th, opened ? "\\n\"? \"" : "<tool_call>\\n");
        if (parallel) gput(b, " (\"\\n<tool_call>\\n\" call \"\\n</tool_call>\")*");
        break;
    case SLM_TOOL_LLAMA3:
        gput(b, "root ::= %scall%s", th, parallel ? " (\"; \" call)*" : "");
        break;
    case SLM_TOOL_MISTRAL:
        gput(b, "root ::= %s%s\"[\" call%s \"]\"", th, opened ? "" : "\"[TOOL_CALLS]\" ", parallel ? " (\", \" call)*" : "");
        break;
    case SLM_TOOL_GEMMA4:
        gput(b, "root ::= %s%scall \"<tool_call|>\"", th, opened ? "" : "\"<|tool_call>\" ");
        if (parallel) gput(b, " (\"<|tool_call>\" call \"<tool_call|>\")*");
        break;
    default: { /* harmony: one call */
        size_t n = prompt ? strlen(prompt) : 0;
        while (n && (prompt[n - 1] == ' ' || prompt[n - 1] == '\n')) n--;
        const int at_start = n >= 18 && !memcmp(prompt + n - 18, "<|start|>assistant", 18);
        if (opened) gput(b, "root ::= f%d-args", opened_fn);
        else if (at_start) gput(b, "root ::= analysis? hcall");
        else gput(b, "root ::= \"<|start|>assistant\" hcall");
        gput(b, "\nhcall ::= \"<|channel|>commentary to=functions.\" call\n"
                "analysis ::= \"<|channel|>analysis<|message|>\" ([^<] | \"<\" [^|])* \"<|end|><|start|>assistant\"");
    }
    }
    gput(b, "\n");
}

#ifdef SLM_HAVE_CJSON
/* A string as a GBNF literal's body (quotes, backslashes, control bytes escaped). */
static void lit(gbuf *b, const char *s) {
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') gput(b, "\\%c", c);
        else if (c == '\n') gput(b, "\\n");
        else if (c < 0x20 || c == 0x7F) gput(b, "\\x%02X", c);
        else gput(b, "%c", c);
    }
}

static int is_type(const cJSON *o, const char *type) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(t) && !strcmp(t->valuestring, type);
}

/* An enum / const of strings only: its strings' alternatives (text values). */
static int string_choices(gbuf *b, const cJSON *o) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "enum"), *c = cJSON_GetObjectItemCaseSensitive(o, "const");
    if (cJSON_IsString(c)) {
        gput(b, "\"");
        lit(b, c->valuestring);
        gput(b, "\"");
        return 1;
    }
    if (!cJSON_IsArray(e) || !e->child) return 0;
    for (const cJSON *x = e->child; x; x = x->next)
        if (!cJSON_IsString(x)) return 0;
    gput(b, "(");
    for (const cJSON *x = e->child; x; x = x->next) {
        gput(b, "%s\"", x == e->child ? "" : " | ");
        lit(b, x->valuestring);
        gput(b, "\"");
    }
    gput(b, ")");
    return 1;
}

/* xml: function k's rule fK-x, parameter by parameter; a non-string
 * parameter's schema goes into sub[] (its rule fK-vJ) for json_schema.c. */
static slm_status xml_fn(gbuf *b, int k, const slm_tool_fn *f, char **sub, char (*rname)[32], int *owner, int *ns, int *bad,
                         slm_err *err) {
    cJSON *root = f->params ? cJSON_Parse(f->params) : NULL;
    const cJSON *props = root ? cJSON_GetObjectItemCaseSensitive(root, "properties") : NULL;
    const cJSON *req = root ? cJSON_GetObjectItemCaseSensitive(root, "required") : NULL;
    slm_status st = SLM_OK;
    if (f->params && (!root || !cJSON_IsObject(root) || (props && !cJSON_IsObject(props))))
        st = slm_errf(err, SLM_ERR_ARG, "tools: function '%s': parameters: not a JSON schema object", f->name);
    else if (f->params && strstr(f->params, "\"$ref\""))
        st = slm_errf(err, SLM_ERR_ARG, "tools: function '%s': JSON schema: '$ref' is not supported with this model's xml tool calls",
                      f->name);
    gput(b, "f%d-x ::= \"<function=%s>\\n\"", k, f->name);
    if (!props || !props->child) gput(b, " xany*");
    int j = 0;
    for (const cJSON *p = props ? props->child : NULL; p && !st; p = p->next, j++) {
        if (!p->string || !good_name(p->string, strlen(p->string)) || !cJSON_IsObject(p)) {
            st = slm_errf(err, SLM_ERR_ARG, "tools: function '%s': parameter '%.64s': a name of a-z A-Z 0-9 _ - . and a schema object "
                          "for this model's xml tool calls", f->name, p->string ? p->string : "");
            break;
        }
        int required = 0;
        for (const cJSON *r = cJSON_IsArray(req) ? req->child : NULL; r; r = r->next)
            required |= cJSON_IsString(r) && !strcmp(r->valuestring, p->string);
        gput(b, " %s\"<parameter=%s>\\n\" ", required ? "" : "(", p->string);
        if (!string_choices(b, p)) {
            if (is_type(p, "string") && !cJSON_GetObjectItemCaseSensitive(p, "enum")) {
                const cJSON *mn = cJSON_GetObjectItemCaseSensitive(p, "minLength"), *mx = cJSON_GetObjectItemCaseSensitive(p, "maxLength");
                if (cJSON_IsNumber(mn) || cJSON_IsNumber(mx)) { /* json_schema.c checked them (below) */
                    gput(b, "[^<]{%d,", cJSON_IsNumber(mn) ? mn->valueint : 0);
                    if (cJSON_IsNumber(mx)) gput(b, "%d", mx->valueint);
                    gput(b, "}");
                } else {
                    gput(b, "xtext");
                }
            } else if (*ns >= SLM_SCHEMA_RULES_MAX) {
                st = slm_errf(err, SLM_ERR_ARG, "tools: more than %d parameters that are not strings", SLM_SCHEMA_RULES_MAX);
                break;
            } else {
                snprintf(rname[*ns], sizeof rname[*ns], "f%d-v%d", k, j);
                owner[*ns] = k;
                if (!(sub[*ns] = cJSON_PrintUnformatted(p))) {
                    st = slm_errf(err, SLM_ERR_NOMEM, "out of memory");
                    break;
                }
                gput(b, "%s", rname[(*ns)++]);
            }
        }
        gput(b, " \"\\n</parameter>\\n\"%s", required ? "" : ")?");
    }
    gput(b, " \"</function>\"\n");
    if (st) *bad = k;
    cJSON_Delete(root);
    return st;
}

/* The xml format's function rules and their values' rules into b. */
static slm_status xml_rules(gbuf *b, const slm_tool_fn *fns, int n, int *bad, slm_err *err) {
    char *sub[SLM_SCHEMA_RULES_MAX];
    char rname[SLM_SCHEMA_RULES_MAX][32];
    const char *rule[SLM_SCHEMA_RULES_MAX];
    int owner[SLM_SCHEMA_RULES_MAX], ns = 0;
    /* every schema whole through json_schema.c first: what it cannot enforce is refused here too */
    const char *whole[SLM_TOOL_FNS_MAX], *wrule[SLM_TOOL_FNS_MAX];
    for (int k = 0; k < n; k++) whole[k] = fns[k].params, wrule[k] = "args";
    char *unused = NULL;
    slm_status st = slm_json_schema_rules(n, whole, wrule, &unused, bad, err);
    slm_xfree(unused);
    if (st) return fn_error(st, fns, *bad, err);
    for (int k = 0; k < n && !st; k++) st = xml_fn(b, k, &fns[k], sub, rname, owner, &ns, bad, err);
    gput(b, "xtext ::= ([^<] | \"<\" [^/])*\n"
            "xany ::= \"<parameter=\" [a-zA-Z0-9_.-]+ \">\\n\" xtext \"\\n</parameter>\\n\"\n");
    if (!st && ns) {
        char *rules = NULL;
        int bi = -1;
        for (int i = 0; i < ns; i++) rule[i] = rname[i];
        st = slm_json_schema_rules(ns, (const char *const *)sub, rule, &rules, &bi, err);
        if (st && bi >= 0) fn_error(st, fns, *bad = owner[bi], err);
        if (!st) gput(b, "%s", rules);
        slm_xfree(rules);
    }
    for (int i = 0; i < ns; i++) cJSON_free(sub[i]);
    return st;
}
#else
static slm_status xml_rules(gbuf *b, const slm_tool_fn *fns, int n, int *bad, slm_err *err) {
    (void)b, (void)fns, (void)n, (void)bad;
    return slm_errf(err, SLM_ERR_UNSUPPORTED, "tool calls: this build has no JSON reader (cJSON)");
}
#endif

slm_status slm_tool_grammar(int fmt, const slm_tool_fn *fns, int n, int parallel, int think, const char *prompt,
                            char **out, const char **tokens, int *bad, slm_err *err) {
    static const char *const specials[] = {[SLM_TOOL_HERMES] = "<tool_call> </tool_call> <think> </think>",
                                           [SLM_TOOL_LLAMA3] = "<think> </think>",
                                           [SLM_TOOL_MISTRAL] = "[TOOL_CALLS] <think> </think>",
                                           [SLM_TOOL_HARMONY] = "<|start|> <|channel|> <|constrain|> <|message|> <|end|>",
                                           [SLM_TOOL_XML] = "<tool_call> </tool_call> <think> </think>",
                                           [SLM_TOOL_GEMMA4] = "<|tool_call> <tool_call|> <|\"|> <|channel> <channel|>"};
    *out = NULL;
    *tokens = NULL;
    *bad = -1;
    if ((fmt < SLM_TOOL_HERMES || fmt > SLM_TOOL_XML) && fmt != SLM_TOOL_GEMMA4)
        return slm_errf(err, SLM_ERR_ARG, "tool calls: the format '%s' has no calls to constrain", slm_tool_format_name(fmt));
    if (n < 1 || n > SLM_TOOL_FNS_MAX) return slm_errf(err, SLM_ERR_ARG, "tool calls: 1 to %d functions, not %d", SLM_TOOL_FNS_MAX, n);
    for (int k = 0; k < n; k++)
        if (!fns[k].name || !good_name(fns[k].name, strlen(fns[k].name))) {
            *bad = k;
            return slm_errf(err, SLM_ERR_ARG, "tool calls: function %d: a name is 1-%d of a-z A-Z 0-9 _ - .", k, SLM_TOOL_NAME_MAX);
        }
    const char *oname;
    size_t olen;
    const int opened = slm_tool_prompt_opens(fmt, prompt, &oname, &olen);
    const int ofn = opened && oname ? find_fn(fns, n, oname, olen) : -1;
    if (opened && oname && ofn < 0)
        return slm_errf(err, SLM_ERR_ARG, "tool calls: the prompt opens a call to '%.*s', which tool_choice does not allow",
                        (int)(olen > 64 ? 64 : olen), oname);
    gbuf b = {0};
    char *rules = NULL;
    if (fmt == SLM_TOOL_XML) { /* the parameters one by one */
        slm_status st = xml_rules(&b, fns, n, bad, err);
        if (st) {
            slm_xfree(b.s);
            return st;
        }
    } else { /* the schemas' rules */
        const char *schema[SLM_TOOL_FNS_MAX], *rule[SLM_TOOL_FNS_MAX];
        char names[SLM_TOOL_FNS_MAX][32];
        for (int k = 0; k < n; k++) {
            snprintf(names[k], sizeof names[k], "f%d-args", k);
            schema[k] = fns[k].params;
            rule[k] = names[k];
        }
        slm_status st = fmt == SLM_TOOL_GEMMA4 ? slm_gemma4_schema_rules(n, schema, rule, SLM_TOOL_GEMMA4_DEPTH, &rules, bad, err)
                                               : slm_json_schema_rules(n, schema, rule, &rules, bad, err);
        if (st) return fn_error(st, fns, *bad, err);
    }
    think = think && fmt != SLM_TOOL_HARMONY && !opened && !(fmt == SLM_TOOL_GEMMA4 && ends_in(prompt, "<channel|>"));
    root_rule(&b, fmt, parallel && fmt != SLM_TOOL_HARMONY, think, opened, ofn, prompt);
    call_rule(&b, fmt, fns, n);
    if (think) think_rule(&b, fmt, prompt);
    if (rules) gput(&b, "%s", rules);
    slm_xfree(rules);
    if (b.oom) {
        slm_xfree(b.s);
        return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    }
    *out = b.s;
    *tokens = specials[fmt];
    return SLM_OK;
}
