/* server/api_native.c — the answers of llama-server's own POST /completion,
 * for the clients written against it: the request is a completion's (its
 * fields as /v1/completions takes them, n_predict and ignore_eos included;
 * no n_predict: until the KV capacity, as llama-server), the answer
 *   {"content", "stop": true, "model", "tokens_predicted", "tokens_evaluated",
 *    "tokens_cached", "stop_type": "eos" | "word" | "limit", "stopping_word" (the stop
 *    string that ended it, "" otherwise), "truncated",
 *    "timings": {"prompt_n", "prompt_ms", "prompt_per_token_ms",
 *                "prompt_per_second", "predicted_n", "predicted_ms",
 *                "predicted_per_token_ms", "predicted_per_second"}}
 * and, streamed, {"content": piece, "stop": false, "index": 0} events, then
 * that object with "content": "" (no [DONE] line, as llama-server). With n
 * (n_cmpl) > 1: an array of those objects, "index" 0..n-1; streamed, each
 * choice's events carry its index, and each choice ends with its own last
 * event. */
#include "server/jobs.h"

#ifdef SLM_HAVE_SERVE

#include <cjson/cJSON.h>

#include "common/common.h"

cJSON *srv_native_chunk(const job *j, const char *t, size_t n) {
    cJSON *o = cJSON_CreateObject();
    char *clean = srv_utf8_clean(t ? t : "", t ? n : 0);
    cJSON_AddStringToObject(o, "content", clean ? clean : "");
    slm_xfree(clean);
    cJSON_AddBoolToObject(o, "stop", 0);
    cJSON_AddNumberToObject(o, "index", j->choice);
    return o;
}

static void add_rate(cJSON *o, const char *n_key, const char *ms_key, const char *per_tok, const char *per_s, int n,
                     double ms) {
    cJSON_AddNumberToObject(o, n_key, n);
    cJSON_AddNumberToObject(o, ms_key, ms);
    cJSON_AddNumberToObject(o, per_tok, n > 0 ? ms / n : 0.0);
    cJSON_AddNumberToObject(o, per_s, ms > 0 ? 1e3 * n / ms : 0.0);
}

cJSON *srv_native_result(const srv_api *a, const job *j) {
    cJSON *o = cJSON_CreateObject();
    char *clean = j->q.stream ? NULL : srv_utf8_clean(j->text ? j->text : "", j->tlen);
    cJSON_AddStringToObject(o, "content", clean ? clean : "");
    slm_xfree(clean);
    cJSON_AddBoolToObject(o, "stop", 1);
    cJSON_AddNumberToObject(o, "index", j->choice);
    cJSON_AddStringToObject(o, "model", a->model_name);
    cJSON_AddNumberToObject(o, "tokens_predicted", j->completion_tokens);
    cJSON_AddNumberToObject(o, "tokens_evaluated", j->prompt_tokens);
    cJSON_AddNumberToObject(o, "tokens_cached", j->cached_tokens);
    cJSON_AddStringToObject(o, "stop_type", j->stop_why == SLM_STOP_TOKEN    ? "eos"
                                            : j->stop_why == SLM_STOP_STRING ? "word"
                                                                             : "limit");
    const char *w = j->stop_word > 0 && j->stop_word <= j->q.nstop ? j->q.stop[j->stop_word - 1] : "";
    char *wc = srv_utf8_clean(w, strlen(w));
    cJSON_AddStringToObject(o, "stopping_word", wc ? wc : "");
    slm_xfree(wc);
    cJSON_AddBoolToObject(o, "truncated", 0);
    cJSON *t = cJSON_AddObjectToObject(o, "timings");
    add_rate(t, "prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second", j->prompt_tokens - j->cached_tokens,
             j->prompt_ms);
    add_rate(t, "predicted_n", "predicted_ms", "predicted_per_token_ms", "predicted_per_second", j->completion_tokens,
             j->predicted_ms);
    return o;
}

#endif /* SLM_HAVE_SERVE */
