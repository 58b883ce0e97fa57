/* server/request.c — OpenAI request bodies -> srv_request (server/request.h). */
#include "request.h"

#include "common/common.h"

#ifdef SLM_HAVE_CJSON

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "text/grammar.h"
#include "text/reasoning.h"
#include "text/toolcall.h"

static int fail(srv_error *e, int status, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail(srv_error *e, int status, const char *param, const char *code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->status = status;
    e->type = status >= 500 ? "server_error" : "invalid_request_error";
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    return 0;
}

#define BAD(param, code, ...) fail(e, 400, param, code, __VA_ARGS__)
#define NOMEM() fail(e, 500, NULL, NULL, "out of memory")

static int is_int(const cJSON *v) {
    return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) && fabs(v->valuedouble) < 9e15;
}

/* An optional field: NULL when absent or null. */
static const cJSON *field(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static int parse_stop(const cJSON *v, srv_request *q, srv_error *e) {
    if (cJSON_IsString(v)) {
        size_t n = strlen(v->valuestring);
        if (n > SRV_STOP_LEN) return BAD("stop", "invalid_value", "a stop string may have at most %d bytes", SRV_STOP_LEN);
        if (n && !(q->stop[q->nstop++] = slm_strdup(v->valuestring))) return NOMEM();
        return 1;
    }
    if (!cJSON_IsArray(v)) return BAD("stop", "invalid_type", "'stop' must be a string or an array of strings");
    const cJSON *it;
    int k = 0;
    cJSON_ArrayForEach(it, v) {
        if (!cJSON_IsString(it) || k >= SRV_MAX_STOP || strlen(it->valuestring) > SRV_STOP_LEN)
            return BAD("stop", "invalid_type", "'stop' must be a string or an array of at most %d strings of at most %d bytes",
                       SRV_MAX_STOP, SRV_STOP_LEN);
        if (it->valuestring[0] && !(q->stop[q->nstop++] = slm_strdup(it->valuestring))) return NOMEM();
        k++;
    }
    return 1;
}

/* A number field in [lo, hi] into *out; 1 also when absent. */
static int num_field(const cJSON *o, const char *name, double lo, double hi, float *out, srv_error *e) {
    const cJSON *v = field(o, name);
    if (!v) return 1;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return BAD(name, "invalid_type", "'%s' must be a number in [%g, %g]", name, lo, hi);
    *out = (float)v->valuedouble;
    return 1;
}

/* logit_bias: {"token id": bias in [-100, 100], ...} (the ids are checked
 * against the vocabulary where the engine is known, api.c). */
static int parse_logit_bias(const cJSON *v, srv_request *q, srv_error *e) {
    if (!cJSON_IsObject(v)) return BAD("logit_bias", "invalid_type", "'logit_bias' must be an object of token id: bias");
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        char *end;
        const long id = strtol(it->string, &end, 10);
        if (!it->string[0] || *end || id < 0 || id >= 1L << 30)
            return BAD("logit_bias", "invalid_value", "logit_bias keys must be token ids (whole numbers >= 0)");
        if (!cJSON_IsNumber(it) || !(it->valuedouble >= -100 && it->valuedouble <= 100))
            return BAD("logit_bias", "invalid_value", "logit_bias values must be numbers in [-100, 100]");
        if (q->samp.n_logit_bias >= SLM_MAX_LOGIT_BIAS)
            return BAD("logit_bias", "invalid_value", "logit_bias may name at most %d tokens", SLM_MAX_LOGIT_BIAS);
        q->samp.logit_bias[q->samp.n_logit_bias++] = (slm_logit_bias){(int32_t)id, (float)it->valuedouble};
    }
    return 1;
}

/* The penalties, min_p and logit_bias (OpenAI's names, and llama.cpp's). */
static int parse_penalties(const cJSON *o, srv_request *q, srv_error *e) {
    const cJSON *v;
    if (!num_field(o, "min_p", 0, 1, &q->samp.min_p, e) || !num_field(o, "presence_penalty", -2, 2, &q->samp.presence_penalty, e) ||
        !num_field(o, "frequency_penalty", -2, 2, &q->samp.frequency_penalty, e) ||
        !num_field(o, "repeat_penalty", 0, 10, &q->samp.repeat_penalty, e))
        return 0;
    if ((v = field(o, "repeat_last_n"))) {
        if (!is_int(v) || v->valuedouble < -1 || v->valuedouble > 1 << 24)
            return BAD("repeat_last_n", "invalid_type", "'repeat_last_n' must be an integer >= -1 (-1 = all)");
        q->samp.repeat_last_n = (int)v->valuedouble;
    }
    if (!(v = field(o, "logit_bias"))) return 1; /* serve's --logit-bias stands */
    q->samp.n_logit_bias = 0;                     /* the request's replaces it */
    return parse_logit_bias(v, q, e);
}

