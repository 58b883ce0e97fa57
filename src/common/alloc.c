/* The allocator hook (slm_set_allocator) and every heap allocation of the
 * library through it: plain, zeroed (overflow-checked), resized, freed,
 * duplicated strings, and 64-byte aligned blocks. */
#include <stdlib.h>

#include "common.h"

static void *libc_alloc(void *ud, size_t n) { (void)ud; return malloc(n); }
static void *libc_realloc(void *ud, void *p, size_t n) { (void)ud; return realloc(p, n); }
static void libc_free(void *ud, void *p) { (void)ud; free(p); }

static slm_allocator g_alloc = {libc_alloc, libc_realloc, libc_free, NULL};

void slm_set_allocator(const slm_allocator *a) {
    if (a) g_alloc = *a;
    else g_alloc = (slm_allocator){libc_alloc, libc_realloc, libc_free, NULL};
}

void *slm_malloc(size_t n) { return g_alloc.alloc(g_alloc.ud, n ? n : 1); }

void *slm_calloc(size_t count, size_t size) {
    uint64_t n;
    if (!slm_mul_ok(count, size, &n) || n > SIZE_MAX) return NULL;
    void *p = slm_malloc((size_t)n);
    if (p) memset(p, 0, (size_t)n);
    return p;
}

void *slm_realloc(void *p, size_t n) { return g_alloc.realloc(g_alloc.ud, p, n ? n : 1); }

void slm_xfree(void *p) {
    if (p) g_alloc.free(g_alloc.ud, p);
}

char *slm_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = slm_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Over-allocate and keep the raw pointer just below the aligned block. */
void *slm_aligned_alloc(size_t n) {
    if (n > SIZE_MAX - 64 - sizeof(void *)) return NULL;
    uint8_t *raw = slm_malloc(n + 64 + sizeof(void *));
    if (!raw) return NULL;
    uintptr_t a = ((uintptr_t)(raw + sizeof(void *)) + 63) & ~(uintptr_t)63;
    ((void **)a)[-1] = raw;
    memset((void *)a, 0, n);
    return (void *)a;
}

void slm_aligned_free(void *p) {
    if (p) slm_xfree(((void **)p)[-1]);
}
