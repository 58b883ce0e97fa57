/* server/api_tokens.c — llama-server's token endpoints, for clients that
 * count tokens or build prompts from ids:
 *   POST /tokenize   {"content", "add_special" (false: no BOS), "parse_special"
 *                     (true: control-token text becomes those tokens),
 *                     "with_pieces" (false)} -> {"tokens": [id, ...]} or
 *                     [{"id", "piece"}, ...] (a piece that is not whole UTF-8:
 *                     its bytes as a list of numbers)
 *   POST /detokenize {"tokens": [id, ...]} -> {"content"}: every id's piece
 *                     (control tokens' text too), invalid UTF-8 as U+FFFD
 * They run on the polling thread that read the body (the tokenizer is
 * read-only, so they never wait for the worker); the body's 4 MiB limit
 * bounds their work. */
#include "server/api.h"

#ifdef SLM_HAVE_SERVE

#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#include "common/common.h"

#define MAX_DETOK 1000000 /* ids a /detokenize takes */

/* The body as a JSON object, or NULL after answering the error. */
static cJSON *body_object(srv_req *r, int *ok) {
    *ok = 1;
    if (r->too_big) {
        *ok = http_send_error(r, 413, "invalid_request_error", NULL, "request_too_large",
                              "the request body exceeds %u bytes", HTTP_BODY_LIMIT);
        return NULL;
    }
    srv_error e;
    memset(&e, 0, sizeof e);
    cJSON *o = srv_body_object(r->body, r->len, &e); /* as the completions read theirs */
    if (!o) *ok = http_send_error(r, e.status, e.type, NULL, e.code, "%s", e.msg);
    return o;
}

/* An optional boolean field (absent or null: dflt); -1 when it is something else. */
static int flag(const cJSON *o, const char *name, int dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!v || cJSON_IsNull(v)) return dflt;
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : -1;
}

static int bad(srv_req *r, const char *param, const char *msg) {
    return http_send_error(r, 400, "invalid_request_error", param, "invalid_value", "%s", msg);
}

int api_tokenize(srv_api *a, srv_req *r) {
    int ok;
    cJSON *o = body_object(r, &ok);
    if (!o) return ok;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "content");
    const int add = flag(o, "add_special", 0), parse = flag(o, "parse_special", 1), pieces = flag(o, "with_pieces", 0);
    if (!cJSON_IsString(c)) ok = bad(r, "content", "'content' must be a string");
    else if (add < 0) ok = bad(r, "add_special", "'add_special' must be true or false");
    else if (parse < 0) ok = bad(r, "parse_special", "'parse_special' must be true or false");
    else if (pieces < 0) ok = bad(r, "with_pieces", "'with_pieces' must be true or false");
    if (!cJSON_IsString(c) || add < 0 || parse < 0 || pieces < 0) {
        cJSON_Delete(o);
        return ok;
    }
    const char *text = c->valuestring;
    const size_t len = strlen(text);
    unsigned char *plain = parse ? NULL : slm_malloc(len + 1); /* every byte plain text */
    int n = plain || parse ? 0 : -1;
    if (plain) memset(plain, 1, len + 1);
    if (!n) n = slm_tokenize_masked(a->e, text, plain, add, NULL, 0);
    int32_t *ids = n > 0 ? slm_malloc((size_t)n * sizeof *ids) : NULL;
    if (ids) slm_tokenize_masked(a->e, text, plain, add, ids, n);
    slm_xfree(plain);
    if (n < 0 || (n > 0 && !ids)) {
        slm_xfree(ids);
        cJSON_Delete(o);
        if (n == -2) return bad(r, "content", "the content is longer than the engine takes (max_prompt_bytes)");
        if (n == -3) return bad(r, "content", "the tokenizer's pre-tokenizer exceeded its work limits on this text");
        return http_send_error(r, 500, "server_error", NULL, NULL, "could not tokenize the content");
    }
    cJSON *res = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(res, "tokens");
    for (int i = 0; i < n; i++) {
        if (!pieces) {
            cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids[i]));
            continue;
        }
        /* the piece as it reads in this text (after BOS: no dummy-prefix space) */
        const char *p = slm_token_piece(a->e, i ? ids[i - 1] : -1, ids[i]);
        const size_t pl = strlen(p);
        cJSON *t = cJSON_CreateObject();
        cJSON_AddNumberToObject(t, "id", ids[i]);
        char *cl = srv_utf8_clean(p, pl); /* an invalid byte becomes 3: the same length is valid UTF-8 */
        const int valid = cl && strlen(cl) == pl;
        slm_xfree(cl);
        if (valid) {
            cJSON_AddStringToObject(t, "piece", p);
        } else {
            cJSON *b = cJSON_AddArrayToObject(t, "piece");
            for (size_t k = 0; k < pl; k++) cJSON_AddItemToArray(b, cJSON_CreateNumber((unsigned char)p[k]));
        }
        cJSON_AddItemToArray(arr, t);
    }
    slm_xfree(ids);
    cJSON_Delete(o);
    return http_send_json(r, 200, res);
}

int api_detokenize(srv_api *a, srv_req *r) {
    int ok;
    cJSON *o = body_object(r, &ok);
    if (!o) return ok;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "tokens"), *it;
    const int V = a->info.vocab_size;
    if (!cJSON_IsArray(t) || cJSON_GetArraySize(t) > MAX_DETOK) {
        cJSON_Delete(o);
        return http_send_error(r, 400, "invalid_request_error", "tokens", "invalid_value",
                               "'tokens' must be an array of at most %d token ids", MAX_DETOK);
    }
    cJSON_ArrayForEach(it, t) {
        if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < 0 || it->valuedouble >= V) {
            cJSON_Delete(o);
            return http_send_error(r, 400, "invalid_request_error", "tokens", "invalid_value",
                                   "'tokens' must hold token ids from 0 to %d", V - 1);
        }
    }
    char *out = NULL;
    size_t len = 0, cap = 0;
    int prev = -1, oom = 0;
    cJSON_ArrayForEach(it, t) {
        const int id = (int)it->valuedouble;
        const char *p = slm_token_piece(a->e, prev, id);
        const size_t pl = strlen(p);
        prev = id;
        if (len + pl + 1 > cap) {
            size_t nc = cap ? cap * 2 : 256;
            while (nc < len + pl + 1) nc *= 2;
            char *q = slm_realloc(out, nc);
            if (!q) { oom = 1; break; }
            out = q;
            cap = nc;
        }
        memcpy(out + len, p, pl);
        len += pl;
    }
    cJSON_Delete(o);
    char *clean = oom ? NULL : srv_utf8_clean(out ? out : "", len);
    slm_xfree(out);
    if (!clean) return http_send_error(r, 500, "server_error", NULL, NULL, "out of memory");
    cJSON *res = cJSON_CreateObject();
    cJSON_AddStringToObject(res, "content", clean);
    slm_xfree(clean);
    return http_send_json(r, 200, res);
}

#endif /* SLM_HAVE_SERVE */