/* Log-probabilities: chat's logprobs (true / false) and top_logprobs (0 to
 * 20, with logprobs true); completions' logprobs N (0 to 20: the chosen
 * token's and the N most likely; 0 = none, as llama.cpp's server). */
static int parse_logprobs(const cJSON *o, srv_request *q, srv_error *e) {
    const cJSON *v = field(o, "logprobs"), *t = field(o, "top_logprobs");
    const int max = SLM_MAX_TOP_LOGPROBS;
    if (q->chat) {
        if (v && !cJSON_IsBool(v)) return BAD("logprobs", "invalid_type", "'logprobs' must be true or false");
        if (t && !(is_int(t) && t->valuedouble >= 0 && t->valuedouble <= max))
            return BAD("top_logprobs", "invalid_value", "'top_logprobs' must be an integer from 0 to %d", max);
        q->logprobs = v && cJSON_IsTrue(v);
        q->top_logprobs = t ? (int)t->valuedouble : 0;
        if (q->top_logprobs && !q->logprobs)
            return BAD("top_logprobs", "invalid_value", "'top_logprobs' needs 'logprobs': true");
        return 1;
    }
    if (t) return BAD("top_logprobs", "unsupported_value", "completions take 'logprobs': N (the N most likely tokens)");
    if (v && !(is_int(v) && v->valuedouble >= 0 && v->valuedouble <= max))
        return BAD("logprobs", "invalid_value", "'logprobs' must be an integer from 0 to %d", max);
    q->top_logprobs = v ? (int)v->valuedouble : 0;
    q->logprobs = q->top_logprobs > 0;
    return 1;
}

/* llama-server's own fields: n_predict (max_tokens by its other name; -1 =
 * until the KV capacity) and ignore_eos are taken; its samplers staticlm
 * lacks are refused unless they are off. */
static int parse_llama_fields(const cJSON *o, srv_request *q, srv_error *e) {
    static const struct { const char *name; double off; } k_off[] = {
        {"mirostat", 0}, {"typical_p", 1}, {"tfs_z", 1}, {"dynatemp_range", 0}, {"xtc_probability", 0},
        {"dry_multiplier", 0}, {"n_probs", 0}};
    const cJSON *v;
    for (size_t i = 0; i < sizeof k_off / sizeof k_off[0]; i++)
        if ((v = field(o, k_off[i].name)) && !(cJSON_IsNumber(v) && v->valuedouble == k_off[i].off))
            return BAD(k_off[i].name, "unsupported_value", "'%s' is not supported (only %g, off)%s", k_off[i].name,
                       k_off[i].off, strcmp(k_off[i].name, "n_probs") ? "" : ": use logprobs / top_logprobs");
    if ((v = field(o, "top_n_sigma")) && !(cJSON_IsNumber(v) && v->valuedouble <= 0))
        return BAD("top_n_sigma", "unsupported_value", "'top_n_sigma' is not supported (only <= 0, off)");
    if ((v = field(o, "ignore_eos"))) {
        if (!cJSON_IsBool(v)) return BAD("ignore_eos", "invalid_type", "'ignore_eos' must be a boolean");
        q->ignore_eos = cJSON_IsTrue(v);
    }
    /* llama-server's limits for code completion (editors send them with /infill) */
    if ((v = field(o, "n_indent"))) {
        if (!is_int(v) || v->valuedouble < 0) return BAD("n_indent", "invalid_type", "'n_indent' must be an integer >= 0");
        q->n_indent = v->valuedouble > 1e6 ? 1000000 : (int)v->valuedouble;
    }
    if ((v = field(o, "t_max_predict_ms"))) {
        if (!is_int(v) || v->valuedouble < 0)
            return BAD("t_max_predict_ms", "invalid_type", "'t_max_predict_ms' must be an integer >= 0");
        q->t_max_predict_ms = v->valuedouble > 1e9 ? 1e9 : v->valuedouble;
    }
    if ((v = field(o, "n_predict"))) {
        if (field(o, "max_tokens") || field(o, "max_completion_tokens"))
            return BAD("n_predict", "invalid_value", "give one of 'n_predict' and 'max_tokens'");
        if (!is_int(v) || !(v->valuedouble == -1 || v->valuedouble >= 1))
            return BAD("n_predict", "invalid_type", "'n_predict' must be -1 (until the context is full) or an integer >= 1");
        q->max_tokens = v->valuedouble > 1e9 ? 1000000000 : v->valuedouble < 0 ? 0 : (int)v->valuedouble;
        q->max_tokens_set = 1;
    }
    return 1;
}

