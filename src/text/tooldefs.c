/* text/tooldefs.c — OpenAI's tools as serve (a request's "tools" and
 * "tool_choice") and chat (--tools FILE, --tool-choice) both take them
 * (toolcall.h): the array checked, the functions a forced reply may call
 * with their schemas checked, call ids, and calls as the chat templates read
 * them (message.tool_calls, each call's arguments a value, not a string). */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/common.h"
#include "common/json.h"
#include "text/grammar.h"
#include "text/toolcall.h"

#ifdef SLM_HAVE_CJSON
#include <cjson/cJSON.h>
#endif

int slm_tool_choice_parse(const char *s) {
    static const char *const names[] = {"auto", "none", "required"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

/* A function name as OpenAI allows it: 1-64 of a-z A-Z 0-9 _ - (and '.',
 * which some clients use). */
int slm_tool_name_ok(const char *s) {
    size_t n = strlen(s);
    if (!n || n > 64) return 0;
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '-' || s[i] == '.')) return 0;
    return 1;
}

void slm_tool_call_id(int fmt, unsigned long long x, char *id, size_t cap) {
    static const char an[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    const int mistral = fmt == SLM_TOOL_MISTRAL, len = mistral ? 9 : 24;
    size_t k = 0;
    if (!cap) return;
    if (!mistral && cap > 5) k = (size_t)snprintf(id, cap, "call_");
    for (int i = 0; i < len && k + 1 < cap; i++) {
        x += 0x9E3779B97F4A7C15ull;
        unsigned long long z = x;
        z ^= z >> 30; z *= 0xBF58476D1CE4E5B9ull; z ^= z >> 27; z *= 0x94D049BB133111EBull; z ^= z >> 31;
        id[k++] = an[z % (sizeof an - 1)];
    }
    id[k] = 0;
}

void slm_tool_fns_free(slm_tool_fn *fns, int n) {
    for (int i = 0; fns && i < n; i++) {
        slm_xfree((void *)fns[i].name);
        slm_xfree((void *)fns[i].params);
    }
    slm_xfree(fns);
}

void slm_tools_free(slm_tools *t) {
    slm_xfree(t->json);
    slm_tool_fns_free(t->fns, t->n_fns);
    memset(t, 0, sizeof *t);
}

#ifdef SLM_HAVE_CJSON

static const cJSON *field(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, name) : NULL;
    return v && !cJSON_IsNull(v) ? v : NULL;
}

#define TOOL_SHAPE                                                                                                    \
    "{\"type\": \"function\", \"function\": {\"name\": 1-64 of a-z A-Z 0-9 _ -, \"description\": string, "              \
    "\"parameters\": a JSON schema object}}"

slm_status slm_tools_check(const cJSON *tl, slm_err *err) {
    const cJSON *it;
    int k = 0;
    cJSON_ArrayForEach(it, tl) {
        const cJSON *ty = field(it, "type"), *fn = field(it, "function");
        const cJSON *nm = field(fn, "name"), *ds = field(fn, "description"), *pa = field(fn, "parameters");
        const char *why = !cJSON_IsObject(it)                                 ? "not an object"
                          : !cJSON_IsString(ty) || strcmp(ty->valuestring, "function") ? "its \"type\" is not \"function\""
                          : !cJSON_IsObject(fn)                               ? "no \"function\" object"
                          : !cJSON_IsString(nm)                               ? "no function \"name\" string"
                          : !slm_tool_name_ok(nm->valuestring)                ? "the name is not 1-64 of a-z A-Z 0-9 _ - ."
                          : ds && !cJSON_IsString(ds)                         ? "\"description\" is not a string"
                          : pa && !cJSON_IsObject(pa)                         ? "\"parameters\" is not an object"
                                                                              : NULL;
        if (why) return slm_errf(err, SLM_ERR_ARG, "tools[%d] must be " TOOL_SHAPE ": %s", k, why);
        k++;
    }
    return SLM_OK;
}

