/* safetensors reader: see safetensors.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "format/safetensors.h"

void slm_st_free(slm_st *st) {
    if (!st) return;
    for (int i = 0; i < st->n_tensors; i++) slm_xfree(st->tensors[i].name);
    slm_xfree(st->tensors);
    st->tensors = NULL;
    st->n_tensors = 0;
    slm_xfree(st->by_name);
    st->by_name = NULL;
}

const slm_st_tensor *slm_st_find(const slm_st *st, const char *name) {
    if (st->by_name) {
        int lo = 0, hi = st->n_tensors;
        while (lo < hi) {
            const int mid = lo + (hi - lo) / 2;
            const slm_st_tensor *t = &st->tensors[st->by_name[mid]];
            const int c = strcmp(t->name, name);
            if (c == 0) return t;
            if (c < 0) lo = mid + 1;
            else hi = mid;
        }
        return NULL;
    }
    for (int i = 0; i < st->n_tensors; i++)
        if (strcmp(st->tensors[i].name, name) == 0) return &st->tensors[i];
    return NULL;
}

void slm_st_rebase(slm_st *st, const void *base) {
    for (int i = 0; i < st->n_tensors; i++)
        st->tensors[i].data = (const uint8_t *)base + st->data_start + st->tensors[i].begin;
}

#ifndef SLM_HAVE_CJSON

slm_status slm_st_parse(slm_st *out, const void *data, uint64_t size, const char *name, slm_err *err) {
    (void)data;
    (void)size;
    memset(out, 0, sizeof *out);
    return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: built without JSON support (cJSON not found): cannot read safetensors",
                    name ? name : "model.safetensors");
}

#else

#include <cJSON.h>

#include "common/json.h"

/* A name made printable for messages (at most 80 bytes shown). */
static const char *pname(const char *s, char *buf, size_t cap) {
    size_t n = 0;
    for (; s[n] && n + 4 < cap && n < 80; n++) {
        unsigned char c = (unsigned char)s[n];
        buf[n] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (s[n]) buf[n++] = '.', buf[n++] = '.', buf[n++] = '.';
    buf[n] = 0;
    return buf;
}

/* A JSON number that is an integer in [0, 2^53]. */
static int get_u53(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    if (!isfinite(d) || d < 0 || d > 9007199254740992.0 || floor(d) != d) return 0;
    *out = (uint64_t)d;
    return 1;
}

static const char *const k_other_dtypes[] = {"F64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2",
                                             "F4", "I16", "I8", "U64", "U32", "U16", "BOOL", "C64"};

static int cmp_name(const void *a, const void *b) {
    const slm_st_tensor *x = *(const slm_st_tensor *const *)a, *y = *(const slm_st_tensor *const *)b;
    return strcmp(x->name, y->name);
}

static int cmp_begin(const void *a, const void *b) {
    const slm_st_tensor *x = *(const slm_st_tensor *const *)a, *y = *(const slm_st_tensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

static slm_status parse_tensor(slm_st_tensor *t, const cJSON *e, uint64_t data_size, const char *file,
                               slm_err *err) {
    char pn[96];
    const char *tn = pname(t->name, pn, sizeof pn);
    if (!cJSON_IsObject(e))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': expected an object", file, tn);

    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    if (!dt) return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': missing field 'dtype'", file, tn);
    if (!cJSON_IsString(dt) || !dt->valuestring)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': field 'dtype': expected a string", file, tn);
    const char *ds = dt->valuestring;
    uint32_t esize;
    if (!strcmp(ds, "F32")) t->type = SLM_F32, esize = 4;
    else if (!strcmp(ds, "F16")) t->type = SLM_F16, esize = 2;
    else if (!strcmp(ds, "BF16")) t->type = SLM_BF16, esize = 2;
    else if (!strcmp(ds, "U8")) t->type = SLM_I8, esize = 1; /* raw bytes: MXFP4 blocks and scales */
    else if (!strcmp(ds, "I64")) t->type = SLM_I64, esize = 8; /* integer buffers (BERT's position_ids): */
    else if (!strcmp(ds, "I32")) t->type = SLM_I32, esize = 4; /* parsed, never read as weights */
    else {
        char pd[96];
        for (size_t i = 0; i < sizeof k_other_dtypes / sizeof k_other_dtypes[0]; i++)
            if (!strcmp(ds, k_other_dtypes[i]))
                return slm_errf(err, SLM_ERR_UNSUPPORTED,
                                "%s: tensor '%s': field 'dtype': %s is not supported (supported: F32, F16, BF16, U8, I64, I32)",
                                file, tn, ds);
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': field 'dtype': unknown dtype '%s'", file, tn,
                        pname(ds, pd, sizeof pd));
    }

    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    if (!sh) return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': missing field 'shape'", file, tn);
    if (!cJSON_IsArray(sh))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': field 'shape': expected an array", file, tn);
    int nd = cJSON_GetArraySize(sh);
    if (nd > SLM_ST_MAX_DIMS)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: tensor '%s': field 'shape': %d dimensions (at most %d)", file,
                        tn, nd, SLM_ST_MAX_DIMS);
    uint64_t count = 1;
    int d = 0;
    for (const cJSON *v = sh->child; v; v = v->next, d++) {
        uint64_t x;
        if (!get_u53(v, &x) || x == 0 || x > INT64_MAX)
            return slm_errf(err, SLM_ERR_FORMAT,
                            "%s: tensor '%s': field 'shape': dimension %d is not a positive integer", file, tn, d);
        if (!slm_mul_ok(count, x, &count))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': field 'shape': element count overflows", file, tn);
        t->shape[d] = (int64_t)x;
    }
    t->n_dims = (uint32_t)nd;

    const cJSON *of = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!of) return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': missing field 'data_offsets'", file, tn);
    if (!cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2 || !get_u53(of->child, &t->begin) ||
        !get_u53(of->child->next, &t->end))
        return slm_errf(err, SLM_ERR_FORMAT,
                        "%s: tensor '%s': field 'data_offsets': expected [begin, end], two non-negative integers",
                        file, tn);
    if (t->begin > t->end)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': field 'data_offsets': begin %llu > end %llu", file,
                        tn, (unsigned long long)t->begin, (unsigned long long)t->end);
    uint64_t nbytes;
    if (!slm_mul_ok(count, esize, &nbytes))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': field 'shape': %llu elements of %s overflow", file, tn,
                        (unsigned long long)count, ds);
    if (nbytes != t->end - t->begin)
        return slm_errf(err, SLM_ERR_FORMAT,
                        "%s: tensor '%s': field 'data_offsets': %llu bytes, but the shape needs %llu (%llu x %s)",
                        file, tn, (unsigned long long)(t->end - t->begin), (unsigned long long)nbytes,
                        (unsigned long long)count, ds);
    if (t->end > data_size)
        return slm_errf(err, SLM_ERR_FORMAT,
                        "%s: tensor '%s': field 'data_offsets': [%llu, %llu) beyond the data area (%llu bytes)", file,
                        tn, (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)data_size);
    return SLM_OK;
}

