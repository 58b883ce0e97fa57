/* Device profiles for the simulator: JSON in, slm_sim_profile out, every
 * key checked (docs/simulate.md lists them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "program/simulate.h"

#ifdef SLM_HAVE_CJSON
#include <cjson/cJSON.h>

#include "common/json.h"

typedef struct pctx {
    const char *file;
    slm_err *err;
} pctx;

static slm_status bad(const pctx *c, const char *key, const char *what) {
    return slm_errf(c->err, SLM_ERR_FORMAT, "%s: key '%s': %s", c->file, key, what);
}

/* Every member of o must be one of names (NULL-terminated). */
static slm_status only_keys(const pctx *c, const cJSON *o, const char *prefix, const char *const *names) {
    const cJSON *m;
    cJSON_ArrayForEach(m, o) {
        int ok = 0;
        for (int i = 0; names[i]; i++)
            if (m->string && !strcmp(m->string, names[i])) ok = 1;
        if (!ok) {
            char k[128];
            snprintf(k, sizeof k, "%s%s", prefix, m->string ? m->string : "?");
            return bad(c, k, "unknown key (a typo? docs/simulate.md lists the keys)");
        }
    }
    return SLM_OK;
}

/* A number in [lo, hi] at o[name] (key = its full name for errors);
 * required: absent is an error, else *out keeps its default. */
static slm_status num(const pctx *c, const cJSON *o, const char *name, const char *key, int required, double lo,
                      double hi, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!v) return required ? bad(c, key, "missing") : SLM_OK;
    if (!cJSON_IsNumber(v)) return bad(c, key, "must be a number");
    if (!(v->valuedouble >= lo && v->valuedouble <= hi)) {
        char w[96];
        snprintf(w, sizeof w, "%g is out of range [%g, %g]", v->valuedouble, lo, hi);
        return bad(c, key, w);
    }
    *out = v->valuedouble;
    return SLM_OK;
}

static slm_status flag(const pctx *c, const cJSON *o, const char *name, const char *key, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!v) return SLM_OK;
    if (!cJSON_IsBool(v)) return bad(c, key, "must be true or false");
    *out = cJSON_IsTrue(v);
    return SLM_OK;
}

static slm_status obj(const pctx *c, const cJSON *root, const char *name, const cJSON **out) {
    *out = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!*out) return bad(c, name, "missing");
    if (!cJSON_IsObject(*out)) return bad(c, name, "must be an object");
    return SLM_OK;
}

static slm_status parse_transfer(const pctx *c, const cJSON *root, slm_sim_profile *p) {
    static const char *const keys[] = {"gbps", "cache_bytes", "cache_gbps", "note", NULL};
    const cJSON *o;
    slm_status s;
    double cb = 0;
    if ((s = obj(c, root, "transfer", &o)) || (s = only_keys(c, o, "transfer.", keys)) ||
        (s = num(c, o, "gbps", "transfer.gbps", 1, 1e-3, 1e6, &p->xfer_gbps)) ||
        (s = num(c, o, "cache_gbps", "transfer.cache_gbps", 0, 0, 1e6, &p->cache_gbps)) ||
        (s = num(c, o, "cache_bytes", "transfer.cache_bytes", 0, 0, 1e15, &cb)))
        return s;
    p->cache_bytes = (uint64_t)cb;
    return SLM_OK;
}

static slm_status parse_matrix(const pctx *c, const cJSON *root, slm_sim_profile *p) {
    static const char *const keys[] = {"units", "gops", "note", NULL};
    const cJSON *o, *g;
    slm_status s;
    double u = 0;
    if ((s = obj(c, root, "matrix", &o)) || (s = only_keys(c, o, "matrix.", keys)) ||
        (s = num(c, o, "units", "matrix.units", 1, 1, SLM_SIM_MAX_UNITS, &u)))
        return s;
    p->matrix_units = (int)u;
    g = cJSON_GetObjectItemCaseSensitive(o, "gops");
    if (!g) return bad(c, "matrix.gops", "missing");
    if (!cJSON_IsObject(g)) return bad(c, "matrix.gops", "must be an object of weight type -> G ops/s");
    const cJSON *m;
    cJSON_ArrayForEach(m, g) {
        char key[96];
        snprintf(key, sizeof key, "matrix.gops.%s", m->string ? m->string : "?");
        if (!cJSON_IsNumber(m) || !(m->valuedouble > 0 && m->valuedouble <= 1e9))
            return bad(c, key, "must be a number > 0 (G ops/s)");
        if (m->string && !strcmp(m->string, "default")) {
            p->matrix_default_gops = m->valuedouble;
            continue;
        }
        if (m->string && !strcmp(m->string, "attention")) {
            p->matrix_attention_gops = m->valuedouble;
            continue;
        }
        int t = -1;
        for (int i = 0; i < SLM_DTYPE_COUNT && m->string; i++) {
            const char *n = slm_dtype_name((uint32_t)i);
            if (n && slm_dtype_get((uint32_t)i) && !strcmp(n, m->string)) t = i;
        }
        if (t < 0) return bad(c, key, "not a weight type (f32, f16, bf16, q8_0, q4_0, q4_k, q6_k, ...), 'attention' or 'default'");
        p->matrix_gops[t] = m->valuedouble;
    }
    if (!(p->matrix_default_gops > 0)) return bad(c, "matrix.gops.default", "missing (the rate of other types)");
    return SLM_OK;
}