slm_status slm_tools_forced(const cJSON *tl, const char *want, slm_tool_fn **out, int *nout, int *choice_fault,
                            slm_err *err) {
    *out = NULL;
    *nout = 0;
    *choice_fault = 0;
    slm_json_init_hooks(); /* the functions' params are freed with slm_xfree */
    const int n = cJSON_GetArraySize(tl);
    if (n > SLM_TOOL_FNS_MAX)
        return slm_errf(err, SLM_ERR_ARG, "tool_choice 'required' takes at most %d tools, not %d", SLM_TOOL_FNS_MAX, n);
    slm_tool_fn *fns = slm_calloc(n ? (size_t)n : 1, sizeof *fns);
    if (!fns) return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    int k = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, tl) {
        const cJSON *fn = field(it, "function"), *pa = field(fn, "parameters");
        const char *name = field(fn, "name")->valuestring;
        if (want && strcmp(want, name)) continue;
        slm_tool_fn *f = &fns[k++];
        if (!(f->name = slm_strdup(name)) || (pa && !(f->params = cJSON_PrintUnformatted(pa)))) {
            slm_tool_fns_free(fns, k);
            return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
        }
    }
    if (!k) {
        slm_tool_fns_free(fns, k);
        *choice_fault = 1;
        return slm_errf(err, SLM_ERR_ARG, "tool_choice names '%.64s', which is not in 'tools'", want ? want : "");
    }
    const char *schema[SLM_TOOL_FNS_MAX], *rule[SLM_TOOL_FNS_MAX];
    for (int i = 0; i < k; i++) {
        schema[i] = fns[i].params;
        rule[i] = "args";
    }
    char *txt = NULL;
    int bad = -1;
    slm_err e2 = {0};
    slm_status st = slm_json_schema_rules(k, schema, rule, &txt, &bad, &e2);
    slm_xfree(txt);
    if (st) {
        if (st == SLM_ERR_NOMEM) slm_errf(err, st, "out of memory");
        else slm_errf(err, SLM_ERR_ARG, "function '%s': %s (tool_choice '%s' holds the arguments to the schema)",
                      bad >= 0 ? fns[bad].name : "?", e2.msg, want ? "function" : "required");
        slm_tool_fns_free(fns, k);
        return st == SLM_ERR_NOMEM ? st : SLM_ERR_ARG;
    }
    *out = fns;
    *nout = k;
    return SLM_OK;
}

/* line:column of p in s[0..) */
static void where(const char *s, const char *p, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (; s < p; s++) {
        if (*s == '\n') { ++*line; *col = 1; }
        else ++*col;
    }
}

slm_status slm_tools_parse(const char *text, size_t len, int choice, const char *want, slm_tools *out, int *choice_fault,
                           slm_err *err) {
    memset(out, 0, sizeof *out);
    *choice_fault = 0;
    slm_json_init_hooks();
    slm_json_oom_clear();
    const char *end = NULL;
    cJSON *tl = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!tl) {
        if (slm_json_oom()) return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
        int line, col;
        const char *at = end && end >= text && end <= text + len ? end : text;
        where(text, at, &line, &col);
        return slm_errf(err, SLM_ERR_ARG, "not valid JSON (line %d, column %d)", line, col);
    }
    const char *stop = text + len;
    while (end && end < stop && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')) end++;
    slm_status st = SLM_OK;
    if (end != stop) {
        int line, col;
        where(text, end, &line, &col);
        st = slm_errf(err, SLM_ERR_ARG, "bytes after the JSON value (line %d, column %d)", line, col);
    } else if (!cJSON_IsArray(tl)) {
        st = slm_errf(err, SLM_ERR_ARG, "must hold a JSON array of tools (OpenAI's \"tools\": [" TOOL_SHAPE ", ...])");
    } else if (!cJSON_GetArraySize(tl)) {
        st = slm_errf(err, SLM_ERR_ARG, "the tools array is empty");
    } else {
        st = slm_tools_check(tl, err);
    }
    if (!st && !(out->json = cJSON_PrintUnformatted(tl))) st = slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    out->n = cJSON_GetArraySize(tl);
    if (!st && choice >= SLM_TOOL_CHOICE_REQUIRED)
        st = slm_tools_forced(tl, choice == SLM_TOOL_CHOICE_NAMED ? want : NULL, &out->fns, &out->n_fns, choice_fault, err);
    cJSON_Delete(tl);
    if (st) slm_tools_free(out);
    return st;
}