/* OpenAI fields whose features staticlm does not have: refused, not ignored,
 * unless they ask for nothing (an empty functions list, "none", "text", false, 0, 1).
 * (tools and tool_choice: parse_tools.) */
static int refuse_unsupported(const cJSON *o, srv_error *e) {
    const cJSON *v;
    if ((v = field(o, "functions")) && !(cJSON_IsArray(v) && !cJSON_GetArraySize(v)))
        return BAD(v->string, "unsupported_value", "the legacy 'functions' are not supported: use 'tools'");
    if ((v = field(o, "function_call")) &&
        !(cJSON_IsString(v) && (!strcmp(v->valuestring, "none") || !strcmp(v->valuestring, "auto"))))
        return BAD(v->string, "unsupported_value", "the legacy 'function_call' is not supported: use 'tool_choice'");
    if ((v = field(o, "echo")) && !cJSON_IsFalse(v)) return BAD("echo", "unsupported_value", "echo is not supported");
    if ((v = field(o, "audio"))) return BAD("audio", "unsupported_value", "audio output is not supported");
    if ((v = field(o, "modalities"))) {
        const cJSON *it;
        int ok = cJSON_IsArray(v);
        cJSON_ArrayForEach(it, v) ok &= cJSON_IsString(it) && !strcmp(it->valuestring, "text");
        if (!ok) return BAD("modalities", "unsupported_value", "only the text modality is supported ([\"text\"])");
    }
    if ((v = field(o, "best_of")) && !(is_int(v) && v->valuedouble == 1))
        return BAD("best_of", "unsupported_value", "only best_of = 1 is supported");
    if ((v = field(o, "suffix")) && !(cJSON_IsString(v) && !v->valuestring[0]))
        return BAD("suffix", "unsupported_value", "suffix is not taken here: fill in the middle is POST /infill "
                   "(input_prefix, input_suffix), for code models with FIM tokens");
    return 1;
}

/* A schema (cJSON) to grammar text in q->grammar. */
static int schema_grammar(const cJSON *schema, const char *param, srv_request *q, srv_error *e) {
    char *txt = NULL;
    if (schema && !(txt = cJSON_PrintUnformatted(schema))) return NOMEM();
    slm_err err = {0};
    slm_status st = slm_json_schema_to_grammar(txt, txt ? strlen(txt) : 0, &q->grammar, &err);
    cJSON_free(txt);
    if (st == SLM_ERR_NOMEM) return NOMEM();
    return st ? BAD(param, "invalid_value", "%s", err.msg) : 1;
}

/* Structured output: response_format {"type": "json_object"} (any JSON
 * object; llama-server's optional "schema" beside it), {"type":
 * "json_schema", "json_schema": {"schema": ...}} (OpenAI's), and
 * llama-server's `json_schema` (a schema) and `grammar` (GBNF text); at
 * most one of them. The grammar is compiled here so that a bad one is a 400
 * with the compiler's message. */
