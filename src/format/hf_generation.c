/* A Hugging Face folder's generation_config.json: the sampling values
 * llama.cpp's converter copies into a GGUF as general.sampling.* (gguf-py's
 * Metadata.load: temperature as temp, the others by their own names), kept
 * as text on the model (m->meta) so that slm_model_meta gives a folder the
 * values its GGUF twin would have, and a blob keeps them. Keys of other
 * names (do_sample, repetition_penalty, max_length, ...) are not copied:
 * the converter does not copy them either. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "format/hf.h"

#ifndef SLM_HAVE_CJSON

slm_status slm_hf_generation_parse(slm_model_file *m, const char *json, size_t len, const char *shown, slm_err *err) {
    (void)json, (void)len, (void)shown, (void)err;
    m->n_meta = 0;
    return SLM_OK;
}

slm_status slm_hf_generation_meta(slm_model_file *m, const char *path, const char *dir, slm_err *err) {
    (void)m, (void)path, (void)dir, (void)err;
    return SLM_OK;
}

#else

#include <cJSON.h>

#include "common/json.h"

slm_status slm_hf_generation_parse(slm_model_file *m, const char *json, size_t len, const char *shown, slm_err *err) {
    /* json key, GGUF key suffix, kind: 0 float (f32, as the converter writes it), 1 integer, 2 string */
    static const struct { const char *json, *gguf; int kind; } k_keys[] = {
        {"sequence", "sequence", 2},         {"top_k", "top_k", 1},
        {"top_p", "top_p", 0},               {"min_p", "min_p", 0},
        {"xtc_probability", "xtc_probability", 0}, {"xtc_threshold", "xtc_threshold", 0},
        {"temperature", "temp", 0},          {"penalty_last_n", "penalty_last_n", 1},
        {"penalty_repeat", "penalty_repeat", 0}, {"mirostat", "mirostat", 1},
        {"mirostat_tau", "mirostat_tau", 0}, {"mirostat_eta", "mirostat_eta", 0},
    };
    _Static_assert(sizeof k_keys / sizeof k_keys[0] <= SLM_MAX_FOLDER_META, "room for every key");
    m->n_meta = 0;
    cJSON *o = cJSON_ParseWithLength(json, len);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return slm_errf(err, slm_json_oom() ? SLM_ERR_NOMEM : SLM_ERR_FORMAT, "%s: %s", shown,
                        slm_json_oom() ? "out of memory parsing the JSON" : "invalid JSON (an object expected)");
    }
    for (size_t i = 0; i < sizeof k_keys / sizeof k_keys[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k_keys[i].json);
        if (!v || cJSON_IsNull(v)) continue;
        char *val = m->meta[m->n_meta].val;
        const size_t cap = sizeof m->meta[0].val;
        int n = -1;
        if (k_keys[i].kind == 2 && cJSON_IsString(v)) n = snprintf(val, cap, "%s", v->valuestring);
        else if (k_keys[i].kind == 1 && cJSON_IsNumber(v) && v->valuedouble >= -2147483648.0 &&
                 v->valuedouble <= 2147483647.0 && v->valuedouble == (double)(long long)v->valuedouble)
            n = snprintf(val, cap, "%lld", (long long)v->valuedouble);
        else if (k_keys[i].kind == 0 && cJSON_IsNumber(v) && fabs(v->valuedouble) <= FLT_MAX)
            n = slm_gguf_f32_text(val, cap, (float)v->valuedouble);
        if (n < 0 || (size_t)n >= cap) {
            cJSON_Delete(o);
            m->n_meta = 0;
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected %s", shown, k_keys[i].json,
                            k_keys[i].kind == 2 ? "a string of under 64 bytes"
                            : k_keys[i].kind == 1 ? "an integer" : "a number in f32's range");
        }
        snprintf(m->meta[m->n_meta].key, sizeof m->meta[0].key, "general.sampling.%s", k_keys[i].gguf);
        m->n_meta++;
    }
    cJSON_Delete(o);
    return SLM_OK;
}

slm_status slm_hf_generation_meta(slm_model_file *m, const char *path, const char *dir, slm_err *err) {
    char shown[320], *buf = NULL;
    size_t len = 0;
    snprintf(shown, sizeof shown, "%s/generation_config.json", dir);
    slm_status s = slm_hf_read_small(path, shown, 0, &buf, &len, err);
    if (s || !buf) return s;
    s = slm_hf_generation_parse(m, buf, len, shown, err);
    slm_xfree(buf);
    return s;
}

#endif
