/* A safetensors writer for tests (Hugging Face folders written from C).
 * Include after t.h. */
#ifndef SLM_TEST_ST_WRITE_H
#define SLM_TEST_ST_WRITE_H

#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/dtype.h"

typedef struct st_item {
    char name[96];
    const char *dtype; /* "F32", "F16", "BF16" (and "I64": integers) */
    int n_dims;        /* 1..3 */
    int64_t shape[3];
    const float *f;    /* values (already representable in dtype) */
} st_item;

static size_t dsize(const char *dt) { return !strcmp(dt, "F32") ? 4 : !strcmp(dt, "I64") ? 8 : 2; }

static void put_elems(uint8_t *out, const char *dt, const float *f, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(dt, "F32")) memcpy(out + 4 * i, &f[i], 4);
        else if (!strcmp(dt, "I64")) { /* an integer buffer (BERT's position_ids) */
            const int64_t v = (int64_t)f[i];
            memcpy(out + 8 * i, &v, 8);
        } else {
            uint16_t h = !strcmp(dt, "F16") ? slm_f32_to_f16(f[i]) : slm_f32_to_bf16(f[i]);
            out[2 * i] = (uint8_t)h;
            out[2 * i + 1] = (uint8_t)(h >> 8);
        }
    }
}

/* Write items to path. pad_to: the data area starts at a multiple of 8 when
 * 0; at 8k + 2 when 2 (F32 tensors are then misaligned). */
static int write_st(const char *path, const st_item *it, int n, int pad_to) {
    size_t cap = 256 + (size_t)n * 200, hl = 0, off = 0;
    char *h = malloc(cap);
    hl += (size_t)snprintf(h + hl, cap - hl, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        size_t cnt = 1;
        for (int d = 0; d < it[i].n_dims; d++) cnt *= (size_t)it[i].shape[d];
        size_t nb = cnt * dsize(it[i].dtype);
        hl += (size_t)snprintf(h + hl, cap - hl, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", it[i].name, it[i].dtype);
        for (int d = 0; d < it[i].n_dims; d++)
            hl += (size_t)snprintf(h + hl, cap - hl, d ? ",%lld" : "%lld", (long long)it[i].shape[d]);
        hl += (size_t)snprintf(h + hl, cap - hl, "],\"data_offsets\":[%zu,%zu]}", off, off + nb);
        off += nb;
    }
    hl += (size_t)snprintf(h + hl, cap - hl, "}");
    while ((8 + hl) % 8 != (size_t)pad_to) h[hl++] = ' ';
    uint8_t *buf = calloc(1, 8 + hl + off);
    for (int b = 0; b < 8; b++) buf[b] = (uint8_t)((uint64_t)hl >> (8 * b));
    memcpy(buf + 8, h, hl);
    size_t o = 8 + hl;
    for (int i = 0; i < n; i++) {
        size_t cnt = 1;
        for (int d = 0; d < it[i].n_dims; d++) cnt *= (size_t)it[i].shape[d];
        put_elems(buf + o, it[i].dtype, it[i].f, cnt);
        o += cnt * dsize(it[i].dtype);
    }
    int ok = t_write_file(path, buf, o);
    free(buf);
    free(h);
    return ok;
}

/* rm -rf dir (test folders only). */
static void st_rm_dir(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "  could not remove %s\n", dir);
}

/* sentence-transformers' modules of an embedding model's folder: modules.json
 * (Transformer, then Pooling) and 1_Pooling/config.json, CLS (cls) or mean
 * pooling of dim-wide rows; 1 if written. */
