/* server/infill_parse.c — the body of POST /infill (infill.h), checked as
 * llama-server checks it: input_prefix and input_suffix required (a string,
 * or an array of strings and token ids within the vocabulary), prompt
 * optional and a string, input_extra optional and an array of objects
 * with a string "text" and an optional string "filename". The other fields
 * are a completion's: the body less the infill fields (prompt "" when
 * absent) goes to srv_request_parse. Any bytes are refused cleanly
 * (tests/fuzz/fuzz_http.c). */
#include "server/infill.h"

#ifdef SLM_HAVE_CJSON

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/common.h"

void srv_infill_free(srv_infill *f) {
    srv_infill_input *in[2] = {&f->prefix, &f->suffix};
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < in[k]->n; i++) slm_xfree(in[k]->seg[i].text);
        slm_xfree(in[k]->seg);
    }
    for (int i = 0; i < f->n_extra; i++) {
        slm_xfree(f->extra_name[i]);
        slm_xfree(f->extra_text[i]);
    }
    slm_xfree(f->extra_name);
    slm_xfree(f->extra_text);
    memset(f, 0, sizeof *f);
}

static int fail(srv_error *e, int status, const char *param, const char *msg) {
    e->status = status;
    e->type = status >= 500 ? "server_error" : "invalid_request_error";
    e->code = status >= 500 ? NULL : "invalid_value";
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    snprintf(e->msg, sizeof e->msg, "%s", msg);
    return 0;
}

/* input_prefix or input_suffix (name) from v into *in. */
static int take_input(const cJSON *v, const char *name, int vocab, srv_infill_input *in, srv_error *e) {
    char msg[200];
    snprintf(msg, sizeof msg, "\"%s\" must be a string or an array of strings and token ids (0 to %d)", name, vocab - 1);
    if (!v) {
        snprintf(msg, sizeof msg, "\"%s\" is required", name);
        return fail(e, 400, name, msg);
    }
    const int n = cJSON_IsString(v) ? 1 : cJSON_IsArray(v) ? cJSON_GetArraySize(v) : -1;
    if (n < 0) return fail(e, 400, name, msg);
    if (n && !(in->seg = slm_calloc((size_t)n, sizeof *in->seg))) return fail(e, 500, NULL, "out of memory");
    if (cJSON_IsString(v)) {
        if (!(in->seg[0].text = slm_strdup(v->valuestring))) return fail(e, 500, NULL, "out of memory");
        in->n = 1;
        return 1;
    }
    for (const cJSON *x = v->child; x; x = x->next) {
        srv_infill_seg *s = &in->seg[in->n];
        if (cJSON_IsString(x)) {
            if (!(s->text = slm_strdup(x->valuestring))) return fail(e, 500, NULL, "out of memory");
        } else if (cJSON_IsNumber(x) && x->valuedouble == floor(x->valuedouble) && x->valuedouble >= 0 &&
                   x->valuedouble < vocab) {
            s->id = (int32_t)x->valuedouble;
        } else {
            return fail(e, 400, name, msg);
        }
        in->n++;
    }
    return 1;
}

/* input_extra (absent or null: none) into f. */
static int take_extra(const cJSON *v, srv_infill *f, srv_error *e) {
    if (!v) return 1;
    if (!cJSON_IsArray(v))
        return fail(e, 400, "input_extra", "\"input_extra\" must be an array of {\"filename\": string, \"text\": string}");
    const int n = cJSON_GetArraySize(v);
    if (!n) return 1;
    f->extra_name = slm_calloc((size_t)n, sizeof *f->extra_name);
    f->extra_text = slm_calloc((size_t)n, sizeof *f->extra_text);
    if (!f->extra_name || !f->extra_text) return fail(e, 500, NULL, "out of memory");
    char param[48], msg[200];
    for (const cJSON *x = v->child; x; x = x->next) {
        const int k = f->n_extra;
        const cJSON *t = cJSON_IsObject(x) ? cJSON_GetObjectItemCaseSensitive(x, "text") : NULL;
        const cJSON *fn = cJSON_IsObject(x) ? cJSON_GetObjectItemCaseSensitive(x, "filename") : NULL;
        if (!cJSON_IsString(t)) {
            snprintf(param, sizeof param, "input_extra[%d].text", k);
            snprintf(msg, sizeof msg, "input_extra[%d] must be an object with a \"text\" field holding a string", k);
            return fail(e, 400, param, msg);
        }
        if (fn && !cJSON_IsString(fn)) { /* null included: llama-server wants a string when it is there */
            snprintf(param, sizeof param, "input_extra[%d].filename", k);
            snprintf(msg, sizeof msg, "input_extra[%d].filename must be a string", k);
            return fail(e, 400, param, msg);
        }
        f->extra_text[k] = slm_strdup(t->valuestring);
        f->extra_name[k] = slm_strdup(fn ? fn->valuestring : "tmp");
        f->n_extra++;
        if (!f->extra_text[k] || !f->extra_name[k]) return fail(e, 500, NULL, "out of memory");
    }
    return 1;
}

static const cJSON *field(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

int srv_infill_parse(const char *body, size_t len, int vocab, const slm_sampling *dflt, srv_infill *f, srv_request *q,
                     srv_error *e) {
    memset(f, 0, sizeof *f);
    memset(q, 0, sizeof *q);
    memset(e, 0, sizeof *e);
    cJSON *o = srv_body_object(body, len, e);
    if (!o) return 0;
    const cJSON *pr = field(o, "prompt");
    int ok = 1;
    if (pr && !cJSON_IsString(pr)) ok = fail(e, 400, "prompt", "\"prompt\" must be a string");
    if (ok) ok = take_input(field(o, "input_prefix"), "input_prefix", vocab, &f->prefix, e);
    if (ok) ok = take_input(field(o, "input_suffix"), "input_suffix", vocab, &f->suffix, e);
    if (ok) ok = take_extra(field(o, "input_extra"), f, e);
    char *rest = NULL;
    if (ok) { /* the rest is a completion's: its prompt the text, "" when none */
        cJSON_DeleteItemFromObjectCaseSensitive(o, "input_prefix");
        cJSON_DeleteItemFromObjectCaseSensitive(o, "input_suffix");
        cJSON_DeleteItemFromObjectCaseSensitive(o, "input_extra");
        if (!pr) {
            cJSON_DeleteItemFromObjectCaseSensitive(o, "prompt"); /* a null one */
            if (!cJSON_AddStringToObject(o, "prompt", "")) ok = fail(e, 500, NULL, "out of memory");
        }
        if (ok && !(rest = cJSON_PrintUnformatted(o))) ok = fail(e, 500, NULL, "out of memory");
    }
    cJSON_Delete(o);
    if (ok) ok = srv_request_parse(rest, strlen(rest), 0, dflt, q, e);
    cJSON_free(rest);
    if (!ok) srv_infill_free(f);
    return ok;
}

#endif /* SLM_HAVE_CJSON */
