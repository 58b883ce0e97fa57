/* A llama2.c tokenizer.bin of n tokens "t0".."t<n-1>" (a blob stores a
 * tokenizer of the model's vocabulary size), for tests that make models. */
#ifndef SLM_TEST_TOK_BIN_H
#define SLM_TEST_TOK_BIN_H

#include <stdint.h>
#include <stdio.h>

static inline int write_tok(const char *path, int n) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int32_t maxlen = 8;
    fwrite(&maxlen, 4, 1, f);
    for (int i = 0; i < n; i++) {
        char b[16];
        int32_t len = (int32_t)snprintf(b, sizeof b, "t%d", i);
        float score = -(float)i;
        fwrite(&score, 4, 1, f);
        fwrite(&len, 4, 1, f);
        fwrite(b, 1, (size_t)len, f);
    }
    return fclose(f) == 0;
}

#endif
