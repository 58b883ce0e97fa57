/* Status codes by name, the one way to fill an slm_err (slm_errf), base
 * names for messages, and where a piece of text may be cut (whole UTF-8
 * sequences). */
#include <stdint.h>
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

char *slm_utf8_clean(const char *s, size_t n) {
    if (n > (SIZE_MAX - 1) / 3) return NULL;
    char *o = slm_malloc(n * 3 + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : (c >= 0xC2 && c < 0xE0) ? 2 : (c >= 0xE0 && c < 0xF0) ? 3 : (c >= 0xF0 && c < 0xF5) ? 4 : 0;
        int ok = len > 0 && i + len <= n;
        for (size_t q = 1; ok && q < len; q++) ok = ((unsigned char)s[i + q] & 0xC0) == 0x80;
        if (ok && len == 3 && ((c == 0xE0 && (unsigned char)s[i + 1] < 0xA0) || (c == 0xED && (unsigned char)s[i + 1] >= 0xA0))) ok = 0;
        if (ok && len == 4 && ((c == 0xF0 && (unsigned char)s[i + 1] < 0x90) || (c == 0xF4 && (unsigned char)s[i + 1] >= 0x90))) ok = 0;
        if (ok) {
            memcpy(o + k, s + i, len);
            k += len;
            i += len;
        } else {
            memcpy(o + k, "\xEF\xBF\xBD", 3);
            k += 3;
            i++;
        }
    }
    o[k] = 0;
    return o;
}