static int parse_grammar(const cJSON *o, srv_request *q, srv_error *e) {
    const cJSON *rf = field(o, "response_format"), *js = field(o, "json_schema"), *gr = field(o, "grammar");
    const char *param = NULL;
    if (rf) {
        const cJSON *t = cJSON_IsObject(rf) ? cJSON_GetObjectItemCaseSensitive(rf, "type") : NULL;
        if (!cJSON_IsString(t))
            return BAD("response_format", "invalid_type", "'response_format' must be an object with a 'type'");
        if (!strcmp(t->valuestring, "json_object")) {
            const cJSON *sc = field(rf, "schema");
            if (sc && !cJSON_IsObject(sc) && !cJSON_IsBool(sc))
                return BAD("response_format", "invalid_type", "response_format.schema must be a JSON schema");
            param = "response_format";
            if (!schema_grammar(sc, param, q, e)) return 0;
        } else if (!strcmp(t->valuestring, "json_schema")) {
            const cJSON *w = field(rf, "json_schema"), *sc = cJSON_IsObject(w) ? field(w, "schema") : NULL;
            if (!sc || (!cJSON_IsObject(sc) && !cJSON_IsBool(sc)))
                return BAD("response_format", "invalid_value",
                           "response_format {\"type\": \"json_schema\"} needs \"json_schema\": {\"schema\": {...}}");
            param = "response_format";
            if (!schema_grammar(sc, param, q, e)) return 0;
        } else if (strcmp(t->valuestring, "text")) {
            return BAD("response_format", "unsupported_value",
                       "response_format type '%.32s' is not supported (text, json_object, json_schema)", t->valuestring);
        }
    }
    if (js) {
        if (param) return BAD("json_schema", "invalid_value", "give one of response_format, json_schema and grammar");
        if (!cJSON_IsObject(js) && !cJSON_IsBool(js)) return BAD("json_schema", "invalid_type", "'json_schema' must be a JSON schema");
        param = "json_schema";
        if (!schema_grammar(js, param, q, e)) return 0;
    }
    if (gr) {
        if (param) return BAD("grammar", "invalid_value", "give one of response_format, json_schema and grammar");
        if (!cJSON_IsString(gr)) return BAD("grammar", "invalid_type", "'grammar' must be a string (GBNF)");
        param = "grammar";
        if (gr->valuestring[0] && !(q->grammar = slm_strdup(gr->valuestring))) return NOMEM();
    }
    if (!q->grammar) return 1;
    slm_grammar *g = NULL;
    slm_gmatch *m = NULL;
    slm_err err = {0};
    slm_status st = slm_grammar_compile(q->grammar, strlen(q->grammar), &g, &err);
    if (!st) st = slm_gmatch_new(g, &m, &err); /* the start's expansion too */
    slm_gmatch_free(m);
    slm_grammar_free(g);
    if (st == SLM_ERR_NOMEM) return NOMEM();
    if (st) return BAD(param, "invalid_value", "%s", err.msg);
    q->samp.grammar = q->grammar;
    return 1;
}

/* The fields both endpoints take. */
static int parse_common(const cJSON *o, const slm_sampling *dflt, srv_request *q, srv_error *e) {
    const cJSON *v;
    if (dflt) {
        q->samp = *dflt;
    } else { /* OpenAI's */
        q->samp.temperature = 1.0f;
        q->samp.top_p = 1.0f;
        q->samp.repeat_penalty = 1.0f;
        q->samp.repeat_last_n = 64;
    }
    if (!refuse_unsupported(o, e) || !parse_logprobs(o, q, e) || !parse_penalties(o, q, e) ||
        !parse_grammar(o, q, e))
        return 0;
    q->max_tokens = q->chat ? 0 : 16;
    if ((v = field(o, "model")) && !cJSON_IsString(v)) return BAD("model", "invalid_type", "'model' must be a string");
    const char *mt = cJSON_GetObjectItemCaseSensitive(o, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if ((v = field(o, mt))) {
        if (!is_int(v) || v->valuedouble < 1) return BAD(mt, "invalid_type", "'%s' must be an integer >= 1", mt);
        q->max_tokens = v->valuedouble > 1e9 ? 1000000000 : (int)v->valuedouble;
        q->max_tokens_set = 1;
    }
    if (!parse_llama_fields(o, q, e)) return 0;
    if ((v = field(o, "temperature"))) {
        if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 2))
            return BAD("temperature", "invalid_type", "'temperature' must be a number in [0, 2]");
        q->samp.temperature = (float)v->valuedouble;
    }
    if ((v = field(o, "top_p"))) {
        if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 1))
            return BAD("top_p", "invalid_type", "'top_p' must be a number in [0, 1]");
        q->samp.top_p = (float)v->valuedouble;
    }
    if ((v = field(o, "top_k"))) {
        if (!is_int(v) || v->valuedouble < 0 || v->valuedouble > 1e9)
            return BAD("top_k", "invalid_type", "'top_k' must be an integer >= 0");
        q->samp.top_k = (int)v->valuedouble;
    }
    if ((v = field(o, "seed"))) {
        if (!is_int(v)) return BAD("seed", "invalid_type", "'seed' must be an integer");
        q->samp.seed = (uint64_t)(int64_t)v->valuedouble;
        q->seed_set = 1;
    }
    q->n = 1;
    const char *nf = field(o, "n") ? "n" : "n_cmpl"; /* n_cmpl: llama-server's name */
    if ((v = field(o, nf))) {
        if (field(o, "n") && field(o, "n_cmpl")) return BAD("n_cmpl", "invalid_value", "give one of 'n' and 'n_cmpl'");
        if (!is_int(v) || v->valuedouble < 1 || v->valuedouble > SRV_MAX_CHOICES)
            return BAD(nf, "invalid_value", "'%s' (choices) must be an integer from 1 to %d", nf, SRV_MAX_CHOICES);
        q->n = (int)v->valuedouble;
    }
    if ((v = field(o, "stream"))) {
        if (!cJSON_IsBool(v)) return BAD("stream", "invalid_type", "'stream' must be a boolean");
        q->stream = cJSON_IsTrue(v);
    }
    if ((v = field(o, "stream_options"))) {
        const cJSON *iu = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "include_usage") : NULL;
        if (!cJSON_IsObject(v) || (iu && !cJSON_IsBool(iu)))
            return BAD("stream_options", "invalid_type", "'stream_options' must be an object {\"include_usage\": bool}");
        q->include_usage = cJSON_IsTrue(iu);
    }
    if ((v = field(o, "stop")) && !parse_stop(v, q, e)) return 0;
    return 1;
}

