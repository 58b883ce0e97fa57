/* Status codes by name, the one way to fill an slm_err (slm_errf), base
 * names for messages, and where a piece of text may be cut (whole UTF-8
 * sequences). */
#include <stdio.h>

#include "common.h"

const char *slm_status_str(slm_status s) {
    switch (s) {
    case SLM_OK: return "ok";
    case SLM_ERR_IO: return "i/o error";
    case SLM_ERR_FORMAT: return "format error";
    case SLM_ERR_UNSUPPORTED: return "unsupported";
    case SLM_ERR_NOMEM: return "out of memory";
    case SLM_ERR_ARG: return "invalid argument";
    case SLM_ERR_CAPACITY: return "capacity exceeded";
    case SLM_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

slm_status slm_errf(slm_err *err, slm_status s, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = s;
    }
    return s;
}

const char *slm_basename(const char *path) {
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

size_t slm_utf8_complete(const char *s, size_t n) {
    size_t i = n, back = 0;
    while (i > 0 && back < 4 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) { i--; back++; }
    if (i == 0) return n;
    unsigned char c = (unsigned char)s[i - 1];
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (need > 1 && back + 1 < need) return i - 1;
    return n;
}
