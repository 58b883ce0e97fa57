/* libFuzzer target for the GBNF compiler and matcher and the JSON schema
 * converter (text/grammar.h). The first byte picks the mode:
 *   even: the rest up to the first 0x01 byte is grammar text, what follows
 *         is text to match. Checks: no crash; a refusal carries a message
 *         naming the line and column; when it compiles, matching the text
 *         whole, byte by byte, and cut in two at every eighth byte all
 *         agree (and agree with each piece's check); the mask over a small
 *         vocabulary equals checking each token alone;
 *   odd:  the rest is a JSON schema. Checks: a refusal has a message; what
 *         converts compiles, unless the compiler refuses a left-recursive
 *         $ref chain or a size limit. With bit 1 set too, the schema is a
 *         Gemma 4 call's arguments (slm_gemma4_schema_rules, nested at most
 *         1 + bits 2..4 deep, or 62 when those are all set) and the same
 *         checks hold.
 * Not part of the default build (tests/fuzz/run.sh builds it):
 *   clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined \
 *     -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -DSLM_HAVE_CJSON -Iinclude -Isrc \
 *     tests/fuzz/fuzz_grammar.c src/text/grammar_parse.c src/text/grammar_match.c \
 *     src/text/json_schema.c src/common/alloc.c src/common/status.c src/common/json.c -lcjson -o fuzz_grammar
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/grammar.h"

static const char *const k_tokens[] = {"a", "ab", "abc", "b", "\"", "{", "}", "[", "]", ",", ":", " ", "1", "12", "-",
                                       "true", "null", "x", "\xc3", "\xc3\xa9", "\xa9", "\xe2\x82\xac", "\n", "ba", ".e"};
enum { NTOK = sizeof k_tokens / sizeof *k_tokens };

static int accept_all(slm_gmatch *m, const char *s, size_t n) {
    slm_err err = {0};
    if (!n) return 1;
    slm_status st = slm_gmatch_accept(m, s, n, &err);
    if (st == SLM_OK) return 1;
    if (st == SLM_ERR_ARG) return 0;
    return -1; /* work limits */
}

static void grammar_mode(const uint8_t *d, size_t n) {
    size_t gl = 0;
    while (gl < n && d[gl] != 1) gl++;
    const char *text = (const char *)d + (gl < n ? gl + 1 : n);
    const size_t tl = gl < n ? n - gl - 1 : 0;
    slm_grammar *g = NULL;
    slm_err err = {0};
    if (slm_grammar_compile((const char *)d, gl, &g, &err)) {
        if (!strstr(err.msg, "grammar:") || g) abort();
        return;
    }
    slm_gmatch *m = NULL;
    if (slm_gmatch_new(g, &m, &err)) {
        if (!err.msg[0]) abort();
        slm_grammar_free(g);
        return;
    }
    /* whole, byte by byte, in two pieces */
    const int whole = accept_all(m, text, tl) == 1 ? slm_gmatch_can_end(m) : -1;
    slm_gmatch_reset(m);
    int bytes = 1;
    for (size_t i = 0; bytes == 1 && i < tl; i++) bytes = accept_all(m, text + i, 1);
    const int by = bytes == 1 ? slm_gmatch_can_end(m) : bytes == 0 ? -2 : -1;
    if (whole >= 0 && by >= 0 && whole != by) abort();
    for (size_t cut = 0; cut <= tl; cut += 8) {
        slm_gmatch_reset(m);
        int c1 = cut ? slm_gmatch_check(m, text, cut) : 1;
        int a1 = accept_all(m, text, cut);
        if (c1 >= 0 && a1 >= 0 && c1 != a1) abort();
        if (a1 != 1) continue;
        int c2 = tl > cut ? slm_gmatch_check(m, text + cut, tl - cut) : 1;
        int a2 = accept_all(m, text + cut, tl - cut);
        if (c2 >= 0 && a2 >= 0 && c2 != a2) abort();
        if (a2 == 1 && whole >= 0 && slm_gmatch_can_end(m) != whole) abort();
        if (a2 == 0 && whole >= 0) abort();
    }
    /* the mask after the text's first half */
    uint32_t len[NTOK];
    for (int i = 0; i < NTOK; i++) len[i] = (uint32_t)strlen(k_tokens[i]);
    slm_gvocab *v = NULL;
    if (slm_gvocab_new(NTOK, k_tokens, len, &v, &err) == SLM_OK) {
        slm_gmatch_reset(m);
        if (accept_all(m, text, tl / 2) == 1) {
            uint8_t allowed[NTOK];
            int count = slm_gmatch_mask(m, v, allowed);
            if (count >= 0) {
                int sum = 0;
                for (int i = 0; i < NTOK; i++) {
                    int c = slm_gmatch_check(m, k_tokens[i], len[i]);
                    if (c >= 0 && c != allowed[i]) abort();
                    sum += allowed[i];
                }
                if (sum != count) abort();
            }
        }
        slm_gvocab_free(v);
    }
    slm_gmatch_free(m);
    slm_grammar_free(g);
}

/* A grammar a converter wrote compiles, unless the compiler refuses a
 * left-recursive $ref chain or a size limit. */
static void must_compile(const char *text, const char *what) {
    slm_err err = {0};
    slm_grammar *g = NULL;
    if (slm_grammar_compile(text, strlen(text), &g, &err) && !strstr(err.msg, "left-recursive") &&
        !strstr(err.msg, "more than") && err.status != SLM_ERR_NOMEM) {
        fprintf(stderr, "%s does not compile: %s\n%s\n", what, err.msg, text);
        abort();
    }
    slm_grammar_free(g);
}

static void schema_mode(const uint8_t *d, size_t n) {
    char *text = NULL;
    slm_err err = {0};
    if (slm_json_schema_to_grammar((const char *)d, n, &text, &err)) {
        if (!err.msg[0] || text) abort();
        return;
    }
    must_compile(text, "the converter wrote a grammar");
    slm_xfree(text);
}

static void gemma_mode(const uint8_t *d, size_t n, int depth) {
    char *schema = malloc(n + 1), *rules = NULL;
    if (!schema) return;
    memcpy(schema, d, n);
    schema[n] = 0;
    const char *const sch[1] = {schema}, *const rule[1] = {"args"};
    slm_err err = {0};
    int bad = -1;
    const slm_status st = slm_gemma4_schema_rules(1, sch, rule, depth, &rules, &bad, &err);
    free(schema);
    if (st) {
        if (!err.msg[0] || rules || bad != 0) abort();
        return;
    }
    const size_t len = strlen(rules) + 32;
    char *text = malloc(len);
    if (!text) abort();
    snprintf(text, len, "root ::= args\n%s", rules);
    slm_xfree(rules);
    must_compile(text, "the Gemma 4 rules");
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if ((data[0] & 3) == 3) gemma_mode(data + 1, size - 1, (data[0] >> 2 & 7) == 7 ? 62 : 1 + (data[0] >> 2 & 7));
    else if (data[0] & 1) schema_mode(data + 1, size - 1);
    else grammar_mode(data + 1, size - 1);
    return 0;
}
