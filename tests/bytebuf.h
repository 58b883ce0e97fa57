/* A growing byte buffer for tests that build files by hand (GGUF headers,
 * hostile inputs): little-endian integers and GGUF strings. Aborts when
 * memory runs out (a test helper, not library code). */
#ifndef SLM_TESTS_BYTEBUF_H
#define SLM_TESTS_BYTEBUF_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct buf {
    uint8_t *p;
    size_t len, cap;
} buf;

static void put(buf *b, const void *d, size_t n) {
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    if (n) memcpy(b->p + b->len, d, n);
    b->len += n;
}
static inline void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static inline void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
/* a GGUF string: u64 length, then the bytes */
static inline void put_str(buf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

#endif
