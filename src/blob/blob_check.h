/* blob/blob_check.h — the blob reader's contexts and its validation of
 * task records (blob_check.c), private to blob/. */
#ifndef SLM_BLOB_CHECK_H
#define SLM_BLOB_CHECK_H

#include <stdarg.h>
#include <stdio.h>

#include "blob/format.h"

typedef struct rctx {
    slm_blob *b;
    slm_err *err;
    const char *name;
    const Elf64_Shdr *sh;   /* [shnum], copied out of the file */
    uint32_t shnum;
    const char *shstr;
    uint64_t shstr_size;
    slm_compiled *c;
    uint64_t const_bytes;
    uint64_t table_bytes;   /* one RoPE table (const_bytes holds one or two) */
    uint64_t table1_bytes;  /* table 1 (gemma4's window layers: their own width; else table_bytes) */
} rctx;

/* A message naming the blob and (sec not NULL) the section, status SLM_ERR_FORMAT. */
static inline slm_status blob_vbad(slm_err *err, const char *name, const char *sec, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
static inline slm_status blob_vbad(slm_err *err, const char *name, const char *sec, const char *fmt, va_list ap) {
    char msg[SLM_ERRLEN];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (sec) return slm_errf(err, SLM_ERR_FORMAT, "%s: section %s: %s", name, sec, msg);
    return slm_errf(err, SLM_ERR_FORMAT, "%s: %s", name, msg);
}

/* A message naming the blob (r->name); the format names the section. */
static inline slm_status rbad(rctx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline slm_status rbad(rctx *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const slm_status s = blob_vbad(r->err, r->name, NULL, fmt, ap);
    va_end(ap);
    return s;
}

/* A field of section sec in [lo, hi], else refused naming it. */
#define SRANGE(sec, v, lo, hi, what)                                                                       \
    do {                                                                                                   \
        if ((int64_t)(v) < (int64_t)(lo) || (int64_t)(v) > (int64_t)(hi))                                 \
            return rbad(r, "section %s: %s %lld out of range (%lld..%lld)", sec, what, (long long)(v),       \
                       (long long)(lo), (long long)(hi));                                                  \
    } while (0)
/* blob_embed.c: .slm.embed's record p [size] (before the config, which
 * takes the encoder kind and the experts' layer rule from it), and after
 * the tensor table the heads it names. */
slm_status blob_read_embed(rctx *r, const uint8_t *p, uint64_t size);
slm_status blob_check_heads(rctx *r);

/* ---- programs ------------------------------------------------------------- */

typedef struct pctx {
    rctx *r;
    slm_program *p;
    int idx;
    const char *sec;  /* section name for messages */
} pctx;

static inline slm_status pbad(pctx *q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline slm_status pbad(pctx *q, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const slm_status s = blob_vbad(q->r->err, q->r->name, q->sec, fmt, ap);
    va_end(ap);
    return s;
}

/* Task ti of q's program: its op, flags and fields in range, every operand's
 * bytes inside its space for the program's rows. */
slm_status blob_check_task(pctx *q, int ti);

#endif