char *slm_tool_calls_json(const slm_tool_call *calls, int n) {
    slm_json_init_hooks();
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < n; i++) {
        cJSON *t = cJSON_CreateObject(), *fn = NULL;
        const char *args = calls[i].args && calls[i].args[0] ? calls[i].args : "{}";
        cJSON *val = cJSON_Parse(args);
        if (!val) val = cJSON_CreateString(args); /* cut short or malformed: the text itself */
        if (!t || !val || !cJSON_AddStringToObject(t, "id", calls[i].id) || !cJSON_AddStringToObject(t, "type", "function") ||
            !(fn = cJSON_AddObjectToObject(t, "function")) || !cJSON_AddStringToObject(fn, "name", calls[i].name ? calls[i].name : "")) {
            cJSON_Delete(val);
            cJSON_Delete(t);
            cJSON_Delete(arr);
            return NULL;
        }
        cJSON_AddItemToObject(fn, "arguments", val);
        cJSON_AddItemToArray(arr, t);
    }
    char *s = arr ? cJSON_PrintUnformatted(arr) : NULL;
    cJSON_Delete(arr);
    return s;
}

slm_status slm_tool_calls_for_template(const cJSON *v, char **out, int *bad, slm_err *err) {
    *out = NULL;
    *bad = -1;
    slm_json_init_hooks();
    if (!cJSON_IsArray(v)) return slm_errf(err, SLM_ERR_ARG, "must be an array");
    cJSON *copy = cJSON_Duplicate(v, 1);
    if (!copy) return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    cJSON *it;
    int i = 0;
    slm_status st = SLM_OK;
    cJSON_ArrayForEach(it, copy) {
        cJSON *fn = cJSON_IsObject(it) ? cJSON_GetObjectItemCaseSensitive(it, "function") : NULL;
        cJSON *nm = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "name") : NULL;
        cJSON *ar = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "arguments") : NULL;
        const cJSON *id = cJSON_IsObject(it) ? cJSON_GetObjectItemCaseSensitive(it, "id") : NULL;
        if (!cJSON_IsObject(it) || !cJSON_IsString(nm) || (id && !cJSON_IsString(id)) ||
            (ar && !cJSON_IsString(ar) && !cJSON_IsObject(ar))) {
            *bad = i;
            st = slm_errf(err, SLM_ERR_ARG,
                          "[%d] must be {\"id\": string, \"type\": \"function\", \"function\": {\"name\": string, "
                          "\"arguments\": JSON text}}", i);
            break;
        }
        cJSON *parsed = cJSON_IsString(ar) ? cJSON_Parse(ar->valuestring) : NULL;
        if (parsed) cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", parsed);
        i++;
    }
    if (!st && !(*out = cJSON_PrintUnformatted(copy))) st = slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    cJSON_Delete(copy);
    return st;
}

#else /* no cJSON */

slm_status slm_tools_parse(const char *text, size_t len, int choice, const char *want, slm_tools *out, int *choice_fault,
                           slm_err *err) {
    (void)text, (void)len, (void)choice, (void)want;
    memset(out, 0, sizeof *out);
    *choice_fault = 0;
    return slm_errf(err, SLM_ERR_UNSUPPORTED, "tools: this build has no JSON reader (cJSON)");
}

char *slm_tool_calls_json(const slm_tool_call *calls, int n) {
    (void)calls, (void)n;
    return NULL;
}

#endif