static slm_status parse_vector(const pctx *c, const cJSON *root, slm_sim_profile *p) {
    static const char *const keys[] = {"units", "gflops", "shared_with_matrix", "note", NULL};
    const cJSON *o;
    slm_status s;
    double u = 0;
    if ((s = obj(c, root, "vector", &o)) || (s = only_keys(c, o, "vector.", keys)) ||
        (s = num(c, o, "units", "vector.units", 1, 1, SLM_SIM_MAX_UNITS, &u)) ||
        (s = num(c, o, "gflops", "vector.gflops", 1, 1e-3, 1e9, &p->vector_gflops)) ||
        (s = flag(c, o, "shared_with_matrix", "vector.shared_with_matrix", &p->shared_units)))
        return s;
    p->vector_units = (int)u;
    if (p->shared_units && p->vector_units != p->matrix_units)
        return bad(c, "vector.units", "must equal matrix.units when shared_with_matrix is true");
    return SLM_OK;
}

static slm_status parse_root(const pctx *c, const cJSON *root, slm_sim_profile *p) {
    static const char *const keys[] = {"name",      "description",     "estimate",   "static_rows",    "transfer",
                                       "matrix",    "vector",          "scratchpad_bytes", "tiles_in_flight",
                                       "launch_ns", "barrier_ns",      "call_ns",    "sources",        "calibration",
                                       "activation_bytes", NULL};
    slm_status s;
    if (!cJSON_IsObject(root)) return bad(c, "(top level)", "must be an object");
    if ((s = only_keys(c, root, "", keys))) return s;
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, "name");
    if (!n) return bad(c, "name", "missing");
    if (!cJSON_IsString(n) || !n->valuestring[0] || strlen(n->valuestring) >= sizeof p->name)
        return bad(c, "name", "must be a non-empty string of at most 63 bytes");
    snprintf(p->name, sizeof p->name, "%s", n->valuestring);
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "description");
    if (d && !cJSON_IsString(d)) return bad(c, "description", "must be a string");
    if (d) snprintf(p->description, sizeof p->description, "%s", d->valuestring);
    double sb = 0, tif = 2, ab = 4;
    if ((s = flag(c, root, "estimate", "estimate", &p->estimate)) ||
        (s = flag(c, root, "static_rows", "static_rows", &p->static_rows)) || (s = parse_transfer(c, root, p)) ||
        (s = parse_matrix(c, root, p)) || (s = parse_vector(c, root, p)) ||
        (s = num(c, root, "scratchpad_bytes", "scratchpad_bytes", 1, 0, 1e15, &sb)) ||
        (s = num(c, root, "tiles_in_flight", "tiles_in_flight", 1, 1, 8, &tif)) ||
        (s = num(c, root, "launch_ns", "launch_ns", 1, 0, 1e9, &p->launch_ns)) ||
        (s = num(c, root, "barrier_ns", "barrier_ns", 1, 0, 1e9, &p->barrier_ns)) ||
        (s = num(c, root, "call_ns", "call_ns", 0, 0, 1e10, &p->call_ns)) ||
        (s = num(c, root, "activation_bytes", "activation_bytes", 0, 1, 8, &ab)))
        return s;
    if (ab != (int)ab) return bad(c, "activation_bytes", "must be a whole number");
    p->activation_bytes = (int)ab;
    if (tif != (int)tif) return bad(c, "tiles_in_flight", "must be a whole number");
    p->scratch_bytes = (uint64_t)sb;
    p->tiles_in_flight = (int)tif;
    return SLM_OK;
}

slm_status slm_sim_profile_parse(slm_sim_profile *p, const char *json, const char *file, slm_err *err) {
    memset(p, 0, sizeof *p);
    slm_json_init_hooks();
    slm_json_oom_clear();
    cJSON *root = cJSON_Parse(json);
    if (!root) {
        if (slm_json_oom()) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory parsing the profile", file);
        const char *at = cJSON_GetErrorPtr();
        return slm_errf(err, SLM_ERR_FORMAT, "%s: not valid JSON (near byte %ld)", file,
                        at && at >= json ? (long)(at - json) : -1L);
    }
    pctx c = {file, err};
    slm_status s = parse_root(&c, root, p);
    cJSON_Delete(root);
    return s;
}

#else

slm_status slm_sim_profile_parse(slm_sim_profile *p, const char *json, const char *file, slm_err *err) {
    (void)json;
    memset(p, 0, sizeof *p);
    return slm_errf(err, SLM_ERR_ARG, "%s: this build has no JSON reader (install libcjson-dev and rebuild)", file);
}

#endif

slm_status slm_sim_profile_load(slm_sim_profile *p, const char *path, slm_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return slm_errf(err, SLM_ERR_IO, "%s: cannot open the device profile", path);
    char *buf = NULL;
    long n = -1;
    if (!fseek(f, 0, SEEK_END)) n = ftell(f);
    if (n < 0 || n > (1 << 20) || fseek(f, 0, SEEK_SET)) {
        fclose(f);
        return slm_errf(err, SLM_ERR_FORMAT, "%s: a profile is a JSON file of at most 1 MiB", path);
    }
    if (!(buf = slm_malloc((size_t)n + 1))) {
        fclose(f);
        return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", path);
    }
    const size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    if (got != (size_t)n) {
        slm_xfree(buf);
        return slm_errf(err, SLM_ERR_IO, "%s: read error", path);
    }
    buf[n] = 0;
    slm_status s = slm_sim_profile_parse(p, buf, path, err);
    slm_xfree(buf);
    return s;
}