slm_status slm_st_parse(slm_st *out, const void *data, uint64_t size, const char *name, slm_err *err) {
    const char *file = name ? name : "model.safetensors";
    const uint8_t *p = data;
    slm_status s = SLM_OK;
    cJSON *root = NULL;
    slm_st_tensor **idx = NULL;
    memset(out, 0, sizeof *out);

    uint64_t hlen = 0;
    if (!p || size < 8)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %llu bytes: too short for the header length (8 bytes)", file,
                        (unsigned long long)size);
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | p[i];
    if (hlen < 2 || hlen > size - 8)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: header length %llu: past the end of the file (%llu bytes)", file,
                        (unsigned long long)hlen, (unsigned long long)size);
    if (hlen > SLM_ST_MAX_HEADER)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: header length %llu: larger than the limit (%u bytes)", file,
                        (unsigned long long)hlen, SLM_ST_MAX_HEADER);
    if (p[8] != '{')
        return slm_errf(err, SLM_ERR_FORMAT, "%s: header: not a JSON object (first byte 0x%02x)", file, p[8]);
    const char *js = (const char *)p + 8, *end = NULL;
    slm_json_init_hooks();
    slm_json_oom_clear();
    root = cJSON_ParseWithLengthOpts(js, (size_t)hlen, &end, 0);
    if (!root && slm_json_oom())
        return slm_errf(err, SLM_ERR_NOMEM, "%s: header: out of memory parsing the JSON", file);
    if (!root) {
        long at = end && end >= js && end <= js + hlen ? (long)(end - js) : -1;
        return slm_errf(err, SLM_ERR_FORMAT, "%s: header: invalid JSON (at byte %ld of %llu)", file, at,
                        (unsigned long long)hlen);
    }
    /* After the object: only the padding writers add (spaces; tolerate any whitespace). */
    for (const char *q = end; q && q < js + hlen; q++)
        if (*q != ' ' && *q != '\t' && *q != '\n' && *q != '\r') {
            s = slm_errf(err, SLM_ERR_FORMAT, "%s: header: unexpected byte 0x%02x after the JSON object (at byte %ld)",
                         file, (unsigned char)*q, (long)(q - js));
            goto done;
        }
    if (!cJSON_IsObject(root)) {
        s = slm_errf(err, SLM_ERR_FORMAT, "%s: header: not a JSON object", file);
        goto done;
    }
    out->data_start = 8 + hlen;
    const uint64_t data_size = size - out->data_start;

    int n = 0;
    for (const cJSON *e = root->child; e; e = e->next)
        if (!e->string || strcmp(e->string, "__metadata__")) n++;
    out->tensors = slm_calloc(n ? (size_t)n : 1, sizeof *out->tensors);
    idx = slm_calloc(n ? (size_t)n : 1, sizeof *idx);
    if (!out->tensors || !idx) {
        s = slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory for %d tensors", file, n);
        goto done;
    }
    for (const cJSON *e = root->child; e; e = e->next) {
        if (!e->string) {
            s = slm_errf(err, SLM_ERR_FORMAT, "%s: header: a member without a name", file);
            goto done;
        }
        if (!strcmp(e->string, "__metadata__")) continue;
        slm_st_tensor *t = &out->tensors[out->n_tensors];
        if (!(t->name = slm_strdup(e->string))) {
            s = slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", file);
            goto done;
        }
        idx[out->n_tensors++] = t;
        if (!t->name[0]) {
            s = slm_errf(err, SLM_ERR_FORMAT, "%s: header: a tensor with an empty name", file);
            goto done;
        }
        if ((s = parse_tensor(t, e, data_size, file, err))) goto done;
        t->data = p + out->data_start + t->begin;
    }

    /* No name twice, no two tensors sharing a byte. */
    qsort(idx, (size_t)n, sizeof *idx, cmp_name);
    for (int i = 1; i < n; i++)
        if (!strcmp(idx[i - 1]->name, idx[i]->name)) {
            char pn[96];
            s = slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': listed twice", file,
                         pname(idx[i]->name, pn, sizeof pn));
            goto done;
        }
    if (!(out->by_name = slm_malloc(sizeof *out->by_name * (size_t)(n ? n : 1)))) {
        s = slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory for %d tensors", file, n);
        goto done;
    }
    for (int i = 0; i < n; i++) out->by_name[i] = (int)(idx[i] - out->tensors);
    qsort(idx, (size_t)n, sizeof *idx, cmp_begin);
    for (int i = 1; i < n; i++)
        if (idx[i]->begin < idx[i - 1]->end) {
            char pa[96], pb[96];
            s = slm_errf(err, SLM_ERR_FORMAT,
                         "%s: tensor '%s': field 'data_offsets': [%llu, %llu) overlaps tensor '%s' [%llu, %llu)", file,
                         pname(idx[i]->name, pa, sizeof pa), (unsigned long long)idx[i]->begin,
                         (unsigned long long)idx[i]->end, pname(idx[i - 1]->name, pb, sizeof pb),
                         (unsigned long long)idx[i - 1]->begin, (unsigned long long)idx[i - 1]->end);
            goto done;
        }

done:
    slm_xfree(idx);
    cJSON_Delete(root);
    if (s) slm_st_free(out);
    return s;
}

#endif
