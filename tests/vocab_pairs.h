/* The test pairs beside each ../shared/vocab/NAME.gguf (llama.cpp's
 * tokenizer tests): NAME.gguf.inp holds the texts, separated by
 * "\n__ggml_vocab_test__\n"; NAME.gguf.out one line of expected ids (no BOS)
 * per text. Used by test_bpe.c and test_synth.c. */
#ifndef SLM_TESTS_VOCAB_PAIRS_H
#define SLM_TESTS_VOCAB_PAIRS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "t.h"

#define VOCAB_PAIRS_SEP "\n__ggml_vocab_test__\n"
#define VOCAB_PAIRS_MAX_IDS 1024

/* Called per pair: the text (len bytes; NUL-terminated), its n expected ids;
 * returns 1 when the pair passes. */
typedef int (*vocab_pair_fn)(void *ud, const char *text, size_t len, const int32_t *ids, int n);

/* Runs fn over the pairs of vocab file `name` in folder dir; returns the
 * passes and sets *total (0 when the files are missing). */
static inline int vocab_pairs_at(const char *dir, const char *name, vocab_pair_fn fn, void *ud, int *total) {
    char p[2048];
    snprintf(p, sizeof p, "%s/%s.inp", dir, name);
    size_t il;
    char *inp = t_read_file(p, &il);
    snprintf(p, sizeof p, "%s/%s.out", dir, name);
    char *out = t_read_file(p, NULL);
    *total = 0;
    if (!inp || !out) {
        free(inp);
        free(out);
        return 0;
    }
    int pass = 0;
    char *pos = inp, *ol = out;
    while (pos < inp + il) {
        char *nx = strstr(pos, VOCAB_PAIRS_SEP);
        size_t n = nx ? (size_t)(nx - pos) : strlen(pos);
        char *eol = strchr(ol, '\n');
        if (!eol) break;
        *eol = 0;
        int32_t exp[VOCAB_PAIRS_MAX_IDS];
        int ne = 0;
        for (char *e = ol; *e && ne < VOCAB_PAIRS_MAX_IDS;) {
            while (*e == ' ') e++;
            if (!*e) break;
            exp[ne++] = (int32_t)strtol(e, &e, 10);
        }
        ol = eol + 1;
        const char keep = pos[n];
        pos[n] = 0;
        (*total)++;
        pass += fn(ud, pos, n, exp, ne);
        pos[n] = keep;
        if (!nx) break;
        pos = nx + strlen(VOCAB_PAIRS_SEP);
    }
    free(inp);
    free(out);
    return pass;
}

/* The pairs of ../shared/vocab/NAME (e.g. "ggml-vocab-gpt-2.gguf"). */
static inline int vocab_pairs(const char *name, vocab_pair_fn fn, void *ud, int *total) {
    return vocab_pairs_at(T_SHARED("vocab"), name, fn, ud, total);
}

#endif
