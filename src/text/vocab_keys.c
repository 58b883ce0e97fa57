/* Optional keys of a GGUF vocabulary, and names shown in messages (text/vocab_keys.h). */
#include "text/vocab_keys.h"

slm_status slm_vocab_key_id(const slm_gguf *g, const char *name, const char *key, int n, int def, int required_default,
                            int *id, slm_err *err) {
    *id = def < n ? def : -1;
    if (slm_gguf_find(g, key) < 0) {
        if (def < n || !required_default) return SLM_OK;
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: missing, and the default %d is not below the %d tokens", name,
                        key, def, n);
    }
    int64_t v;
    if (!slm_gguf_get_i64(g, key, &v) || v < 0 || v >= n)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: not a token id below %d", name, key, n);
    *id = (int)v;
    return SLM_OK;
}

slm_status slm_vocab_key_flag(const slm_gguf *g, const char *name, const char *key, int *v, slm_err *err) {
    if (slm_gguf_find(g, key) >= 0 && !slm_gguf_get_bool(g, key, v))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: %s: not a bool", name, key);
    return SLM_OK;
}

const char *slm_vocab_shown(const char *s, char *buf, size_t cap) {
    size_t n = 0;
    for (; s && s[n] && n + 4 < cap && n < 40; n++)
        buf[n] = (unsigned char)s[n] >= 0x20 && (unsigned char)s[n] < 0x7f ? s[n] : '?';
    if (s && s[n]) buf[n++] = '.', buf[n++] = '.', buf[n++] = '.';
    buf[n] = 0;
    return buf;
}