/* The text of a message's content: a string or an array of text parts.
 * NULL with *bad = 1 when it is neither, *bad = 0 when out of memory. */
static char *content_text(const cJSON *c, int *bad) {
    *bad = 0;
    if (cJSON_IsString(c)) return slm_strdup(c->valuestring);
    if (!c || cJSON_IsNull(c)) return slm_strdup("");
    if (!cJSON_IsArray(c)) { *bad = 1; return NULL; }
    size_t n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, c) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(it, "type"), *tx = cJSON_GetObjectItemCaseSensitive(it, "text");
        if (!cJSON_IsObject(it) || !cJSON_IsString(ty) || strcmp(ty->valuestring, "text") || !cJSON_IsString(tx)) {
            *bad = 1;
            return NULL;
        }
        n += strlen(tx->valuestring); /* the parts are in the body: no overflow */
    }
    char *o = slm_malloc(n + 1);
    if (!o) return NULL;
    n = 0;
    cJSON_ArrayForEach(it, c) {
        const char *t = cJSON_GetObjectItemCaseSensitive(it, "text")->valuestring;
        size_t l = strlen(t);
        memcpy(o + n, t, l);
        n += l;
    }
    o[n] = 0;
    return o;
}

static const char *known_role(const char *r) {
    static const char *const roles[] = {"system", "user", "assistant", "tool"};
    if (!strcmp(r, "developer")) return "system";
    for (size_t i = 0; i < sizeof roles / sizeof *roles; i++)
        if (!strcmp(r, roles[i])) return roles[i];
    return NULL;
}

/* ---- tools ------------------------------------------------------------------------ */

/* tool_choice required or {"type": "function", "function": {"name": N}}
 * (tools checked): the functions the reply may call, their parameters'
 * schemas checked now (text/toolcall.h's slm_tools_forced: a keyword the
 * grammar cannot enforce is a 400 that names the function); the grammar
 * itself is made once the template is rendered (worker.c: the format and
 * the prompt's end decide it). */
static int parse_forced(const cJSON *tl, const cJSON *tc, srv_request *q, srv_error *e) {
    const char *want = NULL;
    if (q->grammar)
        return BAD("tool_choice", "invalid_value",
                   "tool_choice 'required' or a named function constrains the reply itself: give no response_format, "
                   "json_schema or grammar with it");
    if (q->tool_choice == SLM_TOOL_CHOICE_NAMED) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(tc, "type"), *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
        const cJSON *nm = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "name") : NULL;
        if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "function") || !cJSON_IsString(nm))
            return BAD("tool_choice", "invalid_value", "tool_choice must be {\"type\": \"function\", \"function\": {\"name\": NAME}}");
        want = nm->valuestring;
    }
    slm_err err = {0};
    int choice_fault = 0;
    slm_status st = slm_tools_forced(tl, want, &q->tool_fns, &q->n_tool_fns, &choice_fault, &err);
    if (st == SLM_ERR_NOMEM) return NOMEM();
    if (st) return BAD(choice_fault ? "tool_choice" : "tools", "invalid_value", "%s", err.msg);
    return 1;
}

/* tools: [{"type": "function", "function": {"name", "description"?,
 * "parameters"?}}], kept as sent (JSON) for the template; tool_choice;
 * parallel_tool_calls. Tools on completions are refused (an empty list
 * asks for nothing). */
