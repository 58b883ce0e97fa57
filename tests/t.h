/* A minimal test harness: CHECK records a failure and continues; the file's
 * main() calls T_RUN for each test and ends with T_DONE, which prints
 * "N passed, N failed" and returns non-zero on any failure. */
#ifndef SLM_T_H
#define SLM_T_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_checks_failed_ = 0;
static int t_tests_passed_ = 0, t_tests_failed_ = 0;

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "  %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            t_checks_failed_++;                                                  \
        }                                                                        \
    } while (0)

#define CHECKF(cond, ...)                                                        \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "  %s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
            t_checks_failed_++;                                                  \
        }                                                                        \
    } while (0)

#define T_RUN(fn)                                                                \
    do {                                                                         \
        int before_ = t_checks_failed_;                                          \
        fprintf(stderr, "[ RUN  ] %s\n", #fn);                                   \
        fn();                                                                    \
        if (t_checks_failed_ == before_) {                                       \
            t_tests_passed_++;                                                   \
            fprintf(stderr, "[  OK  ] %s\n", #fn);                               \
        } else {                                                                 \
            t_tests_failed_++;                                                   \
            fprintf(stderr, "[ FAIL ] %s\n", #fn);                               \
        }                                                                        \
    } while (0)

#define T_DONE()                                                                 \
    do {                                                                         \
        printf("%d passed, %d failed\n", t_tests_passed_, t_tests_failed_);      \
        return t_tests_failed_ ? 1 : 0;                                          \
    } while (0)

/* Read a whole file into a malloc'd buffer (NUL-terminated); NULL if absent. */
static inline char *t_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    fclose(f);
    if (buf) { buf[n] = 0; if (len) *len = (size_t)n; }
    return buf;
}

static inline int t_write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    size_t w = fwrite(data, 1, len, f);
    fclose(f);
    return w == len;
}

#define T_SHARED(rel) SLM_SHARED_DIR "/" rel

#endif