static inline int st_write_pooling(const char *dir, int dim, int cls) {
    char path[600], cfg[256];
    static const char *const modules = "[{\"idx\": 0, \"name\": \"0\", \"path\": \"\", \"type\": "
        "\"sentence_transformers.models.Transformer\"}, {\"idx\": 1, \"name\": \"1\", \"path\": \"1_Pooling\", "
        "\"type\": \"sentence_transformers.models.Pooling\"}]";
    snprintf(path, sizeof path, "%s/modules.json", dir);
    if (!t_write_file(path, modules, strlen(modules))) return 0;
    snprintf(path, sizeof path, "%s/1_Pooling", dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/1_Pooling/config.json", dir);
    const int n = snprintf(cfg, sizeof cfg, "{\"word_embedding_dimension\": %d, \"pooling_mode_cls_token\": %s, "
                           "\"pooling_mode_mean_tokens\": %s}", dim, cls ? "true" : "false", cls ? "false" : "true");
    return t_write_file(path, cfg, (size_t)n);
}

/* The weights of a Hugging Face folder: dir/model.safetensors when shards
 * is 0, else items dealt round-robin over model-K-of-N.safetensors with
 * model.safetensors.index.json naming each tensor's shard. */
static int st_write_weights(const char *dir, const st_item *it, int n, int shards, int pad_to) {
    char path[512];
    if (!shards) {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        return write_st(path, it, n, pad_to);
    }
    size_t cap = 64 + (size_t)n * 200, il = 0;
    char *idx = malloc(cap);
    st_item *part = malloc(sizeof *part * (size_t)(n > 0 ? n : 1));
    il += (size_t)snprintf(idx, cap, "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {");
    int ok = idx && part;
    for (int k = 0; ok && k < shards; k++) {
        int np = 0;
        for (int i = k; i < n; i += shards) {
            part[np++] = it[i];
            il += (size_t)snprintf(idx + il, cap - il, "%s\"%s\": \"model-%05d-of-%05d.safetensors\"",
                                   il > 60 ? ", " : "", it[i].name, k + 1, shards);
        }
        snprintf(path, sizeof path, "%s/model-%05d-of-%05d.safetensors", dir, k + 1, shards);
        ok &= write_st(path, part, np, pad_to);
    }
    il += (size_t)snprintf(idx + il, cap - il, "}}\n");
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    ok = ok && t_write_file(path, idx, il);
    free(part);
    free(idx);
    return ok;
}

/* ---- random weights of a test model ------------------------------------- */

static uint64_t g_rng; /* seed it before a model */
static double urand(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return ((g_rng >> 11) + 0.5) / 9007199254740992.0;
}
static float nrand(void) { return (float)(sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand())); }

/* A folder's tensors and the float values they hold (as rounded to their
 * dtype); a test of deep models may define ST_MAX_TENSORS larger before
 * including this. */
#ifndef ST_MAX_TENSORS
#define ST_MAX_TENSORS 160
#endif
typedef struct weights {
    st_item it[ST_MAX_TENSORS];
    float *f[ST_MAX_TENSORS];
    int n;
} weights;

/* x as the dtype stores it */
static float round_to(const char *dt, float x) {
    if (!strcmp(dt, "F16")) return slm_f16_to_f32(slm_f32_to_f16(x));
    if (!strcmp(dt, "BF16")) return slm_bf16_to_f32(slm_f32_to_bf16(x));
    return x;
}

/* A [rows, cols] matrix (rows 0: a vector of cols) of bias + scale * N(0, 1), rounded to dt. */
static float *add_w(weights *w, const char *name, const char *dt, int64_t rows, int64_t cols, float scale, float bias) {
    st_item *t = &w->it[w->n];
    size_t k = strlen(name); /* cut to the field (not snprintf: gcc's truncation warning depends on inlining) */
    if (k >= sizeof t->name) k = sizeof t->name - 1;
    memcpy(t->name, name, k);
    t->name[k] = 0;
    t->dtype = dt;
    t->n_dims = rows > 0 ? 2 : 1;
    t->shape[0] = rows > 0 ? rows : cols;
    t->shape[1] = cols;
    size_t n = (size_t)((rows > 0 ? rows : 1) * cols);
    float *f = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) f[i] = round_to(dt, bias + scale * nrand());
    t->f = w->f[w->n++] = f;
    return f;
}

static void free_weights(weights *w) {
    for (int i = 0; i < w->n; i++) free(w->f[i]);
    w->n = 0;
}

#endif