static int parse_tools(const cJSON *o, srv_request *q, srv_error *e) {
    const cJSON *tl = field(o, "tools"), *tc = field(o, "tool_choice"), *pc = field(o, "parallel_tool_calls");
    q->tool_choice = SLM_TOOL_CHOICE_AUTO;
    q->parallel_tool_calls = 1;
    if (!q->chat && tl && !(cJSON_IsArray(tl) && !cJSON_GetArraySize(tl))) /* an empty list asks for nothing */
        return BAD("tools", "unsupported_value", "tools apply to chat completions only (/v1/chat/completions)");
    if (pc && !cJSON_IsBool(pc)) return BAD("parallel_tool_calls", "invalid_type", "'parallel_tool_calls' must be a boolean");
    if (pc) q->parallel_tool_calls = cJSON_IsTrue(pc);
    if (tc) {
        q->tool_choice = cJSON_IsString(tc) ? slm_tool_choice_parse(tc->valuestring)
                         : cJSON_IsObject(tc) ? SLM_TOOL_CHOICE_NAMED : -1;
        if (q->tool_choice < 0)
            return BAD("tool_choice", "invalid_value", "'tool_choice' must be 'none', 'auto', 'required' or an object");
    }
    if (q->tool_choice >= SLM_TOOL_CHOICE_REQUIRED && (!cJSON_IsArray(tl) || !cJSON_GetArraySize(tl)))
        return BAD("tool_choice", "invalid_value", "tool_choice 'required' or a named function needs 'tools'");
    if (!tl) return 1;
    if (!cJSON_IsArray(tl)) return BAD("tools", "invalid_type", "'tools' must be an array");
    if (!cJSON_GetArraySize(tl) || !q->chat) return 1; /* none, as llama.cpp's server takes it */
    slm_err err = {0};
    if (slm_tools_check(tl, &err)) return BAD("tools", "invalid_value", "%s", err.msg);
    if (!(q->tools = cJSON_PrintUnformatted(tl))) return NOMEM();
    return q->tool_choice >= SLM_TOOL_CHOICE_REQUIRED ? parse_forced(tl, tc, q, e) : 1;
}

/* An assistant's tool_calls as the template takes them (JSON text): each
 * call's arguments, a JSON string in OpenAI's API, parsed into the value the
 * templates expect (as llama.cpp's server does); other fields kept. */
static int msg_tool_calls(const cJSON *v, int k, slm_chat_msg *m, srv_error *e) {
    char param[48];
    snprintf(param, sizeof param, "messages[%d].tool_calls", k);
    if (!cJSON_IsArray(v)) return BAD(param, "invalid_type", "%s must be an array", param);
    char *out = NULL;
    int bad = -1;
    slm_err err = {0};
    slm_status st = slm_tool_calls_for_template(v, &out, &bad, &err);
    if (st == SLM_ERR_NOMEM) return NOMEM();
    if (st) return BAD(param, "invalid_value", "%s%s", param, err.msg);
    m->tool_calls = out;
    return 1;
}

/* A message's tool_calls (assistant), tool_call_id and name (tool). */
static int parse_msg_tools(const cJSON *it, int k, slm_chat_msg *m, srv_error *e) {
    char param[48];
    const cJSON *v;
    if ((v = field(it, "tool_calls")) && !msg_tool_calls(v, k, m, e)) return 0;
    static const char *const names[] = {"tool_call_id", "name"};
    for (int f = 0; f < 2; f++) {
        if (!(v = field(it, names[f]))) continue;
        snprintf(param, sizeof param, "messages[%d].%s", k, names[f]);
        if (!cJSON_IsString(v)) return BAD(param, "invalid_type", "%s must be a string", param);
        char *c = slm_strdup(v->valuestring);
        if (!c) return NOMEM();
        *(f ? &m->name : &m->tool_call_id) = c;
    }
    return 1;
}

