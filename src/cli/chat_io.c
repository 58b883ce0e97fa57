/* staticlm chat's conversation files (/save, /load) and its tool calling
 * (--tools): the tools file read and checked, each reply's calls printed,
 * the tools' results read back as tool messages (docs/config.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/json.h"
#include "engine/chat.h"

#ifdef SLM_HAVE_CJSON
#include <cjson/cJSON.h>
#endif


/* ---- --tools FILE -------------------------------------------------------------- */

int slm_cli_tools_load(const char *path, int choice, const char *name, slm_tools *out) {
    size_t len = 0;
    const char *why = NULL;
    char *text = slm_cli_read_file(path, 16u << 20, &len, &why);
    if (!text) {
        fprintf(stderr, "staticlm: --tools '%s': cannot read it: %s\n", path, why ? why : "?");
        return 0;
    }
    slm_err err = {0};
    int choice_fault = 0;
    slm_status st = slm_tools_parse(text, len, choice, name, out, &choice_fault, &err);
    free(text);
    if (st && choice_fault)
        fprintf(stderr, "staticlm: --tool-choice '%s': '%s' has no function of that name\n", name, path);
    else if (st)
        fprintf(stderr, "staticlm: --tools '%s': %s\n", path, err.msg);
    return !st;
}

/* ---- the calls out, the results in -------------------------------------------- */

#ifdef SLM_HAVE_CJSON
void slm_cli_print_calls(const slm_chat *c) {
    const slm_tool_call *k = slm_chat_calls(c);
    slm_json_init_hooks();
    for (int i = 0; i < slm_chat_n_calls(c); i++) {
        cJSON *t = cJSON_CreateObject(), *fn = NULL;
        char *line = NULL;
        /* the model's bytes as valid UTF-8 (U+FFFD for the rest), as serve sends them */
        const char *a = k[i].args && k[i].args[0] ? k[i].args : "{}";
        char *name = slm_utf8_clean(k[i].name, strlen(k[i].name)), *args = slm_utf8_clean(a, strlen(a));
        if (t && name && args && cJSON_AddStringToObject(t, "id", k[i].id) && cJSON_AddStringToObject(t, "type", "function") &&
            (fn = cJSON_AddObjectToObject(t, "function")) && cJSON_AddStringToObject(fn, "name", name) &&
            cJSON_AddStringToObject(fn, "arguments", args))
            line = cJSON_PrintUnformatted(t);
        slm_xfree(name);
        slm_xfree(args);
        cJSON_Delete(t);
        printf("[tool_call] %s\n", line ? line : "(out of memory)");
        cJSON_free(line);
    }
    fflush(stdout);
}
#else
void slm_cli_print_calls(const slm_chat *c) { (void)c; }
#endif

int slm_cli_tool_results(slm_chat *c, int tty, char **line, size_t *cap) {
    const int n = slm_chat_n_calls(c);
    const slm_tool_call *k = slm_chat_calls(c);
    for (int i = 0; i < n; i++) {
        if (tty) {
            printf("tool %s (%s)> ", k[i].name, k[i].id);
            fflush(stdout);
        }
        ssize_t got = getline(line, cap, stdin);
        if (got < 0) {
            fprintf(stderr, "[chat] end of input before the result of tool call %s (%s)\n", k[i].id, k[i].name);
            return 0;
        }
        char *s = *line;
        size_t l = strlen(s);
        while (l && (s[l - 1] == '\n' || s[l - 1] == '\r')) s[--l] = 0;
        if (!strcmp(s, "/quit") || !strcmp(s, "/exit")) return 0;
        if (!strncmp(s, "//", 2)) s++;
        if (!slm_chat_add_tool(c, k[i].id, k[i].name, s)) {
            fprintf(stderr, "staticlm: out of memory\n");
            return 0;
        }
    }
    return 1;
}

/* ---- /save, /load ------------------------------------------------------------- */

#ifdef SLM_HAVE_CJSON
/* An assistant's tool_calls as OpenAI's messages give them: each call's
 * arguments a JSON string (the chat keeps them as the values, for the
 * template). */
static cJSON *calls_out(const char *json) {
    cJSON *a = cJSON_Parse(json), *it;
    cJSON_ArrayForEach(it, a) {
        cJSON *fn = cJSON_GetObjectItemCaseSensitive(it, "function");
        cJSON *ar = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "arguments") : NULL;
        if (!ar || cJSON_IsString(ar)) continue;
        char *txt = cJSON_PrintUnformatted(ar);
        if (txt) cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", cJSON_CreateString(txt));
        cJSON_free(txt);
    }
    return a;
}

