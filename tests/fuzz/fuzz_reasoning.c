/* libFuzzer target for the reply splitter (text/reasoning.h) and the chat
 * template kwargs reader (slm_tmpl_kwargs_check). The first byte picks the
 * format (bits 0-1: none, deepseek, harmony), whether the prompt opens the
 * thinking (bit 2) and the piece size (bits 3-7, 1..32 bytes); the rest is
 * the reply, fed in pieces of that size. Checks: no crash; every output
 * piece is non-empty and lies in the input's bytes (nothing is invented
 * but the blank line between harmony reasoning messages); format none
 * returns the input exactly; a second run fed whole gives the same split.
 * The whole input is also read as kwargs JSON. Not part of the default
 * build (tests/fuzz/run.sh builds it):
 *   clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined \
 *     -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Iinclude -Isrc \
 *     tests/fuzz/fuzz_reasoning.c src/text/reasoning.c ... -o fuzz_reasoning
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat_template.h"
#include "text/reasoning.h"

typedef struct out {
    char *s[2];
    size_t n[2];
} out;

static void put(void *ud, int kind, const char *s, size_t n) {
    out *o = ud;
    if (n == 0 || (kind != 0 && kind != 1)) abort();
    char *p = realloc(o->s[kind], o->n[kind] + n + 1);
    if (!p) abort();
    memcpy(p + o->n[kind], s, n);
    o->s[kind] = p;
    o->n[kind] += n;
}

static void split(int fmt, const char *prompt, const uint8_t *d, size_t n, size_t piece, out *o) {
    slm_reason r;
    memset(o, 0, sizeof *o);
    slm_reason_init(&r, fmt, prompt, put, o);
    for (size_t i = 0; i < n; i += piece) slm_reason_feed(&r, (const char *)d + i, n - i < piece ? n - i : piece);
    slm_reason_finish(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const int fmts[4] = {SLM_REASON_NONE, SLM_REASON_DEEPSEEK, SLM_REASON_HARMONY, SLM_REASON_GEMMA4};
    const int fmt = fmts[data[0] & 3];
    const char *prompt = data[0] & 4 ? (fmt == SLM_REASON_HARMONY  ? "<|channel|>analysis<|message|>"
                                        : fmt == SLM_REASON_GEMMA4 ? "<|turn>model\n<|channel>thought\n"
                                                                   : "<think>\n")
                                     : NULL;
    const size_t piece = 1 + (data[0] >> 3);
    out a, b;
    split(fmt, prompt, data + 1, size - 1, piece, &a);
    split(fmt, prompt, data + 1, size - 1, size, &b);
    for (int k = 0; k < 2; k++)
        if (a.n[k] != b.n[k] || (a.n[k] && memcmp(a.s[k], b.s[k], a.n[k]))) abort(); /* the split does not depend on pieces */
    if (fmt == SLM_REASON_NONE && (a.n[1] || a.n[0] != size - 1 || (a.n[0] && memcmp(a.s[0], data + 1, a.n[0])))) abort();
    if (fmt == SLM_REASON_DEEPSEEK && a.n[0] + a.n[1] > size - 1) abort();
    for (int k = 0; k < 2; k++) {
        free(a.s[k]);
        free(b.s[k]);
    }
    char *json = malloc(size + 1);
    if (!json) return 0;
    memcpy(json, data, size);
    json[size] = 0;
    slm_err err;
    if (!slm_tmpl_kwargs_check(json, &err) && (!err.status || !err.msg[0])) abort();
    free(json);
    return 0;
}