static int parse_messages(const cJSON *o, srv_request *q, srv_error *e) {
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(o, "messages");
    int n = cJSON_IsArray(ms) ? cJSON_GetArraySize(ms) : -1;
    if (!ms) return BAD("messages", "invalid_value", "'messages' is required");
    if (n <= 0) return BAD("messages", "invalid_value", "'messages' must be a non-empty array");
    if (n > SRV_MAX_MESSAGES) return BAD("messages", "invalid_value", "'messages' has more than %d entries", SRV_MAX_MESSAGES);
    if (!(q->msgs = slm_calloc((size_t)n, sizeof *q->msgs))) return NOMEM();
    const cJSON *it;
    cJSON_ArrayForEach(it, ms) {
        int k = q->nmsgs;
        char param[48];
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(it, "role");
        const char *r = cJSON_IsObject(it) && cJSON_IsString(role) ? known_role(role->valuestring) : NULL;
        if (!r) {
            snprintf(param, sizeof param, "messages[%d].role", k);
            return BAD(param, "invalid_value",
                       "messages[%d] must be an object with a role (system, user, assistant, developer or tool)", k);
        }
        int bad;
        char *txt = content_text(cJSON_GetObjectItemCaseSensitive(it, "content"), &bad);
        if (!txt) {
            if (!bad) return NOMEM();
            snprintf(param, sizeof param, "messages[%d].content", k);
            return BAD(param, "invalid_value", "messages[%d].content must be a string or an array of text parts", k);
        }
        q->msgs[k].role = r;
        q->msgs[k].content = txt;
        q->nmsgs++;
        const cJSON *rc = field(it, "reasoning_content");
        if (rc && !cJSON_IsString(rc)) {
            snprintf(param, sizeof param, "messages[%d].reasoning_content", k);
            return BAD(param, "invalid_type", "messages[%d].reasoning_content must be a string", k);
        }
        if (rc && !(q->msgs[k].reasoning_content = slm_strdup(rc->valuestring))) return NOMEM();
        if (!parse_msg_tools(it, k, &q->msgs[k], e)) return 0;
    }
    return 1;
}

/* reasoning_format, chat_template_kwargs and reasoning_effort (OpenAI's;
 * the template variable reasoning_effort, as llama-server passes it: gpt-oss's
 * template reads it, unless chat_template_kwargs sets it): chat completions only. */
static int parse_reasoning(const cJSON *o, srv_request *q, srv_error *e) {
    const cJSON *rf = field(o, "reasoning_format"), *kw = field(o, "chat_template_kwargs"), *ef = field(o, "reasoning_effort");
    q->reasoning = -1;
    if (!q->chat && (rf || kw || ef)) {
        const char *f = rf ? "reasoning_format" : kw ? "chat_template_kwargs" : "reasoning_effort";
        return BAD(f, "unsupported_value", "'%s' applies to chat completions only (/v1/chat/completions)", f);
    }
    if (rf && (!cJSON_IsString(rf) || (q->reasoning = slm_reason_format_parse(rf->valuestring)) < 0))
        return BAD("reasoning_format", "invalid_value", "'reasoning_format' must be one of %s", SLM_REASON_FORMATS);
    if (ef && !(cJSON_IsString(ef) && (!strcmp(ef->valuestring, "minimal") || !strcmp(ef->valuestring, "low") ||
                                      !strcmp(ef->valuestring, "medium") || !strcmp(ef->valuestring, "high"))))
        return BAD("reasoning_effort", "invalid_value", "'reasoning_effort' must be one of minimal, low, medium, high");
    if (kw && !cJSON_IsObject(kw)) return BAD("chat_template_kwargs", "invalid_type", "'chat_template_kwargs' must be an object");
    if (!kw && !ef) return 1;
    cJSON *all = kw ? cJSON_Duplicate(kw, 1) : cJSON_CreateObject();
    if (all && ef && !cJSON_GetObjectItemCaseSensitive(all, "reasoning_effort"))
        cJSON_AddStringToObject(all, "reasoning_effort", ef->valuestring);
    q->kwargs = all ? cJSON_PrintUnformatted(all) : NULL;
    cJSON_Delete(all);
    if (!q->kwargs) return NOMEM();
    slm_err err = {0};
    if (!slm_tmpl_kwargs_check(q->kwargs, &err))
        return err.status == SLM_ERR_NOMEM ? NOMEM() : BAD("chat_template_kwargs", "invalid_value", "%s", err.msg);
    return 1;
}