int slm_cli_save_conv(slm_chat *c, const char *path, slm_err *err) {
    slm_json_init_hooks();
    cJSON *root = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(root, "messages");
    const slm_chat_msg *m = slm_chat_messages(c);
    for (int i = 0; i < slm_chat_count(c) && arr; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "role", m[i].role);
        cJSON_AddStringToObject(o, "content", m[i].content);
        if (m[i].reasoning_content) cJSON_AddStringToObject(o, "reasoning_content", m[i].reasoning_content);
        if (m[i].tool_calls) cJSON_AddItemToObject(o, "tool_calls", calls_out(m[i].tool_calls));
        if (m[i].tool_call_id) cJSON_AddStringToObject(o, "tool_call_id", m[i].tool_call_id);
        if (m[i].name) cJSON_AddStringToObject(o, "name", m[i].name);
        cJSON_AddItemToArray(arr, o);
    }
    char *txt = cJSON_Print(root);
    cJSON_Delete(root);
    if (!txt) { slm_errf(err, SLM_ERR_NOMEM, "out of memory"); return 0; }
    FILE *f = fopen(path, "wb");
    int ok = f && fputs(txt, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f)) ok = 0;
    cJSON_free(txt);
    if (!ok) slm_errf(err, SLM_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    return ok;
}

static const char *const roles[] = {"system", "user", "assistant", "tool"};

/* Message idx of a saved conversation into *m (strings pointing into it;
 * m->tool_calls slm_xfree'd by the caller); 0 with err when malformed. */
static int read_msg(const cJSON *it, int idx, const char *path, slm_chat_msg *m, slm_err *err) {
    static const char *const opt[] = {"reasoning_content", "tool_call_id", "name"};
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(it, "role"), *t = cJSON_GetObjectItemCaseSensitive(it, "content");
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(it, "tool_calls");
    int ok = cJSON_IsString(r) && (cJSON_IsString(t) || (cJSON_IsNull(t) && tc));
    for (int i = 0; ok && i < 4; i++)
        if (!strcmp(r->valuestring, roles[i])) break;
        else if (i == 3) ok = 0;
    const char **dst[3] = {&m->reasoning_content, &m->tool_call_id, &m->name};
    for (int i = 0; ok && i < 3; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(it, opt[i]);
        if (v && !cJSON_IsString(v)) ok = 0;
        *dst[i] = v ? v->valuestring : NULL;
    }
    if (!ok)
        return slm_errf(err, SLM_ERR_IO,
                        "'%s': message %d needs a role (system, user, assistant or tool) and string content (null "
                        "beside tool_calls); reasoning_content, tool_call_id and name, if any, strings", path, idx),
               0;
    m->role = r->valuestring;
    m->content = cJSON_IsString(t) ? t->valuestring : "";
    m->tool_calls = NULL;
    if (tc) {
        char *out = NULL;
        int bad = -1;
        slm_err e2 = {0};
        if (slm_tool_calls_for_template(tc, &out, &bad, &e2))
            return slm_errf(err, SLM_ERR_IO, "'%s': message %d: tool_calls%s", path, idx,
                            bad < 0 ? " must be an array" : e2.msg), 0;
        m->tool_calls = out;
    }
    return 1;
}

int slm_cli_load_conv(slm_chat *c, const char *path, slm_err *err) {
    size_t n = 0;
    const char *why = NULL;
    char *buf = slm_cli_read_file(path, 64u << 20, &n, &why);
    if (!buf) { slm_errf(err, SLM_ERR_IO, "cannot open '%s': %s", path, why ? why : "?"); return 0; }
    slm_json_init_hooks();
    cJSON *root = cJSON_ParseWithLength(buf, n);
    free(buf);
    const cJSON *arr = root ? cJSON_GetObjectItemCaseSensitive(root, "messages") : NULL;
    int ok = cJSON_IsArray(arr), count = ok ? cJSON_GetArraySize(arr) : 0;
    if (!ok) slm_errf(err, SLM_ERR_IO, "'%s' is not a saved conversation (an object with a \"messages\" array)", path);
    slm_chat_msg *ms = ok ? calloc(count ? (size_t)count : 1, sizeof *ms) : NULL;
    if (ok && !ms) ok = 0, slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    const cJSON *it;
    int k = 0;
    if (ok) cJSON_ArrayForEach(it, arr) {
        if (!(ok = read_msg(it, k, path, &ms[k], err))) break;
        k++;
    }
    if (ok) {
        slm_chat_clear(c, 0);
        for (int i = 0; i < k && ok; i++)
            if (!slm_chat_add_msg(c, &ms[i])) ok = 0, slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; ms && i < k; i++) slm_xfree((void *)ms[i].tool_calls);
    free(ms);
    cJSON_Delete(root);
    return ok;
}
#else
int slm_cli_save_conv(slm_chat *c, const char *path, slm_err *err) {
    (void)c; (void)path;
    slm_errf(err, SLM_ERR_IO, "/save is not available in this build (built without cJSON)");
    return 0;
}
int slm_cli_load_conv(slm_chat *c, const char *path, slm_err *err) {
    (void)c; (void)path;
    slm_errf(err, SLM_ERR_IO, "/load is not available in this build (built without cJSON)");
    return 0;
}
#endif
