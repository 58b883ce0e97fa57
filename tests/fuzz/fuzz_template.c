/* libFuzzer target for the chat-template interpreter: the input is template
 * text (any bytes), parsed and, when it parses, rendered over a fixed
 * conversation with a small budget. The first byte (when the input starts
 * with one below 0x20) picks the variant: bit 0 add_generation_prompt, bit 1
 * no system message, bit 2 a fixed date for strftime_now, bit 3 an empty
 * conversation. Checks: no crash, no leak, an error always has a status and a
 * message, a rendering is NUL-terminated at its length. Seeds: the templates
 * in ../shared/templates (tests/fuzz/run.sh). Not part of the default build:
 *   clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined \
 *     -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Iinclude -Isrc \
 *     tests/fuzz/fuzz_template.c src/text/chat_template.c src/text/jinja_*.c \
 *     src/common/[a-z]*.c -lm -o fuzz_template
 *   ./fuzz_template -max_total_time=60 -max_len=16384 corpus/
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat_template.h"

static const slm_chat_msg CONV[] = {
    {"system", "You are a helpful assistant.", NULL, NULL, NULL, NULL},
    {"user", "Hello! <think>x</think> caf\xc3\xa9", NULL, NULL, NULL, NULL},
    {"assistant", " Hi there.\n\n", NULL, NULL, NULL, NULL},
    {"user", "How are you?", NULL, NULL, NULL, NULL},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    unsigned mode = 0;
    if (size && data[0] < 0x20) {
        mode = data[0];
        data++;
        size--;
    }
    char *src = malloc(size + 1);
    if (!src) return 0;
    memcpy(src, data, size);
    src[size] = 0; /* a NUL inside ends the template, as for a C string */
    slm_err err = {0};
    slm_tmpl *t = slm_tmpl_parse(src, &err);
    if (!t) {
        if (err.status == SLM_OK || !err.msg[0]) abort();
        free(src);
        return 0;
    }
    slm_tmpl_vars v = {.bos_token = "<s>", .eos_token = "</s>"};
    v.add_generation_prompt = mode & 1;
    if (mode & 4) v.date_string = "26 Jul 2024";
    v.budget = 4u << 20; /* fast executions; the limit itself is what is fuzzed */
    v.time_limit_ms = 2000;
    const slm_chat_msg *m = mode & 2 ? CONV + 1 : CONV;
    int n = mode & 8 ? 0 : mode & 2 ? 3 : 4;
    char *out = slm_tmpl_render(t, m, n, &v, &err);
    if (out) {
        if (strlen(out) > (16u << 20)) abort();
        slm_xfree(out);
    } else if (err.status == SLM_OK || !err.msg[0]) {
        abort();
    }
    slm_tmpl_free(t);
    free(src);
    return 0;
}