static int parse_prompt(const cJSON *o, srv_request *q, srv_error *e) {
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(o, "prompt");
    if (cJSON_IsArray(pr) && cJSON_GetArraySize(pr) == 1 && cJSON_IsString(cJSON_GetArrayItem(pr, 0)))
        pr = cJSON_GetArrayItem(pr, 0);
    if (cJSON_IsArray(pr) && cJSON_GetArraySize(pr) > 0 && cJSON_IsNumber(cJSON_GetArrayItem(pr, 0))) {
        /* token ids, as OpenAI's and llama-server's completions take them (checked
           against the vocabulary where it is known, api.c) */
        const int n = cJSON_GetArraySize(pr);
        if (n > SRV_MAX_PROMPT_IDS) return BAD("prompt", "invalid_value", "a prompt of ids holds at most %d", SRV_MAX_PROMPT_IDS);
        if (!(q->prompt_ids = slm_malloc((size_t)n * sizeof *q->prompt_ids))) return NOMEM();
        const cJSON *it;
        cJSON_ArrayForEach(it, pr) {
            if (!is_int(it) || it->valuedouble < 0 || it->valuedouble >= 1 << 30)
                return BAD("prompt", "invalid_value", "a prompt of ids holds whole numbers >= 0 (token ids)");
            q->prompt_ids[q->n_prompt_ids++] = (int32_t)it->valuedouble;
        }
        return 1;
    }
    if (!cJSON_IsString(pr))
        return BAD("prompt", "invalid_value",
                   pr ? "'prompt' must be a string, one string in a list, or a list of token ids" : "'prompt' is required");
    if (!(q->prompt = slm_strdup(pr->valuestring))) return NOMEM();
    return 1;
}

cJSON *srv_body_object(const char *body, size_t len, srv_error *e) {
    slm_json_init_hooks();
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(body ? body : "", len, &end, 0);
    if (!o) return BAD(NULL, "invalid_json", "could not parse the request body as JSON"), NULL;
    /* one value and nothing after it but white space */
    const char *stop = (body ? body : "") + len;
    while (end && end < stop && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')) end++;
    if (end == stop && cJSON_IsObject(o)) return o;
    cJSON_Delete(o);
    if (end != stop) return BAD(NULL, "invalid_json", "the request body has bytes after its JSON value"), NULL;
    return BAD(NULL, "invalid_json", "the request body must be a JSON object"), NULL;
}

int srv_request_parse(const char *body, size_t len, int chat, const slm_sampling *dflt, srv_request *q, srv_error *e) {
    memset(q, 0, sizeof *q);
    memset(e, 0, sizeof *e);
    q->chat = chat;
    cJSON *o = srv_body_object(body, len, e);
    if (!o) return 0;
    int ok = parse_common(o, dflt, q, e);
    if (ok) ok = chat ? parse_messages(o, q, e) : parse_prompt(o, q, e);
    if (ok) ok = parse_reasoning(o, q, e);
    if (ok) ok = parse_tools(o, q, e);
    cJSON_Delete(o);
    if (!ok) srv_request_free(q);
    return ok;
}

int srv_request_share(const srv_request *src, srv_request *dst) {
    *dst = *src;
    dst->borrowed = 1;
    dst->grammar = NULL;
    if (src->grammar && !(dst->grammar = slm_strdup(src->grammar))) {
        memset(dst, 0, sizeof *dst);
        return 0;
    }
    if (src->samp.grammar == src->grammar) dst->samp.grammar = dst->grammar; /* else serve's --grammar, or none */
    return 1;
}

void srv_request_free(srv_request *q) {
    slm_xfree(q->grammar);
    if (q->borrowed) {
        int chat = q->chat;
        memset(q, 0, sizeof *q);
        q->chat = chat;
        return;
    }
    for (int i = 0; i < q->nstop; i++) slm_xfree(q->stop[i]);
    for (int i = 0; i < q->nmsgs; i++) {
        slm_xfree((void *)q->msgs[i].content);
        slm_xfree((void *)q->msgs[i].reasoning_content);
        cJSON_free((void *)q->msgs[i].tool_calls);
        slm_xfree((void *)q->msgs[i].tool_call_id);
        slm_xfree((void *)q->msgs[i].name);
    }
    slm_xfree(q->kwargs);
    cJSON_free(q->tools);
    slm_tool_fns_free(q->tool_fns, q->n_tool_fns);
    slm_xfree(q->msgs);
    slm_xfree(q->prompt);
    slm_xfree(q->prompt_ids);
    int chat = q->chat;
    memset(q, 0, sizeof *q);
    q->chat = chat;
}

#endif /* SLM_HAVE_CJSON */

/* ---- UTF-8 ------------------------------------------------------------------ */

size_t srv_utf8_complete(const char *s, size_t n) { return slm_utf8_complete(s, n); }

char *srv_utf8_clean(const char *s, size_t n) { return slm_utf8_clean(s, n); }
