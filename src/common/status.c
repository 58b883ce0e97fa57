/* Status codes by name, the one way to fill an slm_err (slm_errf), and
 * base names for messages. */
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
