/* A safetensors writer for tests (Hugging Face folders written from C).
 * Include after t.h. */
#ifndef SLM_TEST_ST_WRITE_H
#define SLM_TEST_ST_WRITE_H

#include <stdlib.h>
#include <string.h>

#include "common/dtype.h"

typedef struct st_item {
    char name[96];
    const char *dtype; /* "F32", "F16", "BF16" */
    int n_dims;
    int64_t shape[2];
    const float *f;    /* values (already representable in dtype) */
} st_item;

static size_t dsize(const char *dt) { return strcmp(dt, "F32") ? 2 : 4; }

static void put_elems(uint8_t *out, const char *dt, const float *f, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(dt, "F32")) memcpy(out + 4 * i, &f[i], 4);
        else {
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

#endif
