/* common/ — status messages, the allocator hook, bounded readers, dtypes.
 * Every other layer includes this; it depends on nothing but libc. */
#ifndef SLM_COMMON_H
#define SLM_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "staticlm.h"

#define SLM_ERRLEN 512

/* An error record: filled by the function that fails, carried up to the
 * handle. msg reads like "model.gguf: tensor 'x': offset 0x.. beyond end". */
typedef struct slm_err {
    slm_status status;
    char msg[SLM_ERRLEN];
} slm_err;

/* Set err (if non-NULL) and return s. printf-style. */
slm_status slm_errf(slm_err *err, slm_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Allocation through the hook installed with slm_set_allocator. */
void *slm_malloc(size_t n);
void *slm_calloc(size_t count, size_t size); /* overflow-checked, zeroed */
void *slm_realloc(void *p, size_t n);
void slm_xfree(void *p);
char *slm_strdup(const char *s);
/* 64-byte aligned, zeroed; freed with slm_aligned_free. */
void *slm_aligned_alloc(size_t n);
void slm_aligned_free(void *p);

/* Overflow-checked arithmetic: return 0 on overflow. */
static inline int slm_mul_ok(uint64_t a, uint64_t b, uint64_t *r) {
    return !__builtin_mul_overflow(a, b, r);
}
static inline int slm_add_ok(uint64_t a, uint64_t b, uint64_t *r) {
    return !__builtin_add_overflow(a, b, r);
}

/* A bounded little-endian reader over untrusted bytes. Every get checks the
 * remaining length first; on failure it returns 0 and leaves pos unchanged. */
typedef struct slm_rd {
    const uint8_t *p;
    uint64_t len;
    uint64_t pos;
} slm_rd;

static inline int slm_rd_need(const slm_rd *r, uint64_t n) { return r->pos <= r->len && n <= r->len - r->pos; }
static inline int slm_rd_bytes(slm_rd *r, void *dst, uint64_t n) {
    if (!slm_rd_need(r, n)) return 0;
    memcpy(dst, r->p + r->pos, (size_t)n);
    r->pos += n;
    return 1;
}
static inline int slm_rd_u8(slm_rd *r, uint8_t *v) { return slm_rd_bytes(r, v, 1); }
static inline int slm_rd_u32(slm_rd *r, uint32_t *v) { return slm_rd_bytes(r, v, 4); }
static inline int slm_rd_i32(slm_rd *r, int32_t *v) { return slm_rd_bytes(r, v, 4); }
static inline int slm_rd_u64(slm_rd *r, uint64_t *v) { return slm_rd_bytes(r, v, 8); }
static inline int slm_rd_f32(slm_rd *r, float *v) { return slm_rd_bytes(r, v, 4); }
/* A pointer to n bytes in place (no copy). */
static inline int slm_rd_ptr(slm_rd *r, uint64_t n, const uint8_t **out) {
    if (!slm_rd_need(r, n)) return 0;
    *out = r->p + r->pos;
    r->pos += n;
    return 1;
}

/* A read-only mapping of a whole file. */
typedef struct slm_map {
    void *data;
    uint64_t size;
} slm_map;
slm_status slm_map_file(slm_map *m, const char *path, slm_err *err);
void slm_unmap(slm_map *m);
/* The file `name` in path's folder (a tokenizer.json's tokenizer_config.json)
 * mapped into *m when it exists and maps: 1, else 0 (*m zeroed). */
int slm_map_beside(slm_map *m, const char *path, const char *name);
/* Base name of a path, for messages. */
const char *slm_basename(const char *path);
/* Length of s[0..n) without a trailing incomplete UTF-8 sequence. */
size_t slm_utf8_complete(const char *s, size_t n);
/* A copy of s[0..n) with invalid UTF-8 replaced by U+FFFD (slm_xfree); NULL
 * when out of memory. */
char *slm_utf8_clean(const char *s, size_t n);

#endif
